//! `normalize`: `out = x / Σx` (NumPy's `x / x.sum()`) in **one** cooperative launch, and its
//! two-launch counterpart, `sum` then `div_by` (`out = x / d[0]`).
//!
//! # One launch, a grid-wide barrier in the middle
//!
//! `normalize_*` is `#[kernel(cooperative)]`: its grid is one resident wave (the launcher's
//! automatic grid; a caller's grid may be smaller, never larger), so its blocks may wait for
//! each other at a [`GridBarrier`](ferrocuda_device::grid::GridBarrier):
//!
//! 1. every thread folds its grid-stride share of `x` (16-byte vector loads), each block
//!    reduces its threads' values and stores its partial sum in the launcher-provided
//!    workspace `partials` (one element per block);
//! 2. grid barrier: every partial is written, and visible to every block;
//! 3. every block reduces all partials, in block order — the same additions in the same
//!    order, so every block holds the same total, bit for bit — and divides its grid-stride
//!    share of `x` by it into `out`.
//!
//! Its workspaces persist (`persist(bar, partials)`): the grid barrier's counter leaves every
//! barrier with its low 31 bits as it found them (zero), and each launch writes every partial
//! before any block reads one, so no zero-fill precedes a launch (the launcher fills a
//! workspace only when it is new to the kernel). The barrier is declared first, so that its
//! word sits at offset 0 of the workspace whatever the grid (the partials' length follows it).
//!
//! Against `sum` + `div_by` it saves a launch and the reduction's last-block tail, and reads
//! the same bytes (`x` twice, the second time often from L2 for arrays that fit it). NaN and
//! infinities propagate as in NumPy (`x / 0` is ±inf or NaN).
//!
//! **Determinism**: as `sum`'s, the additions' order depends only on the length, the grid and
//! the block, so one device gives bitwise-equal results run to run with the automatic
//! configuration. The two versions use different grids, so their sums may differ in the last
//! bits (both within a few ε·Σ|x| of the exact sum).

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::grid::GridBarrier;
use ferrocuda_device::{kernel, Scratch, Slice, SliceMut};

/// `out = x / Σx` in one launch; see the module documentation.
///
/// # Safety
///
/// Kernel-launch context of a cooperative launch (every block resident at once), `partials`
/// holding at least one element per block, `bar` the launch's grid barrier, and `x`, `out` of
/// equal lengths (the kernel's declarations).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn normalize<T, const L: usize>(
    x: Slice<T>,
    out: SliceMut<T>,
    partials: Scratch<T>,
    bar: GridBarrier,
) where
    T: Reducible + core::ops::Div<Output = T>,
    block::Sum: ReduceOp<T>,
{
    let (tid, threads) = thread_rank();
    // SAFETY: a host-validated slice.
    let mine = unsafe { fold::<T, T, L>(x, tid, threads, T::ZERO, |v| v, |a, b| a.add(b)) };
    let scratch = block_scratch::<T>();
    // SAFETY: every thread of the block calls, with the block's shared scratch.
    let total = unsafe { block::reduce(mine, block::Sum, scratch) };
    let (b, nb) = (block_rank(), blocks());
    let partials = partials.as_slice_mut();
    if thread::rank_in_block() == 0 {
        // SAFETY: b < nb <= partials.len() (the scratch declaration); one writer per element.
        unsafe { partials.write_unchecked(b, total) };
    }
    // Every block's partial is written and visible to every thread after this.
    bar.sync();
    let bt = thread::block_threads() as usize;
    let mut v = T::ZERO;
    let mut i = thread::rank_in_block() as usize;
    while i < nb {
        // SAFETY: i < nb <= partials.len(); written before the barrier, read-only since.
        v = v.add(unsafe { partials.get_unchecked(i) });
        i += bt;
    }
    // SAFETY: the whole block is here; the scratch may be reused by back-to-back calls.
    let sum = unsafe { block::reduce(v, block::Sum, scratch) };
    // SAFETY: `out` has `x`'s length (same_shape); each element written by one thread.
    unsafe { unary::<T, L>(x, out, |v| v / sum) };
}

macro_rules! normalizers {
    ($($name:ident, $div:ident: $t:ty, $lanes:literal;)*) => {$(
        /// `out = x / Σx` (NumPy's `x / x.sum()`) in one cooperative launch: partial sums,
        /// a grid-wide barrier, then every block divides its share by the total (see the
        /// module documentation).
        ///
        /// `x`, `out`: C-contiguous arrays of one shape (any length; empty: nothing to do).
        /// Grid: at most one resident wave (automatic: exactly one); block: any. Both
        /// workspaces persist between launches on a stream (no zero-fill before each): the
        /// barrier's counter is as every launch found it, the partials are written before
        /// they are read; the barrier comes first, at a fixed offset whatever the grid.
        #[kernel(family = "normalize", cooperative, same_shape(x, out),
                 scratch(partials = blocks), persist(bar, partials))]
        pub unsafe fn $name(x: Slice<$t>, out: SliceMut<$t>, bar: GridBarrier,
                            partials: Scratch<$t>) {
            // SAFETY: launched cooperatively, with the declared workspaces and shapes.
            unsafe { normalize::<$t, $lanes>(x, out, partials, bar) }
        }

        /// `out = x / d[0]`: the second launch of the two-launch `normalize` (`sum` into `d`,
        /// then this), and a division by a device scalar in its own right.
        ///
        /// `x`, `out`: C-contiguous arrays of one shape; `d`: one element. Grid and block: any.
        #[kernel(family = "div_by", same_shape(x, out), items_per_thread = $lanes,
                 require(d.len() == 1, "d holds the divisor"))]
        pub unsafe fn $div(x: Slice<$t>, d: Slice<$t>, out: SliceMut<$t>) {
            #[cfg(target_arch = "nvptx64")]
            {
                // SAFETY: `d` has one element (the requirement).
                let s = unsafe { d.get_unchecked(0) };
                // SAFETY: `out` has `x`'s length; each element written by one thread.
                unsafe { unary::<$t, $lanes>(x, out, |v| v / s) };
            }
        }
    )*};
}
normalizers! {
    normalize_f32, div_by_f32: f32, 4;
    normalize_f64, div_by_f64: f64, 2;
}
