//! Half-precision conversions and arithmetic against the `half` crate's software rounding.
//!
//! References: widening is the `half` crate's (exact); rounding is [`round_to`] here, a
//! correctly rounded (ties to even) `f64` → f16/bf16 conversion in exact arithmetic — the
//! `half` crate's `from_f64` rounds twice (via `f32`) and is off by one unit in the last place
//! at some midpoints. A single `+ - * /` of two f16/bf16 values is computed in `f64` and
//! rounded once (`f64` holds more than twice their precision plus two bits, so the double
//! rounding is innocuous); `fma` is computed in `f64` with its exact error term (TwoSum), and
//! the rare cases where the `f64` result lies exactly on a rounding midpoint with a nonzero
//! error are counted and skipped. NaN results are compared as "is NaN".

use crate::half_ref::round_to;
use crate::{as_dtype, down, ensure, launch_1d, rng, up, TestResult};
use ferrocuda::abi::{DType, Element};
use ferrocuda::Arg;
use half::{bf16, f16};
use libtest_mimic::Failed;
use rand::rngs::StdRng;
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("half_f16_conversions", test_f16_conversions),
    ("half_f16_arith", test_f16_arith),
    ("half_bf16_ops", test_bf16_ops),
    ("half_f16x2_ops", || {
        packed_case::<F16>("packed_ops_f16x2", 33)
    }),
    ("half_bf16x2_ops", || {
        packed_case::<Bf16>("packed_ops_bf16x2", 34)
    }),
];

/// f16 or bf16 as seen by the reference.
trait Half {
    fn to_f64(b: u16) -> f64;
    fn round(x: f64) -> u16;
    fn round_f32(x: f32) -> u16;
    /// Halfway between the largest finite value and the next power of two: the magnitude
    /// at and above which round-to-nearest overflows to infinity.
    fn overflow_midpoint() -> f64;
    fn is_nan(b: u16) -> bool {
        Self::to_f64(b).is_nan()
    }
}

macro_rules! formats {
    ($($name:ident: $t:ident, $mant:literal, $exp:literal;)*) => {$(
        struct $name;
        impl Half for $name {
            fn to_f64(b: u16) -> f64 {
                $t::from_bits(b).to_f64()
            }
            fn round(x: f64) -> u16 {
                round_to(x, $mant, $exp)
            }
            fn round_f32(x: f32) -> u16 {
                round_to(x as f64, $mant, $exp)
            }
            fn overflow_midpoint() -> f64 {
                (2.0 - 2f64.powi(-($mant + 1))) * 2f64.powi((1 << ($exp - 1)) - 1)
            }
        }
    )*};
}
formats! {
    F16: f16, 10, 5;
    Bf16: bf16, 7, 8;
}

/// `got` is the bits of the reference `want`, or both are NaN.
fn same<H: Half>(got: u16, want: u16) -> bool {
    got == want || (H::is_nan(got) && H::is_nan(want))
}

/// The correctly rounded `a * b + c`, or `None` for an unresolved midpoint case.
fn fma_ref<H: Half>(a: u16, b: u16, c: u16) -> Option<u16> {
    let (x, y, z) = (H::to_f64(a), H::to_f64(b), H::to_f64(c));
    let p = x * y; // exact: at most 22 significant bits
    let s = p + z;
    if !s.is_finite() {
        return Some(H::round(s));
    }
    // TwoSum: s + e == p + z exactly.
    let bv = s - p;
    let e = (p - (s - bv)) + (z - bv);
    let r = H::round(s);
    if e == 0.0 {
        return Some(r);
    }
    // On the overflow midpoint the residual decides between the largest finite value and
    // infinity, which the neighbour test below cannot see (infinity has no finite neighbour).
    if s.abs() == H::overflow_midpoint() {
        return None;
    }
    // Rounding s and s + e can differ only if s is exactly halfway between two halves.
    let (lo, hi) = (H::to_f64(r), s);
    let other = if lo < hi {
        H::round(hi + (hi - lo))
    } else {
        H::round(hi - (lo - hi))
    };
    let mid = (H::to_f64(other) + lo) / 2.0 == s && other != r;
    (!mid).then_some(r)
}

