//! GPU tests of the gallery's typed launchers (`ferrocuda::kernels::*`): one or more kernels of
//! every family on `DeviceArray`s, against host references, outputs poisoned, every element
//! checked — `normalize` (one cooperative launch) against its two-launch version too,
//! `attention` against an f64 reference; and, on
//! any machine, the bundled manifest's argument checks (refused before the driver, naming the
//! argument).
//!
//! Without a GPU the GPU tests are reported as ignored, with the reason printed once. Seed:
//! `FERROCUDA_TEST_SEED` (printed).

#![allow(clippy::needless_range_loop)]

use ferrocuda::abi::DType;
use ferrocuda::half::{bf16, f16};
use ferrocuda::host::driver;
use ferrocuda::{
    bundled, kernels, Arg, ArrayDesc, DeviceArray, ErrorKind, LaunchOptions, Scalar, StreamRef,
};
use libtest_mimic::{Arguments, Failed, Trial};
use ndarray::{Array, Array2, IxDyn};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

#[path = "common/failed.rs"]
mod failed;
use failed::{ensure, err, TestResult};

const L: StreamRef = StreamRef::Legacy;

fn seed() -> u64 {
    ferrocuda_config::TEST_SEED
        .count()
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or(0x5eed)
}

fn upload<T: ferrocuda::abi::Element>(
    v: Vec<T>,
    shape: &[usize],
) -> Result<DeviceArray<T>, Failed> {
    let a = Array::from_shape_vec(IxDyn(shape), v).map_err(err)?;
    DeviceArray::from_ndarray(&a, 0, L).map_err(err)
}

fn download<T: ferrocuda::abi::Element>(a: &DeviceArray<T>) -> Result<Vec<T>, Failed> {
    Ok(a.to_ndarray().map_err(err)?.iter().copied().collect())
}

fn opts() -> LaunchOptions {
    LaunchOptions::default()
}

fn reductions() -> TestResult {
    let mut r = StdRng::seed_from_u64(seed());
    for n in [0usize, 1, 7, 1000, 4099, (1 << 20) + 3] {
        let x: Vec<f32> = (0..n).map(|_| r.random_range(-1.0f32..1.0)).collect();
        let dx = upload(x.clone(), &[n])?;
        let out = upload(vec![f32::NAN], &[1])?;
        kernels::sum_f32(&dx, &out, &opts()).map_err(err)?;
        let exact: f64 = x.iter().map(|&v| v as f64).sum();
        let mag: f64 = x.iter().map(|&v| v.abs() as f64).sum();
        let got = download(&out)?[0] as f64;
        // A tree of sums at most 64 deep: |error| <= 64·ε·Σ|x|.
        ensure(
            (got - exact).abs() <= 64.0 * f32::EPSILON as f64 / 2.0 * mag + 1e-30,
            || format!("sum of {n}: {got} vs {exact}"),
        )?;
        let xi: Vec<i32> = (0..n)
            .map(|_| r.random_range(-(1 << 30)..(1 << 30)))
            .collect();
        let di = upload(xi.clone(), &[n])?;
        let si = upload(vec![-7i64], &[1])?;
        kernels::sum_i32(&di, &si, &opts()).map_err(err)?;
        let want: i64 = xi.iter().map(|&v| v as i64).sum();
        ensure(download(&si)?[0] == want, || format!("sum_i32 of {n}"))?;
        if n > 0 {
            let m = upload(vec![0i32], &[1])?;
            kernels::max_i32(&di, &m, &opts()).map_err(err)?;
            ensure(download(&m)?[0] == *xi.iter().max().unwrap(), || {
                format!("max_i32 of {n}")
            })?;
            kernels::min_f32(&dx, &out, &opts()).map_err(err)?;
            let lo = x.iter().copied().fold(f32::INFINITY, f32::min);
            ensure(download(&out)?[0] == lo, || format!("min_f32 of {n}"))?;
        }
    }
    Ok(())
}

fn histogram() -> TestResult {
    let mut r = StdRng::seed_from_u64(seed() ^ 1);
    for n in [0usize, 1, 1000, (1 << 20) + 5] {
        let x: Vec<u8> = (0..n).map(|_| r.random_range(0..=255u8)).collect();
        let dx = upload(x.clone(), &[n])?;
        let bins = upload(vec![-1i64; 256], &[256])?;
        kernels::histogram_u8(&dx, &bins, 0.0, 256.0, &opts()).map_err(err)?;
        let mut want = vec![0i64; 256];
        for &v in &x {
            want[v as usize] += 1;
        }
        ensure(download(&bins)? == want, || {
            format!("histogram of {n} bytes")
        })?;
        // 10 bins over [0, 255]: width 25.5; 255 itself counts in the last bin.
        let ten = upload(vec![-1i64; 10], &[10])?;
        kernels::histogram_u8(&dx, &ten, 0.0, 255.0, &opts()).map_err(err)?;
        let mut want = vec![0i64; 10];
        for &v in &x {
            want[((v as f64 / 25.5) as usize).min(9)] += 1;
        }
        ensure(download(&ten)? == want, || {
            format!("10-bin histogram of {n} bytes")
        })?;
    }
    Ok(())
}

fn softmax() -> TestResult {
    let mut r = StdRng::seed_from_u64(seed() ^ 2);
    for (rows, cols) in [(3usize, 5usize), (33, 1024), (5, 4096), (2, 9001)] {
        let x: Vec<f32> = (0..rows * cols)
            .map(|_| r.random_range(-8.0f32..8.0))
            .collect();
        let dx = upload(x.clone(), &[rows, cols])?;
        let out = upload(vec![f32::NAN; rows * cols], &[rows, cols])?;
        kernels::softmax_f32(&dx, &out, &opts()).map_err(err)?;
        let got = download(&out)?;
        for i in 0..rows {
            let row = &x[i * cols..(i + 1) * cols];
            let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
            for j in 0..cols {
                let want = (row[j] as f64 - m).exp() / s;
                let g = got[i * cols + j] as f64;
                // libdevice exp (≤ 2 ulp), a sum and a reciprocal in f32: 16 ulp.
                ensure((g - want).abs() <= 16.0 * 6e-8 * want.abs() + 1e-30, || {
                    format!("softmax ({rows}, {cols}) at ({i}, {j}): {g} vs {want}")
                })?;
            }
        }
    }
    Ok(())
}

