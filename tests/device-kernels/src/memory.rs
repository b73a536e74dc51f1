//! Global-memory access forms: 16-byte vector loads and stores (`split_vectors`) and loads
//! through the read-only data cache (`get_nc`, `read_at_nc`, the vectors' `get_nc_unchecked`).
//! The rows of 2-D views in vectors (`get_vector`, `write_vector`), and rules on the axes of a
//! C-contiguous array that the kernel sees flat (`require(x.shape[1] == cols)`).
//! `tests/device_ptx.rs` checks their SASS (`LDG.E.128`, `STG.E.128`, `LDG.E…CONSTANT`);
//! `tests/device_gpu/memory.rs` their results, on misaligned and empty arrays and any grid.

use ferrocuda_device::{kernel, Slice, SliceMut, View, ViewMut};
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{thread, Element, GridStride};

/// `y = alpha * x + y` (two roundings). `x` is read through the read-only cache — the
/// caller passes an `x` that no output aliases — in 16-byte vectors when `x` and `y` are
/// equally misaligned, else element by element; `y` in vectors and scalars alike.
#[kernel(same_shape(x, y))]
pub unsafe fn vector_axpy_nc(alpha: f32, x: Slice<f32>, y: SliceMut<f32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let (tid, threads) = (thread::index_1d(), thread::grid_size_1d());
        let (hx, vx, tx) = x.split_vectors::<4>();
        let (hy, vy, ty) = y.split_vectors::<4>();
        let axpy = |a: f32, b: f32| alpha * a + b;
        if hx.len() != hy.len() || x.len() != y.len() {
            for i in GridStride::new(tid, threads, x.len().min(y.len())) {
                // SAFETY: i < both lengths; x is not written during the launch (the kernel's
                // contract with its caller); one thread per element.
                unsafe { y.write_unchecked(i, axpy(x.get_nc_unchecked(i), y.get_unchecked(i))) };
            }
            return;
        }
        for i in GridStride::new(tid, threads, hy.len()) {
            // SAFETY: as above, within the heads (equal lengths).
            unsafe { hy.write_unchecked(i, axpy(hx.get_nc_unchecked(i), hy.get_unchecked(i))) };
        }
        for j in GridStride::new(tid, threads, vy.len()) {
            // SAFETY: j < the vector count of both (equal heads and lengths); as above.
            unsafe {
                let (a, mut b) = (vx.get_nc_unchecked(j), vy.get_unchecked(j));
                for k in 0..4 {
                    b[k] = axpy(a[k], b[k]);
                }
                vy.write_unchecked(j, b);
            }
        }
        for i in GridStride::new(tid, threads, ty.len()) {
            // SAFETY: as above, within the tails (equal lengths).
            unsafe { ty.write_unchecked(i, axpy(tx.get_nc(i).unwrap(), ty.get_unchecked(i))) };
        }
    }
}

/// `y = x` through 16-byte vectors where both are equally misaligned (plain, coherent loads:
/// `y` may be `x` itself), element by element otherwise.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn vector_copy<T: Element, const L: usize>(x: Slice<T>, y: SliceMut<T>) {
    let (tid, threads) = (thread::index_1d(), thread::grid_size_1d());
    let n = x.len().min(y.len());
    let (x, y) = (x.split_at(n).0, y.split_at(n).0);
    let (hx, vx, tx) = x.split_vectors::<L>();
    let (hy, vy, ty) = y.split_vectors::<L>();
    if hx.len() != hy.len() {
        for i in GridStride::new(tid, threads, n) {
            // SAFETY: i < n; one thread per element.
            unsafe { y.write_unchecked(i, x.get_unchecked(i)) };
        }
        return;
    }
    for i in GridStride::new(tid, threads, hy.len()) {
        // SAFETY: within the equal heads; one thread per element.
        unsafe { hy.write_unchecked(i, hx.get_unchecked(i)) };
    }
    for j in GridStride::new(tid, threads, vy.len()) {
        // SAFETY: j < the vector count of both; one thread per vector.
        unsafe { vy.write(j, vx.get(j).unwrap()) };
    }
    for i in GridStride::new(tid, threads, ty.len()) {
        // SAFETY: within the equal tails; one thread per element.
        unsafe { ty.write_unchecked(i, tx.get_unchecked(i)) };
    }
}

