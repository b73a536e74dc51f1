//! Element-wise activations (`gelu`, `gelu_tanh`, `silu`) and the half-precision `axpy`.
//!
//! Every kernel streams 16-byte vectors where the arrays share their alignment (4 `f32` or
//! 8 `f16` per load), one thread per vector (`items_per_thread`), and computes in `f32`
//! whatever the storage type, rounding once to the output type — as PyTorch's kernels do
//! (`opmath_t`); `f16` and `bf16` share the generic bodies.

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::{kernel, Slice, SliceMut};

/// `out[i] = f(x[i])` computed in the storage type's arithmetic type.
///
/// # Safety
///
/// Kernel-launch context over host-validated slices (`out` may be `x` itself).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn activation<T: Storage<Acc = f32>, const L: usize>(
    x: Slice<T>,
    out: SliceMut<T>,
    f: fn(f32) -> f32,
) {
    // SAFETY: forwarded contract.
    unsafe { unary::<T, L>(x, out, |v| T::narrow(f(v.widen()))) }
}

macro_rules! activations {
    ($($family:literal, $name:ident: $t:ty, $lanes:literal, $f:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        ///
        /// `x` and `out`: C-contiguous arrays of one shape (any rank; `out` may be `x`). Any
        /// length; grid and block: any (automatic: one thread per 16-byte vector). Accuracy:
        /// within 2 ulp of the correctly rounded `f32` result before the final rounding to the
        /// storage type (libdevice's `erff`/`tanhf`/`expf`).
        #[kernel(family = $family, same_shape(x, out), items_per_thread = $lanes)]
        pub unsafe fn $name(x: Slice<$t>, out: SliceMut<$t>) {
            // SAFETY: launched as a kernel over the host-validated slices.
            unsafe { activation::<$t, $lanes>(x, out, act::$f) }
        }
    )*};
}
activations! {
    "gelu", gelu_f32: f32, 4, gelu, "GELU, exact form: `out = x/2 · (1 + erf(x/√2))`.";
    "gelu", gelu_f16: f16, 8, gelu, "GELU, exact form: `out = x/2 · (1 + erf(x/√2))`.";
    "gelu_tanh", gelu_tanh_f32: f32, 4, gelu_tanh,
        "GELU, tanh approximation: `out = x/2 · (1 + tanh(√(2/π)(x + 0.044715 x³)))`.";
    "gelu_tanh", gelu_tanh_f16: f16, 8, gelu_tanh,
        "GELU, tanh approximation: `out = x/2 · (1 + tanh(√(2/π)(x + 0.044715 x³)))`.";
    "silu", silu_f32: f32, 4, silu, "SiLU (swish): `out = x / (1 + e^-x)`.";
    "silu", silu_f16: f16, 8, silu, "SiLU (swish): `out = x / (1 + e^-x)`.";
    "gelu", gelu_bf16: bf16, 8, gelu, "GELU, exact form: `out = x/2 · (1 + erf(x/√2))`.";
    "gelu_tanh", gelu_tanh_bf16: bf16, 8, gelu_tanh,
        "GELU, tanh approximation: `out = x/2 · (1 + tanh(√(2/π)(x + 0.044715 x³)))`.";
    "silu", silu_bf16: bf16, 8, silu, "SiLU (swish): `out = x / (1 + e^-x)`.";
}

macro_rules! axpy {
    ($($name:ident: $t:ty;)*) => {$(
        /// `y = alpha · x + y` on half-precision arrays, computed in `f32` with one fused
        /// multiply-add and rounded once to the storage type (PyTorch's `y.add_(x, alpha=a)`).
        ///
        /// `x` and `y`: C-contiguous arrays of one shape. Any length; grid and block: any
        /// (automatic: one thread per 8 elements). Accuracy: the correctly rounded half of the
        /// `f32` result.
        #[kernel(family = "axpy", same_shape(x, y), items_per_thread = 8)]
        pub unsafe fn $name(alpha: f32, x: Slice<$t>, y: SliceMut<$t>) {
            // SAFETY: y aliases itself element-for-element only.
            unsafe {
                binary::<$t, 8>(x, y.as_slice(), y, |a, b| {
                    <$t>::narrow(fma(alpha, a.widen(), b.widen()))
                })
            }
        }
    )*};
}
axpy! {
    axpy_f16: f16;
    axpy_bf16: bf16;
}
