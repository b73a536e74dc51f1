//! Kernels that exercise every primitive of `ferrocuda-device`: atomics, fences, warp
//! operations, block reductions and scans, half-precision arithmetic, counting barriers and
//! clocks, shared memory, math functions, diagnostics, global-memory access forms (vectors,
//! the read-only cache), the porting guide's examples, a family with a contiguous kernel
//! and a strided variant (`layouts`), cooperative kernels with grid-wide barriers (`coop`) and
//! thread-block clusters with distributed shared memory (`cluster`, built into the sm_90
//! part).
//! Built by `tests/device_ptx.rs` (PTX text and ptxas checks) and run on a GPU by
//! `tests/device_gpu/` and `python/tests/test_device_math.py`, which check every output
//! against a host reference.
//!
//! Conventions: every kernel takes its inputs as slices and writes one record per thread
//! (or per block); the host poisons outputs before the launch and checks every element.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch, f16))]

mod atomics;
mod block;
mod cluster;
mod coop;
mod diag;
mod examples;
mod half;
mod layouts;
mod math;
mod memory;
mod misc;
mod shared;
mod warp;