/// `matmul` (`c = α·a@b + β·c`, f32) against f64, every element: shapes of one element,
/// partial tiles in M, N and K, K of one to four `k` tiles and a remainder (the three stages,
/// the prologue, the remainder tile's zero-filled rows and the copies zero-filled past the
/// last tile); each with `b` row-major (128×256 tiles) and with `b` contiguous along K
/// (`x @ w.T`: two 128-thread groups of 128×128 tiles per block, a group past the last tile
/// where their count is odd), and in 128-thread blocks (one such group).
fn matmul() -> TestResult {
    let mut r = StdRng::seed_from_u64(seed() ^ 3);
    let kernel = bundled::module()
        .map_err(err)?
        .kernel("matmul_f32")
        .map_err(err)?;
    for (m, k, n) in [
        (1usize, 1usize, 1usize),
        (127, 1, 129),
        (130, 37, 257),
        (256, 256, 256),
        (129, 9, 513),
        (131, 8, 260),
        (128, 16, 256),
        (200, 24, 300),
        (257, 33, 511),
        (300, 17, 100),
    ] {
        let a: Vec<f32> = (0..m * k).map(|_| r.random_range(-1.0f32..1.0)).collect();
        let b: Vec<f32> = (0..k * n).map(|_| r.random_range(-1.0f32..1.0)).collect();
        let c0: Vec<f32> = (0..m * n).map(|_| r.random_range(-1.0f32..1.0)).collect();
        let (a2, b2) = (
            Array2::from_shape_vec((m, k), a.iter().map(|&v| v as f64).collect()).map_err(err)?,
            Array2::from_shape_vec((k, n), b.iter().map(|&v| v as f64).collect()).map_err(err)?,
        );
        let p = a2.dot(&b2);
        let check = |got: &[f32], what: &str| -> TestResult {
            for i in 0..m {
                for j in 0..n {
                    let want = 1.5 * p[[i, j]] - 0.5 * c0[i * n + j] as f64;
                    // K + 2 roundings of terms below 1.5·K + 0.5 in magnitude.
                    let tol = (k as f64 + 2.0) * 6e-8 * (1.5 * k as f64 + 0.5);
                    ensure((got[i * n + j] as f64 - want).abs() <= tol, || {
                        format!("matmul_f32 {what} {m}×{k}×{n} at ({i}, {j})")
                    })?;
                }
            }
            Ok(())
        };
        // `b` transposed in memory: the buffer holds the (n, k) matrix in C order.
        let bt: Vec<f32> = (0..n * k).map(|e| b[(e % k) * n + e / k]).collect();
        let (da, db, dbt) = (
            upload(a, &[m, k])?,
            upload(b, &[k, n])?,
            upload(bt, &[n * k])?,
        );
        let dc = upload(c0.clone(), &[m, n])?;
        kernels::matmul_f32(&da, &db, &dc, 1.5, -0.5, &opts()).map_err(err)?;
        check(&download(&dc)?, "a @ b")?;
        // The views' strides from the layouts' one definition (`Layout::place`).
        let strides = |l: Layout, rows, cols| l.place(rows, cols).2;
        let av = view_of(&da, 0, &[m, k], strides(Layout::C, m, k))?;
        for (bv, layout) in [
            (view_of(&db, 0, &[k, n], strides(Layout::C, k, n))?, "a @ b"),
            (
                view_of(&dbt, 0, &[k, n], strides(Layout::T, k, n))?,
                "x @ w.T",
            ),
        ] {
            for block in [None, Some([128, 1, 1])] {
                if block.is_none() && layout == "a @ b" {
                    continue; // the typed launch above
                }
                let dc = upload(c0.clone(), &[m, n])?;
                let cv = view_of(&dc, 0, &[m, n], strides(Layout::C, m, n))?;
                let args = [
                    Arg::Array(&av),
                    Arg::Array(&bv),
                    Arg::Array(&cv),
                    Arg::Scalar(Scalar::F32(1.5)),
                    Arg::Scalar(Scalar::F32(-0.5)),
                ];
                let o = LaunchOptions { block, ..opts() };
                // SAFETY: the bundled kernels are memory-safe for any arguments that pass the
                // checks.
                unsafe { kernel.launch(&args, &o) }.map_err(err)?;
                check(&download(&dc)?, &format!("{layout}, block {block:?}"))?;
            }
        }
    }
    Ok(())
}

fn stencil_and_scan() -> TestResult {
    let mut r = StdRng::seed_from_u64(seed() ^ 4);
    for (rows, cols) in [(1usize, 1usize), (3, 3), (130, 256), (67, 131)] {
        let x: Vec<f32> = (0..rows * cols)
            .map(|_| r.random_range(-4.0f32..4.0))
            .collect();
        let dx = upload(x.clone(), &[rows, cols])?;
        let out = upload(vec![f32::NAN; rows * cols], &[rows, cols])?;
        kernels::stencil5_f32(&dx, &out, &opts()).map_err(err)?;
        let got = download(&out)?;
        let at = |i: isize, j: isize| {
            if i < 0 || j < 0 || i >= rows as isize || j >= cols as isize {
                0.0
            } else {
                x[i as usize * cols + j as usize]
            }
        };
        for i in 0..rows as isize {
            for j in 0..cols as isize {
                let want =
                    at(i - 1, j) + at(i + 1, j) + at(i, j - 1) + at(i, j + 1) - 4.0 * at(i, j);
                let g = got[i as usize * cols + j as usize];
                ensure(g == want, || {
                    format!("stencil5 ({rows}, {cols}) at ({i}, {j}): {g} vs {want}")
                })?;
            }
        }
    }
    for n in [0usize, 1, 4095, 4097, (1 << 20) + 3] {
        let x: Vec<i32> = (0..n).map(|_| r.random_range(-1000..1000)).collect();
        let dx = upload(x.clone(), &[n])?;
        let out = upload(vec![i64::MIN; n], &[n])?;
        kernels::cumsum_i32_i64(&dx, &out, &opts()).map_err(err)?;
        let got = download(&out)?;
        let mut s = 0i64;
        for i in 0..n {
            s += x[i] as i64;
            ensure(got[i] == s, || format!("cumsum of {n} at {i}"))?;
        }
        let ex = upload(vec![i32::MIN; n], &[n])?;
        kernels::cumsum_exclusive_i32(&dx, &ex, &opts()).map_err(err)?;
        let got = download(&ex)?;
        let mut s = 0i32;
        for i in 0..n {
            ensure(got[i] == s, || format!("exclusive cumsum of {n} at {i}"))?;
            s = s.wrapping_add(x[i]);
        }
    }
    Ok(())
}

fn activations() -> TestResult {
    let n = 10007usize;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 - 5000.0) / 500.0).collect();
    let dx = upload(x.clone(), &[n])?;
    let out = upload(vec![f32::NAN; n], &[n])?;
    kernels::silu_f32(&dx, &out, &opts()).map_err(err)?;
    for (i, g) in download(&out)?.into_iter().enumerate() {
        let v = x[i] as f64;
        let want = v / (1.0 + (-v).exp());
        ensure(
            (g as f64 - want).abs() <= 8.0 * 6e-8 * (want.abs() + v.abs()),
            || format!("silu({v})"),
        )?;
    }
    // axpy on float16 and bfloat16 data: one f32 fma, one rounding to the storage type.
    let xs: Vec<f32> = (0..n).map(|i| i as f32 / 100.0).collect();
    let ys: Vec<f32> = (0..n).map(|i| 1.0 - i as f32 / 300.0).collect();
    macro_rules! axpy {
        ($t:ty, $launch:path) => {{
            let x: Vec<$t> = xs.iter().map(|&v| <$t>::from_f32(v)).collect();
            let y: Vec<$t> = ys.iter().map(|&v| <$t>::from_f32(v)).collect();
            let (dx, dy) = (upload(x.clone(), &[n])?, upload(y.clone(), &[n])?);
            $launch(0.25, &dx, &dy, &opts()).map_err(err)?;
            for (i, g) in download(&dy)?.into_iter().enumerate() {
                let want = <$t>::from_f32(0.25f32.mul_add(x[i].to_f32(), y[i].to_f32()));
                ensure(g.to_bits() == want.to_bits(), || {
                    format!("{} at {i}: {g} vs {want}", stringify!($launch))
                })?;
            }
        }};
    }
    axpy!(f16, kernels::axpy_f16);
    axpy!(bf16, kernels::axpy_bf16);
    // gelu on bfloat16 computes gelu_f32 of the widened values and rounds once: bit for bit
    // the f32 kernel's result rounded on the host (both round to nearest even).
    let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    let (dxb, outb) = (upload(xb.clone(), &[n])?, upload(vec![bf16::NAN; n], &[n])?);
    let wide = upload(xb.iter().map(|v| v.to_f32()).collect(), &[n])?;
    let out32 = upload(vec![f32::NAN; n], &[n])?;
    kernels::gelu_bf16(&dxb, &outb, &opts()).map_err(err)?;
    kernels::gelu_f32(&wide, &out32, &opts()).map_err(err)?;
    for (i, (g, w)) in download(&outb)?
        .into_iter()
        .zip(download(&out32)?)
        .enumerate()
    {
        let want = bf16::from_f32(w);
        ensure(g.to_bits() == want.to_bits(), || {
            format!("gelu_bf16({}) = {g}, want {want}", xb[i])
        })?;
    }
    Ok(())
}

