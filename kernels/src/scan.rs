//! `cumsum` and `cumsum_exclusive`: inclusive and exclusive prefix sums of a 1-D array in one
//! pass, with decoupled look-back (Merrill & Garland's single-pass scan).
//!
//! # Schedule
//!
//! | values | path | block | per thread | tile | status per tile |
//! | --- | --- | ---: | --- | ---: | --- |
//! | 32-bit (`f32`, `i32`) | stage | 128 | 16 vectors of 4 | 8192 | one word: flag and value |
//! | 64-bit (`f64`, `i64`) | stage | 256 | 4 vectors of 2 | 2048 | three words |
//! | `i32 → i64` | registers | 256 | 4 vectors of 4 | 4096 | three words |
//!
//! Blocks take tiles in order from an atomic counter — so a tile's predecessors are always
//! held by running blocks, and any grid makes progress; the automatic grid has one block per
//! tile, and a grid of at least one block per tile draws once per block (its draws cover
//! every tile). The tile's aggregate goes into its status (in a launcher-provided workspace)
//! as soon as the block has summed it; warp 0 then looks back over its
//! predecessors 32 at a time — waiting until each has published something, adding aggregates
//! until it meets a published inclusive prefix — publishes its own inclusive prefix, and the
//! block writes its outputs. Every element is read once from global memory and written once.
//!
//! **Statuses persist between launches** (`#[kernel(persist(status))]`): the launcher
//! zero-fills the workspace only when it is new to the kernel (and once every 2^20 launches),
//! not before every launch — a separate memset and its gap, which CUB's scan pays as its
//! init kernel. Word 0 is the tile counter: the launch's epoch in its high half, the draws in
//! its low half; the launch's last draw (the block that draws it knows every other block has
//! drawn) leaves it at the next epoch with no draws, the state the next launch on the stream
//! starts from. Every status carries its launch's epoch beside its flag, and a reader takes
//! only its own launch's: words an earlier launch left (a longer scan's tail, say) read as
//! unpublished, as zeroed ones do.
//!
//! **The stage** (sums of one type, `cumsum_staged`): each thread copies its warp-striped
//! 16-byte vectors into shared memory with `cp.async` (coalesced, no register held while the
//! copies fly); each lane then reads its *own consecutive* elements back (thread-blocked; each
//! lane's row padded by one vector, which keeps both patterns nearly free of bank conflicts:
//! Nsight Compute counts 3.2 M on loads over a 2^28 scan, CUB's scan 8.9 M), sums them, and one warp scan of the lane totals gives each lane its prefix:
//! a single value per thread crosses the look-back. The sums are written back in place and
//! stored striped. The stage keeps registers low while a thread holds many elements: 78 for
//! `cumsum_f32`'s 64 (sm_90), six blocks per SM, a 34.8 KB stage each. **The registers' path**
//! (`cumsum`, the widening `i32 → i64` sum, whose output vectors are twice its input's):
//! each thread keeps its vectors in registers, scans within them and across the warp, and
//! adds the tile's prefix before it stores.
//!
//! The status of a 32-bit sum is one 64-bit word (flag and value together, relaxed atomics):
//! publishing is one store and polling one load, with no fence; a lane whose predecessor has
//! not published sleeps about a microsecond before it polls again. 64-bit sums keep the flag
//! apart from the value, ordered by release and acquire. The shape of the 32-bit scans was
//! chosen by measurement: the single-word status (no fence on the publishing path), then
//! 128-thread blocks of 32 elements per thread, then one draw per block and the stage, then
//! 64 elements per thread with a 1 µs poll, then statuses that persist between launches, each
//! made the scan faster (the last three together 0.96× → 1.009× of CUB's time at 2^28 on the
//! H200, in the harness); 256 threads of
//! 16, 24 or 32 elements, 128 threads of 16, 24 or 48, 64 or 96 threads of 32 and 64
//! threads of 64, four statuses per lane in the look-back, polls of 32 ns to 4 µs, and a
//! resident grid that draws its next tile ahead (whose successors then wait for the block's
//! current tile) were slower. Taking the tile from the block index instead of the counter
//! (which leans on the hardware dispatching blocks in order, which nothing promises) gained
//! about 2 % at 32 elements per thread and lost 2 % at 64: the counter stays (BENCHMARKS.md,
//! the `cumsum` goal, and the runs it links).
//!
//! Integers wrap (`int32` input can accumulate into `int64` output, as NumPy's default). Float
//! results depend on which predecessors had published their prefixes when a tile looked back,
//! so they may differ in the last bits from run to run (errors ≲ log₂(n)·ε·Σ|x| in practice);
//! integer results are exact and deterministic.
//!
//! The kernels declare their block (`block = 128` or `256`: PTX `.reqntid`): the launcher uses
//! it and refuses any other, and ptxas, knowing the exact block, aims at an occupancy of its
//! own (`cumsum_f64` and `cumsum_exclusive_f64` take `min_blocks = 5`: without it ptxas
//! spills on sm_80; the 32-bit scans take `min_blocks = 6`: without it the exclusive ones
//! use 90 registers on sm_90, five blocks per SM). The status words are
//! accessed unchecked: their indices are in bounds by construction, and a bounds check's trap
//! path costs registers.

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::atomic::AtomicRef;
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::cp_async;
use ferrocuda_device::{kernel, Scratch, Slice, SliceMut};

