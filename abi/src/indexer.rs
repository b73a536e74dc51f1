//! The N-D array indexer, one source for host and device.
//!
//! [`Indexer<N>`] generalizes AMSO's `ArrayIndexer`: a shape and a stride per axis (in
//! *elements*, not bytes), and the three questions every N-D kernel asks:
//!
//! * where is the element at a multi-index? ([`Indexer::offset`]),
//! * which multi-index is the `i`-th element in C (row-major) order? ([`Indexer::unravel`]),
//! * how many elements are there? ([`Indexer::size`]).
//!
//! Strides may be negative (a reversed axis, `a[::-1]`) or zero (a broadcast axis), and the
//! layout need not be contiguous (a transposed or step-sliced view). Offsets are therefore
//! signed: the element at multi-index `idx` lives at `base + offset(idx)` where `base` is the
//! pointer the array interface reports (the address of element `[0, 0, …]`).
//!
//! The type is `#[repr(C)]` and is passed by value to kernels inside
//! [`View`](crate::View) / [`ViewMut`](crate::ViewMut): its layout is part of the kernel ABI
//! (`N` `usize` extents followed by `N` `isize` strides).
//!
//! ```
//! use ferrocuda_abi::Indexer;
//! // A 2x3 C-ordered array, then its transpose.
//! let a = Indexer::c_contiguous([2, 3]);
//! assert_eq!(a.offset([1, 2]), 5);
//! assert_eq!(a.unravel(4), [1, 1]);
//! let t = Indexer::new([3, 2], [1, 3]);
//! assert_eq!(t.offset_of(1), 3); // t[0, 1] == a[1, 0]
//! assert_eq!(t.size(), 6);
//! ```

use crate::layout;

/// Shape and element strides of an `N`-dimensional array view.
///
/// Invariants are *not* enforced by construction (the type must stay a plain `#[repr(C)]`
/// value that crosses the host/device boundary); hosts validate what they build with
/// [`Indexer::checked_size`] and [`Indexer::extent`] before passing it to a kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Indexer<const N: usize> {
    /// Extent of each axis.
    pub shape: [usize; N],
    /// Distance between consecutive elements along each axis, in elements (may be ≤ 0).
    pub strides: [isize; N],
}

impl<const N: usize> Indexer<N> {
    /// An indexer with the given shape and element strides.
    #[inline(always)]
    pub const fn new(shape: [usize; N], strides: [isize; N]) -> Self {
        Indexer { shape, strides }
    }

    /// The C-ordered (row-major, last axis fastest) contiguous layout of `shape`.
    #[inline]
    pub const fn c_contiguous(shape: [usize; N]) -> Self {
        let mut strides = [0isize; N];
        let mut acc: isize = 1;
        let mut d = N;
        while d > 0 {
            d -= 1;
            strides[d] = acc;
            acc = acc.wrapping_mul(shape[d] as isize);
        }
        Indexer { shape, strides }
    }

    /// Number of axes.
    #[inline(always)]
    pub const fn rank(&self) -> usize {
        N
    }

    /// Number of elements (product of the shape; 1 for rank 0). Wraps on overflow: call
    /// [`checked_size`](Self::checked_size) on untrusted shapes.
    #[inline]
    pub fn size(&self) -> usize {
        let mut n: usize = 1;
        let mut d = 0;
        while d < N {
            n = n.wrapping_mul(self.shape[d]);
            d += 1;
        }
        n
    }

    /// Number of elements, or `None` if the product of the non-zero extents overflows
    /// `usize` ([`layout::element_count`]).
    #[inline]
    pub fn checked_size(&self) -> Option<usize> {
        layout::element_count(&self.shape)
    }

    /// `true` when the view holds no element.
    #[inline]
    pub fn is_empty(&self) -> bool {
        let mut d = 0;
        while d < N {
            if self.shape[d] == 0 {
                return true;
            }
            d += 1;
        }
        false
    }

    /// Element offset of the multi-index `idx`: `Σ idx[d] * strides[d]`.
    ///
    /// Does not check `idx` against the shape; see [`get_offset`](Self::get_offset).
    #[inline(always)]
    pub fn offset(&self, idx: [usize; N]) -> isize {
        let mut off: isize = 0;
        let mut d = 0;
        while d < N {
            off = off.wrapping_add((idx[d] as isize).wrapping_mul(self.strides[d]));
            d += 1;
        }
        off
    }

    /// Element offset of `idx`, or `None` if any index is out of its axis' bounds.
    #[inline]
    pub fn get_offset(&self, idx: [usize; N]) -> Option<isize> {
        let mut d = 0;
        while d < N {
            if idx[d] >= self.shape[d] {
                return None;
            }
            d += 1;
        }
        Some(self.offset(idx))
    }

