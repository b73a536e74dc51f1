//! The Tensor Memory Accelerator (sm_90): box loads through a `TensorMap` (out-of-bounds
//! elements read as zero) and box stores through a `TensorMapMut` (out-of-bounds elements not
//! written), checked element by element on the host. Built into the crate's sm_90 part.

#[cfg(ferrocuda_arch = "sm_90")]
use ferrocuda_device::mbarrier::Phase;
#[cfg(ferrocuda_arch = "sm_90")]
use ferrocuda_device::tma::{self, Tma, TmaStore};
use ferrocuda_device::{kernel, SliceMut, TensorMap, TensorMapMut};
#[cfg(ferrocuda_arch = "sm_90")]
use ferrocuda_device::{shared_array, shared_mbarrier, thread};

/// Block `(bx, by)` loads the 16 × 32 box of `src` at row `16 by + dr`, column `32 bx + dc`
/// (either may lie partly or wholly outside `src`) into shared memory with one TMA copy
/// completing on an mbarrier, writes what it sees to `seen[512 b ..]` (`b = by · gridDim.x +
/// bx`, row-major), then, when both coordinates are non-negative, stores the box to `dst` at
/// the same coordinates with a TMA store.
/// `mode` bit 0: prefetch the source's descriptor first; bit 1: do the store. Blocks of 128
/// threads.
#[kernel(arch = "sm_90", block = 128)]
pub unsafe fn tma_box_copy(
    src: TensorMap<f32, 0, 16, 32>,
    dst: TensorMapMut<f32, 0, 16, 32>,
    seen: SliceMut<f32>,
    dr: i32,
    dc: i32,
    mode: u32,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        let tile = shared_array!(f32, 512, align = 128);
        // SAFETY: initialised once per block, here.
        let bar = unsafe { shared_mbarrier!().init(1) };
        let (bx, by) = (thread::block_idx().x, thread::block_idx().y);
        let coords = [16 * by as i32 + dr, 32 * bx as i32 + dc];
        let tid = thread::rank_in_block();
        if tid == 0 {
            if mode & 1 != 0 {
                src.prefetch();
            }
            // SAFETY: the tile is 2048 bytes of this block's shared memory, 128-byte aligned,
            // untouched until the barrier's first phase completes, which expects its bytes.
            unsafe {
                bar.arrive_expect_tx(2048);
                src.load(tile.shared_addr(0), bar.shared_addr(), &coords);
            }
        }
        let _ = bar.wait(Phase::first());
        let b = (by * thread::grid_dim().x + bx) as usize;
        let mut i = tid as usize;
        while i < 512 {
            // SAFETY: one thread per record.
            unsafe { seen.write(512 * b + i, tile.get(i)) };
            i += 128;
        }
        // The TMA store reads the tile through the async proxy: the load wrote it there, and
        // no thread wrote it since; every thread has read it (the barrier orders the reads
        // before the store's).
        thread::sync_threads();
        // A store's box may run past the array's end but not start before it.
        if tid == 0 && mode & 2 != 0 && coords[0] >= 0 && coords[1] >= 0 {
            // SAFETY: the tile holds the box, unchanged until the store's read completes
            // (waited below); the blocks' boxes do not overlap.
            unsafe { dst.store(tile.shared_addr(0), &coords) };
            tma::store_commit();
            tma::store_wait::<0>();
        }
    }
}