/// `normalize` (one cooperative launch: partial sums, a grid-wide barrier, the division)
/// against its two-launch version (`sum`, then `div_by`) and NumPy's `x / x.sum()` computed
/// here: every element within the sum's error bound of the exact quotient, both versions;
/// the one-launch result bitwise reproducible; zero and NaN sums as NumPy's (inf, NaN).
fn normalize() -> TestResult {
    let mut r = StdRng::seed_from_u64(seed() ^ 0x6e6f);
    for n in [0usize, 1, 7, 1000, 4099, (1 << 20) + 3] {
        // Positive values: Σ|x| = Σx, so the quotient's relative error is the sum's.
        let x: Vec<f32> = (0..n).map(|_| r.random_range(0.0f32..1.0)).collect();
        let exact: f64 = x.iter().map(|&v| v as f64).sum();
        let dx = upload(x.clone(), &[n])?;
        let one = upload(vec![f32::NAN; n], &[n])?;
        kernels::normalize_f32(&dx, &one, &opts()).map_err(err)?;
        let sum = upload(vec![f32::NAN], &[1])?;
        let two = upload(vec![f32::NAN; n], &[n])?;
        kernels::sum_f32(&dx, &sum, &opts()).map_err(err)?;
        kernels::div_by_f32(&dx, &sum, &two, &opts()).map_err(err)?;
        // The sum: a tree at most 64 deep, |error| <= 64·ε·Σx; the division rounds once more.
        let eps = f32::EPSILON as f64 / 2.0;
        for (what, got) in [
            ("normalize", download(&one)?),
            ("sum + div_by", download(&two)?),
        ] {
            for i in 0..n {
                let want = x[i] as f64 / exact;
                let tol = (66.0 * eps) * want.abs() + 1e-45;
                ensure((got[i] as f64 - want).abs() <= tol, || {
                    format!("{what} of {n}: [{i}] = {} vs {want}", got[i])
                })?;
            }
        }
        // Bitwise reproducible run to run (one device, the automatic configuration).
        let again = upload(vec![f32::NAN; n], &[n])?;
        kernels::normalize_f32(&dx, &again, &opts()).map_err(err)?;
        ensure(
            download(&again)?
                .iter()
                .zip(download(&one)?)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            || format!("normalize of {n} differs run to run"),
        )?;
        // f64, mixed signs: the error bound scales with Σ|x| / |Σx|.
        let y: Vec<f64> = (0..n).map(|_| r.random_range(-1.0f64..2.0)).collect();
        let exact: f64 = y.iter().sum();
        let mag: f64 = y.iter().map(|v| v.abs()).sum();
        let dy = upload(y.clone(), &[n])?;
        let out = upload(vec![f64::NAN; n], &[n])?;
        kernels::normalize_f64(&dy, &out, &opts()).map_err(err)?;
        let got = download(&out)?;
        for i in 0..n {
            let want = y[i] / exact;
            let tol = 66.0 * (f64::EPSILON / 2.0) * (y[i].abs() * mag / exact.abs() / exact.abs())
                + f64::EPSILON * want.abs();
            ensure((got[i] - want).abs() <= tol, || {
                format!("normalize_f64 of {n}: [{i}] = {} vs {want}", got[i])
            })?;
        }
    }
    // A zero sum gives ±inf and NaN (0/0), a NaN anywhere NaN everywhere — NumPy's.
    let dz = upload(vec![1.0f32, -1.0, 0.0, 2.0, -2.0], &[5])?;
    let out = upload(vec![0.5f32; 5], &[5])?;
    kernels::normalize_f32(&dz, &out, &opts()).map_err(err)?;
    let got = download(&out)?;
    ensure(
        got[0] == f32::INFINITY && got[1] == f32::NEG_INFINITY && got[2].is_nan(),
        || format!("zero sum: {got:?}"),
    )?;
    let dn = upload(vec![1.0f32, f32::NAN, 3.0], &[3])?;
    let out = upload(vec![0.5f32; 3], &[3])?;
    kernels::normalize_f32(&dn, &out, &opts()).map_err(err)?;
    ensure(download(&out)?.iter().all(|v| v.is_nan()), || {
        "NaN sum".into()
    })?;
    // A caller's grid: any grid up to one resident wave gives the same quotients (within the
    // bound); one beyond is refused before anything runs, with the numbers.
    let n = 100_000;
    let x: Vec<f32> = (0..n).map(|_| r.random_range(0.0f32..1.0)).collect();
    let exact: f64 = x.iter().map(|&v| v as f64).sum();
    let dx = upload(x.clone(), &[n])?;
    let m = bundled::module().map_err(err)?;
    let k = m.kernel("normalize_f32").map_err(err)?;
    let out = upload(vec![f32::NAN; n], &[n])?;
    let args = [Arg::Array(dx.desc()), Arg::Array(out.desc())];
    let wave = k
        .prepare(&args, &opts())
        .map_err(err)?
        .config()
        .ok_or_else(|| err("normalize: no configuration"))?
        .0;
    ensure(wave[1] == 1 && wave[2] == 1 && wave[0] >= 1, || {
        format!("normalize's automatic grid {wave:?} is not one 1-D wave")
    })?;
    for grid in [[1, 1, 1], [3, 2, 1], [wave[0], 1, 1]] {
        let o = LaunchOptions {
            grid: Some(grid),
            ..opts()
        };
        // SAFETY: the bundled kernels are memory-safe for any arguments that pass the checks.
        let launched = unsafe { k.launch(&args, &o) }.map_err(err)?;
        let got = download(&out)?;
        // A small grid gives each thread a longer chain of additions (four accumulators over
        // its grid-stride share): the bound grows by its length.
        let threads = launched.config.map_or(1, |(g, b)| {
            g.iter().chain(&b).map(|&v| v as usize).product::<usize>()
        });
        let depth = 66.0 + n.div_ceil(4 * threads) as f64;
        let eps = f32::EPSILON as f64 / 2.0;
        for i in 0..n {
            let want = x[i] as f64 / exact;
            ensure(
                (got[i] as f64 - want).abs() <= depth * eps * want + 1e-45,
                || format!("normalize with grid {grid:?}: [{i}] = {} vs {want}", got[i]),
            )?;
        }
    }
    let o = LaunchOptions {
        grid: Some([wave[0] + 1, 1, 1]),
        ..opts()
    };
    // SAFETY: as above (refused before the launch).
    let e = unsafe { k.launch(&args, &o) }.unwrap_err();
    ensure(
        e.kind() == ErrorKind::Value
            && e.to_string().contains("normalize_f32")
            && e.to_string().contains(&format!("at most {}", wave[0])),
        || format!("a grid beyond the wave: {e}"),
    )?;
    Ok(())
}

