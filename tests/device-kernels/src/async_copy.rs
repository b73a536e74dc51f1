//! Asynchronous copies (`cp.async`): 4-, 8- and 16-byte copies with zero-filled tails, two
//! commit groups waited for one at a time, and a multi-stage pipeline (2, 3 and 4 stages)
//! over many tiles.

#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{cp_async, device_assert, shared::dynamic_shared, shared_array, thread};
use ferrocuda_device::{kernel, Slice, SliceMut};

/// Threads per block of the `cp_async_chunks_*` kernels.
pub const CHUNK_THREADS: usize = 64;
/// The byte every `cp_async_chunks_*` kernel poisons its shared buffer with.
pub const POISON_BYTE: u8 = 0xA5;

/// The body of `cp_async_chunks_*`: blocks of [`CHUNK_THREADS`] threads; thread `g` of the
/// grid (of `total`) copies `B`-byte chunk `g` of `x` (bytes `B·g ..`) into its slot A and
/// chunk `g + total` into its slot B, each zero-filled past `x.len()`, as two commit groups.
/// Before the copies every slot is poisoned with [`POISON_BYTE`] by another thread (the
/// barrier orders those stores first). After `wait_group::<1>` (the first group complete) and
/// a barrier, each thread writes the A slot of its neighbour `(t + 1) % 64` to the neighbour's
/// chunk of `out`; after `wait_group::<0>` and a barrier, its B slot likewise. `out[c·B ..
/// (c + 1)·B]` must be chunk `c` of `x`, zeros past `x.len()`; `out` has `2·total·B` bytes.
/// `ca`: the `.ca` form for 16 bytes too. `dynamic`: the buffer is the launch's dynamic shared
/// memory (`2·64·B` bytes).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn chunks<const B: usize>(x: Slice<u8>, out: SliceMut<u8>, ca: bool, dynamic: bool) {
    const T: usize = CHUNK_THREADS;
    device_assert!(thread::block_dim().x as usize == T);
    let stat = shared_array!(u8, 2 * CHUNK_THREADS * 16, align = 16);
    let dynm = dynamic_shared::<u8>();
    let t = thread::thread_idx().x as usize;
    let total = thread::grid_dim().x as usize * T;
    let g = thread::block_idx().x as usize * T + t;
    let u = (t + 1) % T; // the neighbour
    let slots = [t * B, (T + t) * B];
    // Poison the neighbour's slots: another thread's stores, ordered before the copies by the
    // barrier.
    for base in [u * B, (T + u) * B] {
        for j in 0..B {
            // SAFETY: slot bytes of thread u, written by this thread only before the barrier.
            unsafe {
                if dynamic {
                    dynm.write(base + j, POISON_BYTE)
                } else {
                    stat.write(base + j, POISON_BYTE)
                }
            }
        }
    }
    thread::sync_threads();
    for (k, chunk) in [g, g + total].into_iter().enumerate() {
        // SAFETY: this thread's slots; nobody reads them before the waits and barriers below.
        unsafe {
            match (dynamic, ca) {
                (true, true) => dynm.copy_async_ca::<B>(slots[k], x, chunk * B),
                (true, false) => dynm.copy_async::<B>(slots[k], x, chunk * B),
                (false, true) => stat.copy_async_ca::<B>(slots[k], x, chunk * B),
                (false, false) => stat.copy_async::<B>(slots[k], x, chunk * B),
            }
        }
        cp_async::commit_group();
    }
    let ug = g - t + u;
    for k in 0..2 {
        if k == 0 {
            cp_async::wait_group::<1>();
        } else {
            cp_async::wait_group::<0>();
        }
        thread::sync_threads();
        let (base, chunk) = if k == 0 {
            (u * B, ug)
        } else {
            ((T + u) * B, ug + total)
        };
        for j in 0..B {
            let v = if dynamic {
                dynm.get(base + j)
            } else {
                stat.get(base + j)
            };
            // SAFETY: chunk `chunk` of `out` is written by this thread only.
            unsafe { out.write(chunk * B + j, v) };
        }
    }
}

