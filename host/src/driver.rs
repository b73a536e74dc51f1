//! The CUDA driver, through cudarc's raw bindings: initialisation, contexts, pointer queries,
//! events, and the conversion of `CUresult` into [`Error`].
//!
//! cudarc is built with `dynamic-loading`: `libcuda.so` is opened at the first call, so
//! ferrocuda builds and imports on machines with no driver and reports
//! [`ErrorKind::NoDriver`] at first use. Nothing of cudarc appears in ferrocuda's public API
//! except where noted; this module is the only one that calls the driver directly besides
//! [`module`](crate::module) and [`array`](crate::array).
//!
//! **`CUresult` caveat.** cudarc declares `CUresult` as a Rust enum. A driver newer than
//! cudarc's newest bindings (CUDA 13.4 here) could in principle return a code the enum
//! lacks, which Rust treats as undefined behaviour. ferrocuda uses the newest binding set to
//! make that window as small as possible; drivers up to CUDA 13.4 return only known codes.
//!
//! **Contexts.** ferrocuda works in each device's *primary* context — the one the CUDA
//! runtime, CuPy, PyTorch, Numba and JAX use — so pointers, streams and events of those
//! libraries are valid in it. Each primary context is retained once and never released.

use crate::error::{Error, ErrorKind, Result};
use crate::stream::{StreamOps, StreamRef};
use cudarc::driver::sys;
use std::ffi::{c_void, CStr};
use std::sync::{Mutex, OnceLock};

/// Most devices ferrocuda addresses in one process.
pub const MAX_DEVICES: usize = 64;

/// Converts a driver status into a `Result`, naming the call.
#[inline]
pub(crate) fn check(res: sys::CUresult, call: &'static str) -> Result<()> {
    if res == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(cuda_error(res, call))
    }
}

