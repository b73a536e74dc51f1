//! ferrocuda's bundled kernels.
//!
//! | family | kernels | what |
//! | --- | --- | --- |
//! | `add` | `add_{f32,f64,i32,i64}` | `out = a + b` (16-byte vector loads/stores where aligned) |
//! | `initialize_array` | `initialize_array` | `x[i] = i` (`i32`) |
//! | `add_index` | `add_index_{f32,f64,i32,i64}_{1..4}d` | each element `+=` the sum of its multi-index (AMSO), any strides |
//! | `saxpy` | `saxpy_{f32,f64}` | `y = alpha * x + y` |
//! | `fill_slow` | `fill_slow` | spin `iters` steps, then `x[i] = value` (a slow producer for ordering tests) |
//! | `checked_write` | `checked_write` | `x[index] = value` through a bounds check (traps when out of bounds) |
//!
//! To add a kernel: write a function here (or in a module of this crate) with `#[kernel]`,
//! rebuild; it appears in the manifest (`ferrocuda_kernels.json` in the build's `OUT_DIR`)
//! and in the host's generic launcher.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, f16, core_float_math, asm_experimental_arch))]

#[cfg(target_arch = "nvptx64")]
#[macro_use]
mod elementwise;
#[cfg(target_arch = "nvptx64")]
mod grid;
#[cfg(target_arch = "nvptx64")]
mod num;

mod activations;
mod histogram;
mod kernels;
mod matmul;
mod reduce;
mod scan;
mod softmax;
mod stencil;
