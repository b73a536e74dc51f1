//! `matmul`: `C = α·A·B + β·C` in `f32` on CUDA cores (no tensor cores), for strided 2-D views:
//! the "SGEMM" of BLAS, TF32 off. One kernel, `matmul_f32`, built for sm_80 and sm_90 (its
//! SASS for sm_90 is the same as for sm_90a: no sm_90a instruction would help it).
//!
//! # Schedule (blocks of 256 or 128 threads)
//!
//! Each *group* of threads — a 256-thread block, or 128 threads (half such a block, or a
//! 128-thread block) — computes tiles of `C` (a grid-stride loop over tiles, so any grid is
//! correct), walking `K` in tiles of 8, with its own ring of shared stages and its own
//! barrier. Two shapes (`shape::Shape`):
//!
//! * `Wide`: 256-thread groups, 128×256 tiles — 256-thread blocks when an operand is
//!   contiguous along its outer axis (`a @ b`, row-major);
//! * `Square`: 128-thread groups, 128×128 tiles — cuBLAS's shape when both operands are
//!   contiguous along `k` (`x @ w.T`): a 256-thread block runs two groups, each with its own
//!   tiles, ring and barrier (`bar.sync 1 + group, 128`), so that neither waits at the other's
//!   barrier; 128-thread blocks run one group, in every layout. The groups of a block take
//!   consecutive tiles, in a loop whose bounds are the block's (every barrier reached by
//!   every warp: the builder's PTX check holds counted barriers to the block barrier's
//!   rule); a group past the last tile computes zeros and stores nothing.
//!
//! In both:
//!
//! * **Register blocking**: each thread accumulates an 8×16 sub-tile of `C` (128 `f32`), as
//!   two 4-row groups by four 4-column groups; per `k` it reads 8 values of `A` and 16 of `B`
//!   from shared memory with six 16-byte loads (`ld.shared.v4`) and issues 128 fused
//!   multiply-adds (`fma.rn.f32`, written out: the crate is not built with FMA contraction).
//!   With an 8×8 sub-tile the shared loads (one wavefront each) would keep the shared-memory
//!   pipe as busy as the FMA pipe; 8×16 leaves it a margin.
//! * **Warp layout**: `Wide`: 4×2 warps of 4×8 lanes, 32×128 each; `Square`: 2×2 warps of
//!   8×4 lanes, 64×64 each. Either way each of a warp's shared loads touches at most 8
//!   consecutive 16-byte words — one wavefront, no bank conflict.
//! * **Shared tiles**: `A` stored transposed (`As[k][m]`) and `B` as is (`Bs[k][n]`), rows
//!   padded by 4 floats; three stages, filled by `cp.async` two tiles ahead, one barrier per
//!   tile — no register staging and no shared stores in the loop. The copies are 4 bytes each,
//!   so one code path serves any strides: a warp copies 32 consecutive values of a `k` row, or
//!   8 `k` of 4 rows, whichever axis the operand is contiguous along; both write 32 distinct
//!   banks per warp (the pitches are 4 modulo 32 floats). They go through L1 (`.ca`): the
//!   `k`-contiguous operand's rows are read one sector per row per warp, the sector's other
//!   values from L1 by the next copies. The rings live in the launch's dynamic shared memory
//!   ([`MATMUL_SMEM`], declared with `shared_bytes`: two `Square` rings, 49.5 KiB).
//! * **Unrolled `k`**: the 8 `k` of a tile are unrolled, each `k`'s fragments read while the
//!   previous `k`'s FMAs run (two fragment sets in registers).
//! * **Epilogue**: `C` is written with 16-byte stores where its rows allow; `β = 0` never reads
//!   `C` (BLAS semantics: NaN in `C` is overwritten).
//!
//! The loop has no branch but its back edge, so that ptxas schedules the copies and the
//! shared loads among the FMAs (a branch ends a basic block, and ptxas schedules within one):
//! * the `k` tiles start `K mod 8` before the first `k` — tile 0 holds the remainder, its
//!   first rows zero-filled, every later tile is whole (the zeros come first, so each element
//!   is still its K FMAs in `k` order from +0) — and the copies of a tile are predicated by a
//!   mask of the rows inside the operand, fixed for a tile of `C`;
//! * past the last tile the copies zero-fill free stages instead of being skipped, and the
//!   next tile's first fragments are read unconditionally (zeros, unused); every copy is
//!   complete before the epilogue;
//! * the copies are issued at the start of a tile's step, before its shared loads (ptxas
//!   cannot tell a copy's shared destination from a load's source, so loads before the copies
//!   in program order would be bunched ahead of them);
//! * the fragments are read by `ld.shared.v4` in `asm!` (LLVM otherwise merges the loads
//!   before the loop and at its end into scalar loads through a phi of addresses).
//!
//! The loop's SASS (`bench/sass_loop.py`) is cuBLAS's shape: `Wide` 1155 instructions per
//! tile (cuBLAS 1154), stall counts summing to 1189–1212 (1161); `Square` 1174–1175 (four
//! more copies per thread and `k` tile), 1199 for `x @ w.T` (1238–1266 in the other
//! layouts, which only 128-thread blocks run); no register-bank-conflicting FMA; 247
//! registers on sm_90 (242 on sm_80), no spill. ptxas's schedule of these loops moves with
//! its register budget: the same PTX without `.minnctapersm 1` (`min_blocks = 1`) takes 239
//! registers and schedules `a @ b`'s loop in 1217 cycles, `x @ w.T`'s in 1250 — measured
//! on the H200 at 8192³, 0.946× / 0.911× cuBLAS against 0.952× / 0.924× with it
//! (bench/results/2026-12-05-gqa.md). On the H200, `Wide` alone: 0.955× cuBLAS's SGEMM for
//! `a @ b` at 4096³ and 0.875× for `x @ w.T` (both operands contiguous along `k`, whose copies
//! crowd the shared-memory pipe; BENCHMARKS.md, SGEMM); two `Square` groups: 0.90–0.93× for
//! `x @ w.T` (bench/results/2026-12-05-sgemm-groups.md). The schedules before it: the same
//! loop with a whole-tile branch around the copies (sm_90a only, 1194 instructions and
//! 1399–1442 cycles; ncu: 0.20 wait stalls per instruction; 0.84–0.88× cuBLAS's SGEMM at
//! 4096³ and 8192³), and register-staged double buffering with 16-byte global loads
//! (0.80–0.81×).
//!
//! Launch bounds: blocks of at most 256 threads (`max_threads = 256`, PTX `.maxntid`; larger
//! blocks are refused by the launcher), which lets ptxas give each thread the registers the
//! 8×16 accumulators and two fragment sets need, without spills: one 256-thread block, or two
//! 128-thread blocks, per SM (`min_blocks = 1` states the one block ptxas may plan for).
//! Other block sizes run a simple correct loop (one thread per element of `C`), as does a `K`
//! of more than `u32::MAX` tiles.
//!
//! # Layers
//!
//! 1. `operands`, `shape` — the operands as the schedules see them; the tile shapes.
//! 2. `tiles` — the tiled schedule.

