//! The bundled kernels.

use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::{kernel, Slice, SliceMut, View, ViewMut};
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{thread, GridStride, Indexer};

#[cfg(target_arch = "nvptx64")]
use crate::elementwise::{binary, generate, map_strided};

/// Arithmetic the generic kernels need, per element type (wrapping for integers).
#[cfg(target_arch = "nvptx64")]
trait Num: Copy {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn from_index(i: usize) -> Self;
}

#[cfg(target_arch = "nvptx64")]
macro_rules! num {
    (float $($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)] fn add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)] fn from_index(i: usize) -> Self { i as $t }
        }
    )*};
    (int $($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)] fn from_index(i: usize) -> Self { i as $t }
        }
    )*};
}
#[cfg(target_arch = "nvptx64")]
num!(float f32, f64, f16);

// bf16 arithmetic is the device crate's (one rounding per operation).
#[cfg(target_arch = "nvptx64")]
impl Num for bf16 {
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self * o
    }
    #[inline(always)]
    fn from_index(i: usize) -> Self {
        bf16::from_f32(i as f32)
    }
}
#[cfg(target_arch = "nvptx64")]
num!(int i32, i64);

// ---- add: out = a + b -------------------------------------------------------------------

macro_rules! add_kernels {
    ($($name:ident: $t:ty, $lanes:literal;)*) => {$(
        #[kernel(family = "add", same_shape(a, b, out), items_per_thread = $lanes)]
        pub unsafe fn $name(a: Slice<$t>, b: Slice<$t>, out: SliceMut<$t>) {
            // SAFETY: launched as a kernel over the host-validated slices.
            unsafe { binary::<$t, $lanes>(a, b, out, Num::add) }
        }
    )*};
}
add_kernels! {
    add_f16: f16, 8;
    add_bf16: bf16, 8;
    add_f32: f32, 4;
    add_f64: f64, 2;
    add_i32: i32, 4;
    add_i64: i64, 2;
}

// The strided variants: `N`-D views of any strides (stepped, reversed, transposed, and
// broadcast inputs), one kernel per element type and rank. The family launcher runs them
// when some array is not C-contiguous; their results are the contiguous kernels'.
macro_rules! add_strided_kernels {
    ($($name:ident: $t:ty, $n:literal;)*) => {$(
        #[kernel(family = "add", same_shape(a, b, out))]
        pub unsafe fn $name(a: View<$t, $n>, b: View<$t, $n>, out: ViewMut<$t, $n>) {
            // SAFETY: launched as a kernel over host-validated views of one shape; `out`
            // does not overlap itself and aliases an input only element for element.
            unsafe { map_strided::<$t, $n, 2>([a, b], out, |[x, y]| Num::add(x, y)) }
        }
    )*};
}
add_strided_kernels! {
    add_f16_1d: f16, 1; add_f16_2d: f16, 2; add_f16_3d: f16, 3; add_f16_4d: f16, 4;
    add_bf16_1d: bf16, 1; add_bf16_2d: bf16, 2; add_bf16_3d: bf16, 3; add_bf16_4d: bf16, 4;
    add_f32_1d: f32, 1; add_f32_2d: f32, 2; add_f32_3d: f32, 3; add_f32_4d: f32, 4;
    add_f64_1d: f64, 1; add_f64_2d: f64, 2; add_f64_3d: f64, 3; add_f64_4d: f64, 4;
    add_i32_1d: i32, 1; add_i32_2d: i32, 2; add_i32_3d: i32, 3; add_i32_4d: i32, 4;
    add_i64_1d: i64, 1; add_i64_2d: i64, 2; add_i64_3d: i64, 3; add_i64_4d: i64, 4;
}

// ---- initialize_array: x[i] = i ---------------------------------------------------------

/// `x[i] = i` for every element (the CUDA Array Interface specification's example).
#[kernel(items_per_thread = 4)]
pub unsafe fn initialize_array(x: SliceMut<i32>) {
    // SAFETY: launched as a kernel over the host-validated slice.
    unsafe { generate::<i32, 4>(x, |i| i as i32) }
}

