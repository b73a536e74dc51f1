//! Element-wise activations (`gelu`, `gelu_tanh`, `silu`) and the half-precision `axpy`.
//!
//! Every kernel streams 16-byte vectors where the arrays share their alignment (4 `f32` or
//! 8 `f16` per load), one vector per thread and loop iteration — the automatic grid gives each
//! thread one vector of `f32`, four of `f16`/`bf16` (`items_per_thread`) — and computes in `f32`
//! whatever the storage type, rounding once to the output type — as PyTorch's kernels do
//! (`opmath_t`); `f16` and `bf16` share the generic bodies. Each kernel has strided variants
//! (`<kernel>_{1..4}d`, views of any strides) computing the same value per element, which the
//! launchers run when an array is not C-contiguous.

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::{kernel, Slice, SliceMut, View, ViewMut};

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

/// `out[idx] = f(x[idx])` on `N`-D views of any strides, computed as [`activation`].
///
/// # Safety
///
/// Kernel-launch context over host-validated views of one shape (`out` may be `x` itself).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn activation_strided<T: Storage<Acc = f32>, const N: usize>(
    x: View<T, N>,
    out: ViewMut<T, N>,
    f: fn(f32) -> f32,
) {
    // SAFETY: forwarded contract.
    unsafe { map_strided::<T, N, 1>([x], out, |[v]| T::narrow(f(v.widen()))) }
}

macro_rules! activations {
    ($($family:literal, $name:ident: $t:ty, $lanes:literal, $ipt:literal, $f:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        ///
        /// `x` and `out`: C-contiguous arrays of one shape (any rank; `out` may be `x`). Any
        /// length; grid and block: any (automatic: one thread per 16-byte vector of `f32`, per
        /// four 16-byte vectors of `f16`/`bf16`). Accuracy: within 2 ulp of the correctly
        /// rounded `f32` result before the final rounding to the storage type (libdevice's
        /// `erff`/`tanhf`/`expf`).
        #[kernel(family = $family, same_shape(x, out), items_per_thread = $ipt)]
        pub unsafe fn $name(x: Slice<$t>, out: SliceMut<$t>) {
            // SAFETY: launched as a kernel over the host-validated slices.
            unsafe { activation::<$t, $lanes>(x, out, act::$f) }
        }
    )*};
}
// Registers (ptxas, sm_80 / sm_90): 30–36 for every kernel here, since `unary` keeps one
// vector per thread in flight (two kept 48 live: 62.5 % theoretical occupancy, not 100 %).
// Work per thread (the automatic grid): one vector (4 elements) for `f32`, which is
// memory-bound; four vectors (32 elements, one after the other) for `f16`/`bf16`, where the
// instructions bound the speed and a thread's setup — lengths, alignment heads, the 64-bit
// grid-stride loop, about 90 instructions per warp — cost as much as one vector of 8 `erff`s.
// Four vectors per thread brought `f16`/`bf16` `gelu` to torch's speed where one fell short;
// for `f32` more than one vector did not help (BENCHMARKS.md, the `gelu` goals and the gallery
// runs they link).
activations! {
    "gelu", gelu_f32: f32, 4, 4, gelu, "GELU, exact form: `out = x/2 · (1 + erf(x/√2))`.";
    "gelu", gelu_f16: f16, 8, 32, gelu, "GELU, exact form: `out = x/2 · (1 + erf(x/√2))`.";
    "gelu_tanh", gelu_tanh_f32: f32, 4, 4, gelu_tanh,
        "GELU, tanh approximation: `out = x/2 · (1 + tanh(√(2/π)(x + 0.044715 x³)))`.";
    "gelu_tanh", gelu_tanh_f16: f16, 8, 32, gelu_tanh,
        "GELU, tanh approximation: `out = x/2 · (1 + tanh(√(2/π)(x + 0.044715 x³)))`.";
    "silu", silu_f32: f32, 4, 4, silu, "SiLU (swish): `out = x / (1 + e^-x)`.";
    "silu", silu_f16: f16, 8, 32, silu, "SiLU (swish): `out = x / (1 + e^-x)`.";
    "gelu", gelu_bf16: bf16, 8, 32, gelu, "GELU, exact form: `out = x/2 · (1 + erf(x/√2))`.";
    "gelu_tanh", gelu_tanh_bf16: bf16, 8, 32, gelu_tanh,
        "GELU, tanh approximation: `out = x/2 · (1 + tanh(√(2/π)(x + 0.044715 x³)))`.";
    "silu", silu_bf16: bf16, 8, 32, silu, "SiLU (swish): `out = x / (1 + e^-x)`.";
}

