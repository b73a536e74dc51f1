//! [`Scalar`]: a scalar kernel argument of any element type that has a Rust type, generated
//! from the element-type table ([`ferrocuda_abi::element_types!`]). The 16-bit floats are the
//! `half` crate's `f16` and `bf16`; [`round_f64_to_half`] rounds real numbers to them once
//! (the `half` crate's own `from_f64` rounds twice, through `f32`).

use ferrocuda_abi::DType;
// The table's `half(T)` rows name these.
use half::{bf16, f16};

/// The binary format of a 16-bit float: stored significand bits and exponent bits.
trait HalfFormat {
    const MANTISSA: u32;
    const EXPONENT: u32;
}
impl HalfFormat for f16 {
    const MANTISSA: u32 = 10;
    const EXPONENT: u32 = 5;
}
impl HalfFormat for bf16 {
    const MANTISSA: u32 = 7;
    const EXPONENT: u32 = 8;
}

/// The bits of `x` rounded to the nearest value (ties to even) of the 16-bit binary format with
/// `mantissa` stored significand bits and `exponent` exponent bits (`10, 5`: IEEE binary16;
/// `7, 8`: bfloat16), with one rounding: subnormal results are rounded at their own precision,
/// finite values beyond the largest finite one become infinities, NaN becomes a quiet NaN (its
/// sign kept).
///
/// # Panics
///
/// If `mantissa + exponent != 15` or either is 0.
pub fn round_f64_to_half(x: f64, mantissa: u32, exponent: u32) -> u16 {
    assert!(mantissa >= 1 && exponent >= 1 && mantissa + exponent == 15);
    let bits = x.to_bits();
    let sign = ((bits >> 63) as u16) << 15;
    let inf = (((1u32 << exponent) - 1) << mantissa) as u16;
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    if biased == 0x7ff {
        let quiet = if fraction != 0 {
            1 << (mantissa - 1)
        } else {
            0
        };
        return sign | inf | quiet;
    }
    if biased == 0 {
        // Zero or an f64 subnormal: far below half the smallest 16-bit subnormal.
        return sign;
    }
    let bias = (1i32 << (exponent - 1)) - 1;
    let e = biased - 1023; // x = 1.fraction * 2^e
    let significand = fraction | 1 << 52;
    // Bits to drop: down to `mantissa` fraction bits, more below the smallest normal exponent.
    let drop = 52 - mantissa as i32 + (1 - bias - e).max(0);
    if drop > 53 {
        return sign; // below half the smallest subnormal
    }
    let kept = significand >> drop;
    let rest = significand & ((1u64 << drop) - 1);
    let halfway = 1u64 << (drop - 1);
    let q = kept + u64::from(rest > halfway || (rest == halfway && kept & 1 == 1));
    // `q` counts units of the result's last place; the exponent field starts at 1 for normals.
    if e < 1 - bias {
        // Subnormal (or, rounded up to 1 << mantissa, exactly the smallest normal).
        return sign | q as u16;
    }
    let (q, e) = if q >> (mantissa + 1) != 0 {
        (q >> 1, e + 1)
    } else {
        (q, e)
    };
    let field = e + bias;
    if field >= (1 << exponent) - 1 {
        return sign | inf;
    }
    sign | (field as u16) << mantissa | (q as u16 & ((1 << mantissa) - 1))
}

