//! Property tests of [`Indexer`] against `ndarray`, the reference for strided N-D views.
//!
//! Each case builds a C-ordered `ArrayD<i64>` holding `0..n` (so every memory slot has a
//! distinct value), applies a random chain of view operations — axis permutations, step
//! slices with positive and negative steps, sub-ranges, reversed axes, inserted axes, zero-stride
//! broadcast axes, axis removal — and then checks that an `Indexer` built from the view's
//! `shape()`, `strides()` and `as_ptr()` addresses exactly the elements `ndarray` yields, in
//! the same (logical C) order.
//!
//! Run: `cargo test -p ferrocuda-abi --features std --test indexer_props`.

use ferrocuda_abi::Indexer;
use ndarray::{
    ArrayD, ArrayViewD, Axis, Dimension, Ix0, Ix1, Ix2, Ix3, Ix4, Ix5, Ix6, IxDyn, Slice,
};
use proptest::prelude::*;
use proptest::sample::Index;

/// Highest rank a view may reach after the operations (`ndarray`'s static dimensions go up
/// to 6, and the dispatch below instantiates `Indexer<0..=6>`).
const MAX_RANK: usize = 6;

/// One view operation. Axis and position choices are drawn as [`Index`] and resolved against
/// the rank/extent the view has when the operation is applied.
#[derive(Clone, Debug)]
enum Op {
    /// `permuted_axes` with the permutation [`shuffle`] makes of the given choices.
    Permute(Vec<usize>),
    /// `reversed_axes` (the full transpose).
    Transpose,
    /// `slice_axis(axis, start..end;step)`; `neg_start`/`neg_end` write the bound counted
    /// from the end (`s![-2..]`-style) when possible. Note `ndarray` applies a negative step
    /// from the *end* of the range (unlike NumPy), which is fine: it is the reference here.
    Slice {
        axis: Index,
        a: Index,
        b: Index,
        step: isize,
        neg_start: bool,
        neg_end: bool,
    },
    /// `invert_axis` (`a[::-1]` along one axis).
    Invert(Index),
    /// `insert_axis` (a new axis of extent 1).
    Insert(Index),
    /// A new axis of `extent` with stride 0 at the position: `broadcast` to the shape with a
    /// leading axis prepended (NumPy-style), then that axis moved to `pos`.
    BroadcastNew { pos: Index, extent: usize },
    /// `broadcast` one of the view's extent-1 axes (if it has any) to `extent` (stride 0).
    BroadcastOne { which: Index, extent: usize },
    /// `index_axis_move(axis, i)`: drop an axis (rank − 1).
    Remove { axis: Index, at: Index },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let step = prop_oneof![(1isize..=3), (-3isize..=-1)];
    prop_oneof![
        1 => prop::collection::vec(any::<usize>(), MAX_RANK).prop_map(Op::Permute),
        1 => Just(Op::Transpose),
        3 => (any::<Index>(), any::<Index>(), any::<Index>(), step, any::<bool>(), any::<bool>())
            .prop_map(|(axis, a, b, step, neg_start, neg_end)| Op::Slice {
                axis, a, b, step, neg_start, neg_end
            }),
        1 => any::<Index>().prop_map(Op::Invert),
        1 => any::<Index>().prop_map(Op::Insert),
        1 => (any::<Index>(), 0usize..=3).prop_map(|(pos, extent)| Op::BroadcastNew { pos, extent }),
        1 => (any::<Index>(), 0usize..=3).prop_map(|(which, extent)| Op::BroadcastOne { which, extent }),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(axis, at)| Op::Remove { axis, at }),
    ]
}

/// The permutation of `0..n` that Fisher–Yates makes of the random `choices`
/// (`choices.len() >= n`).
fn shuffle(choices: &[usize], n: usize) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..n).collect();
    for k in (1..n).rev() {
        perm.swap(k, choices[k] % (k + 1));
    }
    perm
}

