//! Devices and contexts: the device count, ordinals and attributes, the primary context, the
//! calling thread's current context and its device.

use super::{init, Named};
use crate::error::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::sys;

/// `cuDeviceGetCount` (after [`init`]).
pub(crate) fn device_count() -> Result<usize> {
    init()?;
    cu::device::get_count()
        .named("cuDeviceGetCount")
        .map(|n| n.max(0) as usize)
}

/// `cuDeviceGet`.
pub(crate) fn device(ordinal: usize) -> Result<sys::CUdevice> {
    let ordinal = i32::try_from(ordinal).map_err(|_| Error::value("device ordinal too large"))?;
    cu::device::get(ordinal).named("cuDeviceGet")
}

/// `cuDeviceGetAttribute`.
///
/// # Safety
///
/// `dev` comes from [`device`].
pub(crate) unsafe fn device_attribute(
    dev: sys::CUdevice,
    attr: sys::CUdevice_attribute,
) -> Result<i32> {
    // SAFETY: the caller's contract.
    unsafe { cu::device::get_attribute(dev, attr) }.named("cuDeviceGetAttribute")
}

/// `cuDevicePrimaryCtxRetain`.
///
/// # Safety
///
/// `dev` comes from [`device`].
pub(crate) unsafe fn primary_context_retain(dev: sys::CUdevice) -> Result<sys::CUcontext> {
    // SAFETY: the caller's contract.
    unsafe { cu::primary_ctx::retain(dev) }.named("cuDevicePrimaryCtxRetain")
}

/// `cuCtxGetCurrent`: the calling thread's current context (null when none).
#[inline]
pub(crate) fn current_context() -> Result<sys::CUcontext> {
    cu::ctx::get_current()
        .named("cuCtxGetCurrent")
        .map(|c| c.unwrap_or(std::ptr::null_mut()))
}

/// `cuCtxSetCurrent`.
///
/// # Safety
///
/// `ctx` is a live (retained) context.
pub(crate) unsafe fn set_current_context(ctx: sys::CUcontext) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::ctx::set_current(ctx) }.named("cuCtxSetCurrent")
}