macro_rules! declare_scalar {
    ($($variant:ident = $code:literal, $name:literal, $typestr:literal, $dl:literal,
       $class:ident $(($rust:ty))?;)*) => {
        /// A scalar kernel argument: one variant per element type with a Rust type.
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum Scalar {
            $($(
                #[doc = concat!("`", stringify!($rust), "`")]
                $variant($rust),
            )?)*
        }

        impl Scalar {
            /// The element type.
            pub fn dtype(&self) -> DType {
                match self {
                    $($(Scalar::$variant(_) => declare_scalar!(@dtype $variant $rust),)?)*
                }
            }

            /// Writes the value's native-endian bytes (the launch buffer's image) to `out`,
            /// which must be exactly `dtype().itemsize()` bytes long.
            pub(crate) fn write(&self, out: &mut [u8]) {
                match *self {
                    $($(Scalar::$variant(v) => declare_scalar!(@write v $rust, out),)?)*
                }
            }

            /// The scalar of integer type `dtype` with value `value`; `None` when `dtype` is
            /// not an integer type or `value` is out of its range.
            pub fn from_int(dtype: DType, value: i128) -> Option<Scalar> {
                match dtype {
                    $(DType::$variant => declare_scalar!(@int $variant $class $(($rust))?, value),)*
                }
            }

            /// The scalar of float type `dtype` nearest to `value` (round to nearest); `None`
            /// when `dtype` is not a float type with a Rust type, or when a finite `value` is
            /// beyond its range (it would become an infinity).
            pub fn from_f64(dtype: DType, value: f64) -> Option<Scalar> {
                match dtype {
                    $(DType::$variant => declare_scalar!(@float $variant $class $(($rust))?, value),)*
                }
            }
        }

        $($(
            impl From<$rust> for Scalar {
                fn from(x: $rust) -> Scalar {
                    Scalar::$variant(x)
                }
            }
        )?)*
    };
    (@dtype $variant:ident $rust:ty) => { DType::$variant };
    (@write $v:ident $rust:ty, $out:ident) => { $out.copy_from_slice(&$v.to_ne_bytes()) };
    (@int $variant:ident int ($rust:ty), $v:ident) => {
        <$rust>::try_from($v).ok().map(Scalar::$variant)
    };
    (@int $variant:ident $class:ident $(($rust:ty))?, $v:ident) => { None };
    (@float $variant:ident float ($rust:ty), $v:ident) => {{
        let f = $v as $rust;
        let overflowed = $v.is_finite() && (f as f64).is_infinite();
        (!overflowed).then_some(Scalar::$variant(f))
    }};
    (@float $variant:ident half ($rust:ty), $v:ident) => {{
        let f = <$rust>::from_bits(round_f64_to_half(
            $v,
            <$rust as HalfFormat>::MANTISSA,
            <$rust as HalfFormat>::EXPONENT,
        ));
        let overflowed = $v.is_finite() && f.is_infinite();
        (!overflowed).then_some(Scalar::$variant(f))
    }};
    (@float $variant:ident $class:ident $(($rust:ty))?, $v:ident) => { None };
}

