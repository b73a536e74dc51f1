//! Floating-point math for kernels: [`GpuFloat`] (the `f32`/`f64` methods of `std`, plus
//! `rsqrt`, `erf`, `erfc`, `exp10`) and [`FastMath`] (the hardware approximations, `f32`).
//!
//! `core` has no transcendental functions, and rustc's NVPTX backend cannot lower LLVM's
//! (`llvm.sin.f32` is a "Cannot select" crash). On the device every method calls NVIDIA's
//! **libdevice** (`__nv_expf`, `__nv_sin`, …), which the builder links in and inlines when a
//! kernel uses it — the implementation nvcc's `expf`/`sin` compile to, with the same accuracy.
//! On the host (a kernel crate's `cargo check` and unit tests) the same methods are the `libm`
//! crate's, so one source compiles on both.
//!
//! ```ignore
//! use ferrocuda_device::math::GpuFloat;
//! let y = x.exp() * (0.5 * x).sin() + x.powf(1.5) + x.rsqrt();
//! let (s, c) = x.sin_cos();
//! ```
//!
//! In a `#![no_std]` kernel crate `x.exp()` resolves to this trait (std's inherent methods do
//! not exist there). `abs`, `min`, `max`, `copysign`, `signum` are `core`'s own inherent
//! methods and compile to one instruction (`abs.f32`, `min.f32` — NaN-ignoring as Rust's,
//! `copysign.f32`); the trait has them too, for generic code.
//!
//! # Semantics
//!
//! * `round` rounds half away from zero (Rust's and C's `round`, libdevice `__nv_roundf`);
//!   `round_ties_even` rounds half to even (`rint`, one instruction).
//! * `min`/`max` return the other operand when one is NaN (Rust's, IEEE `minNum`); of `+0`
//!   and `-0`, which compare equal, either may be returned (Rust's contract; the hardware's
//!   `min`/`max` order `-0` below `+0`).
//! * `powi(n)` is libdevice's `powi` (repeated squaring: fast, at most `|n| + 1` ulp); `log(base)` is `ln(self) / ln(base)` (as `std`).
//! * Special values (±0, ±∞, NaN, domain edges) follow C99 Annex F, as libdevice documents.
//! * `sin`, `cos`, `tan`, `sin_cos` reduce huge arguments (|x| ≥ 105615 for `f32`,
//!   ≥ 2^31·π/2-ish for `f64`) with a Payne–Hanek slow path that keeps a small array in
//!   **local memory**: ptxas reports a stack frame (e.g. 28 bytes for `sinf` on sm_80) for a
//!   kernel that calls them. The builder warns about it; the arrays are touched only for huge
//!   arguments. The [`FastMath`] forms have no slow path.
//!
//! # Accuracy
//!
//! [`ACCURACY_BOUNDS`] lists the maximum error in ulps that NVIDIA publishes for each
//! function (CUDA C++ Programming Guide, appendix "Mathematical Functions", tables of
//! single- and double-precision standard functions); the device tests measure every
//! function against high-precision references and assert these bounds. Measured values:
//! `device/MATH.md`.
//!
//! # Thread model
//!
//! Pure functions: any thread, any time, no synchronisation.

