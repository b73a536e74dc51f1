//! `linear` on every GPU from sm_80 (A100 on): `out = x · wᵀ` with bf16 inputs and f32
//! accumulation on the warp-level tensor cores (`mma.sync`), for 2-D views of any strides —
//! the family's portable members beside the sm_90a kernels of `linear.rs`. `x` is (M, K),
//! `w` is (N, K) (PyTorch's `F.linear` weight), `out` is (M, N).
//!
//! | kernel | out | where it runs |
//! | --- | --- | --- |
//! | `linear_bf16_f32` | `f32` | sm_80 and newer; on sm_90 when `linear_bf16_f32_sm90` cannot take the arrays |
//! | `linear_bf16` | `bf16` (the f32 sum rounded once, to nearest even) | the same, beside the sm_90a bf16-output kernel |
//!
//! The launchers choose by the one selection rule (`launch::select`): on an H100 the sm_90a
//! kernel runs whenever its TMA tensor maps take `x` and `w` (unit inner stride, rows a
//! multiple of 16 bytes apart, 16-byte aligned, not empty), this one otherwise (K not a
//! multiple of 8, a column slice, a transposed operand, an empty array); on sm_80 and sm_89
//! only this one runs.
//!
//! # Schedule (blocks of 256 threads, 8 warps; 80 KiB of dynamic shared memory)
//!
//! * **Tiles**: a block computes 128 × 128 tiles of `out`, walking K in steps of 32; the tiles
//!   are dealt out grid-stride (block `b` takes tiles `b`, `b + grid`, …; the automatic grid is
//!   one resident wave), M fastest, so the blocks running together share the tiles of `w`.
//! * **Warps**: 2 (M) × 4 (N) warps, each computing 64 × 32 of the tile as 4 × 4
//!   `m16n8k16` accumulators (`Acc16x8F32`: 64 f32 registers per thread). Per 16 of K a warp
//!   loads 4 A fragments (`ldmatrix.x4`: a 16 × 16 block of its `x` rows) and 4 B fragments
//!   (two `ldmatrix.x4`, each the fragments of two 8-row groups of `w`: `w`'s tile is N × K,
//!   i.e. B column-major, which the non-transposing `ldmatrix` turns into the `.col` operand)
//!   and issues 16 `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`.
//! * **Shared memory**: 4 stages (`cp_async::Pipeline<4>`, one barrier per K step), each a
//!   128 × 32 tile of `x` and one of `w`, rows of 32 bf16 padded to 40 (80 bytes): the 8 rows
//!   each `ldmatrix` phase reads start 20 words apart and cover the 32 banks once, so the
//!   fragment loads are free of bank conflicts.
//! * **Global loads**: where an operand's rows are contiguous and 16-byte aligned (unit stride
//!   along K, K and the row stride multiples of 8 elements, a 16-byte aligned base), each
//!   thread issues two 16-byte `cp.async.cg` per operand and stage; the chunks past K and the
//!   rows past M or N are zero-filled by the copy itself (`src-size` 0: every chunk is wholly
//!   inside or wholly outside, so no copy reads part of one), so partial tiles need no other
//!   code. Otherwise (K not a multiple of 8, a column slice at an odd
//!   offset, a transposed operand) each thread loads 16 elements per operand and stage with
//!   plain loads — pairs along K, or along the rows when the rows are the closer axis in
//!   memory, so that a warp's loads stay coalesced — all 16 in flight before the first
//!   store, predicated on the operand's bounds — and stores them to the stage (zeros outside
//!   the operand). Each operand takes its own path (four instances of the loop).
//! * **Epilogue**: each thread holds rows `g`, `g + 8` and column pairs `2t, 2t + 1` of each
//!   accumulator (`g = lane / 4`, `t = lane % 4`) and writes the pairs inside `out` — one
//!   8-byte (f32) or 4-byte (bf16) store per pair when `out` has unit column stride and
//!   aligned pairs, element stores otherwise.
//!
//! Numerics: every product of two bf16 is exact in f32; the tensor cores add in f32 in an
//! order of their own — each element is within `K · 2⁻²³ · Σ|xw|` of the exact sum (plus, for
//! `linear_bf16`, the final rounding: `2⁻⁸` of the value). K = 0 gives zeros.
//!
//! Launch bounds: `block = 256` (`.reqntid`: the warp layout is built for 8 warps) and
//! `min_blocks = 2` (`.minnctapersm 2`): two blocks per SM on the A100 (2 × 80 KiB of its
//! 164 KiB of shared memory) and the H100, which caps ptxas at 128 registers per thread. The
//! 64 accumulators, the fragments (ptxas keeps both 16-wide K steps' in flight: up to 48
//! registers) and the copy addresses fit under that cap without a spill or a stack (the PTX
//! checks fail a build whose kernels spill). That is why indices are 32-bit (the kernels
//! require extents below 2³¹, offsets stay 64-bit): with 64-bit tile and K indices ptxas
//! spilled. A caller's grid of any size is correct; the block must be 256 threads.

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::{kernel, View, ViewMut};

