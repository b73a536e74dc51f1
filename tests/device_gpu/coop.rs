//! Cooperative launches and the grid-wide barrier: rounds of writes and cross-block reads
//! separated by `GridBarrier::sync` (any miss counted), on the automatic grid (exactly one
//! resident wave) and on smaller grids of several shapes and block sizes; the launcher's
//! refusal of a grid larger than one wave (the numbers in the message, nothing launched);
//! bound launches; and a cooperative launch captured in a CUDA graph and replayed.

use crate::{down, ensure, err, module, scalar, up, TestResult, DEV};
use cudarc::driver::{result as cu, sys};
use ferrocuda::host::driver::{Context, LaunchAttrs, Stream};
use ferrocuda::{Arg, ErrorKind, LaunchOptions};

pub const TESTS: &[crate::Test] = &[
    ("coop_grid_sync_rounds", grid_sync_rounds),
    ("coop_grid_sync_sum", grid_sync_sum),
    ("coop_grid_too_large_is_refused", grid_too_large),
    ("coop_bound_and_graph_captured", bound_and_captured),
];

const POISON: u32 = 0xDEAD_BEEF;
const K: u32 = 1_000_003;

/// Threads the device can hold at once (2048 per SM on every supported GPU): an upper bound
/// of any cooperative grid's threads, so arrays of this length fit every launch here.
fn most_threads() -> Result<usize, libtest_mimic::Failed> {
    Ok(Context::get(DEV).map_err(err)?.sm_count() as usize * 2048)
}

/// Launches `grid_sync_rounds` (`grid`/`block`: `None` for the automatic ones) and checks every
/// thread's record; returns the grid and block used.
fn rounds(
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
) -> Result<[u32; 6], libtest_mimic::Failed> {
    let cap = most_threads()?;
    let buf = up(&vec![POISON; cap])?;
    let errors = up(&vec![POISON; cap])?;
    let r = 5u32;
    let k = module()?.kernel("grid_sync_rounds").map_err(err)?;
    let opts = LaunchOptions {
        grid,
        block,
        ..LaunchOptions::default()
    };
    let args = [Arg::Array(buf.desc()), Arg::Array(errors.desc()), scalar(r)];
    // SAFETY: the kernel writes one element per thread of the grid, and the arrays hold
    // `most_threads()` elements, at least the threads of any cooperative grid.
    let launched = unsafe { k.launch(&args, &opts) }.map_err(err)?;
    let (g, b) = launched.config.ok_or_else(|| err("nothing launched"))?;
    let n = g.iter().chain(&b).map(|&v| v as usize).product::<usize>();
    ensure(n <= cap, || {
        format!("{n} threads beyond the {cap} a device holds")
    })?;
    let (got_buf, got_err) = (down(&buf)?, down(&errors)?);
    for t in 0..cap {
        if t < n {
            let want = (r - 1).wrapping_mul(K).wrapping_add(t as u32);
            ensure(got_err[t] == 0 && got_buf[t] == want, || {
                format!(
                    "grid {g:?} block {b:?}: thread {t} saw {} stale values (buf {:#x}, want \
                     {want:#x})",
                    got_err[t], got_buf[t]
                )
            })?;
        } else {
            ensure(got_err[t] == POISON && got_buf[t] == POISON, || {
                format!("grid {g:?} block {b:?}: element {t} beyond the grid written")
            })?;
        }
    }
    Ok([g[0], g[1], g[2], b[0], b[1], b[2]])
}

fn grid_sync_rounds() -> TestResult {
    let ctx = Context::get(DEV).map_err(err)?;
    // The automatic grid: exactly one resident wave, 1-D, a whole number of blocks per SM.
    let [gx, gy, gz, bx, ..] = rounds(None, None)?;
    ensure(
        gy == 1 && gz == 1 && gx >= ctx.sm_count() && gx.is_multiple_of(ctx.sm_count()),
        || {
            format!(
                "automatic grid ({gx}, {gy}, {gz}) of blocks of {bx} on {} SMs",
                ctx.sm_count()
            )
        },
    )?;
    eprintln!("grid_sync_rounds: automatic grid {gx} blocks of {bx} threads");
    // Smaller grids, 2-D and 3-D, and other block shapes.
    for (grid, block) in [
        ([1, 1, 1], [1024, 1, 1]),
        ([7, 3, 1], [96, 1, 1]),
        ([5, 1, 2], [32, 2, 2]),
        ([ctx.sm_count(), 1, 1], [33, 1, 1]),
        ([gx, 1, 1], [bx, 1, 1]),
    ] {
        rounds(Some(grid), Some(block))?;
    }
    Ok(())
}