/// Launches `kernel(a, b, c, f, out)` with `record` outputs per element of `a` (output
/// poisoned) and returns the output.
fn run_abcf<W: Element + Default + From<u16>>(
    kernel: &str,
    [a, b, c]: [&[W]; 3],
    f: &[f32],
    record: usize,
) -> Result<Vec<W>, Failed> {
    let n = a.len();
    let (da, db, dc, df) = (up(a)?, up(b)?, up(c)?, up(f)?);
    let dout = up(&vec![W::from(0x5A5A); record * n])?;
    let args = [da.arg(), db.arg(), dc.arg(), df.arg(), dout.arg()];
    launch_1d(kernel, &args, n, 256)?;
    down(&dout)
}

/// Random 16-bit patterns with every class represented (zeros, subnormals, normals,
/// infinities, NaNs) plus a run of small exponents for the fma.
fn patterns(r: &mut StdRng, n: usize) -> Vec<u16> {
    (0..n).map(|_| r.random()).collect()
}

fn f32_inputs(r: &mut StdRng, n: usize) -> Vec<f32> {
    let mut f: Vec<f32> = (0..n)
        .map(|i| match i % 4 {
            0 => f32::from_bits(r.random()),
            // Ties for bf16 (low half exactly 0x8000) and near-ties for f16.
            1 => f32::from_bits(r.random::<u32>() & 0xFFFF_0000 | 0x8000),
            2 => f32::from_bits(r.random::<u32>() & 0xFFFF_E000 | 0x1000),
            _ => r.random_range(-70000.0f32..70000.0),
        })
        .collect();
    f.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        f32::MIN_POSITIVE,
        65504.0,
        65520.0,
        1e-8,
    ]);
    f
}

/// Every f16 bit pattern through f32 (`cvt.f32.f16`, exact) and back (`cvt.rn.f16.f32`),
/// and random/tie/overflow f32 values rounded to f16.
fn test_f16_conversions() -> TestResult {
    let bits: Vec<u16> = (0..=u16::MAX).collect();
    let mut f: Vec<f32> = bits.iter().map(|&b| f16::from_bits(b).to_f32()).collect();
    f.extend(f32_inputs(&mut rng(31), 200_000));
    let (db, df) = (up(&bits)?, up(&f)?);
    let (dw, dn) = (
        up(&vec![-7.0f32; bits.len()])?,
        up(&vec![0x5A5Au16; f.len()])?,
    );
    launch_1d(
        "f16_convert",
        &[db.arg(), df.arg(), dw.arg(), dn.arg()],
        f.len(),
        256,
    )?;
    let (wide, narrow) = (down(&dw)?, down(&dn)?);
    for (i, &b) in bits.iter().enumerate() {
        let want = f16::from_bits(b).to_f32();
        ensure(
            wide[i].to_bits() == want.to_bits() || (want.is_nan() && wide[i].is_nan()),
            || format!("f16 {b:#06x} -> f32 {:?}, want {want:?}", wide[i]),
        )?;
        // The round trip: every non-NaN pattern comes back unchanged.
        ensure(same::<F16>(narrow[i], b), || {
            format!("f16 {b:#06x} -> f32 -> f16 {:#06x}", narrow[i])
        })?;
    }
    for (j, &x) in f.iter().enumerate() {
        let want = F16::round_f32(x);
        ensure(same::<F16>(narrow[j], want), || {
            format!("f32 {x:e} -> f16 {:#06x}, want {want:#06x}", narrow[j])
        })?;
    }
    Ok(())
}

/// `+ - * /` on `Slice<f16>` (`float16` arrays).
fn test_f16_arith() -> TestResult {
    let mut r = rng(32);
    let n = 300_000;
    let (a, b) = (patterns(&mut r, n), patterns(&mut r, n));
    let (da, db, dout) = (up(&a)?, up(&b)?, up(&vec![0x5A5Au16; 4 * n])?);
    let (ha, hb, ho) = (
        as_dtype(&da, DType::F16)?,
        as_dtype(&db, DType::F16)?,
        as_dtype(&dout, DType::F16)?,
    );
    launch_1d(
        "f16_arith",
        &[Arg::Array(&ha), Arg::Array(&hb), Arg::Array(&ho)],
        n,
        256,
    )?;
    let out = down(&dout)?;
    for i in 0..n {
        let (x, y) = (F16::to_f64(a[i]), F16::to_f64(b[i]));
        for (k, w) in [x + y, x - y, x * y, x / y].into_iter().enumerate() {
            let want = F16::round(w);
            ensure(same::<F16>(out[4 * i + k], want), || {
                format!(
                    "f16 {:#06x} op{k} {:#06x} = {:#06x}, want {want:#06x}",
                    a[i],
                    b[i],
                    out[4 * i + k]
                )
            })?;
        }
    }
    Ok(())
}

