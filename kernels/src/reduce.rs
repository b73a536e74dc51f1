//! Reductions: `sum`, `min`, `max` of a whole array in one launch, and `sum_rows` (the sum
//! along the last axis of a 2-D array).
//!
//! # Whole-array reductions: one launch, last block finishes
//!
//! Every thread folds its grid-stride share of `x` (16-byte vector loads, independent
//! accumulators); each block reduces its threads' values (`ferrocuda_device::block::reduce`)
//! and stores its partial result in the launcher-provided workspace `partials` (one element
//! per block); thread 0 then takes a ticket from the counter `ticket` (an acquire-release,
//! device-scope atomic). The block that draws the last ticket reduces all partials, in block
//! order, writes `out[0]`, and sets the counter back to zero.
//!
//! **The workspaces persist between launches** (`#[kernel(persist(ticket, partials))]`):
//! every launch leaves the counter at zero, as the next launch on the stream needs it, and
//! writes each partial before it reads it, so the launcher zero-fills nothing before a launch
//! (only when the workspace is new to the kernel, and once every 2^20 launches) — no memset
//! on the stream beside each reduction, and nothing launched twice. The counter comes first
//! in the workspace (declared first), so that its place does not move with the grid (the
//! partials' length).
//!
//! **Determinism**: the combination order depends only on the array length, the grid and the
//! block size, so results are bitwise reproducible run to run on one device with the automatic
//! launch configuration (which depends only on the length and the device) — for floats too.
//! Float sums are not bitwise equal to NumPy's pairwise sum: both err by O(log n · ε) relative
//! to `Σ|x|` in practice.
//!
//! NaN propagates (`min`/`max` return NaN if any element is NaN, as NumPy's); integer sums
//! wrap (`sum` of `int32` accumulates and returns `int64`, as NumPy's).

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::{kernel, Scratch, Slice, SliceMut, View};

/// Reduces `x` with `op` (after `map`) into `out[0]`; see the module documentation.
///
/// # Safety
///
/// Kernel-launch context; `partials` holds at least one element per block and `ticket` one
/// counter, zeroed or as this kernel's previous launch on the stream left it (zero: the
/// kernel's `scratch` and `persist` declarations); `out` has one element.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn reduce_all<T, A, const L: usize>(
    x: Slice<T>,
    out: SliceMut<A>,
    partials: Scratch<A>,
    ticket: Scratch<u32>,
    identity: A,
    map: impl Fn(T) -> A,
    op: impl ReduceOp<A>,
) where
    T: Element,
    A: ferrocuda_device::atomic::Atomic + warp::Shuffle + Element,
{
    let (tid, threads) = thread_rank();
    // SAFETY: a host-validated slice.
    let mine = unsafe { fold::<T, A, L>(x, tid, threads, identity, map, |a, b| op.combine(a, b)) };
    let scratch = block_scratch::<A>();
    // SAFETY: every thread of the block calls, with the block's shared scratch.
    let total = unsafe { block::reduce(mine, op, scratch) };
    // SAFETY: the workspaces are only accessed atomically in this kernel.
    let (partials, ticket) = unsafe {
        (
            AtomicSlice::from_scratch(partials),
            AtomicSlice::from_scratch(ticket),
        )
    };
    let (b, nb) = (block_rank(), blocks());
    let mut last = false;
    // The workspaces' elements below are in bounds by the contract (b, i < nb <=
    // partials.len(); one ticket), so they are reached unchecked: a bounds check's trap path
    // costs registers in every thread.
    if thread::rank_in_block() == 0 {
        // SAFETY: in bounds, as said above.
        unsafe { partials.at_unchecked(b) }.store(total, Order::Relaxed, Scope::Device);
        // Release: this block's partial is visible to whoever draws a later ticket.
        // SAFETY: in bounds, as said above.
        let t = unsafe { ticket.at_unchecked(0) }.fetch_add(1, Order::AcqRel, Scope::Device);
        last = t as usize == nb - 1;
    }
    // Block-uniform (a barrier's reduction): the whole block takes the branch or none of it.
    if thread::sync_threads_or(last) {
        fence(Order::Acquire, Scope::Device);
        if thread::rank_in_block() == 0 {
            // Every block has drawn its ticket: the counter goes back to zero for the next
            // launch on the stream (`persist`; stream order makes the store visible to it).
            // SAFETY: in bounds, as said above.
            unsafe { ticket.at_unchecked(0) }.store(0, Order::Relaxed, Scope::Device);
        }
        let bt = thread::block_threads() as usize;
        let mut v = identity;
        let mut i = thread::rank_in_block() as usize;
        while i < nb {
            // SAFETY: i < nb.
            let p = unsafe { partials.at_unchecked(i) };
            v = op.combine(v, p.load(Order::Relaxed, Scope::Device));
            i += bt;
        }
        // SAFETY: the whole block is here (uniform branch); the scratch may be reused by
        // back-to-back block calls.
        let r = unsafe { block::reduce(v, op, scratch) };
        if thread::rank_in_block() == 0 {
            // SAFETY: `out` has one element (the kernel's requirement); one thread writes.
            unsafe { out.write_unchecked(0, r) };
        }
    }
}

