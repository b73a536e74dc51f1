//! Static and dynamic shared memory: isolation between blocks, two arrays at two call
//! sites, a 2-D tile, the dynamic array's length, 16-byte vector accesses.

use ferrocuda_device::{kernel, Slice, SliceMut};
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{shared::dynamic_shared, shared_array, thread};

/// A block's pattern value for rank `r` in round `k`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn pattern(block: u32, round: u32, r: u32) -> u32 {
    block.wrapping_mul(0x9E37_79B9) ^ round.wrapping_mul(0x85EB_CA6B) ^ r
}

/// Isolation: in each of `rounds` rounds every thread of a block (1-D, ≤ 1024 threads) writes
/// its block's pattern into its slot of a 1024-word shared array, the block synchronizes, and
/// every thread reads its neighbour's slot `(r + 1) % n` and checks it; a value written by
/// another block (or a stale round) counts as a mismatch. Thread `g` writes
/// `out[2g] = ` the neighbour's value in the last round, `out[2g + 1] = ` mismatches.
#[kernel]
pub unsafe fn shared_isolation(out: SliceMut<u32>, rounds: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let tile = shared_array!(u32, 1024);
        let (r, n) = (thread::thread_idx().x, thread::block_dim().x);
        let b = thread::block_idx().x;
        let (mut bad, mut last) = (0u32, 0u32);
        for k in 0..rounds {
            // SAFETY: slot r is this thread's; the barriers order the rounds.
            unsafe { tile.write(r as usize, pattern(b, k, r)) };
            thread::sync_threads();
            let j = (r + 1) % n;
            last = tile.get(j as usize);
            bad += (last != pattern(b, k, j)) as u32;
            thread::sync_threads();
        }
        let g = (b * n + r) as usize;
        // SAFETY: one thread per record.
        unsafe {
            out.write(2 * g, last);
            out.write(2 * g + 1, bad);
        }
    }
}

/// Reverse within a block through two shared arrays declared at two places (so two distinct
/// arrays): `a[r] = x`, then `b[r] = a[n - 1 - r] + 1`, then `y = b[n - 1 - r] * 2 + a[r]`.
/// If the arrays aliased, the second write would clobber `a`. Expects `y[g] = (x[g] + 1) * 2
/// + x[g]` for `x[g] = g` (the kernel generates `x`). 1-D blocks of ≤ 1024 threads.
#[kernel]
pub unsafe fn shared_reverse(y: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let a = shared_array!(u32, 1024);
        let b = shared_array!(u32, 1024);
        let (r, n) = (
            thread::thread_idx().x as usize,
            thread::block_dim().x as usize,
        );
        let g = thread::index_1d();
        let x = g as u32;
        // SAFETY: each thread writes its own slot.
        unsafe { a.write(r, x) };
        thread::sync_threads();
        // SAFETY: each thread writes its own slot; the barrier above ordered every write of
        // `a` before this read.
        unsafe { b.write(r, a.get(n - 1 - r).wrapping_add(1)) };
        thread::sync_threads();
        let v = b.get(n - 1 - r).wrapping_mul(2).wrapping_add(a.get(r));
        // SAFETY: one thread per element.
        unsafe { y.write(g, v) };
    }
}

/// Transposes each block's 32×32 tile of a row-major `rows`×32 matrix generated as
/// `m[i][j] = i * 32 + j` through a padded `[32][33]` shared tile; blocks of 32×8 threads,
/// each thread moving 4 elements. `out` is the per-block transposed tile (row-major).
#[kernel]
pub unsafe fn shared_transpose(out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let tile = shared_array!(u32, [32, 33]);
        let (tx, ty) = (
            thread::thread_idx().x as usize,
            thread::thread_idx().y as usize,
        );
        let base = thread::block_idx().x as usize * 32;
        for k in 0..4 {
            let row = ty + 8 * k;
            // SAFETY: each (row, tx) is written by one thread.
            unsafe { tile.write(row, tx, ((base + row) * 32 + tx) as u32) };
        }
        thread::sync_threads();
        for k in 0..4 {
            let row = ty + 8 * k;
            // SAFETY: one thread per output element.
            unsafe { out.write((base + row) * 32 + tx, tile.get(tx, row)) };
        }
    }
}

