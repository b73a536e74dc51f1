//! 16-byte vector access to contiguous arrays: [`Vectors`] and [`VectorsMut`].
//!
//! A GPU thread moves memory fastest in 16-byte accesses (`ld.global.v4.b32`, SASS
//! `LDG.E.128`), which need 16-byte aligned addresses. Arrays arrive with any element-aligned
//! pointer, so [`Slice::split_vectors`] (and [`SliceMut::split_vectors`]) splits an array, once
//! per kernel,
//! into a scalar head of fewer than `L` elements, a run of aligned vectors of `L` elements
//! (`L * size_of::<T>() == 16`: 4 `f32`, 2 `f64`, 8 `f16`, 16 `u8`), and a scalar tail:
//!
//! ```ignore
//! let (head, body, tail) = x.split_vectors::<4>();     // x: Slice<f32>
//! for j in thread::grid_stride(body.len()) {
//!     let [a, b, c, d] = body.get(j).unwrap();         // one LDG.E.128
//!     // use a, b, c, d
//! }
//! ```
//!
//! Every element is in exactly one of the three parts, in order. Arrays that must be walked
//! together (an input and an output) can use the vectors only when their heads have the same
//! length — both pointers equally misaligned — which the caller checks; otherwise it falls back
//! to scalar accesses.

use crate::params::{Slice, SliceMut};
use crate::space;

/// The 16 bytes of one vector access as an LLVM vector of `size_of::<T>()`-byte integers on
/// the device (`<4 x i32>`, `<2 x i64>`, …): a load or store of it is always one 16-byte
/// `ld.v*`/`st.v*`, whatever the value is used for (two `f64` that are only copied would
/// otherwise become two 8-byte accesses), and reaching the elements is a register move. A
/// plain aligned array on the host.
#[cfg(target_arch = "nvptx64")]
mod bits {
    pub type B1 = core::simd::Simd<u8, 16>;
    pub type B2 = core::simd::Simd<u16, 8>;
    pub type B4 = core::simd::Simd<u32, 4>;
    pub type B8 = core::simd::Simd<u64, 2>;
}
#[cfg(not(target_arch = "nvptx64"))]
mod bits {
    #[derive(Clone, Copy)]
    #[repr(C, align(16))]
    pub struct B(pub [u8; 16]);
    pub type B1 = B;
    pub type B2 = B;
    pub type B4 = B;
    pub type B8 = B;
}

const _: () = assert!(
    core::mem::size_of::<bits::B1>() == 16
        && core::mem::align_of::<bits::B1>() == 16
        && core::mem::size_of::<bits::B2>() == 16
        && core::mem::align_of::<bits::B2>() == 16
        && core::mem::size_of::<bits::B4>() == 16
        && core::mem::align_of::<bits::B4>() == 16
        && core::mem::size_of::<bits::B8>() == 16
        && core::mem::align_of::<bits::B8>() == 16
);

/// One 16-byte load of `L` elements of `T` at `p`, as the bits type `B`.
///
/// # Safety
///
/// `p` is 16-byte aligned and valid for reads of 16 bytes; `B` and `[T; L]` are 16 bytes.
#[inline(always)]
unsafe fn load_as<B: Copy, T, const L: usize>(p: *const T) -> [T; L] {
    // SAFETY: the caller's contract; the bits read are those of `L` stored elements.
    unsafe { core::mem::transmute_copy::<B, [T; L]>(&p.cast::<B>().read()) }
}

/// One 16-byte store of `value` at `p`, as the bits type `B`.
///
/// # Safety
///
/// `p` is 16-byte aligned and valid for writes of 16 bytes; `B` and `[T; L]` are 16 bytes and
/// any bits are a valid `B`.
#[inline(always)]
unsafe fn store_as<B: Copy, T, const L: usize>(p: *mut T, value: [T; L]) {
    // SAFETY: the caller's contract.
    unsafe {
        p.cast::<B>()
            .write(core::mem::transmute_copy::<[T; L], B>(&value))
    }
}

