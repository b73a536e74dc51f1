//! The runtime facade: what a binding (the Python extension) or an application needs of the
//! CUDA driver, above the [`driver`] layer — whether a driver and devices are there, a
//! device's properties, blocking on a stream and ordering one stream after another, fences,
//! the caller's current context kept across ferrocuda's calls, and the records of failed
//! device checks (traps).
//!
//! Every function here enters and leaves the device's primary context as the driver layer's
//! entry points do (the calling thread's current context is left as it was found). The types
//! it hands out are the driver layer's own, re-exported: [`Fence`], [`CallerContext`],
//! [`Trap`].

use crate::driver;
use crate::error::{Error, Result};
use crate::stream::StreamRef;

pub use crate::driver::trap::{Trap, TRAP_NOTE};
pub use crate::driver::{CallerContext, Fence, MAX_DEVICES};

/// `true` when a CUDA driver loads and reports at least one device. Never fails.
pub fn is_available() -> bool {
    driver::is_available()
}

/// Number of CUDA devices.
///
/// # Errors
///
/// [`ErrorKind::NoDriver`](crate::ErrorKind::NoDriver) when no driver can be loaded; a failed
/// driver call.
pub fn device_count() -> Result<usize> {
    driver::device_count()
}

/// The properties of a device that decide how fast a kernel runs on it ([`device_properties`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceProperties {
    /// `(major, minor)`.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory, in bytes.
    pub total_memory: usize,
    /// The opt-in maximum of a block's shared memory, in bytes.
    pub max_shared_per_block: u32,
}

/// The properties of `device` (its primary context is retained, once, if it was not yet).
///
/// # Errors
///
/// No driver, a device that does not exist, a failed driver call.
pub fn device_properties(device: usize) -> Result<DeviceProperties> {
    let c = driver::Context::get(device)?;
    let (_, total) = driver::mem_get_info(device)?;
    Ok(DeviceProperties {
        compute_capability: c.compute_capability(),
        multiprocessors: c.sm_count(),
        total_memory: total,
        max_shared_per_block: c.limits().shared_optin,
    })
}

/// Number of CUDA events in the pool of `device`'s context (the pool keeps events for reuse:
/// it should not grow with the number of launches).
///
/// # Errors
///
/// No driver, a device that does not exist, a failed driver call.
pub fn pooled_events(device: usize) -> Result<usize> {
    driver::Context::get(device).map(|c| c.pooled_events())
}

/// Blocks until all work on `stream` of `device` is done.
///
/// # Errors
///
/// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) while `stream` is capturing a
/// CUDA graph (or is the legacy stream while a blocking stream captures), which a
/// synchronization would invalidate; a failed driver call.
pub fn synchronize(device: usize, stream: StreamRef) -> Result<()> {
    driver::synchronize_on(device, stream)
}

/// Makes `consumer` wait, without blocking the host, for the work enqueued so far on
/// `producer` (both streams of `device`), under the capture rules of a launch on `consumer`
/// in the event mode ([`driver::order_before`]).
///
/// # Errors
///
/// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) when `consumer` is capturing a
/// graph that `producer` is not part of (or the reverse); a failed driver call.
pub fn order_before(device: usize, producer: StreamRef, consumer: StreamRef) -> Result<()> {
    driver::order_before(device, producer, consumer)
}

/// The failed device check a ferrocuda kernel recorded on `device` (`None`: any device)
/// before it trapped; `Ok(None)` if no kernel failed a check. Reads host memory only (no
/// driver call), so it works after the CUDA context died, whichever library reported the
/// error.
///
/// # Errors
///
/// `Value` (naming the argument `device`) for a device ordinal ferrocuda cannot address
/// ([`MAX_DEVICES`] and above).
pub fn last_trap(device: Option<usize>) -> Result<Option<Trap>> {
    if let Some(d) = device.filter(|&d| d >= MAX_DEVICES) {
        return Err(Error::value(format!(
            "{d} is not a device ordinal (ferrocuda addresses devices 0 to {})",
            MAX_DEVICES - 1
        ))
        .with_arg("device"));
    }
    Ok(driver::trap::last_trap(device))
}

/// The failed device check behind a driver error of `CUresult` `code`: for an error that ends
/// the context (a sticky one: the kernel faulted), the record a ferrocuda kernel wrote before
/// it trapped, on any device; `None` for other errors or when no record was written.
pub fn trap_of_error(code: u32) -> Option<Trap> {
    driver::is_sticky_code(code)
        .then(|| driver::trap::last_trap(None))
        .flatten()
}