/// Apply `op` to `view`. Operations that do not fit the current view (e.g. a slice of a rank-0
/// view, an insertion past [`MAX_RANK`]) leave it unchanged. (`broadcast` borrows the view it
/// is called on, hence the `&'b` argument and the recursion in [`check_chain`].)
fn apply<'b>(view: &'b ArrayViewD<'_, i64>, op: &Op) -> ArrayViewD<'b, i64> {
    let v: ArrayViewD<'b, i64> = view.clone();
    let rank = v.ndim();
    match op {
        Op::Permute(choices) => v.permuted_axes(IxDyn(&shuffle(choices, rank))),
        Op::Transpose => v.reversed_axes(),
        Op::Slice {
            axis,
            a,
            b,
            step,
            neg_start,
            neg_end,
        } => {
            if rank == 0 {
                return v;
            }
            let ax = axis.index(rank);
            let len = v.len_of(Axis(ax));
            let (mut lo, mut hi) = (a.index(len + 1), b.index(len + 1));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            // Counted from the end: -k means len - k (k >= 1; `-0` would mean 0, not len).
            let start = if *neg_start && lo < len {
                lo as isize - len as isize
            } else {
                lo as isize
            };
            let end = if *neg_end && hi < len {
                hi as isize - len as isize
            } else {
                hi as isize
            };
            v.slice_axis_move(Axis(ax), Slice::new(start, Some(end), *step))
        }
        Op::Invert(axis) => {
            let mut v = v;
            if rank > 0 {
                v.invert_axis(Axis(axis.index(rank)));
            }
            v
        }
        Op::Insert(pos) => {
            if rank >= MAX_RANK {
                return v;
            }
            v.insert_axis(Axis(pos.index(rank + 1)))
        }
        Op::BroadcastNew { pos, extent } => {
            if rank >= MAX_RANK {
                return v;
            }
            let mut shape = vec![*extent];
            shape.extend_from_slice(view.shape());
            let b = view
                .broadcast(IxDyn(&shape))
                .expect("prepending an axis always broadcasts");
            // Move the new axis 0 to `p`: the old axes keep their order around it.
            let p = pos.index(rank + 1);
            let mut perm: Vec<usize> = (1..=rank).collect();
            perm.insert(p, 0);
            b.permuted_axes(IxDyn(&perm))
        }
        Op::BroadcastOne { which, extent } => {
            let ones: Vec<usize> = (0..rank).filter(|&d| view.shape()[d] == 1).collect();
            if ones.is_empty() {
                return v;
            }
            let mut shape = view.shape().to_vec();
            shape[ones[which.index(ones.len())]] = *extent;
            view.broadcast(IxDyn(&shape))
                .expect("an extent-1 axis broadcasts to any extent")
        }
        Op::Remove { axis, at } => {
            if rank == 0 {
                return v;
            }
            let ax = axis.index(rank);
            let len = v.len_of(Axis(ax));
            if len == 0 {
                return v;
            }
            v.index_axis_move(Axis(ax), at.index(len))
        }
    }
}

