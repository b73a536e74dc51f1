//! Element-wise loops: over contiguous slices with 16-byte vector memory access
//! (`split_vectors`: a scalar head, aligned vectors, a scalar tail), and over strided N-D
//! views of one shape ([`map_strided`]).

use ferrocuda_device::{thread, Element, GridStride, Slice, SliceMut, View, ViewMut};

/// Runs `$body` with `$k` bound to `0, 1, …, $l - 1` (`$l` a constant of at most 32), written
/// out in full: LLVM does not always unroll a 16-iteration loop, and an array indexed by a loop
/// variable lands in local memory.
macro_rules! for_lanes {
    ($l:expr, |$k:ident| $body:expr) => {
        for_lanes!(@ $l, $k, $body; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
                   24 25 26 27 28 29 30 31)
    };
    (@ $l:expr, $k:ident, $body:expr; $($i:literal)*) => {{
        const { assert!($l <= 32) };
        $(if $i < $l {
            let $k: usize = $i;
            $body;
        })*
    }};
}

/// `L` elements of `T` in one 16-byte aligned chunk (`L * size_of::<T>() == 16`).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct Chunk<T: Copy, const L: usize>(pub [T; L]);

/// `out[i] = f(a[i], b[i])` for `i < min(len)`, vectorized when the three pointers share
/// their alignment modulo 16 bytes (scalar head and tail), scalar otherwise. `L` elements of
/// `T` make 16 bytes.
///
/// # Safety
///
/// Kernel-launch context; `out` may alias `a` or `b` only element-for-element.
#[inline(always)]
pub unsafe fn binary<T: Element, const L: usize>(
    a: Slice<T>,
    b: Slice<T>,
    out: SliceMut<T>,
    f: impl Fn(T, T) -> T,
) {
    // SAFETY: forwarded contract.
    unsafe { map::<T, L, 2, true>([a, b], out, |[x, y]| f(x, y)) }
}

/// `out[i] = f(x[i])` for `i < min(len)`, vectorized as [`binary`], but one vector per loop
/// iteration: `f` is the costly part here (the activations' `erff`, `tanhf`, `expf`), and two
/// vectors in flight per thread keep twice as many of its evaluations live (half as many
/// registers again for the f32 GELU: more resident warps hide the loads instead).
///
/// # Safety
///
/// Kernel-launch context; `out` may alias `x` only element-for-element.
#[inline(always)]
pub unsafe fn unary<T: Element, const L: usize>(x: Slice<T>, out: SliceMut<T>, f: impl Fn(T) -> T) {
    // SAFETY: forwarded contract.
    unsafe { map::<T, L, 1, false>([x], out, |[v]| f(v)) }
}

