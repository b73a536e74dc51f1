//! GPU tests of `ferrocuda-device`'s primitives: atomics, fences, warp operations, block
//! reductions and scans, half precision, the tensor cores (`mma`, `ldmatrix`, `wgmma`, their
//! fragment layouts), counting barriers and clocks, shared memory, asynchronous copies and
//! pipelines, mbarriers, grid-wide barriers of cooperative launches, thread-block clusters and
//! distributed shared memory,
//! global-memory access forms (vectors, the read-only cache), the porting guide's kernels,
//! device printf and failed-check locations (in child processes).
//! The math functions' accuracy is tested from Python against mpmath
//! (`python/tests/test_gpu_device_math.py`). The kernels are in
//! `tests/device-kernels/` (built by `tests/common/device_kernels.rs`, or shipped in the GPU
//! bundle as `.gpu/device-kernels/`; `FERROCUDA_DEVICE_KERNELS` names another manifest).
//!
//! Without a GPU every test is reported as *ignored*, with the reason printed once.
//!
//! Method: random inputs (seed printed; `FERROCUDA_TEST_SEED` repeats a run) plus
//! adversarial ones (extremes, all-equal, NaN, ties), outputs poisoned before each launch,
//! every element compared with a reference computed here in plain Rust (the `half` crate's
//! software rounding for f16/bf16). Integer atomics are checked exactly under full contention
//! (every thread of a grid of up to 2^20 threads on the same addresses); float sums exactly
//! where the inputs make every partial sum representable, else within the worst-case bound of
//! any summation order, `n · ε · Σ|x|`.

#![allow(clippy::needless_range_loop)]

#[path = "../common/device_kernels.rs"]
mod device_kernels;
#[path = "../common/failed.rs"]
mod failed;
#[path = "../common/half_ref.rs"]
mod half_ref;

mod arch;
mod async_copy;
mod atomics;
mod cluster;
mod collectives;
mod coop;
mod diag;
mod examples;
mod half;
mod mbarrier;
mod memory;
mod mma;
mod shared;
mod tma;
mod warp;
mod wgmma;

use ferrocuda::abi::{DType, Element};
use ferrocuda::host::driver;
use ferrocuda::{Arg, ArrayDesc, DeviceArray, LaunchOptions, Module, Scalar, StreamRef};
use libtest_mimic::{Arguments, Failed, Trial};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub use failed::{ensure, err, TestResult};