/// The most warps a block may have (the shared totals are sized for it).
#[cfg(target_arch = "nvptx64")]
const MAX_WARPS: usize = 8;

/// Status flags.
#[cfg(target_arch = "nvptx64")]
const AGGREGATE: u64 = 1;
#[cfg(target_arch = "nvptx64")]
const PREFIX: u64 = 2;

/// How a scan value is kept in a tile's status in the workspace (word 0 of which is the tile
/// counter).
///
/// * 32-bit values (`f32`, `i32`): **one word per tile**, the epoch and the flag in the high
///   half (`epoch << 2 | flag`) and the value's bits in the low half, stored and loaded whole with relaxed, device-scope atomics.
///   One 64-bit atomic access is indivisible, so a reader sees the flag and its value together
///   and needs no fence: publishing costs one store, waiting one load per poll.
/// * 64-bit values (`f64`, `i64`): **three words per tile** (`epoch << 2 | flag`, aggregate,
///   prefix): the value is stored first, then the flag with release order; readers acquire the
///   flag, then load the value.
///
/// A flag is published only with the launch's epoch (below 2^20: the launcher's refill period);
/// a zeroed word has flag 0.
#[cfg(target_arch = "nvptx64")]
trait Status: Copy {
    /// Workspace words per tile.
    const WORDS: usize;
    /// Publishes `value` for tile `t` under `flag`.
    ///
    /// # Safety
    ///
    /// `t` is a tile of the launch (`t < ⌈n / tile⌉`, which sizes `status`: the kernel's
    /// scratch declaration is `WORDS · tiles + 1` words); `epoch` is the launch's (below
    /// 2^30); `flag` is [`AGGREGATE`] or [`PREFIX`].
    unsafe fn publish(status: &AtomicSlice<u64>, t: usize, epoch: u64, flag: u64, value: Self);
    /// Waits until tile `t` has published something in this launch (`epoch`); its flag and
    /// value.
    ///
    /// # Safety
    ///
    /// As [`Status::publish`].
    unsafe fn wait(status: &AtomicSlice<u64>, t: usize, epoch: u64) -> (u64, Self);
}

#[cfg(target_arch = "nvptx64")]
macro_rules! packed_status {
    ($($t:ty: |$x:ident| $to:expr, |$b:ident| $from:expr;)*) => {$(
        impl Status for $t {
            const WORDS: usize = 1;
            #[inline(always)]
            unsafe fn publish(status: &AtomicSlice<u64>, t: usize, epoch: u64, flag: u64, value: Self) {
                let $x = value;
                let word = (epoch << 2 | flag) << 32 | $to as u64;
                // SAFETY: 1 + t < 1 + tiles, the workspace's length (the caller's contract).
                unsafe { status.at_unchecked(1 + t) }.store(word, Order::Relaxed, Scope::Device);
            }
            #[inline(always)]
            unsafe fn wait(status: &AtomicSlice<u64>, t: usize, epoch: u64) -> (u64, Self) {
                // SAFETY: as in `publish`.
                let at = unsafe { status.at_unchecked(1 + t) };
                loop {
                    let word = at.load(Order::Relaxed, Scope::Device);
                    // This launch's (an earlier launch's word has another epoch; a zeroed
                    // one, flag 0).
                    if word >> 34 == epoch && (word >> 32) & 3 != 0 {
                        let $b = word as u32;
                        return ((word >> 32) & 3, $from);
                    }
                    // About 1 µs between polls: fewer loads into the L2 while the
                    // predecessors stream their tiles (module documentation).
                    thread::nanosleep(1024);
                }
            }
        }
    )*};
}
#[cfg(target_arch = "nvptx64")]
packed_status! {
    f32: |x| x.to_bits(), |b| f32::from_bits(b);
    i32: |x| x as u32, |b| b as i32;
}

