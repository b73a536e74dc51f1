//! `linear`: `out = x · wᵀ` on Hopper's tensor cores (f32 accumulation) — the product of
//! PyTorch's `F.linear(x, w)` with `x` of shape (M, K) and a weight `w` of shape (N, K), both
//! row-major (K contiguous: the "TN" layout of BLAS, which `wgmma` reads without
//! transposing).
//!
//! | inputs | kernels (out f32; out of the input type) | family |
//! | --- | --- | --- |
//! | bf16 | `linear_bf16_f32_sm90`; `linear_bf16_sm90` | `linear` |
//! | f16 | `linear_f16_f32_sm90`; `linear_f16_sm90` | `linear` |
//! | f32, multiplied in TF32 | `linear_tf32_sm90` | `linear_tf32` (by name: `matmul` stays exact f32) |
//!
//! One schedule for every input type (`Input`): a stage holds 128-byte rows of K (64 bf16
//! or f16, 32 f32), so the tiles, the shared memory and the ring are the same; only the
//! `wgmma` differs (`m64n256k16` for 16-bit inputs, `m64n256k8.tf32`).
//!
//! # Schedule (sm_90a: `wgmma`, TMA, mbarriers; one block of 384 threads per SM)
//!
//! * **Tiles**: each block computes 128 × 256 tiles of `out`, persistent over the tiles,
//!   walking K in steps of one 128-byte row (`Input::BK`: 64 bf16/f16, 32 TF32).
//! * **Clusters** ([`LINEAR_CLUSTER`] blocks, 1 in this build): with 2, the pair takes two
//!   tiles one above the other (the same 256 columns, so the same `w` tile) and each block
//!   loads its own `x` tile and half of the `w` tile, multicast to both (`.multicast::cluster`);
//!   a stage is refilled only when the consumers of both blocks have released it (each arrives
//!   on its own block's "empty" barrier and on the peer's). It passes the GPU tests and was
//!   measured no faster than one block per cluster (BENCHMARKS.md, the GEMM section), so the
//!   build keeps one block per cluster (the kernels then take no `cluster` launch attribute
//!   and the pair's code is compiled out).
//!   The automatic grid is one block per SM.
//! * **Warp specialisation**: warpgroup 0 is the *producer* — one thread issues the TMA loads
//!   of each step's 128-row tile of `x` and 256-row tile of `w` into a ring of 4 shared
//!   stages (48 KiB each, 128-byte swizzle, the layout `wgmma`'s descriptors read), counting
//!   their bytes on the stage's "full" mbarrier — and gives most of its registers away
//!   (`setmaxnreg.dec` to 40); warpgroups 1 and 2 are the *consumers* (`setmaxnreg.inc` to
//!   232): each owns 64 rows of the tile, waits for a stage to be full, issues four
//!   `wgmma.mma_async.m64n256k16` (one per 32 bytes of K: k16, or k8 for TF32), keeps one batch in flight
//!   (`wgmma.wait_group 1`) and releases the previous stage to the producer on its "empty"
//!   mbarrier.
//! * **Edges**: TMA fills the parts of a box outside `x` or `w` with zeros, so partial tiles
//!   in M, N and K need no code in the main loop; the epilogue stores only the elements
//!   inside `out`.
//! * **Epilogue**: each consumer thread holds 128 f32 accumulators (rows and column pairs as
//!   `wgmma::acc_coords` says) and writes them straight to `out`: where its 64 × 256 slice of
//!   the tile lies inside `out` with contiguous rows aligned to 8 bytes (`Sink::whole`), from
//!   one base pointer, 8 bytes per store at constant offsets (`SliceStore`: an f32 pair; two
//!   16-bit pairs, one traded with the neighbouring lane), so that the 4 lanes of a row fill a
//!   32-byte sector — and else pair by pair, each checked against `out`'s extents and strides.
//!   A fused epilogue (`linear_bias*`) is applied to all 128 values in registers before that
//!   store, with the bias of the thread's 32 column pairs loaded before the wait for the
//!   tile's last MMAs (`Epilogue::cols`).
//!
//! Launch: `block = 384` (`.reqntid`), `min_blocks = 1`; 197 696 bytes of dynamic shared
//! memory ([`LINEAR_SMEM`], declared with `shared_bytes`: every launch gets it).

