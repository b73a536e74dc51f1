//! The porting guide's kernels (vector add, naive and tiled GEMM) against host references.

use crate::{down, ensure, launch, launch_1d, rng, scalar, up, TestResult};
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("example_vec_add", vec_add),
    ("example_gemm_naive", || gemm("gemm_naive")),
    ("example_gemm_tiled", || gemm("gemm_tiled")),
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