// ---- saxpy: y = alpha * x + y -----------------------------------------------------------

/// Element types whose 16-byte vector has a known number of lanes: the vectorized loops of
/// `elementwise` take it as a constant, which a generic kernel cannot compute from its type
/// parameter.
#[cfg(target_arch = "nvptx64")]
trait Vector: Num + ferrocuda_device::Element {
    /// `out[i] = f(a[i], b[i])` in 16-byte vectors ([`binary`] with this type's lanes).
    ///
    /// # Safety
    ///
    /// As [`binary`]'s.
    unsafe fn binary(
        a: Slice<Self>,
        b: Slice<Self>,
        out: SliceMut<Self>,
        f: impl Fn(Self, Self) -> Self,
    );
}

#[cfg(target_arch = "nvptx64")]
macro_rules! vector {
    ($($t:ty: $lanes:literal),*) => {$(
        impl Vector for $t {
            #[inline(always)]
            unsafe fn binary(a: Slice<Self>, b: Slice<Self>, out: SliceMut<Self>, f: impl Fn(Self, Self) -> Self) {
                // SAFETY: the caller's contract is `binary`'s.
                unsafe { binary::<$t, $lanes>(a, b, out, f) }
            }
        }
    )*};
}
#[cfg(target_arch = "nvptx64")]
vector!(f16: 8, bf16: 8, f32: 4, f64: 2);

/// `y = alpha * x + y` (a multiply and an add, each rounded), one 16-byte vector per thread:
/// a generic kernel with one instance per element type (`saxpy_f16` … `saxpy_f64`).
#[kernel(
    instances(f16, bf16, f32, f64),
    same_shape(x, y),
    items_per_thread = 16 / size_of::<T>()
)]
pub unsafe fn saxpy<T: Vector>(alpha: T, x: Slice<T>, y: SliceMut<T>) {
    // SAFETY: y aliases itself element-for-element only.
    unsafe { T::binary(x, y.as_slice(), y, |a, b| Num::add(Num::mul(alpha, a), b)) }
}

// saxpy's strided variants: `N`-D views of any strides, one kernel per element type and rank.
macro_rules! saxpy_strided_kernels {
    ($($name:ident: $t:ty, $n:literal;)*) => {$(
        #[kernel(family = "saxpy", same_shape(x, y))]
        pub unsafe fn $name(alpha: $t, x: View<$t, $n>, y: ViewMut<$t, $n>) {
            // SAFETY: host-validated views of one shape; y is read and written at each of its
            // elements by one thread (it does not overlap itself; x aliases it only exactly).
            unsafe {
                map_strided::<$t, $n, 2>([x, y.as_view()], y, |[a, b]| {
                    Num::add(Num::mul(alpha, a), b)
                })
            }
        }
    )*};
}
saxpy_strided_kernels! {
    saxpy_f16_1d: f16, 1; saxpy_f16_2d: f16, 2; saxpy_f16_3d: f16, 3; saxpy_f16_4d: f16, 4;
    saxpy_bf16_1d: bf16, 1; saxpy_bf16_2d: bf16, 2; saxpy_bf16_3d: bf16, 3; saxpy_bf16_4d: bf16, 4;
    saxpy_f32_1d: f32, 1; saxpy_f32_2d: f32, 2; saxpy_f32_3d: f32, 3; saxpy_f32_4d: f32, 4;
    saxpy_f64_1d: f64, 1; saxpy_f64_2d: f64, 2; saxpy_f64_3d: f64, 3; saxpy_f64_4d: f64, 4;
}

// ---- add_index: x[idx] += Σ idx (AMSO) --------------------------------------------------

