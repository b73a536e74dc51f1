//! Rust launch overhead: host time per `ferrocuda::kernels::add_f32` call on three
//! `DeviceArray<f32>` of 1024 elements, no Python anywhere.
//!
//! Method: each sample launches the kernel `iters` times back to back, synchronizes once and
//! returns the elapsed host time (criterion's `iter_custom`), so the figure is the per-launch
//! host overhead (the single synchronization is amortized over the batch). Cases:
//!
//! * `same_*` — the arrays live on the legacy default stream and the launch stream is left to
//!   the launcher, which picks the producers' common stream: the stream plan is trivial in
//!   every sync mode (no sync, no event). This is what a Python call on CuPy arrays does.
//! * `side_*` — the launch goes on a separate non-blocking stream, so the legacy stream is a
//!   *foreign* producer stream: `default` host-synchronizes it before each launch (Numba's
//!   semantics) and makes it wait on the kernel afterwards, `event` orders it with events
//!   only, `off` does nothing.
//! * `*_check` / `*_nocheck` — `check_pointers` on (one `cuPointerGetAttributes` per array) or
//!   off.
//! * `bound_*` — the same launches bound once (`Kernel::bind`, outside the timed region) and
//!   launched with `BoundLaunch::launch`: no argument checks, pointer checks or planning per
//!   launch, only the plan's work and `cuLaunchKernel`.
//!
//! Besides criterion's report, the binary makes its own median-of-batches measurement of each
//! case (same method, fixed batch size) and prints one JSON line per case to stdout:
//! `{"bench": "rust_launch", "name": ..., "us_per_launch": ..., ...}`, with criterion's median
//! estimate added when it can be read from `$CRITERION_HOME` (default `target/criterion`).
//! Every case's output is checked against `a + b` once before it is timed.
//!
//! Run: `cargo bench --bench launch` (or the compiled binary with `--bench`). Without a GPU
//! it prints why it skipped and exits 0. Without `--bench` (e.g. `cargo test --benches`)
//! criterion runs each case once and the JSON measurement is skipped.

use criterion::Criterion;
use ferrocuda::host::driver::{self, Stream};
use ferrocuda::host::launch::synchronize;
use ferrocuda::{bundled, kernels, AsArg, DeviceArray, LaunchOptions, StreamRef, SyncMode};
use ndarray::Array1;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const N: usize = 1024;
const DEV: usize = 0;
const WARMUP_LAUNCHES: usize = 2000;
const BATCHES: usize = 30;
const LAUNCHES_PER_BATCH: usize = 1000;

#[derive(Clone, Copy)]
struct Case {
    id: &'static str,
    side: bool,
    mode: SyncMode,
    check_pointers: bool,
    bound: bool,
}

const fn case(id: &'static str, side: bool, mode: SyncMode, check_pointers: bool) -> Case {
    Case {
        id,
        side,
        mode,
        check_pointers,
        bound: false,
    }
}

const fn bound(id: &'static str, side: bool, mode: SyncMode) -> Case {
    Case {
        bound: true,
        ..case(id, side, mode, true)
    }
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    case("same_default_check", false, SyncMode::Default, true),
    case("same_event_check", false, SyncMode::Event, true),
    case("same_off_check", false, SyncMode::Off, true),
    case("same_default_nocheck", false, SyncMode::Default, false),
    case("same_off_nocheck", false, SyncMode::Off, false),
    case("side_default_check", true, SyncMode::Default, true),
    case("side_event_check", true, SyncMode::Event, true),
    case("side_off_check", true, SyncMode::Off, true),
    case("side_default_nocheck", true, SyncMode::Default, false),
    case("side_event_nocheck", true, SyncMode::Event, false),
    case("side_off_nocheck", true, SyncMode::Off, false),
    bound("bound_same_default", false, SyncMode::Default),
    bound("bound_same_off", false, SyncMode::Off),
    bound("bound_side_default", true, SyncMode::Default),
    bound("bound_side_event", true, SyncMode::Event),
];

struct Setup {
    a: DeviceArray<f32>,
    b: DeviceArray<f32>,
    out: DeviceArray<f32>,
    side: Stream,
    expected: Vec<f32>,
}

impl Setup {
    fn new() -> ferrocuda::Result<Setup> {
        let ha: Vec<f32> = (0..N).map(|i| (i as f32) * 0.25 - 100.0).collect();
        let hb: Vec<f32> = (0..N).map(|i| 3.0 - (i % 17) as f32 * 1.5).collect();
        let expected = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
        // The thread's current context is device 0's, as in an application that has chosen
        // its device (CuPy and torch make it so): launches then leave it as it is, with no
        // context switch per launch (see `driver::CallerContext`).
        driver::Context::get(DEV)?.bind()?;
        let a = DeviceArray::from_ndarray(&Array1::from_vec(ha), DEV, StreamRef::Legacy)?;
        let b = DeviceArray::from_ndarray(&Array1::from_vec(hb), DEV, StreamRef::Legacy)?;
        let out = DeviceArray::<f32>::empty(&[N], DEV, StreamRef::Legacy)?;
        let side = Stream::new(DEV, true)?;
        Ok(Setup {
            a,
            b,
            out,
            side,
            expected,
        })
    }

    fn opts(&self, c: &Case) -> LaunchOptions {
        LaunchOptions {
            stream: c.side.then(|| self.side.as_ref()),
            sync: Some(c.mode),
            check_pointers: c.check_pointers,
            ..LaunchOptions::default()
        }
    }