/// The bundled manifest's requirements, through the launch's first phase: refused before any
/// driver call, naming the argument (no GPU needed).
fn argument_checks() -> TestResult {
    let m = bundled::module().map_err(err)?;
    let d = |dtype: DType, shape: &[usize], ptr: u64| {
        ArrayDesc::from_parts(dtype, shape, None, ptr, false, None).map_err(err)
    };
    let f = |v: f64| Arg::Scalar(Scalar::F64(v));
    let (x, bins, none) = (
        d(DType::U8, &[100], 0x10000)?,
        d(DType::I64, &[8], 0x20000)?,
        d(DType::I64, &[0], 0)?,
    );
    let h = m.kernel("histogram_u8").map_err(err)?;
    for (args, arg) in [
        (
            vec![Arg::Array(&x), Arg::Array(&none), f(0.0), f(1.0)],
            "bins",
        ),
        (
            vec![Arg::Array(&x), Arg::Array(&bins), f(1.0), f(1.0)],
            "lo",
        ),
        (
            vec![Arg::Array(&x), Arg::Array(&bins), f(0.0), f(f64::INFINITY)],
            "hi",
        ),
    ] {
        let e = h.prepare(&args, &opts()).unwrap_err();
        ensure(e.kind() == ErrorKind::Value && e.arg() == Some(arg), || {
            format!("histogram: {e}")
        })?;
    }
    let (a, b, c) = (
        d(DType::F32, &[4, 3], 0x1000)?,
        d(DType::F32, &[5, 6], 0x2000)?,
        d(DType::F32, &[4, 6], 0x3000)?,
    );
    let e = m
        .kernel("matmul_f32")
        .map_err(err)?
        .prepare(
            &[
                Arg::Array(&a),
                Arg::Array(&b),
                Arg::Array(&c),
                Arg::Scalar(Scalar::F32(1.0)),
                Arg::Scalar(Scalar::F32(0.0)),
            ],
            &opts(),
        )
        .unwrap_err();
    ensure(
        e.arg() == Some("a") && e.to_string().contains("inner dimensions"),
        || format!("matmul: {e}"),
    )?;
    // The portable linear kernels: K must agree; a bf16 out must not be an input.
    let (x, w7, o32) = (
        d(DType::BF16, &[4, 8], 0x1000)?,
        d(DType::BF16, &[6, 7], 0x2000)?,
        d(DType::F32, &[4, 6], 0x3000)?,
    );
    let e = m
        .kernel("linear_bf16_f32")
        .map_err(err)?
        .prepare(
            &[Arg::Array(&x), Arg::Array(&w7), Arg::Array(&o32)],
            &opts(),
        )
        .unwrap_err();
    ensure(e.to_string().contains("same number of columns"), || {
        format!("linear_bf16_f32: {e}")
    })?;
    let sq = d(DType::BF16, &[4, 4], 0x1000)?;
    let w4 = d(DType::BF16, &[4, 4], 0x2000)?;
    let e = m
        .kernel("linear_bf16")
        .map_err(err)?
        .prepare(
            &[Arg::Array(&sq), Arg::Array(&w4), Arg::Array(&sq)],
            &opts(),
        )
        .unwrap_err();
    ensure(e.to_string().contains("out must not be x"), || {
        format!("linear_bf16 in place: {e}")
    })?;
    // Scratch parameters are not arguments: sum takes (x, out).
    let sum = m.kernel("sum_f32").map_err(err)?;
    ensure(
        sum.signature().params.len() == 2 && sum.signature().scratch.len() == 2,
        || "sum_f32 signature".into(),
    )?;
    // normalize is cooperative, and its grid barrier is a workspace, not an argument — the
    // first (offset 0 whatever the grid), and both persist.
    let norm = m.kernel("normalize_f32").map_err(err)?;
    let names: Vec<&str> = norm
        .signature()
        .scratch
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    ensure(
        norm.signature().params.len() == 2
            && names == ["bar", "partials"]
            && norm.signature().persist.is_some()
            && norm.signature().launch.cooperative,
        || format!("normalize_f32 signature: scratch {names:?}"),
    )?;
    // div_by takes one divisor.
    let (x, two) = (d(DType::F32, &[10], 0x1000)?, d(DType::F32, &[2], 0x2000)?);
    let out = d(DType::F32, &[10], 0x3000)?;
    let e = m
        .kernel("div_by_f32")
        .map_err(err)?
        .prepare(
            &[Arg::Array(&x), Arg::Array(&two), Arg::Array(&out)],
            &opts(),
        )
        .unwrap_err();
    ensure(e.arg() == Some("d"), || format!("div_by: {e}"))?;
    Ok(())
}

/// Dynamic shared memory of the sm_90a `linear` kernels (kernels/src/linear.rs).
const LINEAR_SMEM: u32 = 4 * (128 * 64 * 2 + 256 * 64 * 2) + 2 * 4 * 8 + 1024;

/// `linear` (`out = x · wᵀ`, bf16 in, f32 out) on the tensor cores, against f64: shapes that
/// fill tiles and shapes that leave partial tiles in M, N and K (K a multiple of 8: TMA needs
/// 16-byte row strides), K = 8 and one row; every element within `(K + 2)·2⁻²³·Σ|xw|` (the
/// products are exact in f32; the tensor cores add in f32). On a GPU that does not run sm_90a
/// code the kernel is refused, naming it (checked here too).
fn linear() -> TestResult {
    let module = bundled::module().map_err(err)?;
    let k = module.kernel("linear_bf16_f32_sm90").map_err(err)?;
    let cc = driver::Context::get(0).map_err(err)?.compute_capability();
    let mut r = StdRng::seed_from_u64(seed() ^ 0x11ea);
    for (m, n, kk) in [
        (128usize, 256usize, 64usize),
        (256, 512, 256),
        (200, 300, 72),
        (1, 1, 8),
        (129, 257, 136),
        (512, 384, 1024),
        (1000, 1000, 520),
    ] {
        let x: Vec<bf16> = (0..m * kk)
            .map(|_| bf16::from_f32(r.random_range(-2.0f32..2.0)))
            .collect();
        let w: Vec<bf16> = (0..n * kk)
            .map(|_| bf16::from_f32(r.random_range(-2.0f32..2.0)))
            .collect();
        let dx = upload(x.clone(), &[m, kk])?;
        let dw = upload(w.clone(), &[n, kk])?;
        let out = upload(vec![f32::NAN; m * n], &[m, n])?;
        let args = [
            Arg::Array(dx.desc()),
            Arg::Array(dw.desc()),
            Arg::Array(out.desc()),
        ];
        // The kernel's declared shared memory on one launch, given explicitly on the other;
        // the automatic grid, or persistent clusters of two blocks fewer than the tile
        // pairs (one cluster; three), each taking several.
        let o = LaunchOptions {
            shared_mem_bytes: if m % 2 == 0 { 0 } else { LINEAR_SMEM },
            grid: match m % 3 {
                0 => None,
                1 => Some([2, 1, 1]),
                _ => Some([6, 1, 1]),
            },
            ..opts()
        };
        // SAFETY: the bundled kernels are memory-safe for any arguments that pass the checks.
        let launched = unsafe { k.launch(&args, &o) };
        if !k.runs_on(cc) {
            let e = launched
                .err()
                .ok_or_else(|| err("linear_bf16_f32_sm90 ran on a non-sm_90a GPU"))?;
            ensure(e.kind() == ErrorKind::Unsupported, || {
                format!("refusal: {e}")
            })?;
            return Ok(());
        }
        launched.map_err(err)?;
        // Built in clusters: a grid that is not a whole number of them is refused, naming the
        // kernel.
        let clustered = k.signature().launch.cluster_dims().is_some();
        let odd = LaunchOptions {
            grid: Some([3, 1, 1]),
            ..opts()
        };
        if clustered {
            // SAFETY: as above (refused before any launch).
            let e = unsafe { k.launch(&args, &odd) }
                .err()
                .ok_or_else(|| err("linear_bf16_f32_sm90 launched with 3 blocks"))?;
            ensure(e.to_string().contains("linear_bf16_f32_sm90"), || {
                format!("odd grid: {e}")
            })?;
        }
        let got = download(&out)?;
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut abs) = (0f64, 0f64);
                for l in 0..kk {
                    let p = x[i * kk + l].to_f64() * w[j * kk + l].to_f64();
                    s += p;
                    abs += p.abs();
                }
                let g = got[i * n + j] as f64;
                let bound = (kk as f64 + 2.0) * 2f64.powi(-23) * abs + 1e-30;
                ensure((g - s).abs() <= bound, || {
                    format!("linear {m}x{n}x{kk}: out[{i}, {j}] = {g}, expected {s}")
                })?;
            }
        }
    }
    // The two store paths: a consumer's 64 × 256 slice of a tile inside `out` with unit
    // column stride and rows aligned to 8 bytes is stored through one base pointer (the row
    // pitch from the stride; 16-bit pairs traded between lanes for 8-byte stores), any other
    // slice pair by pair, each checked. Both output types over layouts that take each path —
    // pitch ≠ N at an offset of 8 bytes and reversed rows (a negative pitch) the fast one; an
    // offset of 2 elements (8 bytes for f32: fast; 4 for bf16: checked), an odd offset, an
    // odd pitch and a transposed `out` the checked one — on whole tiles only (256 × 512) and
    // on whole and partial ones (384 × 520); every element, and one past the view, checked.
    use Layout::{Rev, Slice, T};
    let k16 = module.kernel("linear_bf16_sm90").map_err(err)?;
    for (m, n, kk) in [(256usize, 512usize, 64usize), (384, 520, 136)] {
        let (_bx, x, xv) = operand(&mut r, m, kk, Layout::C)?;
        let (_bw, w, wv) = operand(&mut r, n, kk, Layout::C)?;
        let (want, abs) = linear_reference(&xv, &wv, m, n, kk);
        for ol in [
            Slice(4, n + 8),
            Slice(2, n + 6),
            Rev,
            Slice(1, n + 2),
            Slice(0, n + 1),
            T,
        ] {
            let what = format!("{m}x{n}x{kk} out {ol:?}");
            let refs = (&want[..], &abs[..]);
            check_linear_f32_bf16(
                (&k, &k16),
                (&x, &w),
                (m, n, kk),
                ol,
                refs,
                2,
                &opts(),
                &what,
            )?;
        }
    }
    Ok(())
}

