//! Hopper warpgroup MMA (sm_90a, `tests/device-kernels/src/wgmma.rs`): one warpgroup's
//! `out = a · bᵀ` for every shape (N = 16, 64, 128, 256), input type (bf16, f16, tf32) and
//! swizzle mode, and A from registers, against a reference in f64.
//!
//! Inputs: random values in [-2, 2) rounded to the input type, with adversarial entries
//! mixed in (zeros of both signs, subnormals, large magnitudes whose products stay finite in
//! f32). tf32 inputs are f32 values with the 13 low mantissa bits clear (exact in tf32, so
//! how the hardware drops those bits does not matter). Products of 16-bit (and tf32) values
//! are exact in f32; the tensor cores add them in f32, so every element must be within
//! `(K + 2) · 2⁻²³ · Σ|aᵢbᵢ|` (plus 2⁻¹²⁶ for flushed subnormal products) of the exact sum.
//! Outputs are poisoned (NaN) before each launch; every element is checked.

use crate::{down, ensure, err, launch, module, rng, scalar, up, TestResult, DEV};
use ferrocuda::host::driver::Context;
use ferrocuda::Arg;
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("wgmma_bf16_shapes_and_swizzles", test_bf16),
    ("wgmma_f16_and_tf32", test_f16_tf32),
    ("wgmma_bf16_a_from_registers", test_rs),
];

/// `Some(())` when the device runs sm_90a code; the tests print why they pass trivially
/// otherwise (every kernel is refused there, which `arch_parts_and_family_choice` checks).
fn sm90a() -> Result<bool, libtest_mimic::Failed> {
    let cc = Context::get(DEV).map_err(err)?.compute_capability();
    if cc != (9, 0) {
        eprintln!("wgmma tests: device is {cc:?}, not 9.0 (sm_90a): nothing to run");
    }
    Ok(cc == (9, 0))
}

/// A random input value in [-2, 2), or (one in 16) an adversarial one.
fn value(r: &mut StdRng) -> f64 {
    match r.random_range(0..32u32) {
        0 => 0.0,
        1 => -0.0,
        2 => 1e-39 * if r.random::<bool>() { 1.0 } else { -1.0 },
        3 => 2f64.powi(40) * r.random_range(-1.0..1.0),
        _ => r.random_range(-2.0..2.0),
    }
}

/// `a · bᵀ` (`a`: m × k, `b`: n × k, row-major) in f64, and Σ|aᵢbᵢ| per element.
fn reference(a: &[f64], b: &[f64], m: usize, n: usize, k: usize) -> Vec<(f64, f64)> {
    let mut out = vec![(0.0, 0.0); m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut abs) = (0.0, 0.0);
            for l in 0..k {
                let p = a[i * k + l] * b[j * k + l];
                s += p;
                abs += p.abs();
            }
            out[i * n + j] = (s, abs);
        }
    }
    out
}

fn check(what: &str, got: &[f32], want: &[(f64, f64)], n: usize, k: usize) -> TestResult {
    for (e, (&g, &(w, abs))) in got.iter().zip(want).enumerate() {
        let bound = (k as f64 + 2.0) * 2f64.powi(-23) * abs + 2f64.powi(-126);
        ensure((g as f64 - w).abs() <= bound, || {
            format!(
                "{what}: out[{}, {}] = {g}, expected {w} (bound {bound:e})",
                e / n,
                e % n
            )
        })?;
    }
    Ok(())
}

/// K of a swizzle mode for elements of `size` bytes (the kernels' rule).
fn k_of(swizzle: u32, size: usize) -> usize {
    let row_bytes = [16, 32, 64, 128][swizzle as usize];
    (row_bytes as usize).max(32) / size
}

fn run_16bit<T: ferrocuda::abi::Element + Default + Copy>(
    name: &str,
    n: usize,
    swizzle: u32,
    r: &mut StdRng,
    round: impl Fn(f64) -> T,
    widen: impl Fn(T) -> f64,
) -> TestResult {
    let k = k_of(swizzle, 2);
    let a: Vec<T> = (0..64 * k).map(|_| round(value(r))).collect();
    let b: Vec<T> = (0..n * k).map(|_| round(value(r))).collect();
    let (da, db) = (up(&a)?, up(&b)?);
    let out = up(&vec![f32::NAN; 64 * n])?;
    launch(
        name,
        &[
            Arg::Array(da.desc()),
            Arg::Array(db.desc()),
            Arg::Array(out.desc()),
            scalar(swizzle),
        ],
        [1, 1, 1],
        [128, 1, 1],
        0,
    )?;
    let af: Vec<f64> = a.iter().map(|&x| widen(x)).collect();
    let bf: Vec<f64> = b.iter().map(|&x| widen(x)).collect();
    let want = reference(&af, &bf, 64, n, k);
    check(
        &format!("{name} swizzle {swizzle}"),
        &down(&out)?,
        &want,
        n,
        k,
    )
}