#[cfg(target_arch = "nvptx64")]
macro_rules! split_status {
    ($($t:ty: |$x:ident| $to:expr, |$b:ident| $from:expr;)*) => {$(
        impl Status for $t {
            const WORDS: usize = 3;
            #[inline(always)]
            unsafe fn publish(status: &AtomicSlice<u64>, t: usize, epoch: u64, flag: u64, value: Self) {
                let $x = value;
                // SAFETY: (both) 1 + 3t + 2 < 1 + 3·tiles (the caller's contract); flag < 3.
                unsafe {
                    status.at_unchecked(1 + 3 * t + flag as usize)
                        .store($to, Order::Relaxed, Scope::Device);
                    status.at_unchecked(1 + 3 * t)
                        .store(epoch << 2 | flag, Order::Release, Scope::Device);
                }
            }
            #[inline(always)]
            unsafe fn wait(status: &AtomicSlice<u64>, t: usize, epoch: u64) -> (u64, Self) {
                // SAFETY: as in `publish`.
                let at = unsafe { status.at_unchecked(1 + 3 * t) };
                loop {
                    let word = at.load(Order::Acquire, Scope::Device);
                    let flag = word & 3;
                    // This launch's (as for the packed status).
                    if word >> 2 == epoch && flag != 0 {
                        // SAFETY: a published flag is AGGREGATE (1) or PREFIX (2).
                        let v = unsafe { status.at_unchecked(1 + 3 * t + flag as usize) };
                        let $b = v.load(Order::Relaxed, Scope::Device);
                        return (flag, $from);
                    }
                    thread::nanosleep(32);
                }
            }
        }
    )*};
}
#[cfg(target_arch = "nvptx64")]
split_status! {
    f64: |x| x.to_bits(), |b| f64::from_bits(b);
    i64: |x| x as u64, |b| b as i64;
}

/// A scan value through a shared `u64` slot and back.
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

/// The blocks of the launch's grid.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn grid_blocks() -> u64 {
    let g = thread::grid_dim();
    u64::from(g.x) * u64::from(g.y) * u64::from(g.z)
}

/// One draw from the tile counter, word 0 of the workspace: the launch's epoch in its high
/// half, the draws so far in its low half (below 2^32: fewer tiles and blocks than that). The
/// word as it was: the tile (`as u32`) and the epoch (`>> 32`). The launch's last draw, after
/// which no block of the launch draws again, leaves the counter at the next epoch with no
/// draws — the state the next launch on the stream starts from. A grid of at least one block
/// per tile (`once`) draws once per block; a smaller one draws every tile, and then once more
/// per block (the draw that finds none left).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn draw(counter: &AtomicRef<'_, u64>, once: bool, tiles: usize) -> u64 {
    let d = counter.fetch_add(1, Order::Relaxed, Scope::Device);
    let draws = if once {
        grid_blocks()
    } else {
        tiles as u64 + grid_blocks()
    };
    if d as u32 as u64 == draws - 1 {
        // Ordered after every draw of the launch (they all came before this one); seen by the
        // next launch on the stream, which begins after this one ends.
        counter.store(((d >> 32) + 1) << 32, Order::Relaxed, Scope::Device);
    }
    d
}

