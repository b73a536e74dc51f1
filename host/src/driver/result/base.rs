//! What every wrapper shares: driver statuses as [`Error`]s that name the call (and, after a
//! fault, the last kernel and the device check that failed), [`init`], and whether the driver
//! exports a symbol.

pub(crate) use crate::driver::trap::set_last_kernel;
pub use crate::driver::trap::{last_kernel, MAX_DEVICES};
use crate::error::{Error, ErrorKind, Result};
use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::sys;
use std::ffi::CStr;
use std::sync::OnceLock;

/// Names the call in a cudarc error.
pub(super) trait Named<T> {
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
            Some(d) => crate::driver::trap::describe(d),
            None => crate::driver::trap::last_trap(None).map(|t| t.to_string()),
        }
        .map(|t| format!("; {} {t}", crate::driver::trap::TRAP_NOTE))
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
pub(super) fn exported(cache: &OnceLock<bool>, symbol: &[u8]) -> bool {
    *cache.get_or_init(|| {
        // SAFETY: a symbol lookup in the loaded driver library; the symbol is not called here.
        unsafe { sys::culib().get::<unsafe extern "C" fn()>(symbol) }.is_ok()
    })
}

/// Converts a driver status into a `Result`, naming the call.
#[inline]
pub(super) fn check(res: sys::CUresult, call: &'static str) -> Result<()> {
    if res == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(cuda_error(res, call))
    }
}

/// The device of the calling thread's current context, if any (`cuCtxGetDevice`, asked only
/// when `cuCtxGetCurrent` shows a context: without one it fails with
/// `CUDA_ERROR_INVALID_CONTEXT`, which compute-sanitizer reports as a failed API call).
pub(crate) fn current_ordinal() -> Option<usize> {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: out-pointer to a local; succeeds (null) without a current context.
    let r = unsafe { sys::cuCtxGetCurrent(&mut ctx) };
    if r != sys::CUresult::CUDA_SUCCESS || ctx.is_null() {
        return None;
    }
    let mut dev: sys::CUdevice = 0;
    // SAFETY: out-pointer to a local; a context is current.
    let r = unsafe { sys::cuCtxGetDevice(&mut dev) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(dev.max(0) as usize)
}

/// A stream as the driver takes it: a `CUstream`, or one of the sentinels 1 and 2 (see
/// [`raw_stream`](super::raw_stream)). Only the driver module sees the handle inside; the
/// other layers pass it along.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamHandle(pub(in crate::driver) sys::CUstream);

/// A loaded kernel function (`CUfunction`); only the driver module sees the handle inside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FunctionHandle(pub(in crate::driver) sys::CUfunction);

/// A loaded module (`CUmodule`); only the driver module sees the handle inside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ModuleHandle(pub(in crate::driver) sys::CUmodule);
