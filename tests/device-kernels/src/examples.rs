//! Kernels in the shape of Rust-CUDA's examples, written with ferrocuda's names (the porting
//! guide, `docs/porting-from-rust-cuda.md`, walks through them): a vector add, a naive GEMM
//! and a GEMM through shared-memory tiles.

#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{shared_array, thread};
use ferrocuda_device::{kernel, Slice, SliceMut};

/// `c = a + b` (one thread per element, any grid).
#[kernel(same_shape(a, b, c))]
pub unsafe fn vec_add(a: Slice<f32>, b: Slice<f32>, c: SliceMut<f32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let i = thread::index_1d();
        if i < c.len() {
            // SAFETY: i < len of all three (same shape); one thread per element.
            unsafe { c.write_unchecked(i, a.get_unchecked(i) + b.get_unchecked(i)) };
        }
    }
}

/// `c = a · b` for row-major `a` (m×k), `b` (k×n), `c` (m×n): one thread per element of `c`
/// (x: column, y: row), a dot product of `k` terms each.
#[kernel]
pub unsafe fn gemm_naive(a: Slice<f32>, b: Slice<f32>, c: SliceMut<f32>, m: u32, n: u32, k: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let (col, row) = thread::index_2d();
        let (m, n, k) = (m as usize, n as usize, k as usize);
        if row < m && col < n {
            let mut acc = 0.0f32;
            for p in 0..k {
                acc += a.get(row * k + p).unwrap_or(0.0) * b.get(p * n + col).unwrap_or(0.0);
            }
            // SAFETY: one thread per element (an out-of-range index traps).
            unsafe { c.write(row * n + col, acc) };
        }
    }
}

/// Tile edge of [`gemm_tiled`]: blocks of `TILE`×`TILE` threads.
pub const TILE: usize = 16;

/// `c = a · b` as [`gemm_naive`], through two `TILE`×`TILE` shared tiles per block: the block
/// stages a tile of `a` and one of `b`, synchronizes, and each thread accumulates `TILE` terms
/// from shared memory. Blocks of `TILE`×`TILE` threads; any m, n, k (edge tiles are padded
/// with zeros).
#[kernel]
pub unsafe fn gemm_tiled(a: Slice<f32>, b: Slice<f32>, c: SliceMut<f32>, m: u32, n: u32, k: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let ta = shared_array!(f32, [TILE, TILE]);
        let tb = shared_array!(f32, [TILE, TILE]);
        let (tx, ty) = (
            thread::thread_idx().x as usize,
            thread::thread_idx().y as usize,
        );
        let (col, row) = thread::index_2d();
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let mut acc = 0.0f32;
        for t in 0..k.div_ceil(TILE) {
            let (ac, br) = (t * TILE + tx, t * TILE + ty);
            let av = if row < m && ac < k { a.get(row * k + ac).unwrap_or(0.0) } else { 0.0 };
            let bv = if br < k && col < n { b.get(br * n + col).unwrap_or(0.0) } else { 0.0 };
            // SAFETY: each thread writes its own (ty, tx) slot of each tile; the barriers
            // order these writes before the reads and the reads before the next writes.
            unsafe {
                ta.write(ty, tx, av);
                tb.write(ty, tx, bv);
            }
            thread::sync_threads();
            for p in 0..TILE {
                acc += ta.get(ty, p) * tb.get(p, tx);
            }
            thread::sync_threads();
        }
        if row < m && col < n {
            // SAFETY: one thread per element.
            unsafe { c.write(row * n + col, acc) };
        }
    }
}
