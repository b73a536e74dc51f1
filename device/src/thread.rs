//! Thread, block and grid indices, the block barriers, sleep and clocks (device only).
//!
//! The PTX special registers `%tid`, `%ctaid`, `%ntid` and `%nctaid` are 32-bit; the helpers
//! that combine them widen to `usize` before multiplying, so a global index never wraps.
//!
//! # Thread model
//!
//! Index and clock reads: any thread, any time. The barriers ([`sync_threads`] and its
//! counting forms) are collective over the **block**: every thread of the block must reach
//! the same call, never under a condition that differs between threads of one block (a
//! violation hangs the block or desynchronizes later barriers). A barrier orders memory: the
//! block's accesses before it (global and shared) are visible to the block after it.
//! [`sync_warps`] is the same over a group of whole warps (its barrier's participants), and
//! orders memory among them.

#[cfg(target_arch = "nvptx64")]
use crate::nvvm;
use crate::GridStride;
#[cfg(target_arch = "nvptx64")]
use core::arch::nvptx;
use ferrocuda_macros::gpu_only;

/// A 3-component index or extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim3 {
    /// x component.
    pub x: u32,
    /// y component.
    pub y: u32,
    /// z component.
    pub z: u32,
}

// SAFETY (all reads below): reading a PTX special register has no preconditions.

/// `threadIdx`: this thread's index within its block.
#[inline(always)]
#[gpu_only]
pub fn thread_idx() -> Dim3 {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe {
        Dim3 {
            x: nvptx::_thread_idx_x() as u32,
            y: nvptx::_thread_idx_y() as u32,
            z: nvptx::_thread_idx_z() as u32,
        }
    }
}

/// `blockIdx`: this block's index within the grid.
#[inline(always)]
#[gpu_only]
pub fn block_idx() -> Dim3 {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe {
        Dim3 {
            x: nvptx::_block_idx_x() as u32,
            y: nvptx::_block_idx_y() as u32,
            z: nvptx::_block_idx_z() as u32,
        }
    }
}

/// `blockDim`: threads per block.
#[inline(always)]
#[gpu_only]
pub fn block_dim() -> Dim3 {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe {
        Dim3 {
            x: nvptx::_block_dim_x() as u32,
            y: nvptx::_block_dim_y() as u32,
            z: nvptx::_block_dim_z() as u32,
        }
    }
}

/// `gridDim`: blocks per grid.
#[inline(always)]
#[gpu_only]
pub fn grid_dim() -> Dim3 {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe {
        Dim3 {
            x: nvptx::_grid_dim_x() as u32,
            y: nvptx::_grid_dim_y() as u32,
            z: nvptx::_grid_dim_z() as u32,
        }
    }
}

/// Global x index: `blockIdx.x * blockDim.x + threadIdx.x`.
#[inline(always)]
#[gpu_only]
pub fn index_1d() -> usize {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe {
        (nvptx::_block_idx_x() as u32 as usize) * (nvptx::_block_dim_x() as u32 as usize)
            + nvptx::_thread_idx_x() as u32 as usize
    }
}

/// Global (x, y) index.
#[inline(always)]
pub fn index_2d() -> (usize, usize) {
    let (b, d, t) = (block_idx(), block_dim(), thread_idx());
    (
        b.x as usize * d.x as usize + t.x as usize,
        b.y as usize * d.y as usize + t.y as usize,
    )
}

/// Global (x, y, z) index.
#[inline(always)]
pub fn index_3d() -> (usize, usize, usize) {
    let (b, d, t) = (block_idx(), block_dim(), thread_idx());
    (
        b.x as usize * d.x as usize + t.x as usize,
        b.y as usize * d.y as usize + t.y as usize,
        b.z as usize * d.z as usize + t.z as usize,
    )
}

/// Threads in the grid along x: `gridDim.x * blockDim.x`.
#[inline(always)]
#[gpu_only]
pub fn grid_size_1d() -> usize {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe { (nvptx::_grid_dim_x() as u32 as usize) * (nvptx::_block_dim_x() as u32 as usize) }
}

/// This thread's indices of `0..n` in a 1-D grid-stride loop.
#[inline(always)]
pub fn grid_stride(n: usize) -> GridStride {
    GridStride::new(index_1d(), grid_size_1d(), n)
}

/// Block-wide barrier (`__syncthreads()` / `bar.sync 0`).
///
/// Every thread of the block must reach the same call, or the block deadlocks; never call it
/// under a condition that differs between threads of one block.
#[inline(always)]
#[gpu_only]
pub fn sync_threads() {
    // SAFETY: a barrier has no memory-safety preconditions; reaching it uniformly is the
    // documented contract (a violation hangs, it does not corrupt memory).
    unsafe { nvptx::_syncthreads() }
}

