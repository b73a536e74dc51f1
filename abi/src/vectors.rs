//! 16-byte vector access to contiguous arrays: [`Vectors`] and [`VectorsMut`].
//!
//! A GPU thread moves memory fastest in 16-byte accesses (`ld.global.v4.b32`, SASS
//! `LDG.E.128`), which need 16-byte aligned addresses. Arrays arrive with any element-aligned
//! pointer, so [`Slice::split_vectors`](crate::Slice::split_vectors) (and
//! [`SliceMut::split_vectors`](crate::SliceMut::split_vectors)) splits an array, once per kernel,
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

use crate::space;

/// `L` elements of `T` with 16-byte alignment: the unit of a vector access.
#[repr(C, align(16))]
struct Aligned16<T, const L: usize>([T; L]);

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
pub(crate) fn head_len<T>(addr: usize, len: usize) -> usize {
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
pub(crate) fn split_counts<T, const L: usize>(addr: usize, len: usize) -> (usize, usize) {
    let () = VectorShape::<T, L>::OK;
    let head = head_len::<T>(addr, len);
    (head, (len - head) / L)
}

/// A run of 16-byte aligned vectors of `L` elements of `T`, read-only (from
/// [`Slice::split_vectors`](crate::Slice::split_vectors)). Vector `j` holds elements
/// `j * L .. (j + 1) * L` of the run.
#[repr(C)]
pub struct Vectors<T, const L: usize> {
    ptr: *const T,
    len: usize,
}

/// A run of 16-byte aligned vectors of `L` elements of `T` that may be written (from
/// [`SliceMut::split_vectors`](crate::SliceMut::split_vectors)).
#[repr(C)]
pub struct VectorsMut<T, const L: usize> {
    ptr: *mut T,
    len: usize,
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
        Vectors { ptr, len }
    }

    /// Number of vectors.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// `true` if there is no vector.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pointer to the first element of the first vector (16-byte aligned).
    #[inline(always)]
    pub const fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// Vector `j` (one 16-byte load), or `None` if `j >= len`.
    #[inline(always)]
    pub fn get(&self, j: usize) -> Option<[T; L]> {
        if j < self.len {
            // SAFETY: in bounds.
            Some(unsafe { self.get_unchecked(j) })
        } else {
            None
        }
    }

    /// Vector `j` (one 16-byte load) without a bounds check.
    ///
    /// # Safety
    ///
    /// `j < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, j: usize) -> [T; L] {
        debug_assert!(j < self.len);
        // SAFETY: in bounds and 16-byte aligned (the constructor's contract).
        unsafe { self.ptr.add(j * L).cast::<Aligned16<T, L>>().read().0 }
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
        debug_assert!(j < self.len);
        // SAFETY: in bounds and aligned; the rest is the caller's contract.
        unsafe {
            space::global_nc(self.ptr.add(j * L))
                .cast::<Aligned16<T, L>>()
                .read()
                .0
        }
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
        VectorsMut { ptr, len }
    }

    /// Number of vectors.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// `true` if there is no vector.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pointer to the first element of the first vector (16-byte aligned).
    #[inline(always)]
    pub const fn as_mut_ptr(&self) -> *mut T {
        self.ptr
    }

    /// The same vectors, read-only.
    #[inline(always)]
    pub const fn as_vectors(&self) -> Vectors<T, L> {
        Vectors {
            ptr: self.ptr,
            len: self.len,
        }
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
        if j >= self.len {
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
        debug_assert!(j < self.len);
        // SAFETY: in bounds and 16-byte aligned (the constructor's contract); exclusivity is
        // the caller's.
        unsafe {
            self.ptr
                .add(j * L)
                .cast::<Aligned16<T, L>>()
                .write(Aligned16(value))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
