//! Thread-block clusters (sm_90 and newer; on older GPUs each test checks that the kernel is
//! refused, naming it, and returns): neighbours exchanging values through distributed shared
//! memory (loads, stores, the split barrier), a cluster-wide sum through distributed
//! shared-memory atomics (also bound, and captured in a CUDA graph), the cluster registers
//! under a 2-D grid of clusters, the automatic grid rounded up to whole clusters, the
//! launcher's refusal of a grid that is not whole clusters (nothing launched), and a
//! non-portable cluster of 16 blocks (run on compute capability 9.0, the H100's).

use crate::coop::replayed;
use crate::{down, ensure, err, module, up, TestResult, DEV};
use ferrocuda::host::driver::{Context, LaunchAttrs, Stream};
use ferrocuda::{Arg, DeviceArray, ErrorKind, Kernel, LaunchOptions};
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("cluster_neighbours_exchange_through_dsmem", neighbours),
    ("cluster_sum_through_dsmem_atomics", sums),
    ("cluster_registers_of_a_2d_grid", registers),
    ("cluster_grid_not_whole_clusters_is_refused", refused),
    ("cluster_of_16_non_portable", wide),
];

const POISON: u32 = 0xDEAD_BEEF;

/// The kernel `name`, or `None` (the test passes) on a GPU without clusters — after checking
/// that a launch of it is refused, naming it.
fn cluster_kernel(name: &str) -> Result<Option<Kernel<'static>>, libtest_mimic::Failed> {
    let k = module()?.kernel(name).map_err(err)?;
    let cc = Context::get(DEV).map_err(err)?.compute_capability();
    if k.runs_on(cc) {
        return Ok(Some(k));
    }
    let out = up(&[POISON; 64])?;
    // SAFETY: refused before the launch (checked below).
    let e = unsafe { k.launch(&[Arg::Array(out.desc())], &LaunchOptions::default()) }
        .err()
        .ok_or_else(|| err(format!("{name} launched on compute capability {cc:?}")))?;
    ensure(
        e.kind() == ErrorKind::Unsupported && e.to_string().contains(name),
        || format!("{name} on {cc:?}: {e}"),
    )?;
    eprintln!("{name}: compute capability {cc:?} has no clusters; refused as it must be");
    Ok(None)
}