/// One 16-byte load of `L` elements of `T` at `p`.
///
/// # Safety
///
/// `p` is 16-byte aligned and valid for reads of 16 bytes.
#[inline(always)]
unsafe fn load16<T, const L: usize>(p: *const T) -> [T; L] {
    let () = VectorShape::<T, L>::OK;
    // SAFETY: the caller's contract; `VectorShape` makes `[T; L]` 16 bytes.
    unsafe {
        match core::mem::size_of::<T>() {
            1 => load_as::<bits::B1, T, L>(p),
            2 => load_as::<bits::B2, T, L>(p),
            8 => load_as::<bits::B8, T, L>(p),
            _ => load_as::<bits::B4, T, L>(p),
        }
    }
}

/// One 16-byte store of `value` at `p`.
///
/// # Safety
///
/// `p` is 16-byte aligned and valid for writes of 16 bytes.
#[inline(always)]
unsafe fn store16<T, const L: usize>(p: *mut T, value: [T; L]) {
    let () = VectorShape::<T, L>::OK;
    // SAFETY: the caller's contract; `VectorShape` makes `[T; L]` 16 bytes.
    unsafe {
        match core::mem::size_of::<T>() {
            1 => store_as::<bits::B1, T, L>(p, value),
            2 => store_as::<bits::B2, T, L>(p, value),
            8 => store_as::<bits::B8, T, L>(p, value),
            _ => store_as::<bits::B4, T, L>(p, value),
        }
    }
}

/// Compile-time check that `L` elements of `T` are exactly 16 bytes.
struct VectorShape<T, const L: usize>(core::marker::PhantomData<T>);

impl<T, const L: usize> VectorShape<T, L> {
    const OK: () = assert!(
        L * core::mem::size_of::<T>() == 16,
        "a vector is 16 bytes: L * size_of::<T>() must be 16 (4 f32, 2 f64, 8 f16, 16 u8)"
    );
}

/// Number of leading elements of `len` elements of `T` at `addr` before the first 16-byte
/// aligned one (at most `len`). An address that is not a multiple of `size_of::<T>()` never
/// reaches a 16-byte boundary on an element: then every element is in the head.
#[inline(always)]
fn head_len<T>(addr: usize, len: usize) -> usize {
    let size = core::mem::size_of::<T>();
    let misalign = addr % 16;
    let head = if size == 0 || !misalign.is_multiple_of(size) {
        len
    } else {
        (16 - misalign) % 16 / size
    };
    if head < len {
        head
    } else {
        len
    }
}

/// The split of `len` elements at `addr` into (head, vectors) counts for `L`-element vectors;
/// the tail is what remains.
#[inline(always)]
fn split_counts<T, const L: usize>(addr: usize, len: usize) -> (usize, usize) {
    let () = VectorShape::<T, L>::OK;
    let head = head_len::<T>(addr, len);
    (head, (len - head) / L)
}

/// A run of 16-byte aligned vectors of `L` elements of `T`, read-only (from
/// [`Slice::split_vectors`]). Vector `j` holds elements `j * L .. (j + 1) * L` of the run.
#[repr(transparent)]
pub struct Vectors<T, const L: usize> {
    /// The run's elements: a multiple of `L`, from a 16-byte aligned address.
    elems: Slice<T>,
}

/// A run of 16-byte aligned vectors of `L` elements of `T` that may be written (from
/// [`SliceMut::split_vectors`]).
#[repr(transparent)]
pub struct VectorsMut<T, const L: usize> {
    /// As in [`Vectors`].
    elems: SliceMut<T>,
}

impl<T, const L: usize> Clone for Vectors<T, L> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const L: usize> Copy for Vectors<T, L> {}
impl<T, const L: usize> Clone for VectorsMut<T, L> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const L: usize> Copy for VectorsMut<T, L> {}

