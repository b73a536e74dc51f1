//! Thin `Result` wrappers over the CUDA driver: the one module that calls it.
//!
//! Layered as cudarc is: cudarc's `sys` holds the raw bindings; its `result` module wraps most
//! calls in `Result`s, and where it does, the wrappers here use it and only name the call in
//! the error. The few calls cudarc does not wrap (pointer attributes in one call, module
//! loading with a JIT log, the current context's device, raw device-to-host copies) are
//! wrapped here, from `sys`. Every wrapper is as thin as cudarc's: the safe types in the
//! sibling modules ([`Context`](super::Context), [`Stream`](super::Stream),
//! [`Fence`](super::Fence)) uphold the preconditions the `# Safety` sections state.
//!
//! Errors become [`Error`]s that name the call: `"<call> failed: CUDA_ERROR_X (code N): text"`,
//! plus, for errors after which the context is unusable, the last kernel ferrocuda launched on
//! the device ([`set_last_kernel`]).
//!
//! # What lives where
//!
//! Every wrapper called outside its file is re-exported here, so callers name it
//! `result::<call>` wherever it lives:
//!
//! * this module — errors ([`cuda_error`], [`is_sticky`], the last kernel of each device),
//!   [`init`], and the helpers the wrappers share (naming a call in an error, looking up
//!   whether the driver exports a symbol);
//! * `device` — devices and contexts: count, ordinals, attributes, the primary context, the
//!   calling thread's current context and its device;
//! * `stream` — streams, events and graph capture: create, destroy, synchronize, wait, stream
//!   ids, a stream's capture state, the thread's capture mode;
//! * `pointer` — pointer queries: [`PointerInfo`] from `cuPointerGetAttributes`;
//! * `memory` — memory and copies: free memory, stream-ordered allocation and pools, memset,
//!   host-to-device and device-to-host copies, mapped host memory, tensor maps (TMA
//!   descriptors);
//! * `module` — modules and functions: loading PTX and cubins, globals, functions, their
//!   attributes and occupancy;
//! * `launch` — launches: [`LaunchAttrs`], `cuLaunchKernel`, `cuLaunchKernelEx` and the
//!   cooperative fallback, the cluster occupancy query.

use crate::error::{Error, ErrorKind, Result};
use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::sys;
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

mod device;
mod launch;
mod memory;
mod module;
mod pointer;
mod stream;

pub(crate) use device::{
    current_context, current_ordinal, device, device_attribute, device_count,
    primary_context_retain, set_current_context,
};
pub use launch::LaunchAttrs;
pub(crate) use launch::{launch_kernel_with, max_active_clusters};
pub(crate) use memory::{
    mem_alloc_async, mem_alloc_from_pool_async, mem_free_async, mem_get_info,
    mem_host_alloc_mapped, mem_pool_create, memcpy_dtoh_async, memcpy_htod_async, memset_d8_async,
    tensor_map_encode_tiled,
};
pub(crate) use module::{
    blocks_per_multiprocessor, function_attribute, module_function, module_global, module_load,
    module_load_cubin, module_unload, potential_block_size, set_function_attribute,
};
pub(crate) use pointer::pointer_attributes;
pub use pointer::PointerInfo;
pub(crate) use stream::{
    event_create, event_query, event_record, event_synchronize, exchange_capture_mode,
    stream_capture, stream_create, stream_destroy, stream_id, stream_synchronize,
    stream_wait_event, CAPTURE_MODE_RELAXED,
};

/// Most devices ferrocuda addresses in one process.
pub const MAX_DEVICES: usize = 64;

