//! Where a thread sits in the whole launch, for any grid shape (1-D, 2-D or 3-D grids and
//! blocks): the linear block index, the number of blocks, and block-shared scratch memory.
//!
//! The element-wise kernels walk `thread::index_1d()` (the x axis only), which repeats work
//! harmlessly under a 2-D grid; the gallery's reductions, histograms and scans must count every
//! element exactly once whatever grid the caller passes, so they walk these linear indices.

use ferrocuda_device::block::SCRATCH_LEN_MAX;
use ferrocuda_device::shared_array;

pub use ferrocuda_device::grid::{block_rank, num_blocks as blocks};

/// This thread's linear index in the grid and the number of threads in the grid.
#[inline(always)]
pub fn thread_rank() -> (usize, usize) {
    use ferrocuda_device::grid;
    (grid::thread_rank(), grid::num_threads())
}

/// The block's scratch for `ferrocuda_device::block` collectives: 64 elements of `T`
/// (`block::SCRATCH_LEN_MAX`, enough for any block), shared memory, 16-byte aligned. One array
/// for every caller (a shared array's element type cannot be generic: 64 words, viewed as `T`).
#[inline(always)]
pub fn block_scratch<T>() -> *mut T {
    const { assert!(core::mem::size_of::<T>() <= 8 && core::mem::align_of::<T>() <= 16) };
    shared_array!(u64, SCRATCH_LEN_MAX, align = 16)
        .as_mut_ptr()
        .cast()
}
