//! A family with a contiguous kernel and a strided variant (the guide's "Layouts" section):
//! the launchers run `layout_add_f32` when every array is C-contiguous and `layout_add_f32_2d`
//! (2-D views of any strides) otherwise.

#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::thread;
use ferrocuda_device::{kernel, Slice, SliceMut, View, ViewMut};

/// `out = a + b` on C-contiguous arrays of any rank.
#[kernel(family = "layout_add", same_shape(a, b, out))]
pub unsafe fn layout_add_f32(a: Slice<f32>, b: Slice<f32>, out: SliceMut<f32>) {
    #[cfg(target_arch = "nvptx64")]
    for i in thread::grid_stride(out.len()) {
        // SAFETY: i < len of all three (same shape); one thread per element.
        unsafe { out.write_unchecked(i, a.get_unchecked(i) + b.get_unchecked(i)) };
    }
}

/// `out = a + b` on 2-D arrays of any strides: stepped, reversed, transposed, broadcast inputs.
#[kernel(family = "layout_add", same_shape(a, b, out))]
pub unsafe fn layout_add_f32_2d(a: View<f32, 2>, b: View<f32, 2>, out: ViewMut<f32, 2>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let (o, [ia, ib]) = out
            .indexer()
            .memory_order_with([*a.indexer(), *b.indexer()]);
        for idx in o.walk(thread::index_1d(), thread::grid_size_1d()) {
            // SAFETY: idx is in bounds of the one shape; one thread per element (the host
            // refuses outputs that reach an element twice).
            unsafe {
                out.write_at(
                    o.offset(idx),
                    a.read_at(ia.offset(idx)) + b.read_at(ib.offset(idx)),
                )
            };
        }
    }
}
