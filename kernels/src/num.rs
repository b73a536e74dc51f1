//! Element-type traits of the gallery kernels: how a stored element type widens to the type
//! arithmetic runs in ([`Storage`] → [`Acc`]), the math functions, and the integer and float
//! operations reductions and scans need ([`Reducible`]).
//!
//! The math functions are the device crate's [`GpuFloat`] methods: NVIDIA's libdevice
//! (`__nv_expf`, `__nv_erff`, …, the functions nvcc's `expf`, `erff`, … compile to), which the
//! builder links in when a kernel calls one.

use core::ops::{Add, Mul, Sub};
use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::warp::Shuffle;
use ferrocuda_device::{Element, GpuFloat};

/// A floating-point type arithmetic runs in (`f32`, `f64`).
pub trait Acc:
    Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + PartialOrd + Shuffle
{
    /// `0`.
    const ZERO: Self;
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
    ($t:ty) => {
        impl Acc for $t {
            const ZERO: Self = 0.0;
            const NEG_INF: Self = <$t>::NEG_INFINITY;
            #[inline(always)]
            fn exp(self) -> Self {
                GpuFloat::exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                GpuFloat::ln(self)
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
acc!(f32);
acc!(f64);

/// `a · b + c` rounded once (`fma.rn.f32`): the contraction nvcc makes by default, written
/// out where a kernel wants it (the kernel crate is built without `-fp-contract=fast`, so
/// every other `a * b + c` keeps Rust's two roundings).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    GpuFloat::mul_add(a, b, c)
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
    use ferrocuda_device::GpuFloat;

    /// `x · Φ(x) = x/2 · (1 + erf(x/√2))` (PyTorch's `gelu`, `approximate='none'`).
    #[inline(always)]
    pub fn gelu(x: f32) -> f32 {
        let e = (x * core::f32::consts::FRAC_1_SQRT_2).erf();
        0.5 * x * (1.0 + e)
    }

    /// [`gelu`] through [`FastMath::normal_tail_fast`](ferrocuda_device::math::FastMath::normal_tail_fast):
    /// `x · Φ(x) = max(x, 0) − |x| · Φ(−|x|)` — no cancellation in `1 + erf` for negative
    /// `x`, one `fma` for the sign — within `2.8·10⁻⁷ |x|` and a few ulp of the exact GELU (the
    /// tail's absolute bound, doubled on the device), in about 14 instructions where a GELU
    /// through libdevice's `erff` takes about 27: for the fused GEMM epilogue, whose sums are
    /// rounded to bf16 next (2^-9 relative). `|x|` is capped at `f32::MAX` in the product, so
    /// that `+∞` gives `+∞` and `−∞` gives 0 (not `∞ · 0`); NaN stays NaN.
    #[inline(always)]
    pub fn gelu_fast(x: f32) -> f32 {
        use ferrocuda_device::math::FastMath;
        let h = x.normal_tail_fast();
        GpuFloat::mul_add(-GpuFloat::min(x.abs(), f32::MAX), h, GpuFloat::max(x, 0.0))
    }

    /// `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))` (PyTorch's `approximate='tanh'`).
    #[inline(always)]
    pub fn gelu_tanh(x: f32) -> f32 {
        const K: f32 = 0.797_884_6; // √(2/π)
        let inner = K * (x + 0.044715 * x * x * x);
        0.5 * x * (1.0 + inner.tanh())
    }

    /// [`gelu_tanh`] as `x · σ(2u)`, `u = √(2/π) · (x + 0.044715 x³)` (`(1 + tanh u) / 2 =
    /// σ(2u)`), through [`sigmoid_fast`]: for the fused GEMM epilogue.
    #[inline(always)]
    pub fn gelu_tanh_fast(x: f32) -> f32 {
        const K: f32 = 0.797_884_6; // √(2/π)
        let inner = K * (x + 0.044715 * x * x * x);
        x * sigmoid_fast(2.0 * inner)
    }

    /// `x · σ(x) = x / (1 + e^-x)` (PyTorch's `silu`).
    #[inline(always)]
    pub fn silu(x: f32) -> f32 {
        x / (1.0 + (-x).exp())
    }

    /// [`silu`] through [`sigmoid_fast`]: for the fused GEMM epilogue (no IEEE division, whose
    /// slow path is a call).
    #[inline(always)]
    pub fn silu_fast(x: f32) -> f32 {
        x * sigmoid_fast(x)
    }

    /// `σ(v) = 1 / (1 + e^-v)` in four instructions (`ex2.approx`, `rcp.approx`): a few ulp
    /// where `e^-v` is small, and a relative error growing as `|v| · 2^-24` where it is large
    /// (the rounding of `v · log2 e`); 0 below v ≈ −88 (`e^-v` overflows), 1 far above 0.
    #[inline(always)]
    pub fn sigmoid_fast(v: f32) -> f32 {
        use ferrocuda_device::math::FastMath;
        (1.0 + (v * -core::f32::consts::LOG2_E).exp2_fast()).recip_fast()
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
