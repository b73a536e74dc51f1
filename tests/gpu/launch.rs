//! GPU tests of the launch shape and of the 16-bit float types (a module of `tests/gpu.rs`).
//!
//! * `launch_limits_refused`: a block, grid or dynamic shared memory size beyond the kernel's
//!   or the device's limits is refused before the launch, naming the kernel and the limit —
//!   the poisoned output is untouched afterwards;
//! * `launch_dynamic_shared`: `shared_reverse_f32` with 64 KiB and 200 KiB of dynamic shared
//!   memory (opted in by the launcher), every element against the host;
//! * `launch_nd_grid`: the automatic 2-D and 3-D grids of `index_grid_{2d,3d}` cover every
//!   element of odd shapes (and of a transposed view, and past the device's grid limit
//!   through the kernels' grid-stride loops); their shapes are the documented ones;
//! * `launch_halves`: `add` and `saxpy` on `f16` and `bf16`, against a correctly rounded host
//!   reference (the same rounding as [`Scalar::from_f64`](ferrocuda::Scalar::from_f64)).

use super::{ensure, err, opts, rng, upload, view_of, GpuTest, TestResult, DEV};
use ferrocuda::half::{bf16, f16};
use ferrocuda::host::driver::{self, Context};
use ferrocuda::host::launch::shape;
use ferrocuda::host::scalar::round_f64_to_half;
use ferrocuda::{bundled, kernels, DeviceArray, ErrorKind, LaunchOptions, StreamRef};
use libtest_mimic::Failed;
use rand::RngExt;

pub const TESTS: [GpuTest; 4] = [
    GpuTest::new("launch_limits_refused", test_limits_refused),
    GpuTest::new("launch_dynamic_shared", test_dynamic_shared),
    GpuTest::new("launch_nd_grid", test_nd_grid),
    GpuTest::new("launch_halves", test_halves),
];

const POISON: f32 = -7.25e30;

fn with(f: impl FnOnce(&mut LaunchOptions)) -> LaunchOptions {
    let mut o = opts();
    f(&mut o);
    o
}

/// `launch` must fail with a `Value` error containing every fragment, and leave `out` (all
/// `poison`) untouched once the device is idle.
fn refused<T: ferrocuda::abi::Element + PartialEq + std::fmt::Debug>(
    what: &str,
    out: &DeviceArray<T>,
    poison: T,
    launch: impl FnOnce() -> ferrocuda::Result<ferrocuda::Launched>,
    fragments: &[&str],
) -> TestResult {
    let e = match launch() {
        Ok(l) => return Err(Failed::from(format!("{what}: launched ({:?})", l.config))),
        Err(e) => e,
    };
    ensure(e.kind() == ErrorKind::Value, || format!("{what}: {e:?}"))?;
    for f in fragments {
        ensure(e.message().contains(f), || {
            format!("{what}: `{f}` not in: {e}")
        })?;
    }
    driver::synchronize_on(DEV, StreamRef::Legacy).map_err(err)?;
    let got = out.to_ndarray().map_err(err)?;
    ensure(got.iter().all(|v| *v == poison), || {
        format!("{what}: the output was written although the launch was refused")
    })
}

