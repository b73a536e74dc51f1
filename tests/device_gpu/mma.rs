//! Tensor cores (`ferrocuda_device::mma`, kernels in `tests/device-kernels/src/mma.rs`).
//!
//! * The fragment layouts: the records of `mma_layouts` against `Fragment::coords`, the
//!   device crate's own host-side mapping — what `ldmatrix` delivers, and what `mma.sync`
//!   reads and writes (a 0/1 selection matrix times B plus C is exact).
//! * Every precision, `D = A·B + C` for 48 problems per launch, with fragments loaded each way
//!   (global memory through the mapping, shared memory through the mapping, `ldmatrix`), K
//!   from one instruction to 256: random inputs (seeded through `rng(salt)`), extreme values
//!   (±0, the largest finite value against small factors) and subnormal inputs, outputs
//!   poisoned, every element against an `f64` reference.
//! * The tiled GEMM of the guide, on ragged shapes.
//! * `stmatrix` on an sm_90 device, from an sm_90 build of the test kernels (the bundle's, or
//!   a fresh one; skipped, saying so, without either or on an older device).
//!
//! Error bounds, derived from the arithmetic: bf16, f16 and tf32 products are exact in `f32`
//! (at most 22 significant bits) and in the `f64` reference; the tensor core adds them into an
//! `f32` accumulator of "at least single precision" (PTX ISA) in an unspecified order, with
//! an alignment that may truncate. Each of the K products and each of the `K / k` instruction
//! results (and C) carries at most one relative error of `2⁻²³` (truncation, twice
//! round-to-nearest's) per addition it takes part in, so `|D − ref| ≤ (K + K/k + 1)·(2⁻²³·S +
//! 2⁻¹²⁶)` with `S = Σ|aᵢbᵢ| + |c|`, the absolute term allowing each step to flush an `f32`
//! subnormal. The f16 accumulator: the same with `2⁻¹⁰` and `2⁻¹⁴`. TF32 inputs: the host
//! rounds the raw `f32` inputs as `cvt.rna.tf32.f32` does (`mma::to_tf32`, to nearest, ties
//! away; ties are among the inputs) before the exact products. f64: `(2K + K/k + 1)·(2⁻⁵²·S +
//! 2⁻¹⁰²²)` (the `f64` reference's own error included). Integers: exact. Whether the tensor
//! cores keep subnormal *inputs* is not documented; an element is accepted within the bound
//! of the reference that keeps them or of the one that flushes them to zero, and the test
//! reports how many elements only the flushing reference explains.

use crate::{down, ensure, launch, rng, scalar, up, TestResult};
use ferrocuda::abi::Element;
use ferrocuda_device::mma::{self as fm, Fragment};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("mma_layouts", test_layouts),
    ("mma_bf16", || tile_case::<Bf16>(70)),
    ("mma_f16", || tile_case::<F16>(71)),
    ("mma_f16_f16acc", || tile_case::<F16Acc>(72)),
    ("mma_tf32", || tile_case::<Tf32>(73)),
    ("mma_s8", || tile_case::<Int<i8, i8>>(74)),
    ("mma_u8", || tile_case::<Int<u8, u8>>(75)),
    ("mma_s8u8", || tile_case::<Int<i8, u8>>(76)),
    ("mma_u8s8", || tile_case::<Int<u8, i8>>(77)),
    ("mma_f64", || tile_case::<F64>(78)),
    ("mma_gemm_bf16", test_gemm),
    ("mma_stmatrix", test_stmatrix),
];

/// `mma_layouts`' record shape (`LAYOUT_SLOTS`, `LAYOUT_SECTIONS` in the kernel crate).
const SLOTS: usize = 16;
const SECTIONS: usize = 19;

/// Checks section `s` of the layout records: element `i` of lane `lane` must be
/// `want(coords(lane, i))` for fragment type `F`.
fn section<F: Fragment>(
    out: &[u32],
    s: usize,
    what: &str,
    want: impl Fn(usize, usize) -> u32,
) -> TestResult {
    for lane in 0..32u32 {
        for i in 0..F::LEN {
            let (r, c) = F::coords(lane, i);
            let got = out[(s * 32 + lane as usize) * SLOTS + i];
            let w = want(r, c);
            ensure(got == w, || {
                format!(
                    "{what} (section {s}): lane {lane} element {i}, which coords puts at \
                     ({r}, {c}), is {got:#x}; the matrix holds {w:#x} there"
                )
            })?;
        }
    }
    Ok(())
}

