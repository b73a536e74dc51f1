//! The grid as a whole: the grid-stride loop ([`GridStride`], independent of the target so
//! that it can be tested on the host), the linear block and thread ranks of any grid shape,
//! and the grid-wide barrier of cooperative kernels ([`GridBarrier`]).
//!
//! # Grid-wide synchronization
//!
//! A kernel declared `#[kernel(cooperative)]` may take a [`GridBarrier`] parameter, which the
//! launcher provides (callers never pass it). [`GridBarrier::sync`] (or [`sync`]) waits until
//! every thread of every block of the grid has reached it:
//!
//! ```ignore
//! use ferrocuda_device::grid::{self, GridBarrier};
//! use ferrocuda_device::{kernel, thread, Slice, SliceMut};
//!
//! #[kernel(cooperative)]
//! pub unsafe fn two_phases(x: Slice<f32>, out: SliceMut<f32>, bar: GridBarrier) {
//!     // phase 1: every block writes its part of `out` …
//!     grid::sync(&bar);
//!     // phase 2: … and may now read every other block's part.
//! }
//! ```
//!
//! **Why cooperative.** A block waiting at the barrier holds its SM until the last block
//! arrives; a block that is not resident yet — waiting for an SM that a waiting block holds —
//! never arrives. A cooperative launch guarantees that every block of the grid is resident at
//! once; the launcher checks before launching that the grid fits in one resident wave (blocks ≤
//! blocks per SM for the kernel's block size and dynamic shared memory × SMs) and refuses it
//! otherwise, naming the numbers, and its automatic grid is exactly one wave. A kernel with a
//! `GridBarrier` and without `cooperative` does not compile.
//!
//! **Thread model.** [`sync`] is collective over the **grid**: every thread of every block
//! must reach the same number of calls, in uniform control flow (a block barrier
//! (`bar.sync`) is part of it — the rules of [`thread::sync_threads`](crate::thread::sync_threads)
//! apply in each block, and a block that returns early leaves the others waiting forever).
//!
//! **Memory ordering.** After `sync()` returns, a thread sees every write made before the
//! `sync()` call by any thread of the grid — global memory, and its own block's shared
//! memory — and no write made after it by another thread is visible to its reads made
//! before (the barrier orders both ways). How: the barrier is a counter in a workspace the
//! launcher provides, one word (zero-filled; see below for a persistent one).
//!
//! 1. `bar.sync 0`: the block's writes before the barrier happen before its thread 0's next
//!    instruction (a CTA barrier synchronizes its threads, and causality order is transitive
//!    in the PTX memory model).
//! 2. Thread 0 *arrives*: `atom.release.gpu.global.add.u32` on the counter. The release
//!    orders everything that happened before it — its block's writes, by step 1 — before the
//!    addition.
//! 3. Thread 0 spins on `ld.acquire.gpu.global.u32` of the counter until it reads the value of
//!    the last block's arrival. Every arrival is a read-modify-write of the same word at gpu
//!    scope, so the value read follows each block's release in the PTX model's observation
//!    order: the acquire load synchronizes with every block's arrival, and all the grid's
//!    writes before the barrier happen before thread 0's later operations.
//! 4. `bar.sync 0` again: thread 0's view passes on to the whole block.
//!
//! The counter is a generation counter in its top bit (cooperative groups' scheme): block 0
//! adds `2^31 − (blocks − 1)` and every other block adds 1, so the top bit flips exactly when
//! the last block arrives — and every arrival at one barrier reads a counter whose top bit is
//! the one before the flip. A block leaves when it reads the flipped bit; no block can
//! arrive at the next barrier (and flip the bit back) before every block has left this one,
//! since that needs every block's next arrival. The counter never needs resetting, so any
//! number of barriers runs on one word: each barrier adds 2^31 in all, leaving the low 31
//! bits as it found them, and the scheme needs only those to be zero when the launch starts
//! (the top bit may be either). The launcher zero-fills the word before a launch (a workspace
//! of its own per launch and stream, and a graph-owned one under CUDA graph capture) — or,
//! declared `#[kernel(persist(bar))]`, only when the workspace is new to the kernel: each
//! launch then starts where the previous one on the stream left the counter, its low bits
//! zero (a launch that traps poisons the context, and the workspace with it).

use ferrocuda_abi::{KernelParam, ParamDesc, Scratch};
use ferrocuda_macros::gpu_only;

pub use crate::stride::GridStride;

