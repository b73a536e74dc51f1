//! CUB-style collectives: warp and block reductions and scans, generic over the element type
//! and the operation, correct for any block shape and size (1 to 1024 threads, 2-D and 3-D
//! blocks included, sizes that are not a multiple of 32 included). Device only.
//!
//! | CUB | here |
//! | --- | --- |
//! | `WarpReduce::Reduce` / `Sum` | [`warp_reduce`]`(v, op)` / `warp_reduce(v, Sum)` |
//! | `WarpScan::InclusiveScan` / `ExclusiveScan` | [`warp_inclusive_scan`], [`warp_exclusive_scan`] |
//! | `BlockReduce::Reduce` | [`reduce`] (result in **every** thread, not only thread 0) |
//! | `BlockScan::InclusiveScan` / `ExclusiveScan` | [`inclusive_scan`], [`exclusive_scan`] |
//! | `TempStorage` | `scratch`: a [`Scratch`] of [`scratch_len`]`(block_threads)` elements — `shared_array!(T, block::SCRATCH_LEN_MAX)` fits any block |
//!
//! The operation is a [`ReduceOp`]: one of [`Sum`], [`Min`], [`Max`], [`BitAnd`], [`BitOr`],
//! [`BitXor`], or any closure `Fn(T, T) -> T`. It must be associative; it need not be
//! commutative (every combination keeps the threads' order: `op(lower ranks, higher ranks)`).
//! Warp reductions of `u32`/`i32` with `Sum`, `Min`, `Max` and the bitwise operations use one
//! `redux.sync` (sm_80); everything else is a `shfl.sync` tree (5 steps per 32-bit word).
//!
//! # Thread model
//!
//! Threads are ranked by [`thread::rank_in_block`] (x fastest); warp `w` holds ranks
//! `32w .. 32w + 32`, and the last warp of a block whose size is not a multiple of 32 has
//! fewer lanes — the functions compute exact member masks for it.
//!
//! * Warp functions: every thread of the calling warp must call the same function with the
//!   same operation, together (not in a branch that separates lanes of one warp).
//! * Block functions: **every thread of the block** must call the same function with the same
//!   operation and the same `scratch`, never under a condition that differs between threads
//!   of the block: they contain `bar.sync` barriers (two, for blocks of more than one warp;
//!   none for a single warp). A violation hangs the block or corrupts the result.
//! * `scratch` is caller-provided memory the whole block sees — shared memory normally (global
//!   memory private to the block works too: the barriers order both). It must hold
//!   [`scratch_len`]`(block_threads)` elements (at most [`SCRATCH_LEN_MAX`] = 64, one pair per
//!   warp). Back-to-back block calls may reuse the same scratch without a barrier between
//!   them; using it for anything else afterwards needs a [`thread::sync_threads`] first (as
//!   CUB's `TempStorage`).
//!
//! ```ignore
//! // A block-wide sum.
//! let scratch = shared_array!(f32, block::SCRATCH_LEN_MAX);
//! // SAFETY: every thread of the block calls; nothing else uses `scratch`.
//! let total = unsafe { block::reduce(x, block::Sum, scratch) };
//! ```
//!
//! [`thread::rank_in_block`]: crate::thread::rank_in_block
//! [`thread::sync_threads`]: crate::thread::sync_threads

use crate::diag::fail;
use crate::half::{bf16, bf16x2, f16, f16x2};
use crate::shared::{DynamicSharedArray, SharedArray, SharedElement};
use crate::thread::{block_threads, rank_in_block, sync_threads};
use crate::warp::{self, first_lanes, Redux, ReduxOp, Shuffle};
use ferrocuda_macros::gpu_only;

/// Largest [`scratch_len`]: the scratch of a 1024-thread block.
pub const SCRATCH_LEN_MAX: usize = 64;

/// Elements of scratch the block functions need for a block of `block_threads` threads:
/// two per warp.
pub const fn scratch_len(block_threads: u32) -> usize {
    2 * block_threads.div_ceil(32) as usize
}

/// An associative operation for reductions and scans.
///
/// Implemented by the marker types of this module and by every closure
/// `Fn(T, T) -> T + Copy`.
pub trait ReduceOp<T: Shuffle>: Copy {
    /// `a ⊕ b`, where `a` comes from lower ranks than `b`.
    fn combine(&self, a: T, b: T) -> T;