fn test_bf16() -> TestResult {
    if !sm90a()? {
        return Ok(());
    }
    let mut r = rng(0x6d6d_6101);
    for (name, n) in [
        ("wgmma_bf16_n16", 16),
        ("wgmma_bf16_n64", 64),
        ("wgmma_bf16_n128", 128),
        ("wgmma_bf16_n256", 256),
    ] {
        for swizzle in 0..4 {
            run_16bit(name, n, swizzle, &mut r, bf16::from_f64, bf16::to_f64)?;
        }
    }
    Ok(())
}

fn test_f16_tf32() -> TestResult {
    if !sm90a()? {
        return Ok(());
    }
    let mut r = rng(0x6d6d_6102);
    // f16: keep magnitudes inside f16's range (the large entries would overflow).
    let f16_round = |x: f64| {
        f16::from_f64(if x.abs() > 1e4 {
            x.signum() * 1000.0
        } else {
            x
        })
    };
    for swizzle in 0..4 {
        run_16bit("wgmma_f16_n64", 64, swizzle, &mut r, f16_round, f16::to_f64)?;
    }
    let tf32 = |x: f64| f32::from_bits((x as f32).to_bits() & !0x1FFF);
    for swizzle in 0..4 {
        let k = k_of(swizzle, 4);
        let a: Vec<f32> = (0..64 * k).map(|_| tf32(value(&mut r))).collect();
        let b: Vec<f32> = (0..64 * k).map(|_| tf32(value(&mut r))).collect();
        let (da, db) = (up(&a)?, up(&b)?);
        let out = up(&vec![f32::NAN; 64 * 64])?;
        launch(
            "wgmma_tf32_n64",
            &[
                Arg::Array(da.desc()),
                Arg::Array(db.desc()),
                Arg::Array(out.desc()),
                scalar(swizzle),
            ],
            [1, 1, 1],
            [128, 1, 1],
            0,
        )?;
        let af: Vec<f64> = a.iter().map(|&x| x as f64).collect();
        let bf: Vec<f64> = b.iter().map(|&x| x as f64).collect();
        let want = reference(&af, &bf, 64, 64, k);
        check(
            &format!("wgmma_tf32_n64 swizzle {swizzle}"),
            &down(&out)?,
            &want,
            64,
            k,
        )?;
    }
    Ok(())
}

fn test_rs() -> TestResult {
    if !sm90a()? {
        return Ok(());
    }
    let _ = module()?;
    let mut r = rng(0x6d6d_6103);
    for _ in 0..3 {
        let a: Vec<bf16> = (0..64 * 16)
            .map(|_| bf16::from_f64(value(&mut r)))
            .collect();
        let b: Vec<bf16> = (0..64 * 16)
            .map(|_| bf16::from_f64(r.random_range(-1.0..1.0)))
            .collect();
        let (da, db) = (up(&a)?, up(&b)?);
        let out = up(&vec![f32::NAN; 64 * 64])?;
        let out2 = up(&vec![f32::NAN; 64 * 64])?;
        launch(
            "wgmma_bf16_rs_n64",
            &[
                Arg::Array(da.desc()),
                Arg::Array(db.desc()),
                Arg::Array(out.desc()),
                Arg::Array(out2.desc()),
            ],
            [1, 1, 1],
            [128, 1, 1],
            0,
        )?;
        let af: Vec<f64> = a.iter().map(|x| x.to_f64()).collect();
        let bf: Vec<f64> = b.iter().map(|x| x.to_f64()).collect();
        let got = down(&out)?;
        check(
            "wgmma_bf16_rs_n64 (A in registers)",
            &got,
            &reference(&af, &bf, 64, 64, 16),
            64,
            16,
        )?;
        // The second product's A: the first product's columns 0..16, rounded to bf16 by the
        // device (`cvt.rn.bf16.f32`, as `half`'s `from_f32`).
        let a2: Vec<f64> = (0..64 * 16)
            .map(|e| bf16::from_f32(got[(e / 16) * 64 + e % 16]).to_f64())
            .collect();
        check(
            "wgmma_bf16_rs_n64 (accumulator fed back as A)",
            &down(&out2)?,
            &reference(&a2, &bf, 64, 64, 16),
            64,
            16,
        )?;
    }
    Ok(())
}
