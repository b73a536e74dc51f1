//! Element-type traits of the gallery kernels: how a stored element type widens to the type
//! arithmetic runs in ([`Storage`] → [`Acc`]), the math functions (libdevice), and the integer
//! and float operations reductions and scans need ([`Reducible`]).
//!
//! The math functions are NVIDIA's libdevice (`__nv_expf`, `__nv_erff`, …: the functions nvcc's
//! `expf`, `erff`, … compile to; the builder links libdevice in when a kernel calls one), declared
//! here in one private place until the device crate's math module provides them.

use core::ops::{Add, Mul, Sub};
use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::warp::Shuffle;
use ferrocuda_device::Element;

unsafe extern "C" {
    fn __nv_expf(x: f32) -> f32;
    fn __nv_exp(x: f64) -> f64;
    fn __nv_logf(x: f32) -> f32;
    fn __nv_log(x: f64) -> f64;
    fn __nv_erff(x: f32) -> f32;
    fn __nv_tanhf(x: f32) -> f32;
}

/// A floating-point type arithmetic runs in (`f32`, `f64`).
pub trait Acc:
    Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + PartialOrd + Shuffle
{
    /// `0`.
    const ZERO: Self;
    /// `1`.
    const ONE: Self;
    /// `-∞`.
    const NEG_INF: Self;
    /// `e^self` (libdevice; ≤ 2 ulp).
    fn exp(self) -> Self;
    /// `ln(self)` (libdevice; ≤ 1 ulp).
    fn ln(self) -> Self;
    /// `1 / self`, correctly rounded.
    fn recip(self) -> Self;
    /// The larger of the two (a NaN operand is ignored, as `fmax`; reductions that must
    /// propagate NaN do so through the sums that follow).
    fn max(self, o: Self) -> Self;
}

macro_rules! acc {
    ($t:ty, $exp:ident, $log:ident) => {
        impl Acc for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INF: Self = <$t>::NEG_INFINITY;
            #[inline(always)]
            fn exp(self) -> Self {
                // SAFETY: a pure libdevice function.
                unsafe { $exp(self) }
            }
            #[inline(always)]
            fn ln(self) -> Self {
                // SAFETY: a pure libdevice function.
                unsafe { $log(self) }
            }
            #[inline(always)]
            fn recip(self) -> Self {
                1.0 / self
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                <$t>::max(self, o)
            }
        }
    };
}
acc!(f32, __nv_expf, __nv_logf);
acc!(f64, __nv_exp, __nv_log);

/// `a · b + c` rounded once (`fma.rn.f32`): the contraction nvcc makes by default, written
/// out where a kernel wants it (the kernel crate is built without `-fp-contract=fast`, so
/// every other `a * b + c` keeps Rust's two roundings).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    core::f32::math::mul_add(a, b, c)
}

/// A stored element type and the type its arithmetic runs in: `f32` and `f64` themselves,
/// `f16` and `bf16` widened to `f32`.
pub trait Storage: Element + Copy {
    /// The arithmetic type.
    type Acc: Acc;
    /// Widens (exactly).
    fn widen(self) -> Self::Acc;
    /// Rounds to nearest even.
    fn narrow(a: Self::Acc) -> Self;
}

impl Storage for f32 {
    type Acc = f32;
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
    #[inline(always)]
    fn narrow(a: f32) -> f32 {
        a
    }
}

impl Storage for f64 {
    type Acc = f64;
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
    #[inline(always)]
    fn narrow(a: f64) -> f64 {
        a
    }
}

impl Storage for f16 {
    type Acc = f32;
    #[inline(always)]
    fn widen(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn narrow(a: f32) -> f16 {
        a as f16
    }
}

impl Storage for bf16 {
    type Acc = f32;
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    /// `cvt.rn.bf16.f32`.
    #[inline(always)]
    fn narrow(a: f32) -> bf16 {
        bf16::from_f32(a)
    }
}

/// The activation functions of the gallery, in `f32`.
pub mod act {
    use super::{__nv_erff, __nv_expf, __nv_tanhf};

    /// `x · Φ(x) = x/2 · (1 + erf(x/√2))` (PyTorch's `gelu`, `approximate='none'`).
    #[inline(always)]
    pub fn gelu(x: f32) -> f32 {
        // SAFETY: a pure libdevice function.
        let e = unsafe { __nv_erff(x * core::f32::consts::FRAC_1_SQRT_2) };
        0.5 * x * (1.0 + e)
    }

    /// `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))` (PyTorch's `approximate='tanh'`).
    #[inline(always)]
    pub fn gelu_tanh(x: f32) -> f32 {
        const K: f32 = 0.797_884_6; // √(2/π)
        let inner = K * (x + 0.044715 * x * x * x);
        // SAFETY: a pure libdevice function.
        let t = unsafe { __nv_tanhf(inner) };
        0.5 * x * (1.0 + t)
    }

    /// `x · σ(x) = x / (1 + e^-x)` (PyTorch's `silu`).
    #[inline(always)]
    pub fn silu(x: f32) -> f32 {
        // SAFETY: a pure libdevice function.
        x / (1.0 + unsafe { __nv_expf(-x) })
    }
}

/// What the reductions and scans need of an accumulator type: an identity and a sum that
/// wraps for integers.
pub trait Reducible: Copy + Shuffle + Element {
    /// `0`.
    const ZERO: Self;
    /// `a + b` (wrapping for integers).
    fn add(self, o: Self) -> Self;
}

macro_rules! reducible {
    (float $($t:ty),*) => {$(
        impl Reducible for $t {
            const ZERO: Self = 0.0;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
        }
    )*};
    (int $($t:ty),*) => {$(
        impl Reducible for $t {
            const ZERO: Self = 0;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
        }
    )*};
}
reducible!(float f32, f64);
reducible!(int i32, i64, u32, u64);

/// A lossless widening conversion (`i32 → i64` sums and scans, and the identity).
pub trait Widen<T>: Copy {
    /// The value as `T`.
    fn widen_to(self) -> T;
}

impl<T: Copy> Widen<T> for T {
    #[inline(always)]
    fn widen_to(self) -> T {
        self
    }
}

impl Widen<i64> for i32 {
    #[inline(always)]
    fn widen_to(self) -> i64 {
        self as i64
    }
}