#[cfg(ferrocuda_arch = "sm_90a")]
use crate::epilogue::{pair_stores, store_pair, Epilogue, OutElem, Plain};
#[cfg(ferrocuda_arch = "sm_90a")]
use crate::prelude::*;
use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::{kernel, TensorMap, ViewMut};

/// Tile rows (M) and columns (N); each step's depth (K) is one 128-byte swizzled row of the
/// input type: 64 bf16 or f16, 32 f32 (TF32) — `Input::BK`.
#[cfg(ferrocuda_arch = "sm_90a")]
const BM: u32 = 128;
#[cfg(ferrocuda_arch = "sm_90a")]
const BN: u32 = 256;
/// Shared stages of the ring.
#[cfg(ferrocuda_arch = "sm_90a")]
const STAGES: usize = 4;
/// Bytes of one stage's `x` tile (128 rows of 128 bytes) and `w` tile (256 rows): the same
/// for every input type.
#[cfg(ferrocuda_arch = "sm_90a")]
const A_BYTES: u32 = BM * 128;
#[cfg(ferrocuda_arch = "sm_90a")]
const B_BYTES: u32 = BN * 128;
#[cfg(ferrocuda_arch = "sm_90a")]
const STAGE_BYTES: u32 = A_BYTES + B_BYTES;

/// Dynamic shared memory a launch of the `linear` sm_90a kernels needs: 4 stages of 48 KiB,
/// 8 mbarriers, and 1 KiB to align the stages to the 128-byte swizzle's 1024-byte atom.
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_arch = "sm_90a"))]
pub const LINEAR_SMEM: u32 = 4 * (128 * 64 * 2 + 256 * 64 * 2) + 2 * 4 * 8 + 1024;

/// Blocks per cluster of the sm_90a kernels: 1, or 2 to share each `w` tile between two
/// blocks by TMA multicast (then their `#[kernel]` attributes take `cluster = (2, 1, 1)`; see
/// the module documentation for why this build uses 1).
pub const LINEAR_CLUSTER: u32 = 1;

/// The x and w tensor maps: boxes of 128 × 64 and 256 / [`LINEAR_CLUSTER`] × 64 elements (a
/// tile's rows of `x`, and the part of its 256 rows of `w` one block of a cluster loads),
/// 128-byte swizzle.
pub type XMap = TensorMap<bf16, 128, 128, 64>;
/// See [`XMap`].
pub type WMap = TensorMap<bf16, 128, { 256 / LINEAR_CLUSTER }, 64>;
/// [`XMap`] of f16.
pub type XMapF16 = TensorMap<f16, 128, 128, 64>;
/// [`WMap`] of f16.
pub type WMapF16 = TensorMap<f16, 128, { 256 / LINEAR_CLUSTER }, 64>;
/// The TF32 kernel's maps: boxes of 128 × 32 f32 (the same 128-byte rows).
pub type XMapTf32 = TensorMap<f32, 128, 128, 32>;
/// See [`XMapTf32`].
pub type WMapTf32 = TensorMap<f32, 128, { 256 / LINEAR_CLUSTER }, 32>;

/// The input types of the sm_90a GEMM and the `wgmma` that multiplies them: one k-step of a
/// 64-row slice of the `x` tile by the 256-row `w` tile, both K-major in the 128-byte swizzle,
/// 32 bytes of each row (16 bf16/f16, 8 TF32 operands).
#[cfg(ferrocuda_arch = "sm_90a")]
pub(crate) trait Input: ferrocuda_device::Element {
    /// Elements of K per stage: one 128-byte row.
    const BK: u32;

    /// `acc (+)= a · bᵀ` for one k-step (`scale_d = false`: overwrite).
    ///
    /// # Safety
    ///
    /// [`wgmma::mma_bf16`](ferrocuda_device::wgmma::mma_bf16)'s contract.
    unsafe fn mma(
        acc: &mut [f32; 128],
        a: ferrocuda_device::wgmma::MatrixDesc,
        b: ferrocuda_device::wgmma::MatrixDesc,
        scale_d: bool,
    );
}

