//! Device-side support for ferrocuda kernels.
//!
//! A kernel crate is a `#![no_std]` library that depends on this crate and marks its entry
//! points with [`kernel`]:
//!
//! ```ignore
//! #![no_std]
//! #![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]
//! use ferrocuda_device::{kernel, thread, Slice, SliceMut};
//!
//! #[kernel(same_shape(x, y))]
//! pub unsafe fn scale_f32(alpha: f32, x: Slice<f32>, y: SliceMut<f32>) {
//!     for i in thread::grid_stride(y.len()) {
//!         unsafe { y.write_unchecked(i, alpha * x.get_unchecked(i)) };
//!     }
//! }
//! ```
//!
//! What is here:
//!
//! * [`thread`] — thread, block and grid indices in 1-D, 2-D and 3-D, the global index, the
//!   block's linear thread rank, the block barrier [`thread::sync_threads`] and its counting
//!   forms, `nanosleep`, clock and timer reads;
//! * [`atomic`] — atomics with an explicit memory [`atomic::Order`] and [`atomic::Scope`] on
//!   device and shared memory, fences, and [`atomic::AtomicSlice`], an array parameter that
//!   many threads update;
//! * [`warp`] — lane id, shuffles, votes, match, `redux.sync`, the warp barrier;
//! * [`block`] — CUB-style warp and block reductions and scans over any block size;
//! * [`half`] — `f16`, `bf16` and their packed pairs, with hardware conversions;
//! * [`GridStride`] / [`thread::grid_stride`] — the grid-stride loop;
//! * the parameter types and the indexer, re-exported from `ferrocuda-abi`;
//! * [`kernel`] — the attribute that makes a PTX entry point and its manifest record.
//!
//! On the device, panics become a PTX `trap` (the builder compiles with
//! `-Cpanic=immediate-abort`); this crate supplies the `#[panic_handler]`. On the host only the
//! target-independent parts ([`GridStride`], the re-exports) exist, so they can be unit-tested.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(stdarch_nvptx, asm_experimental_arch, link_llvm_intrinsics, f16)
)]
// `link_llvm_intrinsics` is how the convergent NVVM intrinsics (shuffles, votes, barriers) are
// reached; rustc calls it internal.
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
#![warn(missing_docs)]

pub use ferrocuda_abi::{
    DType, Element, Indexer, KernelParam, ParamDesc, ParamKind, Slice, SliceMut, View, ViewMut,
};
pub use ferrocuda_macros::kernel;

mod grid;
#[cfg(target_arch = "nvptx64")]
mod nvvm;
pub use grid::GridStride;

#[cfg(target_arch = "nvptx64")]
pub mod thread;

pub mod atomic;
#[cfg(target_arch = "nvptx64")]
pub mod block;
pub mod half;
#[cfg(target_arch = "nvptx64")]
pub mod warp;

/// Items used by the code `#[kernel]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use ferrocuda_abi::launch::{LaunchDecl, LEN as LAUNCH_RECORD_LEN};
    pub use ferrocuda_abi::manifest::{encode, encoded_len};
    pub use ferrocuda_abi::{Element, KernelParam};
}

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // SAFETY: `trap` aborts the kernel; it has no preconditions.
    unsafe { core::arch::nvptx::trap() }
}