/// `out[i] = f([ins[0][i], …])` for `i < min(len)`: 16-byte vectors of `L` elements when every
/// pointer has the same alignment modulo 16 (scalar head and tail), scalar otherwise; two
/// vectors per thread and loop iteration when `PAIRS`, one otherwise.
///
/// # Safety
///
/// Kernel-launch context; `out` may alias an input only element-for-element.
#[inline(always)]
unsafe fn map<T: Element, const L: usize, const N: usize, const PAIRS: bool>(
    ins: [Slice<T>; N],
    out: SliceMut<T>,
    f: impl Fn([T; N]) -> T,
) {
    let n = ins.iter().fold(out.len(), |m, s| min(m, s.len()));
    let (ins, out) = (ins.map(|s| s.split_at(n).0), out.split_at(n).0);
    let tid = thread::index_1d();
    let threads = thread::grid_size_1d();
    let parts = ins.map(|s| s.split_vectors::<L>());
    let (ho, vo, to) = out.split_vectors::<L>();
    if parts.iter().any(|p| p.0.len() != ho.len()) {
        // Differently misaligned: scalar accesses only.
        for i in GridStride::new(tid, threads, n) {
            // SAFETY: i < n <= every input's length; one thread per element.
            unsafe { out.write_unchecked(i, f(core::array::from_fn(|k| ins[k].get_unchecked(i)))) };
        }
        return;
    }
    // Equal heads of equal-length arrays: equal vector counts and tails.
    for i in GridStride::new(tid, threads, ho.len()) {
        // SAFETY: i < head length (fewer than L); one thread per element.
        unsafe { ho.write_unchecked(i, f(core::array::from_fn(|k| parts[k].0.get_unchecked(i)))) };
    }
    let apply = |x: [[T; L]; N]| {
        let mut z = x[0];
        for_lanes!(L, |j| z[j] = f(core::array::from_fn(|k| x[k][j])));
        z
    };
    let body = vo.len();
    // Two vectors per iteration: 2·N independent 16-byte loads in flight per thread.
    let mut j = tid;
    while PAIRS && j < body && body - j > threads {
        // SAFETY: j < j + threads < body, the vector count of every array; one thread per
        // vector.
        unsafe {
            let x0: [[T; L]; N] = core::array::from_fn(|k| parts[k].1.get_unchecked(j));
            let x1: [[T; L]; N] = core::array::from_fn(|k| parts[k].1.get_unchecked(j + threads));
            vo.write_unchecked(j, apply(x0));
            vo.write_unchecked(j + threads, apply(x1));
        }
        j += 2 * threads;
    }
    // One vector per iteration: all of them without `PAIRS`, at most one after the pairs.
    while j < body {
        // SAFETY: j < body; one thread per vector.
        unsafe {
            let x: [[T; L]; N] = core::array::from_fn(|k| parts[k].1.get_unchecked(j));
            vo.write_unchecked(j, apply(x));
        }
        j += threads;
    }
    for i in GridStride::new(tid, threads, to.len()) {
        // SAFETY: i < tail length (fewer than L); one thread per element.
        unsafe { to.write_unchecked(i, f(core::array::from_fn(|k| parts[k].2.get_unchecked(i)))) };
    }
}

/// `out[idx] = f([ins[0][idx], …])` for every multi-index `idx` of `out`'s shape, whatever the
/// strides — negative ones, and zero ones (broadcast axes) in the inputs. The views are
/// reordered together into the output's memory order (`memory_order_with`), so that arrays laid
/// out like the output (transposed alike, say) are read and written in coalesced runs; each
/// thread then walks its grid-stride share of the positions as multi-indices (`walk`: divisions
/// only when it starts) and addresses each array through its own strides. Plain loads: an
/// input may be the output itself.
///
/// # Safety
///
/// Kernel-launch context; every input has `out`'s shape (`same_shape`); `out` reaches no
/// element twice and may alias an input only element for element (the host checks both).
#[inline(always)]
pub unsafe fn map_strided<T: Element, const N: usize, const K: usize>(
    ins: [View<T, N>; K],
    out: ViewMut<T, N>,
    f: impl Fn([T; K]) -> T,
) {
    let (o, ix) = out.indexer().memory_order_with(ins.map(|v| *v.indexer()));
    for idx in o.walk(thread::index_1d(), thread::grid_size_1d()) {
        // SAFETY: `idx` is in bounds of the shape every view has (reordered alike, so each
        // offset is that of one element of its array); one thread per position, and `out`
        // reaches each element from one position only.
        unsafe {
            let x: [T; K] = core::array::from_fn(|k| ins[k].read_at(ix[k].offset(idx)));
            out.write_at(o.offset(idx), f(x));
        }
    }
}