#[cfg(ferrocuda_arch = "sm_90a")]
macro_rules! inputs {
    ($($t:ty, $bk:literal, $mma:ident;)*) => {$(
        impl Input for $t {
            const BK: u32 = $bk;
            #[inline(always)]
            unsafe fn mma(
                acc: &mut [f32; 128],
                a: ferrocuda_device::wgmma::MatrixDesc,
                b: ferrocuda_device::wgmma::MatrixDesc,
                scale_d: bool,
            ) {
                // SAFETY: the caller's contract.
                unsafe { ferrocuda_device::wgmma::$mma::<256, 128>(acc, a, b, scale_d) }
            }
        }
    )*};
}
#[cfg(ferrocuda_arch = "sm_90a")]
inputs! {
    bf16, 64, mma_bf16;
    f16, 64, mma_f16;
    f32, 32, mma_tf32;
}

/// `out = x · wᵀ` (f32): `x` (M, K) and `w` (N, K) row-major bf16 with rows of a multiple of 8
/// elements (TMA: 16-byte strides), `out` (M, N) any strides. Accumulates in f32 on the
/// tensor cores: each element is the sum of K exact bf16 products, added in an order the
/// hardware chooses (error ≲ K·2⁻²³·Σ|xw|). K = 0 gives zeros. Built for sm_90a (H100/H200):
/// the family launcher runs it there, `linear_bf16_f32` elsewhere.
#[kernel(family = "linear", arch = "sm_90a", block = 384, min_blocks = 1, dynamic_shared = u8,
         shared_bytes = LINEAR_SMEM,
         require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
         require(out.shape[0] == x.shape[0], "out must have x's row count"),
         require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"))]
pub unsafe fn linear_bf16_f32_sm90(x: XMap, w: WMap, out: ViewMut<f32, 2>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as a kernel with the block and shared memory it declares, over
    // host-validated arguments whose shapes agree.
    unsafe {
        gemm(x, w, Sink::new(out, Plain))
    }
}

/// `out = x · wᵀ` rounded to bf16 (one rounding of the f32 sum): as
/// [`linear_bf16_f32_sm90`], half the output bytes — the product cuBLAS's bf16 GEMM returns.
#[kernel(family = "linear", arch = "sm_90a", block = 384, min_blocks = 1, dynamic_shared = u8,
         shared_bytes = LINEAR_SMEM,
         require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
         require(out.shape[0] == x.shape[0], "out must have x's row count"),
         require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"))]
pub unsafe fn linear_bf16_sm90(x: XMap, w: WMap, out: ViewMut<bf16, 2>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `linear_bf16_f32_sm90`.
    unsafe {
        gemm(x, w, Sink::new(out, Plain))
    }
}

/// `out = x · wᵀ` (f32) for f16 `x` and `w`: [`linear_bf16_f32_sm90`]'s schedule and
/// numerics (every product of two f16 is exact in f32).
#[kernel(family = "linear", arch = "sm_90a", block = 384, min_blocks = 1, dynamic_shared = u8,
         shared_bytes = LINEAR_SMEM,
         require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
         require(out.shape[0] == x.shape[0], "out must have x's row count"),
         require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"))]
pub unsafe fn linear_f16_f32_sm90(x: XMapF16, w: WMapF16, out: ViewMut<f32, 2>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `linear_bf16_f32_sm90`.
    unsafe {
        gemm(x, w, Sink::new(out, Plain))
    }
}

/// `out = x · wᵀ` rounded to f16 (one rounding of the f32 sum, to nearest even; overflow to
/// ±∞): [`linear_f16_f32_sm90`] with f16 output, the product cuBLAS's f16 GEMM returns.
#[kernel(family = "linear", arch = "sm_90a", block = 384, min_blocks = 1, dynamic_shared = u8,
         shared_bytes = LINEAR_SMEM,
         require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
         require(out.shape[0] == x.shape[0], "out must have x's row count"),
         require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"))]
pub unsafe fn linear_f16_sm90(x: XMapF16, w: WMapF16, out: ViewMut<f16, 2>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `linear_bf16_f32_sm90`.
    unsafe {
        gemm(x, w, Sink::new(out, Plain))
    }
}