    /// Multi-index of the `linear`-th element in C order (AMSO's `get_indices`).
    ///
    /// For `linear >= size()` the result is the multi-index of `linear % size()` with the
    /// first axis' index left unreduced (the usual mixed-radix rule); callers iterate
    /// `0..size()`.
    #[inline]
    pub fn unravel(&self, linear: usize) -> [usize; N] {
        let mut idx = [0usize; N];
        let mut rest = linear;
        let mut d = N;
        while d > 1 {
            d -= 1;
            let n = self.shape[d];
            // n == 0 only for empty views, where no linear index is valid.
            if n != 0 {
                idx[d] = rest % n;
                rest /= n;
            }
        }
        if N > 0 {
            idx[0] = rest;
        }
        idx
    }

    /// Offset of the `linear`-th element in C order: `offset(unravel(linear))`, fused.
    #[inline]
    pub fn offset_of(&self, linear: usize) -> isize {
        let mut off: isize = 0;
        let mut rest = linear;
        let mut d = N;
        while d > 1 {
            d -= 1;
            let n = self.shape[d];
            // n == 0 only for empty views, where no linear index is valid.
            if let Some(q) = rest.checked_div(n) {
                let r = rest - q * n;
                off = off.wrapping_add((r as isize).wrapping_mul(self.strides[d]));
                rest = q;
            }
        }
        if N > 0 {
            off = off.wrapping_add((rest as isize).wrapping_mul(self.strides[0]));
        }
        off
    }

    /// [`offset_of`](Self::offset_of) and the multi-index sum in one pass, with 32-bit
    /// division — the fast path for views of fewer than 2³² elements on GPUs, where 64-bit
    /// division is a long instruction sequence.
    ///
    /// The caller must ensure `linear < size() <= u32::MAX as usize + 1` and every extent
    /// fits in `u32`; otherwise the result is unspecified (but never undefined behaviour).
    #[inline]
    pub fn offset_of_u32(&self, linear: u32) -> (isize, [u32; N]) {
        let mut idx = [0u32; N];
        let mut off: isize = 0;
        let mut rest = linear;
        let mut d = N;
        while d > 1 {
            d -= 1;
            let n = self.shape[d] as u32;
            if let Some(q) = rest.checked_div(n) {
                let r = rest - q * n;
                idx[d] = r;
                off = off.wrapping_add((r as isize).wrapping_mul(self.strides[d]));
                rest = q;
            }
        }
        if N > 0 {
            idx[0] = rest;
            off = off.wrapping_add((rest as isize).wrapping_mul(self.strides[0]));
        }
        (off, idx)
    }

    /// Lowest and highest element offsets the view touches, or `None` for an empty view.
    ///
    /// Returns `None` as well if an offset does not fit `isize` (such a view cannot describe
    /// real memory). Hosts use this to check a view against its allocation
    /// ([`layout::span`]).
    pub fn extent(&self) -> Option<(isize, isize)> {
        let (lo, hi) = layout::span(&self.shape, &self.strides)?;
        Some((isize::try_from(lo).ok()?, isize::try_from(hi).ok()?))
    }

    /// `true` when the view is C-contiguous (axes of extent 1 may have any stride;
    /// [`layout::is_c_contiguous`]).
    pub fn is_c_contiguous(&self) -> bool {
        layout::is_c_contiguous(&self.shape, &self.strides, 1)
    }

    /// The same elements with the axes reordered into memory order: the axis with the
    /// smallest `|stride|` last, the largest first (axes of extent ≤ 1 first of all).
    ///
    /// For kernels whose result does not depend on the order elements are visited in (and
    /// whose per-element value is symmetric in the axes, like a sum of indices), iterating
    /// the reordered view in C order makes neighbouring threads touch neighbouring memory
    /// — coalesced access for transposed views. A stable sorting network over constant
    /// indices: on the device it stays in registers.
    #[inline]
    pub fn memory_order(&self) -> Self {
        self.memory_order_with::<0>([]).0
    }

