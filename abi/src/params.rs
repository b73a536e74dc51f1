//! Kernel parameter types: what a kernel may take, and how it is described to the host.
//!
//! Every kernel parameter is a `#[repr(C)]` value passed by value through the launch's
//! parameter buffer. Four array parameter types exist, read-only and mutable flavours of a
//! contiguous slice and of a strided N-D view:
//!
//! | type | layout | may write |
//! | --- | --- | --- |
//! | [`Slice<T>`] | `ptr, len` (16 bytes) | no |
//! | [`SliceMut<T>`] | `ptr, len` (16 bytes) | yes |
//! | [`View<T, N>`] | `ptr, shape[N], strides[N]` (8 + 16·N bytes) | no |
//! | [`ViewMut<T, N>`] | `ptr, shape[N], strides[N]` (8 + 16·N bytes) | yes |
//! | [`Scratch<T>`] | `ptr, len` (16 bytes) | yes |
//!
//! plus the scalar [`Element`](crate::Element) types themselves. [`Scratch<T>`] is a workspace
//! the *launcher* allocates per launch (zero-filled, stream-ordered) — never an argument the
//! caller passes (see [`kinds`](crate::kinds) and `#[kernel(scratch(…))]`). A read-only type
//! has no method that writes: the host may hand it memory of an array its producer exported as
//! read-only.
//!
//! # Safety model
//!
//! The host guarantees, before a launch, that each array parameter describes memory that is
//! valid for the whole view (it checks the extent against the allocation). Reads through the
//! safe accessors are therefore sound as long as no *other* thread of the same launch writes
//! the same element concurrently. Writes are `unsafe`: the caller promises that no other
//! thread of the launch reads or writes that element at the same time (the usual "one thread
//! per output element" pattern satisfies this).
//!
//! # Generated code
//!
//! Each type starts with its data pointer, which `#[kernel]` marks as global memory
//! ([`space::global`]): accesses compile to `ld.global`/`st.global` (SASS `LDG`/`STG`) — a
//! [`Scratch`] workspace's too, the launcher's pool allocation being device memory like any
//! checked argument.
//! [`Slice::get_nc`] and [`View::read_at_nc`] read through the read-only data cache under an
//! extra contract, and [`Slice::split_vectors`] / [`SliceMut::split_vectors`] give 16-byte
//! vector access ([`Vectors`](crate::Vectors), [`VectorsMut`](crate::VectorsMut)).
//!
//! Every type here implements [`KernelParam`](crate::KernelParam) (see
//! [`kinds`](crate::kinds)), which is how `#[kernel]` rejects, at compile
//! time, parameters that cannot cross the launch boundary (references, `String`, …) and how
//! the parameter is described in the kernel manifest.

use crate::indexer::Indexer;
use crate::space;
use core::marker::PhantomData;

/// A read-only contiguous array of `len` elements of `T`.
#[repr(C)]
pub struct Slice<T> {
    ptr: *const T,
    len: usize,
}

/// A mutable contiguous array of `len` elements of `T`.
#[repr(C)]
pub struct SliceMut<T> {
    ptr: *mut T,
    len: usize,
}

/// A read-only strided `N`-dimensional view of `T`.
#[repr(C)]
pub struct View<T, const N: usize> {
    ptr: *const T,
    indexer: Indexer<N>,
}

/// A mutable strided `N`-dimensional view of `T`.
#[repr(C)]
pub struct ViewMut<T, const N: usize> {
    ptr: *mut T,
    indexer: Indexer<N>,
    _marker: PhantomData<*mut T>,
}

