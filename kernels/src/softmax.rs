//! `softmax` and `log_softmax` along the last axis of a 2-D array, numerically stable
//! (the row maximum is subtracted before `exp`).
//!
//! Three schedules, chosen per launch from the row length (block-uniform):
//!
//! * rows of up to `32 · 32` elements: **one warp per row**, the row in registers (32 values
//!   per lane), the maximum and the sum by warp shuffles — no shared memory, no barrier;
//! * rows of up to `16 · block` elements (4096 with 256 threads): **one block per row**, the
//!   row in registers (16 values per thread), block reductions;
//! * longer rows: one block per row **streaming** the row twice — an online pass (running
//!   maximum and rescaled sum per thread, combined across the block) and a writing pass.
//!
//! The register schedules read rows once, in 16-byte vectors: they take arrays whose rows are
//! contiguous, 16-byte aligned and a whole number of vectors long (a multiple of 4 `f32`,
//! 8 `f16`, 2 `f64`) — the common layouts; any other layout is streamed, element by element
//! (coalesced when the inner stride is 1). `f16` and `bf16` data are computed in `f32`. Special values follow PyTorch: a row containing NaN
//! or `+∞`, or only `−∞`, becomes NaN.

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::{kernel, View, ViewMut};

/// Values per lane of the warp schedule: rows of up to `32 · WARP_VALS` elements get a warp.
/// The kernels' `items_per_thread = 32` tells the automatic grid (`grid = "rows"`) the same.
#[cfg(target_arch = "nvptx64")]
const WARP_VALS: usize = 32;
/// Values per thread of the block schedule.
#[cfg(target_arch = "nvptx64")]
const BLOCK_VALS: usize = 16;

/// The rows of two arrays whose rows are contiguous, 16-byte aligned and a whole number of
/// vectors long: the register schedules' addressing, where every access of a thread is its
/// row's base plus a constant offset.
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
struct Rows<T> {
    x: *const T,
    out: *mut T,
    /// Row strides (elements).
    xs: isize,
    os: isize,
    cols: usize,
}

#[cfg(target_arch = "nvptx64")]
impl<T: Storage> Rows<T> {
    /// The `N` values of row `r` this thread holds: vectors of `L` elements, vector
    /// `first + k·step` for `k < N / L`. Missing columns read as `−∞`.
    ///
    /// # Safety
    ///
    /// `r` is a row of both arrays.
    #[inline(always)]
    unsafe fn load<const N: usize, const L: usize>(
        &self,
        r: usize,
        first: usize,
        step: usize,
    ) -> [T::Acc; N] {
        let mut v = [T::Acc::NEG_INF; N];
        // SAFETY: the caller's row; columns are checked below.
        let row = unsafe { self.x.offset(r as isize * self.xs) };
        for_lanes!(N / L, |k| {
            let c = (first + k * step) * L;
            if c < self.cols {
                // SAFETY: the row's vectors are whole and aligned; c < cols.
                let chunk = unsafe { (row.add(c) as *const Chunk<T, L>).read() };
                for_lanes!(L, |j| v[k * L + j] = chunk.0[j].widen());
            }
        });
        v
    }

    /// Stores the values [`load`](Self::load) read, at the same columns.
    ///
    /// # Safety
    ///
    /// As `load`; this thread alone writes these columns of row `r`.
    #[inline(always)]
    unsafe fn store<const N: usize, const L: usize>(
        &self,
        r: usize,
        first: usize,
        step: usize,
        v: [T::Acc; N],
    ) {
        // SAFETY: the caller's row; columns are checked below.
        let row = unsafe { self.out.offset(r as isize * self.os) };
        for_lanes!(N / L, |k| {
            let c = (first + k * step) * L;
            if c < self.cols {
                let mut chunk = Chunk([T::narrow(v[k * L]); L]);
                for_lanes!(L, |j| chunk.0[j] = T::narrow(v[k * L + j]));
                // SAFETY: as in `load`.
                unsafe { (row.add(c) as *mut Chunk<T, L>).write(chunk) };
            }
        });
    }
}

