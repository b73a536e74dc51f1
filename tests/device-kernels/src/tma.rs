//! The Tensor Memory Accelerator (sm_90): box loads through a `TensorMap` (out-of-bounds
//! elements read as zero) and box stores through a `TensorMapMut` (out-of-bounds elements not
//! written) of 2, 3 and 5 axes, with each swizzle, and loads multicast to a cluster, checked
//! element by element on the host. Built into the crate's sm_90 part.

#[cfg(ferrocuda_arch = "sm_90")]
use ferrocuda_device::mbarrier::{self, Phase};
#[cfg(ferrocuda_arch = "sm_90")]
use ferrocuda_device::tma::{self, Tma, TmaStore};
use ferrocuda_device::{kernel, Slice, SliceMut, TensorMap, TensorMapMut};
#[cfg(ferrocuda_arch = "sm_90")]
use ferrocuda_device::{cluster, shared_array, shared_mbarrier, thread};

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

/// The bytes one copy through `map` moves.
#[cfg(ferrocuda_arch = "sm_90")]
fn box_bytes<M: Tma>(_map: &M) -> u32 {
    M::BOX_BYTES
}

/// The body of the boxes-by-list kernels below: block `b` loads the box at
/// `load_at[R b .. R b + R]` (outermost first; any coordinates, the innermost a multiple of
/// 16 bytes) into `$tile` with one TMA copy completing on an mbarrier, writes the tile's
/// elements **as they lie in shared memory** (with the map's swizzle) to `seen[E b ..]`, and,
/// unless `store_at[R b]` is `i32::MIN`, stores the tile to `dst` at `store_at[R b ..]`
/// (non-negative; the boxes the blocks store do not overlap).
#[cfg(ferrocuda_arch = "sm_90")]
macro_rules! boxes_by_list {
    ($src:ident, $dst:ident, $load_at:ident, $store_at:ident, $seen:ident, $tile:ident, $rank:literal, $elems:literal) => {{
        // SAFETY: initialised once per block, here.
        let bar = unsafe { shared_mbarrier!().init(1) };
        let b = thread::block_idx().x as usize;
        let mut at = [0i32; $rank];
        let mut to = [0i32; $rank];
        let mut i = 0;
        while i < $rank {
            at[i] = $load_at.get($rank * b + i).unwrap_or(0);
            to[i] = $store_at.get($rank * b + i).unwrap_or(i32::MIN);
            i += 1;
        }
        let tid = thread::rank_in_block();
        if tid == 0 {
            // SAFETY: the tile is the box's bytes of this block's shared memory, aligned for
            // the swizzle, untouched until the barrier's first phase completes, which expects
            // its bytes.
            unsafe {
                bar.arrive_expect_tx(box_bytes(&$src));
                $src.load($tile.shared_addr(0), bar.shared_addr(), &at);
            }
        }
        let _ = bar.wait(Phase::first());
        let mut i = tid as usize;
        while i < $elems {
            // SAFETY: one thread per record.
            unsafe { $seen.write($elems * b + i, $tile.get(i)) };
            i += 128;
        }
        // Every thread has read the tile (ordered before the store's read by the barrier);
        // nothing wrote it but the load, through the async proxy.
        thread::sync_threads();
        if tid == 0 && to[0] != i32::MIN {
            // SAFETY: the tile holds the box, unchanged until the store's read completes
            // (waited below); the host gives the blocks boxes that do not overlap, at
            // non-negative coordinates (checked by the store).
            unsafe { $dst.store($tile.shared_addr(0), &to) };
            tma::store_commit();
            tma::store_wait::<0>();
        }
    }};
}

/// 3-D boxes of 2 × 8 × 16 f32 (see `boxes_by_list!`): `load_at`, `store_at` 3 coordinates
/// per block, `seen` 256 elements per block. Blocks of 128 threads.
#[kernel(arch = "sm_90", block = 128)]
pub unsafe fn tma_boxes_3d(
    src: TensorMap<f32, 0, 2, 8, 16>,
    dst: TensorMapMut<f32, 0, 2, 8, 16>,
    load_at: Slice<i32>,
    store_at: Slice<i32>,
    seen: SliceMut<f32>,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        let tile = shared_array!(f32, 256, align = 128);
        boxes_by_list!(src, dst, load_at, store_at, seen, tile, 3, 256);
    }
}

