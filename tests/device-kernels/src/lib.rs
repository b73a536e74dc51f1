//! Kernels that exercise every primitive of `ferrocuda-device`: atomics, fences, warp
//! operations, block reductions and scans, half-precision arithmetic, counting barriers and
//! clocks, shared memory, asynchronous copies and pipelines (`async_copy`), mbarriers, math
//! functions, diagnostics, global-memory access forms (vectors, the read-only cache), the
//! porting guide's examples, a family with a contiguous kernel and a strided variant
//! (`layouts`), the tensor cores (`mma`, `wgmma`), cooperative kernels with grid-wide
//! barriers (`coop`), thread-block clusters with distributed shared memory (`cluster`) and
//! kernels built for newer architectures (`arch_probe`, `wgmma`, `cluster`:
//! `#[kernel(arch = …)]`).
//! Built by `tests/device_ptx.rs` (PTX text and ptxas checks) and run on a GPU by
//! `tests/device_gpu/` and `python/tests/test_device_math.py`, which check every output
//! against a host reference.
//!
//! Conventions: every kernel takes its inputs as slices and writes one record per thread
//! (or per block); the host poisons outputs before the launch and checks every element.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch, f16))]

mod async_copy;
mod atomics;
mod block;
mod cluster;
mod coop;
mod diag;
mod examples;
mod half;
mod layouts;
mod math;
mod mbarrier;
mod memory;
mod misc;
mod mma;
mod shared;
mod tma;
mod warp;
mod wgmma;
