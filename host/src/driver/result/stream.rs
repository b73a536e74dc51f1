//! Streams, events and graph capture: streams created, destroyed, synchronized and ordered
//! after events; the driver's stream ids; a stream's capture state and the calling thread's
//! capture mode; events created, recorded, queried and synchronized.

use super::{check, cuda_error, exported, Named, StreamHandle};
use crate::error::{Error, ErrorKind, Result};
use crate::stream::{Capture, StreamRef};
use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::sys;
use std::sync::OnceLock;

/// The `CUstream` value of a [`StreamRef`] (1 and 2 are the driver's own sentinels).
#[inline]
pub(crate) fn raw_stream(s: StreamRef) -> StreamHandle {
    StreamHandle(s.as_raw() as usize as sys::CUstream)
}

/// `cuStreamCreate` in the current context; `non_blocking`: `CU_STREAM_NON_BLOCKING`.
pub(crate) fn stream_create(non_blocking: bool) -> Result<StreamHandle> {
    let kind = if non_blocking {
        cu::stream::StreamKind::NonBlocking
    } else {
        cu::stream::StreamKind::Default
    };
    cu::stream::create(kind)
        .named("cuStreamCreate")
        .map(StreamHandle)
}

/// `cuStreamDestroy`.
///
/// # Safety
///
/// `s` was created by [`stream_create`] and is not used afterwards.
pub(crate) unsafe fn stream_destroy(s: StreamHandle) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::stream::destroy(s.0) }.named("cuStreamDestroy")
}

/// `cuStreamSynchronize`.
///
/// # Safety
///
/// `s` is a live stream of the current context, or one of the sentinels 1 and 2.
pub(crate) unsafe fn stream_synchronize(s: StreamHandle) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::stream::synchronize(s.0) }.named("cuStreamSynchronize")
}

/// `cuStreamWaitEvent`: future work on `s` waits for the work `e` captured.
///
/// # Safety
///
/// `s` is a live stream (or a sentinel) and `e` a live, recorded event.
pub(crate) unsafe fn stream_wait_event(s: StreamHandle, e: sys::CUevent) -> Result<()> {
    let flags = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
    // SAFETY: the caller's contract.
    unsafe { cu::stream::wait_event(s.0, e, flags) }.named("cuStreamWaitEvent")
}

/// The driver's unique id of stream `s` (`cuStreamGetId`, CUDA 12.0 and newer drivers): never
/// reused within the process, unlike a stream handle after `cuStreamDestroy`; the sentinels
/// name the calling thread's legacy or per-thread default stream. `None` when the driver
/// lacks the call or refuses it.
///
/// # Safety
///
/// `s` is a live stream of the current context, or one of the sentinels 1 and 2.
pub(crate) unsafe fn stream_id(s: StreamHandle) -> Option<u64> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    if !exported(&PRESENT, b"cuStreamGetId") {
        return None;
    }
    let mut id: std::ffi::c_ulonglong = 0;
    // SAFETY: the caller's contract; out-pointer to a local.
    let r = unsafe { sys::cuStreamGetId(s.0, &mut id) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(id)
}

/// Whether the driver exports `cuStreamGetCaptureInfo_v3` (CUDA 12.3 and newer drivers),
/// looked up once.
fn capture_info_v3_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    exported(&PRESENT, b"cuStreamGetCaptureInfo_v3")
}

/// The capture state of `s` in one driver call: `cuStreamGetCaptureInfo` (with the capture
/// id), or `cuStreamIsCapturing` on drivers without it (id 0: unknown). On the legacy stream
/// while a blocking stream captures, the driver answers `CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`
/// without invalidating that capture: [`Capture::Implicit`].
///
/// # Safety
///
/// `s` is a live stream of the current context, or one of the sentinels 1 and 2.
pub(crate) unsafe fn stream_capture(s: StreamHandle) -> Result<Capture> {
    use sys::CUstreamCaptureStatus as St;
    // The driver writes a 4-byte enum; read as an integer so that no value is undefined.
    let mut status: u32 = u32::MAX;
    let mut id: u64 = 0;
    let (r, call) = if capture_info_v3_present() {
        use std::ptr::null_mut;
        // SAFETY: the caller's contract; out-pointers to locals, the optional ones null.
        let r = unsafe {
            sys::cuStreamGetCaptureInfo_v3(
                s.0,
                (&mut status as *mut u32).cast(),
                &mut id,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
            )
        };
        (r, "cuStreamGetCaptureInfo")
    } else {
        // SAFETY: the caller's contract; out-pointer to a local.
        let r = unsafe { sys::cuStreamIsCapturing(s.0, (&mut status as *mut u32).cast()) };
        (r, "cuStreamIsCapturing")
    };
    match r {
        sys::CUresult::CUDA_SUCCESS => match status {
            x if x == St::CU_STREAM_CAPTURE_STATUS_NONE as u32 => Ok(Capture::None),
            x if x == St::CU_STREAM_CAPTURE_STATUS_ACTIVE as u32 => Ok(Capture::Active(id)),
            x if x == St::CU_STREAM_CAPTURE_STATUS_INVALIDATED as u32 => Ok(Capture::Invalidated),
            other => Err(Error::new(
                ErrorKind::Unsupported,
                format!("{call} returned an unknown capture status {other}"),
            )),
        },
        sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT => Ok(Capture::Implicit),
        other => Err(cuda_error(other, call)),
    }
}

/// `cuThreadExchangeStreamCaptureMode`: sets the calling thread's capture interaction mode
/// (`CUstreamCaptureMode` as an integer) and returns the previous one.
pub(crate) fn exchange_capture_mode(mode: u32) -> Result<u32> {
    let mut m = mode;
    // SAFETY: in-out pointer to a local holding a `CUstreamCaptureMode` value (the previous
    // mode is read back as an integer, so no value is undefined).
    let r = unsafe { sys::cuThreadExchangeStreamCaptureMode((&mut m as *mut u32).cast()) };
    check(r, "cuThreadExchangeStreamCaptureMode").map(|()| m)
}

/// `CU_STREAM_CAPTURE_MODE_RELAXED`.
pub(crate) const CAPTURE_MODE_RELAXED: u32 =
    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED as u32;

/// `cuEventCreate` with `CU_EVENT_DISABLE_TIMING`, in the current context.
pub(crate) fn event_create() -> Result<sys::CUevent> {
    cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).named("cuEventCreate")
}

/// `cuEventRecord`.
///
/// # Safety
///
/// `e` is a live event of the current context; `s` a live stream of it (or a sentinel).
pub(crate) unsafe fn event_record(e: sys::CUevent, s: StreamHandle) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::event::record(e, s.0) }.named("cuEventRecord")
}

/// `cuEventQuery`: `true` once the captured work has completed (never blocks).
///
/// # Safety
///
/// `e` is a live event.
pub(crate) unsafe fn event_query(e: sys::CUevent) -> Result<bool> {
    // SAFETY: the caller's contract.
    match unsafe { cu::event::query(e) } {
        Ok(()) => Ok(true),
        Err(DriverError(sys::CUresult::CUDA_ERROR_NOT_READY)) => Ok(false),
        Err(other) => Err(cuda_error(other.0, "cuEventQuery")),
    }
}

/// `cuEventSynchronize`.
///
/// # Safety
///
/// `e` is a live event.
pub(crate) unsafe fn event_synchronize(e: sys::CUevent) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::event::synchronize(e) }.named("cuEventSynchronize")
}
