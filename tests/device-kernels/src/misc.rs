//! Counting barriers, clocks and sleep.

#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::thread;
use ferrocuda_device::{kernel, Slice, SliceMut};

/// Thread `r` of block `b` (`g = b * n + r`) with `p = x[g] != 0` writes `out[3g ..]` =
/// `sync_threads_count(p)`, `sync_threads_and(p)`, `sync_threads_or(p)`.
#[kernel]
pub unsafe fn barrier_counts(x: Slice<u32>, out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let n = thread::block_threads() as usize;
        let g = thread::block_idx().x as usize * n + thread::rank_in_block() as usize;
        let p = x.get(g).unwrap() != 0;
        let count = thread::sync_threads_count(p);
        let all = thread::sync_threads_and(p) as u32;
        let any = thread::sync_threads_or(p) as u32;
        // SAFETY: one thread per record.
        unsafe {
            out.write(3 * g, count);
            out.write(3 * g + 1, all);
            out.write(3 * g + 2, any);
        }
    }
}

/// Thread `i` writes `out[4i ..]` = `clock64` before and after `nanosleep(ns)`, and
/// `global_timer` before and after.
#[kernel]
pub unsafe fn clocks(out: SliceMut<u64>, ns: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let i = thread::index_1d();
        if 4 * i + 3 < out.len() {
            let (c0, t0) = (thread::clock64(), thread::global_timer());
            thread::nanosleep(ns);
            let (c1, t1) = (thread::clock64(), thread::global_timer());
            // SAFETY: one thread per record.
            unsafe {
                for (k, w) in [c0, c1, t0, t1].iter().enumerate() {
                    out.write(4 * i + k, *w);
                }
            }
        }
    }
}