    /// The reduction of `value` over lanes `0..lanes` of this warp (`1 ≤ lanes ≤ 32`), valid
    /// in lane 0 (types with a `redux.sync` fast path give it to every lane). Exactly the
    /// lanes `0..lanes` must call it.
    #[inline(always)]
    fn warp_reduce_lanes(&self, value: T, lanes: u32) -> T {
        let (mask, lane) = (first_lanes(lanes), warp::lane_id());
        let mut v = value;
        // Ranges double each step: lane 32k·2^i holds [its lane, +2^(i+1)), in order.
        for i in 0..5 {
            let d = 1u32 << i;
            let other = warp::shfl_down_sync(mask, v, d);
            if lane + d < lanes {
                v = self.combine(v, other);
            }
        }
        v
    }
}

impl<T: Shuffle, F: Fn(T, T) -> T + Copy> ReduceOp<T> for F {
    #[inline(always)]
    fn combine(&self, a: T, b: T) -> T {
        self(a, b)
    }
}

macro_rules! markers {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;
    )*};
}
markers! {
    /// Addition (integers wrap).
    Sum;
    /// Minimum (floats: a NaN operand is ignored).
    Min;
    /// Maximum (floats: a NaN operand is ignored).
    Max;
    /// Bitwise and.
    BitAnd;
    /// Bitwise or.
    BitOr;
    /// Bitwise xor.
    BitXor;
}

macro_rules! op_impls {
    (redux $op:ident, $rop:ident, |$a:ident, $b:ident| $e:expr; $($t:ty),*) => {$(
        impl ReduceOp<$t> for $op {
            #[inline(always)]
            fn combine(&self, $a: $t, $b: $t) -> $t { $e }
            #[inline(always)]
            fn warp_reduce_lanes(&self, value: $t, lanes: u32) -> $t {
                value.__redux(ReduxOp::$rop, first_lanes(lanes))
            }
        }
    )*};
    (shuffle $op:ident, |$a:ident, $b:ident| $e:expr; $($t:ty),*) => {$(
        impl ReduceOp<$t> for $op {
            #[inline(always)]
            #[gpu_only]
            fn combine(&self, $a: $t, $b: $t) -> $t { $e }
        }
    )*};
}
op_impls!(redux Sum, Add, |a, b| a.wrapping_add(b); u32, i32);
op_impls!(redux Min, Min, |a, b| a.min(b); u32, i32);
op_impls!(redux Max, Max, |a, b| a.max(b); u32, i32);
op_impls!(redux BitAnd, And, |a, b| a & b; u32, i32);
op_impls!(redux BitOr, Or, |a, b| a | b; u32, i32);
op_impls!(redux BitXor, Xor, |a, b| a ^ b; u32, i32);
op_impls!(shuffle Sum, |a, b| a.wrapping_add(b); u64, i64);
op_impls!(shuffle Sum, |a, b| a + b; f32, f64, f16, bf16, f16x2, bf16x2);
op_impls!(shuffle Min, |a, b| a.min(b); u64, i64, f32, f64, bf16);
op_impls!(shuffle Max, |a, b| a.max(b); u64, i64, f32, f64, bf16);
op_impls!(shuffle BitAnd, |a, b| a & b; u64, i64);
op_impls!(shuffle BitOr, |a, b| a | b; u64, i64);
op_impls!(shuffle BitXor, |a, b| a ^ b; u64, i64);

/// Where this thread sits in its block.
#[derive(Clone, Copy)]
struct Place {
    /// Warp index in the block.
    warp: u32,
    /// Lane in the warp.
    lane: u32,
    /// Warps in the block.
    warps: u32,
    /// Lanes of this thread's warp (32, or fewer in the last warp).
    lanes: u32,
}

#[inline(always)]
fn place() -> Place {
    let (n, rank) = (block_threads(), rank_in_block());
    let warp = rank / 32;
    Place {
        warp,
        lane: rank % 32,
        warps: n.div_ceil(32),
        lanes: (n - warp * 32).min(32),
    }
}