/// `out = x · wᵀ` on the tensor cores in **TF32** (family `linear_tf32`, asked for by name:
/// the f32 `matmul` stays exact f32): f32 `x` (M, K) and `w` (N, K) with rows of a multiple
/// of 4 elements (TMA: 16-byte strides), `out` (M, N) f32 any strides. The tensor cores read
/// each operand's top 19 bits (8 of exponent, 10 of mantissa: the low 13 are ignored, a
/// truncation, as `torch.backends.cuda.matmul.allow_tf32` allows), multiply exactly and add
/// in f32: relative error per product ≲ 2⁻⁹, then K·2⁻²³·Σ|xw| for the sum. Built for sm_90a:
/// [`linear_bf16_f32_sm90`]'s schedule with 32 of K per stage (128-byte rows of f32).
#[kernel(family = "linear_tf32", arch = "sm_90a", block = 384, min_blocks = 1,
         dynamic_shared = u8, shared_bytes = LINEAR_SMEM,
         require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
         require(out.shape[0] == x.shape[0], "out must have x's row count"),
         require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"))]
pub unsafe fn linear_tf32_sm90(x: XMapTf32, w: WMapTf32, out: ViewMut<f32, 2>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `linear_bf16_f32_sm90`.
    unsafe {
        gemm(x, w, Sink::new(out, Plain))
    }
}

/// Where [`gemm`] puts its sums: `out` and the epilogue applied to each pair before the
/// store. A consumer's slice of a tile that lies wholly inside `out`, with unit column stride
/// and rows aligned to 8 bytes ([`Sink::whole`]), is stored through one base pointer per
/// thread ([`SliceStore`]: 8 bytes per store, a warp's stores to a row filling whole 32-byte
/// sectors), and any other slice pair by pair, checking each against `out`'s extents
/// ([`Sink::store`]).
#[cfg(ferrocuda_arch = "sm_90a")]
#[derive(Clone, Copy)]
pub(crate) struct Sink<T, Ep> {
    out: ViewMut<T, 2>,
    epi: Ep,
    /// [`pair_stores`] of `out`.
    pairs: bool,
}

/// A tile of `out` that [`Sink::whole`] found inside it: its first element and its row pitch
/// (elements).
#[cfg(ferrocuda_arch = "sm_90a")]
#[derive(Clone, Copy)]
pub(crate) struct Whole<T> {
    first: *mut T,
    pitch: isize,
}

/// How a consumer's whole 64 × 256 slice of a tile is stored, per output type: one base
/// pointer, stores at constant offsets — each pair on its own (f32: 8 bytes, so the 4 lanes
/// sharing a row of the accumulator layout fill a 32-byte sector), or for 16-bit types two
/// pairs per 8-byte store, traded between lanes.
#[cfg(ferrocuda_arch = "sm_90a")]
pub(crate) trait SliceStore: OutElem {
    /// Stores thread `t`'s 128 values `v` of the slice `w` (the accumulator layout, the
    /// epilogue applied).
    ///
    /// # Safety
    ///
    /// As [`Sink::put_slice`]: `w` inside `out` with 8-byte aligned rows, called by the whole
    /// consumer warpgroup, no other writer.
    #[inline(always)]
    unsafe fn store_slice(w: Whole<Self>, v: &[f32; 128], t: u32) {
        use ferrocuda_device::wgmma::{self, Accumulator};
        v.each_pair(|r, a, b| {
            let (row, col) = wgmma::acc_coords(t, r);
            let p = w
                .first
                .wrapping_offset(row as isize * w.pitch + col as isize);
            // SAFETY: (row, col + 1) inside the slice (the accumulator's coordinates), aligned
            // to a pair (`whole`: 8-byte aligned rows; even columns); one writer per element.
            unsafe { Self::write_pair(p, a, b) };
        });
    }
}

#[cfg(ferrocuda_arch = "sm_90a")]
impl SliceStore for f32 {}

