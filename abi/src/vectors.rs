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
//!
//! # Rows of N-D views
//!
//! A [`View`] (or [`ViewMut`]) whose last axis is contiguous reads and writes its rows in
//! vectors too: [`View::get_vector`] loads the `L` elements `idx ..` along the last axis in
//! one 16-byte access, [`ViewMut::write_vector`] stores them. Both check the bounds (the `L`
//! elements in the row) and that the `L` elements are one aligned 16-byte run — the last
//! axis's stride 1 and the address a multiple of 16 — and abort the kernel with the caller's
//! location recorded ([`diag`](crate::diag)) when they are not. [`View::has_vector_rows`]
//! says, once per kernel, whether every vector at a column that is a multiple of `L` is
//! aligned (the rows contiguous, the base 16-byte aligned, every other stride a multiple of
//! `L`), so a kernel chooses its vector or scalar path before it reads:
//!
//! ```ignore
//! if x.has_vector_rows::<4>() && out.has_vector_rows::<4>() {
//!     for c in (0..cols - cols % 4).step_by(4) {
//!         let v = x.get_vector::<4>([r, c]).unwrap();     // one ld.global.v4
//!         unsafe { out.write_vector([r, c], v) };          // one st.global.v4
//!     }
//!     // columns cols - cols % 4 .. cols element by element
//! }
//! ```
//!
//! [`load_vector`] and [`store_vector`] are the raw 16-byte accesses behind all of these (and
//! behind the shared arrays' vector accessors in `ferrocuda-device`).

use crate::params::{Slice, SliceMut, View, ViewMut};
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

/// One 16-byte load of the `L` elements of `T` at `p` (`ld.v4.b32`, `ld.v2.b64`, … in the
/// state space the code generator knows `p` to address: `ld.global.v4` for array parameters,
/// `ld.shared.v4` for shared arrays). `L * size_of::<T>()` must be 16 (a compile-time error
/// otherwise).
///
/// # Safety
///
/// 1. `p` is 16-byte aligned.
/// 2. `p` is valid for reads of `L` elements of `T` (16 bytes), which hold values of `T`.
/// 3. No other thread writes those 16 bytes concurrently.
#[inline(always)]
pub unsafe fn load_vector<T, const L: usize>(p: *const T) -> [T; L] {
    // SAFETY: the caller's contract (1, 2, 3) is `load16`'s.
    unsafe { load16(p) }
}

