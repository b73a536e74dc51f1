//! Half-precision element types: `f16`, [`bf16`] and the packed pairs [`f16x2`],
//! [`bf16x2`], with arithmetic and conversions done by the hardware.
//!
//! * `f16` is Rust's own `f16` primitive on the device (`+`, `*`, … compile to
//!   `add.rn.f16`, `mul.rn.f16`; `x as f32` and `y as f16` to `cvt.f32.f16` and
//!   `cvt.rn.f16.f32`). It is an [`Element`](crate::Element) (`float16`), so `Slice<f16>`
//!   and `SliceMut<f16>` work in kernels. The host build is stable Rust, which has no `f16`:
//!   there the name is a 16-bit placeholder that lets `#[kernel]` check signatures; host code
//!   uses `half::f16`, which has the same bit layout. Arithmetic and `as` casts need nothing
//!   more; a kernel crate that calls `f16`'s methods (`from_bits`, `to_bits`, …) or writes
//!   `f16` literals also enables the feature for the device:
//!   `#![cfg_attr(target_arch = "nvptx64", feature(f16))]` (the builder's kernel build is
//!   unstable-enabled).
//! * [`bf16`] has no primitive: a `#[repr(transparent)]` 16-bit type (the layout of
//!   `half::bf16`). [`bf16::from_f32`] is `cvt.rn.bf16.f32`; [`bf16::to_f32`] is exact (the
//!   bits shifted left by 16). sm_80 has bf16 `fma` but no bf16 `add`/`mul`, so `a + b` is
//!   `fma.rn.bf16 a, 1.0, b` and `a * b` is `fma.rn.bf16 a, b, -0.0` — exactly one rounding
//!   each, as the sm_90 instructions; `a / b` divides in `f32` and rounds once more, which is
//!   still the correctly rounded quotient (`f32` has more than twice bf16's precision plus
//!   two bits, so the double rounding is innocuous).
//! * [`f16x2`] and [`bf16x2`] hold two values in one 32-bit register (element 0 in the low
//!   half, at the lower address): `add.rn.f16x2`, `fma.rn.bf16x2`, `cvt.rn.f16x2.f32`, …
//!   and the packed atomic adds of [`atomic`](crate::atomic).
//!
//! Both are [`Element`](crate::Element)s (`float16`, `bfloat16`) and kernel scalar
//! parameters, so `Slice<bf16>`, `ViewMut<f16, 2>` and `alpha: bf16` work in kernels; on the
//! host they are `half::f16` and `half::bf16` (same bits).
//!
//! # Thread model
//!
//! Plain values: any thread, any time; no convergence or memory-model concerns.

#[cfg(target_arch = "nvptx64")]
mod arith;

/// IEEE 754 binary16: Rust's `f16` primitive on the device.
#[cfg(target_arch = "nvptx64")]
#[allow(non_camel_case_types)]
pub type f16 = primitive::F16;

/// The primitive, named from a scope where `f16` is not this module's alias.
#[cfg(target_arch = "nvptx64")]
mod primitive {
    pub type F16 = f16;
}

/// IEEE 754 binary16 (host placeholder).
///
/// Stable Rust has no `f16` primitive: on the host this type only lets kernel signatures
/// that name `f16` be checked by `#[kernel]`; it has the bit layout of `half::f16`.
#[cfg(not(target_arch = "nvptx64"))]
#[allow(non_camel_case_types)]
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct f16(u16);

#[cfg(not(target_arch = "nvptx64"))]
impl f16 {
    /// The value with these IEEE binary16 bits.
    pub const fn from_bits(bits: u16) -> Self {
        f16(bits)
    }

    /// The IEEE binary16 bits.
    pub const fn to_bits(self) -> u16 {
        self.0
    }
}

// SAFETY: 16 bits, `repr(transparent)` over `u16`, every bit pattern valid: `float16`.
#[cfg(not(target_arch = "nvptx64"))]
unsafe impl ferrocuda_abi::Element for f16 {
    const DTYPE: ferrocuda_abi::DType = ferrocuda_abi::DType::F16;
}

// SAFETY: passed by value; the description is computed from the type (2 bytes, align 2),
// the layout of the device's `f16` primitive.
#[cfg(not(target_arch = "nvptx64"))]
unsafe impl ferrocuda_abi::KernelParam for f16 {
    const DESC: ferrocuda_abi::ParamDesc = ferrocuda_abi::ParamDesc::scalar::<f16>();
}

// SAFETY: `repr(transparent)` over `u16` with bfloat16's bit layout; every bit pattern is a
// value: exactly `bfloat16`.
unsafe impl ferrocuda_abi::Element for bf16 {
    const DTYPE: ferrocuda_abi::DType = ferrocuda_abi::DType::BF16;
}

// SAFETY: passed by value; the description is computed from the type.
unsafe impl ferrocuda_abi::KernelParam for bf16 {
    const DESC: ferrocuda_abi::ParamDesc = ferrocuda_abi::ParamDesc::scalar::<bf16>();
}

/// bfloat16: the upper half of an `f32` (8 exponent bits, 8 significand bits).
#[allow(non_camel_case_types)]
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default)]
pub struct bf16(u16);