/// Checks raw section `s`: slot `i` of lane `l` must be `want(l, i)`, for `n` slots.
fn raw_section(
    out: &[u32],
    s: usize,
    n: usize,
    what: &str,
    want: impl Fn(usize, usize) -> u32,
) -> TestResult {
    for l in 0..32 {
        for i in 0..n {
            let (got, w) = (out[(s * 32 + l) * SLOTS + i], want(l, i));
            ensure(got == w, || {
                format!("{what} (section {s}): lane {l} slot {i} is {got:#x}, want {w:#x}")
            })?;
        }
    }
    Ok(())
}

fn test_layouts() -> TestResult {
    let dout = up(&vec![0xDEAD_BEEFu32; SECTIONS * 32 * SLOTS])?;
    launch("mma_layouts", &[dout.arg()], [1, 1, 1], [32, 1, 1], 0)?;
    let out = down(&dout)?;
    let f32b = |x: usize| (x as f32).to_bits();
    // What ldmatrix delivers.
    section::<fm::FragA16x16<ferrocuda_device::half::bf16>>(
        &out,
        0,
        "ldmatrix .x4 → A",
        |r, c| (16 * r + c) as u32,
    )?;
    type B16 = fm::FragB16x8<ferrocuda_device::half::bf16>;
    section::<B16>(&out, 1, "ldmatrix .x2.trans (K×N) → B", |k, n| {
        (8 * k + n) as u32
    })?;
    section::<B16>(&out, 2, "ldmatrix .x2 (N×K) → B", |k, n| {
        (8 * k + n) as u32
    })?;
    // The raw forms: lane l gets row l/4, columns 2(l%4)+h (transposed: the reverse).
    raw_section(&out, 3, 2, "ldmatrix .x1", |l, h| {
        (16 * (l / 4) + 2 * (l % 4) + h) as u32
    })?;
    raw_section(&out, 4, 2, "ldmatrix .x1.trans", |l, h| {
        (16 * (2 * (l % 4) + h) + l / 4) as u32
    })?;
    raw_section(&out, 5, 8, "ldmatrix .x4.trans", |l, s| {
        let (j, h) = (s / 2, s % 2);
        (16 * (8 * (j % 2) + 2 * (l % 4) + h) + 8 * (j / 2) + l / 4) as u32
    })?;
    type A8 = fm::FragA16x32<u8>;
    section::<A8>(&out, 6, "ldmatrix .x4 → A (8-bit), columns", |r, c| {
        (c + 32 * (r % 8)) as u32
    })?;
    section::<A8>(&out, 7, "ldmatrix .x4 → A (8-bit), rows", |r, _| r as u32)?;
    section::<fm::FragB32x8<u8>>(&out, 8, "ldmatrix .x2 (N×K) → B (8-bit)", |k, n| {
        (k + 32 * n) as u32
    })?;
    section::<fm::FragA16x8Tf32>(&out, 9, "ldmatrix .x4 → A (tf32)", |r, c| {
        (8 * r + c) as u32
    })?;
    section::<fm::FragB8x8Tf32>(&out, 10, "ldmatrix .x2 (N×K) → B (tf32)", |k, n| {
        (8 * k + n) as u32
    })?;
    // What mma reads and writes: D = B[sel(r)][c] + C[r][c], exact.
    type Acc = fm::Acc16x8F32;
    section::<Acc>(&out, 11, "mma bf16 D", |r, c| f32b(264 * r + 17 * c))?;
    section::<Acc>(&out, 18, "mma bf16 D, accumulated twice", |r, c| {
        f32b(272 * r + 18 * c)
    })?;
    section::<Acc>(&out, 12, "mma f16 → f32 D", |r, c| f32b(264 * r + 17 * c))?;
    section::<fm::Acc16x8F16>(&out, 13, "mma f16 → f16 D", |r, c| {
        f16::from_f32((72 * r + 2 * c) as f32).to_bits() as u32
    })?;
    section::<Acc>(&out, 14, "mma tf32 D", |r, c| {
        f32b(8 * (r % 8) + c + 256 * r + 16 * c)
    })?;
    section::<fm::Acc16x8I32>(&out, 15, "mma s8·s8 D", |r, c| (1008 * r + 2 * c) as u32)?;
    section::<fm::Acc16x8I32>(&out, 16, "mma u8·s8 D", |r, _| (992 * r as i32 - 1) as u32)?;
    for lane in 0..32u32 {
        for i in 0..2 {
            let (r, c) = fm::Acc8x8F64::coords(lane, i);
            let want = (8 * (r % 4) + c + 100 * r + c) as f64;
            let base = (17 * 32 + lane as usize) * SLOTS + 2 * i;
            let got = f64::from_bits(out[base] as u64 | (out[base + 1] as u64) << 32);
            ensure(got == want, || {
                format!("mma f64 D (section 17): lane {lane} element {i} at ({r}, {c}) is {got}, want {want}")
            })?;
        }
    }
    Ok(())
}