/// Turns a row's values into its softmax (or log-softmax) given the row's maximum `m` and the
/// reduction `sum` of a thread's `Σ exp(v − m)` over the row.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn finish<A: Acc, const N: usize, const LOG: bool>(v: &mut [A; N], m: A, sum: impl FnOnce(A) -> A) {
    let mut s = A::ZERO;
    if LOG {
        for_lanes!(N, |k| s = s + (v[k] - m).exp());
        let shift = m + sum(s).ln();
        for_lanes!(N, |k| v[k] = v[k] - shift);
    } else {
        for_lanes!(N, |k| {
            v[k] = (v[k] - m).exp();
            s = s + v[k];
        });
        let inv = sum(s).recip();
        for_lanes!(N, |k| v[k] = v[k] * inv);
    }
}

/// The maximum of a thread's values (NaN ignored here; it propagates through the sum).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn max_of<A: Acc, const N: usize>(v: &[A; N]) -> A {
    let mut m = A::NEG_INF;
    for_lanes!(N, |k| m = m.max(v[k]));
    m
}

/// A reduction over the lanes of this thread's (full) warp, returned to every lane.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn warp_all<A: Acc>(v: A, op: impl Fn(A, A) -> A) -> A {
    let mut v = v;
    for i in 0..5 {
        v = op(v, warp::shfl_xor_sync(warp::FULL_MASK, v, 1 << i));
    }
    v
}

/// One online step: the running maximum and the sum of `exp(· − max)` after seeing `x`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn online<A: Acc>((m, s): (A, A), x: A) -> (A, A) {
    #[allow(clippy::eq_op)]
    let nan = x != x;
    let mn = m.max(x);
    if nan {
        (m, x)
    } else if mn == A::NEG_INF {
        (m, s)
    } else {
        (mn, s * (m - mn).exp() + (x - mn).exp())
    }
}

/// Row-wise softmax (`LOG`: log-softmax) of `x` into `out`; see the module documentation.
///
/// # Safety
///
/// Kernel-launch context; `x` and `out` have the same shape (the kernel's declaration).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn softmax<T: Storage, const L: usize, const LOG: bool>(x: View<T, 2>, out: ViewMut<T, 2>)
where
    block::Max: ReduceOp<T::Acc>,
    block::Sum: ReduceOp<T::Acc>,
{
    let [rows, cols] = x.shape();
    let size = core::mem::size_of::<T>();
    let ([s0, s1], [o0, o1]) = (x.indexer().strides, out.indexer().strides);
    // `%` rather than is_multiple_of: the latter changes these kernels' generated code.
    #[allow(clippy::manual_is_multiple_of)]
    let aligned = |p: usize, row: isize| p % 16 == 0 && (row * size as isize) % 16 == 0;
    let rw = Rows {
        x: x.as_ptr(),
        out: out.as_mut_ptr(),
        xs: s0,
        os: o0,
        cols,
    };
    // The register schedules take rows of whole, aligned vectors; other layouts stream.
    let vec = L * size == 16
        && s1 == 1
        && o1 == 1
        && cols % L == 0
        && aligned(x.as_ptr() as usize, s0)
        && aligned(out.as_mut_ptr() as usize, o0);
    let offsets = |r: usize, c: usize| {
        (
            r as isize * s0 + c as isize * s1,
            r as isize * o0 + c as isize * o1,
        )
    };
    let bt = thread::block_threads() as usize;
    let rank = thread::rank_in_block() as usize;
    let scratch = block_scratch::<T::Acc>();
    #[allow(clippy::manual_is_multiple_of)] // as `aligned`
    if vec && bt % 32 == 0 && cols <= 32 * WARP_VALS {
        // One warp per row.
        let (warp_id, lane) = (rank / 32, rank % 32);
        let total = blocks() * (bt / 32);
        let mut r = block_rank() * (bt / 32) + warp_id;
        while r < rows {
            // SAFETY: r < rows; lane `lane` of one warp per row owns its columns.
            let mut v = unsafe { rw.load::<WARP_VALS, L>(r, lane, 32) };
            let m = warp_all(max_of(&v), |a, b| a.max(b));
            finish::<_, WARP_VALS, LOG>(&mut v, m, |s| warp_all(s, |a, b| a + b));
            // SAFETY: as the load.
            unsafe { rw.store::<WARP_VALS, L>(r, lane, 32, v) };
            r += total;
        }
    } else if vec && cols <= bt * BLOCK_VALS {
        // One block per row, the row in registers.
        let mut r = block_rank();
        while r < rows {
            // SAFETY: r < rows; thread `rank` of one block per row owns its columns.
            let mut v = unsafe { rw.load::<BLOCK_VALS, L>(r, rank, bt) };
            // SAFETY: the whole block is here (a block-uniform loop).
            let m = unsafe { block::reduce(max_of(&v), block::Max, scratch) };
            // SAFETY: as the reduction above.
            finish::<_, BLOCK_VALS, LOG>(&mut v, m, |s| unsafe {
                block::reduce(s, block::Sum, scratch)
            });
            // SAFETY: as the load.
            unsafe { rw.store::<BLOCK_VALS, L>(r, rank, bt, v) };
            r += blocks();
        }
    } else {
        // One block per row, streamed: an online pass, then a writing pass.
        let mut r = block_rank();
        while r < rows {
            let mut st = (T::Acc::NEG_INF, T::Acc::ZERO);
            let mut c = rank;
            while c < cols {
                // SAFETY: (r, c) is in bounds.
                st = online(st, unsafe { x.read_at(offsets(r, c).0) }.widen());
                c += bt;
            }
            // SAFETY: the whole block is here (a block-uniform loop).
            let m = unsafe { block::reduce(st.0, block::Max, scratch) };
            let mine = if st.0 == T::Acc::NEG_INF {
                st.1
            } else {
                st.1 * (st.0 - m).exp()
            };
            // SAFETY: as the reduction above.
            let total = unsafe { block::reduce(mine, block::Sum, scratch) };
            let (shift, inv) = (m + total.ln(), total.recip());
            let mut c = rank;
            while c < cols {
                let (xo, oo) = offsets(r, c);
                // SAFETY: (r, c) is in bounds; this thread alone writes it.
                unsafe {
                    let v = x.read_at(xo).widen();
                    let y = if LOG { v - shift } else { (v - m).exp() * inv };
                    out.write_at(oo, T::narrow(y));
                }
                c += bt;
            }
            r += blocks();
        }
    }
}

