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
//! * [`thread`] — thread, block and grid indices in 1-D, 2-D and 3-D, the global index, and
//!   the block barrier [`thread::sync_threads`];
//! * [`GridStride`] / [`thread::grid_stride`] — the grid-stride loop;
//! * the parameter types and the indexer, re-exported from `ferrocuda-abi`;
//! * [`kernel`] — the attribute that makes a PTX entry point and its manifest record.
//!
//! On the device, panics become a PTX `trap` (the builder compiles with
//! `-Cpanic=immediate-abort`); this crate supplies the `#[panic_handler]`. On the host only the
//! target-independent parts ([`GridStride`], the re-exports) exist, so they can be unit-tested.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(stdarch_nvptx))]
#![warn(missing_docs)]

pub use ferrocuda_abi::{
    DType, Element, Indexer, KernelParam, ParamDesc, ParamKind, Slice, SliceMut, View, ViewMut,
};
pub use ferrocuda_macros::kernel;

mod grid;
pub use grid::GridStride;

#[cfg(target_arch = "nvptx64")]
pub mod thread;

/// Items used by the code `#[kernel]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use ferrocuda_abi::manifest::{encode, encoded_len};
    pub use ferrocuda_abi::KernelParam;
}

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // SAFETY: `trap` aborts the kernel; it has no preconditions.
    unsafe { core::arch::nvptx::trap() }
}