/// Which inputs a launch gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// Random values over a range of magnitudes.
    Random,
    /// ±0 and the largest finite values (in A) against small factors (in B).
    Extremes,
    /// Subnormal inputs (in A) against large factors (in B).
    Subnormal,
}

/// `±m · 2^(e - p + 1)` with a random `p`-bit significand `m` (leading bit set) and `e` in
/// `exps`: a value every format with `p` significand bits holds exactly.
fn exact(r: &mut StdRng, p: u32, exps: std::ops::RangeInclusive<i32>) -> f64 {
    let m = (1u64 << (p - 1)) | r.random_range(0..1u64 << (p - 1));
    let e = r.random_range(exps);
    let s = if r.random::<bool>() { -1.0 } else { 1.0 };
    s * m as f64 * pow2(e - p as i32 + 1)
}

/// `2^e` exactly, for `e` in `-1074..=1023` (`powi` of a large negative `e` computes
/// `1 / 2^-e`, which overflows to zero).
fn pow2(e: i32) -> f64 {
    let normal = |e: i32| f64::from_bits(((e + 1023) as u64) << 52);
    normal(e / 2) * normal(e - e / 2)
}

/// A precision's kernel, shapes, host types, generators and error bound.
trait Prec {
    /// Host element types of A, B and C/D.
    type A: Element + Copy + Default;
    type B: Element + Copy + Default;
    type C: Element + Copy + Default + PartialEq + std::fmt::Debug;
    const KERNEL: &'static str;
    /// M, N and the instruction's K.
    const M: usize = 16;
    const N: usize = 8;
    const KS: usize;
    /// Fragment loading modes of the kernel (0..MODES).
    const MODES: u32;
    const CASES: &'static [Case] = &[Case::Random, Case::Extremes, Case::Subnormal];
    /// K values (multiples of KS).
    const KS_LIST: &'static [usize];
    fn gen_a(r: &mut StdRng, case: Case) -> Self::A;
    fn gen_b(r: &mut StdRng, case: Case) -> Self::B;
    fn gen_c(r: &mut StdRng, case: Case) -> Self::C;
    /// The values the tensor core multiplies (TF32: after the device's rounding).
    fn a(x: Self::A) -> f64;
    fn b(x: Self::B) -> f64;
    fn c(x: Self::C) -> f64;
    /// Whether an input value is subnormal in its format.
    fn subnormal(x: f64) -> bool;
    /// The bound on `|D − ref|` for a K-term product with `S = Σ|aᵢbᵢ| + |c|`; `None`:
    /// exact.
    fn tol(k: usize, s: f64) -> Option<f64>;
    /// The poison written to D before each launch.
    fn poison() -> Self::C;
}

/// `(K + K/k + 1)·(ε·S + tiny)`: one error of `ε` (relative) or `tiny` (absolute) per
/// addition a term takes part in.
fn float_tol(k: usize, ks: usize, s: f64, eps: f64, tiny: f64) -> Option<f64> {
    Some((k + k / ks + 1) as f64 * (eps * s + tiny))
}

struct Bf16;
impl Prec for Bf16 {
    type A = bf16;
    type B = bf16;
    type C = f32;
    const KERNEL: &'static str = "mma_tile_bf16";
    const KS: usize = 16;
    const MODES: u32 = 4;
    const KS_LIST: &'static [usize] = &[16, 64, 256];
    fn gen_a(r: &mut StdRng, case: Case) -> bf16 {
        let v = match (case, r.random_range(0..8)) {
            (Case::Random, _) => exact(r, 8, -8..=8),
            (Case::Extremes, 0) => 0.0,
            (Case::Extremes, 1) => -0.0,
            (Case::Extremes, 2) => bf16::MAX.to_f64(),
            (Case::Extremes, 3) => bf16::MIN.to_f64(),
            (Case::Extremes, _) => exact(r, 8, -8..=8),
            (Case::Subnormal, 0) => 0.0,
            (Case::Subnormal, 1) => bf16::MIN_POSITIVE.to_f64(),
            (Case::Subnormal, _) => bf16::from_bits(r.random_range(1..0x80) | sign(r)).to_f64(),
        };
        bf16::from_f64(v)
    }
    fn gen_b(r: &mut StdRng, case: Case) -> bf16 {
        let v = match (case, r.random_range(0..8)) {
            (Case::Random, _) => exact(r, 8, -8..=8),
            (Case::Extremes, 0) => 0.0,
            (Case::Extremes, 1) => -0.0,
            (Case::Extremes, _) => exact(r, 8, -110..=-100),
            (Case::Subnormal, _) => exact(r, 8, 100..=105),
        };
        bf16::from_f64(v)
    }
    fn gen_c(r: &mut StdRng, case: Case) -> f32 {
        match case {
            Case::Random => exact(r, 24, -8..=8) as f32,
            Case::Extremes => exact(r, 24, 0..=20) as f32,
            Case::Subnormal => exact(r, 24, -40..=-30) as f32,
        }
    }
    fn a(x: bf16) -> f64 {
        x.to_f64()
    }
    fn b(x: bf16) -> f64 {
        x.to_f64()
    }
    fn c(x: f32) -> f64 {
        x as f64
    }
    fn subnormal(x: f64) -> bool {
        x != 0.0 && x.abs() < 2f64.powi(-126)
    }
    fn tol(k: usize, s: f64) -> Option<f64> {
        float_tol(k, Self::KS, s, 2f64.powi(-23), 2f64.powi(-126))
    }
    fn poison() -> f32 {
        f32::from_bits(0x7FC0_0BAD)
    }
}

