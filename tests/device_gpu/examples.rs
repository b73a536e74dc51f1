//! The porting guide's kernels (vector add, naive and tiled GEMM) and the writing guide's
//! family with a strided variant (`layout_add`) against host references.

use crate::{down, ensure, err, launch, launch_1d, module, rng, scalar, up, TestResult};
use ferrocuda::abi::DType;
use ferrocuda::{Arg, ArrayDesc, DeviceArray, LaunchOptions};
use libtest_mimic::Failed;
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("example_vec_add", vec_add),
    ("example_gemm_naive", || gemm("gemm_naive")),
    ("example_gemm_tiled", || gemm("gemm_tiled")),
    ("example_layout_add", layout_add),
];

fn vec_add() -> TestResult {
    let mut r = rng(71);
    for n in [1usize, 31, 1_000_003] {
        let a: Vec<f32> = (0..n).map(|_| r.random_range(-1e3f32..1e3)).collect();
        let b: Vec<f32> = (0..n).map(|_| r.random_range(-1e3f32..1e3)).collect();
        let (da, db, dc) = (up(&a)?, up(&b)?, up(&vec![f32::NAN; n])?);
        launch_1d("vec_add", &[da.arg(), db.arg(), dc.arg()], n, 256)?;
        let c = down(&dc)?;
        for i in 0..n {
            // One IEEE addition: the GPU's result is the host's, bit for bit.
            ensure(c[i].to_bits() == (a[i] + b[i]).to_bits(), || {
                format!("n {n}: c[{i}] = {}, want {}", c[i], a[i] + b[i])
            })?;
        }
    }
    Ok(())
}

/// Random m×k and k×n matrices; every element of c against the f64 product, within the
/// worst-case bound of any f32 summation order (`1.01 · k · 2^-24 · Σ|a·b|`, plus the
/// rounding of the products).
fn gemm(kernel: &str) -> TestResult {
    let mut r = rng(kernel.len() as u64 + 72);
    for (m, n, k) in [
        (1usize, 1usize, 1usize),
        (16, 16, 16),
        (17, 33, 65),
        (128, 96, 200),
        (257, 129, 63),
    ] {
        let a: Vec<f32> = (0..m * k).map(|_| r.random_range(-1f32..1.0)).collect();
        let b: Vec<f32> = (0..k * n).map(|_| r.random_range(-1f32..1.0)).collect();
        let (da, db, dc) = (up(&a)?, up(&b)?, up(&vec![f32::NAN; m * n])?);
        let grid = [n.div_ceil(16) as u32, m.div_ceil(16) as u32, 1];
        let args = [
            da.arg(),
            db.arg(),
            dc.arg(),
            scalar(m as u32),
            scalar(n as u32),
            scalar(k as u32),
        ];
        launch(kernel, &args, grid, [16, 16, 1], 0)?;
        let c = down(&dc)?;
        for i in 0..m {
            for j in 0..n {
                let (mut exact, mut mag) = (0f64, 0f64);
                for p in 0..k {
                    let t = a[i * k + p] as f64 * b[p * n + j] as f64;
                    exact += t;
                    mag += t.abs();
                }
                let bound = 1.01 * (k as f64 + 1.0) * 2f64.powi(-24) * mag;
                let got = c[i * n + j] as f64;
                ensure((got - exact).abs() <= bound, || {
                    format!("{kernel} {m}x{n}x{k}: c[{i}][{j}] = {got}, want {exact} ± {bound}")
                })?;
            }
        }
    }
    Ok(())
}

/// `base`'s memory as a float32 array of `shape` with element `strides`, `offset` elements in.
fn view(
    base: &DeviceArray<f32>,
    offset: usize,
    shape: &[usize],
    strides: &[isize],
) -> Result<ArrayDesc, Failed> {
    let bytes: Vec<isize> = strides.iter().map(|s| 4 * s).collect();
    let ptr = base.device_ptr() + 4 * offset as u64;
    ArrayDesc::from_parts(
        DType::F32,
        shape,
        Some(&bytes),
        ptr,
        false,
        Some(base.stream()),
    )
    .map_err(err)
}

/// The family `layout_add` of a kernel crate (not the bundled kernels): `Module::select` runs
/// its contiguous kernel on contiguous arrays and its strided variant on a transposed `a` with
/// a broadcast row `b`; `Kernel::variant_for` of the contiguous kernel does the same. Every
/// element of the output buffer is checked, one past the view's end too.
fn layout_add() -> TestResult {
    let mut r = rng(73);
    let (rows, cols) = (300usize, 257usize);
    let n = rows * cols;
    let a: Vec<f32> = (0..n).map(|_| r.random_range(-1e3f32..1e3)).collect();
    let b: Vec<f32> = (0..n).map(|_| r.random_range(-1e3f32..1e3)).collect();
    let (da, db) = (up(&a)?, up(&b)?);
    let m = module()?;
    // a: a (cols, rows) C array seen transposed; b: row 5 of b broadcast to every row.
    let ta = view(&da, 0, &[rows, cols], &[1, rows as isize])?;
    let row = view(&db, 5 * cols, &[rows, cols], &[0, 1])?;
    let want = |i: usize, j: usize| a[j * rows + i] + b[5 * cols + j];
    for (label, pick_by_family) in [("Module::select", true), ("Kernel::variant_for", false)] {
        let dout = up(&vec![f32::NAN; n + 1])?;
        let out = view(&dout, 0, &[rows, cols], &[cols as isize, 1])?;
        let args = [Arg::Array(&ta), Arg::Array(&row), Arg::Array(&out)];
        let k = if pick_by_family {
            m.select("layout_add", &args).map_err(err)?
        } else {
            m.kernel("layout_add_f32").map_err(err)?.variant_for(&args)
        };
        ensure(k.name() == "layout_add_f32_2d", || {
            format!("{label} chose {}", k.name())
        })?;
        // SAFETY: the test kernels are memory-safe for arguments that pass the checks.
        unsafe { k.launch(&args, &LaunchOptions::default()) }.map_err(err)?;
        let got = down(&dout)?;
        for i in 0..rows {
            for j in 0..cols {
                let (g, w) = (got[i * cols + j], want(i, j));
                ensure(g.to_bits() == w.to_bits(), || {
                    format!("{label}: out[{i}, {j}] = {g}, want {w}")
                })?;
            }
        }
        ensure(got[n].is_nan(), || format!("{label}: wrote past the view"))?;
    }
    // Contiguous arrays: the contiguous kernel.
    let dout = up(&vec![f32::NAN; n])?;
    let c = |d: &DeviceArray<f32>| view(d, 0, &[rows, cols], &[cols as isize, 1]);
    let (ca, cb, co) = (c(&da)?, c(&db)?, c(&dout)?);
    let k = m
        .select(
            "layout_add",
            &[Arg::Array(&ca), Arg::Array(&cb), Arg::Array(&co)],
        )
        .map_err(err)?;
    ensure(k.name() == "layout_add_f32", || {
        format!("contiguous: chose {}", k.name())
    })
}