/// How a test operand lies in its buffer (`linear_portable`'s operands and outputs, `matmul`'s
/// views).
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// C order.
    C,
    /// Transposed: the buffer holds the (cols, rows) matrix in C order.
    T,
    /// Columns `off..off + cols` of a C-order buffer with rows of `pitch` elements.
    Slice(usize, usize),
    /// The rows reversed (negative row stride).
    Rev,
    /// Every row the buffer's one row (zero row stride).
    Bcast,
}

impl Layout {
    /// The buffer length, the view's offset and its element strides for a (rows, cols) view.
    fn place(self, rows: usize, cols: usize) -> (usize, usize, [isize; 2]) {
        let (r, c) = (rows as isize, cols as isize);
        match self {
            Layout::C => (rows * cols, 0, [c, 1]),
            Layout::T => (rows * cols, 0, [1, r]),
            Layout::Slice(off, pitch) => (rows * pitch, off, [pitch as isize, 1]),
            Layout::Rev => (rows * cols, rows.saturating_sub(1) * cols, [-c, 1]),
            Layout::Bcast => (cols, 0, [0, 1]),
        }
    }
}

/// A `T` array of `shape` over `base`'s memory, `offset` elements in, with element `strides`.
fn view_of<T: ferrocuda::abi::Element, const N: usize>(
    base: &DeviceArray<T>,
    offset: usize,
    shape: &[usize],
    strides: [isize; N],
) -> Result<ArrayDesc, Failed> {
    let size = std::mem::size_of::<T>();
    let bytes = strides.map(|s| s * size as isize);
    let ptr = if shape.iter().product::<usize>() == 0 {
        0
    } else {
        base.device_ptr() + (size * offset) as u64
    };
    ArrayDesc::from_parts(
        T::DTYPE,
        shape,
        Some(&bytes),
        ptr,
        false,
        Some(base.stream()),
    )
    .map_err(err)
}

/// A random bf16 operand of `rows` × `cols` laid out as `layout`: the device buffer, the
/// view's description, and the logical matrix (C order) as f64.
fn operand(
    r: &mut StdRng,
    rows: usize,
    cols: usize,
    layout: Layout,
) -> Result<(DeviceArray<bf16>, ArrayDesc, Vec<f64>), Failed> {
    let (len, off, [s0, s1]) = layout.place(rows, cols);
    let buf: Vec<bf16> = (0..len)
        .map(|_| bf16::from_f32(r.random_range(-2.0f32..2.0)))
        .collect();
    let mut logical = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            let at = off as isize + i as isize * s0 + j as isize * s1;
            logical.push(buf[at as usize].to_f64());
        }
    }
    let d = upload(buf, &[len])?;
    let desc = view_of(&d, off, &[rows, cols], [s0, s1])?;
    Ok((d, desc, logical))
}

/// `x · wᵀ` in f64 and `Σ|x w|` per element (row-major m × n).
fn linear_reference(x: &[f64], w: &[f64], m: usize, n: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut s, mut a) = (vec![0f64; m * n], vec![0f64; m * n]);
    for i in 0..m {
        for j in 0..n {
            let (xi, wj) = (&x[i * k..(i + 1) * k], &w[j * k..(j + 1) * k]);
            for l in 0..k {
                let p = xi[l] * wj[l];
                s[i * n + j] += p;
                a[i * n + j] += p.abs();
            }
        }
    }
    (s, a)
}

/// One launch of a `linear` kernel (`k`, or the family's choice when `k` is `None`) into an
/// `out` of element `T` laid out as `layout` (poisoned with NaN, one element more than the
/// view), every element checked against the f64 reference: `|out − s| ≤ (K + slack)·2⁻²³·Σ|xw|`
/// for f32 (the tensor cores' f32 sums, products exact; `slack` 0 for the portable kernels, 2
/// where the sm_90a kernel may run, as its own test allows), plus the rounding to bf16 (`2⁻⁸`
/// of the computed value) for bf16. Returns the kernel that ran.
#[allow(clippy::too_many_arguments)]
fn check_linear<T: ferrocuda::abi::Element + Into<f64>>(
    k: Option<&ferrocuda::Kernel<'_>>,
    (x, w): (&ArrayDesc, &ArrayDesc),
    (m, n, kk): (usize, usize, usize),
    layout: Layout,
    (want, abs): (&[f64], &[f64]),
    slack: usize,
    nan: T,
    rounding: f64,
    o: &LaunchOptions,
    what: &str,
) -> Result<String, Failed> {
    let (len, off, strides) = layout.place(m, n);
    let dout = upload(vec![nan; len + 1], &[len + 1])?;
    let out = view_of(&dout, off, &[m, n], strides)?;
    let args = [Arg::Array(x), Arg::Array(w), Arg::Array(&out)];
    let module = bundled::module().map_err(err)?;
    let kernel = match k {
        Some(k) => *k,
        None => module.select("linear", &args).map_err(err)?,
    };
    // SAFETY: the bundled kernels are memory-safe for any arguments that pass the checks.
    unsafe { kernel.launch(&args, o) }.map_err(err)?;
    let got = download(&dout)?;
    let name = kernel.name();
    for i in 0..m {
        for j in 0..n {
            let at = off as isize + i as isize * strides[0] + j as isize * strides[1];
            let g: f64 = got[at as usize].into();
            let terms = (kk + slack) as f64;
            let (s, e) = (want[i * n + j], terms * 2f64.powi(-23) * abs[i * n + j]);
            let bound = e + rounding * (s.abs() + e) + 1e-30;
            ensure((g - s).abs() <= bound, || {
                format!("{name} {what}: out[{i}, {j}] = {g}, expected {s} ± {bound}")
            })?;
        }
    }
    let past: f64 = got[len].into();
    ensure(past.is_nan(), || format!("{name} {what}: wrote past out"))?;
    Ok(name.to_string())
}

/// [`check_linear`] of a kernel pair on the same operands: `k32` (f32 out) and `k16` (bf16
/// out, within its rounding, 2⁻⁸ of the value).
#[allow(clippy::too_many_arguments)]
fn check_linear_f32_bf16(
    (k32, k16): (&ferrocuda::Kernel<'_>, &ferrocuda::Kernel<'_>),
    xw: (&ArrayDesc, &ArrayDesc),
    dims: (usize, usize, usize),
    layout: Layout,
    refs: (&[f64], &[f64]),
    slack: usize,
    o: &LaunchOptions,
    what: &str,
) -> TestResult {
    check_linear(
        Some(k32),
        xw,
        dims,
        layout,
        refs,
        slack,
        f32::NAN,
        0.0,
        o,
        what,
    )?;
    check_linear(
        Some(k16),
        xw,
        dims,
        layout,
        refs,
        slack,
        bf16::NAN,
        2f64.powi(-8),
        o,
        what,
    )?;
    Ok(())
}