/// A launcher-managed workspace of `len` elements of `T`: device memory the launcher provides
/// for one launch, **zero-filled** on the launch stream right before it and used by nothing
/// else until the launch ends — the workspace it keeps for that stream, or, under graph
/// capture, an allocation from CUDA's stream-ordered pool freed (stream-ordered) right after
/// the launch. Callers never pass it: typed launchers and Python launchers leave scratch
/// parameters out of their signatures.
///
/// Its length is declared on the kernel, `#[kernel(scratch(name = formula))]`, as a constant or
/// a formula over the launch (`blocks`, the grid's block count) and the arguments
/// (`x.len()`), e.g. `scratch(partials = blocks, ticket = 1)` or
/// `scratch(status = x.len().div_ceil(4096) + 1)`.
///
/// The kernel may read and write it like a [`SliceMut`] ([`as_slice_mut`](Self::as_slice_mut));
/// the device crate also views it as an `AtomicSlice`. Launches that share a workspace are
/// ordered by their stream (the launcher keeps one per stream, never lent to another), so
/// workspaces never race between launches or streams. The launcher zero-fills it before each
/// launch — or, declared `#[kernel(persist(name))]`, only when it is new to the kernel, the
/// kernel then finding what its previous launch on the stream left there
/// ([`ScratchLen::persist`](crate::extras::ScratchLen::persist)).
#[repr(C)]
pub struct Scratch<T> {
    ptr: *mut T,
    len: usize,
}

// Manual Clone/Copy: derive would demand `T: Clone`, which raw pointers don't need.
macro_rules! copy_impls {
    ($($ty:ident $(< const $n:ident >)?),*) => {$(
        impl<T $(, const $n: usize)?> Clone for $ty<T $(, $n)?> {
            #[inline(always)]
            fn clone(&self) -> Self { *self }
        }
        impl<T $(, const $n: usize)?> Copy for $ty<T $(, $n)?> {}
    )*};
}
copy_impls!(Slice, SliceMut, Scratch, View<const N>, ViewMut<const N>);

// Every array parameter type begins with its data pointer, which the kernel entry marks as
// global memory (`KernelParam`'s contract).
const _: () = assert!(
    core::mem::offset_of!(Slice<u8>, ptr) == 0
        && core::mem::offset_of!(SliceMut<u8>, ptr) == 0
        && core::mem::offset_of!(Scratch<u8>, ptr) == 0
        && core::mem::offset_of!(View<u8, 2>, ptr) == 0
        && core::mem::offset_of!(ViewMut<u8, 2>, ptr) == 0
);

impl<T> Slice<T> {
    /// A slice of `len` elements at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads of `len` elements of `T` for as long as the slice is
    /// used, and properly aligned (any pointer if `len == 0`).
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *const T, len: usize) -> Self {
        Slice { ptr, len }
    }

    /// Number of elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// `true` if the slice holds no element.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The base pointer.
    #[inline(always)]
    pub const fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// Element `i`, or `None` if `i >= len`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<T> {
        if i < self.len {
            // SAFETY: in bounds; validity is the constructor's contract.
            Some(unsafe { self.ptr.add(i).read() })
        } else {
            None
        }
    }

    /// Element `i` without a bounds check.
    ///
    /// # Safety
    ///
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        debug_assert!(i < self.len);
        // SAFETY: the caller keeps `i` in bounds.
        unsafe { self.ptr.add(i).read() }
    }

    /// Element `i` through the read-only data cache (`ld.global.nc`, SASS `LDG.E.CONSTANT`;
    /// CUDA's `__ldg`), or `None` if `i >= len`.
    ///
    /// # Safety
    ///
    /// No thread of the launch writes element `i` while the launch runs — also not through
    /// another parameter: the host accepts the same array as an input and an output (`out =
    /// x`), and then this read may return stale data (see [`space::global_nc`]). A kernel
    /// parameter is global memory; a slice built with [`from_raw_parts`](Self::from_raw_parts)
    /// must point to global memory.
    #[inline(always)]
    pub unsafe fn get_nc(&self, i: usize) -> Option<T> {
        if i < self.len {
            // SAFETY: in bounds; the rest is the caller's contract.
            Some(unsafe { self.get_nc_unchecked(i) })
        } else {
            None
        }
    }

    /// Element `i` through the read-only data cache, without a bounds check.
    ///
    /// # Safety
    ///
    /// `i < self.len()`, and [`get_nc`](Self::get_nc)'s contract.
    #[inline(always)]
    pub unsafe fn get_nc_unchecked(&self, i: usize) -> T {
        debug_assert!(i < self.len);
        // SAFETY: the caller's contract.
        unsafe { space::global_nc(self.ptr.add(i)).read() }
    }

    /// The same elements as a slice that may write.
    ///
    /// # Safety
    ///
    /// The elements are valid for writes (part of a [`SliceMut`]).
    #[inline(always)]
    pub(crate) const unsafe fn assume_mut(self) -> SliceMut<T> {
        SliceMut {
            ptr: self.ptr.cast_mut(),
            len: self.len,
        }
    }

    /// The first `mid` elements and the rest; `mid > len` aborts the kernel (`trap`, with the
    /// caller's location in the trap record: [`diag`](crate::diag)).
    #[inline(always)]
    #[track_caller]
    pub fn split_at(&self, mid: usize) -> (Slice<T>, Slice<T>) {
        if mid > self.len {
            crate::abort();
        }
        // SAFETY: both parts lie inside this slice.
        unsafe {
            (
                Slice::from_raw_parts(self.ptr, mid),
                Slice::from_raw_parts(self.ptr.add(mid), self.len - mid),
            )
        }
    }
}