    /// [`memory_order`](Self::memory_order) of `self`, and `others` — views of the same
    /// shape — with their axes reordered the same way: for an element-wise kernel over
    /// several arrays, iterating the reordered views together in C order visits the same
    /// elements as the original ones, in the order that is coalesced for `self` (e.g. all of
    /// them when every array is transposed alike).
    #[inline]
    pub fn memory_order_with<const K: usize>(&self, others: [Self; K]) -> (Self, [Self; K]) {
        let key = |shape: usize, stride: isize| -> usize {
            if shape <= 1 {
                usize::MAX
            } else {
                stride.unsigned_abs()
            }
        };
        let mut out = *self;
        let mut others = others;
        let mut pass = 0;
        while pass + 1 < N {
            let mut j = 0;
            while j + 1 < N - pass {
                // Bubble the smaller |stride| towards the end (stable: strict comparison).
                if key(out.shape[j], out.strides[j]) < key(out.shape[j + 1], out.strides[j + 1]) {
                    out.shape.swap(j, j + 1);
                    out.strides.swap(j, j + 1);
                    let mut k = 0;
                    while k < K {
                        others[k].shape.swap(j, j + 1);
                        others[k].strides.swap(j, j + 1);
                        k += 1;
                    }
                }
                j += 1;
            }
            pass += 1;
        }
        (out, others)
    }

    /// The multi-indices of the elements at C-order positions `start`, `start + step`, …
    /// below [`size`](Self::size): one thread's share of a grid-stride loop (`start` = the
    /// thread's global index, `step` = the grid's thread count), as multi-indices. The walk
    /// divides once per axis when it starts and never again: each step adds `step`'s digits
    /// in the shape's mixed radix, with carries. `step` 0 counts as 1.
    #[inline]
    pub fn walk(&self, start: usize, step: usize) -> Walk<N> {
        let step = if step == 0 { 1 } else { step };
        Walk {
            shape: self.shape,
            idx: self.unravel(start),
            step: self.unravel(step),
            done: if N == 0 { start != 0 } else { self.is_empty() },
        }
    }

    /// The same elements with axes reordered by `perm` (`perm[k]` is the old axis that
    /// becomes axis `k`). Returns `None` if `perm` is not a permutation of `0..N`.
    pub fn permuted(&self, perm: [usize; N]) -> Option<Self> {
        let mut seen = [false; N];
        let mut out = *self;
        for (k, &p) in perm.iter().enumerate() {
            if p >= N || seen[p] {
                return None;
            }
            seen[p] = true;
            out.shape[k] = self.shape[p];
            out.strides[k] = self.strides[p];
        }
        Some(out)
    }
}

/// The multi-indices one thread visits in a grid-stride loop over an N-D shape, in C order:
/// [`Indexer::walk`].
#[derive(Clone, Copy, Debug)]
pub struct Walk<const N: usize> {
    shape: [usize; N],
    /// The next multi-index; its first digit is not reduced (past the end: `>= shape[0]`).
    idx: [usize; N],
    /// The step in the shape's mixed radix (first digit not reduced).
    step: [usize; N],
    done: bool,
}

impl<const N: usize> Iterator for Walk<N> {
    type Item = [usize; N];

