//! ferrocuda's bundled kernels.
//!
//! | family | kernels | what |
//! | --- | --- | --- |
//! | `add` | `add_{f16,bf16,f32,f64,i32,i64}` | `out = a + b` (16-byte vector loads/stores where aligned; `f16`/`bf16` rounded once per element) |
//! | | `add_<type>_{1..4}d` | the strided variants: 1-D to 4-D views of any strides (stepped, reversed, transposed, broadcast inputs), the same result per element |
//! | `initialize_array` | `initialize_array` | `x[i] = i` (`i32`) |
//! | `add_index` | `add_index_{f32,f64,i32,i64}_{1..4}d` | each element `+=` the sum of its multi-index (AMSO), any strides |
//! | `saxpy` | `saxpy_{f16,bf16,f32,f64}`, strided `saxpy_<type>_{1..4}d` | `y = alpha * x + y` (a multiply and an add, each rounded) |
//! | `fill_slow` | `fill_slow` | spin `iters` steps, then `x[i] = value` (a slow producer for ordering tests) |
//! | `checked_write` | `checked_write` | `x[index] = value` through a bounds check (traps when out of bounds) |
//! | `index_grid` | `index_grid_{2d,3d}` | every element = its C-order index, over an automatic 2-D / 3-D grid (`grid = "2d"`, fixed block; `grid = "3d"`, `max_threads`) |
//! | `shared_reverse` | `shared_reverse_f32` | reverses chunks of the input through all of the launch's dynamic shared memory (`dynamic_shared = f32`) |
//!
//! The gallery — kernels written for speed, each module documents its schedule:
//!
//! | family | kernels | what |
//! | --- | --- | --- |
//! | `sum`, `min`, `max` | `{sum,min,max}_{f32,f64,i32,i64}` | whole-array reduction in one launch (last block finishes; `sum_i32` returns `int64`) |
//! | `normalize` | `normalize_{f32,f64}` | `out = x / Σx` in one **cooperative** launch: partial sums, a grid-wide barrier, the division |
//! | `div_by` | `div_by_{f32,f64}` | `out = x / d[0]` (with `sum`: the two-launch `normalize`) |
//! | `sum_rows` | `sum_rows_{f32,f64}` | sum along the last axis of a 2-D view |
//! | `histogram` | `histogram_{u8,i32,f32,f64}` | `numpy.histogram` with equal-width bins, exactly; privatized shared-memory counts |
//! | `softmax`, `log_softmax` | `…_{f32,f64,f16,bf16}` | along rows of a 2-D view; warp- or block-per-row in registers, streamed for long rows |
//! | `matmul` | `matmul_f32` | `c = α·a@b + β·c` on strided views (f32, TF32 off), 128×256 tiles (two 128-thread groups of 128×128 for `x @ w.T`), 8×16 per thread, three `cp.async` stages, a loop without branches |
//! | `linear` | `linear_bf16_f32_sm90`; `linear_bf16_f32`, `linear_bf16` | `out = x·wᵀ` (bf16 in, f32 accumulation) on the tensor cores: TMA + `wgmma` on sm_90a (`linear`); `mma.sync` with a `cp.async` pipeline on every GPU from sm_80, any strides, f32 or bf16 out (`linear_sm80`) |
//! | `linear_bias`, `linear_bias_{relu,gelu,gelu_tanh,silu}` | `…_bf16_sm90`, `…_bf16` (and `linear_bias_bf16_f32{,_sm90}`) | `out = act(x·wᵀ + b)`: `linear` with the bias and activation fused into its epilogue (`linear_fused`) |
//! | `attention`, `attention_lse` | `attention{,_lse}_{bf16,f16}_sm90`; `attention{,_lse}_{bf16,f16}`, `attention{,_lse}_{bf16,f16}_wide` | `out = softmax(scale·q·kᵀ [causal mask])·v` per (batch, head), bf16 or f16 (B, H, S, D) with D ≤ 256 (the `_wide` kernels beyond 128), and with `_lse` each row's log-sum-exp: FlashAttention-style, TMA + `wgmma` on sm_90a, P in registers (`attention::sm90`); `mma.sync` on every GPU from sm_80, any strides (`attention::sm80`) |
//! | `stencil5` | `stencil5_{f32,f64}` | zero-padded 5-point Laplacian of a 2-D view |
//! | `cumsum`, `cumsum_exclusive` | `…_{f32,f64,i32,i64,i32_i64}` | single-pass prefix sums (decoupled look-back) |
//! | `gelu`, `gelu_tanh`, `silu` | `…_{f32,f16,bf16}`, strided `…_<type>_{1..4}d` | activations, computed in `f32` |
//! | `axpy` | `axpy_{f16,bf16}`, strided `axpy_<type>_{1..4}d` | `y = α·x + y` on `float16` / `bfloat16` |
//!
//! The element-wise families (`add`, `saxpy`, the activations, `axpy`) pair each contiguous
//! kernel with strided variants (`elementwise::map_strided`); the launchers run the contiguous
//! kernel when every array is C-contiguous and a strided one otherwise (the host's
//! `launch::select`).
//!
//! Launch declarations: `cumsum` needs blocks of exactly 128 threads for 32-bit sums and 256
//! for 64-bit ones (`block = …`: see `scan`), `matmul`
//! at most 256 (`max_threads = 256`; smaller blocks run a simple, correct loop); `normalize`
//! is cooperative (`cooperative`: its grid is at most one resident wave, see `normalize`);
//! `linear` needs blocks of exactly 384 threads (sm_90a) or 256 (portable) and declares its
//! dynamic shared memory (`shared_bytes`: 193 KiB and 80 KiB);
//! the others take any block.
//!
//! To add a kernel: write a function here (or in a module of this crate) with `#[kernel]`,
//! rebuild; it appears in the manifest (`ferrocuda_kernels.json` in the build's `OUT_DIR`)
//! and in the host's generic launcher.
//!
//! # Layers
//!
//! Each module uses only the modules listed above it (checked by the workspace's
//! `tests/layers`; all of them use `ferrocuda_device`, below every one):
//!
//! 1. `elementwise`, `grid`, `num` — element-wise loops, where a thread sits in the launch,
//!    the element-type traits.
//! 2. `epilogue` — what the `linear` kernels do to their sums before the store.
//! 3. `prelude` — the names the kernel bodies use.
//! 4. `activations`, `attention`, `histogram`, `kernels`, `linear`, `linear_sm80`, `matmul`,
//!    `normalize`, `reduce`, `scan`, `shape`, `softmax`, `stencil` — the kernels.
//! 5. `linear_fused` — `linear` with a fused epilogue, built on both `linear` kernels.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, f16, asm_experimental_arch))]

#[cfg(target_arch = "nvptx64")]
#[macro_use]
mod elementwise;
#[cfg(target_arch = "nvptx64")]
mod epilogue;
#[cfg(target_arch = "nvptx64")]
mod grid;
#[cfg(target_arch = "nvptx64")]
mod num;

/// What the gallery's kernel bodies use (device only).
#[cfg(target_arch = "nvptx64")]
mod prelude {
    pub use crate::elementwise::{binary, fold, map_strided, unary, visit, Chunk};
    pub use crate::grid::{block_rank, block_scratch, blocks, thread_rank};
    pub use crate::num::{act, fma, Acc, Reducible, Storage, Widen};
    pub use core::ops::{Add, Mul, Sub};
    pub use ferrocuda_device::atomic::{fence, shared, AtomicSlice, Order, Scope};
    pub use ferrocuda_device::block::{self, ReduceOp};
    pub use ferrocuda_device::{shared_array, thread, warp, Element};
}

mod activations;
mod attention;
mod histogram;
mod kernels;
mod linear;
mod linear_fused;
mod linear_sm80;
mod matmul;
mod normalize;
mod reduce;
mod scan;
mod shape;
mod softmax;
mod stencil;
