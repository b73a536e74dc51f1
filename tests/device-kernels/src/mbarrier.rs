//! mbarriers: a producer/consumer ping-pong between the warps of a block over many phases,
//! arrival tokens with threads leaving the protocol (`arrive_drop`), `cp.async` copies
//! tracked by an mbarrier (with and without `.noinc`), and — built for sm_90 — transaction
//! counts (`expect_tx`, `complete_tx`) with `try_wait`.

#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{
    device_assert,
    mbarrier::{MBarrier, Phase},
    shared_array, shared_mbarrier, thread,
};
use ferrocuda_device::{kernel, Slice, SliceMut};

/// The value the producer of round `round` writes for `lane` in block `block` (the host
/// mirrors it).
pub fn round_value(block: u32, round: u32, lane: u32) -> u32 {
    let h = block
        .wrapping_mul(0x9E37_79B9)
        .wrapping_add(round.wrapping_mul(0x85EB_CA6B))
        ^ lane.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 15)
}

/// Threads per block of [`mbarrier_ping_pong`]: 4 warps.
pub const PING_PONG_THREADS: usize = 128;
/// Records per thread of [`mbarrier_ping_pong`].
pub const PING_PONG_RECORD: usize = 3;

/// Warps of a 128-thread block take turns: in round `k` warp `k % 4` produces — it waits until
/// the consumers of round `k - 1` are done (`empty`), writes `round_value(block, k, lane)` into
/// a 32-word shared buffer and arrives on `full` — and the other three warps consume: they
/// wait for `full`'s phase `k`, read all 32 words and check them, and arrive on `empty`. Each
/// thread tracks its own [`Phase`] of both barriers. Thread `g` writes
/// `out[3g..3g + 3] = [mismatches, wrapping sum of the words it read, rounds it produced]`.
#[kernel]
pub unsafe fn mbarrier_ping_pong(out: SliceMut<u32>, rounds: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        device_assert!(thread::block_dim().x as usize == PING_PONG_THREADS);
        let buf = shared_array!(u32, 32);
        // SAFETY: each expansion is initialised once per block (not in a loop).
        let full = unsafe { shared_mbarrier!().init(32) };
        // SAFETY: as above.
        let empty = unsafe { shared_mbarrier!().init(96) };
        let t = thread::thread_idx().x;
        let (warp, lane, b) = (t / 32, t % 32, thread::block_idx().x);
        let (mut pf, mut pe) = (Phase::first(), Phase::first());
        let (mut bad, mut sum, mut produced) = (0u32, 0u32, 0u32);
        for k in 0..rounds {
            if warp == k % 4 {
                if k > 0 {
                    // The consumers of round k - 1 have read the buffer.
                    pe = empty.wait(pe);
                }
                // SAFETY: word `lane` is this lane's; the consumers read it only after
                // `full`'s phase k, which this write happens before (release).
                unsafe { buf.write(lane as usize, round_value(b, k, lane)) };
                full.arrive();
                pf = pf.skip();
                produced += 1;
            } else {
                if k > 0 {
                    pe = pe.skip();
                }
                pf = full.wait(pf);
                for j in 0..32 {
                    let w = (lane + j) % 32;
                    let v = buf.get(w as usize);
                    bad += (v != round_value(b, k, w)) as u32;
                    sum = sum.wrapping_add(v);
                }
                empty.arrive();
            }
        }
        let g = thread::index_1d();
        // SAFETY: one thread per record.
        unsafe {
            out.write(PING_PONG_RECORD * g, bad);
            out.write(PING_PONG_RECORD * g + 1, sum);
            out.write(PING_PONG_RECORD * g + 2, produced);
        }
    }
}

/// Records per thread of [`mbarrier_tokens`].
pub const TOKENS_RECORD: usize = 3;