macro_rules! vector_copies {
    ($($name:ident: $t:ty, $l:literal;)*) => {$(
        /// `y = x`, 16 bytes at a time where the alignments allow.
        #[kernel(family = "vector_copy", same_shape(x, y))]
        pub unsafe fn $name(x: Slice<$t>, y: SliceMut<$t>) {
            // SAFETY: a kernel over host-validated slices.
            #[cfg(target_arch = "nvptx64")]
            unsafe { vector_copy::<$t, $l>(x, y) }
        }
    )*};
}
vector_copies! {
    vector_copy_u8: u8, 16;
    vector_copy_f64: f64, 2;
}

/// `out[r] = Σ_c x[r, c]` (in column order) for a 2-D `x` of any strides, read through the
/// read-only cache: one thread per row.
#[kernel]
pub unsafe fn row_sums_nc(x: View<f32, 2>, out: SliceMut<f32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let ix = x.indexer();
        let [rows, cols] = ix.shape;
        for r in thread::grid_stride(rows.min(out.len())) {
            let mut s = 0.0f32;
            for c in 0..cols {
                // SAFETY: (r, c) is in bounds; `x` is an input no output aliases (the caller's
                // contract).
                s += unsafe { x.read_at_nc(ix.offset([r, c])) };
            }
            // SAFETY: r < out.len(); one thread per row.
            unsafe { out.write_unchecked(r, s) };
        }
    }
}

/// `out[r, c] = 2 x[r, c] + r` over 2-D views: one thread per row and group of 4 columns; the
/// group in one 16-byte load and store (`View::get_vector`, `ViewMut::write_vector`) when both
/// views have vector rows (`has_vector_rows`) and the group is whole, element by element
/// otherwise.
#[kernel(same_shape(x, out))]
pub unsafe fn view_row_vectors(x: View<f32, 2>, out: ViewMut<f32, 2>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let [rows, cols] = out.shape();
        let groups = cols.div_ceil(4);
        let vectors = x.has_vector_rows::<4>() && out.has_vector_rows::<4>();
        let (tid, threads) = (thread::index_1d(), thread::grid_size_1d());
        for g in GridStride::new(tid, threads, rows * groups) {
            let (r, c) = (g / groups, g % groups * 4);
            let f = |v: f32| 2.0 * v + r as f32;
            if vectors {
                if let Some(v) = x.get_vector::<4>([r, c]) {
                    // SAFETY: this thread's group; in the view and aligned (vector rows, c a
                    // multiple of 4), which `write_vector` checks again.
                    unsafe { out.write_vector([r, c], v.map(f)) };
                    continue;
                }
            }
            for k in c..cols.min(c + 4) {
                // SAFETY: one thread per element; in bounds (same shape).
                unsafe { out.write([r, k], f(x.get([r, k]).unwrap_or(0.0))) };
            }
        }
    }
}

/// `out[r] = Σ_c x[r * cols + c]`: the row sums of a C-contiguous 2-D `x` that the kernel
/// sees flat, its row length given as `cols` — which the host checks against `x`'s second
/// extent (`require(x.shape[1] == cols)`), and `out` against its first. One thread per row,
/// the row in 16-byte vectors where it is aligned.
#[kernel(require(x.shape[1] == cols, "cols is the length of x's rows"),
         require(out.len() == x.shape[0], "out holds one sum per row of x"))]
pub unsafe fn flat_row_sums(x: Slice<f32>, out: SliceMut<f32>, cols: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let cols = cols as usize;
        for r in GridStride::new(thread::index_1d(), thread::grid_size_1d(), out.len()) {
            let (row, _) = x.split_at(r * cols).1.split_at(cols);
            let (head, body, tail) = row.split_vectors::<4>();
            let mut s = 0.0f32;
            for i in 0..head.len() {
                s += head.get(i).unwrap_or(0.0);
            }
            for j in 0..body.len() {
                let [a, b, c, d] = body.get(j).unwrap_or([0.0; 4]);
                s += a + b + c + d;
            }
            for i in 0..tail.len() {
                s += tail.get(i).unwrap_or(0.0);
            }
            // SAFETY: one thread per row; r < out.len().
            unsafe { out.write(r, s) };
        }
    }
}