/// A named test.
pub type Test = (&'static str, fn() -> TestResult);

pub const DEV: usize = 0;
const L: StreamRef = StreamRef::Legacy;

static SEED: AtomicU64 = AtomicU64::new(0);
static MODULE: OnceLock<Result<Module, String>> = OnceLock::new();

pub fn rng(salt: u64) -> StdRng {
    StdRng::seed_from_u64(SEED.load(Ordering::Relaxed) ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

pub fn module() -> Result<&'static Module, Failed> {
    MODULE
        .get_or_init(|| {
            let path = device_kernels::manifest_path()?;
            Module::from_manifest_file(&path).map_err(|e| format!("{}: {e}", path.display()))
        })
        .as_ref()
        .map_err(err)
}

/// A device array with these elements.
pub fn up<T: Element>(v: &[T]) -> Result<DeviceArray<T>, Failed> {
    DeviceArray::from_ndarray(&ndarray::Array1::from_vec(v.to_vec()), DEV, L).map_err(err)
}

/// The elements of a device array (waits for the work on its stream).
pub fn down<T: Element + Default>(a: &DeviceArray<T>) -> Result<Vec<T>, Failed> {
    let mut v = vec![T::default(); a.len()];
    a.copy_to_host(&mut v).map_err(err)?;
    Ok(v)
}

/// `a`'s memory described as an array of `dtype` (same element size): how `float16` arrays
/// reach kernels whose parameters are `Slice<f16>` while the host holds their bits as `u16`.
pub fn as_dtype<T: Element>(a: &DeviceArray<T>, dtype: DType) -> Result<ArrayDesc, Failed> {
    assert_eq!(dtype.itemsize(), std::mem::size_of::<T>());
    ArrayDesc::from_parts(
        dtype,
        a.shape(),
        None,
        a.device_ptr(),
        false,
        Some(a.stream()),
    )
    .map_err(err)
}

pub fn scalar(s: impl Into<Scalar>) -> Arg<'static> {
    Arg::Scalar(s.into())
}

/// Launches kernel `name` with an explicit grid and block.
pub fn launch(
    name: &str,
    args: &[Arg<'_>],
    grid: [u32; 3],
    block: [u32; 3],
    smem: u32,
) -> TestResult {
    let k = module()?.kernel(name).map_err(err)?;
    let opts = LaunchOptions {
        grid: Some(grid),
        block: Some(block),
        shared_mem_bytes: smem,
        ..LaunchOptions::default()
    };
    // SAFETY: the test kernels are memory-safe for any arguments that pass the launch checks
    // (bounds-checked accesses; dynamic shared memory sized by the caller as documented).
    unsafe { k.launch(args, &opts) }.map_err(|e| err(format!("{name}: {e}")))?;
    Ok(())
}

/// 1-D launch of `threads` threads in blocks of `block`.
pub fn launch_1d(name: &str, args: &[Arg<'_>], threads: usize, block: u32) -> TestResult {
    let grid = threads.div_ceil(block as usize).clamp(1, 1 << 20) as u32;
    launch(name, args, [grid, 1, 1], [block, 1, 1], 0)
}

/// Block shapes for the block-level tests: sizes 1, 31, 32, 33, 96, 100, 256, 1000, 1024
/// (1-D), and 2-D and 3-D shapes whose sizes are not multiples of 32.
pub const BLOCKS: &[[u32; 3]] = &[
    [1, 1, 1],
    [31, 1, 1],
    [32, 1, 1],
    [33, 1, 1],
    [96, 1, 1],
    [100, 1, 1],
    [256, 1, 1],
    [1000, 1, 1],
    [1024, 1, 1],
    [8, 12, 1],
    [5, 7, 3],
    [32, 32, 1],
];

fn main() {
    if let Ok(scenario) = std::env::var("FERROCUDA_DEVICE_CHILD") {
        std::process::exit(diag::run_child(&scenario));
    }
    let args = Arguments::from_args();
    let seed = ferrocuda_config::TEST_SEED
        .count()
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    SEED.store(seed, Ordering::Relaxed);
    let gpu = match driver::device_count() {
        Ok(n) if n > 0 => {
            eprintln!(
                "device GPU tests: {n} CUDA device(s); seed {seed} (FERROCUDA_TEST_SEED repeats)"
            );
            true
        }
        Ok(_) => {
            eprintln!(
                "device GPU tests SKIPPED (reported as ignored): the CUDA driver reports no device"
            );
            false
        }
        Err(e) => {
            eprintln!("device GPU tests SKIPPED (reported as ignored): {e}");
            false
        }
    };
    let mut tests: Vec<Test> = Vec::new();
    tests.extend(arch::TESTS);
    tests.extend(coop::TESTS);
    tests.extend(cluster::TESTS);
    tests.extend(atomics::TESTS);
    tests.extend(warp::TESTS);
    tests.extend(collectives::TESTS);
    tests.extend(half::TESTS);
    tests.extend(shared::TESTS);
    tests.extend(async_copy::TESTS);
    tests.extend(mbarrier::TESTS);
    tests.extend(examples::TESTS);
    tests.extend(memory::TESTS);
    tests.extend(mma::TESTS);
    tests.extend(diag::TESTS);
    tests.extend(wgmma::TESTS);
    tests.extend(tma::TESTS);
    let trials = tests
        .into_iter()
        .map(|(name, f)| Trial::test(name, f).with_ignored_flag(!gpu))
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
