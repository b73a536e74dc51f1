//! The NVVM intrinsics behind the warp and block collectives, the counting barriers and the
//! special registers (device only).
//!
//! Collectives go through these LLVM intrinsics rather than `asm!`: LLVM knows them as
//! *convergent* (it never moves them into or out of a branch, so the set of threads that
//! reaches them is the one the source says), and it can schedule around them. Every name is
//! checked by compiling: an unknown `llvm.*` name fails the kernel build.

// The `match.all` intrinsics return the LLVM aggregate `{i32, i1}`, which rustc maps to a
// tuple for `link_llvm_intrinsics` declarations; it never crosses a C ABI.
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
}