impl<T> SliceMut<T> {
    /// A mutable slice of `len` elements at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads and writes of `len` elements of `T` for as long as the
    /// slice is used, and properly aligned (any pointer if `len == 0`).
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        SliceMut { ptr, len }
    }

    /// Number of elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// `true` if the slice holds no element.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The base pointer.
    #[inline(always)]
    pub const fn as_mut_ptr(&self) -> *mut T {
        self.ptr
    }

    /// A read-only view of the same elements.
    #[inline(always)]
    pub const fn as_slice(&self) -> Slice<T> {
        Slice {
            ptr: self.ptr,
            len: self.len,
        }
    }

    /// Element `i`, or `None` if `i >= len`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<T> {
        self.as_slice().get(i)
    }

    /// Element `i` without a bounds check.
    ///
    /// # Safety
    ///
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        // SAFETY: forwarded contract.
        unsafe { self.as_slice().get_unchecked(i) }
    }

    /// Writes `value` to element `i`; out-of-bounds indices abort the kernel (`trap`, with
    /// the caller's location in the trap record: [`diag`](crate::diag)).
    ///
    /// # Safety
    ///
    /// No other thread of the launch may access element `i` concurrently.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&self, i: usize, value: T) {
        if i >= self.len {
            crate::abort();
        }
        // SAFETY: in bounds; exclusivity is the caller's contract.
        unsafe { self.ptr.add(i).write(value) }
    }

    /// Writes `value` to element `i` without a bounds check.
    ///
    /// # Safety
    ///
    /// `i < self.len()`, and no other thread of the launch accesses element `i` concurrently.
    #[inline(always)]
    pub unsafe fn write_unchecked(&self, i: usize, value: T) {
        debug_assert!(i < self.len);
        // SAFETY: the caller's contract.
        unsafe { self.ptr.add(i).write(value) }
    }

    /// The first `mid` elements and the rest; `mid > len` aborts the kernel.
    #[inline(always)]
    #[track_caller]
    pub fn split_at(&self, mid: usize) -> (SliceMut<T>, SliceMut<T>) {
        let (head, tail) = self.as_slice().split_at(mid);
        // SAFETY: both are parts of this slice, which may be written.
        unsafe { (head.assume_mut(), tail.assume_mut()) }
    }
}

impl<T> Scratch<T> {
    /// A workspace of `len` elements at `ptr`.
    ///
    /// # Safety
    ///
    /// As [`SliceMut::from_raw_parts`].
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        Scratch { ptr, len }
    }

    /// Number of elements (as the kernel's `scratch(…)` formula computed it for this launch).
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// `true` if the workspace holds no element.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The base pointer (16-byte aligned at least: the launcher aligns every workspace to 256
    /// bytes).
    #[inline(always)]
    pub const fn as_mut_ptr(&self) -> *mut T {
        self.ptr
    }

    /// The workspace as a mutable slice (plain loads and stores).
    #[inline(always)]
    pub const fn as_slice_mut(&self) -> SliceMut<T> {
        SliceMut {
            ptr: self.ptr,
            len: self.len,
        }
    }
}

