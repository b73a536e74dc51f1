//! Where a thread sits in the whole launch, for any grid shape (1-D, 2-D or 3-D grids and
//! blocks): the linear block index, the number of blocks, and block-shared scratch memory.
//!
//! The element-wise kernels walk `thread::index_1d()` (the x axis only), which repeats work
//! harmlessly under a 2-D grid; the gallery's reductions, histograms and scans must count every
//! element exactly once whatever grid the caller passes, so they walk these linear indices.

use core::mem::MaybeUninit;
use ferrocuda_device::thread;

/// This block's linear index, `x + y·gx + z·gx·gy`.
#[inline(always)]
pub fn block_rank() -> usize {
    let (b, g) = (thread::block_idx(), thread::grid_dim());
    b.x as usize + g.x as usize * (b.y as usize + g.y as usize * b.z as usize)
}

/// Blocks in the grid.
#[inline(always)]
pub fn blocks() -> usize {
    let g = thread::grid_dim();
    g.x as usize * g.y as usize * g.z as usize
}

/// This thread's linear index in the grid and the number of threads in the grid.
#[inline(always)]
pub fn thread_rank() -> (usize, usize) {
    let bt = thread::block_threads() as usize;
    (
        block_rank() * bt + thread::rank_in_block() as usize,
        blocks() * bt,
    )
}

/// 16-byte aligned words.
#[repr(C, align(16))]
pub struct Words<const N: usize>(pub [u64; N]);

#[link_section = ferrocuda_abi::shared_section!()]
static mut REDUCE: MaybeUninit<Words<64>> = MaybeUninit::uninit();

/// The block's scratch for `ferrocuda_device::block` collectives: 64 elements of `T`
/// (`block::SCRATCH_LEN_MAX`), shared memory, 16-byte aligned.
#[inline(always)]
pub fn block_scratch<T>() -> *mut T {
    const { assert!(core::mem::size_of::<T>() <= 8) };
    (&raw mut REDUCE).cast()
}
