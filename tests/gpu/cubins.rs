//! GPU tests of the cubins (a module of `tests/gpu.rs`).
//!
//! * `first_launch_loads_the_cubin`: the bundled module loads, on device 0, the cubin that
//!   `choose_cubin` names for its compute capability (9.0: the sm_90 one; the PTX where
//!   there is none), and a child process started with `CUDA_CACHE_DISABLE=1` times its first
//!   launch (the module load included) to its completion: under 1 s with a cubin; the time is
//!   printed.

use super::{ensure, err, opts, GpuTest, TestResult, DEV, L};
use ferrocuda::host::driver;
use ferrocuda::{bundled, kernels, DeviceArray};
use libtest_mimic::Failed;

/// Set in the child's environment: `main` runs [`first_launch_child`] instead of the tests.
pub const CHILD: &str = ferrocuda_config::FIRST_LAUNCH_CHILD.name;

/// The image device `DEV` should load: the bundled cubin for its major version, else the PTX.
fn expected_image() -> Result<String, Failed> {
    let ctx = driver::Context::get(DEV).map_err(err)?;
    let archs = bundled::CUBINS.iter().map(|(a, _)| *a);
    Ok(
        match ferrocuda::host::choose_cubin(ctx.compute_capability(), archs) {
            Some(arch) => format!("{arch} cubin"),
            None => "PTX".into(),
        },
    )
}

/// The bundled module loads the cubin of the device's compute capability (9.0: the sm_90
/// one), and the first launch in a fresh process with the JIT cache disabled takes under a
/// second (loading a cubin compiles nothing; the PTX took seconds).
fn test_first_launch_loads_the_cubin() -> TestResult {
    let expected = expected_image()?;
    let module = bundled::module().map_err(err)?;
    // The base image first; a module with parts lists each part's after it.
    let image = module.loaded_image(DEV).map_err(err)?;
    let base = image.split("; ").next().unwrap_or_default();
    ensure(base == expected, || {
        format!("loaded {image}, expected {expected} for the base image")
    })?;
    let cc = driver::Context::get(DEV).map_err(err)?.compute_capability();
    if cc == (9, 0) {
        ensure(image.contains("sm_90a part: sm_90a cubin"), || {
            format!("loaded {image}: no sm_90a part from its cubin")
        })?;
    }
    let exe = std::env::current_exe().map_err(err)?;
    let out = std::process::Command::new(exe)
        .env(CHILD, "1")
        .env("CUDA_CACHE_DISABLE", "1")
        .output()
        .map_err(err)?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure(out.status.success(), || {
        format!(
            "child exit {:?}: {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("first launch: "))
        .ok_or_else(|| err(format!("child said: {text}")))?;
    let (seconds, child_image) = line
        .split_once(" s, ")
        .ok_or_else(|| err(format!("child said: {text}")))?;
    let seconds: f64 = seconds.parse().map_err(err)?;
    eprintln!(
        "first launch in a fresh process (CUDA_CACHE_DISABLE=1): {seconds:.3} s, {child_image}"
    );
    ensure(
        child_image.split("; ").next() == Some(expected.as_str()),
        || format!("the child loaded {child_image}, expected {expected} for the base image"),
    )?;
    if expected != "PTX" {
        ensure(seconds < 1.0, || {
            format!("first launch took {seconds:.3} s with the {expected} (expected < 1 s)")
        })?;
    }
    Ok(())
}

pub const TESTS: [GpuTest; 1] = [GpuTest::new(
    "first_launch_loads_the_cubin",
    test_first_launch_loads_the_cubin,
)];

/// The child side of `test_first_launch_loads_the_cubin`: the context and arrays first, then
/// the timed first launch (which loads the module) to its completion; prints
/// `first launch: <seconds> s, <image>`.
pub fn first_launch_child() -> ! {
    let run = || -> Result<String, String> {
        let a = DeviceArray::<f32>::empty(&[1024], DEV, L).map_err(|e| e.to_string())?;
        let out = DeviceArray::<f32>::empty(&[1024], DEV, L).map_err(|e| e.to_string())?;
        a.synchronize().map_err(|e| e.to_string())?;
        let start = std::time::Instant::now();
        kernels::add_f32(&a, &a, &out, &opts()).map_err(|e| e.to_string())?;
        out.synchronize().map_err(|e| e.to_string())?;
        let seconds = start.elapsed().as_secs_f64();
        let image = bundled::module()
            .and_then(|m| m.loaded_image(DEV))
            .map_err(|e| e.to_string())?;
        Ok(format!("first launch: {seconds:.6} s, {image}"))
    };
    let (line, code) = match run() {
        Ok(line) => (line, 0),
        Err(e) => (format!("unexpected: {e}"), 1),
    };
    println!("{line}");
    std::process::exit(code)
}
