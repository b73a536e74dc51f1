//! Hardware arithmetic and conversions of [`bf16`], [`f16x2`] and [`bf16x2`] (device only).

use super::{bf16, bf16x2, f16x2};
use core::arch::asm;
use core::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// One pure PTX instruction `$op d, a, b[, c]` on 16- or 32-bit registers.
macro_rules! pure {
    ($reg:ident, $op:literal, $a:expr, $b:expr) => {{
        let d;
        // SAFETY: a register-only arithmetic instruction of sm_80.
        unsafe {
            asm!(concat!($op, " {d}, {a}, {b};"), d = out($reg) d, a = in($reg) $a, b = in($reg) $b,
                 options(pure, nomem, nostack))
        };
        d
    }};
    ($reg:ident, $op:literal, $a:expr, $b:expr, $c:expr) => {{
        let d;
        // SAFETY: as above.
        unsafe {
            asm!(concat!($op, " {d}, {a}, {b}, {c};"), d = out($reg) d, a = in($reg) $a,
                 b = in($reg) $b, c = in($reg) $c, options(pure, nomem, nostack))
        };
        d
    }};
}

impl bf16 {
    /// Rounds `x` to the nearest bf16, ties to even (`cvt.rn.bf16.f32`); NaN stays NaN.
    #[inline(always)]
    pub fn from_f32(x: f32) -> bf16 {
        let d: u16;
        // SAFETY: a register-only conversion of sm_80.
        unsafe {
            asm!("cvt.rn.bf16.f32 {d}, {x};", d = out(reg16) d, x = in(reg32) x,
                 options(pure, nomem, nostack))
        };
        bf16(d)
    }

    /// `self * a + b` with one rounding (`fma.rn.bf16`).
    #[inline(always)]
    pub fn mul_add(self, a: bf16, b: bf16) -> bf16 {
        bf16(pure!(reg16, "fma.rn.bf16", self.0, a.0, b.0))
    }

    /// Absolute value (clears the sign bit).
    #[inline(always)]
    pub fn abs(self) -> bf16 {
        bf16(self.0 & 0x7FFF)
    }

    /// The smaller value; a NaN operand is ignored (`min.bf16`).
    #[inline(always)]
    pub fn min(self, other: bf16) -> bf16 {
        bf16(pure!(reg16, "min.bf16", self.0, other.0))
    }

    /// The larger value; a NaN operand is ignored (`max.bf16`).
    #[inline(always)]
    pub fn max(self, other: bf16) -> bf16 {
        bf16(pure!(reg16, "max.bf16", self.0, other.0))
    }
}

impl From<f32> for bf16 {
    #[inline(always)]
    fn from(x: f32) -> bf16 {
        bf16::from_f32(x)
    }
}

impl Add for bf16 {
    type Output = bf16;
    /// `fma.rn.bf16 a, 1.0, b`: the sum, rounded once.
    #[inline(always)]
    fn add(self, o: bf16) -> bf16 {
        self.mul_add(bf16::ONE, o)
    }
}

impl Sub for bf16 {
    type Output = bf16;
    /// `fma.rn.bf16 b, -1.0, a`: the difference, rounded once.
    #[inline(always)]
    fn sub(self, o: bf16) -> bf16 {
        o.mul_add(bf16::NEG_ONE, self)
    }
}

impl Mul for bf16 {
    type Output = bf16;
    /// `fma.rn.bf16 a, b, -0.0`: the product, rounded once (`-0.0` keeps the sign of zeros).
    #[inline(always)]
    fn mul(self, o: bf16) -> bf16 {
        self.mul_add(o, bf16::NEG_ZERO)
    }
}

impl Div for bf16 {
    type Output = bf16;
    /// `div.rn.f32` then `cvt.rn.bf16.f32`: the correctly rounded quotient.
    #[inline(always)]
    fn div(self, o: bf16) -> bf16 {
        bf16::from_f32(self.to_f32() / o.to_f32())
    }
}

impl Neg for bf16 {
    type Output = bf16;
    #[inline(always)]
    fn neg(self) -> bf16 {
        bf16(self.0 ^ 0x8000)
    }
}

impl f16x2 {
    /// Rounds `(lo, hi)` to f16, ties to even (`cvt.rn.f16x2.f32`, one instruction).
    #[inline(always)]
    pub fn from_f32s(lo: f32, hi: f32) -> f16x2 {
        let d: u32;
        // SAFETY: a register-only conversion of sm_80; the first source goes to the upper half.
        unsafe {
            asm!("cvt.rn.f16x2.f32 {d}, {hi}, {lo};", d = out(reg32) d, hi = in(reg32) hi,
                 lo = in(reg32) lo, options(pure, nomem, nostack))
        };
        f16x2(d)
    }

