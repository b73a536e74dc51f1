//! Thread, block and grid indices, and the block barrier (device only).
//!
//! The PTX special registers `%tid`, `%ctaid`, `%ntid` and `%nctaid` are 32-bit; the helpers
//! that combine them widen to `usize` before multiplying, so a global index never wraps.

use crate::GridStride;
use core::arch::nvptx;

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
pub fn thread_idx() -> Dim3 {
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
pub fn block_idx() -> Dim3 {
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
pub fn block_dim() -> Dim3 {
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
pub fn grid_dim() -> Dim3 {
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
pub fn index_1d() -> usize {
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
pub fn grid_size_1d() -> usize {
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
pub fn sync_threads() {
    // SAFETY: a barrier has no memory-safety preconditions; reaching it uniformly is the
    // documented contract (a violation hangs, it does not corrupt memory).
    unsafe { nvptx::_syncthreads() }
}