/// The [`Error`] for a failed driver call: `"<call> failed: CUDA_ERROR_X (code N): text"`.
#[cold]
pub(crate) fn cuda_error(res: sys::CUresult, call: &'static str) -> Error {
    let code = res as u32;
    let mut name: *const std::ffi::c_char = std::ptr::null();
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: out-pointers to locals; on failure they stay null and are not read.
    let (n, t) = unsafe {
        (
            sys::cuGetErrorName(res, &mut name),
            sys::cuGetErrorString(res, &mut text),
        )
    };
    let read = |status: sys::CUresult, p: *const std::ffi::c_char, fallback: &str| {
        if status == sys::CUresult::CUDA_SUCCESS && !p.is_null() {
            // SAFETY: the driver returns a static NUL-terminated string.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        } else {
            fallback.to_string()
        }
    };
    let name = read(n, name, "CUDA_ERROR_UNKNOWN_CODE");
    let text = read(t, text, "unrecognized error code");
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
        let trap = dev
            .and_then(crate::trap::describe)
            .map(|t| format!("; a device check failed at {t}"))
            .unwrap_or_default();
        format!(
            " [sticky error: a kernel faulted{last}{trap}. The CUDA context of this device is now \
             unusable for every library in the process; restart the process]"
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
    use sys::CUresult::*;
    matches!(
        res,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ECC_UNCORRECTABLE
    )
}

/// The device of the calling thread's current context, if any.
pub(crate) fn current_ordinal() -> Option<usize> {
    let mut dev: sys::CUdevice = 0;
    // SAFETY: out-pointer to a local; fails cleanly without a current context.
    let r = unsafe { sys::cuCtxGetDevice(&mut dev) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(dev.max(0) as usize)
}

static LAST_KERNEL: [std::sync::atomic::AtomicPtr<String>; MAX_DEVICES] =
    [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; MAX_DEVICES];

/// Records the most recent kernel launched on `device` (so that a later fault can name it).
/// `name` must live for the rest of the process (modules leak their kernel names for this).
#[inline]
pub(crate) fn set_last_kernel(device: usize, name: &'static String) {
    if let Some(slot) = LAST_KERNEL.get(device) {
        slot.store(
            name as *const String as *mut String,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// The most recent kernel ferrocuda launched on `device`, if any.
pub fn last_kernel(device: usize) -> Option<&'static str> {
    let p = LAST_KERNEL
        .get(device)?
        .load(std::sync::atomic::Ordering::Relaxed);
    // SAFETY: only `set_last_kernel` stores here, always a `&'static String`.
    (!p.is_null()).then(|| unsafe { (*p).as_str() })
}

static INIT: OnceLock<std::result::Result<(), Error>> = OnceLock::new();

/// Loads the driver and calls `cuInit` once; later calls return the first outcome.
pub fn init() -> Result<()> {
    INIT.get_or_init(|| {
        // SAFETY: probing for the library has no preconditions.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::new(
                ErrorKind::NoDriver,
                "no CUDA driver found (libcuda.so could not be loaded): ferrocuda needs an \
                 NVIDIA GPU and its driver for this operation",
            ));
        }
        // SAFETY: cuInit has no preconditions and may be called repeatedly.
        check(unsafe { sys::cuInit(0) }, "cuInit").map_err(|e| {
            if e.kind() == ErrorKind::NoDriver {
                Error::new(ErrorKind::NoDriver, format!("no usable CUDA device: {e}"))
            } else {
                e
            }
        })
    })
    .clone()
}

/// `true` when a CUDA driver loads and reports at least one device (tests use it to skip).
pub fn is_available() -> bool {
    device_count().map(|n| n > 0).unwrap_or(false)
}

/// Number of CUDA devices.
pub fn device_count() -> Result<usize> {
    init()?;
    let mut n = 0;
    // SAFETY: out-pointer to a local.
    check(unsafe { sys::cuDeviceGetCount(&mut n) }, "cuDeviceGetCount")?;
    Ok(n.max(0) as usize)
}

/// A device's primary context, retained for the life of the process.
#[derive(Debug)]
pub struct Context {
    ordinal: usize,
    raw: sys::CUcontext,
    sm_count: u32,
    compute_capability: (u32, u32),
    events: Mutex<Vec<sys::CUevent>>,
}

// SAFETY: a CUcontext handle may be used from any thread (the driver API is thread-safe);
// the event pool is behind a Mutex.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

static CONTEXTS: [OnceLock<std::result::Result<Context, Error>>; MAX_DEVICES] =
    [const { OnceLock::new() }; MAX_DEVICES];

impl Context {
    /// The primary context of device `ordinal` (retained at the first call).
    pub fn get(ordinal: usize) -> Result<&'static Context> {
        if ordinal >= MAX_DEVICES {
            return Err(Error::value(format!(
                "device {ordinal} is beyond the {MAX_DEVICES} devices ferrocuda supports"
            )));
        }
        CONTEXTS[ordinal]
            .get_or_init(|| Context::retain(ordinal))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn retain(ordinal: usize) -> Result<Context> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(Error::value(format!(
                "device {ordinal} does not exist ({count} CUDA device(s) present)"
            )));
        }
        let mut dev: sys::CUdevice = 0;
        let mut raw: sys::CUcontext = std::ptr::null_mut();
        let mut sms = 0;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: out-pointers to locals; `dev` is a valid ordinal (checked above).
        unsafe {
            check(sys::cuDeviceGet(&mut dev, ordinal as i32), "cuDeviceGet")?;
            check(
                sys::cuDevicePrimaryCtxRetain(&mut raw, dev),
                "cuDevicePrimaryCtxRetain",
            )?;
            use sys::CUdevice_attribute::*;
            check(
                sys::cuDeviceGetAttribute(&mut sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                "cuDeviceGetAttribute",
            )?;
            check(
                sys::cuDeviceGetAttribute(
                    &mut major,
                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    dev,
                ),
                "cuDeviceGetAttribute",
            )?;
            check(
                sys::cuDeviceGetAttribute(
                    &mut minor,
                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    dev,
                ),
                "cuDeviceGetAttribute",
            )?;
        }
        Ok(Context {
            ordinal,
            raw,
            sm_count: sms.max(1) as u32,
            compute_capability: (major as u32, minor as u32),
            events: Mutex::new(Vec::new()),
        })
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.compute_capability
    }

    /// The raw `CUcontext` (cudarc's type).
    pub fn raw(&self) -> sys::CUcontext {
        self.raw
    }

    /// Makes this context current on the calling thread (a no-op when it already is).
    #[inline]
    pub fn bind(&self) -> Result<()> {
        let mut cur: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check(unsafe { sys::cuCtxGetCurrent(&mut cur) }, "cuCtxGetCurrent")?;
        if cur != self.raw {
            // SAFETY: `raw` is a retained primary context.
            check(unsafe { sys::cuCtxSetCurrent(self.raw) }, "cuCtxSetCurrent")?;
        }
        Ok(())
    }

    /// An event from the pool (created with `CU_EVENT_DISABLE_TIMING`). Context must be bound.
    pub(crate) fn take_event(&self) -> Result<sys::CUevent> {
        if let Some(e) = self.events.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(e);
        }
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; the context is current (caller's contract).
        check(
            unsafe {
                sys::cuEventCreate(&mut e, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
            },
            "cuEventCreate",
        )?;
        Ok(e)
    }

    /// Returns an event to the pool. Safe to do as soon as every wait on its current
    /// recording has been enqueued: `cuStreamWaitEvent` captures the recording at call time.
    pub(crate) fn give_event(&self, e: sys::CUevent) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e);
    }

    /// Number of pooled events (for leak tests).
    pub fn pooled_events(&self) -> usize {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// The `CUstream` value of a [`StreamRef`] (1 and 2 are the driver's own sentinels).
#[inline]
pub(crate) fn raw_stream(s: StreamRef) -> sys::CUstream {
    s.as_raw() as usize as sys::CUstream
}

/// Blocks until all work on `s` is done.
pub fn synchronize(s: StreamRef) -> Result<()> {
    // SAFETY: any stream value; an invalid handle yields an error code, not UB, for the
    // sentinels and live handles. Callers pass streams named by live arrays.
    check(
        unsafe { sys::cuStreamSynchronize(raw_stream(s)) },
        "cuStreamSynchronize",
    )
}

/// What the driver knows about a pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerInfo {
    /// `CUmemorytype`: 1 host, 2 device, 3 array, 4 unified; 0 when the driver does not know
    /// the pointer (plain host memory).
    pub memory_type: u32,
    /// Whether it is managed (unified) memory.
    pub managed: bool,
    /// Device the memory lives on.
    pub device: i32,
    /// Start of the allocation that contains the pointer.
    pub range_start: u64,
    /// Size in bytes of that allocation.
    pub range_size: u64,
}