/// Adds to every element the sum of its multi-index, for any strides.
///
/// # Safety
///
/// Kernel-launch context; the view must not alias itself (no zero strides on axes > 1).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn add_index<T: Num + ferrocuda_device::Element, const N: usize>(x: ViewMut<T, N>) {
    // The sum of a multi-index does not depend on the order of the axes: visit the elements
    // in memory order, so that neighbouring threads touch neighbouring addresses whatever
    // the view's layout (transposed views included).
    let ix: Indexer<N> = x.indexer().memory_order();
    let n = ix.size();
    let tid = thread::index_1d();
    let threads = thread::grid_size_1d();
    let small = n <= u32::MAX as usize && ix.shape.iter().all(|&s| s <= u32::MAX as usize);
    if small {
        for i in GridStride::new(tid, threads, n) {
            let (off, idx) = ix.offset_of_u32(i as u32);
            // By reference, not `for v in idx`: an array moved into its by-value iterator
            // is not unrolled by LLVM 23 and lands in local memory (a stack frame).
            let s: usize = idx.iter().map(|&v| v as usize).sum();
            // SAFETY: i < size: `off` is an in-bounds offset; one thread per element.
            unsafe { x.write_at(off, x.read_at(off).add(T::from_index(s))) };
        }
    } else {
        for i in GridStride::new(tid, threads, n) {
            let idx = ix.unravel(i);
            let s: usize = idx.iter().sum();
            let off = ix.offset(idx);
            // SAFETY: as above.
            unsafe { x.write_at(off, x.read_at(off).add(T::from_index(s))) };
        }
    }
}

macro_rules! add_index_kernels {
    ($($name:ident: $t:ty, $n:literal;)*) => {$(
        #[kernel(family = "add_index")]
        pub unsafe fn $name(x: ViewMut<$t, $n>) {
            // SAFETY: launched as a kernel over a host-validated, non-self-aliasing view.
            unsafe { add_index::<$t, $n>(x) }
        }
    )*};
}
add_index_kernels! {
    add_index_f32_1d: f32, 1; add_index_f32_2d: f32, 2; add_index_f32_3d: f32, 3; add_index_f32_4d: f32, 4;
    add_index_f64_1d: f64, 1; add_index_f64_2d: f64, 2; add_index_f64_3d: f64, 3; add_index_f64_4d: f64, 4;
    add_index_i32_1d: i32, 1; add_index_i32_2d: i32, 2; add_index_i32_3d: i32, 3; add_index_i32_4d: i32, 4;
    add_index_i64_1d: i64, 1; add_index_i64_2d: i64, 2; add_index_i64_3d: i64, 3; add_index_i64_4d: i64, 4;
}

// ---- fill_slow: a deliberately slow producer, for ordering tests -------------------------

/// Each thread first runs `iters` dependent floating-point steps (a few cycles each), then
/// writes `value` to its elements: a producer that takes a controllable time, used by the
/// stream-ordering (race) tests and benchmarks.
#[kernel]
pub unsafe fn fill_slow(x: SliceMut<f32>, value: f32, iters: u32) {
    let mut junk = 0.0f32;
    for _ in 0..iters {
        junk = junk * 0.5 + 1.0;
    }
    // `0.0 * finite` is 0.0, but without fast-math the compiler must keep the loop.
    let v = value + 0.0 * (junk - 2.0);
    for i in thread::grid_stride(x.len()) {
        // SAFETY: i < len; one thread per element.
        unsafe { x.write_unchecked(i, v) };
    }
}

// ---- checked_write: bounds checks in action ---------------------------------------------

/// Thread 0 writes `value` to `x[index]` through the bounds-checked `SliceMut::write`: an
/// out-of-bounds `index` aborts the kernel with a PTX `trap`, which the host reports as a
/// (sticky) CUDA error naming this kernel. Used by the fault tests.
#[kernel]
pub unsafe fn checked_write(x: SliceMut<i32>, index: u64, value: i32) {
    if thread::index_1d() == 0 {
        // SAFETY: a single thread writes.
        unsafe { x.write(index as usize, value) };
    }
}