/// The maximum error, in ulps, that the CUDA C++ Programming Guide ("Mathematical Functions"
/// appendix, CUDA 12) publishes for each function over its full range: `(method, f32 bound,
/// f64 bound)`. 0 means correctly rounded (IEEE). The fast forms are in [`FastMath`]'s docs.
pub const ACCURACY_BOUNDS: &[(&str, u32, u32)] = &[
    ("exp", 2, 1),
    ("exp2", 2, 1),
    ("exp10", 2, 1),
    ("exp_m1", 1, 1),
    ("ln", 1, 1),
    ("log2", 1, 1),
    ("log10", 2, 1),
    ("ln_1p", 1, 1),
    ("sin", 2, 2),
    ("cos", 2, 2),
    ("tan", 4, 2),
    ("sin_cos", 2, 2),
    ("asin", 2, 2),
    ("acos", 2, 2),
    ("atan", 2, 2),
    ("atan2", 3, 2),
    ("sinh", 3, 2),
    ("cosh", 2, 1),
    ("tanh", 2, 1),
    ("asinh", 3, 3),
    ("acosh", 4, 3),
    ("atanh", 3, 2),
    ("powf", 4, 2),
    // Not in NVIDIA's tables: libdevice's `powi` multiplies by repeated squaring, each
    // product rounded once: |n| - 1 roundings (plus the reciprocal for n < 0), each carried
    // by at most the power it feeds, give a relative error below (|n| + 1)·u (u the unit
    // roundoff), which is at most |n| + 1 ulp: 9 for the tested |n| ≤ 8.
    ("powi", 9, 9),
    ("sqrt", 0, 0),
    ("rsqrt", 2, 1),
    ("cbrt", 1, 1),
    ("hypot", 3, 2),
    ("erf", 2, 2),
    ("erfc", 4, 5),
    ("mul_add", 0, 0),
    ("floor", 0, 0),
    ("ceil", 0, 0),
    ("round", 0, 0),
    ("round_ties_even", 0, 0),
    ("trunc", 0, 0),
    ("abs", 0, 0),
    ("min", 0, 0),
    ("max", 0, 0),
    ("copysign", 0, 0),
];

/// Evaluates to the device (libdevice) or host (`libm`) call.
macro_rules! pick {
    ($dev:expr, $host:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: libdevice functions are pure and defined for every input.
        let r = unsafe { $dev };
        #[cfg(not(target_arch = "nvptx64"))]
        let r = $host;
        r
    }};
}

