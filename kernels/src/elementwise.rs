//! Element-wise loops over contiguous slices with 16-byte vector memory access.

use ferrocuda_device::{thread, Element, GridStride, Slice, SliceMut};

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
/// their alignment modulo 16 bytes (scalar head and tail), scalar otherwise.
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
    unsafe { map::<T, L, 2>([a, b], out, |[x, y]| f(x, y)) }
}

/// `out[i] = f(x[i])` for `i < min(len)`, vectorized as [`binary`].
///
/// # Safety
///
/// Kernel-launch context; `out` may alias `x` only element-for-element.
#[inline(always)]
pub unsafe fn unary<T: Element, const L: usize>(x: Slice<T>, out: SliceMut<T>, f: impl Fn(T) -> T) {
    // SAFETY: forwarded contract.
    unsafe { map::<T, L, 1>([x], out, |[v]| f(v)) }
}

/// `out[i] = f([ins[0][i], …])` for `i < min(len)`: 16-byte vectors of `L` elements when every
/// pointer has the same alignment modulo 16 (scalar head and tail), scalar otherwise.
///
/// # Safety
///
/// Kernel-launch context; `out` may alias an input only element-for-element.
#[inline(always)]
unsafe fn map<T: Element, const L: usize, const N: usize>(
    ins: [Slice<T>; N],
    out: SliceMut<T>,
    f: impl Fn([T; N]) -> T,
) {
    let n = ins.iter().fold(out.len(), |m, s| min(m, s.len()));
    let tid = thread::index_1d();
    let threads = thread::grid_size_1d();
    let size = core::mem::size_of::<T>();
    let po = out.as_mut_ptr() as usize;
    let mis = po % 16;
    let at = |i: usize| -> [T; N] {
        // SAFETY: callers pass i < n <= every input's length.
        core::array::from_fn(|k| unsafe { ins[k].get_unchecked(i) })
    };
    let aligned = ins.iter().all(|s| s.as_ptr() as usize % 16 == mis);
    if L > 1 && L * size == 16 && aligned && mis % size == 0 {
        let head = min((16 - mis) % 16 / size, n);
        if tid < head {
            // SAFETY: tid < head <= n; one thread per element.
            unsafe { out.write_unchecked(tid, f(at(tid))) };
        }
        let body = (n - head) / L;
        // SAFETY: `head` elements past each pointer is 16-byte aligned and in bounds; the
        // chunks cover elements head .. head + body * L < n.
        let (vi, vo): ([*const Chunk<T, L>; N], *mut Chunk<T, L>) = unsafe {
            (
                core::array::from_fn(|k| ins[k].as_ptr().add(head) as *const Chunk<T, L>),
                out.as_mut_ptr().add(head) as *mut Chunk<T, L>,
            )
        };
        let apply = |x: [Chunk<T, L>; N]| {
            let mut z = x[0];
            for_lanes!(L, |j| z.0[j] = f(core::array::from_fn(|k| x[k].0[j])));
            z
        };
        // Two chunks per iteration: 2·N independent 16-byte loads in flight per thread.
        let mut j = tid;
        while j < body && body - j > threads {
            // SAFETY: j < j + threads < body: both chunks are in bounds and aligned; one
            // thread per chunk.
            unsafe {
                let x0: [Chunk<T, L>; N] = core::array::from_fn(|k| vi[k].add(j).read());
                let x1: [Chunk<T, L>; N] = core::array::from_fn(|k| vi[k].add(j + threads).read());
                vo.add(j).write(apply(x0));
                vo.add(j + threads).write(apply(x1));
            }
            j += 2 * threads;
        }
        if j < body {
            // SAFETY: j < body: in bounds and aligned; one thread per chunk.
            unsafe {
                let x: [Chunk<T, L>; N] = core::array::from_fn(|k| vi[k].add(j).read());
                vo.add(j).write(apply(x));
            }
        }
        let t = head + body * L + tid;
        if t < n {
            // SAFETY: t < n; the tail has fewer than L elements, one thread each.
            unsafe { out.write_unchecked(t, f(at(t))) };
        }
    } else {
        for i in GridStride::new(tid, threads, n) {
            // SAFETY: i < n; one thread per element.
            unsafe { out.write_unchecked(i, f(at(i))) };
        }
    }
}

/// `out[i] = f(i)` for `i < out.len()`, vectorized when `out` is 16-byte aligned.
///
/// # Safety
///
/// Kernel-launch context.
#[inline(always)]
pub unsafe fn generate<T: Element, const L: usize>(out: SliceMut<T>, f: impl Fn(usize) -> T) {
    let n = out.len();
    let tid = thread::index_1d();
    let threads = thread::grid_size_1d();
    let size = core::mem::size_of::<T>();
    let po = out.as_mut_ptr() as usize;
    if L > 1 && L * size == 16 && po % size == 0 {
        let head = min((16 - po % 16) % 16 / size, n);
        if tid < head {
            // SAFETY: tid < head <= n; one thread per element.
            unsafe { out.write_unchecked(tid, f(tid)) };
        }
        let body = (n - head) / L;
        // SAFETY: aligned and in bounds as in `binary`.
        let vo = unsafe { out.as_mut_ptr().add(head) as *mut Chunk<T, L> };
        for j in GridStride::new(tid, threads, body) {
            let base = head + j * L;
            let mut z = Chunk([f(base); L]);
            for k in 1..L {
                z.0[k] = f(base + k);
            }
            // SAFETY: j < body; one thread per chunk.
            unsafe { vo.add(j).write(z) };
        }
        let t = head + body * L + tid;
        if t < n {
            // SAFETY: t < n.
            unsafe { out.write_unchecked(t, f(t)) };
        }
    } else {
        for i in GridStride::new(tid, threads, n) {
            // SAFETY: i < n.
            unsafe { out.write_unchecked(i, f(i)) };
        }
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
    let n = x.len();
    let size = core::mem::size_of::<T>();
    let p = x.as_ptr() as usize;
    if L > 1 && L * size == 16 && p % size == 0 {
        let head = min((16 - p % 16) % 16 / size, n);
        if tid < head {
            // SAFETY: tid < head <= n.
            f(0, unsafe { x.get_unchecked(tid) });
        }
        let body = (n - head) / L;
        // SAFETY: 16-byte aligned after `head` elements; chunks below `body` are in bounds.
        let v = unsafe { x.as_ptr().add(head) } as *const Chunk<T, L>;
        let mut j = tid;
        while j < body && body - j > threads {
            // SAFETY: j < j + threads < body.
            let (c0, c1) = unsafe { (v.add(j).read(), v.add(j + threads).read()) };
            for_lanes!(L, |k| f(k, c0.0[k]));
            for_lanes!(L, |k| f(k, c1.0[k]));
            j += 2 * threads;
        }
        if j < body {
            // SAFETY: j < body.
            let c = unsafe { v.add(j).read() };
            for_lanes!(L, |k| f(k, c.0[k]));
        }
        let t = head + body * L + tid;
        if t < n {
            // SAFETY: t < n.
            f(0, unsafe { x.get_unchecked(t) });
        }
    } else {
        for i in GridStride::new(tid, threads, n) {
            // SAFETY: i < n.
            f(0, unsafe { x.get_unchecked(i) });
        }
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