fn test_limits_refused() -> TestResult {
    let n = 4096;
    let a = upload(&vec![1.0f32; n])?;
    let out = upload(&vec![POISON; n])?;
    let (a, out) = (&a, &out);
    let add = |o: LaunchOptions| move || kernels::add_f32(a, a, out, &o);
    let device = *Context::get(DEV).map_err(err)?.limits();
    let too_wide = device.max_block[0] + 1;
    refused(
        "block x over the device limit",
        out,
        POISON,
        add(with(|o| o.block = Some([too_wide, 1, 1]))),
        &["kernel `add_f32`", "MAX_BLOCK_DIM_X"],
    )?;
    refused(
        "2048 threads",
        out,
        POISON,
        add(with(|o| o.block = Some([64, 32, 1]))),
        &["kernel `add_f32`", "2048 threads", "at most"],
    )?;
    refused(
        "grid y over the device limit",
        out,
        POISON,
        add(with(|o| o.grid = Some([1, device.max_grid[1] + 1, 1]))),
        &["kernel `add_f32`", "MAX_GRID_DIM_Y"],
    )?;
    refused(
        "zero grid",
        out,
        POISON,
        add(with(|o| o.grid = Some([0, 1, 1]))),
        &["zero extent"],
    )?;
    let too_much = device.shared_optin + 16;
    refused(
        "dynamic shared memory over the device limit",
        out,
        POISON,
        add(with(|o| o.shared_mem_bytes = too_much)),
        &["kernel `add_f32`", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"],
    )?;
    // The kernels' own declarations.
    let y = upload(&vec![POISON; n])?;
    refused(
        "dynamic shared memory not a whole number of f32",
        &y,
        POISON,
        || kernels::shared_reverse_f32(a, &y, &with(|o| o.shared_mem_bytes = 1026)),
        &["kernel `shared_reverse_f32`", "float32", "4 bytes each"],
    )?;
    let grid = upload(&vec![-5i32; 64])?;
    let g2 = view_of(&grid, 0, &[8, 8], &[8, 1], false)?;
    refused(
        "a block other than the declared one",
        &grid,
        -5,
        || kernels::index_grid_2d(&g2, &with(|o| o.block = Some([16, 16, 1]))),
        &["kernel `index_grid_2d` requires block (32, 8, 1)"],
    )?;
    let g3 = view_of(&grid, 0, &[4, 4, 4], &[16, 4, 1], false)?;
    refused(
        "more threads than max_threads",
        &grid,
        -5,
        || kernels::index_grid_3d(&g3, &with(|o| o.block = Some([16, 16, 1]))),
        &["kernel `index_grid_3d`", "max_threads = 128"],
    )?;
    // The same arrays launch fine with a valid shape (nothing sticky was left behind).
    kernels::add_f32(a, a, out, &with(|o| o.block = Some([32, 32, 1]))).map_err(err)?;
    let got = out.to_ndarray().map_err(err)?;
    ensure(got.iter().all(|&v| v == 2.0), || {
        "valid launch after refusals".into()
    })
}

/// The host reference of `shared_reverse_f32` with chunks of `cap` elements.
fn chunk_reversed(x: &[f32], cap: usize) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len());
    for chunk in x.chunks(cap) {
        y.extend(chunk.iter().rev());
    }
    y
}

