//! Types shared by ferrocuda kernels (compiled for `nvptx64-nvidia-cuda`) and hosts.
//!
//! This crate is the single source of truth for everything that crosses the launch
//! boundary:
//!
//! * [`Indexer`] — the N-D indexer (shape + element strides, multi-index ↔ offset),
//! * [`Slice`], [`SliceMut`], [`View`], [`ViewMut`] — the `#[repr(C)]` array parameters,
//! * [`Element`], [`DType`], [`KernelParam`], [`ParamDesc`] — how parameters are described,
//! * [`manifest`] — the kernel manifest record and (with the `std` feature) its JSON form.
//!
//! It is `#![no_std]` and dependency-free for the device; the `std` feature adds the
//! host-only manifest types.
#![no_std]
// The device's `f16` element type is the nightly primitive, enabled in the (unstable-enabled)
// kernel build only; the host build is stable and never names it.
#![cfg_attr(target_arch = "nvptx64", feature(f16))]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod indexer;
pub mod manifest;
pub mod params;

pub use indexer::Indexer;
pub use params::{
    DType, Element, KernelParam, ParamDesc, ParamKind, Slice, SliceMut, View, ViewMut,
};

/// Aborts the current kernel (or panics on the host) after a failed bounds check.
///
/// Kernels are built with `-Cpanic=immediate-abort`, so on the device this is a PTX `trap`
/// with no message string in the module.
#[cold]
#[inline(never)]
#[track_caller]
pub fn abort() -> ! {
    panic!("ferrocuda: out-of-bounds access in a kernel")
}