#[cfg(target_arch = "nvptx64")]
mod operands;
mod shape;
#[cfg(target_arch = "nvptx64")]
mod tiles;

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::{kernel, View, ViewMut};
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{shared::dynamic_shared, shared::shared_addr_of, space::global};
#[cfg(target_arch = "nvptx64")]
use operands::{Operand, Out};
pub use shape::MATMUL_SMEM;
#[cfg(target_arch = "nvptx64")]
use shape::{Square, Wide, BK};
#[cfg(target_arch = "nvptx64")]
use tiles::{tiles, BY_K, BY_OUTER};

/// The simple loop, for any block size: one thread per element of `C`, a plain dot product
/// (the same K fused multiply-adds in `k` order as the tiles). A call, not inlined, its
/// arguments scalars (aggregates would pass through local memory): inlined, its registers
/// weighed on the tiled schedule's allocation and ptxas spilled the kernel.
///
/// # Safety
///
/// Kernel-launch context; the pointers, strides and `[M, N, K]` describe `A` (M×K), `B` (K×N)
/// and `C` (M×N), and `C` overlaps neither.
#[cfg(target_arch = "nvptx64")]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn simple_call(
    pa: *const f32,
    sa0: isize,
    sa1: isize,
    pb: *const f32,
    sb0: isize,
    sb1: isize,
    pc: *mut f32,
    sc0: isize,
    sc1: isize,
    m: usize,
    n: usize,
    kk: usize,
    alpha: f32,
    beta: f32,
) {
    // The pointers arrive as scalars: marked global again, so that the accesses are
    // `ld.global`/`st.global` (the entry's marks do not cross the call).
    // SAFETY: the views' data pointers, device memory (the launcher's checks).
    let (pa, pb, pc) = unsafe { (global(pa.cast_mut()), global(pb.cast_mut()), global(pc)) };
    let (tid, threads) = thread_rank();
    let mut e = tid;
    while e < m * n {
        let (i, j) = (e / n, e % n);
        let mut s = 0.0f32;
        for k in 0..kk {
            // SAFETY: i < m, j < n, k < kk: in-bounds elements.
            unsafe {
                s = fma(
                    pa.offset(i as isize * sa0 + k as isize * sa1).read(),
                    pb.offset(k as isize * sb0 + j as isize * sb1).read(),
                    s,
                );
            }
        }
        // SAFETY: (i, j) in bounds; one thread per element; β = 0 does not read it.
        unsafe {
            let p = pc.offset(i as isize * sc0 + j as isize * sc1);
            p.write(if beta == 0.0 {
                alpha * s
            } else {
                fma(alpha, s, beta * p.read())
            });
        }
        e += threads;
    }
}