fn test_dynamic_shared() -> TestResult {
    let device = *Context::get(DEV).map_err(err)?.limits();
    let k = bundled::module().map_err(err)?;
    let kernel = k.kernel("shared_reverse_f32").map_err(err)?;
    let before = kernel.limits(DEV).map_err(err)?;
    eprintln!(
        "shared_reverse_f32: {} bytes of dynamic shared memory without opting in; the device \
         allows {} per block",
        before.dynamic_shared, device.shared_optin
    );
    let mut r = rng(77);
    let n = 1_000_003;
    let x: Vec<f32> = (0..n).map(|_| r.random_range(-1e3f32..1e3)).collect();
    let dx = upload(&x)?;
    for kib in [16u32, 64, 200] {
        let bytes = kib * 1024;
        if bytes + before.static_shared > device.shared_optin {
            eprintln!(
                "launch_dynamic_shared: {kib} KiB SKIPPED: the device allows {} bytes",
                device.shared_optin
            );
            continue;
        }
        let cap = bytes as usize / 4;
        let want = chunk_reversed(&x, cap);
        // The automatic grid, then a small grid whose blocks loop over the chunks.
        for grid in [None, Some([3, 1, 1])] {
            let dy = upload(&vec![POISON; n])?;
            let o = with(|o| {
                o.shared_mem_bytes = bytes;
                o.grid = grid;
            });
            let l = kernels::shared_reverse_f32(&dx, &dy, &o).map_err(err)?;
            let got = dy.to_ndarray().map_err(err)?;
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                ensure(g == w, || {
                    format!(
                        "{kib} KiB grid {:?} element {i}: got {g}, want {w}",
                        l.config
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// `index_grid_*` writes every element's C-order index: checks every element of `base`
/// (`view` covers all of it, in the order `index_of` gives).
fn check_indices(
    what: &str,
    base: &DeviceArray<i32>,
    index_of: impl Fn(usize) -> i32,
) -> TestResult {
    let got = base.to_ndarray().map_err(err)?;
    for (off, &g) in got.iter().enumerate() {
        let want = index_of(off);
        ensure(g == want, || {
            format!("{what}: element at offset {off}: got {g}, want {want}")
        })?;
    }
    Ok(())
}

fn test_nd_grid() -> TestResult {
    let device = *Context::get(DEV).map_err(err)?.limits();
    // 2-D: odd shapes, a single element, a column longer than the grid's y limit allows.
    for shape in [[1usize, 1], [7, 33], [333, 1000], [1025, 3], [600_000, 1]] {
        let n = shape[0] * shape[1];
        let x = upload(&vec![-5i32; n])?;
        let v = view_of(&x, 0, &shape, &[shape[1] as isize, 1], false)?;
        let l = kernels::index_grid_2d(&v, &opts()).map_err(err)?;
        let (grid, block) = l.config.ok_or("nothing launched")?;
        ensure(block == [32, 8, 1], || {
            format!("{shape:?}: block {block:?}")
        })?;
        let want = shape::nd_grid(&shape, 2, block, device.max_grid);
        ensure(grid == want, || {
            format!("{shape:?}: grid {grid:?}, want {want:?}")
        })?;
        check_indices(&format!("2-D {shape:?}"), &x, |off| off as i32)?;
    }
    // A transposed view: element (i, j) of a 33 × 7 view lives at offset i + 33 j.
    let x = upload(&vec![-5i32; 231])?;
    let t = view_of(&x, 0, &[33, 7], &[1, 33], false)?;
    kernels::index_grid_2d(&t, &opts()).map_err(err)?;
    check_indices("transposed", &x, |off| ((off % 33) * 7 + off / 33) as i32)?;
    // The caller's grid: the kernel's loops cover the rest.
    let x = upload(&vec![-5i32; 100 * 77])?;
    let v = view_of(&x, 0, &[100, 77], &[77, 1], false)?;
    kernels::index_grid_2d(&v, &with(|o| o.grid = Some([2, 3, 1]))).map_err(err)?;
    check_indices("caller's grid", &x, |off| off as i32)?;
    // 3-D: the occupancy-derived block, 32 wide, at most max_threads = 128 threads.
    for shape in [
        [1usize, 1, 1],
        [3, 5, 7],
        [2, 65, 33],
        [70, 1, 1],
        [5, 3, 1000],
    ] {
        let n: usize = shape.iter().product();
        let x = upload(&vec![-5i32; n])?;
        let strides = [(shape[1] * shape[2]) as isize, shape[2] as isize, 1];
        let v = view_of(&x, 0, &shape, &strides, false)?;
        let l = kernels::index_grid_3d(&v, &opts()).map_err(err)?;
        let (grid, block) = l.config.ok_or("nothing launched")?;
        let threads: u32 = block.iter().product();
        ensure(block[0] == 32 && threads <= 128, || {
            format!("{shape:?}: block {block:?}")
        })?;
        let want = shape::nd_grid(&shape, 3, block, device.max_grid);
        ensure(grid == want, || {
            format!("{shape:?}: grid {grid:?}, want {want:?}")
        })?;
        check_indices(&format!("3-D {shape:?}"), &x, |off| off as i32)?;
    }
    Ok(())
}

/// A 16-bit float type of the `add` and `saxpy` kernels, with a correctly rounded reference.
trait Half: ferrocuda::abi::Element + std::fmt::Display {
    /// Stored significand bits and exponent bits of the format.
    const FORMAT: (u32, u32);
    fn from_bits(bits: u16) -> Self;
    fn to_bits(self) -> u16;
    fn to_f64(self) -> f64;
    /// `x` rounded once to nearest, ties to even.
    fn round(x: f64) -> Self {
        Self::from_bits(round_f64_to_half(x, Self::FORMAT.0, Self::FORMAT.1))
    }
    fn add(a: &DeviceArray<Self>, b: &DeviceArray<Self>, out: &DeviceArray<Self>) -> Launch;
    fn saxpy(alpha: Self, x: &DeviceArray<Self>, y: &DeviceArray<Self>) -> Launch;
}

type Launch = ferrocuda::Result<ferrocuda::Launched>;

macro_rules! half {
    ($t:ty, $format:expr, $add:path, $saxpy:path) => {
        impl Half for $t {
            const FORMAT: (u32, u32) = $format;
            fn from_bits(bits: u16) -> Self {
                <$t>::from_bits(bits)
            }
            fn to_bits(self) -> u16 {
                <$t>::to_bits(self)
            }
            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }
            fn add(
                a: &DeviceArray<Self>,
                b: &DeviceArray<Self>,
                out: &DeviceArray<Self>,
            ) -> Launch {
                $add(a, b, out, &opts())
            }
            fn saxpy(alpha: Self, x: &DeviceArray<Self>, y: &DeviceArray<Self>) -> Launch {
                $saxpy(alpha, x, y, &opts())
            }
        }
    };
}
half!(f16, (10, 5), kernels::add_f16, kernels::saxpy_f16);
half!(bf16, (7, 8), kernels::add_bf16, kernels::saxpy_bf16);

/// `out = a + b` and `y = alpha * x + y` on values `xs`, `ys` rounded to `H`: every operation
/// rounded once, bit for bit.
fn half_case<H: Half>(xs: &[f64], ys: &[f64], alpha: f64) -> TestResult {
    let name = H::DTYPE.name();
    let n = xs.len();
    let a: Vec<H> = xs.iter().map(|&v| H::round(v)).collect();
    let b: Vec<H> = ys.iter().map(|&v| H::round(v)).collect();
    let (da, db) = (upload(&a)?, upload(&b)?);
    let dout = upload(&vec![H::round(-1.5); n])?;
    H::add(&da, &db, &dout).map_err(err)?;
    let al = H::round(alpha);
    H::saxpy(al, &da, &db).map_err(err)?;
    let (sum, ax) = (
        dout.to_ndarray().map_err(err)?,
        db.to_ndarray().map_err(err)?,
    );
    for i in 0..n {
        let want = H::round(a[i].to_f64() + b[i].to_f64());
        ensure(sum[i].to_bits() == want.to_bits(), || {
            format!(
                "add {name} n={n} [{i}]: {} + {} = {}, want {want}",
                a[i], b[i], sum[i]
            )
        })?;
        let want = H::round(H::round(al.to_f64() * a[i].to_f64()).to_f64() + b[i].to_f64());
        ensure(ax[i].to_bits() == want.to_bits(), || {
            format!("saxpy {name} n={n} [{i}]: got {}, want {want}", ax[i])
        })?;
    }
    Ok(())
}

fn test_halves() -> TestResult {
    let mut r = rng(16);
    for n in [0usize, 1, 7, 8, 9, 4099, (1 << 20) + 3] {
        let xs: Vec<f64> = (0..n).map(|_| r.random_range(-300.0..300.0)).collect();
        let ys: Vec<f64> = (0..n).map(|_| r.random_range(-1e-2..1e-2)).collect();
        let alpha: f64 = r.random_range(-4.0..4.0);
        half_case::<f16>(&xs, &ys, alpha)?;
        half_case::<bf16>(&xs, &ys, alpha)?;
    }
    Ok(())
}