macro_rules! softmaxes {
    ($($family:literal, $name:ident: $t:ty, $lanes:literal, $log:literal;)*) => {$(
        #[doc = concat!("`out = ", $family, "(x)` along the last axis (rows) of a 2-D array, \
                         numerically stable (see the module documentation).")]
        ///
        /// `x`, `out`: 2-D arrays of one shape, any strides (16-byte vectors when both have
        /// contiguous, aligned rows); `out` may be `x`. Any shape, empty included. Computed in
        /// `f32` for `f16`/`bf16`/`f32` data (`f64` for `f64`): within a few ulp of the correctly rounded
        /// result (libdevice `exp`/`log`, one reciprocal). Grid and block: any (automatic: a
        /// warp per row of up to 1024 elements, a block per longer row — every row has its
        /// worker from the start; rows up to 1024 elements need blocks of a multiple of 32
        /// threads for the warp schedule, otherwise the block schedules run).
        #[kernel(family = $family, same_shape(x, out), grid = "rows",
                 items_per_thread = 32)]
        pub unsafe fn $name(x: View<$t, 2>, out: ViewMut<$t, 2>) {
            // SAFETY: launched as a kernel over host-validated views of one shape.
            unsafe { softmax::<$t, $lanes, $log>(x, out) }
        }
    )*};
}
softmaxes! {
    "softmax", softmax_f32: f32, 4, false;
    "softmax", softmax_f64: f64, 2, false;
    "softmax", softmax_f16: f16, 8, false;
    "log_softmax", log_softmax_f32: f32, 4, true;
    "log_softmax", log_softmax_f64: f64, 2, true;
    "log_softmax", log_softmax_f16: f16, 8, true;
    "softmax", softmax_bf16: bf16, 8, false;
    "log_softmax", log_softmax_bf16: bf16, 8, true;
}