    fn sync(&self) -> ferrocuda::Result<()> {
        synchronize(DEV, self.side.as_ref())?;
        synchronize(DEV, StreamRef::Legacy)
    }

    /// Poisons `out`, launches once, compares with the host sum.
    fn verify(&self, c: &Case) -> Result<(), String> {
        self.out
            .copy_from_host(&[f32::NAN; N])
            .map_err(|e| e.to_string())?;
        self.launches(c, &self.opts(c), 1)
            .map_err(|e| e.to_string())?;
        self.sync().map_err(|e| e.to_string())?;
        let mut got = vec![0.0f32; N];
        self.out.copy_to_host(&mut got).map_err(|e| e.to_string())?;
        match got.iter().zip(&self.expected).position(|(g, e)| g != e) {
            None => Ok(()),
            Some(i) => Err(format!(
                "case {}: out[{i}] = {} but a + b = {}",
                c.id, got[i], self.expected[i]
            )),
        }
    }

    /// `iters` launches back to back (bound once first, for a bound case) and one
    /// synchronization; the elapsed host time of the launches and the synchronization.
    fn launches(&self, c: &Case, opts: &LaunchOptions, iters: u64) -> ferrocuda::Result<Duration> {
        if !c.bound {
            let t = Instant::now();
            for _ in 0..iters {
                kernels::add_f32(&self.a, &self.b, &self.out, opts)?;
            }
            self.sync()?;
            return Ok(t.elapsed());
        }
        let k = bundled::module()?.kernel("add_f32")?;
        let launch = k.bind(&[self.a.as_arg(), self.b.as_arg(), self.out.as_arg()], opts)?;
        let t = Instant::now();
        for _ in 0..iters {
            // SAFETY: a bundled kernel (memory-safe for checked arguments) on arrays that
            // outlive `launch`.
            unsafe { launch.launch() }?;
        }
        self.sync()?;
        Ok(t.elapsed())
    }

    /// [`launches`](Self::launches), panicking on an error.
    fn run(&self, c: &Case, opts: &LaunchOptions, iters: u64) -> Duration {
        match self.launches(c, opts, iters) {
            Ok(t) => t,
            Err(e) => panic!("case {}: {e}", c.id),
        }
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Criterion's median estimate (ns per iteration = per launch), if it wrote one.
fn criterion_median_ns(id: &str) -> Option<f64> {
    let home = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|d| PathBuf::from(d).join("criterion"))
        })
        .unwrap_or_else(|| PathBuf::from("target/criterion"));
    let path = home
        .join("launch")
        .join(id)
        .join("new")
        .join("estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn mode_name(m: SyncMode) -> &'static str {
    match m {
        SyncMode::Default => "default",
        SyncMode::Event => "event",
        SyncMode::Off => "off",
    }
}

fn main() {
    match driver::device_count() {
        Ok(n) if n > 0 => {}
        Ok(_) => {
            println!("launch bench: SKIPPED: the CUDA driver reports no device");
            return;
        }
        Err(e) => {
            println!("launch bench: SKIPPED: no usable CUDA driver/device ({e})");
            return;
        }
    }
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let setup = match Setup::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("launch bench: set-up failed: {e}");
            std::process::exit(1);
        }
    };
    let mut failed = false;
    for c in CASES {
        if let Err(e) = setup.verify(c) {
            eprintln!("launch bench: WRONG OUTPUT: {e}");
            failed = true;
        }
    }
    if failed {
        std::process::exit(1);
    }

    let mut crit = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(20)
        .nresamples(20_000)
        .without_plots()
        .configure_from_args();
    {
        let mut g = crit.benchmark_group("launch");
        for c in CASES {
            let opts = setup.opts(c);
            g.bench_function(c.id, |b| b.iter_custom(|iters| setup.run(c, &opts, iters)));
        }
        g.finish();
    }
    crit.final_summary();

    if !bench_mode {
        println!("launch bench: test mode (no --bench): JSON measurement skipped");
        return;
    }
    // Own median-of-batches measurement, machine-readable.
    for c in CASES {
        let opts = setup.opts(c);
        setup.run(c, &opts, WARMUP_LAUNCHES as u64);
        let mut us: Vec<f64> = (0..BATCHES)
            .map(|_| {
                setup.run(c, &opts, LAUNCHES_PER_BATCH as u64).as_secs_f64() * 1e6
                    / LAUNCHES_PER_BATCH as f64
            })
            .collect();
        us.sort_by(|x, y| x.total_cmp(y));
        let crit_us = criterion_median_ns(c.id)
            .map(|ns| format!("{:.4}", ns / 1000.0))
            .unwrap_or_else(|| "null".into());
        println!(
            "{{\"bench\": \"rust_launch\", \"name\": \"{}\", \"stream\": \"{}\", \"sync\": \"{}\", \
             \"check_pointers\": {}, \"bound\": {}, \"us_per_launch\": {:.4}, \"min_us\": {:.4}, \"p10_us\": {:.4}, \
             \"p90_us\": {:.4}, \"batches\": {BATCHES}, \"launches_per_batch\": {LAUNCHES_PER_BATCH}, \
             \"criterion_median_us\": {crit_us}, \"n\": {N}, \"checked\": true}}",
            c.id,
            if c.side { "side (non-blocking; arrays on legacy)" } else { "producers' (legacy)" },
            mode_name(c.mode),
            c.check_pointers,
            c.bound,
            quantile(&us, 0.5),
            us[0],
            quantile(&us, 0.1),
            quantile(&us, 0.9),
        );
    }
}
