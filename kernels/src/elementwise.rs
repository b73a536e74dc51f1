//! Element-wise loops over contiguous slices with 16-byte vector memory access
//! (`split_vectors`: a scalar head, aligned vectors, a scalar tail).

use ferrocuda_device::{thread, Element, GridStride, Slice, SliceMut};

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
    let n = min(min(a.len(), b.len()), out.len());
    let (a, b, out) = (a.split_at(n).0, b.split_at(n).0, out.split_at(n).0);
    let tid = thread::index_1d();
    let threads = thread::grid_size_1d();
    let (ha, va, ta) = a.split_vectors::<L>();
    let (hb, vb, tb) = b.split_vectors::<L>();
    let (ho, vo, to) = out.split_vectors::<L>();
    if ha.len() != hb.len() || ha.len() != ho.len() {
        // Differently misaligned: scalar accesses only.
        for i in GridStride::new(tid, threads, n) {
            // SAFETY: i < n; one thread per element.
            unsafe { out.write_unchecked(i, f(a.get_unchecked(i), b.get_unchecked(i))) };
        }
        return;
    }
    // Equal heads of equal-length arrays: equal vector counts and tails.
    for i in GridStride::new(tid, threads, ho.len()) {
        // SAFETY: i < head length (fewer than L); one thread per element.
        unsafe { ho.write_unchecked(i, f(ha.get_unchecked(i), hb.get_unchecked(i))) };
    }
    let body = vo.len();
    // Two vectors per iteration: four independent 16-byte loads in flight per thread.
    let mut j = tid;
    while j < body && body - j > threads {
        // SAFETY: j < j + threads < body, the vector count of all three; one thread per
        // vector.
        unsafe {
            let (x0, y0) = (va.get_unchecked(j), vb.get_unchecked(j));
            let (x1, y1) = (va.get_unchecked(j + threads), vb.get_unchecked(j + threads));
            let (mut z0, mut z1) = (x0, x1);
            for k in 0..L {
                z0[k] = f(x0[k], y0[k]);
                z1[k] = f(x1[k], y1[k]);
            }
            vo.write_unchecked(j, z0);
            vo.write_unchecked(j + threads, z1);
        }
        j += 2 * threads;
    }
    if j < body {
        // SAFETY: j < body; one thread per vector.
        unsafe {
            let (x, y) = (va.get_unchecked(j), vb.get_unchecked(j));
            let mut z = x;
            for k in 0..L {
                z[k] = f(x[k], y[k]);
            }
            vo.write_unchecked(j, z);
        }
    }
    for i in GridStride::new(tid, threads, to.len()) {
        // SAFETY: i < tail length (fewer than L); one thread per element.
        unsafe { to.write_unchecked(i, f(ta.get_unchecked(i), tb.get_unchecked(i))) };
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

#[inline(always)]
fn min(a: usize, b: usize) -> usize {
    if a < b {
        a
    } else {
        b
    }
}