/// A random sign bit for a 16-bit pattern.
fn sign(r: &mut StdRng) -> u16 {
    if r.random::<bool>() {
        0x8000
    } else {
        0
    }
}

struct F16;
impl Prec for F16 {
    type A = f16;
    type B = f16;
    type C = f32;
    const KERNEL: &'static str = "mma_tile_f16";
    const KS: usize = 16;
    const MODES: u32 = 4;
    const KS_LIST: &'static [usize] = &[16, 64, 256];
    fn gen_a(r: &mut StdRng, case: Case) -> f16 {
        let v = match (case, r.random_range(0..8)) {
            (Case::Random, _) => exact(r, 11, -4..=4),
            (Case::Extremes, 0) => 0.0,
            (Case::Extremes, 1) => -0.0,
            (Case::Extremes, 2) => 65504.0,
            (Case::Extremes, 3) => -65504.0,
            (Case::Extremes, _) => exact(r, 11, -4..=4),
            (Case::Subnormal, 0) => 0.0,
            (Case::Subnormal, 1) => f16::MIN_POSITIVE.to_f64(),
            (Case::Subnormal, _) => f16::from_bits(r.random_range(1..0x400) | sign(r)).to_f64(),
        };
        f16::from_f64(v)
    }
    fn gen_b(r: &mut StdRng, case: Case) -> f16 {
        let v = match (case, r.random_range(0..8)) {
            (Case::Random, _) => exact(r, 11, -4..=4),
            (Case::Extremes, 0) => 0.0,
            (Case::Extremes, 1) => -0.0,
            (Case::Extremes, _) => exact(r, 11, -14..=-10),
            (Case::Subnormal, _) => exact(r, 11, 8..=12),
        };
        f16::from_f64(v)
    }
    fn gen_c(r: &mut StdRng, case: Case) -> f32 {
        match case {
            Case::Random => exact(r, 24, -4..=4) as f32,
            Case::Extremes => exact(r, 24, 0..=10) as f32,
            Case::Subnormal => exact(r, 24, -16..=-12) as f32,
        }
    }
    fn a(x: f16) -> f64 {
        x.to_f64()
    }
    fn b(x: f16) -> f64 {
        x.to_f64()
    }
    fn c(x: f32) -> f64 {
        x as f64
    }
    fn subnormal(x: f64) -> bool {
        x != 0.0 && x.abs() < 2f64.powi(-14)
    }
    fn tol(k: usize, s: f64) -> Option<f64> {
        float_tol(k, Self::KS, s, 2f64.powi(-23), 2f64.powi(-126))
    }
    fn poison() -> f32 {
        f32::from_bits(0x7FC0_0BAD)
    }
}

/// f16 inputs and an f16 accumulator; magnitudes kept where f16 sums stay finite and above
/// f16's subnormals (no subnormal case: a flushed f16 result is within the bound there).
struct F16Acc;
impl Prec for F16Acc {
    type A = f16;
    type B = f16;
    type C = f16;
    const KERNEL: &'static str = "mma_tile_f16_f16acc";
    const KS: usize = 16;
    const MODES: u32 = 4;
    const CASES: &'static [Case] = &[Case::Random, Case::Extremes];
    const KS_LIST: &'static [usize] = &[16, 64];
    fn gen_a(r: &mut StdRng, case: Case) -> f16 {
        let v = match (case, r.random_range(0..8)) {
            (Case::Extremes, 0) => 0.0,
            (Case::Extremes, 1) => -0.0,
            (Case::Extremes, 2) => 65504.0,
            (Case::Extremes, 3) => -65504.0,
            // Random, and Subnormal (not in CASES).
            _ => exact(r, 11, -2..=0),
        };
        f16::from_f64(v)
    }
    fn gen_b(r: &mut StdRng, case: Case) -> f16 {
        let v = match (case, r.random_range(0..8)) {
            (Case::Extremes, 0) => 0.0,
            (Case::Extremes, 1) => -0.0,
            (Case::Extremes, _) => exact(r, 11, -14..=-12),
            _ => exact(r, 11, -2..=0),
        };
        f16::from_f64(v)
    }
    fn gen_c(r: &mut StdRng, _case: Case) -> f16 {
        f16::from_f64(exact(r, 11, -2..=2))
    }
    fn a(x: f16) -> f64 {
        x.to_f64()
    }
    fn b(x: f16) -> f64 {
        x.to_f64()
    }
    fn c(x: f16) -> f64 {
        x.to_f64()
    }
    fn subnormal(x: f64) -> bool {
        x != 0.0 && x.abs() < 2f64.powi(-14)
    }
    fn tol(k: usize, s: f64) -> Option<f64> {
        float_tol(k, Self::KS, s, 2f64.powi(-10), 2f64.powi(-14))
    }
    fn poison() -> f16 {
        f16::from_bits(0x7E5A)
    }
}