/// Block tile rows (M) and columns (N).
const BM: usize = 128;
/// K per stage.
const BK: usize = 32;
/// Bytes between two rows of a shared tile: 32 bf16 and 8 of padding.
const ROW_BYTES: usize = (BK + 8) * 2;
/// Bytes of one operand's tile in one stage.
const TILE_BYTES: usize = BM * ROW_BYTES;
/// Bytes of one stage: the `x` tile, then the `w` tile.
const STAGE_BYTES: usize = 2 * TILE_BYTES;
/// Pipeline stages.
const STAGES: usize = 4;

/// Dynamic shared memory a launch of the portable `linear` kernels needs: 4 stages of a
/// 128 × 32 tile of `x` and one of `w`, rows padded to 80 bytes (80 KiB).
pub const LINEAR_SM80_SMEM: u32 = (STAGES * STAGE_BYTES) as u32;

/// `out = x · wᵀ` (f32): `x` (M, K), `w` (N, K), `out` (M, N) bf16/bf16/f32 views of any
/// strides, any M, N, K. Accumulates in f32 on the tensor cores (`mma.sync`, sm_80 and newer):
/// each element is the sum of K exact bf16 products, added in an order the hardware chooses
/// (error ≲ K·2⁻²³·Σ|xw|). K = 0 gives zeros. The family launcher runs it where
/// `linear_bf16_f32_sm90` cannot (a GPU other than sm_90, or arrays TMA cannot read); see
/// the module documentation for the schedule.
#[kernel(family = "linear", block = 256, min_blocks = 2, dynamic_shared = u8,
         shared_bytes = LINEAR_SM80_SMEM,
         require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
         require(out.shape[0] == x.shape[0], "out must have x's row count"),
         require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"),
         require(x.shape[0] < 2147483648, "x must have fewer than 2^31 rows"),
         require(x.shape[1] < 2147483648, "x and w must have fewer than 2^31 columns"),
         require(w.shape[0] < 2147483648, "w must have fewer than 2^31 rows"))]
pub unsafe fn linear_bf16_f32(x: View<bf16, 2>, w: View<bf16, 2>, out: ViewMut<f32, 2>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as a kernel with the block and shared memory it declares, over
    // host-validated views whose shapes agree.
    unsafe {
        gpu::linear(x, w, out, crate::epilogue::Plain)
    }
}

/// `out = x · wᵀ` rounded to bf16: as [`linear_bf16_f32`] (f32 accumulation), each element
/// rounded once to the nearest bf16 (ties to even) when stored — within
/// `K·2⁻²³·Σ|xw| + 2⁻⁸·|x·w|` of the exact value. `out` must be neither `x` nor `w` (a block
/// reads rows of them after other blocks wrote theirs).
#[kernel(family = "linear", block = 256, min_blocks = 2, dynamic_shared = u8,
         shared_bytes = LINEAR_SM80_SMEM,
         require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
         require(out.shape[0] == x.shape[0], "out must have x's row count"),
         require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"),
         require(out.ptr() != x.ptr(), "out must not be x"),
         require(out.ptr() != w.ptr(), "out must not be w"),
         require(x.shape[0] < 2147483648, "x must have fewer than 2^31 rows"),
         require(x.shape[1] < 2147483648, "x and w must have fewer than 2^31 columns"),
         require(w.shape[0] < 2147483648, "w must have fewer than 2^31 rows"))]
