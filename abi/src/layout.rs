//! Strided layouts: the predicates every consumer of an N-D array asks, in one place.
//!
//! A layout is a shape (extents) and one stride per axis, in some *unit* — bytes for the
//! array interfaces, elements for the [`Indexer`](crate::Indexer) a kernel receives. The
//! functions here answer, for any unit:
//!
//! * how many elements there are ([`element_count`]);
//! * which offsets the elements span ([`span`]);
//! * whether the layout is C-contiguous ([`is_c_contiguous`]) and what the C-order strides of a
//!   shape are ([`c_strides`]);
//! * whether two distinct multi-indices can share an offset ([`may_self_overlap`]);
//! * whether byte strides address whole elements ([`element_aligned`]) and the strides in the
//!   other unit ([`element_strides`], [`byte_strides`]).
//!
//! The indexer, the host's array-interface validation and the launcher all use these; no other
//! place restates a layout rule. Everything is `no_std`, heap-free and total: overflow is an
//! answer (`None`, or the conservative `true`), never a panic.

/// The most axes an array (and a kernel view) may have; CuPy's limit, and ferrocuda's.
pub const MAX_NDIM: usize = 32;

/// Number of elements: the product of the extents (1 for rank 0, 0 when an extent is 0).
///
/// `None` when the product of the *non-zero* extents overflows `usize` — NumPy's rule: an
/// array whose other extents could not be allocated is refused even when one extent is 0.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    let mut nonzero: usize = 1;
    let mut empty = false;
    for &n in shape {
        empty |= n == 0;
        nonzero = nonzero.checked_mul(n.max(1))?;
    }
    Some(if empty { 0 } else { nonzero })
}

/// The lowest and highest offset of an element of a non-empty layout, relative to element
/// `[0, …, 0]`: `(Σ min(0, (n-1)·s), Σ max(0, (n-1)·s))` over the axes (extent `n`, stride
/// `s`), in the strides' unit.
///
/// `None` for an empty layout (no element, no offset) and when a sum overflows `i128`
/// (possible only with many huge axes). Offsets are `i128` so that callers can check them
/// against their own bounds (the address space, `isize`) without overflowing first.
pub fn span(shape: &[usize], strides: &[isize]) -> Option<(i128, i128)> {
    if shape.contains(&0) {
        return None;
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&n, &s) in shape.iter().zip(strides) {
        // |(n-1)·s| < 2^64 · 2^63 = 2^127: the product itself cannot overflow.
        let step = (n as i128 - 1) * s as i128;
        if step < 0 {
            lo = lo.checked_add(step)?;
        } else {
            hi = hi.checked_add(step)?;
        }
    }
    Some((lo, hi))
}

/// NumPy's C-contiguity, with strides in units of `unit` (1 for element strides, the item
/// size for byte strides): the last axis of extent ≠ 1 steps by `unit`, each axis further out
/// by the extent of everything inside it. Axes of extent 1 may have any stride; empty layouts
/// are contiguous.
pub fn is_c_contiguous(shape: &[usize], strides: &[isize], unit: usize) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expected = unit as i128;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 {
            if s as i128 != expected {
                return false;
            }
            // Saturates past anything a stride can equal: a later axis of extent ≠ 1 fails.
            expected = expected.saturating_mul(n as i128);
        }
    }
    true
}

/// Fills `out[..shape.len()]` with the C-order (row-major) strides of `shape` in units of
/// `unit` (the last axis steps by `unit`); extents of 0 count as 1, as NumPy does.
///
/// `None` when a stride, or the span of the whole array, does not fit `isize`, or when `out`
/// is shorter than the shape.
pub fn c_strides(shape: &[usize], unit: usize, out: &mut [isize]) -> Option<()> {
    let out = out.get_mut(..shape.len())?;
    let mut acc = unit as i128;
    for (d, slot) in out.iter_mut().enumerate().rev() {
        *slot = isize::try_from(acc).ok()?;
        acc = acc.checked_mul(shape[d].max(1) as i128)?;
    }
    isize::try_from(acc).ok().map(|_| ())
}