impl PointerInfo {
    /// `true` for memory a kernel can address: device or managed memory.
    pub fn is_device_accessible(&self) -> bool {
        self.memory_type == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
            || self.memory_type == sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32
            || self.managed
    }
}

/// Queries memory type, device and allocation range of `ptr` in one driver call
/// (`cuPointerGetAttributes`, ≈0.14 µs on an H100).
pub fn pointer_info(ptr: u64) -> Result<PointerInfo> {
    init()?;
    use sys::CUpointer_attribute::*;
    let mut attrs = [
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let mut memory_type: u32 = 0;
    let mut managed: u32 = 0;
    let mut device: i32 = -1;
    let mut start: u64 = 0;
    let mut size: usize = 0;
    let mut data: [*mut c_void; 5] = [
        (&mut memory_type as *mut u32).cast(),
        (&mut managed as *mut u32).cast(),
        (&mut device as *mut i32).cast(),
        (&mut start as *mut u64).cast(),
        (&mut size as *mut usize).cast(),
    ];
    // SAFETY: five attributes, five out-pointers of the documented types, all locals.
    let res = unsafe {
        sys::cuPointerGetAttributes(
            5,
            attrs.as_mut_ptr(),
            data.as_mut_ptr(),
            ptr as sys::CUdeviceptr,
        )
    };
    match res {
        sys::CUresult::CUDA_SUCCESS => Ok(PointerInfo {
            memory_type,
            managed: managed != 0,
            device,
            range_start: start,
            range_size: size as u64,
        }),
        // The driver does not know the pointer at all: plain host memory, or garbage.
        sys::CUresult::CUDA_ERROR_INVALID_VALUE => Ok(PointerInfo {
            memory_type: 0,
            managed: false,
            device: -1,
            range_start: 0,
            range_size: 0,
        }),
        other => Err(cuda_error(other, "cuPointerGetAttributes")),
    }
}

/// [`StreamOps`] over the driver, with the context's event pool.
pub(crate) struct DriverOps<'c> {
    pub(crate) ctx: &'c Context,
}

impl StreamOps for DriverOps<'_> {
    type Event = sys::CUevent;

    fn synchronize(&mut self, s: StreamRef) -> Result<()> {
        synchronize(s)
    }

    fn record(&mut self, s: StreamRef) -> Result<sys::CUevent> {
        let e = self.ctx.take_event()?;
        // SAFETY: a pooled event of the current context; `s` is a stream named by a live
        // array or the caller.
        match check(
            unsafe { sys::cuEventRecord(e, raw_stream(s)) },
            "cuEventRecord",
        ) {
            Ok(()) => Ok(e),
            Err(err) => {
                self.ctx.give_event(e);
                Err(err)
            }
        }
    }

    fn wait(&mut self, s: StreamRef, e: sys::CUevent) -> Result<()> {
        // SAFETY: `e` was recorded by `record`; the wait captures that recording now, after
        // which the event can go back to the pool (done by `release`).
        check(
            unsafe { sys::cuStreamWaitEvent(raw_stream(s), e, 0) },
            "cuStreamWaitEvent",
        )
    }

    fn release(&mut self, e: sys::CUevent) {
        self.ctx.give_event(e);
    }
}