pub unsafe fn linear_bf16(x: View<bf16, 2>, w: View<bf16, 2>, out: ViewMut<bf16, 2>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `linear_bf16_f32`.
    unsafe {
        gpu::linear(x, w, out, crate::epilogue::Plain)
    }
}

/// `out = x · wᵀ` (f32) for f16 `x` and `w`: [`linear_bf16_f32`] for f16 inputs (every
/// product of two f16 is exact in f32), on every GPU from sm_80; the family launcher runs it
/// where `linear_f16_f32_sm90` cannot.
#[kernel(family = "linear", block = 256, min_blocks = 2, dynamic_shared = u8,
         shared_bytes = LINEAR_SM80_SMEM,
         require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
         require(out.shape[0] == x.shape[0], "out must have x's row count"),
         require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"),
         require(x.shape[0] < 2147483648, "x must have fewer than 2^31 rows"),
         require(x.shape[1] < 2147483648, "x and w must have fewer than 2^31 columns"),
         require(w.shape[0] < 2147483648, "w must have fewer than 2^31 rows"))]
pub unsafe fn linear_f16_f32(x: View<f16, 2>, w: View<f16, 2>, out: ViewMut<f32, 2>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `linear_bf16_f32`.
    unsafe {
        gpu::linear(x, w, out, crate::epilogue::Plain)
    }
}

/// `out = x · wᵀ` rounded to f16 (nearest even; overflow to ±∞): [`linear_f16_f32`] with f16
/// output. `out` must be neither `x` nor `w`.
#[kernel(family = "linear", block = 256, min_blocks = 2, dynamic_shared = u8,
         shared_bytes = LINEAR_SM80_SMEM,
         require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
         require(out.shape[0] == x.shape[0], "out must have x's row count"),
         require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"),
         require(out.ptr() != x.ptr(), "out must not be x"),
         require(out.ptr() != w.ptr(), "out must not be w"),
         require(x.shape[0] < 2147483648, "x must have fewer than 2^31 rows"),
         require(x.shape[1] < 2147483648, "x and w must have fewer than 2^31 columns"),
         require(w.shape[0] < 2147483648, "w must have fewer than 2^31 rows"))]
pub unsafe fn linear_f16(x: View<f16, 2>, w: View<f16, 2>, out: ViewMut<f16, 2>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `linear_bf16_f32`.
    unsafe {
        gpu::linear(x, w, out, crate::epilogue::Plain)
    }
}

/// The device code.
#[cfg(target_arch = "nvptx64")]
pub(crate) mod gpu {
    use super::*;
    use crate::epilogue::{pair_stores, store_pair, Epilogue, OutElem};
    use ferrocuda_device::cp_async::{self, Pipeline};
    use ferrocuda_device::half::f16;
    use ferrocuda_device::mma::{
        self, ldmatrix_x4, Acc16x8F32, FragA16x16, FragB16x8, Fragment, Half16,
    };
    use ferrocuda_device::shared::{dynamic_shared, shared_addr_of};

    /// Threads per block.
    const THREADS: u32 = 256;
    /// The tile constants as `u32` (indices and shared addresses are 32-bit: the extents are
    /// below 2³¹, the kernels' requirements).
    const BM32: u32 = BM as u32;
    const BK32: u32 = BK as u32;
    const ROW: u32 = ROW_BYTES as u32;
    const TILE: u32 = TILE_BYTES as u32;
    const STAGE: u32 = STAGE_BYTES as u32;

    /// An operand as the tile loader sees it: `rows` (M for `x`, N for `w`) by `k`, element
    /// strides `s0` (rows) and `s1` (K).
    #[derive(Clone, Copy)]
    struct Operand {
        /// The elements' bits (bf16 or f16: the loader moves bits).
        ptr: *const u16,
        s0: isize,
        s1: isize,
        rows: u32,
        k: u32,
    }