/// `true` unless distinct multi-indices provably have distinct offsets: the axes of extent
/// above 1, sorted by |stride|, must each step past everything the inner axes span (starting
/// from one element of `unit`). Conservative: `true` on overflow. Layouts of at most one
/// element never overlap.
pub fn may_self_overlap(shape: &[usize], strides: &[isize], unit: usize) -> bool {
    match element_count(shape) {
        None => return true,
        Some(n) if n <= 1 => return false,
        Some(_) => {}
    }
    let mut axes = [(0usize, 0usize); MAX_NDIM];
    let mut n = 0;
    for (&len, &s) in shape.iter().zip(strides) {
        if len > 1 {
            let Some(slot) = axes.get_mut(n) else {
                return true;
            };
            *slot = (s.unsigned_abs(), len);
            n += 1;
        }
    }
    let axes = &mut axes[..n];
    axes.sort_unstable();
    let mut covered = unit; // offsets covered by the inner axes
    for &(stride, len) in axes.iter() {
        if stride < covered {
            return true;
        }
        covered = match stride
            .checked_mul(len - 1)
            .and_then(|x| x.checked_add(covered))
        {
            Some(v) => v,
            None => return true,
        };
    }
    false
}

/// `true` when every byte stride that moves — on an axis of extent above 1 of a non-empty
/// layout — is a whole number of items of `itemsize` bytes: the layout has element strides
/// ([`element_strides`] succeeds). Negative and zero strides are whole numbers too.
pub fn element_aligned(shape: &[usize], byte_strides: &[isize], itemsize: usize) -> bool {
    let item = itemsize.max(1) as isize;
    shape.contains(&0)
        || shape
            .iter()
            .zip(byte_strides)
            .all(|(&n, &s)| n <= 1 || s % item == 0)
}

/// Fills `out[..shape.len()]` with the element strides of byte strides `byte_strides` for
/// items of `itemsize` bytes.
///
/// A stride that never moves — on an axis of extent ≤ 1, or any axis of an empty layout —
/// need not be a multiple of the item size and becomes 0 when it is not. `Err(axis)` names the
/// first axis whose stride does move but is not a multiple (the elements would be
/// misaligned).
pub fn element_strides(
    shape: &[usize],
    byte_strides: &[isize],
    itemsize: usize,
    out: &mut [isize],
) -> Result<(), usize> {
    let item = itemsize.max(1) as isize;
    let empty = shape.contains(&0);
    for (d, ((&n, &s), slot)) in shape.iter().zip(byte_strides).zip(out).enumerate() {
        *slot = if s % item == 0 {
            s / item
        } else if n <= 1 || empty {
            0
        } else {
            return Err(d);
        };
    }
    Ok(())
}

/// Fills `out[..strides.len()]` with the byte strides of element strides `strides` for items
/// of `itemsize` bytes. `Err(axis)` names the first axis whose byte stride overflows `isize`.
pub fn byte_strides(strides: &[isize], itemsize: usize, out: &mut [isize]) -> Result<(), usize> {
    let item = isize::try_from(itemsize).map_err(|_| 0usize)?;
    for (d, (&s, slot)) in strides.iter().zip(out).enumerate() {
        *slot = s.checked_mul(item).ok_or(d)?;
    }
    Ok(())
}