/// Inclusive scan over lanes `0..lanes` (which must all call): lane `l` gets
/// `v_0 ⊕ … ⊕ v_l`.
#[inline(always)]
fn scan_lanes<T: Shuffle, Op: ReduceOp<T>>(value: T, op: Op, lanes: u32, lane: u32) -> T {
    let mask = first_lanes(lanes);
    let mut v = value;
    for i in 0..5 {
        let d = 1u32 << i;
        let lower = warp::shfl_up_sync(mask, v, d);
        if lane >= d {
            v = op.combine(lower, v);
        }
    }
    v
}

/// The reduction of `value` over this thread's warp, valid in lane 0 (in every lane for the
/// `redux.sync` cases). Every thread of the warp must call it.
#[inline(always)]
pub fn warp_reduce<T: Shuffle, Op: ReduceOp<T>>(value: T, op: Op) -> T {
    op.warp_reduce_lanes(value, place().lanes)
}

/// Inclusive scan over this thread's warp: lane `l` gets `v_0 ⊕ … ⊕ v_l`. Every thread of
/// the warp must call it.
#[inline(always)]
pub fn warp_inclusive_scan<T: Shuffle, Op: ReduceOp<T>>(value: T, op: Op) -> T {
    let p = place();
    scan_lanes(value, op, p.lanes, p.lane)
}

/// Exclusive scan over this thread's warp: lane `l` gets `initial ⊕ v_0 ⊕ … ⊕ v_(l-1)`
/// (lane 0 gets `initial`). Every thread of the warp must call it.
#[inline(always)]
pub fn warp_exclusive_scan<T: Shuffle, Op: ReduceOp<T>>(value: T, initial: T, op: Op) -> T {
    let p = place();
    let incl = scan_lanes(value, op, p.lanes, p.lane);
    let before = warp::shfl_up_sync(first_lanes(p.lanes), incl, 1);
    if p.lane == 0 {
        initial
    } else {
        op.combine(initial, before)
    }
}

/// Memory for the block collectives' partial results: a shared array handle
/// ([`SharedArray`], [`DynamicSharedArray`] — its length is checked against
/// [`scratch_len`]`(block_threads())` at run time, and a short one aborts the kernel with the
/// caller's location) or a raw pointer (`*mut T`, unchecked: the caller vouches for the
/// length).
pub trait Scratch<T>: Copy {
    /// The first element, after checking the length for this block.
    #[doc(hidden)]
    fn checked(self) -> *mut T;
}

impl<T> Scratch<T> for *mut T {
    #[inline(always)]
    fn checked(self) -> *mut T {
        self
    }
}

impl<T: SharedElement, const N: usize> Scratch<T> for SharedArray<T, N> {
    #[inline(always)]
    #[track_caller]
    fn checked(self) -> *mut T {
        // N >= SCRATCH_LEN_MAX fits every block: no run-time check.
        if N < SCRATCH_LEN_MAX && N < scratch_len(block_threads()) {
            fail();
        }
        self.as_mut_ptr()
    }
}

impl<T: SharedElement> Scratch<T> for DynamicSharedArray<T> {
    #[inline(always)]
    #[track_caller]
    fn checked(self) -> *mut T {
        if self.len() < scratch_len(block_threads()) {
            fail();
        }
        self.as_mut_ptr()
    }
}