impl<T, const N: usize> View<T, N> {
    /// A view of the elements at `ptr + indexer.offset(idx)`.
    ///
    /// # Safety
    ///
    /// For every in-bounds multi-index `idx`, `ptr.offset(indexer.offset(idx))` must be valid
    /// for reads of a `T` for as long as the view is used.
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *const T, indexer: Indexer<N>) -> Self {
        View { ptr, indexer }
    }

    /// The view's indexer (shape and element strides).
    #[inline(always)]
    pub const fn indexer(&self) -> &Indexer<N> {
        &self.indexer
    }

    /// The extents.
    #[inline(always)]
    pub const fn shape(&self) -> [usize; N] {
        self.indexer.shape
    }

    /// Number of elements.
    #[inline(always)]
    pub fn size(&self) -> usize {
        self.indexer.size()
    }

    /// The pointer to element `[0; N]`.
    #[inline(always)]
    pub const fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// Element at `idx`, or `None` if out of bounds.
    #[inline(always)]
    pub fn get(&self, idx: [usize; N]) -> Option<T> {
        let off = self.indexer.get_offset(idx)?;
        // SAFETY: in bounds; validity is the constructor's contract.
        Some(unsafe { self.ptr.offset(off).read() })
    }

    /// Element at element offset `off` from the base pointer.
    ///
    /// # Safety
    ///
    /// `off` must be the offset of an in-bounds multi-index (e.g. from
    /// [`Indexer::offset_of`] with `linear < size()`).
    #[inline(always)]
    pub unsafe fn read_at(&self, off: isize) -> T {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.offset(off).read() }
    }

    /// Element at element offset `off` through the read-only data cache (`ld.global.nc`,
    /// SASS `LDG.E.CONSTANT`; CUDA's `__ldg`).
    ///
    /// # Safety
    ///
    /// As [`read_at`](Self::read_at), and [`Slice::get_nc`]'s contract: no thread of the
    /// launch writes that element while the launch runs.
    #[inline(always)]
    pub unsafe fn read_at_nc(&self, off: isize) -> T {
        // SAFETY: the caller's contract.
        unsafe { space::global_nc(self.ptr.offset(off)).read() }
    }
}

