//! Static and dynamic shared memory: isolation between blocks, distinct arrays, 2-D tiles,
//! the dynamic array's length for several `shared_mem_bytes`, 16-byte vector accesses.

use crate::{down, ensure, launch, rng, scalar, up, TestResult};
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("shared_isolation", shared_isolation),
    ("shared_reverse_two_arrays", shared_reverse),
    ("shared_transpose_2d", shared_transpose),
    ("dynamic_shared_sizes", dynamic_shared_sizes),
    ("shared_vectors", shared_vectors),
];

const POISON: u32 = 0xDEAD_BEEF;

/// As the kernel's pattern.
fn pattern(block: u32, round: u32, r: u32) -> u32 {
    block.wrapping_mul(0x9E37_79B9) ^ round.wrapping_mul(0x85EB_CA6B) ^ r
}

/// Many more blocks than fit at once (several resident per SM, each writing its own pattern
/// in every round): any value from another block, or a stale round, is counted.
fn shared_isolation() -> TestResult {
    let rounds = 64u32;
    for (blocks, n) in [(1024u32, 256u32), (256, 1024), (2048, 96)] {
        let total = (blocks * n) as usize;
        let out = up(&vec![POISON; 2 * total])?;
        launch(
            "shared_isolation",
            &[out.arg(), scalar(rounds)],
            [blocks, 1, 1],
            [n, 1, 1],
            0,
        )?;
        let got = down(&out)?;
        for g in 0..total {
            let (b, r) = ((g / n as usize) as u32, (g % n as usize) as u32);
            let want = pattern(b, rounds - 1, (r + 1) % n);
            ensure(got[2 * g] == want && got[2 * g + 1] == 0, || {
                format!(
                    "{blocks}x{n}: thread {g} read {:#x} (want {want:#x}), {} mismatches",
                    got[2 * g],
                    got[2 * g + 1]
                )
            })?;
        }
    }
    Ok(())
}

fn shared_reverse() -> TestResult {
    for n in [1u32, 32, 100, 1024] {
        let blocks = 7u32;
        let total = (blocks * n) as usize;
        let y = up(&vec![POISON; total])?;
        launch("shared_reverse", &[y.arg()], [blocks, 1, 1], [n, 1, 1], 0)?;
        let got = down(&y)?;
        for (g, v) in got.iter().enumerate() {
            let want = (3 * g as u32).wrapping_add(2);
            ensure(*v == want, || {
                format!("block size {n}: y[{g}] = {v}, want {want}")
            })?;
        }
    }
    Ok(())
}

fn shared_transpose() -> TestResult {
    let blocks = 9usize;
    let out = up(&vec![POISON; blocks * 32 * 32])?;
    launch(
        "shared_transpose",
        &[out.arg()],
        [blocks as u32, 1, 1],
        [32, 8, 1],
        0,
    )?;
    let got = down(&out)?;
    for b in 0..blocks {
        for r in 0..32 {
            for c in 0..32 {
                let (base, i) = (b * 32, (b * 32 + r) * 32 + c);
                let want = ((base + c) * 32 + r) as u32;
                ensure(got[i] == want, || {
                    format!("block {b}: out[{r}][{c}] = {}, want {want}", got[i])
                })?;
            }
        }
    }
    Ok(())
}

fn dynamic_shared_sizes() -> TestResult {
    let (blocks, n) = (5usize, 128usize);
    for bytes in [0u32, 4, 100, 4096, 48 * 1024] {
        let out = up(&vec![POISON; 3 * blocks * n])?;
        launch(
            "dynamic_shared_len",
            &[out.arg()],
            [blocks as u32, 1, 1],
            [n as u32, 1, 1],
            bytes,
        )?;
        let got = down(&out)?;
        let len = bytes as usize / 4;
        for g in 0..blocks * n {
            let b = g / n;
            let xor = (0..len).fold(0u32, |x, i| x ^ (b * 7919 + i) as u32);
            let want = [len as u32, bytes / 8, xor];
            ensure(got[3 * g..3 * g + 3] == want, || {
                format!(
                    "{bytes} bytes: thread {g} got {:?}, want {want:?}",
                    &got[3 * g..3 * g + 3]
                )
            })?;
        }
    }
    Ok(())
}

/// Each thread's 4 words through three shared arrays in 16-byte vectors (`u32` 1-D, `f64`
/// tile, dynamic `u32`), read back by its neighbour in the block: `out[4g + k]` is 3 times
/// (wrapping) the neighbour's word `k`; words past the end of `x` are 0, and nothing is
/// written past `out`'s end.
fn shared_vectors() -> TestResult {
    let mut r = rng(94);
    for n in [1u32, 2, 32, 100, 256] {
        let blocks = 5u32;
        let total = (blocks * n) as usize;
        // A few words short of 4 per thread: the last threads read zeros.
        let x: Vec<u32> = (0..4 * total - 3).map(|_| r.random::<u32>()).collect();
        let dx = up(&x)?;
        let out = up(&vec![POISON; 4 * total + 1])?;
        let o = crate::memory::view(&out, 0, &[4 * total], None, false)?;
        launch(
            "shared_vectors",
            &[dx.arg(), ferrocuda::Arg::Array(&o)],
            [blocks, 1, 1],
            [n, 1, 1],
            16 * n,
        )?;
        let got = down(&out)?;
        for g in 0..total {
            let (b, t) = (g / n as usize, g % n as usize);
            let neighbour = b * n as usize + (t + 1) % n as usize;
            for k in 0..4 {
                let want = x
                    .get(4 * neighbour + k)
                    .copied()
                    .unwrap_or(0)
                    .wrapping_mul(3);
                ensure(got[4 * g + k] == want, || {
                    format!(
                        "block size {n}: out[{}] = {:#x}, want {want:#x}",
                        4 * g + k,
                        got[4 * g + k]
                    )
                })?;
            }
        }
        ensure(got[4 * total] == POISON, || {
            format!("block size {n}: shared_vectors wrote past out")
        })?;
    }
    Ok(())
}
