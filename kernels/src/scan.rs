//! `cumsum` and `cumsum_exclusive`: inclusive and exclusive prefix sums of a 1-D array in one
//! pass, with decoupled look-back (Merrill & Garland's single-pass scan).
//!
//! # Schedule (blocks of 256 threads)
//!
//! Blocks take tiles of 4096 elements (2048 for 64-bit inputs) in order from an atomic
//! counter — so a tile's predecessors are always held by running blocks, and any grid makes
//! progress. Each thread loads 16 (8) elements as four 16-byte vectors, warp-striped
//! (coalesced); warps scan their 512 elements with shuffles, the block combines its 8 warp
//! totals, and the tile publishes its aggregate in a status word (launcher-provided,
//! zero-filled workspace: a flag, the aggregate and the inclusive prefix per tile). Warp 0 then
//! looks back over its predecessors 32 at a time — waiting until each has published something,
//! adding aggregates until it meets a published inclusive prefix — publishes its own inclusive
//! prefix, and the block writes its outputs. Every element is read once and written once.
//!
//! Integers wrap (`int32` input can accumulate into `int64` output, as NumPy's default). Float
//! results depend on which predecessors had published their prefixes when a tile looked back,
//! so they may differ in the last bits from run to run (errors ≲ log₂(n)·ε·Σ|x| in practice);
//! integer results are exact and deterministic.
//!
//! The kernels declare their block, `block = 256` (PTX `.reqntid 256, 1, 1`): the launcher
//! uses it and refuses any other, and ptxas, knowing the exact block, aims at an occupancy of
//! its own (four to five blocks per SM for 32-bit data, where it needs one `min_blocks = 4` to
//! avoid a spill; two for `i32 → i64`). The status words are accessed unchecked: their
//! indices are in bounds by construction, and a bounds check's trap path costs 8 to 16
//! registers.

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::{kernel, Scratch, Slice, SliceMut};

#[cfg(target_arch = "nvptx64")]
const THREADS: usize = 256;
#[cfg(target_arch = "nvptx64")]
const WARPS: usize = THREADS / 32;
/// Vectors per thread per tile.
#[cfg(target_arch = "nvptx64")]
const VECS: usize = 4;

/// Status flags.
#[cfg(target_arch = "nvptx64")]
const AGGREGATE: u64 = 1;
#[cfg(target_arch = "nvptx64")]
const PREFIX: u64 = 2;

/// A scan value as 64 status bits and back.
#[cfg(target_arch = "nvptx64")]
trait Bits: Copy {
    fn to_u64(self) -> u64;
    fn from_u64(b: u64) -> Self;
}
#[cfg(target_arch = "nvptx64")]
macro_rules! bits {
    ($($t:ty: |$x:ident| $to:expr, |$b:ident| $from:expr;)*) => {$(
        impl Bits for $t {
            #[inline(always)]
            fn to_u64(self) -> u64 { let $x = self; $to }
            #[inline(always)]
            fn from_u64($b: u64) -> Self { $from }
        }
    )*};
}
#[cfg(target_arch = "nvptx64")]
bits! {
    f32: |x| x.to_bits() as u64, |b| f32::from_bits(b as u32);
    f64: |x| x.to_bits(), |b| f64::from_bits(b);
    i32: |x| x as u32 as u64, |b| b as u32 as i32;
    i64: |x| x as u64, |b| b as i64;
}

/// The status of tile `t`: words `1 + 3t` (flag), `2 + 3t` (aggregate), `3 + 3t` (prefix).
/// Unchecked: a bounds check's failure path (the trap record) costs the scan 8 to 16
/// registers, and the indices are in bounds by construction.
///
/// # Safety
///
/// `t` is a tile of the launch (`t < ⌈n / tile⌉`, which sizes `status`: the kernel's scratch
/// declaration) and `k < 3`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn word(status: &AtomicSlice<u64>, t: usize, k: usize) -> AtomicRef<'_, u64> {
    // SAFETY: 1 + 3t + k < 1 + 3·tiles, the workspace's length (the caller's contract).
    unsafe { status.at_unchecked(1 + 3 * t + k) }
}

/// Publishes `value` for tile `t` under `flag` (the value first, then the flag, released).
///
/// # Safety
///
/// As [`word`]; `flag` is [`AGGREGATE`] or [`PREFIX`].
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn publish<A: Bits>(status: &AtomicSlice<u64>, t: usize, flag: u64, value: A) {
    // SAFETY: the caller's contract; flag < 3.
    unsafe {
        word(status, t, flag as usize).store(value.to_u64(), Order::Relaxed, Scope::Device);
        word(status, t, 0).store(flag, Order::Release, Scope::Device);
    }
}

