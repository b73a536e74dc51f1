//! Kernels that declare their launch shape: N-D automatic grids, launch bounds, dynamic
//! shared memory of a declared element type. Each is correct for any grid and block the
//! host accepts.

use ferrocuda_device::{kernel, Slice, SliceMut, ViewMut};
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{thread, GridStride};

/// Row-major position `(i, j)` of element `(i, j)` of a `rows × cols` grid, as `i32`
/// (wrapping: only small test arrays are meant to be exact).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn linear(i: usize, cols: usize, j: usize) -> i32 {
    (i * cols + j) as i32
}

/// Every element = its C-order (row-major) index, `x[i, j] = i * cols + j`, over the automatic
/// 2-D grid (x along columns, y along rows), in blocks of exactly 32 × 8 threads; 2-D
/// grid-stride loops cover any grid.
#[kernel(family = "index_grid", grid = "2d", block = (32, 8))]
pub unsafe fn index_grid_2d(x: ViewMut<i32, 2>) {
    let ix = x.indexer();
    let (rows, cols) = (ix.shape[0], ix.shape[1]);
    let (b, d, t, g) = (
        thread::block_idx(),
        thread::block_dim(),
        thread::thread_idx(),
        thread::grid_dim(),
    );
    let (d, g) = ((d.x as usize, d.y as usize), (g.x as usize, g.y as usize));
    for i in GridStride::new(b.y as usize * d.1 + t.y as usize, g.1 * d.1, rows) {
        for j in GridStride::new(b.x as usize * d.0 + t.x as usize, g.0 * d.0, cols) {
            // SAFETY: (i, j) is in bounds; one thread per element (the view does not alias
            // itself: the host checks written arrays).
            unsafe { x.write_at(ix.offset([i, j]), linear(i, cols, j)) };
        }
    }
}

/// Every element = its C-order index, over the automatic 3-D grid (x along the last axis, y
/// along the middle one, z along the first), in blocks of at most 128 threads (`.maxntid`).
#[kernel(family = "index_grid", grid = "3d", max_threads = 128)]
pub unsafe fn index_grid_3d(x: ViewMut<i32, 3>) {
    let ix = x.indexer();
    let [n0, n1, n2] = ix.shape;
    let (b, d, t, g) = (
        thread::block_idx(),
        thread::block_dim(),
        thread::thread_idx(),
        thread::grid_dim(),
    );
    let start = |b: u32, d: u32, t: u32| b as usize * d as usize + t as usize;
    let step = |g: u32, d: u32| g as usize * d as usize;
    for k in GridStride::new(start(b.z, d.z, t.z), step(g.z, d.z), n0) {
        for i in GridStride::new(start(b.y, d.y, t.y), step(g.y, d.y), n1) {
            for j in GridStride::new(start(b.x, d.x, t.x), step(g.x, d.x), n2) {
                // SAFETY: (k, i, j) is in bounds; one thread per element.
                unsafe { x.write_at(ix.offset([k, i, j]), linear(k * n1 + i, n2, j)) };
            }
        }
    }
}

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    /// The launch's dynamic shared memory (the builder declares it 16-byte aligned).
    #[link_name = ferrocuda_abi::dynamic_shared_symbol!()]
    static mut DYNAMIC_SHARED: [u8; 0];
}

/// Bytes of dynamic shared memory this launch has (`%dynamic_smem_size`).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn dynamic_shared_bytes() -> u32 {
    let n: u32;
    // SAFETY: reading a special register; no memory access.
    unsafe {
        core::arch::asm!("mov.u32 {n}, %dynamic_smem_size;", n = out(reg32) n,
                         options(pure, nomem, nostack))
    };
    n
}

/// Reverses `x` chunk by chunk into `y` through dynamic shared memory: each block stages a
/// chunk of as many `f32` as the launch's dynamic shared memory holds, waits, and writes it
/// back reversed within the chunk (`y[c + k] = x[c + len - 1 - k]`, `len` the chunk's length;
/// the last chunk may be shorter). Every staged value crosses threads, so every byte of the
/// shared memory the launch asked for is written and read. Without dynamic shared memory
/// (`shared_mem = 0`) it writes nothing.
#[kernel(family = "shared_reverse", same_shape(x, y), dynamic_shared = f32)]
pub unsafe fn shared_reverse_f32(x: Slice<f32>, y: SliceMut<f32>) {
    let cap = dynamic_shared_bytes() as usize / core::mem::size_of::<f32>();
    let n = x.len().min(y.len());
    if cap == 0 {
        return;
    }
    // The symbol is this block's dynamic shared memory: `cap` f32 of it, 16-byte aligned
    // (taking its address is safe; the accesses below say why they are in bounds).
    let tile = (&raw mut DYNAMIC_SHARED).cast::<f32>();
    let (t, threads) = (
        thread::rank_in_block() as usize,
        thread::block_threads() as usize,
    );
    let blocks = thread::grid_dim().x as usize;
    // Uniform over the block: the chunk depends on the block index only.
    for chunk in GridStride::new(thread::block_idx().x as usize, blocks, n.div_ceil(cap)) {
        let base = chunk * cap;
        let len = cap.min(n - base);
        for k in GridStride::new(t, threads, len) {
            // SAFETY: k < len <= cap; base + k < n.
            unsafe { *tile.add(k) = x.get_unchecked(base + k) };
        }
        thread::sync_threads();
        for k in GridStride::new(t, threads, len) {
            // SAFETY: len - 1 - k < cap, written before the barrier; base + k < n; one thread
            // per element.
            unsafe { y.write_unchecked(base + k, *tile.add(len - 1 - k)) };
        }
        // The next chunk overwrites the tile.
        thread::sync_threads();
    }
}