/// `c = alpha · a @ b + beta · c` in `f32` (no tensor cores; the "SGEMM" of BLAS, TF32 off).
///
/// `a`: M×K, `b`: K×N, `c`: M×N, each a 2-D view with any strides (the tiles of `a` and `b`
/// are copied by 4-byte `cp.async`, along whichever axis is contiguous; `c` is written with
/// 16-byte stores where its rows allow); any M, N, K (K = 0 gives `β·c`).
/// `β = 0` never reads `c`. `c` must overlap neither input. Refused: inner dimensions that
/// differ, a `c` of the wrong shape. Accuracy: each element is a sequence of K fused
/// multiply-adds in `k` order (error ≲ K·ε·Σ|a||b|), then `α·s + β·c` with one more FMA.
/// Blocks of 256 threads (the automatic block) take the tiled schedule, one 128×256 tile of
/// `c` per block at a time (automatic grid: one block per tile) through three shared stages —
/// or, when both `a` and `b` are contiguous along K (`x @ w.T`), two groups of 128 threads
/// with 128×128 tiles each; 128-thread blocks run one such group; other blocks a simple loop;
/// larger blocks are refused (`max_threads = 256`). Every launch gets [`MATMUL_SMEM`] bytes of
/// dynamic shared memory (a launch asking for less is refused). Built for sm_80 and sm_90
/// (every GPU from the A100 on).
#[kernel(family = "matmul", items_per_thread = 128, max_threads = 256, min_blocks = 1,
         dynamic_shared = u8,
         shared_bytes = MATMUL_SMEM,
         require(a.shape[1] == b.shape[0], "the inner dimensions of a and b must agree"),
         require(c.shape[0] == a.shape[0], "c must have a's row count"),
         require(c.shape[1] == b.shape[1], "c must have b's column count"),
         require(c.ptr() != a.ptr(), "c must not be a"),
         require(c.ptr() != b.ptr(), "c must not be b"))]
pub unsafe fn matmul_f32(
    a: View<f32, 2>,
    b: View<f32, 2>,
    c: ViewMut<f32, 2>,
    alpha: f32,
    beta: f32,
) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as a kernel over host-validated views whose shapes agree.
    unsafe {
        let (opa, opb) = Operand::of(&a, &b);
        let cv = Out::new(c, alpha, beta);
        // Blocks of other than 256 or 128 threads, and K beyond 32-bit tile counts: the simple
        // loop (on the same pointers, strides and extents: `A`'s are (outer, k), `B`'s
        // (k, outer)).
        let threads = thread::block_threads();
        if (threads != 256 && threads != 128) || opa.k.div_ceil(BK) > u32::MAX as usize {
            let [sc0, sc1] = cv.s;
            return simple_call(
                opa.ptr,
                opa.so,
                opa.sk,
                opb.ptr,
                opb.sk,
                opb.so,
                cv.c.as_mut_ptr(),
                sc0,
                sc1,
                opa.outer,
                opb.outer,
                opa.k,
                alpha,
                beta,
            );
        }
        let smem = dynamic_shared::<u8>();
        // Launched with too little shared memory (the launchers give every launch
        // MATMUL_SMEM): abort, location recorded.
        ferrocuda_device::device_assert!(smem.len() >= MATMUL_SMEM as usize);
        let smem = shared_addr_of(smem.as_mut_ptr());
        // 256-thread blocks: one 128×256 tile at a time, or — both operands contiguous along
        // `k`, cuBLAS's choice there — two groups of 128 threads, each its own 128×128 tiles,
        // ring and barrier; 128-thread blocks: one such group.
        match (opa.so == 1, opb.so == 1, threads == 256) {
            (false, true, true) => tiles::<Wide, BY_K, BY_OUTER>(opa, opb, cv, smem),
            (true, true, true) => tiles::<Wide, BY_OUTER, BY_OUTER>(opa, opb, cv, smem),
            (true, false, true) => tiles::<Wide, BY_OUTER, BY_K>(opa, opb, cv, smem),
            (false, true, false) => tiles::<Square, BY_K, BY_OUTER>(opa, opb, cv, smem),
            (true, true, false) => tiles::<Square, BY_OUTER, BY_OUTER>(opa, opb, cv, smem),
            (true, false, false) => tiles::<Square, BY_OUTER, BY_K>(opa, opb, cv, smem),
            (false, false, _) => tiles::<Square, BY_K, BY_K>(opa, opb, cv, smem),
        }
    }
}
