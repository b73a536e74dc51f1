//! Asynchronous copies (`tests/device-kernels/src/async_copy.rs`): 4-, 8- and 16-byte
//! `cp.async` with every tail length (zero-fill checked against a poisoned shared buffer),
//! copies entirely past the end and from an empty array (null pointer, nothing read), two
//! commit groups waited for one at a time, and 2-, 3- and 4-stage pipelines in both loop
//! orders over many tiles and grids. Every output element is checked.

use crate::{down, ensure, err, launch, rng, scalar, up, TestResult};
use ferrocuda::abi::Element;
use ferrocuda::{Arg, ArrayDesc};
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("cp_async_chunks_4", || chunks("cp_async_chunks_4", 4, 0)),
    ("cp_async_chunks_8", || chunks("cp_async_chunks_8", 8, 0)),
    ("cp_async_chunks_16_cg", || {
        chunks("cp_async_chunks_16", 16, 0)
    }),
    ("cp_async_chunks_16_ca_dynamic_shared", || {
        chunks("cp_async_chunks_16_ca_dyn", 16, 2 * THREADS as u32 * 16)
    }),
    ("cp_async_pipeline_2", || {
        pipeline("cp_async_pipeline_2", 31)
    }),
    ("cp_async_pipeline_3", || {
        pipeline("cp_async_pipeline_3", 32)
    }),
    ("cp_async_pipeline_4", || {
        pipeline("cp_async_pipeline_4", 33)
    }),
];

/// As `async_copy::CHUNK_THREADS`.
const THREADS: usize = 64;
/// As `async_copy::PIPE_THREADS` and `PIPE_TILE`.
const PIPE_THREADS: usize = 128;
const PIPE_TILE: usize = 4 * PIPE_THREADS;

/// Thread `g` of `cp_async_chunks_*` copies `B`-byte chunks `g` and `g + total`: `out` must be
/// `x` followed by zeros, `2·total·B` bytes, for lengths that end inside a chunk at every
/// offset, on a chunk boundary, before the second half, and at 0 (an empty array).
fn chunks(name: &str, b: usize, smem: u32) -> TestResult {
    let mut r = rng(30 + b as u64 + smem as u64);
    for blocks in [1usize, 3, 40] {
        let total = blocks * THREADS;
        let bytes = 2 * total * b;
        let mut lens: Vec<usize> = vec![0, 1, b, bytes / 2, bytes / 2 + 1, bytes - 1, bytes];
        // Every tail length, near the start and at random places.
        for tail in 0..b {
            lens.push(b * 3 + tail);
            lens.push(r.random_range(0..bytes / b) * b + tail);
        }
        for len in lens {
            let x: Vec<u8> = (0..len).map(|_| r.random()).collect();
            let dout = up(&vec![0xDEu8; bytes])?;
            // Length 0: an empty array, passed as a null pointer that the copies never read.
            let dx = if len > 0 { Some(up(&x)?) } else { None };
            let null = ArrayDesc::from_parts(u8::DTYPE, &[0], None, 0, true, None).map_err(err)?;
            let xa = match &dx {
                Some(d) => d.arg(),
                None => Arg::Array(&null),
            };
            launch(
                name,
                &[xa, dout.arg()],
                [blocks as u32, 1, 1],
                [THREADS as u32, 1, 1],
                smem,
            )?;
            let got = down(&dout)?;
            for (i, v) in got.iter().enumerate() {
                let want = x.get(i).copied().unwrap_or(0);
                ensure(*v == want, || {
                    format!(
                        "{name}: {blocks} blocks, x.len() {len}: out[{i}] = {v:#04x}, want \
                         {want:#04x} (chunk {}, byte {})",
                        i / b,
                        i % b
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// `cp_async_pipeline_*`: for each tile `k` and thread `t`,
/// `out[k·128 + t] = Σ_m (m + 1)·x[k·512 + t + 128m]` (wrapping; 0 past `x.len()`), for tile
/// counts below, at and above the stages, grids smaller and larger than the tile count (some
/// blocks with no tile), partial last tiles and tiles entirely past the end, both orders.
fn pipeline(name: &str, salt: u64) -> TestResult {
    let mut r = rng(salt);
    for tiles in [1usize, 2, 3, 5, 37, 300] {
        for grid in [1u32, 7, 64] {
            for order in [0u32, 1] {
                let cut = r.random_range(0..PIPE_TILE);
                let len = match r.random_range(0..3) {
                    // A partial last tile.
                    0 => (tiles - 1) * PIPE_TILE + cut.max(1),
                    // Whole tiles.
                    1 => tiles * PIPE_TILE,
                    // Only the first tiles hold data: the rest are all zeros.
                    _ => (tiles / 2) * PIPE_TILE + cut,
                };
                let x: Vec<u32> = (0..len.max(1)).map(|_| r.random()).collect();
                let x = &x[..len.max(1)];
                let dx = up(x)?;
                let dout = up(&vec![0xDEAD_BEEFu32; tiles * PIPE_THREADS])?;
                launch(
                    name,
                    &[dx.arg(), dout.arg(), scalar(tiles as u32), scalar(order)],
                    [grid, 1, 1],
                    [PIPE_THREADS as u32, 1, 1],
                    0,
                )?;
                let got = down(&dout)?;
                for k in 0..tiles {
                    for t in 0..PIPE_THREADS {
                        let want = (0..4u32).fold(0u32, |acc, m| {
                            let i = k * PIPE_TILE + t + PIPE_THREADS * m as usize;
                            acc.wrapping_add(x.get(i).copied().unwrap_or(0).wrapping_mul(m + 1))
                        });
                        let v = got[k * PIPE_THREADS + t];
                        ensure(v == want, || {
                            format!(
                                "{name}: {tiles} tiles, grid {grid}, order {order}, x.len() \
                                 {}: tile {k} thread {t}: {v:#x}, want {want:#x}",
                                x.len()
                            )
                        })?;
                    }
                }
            }
        }
    }
    Ok(())
}
