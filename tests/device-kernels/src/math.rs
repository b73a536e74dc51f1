//! One kernel per math function and type, for the accuracy tests and the per-function
//! register report: `math_<method>_<type>` applies `ferrocuda_device::math::GpuFloat::<method>`
//! element by element (`fast_<method>` the `FastMath` form). Unary kernels take `(x, out)`,
//! binary ones `(x, y, out)`, `powi` `(x, n, out)`, `mul_add` `(x, a, b, out)`, `sin_cos`
//! `(x, s, c)`; every array has the same shape (checked by the host).

#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::math::{FastMath, GpuFloat};
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::thread;
use ferrocuda_device::{kernel, Slice, SliceMut};

macro_rules! unary {
    ($($name:ident: $t:ty => $m:ident;)*) => {$(
        #[kernel(same_shape(x, out))]
        pub unsafe fn $name(x: Slice<$t>, out: SliceMut<$t>) {
            #[cfg(target_arch = "nvptx64")]
            for i in thread::grid_stride(out.len()) {
                // SAFETY: i < len of both (same shape); one thread per element.
                unsafe { out.write_unchecked(i, x.get_unchecked(i).$m()) };
            }
        }
    )*};
}

macro_rules! binary {
    ($($name:ident: $t:ty, $u:ty => |$x:ident, $y:ident| $e:expr;)*) => {$(
        #[kernel(same_shape(x, y, out))]
        pub unsafe fn $name(x: Slice<$t>, y: Slice<$u>, out: SliceMut<$t>) {
            #[cfg(target_arch = "nvptx64")]
            for i in thread::grid_stride(out.len()) {
                // SAFETY: i < len of all three (same shape); one thread per element.
                unsafe {
                    let ($x, $y) = (x.get_unchecked(i), y.get_unchecked(i));
                    out.write_unchecked(i, $e)
                };
            }
        }
    )*};
}

/// Both types of each unary method.
macro_rules! unary_both {
    ($($m:ident: $n32:ident $n64:ident;)*) => {
        unary! { $($n32: f32 => $m; $n64: f64 => $m;)* }
    };
}

unary_both! {
    exp: math_exp_f32 math_exp_f64;
    exp2: math_exp2_f32 math_exp2_f64;
    exp10: math_exp10_f32 math_exp10_f64;
    exp_m1: math_exp_m1_f32 math_exp_m1_f64;
    ln: math_ln_f32 math_ln_f64;
    log2: math_log2_f32 math_log2_f64;
    log10: math_log10_f32 math_log10_f64;
    ln_1p: math_ln_1p_f32 math_ln_1p_f64;
    sin: math_sin_f32 math_sin_f64;
    cos: math_cos_f32 math_cos_f64;
    tan: math_tan_f32 math_tan_f64;
    asin: math_asin_f32 math_asin_f64;
    acos: math_acos_f32 math_acos_f64;
    atan: math_atan_f32 math_atan_f64;
    sinh: math_sinh_f32 math_sinh_f64;
    cosh: math_cosh_f32 math_cosh_f64;
    tanh: math_tanh_f32 math_tanh_f64;
    asinh: math_asinh_f32 math_asinh_f64;
    acosh: math_acosh_f32 math_acosh_f64;
    atanh: math_atanh_f32 math_atanh_f64;
    sqrt: math_sqrt_f32 math_sqrt_f64;
    rsqrt: math_rsqrt_f32 math_rsqrt_f64;
    cbrt: math_cbrt_f32 math_cbrt_f64;
    erf: math_erf_f32 math_erf_f64;
    erfc: math_erfc_f32 math_erfc_f64;
    floor: math_floor_f32 math_floor_f64;
    ceil: math_ceil_f32 math_ceil_f64;
    round: math_round_f32 math_round_f64;
    round_ties_even: math_round_ties_even_f32 math_round_ties_even_f64;
    trunc: math_trunc_f32 math_trunc_f64;
    abs: math_abs_f32 math_abs_f64;
}

unary! {
    fast_exp_f32: f32 => exp_fast;
    fast_exp10_f32: f32 => exp10_fast;
    fast_ln_f32: f32 => ln_fast;
    fast_log2_f32: f32 => log2_fast;
    fast_log10_f32: f32 => log10_fast;
    fast_sin_f32: f32 => sin_fast;
    fast_cos_f32: f32 => cos_fast;
    fast_tan_f32: f32 => tan_fast;
    fast_recip_f32: f32 => recip_fast;
    fast_erfc_f32: f32 => erfc_fast;
    fast_normal_tail_f32: f32 => normal_tail_fast;
}

binary! {
    math_powf_f32: f32, f32 => |x, y| x.powf(y);
    math_powf_f64: f64, f64 => |x, y| x.powf(y);
    math_atan2_f32: f32, f32 => |x, y| x.atan2(y);
    math_atan2_f64: f64, f64 => |x, y| x.atan2(y);
    math_hypot_f32: f32, f32 => |x, y| x.hypot(y);
    math_hypot_f64: f64, f64 => |x, y| x.hypot(y);
    math_min_f32: f32, f32 => |x, y| GpuFloat::min(x, y);
    math_min_f64: f64, f64 => |x, y| GpuFloat::min(x, y);
    math_max_f32: f32, f32 => |x, y| GpuFloat::max(x, y);
    math_max_f64: f64, f64 => |x, y| GpuFloat::max(x, y);
    math_copysign_f32: f32, f32 => |x, y| GpuFloat::copysign(x, y);
    math_copysign_f64: f64, f64 => |x, y| GpuFloat::copysign(x, y);
    math_powi_f32: f32, i32 => |x, n| x.powi(n);
    math_powi_f64: f64, i32 => |x, n| x.powi(n);
    fast_powf_f32: f32, f32 => |x, y| x.powf_fast(y);
    fast_div_f32: f32, f32 => |x, y| x.div_fast(y);
}

macro_rules! sin_cos_mul_add {
    ($($sc:ident $ma:ident: $t:ty;)*) => {$(
        /// `s[i], c[i] = x[i].sin_cos()`.
        #[kernel(same_shape(x, s, c))]
        pub unsafe fn $sc(x: Slice<$t>, s: SliceMut<$t>, c: SliceMut<$t>) {
            #[cfg(target_arch = "nvptx64")]
            for i in thread::grid_stride(x.len()) {
                // SAFETY: i < len of all three; one thread per element.
                unsafe {
                    let (sv, cv) = x.get_unchecked(i).sin_cos();
                    s.write_unchecked(i, sv);
                    c.write_unchecked(i, cv);
                }
            }
        }

        /// `out[i] = x[i].mul_add(a[i], b[i])`.
        #[kernel(same_shape(x, a, b, out))]
        pub unsafe fn $ma(x: Slice<$t>, a: Slice<$t>, b: Slice<$t>, out: SliceMut<$t>) {
            #[cfg(target_arch = "nvptx64")]
            for i in thread::grid_stride(out.len()) {
                // SAFETY: i < len of all four; one thread per element.
                unsafe {
                    let v = x.get_unchecked(i).mul_add(a.get_unchecked(i), b.get_unchecked(i));
                    out.write_unchecked(i, v)
                };
            }
        }
    )*};
}
sin_cos_mul_add! {
    math_sin_cos_f32 math_mul_add_f32: f32;
    math_sin_cos_f64 math_mul_add_f64: f64;
}
