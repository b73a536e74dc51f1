//! Types shared by ferrocuda kernels (compiled for `nvptx64-nvidia-cuda`) and hosts.
//!
//! This crate is the single source of truth for everything that crosses the launch
//! boundary.
//!
//! # Layers
//!
//! Each module uses only the modules listed above it (checked by the workspace's
//! `tests/layers`):
//!
//! 1. [`arch`] — GPU architectures (`sm_80`, `sm_90a`) and which devices run code built for
//!    each: the rule the builder, the manifest and the launchers share.
//! 2. [`space`] — the markers by which device code tells the builder that a pointer addresses
//!    global memory (`ld.global`), or read-only global memory (`ld.global.nc`).
//! 3. [`dtype`] — the element-type table ([`element_types!`]): [`DType`], [`Element`].
//! 4. [`layout`] — strided-layout predicates (element count, span, contiguity, overlap, stride
//!    units), shared by the indexer and every host-side check.
//! 5. [`indexer`] — [`Indexer`], the N-D indexer (shape + element strides, multi-index ↔
//!    offset).
//! 6. [`params`] — [`Slice`], [`SliceMut`], [`View`], [`ViewMut`], the `#[repr(C)]` array
//!    parameters, and [`Scratch`], a workspace the launcher allocates.
//! 7. [`tensormap`] — [`TensorMap`], an array passed as a TMA descriptor encoded on the host.
//! 8. [`vectors`] — [`Vectors`], [`VectorsMut`]: the 16-byte aligned middle of a contiguous
//!    array, for vector loads and stores.
//! 9. [`kinds`] — the parameter-kind table ([`ParamKind`]) and how parameters are described
//!    ([`KernelParam`], [`ParamDesc`]): manifest names, host checks, and the launch-buffer
//!    layout of each kind, taken from the parameter types themselves.
//! 10. [`launch`] — what a kernel declares about its launch shape (threads per block, a fixed
//!     block, the element type of its dynamic shared memory, an N-D automatic grid): the
//!     second record `#[kernel]` writes, and its JSON form.
//! 11. [`extras`] — what a kernel declares beyond its parameters and launch shape: zeroed
//!     outputs, scratch lengths, requirements on its arguments, and their record sections.
//! 12. [`manifest`] — the kernel manifest record and (with the `std` feature) the signatures
//!     read from it: the extras' JSON form and their checks against the parameters are its
//!     part.
//! 13. [`diag`] — the trap record through which a kernel tells the host where it stopped.
//!
//! The crate root's own items: [`SHARED_SECTION`] and [`DYNAMIC_SHARED_SYMBOL`], the names by
//! which device code asks the builder for block-shared memory, and [`abort`] (which records
//! its caller through [`diag`]).
//!
//! It is `#![no_std]` and dependency-free for the device; the `std` feature adds the
//! host-only manifest types.
#![no_std]
// The device's `f16` element type is the nightly primitive, enabled in the (unstable-enabled)
// kernel build only; the host build is stable and never names it.
#![cfg_attr(
    target_arch = "nvptx64",
    feature(f16, stdarch_nvptx, ffi_const, portable_simd)
)]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod arch;
pub mod diag;
pub mod dtype;
pub mod extras;
pub mod indexer;
pub mod kinds;
pub mod launch;
pub mod layout;
pub mod manifest;
pub mod params;
pub mod space;
pub mod tensormap;
pub mod vectors;

pub use dtype::{DType, Element};
pub use indexer::{Indexer, Walk};
pub use kinds::{ArrayArg, ArrayLayout, KernelParam, ParamDesc, ParamKind};
pub use layout::MAX_NDIM;
pub use params::{Scratch, Slice, SliceMut, View, ViewMut};
pub use tensormap::{TensorMap, TensorMapMut, TileDesc};
pub use vectors::{Vectors, VectorsMut};

/// Expands to the link section that makes a `static` block-shared memory: `".ferrocuda.shared"`.
///
/// `#[link_section]` takes a literal or a macro call, not a constant, so device code writes
/// `#[link_section = ferrocuda_abi::shared_section!()]`; [`SHARED_SECTION`] is the same name as
/// a constant.
#[macro_export]
macro_rules! shared_section {
    () => {
        ".ferrocuda.shared"
    };
}

/// The link section of block-shared statics: `ferrocuda-builder` turns every `static` placed in
/// this section into a PTX `.shared` variable (one copy per thread block).
///
/// Rust has no address-space attribute, and rustc's NVPTX backend puts every `static` in
/// `.global` memory — one array for the whole grid — whatever its section, `.shared` included.
/// The builder therefore rewrites the compiled module before code generation. The contract:
///
/// * the static is placed with `#[link_section = ferrocuda_abi::shared_section!()]`;
/// * its value is uninitialised — `MaybeUninit::uninit()` (shared memory starts with
///   indeterminate contents in every block; any other initialiser is a build error naming the
///   static);
/// * it is mutable — a `static mut` or a type with interior mutability (an immutable static
///   is a build error: the compiler may assume its contents never change);
/// * it is not referenced from another static's initialiser (a shared address exists only while
///   a block runs);
/// * a static in a lookalike section (`.shared`, `.nv.shared`, …) is a build error: the backend
///   ignores those names, and the array would silently be grid-wide.
///
/// Accesses compile to `ld.shared`/`st.shared`.
pub const SHARED_SECTION: &str = shared_section!();

/// Expands to the symbol name of dynamic shared memory: `"__ferrocuda_dynamic_shared"`.
///
/// For `#[link_name = ferrocuda_abi::dynamic_shared_symbol!()]`; [`DYNAMIC_SHARED_SYMBOL`] is the
/// same name as a constant.
#[macro_export]
macro_rules! dynamic_shared_symbol {
    () => {
        "__ferrocuda_dynamic_shared"
    };
}

/// The symbol of a kernel's dynamic shared memory (the bytes given at launch time).
///
/// Device code *declares* it, never defines it:
///
/// ```ignore
/// unsafe extern "C" {
///     #[link_name = ferrocuda_abi::dynamic_shared_symbol!()]
///     static mut DYNAMIC_SHARED: [u8; 0];
/// }
/// ```
///
/// and `ferrocuda-builder` turns the declaration into
/// `.extern .shared .align 16 .b8 __ferrocuda_dynamic_shared[];` (16-byte aligned). Defining a
/// static of this name is a build error.
pub const DYNAMIC_SHARED_SYMBOL: &str = dynamic_shared_symbol!();

/// Aborts the current kernel (or panics on the host) after a failed bounds check.
///
/// On the device this records the caller's location in the module's trap record (see
/// [`diag`]) and executes a PTX `trap`; no message string is in the module.
#[cold]
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
#[track_caller]
pub fn abort() -> ! {
    #[cfg(target_arch = "nvptx64")]
    diag::trap_at(core::panic::Location::caller());
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("ferrocuda: out-of-bounds access in a kernel")
}
