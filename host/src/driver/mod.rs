//! The CUDA driver, through cudarc (loaded at run time): initialisation, primary contexts,
//! streams, events and pointer queries.
//!
//! # Layers
//!
//! Layered as cudarc is; each module uses only those above it:
//!
//! 1. [`trap`] — the registry of kernels' trap records (host-mapped memory the device fills
//!    before a failed check traps) and of the last kernel launched on each device, read when
//!    a sticky error is reported; no driver calls.
//! 2. `result` — thin `Result` wrappers over the raw calls (cudarc's own `result` functions
//!    where it has them), each `unsafe` with a `# Safety` section when it has preconditions;
//!    the only module that calls the driver.
//! 3. `capture` — CUDA graph capture: a stream's capture state, the plan under capture
//!    ([`capture_plan`]), and the thread's capture mode around ferrocuda's own host-blocking
//!    calls (the others enter it; it uses none of them).
//! 4. `context` — [`Context`]: each device's primary context and its event pool.
//! 5. `streams` — [`Stream`], [`Fence`], the driver side of a stream plan, and
//!    [`order_before`].
//!
//! This module holds the safe entry points ([`init`], [`device_count`], [`pointer_info`], …).
//!
//! cudarc is built with `dynamic-loading`: `libcuda.so` is opened at the first call, so
//! ferrocuda builds and imports on machines with no driver and reports
//! [`ErrorKind::NoDriver`](crate::ErrorKind::NoDriver) at first use. Nothing of cudarc appears in ferrocuda's public API
//! except where noted.
//!
//! **`CUresult` caveat.** cudarc declares `CUresult` as a Rust enum. A driver newer than
//! cudarc's newest bindings (CUDA 13.4 here) could in principle return a code the enum
//! lacks, which Rust treats as undefined behaviour. ferrocuda uses the newest binding set to
//! make that window as small as possible; drivers up to CUDA 13.4 return only known codes.
//!
//! **Contexts.** ferrocuda works in each device's *primary* context — the one the CUDA
//! runtime, CuPy, PyTorch, Numba and JAX use — so pointers, streams and events of those
//! libraries are valid in it. Each primary context is retained once and never released.
//! Every public operation leaves the calling thread's current context as it found it
//! ([`CallerContext`]); only [`Kernel::prepare`](crate::Kernel::prepare) leaves the launch's
//! context current, for [`Prepared::execute`](crate::Prepared::execute).

mod capture;
mod context;
pub(crate) mod result;
mod streams;
pub mod trap;

pub(crate) use capture::{blocking, idle, Relaxed};
pub use capture::{capture_plan, capture_state};
pub(crate) use context::KeptWorkspace;
pub use context::{CallerContext, Context, DeviceLimits};
pub use result::{
    init, is_sticky, is_sticky_code, last_kernel, LaunchAttrs, PointerInfo, MAX_DEVICES,
};
pub(crate) use result::{raw_stream, FunctionHandle, ModuleHandle, StreamHandle};
pub(crate) use streams::DriverOps;
pub use streams::{order_before, synchronize, Fence, Stream};

use crate::error::Result;

/// `true` when a CUDA driver loads and reports at least one device (tests use it to skip).
pub fn is_available() -> bool {
    device_count().map(|n| n > 0).unwrap_or(false)
}

/// Number of CUDA devices.
pub fn device_count() -> Result<usize> {
    result::device_count()
}

/// Queries memory type, device and allocation range of `ptr` in one driver call
/// (`cuPointerGetAttributes`; what it adds to a launch: BENCHMARKS.md, "Launch overhead").
pub fn pointer_info(ptr: u64) -> Result<PointerInfo> {
    init()?;
    result::pointer_attributes(ptr)
}

/// The device that holds the memory at `ptr`, when the driver knows the pointer.
pub fn device_of(ptr: u64) -> Result<Option<usize>> {
    let info = pointer_info(ptr)?;
    Ok(usize::try_from(info.device).ok())
}

/// Blocks until all work on `s` is done, in device `ordinal`'s primary context (refused while
/// `s` is capturing a graph; see [`synchronize`]).
pub fn synchronize_on(ordinal: usize, s: crate::stream::StreamRef) -> Result<()> {
    let _caller = Context::get(ordinal)?.enter()?;
    synchronize(s)
}

/// Free and total device memory of `device`, in bytes (`cuMemGetInfo`; for leak checks).
pub fn mem_get_info(device: usize) -> Result<(usize, usize)> {
    let _caller = Context::get(device)?.enter()?;
    result::mem_get_info()
}