/// The portable `linear` kernels (`linear_bf16_f32`, `linear_bf16`: sm_80, `mma.sync`), run
/// by name on any GPU from sm_80 — the H100 included, where the family would choose its
/// sm_90a kernel for TMA-able arrays: shapes of one element, K not a multiple of 8, whole and
/// partial tiles in M, N and K, empty arrays and K = 0 (zeros), and views TMA cannot read or
/// the copies must zero-fill (a column slice at an odd offset, one at 8 columns with K = 67, a
/// transposed `x`, `w` and `out`, reversed rows, a broadcast row); small grids (the tile loop
/// stepping over tiles); every element against f64. Then the family's choice on this device —
/// `linear_bf16_f32_sm90` for TMA-able arrays on compute capability 9.0, the portable kernel
/// otherwise and on every other device — through `Module::select` and the typed launcher.
fn linear_portable() -> TestResult {
    use Layout::{Bcast, Rev, Slice, C, T};
    let module = bundled::module().map_err(err)?;
    let k32 = module.kernel("linear_bf16_f32").map_err(err)?;
    let k16 = module.kernel("linear_bf16").map_err(err)?;
    let cc = driver::Context::get(0).map_err(err)?.compute_capability();
    let mut r = StdRng::seed_from_u64(seed() ^ 0x5080);
    let grid = |g: u32| LaunchOptions {
        grid: Some([g, 1, 1]),
        ..opts()
    };
    for (m, n, kk, xl, wl, ol, grids) in [
        (1usize, 1usize, 1usize, C, C, C, &[0u32][..]),
        (7, 5, 3, C, C, C, &[0]),
        (128, 128, 32, C, C, C, &[0, 1]),
        (200, 300, 72, C, C, C, &[0, 1, 3, 5]),
        (1000, 1000, 520, C, C, C, &[0, 7]),
        (1, 300, 520, C, C, C, &[0]),
        (33, 1, 8, C, C, C, &[0]),
        (64, 48, 1, C, C, C, &[0]),
        (0, 5, 3, C, C, C, &[0]),
        (4, 0, 3, C, C, C, &[0]),
        (3, 4, 0, C, C, C, &[0]),
        (200, 300, 72, Slice(1, 80), C, C, &[0]),
        (200, 300, 67, Slice(8, 80), C, T, &[0]),
        (130, 70, 40, T, T, T, &[0, 2]),
        (129, 257, 136, Rev, Bcast, C, &[0]),
        (77, 129, 37, Slice(3, 41), Slice(1, 40), T, &[0]),
    ] {
        let (_bx, x, xv) = operand(&mut r, m, kk, xl)?;
        let (_bw, w, wv) = operand(&mut r, n, kk, wl)?;
        let (want, abs) = linear_reference(&xv, &wv, m, n, kk);
        for &g in grids {
            let o = if g == 0 { opts() } else { grid(g) };
            let what = format!("{m}x{n}x{kk} x {xl:?} w {wl:?} out {ol:?} grid {g}");
            let refs = (&want[..], &abs[..]);
            check_linear_f32_bf16((&k32, &k16), (&x, &w), (m, n, kk), ol, refs, 0, &o, &what)?;
        }
        // The family's choice on this device, for the f32 output.
        if grids[0] == 0 && m * n > 0 {
            // TMA's rule: unit inner stride, row strides of a multiple of 16 bytes (a single
            // row has none), non-empty.
            let rows_ok = |rows: usize| rows == 1 || kk % 8 == 0;
            let tma = matches!((xl, wl), (C, C)) && kk > 0 && rows_ok(m) && rows_ok(n);
            let expect = if cc == (9, 0) && tma {
                "linear_bf16_f32_sm90"
            } else {
                "linear_bf16_f32"
            };
            let what = format!("{m}x{n}x{kk} family");
            let ran = check_linear::<f32>(
                None,
                (&x, &w),
                (m, n, kk),
                ol,
                (&want, &abs),
                2,
                f32::NAN,
                0.0,
                &opts(),
                &what,
            )?;
            ensure(ran == expect, || {
                format!("{what}: the family chose {ran} on {cc:?}, not {expect}")
            })?;
        }
    }
    // The typed launcher of the portable kernel on C-order arrays: its layout variant (the
    // sm_90a kernel) on compute capability 9.0 where TMA takes them, itself elsewhere — on an
    // A100 never the sm_90a kernel, whatever the layouts.
    for (m, n, kk) in [(96usize, 80usize, 64usize), (96, 80, 7)] {
        let xs: Vec<bf16> = (0..m * kk)
            .map(|_| bf16::from_f32(r.random_range(-2.0f32..2.0)))
            .collect();
        let ws: Vec<bf16> = (0..n * kk)
            .map(|_| bf16::from_f32(r.random_range(-2.0f32..2.0)))
            .collect();
        let xv: Vec<f64> = xs.iter().map(|v| v.to_f64()).collect();
        let wv: Vec<f64> = ws.iter().map(|v| v.to_f64()).collect();
        let (want, abs) = linear_reference(&xv, &wv, m, n, kk);
        let (dx, dw) = (upload(xs, &[m, kk])?, upload(ws, &[n, kk])?);
        let out = upload(vec![f32::NAN; m * n], &[m, n])?;
        kernels::linear_bf16_f32(&dx, &dw, &out, &opts()).map_err(err)?;
        let got = download(&out)?;
        for e in 0..m * n {
            let bound = (kk + 2) as f64 * 2f64.powi(-23) * abs[e] + 1e-30;
            ensure((got[e] as f64 - want[e]).abs() <= bound, || {
                format!(
                    "typed launcher {m}x{n}x{kk}: out[{e}] = {}, expected {}",
                    got[e], want[e]
                )
            })?;
        }
    }
    Ok(())
}

/// Which `attention` kernel runs, without a GPU (the selection rule on array descriptions, for
/// an H100 and an A100): for D ≤ 128 the sm_90a kernel where TMA takes the rows (on compute
/// capability 9.0: the three-consumer one for D ≤ 64), the portable one otherwise; for 128 < D ≤ 256 the `_wide` kernel whatever
/// the device and layout (the only one whose conditions hold), by the family and by the typed
/// launchers' variant rule from each kernel; beyond 256 the check names the family's limit.
fn attention_selection() -> TestResult {
    use ferrocuda::host::launch::select::{select_for, Operand};
    let m = bundled::module().map_err(err)?;
    let arr = |shape: [usize; 4], ptr: u64| {
        ArrayDesc::from_parts(DType::BF16, &shape, None, ptr, false, None).map_err(err)
    };
    // `q`, `k`, `v`, `out` (the shapes of `q` and of `k`), scale 0.1, `causal`.
    let qkv = |qs: [usize; 4], ks: [usize; 4]| -> Result<[ArrayDesc; 4], Failed> {
        Ok([
            arr(qs, 0x10_0000)?,
            arr(ks, 0x20_0000)?,
            arr(ks, 0x30_0000)?,
            arr(qs, 0x40_0000)?,
        ])
    };
    fn args_of(a: &[ArrayDesc; 4], causal: u32) -> [Arg<'_>; 6] {
        [
            Arg::Array(&a[0]),
            Arg::Array(&a[1]),
            Arg::Array(&a[2]),
            Arg::Array(&a[3]),
            Arg::Scalar(Scalar::F32(0.1)),
            Arg::Scalar(Scalar::U32(causal)),
        ]
    }
    for (d, sm90, a100) in [
        (48usize, "attention_bf16_d64_sm90", "attention_bf16"),
        (64, "attention_bf16_d64_sm90", "attention_bf16"),
        (72, "attention_bf16_sm90", "attention_bf16"),
        (128, "attention_bf16_sm90", "attention_bf16"),
        (136, "attention_bf16_wide_sm90", "attention_bf16_wide"),
        (256, "attention_bf16_wide_sm90", "attention_bf16_wide"),
    ] {
        let arrays = qkv([2, 4, 100, d], [2, 2, 300, d])?;
        let args = args_of(&arrays, 1);
        let ops: Vec<Operand<'_>> = args.iter().map(Operand::from).collect();
        for (cc, want) in [((9, 0), sm90), ((8, 0), a100)] {
            let by_family = select_for(m.family("attention"), &ops, Some(cc))
                .ok_or_else(|| err(format!("D = {d}: no attention kernel")))?;
            ensure(by_family.name() == want, || {
                format!(
                    "D = {d} on {cc:?}: the family chose {}, not {want}",
                    by_family.name()
                )
            })?;
            for by_name in [
                "attention_bf16",
                "attention_bf16_d64_sm90",
                "attention_bf16_sm90",
                "attention_bf16_wide",
                "attention_bf16_wide_sm90",
            ] {
                let k = m.kernel(by_name).map_err(err)?;
                let chosen = k.variant_on(&ops, Some(cc));
                let h100 = cc == (9, 0);
                // A kernel called by name runs itself or one of its layout variants (each
                // sm_90a kernel is one of each portable kernel, and they of it; the portable
                // kernels are not of each other, nor are the sm_90a ones): the family's
                // choice, except that
                // * the portable wide kernel keeps what no sm_90a kernel takes (it takes every
                //   D ≤ 256 and comes first among its equals), and the wide sm_90a kernel, by
                //   name, keeps every D ≤ 256 it runs;
                // * the narrow sm_90a kernel sends D > 128 to the portable wide kernel (the
                //   wide sm_90a kernel is not its variant), and keeps D ≤ 64 on an H100 (the
                //   sm_90a kernel for D ≤ 64 is not its variant either);
                // * the sm_90a kernel for D ≤ 64 keeps what it takes on an H100 and sends the
                //   rest (and everything on an A100) to the portable kernel of the head
                //   dimension;
                // * the narrow portable kernel's launcher refuses D > 128 where no wide sm_90a
                //   variant runs, naming the wide kernels.
                if d > 128 && by_name == "attention_bf16" && !h100 {
                    let e = ferrocuda::host::launch::check_args(chosen.signature(), &args)
                        .err()
                        .ok_or_else(|| err(format!("D = {d}: {by_name} took it")))?;
                    ensure(
                        e.to_string().contains("the `_wide` kernels take up to 256"),
                        || format!("D = {d}: {by_name}: {e}"),
                    )?;
                    continue;
                }
                let keeps = (by_name == "attention_bf16_wide" && want == "attention_bf16")
                    || (by_name == "attention_bf16_wide_sm90" && h100)
                    || (by_name == "attention_bf16_sm90" && h100 && d <= 128)
                    || (by_name == "attention_bf16_d64_sm90" && h100 && d <= 64);
                let portable_of_d = if d > 128 {
                    "attention_bf16_wide"
                } else {
                    "attention_bf16"
                };
                let want = if keeps {
                    by_name
                } else if (by_name == "attention_bf16_sm90" && d > 128)
                    || by_name == "attention_bf16_d64_sm90"
                {
                    portable_of_d
                } else {
                    want
                };
                ensure(chosen.name() == want, || {
                    format!(
                        "D = {d} on {cc:?}: {by_name}'s launcher chose {}, not {want}",
                        chosen.name()
                    )
                })?;
            }
            ensure(
                ferrocuda::host::launch::check_args(by_family.signature(), &args).is_ok(),
                || format!("D = {d}: {want} refuses its arguments"),
            )?;
        }
    }
    // Beyond 256: no kernel's conditions hold; the check names the family's limit and `q`.
    let arrays = qkv([1, 1, 8, 264], [1, 1, 8, 264])?;
    let args = args_of(&arrays, 0);
    let chosen = m.select("attention", &args).map_err(err)?;
    let e = chosen.prepare(&args, &opts()).unwrap_err();
    ensure(
        e.arg() == Some("q") && e.to_string().contains("must be at most 256"),
        || format!("D = 264: {e}"),
    )?;
    Ok(())
}
/// Attention's exact result for one problem, in f64, with the error bound of the kernels'
/// arithmetic per element (as `python/tests/attention_ref.py` derives it: `P` rounded to bf16
/// before `P · v` — `u = 2⁻⁸` of each weight, doubled for the sum's different rounding — the
/// output's rounding, f32 sums and `ex2.approx` within `2⁻¹⁶` of `Σ p|v| / Σ p`), and each
/// row's log-sum-exp with its bound (`(D + 4)` f32 ulps of the row's largest `|scale|·Σ|q||k|`,
/// `2⁻²⁰` absolute, `2⁻²²` of `|lse|`). `q` (B, H, S_q, D), `k` and `v` (B, H_kv, S_kv, D), C
/// order; query head `h` reads key/value head `h / (H / H_kv)`; the causal mask top-left
/// aligned (key `j` seen by query `i` when `j ≤ i`).
struct AttentionRef {
    out: Vec<f64>,
    tol: Vec<f64>,
    lse: Vec<f64>,
    lse_tol: Vec<f64>,
}