/// bf16: `from_f32`, `+ - * /`, `mul_add`, `min`, `max`, negation.
fn test_bf16_ops() -> TestResult {
    let mut r = rng(33);
    let n = 300_000;
    let (a, b, c) = (
        patterns(&mut r, n),
        patterns(&mut r, n),
        patterns(&mut r, n),
    );
    let f = f32_inputs(&mut r, n);
    let out = run_abcf("bf16_ops", [&a, &b, &c], &f[..n], 10)?;
    let mut skipped = 0;
    for i in 0..n {
        let (x, y) = (Bf16::to_f64(a[i]), Bf16::to_f64(b[i]));
        let o = &out[10 * i..10 * i + 10];
        let ctx = || {
            format!(
                "bf16 a={:#06x} b={:#06x} c={:#06x} f={:e}: {o:x?}",
                a[i], b[i], c[i], f[i]
            )
        };
        let simple = [
            Bf16::round_f32(f[i]),
            Bf16::round(x + y),
            Bf16::round(x - y),
            Bf16::round(x * y),
            Bf16::round(x / y),
        ];
        for k in 0..5 {
            ensure(same::<Bf16>(o[k], simple[k]), || {
                format!("{}: result {k}, want {:#06x}", ctx(), simple[k])
            })?;
        }
        ensure(same::<Bf16>(o[9], simple[0]), || {
            format!("{}: From<f32>", ctx())
        })?;
        match fma_ref::<Bf16>(a[i], b[i], c[i]) {
            Some(w) => ensure(same::<Bf16>(o[5], w), || {
                format!("{}: mul_add, want {w:#06x}", ctx())
            })?,
            None => skipped += 1,
        }
        // min/max ignore one NaN; of two zeros either may come back.
        for (k, less) in [(6usize, true), (7, false)] {
            let g = Bf16::to_f64(o[k]);
            let w = if x.is_nan() {
                y
            } else if y.is_nan() {
                x
            } else if less {
                x.min(y)
            } else {
                x.max(y)
            };
            ensure(g == w || (g.is_nan() && w.is_nan()), || {
                format!("{}: min/max {k}", ctx())
            })?;
        }
        ensure(o[8] == a[i] ^ 0x8000, || format!("{}: negation", ctx()))?;
    }
    eprintln!("  bf16 mul_add: {skipped} of {n} midpoint cases left unchecked");
    Ok(())
}

/// Packed pairs: each lane against the scalar reference.
fn packed_case<H: Half>(kernel: &str, salt: u64) -> TestResult {
    let mut r = rng(salt);
    let n = 200_000;
    let w32 = |r: &mut StdRng| (0..n).map(|_| r.random::<u32>()).collect::<Vec<u32>>();
    let (a, b, c) = (w32(&mut r), w32(&mut r), w32(&mut r));
    let f = f32_inputs(&mut r, 2 * n);
    let out = run_abcf(kernel, [&a, &b, &c], &f[..2 * n], 6)?;
    let mut skipped = 0;
    for i in 0..n {
        for half in 0..2 {
            let lane = |w: u32| (w >> (16 * half)) as u16;
            let (x, y, z) = (lane(a[i]), lane(b[i]), lane(c[i]));
            let (xf, yf) = (H::to_f64(x), H::to_f64(y));
            let o: Vec<u16> = out[6 * i..6 * i + 6].iter().map(|&w| lane(w)).collect();
            let ctx = || {
                format!("{kernel} pair {i} lane {half}: a={x:#06x} b={y:#06x} c={z:#06x} -> {o:x?}")
            };
            let want = [H::round(xf + yf), H::round(xf - yf), H::round(xf * yf)];
            for k in 0..3 {
                ensure(same::<H>(o[k], want[k]), || {
                    format!("{}: result {k}, want {:#06x}", ctx(), want[k])
                })?;
            }
            match fma_ref::<H>(x, y, z) {
                Some(w) => ensure(same::<H>(o[3], w), || {
                    format!("{}: mul_add, want {w:#06x}", ctx())
                })?,
                None => skipped += 1,
            }
            ensure(o[4] == x ^ 0x8000, || format!("{}: negation", ctx()))?;
            let w = H::round_f32(f[2 * i + half]);
            ensure(same::<H>(o[5], w), || {
                format!("{}: from_f32s({:e}), want {w:#06x}", ctx(), f[2 * i + half])
            })?;
        }
    }
    eprintln!(
        "  {kernel} mul_add: {skipped} of {} midpoint cases left unchecked",
        2 * n
    );
    Ok(())
}