impl<T, const L: usize> Vectors<T, L> {
    /// `len` vectors at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be 16-byte aligned and valid for reads of `len * L` elements of `T` for as
    /// long as the value is used (any pointer if `len == 0`); `L * size_of::<T>() == 16`.
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *const T, len: usize) -> Self {
        // SAFETY: the caller's contract covers the slice's.
        let elems = unsafe { Slice::from_raw_parts(ptr, len * L) };
        Vectors { elems }
    }

    /// Number of vectors.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.elems.len() / L
    }

    /// `true` if there is no vector.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }

    /// The run's elements, one by one.
    #[inline(always)]
    pub const fn elements(&self) -> Slice<T> {
        self.elems
    }

    /// Vector `j` (one 16-byte load), or `None` if `j >= len`.
    #[inline(always)]
    pub fn get(&self, j: usize) -> Option<[T; L]> {
        // SAFETY: in bounds when taken.
        (j < self.len()).then(|| unsafe { self.get_unchecked(j) })
    }

    /// Vector `j` (one 16-byte load) without a bounds check.
    ///
    /// # Safety
    ///
    /// `j < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, j: usize) -> [T; L] {
        debug_assert!(j < self.len());
        // SAFETY: in bounds and 16-byte aligned (the constructor's contract).
        unsafe { load16(self.elems.as_ptr().add(j * L)) }
    }

    /// Vector `j` through the read-only data cache (one `ld.global.nc.v4`, SASS
    /// `LDG.E.128.CONSTANT`), without a bounds check.
    ///
    /// # Safety
    ///
    /// `j < self.len()`, the memory is global, and no thread of the launch writes these
    /// elements while it runs (see [`space::global_nc`]).
    #[inline(always)]
    pub unsafe fn get_nc_unchecked(&self, j: usize) -> [T; L] {
        debug_assert!(j < self.len());
        // SAFETY: in bounds and aligned; the rest is the caller's contract.
        unsafe { load16(space::global_nc(self.elems.as_ptr().add(j * L))) }
    }
}

impl<T, const L: usize> VectorsMut<T, L> {
    /// `len` vectors at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be 16-byte aligned and valid for reads and writes of `len * L` elements of
    /// `T` for as long as the value is used (any pointer if `len == 0`);
    /// `L * size_of::<T>() == 16`.
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        // SAFETY: the caller's contract covers the slice's.
        let elems = unsafe { SliceMut::from_raw_parts(ptr, len * L) };
        VectorsMut { elems }
    }

    /// The same vectors, read-only.
    #[inline(always)]
    pub const fn as_vectors(&self) -> Vectors<T, L> {
        Vectors {
            elems: self.elems.as_slice(),
        }
    }

    /// Number of vectors.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.as_vectors().len()
    }

    /// `true` if there is no vector.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.as_vectors().is_empty()
    }

    /// The run's elements, one by one.
    #[inline(always)]
    pub const fn elements(&self) -> SliceMut<T> {
        self.elems
    }

    /// Vector `j` (one 16-byte load), or `None` if `j >= len`.
    #[inline(always)]
    pub fn get(&self, j: usize) -> Option<[T; L]> {
        self.as_vectors().get(j)
    }

    /// Vector `j` without a bounds check.
    ///
    /// # Safety
    ///
    /// `j < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, j: usize) -> [T; L] {
        // SAFETY: forwarded contract.
        unsafe { self.as_vectors().get_unchecked(j) }
    }

    /// Writes vector `j` (one 16-byte store); an out-of-bounds `j` aborts the kernel (`trap`,
    /// with the caller's location in the trap record: [`diag`](crate::diag)).
    ///
    /// # Safety
    ///
    /// No other thread of the launch may access these elements concurrently.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&self, j: usize, value: [T; L]) {
        if j >= self.len() {
            crate::abort();
        }
        // SAFETY: in bounds; exclusivity is the caller's contract.
        unsafe { self.write_unchecked(j, value) }
    }

    /// Writes vector `j` (one 16-byte store) without a bounds check.
    ///
    /// # Safety
    ///
    /// `j < self.len()`, and no other thread of the launch accesses these elements
    /// concurrently.
    #[inline(always)]
    pub unsafe fn write_unchecked(&self, j: usize, value: [T; L]) {
        debug_assert!(j < self.len());
        // SAFETY: in bounds and 16-byte aligned (the constructor's contract); exclusivity is
        // the caller's.
        unsafe { store16(self.elems.as_mut_ptr().add(j * L), value) }
    }
}

