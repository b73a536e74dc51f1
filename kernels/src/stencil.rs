//! `stencil5`: the 2-D 5-point Laplacian with zero padding,
//! `out[i, j] = x[i−1, j] + x[i+1, j] + x[i, j−1] + x[i, j+1] − 4·x[i, j]`, where `x` is 0
//! outside the array — every element of `out` is written (a 1×1 array gives `−4·x`).
//!
//! The sum is evaluated left to right in the element type, `(((up + down) + left) + right) −
//! 4x`, without fused multiply-adds, so results equal NumPy's `x[:-2] + x[2:] + …` on the
//! zero-padded array bit for bit.
//!
//! # Schedule
//!
//! When both arrays have contiguous, 16-byte aligned rows of a whole number of vectors, each
//! warp sweeps a strip of 64 rows × 32 vectors (128 `f32` columns) down the array. Every input
//! row is read once, as one 16-byte vector per lane, eight rows at a time (eight loads in
//! flight per lane), then eight output rows are written: the rows above and below come from
//! registers, the left and right neighbours from the adjacent lanes (`shfl.sync`), and the two
//! columns beyond the strip's edges from one extra element load by the first and the last
//! lane. The halo lives in registers and shuffles rather than in shared memory: the same
//! reuse, no barrier. Strips are ordered along the rows: the warps of a block, and the blocks
//! that run together, read whole stretches of each row (a strip's two halo rows, shared with
//! the bands above and below, which run at about the same time, mostly come from L2). Any
//! other layout runs one thread per element, each reading its five inputs (cached).
//!
//! Why this schedule (measured against a copy of the same bytes): eight rows in flight per lane
//! beat one, and ordering the strips along the rows gained more than the rows in flight did
//! (BENCHMARKS.md, the `stencil5` goal, and the gallery's second pass it links). The order
//! matters because concurrent warps reading 512-byte pieces of rows far apart scatter the DRAM
//! accesses.

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::{kernel, View, ViewMut};

/// Rows per warp strip.
#[cfg(target_arch = "nvptx64")]
const STRIP_ROWS: usize = 64;
/// Rows each lane loads at once (in flight together) before it writes as many output rows.
#[cfg(target_arch = "nvptx64")]
const P: usize = 8;

#[cfg(target_arch = "nvptx64")]
trait Real:
    Element + warp::Shuffle + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
    const ZERO: Self;
    const FOUR: Self;
}
#[cfg(target_arch = "nvptx64")]
impl Real for f32 {
    const ZERO: Self = 0.0;
    const FOUR: Self = 4.0;
}
#[cfg(target_arch = "nvptx64")]
impl Real for f64 {
    const ZERO: Self = 0.0;
    const FOUR: Self = 4.0;
}

/// The 5-point Laplacian of `c` given its four neighbours, in the documented order.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn laplace<T: Real>(up: T, down: T, left: T, right: T, c: T) -> T {
    up + down + left + right - T::FOUR * c
}

/// One lane's vector of a row, and the strip's two edge columns (lane 0: the left one,
/// lane 31: the right one; 0 elsewhere and outside the array).
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
struct Row<T: Copy, const L: usize> {
    v: [T; L],
    halo: T,
}

