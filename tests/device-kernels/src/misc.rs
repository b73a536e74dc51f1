//! Counting barriers, clocks and sleep.

#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{device_assert, shared_array, thread};
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

/// Threads per group of [`group_barriers`].
pub const GROUP_THREADS: u32 = 64;

/// Blocks of 256 threads as four groups of [`GROUP_THREADS`], each with its own barrier
/// (`sync_warps(1 + group, 64)`): for `rounds` rounds, every thread writes its shared slot
/// (`round · 256 + t`), passes its group's barrier, reads a neighbour's slot in its group
/// (`round` places on) and passes the barrier again (the next round overwrites the slot).
/// Thread `g` writes `out[g]` = the reads that differed from what the neighbour wrote.
#[kernel(block = 256)]
pub unsafe fn group_barriers(out: SliceMut<u32>, rounds: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        const N: usize = GROUP_THREADS as usize;
        let slots = shared_array!(u32, 256);
        let t = thread::rank_in_block() as usize;
        let (group, r) = (t / N, t % N);
        device_assert!(thread::block_threads() == 256);
        let mut bad = 0u32;
        for round in 0..rounds as usize {
            // SAFETY: this thread's slot; the group's last reads of it came before the
            // barrier that ended the previous round.
            unsafe { slots.write(t, (round * 256 + t) as u32) };
            // SAFETY: barrier 1 + group < 16 for 64 threads of the group, whole warps, every
            // one reaching it (the loop is the block's); no other group uses it.
            unsafe { thread::sync_warps(1 + group as u32, GROUP_THREADS) };
            let u = group * N + (r + 1 + round) % N;
            bad += (slots.get(u) != (round * 256 + u) as u32) as u32;
            // SAFETY: as above.
            unsafe { thread::sync_warps(1 + group as u32, GROUP_THREADS) };
        }
        let g = thread::block_idx().x as usize * 256 + t;
        if g < out.len() {
            // SAFETY: one thread per element.
            unsafe { out.write(g, bad) };
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

/// A family built for three architectures (the kernels' `arch` option): every thread writes
/// the architecture its code was compiled for, read from the build's target features —
/// 80 for the base kernel, 90 for the `sm_90` one, 900 for the `sm_90a` one (which also
/// executes `wgmma.fence`, an instruction only `sm_90a` has). A launch of the family picks
/// the highest architecture the device runs; each kernel can also be launched by name.
#[kernel(family = "arch_probe")]
pub unsafe fn arch_probe_base(out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    for i in thread::grid_stride(out.len()) {
        // SAFETY: one thread per element.
        unsafe { out.write_unchecked(i, if cfg!(target_feature = "sm_90") { 0 } else { 80 }) };
    }
}

/// The `sm_90` member of the `arch_probe` family (see [`arch_probe_base`]).
#[kernel(family = "arch_probe", arch = "sm_90")]
pub unsafe fn arch_probe_sm90(out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    for i in thread::grid_stride(out.len()) {
        let v = if cfg!(target_feature = "sm_90") && !cfg!(target_feature = "sm_90a") {
            90
        } else {
            0
        };
        // SAFETY: one thread per element.
        unsafe { out.write_unchecked(i, v) };
    }
}

/// The `sm_90a` member of the `arch_probe` family (see [`arch_probe_base`]).
#[kernel(family = "arch_probe", arch = "sm_90a")]
pub unsafe fn arch_probe_sm90a(out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        // An sm_90a-only instruction (ptxas refuses it for any other target); a fence of the
        // warpgroup's registers, with no effect here.
        // SAFETY: executed by every thread of the warp (no branch before it), as `.aligned`
        // requires.
        unsafe { core::arch::asm!("wgmma.fence.sync.aligned;") };
        for i in thread::grid_stride(out.len()) {
            let v = if cfg!(target_feature = "sm_90a") { 900 } else { 0 };
            // SAFETY: one thread per element.
            unsafe { out.write_unchecked(i, v) };
        }
    }
}