/// The grid-wide barrier of a cooperative kernel: a kernel parameter the launcher provides
/// (a one-word workspace, zero-filled before each launch unless the kernel declares it
/// `persist(…)`; callers never pass it), valid only
/// in a `#[kernel(cooperative)]` kernel — see the [module documentation](self) for the thread
/// model and the memory-ordering argument.
///
/// To the host it is a scratch workspace of one `u32` (its manifest kind is `"scratch"`):
/// every launcher — Rust, Python, typed — provides it like any `Scratch` workspace.
#[repr(transparent)]
pub struct GridBarrier(Scratch<u32>);

impl Clone for GridBarrier {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl Copy for GridBarrier {}

// SAFETY: `repr(transparent)` over `Scratch<u32>`: the same layout (data pointer first) and
// the same description — a workspace the launcher provides.
unsafe impl KernelParam for GridBarrier {
    const DESC: ParamDesc = <Scratch<u32> as KernelParam>::DESC;
}

/// `u32` words of a [`GridBarrier`]'s workspace (the length `#[kernel]` declares for it).
pub const GRID_BARRIER_WORDS: u32 = 1;

impl GridBarrier {
    /// A barrier over the `u32` counter at `ptr`.
    ///
    /// # Safety
    ///
    /// 1. `ptr` points to a `u32` of global memory whose low 31 bits are zero when the launch
    ///    starts (the top bit may be either: what a launch's barriers leave) and that nothing
    ///    but this launch's grid barriers accesses during the launch;
    /// 2. the launch is cooperative: every block of the grid is resident at once.
    #[inline(always)]
    pub const unsafe fn from_raw(ptr: *mut u32) -> Self {
        // SAFETY: the caller's contract covers `Scratch`'s (one element at `ptr`).
        GridBarrier(unsafe { Scratch::from_raw_parts(ptr, GRID_BARRIER_WORDS as usize) })
    }
}

impl GridBarrier {
    /// Waits until every thread of the grid has reached this barrier (see the
    /// [module documentation](self): collective over the grid, in uniform control flow;
    /// memory written before the call by any thread is visible to every thread after it).
    #[inline(always)]
    #[gpu_only]
    pub fn sync(&self) {
        use crate::atomic::{AtomicRef, Order, Scope};
        use crate::thread;
        const FLIP: u32 = 1 << 31;
        thread::sync_threads();
        if thread::rank_in_block() == 0 {
            // SAFETY: the launcher's workspace of this launch (`GridBarrier`'s invariant, from
            // the kernel entry: global memory, its low 31 bits zero at the launch, used only
            // by the grid barriers of this launch), accessed only atomically here.
            let counter = unsafe { AtomicRef::from_global_ptr(self.0.as_mut_ptr()) };
            // At most 2^31 blocks (the driver's grid limit is below): `blocks - 1 < FLIP`.
            let blocks = num_blocks() as u32;
            let add = if block_rank() == 0 {
                FLIP.wrapping_sub(blocks - 1)
            } else {
                1
            };
            let before = counter.fetch_add(add, Order::Release, Scope::Device);
            while (counter.load(Order::Acquire, Scope::Device) ^ before) & FLIP == 0 {}
        }
        thread::sync_threads();
    }
}

/// Waits until every thread of the grid has reached `barrier`: [`GridBarrier::sync`].
#[inline(always)]
#[gpu_only]
pub fn sync(barrier: &GridBarrier) {
    barrier.sync()
}

/// This block's linear index in the grid, `x + y·gx + z·gx·gy` (cooperative groups'
/// `grid.block_rank()`), for any grid shape.
#[inline(always)]
#[gpu_only]
pub fn block_rank() -> usize {
    let (b, g) = (crate::thread::block_idx(), crate::thread::grid_dim());
    b.x as usize + g.x as usize * (b.y as usize + g.y as usize * b.z as usize)
}

/// Blocks in the grid, `gx·gy·gz`.
#[inline(always)]
#[gpu_only]
pub fn num_blocks() -> usize {
    let g = crate::thread::grid_dim();
    g.x as usize * g.y as usize * g.z as usize
}

/// This thread's linear index in the grid (its block's rank times the block's threads, plus
/// its rank in the block), for any grid and block shape.
#[inline(always)]
#[gpu_only]
pub fn thread_rank() -> usize {
    block_rank() * crate::thread::block_threads() as usize + crate::thread::rank_in_block() as usize
}

/// Threads in the grid, for any grid and block shape.
#[inline(always)]
#[gpu_only]
pub fn num_threads() -> usize {
    num_blocks() * crate::thread::block_threads() as usize
}