/// TF32: raw `f32` inputs (a quarter of them exact ties for the rounding), rounded on the
/// device; the host rounds them the same way.
struct Tf32;
impl Tf32 {
    /// Random `f32` bits of magnitude `2^exps`, a quarter with the low 13 bits a tie.
    fn raw(r: &mut StdRng, exps: std::ops::RangeInclusive<i32>) -> f32 {
        let x = exact(r, 24, exps) as f32;
        if r.random_range(0..4) == 0 {
            f32::from_bits(x.to_bits() & !0x1FFF | 0x1000)
        } else {
            x
        }
    }
}
impl Prec for Tf32 {
    type A = f32;
    type B = f32;
    type C = f32;
    const KERNEL: &'static str = "mma_tile_tf32";
    const KS: usize = 8;
    const MODES: u32 = 3;
    const KS_LIST: &'static [usize] = &[8, 64, 256];
    fn gen_a(r: &mut StdRng, case: Case) -> f32 {
        match (case, r.random_range(0..8)) {
            (Case::Random, _) => Self::raw(r, -8..=8),
            (Case::Extremes, 0) => 0.0,
            (Case::Extremes, 1) => -0.0,
            // The largest TF32 value, and an f32 that rounds to it.
            (Case::Extremes, 2) => f32::from_bits(0x7F7F_E000),
            (Case::Extremes, 3) => -f32::from_bits(0x7F7F_E7FF),
            (Case::Extremes, _) => Self::raw(r, -8..=8),
            (Case::Subnormal, 0) => 0.0,
            (Case::Subnormal, 1) => f32::MIN_POSITIVE,
            (Case::Subnormal, _) => {
                let s = if r.random::<bool>() { 1u32 << 31 } else { 0 };
                f32::from_bits(r.random_range(0x2000..0x80_0000) | s)
            }
        }
    }
    fn gen_b(r: &mut StdRng, case: Case) -> f32 {
        match (case, r.random_range(0..8)) {
            (Case::Random, _) => Self::raw(r, -8..=8),
            (Case::Extremes, 0) => 0.0,
            (Case::Extremes, 1) => -0.0,
            (Case::Extremes, _) => Self::raw(r, -110..=-100),
            (Case::Subnormal, _) => Self::raw(r, 100..=105),
        }
    }
    fn gen_c(r: &mut StdRng, case: Case) -> f32 {
        Bf16::gen_c(r, case)
    }
    fn a(x: f32) -> f64 {
        fm::to_tf32(x) as f64
    }
    fn b(x: f32) -> f64 {
        fm::to_tf32(x) as f64
    }
    fn c(x: f32) -> f64 {
        x as f64
    }
    fn subnormal(x: f64) -> bool {
        x != 0.0 && x.abs() < 2f64.powi(-126)
    }
    fn tol(k: usize, s: f64) -> Option<f64> {
        float_tol(k, Self::KS, s, 2f64.powi(-23), 2f64.powi(-126))
    }
    fn poison() -> f32 {
        f32::from_bits(0x7FC0_0BAD)
    }
}

/// 8-bit integers, A of `TA` and B of `TB` (`i8` or `u8`).
struct Int<TA, TB>(std::marker::PhantomData<(TA, TB)>);

