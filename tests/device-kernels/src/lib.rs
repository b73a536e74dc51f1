//! Kernels that exercise every primitive of `ferrocuda-device`: atomics, fences, warp
//! operations, block reductions and scans, half-precision arithmetic, counting barriers and
//! clocks. Built by `tests/device_ptx.rs` (PTX text and ptxas checks) and run on a GPU by
//! `tests/device_gpu.rs`, which checks every output against a host reference.
//!
//! Conventions: every kernel takes its inputs as slices and writes one record per thread
//! (or per block); the host poisons outputs before the launch and checks every element.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch, f16))]

mod atomics;
mod block;
mod half;
mod misc;
mod warp;

/// Dynamic shared memory (the launch's `shared_mem_bytes`), as a generic pointer.
///
/// The block collectives take their scratch from here until static shared arrays are part
/// of the device crate.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn dynamic_shared<T>() -> *mut T {
    let p: u64;
    // SAFETY: takes the generic address of the module's dynamic shared memory symbol.
    unsafe {
        core::arch::asm!("cvta.shared.u64 {p}, ferrocuda_device_tests_smem;", p = out(reg64) p,
                         options(pure, nomem, nostack))
    };
    p as *mut T
}

#[cfg(target_arch = "nvptx64")]
core::arch::global_asm!(".extern .shared .align 16 .b8 ferrocuda_device_tests_smem[];");