fn grid_sync_sum() -> TestResult {
    let cap = most_threads()?;
    let slots = up(&vec![u64::MAX; cap])?;
    let out = up(&vec![u64::MAX; cap])?;
    let k = module()?.kernel("grid_sync_sum").map_err(err)?;
    for grid in [None, Some([1, 1, 1]), Some([9, 4, 1])] {
        let opts = LaunchOptions {
            grid,
            ..LaunchOptions::default()
        };
        let args = [Arg::Array(slots.desc()), Arg::Array(out.desc())];
        // SAFETY: one element per block, and the arrays hold more than any grid's blocks.
        let launched = unsafe { k.launch(&args, &opts) }.map_err(err)?;
        let (g, b) = launched.config.ok_or_else(|| err("nothing launched"))?;
        ensure(b.iter().product::<u32>() <= 256, || format!("block {b:?}"))?;
        let nb = g.iter().map(|&v| v as u64).product::<u64>();
        let got = down(&out)?;
        let want = nb * (nb + 1) / 2;
        for (i, &v) in got.iter().take(nb as usize).enumerate() {
            ensure(v == want, || {
                format!("grid {g:?}: block {i} summed {v}, want {want}")
            })?;
        }
    }
    Ok(())
}

/// One block more than a resident wave: refused before anything is launched, with the
/// kernel, the grid, the blocks per SM and the SMs in the message.
fn grid_too_large() -> TestResult {
    let ctx = Context::get(DEV).map_err(err)?;
    let cap = most_threads()?;
    let slots = up(&vec![u64::MAX; cap + 64])?;
    let out = up(&vec![u64::MAX; cap + 64])?;
    let k = module()?.kernel("grid_sync_sum").map_err(err)?;
    let args = [Arg::Array(slots.desc()), Arg::Array(out.desc())];
    let block = [256, 1, 1];
    let auto = LaunchOptions {
        block: Some(block),
        ..LaunchOptions::default()
    };
    let prepared = k.prepare(&args, &auto).map_err(err)?;
    ensure(prepared.attributes() == LaunchAttrs::Cooperative, || {
        format!("attributes {:?}", prepared.attributes())
    })?;
    let wave = prepared.config().ok_or_else(|| err("no configuration"))?.0[0];
    let per_sm = wave / ctx.sm_count();
    for grid in [[wave + 1, 1, 1], [wave, 2, 1], [2 * wave, 1, 1]] {
        let opts = LaunchOptions {
            grid: Some(grid),
            ..auto
        };
        // SAFETY: refused before the launch (checked below).
        let e = match unsafe { k.launch(&args, &opts) } {
            Ok(_) => {
                return Err(err(format!(
                    "grid {grid:?} beyond the wave {wave} launched"
                )))
            }
            Err(e) => e,
        };
        let text = e.to_string();
        let blocks = grid.iter().product::<u32>();
        for part in [
            "`grid_sync_sum`".to_string(),
            "cooperative".to_string(),
            format!("({}, {}, {})", grid[0], grid[1], grid[2]),
            format!("{blocks} blocks"),
            format!("at most {wave}"),
            format!("{per_sm} blocks per SM"),
            format!("{} SMs", ctx.sm_count()),
        ] {
            ensure(e.kind() == ErrorKind::Value && text.contains(&part), || {
                format!("grid {grid:?}: `{part}` not in: {text}")
            })?;
        }
    }
    // Nothing ran.
    ensure(down(&out)?.iter().all(|&v| v == u64::MAX), || {
        "a refused launch wrote".into()
    })?;
    Ok(())
}