#[allow(clippy::too_many_arguments)]
fn attention_reference(
    (q, k, v): (&[f64], &[f64], &[f64]),
    (b, h, hkv, sq, skv, d): (usize, usize, usize, usize, usize, usize),
    scale: f64,
    causal: bool,
) -> AttentionRef {
    let u = 2f64.powi(-8);
    let n = b * h * sq;
    let mut r = AttentionRef {
        out: vec![0.0; n * d],
        tol: vec![0.0; n * d],
        lse: vec![f64::NEG_INFINITY; n],
        lse_tol: vec![0.0; n],
    };
    let group = h / hkv;
    let mut s = vec![0f64; skv];
    for bi in 0..b {
        for hi in 0..h {
            let kh = (bi * hkv + hi / group) * skv;
            for i in 0..sq {
                let row = (bi * h + hi) * sq + i;
                let qi = &q[row * d..(row + 1) * d];
                let (mut m, mut big) = (f64::NEG_INFINITY, 0f64);
                for j in 0..skv {
                    let kj = &k[(kh + j) * d..(kh + j + 1) * d];
                    let (mut dot, mut mag) = (0f64, 0f64);
                    for c in 0..d {
                        dot += qi[c] * kj[c];
                        mag += (qi[c] * kj[c]).abs();
                    }
                    big = big.max(mag * scale.abs());
                    s[j] = if causal && j > i {
                        f64::NEG_INFINITY
                    } else {
                        dot * scale
                    };
                    m = m.max(s[j]);
                }
                if m == f64::NEG_INFINITY {
                    // No key: zeros, lse −∞ (its bound unused).
                    for c in 0..d {
                        r.tol[row * d + c] = 1e-30;
                    }
                    continue;
                }
                let mut l = 0f64;
                let (out, tol) = (&mut r.out[row * d..], &mut r.tol[row * d..]);
                for j in 0..skv {
                    let p = (s[j] - m).exp();
                    l += p;
                    let vj = &v[(kh + j) * d..(kh + j + 1) * d];
                    for c in 0..d {
                        out[c] += p * vj[c];
                        tol[c] += p * vj[c].abs();
                    }
                }
                for c in 0..d {
                    out[c] /= l;
                    tol[c] = tol[c] / l * (2.0 * u + 2f64.powi(-16)) + out[c].abs() * u + 1e-30;
                }
                r.lse[row] = m + l.ln();
                r.lse_tol[row] = big * (d as f64 + 4.0) * 2f64.powi(-23)
                    + 2f64.powi(-20)
                    + r.lse[row].abs() * 2f64.powi(-22);
            }
        }
    }
    r
}