/// The reduction of `value` over the whole block, returned to every thread.
///
/// # Safety
///
/// `scratch` is memory every thread of the block sees (shared memory), with
/// [`scratch_len`]`(block_threads())` elements — checked for the shared-array handles, the
/// caller's promise for a raw pointer, which must also be valid for reads and writes. No
/// thread accesses it otherwise from the last barrier before the call to the end of the call,
/// and every thread of the block calls with the same `op` and `scratch` (see the module's
/// thread model).
#[inline(always)]
pub unsafe fn reduce<T: Shuffle, Op: ReduceOp<T>>(value: T, op: Op, scratch: impl Scratch<T>) -> T {
    let scratch = scratch.checked();
    let p = place();
    let part = op.warp_reduce_lanes(value, p.lanes);
    if p.warps == 1 {
        // Block-uniform branch: a single warp needs no scratch and no barrier.
        return warp::shfl_sync(first_lanes(p.lanes), part, 0);
    }
    let (w, lane, warps) = (p.warp as usize, p.lane as usize, p.warps as usize);
    if p.lane == 0 {
        // SAFETY: w < warps <= scratch_len; slot w is written by this warp's lane 0 only.
        unsafe { scratch.add(w).write(part) };
    }
    sync_threads();
    if p.warp == 0 && p.lane < p.warps {
        // SAFETY: lane < warps: the slots written before the barrier.
        let t = unsafe { scratch.add(lane).read() };
        let total = op.warp_reduce_lanes(t, p.warps);
        if p.lane == 0 {
            // SAFETY: warps < 2 * warps = scratch_len; nobody reads it before the barrier.
            unsafe { scratch.add(warps).write(total) };
        }
    }
    sync_threads();
    // SAFETY: written before the barrier; the next block call writes it only after its own
    // first barrier, which every thread reaches after this read.
    unsafe { scratch.add(warps).read() }
}

/// The combined values of the warps before this thread's (`initial` first, if any): `None`
/// for warp 0 without `initial`. Contains the block's two barriers (none for one warp).
///
/// # Safety
///
/// As [`reduce`].
#[inline(always)]
unsafe fn warp_prefix<T: Shuffle, Op: ReduceOp<T>>(
    p: Place,
    incl: T,
    initial: Option<T>,
    op: Op,
    scratch: *mut T,
) -> Option<T> {
    if p.warps == 1 {
        return initial;
    }
    let (w, lane, warps) = (p.warp as usize, p.lane as usize, p.warps as usize);
    if p.lane == p.lanes - 1 {
        // SAFETY: slot w < warps, written by this warp's last lane only.
        unsafe { scratch.add(w).write(incl) };
    }
    sync_threads();
    if p.warp == 0 && p.lane < p.warps {
        // SAFETY: lane < warps: the warp totals written before the barrier.
        let total = unsafe { scratch.add(lane).read() };
        let mut s = scan_lanes(total, op, p.warps, p.lane);
        if let Some(i) = initial {
            s = op.combine(i, s);
        }
        // SAFETY: warps + lane < 2 * warps = scratch_len; a second bank, so that the warp
        // totals of a back-to-back call cannot overwrite prefixes still being read.
        unsafe { scratch.add(warps + lane).write(s) };
    }
    sync_threads();
    if w == 0 {
        initial
    } else {
        // SAFETY: written before the barrier (w - 1 < warps).
        Some(unsafe { scratch.add(warps + w - 1).read() })
    }
}

/// Inclusive scan over the block: the thread of rank `r` gets `v_0 ⊕ … ⊕ v_r`.
///
/// # Safety
///
/// As [`reduce`].
#[inline(always)]
pub unsafe fn inclusive_scan<T: Shuffle, Op: ReduceOp<T>>(
    value: T,
    op: Op,
    scratch: impl Scratch<T>,
) -> T {
    let scratch = scratch.checked();
    let p = place();
    let incl = scan_lanes(value, op, p.lanes, p.lane);
    // SAFETY: forwarded contract.
    match unsafe { warp_prefix(p, incl, None, op, scratch) } {
        Some(prefix) => op.combine(prefix, incl),
        None => incl,
    }
}

/// Exclusive scan over the block: the thread of rank `r` gets `initial ⊕ v_0 ⊕ … ⊕
/// v_(r-1)` (rank 0 gets `initial`).
///
/// # Safety
///
/// As [`reduce`].
#[inline(always)]
pub unsafe fn exclusive_scan<T: Shuffle, Op: ReduceOp<T>>(
    value: T,
    initial: T,
    op: Op,
    scratch: impl Scratch<T>,
) -> T {
    let scratch = scratch.checked();
    let p = place();
    let incl = scan_lanes(value, op, p.lanes, p.lane);
    let before = warp::shfl_up_sync(first_lanes(p.lanes), incl, 1);
    // SAFETY: forwarded contract.
    let prefix = unsafe { warp_prefix(p, incl, Some(initial), op, scratch) }.unwrap_or(initial);
    if p.lane == 0 {
        prefix
    } else {
        op.combine(prefix, before)
    }
}