/// A bound cooperative launch, launched twice; then launched inside a CUDA graph capture and
/// the graph replayed (the barrier's workspace is the graph's own, zero-filled per replay).
fn bound_and_captured() -> TestResult {
    let _ctx = Context::get(DEV).and_then(|c| c.enter()).map_err(err)?;
    let stream = Stream::new(DEV, true).map_err(err)?;
    let s = stream.as_ref();
    let cap = most_threads()?;
    let slots = ferrocuda::DeviceArray::from_ndarray(
        &ndarray::Array1::from_vec(vec![u64::MAX; cap]),
        DEV,
        s,
    )
    .map_err(err)?;
    let out = ferrocuda::DeviceArray::from_ndarray(
        &ndarray::Array1::from_vec(vec![u64::MAX; cap]),
        DEV,
        s,
    )
    .map_err(err)?;
    let k = module()?.kernel("grid_sync_sum").map_err(err)?;
    let args = [Arg::Array(slots.desc()), Arg::Array(out.desc())];
    let opts = LaunchOptions {
        stream: Some(s),
        ..LaunchOptions::default()
    };
    let bound = k.bind(&args, &opts).map_err(err)?;
    let (g, _) = bound
        .prepared()
        .config()
        .ok_or_else(|| err("no configuration"))?;
    let nb = g[0] as u64;
    let check = |what: &str| -> TestResult {
        stream.synchronize().map_err(err)?;
        let got = down(&out)?;
        let want = nb * (nb + 1) / 2;
        ensure(got[..nb as usize].iter().all(|&v| v == want), || {
            format!("{what}: not every block summed {want}")
        })
    };
    for i in 0..2 {
        // SAFETY: the arrays outlive the bound launch; one element per block.
        unsafe { bound.launch() }.map_err(err)?;
        check(&format!("bound launch {i}"))?;
    }
    // Captured: the launch (and its workspace's allocation and zero-fill) become graph nodes.
    replayed(
        &stream,
        3,
        || {
            // SAFETY: as above.
            unsafe { bound.launch() }.map(drop).map_err(err)
        },
        |i| {
            out.copy_from_host(&vec![u64::MAX; cap]).map_err(err)?;
            Ok(format!("graph replay {i}"))
        },
        |what| check(what),
    )
}

/// Captures (global mode) what `launch` enqueues on `stream` into a graph, then `replays`
/// times: `before(i)` (which names the replay), a replay, a check of its result.
pub fn replayed(
    stream: &Stream,
    replays: usize,
    launch: impl FnOnce() -> TestResult,
    mut before: impl FnMut(usize) -> Result<String, libtest_mimic::Failed>,
    mut check: impl FnMut(&str) -> TestResult,
) -> TestResult {
    let raw = stream.as_ref().as_raw() as usize as sys::CUstream;
    let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL;
    // SAFETY: a live stream of the current context.
    unsafe { cu::stream::begin_capture(raw, mode) }.map_err(err)?;
    let launched = launch();
    // SAFETY: the capture was begun on this stream by this thread.
    let graph = unsafe { cu::stream::end_capture(raw) };
    launched?;
    let graph = graph.map_err(err)?;
    // SAFETY: a graph just returned by the driver.
    let exec = match unsafe { cu::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) } {
        Ok(e) => e,
        Err(e) => {
            // SAFETY: not used afterwards.
            let _ = unsafe { cu::graph::destroy(graph) };
            return Err(err(e));
        }
    };
    let mut run = || -> TestResult {
        for i in 0..replays {
            let what = before(i)?;
            // SAFETY: an instantiated graph and a live stream of the current context.
            unsafe { cu::graph::launch(exec, raw) }.map_err(err)?;
            check(&what)?;
        }
        Ok(())
    };
    let result = run();
    let synced = stream.synchronize().map_err(err);
    // SAFETY: created above, its launches synchronized, not used afterwards.
    unsafe {
        let _ = cu::graph::exec_destroy(exec);
        let _ = cu::graph::destroy(graph);
    }
    result.and(synced)
}