/// `attention` and `attention_lse` (bf16) against f64: the family's choice on this device —
/// `attention_bf16_d64_sm90` (D ≤ 64) or `attention_bf16_sm90` on compute capability 9.0 where
/// TMA takes `q`, `k` and `v` (rows of a multiple of 16 bytes), the portable kernel otherwise, the `_wide` kernels for head
/// dimensions of 160 and 256 — and the portable kernels of the head dimension by name;
/// multi-head, grouped-query and multi-query heads, `k` and `v` separate or the two halves of
/// one packed (B, H_kv, S, 2·D) array, query and key tiles partial (one query row, 77 keys),
/// more queries than keys, a head dimension of 36 (the portable kernel's element loads), a
/// negative scale, causal and not; `out` and `lse` poisoned with NaN, every element and one
/// past each checked. Small enough to run under compute-sanitizer's racecheck and synccheck.
fn attention() -> TestResult {
    let module = bundled::module().map_err(err)?;
    let cc = driver::Context::get(0).map_err(err)?.compute_capability();
    let portable = module.kernel("attention_bf16").map_err(err)?;
    let portable_lse = module.kernel("attention_lse_bf16").map_err(err)?;
    let wide = module.kernel("attention_bf16_wide").map_err(err)?;
    let wide_lse = module.kernel("attention_lse_bf16_wide").map_err(err)?;
    let wide_sm90 = module.kernel("attention_bf16_wide_sm90").map_err(err)?;
    let wide_sm90_lse = module.kernel("attention_lse_bf16_wide_sm90").map_err(err)?;
    let narrow_sm90 = module.kernel("attention_bf16_sm90").map_err(err)?;
    let narrow_sm90_lse = module.kernel("attention_lse_bf16_sm90").map_err(err)?;
    let mut r = StdRng::seed_from_u64(seed() ^ 0xa77e);
    let rand_bf16 = |n: usize, r: &mut StdRng| -> Vec<bf16> {
        (0..n)
            .map(|_| bf16::from_f32(r.random_range(-2.0f32..2.0)))
            .collect()
    };
    for (b, h, hkv, sq, skv, d, packed, scale) in [
        (
            1usize, 2usize, 2usize, 64usize, 64usize, 64usize, false, 0.125f32,
        ),
        (2, 4, 1, 129, 200, 128, false, 0.088),
        (1, 6, 2, 300, 77, 96, true, 0.1),
        (1, 4, 2, 1, 300, 128, true, -0.09),
        (2, 2, 1, 70, 129, 36, false, 0.17),
        // D ≤ 64 with TMA: the three-consumer kernel on an H100 (192-row items, partial).
        (2, 4, 1, 250, 300, 64, true, 0.1),
        (1, 3, 3, 1, 129, 32, false, -0.12),
        (1, 2, 2, 400, 70, 48, false, 0.09),
        // Many key tiles (the four-stage ring wrapping within an item) and five 192-row
        // query tiles (under the mask the middle one is both halves of its pair).
        (1, 4, 2, 900, 900, 64, false, -0.1),
        (1, 4, 2, 130, 100, 256, true, 0.0625),
        (1, 2, 1, 33, 257, 160, false, -0.08),
        // Rows of 132 elements: no `cp.async` (the wide kernel's element loads of key tiles).
        (1, 3, 3, 45, 90, 132, true, 0.07),
    ] {
        let qs = rand_bf16(b * h * sq * d, &mut r);
        let q = upload(qs.clone(), &[b, h, sq, d])?;
        let qv: Vec<f64> = qs.iter().map(|x| x.to_f64()).collect();
        // `k` and `v`: separate C-order arrays, or the halves of one packed array.
        let kv_rows = b * hkv * skv;
        let (ks, vs) = (
            rand_bf16(kv_rows * d, &mut r),
            rand_bf16(kv_rows * d, &mut r),
        );
        let kvd = [b, hkv, skv, d];
        let (_bufs, kdesc, vdesc) = if packed {
            let mut both = Vec::with_capacity(2 * kv_rows * d);
            for row in 0..kv_rows {
                both.extend_from_slice(&ks[row * d..(row + 1) * d]);
                both.extend_from_slice(&vs[row * d..(row + 1) * d]);
            }
            let buf = upload(both, &[2 * kv_rows * d])?;
            let st = [
                (hkv * skv * 2 * d) as isize,
                (skv * 2 * d) as isize,
                2 * d as isize,
                1,
            ];
            let (kd, vd) = (view_of(&buf, 0, &kvd, st)?, view_of(&buf, d, &kvd, st)?);
            (vec![buf], kd, vd)
        } else {
            let (kb, vb) = (upload(ks.clone(), &kvd)?, upload(vs.clone(), &kvd)?);
            let (kd, vd) = (*kb.desc(), *vb.desc());
            (vec![kb, vb], kd, vd)
        };
        let kv: Vec<f64> = ks.iter().map(|x| x.to_f64()).collect();
        let vv: Vec<f64> = vs.iter().map(|x| x.to_f64()).collect();
        // TMA's rule for the sm_90a kernel: rows of a multiple of 16 bytes, bases 16-byte
        // aligned (the packed `v` starts D elements in).
        let tma = d % 8 == 0;
        for causal in [false, true] {
            let want = attention_reference(
                (&qv, &kv, &vv),
                (b, h, hkv, sq, skv, d),
                scale as f64,
                causal,
            );
            let what = format!(
                "({b}, {h}/{hkv}, {sq}, {skv}, {d}) packed={packed} scale={scale} causal={causal}"
            );
            // By name: the portable kernel of the head dimension.
            let (by_name, by_name_lse) = if d > 128 {
                (&wide, &wide_lse)
            } else {
                (&portable, &portable_lse)
            };
            let mut runs = vec![
                ("attention", Some(by_name), false),
                ("attention", None, false),
                ("attention_lse", Some(by_name_lse), true),
                ("attention_lse", None, true),
            ];
            // And on an H100, the wide sm_90a kernels by name wherever TMA takes the arrays
            // (every D ≤ 256: 64- and 128-column heads too), and the two-consumer kernel for
            // D ≤ 64 (the family's choice there is the three-consumer one).
            if cc == (9, 0) && tma {
                runs.push(("attention", Some(&wide_sm90), false));
                runs.push(("attention_lse", Some(&wide_sm90_lse), true));
                if d <= 64 {
                    runs.push(("attention", Some(&narrow_sm90), false));
                    runs.push(("attention_lse", Some(&narrow_sm90_lse), true));
                }
            }
            for (family, named, lse) in runs {
                let n = b * h * sq * d;
                let dout = upload(vec![bf16::NAN; n + 1], &[n + 1])?;
                let dl = upload(vec![f32::NAN; b * h * sq + 1], &[b * h * sq + 1])?;
                let od = [b, h, sq, d];
                let ost = [(h * sq * d) as isize, (sq * d) as isize, d as isize, 1];
                let out = view_of(&dout, 0, &od, ost)?;
                let lsed = view_of(&dl, 0, &[b, h, sq], [(h * sq) as isize, sq as isize, 1])?;
                let mut args = vec![
                    Arg::Array(q.desc()),
                    Arg::Array(&kdesc),
                    Arg::Array(&vdesc),
                    Arg::Array(&out),
                ];
                if lse {
                    args.push(Arg::Array(&lsed));
                }
                args.push(Arg::Scalar(Scalar::F32(scale)));
                args.push(Arg::Scalar(Scalar::U32(causal as u32)));
                let kernel = match named {
                    Some(k) => *k,
                    None => module.select(family, &args).map_err(err)?,
                };
                let name = kernel.name();
                if named.is_none() {
                    let sm90 = cc == (9, 0) && tma;
                    let expect = match (d > 128, sm90, lse) {
                        (true, true, false) => "attention_bf16_wide_sm90",
                        (true, true, true) => "attention_lse_bf16_wide_sm90",
                        (true, false, false) => "attention_bf16_wide",
                        (true, false, true) => "attention_lse_bf16_wide",
                        (false, true, false) if d <= 64 => "attention_bf16_d64_sm90",
                        (false, true, true) if d <= 64 => "attention_lse_bf16_d64_sm90",
                        (false, true, false) => "attention_bf16_sm90",
                        (false, true, true) => "attention_lse_bf16_sm90",
                        (false, false, false) => "attention_bf16",
                        (false, false, true) => "attention_lse_bf16",
                    };
                    ensure(name == expect, || {
                        format!("{what}: the family {family} chose {name} on {cc:?}, not {expect}")
                    })?;
                }
                // SAFETY: the bundled kernels are memory-safe for any arguments that pass the
                // checks.
                unsafe { kernel.launch(&args, &opts()) }.map_err(err)?;
                let got = download(&dout)?;
                for e in 0..n {
                    let g = got[e].to_f64();
                    ensure((g - want.out[e]).abs() <= want.tol[e], || {
                        format!(
                            "{name} {what}: out[{e}] = {g}, expected {} ± {}",
                            want.out[e], want.tol[e]
                        )
                    })?;
                }
                ensure(got[n].is_nan(), || format!("{name} {what}: wrote past out"))?;
                let gl = download(&dl)?;
                if lse {
                    for e in 0..b * h * sq {
                        let (g, w) = (gl[e] as f64, want.lse[e]);
                        let ok = if w == f64::NEG_INFINITY {
                            g == w
                        } else {
                            (g - w).abs() <= want.lse_tol[e]
                        };
                        ensure(ok, || {
                            format!(
                                "{name} {what}: lse[{e}] = {g}, expected {w} ± {}",
                                want.lse_tol[e]
                            )
                        })?;
                    }
                }
                let untouched = if lse { &gl[b * h * sq..] } else { &gl[..] };
                ensure(untouched.iter().all(|x| x.is_nan()), || {
                    format!("{name} {what}: wrote past lse (or lse without the lse kernel)")
                })?;
            }
        }
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let devices = match driver::device_count() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("gallery GPU tests SKIPPED (reported as ignored): {e}");
            0
        }
    };
    let gpu = |name: &'static str, f: fn() -> TestResult| {
        Trial::test(name, f).with_ignored_flag(devices == 0)
    };
    let trials = vec![
        Trial::test("argument_checks", argument_checks),
        Trial::test("attention_selection", attention_selection),
        gpu("reductions", reductions),
        gpu("normalize", normalize),
        gpu("histogram", histogram),
        gpu("softmax", softmax),
        gpu("matmul", matmul),
        gpu("linear", linear),
        gpu("linear_portable", linear_portable),
        gpu("attention", attention),
        gpu("stencil_and_scan", stencil_and_scan),
        gpu("activations", activations),
    ];
    libtest_mimic::run(&args, trials).exit();
}