/// Launches `k` on `args` with `grid`/`block` (`None`: automatic); the grid and block used.
fn run(
    k: &Kernel<'_>,
    args: &[Arg<'_>],
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
) -> Result<([u32; 3], [u32; 3]), libtest_mimic::Failed> {
    let opts = LaunchOptions {
        grid,
        block,
        ..LaunchOptions::default()
    };
    let prepared = k.prepare(args, &opts).map_err(err)?;
    let attrs = prepared.attributes();
    let cluster = k.signature().launch.cluster_dims().unwrap_or([0; 3]);
    ensure(attrs == LaunchAttrs::Cluster(cluster), || {
        format!("{}: attributes {attrs:?}", k.name())
    })?;
    // SAFETY: the arguments just prepared, on this thread; every test kernel writes within
    // its arrays (bounds-checked writes).
    let launched = unsafe { prepared.execute(args) }.map_err(err)?;
    launched.config.ok_or_else(|| err("nothing launched"))
}

fn neighbours() -> TestResult {
    let Some(k) = cluster_kernel("cluster_neighbour")? else {
        return Ok(());
    };
    // The automatic grid (one block for 40 elements) rounded up to a whole cluster: 2 blocks.
    for (grid, block, len) in [
        (None, None, 40usize),
        (Some([8, 1, 1]), Some([64, 1, 1]), 40),
        (Some([32, 1, 1]), Some([1024, 1, 1]), 128),
    ] {
        let out = up(&vec![POISON; len])?;
        let (g, _) = run(&k, &[Arg::Array(out.desc())], grid, block)?;
        let nb = g[0] as usize;
        ensure(g[1] == 1 && g[2] == 1 && nb.is_multiple_of(2), || {
            format!("grid {g:?}")
        })?;
        if grid.is_none() {
            ensure(nb == 2, || format!("automatic grid {g:?}, not one cluster"))?;
        }
        let got = down(&out)?;
        for b in 0..nb {
            let (r, c) = ((b % 2) as u32, (b / 2) as u32);
            let want = [r, 2, 1000 * c + (r ^ 1), 100 + (r ^ 1)];
            ensure(got[4 * b..4 * b + 4] == want, || {
                format!(
                    "grid {g:?}: block {b} wrote {:?}, want {want:?}",
                    &got[4 * b..4 * b + 4]
                )
            })?;
        }
        ensure(got[4 * nb..].iter().all(|&v| v == POISON), || {
            format!("grid {g:?}: written beyond the blocks")
        })?;
    }
    Ok(())
}

/// What `cluster_sum` writes for block `b`: the wrapping sum of the elements whose
/// grid-stride thread (`i mod threads`) is in `b`'s cluster of 4 blocks.
fn cluster_sums(x: &[u32], blocks: usize, block: usize) -> Vec<u32> {
    let threads = blocks * block;
    let mut per_cluster = vec![0u32; blocks / 4];
    for (i, &v) in x.iter().enumerate() {
        let c = (i % threads) / (4 * block);
        per_cluster[c] = per_cluster[c].wrapping_add(v);
    }
    (0..blocks).map(|b| per_cluster[b / 4]).collect()
}

fn sums() -> TestResult {
    let Some(k) = cluster_kernel("cluster_sum")? else {
        return Ok(());
    };
    let mut r = crate::rng(0xc1);
    for (n, blocks, block) in [
        (100_000usize, 16u32, 256u32),
        (7, 4, 32),
        (1 << 20, 64, 1024),
    ] {
        let x: Vec<u32> = (0..n).map(|_| r.random()).collect();
        let dx = up(&x)?;
        let out = up(&vec![POISON; blocks as usize])?;
        let args = [Arg::Array(dx.desc()), Arg::Array(out.desc())];
        run(&k, &args, Some([blocks, 1, 1]), Some([block, 1, 1]))?;
        let want = cluster_sums(&x, blocks as usize, block as usize);
        ensure(down(&out)? == want, || {
            format!("{n} elements, {blocks} blocks of {block}: cluster sums differ")
        })?;
    }
    // Bound, then captured in a CUDA graph and replayed on new data.
    let _ctx = Context::get(DEV).and_then(|c| c.enter()).map_err(err)?;
    let stream = Stream::new(DEV, true).map_err(err)?;
    let s = stream.as_ref();
    let n = 50_000;
    let dx = DeviceArray::<u32>::from_ndarray(&ndarray::Array1::zeros(n), DEV, s).map_err(err)?;
    let out = DeviceArray::<u32>::from_ndarray(&ndarray::Array1::from_elem(8, POISON), DEV, s)
        .map_err(err)?;
    let args = [Arg::Array(dx.desc()), Arg::Array(out.desc())];
    let opts = LaunchOptions {
        stream: Some(s),
        grid: Some([8, 1, 1]),
        block: Some([128, 1, 1]),
        ..LaunchOptions::default()
    };
    let bound = k.bind(&args, &opts).map_err(err)?;
    let data = std::cell::RefCell::new(Vec::new());
    let mut refill = |what: String| -> Result<String, libtest_mimic::Failed> {
        let x: Vec<u32> = (0..n).map(|_| r.random()).collect();
        dx.copy_from_host(&x).map_err(err)?;
        out.copy_from_host(&[POISON; 8]).map_err(err)?;
        *data.borrow_mut() = x;
        Ok(what)
    };
    let check = |what: &str| -> TestResult {
        stream.synchronize().map_err(err)?;
        let want = cluster_sums(&data.borrow(), 8, 128);
        ensure(down(&out)? == want, || {
            format!("{what}: cluster sums differ")
        })
    };
    for i in 0..2 {
        refill(format!("bound launch {i}"))?;
        // SAFETY: the arrays outlive the bound launch; the kernel writes one element per
        // block.
        unsafe { bound.launch() }.map_err(err)?;
        check(&format!("bound launch {i}"))?;
    }
    replayed(
        &stream,
        3,
        // SAFETY: as above.
        || unsafe { bound.launch() }.map(drop).map_err(err),
        |i| refill(format!("graph replay {i}")),
        check,
    )
}

fn registers() -> TestResult {
    let Some(k) = cluster_kernel("cluster_registers")? else {
        return Ok(());
    };
    for (grid, len) in [
        (None, 40usize),
        (Some([4, 6, 1]), 240),
        (Some([2, 2, 1]), 40),
    ] {
        let out = up(&vec![POISON; len])?;
        let (g, _) = run(&k, &[Arg::Array(out.desc())], grid, Some([32, 1, 1]))?;
        if grid.is_none() {
            // One block for 40 elements, rounded up to a whole 2 × 2 cluster.
            ensure(g == [2, 2, 1], || format!("automatic grid {g:?}"))?;
        }
        let got = down(&out)?;
        for by in 0..g[1] {
            for bx in 0..g[0] {
                let b = (bx + by * g[0]) as usize;
                let want = [
                    bx % 2 + 2 * (by % 2),
                    4,
                    bx % 2,
                    by % 2,
                    2,
                    2,
                    bx / 2,
                    by / 2,
                    g[0] / 2,
                    g[1] / 2,
                ];
                ensure(got[10 * b..10 * b + 10] == want, || {
                    format!(
                        "grid {g:?}: block ({bx}, {by}) wrote {:?}, want {want:?}",
                        &got[10 * b..10 * b + 10]
                    )
                })?;
            }
        }
    }
    Ok(())
}

fn refused() -> TestResult {
    let Some(k) = cluster_kernel("cluster_registers")? else {
        return Ok(());
    };
    let out = up(&vec![POISON; 400])?;
    for (grid, axis, extent) in [
        ([3, 2, 1], 'x', 3),
        ([4, 3, 1], 'y', 3),
        ([1, 2, 1], 'x', 1),
    ] {
        let opts = LaunchOptions {
            grid: Some(grid),
            block: Some([32, 1, 1]),
            ..LaunchOptions::default()
        };
        // SAFETY: refused before the launch (checked below).
        let e = match unsafe { k.launch(&[Arg::Array(out.desc())], &opts) } {
            Ok(_) => return Err(err(format!("grid {grid:?} of partial clusters launched"))),
            Err(e) => e,
        };
        let text = e.to_string();
        for part in [
            "`cluster_registers`".to_string(),
            "clusters of (2, 2, 1)".to_string(),
            format!("grid ({}, {}, {})", grid[0], grid[1], grid[2]),
            format!("{extent} blocks along {axis}, not a multiple of 2"),
        ] {
            ensure(e.kind() == ErrorKind::Value && text.contains(&part), || {
                format!("grid {grid:?}: `{part}` not in: {text}")
            })?;
        }
    }
    ensure(down(&out)?.iter().all(|&v| v == POISON), || {
        "a refused launch wrote".into()
    })
}

/// Clusters of 16 blocks (`non_portable_cluster`): compute capability 9.0 (H100) runs them,
/// and each block reads its mirror's rank through distributed shared memory; elsewhere the
/// launch may be refused — then with an error naming the kernel, nothing written.
fn wide() -> TestResult {
    let Some(k) = cluster_kernel("cluster_wide")? else {
        return Ok(());
    };
    let cc = Context::get(DEV).map_err(err)?.compute_capability();
    for block in [32u32, 256] {
        let out = up(&vec![POISON; 3 * 32])?;
        let opts = LaunchOptions {
            grid: Some([32, 1, 1]),
            block: Some([block, 1, 1]),
            ..LaunchOptions::default()
        };
        // SAFETY: the kernel writes three elements per block, 32 blocks.
        match unsafe { k.launch(&[Arg::Array(out.desc())], &opts) } {
            Ok(_) => {
                let got = down(&out)?;
                for b in 0..32usize {
                    let r = (b % 16) as u32;
                    let want = [r, 16, 15 - r];
                    ensure(got[3 * b..3 * b + 3] == want, || {
                        format!(
                            "block {b} wrote {:?}, want {want:?}",
                            &got[3 * b..3 * b + 3]
                        )
                    })?;
                }
            }
            Err(e) if cc != (9, 0) => {
                ensure(e.to_string().contains("`cluster_wide`"), || {
                    format!("compute capability {cc:?}: {e}")
                })?;
                ensure(down(&out)?.iter().all(|&v| v == POISON), || {
                    "a refused launch wrote".into()
                })?;
                eprintln!("cluster_wide on {cc:?}: refused ({e})");
            }
            Err(e) => return Err(err(format!("cluster of 16 on compute capability 9.0: {e}"))),
        }
    }
    Ok(())
}