/// `out = ∇²x` with zero padding; see the module documentation.
///
/// # Safety
///
/// Kernel-launch context; `x` and `out` have one shape and do not overlap.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn stencil5<T: Real, const L: usize>(x: View<T, 2>, out: ViewMut<T, 2>) {
    let [rows, cols] = x.shape();
    let ([s0, s1], [o0, o1]) = (x.indexer().strides, out.indexer().strides);
    let size = core::mem::size_of::<T>();
    let aligned = |p: usize, row: isize| p.is_multiple_of(16) && (row * size as isize) % 16 == 0;
    let bt = thread::block_threads() as usize;
    let fast = L * size == 16
        && s1 == 1
        && o1 == 1
        && cols % L == 0
        && bt.is_multiple_of(32)
        && aligned(x.as_ptr() as usize, s0)
        && aligned(out.as_mut_ptr() as usize, o0);
    if !fast {
        let (tid, threads) = thread_rank();
        let get = |i: usize, j: usize| {
            // SAFETY: (i, j) in bounds.
            unsafe { x.read_at(i as isize * s0 + j as isize * s1) }
        };
        let mut e = tid;
        while e < rows * cols {
            let (i, j) = (e / cols, e % cols);
            let up = if i > 0 { get(i - 1, j) } else { T::ZERO };
            let down = if i + 1 < rows { get(i + 1, j) } else { T::ZERO };
            let left = if j > 0 { get(i, j - 1) } else { T::ZERO };
            let right = if j + 1 < cols { get(i, j + 1) } else { T::ZERO };
            let y = laplace(up, down, left, right, get(i, j));
            // SAFETY: (i, j) in bounds; one thread per element.
            unsafe { out.write_at(i as isize * o0 + j as isize * o1, y) };
            e += threads;
        }
        return;
    }
    let width = 32 * L;
    let (col_strips, row_strips) = (cols.div_ceil(width), rows.div_ceil(STRIP_ROWS));
    let lane = thread::rank_in_block() as usize % 32;
    let warps_per_block = bt / 32;
    let total_warps = blocks() * warps_per_block;
    let mut strip = block_rank() * warps_per_block + thread::rank_in_block() as usize / 32;
    while strip < col_strips * row_strips {
        // Horizontally adjacent strips are consecutive: the warps of a block, and the blocks
        // that run together, read whole stretches of each row.
        let (rs, cs) = (strip / col_strips, strip % col_strips);
        let (r0, c0) = (rs * STRIP_ROWS, cs * width);
        let c = c0 + lane * L;
        // Row `i` (or zeros outside the array).
        let load = |i: isize| -> Row<T, L> {
            let mut row = Row {
                v: [T::ZERO; L],
                halo: T::ZERO,
            };
            if i >= 0 && (i as usize) < rows {
                // SAFETY: row i exists.
                let base = unsafe { x.as_ptr().offset(i * s0) };
                if c < cols {
                    // SAFETY: columns c.. of row i exist (checked); the vector is whole and
                    // aligned (`fast`).
                    row.v = unsafe { (base.add(c) as *const Chunk<T, L>).read() }.0;
                }
                if lane == 0 && c0 > 0 {
                    // SAFETY: column c0 - 1 of row i exists (checked).
                    row.halo = unsafe { base.add(c0 - 1).read() };
                }
                if lane == 31 && c0 + width < cols {
                    // SAFETY: column c0 + width of row i exists (checked).
                    row.halo = unsafe { base.add(c0 + width).read() };
                }
            }
            row
        };
        let r_end = (r0 + STRIP_ROWS).min(rows);
        // The rows above and at the next output row; each step loads the P rows below them
        // at once (P loads in flight per lane), then writes P output rows.
        let (mut up, mut mid) = (load(r0 as isize - 1), load(r0 as isize));
        let mut r = r0;
        while r < r_end {
            let mut below = [up; P];
            for_lanes!(P, |p| below[p] = load((r + 1 + p) as isize));
            for_lanes!(P, |p| {
                let (u, m) = if p == 0 {
                    (up, mid)
                } else if p == 1 {
                    (mid, below[0])
                } else {
                    (below[p - 2], below[p - 1])
                };
                let d = below[p];
                let v = m.v;
                let from_left = warp::shfl_up_sync(warp::FULL_MASK, v[L - 1], 1);
                let from_right = warp::shfl_down_sync(warp::FULL_MASK, v[0], 1);
                let left_edge = if lane == 0 { m.halo } else { from_left };
                let right_edge = if lane == 31 { m.halo } else { from_right };
                if c < cols && r + p < r_end {
                    let mut y = Chunk([T::ZERO; L]);
                    for_lanes!(L, |j| {
                        let left = if j == 0 { left_edge } else { v[j - 1] };
                        let right = if j == L - 1 { right_edge } else { v[j + 1] };
                        y.0[j] = laplace(u.v[j], d.v[j], left, right, v[j]);
                    });
                    // SAFETY: row r + p exists, vector c is whole and aligned; one lane per
                    // vector.
                    unsafe {
                        (out.as_mut_ptr().offset((r + p) as isize * o0).add(c) as *mut Chunk<T, L>)
                            .write(y)
                    };
                }
            });
            const { assert!(P >= 2 && STRIP_ROWS.is_multiple_of(P)) };
            (up, mid) = (below[P - 2], below[P - 1]);
            r += P;
        }
        strip += total_warps;
    }
}

macro_rules! stencils {
    ($($name:ident: $t:ty, $lanes:literal;)*) => {$(
        /// `out[i, j] = x[i−1, j] + x[i+1, j] + x[i, j−1] + x[i, j+1] − 4·x[i, j]`, zero outside
        /// `x` (see the module documentation).
        ///
        /// `x`, `out`: 2-D arrays of one shape, any strides, not overlapping (fast schedule:
        /// contiguous, 16-byte aligned rows of a multiple of 16 bytes). Any shape, 1×1 and
        /// empty included. Exact: equal to the left-to-right sum in the element type. Grid:
        /// any (automatic: one warp per 64×128 strip); blocks: any (the fast schedule needs a
        /// multiple of 32 threads).
        #[kernel(family = "stencil5", same_shape(x, out), items_per_thread = 256,
                 require(out.ptr() != x.ptr(), "out must not be x: the stencil reads neighbours"))]
        pub unsafe fn $name(x: View<$t, 2>, out: ViewMut<$t, 2>) {
            // SAFETY: launched as a kernel over host-validated views of one shape.
            unsafe { stencil5::<$t, $lanes>(x, out) }
        }
    )*};
}
stencils! {
    stencil5_f32: f32, 4;
    stencil5_f64: f64, 2;
}