/// Warp 0's look-back for tile `t > 0`: the sum of every element before the tile.
///
/// # Safety
///
/// As [`word`].
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn look_back<A: Reducible + Bits>(status: &AtomicSlice<u64>, t: usize, lane: usize) -> A
where
    block::Sum: ReduceOp<A>,
{
    let mut total = A::ZERO;
    let mut end = t; // tiles below `end` are still to be added
    loop {
        // Lane l examines tile end − 1 − l (none below 0: a virtual prefix of 0).
        let (mut flag, mut v) = (PREFIX, A::ZERO);
        if lane < end {
            let p = end - 1 - lane;
            loop {
                // SAFETY: p < t, a tile of the launch.
                flag = unsafe { word(status, p, 0) }.load(Order::Acquire, Scope::Device);
                if flag != 0 {
                    break;
                }
                thread::nanosleep(32);
            }
            // SAFETY: p < t; a published flag is AGGREGATE (1) or PREFIX (2).
            let w = unsafe { word(status, p, flag as usize) };
            v = A::from_u64(w.load(Order::Relaxed, Scope::Device));
        }
        // The nearest predecessor with a prefix closes the window: add it and everything
        // nearer (aggregates), nothing farther.
        let prefixes = warp::ballot_sync(warp::FULL_MASK, flag == PREFIX);
        let stop = prefixes.trailing_zeros() as usize; // 32 when none
        let take = if lane <= stop { v } else { A::ZERO };
        let sum = warp::shfl_sync(warp::FULL_MASK, block::warp_reduce(take, block::Sum), 0);
        total = total.add(sum);
        if prefixes != 0 {
            return total;
        }
        end -= 32;
    }
}

/// Inclusive (`EXCL` false) or exclusive prefix sums of `x` into `out`; see the module
/// documentation.
///
/// # Safety
///
/// Kernel-launch context with blocks of [`THREADS`] threads (the kernel's `block`
/// declaration); `status` holds `3 · ⌈n / tile⌉ + 1` zeroed words (the kernel's scratch
/// declaration, with the tile of `L` · 4 · 256 elements); `out` has `x`'s length.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn cumsum<T: Element + Widen<A>, A: Reducible + Bits, const L: usize, const EXCL: bool>(
    x: Slice<T>,
    out: SliceMut<A>,
    status: Scratch<u64>,
) where
    block::Sum: ReduceOp<A>,
{
    let n = x.len();
    // SAFETY: the workspace is only accessed atomically.
    let status = unsafe { AtomicSlice::from_scratch(status) };
    let tile_len = THREADS * VECS * L;
    let tiles = n.div_ceil(tile_len);
    let rank = thread::rank_in_block() as usize;
    let (w, lane) = (rank / 32, rank % 32);
    // The warps' totals, the tile's exclusive prefix, and the tile index.
    let sh = shared_array!(u64, WARPS + 2, align = 16);
    let vec_ok = L * core::mem::size_of::<T>() == 16 && x.as_ptr() as usize % 16 == 0;
    let out_vec = L * core::mem::size_of::<A>() == 16 && out.as_mut_ptr() as usize % 16 == 0;
    loop {
        if rank == 0 {
            // SAFETY: word 0, the tile counter (the workspace has 3·tiles + 1 ≥ 1 words).
            let counter = unsafe { status.at_unchecked(0) };
            let t = counter.fetch_add(1, Order::Relaxed, Scope::Device);
            // SAFETY: the block's shared tile slot; read after the barrier below.
            unsafe { sh.write_unchecked(WARPS + 1, t) };
        }
        // A barrier that also tells the whole block whether a tile is left.
        // SAFETY (the read): written by thread 0 before the barrier.
        let more = thread::sync_threads_or(
            rank == 0 && unsafe { sh.get_unchecked(WARPS + 1) } < tiles as u64,
        );
        if !more {
            return;
        }
        // SAFETY: as above.
        let t = unsafe { sh.get_unchecked(WARPS + 1) } as usize;
        let base = t * tile_len + w * (32 * VECS * L);
        // This thread's vectors: VECS chunks of L elements, warp-striped.
        let mut v = [[A::ZERO; L]; VECS];
        for_lanes!(VECS, |j| {
            let at = base + (j * 32 + lane) * L;
            if vec_ok && at + L <= n {
                // SAFETY: a whole, aligned vector inside `x`.
                let c = unsafe { (x.as_ptr().add(at) as *const Chunk<T, L>).read() };
                for_lanes!(L, |k| v[j][k] = c.0[k].widen_to());
            } else {
                for_lanes!(L, |k| {
                    if at + k < n {
                        // SAFETY: at + k < n.
                        v[j][k] = unsafe { x.get_unchecked(at + k) }.widen_to();
                    }
                });
            }
        });
        // Inclusive scans: within each vector, then across the warp, chunk after chunk.
        let mut running = A::ZERO; // the warp's total of the chunks before
        let mut pre = [A::ZERO; VECS]; // exclusive prefix of each of this lane's vectors
        for_lanes!(VECS, |j| {
            for_lanes!(L, |k| if k > 0 {
                v[j][k] = v[j][k - 1].add(v[j][k]);
            });
            let mine = v[j][L - 1];
            let incl = block::warp_inclusive_scan(mine, block::Sum);
            let before = warp::shfl_up_sync(warp::FULL_MASK, incl, 1);
            pre[j] = if lane == 0 {
                running
            } else {
                running.add(before)
            };
            running = running.add(warp::shfl_sync(warp::FULL_MASK, incl, 31));
        });
        if lane == 0 {
            // SAFETY: slot w of the warp totals.
            unsafe { sh.write_unchecked(w, running.to_u64()) };
        }
        thread::sync_threads();
        // The block's total and this warp's offset, in warp order (the same in every thread).
        let (mut aggregate, mut offset) = (A::ZERO, A::ZERO);
        for k in 0..WARPS {
            // SAFETY: the totals written before the barrier.
            let tw = A::from_u64(unsafe { sh.get_unchecked(k) });
            if k < w {
                offset = offset.add(tw);
            }
            aggregate = aggregate.add(tw);
        }
        if w == 0 {
            let prefix = if t == 0 {
                A::ZERO
            } else {
                // SAFETY (both): t < tiles (the loop's condition).
                if lane == 0 {
                    unsafe { publish(&status, t, AGGREGATE, aggregate) };
                }
                unsafe { look_back::<A>(&status, t, lane) }
            };
            if lane == 0 {
                // SAFETY: t < tiles.
                unsafe { publish(&status, t, PREFIX, prefix.add(aggregate)) };
                // SAFETY: the block's prefix slot; read after the barrier below.
                unsafe { sh.write_unchecked(WARPS, prefix.to_u64()) };
            }
        }
        thread::sync_threads();
        // SAFETY: written before the barrier.
        let prefix = A::from_u64(unsafe { sh.get_unchecked(WARPS) }).add(offset);
        for_lanes!(VECS, |j| {
            let at = base + (j * 32 + lane) * L;
            let start = prefix.add(pre[j]);
            let mut y = [A::ZERO; L];
            for_lanes!(L, |k| {
                y[k] = if EXCL {
                    if k == 0 {
                        start
                    } else {
                        start.add(v[j][k - 1])
                    }
                } else {
                    start.add(v[j][k])
                };
            });
            if out_vec && at + L <= n {
                // SAFETY: a whole, aligned vector inside `out`; this thread alone writes it.
                unsafe { (out.as_mut_ptr().add(at) as *mut Chunk<A, L>).write(Chunk(y)) };
            } else {
                for_lanes!(L, |k| {
                    if at + k < n {
                        // SAFETY: at + k < n; this thread alone writes it.
                        unsafe { out.write_unchecked(at + k, y[k]) };
                    }
                });
            }
        });
        // The totals and the prefix slot are rewritten only after the next tile's first
        // barrier, which every thread reaches after its reads above.
    }
}