/// The 16-bit types: a pair is 4 bytes, so two lanes of a row trade one pair each — the lane
/// with an even `t % 4` gets its odd neighbour's pair of the same 8-column block and stores 4
/// columns of it; the odd lane gets the even one's pair of the next block — and each stores 8
/// bytes (`shfl.sync.bfly`, one per two pairs).
#[cfg(ferrocuda_arch = "sm_90a")]
macro_rules! slice_store_16 {
    ($($t:ty, $x2:ty;)*) => {$(
        impl SliceStore for $t {
            #[inline(always)]
            unsafe fn store_slice(w: Whole<$t>, acc: &[f32; 128], t: u32) {
                use ferrocuda_device::{warp, wgmma};
                let odd = t % 2 == 1;
                let pack = |v0: f32, v1: f32| <$x2>::from_f32s(v0, v1).to_bits();
                // Pair-block P: the 8-column blocks 2 (P / 2) and 2 (P / 2) + 1, row half
                // P % 2 (accumulator registers `RA`, `RA + 1` and `RA + 4`, `RA + 5`).
                ferrocuda_device::unroll!(P in 0..32 {
                    let ra: u32 = 8 * (P / 2) + 2 * (P % 2);
                    let (row, ca) = wgmma::acc_coords(t, ra);
                    let (_, cb) = wgmma::acc_coords(t, ra + 4);
                    let pa = pack(acc[ra as usize], acc[ra as usize + 1]);
                    let pb = pack(acc[ra as usize + 4], acc[ra as usize + 5]);
                    // Every lane of the warp, convergently (the whole warpgroup runs this).
                    let got = warp::shfl_xor_sync(u32::MAX, if odd { pa } else { pb }, 1);
                    let (lo, hi, col) = if odd { (got, pb, cb - 2) } else { (pa, got, ca) };
                    let p = w.first.wrapping_offset(row as isize * w.pitch + col as isize);
                    // SAFETY: columns col .. col + 4 of the row lie in the slice (an even lane's
                    // block 2i and its neighbour's columns, an odd lane's block 2i + 1 and its
                    // neighbour's), 8-byte aligned (aligned rows; col a multiple of 4); each
                    // element written by one lane.
                    unsafe { p.cast::<u64>().write(lo as u64 | (hi as u64) << 32) };
                });
            }
        }
    )*};
}

#[cfg(ferrocuda_arch = "sm_90a")]
slice_store_16! {
    bf16, ferrocuda_device::half::bf16x2;
    f16, ferrocuda_device::half::f16x2;
}

#[cfg(ferrocuda_arch = "sm_90a")]
impl<T: SliceStore, Ep: Epilogue> Sink<T, Ep> {
    /// The sums of `out`'s elements, `epi` applied to each pair.
    #[inline(always)]
    pub(crate) fn new(out: ViewMut<T, 2>, epi: Ep) -> Self {
        let pairs = pair_stores(&out);
        Sink { out, epi, pairs }
    }

    /// The `rows` × `cols` tile at (`row0`, `col0`) when it lies wholly inside `out`, its
    /// columns have unit stride, and its first element and row pitch are multiples of 8
    /// bytes: the whole-slice store's base. `None` otherwise.
    #[inline(always)]
    pub(crate) fn whole(&self, row0: u32, col0: u32, rows: u32, cols: u32) -> Option<Whole<T>> {
        let [m, n] = self.out.shape();
        let [s0, s1] = self.out.indexer().strides;
        let (row0, col0) = (row0 as usize, col0 as usize);
        let size = core::mem::size_of::<T>() as isize;
        if row0 + rows as usize > m || col0 + cols as usize > n || s1 != 1 || (s0 * size) % 8 != 0 {
            return None;
        }
        let at = self.out.indexer().offset([row0, col0]);
        let first = self.out.as_mut_ptr().wrapping_offset(at);
        if !(first as usize).is_multiple_of(8) {
            return None;
        }
        Some(Whole { first, pitch: s0 })
    }

    /// What the epilogue needs for consumer thread `t`'s columns of the 256-column slice from
    /// column `col0` ([`Epilogue::cols`]: the bias), loaded at once.
    #[inline(always)]
    pub(crate) fn cols(&self, col0: u32, t: u32) -> Ep::Cols {
        // Thread t's pairs start at column 2 (t % 4) of each 8-column block (`acc_coords`).
        self.epi.cols(col0, 2 * (t % 4), self.out.shape()[1] as u32)
    }