/// Declares the trait, the libdevice functions and the two implementations from one table:
/// `name: f32 libm, f32 libdevice / f64 libm, f64 libdevice`.
macro_rules! gpu_float {
    (
        unary { $($(#[$ud:meta])* $un:ident: $uh32:ident $ud32:ident / $uh64:ident $ud64:ident;)* }
        binary { $($(#[$bd:meta])* $bn:ident($bo:ident): $bh32:ident $bd32:ident / $bh64:ident $bd64:ident;)* }
    ) => {
        /// Math methods of `f32` and `f64` on the device (libdevice) and the host (`libm`);
        /// see the [module docs](self) for semantics and accuracy.
        pub trait GpuFloat: Copy {
            $($(#[$ud])* fn $un(self) -> Self;)*
            $($(#[$bd])* fn $bn(self, $bo: Self) -> Self;)*
            /// `self` to the integer power `n`.
            fn powi(self, n: i32) -> Self;
            /// `(sin(self), cos(self))`.
            fn sin_cos(self) -> (Self, Self);
            /// `self * a + b` with one rounding (`fma.rn`).
            fn mul_add(self, a: Self, b: Self) -> Self;
            /// The logarithm to `base`: `ln(self) / ln(base)`.
            fn log(self, base: Self) -> Self;
            /// |self|.
            fn abs(self) -> Self;
            /// The smaller operand; the other one if one is NaN.
            fn min(self, other: Self) -> Self;
            /// The larger operand; the other one if one is NaN.
            fn max(self, other: Self) -> Self;
            /// `self`'s magnitude with `sign`'s sign.
            fn copysign(self, sign: Self) -> Self;
        }

        #[cfg(target_arch = "nvptx64")]
        mod nv {
            unsafe extern "C" {
                $(pub fn $ud32(x: f32) -> f32; pub fn $ud64(x: f64) -> f64;)*
                $(pub fn $bd32(x: f32, y: f32) -> f32; pub fn $bd64(x: f64, y: f64) -> f64;)*
                pub fn __nv_powif(x: f32, n: i32) -> f32;
                pub fn __nv_powi(x: f64, n: i32) -> f64;
                pub fn __nv_sincosf(x: f32, s: *mut f32, c: *mut f32);
                pub fn __nv_sincos(x: f64, s: *mut f64, c: *mut f64);
                pub fn __nv_fmaf(x: f32, y: f32, z: f32) -> f32;
                pub fn __nv_fma(x: f64, y: f64, z: f64) -> f64;
            }
        }

        gpu_float!(@impl f32, $($un $uh32 $ud32;)* | $($bn $bo $bh32 $bd32;)* |
                   __nv_powif __nv_sincosf __nv_fmaf powf sincosf fmaf);
        gpu_float!(@impl f64, $($un $uh64 $ud64;)* | $($bn $bo $bh64 $bd64;)* |
                   __nv_powi __nv_sincos __nv_fma pow sincos fma);
    };
    (@impl $t:ty, $($un:ident $uh:ident $ud:ident;)* | $($bn:ident $bo:ident $bh:ident $bd:ident;)* |
     $powi:ident $sincos:ident $fma:ident $hpow:ident $hsincos:ident $hfma:ident) => {
        impl GpuFloat for $t {
            $(
                #[inline(always)]
                fn $un(self) -> $t {
                    pick!(nv::$ud(self), libm::$uh(self))
                }
            )*
            $(
                #[inline(always)]
                fn $bn(self, $bo: $t) -> $t {
                    pick!(nv::$bd(self, $bo), libm::$bh(self, $bo))
                }
            )*
            #[inline(always)]
            fn powi(self, n: i32) -> $t {
                pick!(nv::$powi(self, n), libm::$hpow(self, n as $t))
            }
            #[inline(always)]
            fn sin_cos(self) -> ($t, $t) {
                pick!(
                    {
                        let (mut s, mut c) = (0.0, 0.0);
                        nv::$sincos(self, &mut s, &mut c);
                        (s, c)
                    },
                    libm::$hsincos(self)
                )
            }
            #[inline(always)]
            fn mul_add(self, a: $t, b: $t) -> $t {
                pick!(nv::$fma(self, a, b), libm::$hfma(self, a, b))
            }
            #[inline(always)]
            fn log(self, base: $t) -> $t {
                GpuFloat::ln(self) / GpuFloat::ln(base)
            }
            #[inline(always)]
            fn abs(self) -> $t {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn min(self, other: $t) -> $t {
                <$t>::min(self, other)
            }
            #[inline(always)]
            fn max(self, other: $t) -> $t {
                <$t>::max(self, other)
            }
            #[inline(always)]
            fn copysign(self, sign: $t) -> $t {
                <$t>::copysign(self, sign)
            }
        }
    };
}

gpu_float! {
    unary {
        /// e^self.
        exp: expf __nv_expf / exp __nv_exp;
        /// 2^self.
        exp2: exp2f __nv_exp2f / exp2 __nv_exp2;
        /// 10^self.
        exp10: exp10f __nv_exp10f / exp10 __nv_exp10;
        /// e^self − 1, accurate near 0 (C `expm1`).
        exp_m1: expm1f __nv_expm1f / expm1 __nv_expm1;
        /// The natural logarithm (C `log`).
        ln: logf __nv_logf / log __nv_log;
        /// The base-2 logarithm.
        log2: log2f __nv_log2f / log2 __nv_log2;
        /// The base-10 logarithm.
        log10: log10f __nv_log10f / log10 __nv_log10;
        /// ln(1 + self), accurate near 0 (C `log1p`).
        ln_1p: log1pf __nv_log1pf / log1p __nv_log1p;
        /// Sine (radians).
        sin: sinf __nv_sinf / sin __nv_sin;
        /// Cosine (radians).
        cos: cosf __nv_cosf / cos __nv_cos;
        /// Tangent (radians).
        tan: tanf __nv_tanf / tan __nv_tan;
        /// Arcsine, in [−π/2, π/2]; NaN outside [−1, 1].
        asin: asinf __nv_asinf / asin __nv_asin;
        /// Arccosine, in [0, π]; NaN outside [−1, 1].
        acos: acosf __nv_acosf / acos __nv_acos;
        /// Arctangent, in [−π/2, π/2].
        atan: atanf __nv_atanf / atan __nv_atan;
        /// Hyperbolic sine.
        sinh: sinhf __nv_sinhf / sinh __nv_sinh;
        /// Hyperbolic cosine.
        cosh: coshf __nv_coshf / cosh __nv_cosh;
        /// Hyperbolic tangent.
        tanh: tanhf __nv_tanhf / tanh __nv_tanh;
        /// Inverse hyperbolic sine.
        asinh: asinhf __nv_asinhf / asinh __nv_asinh;
        /// Inverse hyperbolic cosine; NaN below 1.
        acosh: acoshf __nv_acoshf / acosh __nv_acosh;
        /// Inverse hyperbolic tangent; NaN outside [−1, 1].
        atanh: atanhf __nv_atanhf / atanh __nv_atanh;
        /// Square root, correctly rounded.
        sqrt: sqrtf __nv_sqrtf / sqrt __nv_sqrt;
        /// 1/√self (C `rsqrt`; on the host computed as `1 / sqrt`).
        rsqrt: rsqrtf __nv_rsqrtf / rsqrt __nv_rsqrt;
        /// Cube root.
        cbrt: cbrtf __nv_cbrtf / cbrt __nv_cbrt;
        /// The error function.
        erf: erff __nv_erff / erf __nv_erf;
        /// The complementary error function, 1 − erf(self), accurate for large arguments.
        erfc: erfcf __nv_erfcf / erfc __nv_erfc;
        /// The largest integer ≤ self.
        floor: floorf __nv_floorf / floor __nv_floor;
        /// The smallest integer ≥ self.
        ceil: ceilf __nv_ceilf / ceil __nv_ceil;
        /// The nearest integer, half away from zero.
        round: roundf __nv_roundf / round __nv_round;
        /// The nearest integer, half to even (C `rint`).
        round_ties_even: rintf __nv_rintf / rint __nv_rint;
        /// The integer part (towards zero).
        trunc: truncf __nv_truncf / trunc __nv_trunc;
    }
    binary {
        /// self^y.
        powf(y): powf __nv_powf / pow __nv_pow;
        /// The angle of the point (other, self): C `atan2(self, other)`, in [−π, π].
        atan2(other): atan2f __nv_atan2f / atan2 __nv_atan2;
        /// √(self² + other²) without undue overflow.
        hypot(other): hypotf __nv_hypotf / hypot __nv_hypot;
    }
}

/// `libm` has no `rsqrt`: the host form of [`GpuFloat::rsqrt`].
#[cfg(not(target_arch = "nvptx64"))]
mod libm {
    pub use ::libm::*;
    pub fn rsqrtf(x: f32) -> f32 {
        1.0 / ::libm::sqrtf(x)
    }
    pub fn rsqrt(x: f64) -> f64 {
        1.0 / ::libm::sqrt(x)
    }
}

#[cfg(target_arch = "nvptx64")]
mod nv_fast {
    unsafe extern "C" {
        pub fn __nv_fast_expf(x: f32) -> f32;
        pub fn __nv_fast_exp10f(x: f32) -> f32;
        pub fn __nv_fast_logf(x: f32) -> f32;
        pub fn __nv_fast_log2f(x: f32) -> f32;
        pub fn __nv_fast_log10f(x: f32) -> f32;
        pub fn __nv_fast_sinf(x: f32) -> f32;
        pub fn __nv_fast_cosf(x: f32) -> f32;
        pub fn __nv_fast_tanf(x: f32) -> f32;
        pub fn __nv_fast_powf(x: f32, y: f32) -> f32;
        pub fn __nv_fast_fdividef(x: f32, y: f32) -> f32;
    }
}

/// The hardware approximations of CUDA's `__expf`, `__sinf`, … (`f32` only): one or two
/// `*.approx` instructions, no slow path, no local memory, and errors as NVIDIA documents
/// them (CUDA C++ Programming Guide, "Intrinsic Functions"; inputs are flushed to zero where
/// the instruction does):
///
/// | method | CUDA | maximum error |
/// | --- | --- | --- |
/// | `exp_fast` | `__expf` | 2 + ⌊1.173·\|x\|⌋ ulp (via `ex2.approx`) |
/// | `exp2_fast` | `exp2f` under `-use_fast_math` (`ex2.approx.ftz.f32`, one instruction) | 2 ulp; results below 2^-126 (x < −126) are 0 |
/// | `exp10_fast` | `__exp10f` | 2 + ⌊2.97·\|x\|⌋ ulp |
/// | `ln_fast` | `__logf` | 2^-21.41 absolute for x in [0.5, 2], else 3 ulp |
/// | `log2_fast` | `__log2f` | 2^-22 absolute for x in [0.5, 2], else 2 ulp |
/// | `log10_fast` | `__log10f` | 2^-24 absolute for x in [0.5, 2], else 3 ulp |
/// | `sin_fast` | `__sinf` | 2^-21.41 absolute for x in [−π, π], larger outside |
/// | `cos_fast` | `__cosf` | 2^-21.19 absolute for x in [−π, π], larger outside |
/// | `tan_fast` | `__tanf` | from `__sinf / __cosf` |
/// | `powf_fast` | `__powf` | from `exp2_approx(y · log2_approx(x))` |
/// | `div_fast` | `__fdividef` (`div.approx.f32`) | 2 ulp for \|y\| in [2^-126, 2^126]; 0 when \|y\| > 2^126 |
/// | `recip_fast` | `1 / x` under `-use_fast_math` (`rcp.approx.ftz.f32`, one instruction) | 1 ulp; subnormal inputs are ±0 (→ ±∞) |
/// | [`GpuFloat::rsqrt`] | `rsqrtf` | 2 ulp (it is already the `rsqrt.approx` instruction) |
/// | `erfc_fast` | — (no intrinsic; for epilogues whose result is rounded to 16 bits) | 5.5·10⁻⁷ absolute with the host's exact division and `exp2` (the approximation's 1.4·10⁻⁷ and the f32 rounding of the polynomial near 0), measured at every 2^-14 step of [−10, 10] (`erfc_fast_error_is_bounded`); the device's `rcp`/`ex2.approx` (1 ulp, 2^-22 relative) add at most 4.5·10⁻⁷ (≤ 10⁻⁶ in all; the GPU test asserts 2^-19.5): an **absolute** bound, so the relative error of tiny results (x > 3) is large |
/// | `normal_tail_fast` | — (the GELU of the fused GEMM epilogues) | 2.8·10⁻⁷ absolute with the host's exact division and `exp2`, at every 2^-14 step of [0, 14] (`normal_tail_fast_error_is_bounded`): half `erfc_fast`'s bound, on the same polynomial; the device's approximations add at most half theirs |
pub trait FastMath: Copy {
    /// Approximate e^self.
    fn exp_fast(self) -> Self;
    /// Approximate 2^self, subnormal results flushed to zero: the one instruction softmax
    /// and attention kernels want (`exp2` without `_fast` handles subnormal results with
    /// three more instructions per call).
    fn exp2_fast(self) -> Self;
    /// Approximate 10^self.
    fn exp10_fast(self) -> Self;
    /// Approximate ln(self).
    fn ln_fast(self) -> Self;
    /// Approximate log2(self).
    fn log2_fast(self) -> Self;
    /// Approximate log10(self).
    fn log10_fast(self) -> Self;
    /// Approximate sine (accurate in [−π, π]).
    fn sin_fast(self) -> Self;
    /// Approximate cosine (accurate in [−π, π]).
    fn cos_fast(self) -> Self;
    /// Approximate tangent.
    fn tan_fast(self) -> Self;
    /// Approximate self^y.
    fn powf_fast(self, y: Self) -> Self;
    /// Approximate self / y.
    fn div_fast(self, y: Self) -> Self;
    /// Approximate 1 / self, subnormal inputs flushed to zero: one instruction, where
    /// `1.0.div_fast(x)` adds four for subnormal divisors.
    fn recip_fast(self) -> Self;
    /// Approximate erfc(self) = 1 − erf(self), to an absolute error (see the table): Abramowitz
    /// and Stegun's 7.1.26, `t·P(t)·e^(−x²)` with `t = 1 / (1 + p|x|)` and `P` of degree 4 —
    /// about a dozen instructions, two of them `MUFU` (`rcp`, `ex2`), against libdevice
    /// `erff`'s ~25; `2 − erfc(|x|)` below zero.
    fn erfc_fast(self) -> Self;
    /// Approximate Φ(−|self|) = erfc(|self| / √2) / 2, the standard normal distribution's
    /// tail beyond |self| (and 1 − Φ(|self|)), to an absolute error (see the table): the
    /// `erfc_fast` polynomial with the scalings folded into its constants — the form a GELU
    /// wants, `x · Φ(x) = max(x, 0) − |x| · Φ(−|x|)`, in one fewer multiply.
    fn normal_tail_fast(self) -> Self;
}

/// The one `f32` instruction `$instr r, x;` on the device (`x` = `$x`); `$host` on the host.
macro_rules! one_instruction {
    ($instr:literal, $x:expr, $host:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            let r: f32;
            // SAFETY: one arithmetic instruction on registers.
            unsafe {
                core::arch::asm!(concat!($instr, " {r}, {x};"), r = out(reg32) r,
                    x = in(reg32) $x, options(pure, nomem, nostack));
            }
            r
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            $host
        }
    }};
}

/// Abramowitz and Stegun 7.1.26's constants: erfc(a) = t (a1 + t (a2 + … + t a5)) e^(−a²)
/// + ε, `t = 1 / (1 + p a)`, |ε| ≤ 1.5·10⁻⁷, for a ≥ 0.
const ERFC_P: f32 = 0.327_591_1;
/// See [`ERFC_P`]: a1 … a5.
const ERFC_A: [f32; 5] = [
    0.254_829_6,
    -0.284_496_74,
    1.421_413_7,
    -1.453_152,
    1.061_405_4,
];

/// `t·A(t)·2^(s a²)`, `t = 1 / (1 + p a)`, for `a ≥ 0`: 7.1.26 with its constants scaled
/// (`erfc_fast`: as printed, `s = −log2 e`; `normal_tail_fast`: the argument divided by √2
/// and the result halved) — one `rcp`, one `ex2`, five `fma`, four `mul`.
#[inline(always)]
fn abramowitz_stegun(a: f32, p: f32, c: [f32; 5], s: f32) -> f32 {
    let t = GpuFloat::mul_add(p, a, 1.0).recip_fast();
    let mut q = c[4];
    q = GpuFloat::mul_add(q, t, c[3]);
    q = GpuFloat::mul_add(q, t, c[2]);
    q = GpuFloat::mul_add(q, t, c[1]);
    q = GpuFloat::mul_add(q, t, c[0]);
    let e = (a * s * a).exp2_fast();
    q * t * e
}

macro_rules! fast_math {
    ($($m:ident: $dev:ident / $host:ident;)* | $($bm:ident($b:ident): $bdev:ident / $bhost:expr;)*) => {
        impl FastMath for f32 {
            #[inline(always)]
            fn exp2_fast(self) -> f32 {
                one_instruction!("ex2.approx.ftz.f32", self, GpuFloat::exp2(self))
            }
            #[inline(always)]
            fn recip_fast(self) -> f32 {
                one_instruction!("rcp.approx.ftz.f32", self, 1.0 / self)
            }
            #[inline(always)]
            fn erfc_fast(self) -> f32 {
                let r = abramowitz_stegun(GpuFloat::abs(self), ERFC_P, ERFC_A, -core::f32::consts::LOG2_E);
                if self < 0.0 {
                    2.0 - r
                } else {
                    r
                }
            }
            #[inline(always)]
            fn normal_tail_fast(self) -> f32 {
                // ½ erfc(|x| / √2): the ½ in the coefficients, the 1/√2 in `p` and in the
                // exponent's scale (e^(−x²/2)).
                const P: f32 = ERFC_P * core::f32::consts::FRAC_1_SQRT_2;
                const A: [f32; 5] = [ERFC_A[0] / 2.0, ERFC_A[1] / 2.0, ERFC_A[2] / 2.0, ERFC_A[3] / 2.0, ERFC_A[4] / 2.0];
                abramowitz_stegun(GpuFloat::abs(self), P, A, -0.5 * core::f32::consts::LOG2_E)
            }
            $(
                #[inline(always)]
                fn $m(self) -> f32 {
                    pick!(nv_fast::$dev(self), GpuFloat::$host(self))
                }
            )*
            $(
                #[inline(always)]
                fn $bm(self, $b: f32) -> f32 {
                    pick!(nv_fast::$bdev(self, $b), $bhost(self, $b))
                }
            )*
        }
    };
}
fast_math! {
    exp_fast: __nv_fast_expf / exp;
    exp10_fast: __nv_fast_exp10f / exp10;
    ln_fast: __nv_fast_logf / ln;
    log2_fast: __nv_fast_log2f / log2;
    log10_fast: __nv_fast_log10f / log10;
    sin_fast: __nv_fast_sinf / sin;
    cos_fast: __nv_fast_cosf / cos;
    tan_fast: __nv_fast_tanf / tan;
    |
    powf_fast(y): __nv_fast_powf / GpuFloat::powf;
    div_fast(y): __nv_fast_fdividef / core::ops::Div::div;
}

#[cfg(test)]
mod tests {
    use super::{FastMath, GpuFloat};

    /// The host forms are `libm`'s (and agree with `std` to the last bit or two).
    #[test]
    fn host_forms_compute_the_functions() {
        let x = 0.7f32;
        assert!((GpuFloat::exp(x) - x.exp()).abs() <= f32::EPSILON * 2.0);
        assert_eq!(GpuFloat::sin_cos(1.0f64), (1.0f64.sin(), 1.0f64.cos()));
        assert_eq!(GpuFloat::rsqrt(4.0f64), 0.5);
        assert_eq!(GpuFloat::round(-2.5f32), -3.0);
        assert_eq!(GpuFloat::round_ties_even(-2.5f32), -2.0);
        assert_eq!(GpuFloat::powi(3.0f64, 3), 27.0);
        assert_eq!(GpuFloat::min(f32::NAN, 1.0), 1.0);
        assert_eq!(GpuFloat::mul_add(2.0f64, 3.0, 1.0), 7.0);
        assert_eq!(GpuFloat::log(8.0f64, 2.0), 3.0);
        assert!((GpuFloat::erf(0.5f64) - 0.520_499_877_813_046_5).abs() < 1e-15);
        assert_eq!(2.0f32.div_fast(4.0), 0.5);
        assert_eq!(3.0f32.exp2_fast(), 8.0);
        assert_eq!(4.0f32.recip_fast(), 0.25);
        assert_eq!(GpuFloat::exp10(2.0f32), 100.0);
    }

    /// The largest absolute error of `f` against the f64 reference `want` at every 2^-14
    /// step of [−`end`, `end`], and where it is.
    fn worst_abs_error(end: u32, f: impl Fn(f32) -> f32, want: impl Fn(f64) -> f64) -> (f64, f32) {
        let mut worst = (0.0f64, 0.0f32);
        for i in 0..=end << 14 {
            let x = i as f32 / (1 << 14) as f32;
            for x in [x, -x] {
                let e = (f64::from(f(x)) - want(f64::from(x))).abs();
                if e > worst.0 {
                    worst = (e, x);
                }
            }
        }
        worst
    }

    /// `erfc_fast`'s host form (the device's arithmetic but for exact division and `exp2`)
    /// within the table's bound of f64 `erfc` at every 2^-14 step of [0, 10], its reflection
    /// below zero, and the special values.
    #[test]
    fn erfc_fast_error_is_bounded() {
        let worst = worst_abs_error(10, f32::erfc_fast, libm::erfc);
        assert!(
            worst.0 <= 5.5e-7,
            "erfc_fast off by {:e} at {}",
            worst.0,
            worst.1
        );
        // The bound is not loose by orders of magnitude.
        assert!(worst.0 >= 2e-7, "{worst:?}");
        assert_eq!(f32::INFINITY.erfc_fast(), 0.0);
        assert_eq!(f32::NEG_INFINITY.erfc_fast(), 2.0);
        assert!(f32::NAN.erfc_fast().is_nan());
        assert!(30.0f32.erfc_fast() == 0.0 && (-30.0f32).erfc_fast() == 2.0);
    }

    /// `normal_tail_fast` (host form, as above) within the table's bound of f64
    /// `erfc(|x| / √2) / 2` at every 2^-14 step of [0, 14] and its reflection, and the special
    /// values.
    #[test]
    fn normal_tail_fast_error_is_bounded() {
        let worst = worst_abs_error(14, f32::normal_tail_fast, |x| {
            libm::erfc(x.abs() * core::f64::consts::FRAC_1_SQRT_2) / 2.0
        });
        assert!(
            worst.0 <= 2.8e-7,
            "normal_tail_fast off by {:e} at {}",
            worst.0,
            worst.1
        );
        assert!(worst.0 >= 1e-7, "{worst:?}");
        assert_eq!(f32::INFINITY.normal_tail_fast(), 0.0);
        assert_eq!(f32::NEG_INFINITY.normal_tail_fast(), 0.0);
        assert!((0.0f32.normal_tail_fast() - 0.5).abs() <= 2.8e-7);
        assert!(f32::NAN.normal_tail_fast().is_nan());
        assert_eq!(40.0f32.normal_tail_fast(), 0.0);
    }
}