/// `true` when the half-open ranges `[a.0, a.1)` and `[b.0, b.1)` share an address.
pub fn ranges_overlap(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(element_count(&[]), Some(1));
        assert_eq!(element_count(&[2, 3]), Some(6));
        assert_eq!(element_count(&[2, 0, 3]), Some(0));
        assert_eq!(element_count(&[usize::MAX, 2]), None);
        // NumPy: the non-zero extents must multiply even beside a 0.
        assert_eq!(element_count(&[0, usize::MAX, 2]), None);
    }

    #[test]
    fn spans() {
        assert_eq!(span(&[2, 3], &[12, 4]), Some((0, 20)));
        assert_eq!(span(&[4], &[-8]), Some((-24, 0)));
        assert_eq!(span(&[3, 2], &[-16, 4]), Some((-32, 4)));
        assert_eq!(span(&[], &[]), Some((0, 0)));
        assert_eq!(span(&[5, 0], &[1, 1]), None);
        // A broadcast axis of any extent spans nothing.
        assert_eq!(span(&[usize::MAX], &[0]), Some((0, 0)));
    }

    #[test]
    fn contiguity_and_c_strides() {
        let mut s = [0isize; 3];
        c_strides(&[2, 3, 4], 4, &mut s).unwrap();
        assert_eq!(s, [48, 16, 4]);
        assert!(is_c_contiguous(&[2, 3, 4], &s, 4));
        assert!(!is_c_contiguous(&[2, 3, 4], &s, 1));
        c_strides(&[2, 0, 4], 1, &mut s).unwrap();
        assert_eq!(s, [4, 4, 1]);
        assert!(is_c_contiguous(&[1, 4], &[1234, 1], 1));
        assert!(is_c_contiguous(&[0, 4], &[7, 9], 1));
        assert!(!is_c_contiguous(&[4], &[-1], 1));
        assert!(c_strides(&[usize::MAX, 2], 1, &mut s).is_none());
        assert!(c_strides(&[2, 2], 1, &mut s[..1]).is_none());
        // Products beyond any stride: contiguous while only extent-1 axes follow.
        assert!(is_c_contiguous(&[1, 1 << 40, 1 << 40], &[0, 1 << 40, 1], 1));
        assert!(!is_c_contiguous(
            &[2, 1 << 62, 1 << 62],
            &[1, 1 << 62, 1],
            1
        ));
    }

    #[test]
    fn self_overlap() {
        assert!(!may_self_overlap(&[3, 4], &[16, 4], 4));
        assert!(!may_self_overlap(&[3, 4], &[4, 12], 4));
        assert!(!may_self_overlap(&[3, 4], &[-16, 4], 4));
        assert!(may_self_overlap(&[3, 4], &[0, 4], 4));
        assert!(may_self_overlap(&[3, 4], &[8, 4], 4));
        assert!(!may_self_overlap(&[1, 4], &[0, 4], 4));
        assert!(!may_self_overlap(&[0, 4], &[0, 0], 4));
        assert!(may_self_overlap(&[usize::MAX, 2], &[1, 1], 1));
    }

    #[test]
    fn stride_units() {
        let mut e = [0isize; 3];
        element_strides(&[3, 2], &[4, 12], 4, &mut e).unwrap();
        assert_eq!(e[..2], [1, 3]);
        assert_eq!(element_strides(&[3], &[6], 4, &mut e), Err(0));
        element_strides(&[1, 4], &[1234, 4], 4, &mut e).unwrap();
        assert_eq!(e[..2], [0, 1]);
        element_strides(&[0, 4], &[6, 5], 4, &mut e).unwrap();
        assert_eq!(e[..2], [0, 0]);
        assert!(element_aligned(&[3, 2], &[-4, 0], 4));
        assert!(!element_aligned(&[3], &[6], 4));
        assert!(element_aligned(&[1, 4], &[1234, 4], 4) && element_aligned(&[0, 4], &[6, 5], 4));
        let mut b = [0isize; 2];
        byte_strides(&[-2, 3], 8, &mut b).unwrap();
        assert_eq!(b, [-16, 24]);
        assert_eq!(byte_strides(&[1, isize::MAX], 2, &mut b), Err(1));
        assert!(ranges_overlap((0, 8), (4, 12)) && !ranges_overlap((0, 8), (8, 12)));
    }
}