/// An 8-bit integer type as the host sees it.
trait Int8: Element + Copy + Default {
    const KERNEL_SUFFIX: &'static str;
    fn random(r: &mut StdRng, case: Case) -> Self;
    fn value(self) -> i64;
}
impl Int8 for i8 {
    const KERNEL_SUFFIX: &'static str = "s8";
    fn random(r: &mut StdRng, case: Case) -> i8 {
        match case {
            Case::Random => r.random(),
            _ => [-128, 127, 0, -1, 1][r.random_range(0..5)],
        }
    }
    fn value(self) -> i64 {
        self as i64
    }
}
impl Int8 for u8 {
    const KERNEL_SUFFIX: &'static str = "u8";
    fn random(r: &mut StdRng, case: Case) -> u8 {
        match case {
            Case::Random => r.random(),
            _ => [255, 254, 0, 1, 128][r.random_range(0..5)],
        }
    }
    fn value(self) -> i64 {
        self as i64
    }
}
impl<TA: Int8, TB: Int8> Prec for Int<TA, TB> {
    type A = TA;
    type B = TB;
    type C = i32;
    const KERNEL: &'static str = match (
        TA::KERNEL_SUFFIX.as_bytes()[0],
        TB::KERNEL_SUFFIX.as_bytes()[0],
    ) {
        (b's', b's') => "mma_tile_s8",
        (b'u', b'u') => "mma_tile_u8",
        (b's', b'u') => "mma_tile_s8u8",
        _ => "mma_tile_u8s8",
    };
    const KS: usize = 32;
    const MODES: u32 = 3;
    const CASES: &'static [Case] = &[Case::Random, Case::Extremes];
    const KS_LIST: &'static [usize] = &[32, 128, 512];
    fn gen_a(r: &mut StdRng, case: Case) -> TA {
        TA::random(r, case)
    }
    fn gen_b(r: &mut StdRng, case: Case) -> TB {
        TB::random(r, case)
    }
    fn gen_c(r: &mut StdRng, _case: Case) -> i32 {
        r.random_range(-1 << 24..1 << 24)
    }
    fn a(x: TA) -> f64 {
        x.value() as f64
    }
    fn b(x: TB) -> f64 {
        x.value() as f64
    }
    fn c(x: i32) -> f64 {
        x as f64
    }
    fn subnormal(_: f64) -> bool {
        false
    }
    fn tol(_: usize, _: f64) -> Option<f64> {
        None
    }
    fn poison() -> i32 {
        0x5A5A_5A5A
    }
}

struct F64;
impl Prec for F64 {
    type A = f64;
    type B = f64;
    type C = f64;
    const KERNEL: &'static str = "mma_tile_f64";
    const M: usize = 8;
    const N: usize = 8;
    const KS: usize = 4;
    const MODES: u32 = 2;
    const KS_LIST: &'static [usize] = &[4, 64, 256];
    fn gen_a(r: &mut StdRng, case: Case) -> f64 {
        match (case, r.random_range(0..8)) {
            (Case::Random, _) => exact(r, 53, -8..=8),
            (Case::Extremes, 0) => 0.0,
            (Case::Extremes, 1) => -0.0,
            (Case::Extremes, 2) => f64::MAX,
            (Case::Extremes, 3) => f64::MIN,
            (Case::Extremes, _) => exact(r, 53, -8..=8),
            (Case::Subnormal, 0) => 0.0,
            (Case::Subnormal, 1) => f64::MIN_POSITIVE,
            (Case::Subnormal, _) => {
                let s = if r.random::<bool>() { 1u64 << 63 } else { 0 };
                f64::from_bits(r.random_range(1..1u64 << 52) | s)
            }
        }
    }
    fn gen_b(r: &mut StdRng, case: Case) -> f64 {
        match (case, r.random_range(0..8)) {
            (Case::Random, _) => exact(r, 53, -8..=8),
            (Case::Extremes, 0) => 0.0,
            (Case::Extremes, 1) => -0.0,
            (Case::Extremes, _) => exact(r, 53, -1010..=-1000),
            (Case::Subnormal, _) => exact(r, 53, 600..=605),
        }
    }
    fn gen_c(r: &mut StdRng, case: Case) -> f64 {
        match case {
            Case::Random => exact(r, 53, -8..=8),
            Case::Extremes => exact(r, 53, 0..=20),
            Case::Subnormal => exact(r, 53, -480..=-470),
        }
    }
    fn a(x: f64) -> f64 {
        x
    }
    fn b(x: f64) -> f64 {
        x
    }
    fn c(x: f64) -> f64 {
        x
    }
    fn subnormal(x: f64) -> bool {
        x != 0.0 && x.abs() < f64::MIN_POSITIVE
    }
    fn tol(k: usize, s: f64) -> Option<f64> {
        Some((2 * k + k / Self::KS + 1) as f64 * (2f64.powi(-52) * s + 2f64.powi(-1022)))
    }
    fn poison() -> f64 {
        f64::from_bits(0x7FF8_0000_0BAD_0BAD)
    }
}

/// The value of a D element as `f64`.
trait Value {
    fn value(self) -> f64;
}
impl Value for f32 {
    fn value(self) -> f64 {
        self as f64
    }
}
impl Value for f64 {
    fn value(self) -> f64 {
        self
    }
}
impl Value for f16 {
    fn value(self) -> f64 {
        self.to_f64()
    }
}
impl Value for i32 {
    fn value(self) -> f64 {
        self as f64
    }
}