/// Names the call in a cudarc error.
trait Named<T> {
    fn named(self, call: &'static str) -> Result<T>;
}

impl<T> Named<T> for std::result::Result<T, DriverError> {
    #[inline]
    fn named(self, call: &'static str) -> Result<T> {
        self.map_err(|e| cuda_error(e.0, call))
    }
}

/// The [`Error`] for a failed driver call: `"<call> failed: CUDA_ERROR_X (code N): text"`.
#[cold]
pub(crate) fn cuda_error(res: sys::CUresult, call: &'static str) -> Error {
    let code = res as u32;
    let e = DriverError(res);
    let read = |s: std::result::Result<&CStr, DriverError>, fallback: &str| {
        s.map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_else(|_| fallback.to_string())
    };
    let name = read(e.error_name(), "CUDA_ERROR_UNKNOWN_CODE");
    let text = read(e.error_string(), "unrecognized error code");
    let sticky = if is_sticky(res) {
        let dev = current_ordinal();
        let last = dev
            .and_then(last_kernel)
            .map(|k| {
                format!(
                    "; the most recent kernel ferrocuda launched on device {} was `{k}`",
                    dev.unwrap_or(0)
                )
            })
            .unwrap_or_default();
        // Without a current context (the device unknown), any device's record.
        let trap = match dev {
            Some(d) => super::trap::describe(d),
            None => super::trap::last_trap(None).map(|t| t.to_string()),
        }
        .map(|t| format!("; {} {t}", super::trap::TRAP_NOTE))
        .unwrap_or_default();
        format!(
            " [sticky error: a kernel faulted{last}{trap}. The CUDA context of this device is \
             now unusable for every library in the process; restart the process]"
        )
    } else {
        String::new()
    };
    let kind = match res {
        sys::CUresult::CUDA_ERROR_NO_DEVICE | sys::CUresult::CUDA_ERROR_STUB_LIBRARY => {
            ErrorKind::NoDriver
        }
        _ => ErrorKind::Cuda { code },
    };
    Error::new(
        kind,
        format!("{call} failed: {name} (code {code}): {text}{sticky}"),
    )
}

/// Errors after which the context is unusable (a kernel faulted): they are reported by the
/// next driver call on the context, whichever library makes it.
pub fn is_sticky(res: sys::CUresult) -> bool {
    STICKY.contains(&res)
}

/// [`is_sticky`] for a raw `CUresult` code (as [`ErrorKind::Cuda`] holds it).
pub fn is_sticky_code(code: u32) -> bool {
    STICKY.iter().any(|&r| r as u32 == code)
}

const STICKY: [sys::CUresult; 10] = {
    use sys::CUresult::*;
    [
        CUDA_ERROR_ILLEGAL_ADDRESS,
        CUDA_ERROR_LAUNCH_FAILED,
        CUDA_ERROR_MISALIGNED_ADDRESS,
        CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CUDA_ERROR_INVALID_ADDRESS_SPACE,
        CUDA_ERROR_INVALID_PC,
        CUDA_ERROR_HARDWARE_STACK_ERROR,
        CUDA_ERROR_ASSERT,
        CUDA_ERROR_LAUNCH_TIMEOUT,
        CUDA_ERROR_ECC_UNCORRECTABLE,
    ]
};

static LAST_KERNEL: [AtomicPtr<String>; MAX_DEVICES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_DEVICES];

/// Records the most recent kernel launched on `device` (so that a later fault can name it).
/// `name` must live for the rest of the process (modules leak their kernel names for this).
#[inline]
pub(crate) fn set_last_kernel(device: usize, name: &'static String) {
    if let Some(slot) = LAST_KERNEL.get(device) {
        slot.store(name as *const String as *mut String, Ordering::Relaxed);
    }
}

/// The most recent kernel ferrocuda launched on `device`, if any.
pub fn last_kernel(device: usize) -> Option<&'static str> {
    let p = LAST_KERNEL.get(device)?.load(Ordering::Relaxed);
    // SAFETY: only `set_last_kernel` stores here, always a `&'static String`.
    (!p.is_null()).then(|| unsafe { (*p).as_str() })
}

/// `true` when `libcuda.so` can be loaded.
fn library_present() -> bool {
    // SAFETY: probing for the library has no preconditions.
    unsafe { sys::is_culib_present() }
}

static INIT: OnceLock<std::result::Result<(), Error>> = OnceLock::new();

/// Loads the driver and calls `cuInit` once; later calls return the first outcome.
pub fn init() -> Result<()> {
    INIT.get_or_init(|| {
        if !library_present() {
            return Err(Error::new(
                ErrorKind::NoDriver,
                "no CUDA driver found (libcuda.so could not be loaded): ferrocuda needs an \
                 NVIDIA GPU and its driver for this operation",
            ));
        }
        cu::init().named("cuInit").map_err(|e| {
            if e.kind() == ErrorKind::NoDriver {
                Error::new(ErrorKind::NoDriver, format!("no usable CUDA device: {e}"))
            } else {
                e
            }
        })
    })
    .clone()
}

/// Whether the loaded driver library exports `symbol`, looked up once into `cache` (one
/// cache per symbol). Called only after the driver is initialized.
fn exported(cache: &OnceLock<bool>, symbol: &[u8]) -> bool {
    *cache.get_or_init(|| {
        // SAFETY: a symbol lookup in the loaded driver library; the symbol is not called here.
        unsafe { sys::culib().get::<unsafe extern "C" fn()>(symbol) }.is_ok()
    })
}

/// Converts a driver status into a `Result`, naming the call.
#[inline]
fn check(res: sys::CUresult, call: &'static str) -> Result<()> {
    if res == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(cuda_error(res, call))
    }
}