/// 5-D boxes of 2 × 2 × 3 × 4 × 8 u16 (see `boxes_by_list!`; the innermost extent is one
/// 16-byte row): 5 coordinates per block, `seen` 384 elements per block.
#[kernel(arch = "sm_90", block = 128)]
pub unsafe fn tma_boxes_5d(
    src: TensorMap<u16, 0, 2, 2, 3, 4, 8>,
    dst: TensorMapMut<u16, 0, 2, 2, 3, 4, 8>,
    load_at: Slice<i32>,
    store_at: Slice<i32>,
    seen: SliceMut<u16>,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        let tile = shared_array!(u16, 384, align = 128);
        boxes_by_list!(src, dst, load_at, store_at, seen, tile, 5, 384);
    }
}

/// One 2-D kernel per swizzle: boxes of 16 rows × one swizzle width of f32 (32, 64, 128
/// bytes: 8, 16, 32 columns), loaded and stored through maps with that swizzle (see
/// `boxes_by_list!`): `seen` holds the tile as the swizzle lays it out in shared memory, and
/// the store undoes it. The tile is 1024-byte aligned (the swizzle's pattern repeats every
/// 1024 bytes, and TMA swizzles by address).
macro_rules! tma_swizzled {
    ($($name:ident: $sw:literal, $cols:literal, $elems:literal;)*) => {$(
        #[doc = concat!("2-D boxes of 16 × ", stringify!($cols), " f32 with the ",
                        stringify!($sw), "-byte swizzle (see the macro's documentation).")]
        #[kernel(arch = "sm_90", block = 128)]
        pub unsafe fn $name(
            src: TensorMap<f32, $sw, 16, $cols>,
            dst: TensorMapMut<f32, $sw, 16, $cols>,
            load_at: Slice<i32>,
            store_at: Slice<i32>,
            seen: SliceMut<f32>,
        ) {
            #[cfg(target_arch = "nvptx64")]
            {
                let tile = shared_array!(f32, $elems, align = 1024);
                boxes_by_list!(src, dst, load_at, store_at, seen, tile, 2, $elems);
            }
        }
    )*};
}

tma_swizzled! {
    tma_swizzle_32: 32, 8, 128;
    tma_swizzle_64: 64, 16, 256;
    tma_swizzle_128: 128, 32, 512;
}

/// TMA multicast within clusters of 2 blocks: cluster `c`'s box of 16 × 32 f32 at
/// `load_at[2 c ..]` arrives in **both** blocks' shared memory as two 8-row halves, each
/// copied once from global memory and multicast to both blocks (`mask` 0b11), each block's
/// mbarrier expecting the whole 2048 bytes. `mode` 0: block rank `r` issues half `r`;
/// `mode` 1: rank 0 issues both halves. Each block writes its tile to `seen[512 b ..]`.
/// Blocks of 128 threads.
#[kernel(arch = "sm_90", block = 128, cluster = (2, 1, 1))]
pub unsafe fn tma_multicast(
    src: TensorMap<f32, 0, 8, 32>,
    load_at: Slice<i32>,
    seen: SliceMut<f32>,
    mode: u32,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        let tile = shared_array!(f32, 512, align = 128);
        // SAFETY: initialised once per block, here.
        let bar = unsafe { shared_mbarrier!().init(1) };
        // The peer's copies signal this block's barrier: its initialisation must be visible
        // cluster-wide, and the peer running, before either block issues a copy.
        mbarrier::fence_mbarrier_init();
        cluster::sync();
        let c = thread::block_idx().x as usize / 2;
        let rank = cluster::rank();
        let (r0, c0) = (
            load_at.get(2 * c).unwrap_or(0),
            load_at.get(2 * c + 1).unwrap_or(0),
        );
        if thread::rank_in_block() == 0 {
            // SAFETY: this block's barrier expects both halves (its own copy's and the
            // peer's, which may land first: the phase stays open until this arrival); each
            // half goes to its own 1024 bytes of the tile in both blocks, untouched until
            // the barrier's phase completes; the cluster holds ranks 0 and 1.
            unsafe {
                bar.arrive_expect_tx(2048);
                for h in 0..2u32 {
                    // Mode 0: this block's own half; mode 1: rank 0 both.
                    let mine = if mode == 0 { h == rank } else { rank == 0 };
                    if !mine {
                        continue;
                    }
                    src.load_multicast(
                        tile.shared_addr(256 * h as usize),
                        bar.shared_addr(),
                        &[r0 + 8 * h as i32, c0],
                        0b11,
                    );
                }
            }
        }
        let _ = bar.wait(Phase::first());
        let b = thread::block_idx().x as usize;
        let mut i = thread::rank_in_block() as usize;
        while i < 512 {
            // SAFETY: one thread per record.
            unsafe { seen.write(512 * b + i, tile.get(i)) };
            i += 128;
        }
        // Neither block exits while a copy it issued may still write the other's memory.
        cluster::sync();
    }
}
