//! Arrays: [`DeviceArray`] and [`AnyDeviceArray`] (memory ferrocuda owns), [`ForeignArray`]
//! (another library's memory, kept alive by an owner), and host arrays as kernel arguments
//! ([`HostArg`], [`Staging`]).
//!
//! # DeviceArray
//!
//! A C-contiguous N-D device allocation tied to one stream, typed ([`DeviceArray<T>`]) or with
//! its element type known at run time ([`AnyDeviceArray`], which `DeviceArray<T>` wraps).
//! Allocation, upload, download and free are *stream-ordered* on that stream
//! (`cuMemAllocAsync`, `cuMemcpy*Async`, `cuMemFreeAsync`), and the array exports the CUDA
//! Array Interface v3 with `stream` = that stream, so any consumer — ferrocuda's launchers,
//! CuPy, Numba — orders itself after pending work. Kernels launched by ferrocuda on another
//! stream make the array's stream wait for them (the stream plan's "after" half), so a later
//! free on the array's stream never overtakes a kernel still using the memory.
//!
//! # ForeignArray
//!
//! What Numba's `as_cuda_array(obj, sync)` / `from_cuda_array_interface(desc, owner, sync)`
//! return: a validated interface plus the object that owns the memory, kept alive as long as
//! the `ForeignArray` is; imported by [`import`]'s synchronization rule.
//!
//! # Host arrays
//!
//! A launch may take `ndarray` arrays, as Numba's kernels take NumPy arrays: see
//! [`Staging`] and [`Kernel::launch_host`](crate::Kernel::launch_host).

mod as_arg;
mod device;
mod foreign;
mod staging;

pub use as_arg::AsArg;
pub use device::{AnyDeviceArray, DeviceArray};
pub use foreign::{import, ForeignArray};
pub use staging::{HostArg, HostArray, HostArrayMut, Staging};