    #[inline(always)]
    fn next(&mut self) -> Option<[usize; N]> {
        if self.done || (N > 0 && self.idx[0] >= self.shape[0]) {
            return None;
        }
        let current = self.idx;
        if N == 0 {
            self.done = true;
            return Some(current);
        }
        // Add the step digit by digit, last axis first. Each digit and its step digit are
        // below the extent, so a sum is below twice the extent: one subtraction reduces it.
        let mut carry = 0;
        let mut d = N;
        while d > 1 {
            d -= 1;
            let v = self.idx[d] + self.step[d] + carry;
            carry = usize::from(v >= self.shape[d]);
            self.idx[d] = if carry == 1 { v - self.shape[d] } else { v };
        }
        self.idx[0] = self.idx[0]
            .saturating_add(self.step[0])
            .saturating_add(carry);
        Some(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_contiguous_strides() {
        let ix = Indexer::c_contiguous([2, 3, 4]);
        assert_eq!(ix.strides, [12, 4, 1]);
        assert!(ix.is_c_contiguous());
        assert_eq!(ix.size(), 24);
        assert_eq!(ix.extent(), Some((0, 23)));
    }

    #[test]
    fn rank_zero_is_a_scalar() {
        let ix = Indexer::<0>::c_contiguous([]);
        assert_eq!(ix.size(), 1);
        assert_eq!(ix.offset([]), 0);
        assert_eq!(ix.offset_of(0), 0);
        assert_eq!(ix.extent(), Some((0, 0)));
    }

    #[test]
    fn negative_and_zero_strides() {
        // a[::-1] of 5 elements: base points at the last element.
        let rev = Indexer::new([5], [-1]);
        assert_eq!(rev.offset([4]), -4);
        assert_eq!(rev.extent(), Some((-4, 0)));
        assert!(!rev.is_c_contiguous());
        // broadcast axis
        let b = Indexer::new([3, 4], [0, 1]);
        assert_eq!(b.extent(), Some((0, 3)));
        assert_eq!(b.offset_of(5), 1);
    }

    #[test]
    fn empty_views() {
        let e = Indexer::new([3, 0, 2], [0, 0, 0]);
        assert!(e.is_empty());
        assert_eq!(e.size(), 0);
        assert_eq!(e.extent(), None);
        assert!(e.is_c_contiguous());
    }

    #[test]
    fn overflow_is_reported() {
        let big = Indexer::new([usize::MAX, 2], [1, 1]);
        assert_eq!(big.checked_size(), None);
        let far = Indexer::new([2, 2], [isize::MAX, 1]);
        assert_eq!(far.extent(), None); // isize::MAX + 1 overflows
        let edge = Indexer::new([2], [isize::MAX]);
        assert_eq!(edge.extent(), Some((0, isize::MAX)));
        let over = Indexer::new([3], [isize::MAX]);
        assert_eq!(over.extent(), None);
    }

    #[test]
    fn memory_order_sorts_axes_by_stride() {
        // A transposed (3, 4, 5) C array: strides (1, 5, 20) become (20, 5, 1).
        let t = Indexer::new([5, 4, 3], [1, 5, 20]);
        let m = t.memory_order();
        assert_eq!(m.shape, [3, 4, 5]);
        assert_eq!(m.strides, [20, 5, 1]);
        assert!(m.is_c_contiguous());
        // Negative strides sort by magnitude; extent-1 axes go first.
        let r = Indexer::new([2, 1, 6], [-1, 1, 2]);
        let m = r.memory_order();
        assert_eq!(m.shape, [1, 6, 2]);
        assert_eq!(m.strides, [1, 2, -1]);
        assert_eq!(r.extent(), m.extent());
    }

    #[test]
    fn memory_order_carries_other_views_along() {
        // Output transposed, one input C-ordered, one broadcast along the first axis.
        let out = Indexer::new([3, 4], [1, 3]);
        let a = Indexer::c_contiguous([3, 4]);
        let b = Indexer::new([3, 4], [0, 1]);
        let (o, [a2, b2]) = out.memory_order_with([a, b]);
        assert_eq!((o.shape, o.strides), ([4, 3], [3, 1]));
        assert_eq!((a2.shape, a2.strides), ([4, 3], [1, 4]));
        assert_eq!((b2.shape, b2.strides), ([4, 3], [1, 0]));
        // Position i of the reordered views is one element of each original array.
        for i in 0..12 {
            let idx = o.unravel(i);
            let orig = [idx[1], idx[0]];
            assert_eq!(o.offset(idx), out.offset(orig));
            assert_eq!(a2.offset(idx), a.offset(orig));
            assert_eq!(b2.offset(idx), b.offset(orig));
        }
    }

    #[test]
    fn walks_visit_every_position_once() {
        for shape in [[3usize, 5, 7], [1, 1, 4], [4, 1, 1], [0, 3, 2], [2, 3, 1]] {
            let ix = Indexer::c_contiguous(shape);
            for threads in [1usize, 2, 3, 7, 16, 200] {
                let mut seen = [0u8; 105];
                for t in 0..threads {
                    let mut last = None;
                    for idx in ix.walk(t, threads) {
                        let i = ix.offset(idx) as usize;
                        assert!(idx.iter().zip(&shape).all(|(&v, &n)| v < n));
                        assert_eq!(i % threads, t, "{shape:?} {threads}");
                        assert!(last.is_none_or(|l| i > l));
                        last = Some(i);
                        seen[i] += 1;
                    }
                }
                let n = ix.size();
                assert!(seen[..n].iter().all(|&c| c == 1), "{shape:?} {threads}");
            }
        }
        let scalar = Indexer::<0>::c_contiguous([]);
        assert_eq!(scalar.walk(0, 4).count(), 1);
        assert_eq!(scalar.walk(1, 4).count(), 0);
        assert_eq!(Indexer::c_contiguous([5]).walk(2, 0).count(), 3);
        // Steps past the end saturate instead of wrapping around.
        let huge = Indexer::new([usize::MAX / 2, 2], [0, 0]);
        assert_eq!(huge.walk(usize::MAX - 2, usize::MAX).count(), 1);
    }

    #[test]
    fn permutation_checks() {
        let ix = Indexer::c_contiguous([2, 3, 4]);
        let p = ix.permuted([2, 0, 1]).unwrap();
        assert_eq!(p.shape, [4, 2, 3]);
        assert_eq!(p.strides, [1, 12, 4]);
        assert!(ix.permuted([0, 0, 1]).is_none());
        assert!(ix.permuted([0, 1, 3]).is_none());
    }
}