/// Problems per launch (one warp each).
const PROBLEMS: usize = 48;

/// The reference of one D element: `(Σ aᵢbᵢ + c, Σ|aᵢbᵢ| + |c|)`, with subnormal inputs kept
/// (`flush == false`) or taken as zero.
fn reference<P: Prec>(
    a: &[P::A],
    b: &[P::B],
    c: P::C,
    (p, row, col, k): (usize, usize, usize, usize),
    flush: bool,
) -> (f64, f64) {
    let f = |x: f64| if flush && P::subnormal(x) { 0.0 } else { x };
    let (mut sum, mut abs) = (P::c(c), P::c(c).abs());
    for kk in 0..k {
        let x = f(P::a(a[(p * P::M + row) * k + kk]));
        let y = f(P::b(b[(p * k + kk) * P::N + col]));
        sum += x * y;
        abs += (x * y).abs();
    }
    (sum, abs)
}

fn tile_case<P: Prec>(salt: u64) -> TestResult
where
    P::C: Value,
{
    let mut r = rng(salt);
    let mut flush_only = 0usize;
    let mut checked = 0usize;
    for &case in P::CASES {
        for &k in P::KS_LIST {
            let a: Vec<P::A> = (0..PROBLEMS * P::M * k)
                .map(|_| P::gen_a(&mut r, case))
                .collect();
            let b: Vec<P::B> = (0..PROBLEMS * k * P::N)
                .map(|_| P::gen_b(&mut r, case))
                .collect();
            let c: Vec<P::C> = (0..PROBLEMS * P::M * P::N)
                .map(|_| P::gen_c(&mut r, case))
                .collect();
            let (da, db, dc) = (up(&a)?, up(&b)?, up(&c)?);
            let refs: Vec<(f64, f64)> = (0..c.len())
                .map(|i| {
                    let (p, row, col) = (i / (P::M * P::N), i / P::N % P::M, i % P::N);
                    reference::<P>(&a, &b, c[i], (p, row, col, k), false)
                })
                .collect();
            for mode in 0..P::MODES {
                let dd = up(&vec![P::poison(); c.len()])?;
                launch(
                    P::KERNEL,
                    &[
                        da.arg(),
                        db.arg(),
                        dc.arg(),
                        dd.arg(),
                        scalar(k as u32),
                        scalar(mode),
                    ],
                    [PROBLEMS as u32, 1, 1],
                    [32, 1, 1],
                    0,
                )?;
                let d = down(&dd)?;
                for p in 0..PROBLEMS {
                    for row in 0..P::M {
                        for col in 0..P::N {
                            let i = (p * P::M + row) * P::N + col;
                            let got = d[i].value();
                            let at = (p, row, col, k);
                            let (want, s) = refs[i];
                            let ctx = || {
                                format!(
                                    "{} {case:?} K={k} mode {mode}: problem {p} D[{row}][{col}] = \
                                     {got:e} ({:?}), want {want:e} (Σ|ab|+|c| = {s:e})",
                                    P::KERNEL,
                                    d[i]
                                )
                            };
                            checked += 1;
                            match P::tol(k, s) {
                                None => ensure(got == want, ctx)?,
                                Some(tol) => {
                                    if (got - want).abs() <= tol {
                                        continue;
                                    }
                                    let (wf, sf) = reference::<P>(&a, &b, c[i], at, true);
                                    let ftol = P::tol(k, sf).unwrap();
                                    ensure((got - wf).abs() <= ftol, || {
                                        format!(
                                            "{}; |error| {:e} > bound {tol:e} (flushing \
                                             subnormal inputs: {wf:e}, bound {ftol:e})",
                                            ctx(),
                                            (got - want).abs()
                                        )
                                    })?;
                                    flush_only += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "  {}: {checked} elements checked; {flush_only} explained only by flushing subnormal \
         inputs to zero",
        P::KERNEL
    );
    Ok(())
}

/// The guide's tiled GEMM on ragged shapes: random bf16 inputs, every element against the
/// `f64` reference within `(K + ⌈K/16⌉ + 1)·(2⁻²³·S + 2⁻¹²⁶)`.
fn test_gemm() -> TestResult {
    let mut r = rng(79);
    for (m, n, k) in [
        (64, 64, 64),
        (16, 8, 16),
        (128, 64, 48),
        (70, 50, 40),
        (192, 128, 256),
        (33, 130, 17),
    ] {
        let a: Vec<bf16> = (0..m * k)
            .map(|_| bf16::from_f64(exact(&mut r, 8, -4..=4)))
            .collect();
        let b: Vec<bf16> = (0..k * n)
            .map(|_| bf16::from_f64(exact(&mut r, 8, -4..=4)))
            .collect();
        let (da, db) = (up(&a)?, up(&b)?);
        let dc = up(&vec![f32::from_bits(0x7FC0_0BAD); m * n])?;
        let args = [
            da.arg(),
            db.arg(),
            dc.arg(),
            scalar(m as u32),
            scalar(n as u32),
            scalar(k as u32),
        ];
        let grid = [n.div_ceil(64) as u32, m.div_ceil(64) as u32, 1];
        launch("mma_gemm_bf16", &args, grid, [128, 1, 1], 0)?;
        let c = down(&dc)?;
        for i in 0..m {
            for j in 0..n {
                let (mut want, mut s) = (0.0f64, 0.0f64);
                for p in 0..k {
                    let x = a[i * k + p].to_f64() * b[p * n + j].to_f64();
                    want += x;
                    s += x.abs();
                }
                let tol = (k + k.div_ceil(16) + 1) as f64 * (2f64.powi(-23) * s + 2f64.powi(-126));
                let got = c[i * n + j] as f64;
                ensure((got - want).abs() <= tol, || {
                    format!(
                        "mma_gemm_bf16 {m}×{n}×{k}: c[{i}][{j}] = {got:e}, want {want:e} ± {tol:e}"
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// The module that holds `mma_stmatrix` (the test kernels' sm_90 part) on an sm_90 or newer
/// device; `None` (saying why) on an older one, where the kernel is refused.
fn sm90_module() -> Result<Option<&'static ferrocuda::Module>, libtest_mimic::Failed> {
    let (major, minor) = ferrocuda::host::driver::Context::get(crate::DEV)
        .map_err(crate::err)?
        .compute_capability();
    if major < 9 {
        eprintln!("  mma_stmatrix SKIPPED: stmatrix needs sm_90, the device is sm_{major}{minor}");
        return Ok(None);
    }
    crate::module().map(Some)
}

/// `mma_stmatrix` (built for sm_90 only; see its docs for the records), on an sm_90 device:
/// every element against the layout the kernel's docs give, from a 16×16 tile of distinct
/// bf16 bit patterns.
fn test_stmatrix() -> TestResult {
    let Some(module) = sm90_module()? else {
        return Ok(());
    };
    let x: Vec<u16> = (0..256u16).map(|i| i.wrapping_mul(0x9E37) | 1).collect();
    let src = |r: usize, c: usize| x[16 * r + c];
    let xb: Vec<bf16> = x.iter().map(|&b| bf16::from_bits(b)).collect();
    let (dx, dout) = (up(&xb)?, up(&vec![0u16; 1152])?);
    let opts = ferrocuda::LaunchOptions {
        grid: Some([1, 1, 1]),
        block: Some([32, 1, 1]),
        ..ferrocuda::LaunchOptions::default()
    };
    let kernel = module.kernel("mma_stmatrix").map_err(crate::err)?;
    // SAFETY: the kernel reads the 256 elements of x and writes the 1152 of out (checked
    // accesses).
    unsafe { kernel.launch(&[dx.arg(), dout.arg()], &opts) }.map_err(crate::err)?;
    let out = down(&dout)?;
    let check =
        |base: usize, rows: usize, cols: usize, what: &str, want: &dyn Fn(usize, usize) -> u16| {
            for r in 0..rows {
                for c in 0..cols {
                    let (got, w) = (out[base + cols * r + c], want(r, c));
                    ensure(got == w, || {
                        format!("{what}: [{r}][{c}] = {got:#06x}, want {w:#06x}")
                    })?;
                }
            }
            Ok::<(), libtest_mimic::Failed>(())
        };
    check(0, 16, 16, "FragA16x16::stmatrix (.x4)", &|r, c| src(r, c))?;
    check(
        256,
        16,
        16,
        "stmatrix_x4_trans (quadrants transposed)",
        &|r, c| src(8 * (r / 8) + c % 8, 8 * (c / 8) + r % 8),
    )?;
    check(
        512,
        16,
        8,
        "FragB16x8::stmatrix_trans (.x2.trans)",
        &|r, c| src(r, c),
    )?;
    check(640, 8, 16, "stmatrix_x1 / stmatrix_x1_trans", &|r, c| {
        if c < 8 {
            src(r, c)
        } else {
            src(c - 8, r)
        }
    })?;
    check(768, 16, 16, "stmatrix_x2 / stmatrix_x2_trans", &|r, c| {
        if c < 8 {
            src(r, c)
        } else {
            src(8 * (r / 8) + c - 8, r % 8)
        }
    })?;
    check(1024, 16, 8, "Acc16x8F16::stmatrix (.x2)", &|r, c| {
        (8 * r + c) as u16
    })?;
    Ok(())
}