    impl Operand {
        /// The operand of `v`, whose extents are below 2³¹.
        #[inline(always)]
        fn of<H: Input>(v: View<H, 2>) -> Operand {
            let [rows, k] = v.shape();
            let [s0, s1] = v.indexer().strides;
            Operand {
                ptr: v.as_ptr().cast::<u16>(),
                s0,
                s1,
                rows: rows as u32,
                k: k as u32,
            }
        }

        /// Element `(r, k)`'s address (not dereferenced).
        #[inline(always)]
        fn at(&self, r: u32, k: u32) -> *const u16 {
            self.ptr
                .wrapping_offset(r as isize * self.s0 + k as isize * self.s1)
        }

        /// Whether 8 consecutive elements along K, from any multiple of 8, are one aligned
        /// 16-byte chunk of memory that lies wholly inside or wholly outside the operand (the
        /// `cp.async` path: K a multiple of 8, so no copy reads part of a chunk — a copy that
        /// reads `n < 16` bytes counts, for memory checkers, as reading all 16, past the
        /// array's allocation).
        #[inline(always)]
        fn chunked(&self) -> bool {
            (self.ptr as usize).is_multiple_of(16)
                && self.s1 == 1
                && self.k.is_multiple_of(8)
                && (self.s0 % 8 == 0 || self.rows <= 1)
        }

        /// Whether the rows are the closer axis in memory (the element path then walks them).
        #[inline(always)]
        fn along_rows(&self) -> bool {
            self.s0.unsigned_abs() < self.s1.unsigned_abs()
        }

        /// Thread `t`'s two 16-byte copies of the 128 × 32 tile at row `r0`, column `k0` into
        /// the shared tile at `dst`: chunk `q` (`t`, `t + 256`) is row `q / 4`, elements
        /// `8 (q % 4)..+8`; what lies outside the operand is zero-filled by the copy.
        ///
        /// # Safety
        ///
        /// [`chunked`](Self::chunked); `rows ≥ 1` and `k ≥ 1`; `dst` is the shared address of a
        /// tile of this block that no thread accesses until the copies' group is waited for
        /// and a barrier passed.
        #[inline(always)]
        unsafe fn copy_tile(&self, dst: u32, r0: u32, k0: u32, t: u32) {
            for i in 0..2 {
                let q = t + THREADS * i;
                let (r, c) = (q / 4, q % 4);
                let (gr, gk) = (r0 + r, k0 + 8 * c);
                let n = if gr < self.rows {
                    self.k.saturating_sub(gk).min(8)
                } else {
                    0
                };
                // A copy that reads nothing still names an address: the operand's base.
                let src = if n > 0 { self.at(gr, gk) } else { self.ptr };
                // SAFETY: the chunk's first n elements are inside the operand (row gr, columns
                // gk..gk + n, contiguous: `chunked`), 16-byte aligned (a multiple of 8
                // elements from an aligned row start); the destination is 16 bytes of the tile
                // (row r, bytes 16c..), aligned (the stage, ROW and 16c are multiples of 16),
                // used as the caller says.
                unsafe { cp_async::cg_zfill(dst + r * ROW + 16 * c, src, 2 * n) };
            }
        }