/// `min` that propagates NaN (NumPy's `minimum`); for integers, plain `min`.
#[cfg(target_arch = "nvptx64")]
trait Extremes: Copy + PartialOrd {
    const MAX: Self;
    const MIN: Self;
    #[inline(always)]
    fn is_nan(self) -> bool {
        false
    }
    #[inline(always)]
    fn min_nan(self, o: Self) -> Self {
        if self.is_nan() || o.is_nan() {
            if self.is_nan() {
                self
            } else {
                o
            }
        } else if o < self {
            o
        } else {
            self
        }
    }
    #[inline(always)]
    fn max_nan(self, o: Self) -> Self {
        if self.is_nan() || o.is_nan() {
            if self.is_nan() {
                self
            } else {
                o
            }
        } else if o > self {
            o
        } else {
            self
        }
    }
}

#[cfg(target_arch = "nvptx64")]
macro_rules! extremes {
    (float $($t:ty),*) => {$(
        impl Extremes for $t {
            const MAX: Self = <$t>::INFINITY;
            const MIN: Self = <$t>::NEG_INFINITY;
            #[inline(always)]
            fn is_nan(self) -> bool { self != self }
        }
    )*};
    (int $($t:ty),*) => {$(
        impl Extremes for $t {
            const MAX: Self = <$t>::MAX;
            const MIN: Self = <$t>::MIN;
        }
    )*};
}
#[cfg(target_arch = "nvptx64")]
extremes!(float f32, f64);
#[cfg(target_arch = "nvptx64")]
extremes!(int i32, i64);

macro_rules! sums {
    ($($name:ident: $t:ty => $a:ty, $lanes:literal;)*) => {$(
        /// `out[0] = Σ x` in one launch (last block finishes; see the module documentation).
        ///
        /// `x`: a C-contiguous array of any shape and length (empty: `out[0] = 0`); `out`: one
        /// element (`int32` input sums into `int64`, as NumPy). Grid and block: any
        /// (automatic: one resident wave). Floats: deterministic for a given grid; within
        /// a few ε·Σ|x| of the exact sum.
        #[kernel(family = "sum", scratch(ticket = 1, partials = blocks), persist(ticket, partials),
                 require(out.len() == 1, "out holds the one result"))]
        pub unsafe fn $name(x: Slice<$t>, out: SliceMut<$a>, ticket: Scratch<u32>,
                            partials: Scratch<$a>) {
            // SAFETY: launched as a kernel with the declared workspaces.
            unsafe {
                reduce_all::<$t, $a, $lanes>(x, out, partials, ticket, <$a as Reducible>::ZERO,
                    Widen::<$a>::widen_to, block::Sum)
            }
        }
    )*};
}
sums! {
    sum_f32: f32 => f32, 4;
    sum_f64: f64 => f64, 2;
    sum_i32: i32 => i64, 4;
    sum_i64: i64 => i64, 2;
}

macro_rules! extrema {
    ($($family:literal, $name:ident: $t:ty, $lanes:literal, $id:ident, $f:ident;)*) => {$(
        #[doc = concat!("`out[0] = ", $family, "(x)` in one launch (last block finishes; see \
                         the module documentation).")]
        ///
        /// `x`: a C-contiguous, non-empty array of any shape (an empty one is refused, as
        /// NumPy refuses it); `out`: one element. NaN anywhere gives NaN. Grid and block: any
        /// (automatic: one resident wave). Exact.
        #[kernel(family = $family, scratch(ticket = 1, partials = blocks),
                 persist(ticket, partials),
                 require(out.len() == 1, "out holds the one result"),
                 require(x.len() > 0, "the reduction of an empty array has no identity"))]
        pub unsafe fn $name(x: Slice<$t>, out: SliceMut<$t>, ticket: Scratch<u32>,
                            partials: Scratch<$t>) {
            // SAFETY: launched as a kernel with the declared workspaces.
            unsafe {
                reduce_all::<$t, $t, $lanes>(x, out, partials, ticket, <$t as Extremes>::$id,
                    |v| v, |a: $t, b: $t| a.$f(b))
            }
        }
    )*};
}
extrema! {
    "min", min_f32: f32, 4, MAX, min_nan;
    "min", min_f64: f64, 2, MAX, min_nan;
    "min", min_i32: i32, 4, MAX, min_nan;
    "min", min_i64: i64, 2, MAX, min_nan;
    "max", max_f32: f32, 4, MIN, max_nan;
    "max", max_f64: f64, 2, MIN, max_nan;
    "max", max_i32: i32, 4, MIN, max_nan;
    "max", max_i64: i64, 2, MIN, max_nan;
}

