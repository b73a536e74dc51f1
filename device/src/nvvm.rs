//! The NVVM intrinsics behind the warp and block collectives, the counting barriers, the
//! special registers and the tensor cores' `mma.sync` (device only).
//!
//! Collectives go through these LLVM intrinsics rather than `asm!`: LLVM knows them as
//! *convergent* (it never moves them into or out of a branch, so the set of threads that
//! reaches them is the one the source says), and it can schedule around them. Every name is
//! checked by compiling: an unknown `llvm.*` name, or a signature that is not LLVM's, fails
//! the kernel build.

use core::arch::nvptx::f16x2;

// The `match.all` and `mma` intrinsics return LLVM aggregates (`{i32, i1}`, `{float, float,
// float, float}`, …), which rustc maps to tuples for `link_llvm_intrinsics` declarations, and
// the `f16` `mma` forms take the vector `<2 x half>` (`simd_ffi`); none crosses a C ABI.
// rustc checks every declaration against LLVM's signature of the intrinsic.
#[allow(improper_ctypes)]
unsafe extern "C" {
    // Shuffles: (mask, value, lane/delta, clamp) -> value.
    #[link_name = "llvm.nvvm.shfl.sync.idx.i32"]
    pub fn shfl_sync_idx_i32(mask: u32, v: u32, lane: u32, c: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.up.i32"]
    pub fn shfl_sync_up_i32(mask: u32, v: u32, delta: u32, c: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.down.i32"]
    pub fn shfl_sync_down_i32(mask: u32, v: u32, delta: u32, c: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.bfly.i32"]
    pub fn shfl_sync_bfly_i32(mask: u32, v: u32, lane_mask: u32, c: u32) -> u32;

    // Votes.
    #[link_name = "llvm.nvvm.vote.all.sync"]
    pub fn vote_all_sync(mask: u32, pred: bool) -> bool;
    #[link_name = "llvm.nvvm.vote.any.sync"]
    pub fn vote_any_sync(mask: u32, pred: bool) -> bool;
    #[link_name = "llvm.nvvm.vote.ballot.sync"]
    pub fn vote_ballot_sync(mask: u32, pred: bool) -> u32;

    // Match: lanes holding the same value.
    #[link_name = "llvm.nvvm.match.any.sync.i32"]
    pub fn match_any_sync_i32(mask: u32, v: u32) -> u32;
    #[link_name = "llvm.nvvm.match.any.sync.i64"]
    pub fn match_any_sync_i64(mask: u32, v: u64) -> u32;
    #[link_name = "llvm.nvvm.match.all.sync.i32p"]
    pub fn match_all_sync_i32p(mask: u32, v: u32) -> (u32, bool);
    #[link_name = "llvm.nvvm.match.all.sync.i64p"]
    pub fn match_all_sync_i64p(mask: u32, v: u64) -> (u32, bool);

    // redux.sync (sm_80): (value, mask) -> result in every lane of mask.
    #[link_name = "llvm.nvvm.redux.sync.add"]
    pub fn redux_sync_add(v: u32, mask: u32) -> u32;
    #[link_name = "llvm.nvvm.redux.sync.min"]
    pub fn redux_sync_min(v: i32, mask: u32) -> i32;
    #[link_name = "llvm.nvvm.redux.sync.max"]
    pub fn redux_sync_max(v: i32, mask: u32) -> i32;
    #[link_name = "llvm.nvvm.redux.sync.umin"]
    pub fn redux_sync_umin(v: u32, mask: u32) -> u32;
    #[link_name = "llvm.nvvm.redux.sync.umax"]
    pub fn redux_sync_umax(v: u32, mask: u32) -> u32;
    #[link_name = "llvm.nvvm.redux.sync.and"]
    pub fn redux_sync_and(v: u32, mask: u32) -> u32;
    #[link_name = "llvm.nvvm.redux.sync.or"]
    pub fn redux_sync_or(v: u32, mask: u32) -> u32;
    #[link_name = "llvm.nvvm.redux.sync.xor"]
    pub fn redux_sync_xor(v: u32, mask: u32) -> u32;

    // Warp barrier and the active mask.
    #[link_name = "llvm.nvvm.bar.warp.sync"]
    pub fn bar_warp_sync(mask: u32);
    #[link_name = "llvm.nvvm.activemask"]
    pub fn activemask() -> u32;

    // Block barriers that also reduce a predicate (`bar.red.{popc,and,or}`).
    #[link_name = "llvm.nvvm.barrier0.popc"]
    pub fn barrier0_popc(pred: i32) -> i32;
    #[link_name = "llvm.nvvm.barrier0.and"]
    pub fn barrier0_and(pred: i32) -> i32;
    #[link_name = "llvm.nvvm.barrier0.or"]
    pub fn barrier0_or(pred: i32) -> i32;
    // A barrier of a counted group of warps (`bar.sync id, count`).
    #[link_name = "llvm.nvvm.barrier.cta.sync.aligned.count"]
    pub fn barrier_sync_count(id: u32, count: u32);

    // Special registers and sleep.
    #[link_name = "llvm.nvvm.read.ptx.sreg.laneid"]
    pub fn laneid() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.lanemask.lt"]
    pub fn lanemask_lt() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.lanemask.le"]
    pub fn lanemask_le() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.lanemask.gt"]
    pub fn lanemask_gt() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.lanemask.ge"]
    pub fn lanemask_ge() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.clock64"]
    pub fn clock64() -> u64;
    #[link_name = "llvm.nvvm.read.ptx.sreg.globaltimer"]
    pub fn globaltimer() -> u64;
    #[link_name = "llvm.nvvm.nanosleep"]
    pub fn nanosleep(ns: u32);

    // Warp-level matrix multiply-accumulate (`mma.sync.aligned`, sm_80): (A regs, B regs, C
    // regs) -> D regs. Unlike the collectives above, LLVM declares these `memory(none)`
    // without `convergent` (nor `willreturn` or `speculatable`): see `mma`'s module docs. The
    // inputs of the `bf16`, `tf32` and 8-bit forms are `i32` registers; the `f16` forms take
    // LLVM's `<2 x half>`, `f16x2` here.
    #[link_name = "llvm.nvvm.mma.m16n8k16.row.col.bf16"]
    pub fn mma_m16n8k16_bf16(
        a0: u32,
        a1: u32,
        a2: u32,
        a3: u32,
        b0: u32,
        b1: u32,
        c0: f32,
        c1: f32,
        c2: f32,
        c3: f32,
    ) -> (f32, f32, f32, f32);
    #[link_name = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"]
    pub fn mma_m16n8k16_f16_f32(
        a0: f16x2,
        a1: f16x2,
        a2: f16x2,
        a3: f16x2,
        b0: f16x2,
        b1: f16x2,
        c0: f32,
        c1: f32,
        c2: f32,
        c3: f32,
    ) -> (f32, f32, f32, f32);
    #[link_name = "llvm.nvvm.mma.m16n8k16.row.col.f16.f16"]
    pub fn mma_m16n8k16_f16_f16(
        a0: f16x2,
        a1: f16x2,
        a2: f16x2,
        a3: f16x2,
        b0: f16x2,
        b1: f16x2,
        c0: f16x2,
        c1: f16x2,
    ) -> (f16x2, f16x2);
    #[link_name = "llvm.nvvm.mma.m16n8k8.row.col.tf32"]
    pub fn mma_m16n8k8_tf32(
        a0: u32,
        a1: u32,
        a2: u32,
        a3: u32,
        b0: u32,
        b1: u32,
        c0: f32,
        c1: f32,
        c2: f32,
        c3: f32,
    ) -> (f32, f32, f32, f32);
    #[link_name = "llvm.nvvm.mma.m16n8k32.row.col.s8"]
    pub fn mma_m16n8k32_s8(
        a0: u32,
        a1: u32,
        a2: u32,
        a3: u32,
        b0: u32,
        b1: u32,
        c0: i32,
        c1: i32,
        c2: i32,
        c3: i32,
    ) -> (i32, i32, i32, i32);
    #[link_name = "llvm.nvvm.mma.m16n8k32.row.col.u8"]
    pub fn mma_m16n8k32_u8(
        a0: u32,
        a1: u32,
        a2: u32,
        a3: u32,
        b0: u32,
        b1: u32,
        c0: i32,
        c1: i32,
        c2: i32,
        c3: i32,
    ) -> (i32, i32, i32, i32);
    #[link_name = "llvm.nvvm.mma.m16n8k32.row.col.s8.u8"]
    pub fn mma_m16n8k32_s8_u8(
        a0: u32,
        a1: u32,
        a2: u32,
        a3: u32,
        b0: u32,
        b1: u32,
        c0: i32,
        c1: i32,
        c2: i32,
        c3: i32,
    ) -> (i32, i32, i32, i32);
    #[link_name = "llvm.nvvm.mma.m16n8k32.row.col.u8.s8"]
    pub fn mma_m16n8k32_u8_s8(
        a0: u32,
        a1: u32,
        a2: u32,
        a3: u32,
        b0: u32,
        b1: u32,
        c0: i32,
        c1: i32,
        c2: i32,
        c3: i32,
    ) -> (i32, i32, i32, i32);
    #[link_name = "llvm.nvvm.mma.m8n8k4.row.col.f64"]
    pub fn mma_m8n8k4_f64(a: f64, b: f64, c0: f64, c1: f64) -> (f64, f64);

    // `cvt.rna.tf32.f32` (sm_80): the TF32 bit pattern in an `i32`.
    #[link_name = "llvm.nvvm.f2tf32.rna"]
    pub fn f2tf32_rna(x: f32) -> u32;
}