/// `out[i] = f(i)` for `i < out.len()`, vectorized over the 16-byte aligned middle of `out`.
///
/// # Safety
///
/// Kernel-launch context.
#[inline(always)]
pub unsafe fn generate<T: Element, const L: usize>(out: SliceMut<T>, f: impl Fn(usize) -> T) {
    let tid = thread::index_1d();
    let threads = thread::grid_size_1d();
    let (head, body, tail) = out.split_vectors::<L>();
    for i in GridStride::new(tid, threads, head.len()) {
        // SAFETY: i < head length; one thread per element.
        unsafe { head.write_unchecked(i, f(i)) };
    }
    let start = head.len();
    for j in GridStride::new(tid, threads, body.len()) {
        let base = start + j * L;
        let mut z = [f(base); L];
        for (k, v) in z.iter_mut().enumerate().skip(1) {
            *v = f(base + k);
        }
        // SAFETY: j < body length; one thread per vector.
        unsafe { body.write_unchecked(j, z) };
    }
    let start = start + body.len() * L;
    for i in GridStride::new(tid, threads, tail.len()) {
        // SAFETY: i < tail length; one thread per element.
        unsafe { tail.write_unchecked(i, f(start + i)) };
    }
}

/// Calls `f(k, x[i])` for the elements thread `tid` of `threads` owns in a grid-stride walk of
/// `x`: 16-byte vectors of `L` elements when `x` allows (scalar head and tail, as [`binary`];
/// `k` is the element's lane in its vector, 0 for scalars), two vectors loaded per step. The
/// order of the calls depends only on `n`, `tid` and `threads`.
///
/// # Safety
///
/// `x` is a valid slice (kernel-launch context).
#[inline(always)]
pub unsafe fn visit<T: Element, const L: usize>(
    x: Slice<T>,
    tid: usize,
    threads: usize,
    mut f: impl FnMut(usize, T),
) {
    let (head, body, tail) = x.split_vectors::<L>();
    for i in GridStride::new(tid, threads, head.len()) {
        // SAFETY: i < head length.
        f(0, unsafe { head.get_unchecked(i) });
    }
    let n = body.len();
    // The vectors read as `Chunk`s rather than through `Vectors::get_unchecked` (integer-vector
    // loads, moved to elements): the same 16-byte loads, and ptxas needs fewer registers for
    // the reductions' accumulators (min/max f64: 32 instead of 40 on sm_90).
    let v = body.elements().as_ptr() as *const Chunk<T, L>;
    let mut j = tid;
    while j < n && n - j > threads {
        // SAFETY: vectors j < j + threads < n of `body`: in bounds, 16-byte aligned.
        let (c0, c1) = unsafe { (v.add(j).read().0, v.add(j + threads).read().0) };
        for_lanes!(L, |k| f(k, c0[k]));
        for_lanes!(L, |k| f(k, c1[k]));
        j += 2 * threads;
    }
    if j < n {
        // SAFETY: vector j < n of `body`.
        let c = unsafe { v.add(j).read().0 };
        for_lanes!(L, |k| f(k, c[k]));
    }
    for i in GridStride::new(tid, threads, tail.len()) {
        // SAFETY: i < tail length.
        f(0, unsafe { tail.get_unchecked(i) });
    }
}

/// This thread's part of a reduction of `x`: `op` over `map(x[i])` for the elements [`visit`]
/// gives it, with `L` independent accumulators (one per vector lane) combined pairwise at the
/// end, starting from `identity`. Deterministic for a given grid.
///
/// # Safety
///
/// `x` is a valid slice (kernel-launch context).
#[inline(always)]
pub unsafe fn fold<T: Element, A: Copy, const L: usize>(
    x: Slice<T>,
    tid: usize,
    threads: usize,
    identity: A,
    map: impl Fn(T) -> A,
    op: impl Fn(A, A) -> A,
) -> A {
    let mut acc = [identity; L];
    // SAFETY: forwarded contract.
    unsafe { visit::<T, L>(x, tid, threads, |k, v| acc[k] = op(acc[k], map(v))) };
    let mut width = L;
    while width > 1 {
        width /= 2;
        for k in 0..width {
            acc[k] = op(acc[k], acc[k + width]);
        }
    }
    acc[0]
}

#[inline(always)]
fn min(a: usize, b: usize) -> usize {
    if a < b {
        a
    } else {
        b
    }
}