ferrocuda_abi::element_types!(declare_scalar);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_follow_the_table() {
        assert_eq!(Scalar::from(7u16).dtype(), DType::U16);
        assert_eq!(Scalar::from_int(DType::I8, -128), Some(Scalar::I8(-128)));
        assert_eq!(Scalar::from_int(DType::I8, 128), None);
        assert_eq!(Scalar::from_int(DType::U64, -1), None);
        assert_eq!(Scalar::from_int(DType::F32, 1), None);
        assert_eq!(Scalar::from_int(DType::Bool, 1), None);
        assert_eq!(Scalar::from_f64(DType::F32, 0.5), Some(Scalar::F32(0.5)));
        assert_eq!(Scalar::from_f64(DType::F32, 1e39), None);
        assert_eq!(
            Scalar::from_f64(DType::F32, f64::INFINITY),
            Some(Scalar::F32(f32::INFINITY))
        );
        assert_eq!(
            Scalar::from_f64(DType::F64, 1e300),
            Some(Scalar::F64(1e300))
        );
        assert_eq!(Scalar::from_f64(DType::I32, 1.0), None);
        let mut b = [0u8; 2];
        Scalar::I16(-2).write(&mut b);
        assert_eq!(b, (-2i16).to_ne_bytes());
    }

    #[test]
    fn half_scalars() {
        assert_eq!(Scalar::from(f16::ONE).dtype(), DType::F16);
        assert_eq!(Scalar::from(bf16::ONE).dtype(), DType::BF16);
        assert_eq!(
            Scalar::from_f64(DType::F16, 1.5),
            Some(Scalar::F16(f16::from_f32(1.5)))
        );
        assert_eq!(
            Scalar::from_f64(DType::BF16, -2.0),
            Some(Scalar::BF16(bf16::from_f32(-2.0)))
        );
        // Largest finite values, and the first values that round beyond them.
        assert_eq!(
            Scalar::from_f64(DType::F16, 65519.99),
            Some(Scalar::F16(f16::MAX))
        );
        assert_eq!(Scalar::from_f64(DType::F16, 65520.0), None);
        assert_eq!(
            Scalar::from_f64(DType::BF16, 3.3895313892515355e38),
            Some(Scalar::BF16(bf16::MAX))
        );
        assert_eq!(Scalar::from_f64(DType::BF16, 3.40e38), None);
        // Infinities and NaN pass through.
        assert_eq!(
            Scalar::from_f64(DType::F16, f64::NEG_INFINITY),
            Some(Scalar::F16(f16::NEG_INFINITY))
        );
        match Scalar::from_f64(DType::BF16, f64::NAN) {
            Some(Scalar::BF16(x)) => assert!(x.is_nan()),
            other => panic!("{other:?}"),
        }
        let mut b = [0u8; 2];
        Scalar::BF16(bf16::ONE).write(&mut b);
        assert_eq!(b, 0x3F80u16.to_ne_bytes());
    }

    /// The value of 16-bit `bits` in the format (exact in `f64`).
    fn value(bits: u16, mantissa: u32, exponent: u32) -> f64 {
        let bias = (1i32 << (exponent - 1)) - 1;
        let sign = if bits >> 15 == 1 { -1.0 } else { 1.0 };
        let field = i32::from(bits >> mantissa) & ((1 << exponent) - 1);
        let frac = f64::from(bits & ((1 << mantissa) - 1));
        let unit = 2f64.powi(-(mantissa as i32));
        if field == 0 {
            sign * frac * unit * 2f64.powi(1 - bias)
        } else if field == (1 << exponent) - 1 {
            if frac == 0.0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            }
        } else {
            sign * (1.0 + frac * unit) * 2f64.powi(field - bias)
        }
    }

    #[test]
    fn rounding_to_half_is_exact_at_every_midpoint() {
        for (mantissa, exponent) in [(10, 5), (7, 8)] {
            for bits in 0..=u16::MAX {
                let x = value(bits, mantissa, exponent);
                if x.is_nan() {
                    let r = round_f64_to_half(x, mantissa, exponent);
                    assert!(value(r, mantissa, exponent).is_nan());
                    continue;
                }
                // Every value is its own rounding.
                assert_eq!(round_f64_to_half(x, mantissa, exponent), bits, "{x}");
                let next = value(bits.wrapping_add(1), mantissa, exponent);
                if bits & 0x7fff >= 0x7fff >> mantissa << mantissa
                    || !next.is_finite()
                    || x.is_infinite()
                {
                    continue;
                }
                // Between `x` and the next value (same sign, larger magnitude): just below and
                // above the midpoint go to the nearer one, the midpoint to the even one.
                let mid = (x + next) / 2.0;
                let even = if bits & 1 == 0 { bits } else { bits + 1 };
                assert_eq!(
                    round_f64_to_half(mid, mantissa, exponent),
                    even,
                    "mid {mid}"
                );
                // One f64 step toward zero and away from it (the sign bit is apart).
                let near_x = f64::from_bits(mid.to_bits() - 1);
                let near_next = f64::from_bits(mid.to_bits() + 1);
                assert_eq!(
                    round_f64_to_half(near_x, mantissa, exponent),
                    bits,
                    "{near_x}"
                );
                assert_eq!(
                    round_f64_to_half(near_next, mantissa, exponent),
                    bits + 1,
                    "{near_next}"
                );
            }
        }
        // Where rounding through f32 first gives the wrong answer: just above an f16 midpoint
        // by less than f32's precision.
        let mid = 1.0 + 2f64.powi(-11);
        assert_eq!(round_f64_to_half(mid, 10, 5), 0x3C00); // tie to even
        assert_eq!(round_f64_to_half(mid + 2f64.powi(-40), 10, 5), 0x3C01);
        assert_eq!(
            f16::from_f64(mid + 2f64.powi(-40)).to_bits(),
            0x3C00,
            "half's double rounding"
        );
        // Tiny values: half the smallest subnormal rounds to zero (even), anything above to it.
        assert_eq!(round_f64_to_half(2f64.powi(-25), 10, 5), 0);
        assert_eq!(round_f64_to_half(2f64.powi(-25) * 1.0000001, 10, 5), 1);
        assert_eq!(round_f64_to_half(-1e-300, 7, 8), 0x8000);
        assert_eq!(round_f64_to_half(5e-324, 10, 5), 0);
    }
}