/// Warp 0's look-back for tile `t > 0`: the sum of every element before the tile.
///
/// # Safety
///
/// As [`Status::publish`].
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn look_back<A: Reducible + Status>(
    status: &AtomicSlice<u64>,
    t: usize,
    epoch: u64,
    lane: usize,
) -> A
where
    block::Sum: ReduceOp<A>,
{
    let mut total = A::ZERO;
    let mut end = t; // tiles below `end` are still to be added
    loop {
        // Lane l examines tile end − 1 − l (none below 0: a virtual prefix of 0).
        let (flag, v) = if lane < end {
            // SAFETY: end − 1 − lane < t, a tile of the launch.
            unsafe { A::wait(status, end - 1 - lane, epoch) }
        } else {
            (PREFIX, A::ZERO)
        };
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

// The steps both schedules share (`cumsum`, `cumsum_staged`) are macros, not functions: the
// same code as written in place (an inlined function's different IR had ptxas spill the sm_80
// build of `cumsum_f32`, 100 bytes); the cubins are the same as with the steps written out.

/// Thread 0 draws the block's next tile into `sh[MAX_WARPS + 1]`, and a barrier tells the
/// whole block whether one is left: `Some(tile)`, or `None` when the launch's tiles are all
/// taken. Every thread of the block, in uniform control flow (a barrier).
#[cfg(target_arch = "nvptx64")]
macro_rules! next_tile {
    ($sh:ident, $counter:ident, $once:ident, $tiles:ident, $rank:ident) => {{
        if $rank == 0 {
            let d = draw(&$counter, $once, $tiles);
            // SAFETY: the block's shared tile slot; read after the barrier below.
            unsafe { $sh.write_unchecked(MAX_WARPS + 1, d) };
        }
        // A barrier that also tells the whole block whether a tile is left.
        let more = thread::sync_threads_or(
            // SAFETY: read by thread 0 alone, which wrote it just above.
            $rank == 0 && (unsafe { $sh.get_unchecked(MAX_WARPS + 1) } as u32 as usize) < $tiles,
        );
        if more {
            // SAFETY: as above.
            Some(unsafe { $sh.get_unchecked(MAX_WARPS + 1) } as u32 as usize)
        } else {
            None
        }
    }};
}

/// Warp 0's part of tile `t`: publishes the tile's aggregate, looks back (tiles after the
/// first), publishes the tile's inclusive prefix, and leaves the block's exclusive prefix in
/// `sh[MAX_WARPS]` for every thread to read after the next barrier.
#[cfg(target_arch = "nvptx64")]
macro_rules! tile_prefix {
    ($a:ty, $sh:ident, $status:ident, $t:ident, $lane:ident, $aggregate:ident) => {{
        // The launch's epoch, read here (not kept in a register through the tile).
        // SAFETY: written by thread 0 before the first barrier; rewritten only after the
        // next one, which warp 0 reaches after this.
        let epoch = unsafe { $sh.get_unchecked(MAX_WARPS + 1) } >> 32;
        let prefix = if $t == 0 {
            <$a>::ZERO
        } else {
            if $lane == 0 {
                // SAFETY: t < tiles (the loop's condition).
                unsafe { <$a>::publish(&$status, $t, epoch, AGGREGATE, $aggregate) };
            }
            // SAFETY: t < tiles (the loop's condition).
            unsafe { look_back::<$a>(&$status, $t, epoch, $lane) }
        };
        if $lane == 0 {
            // SAFETY: t < tiles.
            unsafe { <$a>::publish(&$status, $t, epoch, PREFIX, prefix.add($aggregate)) };
            // SAFETY: the block's prefix slot; read after the barrier below.
            unsafe { $sh.write_unchecked(MAX_WARPS, prefix.to_u64()) };
        }
    }};
}

/// The block's step of tile `t` once each warp has its total (`running`): the warps' totals
/// exchanged through `sh`, warp 0's `tile_prefix!`, and this warp's exclusive prefix — the
/// tile's prefix plus the totals of the warps before it, added in warp order (the same in
/// every thread). Two block barriers: every thread of the block, in uniform control flow.
#[cfg(target_arch = "nvptx64")]
macro_rules! block_prefix {
    (
        $a:ty, $sh:ident, $status:ident, $t:ident, $w:ident, $lane:ident, $warps:ident,
        $running:ident
    ) => {{
        if $lane == 0 {
            // SAFETY: slot w of the warp totals.
            unsafe { $sh.write_unchecked($w, $running.to_u64()) };
        }
        thread::sync_threads();
        // The block's total and this warp's offset, in warp order (the same in every thread).
        let (mut aggregate, mut offset) = (<$a>::ZERO, <$a>::ZERO);
        for k in 0..$warps {
            // SAFETY: the totals written before the barrier.
            let tw = <$a>::from_u64(unsafe { $sh.get_unchecked(k) });
            if k < $w {
                offset = offset.add(tw);
            }
            aggregate = aggregate.add(tw);
        }
        if $w == 0 {
            tile_prefix!($a, $sh, $status, $t, $lane, aggregate);
        }
        thread::sync_threads();
        // SAFETY: written before the barrier.
        <$a>::from_u64(unsafe { $sh.get_unchecked(MAX_WARPS) }).add(offset)
    }};
}

/// Inclusive (`EXCL` false) or exclusive prefix sums of `x` into `out`; see the module
/// documentation.
///
/// # Safety
///
/// Kernel-launch context with blocks of `THREADS` threads (the kernel's `block`
/// declaration); `status` holds `A::WORDS · ⌈n / tile⌉ + 1` words (the kernel's scratch
/// declaration, with the tile of `THREADS · VECS · L` elements), zeroed or as this kernel's
/// previous launch on the stream left them (`persist`); `out` has `x`'s length.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn cumsum<
    T: Element + Widen<A>,
    A: Reducible + Bits + Status,
    const L: usize,
    const VECS: usize,
    const THREADS: usize,
    const EXCL: bool,
>(
    x: Slice<T>,
    out: SliceMut<A>,
    status: Scratch<u64>,
) where
    block::Sum: ReduceOp<A>,
{
    let n = x.len();
    // SAFETY: the workspace is only accessed atomically.
    let status = unsafe { AtomicSlice::from_scratch(status) };
    const { assert!(THREADS.is_multiple_of(32) && THREADS <= 32 * MAX_WARPS) };
    let warps = THREADS / 32;
    let tile_len = THREADS * VECS * L;
    let tiles = n.div_ceil(tile_len);
    let rank = thread::rank_in_block() as usize;
    let (w, lane) = (rank / 32, rank % 32);
    // The warps' totals, the tile's exclusive prefix, and the tile index.
    let sh = shared_array!(u64, MAX_WARPS + 2, align = 16);
    let vec_ok = L * core::mem::size_of::<T>() == 16 && (x.as_ptr() as usize).is_multiple_of(16);
    let out_vec =
        L * core::mem::size_of::<A>() == 16 && (out.as_mut_ptr() as usize).is_multiple_of(16);
    // A grid of at least one block per tile (the automatic grid) draws once per block: its
    // draws cover every tile, and a second draw would only learn that none is left — an
    // atomic round trip and a barrier at the end of every block.
    let once = grid_blocks() >= tiles as u64;
    // SAFETY: word 0, the tile counter (the workspace has WORDS·tiles + 1 ≥ 1 words).
    let counter = unsafe { status.at_unchecked(0) };
    loop {
        let Some(t) = next_tile!(sh, counter, once, tiles, rank) else {
            return;
        };
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
        for_lanes!(VECS, |j| {
            for_lanes!(L, |k| if k > 0 {
                v[j][k] = v[j][k - 1].add(v[j][k]);
            });
            let mine = v[j][L - 1];
            let incl = block::warp_inclusive_scan(mine, block::Sum);
            let before = warp::shfl_up_sync(warp::FULL_MASK, incl, 1);
            let pre = if lane == 0 {
                running
            } else {
                running.add(before)
            };
            running = running.add(warp::shfl_sync(warp::FULL_MASK, incl, 31));
            // The vector's sums from the start of the warp's span (inclusive, or exclusive:
            // shifted by one, from the last element down), so that no per-vector prefix stays
            // live across the look-back.
            for_lanes!(L, |r| {
                let k = L - 1 - r;
                v[j][k] = if !EXCL {
                    pre.add(v[j][k])
                } else if k == 0 {
                    pre
                } else {
                    pre.add(v[j][k - 1])
                };
            });
        });
        let prefix = block_prefix!(A, sh, status, t, w, lane, warps, running);
        for_lanes!(VECS, |j| {
            let at = base + (j * 32 + lane) * L;
            let mut y = [A::ZERO; L];
            for_lanes!(L, |k| y[k] = prefix.add(v[j][k]));
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
        if once {
            return;
        }
        // The totals and the prefix slot are rewritten only after the next tile's first
        // barrier, which every thread reaches after its reads above.
    }
}

/// The staged scan of same-type sums (`f32`, `i32`, `f64`, `i64`): [`cumsum`]'s schedule, but
/// the tile passes through shared memory instead of registers. Each thread copies its
/// warp-striped vectors into the stage with `cp.async` (coalesced, and nothing held in a
/// register while the copies are in flight); the warp then reads the stage thread-blocked
/// (lane `l` owns the warp span's elements `l·IT .. (l + 1)·IT`, `IT = VECS · L`; each lane's
/// row is padded by one vector, so that neither the striped nor the blocked accesses of a
/// quarter-warp share a bank), so that a thread scans its own consecutive elements and only one prefix
/// per thread crosses the look-back; the sums go back into the stage in place, and the warp
/// stores them striped (coalesced). Fewer registers than [`cumsum`]'s 32 live elements: more
/// blocks per SM, more tiles in flight.
///
/// # Safety
///
/// As [`cumsum`]'s, with `stage` (generic address) and `stage_addr` (its shared-window
/// address) `THREADS · (VECS + 1) · L` elements of `A` of this block's shared memory, 16-byte
/// aligned, used by nothing else; `L · size_of::<A>() == 16`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn cumsum_staged<
    A: Reducible + Bits + Status,
    const L: usize,
    const VECS: usize,
    const THREADS: usize,
    const EXCL: bool,
    const TAIL_LEFT: bool,
>(
    x: Slice<A>,
    out: SliceMut<A>,
    status: Scratch<u64>,
    stage: *mut A,
    stage_addr: u32,
) where
    block::Sum: ReduceOp<A>,
{
    const { assert!(L * core::mem::size_of::<A>() == 16) };
    let n = x.len();
    // SAFETY: the workspace is only accessed atomically.
    let status = unsafe { AtomicSlice::from_scratch(status) };
    const { assert!(THREADS.is_multiple_of(32) && THREADS <= 32 * MAX_WARPS) };
    let warps = THREADS / 32;
    let items = VECS * L; // a lane's elements
    let row = items + L; // a lane's row in the stage, padded by one vector
    let tile_len = THREADS * items;
    let tiles = n.div_ceil(tile_len);
    let rank = thread::rank_in_block() as usize;
    let (w, lane) = (rank / 32, rank % 32);
    // The stage slot of vector v = j·32 + lane of this warp's span, in elements: its owner
    // lane's row (v / VECS), and its place in it.
    // Vector j·32 + lane lies j·(32 / VECS) rows below vector `lane`'s slot.
    const { assert!(32_usize.is_multiple_of(VECS)) };
    let slot0 = w * 32 * row + (lane / VECS) * row + (lane % VECS) * L;
    let slot = |j: usize| slot0 + j * (32 / VECS) * row;
    // The warps' totals, the tile's exclusive prefix, and the tile index.
    let sh = shared_array!(u64, MAX_WARPS + 2, align = 16);
    let vec_ok = (x.as_ptr() as usize).is_multiple_of(16);
    let out_vec = (out.as_mut_ptr() as usize).is_multiple_of(16);
    // A grid of at least one block per tile (the automatic grid) draws once per block.
    let once = grid_blocks() >= tiles as u64;
    // SAFETY: word 0, the tile counter (the workspace has WORDS·tiles + 1 ≥ 1 words).
    let counter = unsafe { status.at_unchecked(0) };
    loop {
        let Some(t) = next_tile!(sh, counter, once, tiles, rank) else {
            return;
        };
        // This warp's span in `x`, copied striped into the stage (zeros past the end of `x`).
        let base = t * tile_len + w * (32 * items);
        // `TAIL_LEFT`: the copies' element tests compare the elements of `x` left from this
        // lane's first vector on (at most the warp's span) with constants — vector j starts
        // j·32·L after it — so that no per-element index stays live from the copies to the
        // stores: `cumsum_i32` spills on sm_80 without it. Not for the others: on sm_90 their
        // tests on `n` schedule 1–1.5 % faster at 2^28, and on `left` for whole vectors or
        // the stores' tails too, LLVM splits the vector stores into the tail's (8- and 4-byte
        // stores, 15 % slower).
        let left = if TAIL_LEFT {
            n.saturating_sub(base + lane * L).min(32 * items) as u32
        } else {
            0
        };
        for_lanes!(VECS, |j| {
            let v = j * 32 + lane;
            let at = base + v * L;
            let s = slot(j);
            if vec_ok && at + L <= n {
                // SAFETY: a whole, aligned vector inside `x`; the destination, 16 aligned bytes
                // of the stage, is touched by no other thread until the wait and the warp
                // barrier below. (A vector past the end of `x` goes by the scalar path: a
                // zero-filling copy of fewer bytes would still name 16 at its source.)
                unsafe {
                    let dst = stage_addr + (s * core::mem::size_of::<A>()) as u32;
                    cp_async::cg(dst, x.as_ptr().add(at));
                }
            } else {
                let from = (j * 32 * L) as u32;
                for_lanes!(L, |k| {
                    let inside = if TAIL_LEFT {
                        from + (k as u32) < left
                    } else {
                        at + k < n
                    };
                    let e = if inside {
                        // SAFETY: at + k < n (`left` is the count from `at - j·32·L`).
                        unsafe { x.get_unchecked(at + k) }
                    } else {
                        A::ZERO
                    };
                    // SAFETY: the slot is this thread's until the warp barrier below.
                    unsafe { stage.add(s + k).write(e) };
                });
            }
        });
        cp_async::wait_all();
        warp::sync_warp(warp::FULL_MASK);
        // This lane's elements, consecutive: their total, and the lane's exclusive prefix in
        // the warp's span.
        let mine = w * 32 * row + lane * row;
        let mut tot = A::ZERO;
        for_lanes!(VECS, |j| {
            // SAFETY: this lane's row, complete and visible (the wait and the warp barrier).
            let c = unsafe { (stage.add(mine + j * L) as *const Chunk<A, L>).read() };
            for_lanes!(L, |k| tot = tot.add(c.0[k]));
        });
        let incl = block::warp_inclusive_scan(tot, block::Sum);
        let before = warp::shfl_up_sync(warp::FULL_MASK, incl, 1);
        let pre = if lane == 0 { A::ZERO } else { before };
        let running = warp::shfl_sync(warp::FULL_MASK, incl, 31);
        let mut run = block_prefix!(A, sh, status, t, w, lane, warps, running).add(pre);
        // The sums of this lane's elements, in place (inclusive, or exclusive: shifted by one).
        for_lanes!(VECS, |j| {
            // SAFETY: this lane's row (no other lane touches it until the warp barrier).
            let p = unsafe { stage.add(mine + j * L) };
            // SAFETY: as above.
            let c = unsafe { (p as *const Chunk<A, L>).read() };
            let mut y = [A::ZERO; L];
            for_lanes!(L, |k| {
                if EXCL {
                    y[k] = run;
                    run = run.add(c.0[k]);
                } else {
                    run = run.add(c.0[k]);
                    y[k] = run;
                }
            });
            // SAFETY: as above.
            unsafe { (p as *mut Chunk<A, L>).write(Chunk(y)) };
        });
        warp::sync_warp(warp::FULL_MASK);
        // Striped stores, coalesced.
        for_lanes!(VECS, |j| {
            let v = j * 32 + lane;
            let at = base + v * L;
            // SAFETY: written by its owner lane before the warp barrier above; read by this
            // lane only until the next tile's warp barrier.
            let c = unsafe { (stage.add(slot(j)) as *const Chunk<A, L>).read() };
            if out_vec && at + L <= n {
                // SAFETY: a whole, aligned vector inside `out`; this thread alone writes it.
                unsafe { (out.as_mut_ptr().add(at) as *mut Chunk<A, L>).write(c) };
            } else {
                for_lanes!(L, |k| {
                    if at + k < n {
                        // SAFETY: at + k < n; this thread alone writes it.
                        unsafe { out.write_unchecked(at + k, c.0[k]) };
                    }
                });
            }
        });
        if once {
            return;
        }
        // The totals and the prefix slot are rewritten only after the next tile's first
        // barrier, which every thread reaches after its reads above. The next copies into the
        // stage write the slots this lane has just read (program order), which their owners
        // wrote before the warp barrier above and read no more.
    }
}

macro_rules! scans {
    // The registers' path (`cumsum`) and the stage's (`cumsum_staged`; `staged_left`: its copies' tails
    // tested on the count left, `TAIL_LEFT`).
    (@regs $t:ty, $a:ty, $l:literal, $v:literal, $b:literal, $e:literal, $x:ident, $o:ident, $s:ident) => {
        cumsum::<$t, $a, $l, $v, $b, $e>($x, $o, $s)
    };
    (@staged $t:ty, $a:ty, $l:literal, $v:literal, $b:literal, $e:literal, $x:ident, $o:ident, $s:ident) => {{
        let stage = shared_array!($a, $b * ($v + 1) * $l, align = 16);
        cumsum_staged::<$a, $l, $v, $b, $e, false>($x, $o, $s, stage.as_mut_ptr(), stage.shared_addr(0))
    }};
    (@staged_left $t:ty, $a:ty, $l:literal, $v:literal, $b:literal, $e:literal, $x:ident, $o:ident, $s:ident) => {{
        let stage = shared_array!($a, $b * ($v + 1) * $l, align = 16);
        cumsum_staged::<$a, $l, $v, $b, $e, true>($x, $o, $s, stage.as_mut_ptr(), stage.shared_addr(0))
    }};
    ($($family:literal, $name:ident: $t:ty => $a:ty, $path:ident, excl $excl:literal, lanes $lanes:literal,
       vecs $vecs:literal, block $block:literal, items $items:literal, tile $tile:literal,
       words $words:literal $(, $opt:ident = $val:literal)*;)*) => {$(
        #[doc = concat!("`", $family, "`: the ", stringify!($excl), " prefix sums of `x` \
                         (`true`: exclusive, `out[0] = 0`; `false`: inclusive, `out[i] = x[0] + … \
                         + x[i]`), in one pass (see the module documentation).")]
        ///
        /// `x`: a C-contiguous array of any length (in C order); `out`: the same number of
        #[doc = concat!("elements. Blocks of exactly ", stringify!($block), " threads (`block = ",
                        stringify!($block), "`: the launcher refuses any other); any grid \
                        (automatic: one block per tile of ", stringify!($tile), " elements). \
                        Integers: exact, wrapping. Floats: see the module documentation.")]
        #[kernel(family = $family, items_per_thread = $items, block = $block, $($opt = $val,)*
                 scratch(status = $words * x.len().div_ceil($tile) + 1), persist(status),
                 require(out.len() == x.len(), "out holds one sum per element of x"))]
        pub unsafe fn $name(x: Slice<$t>, out: SliceMut<$a>, status: Scratch<u64>) {
            // The workspace's formula and the kernel's tile and status agree.
            #[cfg(target_arch = "nvptx64")]
            const {
                assert!($tile == $block * $vecs * $lanes && $items == $vecs * $lanes);
                assert!($words == <$a as Status>::WORDS);
                // An epoch (below the refill period) and a flag fit a packed status's high
                // half.
                assert!(ferrocuda_device::PERSIST_REFILL <= 1 << 30);
            };
            // SAFETY: launched as a kernel with the declared block and workspace.
            #[cfg(target_arch = "nvptx64")]
            unsafe { scans!(@$path $t, $a, $lanes, $vecs, $block, $excl, x, out, status) }
        }
    )*};
}
scans! {
    "cumsum", cumsum_f32: f32 => f32, staged, excl false, lanes 4, vecs 16, block 128, items 64, tile 8192, words 1, min_blocks = 6;
    "cumsum", cumsum_f64: f64 => f64, staged, excl false, lanes 2, vecs 4, block 256, items 8, tile 2048, words 3, min_blocks = 5;
    "cumsum", cumsum_i32: i32 => i32, staged_left, excl false, lanes 4, vecs 16, block 128, items 64, tile 8192, words 1, min_blocks = 6;
    "cumsum", cumsum_i32_i64: i32 => i64, regs, excl false, lanes 4, vecs 4, block 256, items 16, tile 4096, words 3;
    "cumsum", cumsum_i64: i64 => i64, staged, excl false, lanes 2, vecs 4, block 256, items 8, tile 2048, words 3;
    "cumsum_exclusive", cumsum_exclusive_f32: f32 => f32, staged, excl true, lanes 4, vecs 16, block 128, items 64, tile 8192, words 1, min_blocks = 6;
    "cumsum_exclusive", cumsum_exclusive_f64: f64 => f64, staged, excl true, lanes 2, vecs 4, block 256, items 8, tile 2048, words 3, min_blocks = 5;
    "cumsum_exclusive", cumsum_exclusive_i32: i32 => i32, staged, excl true, lanes 4, vecs 16, block 128, items 64, tile 8192, words 1, min_blocks = 6;
    "cumsum_exclusive", cumsum_exclusive_i32_i64: i32 => i64, regs, excl true, lanes 4, vecs 4, block 256, items 16, tile 4096, words 3;
    "cumsum_exclusive", cumsum_exclusive_i64: i64 => i64, staged, excl true, lanes 2, vecs 4, block 256, items 8, tile 2048, words 3;
}
