//! `linear` with a fused epilogue: `out = act(x · wᵀ + b)` in one kernel — the bias added and
//! the activation applied to the f32 sums in registers before the one store of `out`, where
//! PyTorch runs a GEMM, an add and an activation (`F.gelu(x @ w.T + b)`: three passes over
//! `out`).
//!
//! | family | `act` | kernels (sm_90a; portable) |
//! | --- | --- | --- |
//! | `linear_bias` | none | `linear_bias_bf16_sm90`, `linear_bias_bf16_f32_sm90`; `linear_bias_bf16`, `linear_bias_bf16_f32` |
//! | `linear_bias_relu` | `max(v, 0)` | `linear_bias_relu_bf16_sm90`; `linear_bias_relu_bf16` |
//! | `linear_bias_gelu` | GELU (erf) | `linear_bias_gelu_bf16_sm90`; `linear_bias_gelu_bf16` |
//! | `linear_bias_gelu_tanh` | GELU (tanh) | `linear_bias_gelu_tanh_bf16_sm90`; `linear_bias_gelu_tanh_bf16` |
//! | `linear_bias_silu` | SiLU | `linear_bias_silu_bf16_sm90`; `linear_bias_silu_bf16` |
//!
//! `x` (M, K) and `w` (N, K) bf16, `bias` (N,) bf16, `out` (M, N) bf16 (or f32 for
//! `linear_bias`). Each kernel is the `linear` kernel of its architecture (schedule, edges,
//! selection rule: `linear.rs`, `linear_sm80.rs`) with [`BiasAct`](crate::epilogue::BiasAct)
//! as its epilogue. Numerics: the f32 sum as `linear`'s, plus the bias (exact in f32), the
//! activation in f32 through the hardware's `ex2`/`rcp` approximations (the exact GELU through
//! a short `erfc`, within `5·10⁻⁷ |x|`; the tanh GELU and SiLU through a sigmoid:
//! [`act`](crate::num::act)'s `*_fast`), one rounding to `out`'s type.

#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_arch = "sm_90a"))]
use crate::linear::LINEAR_SMEM;
use crate::linear::{WMap, XMap};
use crate::linear_sm80::LINEAR_SM80_SMEM;
use ferrocuda_device::half::bf16;
use ferrocuda_device::{kernel, Slice, View, ViewMut};

macro_rules! linear_fused {
    ($($family:literal, $act:ident, $what:literal, $outdoc:literal:
       $port:ident, $sm90:ident, $out:ty;)*) => {$(
        #[doc = concat!("`out = ", $what, "`, ", $outdoc, ", on every GPU from sm_80 (`mma.sync`, a `cp.async` ",
                        "pipeline): `x` (M, K), `w` (N, K), `out` (M, N) views of any strides, ",
                        "`bias` (N,) contiguous. The family launcher runs it where `", stringify!($sm90),
                        "` cannot (a GPU other than sm_90, or arrays TMA cannot read).")]
        #[kernel(family = $family, block = 256, min_blocks = 2, dynamic_shared = u8,
                 shared_bytes = LINEAR_SM80_SMEM,
                 require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
                 require(out.shape[0] == x.shape[0], "out must have x's row count"),
                 require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"),
                 require(bias.len() == w.shape[0], "bias must have one element per row of w (N)"),
                 require(out.ptr() != x.ptr(), "out must not be x"),
                 require(out.ptr() != w.ptr(), "out must not be w"),
                 require(out.ptr() != bias.ptr(), "out must not be bias"),
                 require(x.shape[0] < 2147483648, "x must have fewer than 2^31 rows"),
                 require(x.shape[1] < 2147483648, "x and w must have fewer than 2^31 columns"),
                 require(w.shape[0] < 2147483648, "w must have fewer than 2^31 rows"))]
        pub unsafe fn $port(x: View<bf16, 2>, w: View<bf16, 2>, bias: Slice<bf16>, out: ViewMut<$out, 2>) {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: launched as a kernel with the block and shared memory it declares, over
            // host-validated views whose shapes agree; `out` overlaps no input (required).
            unsafe {
                crate::linear_sm80::gpu::linear(
                    x, w, out, crate::epilogue::BiasAct::<crate::epilogue::$act>::new(bias))
            }
        }

        #[doc = concat!("`out = ", $what, "`, ", $outdoc, ", on Hopper's tensor cores (sm_90a: TMA, `wgmma`, ",
                        "the schedule of `linear_bf16_f32_sm90`): `x` (M, K) and `w` (N, K) ",
                        "row-major with rows of a multiple of 8 elements, `bias` (N,) contiguous, ",
                        "`out` (M, N) any strides.")]
        #[kernel(family = $family, arch = "sm_90a", block = 384, min_blocks = 1, dynamic_shared = u8,
                 shared_bytes = LINEAR_SMEM,
                 require(x.shape[1] == w.shape[1], "x and w must have the same number of columns (K)"),
                 require(out.shape[0] == x.shape[0], "out must have x's row count"),
                 require(out.shape[1] == w.shape[0], "out must have as many columns as w has rows"),
                 require(bias.len() == w.shape[0], "bias must have one element per row of w (N)"),
                 require(out.ptr() != bias.ptr(), "out must not be bias"))]
        pub unsafe fn $sm90(x: XMap, w: WMap, bias: Slice<bf16>, out: ViewMut<$out, 2>) {
            #[cfg(ferrocuda_arch = "sm_90a")]
            // SAFETY: launched as a kernel with the block and shared memory it declares, over
            // host-validated arguments whose shapes agree.
            unsafe {
                let epi = crate::epilogue::BiasAct::<crate::epilogue::$act>::new(bias);
                crate::linear::gemm(x, w, crate::linear::Sink::new(out, epi))
            }
        }
    )*};
}

linear_fused! {
    "linear_bias", Identity, "x · wᵀ + bias", "f32":
        linear_bias_bf16_f32, linear_bias_bf16_f32_sm90, f32;
    "linear_bias", Identity, "x · wᵀ + bias", "rounded once to bf16":
        linear_bias_bf16, linear_bias_bf16_sm90, bf16;
    "linear_bias_relu", Relu, "relu(x · wᵀ + bias)", "bf16":
        linear_bias_relu_bf16, linear_bias_relu_bf16_sm90, bf16;
    "linear_bias_gelu", Gelu, "gelu(x · wᵀ + bias)", "exact GELU, bf16":
        linear_bias_gelu_bf16, linear_bias_gelu_bf16_sm90, bf16;
    "linear_bias_gelu_tanh", GeluTanh, "gelu_tanh(x · wᵀ + bias)", "tanh GELU, bf16":
        linear_bias_gelu_tanh_bf16, linear_bias_gelu_tanh_bf16_sm90, bf16;
    "linear_bias_silu", Silu, "silu(x · wᵀ + bias)", "bf16":
        linear_bias_silu_bf16, linear_bias_silu_bf16_sm90, bf16;
}