/// 4-byte copies (`cp.async.ca … 4`): see [`chunks`].
#[kernel]
pub unsafe fn cp_async_chunks_4(x: Slice<u8>, out: SliceMut<u8>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as `chunks` requires (this kernel's documented launch).
    unsafe {
        chunks::<4>(x, out, true, false)
    }
}

/// 8-byte copies (`cp.async.ca … 8`): see [`chunks`].
#[kernel]
pub unsafe fn cp_async_chunks_8(x: Slice<u8>, out: SliceMut<u8>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as `chunks` requires (this kernel's documented launch).
    unsafe {
        chunks::<8>(x, out, true, false)
    }
}

/// 16-byte copies cached in L2 only (`cp.async.cg … 16`): see [`chunks`].
#[kernel]
pub unsafe fn cp_async_chunks_16(x: Slice<u8>, out: SliceMut<u8>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as `chunks` requires (this kernel's documented launch).
    unsafe {
        chunks::<16>(x, out, false, false)
    }
}

/// 16-byte copies cached in L1 too (`cp.async.ca … 16`) into dynamic shared memory (launch
/// with `2·64·16` bytes of it): see [`chunks`].
#[kernel]
pub unsafe fn cp_async_chunks_16_ca_dyn(x: Slice<u8>, out: SliceMut<u8>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as `chunks` requires (this kernel's documented launch).
    unsafe {
        chunks::<16>(x, out, true, true)
    }
}

/// Threads per block of the `cp_async_pipeline_*` kernels.
pub const PIPE_THREADS: usize = 128;
/// `u32` elements per tile of the pipeline kernels: 4 (16 bytes) per thread.
pub const PIPE_TILE: usize = 4 * PIPE_THREADS;
/// The value the pipeline kernels poison their stages with before the first copy.
pub const PIPE_POISON: u32 = 0xDEAD_BEEF;

/// The body of `cp_async_pipeline_*`: tile `k` is `x[k·TILE .. (k + 1)·TILE]` (zeros past
/// `x.len()`); block `b` handles tiles `b, b + grid, …` of `tiles`, streamed through a
/// `STAGES`-stage [`cp_async::Pipeline`]: each of its [`PIPE_THREADS`] threads copies 16 bytes
/// (`4t .. 4t + 4`) of each tile into the stage, and after `consumer_wait` reads 4 elements
/// that **other** threads copied — `stage[t + m·128]`, `m = 0..4` — and writes
/// `out[k·128 + t] = Σ_m (m + 1)·stage[t + m·128]` (wrapping). `acquire_first`: the loop is
/// "acquire, copy, commit, wait, compute, release" (a second barrier per tile, inserted by
/// the pipeline) instead of CUTLASS's "wait, acquire, copy, commit, compute, release".
/// The stages are a 2-D shared array (`[4][TILE]`, 16-byte aligned for the copies), poisoned
/// first.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn pipeline<const STAGES: usize>(
    x: Slice<u32>,
    out: SliceMut<u32>,
    tiles: u32,
    acquire_first: u32,
) {
    const { assert!(STAGES <= 4) };
    device_assert!(thread::block_dim().x as usize == PIPE_THREADS);
    let buf = shared_array!(u32, [4, PIPE_TILE], align = 16);
    let t = thread::thread_idx().x as usize;
    let (b, grid) = (
        thread::block_idx().x as usize,
        thread::grid_dim().x as usize,
    );
    let tiles = tiles as usize;
    let mine = if b < tiles {
        (tiles - b).div_ceil(grid)
    } else {
        0
    };
    for s in 0..4 {
        for m in 0..4 {
            // SAFETY: element (s, t + 128m) is written by this thread only, before the
            // barrier below; the copy into it (by thread (t + 128m) / 4) starts after it.
            unsafe { buf.write(s, t + PIPE_THREADS * m, PIPE_POISON) };
        }
    }
    thread::sync_threads();
    let load = |s: usize, i: usize| {
        let k = b + i * grid;
        // SAFETY: stage s, columns 4t..4t+4, are this thread's destination between the
        // pipeline's producer_acquire and the consumer_wait that returns the stage.
        unsafe { buf.copy_async::<16>(s, 4 * t, x, k * PIPE_TILE + 4 * t) };
    };
    let mut pipe = cp_async::Pipeline::<STAGES>::new();
    let ahead = (STAGES - 1).min(mine);
    for i in 0..ahead {
        let s = pipe.producer_acquire();
        load(s, i);
        pipe.producer_commit();
    }
    for i in 0..mine {
        let next = i + STAGES - 1;
        let s;
        if acquire_first != 0 {
            if next < mine {
                let p = pipe.producer_acquire();
                load(p, next);
                pipe.producer_commit();
            }
            s = pipe.consumer_wait();
        } else {
            s = pipe.consumer_wait();
            if next < mine {
                let p = pipe.producer_acquire();
                load(p, next);
                pipe.producer_commit();
            }
        }
        let mut acc = 0u32;
        for m in 0..4 {
            acc = acc.wrapping_add(buf.get(s, t + PIPE_THREADS * m).wrapping_mul(m as u32 + 1));
        }
        let k = b + i * grid;
        // SAFETY: one thread per output element.
        unsafe { out.write(k * PIPE_THREADS + t, acc) };
        pipe.consumer_release();
    }
    pipe.drain();
}

/// A 2-stage pipeline: see [`pipeline`].
#[kernel]
pub unsafe fn cp_async_pipeline_2(
    x: Slice<u32>,
    out: SliceMut<u32>,
    tiles: u32,
    acquire_first: u32,
) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as `pipeline` requires (this kernel's documented launch).
    unsafe {
        pipeline::<2>(x, out, tiles, acquire_first)
    }
}

/// A 3-stage pipeline: see [`pipeline`].
#[kernel]
pub unsafe fn cp_async_pipeline_3(
    x: Slice<u32>,
    out: SliceMut<u32>,
    tiles: u32,
    acquire_first: u32,
) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as `pipeline` requires (this kernel's documented launch).
    unsafe {
        pipeline::<3>(x, out, tiles, acquire_first)
    }
}

/// A 4-stage pipeline: see [`pipeline`].
#[kernel]
pub unsafe fn cp_async_pipeline_4(
    x: Slice<u32>,
    out: SliceMut<u32>,
    tiles: u32,
    acquire_first: u32,
) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as `pipeline` requires (this kernel's documented launch).
    unsafe {
        pipeline::<4>(x, out, tiles, acquire_first)
    }
}
