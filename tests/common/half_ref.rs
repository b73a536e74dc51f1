//! A correctly rounded `f64` → f16/bf16 conversion: the reference for the device's
//! hardware conversions and half-precision arithmetic (the `half` crate's `from_f64` rounds
//! twice, through `f32`). Shared by the GPU tests and its own CPU test.

use half::{bf16, f16};

/// `x` rounded to nearest, ties to even, in the binary format with `mant` stored significand
/// bits and `exp` exponent bits (f16: 10, 5; bf16: 7, 8), subnormals and overflow included.
/// Exact: scaling by a power of two, `floor` and the comparison with 0.5 are exact in `f64`.
pub fn round_to(x: f64, mant: u32, exp: u32) -> u16 {
    let sign = (x.is_sign_negative() as u16) << 15;
    let inf = ((1u16 << exp) - 1) << mant;
    if x.is_nan() {
        return inf | 1 << (mant - 1);
    }
    let a = x.abs();
    let bias = (1i32 << (exp - 1)) - 1;
    let emin = 1 - bias;
    if a.is_infinite() {
        return sign | inf;
    }
    let e = if a == 0.0 {
        emin
    } else {
        ((a.to_bits() >> 52) as i32 - 1023).max(emin)
    };
    let q = 2f64.powi(e - mant as i32);
    let m = a / q;
    let (fl, frac) = (m.floor(), m - m.floor());
    let mut n = fl as u64;
    if frac > 0.5 || (frac == 0.5 && n & 1 == 1) {
        n += 1;
    }
    let (mut n, mut e) = (n, e);
    if n >> (mant + 1) != 0 {
        n >>= 1;
        e += 1;
    }
    if n < 1 << mant {
        return sign | n as u16; // subnormal (e == emin) or zero
    }
    if e + bias >= (1 << exp) - 1 {
        return sign | inf;
    }
    sign | ((e + bias) as u16) << mant | (n - (1 << mant)) as u16
}

/// Checks [`round_to`] (called by the CPU test `tests/half_reference.rs`).
#[allow(dead_code)]
pub fn self_test() {
    // Just above a midpoint (the double-rounding trap), ties to even, subnormals, overflow.
    assert_eq!(
        round_to(1.0 + 2f64.powi(-11) + 2f64.powi(-40), 10, 5),
        0x3C01
    );
    assert_eq!(round_to(1.0 + 2f64.powi(-11), 10, 5), 0x3C00);
    assert_eq!(round_to(1.0 + 3.0 * 2f64.powi(-11), 10, 5), 0x3C02);
    assert_eq!(round_to(1.0 + 2f64.powi(-8) + 2f64.powi(-40), 7, 8), 0x3F81);
    assert_eq!(round_to(2f64.powi(-134) + 2f64.powi(-170), 7, 8), 0x0001);
    assert_eq!(round_to(2f64.powi(-134), 7, 8), 0x0000);
    assert_eq!(round_to(-3.0 * 2f64.powi(-134), 7, 8), 0x8002);
    assert_eq!(round_to(2f64.powi(-25) + 2f64.powi(-60), 10, 5), 0x0001);
    assert_eq!(round_to(65504.0, 10, 5), 0x7BFF);
    assert_eq!(round_to(65519.99, 10, 5), 0x7BFF);
    assert_eq!(round_to(65520.0, 10, 5), 0x7C00);
    assert_eq!(round_to(f32::MAX as f64, 7, 8), 0x7F80);
    assert_eq!(round_to(-0.0, 7, 8), 0x8000);
    assert_eq!(
        round_to(2f64.powi(-14) * (1.0 - 2f64.powi(-12)), 10, 5),
        0x0400
    );
    // Agreement with exact values: every f16 and bf16 pattern rounds to itself.
    for b in 0..=u16::MAX {
        let (h, g) = (f16::from_bits(b), bf16::from_bits(b));
        if !h.is_nan() {
            assert_eq!(round_to(h.to_f64(), 10, 5), b);
        }
        if !g.is_nan() {
            assert_eq!(round_to(g.to_f64(), 7, 8), b);
        }
    }
}