/// One 16-byte store of `value` at `p` (`st.v4.b32`, `st.v2.b64`, … in `p`'s state space, as
/// [`load_vector`]). `L * size_of::<T>()` must be 16.
///
/// # Safety
///
/// 1. `p` is 16-byte aligned.
/// 2. `p` is valid for writes of `L` elements of `T` (16 bytes).
/// 3. No other thread accesses those 16 bytes concurrently.
#[inline(always)]
pub unsafe fn store_vector<T, const L: usize>(p: *mut T, value: [T; L]) {
    // SAFETY: the caller's contract (1, 2, 3) is `store16`'s.
    unsafe { store16(p, value) }
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

/// The element offset of the vector of `L` elements at `idx` along the last axis of
/// `indexer`, if its `L` elements are in bounds; whether they are one aligned 16-byte run at
/// `base` is [`vector_at`]'s to check.
#[inline(always)]
fn vector_offset<const N: usize, const L: usize>(
    indexer: &crate::indexer::Indexer<N>,
    idx: [usize; N],
) -> Option<isize> {
    const { assert!(N > 0, "vector access needs a view of at least one axis") };
    let off = indexer.get_offset(idx)?;
    // idx[N - 1] < shape[N - 1] (checked above): no underflow.
    (indexer.shape[N - 1] - idx[N - 1] >= L).then_some(off)
}

/// `base + off` after checking that the `L` elements there, along a last axis of stride
/// `stride`, are one 16-byte aligned run; aborts the kernel (the caller's location
/// recorded) otherwise.
#[inline(always)]
#[track_caller]
fn vector_at<T, const L: usize>(base: *const T, off: isize, stride: isize) -> *const T {
    let () = VectorShape::<T, L>::OK;
    let p = base.wrapping_offset(off);
    if stride != 1 || !(p as usize).is_multiple_of(16) {
        crate::abort();
    }
    p
}

/// Whether `L`-element vectors at every column that is a multiple of `L` are aligned in a
/// view at `base` with `indexer`.
#[inline(always)]
fn vector_rows<T, const N: usize, const L: usize>(
    base: *const T,
    indexer: &crate::indexer::Indexer<N>,
) -> bool {
    let () = VectorShape::<T, L>::OK;
    const { assert!(N > 0, "vector access needs a view of at least one axis") };
    let mut ok = indexer.strides[N - 1] == 1 && (base as usize).is_multiple_of(16);
    for d in 0..N - 1 {
        ok &= indexer.strides[d] % L as isize == 0;
    }
    ok
}

impl<T, const N: usize> View<T, N> {
    /// Whether the view's rows take `L`-element vectors ([module docs](crate::vectors)):
    /// the last axis has stride 1, the base address is 16-byte aligned and every other
    /// stride is a multiple of `L`, so that [`get_vector`](Self::get_vector) at any in-bounds
    /// `idx` whose last index is a multiple of `L` is one aligned 16-byte load. A few integer
    /// operations: ask once per kernel.
    #[inline(always)]
    pub fn has_vector_rows<const L: usize>(&self) -> bool {
        vector_rows::<T, N, L>(self.as_ptr(), self.indexer())
    }

    /// The `L` elements at `idx` and the `L - 1` after it along the last axis, in one 16-byte
    /// load (`ld.global.v4`), or `None` if they are not all in the view. Aborts the kernel
    /// (the caller's location recorded: [`diag`](crate::diag)) when they are in the view but
    /// not one 16-byte aligned run — the last axis's stride is not 1 or the address is not a
    /// multiple of 16 (see [`has_vector_rows`](Self::has_vector_rows)).
    /// `L * size_of::<T>()` must be 16 (4 `f32`, 2 `f64`, 8 `f16`).
    #[inline(always)]
    #[track_caller]
    pub fn get_vector<const L: usize>(&self, idx: [usize; N]) -> Option<[T; L]> {
        let off = vector_offset::<N, L>(self.indexer(), idx)?;
        let p = vector_at::<T, L>(self.as_ptr(), off, self.indexer().strides[N - 1]);
        // SAFETY: the `L` elements are in the view (valid for reads: the constructor's
        // contract) and one aligned 16-byte run (checked above).
        Some(unsafe { load16(p) })
    }

    /// [`get_vector`](Self::get_vector) without its checks.
    ///
    /// # Safety
    ///
    /// 1. `idx` is in bounds and `idx[N - 1] + L <= shape[N - 1]`.
    /// 2. The last axis has stride 1.
    /// 3. The address of element `idx` is a multiple of 16.
    /// 4. `L * size_of::<T>() == 16` (a compile-time error otherwise).
    #[inline(always)]
    pub unsafe fn get_vector_unchecked<const L: usize>(&self, idx: [usize; N]) -> [T; L] {
        let off = self.indexer().offset(idx);
        // SAFETY: the caller's contract (1: in the view; 2, 3: one aligned run).
        unsafe { load16(self.as_ptr().offset(off)) }
    }
}

impl<T, const N: usize> ViewMut<T, N> {
    /// [`View::has_vector_rows`] of this view.
    #[inline(always)]
    pub fn has_vector_rows<const L: usize>(&self) -> bool {
        self.as_view().has_vector_rows::<L>()
    }

    /// [`View::get_vector`] of this view.
    #[inline(always)]
    #[track_caller]
    pub fn get_vector<const L: usize>(&self, idx: [usize; N]) -> Option<[T; L]> {
        self.as_view().get_vector(idx)
    }

    /// Writes the `L` elements at `idx` and after it along the last axis in one 16-byte store
    /// (`st.global.v4`). Aborts the kernel (the caller's location recorded:
    /// [`diag`](crate::diag)) when they are not all in the view, or not one 16-byte aligned
    /// run (see [`View::get_vector`]).
    ///
    /// # Safety
    ///
    /// No other thread of the launch accesses these elements concurrently.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write_vector<const L: usize>(&self, idx: [usize; N], value: [T; L]) {
        let Some(off) = vector_offset::<N, L>(self.indexer(), idx) else {
            crate::abort()
        };
        let p = vector_at::<T, L>(self.as_mut_ptr(), off, self.indexer().strides[N - 1]);
        // SAFETY: in the view (valid for writes: the constructor's contract), one aligned run
        // (checked above); exclusivity is the caller's contract.
        unsafe { store16(p.cast_mut(), value) }
    }

    /// [`write_vector`](Self::write_vector) without its checks.
    ///
    /// # Safety
    ///
    /// 1. `idx` is in bounds and `idx[N - 1] + L <= shape[N - 1]`.
    /// 2. The last axis has stride 1.
    /// 3. The address of element `idx` is a multiple of 16.
    /// 4. No other thread of the launch accesses these elements concurrently.
    /// 5. `L * size_of::<T>() == 16` (a compile-time error otherwise).
    #[inline(always)]
    pub unsafe fn write_vector_unchecked<const L: usize>(&self, idx: [usize; N], value: [T; L]) {
        let off = self.indexer().offset(idx);
        // SAFETY: the caller's contract (1: in the view; 2, 3: one aligned run; 4).
        unsafe { store16(self.as_mut_ptr().offset(off), value) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::indexer::Indexer;

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

    /// A 3×8 `u32` matrix in a 16-byte aligned buffer with row stride `rs` (≥ 8) elements.
    #[repr(C, align(16))]
    struct Rows([u32; 40]);

    fn matrix(rs: usize) -> Rows {
        let mut m = Rows([u32::MAX; 40]);
        for r in 0..3 {
            for c in 0..8 {
                m.0[r * rs + c] = (10 * r + c) as u32;
            }
        }
        m
    }

    #[test]
    fn view_rows_read_and_write_in_vectors() {
        let mut m = matrix(12);
        let p = m.0.as_mut_ptr();
        // SAFETY: 3 rows of 8 at stride 12 lie in the 40 elements; used only here.
        let v = unsafe { ViewMut::<u32, 2>::from_raw_parts(p, Indexer::new([3, 8], [12, 1])) };
        assert!(v.has_vector_rows::<4>());
        assert_eq!(v.get_vector::<4>([2, 4]), Some([24, 25, 26, 27]));
        assert_eq!(v.as_view().get_vector::<4>([1, 0]), Some([10, 11, 12, 13]));
        // Past the row's end, or past the last row: none.
        assert_eq!(v.get_vector::<4>([0, 5]), None);
        assert_eq!(v.get_vector::<4>([0, 8]), None);
        assert_eq!(v.get_vector::<4>([3, 0]), None);
        // SAFETY: in bounds, aligned, single-threaded.
        unsafe {
            v.write_vector([1, 4], [7, 8, 9, 6]);
            assert_eq!(v.as_view().get_vector_unchecked::<4>([1, 4]), [7, 8, 9, 6]);
            v.write_vector_unchecked([2, 0], [1, 2, 3, 4]);
            assert_eq!(v.as_view().get_vector_unchecked::<4>([2, 0]), [1, 2, 3, 4]);
        }
        assert_eq!(
            m.0[12..24],
            [
                10,
                11,
                12,
                13,
                7,
                8,
                9,
                6,
                u32::MAX,
                u32::MAX,
                u32::MAX,
                u32::MAX
            ]
        );
        assert_eq!(m.0[24..28], [1, 2, 3, 4]);
        // Rows of 10 elements: row 1 starts at element 10, not a 16-byte boundary.
        let m = matrix(10);
        // SAFETY: 3 rows of 8 at stride 10 lie in the 40 elements.
        let v =
            unsafe { View::<u32, 2>::from_raw_parts(m.0.as_ptr(), Indexer::new([3, 8], [10, 1])) };
        assert!(!v.has_vector_rows::<4>());
        assert_eq!(v.get_vector::<4>([0, 4]), Some([4, 5, 6, 7]));
        // A transposed view: the last axis is not contiguous.
        // SAFETY: 8 rows of 3 at strides (1, 12) lie in the 40 elements.
        let t =
            unsafe { View::<u32, 2>::from_raw_parts(m.0.as_ptr(), Indexer::new([8, 3], [1, 12])) };
        assert!(!t.has_vector_rows::<4>());
    }

    #[test]
    #[should_panic(expected = "out-of-bounds")]
    fn misaligned_view_vectors_abort() {
        let m = matrix(10);
        // SAFETY: as above.
        let v =
            unsafe { View::<u32, 2>::from_raw_parts(m.0.as_ptr(), Indexer::new([3, 8], [10, 1])) };
        let _ = v.get_vector::<4>([1, 0]);
    }

    #[test]
    #[should_panic(expected = "out-of-bounds")]
    fn strided_view_vectors_abort() {
        let m = matrix(12);
        // SAFETY: 3 rows of 4 at strides (12, 2) lie in the 40 elements.
        let v =
            unsafe { View::<u32, 2>::from_raw_parts(m.0.as_ptr(), Indexer::new([3, 4], [12, 2])) };
        let _ = v.get_vector::<4>([0, 0]);
    }

    #[test]
    #[should_panic(expected = "out-of-bounds")]
    fn view_vector_writes_check_the_bound() {
        let mut m = matrix(12);
        // SAFETY: as in the first test.
        let v = unsafe {
            ViewMut::<u32, 2>::from_raw_parts(m.0.as_mut_ptr(), Indexer::new([3, 8], [12, 1]))
        };
        // SAFETY: single-threaded.
        unsafe { v.write_vector([0, 6], [0, 0, 0, 0]) };
    }
}