// The activations' strided variants: `N`-D views of any strides (stepped, reversed,
// transposed, broadcast inputs), the same arithmetic per element as the contiguous kernels.
macro_rules! activations_strided {
    ($family:literal, $f:ident: $($name:ident: $t:ty, $n:literal;)*) => {$(
        /// The strided variant of its family: `N`-D arrays of any strides (`out` may be `x`;
        /// its elements must be distinct). Results are the contiguous kernel's.
        #[kernel(family = $family, same_shape(x, out))]
        pub unsafe fn $name(x: View<$t, $n>, out: ViewMut<$t, $n>) {
            // SAFETY: launched as a kernel over host-validated views of one shape.
            unsafe { activation_strided::<$t, $n>(x, out, act::$f) }
        }
    )*};
}
activations_strided! { "gelu", gelu:
    gelu_f32_1d: f32, 1; gelu_f32_2d: f32, 2; gelu_f32_3d: f32, 3; gelu_f32_4d: f32, 4;
    gelu_f16_1d: f16, 1; gelu_f16_2d: f16, 2; gelu_f16_3d: f16, 3; gelu_f16_4d: f16, 4;
    gelu_bf16_1d: bf16, 1; gelu_bf16_2d: bf16, 2; gelu_bf16_3d: bf16, 3; gelu_bf16_4d: bf16, 4;
}
activations_strided! { "gelu_tanh", gelu_tanh:
    gelu_tanh_f32_1d: f32, 1; gelu_tanh_f32_2d: f32, 2; gelu_tanh_f32_3d: f32, 3; gelu_tanh_f32_4d: f32, 4;
    gelu_tanh_f16_1d: f16, 1; gelu_tanh_f16_2d: f16, 2; gelu_tanh_f16_3d: f16, 3; gelu_tanh_f16_4d: f16, 4;
    gelu_tanh_bf16_1d: bf16, 1; gelu_tanh_bf16_2d: bf16, 2; gelu_tanh_bf16_3d: bf16, 3; gelu_tanh_bf16_4d: bf16, 4;
}
activations_strided! { "silu", silu:
    silu_f32_1d: f32, 1; silu_f32_2d: f32, 2; silu_f32_3d: f32, 3; silu_f32_4d: f32, 4;
    silu_f16_1d: f16, 1; silu_f16_2d: f16, 2; silu_f16_3d: f16, 3; silu_f16_4d: f16, 4;
    silu_bf16_1d: bf16, 1; silu_bf16_2d: bf16, 2; silu_bf16_3d: bf16, 3; silu_bf16_4d: bf16, 4;
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

// axpy's strided variants: `N`-D views of any strides, the same rounding as `axpy_f16`/`_bf16`.
macro_rules! axpy_strided {
    ($($name:ident: $t:ty, $n:literal;)*) => {$(
        /// The strided variant of `axpy`: `N`-D arrays of any strides (`y`'s elements must be
        /// distinct). Results are the contiguous kernel's.
        #[kernel(family = "axpy", same_shape(x, y))]
        pub unsafe fn $name(alpha: f32, x: View<$t, $n>, y: ViewMut<$t, $n>) {
            // SAFETY: host-validated views of one shape; y is read and written at each of its
            // elements by one thread.
            unsafe {
                map_strided::<$t, $n, 2>([x, y.as_view()], y, |[a, b]| {
                    <$t>::narrow(fma(alpha, a.widen(), b.widen()))
                })
            }
        }
    )*};
}
axpy_strided! {
    axpy_f16_1d: f16, 1; axpy_f16_2d: f16, 2; axpy_f16_3d: f16, 3; axpy_f16_4d: f16, 4;
    axpy_bf16_1d: bf16, 1; axpy_bf16_2d: bf16, 2; axpy_bf16_3d: bf16, 3; axpy_bf16_4d: bf16, 4;
}
