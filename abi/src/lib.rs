//! Types shared by ferrocuda kernels (compiled for `nvptx64-nvidia-cuda`) and hosts.
//!
//! This crate is the single source of truth for everything that crosses the launch
//! boundary:
//!
//! * [`dtype`] — the element-type table ([`element_types!`]): [`DType`], [`Element`];
//! * [`layout`] — strided-layout predicates (element count, span, contiguity, overlap, stride
//!   units), shared by the indexer and every host-side check;
//! * [`Indexer`] — the N-D indexer (shape + element strides, multi-index ↔ offset);
//! * [`Slice`], [`SliceMut`], [`View`], [`ViewMut`] — the `#[repr(C)]` array parameters;
//! * [`kinds`] — the parameter-kind table ([`ParamKind`]) and how parameters are described
//!   ([`KernelParam`], [`ParamDesc`]): manifest names, host checks, and the launch-buffer
//!   layout of each kind, taken from the parameter types themselves;
//! * [`manifest`] — the kernel manifest record and (with the `std` feature) its JSON form.
//!
//! Module order (each uses only those above it): `dtype`, `layout`, `indexer`, `params`,
//! `kinds`, `manifest`.
//!
//! It is `#![no_std]` and dependency-free for the device; the `std` feature adds the
//! host-only manifest types.
#![no_std]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod dtype;
pub mod indexer;
pub mod kinds;
pub mod layout;
pub mod manifest;
pub mod params;

pub use dtype::{DType, Element};
pub use indexer::Indexer;
pub use kinds::{ArrayArg, KernelParam, ParamDesc, ParamKind};
pub use layout::MAX_NDIM;
pub use params::{Slice, SliceMut, View, ViewMut};

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