impl bf16 {
    /// `0.0`.
    pub const ZERO: bf16 = bf16(0x0000);
    /// `-0.0`.
    pub const NEG_ZERO: bf16 = bf16(0x8000);
    /// `1.0`.
    pub const ONE: bf16 = bf16(0x3F80);
    /// `-1.0`.
    pub const NEG_ONE: bf16 = bf16(0xBF80);
    /// Positive infinity.
    pub const INFINITY: bf16 = bf16(0x7F80);
    /// Negative infinity.
    pub const NEG_INFINITY: bf16 = bf16(0xFF80);
    /// A quiet NaN.
    pub const NAN: bf16 = bf16(0x7FC0);
    /// Largest finite value (3.3895e38).
    pub const MAX: bf16 = bf16(0x7F7F);
    /// Smallest positive normal value (1.1755e-38).
    pub const MIN_POSITIVE: bf16 = bf16(0x0080);
    /// Difference between 1.0 and the next larger value (2^-7).
    pub const EPSILON: bf16 = bf16(0x3C00);

    /// The value with these bits.
    #[inline(always)]
    pub const fn from_bits(bits: u16) -> Self {
        bf16(bits)
    }

    /// The bits.
    #[inline(always)]
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// The exact `f32` value (the bits shifted into the upper half).
    #[inline(always)]
    pub const fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }

    /// `true` for NaN.
    #[inline(always)]
    pub const fn is_nan(self) -> bool {
        self.0 & 0x7FFF > 0x7F80
    }
}

impl From<bf16> for f32 {
    #[inline(always)]
    fn from(x: bf16) -> f32 {
        x.to_f32()
    }
}

/// IEEE comparison (as `f32`): `-0.0 == 0.0`, NaN is unequal to everything.
impl PartialEq for bf16 {
    #[inline(always)]
    fn eq(&self, other: &bf16) -> bool {
        self.to_f32() == other.to_f32()
    }
}

impl PartialOrd for bf16 {
    #[inline(always)]
    fn partial_cmp(&self, other: &bf16) -> Option<core::cmp::Ordering> {
        self.to_f32().partial_cmp(&other.to_f32())
    }
}

macro_rules! packed {
    ($(#[$doc:meta] $name:ident of $elem:ident;)*) => {$(
        #[$doc]
        #[allow(non_camel_case_types)]
        #[repr(C, align(4))]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name(u32);

        impl $name {
            /// The pair with these bits (element 0 in the low half).
            #[inline(always)]
            pub const fn from_bits(bits: u32) -> Self {
                $name(bits)
            }

            /// The bits (element 0 in the low half).
            #[inline(always)]
            pub const fn to_bits(self) -> u32 {
                self.0
            }

            /// The pair `(lo, hi)`: `lo` is element 0 (low half, lower address).
            #[inline(always)]
            pub fn new(lo: $elem, hi: $elem) -> Self {
                $name(lo.to_bits() as u32 | (hi.to_bits() as u32) << 16)
            }

            /// Element 0 (the low half).
            #[inline(always)]
            pub fn lo(self) -> $elem {
                $elem::from_bits(self.0 as u16)
            }

            /// Element 1 (the high half).
            #[inline(always)]
            pub fn hi(self) -> $elem {
                $elem::from_bits((self.0 >> 16) as u16)
            }
        }
    )*};
}
packed! {
    /// Two `f16` in one 32-bit word (CUDA `__half2`). `PartialEq` compares bits.
    f16x2 of f16;
    /// Two [`bf16`] in one 32-bit word (CUDA `__nv_bfloat162`). `PartialEq` compares bits.
    bf16x2 of bf16;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_bits_and_widening() {
        assert_eq!(bf16::ONE.to_f32(), 1.0);
        assert_eq!(bf16::NEG_ONE.to_f32(), -1.0);
        assert_eq!(bf16::EPSILON.to_f32(), 2f32.powi(-7));
        assert_eq!(bf16::MIN_POSITIVE.to_f32(), f32::MIN_POSITIVE);
        assert_eq!(bf16::MAX.to_f32(), f32::from_bits(0x7F7F_0000));
        assert!(bf16::NAN.is_nan() && !bf16::INFINITY.is_nan());
        assert_eq!(bf16::ZERO, bf16::NEG_ZERO);
        assert!(bf16::NAN != bf16::NAN);
        assert!(bf16::NEG_ONE < bf16::ONE);
        for bits in 0..=u16::MAX {
            let x = bf16::from_bits(bits);
            assert_eq!(x.to_f32().to_bits() >> 16, bits as u32);
            assert_eq!(x.is_nan(), x.to_f32().is_nan());
        }
    }

    #[test]
    fn packed_halves() {
        let p = bf16x2::new(bf16::ONE, bf16::NEG_ONE);
        assert_eq!(p.to_bits(), 0xBF80_3F80);
        assert_eq!((p.lo().to_bits(), p.hi().to_bits()), (0x3F80, 0xBF80));
        let h = f16x2::new(f16::from_bits(0x3C00), f16::from_bits(0x4000));
        assert_eq!(h.to_bits(), 0x4000_3C00);
        assert_eq!(h.hi().to_bits(), 0x4000);
    }
}