/// Barrier of a group of warps (`bar.sync barrier, threads`; CUTLASS's
/// `NamedBarrier::sync(threads, barrier)`): waits until `threads` threads have reached
/// barrier `barrier` of this block, then orders memory as [`sync_threads`] does among them.
/// For groups of warps that work apart within one block (each group its own barrier, e.g.
/// `1 + group`), so that one group's barrier does not wait for the others.
///
/// # Safety
///
/// 1. `barrier < 16` and `threads` is a non-zero multiple of 32 (PTX: other values are
///    undefined behavior);
/// 2. every thread of a participating warp reaches the same call (the condition that leads
///    there is warp-uniform), and exactly `threads / 32` warps arrive at each use of the
///    barrier, all passing the same `threads`;
/// 3. no other set of warps uses barrier `barrier` meanwhile (barrier 0 is
///    [`sync_threads`]'s: the whole block).
///
/// A violation may hang the block, or let the barrier release before the memory it should
/// order is written — races the caller's `unsafe` code then has.
#[inline(always)]
#[gpu_only]
pub unsafe fn sync_warps(barrier: u32, threads: u32) {
    // SAFETY: the caller's contract. An intrinsic, not `asm!`: LLVM knows it as convergent
    // and as a barrier to memory accesses.
    unsafe { nvvm::barrier_sync_count(barrier, threads) }
}

/// Threads per block: `blockDim.x * blockDim.y * blockDim.z` (CUB's `BLOCK_THREADS`).
#[inline(always)]
pub fn block_threads() -> u32 {
    let d = block_dim();
    d.x * d.y * d.z
}

/// This thread's linear rank in its block, `x + y * blockDim.x + z * blockDim.x *
/// blockDim.y` (cooperative groups' `thread_rank()`): the order in which the hardware
/// groups threads into warps, for 1-D, 2-D and 3-D blocks alike.
#[inline(always)]
pub fn rank_in_block() -> u32 {
    let (t, d) = (thread_idx(), block_dim());
    t.x + d.x * (t.y + d.y * t.z)
}

/// Block barrier that counts: the number of threads of the block whose `pred` is true
/// (`bar.red.popc.u32`; CUDA `__syncthreads_count`). Every thread gets the count.
#[inline(always)]
#[gpu_only]
pub fn sync_threads_count(pred: bool) -> u32 {
    // SAFETY: as `sync_threads`.
    unsafe { nvvm::barrier0_popc(pred as i32) as u32 }
}

/// Block barrier: `true` if `pred` is true in every thread of the block
/// (`bar.red.and.pred`; CUDA `__syncthreads_and`).
#[inline(always)]
#[gpu_only]
pub fn sync_threads_and(pred: bool) -> bool {
    // SAFETY: as `sync_threads`.
    unsafe { nvvm::barrier0_and(pred as i32) != 0 }
}

/// Block barrier: `true` if `pred` is true in any thread of the block
/// (`bar.red.or.pred`; CUDA `__syncthreads_or`).
#[inline(always)]
#[gpu_only]
pub fn sync_threads_or(pred: bool) -> bool {
    // SAFETY: as `sync_threads`.
    unsafe { nvvm::barrier0_or(pred as i32) != 0 }
}

/// Suspends the thread for about `ns` nanoseconds (0 to 1 ms, at the hardware's choice;
/// `nanosleep.u32`, sm_70+; CUDA `__nanosleep`). For back-off in spin loops.
#[inline(always)]
#[gpu_only]
pub fn nanosleep(ns: u32) {
    // SAFETY: no preconditions.
    unsafe { nvvm::nanosleep(ns) }
}

/// The SM's 64-bit cycle counter (`%clock64`; CUDA `clock64()`). Counters of different SMs
/// are not synchronized.
#[inline(always)]
#[gpu_only]
pub fn clock64() -> u64 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvvm::clock64() }
}

/// The GPU's global nanosecond timer (`%globaltimer`), the same on every SM (its update
/// granularity is about a microsecond on current GPUs).
#[inline(always)]
#[gpu_only]
pub fn global_timer() -> u64 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvvm::globaltimer() }
}

/// cuda_std's per-component names (`thread::thread_idx_x()`, …), for code ported from
/// Rust-CUDA: each is one component of [`thread_idx`], [`block_idx`], [`block_dim`] or
/// [`grid_dim`].
macro_rules! component_aliases {
    ($($name:ident = $f:ident . $c:ident;)*) => {$(
        #[doc = concat!("`", stringify!($f), "().", stringify!($c), "` (cuda_std's name).")]
        #[inline(always)]
        pub fn $name() -> u32 {
            $f().$c
        }
    )*};
}
component_aliases! {
    thread_idx_x = thread_idx.x; thread_idx_y = thread_idx.y; thread_idx_z = thread_idx.z;
    block_idx_x = block_idx.x; block_idx_y = block_idx.y; block_idx_z = block_idx.z;
    block_dim_x = block_dim.x; block_dim_y = block_dim.y; block_dim_z = block_dim.z;
    grid_dim_x = grid_dim.x; grid_dim_y = grid_dim.y; grid_dim_z = grid_dim.z;
}
