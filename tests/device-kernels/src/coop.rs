//! Cooperative kernels and the grid-wide barrier (`grid::GridBarrier`).

use ferrocuda_device::grid::GridBarrier;
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{grid, thread};
use ferrocuda_device::{kernel, SliceMut};

/// `rounds` rounds over a buffer of one element per thread of the grid, each separated by
/// grid barriers: thread `t` writes `buf[t] = r·K + t`, the grid synchronizes, `t` reads the
/// element of a thread of another block (`p = (t + (r + 1)·7919) mod n`) and counts a
/// mismatch with `r·K + p`, and the grid synchronizes again before the next round's writes.
/// `errors[t]` = thread `t`'s mismatches (0 when every barrier held), `buf[t]` = the last
/// round's value. `K` = 1 000 003; `n` = the grid's threads; both arrays hold at least `n`.
#[kernel(cooperative)]
pub unsafe fn grid_sync_rounds(
    buf: SliceMut<u32>,
    errors: SliceMut<u32>,
    rounds: u32,
    bar: GridBarrier,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        const K: u32 = 1_000_003;
        let (t, n) = (grid::thread_rank(), grid::num_threads());
        let mut bad = 0u32;
        for r in 0..rounds {
            // SAFETY: one thread per element; the barriers order every other access to it.
            unsafe { buf.write(t, r.wrapping_mul(K).wrapping_add(t as u32)) };
            bar.sync();
            let p = (t + (r as usize + 1) * 7919) % n;
            if buf.get(p) != Some(r.wrapping_mul(K).wrapping_add(p as u32)) {
                bad += 1;
            }
            grid::sync(&bar);
        }
        // SAFETY: one thread per element.
        unsafe { errors.write(t, bad) };
    }
}

/// A two-phase computation in one launch: `out[b]` = the sum over every block `c` of `c + 1`
/// as published by block `c` in `slots` before the barrier — `nb·(nb + 1) / 2` in every
/// block when the barrier holds — and `slots[b] = b + 1`. Block `b`'s threads each publish
/// and read a share of the slots (`slots.len()` ≥ blocks, `out.len()` ≥ blocks).
#[kernel(cooperative, max_threads = 256)]
pub unsafe fn grid_sync_sum(slots: SliceMut<u64>, out: SliceMut<u64>, bar: GridBarrier) {
    #[cfg(target_arch = "nvptx64")]
    {
        let (b, nb) = (grid::block_rank(), grid::num_blocks());
        if thread::rank_in_block() == 0 {
            // SAFETY: one thread per element.
            unsafe { slots.write(b, b as u64 + 1) };
        }
        bar.sync();
        if thread::rank_in_block() == 0 {
            let mut s = 0u64;
            for c in 0..nb {
                s += slots.get(c).unwrap_or(0);
            }
            // SAFETY: one thread per element.
            unsafe { out.write(b, s) };
        }
    }
}