    /// Stores consumer thread `t`'s 128 sums of the 64 × 256 slice `w`, the epilogue applied
    /// with `cols`, [`cols`](Self::cols) of the slice's first column: to all of them first, in
    /// registers, then the store of the values (so that a store holds no more values live than
    /// the plain GEMM's).
    ///
    /// # Safety
    ///
    /// `w` is [`whole`](Self::whole)'s 64 × 256 slice of this sink; every thread of the
    /// consumer warpgroup calls this with its own accumulators (the 16-bit stores exchange
    /// values between lanes); no other thread writes the slice.
    #[inline(always)]
    pub(crate) unsafe fn put_slice(&self, w: Whole<T>, acc: &[f32; 128], cols: &Ep::Cols, t: u32) {
        use ferrocuda_device::wgmma::Accumulator;
        let mut v = *acc;
        // Registers 4 i .. 4 i + 3 hold the thread's column pair i (`acc_coords`).
        v.map_pairs(|r, a, b| self.epi.apply(Ep::col_at(cols, r / 4), a, b));
        // SAFETY: the caller's contract.
        unsafe { T::store_slice(w, &v, t) }
    }

    /// Stores the pair of sums at (`row`, `col`), (`row`, `col + 1`) of `out`, the epilogue
    /// applied: the elements inside `out`, one store where the pair is aligned and the row
    /// contiguous, else one element at a time (any strides: [`store_pair`]).
    #[inline(always)]
    pub(crate) fn store(&self, row: u32, col: u32, v0: f32, v1: f32) {
        // `out` has x's rows and w's: below 2^32, as every extent of an array a tensor map
        // reads (`ArrayLayout::Tiled`, checked before the launch).
        let [m, n] = self.out.shape().map(|e| e as u32);
        if row >= m || col >= n {
            return;
        }
        let (a, b) = self.epi.apply(self.epi.col(col, n), v0, v1);
        // SAFETY: each element has one writer thread (the accumulator layout); `col` is even
        // (`acc_coords`); `m`, `n` are `out`'s extents.
        unsafe { store_pair(self.out, (m, n), self.pairs, row, col, a, b) }
    }
}

/// A descriptor the stage layout guarantees; a refused one aborts the kernel, naming this
/// line (it never falls back to another address).
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
#[track_caller]
fn desc(
    d: Result<ferrocuda_device::wgmma::MatrixDesc, ferrocuda_device::wgmma::DescError>,
) -> ferrocuda_device::wgmma::MatrixDesc {
    match d {
        Ok(d) => d,
        Err(_) => ferrocuda_device::diag::fail(),
    }
}

/// Rows of tiles in a group of the grouped order (Triton's `GROUP_SIZE_M`).
#[cfg(ferrocuda_arch = "sm_90a")]
const GROUP_M: u32 = 8;

/// The (row, column) of tile `tile` in the grouped order: tiles are taken in groups of
/// [`GROUP_M`] tile rows, column by column within a group, so that the blocks running at one
/// time share a few bands of `x` and of `w` in L2 (row-major order would stream all of `x`
/// while they share one band of `w`).
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
fn tile_coords(tile: u32, tiles_m: u32, tiles_n: u32, group_m: u32) -> (u32, u32) {
    let per_group = group_m * tiles_n;
    let group = tile / per_group;
    let first_m = group * group_m;
    let rows = (tiles_m - first_m).min(group_m);
    let within = tile % per_group;
    (first_m + within % rows, within / rows)
}