/// All checks of one view, for its static rank `N`.
///
/// `mem` is the whole allocation the view borrows from; `std_static` is
/// `is_standard_layout()` of the same view converted to ndarray's static dimension `IxN`
/// (whose rank-1 rule is a special case in ndarray's source).
fn check_view<const N: usize>(
    mem: &[i64],
    view: &ArrayViewD<'_, i64>,
    perm_choices: &[usize],
    std_static: bool,
) -> Result<(), TestCaseError> {
    let shape: [usize; N] = view.shape().try_into().unwrap();
    let strides: [isize; N] = view.strides().try_into().unwrap();
    let ix = Indexer::new(shape, strides);
    let base = view.as_ptr();

    prop_assert_eq!(ix.size(), view.len());
    prop_assert_eq!(ix.checked_size(), Some(view.len()));
    prop_assert_eq!(ix.is_empty(), view.is_empty());

    // C-contiguity. Both definitions agree on every view, including the edge cases:
    // * an empty view is contiguous for both (ndarray: "any axis of length 0 → true"; ours:
    //   `is_empty() → true`), whatever its strides (ndarray sets them to 0 in some paths);
    // * axes of extent 1 may carry any stride in both (ndarray skips `dim == 1` axes, so do
    //   we), e.g. the stride 0 `slice_axis` leaves on an axis it shrinks to extent 1;
    // * rank 0 (a scalar) is contiguous for both;
    // * ndarray's `Ix1` special case (`stride == 1 || len <= 1`) is the general rule
    //   specialised, hence checked against the static-rank conversion too.
    prop_assert_eq!(
        ix.is_c_contiguous(),
        view.is_standard_layout(),
        "shape {:?} strides {:?}",
        shape,
        strides
    );
    prop_assert_eq!(
        ix.is_c_contiguous(),
        std_static,
        "static rank, shape {:?} strides {:?}",
        shape,
        strides
    );

    // Where the view's first element sits in the allocation, in elements (the allocation may
    // be empty, then so is the view and nothing below reads memory).
    let mem_lo = mem.as_ptr() as usize;
    let elem = std::mem::size_of::<i64>();
    let base_pos = (base as usize).wrapping_sub(mem_lo) as isize / elem as isize;

    let mut lo_hi: Option<(isize, isize)> = None;
    let mut it = view.indexed_iter();
    let mut refs = view.iter();
    for i in 0..view.len() {
        let (nd_idx, nd_ref) = it.next().expect("indexed_iter yields len() items");
        let nd_val = refs.next().expect("iter yields len() items");
        prop_assert!(std::ptr::eq(nd_ref, nd_val), "iter and indexed_iter agree");

        let off = ix.offset_of(i);
        let idx = ix.unravel(i);
        prop_assert_eq!(&idx[..], nd_idx.slice(), "unravel({})", i);
        prop_assert_eq!(ix.offset(idx), off, "offset(unravel({})) == offset_of", i);
        prop_assert_eq!(ix.get_offset(idx), Some(off));
        let (off32, idx32) = ix.offset_of_u32(u32::try_from(i).unwrap());
        prop_assert_eq!(off32, off, "offset_of_u32({})", i);
        prop_assert!(
            idx32.iter().zip(&idx).all(|(&a, &b)| a as usize == b),
            "offset_of_u32({}) index {:?} vs {:?}",
            i,
            idx32,
            idx
        );

        // The element must lie inside the allocation before we dereference anything.
        let pos = base_pos + off;
        prop_assert!(
            pos >= 0 && (pos as usize) < mem.len(),
            "offset {} of element {} leaves the allocation",
            off,
            i
        );
        // SAFETY: `base` points into `mem` (it is the address of the view's first element,
        // and the view borrows `mem`), and `base + off` was just checked to be the element
        // `mem[pos]` of the same allocation, so the offset stays in bounds and the read is
        // of an initialised, properly aligned `i64` that is not mutated while borrowed.
        let got = unsafe { *base.offset(off) };
        prop_assert_eq!(got, *nd_val, "value of element {}", i);
        prop_assert_eq!(got, mem[pos as usize]);
        prop_assert!(
            std::ptr::eq(base.wrapping_offset(off), nd_ref),
            "address of element {}",
            i
        );

        lo_hi = Some(match lo_hi {
            None => (off, off),
            Some((lo, hi)) => (lo.min(off), hi.max(off)),
        });
    }
    prop_assert!(it.next().is_none());
    prop_assert_eq!(
        ix.extent(),
        lo_hi,
        "extent of shape {:?} strides {:?}",
        shape,
        strides
    );

    // `permuted` against ndarray's `permuted_axes` of the same view.
    let perm: [usize; N] = shuffle(perm_choices, N).try_into().unwrap();
    let pv = view.clone().permuted_axes(IxDyn(&perm));
    let p_shape: [usize; N] = pv.shape().try_into().unwrap();
    let p_strides: [isize; N] = pv.strides().try_into().unwrap();
    prop_assert_eq!(ix.permuted(perm), Some(Indexer::new(p_shape, p_strides)));
    prop_assert_eq!(pv.as_ptr(), base);
    if N >= 2 {
        let mut bad = perm;
        bad[0] = bad[1];
        prop_assert_eq!(ix.permuted(bad), None);
    }
    Ok(())
}

/// Dispatch on the view's rank to `check_view::<N>`, computing the static-rank
/// `is_standard_layout` with ndarray's `IxN`.
fn check_any_rank(
    mem: &[i64],
    view: &ArrayViewD<'_, i64>,
    perm: &[usize],
) -> Result<(), TestCaseError> {
    macro_rules! arm {
        ($n:literal, $ix:ty) => {{
            let std_static = view
                .clone()
                .into_dimensionality::<$ix>()
                .unwrap()
                .is_standard_layout();
            check_view::<$n>(mem, view, perm, std_static)
        }};
    }
    match view.ndim() {
        0 => arm!(0, Ix0),
        1 => arm!(1, Ix1),
        2 => arm!(2, Ix2),
        3 => arm!(3, Ix3),
        4 => arm!(4, Ix4),
        5 => arm!(5, Ix5),
        6 => arm!(6, Ix6),
        r => panic!("rank {r} exceeds MAX_RANK"),
    }
}

