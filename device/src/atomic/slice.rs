//! [`AtomicSlice`]: an array kernel parameter that many threads update atomically.

use ferrocuda_abi::{Element, KernelParam, ParamDesc, Scratch, SliceMut};

use super::{Atomic, AtomicAdd, AtomicRef};
// Used by `atomic_add`'s body, which is compiled for the device only (`#[gpu_only]`).
#[cfg(target_arch = "nvptx64")]
use super::{Order, Scope};
use ferrocuda_macros::gpu_only;

/// A contiguous device array whose elements threads update atomically: histograms,
/// counters, accumulators, flags.
///
/// To the host it is exactly a [`SliceMut<T>`](crate::SliceMut) (same layout, recorded in
/// the manifest as a written slice): launchers refuse read-only arrays for it and check it
/// like any output. On the device it has no plain reads or writes — every access is an
/// atomic operation on global memory, through [`at`](Self::at) (bounds-checked) or
/// [`at_unchecked`](Self::at_unchecked):
///
/// ```ignore
/// bins.at(b).fetch_add(1, Order::Relaxed, Scope::Device);   // atom.relaxed.gpu.global.add.u32
/// bins.atomic_add(b, 1);                                    // the same (CUDA's atomicAdd)
/// ```
///
/// Thread model: as the [`atomic`](super) module — any thread, no convergence needed.
#[repr(transparent)]
pub struct AtomicSlice<T>(SliceMut<T>);

impl<T> Clone for AtomicSlice<T> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for AtomicSlice<T> {}

// SAFETY: `repr(transparent)` over `SliceMut<T>`: the same layout and the same description
// (a written slice, which is what the kernel does with it).
unsafe impl<T: Element> KernelParam for AtomicSlice<T> {
    const DESC: ParamDesc = <SliceMut<T> as KernelParam>::DESC;
}

impl<T> AtomicSlice<T> {
    /// An atomic slice of `len` elements at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to global memory valid for reads and writes of `len` elements of
    /// `T`, aligned to `size_of::<T>()`, for as long as the slice is used; concurrent
    /// accesses to those elements must all be atomic.
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        // SAFETY: the caller's contract covers `SliceMut`'s.
        AtomicSlice(unsafe { SliceMut::from_raw_parts(ptr, len) })
    }

    /// Number of elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.0.len()
    }

    /// `true` if the slice holds no element.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The base pointer.
    #[inline(always)]
    pub const fn as_mut_ptr(&self) -> *mut T {
        self.0.as_mut_ptr()
    }

    /// A launcher-managed workspace, accessed atomically (counters, tile states, partials
    /// other blocks read).
    ///
    /// # Safety
    ///
    /// While the atomic slice is used, every concurrent access to the workspace's elements
    /// must be atomic.
    #[inline(always)]
    pub const unsafe fn from_scratch(s: Scratch<T>) -> Self {
        AtomicSlice(s.as_slice_mut())
    }
}

impl<T: Atomic> AtomicSlice<T> {
    /// Element `i` as an atomic reference; an out-of-bounds `i` aborts the kernel (`trap`,
    /// with the caller's location recorded: [`diag`](crate::diag)).
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, i: usize) -> AtomicRef<'_, T> {
        if i >= self.len() {
            ferrocuda_abi::abort();
        }
        // SAFETY: in bounds; the host validated the array, and every access through this
        // type is atomic.
        unsafe { self.at_unchecked(i) }
    }

    /// Element `i` as an atomic reference, without a bounds check.
    ///
    /// # Safety
    ///
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn at_unchecked(&self, i: usize) -> AtomicRef<'_, T> {
        // SAFETY: the caller keeps `i` in bounds; as in `at` otherwise.
        unsafe { AtomicRef::from_global_ptr(self.as_mut_ptr().add(i)) }
    }
}

impl<T: AtomicAdd> AtomicSlice<T> {
    /// CUDA's `atomicAdd(&a[i], value)`: a relaxed, device-scope add that returns the previous
    /// value (`atom.relaxed.gpu.global.add`). Out-of-bounds `i` aborts the kernel.
    #[inline(always)]
    #[track_caller]
    #[gpu_only]
    pub fn atomic_add(&self, i: usize, value: T) -> T {
        self.at(i).fetch_add(value, Order::Relaxed, Scope::Device)
    }
}

#[cfg(test)]
mod tests {
    use super::AtomicSlice;

    fn slice(words: &mut [u32; 4]) -> AtomicSlice<u32> {
        // SAFETY: four `u32`s used only through this slice.
        unsafe { AtomicSlice::from_raw_parts(words.as_mut_ptr(), words.len()) }
    }

    #[test]
    fn elements_are_reached_by_index() {
        let s = slice(&mut [0; 4]);
        assert_eq!((s.len(), s.is_empty()), (4, false));
        assert_eq!(s.at(3).as_ptr(), s.as_mut_ptr().wrapping_add(3));
        // SAFETY: in bounds.
        let r = unsafe { s.at_unchecked(1) };
        assert_eq!(r.as_ptr(), s.as_mut_ptr().wrapping_add(1));
    }

    #[test]
    #[should_panic(expected = "out-of-bounds")]
    fn an_index_past_the_end_aborts() {
        let _ = slice(&mut [0; 4]).at(4);
    }
}