/// Dynamic shared memory: thread `g` writes `out[3g] = ` the `u32` length of the launch's
/// dynamic shared memory, `out[3g + 1] = ` its `u64` length (`cast`), and `out[3g + 2] = `
/// the xor of every `u32` element after the block filled element `i` with
/// `block * 7919 + i` (threads stride over the array).
#[kernel]
pub unsafe fn dynamic_shared_len(out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let smem = dynamic_shared::<u32>();
        let (r, n) = (
            thread::thread_idx().x as usize,
            thread::block_dim().x as usize,
        );
        let b = thread::block_idx().x as usize;
        let mut i = r;
        while i < smem.len() {
            // SAFETY: element i is written by this thread only; a barrier follows.
            unsafe { smem.write(i, (b * 7919 + i) as u32) };
            i += n;
        }
        thread::sync_threads();
        let mut x = 0u32;
        for k in 0..smem.len() {
            x ^= smem.get(k);
        }
        let g = b * n + r;
        // SAFETY: one thread per record.
        unsafe {
            out.write(3 * g, smem.len() as u32);
            out.write(3 * g + 1, smem.cast::<u64>().len() as u32);
            out.write(3 * g + 2, x);
        }
    }
}

/// 16-byte vectors through shared memory, in three arrays: 1-D blocks of `n` ≤ 256 threads;
/// thread `t` of block `b` owns the 4 `u32` of `x` at `4 (b n + t)` (0 past its end).
///
/// 1. `u32` (`L = 4`): thread `t` writes its 4 to a 1-D array with `write_vector(4t)`; after
///    a barrier it reads `get_vector(4 ((t + 1) % n))`, its neighbour's.
/// 2. `f64` (`L = 2`) in a `[256][4]` tile: thread `t` writes its 4 values as `f64` in two
///    vectors, the first to row `t / 2`, columns `2 (t % 2) .. + 2` (`write_vector(r, c)`), the
///    second to row `t / 2 + 128` with the unchecked form; after a barrier it reads the
///    neighbour's with `get_vector` and `get_vector_unchecked`.
/// 3. Dynamic shared memory (`4 n` `u32` at least) the same as 1., unchecked forms.
///
/// `out[4 g + k]` (`g = b n + t`) = neighbour's value from 1. + from 2. (as `u32`) + from 3.
/// (each wrapping): `3 x[4 g'+ k]` for the neighbour `g'`.
#[kernel]
pub unsafe fn shared_vectors(x: Slice<u32>, out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let flat = shared_array!(u32, 1024, align = 16);
        let tile = shared_array!(f64, [256, 4], align = 16);
        let dynamic = dynamic_shared::<u32>();
        let (t, n) = (
            thread::thread_idx().x as usize,
            thread::block_dim().x as usize,
        );
        let g = thread::block_idx().x as usize * n + t;
        let mine: [u32; 4] = core::array::from_fn(|k| x.get(4 * g + k).unwrap_or(0));
        let (r, c) = (t / 2, 2 * (t % 2));
        // SAFETY: each thread writes its own 16 bytes of each array (in bounds and aligned
        // for n <= 256 — rows t / 2 + 128 < 256 of the tile — and a dynamic array of 4 n
        // words: the unchecked forms' contract).
        unsafe {
            flat.write_vector(4 * t, mine);
            tile.write_vector(r, c, [mine[0] as f64, mine[1] as f64]);
            tile.write_vector_unchecked(r + 128, c, [mine[2] as f64, mine[3] as f64]);
            dynamic.write_vector_unchecked(4 * t, mine);
        }
        thread::sync_threads();
        let j = (t + 1) % n;
        let (rj, cj) = (j / 2, 2 * (j % 2));
        let a: [u32; 4] = flat.get_vector(4 * j);
        let lo: [f64; 2] = tile.get_vector(rj, cj);
        // SAFETY: the neighbour's vectors, written before the barrier (in bounds, aligned).
        let (hi, d): ([f64; 2], [u32; 4]) = unsafe {
            (
                tile.get_vector_unchecked(rj + 128, cj),
                dynamic.get_vector_unchecked(4 * j),
            )
        };
        let b = [lo[0], lo[1], hi[0], hi[1]];
        for k in 0..4 {
            if 4 * g + k < out.len() {
                let v = a[k].wrapping_add(b[k] as u32).wrapping_add(d[k]);
                // SAFETY: one thread per element.
                unsafe { out.write(4 * g + k, v) };
            }
        }
    }
}