/// Check `view`, then apply `ops[0]` and recurse on the result (each derived view borrows
/// its parent, which lives in the caller's frame).
fn check_chain(
    mem: &[i64],
    view: &ArrayViewD<'_, i64>,
    ops: &[Op],
    perm: &[usize],
) -> Result<(), TestCaseError> {
    check_any_rank(mem, view, perm)?;
    match ops.split_first() {
        None => Ok(()),
        Some((op, rest)) => check_chain(mem, &apply(view, op), rest, perm),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn indexer_matches_ndarray_views(
        shape in prop::collection::vec(0usize..=7, 1..=4),
        ops in prop::collection::vec(op_strategy(), 0..=5),
        perm in prop::collection::vec(any::<usize>(), MAX_RANK),
    ) {
        let n: usize = shape.iter().product();
        let arr = ArrayD::from_shape_vec(IxDyn(&shape), (0..n as i64).collect()).unwrap();
        let mem = arr.as_slice().expect("a fresh array is C-contiguous");
        // The untouched array first (always C-contiguous), then after each operation.
        check_chain(mem, &arr.view(), &ops, &perm)?;
    }
}

/// Fixed cases that the random search should hit but that must never regress.
#[test]
fn edge_cases() {
    let arr = ArrayD::from_shape_vec(IxDyn(&[3, 4]), (0..12i64).collect()).unwrap();
    let mem = arr.as_slice().unwrap();
    // A fixed, non-trivial shuffle for the `permuted` check.
    let perm = [0, 1, 1, 2, 0, 4];
    let run = |v: ArrayViewD<'_, i64>| check_any_rank(mem, &v, &perm).unwrap();
    // Both axes reversed with steps: base points at the last row, negative strides.
    run(arr.slice(ndarray::s![..;-1, ..;-2]).into_dyn());
    // A column (extent-1 axis kept) and a row of a transpose.
    run(arr.slice(ndarray::s![.., 1..2]).into_dyn());
    run(arr.t().slice(ndarray::s![2..3, ..]).into_dyn());
    // Broadcast: stride 0 on the leading axis.
    run(arr.broadcast(IxDyn(&[2, 3, 4])).unwrap());
    // Empty along one axis, with a negative step.
    run(arr.slice(ndarray::s![1..1;-1, ..]).into_dyn());
    // Rank 0.
    run(arr
        .index_axis(Axis(0), 2)
        .index_axis_move(Axis(0), 3)
        .into_dyn());
}

proptest! {
    /// `memory_order` visits the same elements (same offsets, same index sums) and sorts the
    /// axes by non-increasing |stride| among axes of extent > 1.
    #[test]
    fn memory_order_is_a_permutation(
        shape in prop::array::uniform3(0usize..5),
        strides in prop::array::uniform3(-30isize..30),
    ) {
        let ix = ferrocuda_abi::Indexer::new(shape, strides);
        let m = ix.memory_order();
        let mut a: Vec<(isize, usize)> = (0..ix.size()).map(|i| (ix.offset_of(i), ix.unravel(i).iter().sum())).collect();
        let mut b: Vec<(isize, usize)> = (0..m.size()).map(|i| (m.offset_of(i), m.unravel(i).iter().sum())).collect();
        a.sort_unstable();
        b.sort_unstable();
        prop_assert_eq!(a, b);
        let keys: Vec<usize> = (0..3).filter(|&k| m.shape[k] > 1).map(|k| m.strides[k].unsigned_abs()).collect();
        prop_assert!(keys.windows(2).all(|w| w[0] >= w[1]), "{:?}", m);
    }
}

proptest! {
    /// A walk yields exactly `unravel` of the grid-stride positions of its thread, and
    /// `memory_order_with` keeps views of one shape in step: at every position of the
    /// reordered views, each addresses the element the originals address at one multi-index.
    #[test]
    fn walks_follow_grid_stride_positions(
        shape in prop::array::uniform4(0usize..6),
        strides in prop::array::uniform4(-30isize..30),
        other in prop::array::uniform4(-30isize..30),
        threads in 1usize..40,
        t in 0usize..40,
    ) {
        let ix = ferrocuda_abi::Indexer::new(shape, strides);
        let n = ix.size();
        let want: Vec<[usize; 4]> = (t..n).step_by(threads).map(|i| ix.unravel(i)).collect();
        let got: Vec<[usize; 4]> = ix.walk(t, threads).collect();
        prop_assert_eq!(got, want);
        let b = ferrocuda_abi::Indexer::new(shape, other);
        let (m, [mb]) = ix.memory_order_with([b]);
        prop_assert_eq!(m, ix.memory_order());
        let mut pairs: Vec<(isize, isize)> = m.walk(0, 1).map(|idx| (m.offset(idx), mb.offset(idx))).collect();
        let mut orig: Vec<(isize, isize)> = (0..n).map(|i| (ix.offset_of(i), b.offset_of(i))).collect();
        pairs.sort_unstable();
        orig.sort_unstable();
        prop_assert_eq!(pairs, orig);
    }
}