/// The warp-specialised main loop; `sink` receives each consumer thread's accumulator pairs
/// (a whole 64 × 256 slice of a tile through one base pointer where [`Sink::whole`] allows).
///
/// # Safety
///
/// Launched with 384 threads per block and at least [`LINEAR_SMEM`] bytes of dynamic shared
/// memory; `x` and `w` are the maps of (M, K) and (N, K) bf16 arrays.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
pub(crate) unsafe fn gemm<E: Input, const BK: u32, const WB: u32, T: SliceStore, Ep: Epilogue>(
    x: TensorMap<E, 128, 128, BK>,
    w: TensorMap<E, 128, WB, BK>,
    sink: Sink<T, Ep>,
) {
    const { assert!(BK == E::BK) };
    // Blocks per cluster: each loads WB of the tile's BN rows of `w` and multicasts them.
    let cl: u32 = const {
        assert!(
            WB == BN || WB * 2 == BN,
            "w boxes of the whole tile or of half of it"
        );
        BN / WB
    };
    use ferrocuda_device::cluster;
    use ferrocuda_device::mbarrier::{self, MBarrier, RingState};
    use ferrocuda_device::shared::{dynamic_shared, shared_addr_of};
    use ferrocuda_device::tma::Tma;
    use ferrocuda_device::wgmma::{self, Accumulator, MatrixDesc, Swizzle};

    let smem = dynamic_shared::<u8>();
    // Launched with too little shared memory: abort, location recorded.
    ferrocuda_device::device_assert!(smem.len() >= LINEAR_SMEM as usize);
    // The stages start at the first 1024-byte boundary (the 128-byte swizzle's atom).
    let raw = smem.as_mut_ptr();
    let skew = (1024 - (shared_addr_of(raw) & 1023)) & 1023;
    let stages = raw.wrapping_add(skew as usize);
    let base = shared_addr_of(stages);
    let bars = stages
        .wrapping_add(STAGES * STAGE_BYTES as usize)
        .cast::<u64>();
    let tid = thread::rank_in_block();
    // A pair of blocks shares each `w` tile: launched in clusters of exactly that size.
    ferrocuda_device::device_assert!(cl == 1 || cluster::size() == cl);
    if tid == 0 {
        for i in 0..STAGES {
            // SAFETY: 8-byte aligned shared memory of this block, not yet initialised, that
            // only mbarrier operations touch. A stage is empty once both consumers of every
            // block of the cluster have released it (the others' copies write it too).
            unsafe {
                mbarrier::init(bars.add(i), 1);
                mbarrier::init(bars.add(STAGES + i), 2 * cl);
            }
        }
        if cl > 1 {
            mbarrier::fence_mbarrier_init();
        }
    }
    if cl > 1 {
        // The peer's copies and arrivals reach this block's barriers: their initialisation
        // is visible, and both blocks running, before either block uses them.
        cluster::sync();
    } else {
        thread::sync_threads();
    }
    // SAFETY: initialised above, published by the barrier.
    let full = |i: usize| unsafe { MBarrier::from_shared_ptr(bars.add(i)) };
    // SAFETY: as above.
    let empty = |i: usize| unsafe { MBarrier::from_shared_ptr(bars.add(STAGES + i)) };

    let (m, k, n) = (x.dim(0) as u32, x.dim(1) as u32, w.dim(0) as u32);
    let tiles_m = m.div_ceil(BM);
    let tiles_n = n.div_ceil(BN);
    // The cluster's unit of work: `cl` tiles one above the other (the same columns, so the
    // same `w` tile); this block takes the one of its rank. A tile below `out` (when
    // `cl` does not divide the tile rows) runs the loop on zeros and stores nothing.
    let rank = if cl > 1 { cluster::rank() } else { 0 };
    let units_m = tiles_m.div_ceil(cl);
    let units = units_m * tiles_n;
    let k_steps = k.div_ceil(BK);
    let (first, step) = (thread::block_idx().x / cl, thread::grid_dim().x / cl);
    let tm_of = |u: u32| {
        let (um, tn) = tile_coords(u, units_m, tiles_n, GROUP_M / cl);
        (um * cl + rank, tn)
    };
    let wg = tid / 128;
    if wg == 0 {
        // SAFETY: every thread of the producer warpgroup, convergently; the consumers'
        // increase (2 × 128 × 232) and this (128 × 40) fit the SM's 65 536 registers.
        unsafe { wgmma::setmaxnreg_dec::<40>() };
        if tid == 0 {
            x.prefetch();
            w.prefetch();
            let mut st = RingState::<STAGES>::producer();
            let mut unit = first;
            while unit < units {
                let (tm, tn) = tm_of(unit);
                let live = tm < tiles_m;
                for ks in 0..k_steps {
                    let s = st.index();
                    empty(s).wait_ring(&st);
                    let a = base + s as u32 * STAGE_BYTES;
                    // SAFETY: the stage is free in every block of the cluster (all their
                    // consumers released it); this block's full barrier expects the bytes
                    // that reach this block: its `x` box (none for a tile below `out`) and
                    // the whole `w` tile, `WB` rows from each block of the cluster, each
                    // block's rows multicast to the same offset in all of them.
                    unsafe {
                        full(s).arrive_expect_tx(if live { STAGE_BYTES } else { B_BYTES });
                        let bar = full(s).shared_addr();
                        if live {
                            x.load(a, bar, &[(tm * BM) as i32, (ks * BK) as i32]);
                        }
                        let at = [(tn * BN + rank * WB) as i32, (ks * BK) as i32];
                        if cl > 1 {
                            w.load_multicast(a + A_BYTES + rank * WB * 128, bar, &at, 0b11);
                        } else {
                            w.load(a + A_BYTES, bar, &at);
                        }
                    }
                    st.advance();
                }
                unit += step;
            }
        }
    } else {
        // SAFETY: every thread of each consumer warpgroup, convergently (see above).
        unsafe { wgmma::setmaxnreg_inc::<232>() };
        let cw = wg - 1;
        let t = tid % 128;
        let mut st = RingState::<STAGES>::consumer();
        // A stage is released to every block whose producer writes it.
        let release = |p: usize| {
            if t == 0 {
                empty(p).arrive();
                if cl > 1 {
                    // SAFETY: the peer of a pair (the cluster's size, asserted); its barriers
                    // were initialised before the cluster barrier above, and it waits at the
                    // cluster barrier at the end until this block is done.
                    unsafe { empty(p).arrive_cluster(rank ^ 1) };
                }
            }
        };
        let mut unit = first;
        while unit < units {
            let (tm, tn) = tm_of(unit);
            let mut acc = [0f32; 128];
            wgmma::fence_operand(&mut acc);
            // The stage whose batch is still in flight (released after the next wait).
            let mut pending: Option<usize> = None;
            for ks in 0..k_steps {
                let s = st.index();
                full(s).wait_ring(&st);
                let a = base + s as u32 * STAGE_BYTES + cw * 64 * 128;
                let b = base + s as u32 * STAGE_BYTES + A_BYTES;
                // Aligned stages inside the block's shared memory: a refused descriptor
                // aborts (a bug), it never reads another address.
                let da = desc(MatrixDesc::k_major(a, Swizzle::B128));
                let db = desc(MatrixDesc::k_major(b, Swizzle::B128));
                // SAFETY: the whole warpgroup runs this; the stage was filled by TMA (its
                // full barrier waited on) and is not refilled before this batch's wait; the
                // accumulators are pinned around the asynchronous window.
                // (`unroll!` writes K out as each literal, 0 included: `32 * K` and `K > 0`
                // are the k steps' descriptor offsets and first-step test, alike for each.)
                #[allow(clippy::erasing_op, clippy::identity_op, clippy::eq_op)]
                unsafe {
                    wgmma::fence();
                    ferrocuda_device::unroll!(K in 0..4 {
                        E::mma(
                            &mut acc,
                            da.advance(32 * K),
                            db.advance(32 * K),
                            ks > 0 || K > 0,
                        );
                    });
                    wgmma::commit_group();
                    wgmma::wait_group::<1>();
                }
                wgmma::fence_operand(&mut acc);
                if let Some(p) = pending {
                    release(p);
                }
                pending = Some(s);
                st.advance();
            }
            // The epilogue's loads (the bias of the thread's columns) go out before the wait
            // for the last MMAs and arrive under them. (A branch of their own in the
            // epilogues that load: ptxas places a `wgmma` wait at the top of its basic block.)
            let cols = sink.cols(tn * BN, t);
            // SAFETY: as above.
            unsafe { wgmma::wait_group::<0>() };
            wgmma::fence_operand(&mut acc);
            if let Some(p) = pending {
                release(p);
            }
            let row0 = tm * BM + cw * 64;
            let col0 = tn * BN;
            match sink.whole(row0, col0, 64, BN) {
                // The consumer's 64 rows of the tile inside `out`, contiguous aligned rows:
                // one base pointer, 8 bytes per store. The whole warpgroup takes this branch
                // (`row0`, `col0` are its own).
                // SAFETY: the slice `whole` checked; every consumer thread; one writer each.
                Some(tile) => unsafe { sink.put_slice(tile, &acc, &cols, t) },
                // An edge tile or any other layout: each pair checked against `out`.
                None => acc.each_pair(|r, v0, v1| {
                    let (row, col) = wgmma::acc_coords(t, r);
                    sink.store(row0 + row, col0 + col, v0, v1);
                }),
            }
            unit += step;
        }
    }
    if cl > 1 {
        // Neither block exits while the other may still arrive on its barriers.
        cluster::sync();
    }
}