/// One mbarrier for the whole block (any shape, up to 1024 threads), two phases per round:
/// every member writes `round_value(block, k, rank)` into its slot, arrives (keeping the
/// [`ArrivalToken`](ferrocuda_device::mbarrier::ArrivalToken)) and waits for the token's
/// phase, reads the slot of member `(rank + 1) % members` and checks it, then
/// `arrive_and_wait`s so nobody writes again before every member has read. In round
/// `drop_round` the threads of rank `>= keep` leave with `arrive_drop` (their arrival of that
/// phase; the count drops for the later ones) and the remaining rounds run with `keep`
/// members. At the end (after a block barrier) thread 0 invalidates the barrier. Thread rank
/// `r` of block `b` writes `out[3(b·n + r)..] = [mismatches, the last value read, rounds
/// completed]`.
#[kernel]
pub unsafe fn mbarrier_tokens(out: SliceMut<u32>, rounds: u32, drop_round: u32, keep: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let n = thread::block_threads();
        device_assert!(n <= 1024 && keep >= 1 && keep <= n);
        let slots = shared_array!(u32, 1024);
        // SAFETY: initialised once per block.
        let bar = unsafe { shared_mbarrier!().init(n) };
        let (r, b) = (thread::rank_in_block(), thread::block_idx().x);
        let mut phase = Phase::first();
        let (mut bad, mut last, mut done) = (0u32, 0u32, 0u32);
        for k in 0..rounds {
            let members = if k >= drop_round { keep } else { n };
            if r >= members {
                // SAFETY: `keep >= 1` threads stay, so the expected count stays >= 1.
                let _ = unsafe { bar.arrive_drop() };
                break;
            }
            // SAFETY: slot r is this thread's; the readers read it after the phase this
            // thread's arrive below completes, and the second phase keeps the next write
            // after every read.
            unsafe { slots.write(r as usize, round_value(b, k, r)) };
            let token = bar.arrive();
            bar.wait_token(token);
            // The token's phase is the one `phase` names: step over it.
            phase = phase.skip();
            let j = (r + 1) % members;
            last = slots.get(j as usize);
            bad += (last != round_value(b, k, j)) as u32;
            phase = bar.arrive_and_wait(phase);
            done += 1;
        }
        // Every thread is done with the barrier (the leavers too): invalidate it.
        thread::sync_threads();
        if r == 0 {
            // SAFETY: after a block barrier that follows every use; no asynchronous arrival
            // is pending; the handle is not used again.
            unsafe { bar.inval() };
        }
        let g = (b * n + r) as usize;
        // SAFETY: one thread per record.
        unsafe {
            out.write(TOKENS_RECORD * g, bad);
            out.write(TOKENS_RECORD * g + 1, last);
            out.write(TOKENS_RECORD * g + 2, done);
        }
    }
}

/// The body of `mbarrier_cp_async*`: 1-D blocks of up to 256 threads; in round `k` thread `g`
/// (of `G` in the grid) copies 16-byte chunk `k·G + g` of `x` (`u32`s `4(k·G + g)..`, zeros
/// past the end) into its slot of buffer `k % 2` with `cp.async`, hands the copy to the
/// barrier — `cp_async_arrive_noinc` (`noinc`: the barrier expects `2n` arrivals) or
/// `cp_async_arrive` (`n`) — arrives itself and waits for the phase. Then, with no
/// `wait_group` and no block barrier, it reads its neighbour's `(t + 1) % n` slot and writes
/// it to the neighbour's chunk of `out` (`rounds·G·4` elements): `out[i] = x[i]`, 0 past
/// `x.len()`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn copy_then_arrive(x: Slice<u32>, out: SliceMut<u32>, rounds: u32, noinc: bool) {
    let n = thread::block_dim().x as usize;
    device_assert!(n <= 256 && thread::block_dim().y == 1 && thread::block_dim().z == 1);
    let buf = shared_array!(u32, 2 * 256 * 4, align = 16);
    let count = (if noinc { 2 * n } else { n }) as u32;
    // SAFETY: initialised once per block.
    let bar: MBarrier = unsafe { shared_mbarrier!().init(count) };
    let t = thread::thread_idx().x as usize;
    let grid = thread::grid_dim().x as usize * n;
    let g = thread::index_1d();
    let u = (t + 1) % n;
    let mut phase = Phase::first();
    for k in 0..rounds as usize {
        let half = (k % 2) * 256 * 4;
        // SAFETY: this thread's slot of buffer k % 2; its neighbour last read it in round
        // k - 2, before its arrive of round k - 1, whose phase this thread waited for.
        unsafe { buf.copy_async::<16>(half + 4 * t, x, 4 * (k * grid + g)) };
        if noinc {
            bar.cp_async_arrive_noinc();
        } else {
            // SAFETY: pending count at most 2n <= 512.
            unsafe { bar.cp_async_arrive() };
        }
        bar.arrive();
        phase = bar.wait(phase);
        let chunk = k * grid + g - t + u;
        for m in 0..4 {
            // SAFETY: the neighbour's chunk is written by this thread only.
            unsafe { out.write(4 * chunk + m, buf.get(half + 4 * u + m)) };
        }
    }
}