/// Rows shorter than this are summed by one warp each, longer ones by one block each.
#[cfg(target_arch = "nvptx64")]
const WARP_ROW_MAX: usize = 4096;

/// `out[r] = Σ_c x[r, c]` for every row: one warp per row (rows up to [`WARP_ROW_MAX`]) or
/// one block per row, each walking its row with four independent accumulators.
///
/// # Safety
///
/// Kernel-launch context; `out.len() == x.shape()[0]` (the kernel's requirement).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn sum_rows<T: Reducible>(x: View<T, 2>, out: SliceMut<T>)
where
    block::Sum: ReduceOp<T>,
{
    let [rows, cols] = x.shape();
    let [s0, s1] = x.indexer().strides;
    // Four independent accumulators over `c = first, first + step, …`.
    let row_part = |r: usize, first: usize, step: usize| -> T {
        let base = r as isize * s0;
        let at = |c: usize| {
            // SAFETY: r < rows, c < cols: an in-bounds element.
            unsafe { x.read_at(base + c as isize * s1) }
        };
        let mut acc = [T::ZERO; 4];
        let mut c = first;
        while c + 3 * step < cols {
            // Four independent accumulators, each indexed by its constant k (unrolled).
            #[allow(clippy::needless_range_loop)]
            for k in 0..4 {
                acc[k] = acc[k].add(at(c + k * step));
            }
            c += 4 * step;
        }
        while c < cols {
            acc[0] = acc[0].add(at(c));
            c += step;
        }
        acc[0].add(acc[1]).add(acc[2].add(acc[3]))
    };
    let bt = thread::block_threads() as usize;
    let rank = thread::rank_in_block() as usize;
    if cols <= WARP_ROW_MAX {
        let warps_per_block = bt.div_ceil(32);
        let (warp, lane) = (rank / 32, rank % 32);
        let lanes = (bt - warp * 32).min(32);
        let total = blocks() * warps_per_block;
        let mut r = block_rank() * warps_per_block + warp;
        while r < rows {
            let s = block::warp_reduce(row_part(r, lane, lanes), block::Sum);
            if lane == 0 {
                // SAFETY: r < rows == out.len(); one warp per row.
                unsafe { out.write_unchecked(r, s) };
            }
            r += total;
        }
    } else {
        let scratch = block_scratch::<T>();
        let mut r = block_rank();
        while r < rows {
            // SAFETY: every thread of the block is here (the loop is block-uniform).
            let s = unsafe { block::reduce(row_part(r, rank, bt), block::Sum, scratch) };
            if rank == 0 {
                // SAFETY: r < rows == out.len(); one block per row.
                unsafe { out.write_unchecked(r, s) };
            }
            r += blocks();
        }
    }
}

macro_rules! row_sums {
    ($($name:ident: $t:ty;)*) => {$(
        /// `out[r] = Σ_c x[r, c]`: the sum along the last axis of a 2-D array.
        ///
        /// `x`: a 2-D array with any strides (coalesced when its rows are contiguous); `out`:
        /// one element per row. Rows of up to 4096 elements go to one warp each, longer rows to
        /// one block each. Grid and block: any (automatic: one resident wave). Deterministic;
        /// float error as a 4-way then tree summation.
        #[kernel(family = "sum_rows",
                 require(out.len() == x.shape[0], "out holds one sum per row of x"))]
        pub unsafe fn $name(x: View<$t, 2>, out: SliceMut<$t>) {
            // SAFETY: launched as a kernel over host-validated arrays of matching lengths.
            unsafe { sum_rows::<$t>(x, out) }
        }
    )*};
}
row_sums! {
    sum_rows_f32: f32;
    sum_rows_f64: f64;
}