    /// Both elements as `f32` (exact), `(lo, hi)`.
    #[inline(always)]
    pub fn to_f32s(self) -> (f32, f32) {
        (self.lo() as f32, self.hi() as f32)
    }

    /// Lane-wise `self * a + b` with one rounding (`fma.rn.f16x2`).
    #[inline(always)]
    pub fn mul_add(self, a: f16x2, b: f16x2) -> f16x2 {
        f16x2(pure!(reg32, "fma.rn.f16x2", self.0, a.0, b.0))
    }
}

impl bf16x2 {
    /// Rounds `(lo, hi)` to bf16, ties to even (`cvt.rn.bf16x2.f32`, one instruction).
    #[inline(always)]
    pub fn from_f32s(lo: f32, hi: f32) -> bf16x2 {
        let d: u32;
        // SAFETY: a register-only conversion of sm_80; the first source goes to the upper half.
        unsafe {
            asm!("cvt.rn.bf16x2.f32 {d}, {hi}, {lo};", d = out(reg32) d, hi = in(reg32) hi,
                 lo = in(reg32) lo, options(pure, nomem, nostack))
        };
        bf16x2(d)
    }

    /// Both elements as `f32` (exact), `(lo, hi)`.
    #[inline(always)]
    pub fn to_f32s(self) -> (f32, f32) {
        (self.lo().to_f32(), self.hi().to_f32())
    }

    /// Lane-wise `self * a + b` with one rounding (`fma.rn.bf16x2`).
    #[inline(always)]
    pub fn mul_add(self, a: bf16x2, b: bf16x2) -> bf16x2 {
        bf16x2(pure!(reg32, "fma.rn.bf16x2", self.0, a.0, b.0))
    }
}

impl Add for f16x2 {
    type Output = f16x2;
    /// `add.rn.f16x2`.
    #[inline(always)]
    fn add(self, o: f16x2) -> f16x2 {
        f16x2(pure!(reg32, "add.rn.f16x2", self.0, o.0))
    }
}

impl Sub for f16x2 {
    type Output = f16x2;
    /// `sub.rn.f16x2`.
    #[inline(always)]
    fn sub(self, o: f16x2) -> f16x2 {
        f16x2(pure!(reg32, "sub.rn.f16x2", self.0, o.0))
    }
}

impl Mul for f16x2 {
    type Output = f16x2;
    /// `mul.rn.f16x2`.
    #[inline(always)]
    fn mul(self, o: f16x2) -> f16x2 {
        f16x2(pure!(reg32, "mul.rn.f16x2", self.0, o.0))
    }
}

const BF16X2_ONE: bf16x2 = bf16x2(0x3F80_3F80);
const BF16X2_NEG_ONE: bf16x2 = bf16x2(0xBF80_BF80);
const BF16X2_NEG_ZERO: bf16x2 = bf16x2(0x8000_8000);

impl Add for bf16x2 {
    type Output = bf16x2;
    /// `fma.rn.bf16x2 a, 1.0, b`.
    #[inline(always)]
    fn add(self, o: bf16x2) -> bf16x2 {
        self.mul_add(BF16X2_ONE, o)
    }
}

impl Sub for bf16x2 {
    type Output = bf16x2;
    /// `fma.rn.bf16x2 b, -1.0, a`.
    #[inline(always)]
    fn sub(self, o: bf16x2) -> bf16x2 {
        o.mul_add(BF16X2_NEG_ONE, self)
    }
}

impl Mul for bf16x2 {
    type Output = bf16x2;
    /// `fma.rn.bf16x2 a, b, -0.0`.
    #[inline(always)]
    fn mul(self, o: bf16x2) -> bf16x2 {
        self.mul_add(o, BF16X2_NEG_ZERO)
    }
}

macro_rules! neg_by_sign_bits {
    ($($t:ident: $mask:literal),*) => {$(
        impl Neg for $t {
            type Output = $t;
            /// Flips the sign bit of each element.
            #[inline(always)]
            fn neg(self) -> $t {
                $t(self.0 ^ $mask)
            }
        }
    )*};
}
neg_by_sign_bits!(f16x2: 0x8000_8000, bf16x2: 0x8000_8000);

macro_rules! assign_ops {
    ($($t:ty: $($tr:ident $m:ident $op:tt),*;)*) => {$($(
        impl $tr for $t {
            #[inline(always)]
            fn $m(&mut self, o: $t) {
                *self = *self $op o;
            }
        }
    )*)*};
}
assign_ops! {
    bf16: AddAssign add_assign +, SubAssign sub_assign -, MulAssign mul_assign *, DivAssign div_assign /;
    f16x2: AddAssign add_assign +, SubAssign sub_assign -, MulAssign mul_assign *;
    bf16x2: AddAssign add_assign +, SubAssign sub_assign -, MulAssign mul_assign *;
}