impl<T> Slice<T> {
    /// Splits the slice for 16-byte vector access ([`vectors`](crate::vectors)): a scalar
    /// head of fewer than `L` elements (those before the first 16-byte aligned one), the
    /// aligned vectors of `L` elements, and a scalar tail of fewer than `L` elements.
    /// `L * size_of::<T>()` must be 16 (a compile-time error otherwise).
    ///
    /// The split costs a few integer operations on the pointer: do it once per kernel. Two
    /// arrays walked together can share a split when their heads have the same length.
    #[inline(always)]
    pub fn split_vectors<const L: usize>(&self) -> (Slice<T>, Vectors<T, L>, Slice<T>) {
        let (head, n) = split_counts::<T, L>(self.as_ptr() as usize, self.len());
        let (head, rest) = self.split_at(head);
        let (body, tail) = rest.split_at(n * L);
        (head, Vectors { elems: body }, tail)
    }
}

impl<T> SliceMut<T> {
    /// [`Slice::split_vectors`] for a slice that may be written: head, aligned vectors of `L`
    /// elements, tail.
    #[inline(always)]
    pub fn split_vectors<const L: usize>(&self) -> (SliceMut<T>, VectorsMut<T, L>, SliceMut<T>) {
        let (head, body, tail) = self.as_slice().split_vectors::<L>();
        // SAFETY: the three are parts of this slice, which may be written.
        unsafe {
            (
                head.assume_mut(),
                VectorsMut {
                    elems: body.elems.assume_mut(),
                },
                tail.assume_mut(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `L` elements of `T` with 16-byte alignment.
    #[repr(C, align(16))]
    struct Aligned16<T, const L: usize>([T; L]);

    #[test]
    fn heads_end_at_16_byte_boundaries() {
        assert_eq!(head_len::<f32>(0x1000, 100), 0);
        assert_eq!(head_len::<f32>(0x1004, 100), 3);
        assert_eq!(head_len::<f32>(0x100c, 100), 1);
        assert_eq!(head_len::<f32>(0x1004, 2), 2);
        assert_eq!(head_len::<f64>(0x1008, 100), 1);
        assert_eq!(head_len::<u8>(0x1001, 100), 15);
        // Not element-aligned: never reaches a boundary, all head.
        assert_eq!(head_len::<f32>(0x1002, 100), 100);
        assert_eq!(split_counts::<f32, 4>(0x1004, 100), (3, 24));
        assert_eq!(split_counts::<f32, 4>(0x1000, 7), (0, 1));
        assert_eq!(split_counts::<u16, 8>(0x1002, 7), (7, 0));
        assert_eq!(split_counts::<f64, 2>(0, 0), (0, 0));
    }

    #[test]
    fn vectors_read_and_write_their_elements() {
        let mut more = [Aligned16([0u32; 4]), Aligned16([0u32; 4])];
        let p = more.as_mut_ptr().cast::<u32>();
        // SAFETY: two aligned vectors of four u32, used only here.
        let v = unsafe { VectorsMut::<u32, 4>::from_raw_parts(p, 2) };
        assert_eq!((v.len(), v.is_empty()), (2, false));
        // SAFETY: single-threaded, in bounds.
        unsafe {
            v.write(1, [5, 6, 7, 8]);
            v.write_unchecked(0, [1, 2, 3, 4]);
        }
        assert_eq!(v.get(0), Some([1, 2, 3, 4]));
        assert_eq!(v.as_vectors().get(1), Some([5, 6, 7, 8]));
        assert_eq!(v.get(2), None);
        // SAFETY: in bounds; nothing writes meanwhile.
        assert_eq!(unsafe { v.as_vectors().get_nc_unchecked(1) }, [5, 6, 7, 8]);
        assert_eq!(more[1].0, [5, 6, 7, 8]);
    }

    #[test]
    #[should_panic(expected = "out-of-bounds")]
    fn vector_writes_check_the_bound() {
        let mut one = Aligned16([0u64; 2]);
        // SAFETY: one aligned vector of two u64.
        let v = unsafe { VectorsMut::<u64, 2>::from_raw_parts(one.0.as_mut_ptr(), 1) };
        // SAFETY: single-threaded.
        unsafe { v.write(1, [1, 2]) };
    }
}