        /// Thread `t`'s 8 pairs of the 128 × 32 tile at `(r0, k0)`, loaded element by element
        /// and stored to the shared tile at `dst` (zeros outside the operand): pair
        /// `p = t + 256 i` is row `p % 128`, columns `2 (p / 128)..+2` when `rows` is set,
        /// else row `p / 16`, columns `2 (p % 16)..+2`. Either way pair `i` lies a fixed step
        /// of memory from pair `i − 1` (4 columns, or 16 rows), so one pointer walks them.
        ///
        /// All 16 loads are issued before the first store, written out: a rolled loop (which
        /// LLVM left in the main loop's instances) waited for each pair's loads before it
        /// issued the next pair's — a global load's latency 8 times per stage, 0.3× the
        /// aligned path's speed, long-scoreboard stalls 64 % of the time under Nsight
        /// Compute. Loads are predicated on the bounds (no clamped addresses: one pointer and
        /// one step in registers, not 16 addresses, which spilled under the 128-register cap).
        ///
        /// # Safety
        ///
        /// `dst` is the shared address of a tile of this block that no other thread accesses
        /// until a barrier.
        #[inline(always)]
        #[allow(clippy::erasing_op, clippy::identity_op)] // unroll!'s literals 0 and 1
        unsafe fn load_tile(&self, dst: u32, r0: u32, k0: u32, t: u32, rows: bool) {
            // Pair i: row ra + i·dr, columns ka + i·dk and one more — recomputed at each call
            // from a `t` the compiler cannot see through: held across the loops instead,
            // these and what follows from them spilled under the 128-register cap.
            let t = opaque(t);
            let (ra, dr, ka, dk) = if rows {
                (t % BM32, 0, 2 * (t / BM32), 4)
            } else {
                (t / 16, 16, 2 * (t % 16), 0)
            };
            let step = dr as isize * self.s0 + dk as isize * self.s1;
            // Never dereferenced outside the operand (the bounds below).
            let p0 = self.at(r0 + ra, k0 + ka);
            let mut v = [0u32; 8];
            ferrocuda_device::unroll!(I in 0..8 {
                let (r, k) = (r0 + ra + I * dr, k0 + ka + I * dk);
                let p = p0.wrapping_offset(I * step);
                let lo = if r < self.rows && k < self.k {
                    // SAFETY: element (r, k) of the operand.
                    unsafe { p.read() }
                } else {
                    0
                };
                let hi = if r < self.rows && k + 1 < self.k {
                    // SAFETY: element (r, k + 1) of the operand.
                    unsafe { p.wrapping_offset(self.s1).read() }
                } else {
                    0
                };
                v[I] = lo as u32 | (hi as u32) << 16;
            });
            ferrocuda_device::unroll!(I in 0..8 {
                let (r, kp) = (ra + I * dr, ka + I * dk);
                // SAFETY: the pair is 4 aligned bytes of the tile (kp even), the caller's to
                // write.
                unsafe { st_shared_u32(dst + r * ROW + 2 * kp, v[I]) };
            });
        }
    }

    /// `v` through a `mov` that LLVM treats as having effects: what is computed from the
    /// result is computed where it is used, not hoisted out of the loops around it.
    #[inline(always)]
    fn opaque(v: u32) -> u32 {
        let r: u32;
        // SAFETY: a register move; no memory, no stack.
        unsafe {
            core::arch::asm!("mov.u32 {r}, {v};", r = out(reg32) r, v = in(reg32) v,
                             options(nomem, nostack))
        };
        r
    }