/// `cp.async.mbarrier.arrive.noinc`: see [`copy_then_arrive`].
#[kernel]
pub unsafe fn mbarrier_cp_async_noinc(x: Slice<u32>, out: SliceMut<u32>, rounds: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as `copy_then_arrive` requires (this kernel's documented launch).
    unsafe {
        copy_then_arrive(x, out, rounds, true)
    }
}

/// `cp.async.mbarrier.arrive` (the pending count raised first): see [`copy_then_arrive`].
#[kernel]
pub unsafe fn mbarrier_cp_async(x: Slice<u32>, out: SliceMut<u32>, rounds: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as `copy_then_arrive` requires (this kernel's documented launch).
    unsafe {
        copy_then_arrive(x, out, rounds, false)
    }
}

/// Records per thread of [`mbarrier_expect_tx`].
#[cfg(ferrocuda_arch = "sm_90")]
pub const EXPECT_TX_RECORD: usize = 4;

/// Transaction counts (sm_90). Blocks of 64 to 1024 threads (1-D). In round `k` thread 0
/// waits until every thread has read round `k - 1` (`empty`), writes
/// `round_value(block, k, m)` for `m < 4` into a shared buffer, then arrives on `bar` (count 1)
/// expecting `bytes` bytes of transactions — `arrive_expect_tx` in even rounds, `expect_tx`
/// then `arrive` in odd ones — and records whether the phase is still incomplete (it must be:
/// no transaction has completed), then signals thread 32 (`go`). Thread 32 completes the
/// transactions in two `complete_tx` halves and records whether the phase was still
/// incomplete between them. Every thread waits for `bar`'s phase with `try_wait`, reads the
/// four words, checks them and arrives on `empty`. Thread `g` writes `out[4g..4g + 4] =
/// [mismatches, rounds thread 0 saw incomplete, rounds thread 32 saw incomplete, wrapping sum
/// of the words read]`.
///
/// Built for sm_90 (transaction counts and `try_wait`), into the crate's sm_90 part.
#[kernel(arch = "sm_90")]
pub unsafe fn mbarrier_expect_tx(out: SliceMut<u32>, rounds: u32, bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        use ferrocuda_device::mbarrier;
        let n = thread::block_dim().x;
        device_assert!(n >= 64 && thread::block_dim().y == 1 && thread::block_dim().z == 1);
        device_assert!((2..=mbarrier::MAX_COUNT).contains(&bytes));
        let data = shared_array!(u32, 4);
        // SAFETY: each expansion is initialised once per block.
        let bar = unsafe { shared_mbarrier!().init(1) };
        // SAFETY: as `bar`.
        let go = unsafe { shared_mbarrier!().init(1) };
        // SAFETY: as `bar`.
        let empty = unsafe { shared_mbarrier!().init(n) };
        // Orders the initialisations for remote (cluster) arrivals: none here, harmless.
        mbarrier::fence_mbarrier_init();
        let (t, b) = (thread::thread_idx().x, thread::block_idx().x);
        let (mut pb, mut pg, mut pe) = (Phase::first(), Phase::first(), Phase::first());
        let (mut bad, mut early, mut mid, mut sum) = (0u32, 0u32, 0u32, 0u32);
        for k in 0..rounds {
            if t == 0 {
                if k > 0 {
                    pe = empty.wait(pe);
                }
                for m in 0..4 {
                    // SAFETY: written by thread 0 only, after every read of the previous round
                    // (`empty`), before the arrive that publishes it.
                    unsafe { data.write(m as usize, round_value(b, k, m)) };
                }
                mbarrier::fence_proxy_async_shared();
                // SAFETY: `bytes` <= MAX_COUNT, one expectation per phase.
                let token = unsafe {
                    if k % 2 == 0 {
                        bar.arrive_expect_tx(bytes)
                    } else {
                        bar.expect_tx(bytes);
                        bar.arrive()
                    }
                };
                early += !bar.test_wait_token(token) as u32;
                go.arrive();
            } else if t == 32 {
                pg = go.wait(pg);
                // SAFETY: completes what thread 0 expected in this phase, in two parts.
                unsafe { bar.complete_tx(bytes / 2) };
                // A probe of this round's parity, leaving `pb` as it is.
                let probe = if k % 2 == 0 {
                    Phase::first()
                } else {
                    Phase::first().skip()
                };
                mid += bar.test_wait(probe).is_err() as u32;
                // SAFETY: as above.
                unsafe { bar.complete_tx(bytes - bytes / 2) };
            }
            pb = loop {
                match bar.try_wait(pb) {
                    Ok(next) => break next,
                    Err(same) => pb = same,
                }
            };
            for m in 0..4 {
                let v = data.get(m as usize);
                bad += (v != round_value(b, k, m)) as u32;
                sum = sum.wrapping_add(v);
            }
            empty.arrive();
        }
        let g = thread::index_1d();
        // SAFETY: one thread per record.
        unsafe {
            out.write(EXPECT_TX_RECORD * g, bad);
            out.write(EXPECT_TX_RECORD * g + 1, early);
            out.write(EXPECT_TX_RECORD * g + 2, mid);
            out.write(EXPECT_TX_RECORD * g + 3, sum);
        }
    }
}