macro_rules! scans {
    ($($family:literal, $name:ident: $t:ty => $a:ty, $lanes:literal, $tile:literal, $excl:literal
       $(, $opt:ident = $val:literal)*;)*) => {$(
        #[doc = concat!("`", $family, "`: the ", stringify!($excl), " prefix sums of `x` \
                         (`true`: exclusive, `out[0] = 0`; `false`: inclusive, `out[i] = x[0] + … \
                         + x[i]`), in one pass (see the module documentation).")]
        ///
        /// `x`: a C-contiguous array of any length (in C order); `out`: the same number of
        /// elements. Blocks of exactly 256 threads (`block = 256`: the launcher refuses any
        /// other); any grid (automatic: one block per tile). Integers: exact, wrapping. Floats:
        /// see the module documentation.
        #[kernel(family = $family, items_per_thread = 16, block = 256, $($opt = $val,)*
                 scratch(status = 3 * x.len().div_ceil($tile) + 1),
                 require(out.len() == x.len(), "out holds one sum per element of x"))]
        pub unsafe fn $name(x: Slice<$t>, out: SliceMut<$a>, status: Scratch<u64>) {
            // The workspace's formula and the kernel's tile agree.
            #[cfg(target_arch = "nvptx64")]
            const { assert!($tile == THREADS * VECS * $lanes) };
            // SAFETY: launched as a kernel with the declared block and workspace.
            unsafe { cumsum::<$t, $a, $lanes, $excl>(x, out, status) }
        }
    )*};
}
scans! {
    "cumsum", cumsum_f32: f32 => f32, 4, 4096, false;
    "cumsum", cumsum_f64: f64 => f64, 2, 2048, false;
    "cumsum", cumsum_i32: i32 => i32, 4, 4096, false;
    "cumsum", cumsum_i32_i64: i32 => i64, 4, 4096, false;
    "cumsum", cumsum_i64: i64 => i64, 2, 2048, false;
    // ptxas's own occupancy target for this one under `.reqntid 256` (sm_90: 40 registers, six
    // blocks per SM) spills; four blocks, as the others get, fit without.
    "cumsum_exclusive", cumsum_exclusive_f32: f32 => f32, 4, 4096, true, min_blocks = 4;
    "cumsum_exclusive", cumsum_exclusive_f64: f64 => f64, 2, 2048, true;
    "cumsum_exclusive", cumsum_exclusive_i32: i32 => i32, 4, 4096, true;
    "cumsum_exclusive", cumsum_exclusive_i32_i64: i32 => i64, 4, 4096, true;
    "cumsum_exclusive", cumsum_exclusive_i64: i64 => i64, 2, 2048, true;
}
