//! Element-wise loops over contiguous slices with 16-byte vector memory access.

use ferrocuda_device::{thread, Element, GridStride, Slice, SliceMut};

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
    let n = min(min(a.len(), b.len()), out.len());
    let tid = thread::index_1d();
    let threads = thread::grid_size_1d();
    let size = core::mem::size_of::<T>();
    let (pa, pb, po) = (
        a.as_ptr() as usize,
        b.as_ptr() as usize,
        out.as_mut_ptr() as usize,
    );
    let mis = pa % 16;
    if L > 1 && L * size == 16 && pb % 16 == mis && po % 16 == mis && mis % size == 0 {
        let head = min((16 - mis) % 16 / size, n);
        if tid < head {
            // SAFETY: tid < head <= n; one thread per element.
            unsafe { out.write_unchecked(tid, f(a.get_unchecked(tid), b.get_unchecked(tid))) };
        }
        let body = (n - head) / L;
        // SAFETY: `head` elements past each pointer is 16-byte aligned and in bounds; the
        // chunks cover elements head .. head + body * L < n.
        let (va, vb, vo) = unsafe {
            (
                a.as_ptr().add(head) as *const Chunk<T, L>,
                b.as_ptr().add(head) as *const Chunk<T, L>,
                out.as_mut_ptr().add(head) as *mut Chunk<T, L>,
            )
        };
        // Two chunks per iteration: four independent 16-byte loads in flight per thread.
        let mut j = tid;
        while j < body && body - j > threads {
            // SAFETY: j < j + threads < body: both chunks are in bounds and aligned; one
            // thread per chunk.
            unsafe {
                let (x0, y0) = (va.add(j).read(), vb.add(j).read());
                let (x1, y1) = (va.add(j + threads).read(), vb.add(j + threads).read());
                let (mut z0, mut z1) = (x0, x1);
                for k in 0..L {
                    z0.0[k] = f(x0.0[k], y0.0[k]);
                    z1.0[k] = f(x1.0[k], y1.0[k]);
                }
                vo.add(j).write(z0);
                vo.add(j + threads).write(z1);
            }
            j += 2 * threads;
        }
        if j < body {
            // SAFETY: j < body: in bounds and aligned; one thread per chunk.
            unsafe {
                let (x, y) = (va.add(j).read(), vb.add(j).read());
                let mut z = x;
                for k in 0..L {
                    z.0[k] = f(x.0[k], y.0[k]);
                }
                vo.add(j).write(z);
            }
        }
        let t = head + body * L + tid;
        if t < n {
            // SAFETY: t < n; the tail has fewer than L elements, one thread each.
            unsafe { out.write_unchecked(t, f(a.get_unchecked(t), b.get_unchecked(t))) };
        }
    } else {
        for i in GridStride::new(tid, threads, n) {
            // SAFETY: i < n; one thread per element.
            unsafe { out.write_unchecked(i, f(a.get_unchecked(i), b.get_unchecked(i))) };
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

#[inline(always)]
fn min(a: usize, b: usize) -> usize {
    if a < b {
        a
    } else {
        b
    }
}