/// A stream created (and destroyed) by ferrocuda, in a device's primary context.
#[derive(Debug)]
pub struct Stream {
    raw: sys::CUstream,
    ctx: &'static Context,
}

// SAFETY: stream handles may be used from any thread.
unsafe impl Send for Stream {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream on `device`; `non_blocking` streams do not synchronize implicitly with
    /// the legacy default stream (`CU_STREAM_NON_BLOCKING`, as PyTorch's side streams).
    pub fn new(device: usize, non_blocking: bool) -> Result<Stream> {
        let ctx = Context::get(device)?;
        ctx.bind()?;
        let mut raw: sys::CUstream = std::ptr::null_mut();
        let flags = if non_blocking {
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32
        } else {
            0
        };
        // SAFETY: out-pointer to a local; the context is bound.
        check(
            unsafe { sys::cuStreamCreate(&mut raw, flags) },
            "cuStreamCreate",
        )?;
        Ok(Stream { raw, ctx })
    }

    /// The stream as arrays and launches name it.
    pub fn as_ref(&self) -> StreamRef {
        StreamRef::from_cai(self.raw as usize as u64).expect("driver streams are never 0, 1 or 2")
    }

    /// Blocks until all work on the stream is done.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        synchronize(self.as_ref())
    }

    /// The device ordinal.
    pub fn device(&self) -> usize {
        self.ctx.ordinal()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: we created the stream; pending work still completes after destroy.
            let _ = unsafe { sys::cuStreamDestroy_v2(self.raw) };
        }
    }
}

/// An event recorded on a stream: it completes when the work enqueued on that stream before
/// it has completed.
///
/// Two uses: ordering another stream after that work without blocking the host
/// ([`Fence::wait_on`], e.g. when a DLPack consumer names a stream other than the producer
/// array's), and learning without blocking whether work is done ([`Fence::is_complete`], e.g.
/// to release objects that must outlive a kernel). The event comes from, and goes back to,
/// the device context's pool.
#[derive(Debug)]
pub struct Fence {
    ctx: &'static Context,
    event: sys::CUevent,
}

// SAFETY: a CUevent handle may be used from any thread (the driver API is thread-safe); the
// fence owns its event until `Drop` returns it to the pool.
unsafe impl Send for Fence {}
// SAFETY: every method only passes the handle to thread-safe driver calls.
unsafe impl Sync for Fence {}

impl Fence {
    /// Records a fence on `stream` in device `ordinal`'s primary context.
    pub fn record(ordinal: usize, stream: StreamRef) -> Result<Fence> {
        let ctx = Context::get(ordinal)?;
        ctx.bind()?;
        let event = ctx.take_event()?;
        // SAFETY: a pooled event of the bound context; `stream` is a stream named by a live
        // array or the caller.
        match check(
            unsafe { sys::cuEventRecord(event, raw_stream(stream)) },
            "cuEventRecord",
        ) {
            Ok(()) => Ok(Fence { ctx, event }),
            Err(e) => {
                ctx.give_event(event);
                Err(e)
            }
        }
    }

    /// Makes `stream` wait (on the device, without blocking the host) until the fence has
    /// completed.
    pub fn wait_on(&self, stream: StreamRef) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `event` was recorded by `record`; the wait captures that recording now.
        check(
            unsafe { sys::cuStreamWaitEvent(raw_stream(stream), self.event, 0) },
            "cuStreamWaitEvent",
        )
    }

    /// `true` once the work before the fence has completed (`cuEventQuery`; never blocks).
    pub fn is_complete(&self) -> Result<bool> {
        self.ctx.bind()?;
        // SAFETY: a recorded event owned by this fence.
        match unsafe { sys::cuEventQuery(self.event) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => Err(cuda_error(other, "cuEventQuery")),
        }
    }

    /// Blocks until the fence has completed.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: a recorded event owned by this fence.
        check(
            unsafe { sys::cuEventSynchronize(self.event) },
            "cuEventSynchronize",
        )
    }

    /// The device ordinal.
    pub fn device(&self) -> usize {
        self.ctx.ordinal()
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        // Safe to reuse at once: waits already enqueued captured the recording.
        self.ctx.give_event(self.event);
    }
}

/// Free and total device memory of `device`, in bytes (`cuMemGetInfo`; for leak checks).
pub fn mem_get_info(device: usize) -> Result<(usize, usize)> {
    Context::get(device)?.bind()?;
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: out-pointers to locals; the context is bound.
    check(
        unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) },
        "cuMemGetInfo",
    )?;
    Ok((free, total))
}