    /// `st.shared.b32 [addr], v`.
    ///
    /// # Safety
    ///
    /// `addr` is the 4-byte aligned shared address of 4 bytes of this block's shared memory
    /// that no other thread accesses concurrently.
    #[inline(always)]
    unsafe fn st_shared_u32(addr: u32, v: u32) {
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("st.shared.b32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v,
                             options(nostack))
        };
    }

    /// The input types: 16-bit floats the tensor cores multiply (`mma.sync m16n8k16`).
    pub(crate) trait Input: Half16 + ferrocuda_device::Element {}
    impl Input for bf16 {}
    impl Input for f16 {}

    /// 16 of K for one warp: the A fragments of its 4 row blocks, the B fragments of its 4
    /// column blocks, 16 `mma.sync`. `a`, `b`: this lane's `ldmatrix` addresses in the stage.
    #[inline(always)]
    fn step16<H: Input>(acc: &mut [[Acc16x8F32; 4]; 4], a: u32, b: u32) {
        let fa: [FragA16x16<H>; 4] = core::array::from_fn(|i| {
            // SAFETY: the whole warp runs this (no lane-dependent branch around it); each lane
            // addresses a 16-byte aligned row of a tile the last barrier published (`tiles`).
            FragA16x16::from_regs(unsafe { ldmatrix_x4(a + i as u32 * 16 * ROW) })
        });
        // SAFETY: as for `fa`: the whole warp, aligned rows of a published tile.
        let pb: [[u32; 4]; 2] =
            core::array::from_fn(|j| unsafe { ldmatrix_x4(b + j as u32 * 16 * ROW) });
        let fb: [FragB16x8<H>; 4] = core::array::from_fn(|j| {
            let r = pb[j / 2];
            FragB16x8::from_regs(if j % 2 == 0 {
                [r[0], r[1]]
            } else {
                [r[2], r[3]]
            })
        });
        for i in 0..4 {
            for j in 0..4 {
                acc[i][j] = mma::mma(fa[i], fb[j], acc[i][j]);
            }
        }
    }

    /// The portable kernels' body: `out = x · wᵀ` (see the module documentation).
    ///
    /// # Safety
    ///
    /// Launched with blocks of 256 threads and at least [`LINEAR_SM80_SMEM`] bytes of
    /// dynamic shared memory, over views whose shapes agree and whose extents are below 2³¹
    /// (the kernels' requirements), and an `out` that overlaps neither input.
    #[inline(always)]
    pub(crate) unsafe fn linear<H: Input, T: OutElem, E: Epilogue>(
        x: View<H, 2>,
        w: View<H, 2>,
        out: ViewMut<T, 2>,
        epi: E,
    ) {
        let smem = dynamic_shared::<u8>();
        // Launched with too little shared memory: abort, location recorded.
        ferrocuda_device::device_assert!(smem.len() >= LINEAR_SM80_SMEM as usize);
        let base = shared_addr_of(smem.as_ptr());
        let (ox, ow) = (Operand::of(x), Operand::of(w));
        // One instance of the loop per pair of load paths.
        // SAFETY: (every arm) forwarded; the paths are the operands' own.
        unsafe {
            match (ox.chunked(), ow.chunked()) {
                (true, true) => tiles::<true, true, H, T, E>(ox, ow, out, base, epi),
                (true, false) => tiles::<true, false, H, T, E>(ox, ow, out, base, epi),
                (false, true) => tiles::<false, true, H, T, E>(ox, ow, out, base, epi),
                (false, false) => tiles::<false, false, H, T, E>(ox, ow, out, base, epi),
            }
        }
    }

    /// The tile loop, `x` copied with `cp.async` when `CX`, `w` when `CW` (element loads
    /// else).
    ///
    /// # Safety
    ///
    /// As [`linear`]; `CX` and `CW` only where the operands are [`chunked`](Operand::chunked);
    /// `base` is the shared address of the dynamic shared memory.
    #[inline(always)]
    #[allow(clippy::erasing_op, clippy::identity_op)] // unroll!'s literal 0 (the epilogue)
    unsafe fn tiles<const CX: bool, const CW: bool, H: Input, T: OutElem, E: Epilogue>(
        x: Operand,
        w: Operand,
        out: ViewMut<T, 2>,
        base: u32,
        epi: E,
    ) {
        let (m, n, kk) = (x.rows, w.rows, x.k);
        let t = thread::rank_in_block();
        let (warp, lane) = (t / 32, t % 32);
        // This warp's 64 × 32 of the tile: 2 warps along M, 4 along N.
        let (wm, wn) = (64 * (warp / 4), 32 * (warp % 4));
        // ldmatrix.x4 rows (stage 0, k 0): A — lane l gives row l % 16 at k 8 (l / 16) of a
        // 16 × 16 block, so matrix j is (rows 8 (j % 2).., k 8 (j / 2)..), FragA16x16's
        // regs[j]; B — lane l gives row (l % 8) + 8 (l / 16) at k 8 ((l / 8) % 2) of a 16-row
        // block of w, so matrices 0, 1 are (k 0..8, 8..16) of its rows 0..8 (FragB16x8's
        // regs for the first 8 columns of `out`) and matrices 2, 3 those of rows 8..16.
        let a_lane = base + (wm + lane % 16) * ROW + 16 * (lane / 16);
        let b_lane = base + TILE + (wn + lane % 8 + 8 * (lane / 16)) * ROW + 16 * ((lane / 8) % 2);
        let pairs = pair_stores(&out);
        let (x_rows, w_rows) = (x.along_rows(), w.along_rows());
        // No tile at all when M or N is 0 (the loaders need an element to clamp to).
        let tiles_m = m.div_ceil(BM32);
        let tiles_n = if m == 0 { 0 } else { n.div_ceil(BM32) };
        let ktiles = kk.div_ceil(BK32);
        // Stage `s` ← the K step `kt` of the tile at (m0, n0); called only when K, M, N ≥ 1.
        // SAFETY: rows and K are at least 1 (above); the stage is the one the pipeline handed
        // out, untouched until its consumer_wait.
        let load = |s: u32, m0: u32, n0: u32, kt: u32| unsafe {
            let (dst, k0) = (base + s * STAGE, kt * BK32);
            if CX {
                x.copy_tile(dst, m0, k0, t);
            } else {
                x.load_tile(dst, m0, k0, t, x_rows);
            }
            if CW {
                w.copy_tile(dst + TILE, n0, k0, t);
            } else {
                w.load_tile(dst + TILE, n0, k0, t, w_rows);
            }
        };
        let mut pipe = Pipeline::<STAGES>::new();
        // Tile `tm + tiles_m · tn`, stepped by the grid. One division per tile (against a
        // tile's K loop, nothing): stepping `tm` and `tn` instead held two more registers
        // across the tile, one more than the element paths' loads leave on sm_90.
        let tiles_m = tiles_m.max(1);
        let tiles = tiles_m as u64 * tiles_n as u64;
        let mut tile = thread::block_idx().x as u64;
        while tile < tiles {
            // tm < tiles_m and tn < tiles_n: both fit in 32 bits.
            let (tm, tn) = (
                (tile % tiles_m as u64) as u32,
                (tile / tiles_m as u64) as u32,
            );
            let (m0, n0) = (tm * BM32, tn * BM32);
            let mut acc = [[Acc16x8F32::zeroed(); 4]; 4];
            for kt in 0..(STAGES as u32 - 1).min(ktiles) {
                let s = pipe.producer_acquire() as u32;
                load(s, m0, n0, kt);
                pipe.producer_commit();
            }
            for kt in 0..ktiles {
                // K step kt is in stage s for every thread (wait_group + barrier); the stage
                // step kt - 1 used was released before that barrier: refill it.
                let s = pipe.consumer_wait() as u32;
                if kt + STAGES as u32 - 1 < ktiles {
                    let p = pipe.producer_acquire() as u32;
                    load(p, m0, n0, kt + STAGES as u32 - 1);
                    pipe.producer_commit();
                }
                let off = s * STAGE;
                for k16 in 0..BK32 / 16 {
                    step16::<H>(&mut acc, a_lane + off + 32 * k16, b_lane + off + 32 * k16);
                }
                pipe.consumer_release();
            }
            // Accumulator (i, j) holds rows wm + 16i + {g, g + 8}, columns wn + 8j + 2t +
            // {0, 1} (Acc16x8F32: element e at (g + 8 (e / 2), 2t + e % 2)). Written out
            // (constant indices: the accumulators stay in registers; a loop that LLVM leaves
            // rolled would index them at run time, in local memory).
            let (g, tq) = (lane / 4, lane % 4);
            ferrocuda_device::unroll!(I in 0..4 {
                ferrocuda_device::unroll!(J in 0..4 {
                    let (row, col) = (m0 + wm + 16 * I + g, n0 + wn + 8 * J + 2 * tq);
                    let r = acc[I][J].regs;
                    let c = epi.col(col, n);
                    let (v0, v1) = epi.apply(c, r[0], r[1]);
                    let (v2, v3) = epi.apply(c, r[2], r[3]);
                    // SAFETY: each element of the tile belongs to one lane of one warp; tiles
                    // are disjoint; col is even.
                    unsafe {
                        store_pair(out, (m, n), pairs, row, col, v0, v1);
                        store_pair(out, (m, n), pairs, row + 8, col, v2, v3);
                    }
                });
            });
            tile += thread::grid_dim().x as u64;
        }
    }
}