impl<T, const N: usize> ViewMut<T, N> {
    /// A mutable view of the elements at `ptr + indexer.offset(idx)`.
    ///
    /// # Safety
    ///
    /// For every in-bounds multi-index `idx`, `ptr.offset(indexer.offset(idx))` must be valid
    /// for reads and writes of a `T` for as long as the view is used. Distinct in-bounds
    /// multi-indices may alias only if the view is never written (zero strides).
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, indexer: Indexer<N>) -> Self {
        ViewMut {
            ptr,
            indexer,
            _marker: PhantomData,
        }
    }

    /// The view's indexer (shape and element strides).
    #[inline(always)]
    pub const fn indexer(&self) -> &Indexer<N> {
        &self.indexer
    }

    /// The extents.
    #[inline(always)]
    pub const fn shape(&self) -> [usize; N] {
        self.indexer.shape
    }

    /// Number of elements.
    #[inline(always)]
    pub fn size(&self) -> usize {
        self.indexer.size()
    }

    /// The pointer to element `[0; N]`.
    #[inline(always)]
    pub const fn as_mut_ptr(&self) -> *mut T {
        self.ptr
    }

    /// A read-only view of the same elements.
    #[inline(always)]
    pub const fn as_view(&self) -> View<T, N> {
        View {
            ptr: self.ptr,
            indexer: self.indexer,
        }
    }

    /// Element at `idx`, or `None` if out of bounds.
    #[inline(always)]
    pub fn get(&self, idx: [usize; N]) -> Option<T> {
        self.as_view().get(idx)
    }

    /// Element at element offset `off` from the base pointer.
    ///
    /// # Safety
    ///
    /// As [`View::read_at`].
    #[inline(always)]
    pub unsafe fn read_at(&self, off: isize) -> T {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.offset(off).read() }
    }

    /// Writes `value` at `idx`; an out-of-bounds index aborts the kernel (`trap`, with the
    /// caller's location in the trap record: [`diag`](crate::diag)).
    ///
    /// # Safety
    ///
    /// No other thread of the launch may access that element concurrently.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&self, idx: [usize; N], value: T) {
        match self.indexer.get_offset(idx) {
            // SAFETY: in bounds; exclusivity is the caller's contract.
            Some(off) => unsafe { self.ptr.offset(off).write(value) },
            None => crate::abort(),
        }
    }

    /// Writes `value` at element offset `off` from the base pointer.
    ///
    /// # Safety
    ///
    /// As [`View::read_at`], and no other thread of the launch accesses that element
    /// concurrently.
    #[inline(always)]
    pub unsafe fn write_at(&self, off: isize, value: T) {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.offset(off).write(value) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(16))]
    struct Buffer([f32; 12]);

    #[test]
    fn vector_splits_cover_every_element_once() {
        let mut buf = Buffer(core::array::from_fn(|i| i as f32));
        let base = buf.0.as_mut_ptr();
        for offset in 0..4 {
            for len in 0..=12 - offset {
                // SAFETY: `len` elements of the buffer from `offset`, used only here.
                let s = unsafe { Slice::from_raw_parts(base.add(offset).cast_const(), len) };
                let (head, body, tail) = s.split_vectors::<4>();
                assert_eq!(head.len() + 4 * body.len() + tail.len(), len);
                assert!(head.len() < 4 && tail.len() < 4, "{offset} {len}");
                assert!(body.is_empty() || (body.elements().as_ptr() as usize).is_multiple_of(16));
                let mut seen: [f32; 12] = [-1.0; 12];
                let mut n = 0;
                for i in 0..head.len() {
                    seen[n] = head.get(i).unwrap();
                    n += 1;
                }
                for j in 0..body.len() {
                    for v in body.get(j).unwrap() {
                        seen[n] = v;
                        n += 1;
                    }
                }
                for i in 0..tail.len() {
                    // SAFETY: in bounds, nothing writes.
                    seen[n] = unsafe { tail.get_nc(i) }.unwrap();
                    n += 1;
                }
                let want: [f32; 12] =
                    core::array::from_fn(|i| if i < len { (offset + i) as f32 } else { -1.0 });
                assert_eq!(seen, want, "offset {offset} len {len}");
                // The mutable split agrees.
                // SAFETY: as above; the shared slice is not used while this one writes.
                let m = unsafe { SliceMut::from_raw_parts(base.add(offset), len) };
                let (mh, mb, mt) = m.split_vectors::<4>();
                assert_eq!(
                    (mh.len(), mb.len(), mt.len()),
                    (head.len(), body.len(), tail.len())
                );
            }
        }
    }

    #[test]
    fn split_at_and_nc_reads() {
        let mut buf = Buffer([0.0; 12]);
        let base = buf.0.as_mut_ptr();
        // SAFETY: the buffer, used only here.
        let m = unsafe { SliceMut::from_raw_parts(base, 12) };
        let (a, b) = m.split_at(5);
        assert_eq!((a.len(), b.len()), (5, 7));
        // SAFETY: single-threaded, in bounds.
        unsafe { b.write(0, 2.5) };
        let s = m.as_slice();
        // SAFETY: nothing writes while these read.
        unsafe {
            assert_eq!(s.get_nc(5), Some(2.5));
            assert_eq!(s.get_nc(12), None);
            assert_eq!(s.get_nc_unchecked(5), 2.5);
        }
        let (c, d) = s.split_at(12);
        assert_eq!((c.len(), d.len(), d.is_empty()), (12, 0, true));
    }

    #[test]
    #[should_panic(expected = "out-of-bounds")]
    fn split_past_the_end_aborts() {
        let buf = Buffer([0.0; 12]);
        // SAFETY: the buffer, read-only.
        let s = unsafe { Slice::from_raw_parts(buf.0.as_ptr(), 12) };
        let _ = s.split_at(13);
    }
}
