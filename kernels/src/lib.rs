//! ferrocuda's bundled kernels.
//!
//! | family | kernels | what |
//! | --- | --- | --- |
//! | `add` | `add_{f16,bf16,f32,f64,i32,i64}` | `out = a + b` (16-byte vector loads/stores where aligned; `f16`/`bf16` rounded once per element) |
//! | `initialize_array` | `initialize_array` | `x[i] = i` (`i32`) |
//! | `add_index` | `add_index_{f32,f64,i32,i64}_{1..4}d` | each element `+=` the sum of its multi-index (AMSO), any strides |
//! | `saxpy` | `saxpy_{f16,bf16,f32,f64}` | `y = alpha * x + y` (a multiply and an add, each rounded) |
//! | `fill_slow` | `fill_slow` | spin `iters` steps, then `x[i] = value` (a slow producer for ordering tests) |
//! | `checked_write` | `checked_write` | `x[index] = value` through a bounds check (traps when out of bounds) |
//! | `index_grid` | `index_grid_{2d,3d}` | every element = its C-order index, over an automatic 2-D / 3-D grid (`grid = "2d"`, fixed block; `grid = "3d"`, `max_threads`) |
//! | `shared_reverse` | `shared_reverse_f32` | reverses chunks of the input through all of the launch's dynamic shared memory (`dynamic_shared = f32`) |
//!
//! To add a kernel: write a function here (or in a module of this crate) with `#[kernel]`,
//! rebuild; it appears in the manifest (`ferrocuda_kernels.json` in the build's `OUT_DIR`)
//! and in the host's generic launcher.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

#[cfg(target_arch = "nvptx64")]
mod elementwise;

mod kernels;
mod shape;
