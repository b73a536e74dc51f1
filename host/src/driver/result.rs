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

use crate::error::{Error, ErrorKind, Result};
use crate::stream::Capture;
use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::sys;
use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

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
        let trap = dev
            .and_then(super::trap::describe)
            .map(|t| format!("; a device check failed at {t}"))
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

/// `cuStreamCreate` in the current context; `non_blocking`: `CU_STREAM_NON_BLOCKING`.
pub(crate) fn stream_create(non_blocking: bool) -> Result<sys::CUstream> {
    let kind = if non_blocking {
        cu::stream::StreamKind::NonBlocking
    } else {
        cu::stream::StreamKind::Default
    };
    cu::stream::create(kind).named("cuStreamCreate")
}

/// `cuStreamDestroy`.
///
/// # Safety
///
/// `s` was created by [`stream_create`] and is not used afterwards.
pub(crate) unsafe fn stream_destroy(s: sys::CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::stream::destroy(s) }.named("cuStreamDestroy")
}

/// `cuStreamSynchronize`.
///
/// # Safety
///
/// `s` is a live stream of the current context, or one of the sentinels 1 and 2.
pub(crate) unsafe fn stream_synchronize(s: sys::CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::stream::synchronize(s) }.named("cuStreamSynchronize")
}

/// `cuStreamWaitEvent`: future work on `s` waits for the work `e` captured.
///
/// # Safety
///
/// `s` is a live stream (or a sentinel) and `e` a live, recorded event.
pub(crate) unsafe fn stream_wait_event(s: sys::CUstream, e: sys::CUevent) -> Result<()> {
    let flags = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
    // SAFETY: the caller's contract.
    unsafe { cu::stream::wait_event(s, e, flags) }.named("cuStreamWaitEvent")
}

/// The driver's unique id of stream `s` (`cuStreamGetId`, CUDA 12.0 and newer drivers): never
/// reused within the process, unlike a stream handle after `cuStreamDestroy`; the sentinels
/// name the calling thread's legacy or per-thread default stream. `None` when the driver
/// lacks the call or refuses it.
///
/// # Safety
///
/// `s` is a live stream of the current context, or one of the sentinels 1 and 2.
pub(crate) unsafe fn stream_id(s: sys::CUstream) -> Option<u64> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    if !exported(&PRESENT, b"cuStreamGetId") {
        return None;
    }
    let mut id: std::ffi::c_ulonglong = 0;
    // SAFETY: the caller's contract; out-pointer to a local.
    let r = unsafe { sys::cuStreamGetId(s, &mut id) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(id)
}

/// Whether the loaded driver library exports `symbol`, looked up once into `cache` (one
/// cache per symbol). Called only after the driver is initialized.
fn exported(cache: &OnceLock<bool>, symbol: &[u8]) -> bool {
    *cache.get_or_init(|| {
        // SAFETY: a symbol lookup in the loaded driver library; the symbol is not called here.
        unsafe { sys::culib().get::<unsafe extern "C" fn()>(symbol) }.is_ok()
    })
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
pub(crate) unsafe fn stream_capture(s: sys::CUstream) -> Result<Capture> {
    use sys::CUstreamCaptureStatus as St;
    // The driver writes a 4-byte enum; read as an integer so that no value is undefined.
    let mut status: u32 = u32::MAX;
    let mut id: u64 = 0;
    let (r, call) = if capture_info_v3_present() {
        use std::ptr::null_mut;
        // SAFETY: the caller's contract; out-pointers to locals, the optional ones null.
        let r = unsafe {
            sys::cuStreamGetCaptureInfo_v3(
                s,
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
        let r = unsafe { sys::cuStreamIsCapturing(s, (&mut status as *mut u32).cast()) };
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
pub(crate) unsafe fn event_record(e: sys::CUevent, s: sys::CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::event::record(e, s) }.named("cuEventRecord")
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
    /// What the driver says of a pointer it does not know (plain host memory, or garbage).
    const UNKNOWN: PointerInfo = PointerInfo {
        memory_type: 0,
        managed: false,
        device: -1,
        range_start: 0,
        range_size: 0,
    };

    /// `true` for memory a kernel can address: device or managed memory.
    pub fn is_device_accessible(&self) -> bool {
        self.memory_type == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
            || self.memory_type == sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32
            || self.managed
    }
}

/// Memory type, device and allocation range of `ptr` in one `cuPointerGetAttributes` call
/// (what it adds to a launch: BENCHMARKS.md, "Launch overhead"). A pointer the driver does not
/// know is not an error: its memory type is 0.
pub(crate) fn pointer_attributes(ptr: u64) -> Result<PointerInfo> {
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
        sys::CUresult::CUDA_ERROR_INVALID_VALUE => Ok(PointerInfo::UNKNOWN),
        other => Err(cuda_error(other, "cuPointerGetAttributes")),
    }
}

/// `cuMemGetInfo`: free and total memory of the current context's device.
pub(crate) fn mem_get_info() -> Result<(usize, usize)> {
    cu::mem_get_info().named("cuMemGetInfo")
}

/// `cuMemAllocAsync` of `bytes` on `s`.
///
/// # Safety
///
/// `s` is a live stream of the current context (or a sentinel); the memory is used in stream
/// order after it.
pub(crate) unsafe fn mem_alloc_async(bytes: usize, s: sys::CUstream) -> Result<u64> {
    // SAFETY: the caller's contract.
    unsafe { cu::malloc_async(s, bytes) }.named("cuMemAllocAsync")
}

/// `cuMemFreeAsync`.
///
/// # Safety
///
/// `ptr` was allocated by [`mem_alloc_async`] and is not used after the free in stream order.
pub(crate) unsafe fn mem_free_async(ptr: u64, s: sys::CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::free_async(ptr, s) }.named("cuMemFreeAsync")
}

/// `cuMemPoolCreate` of a device-memory pool on device `ordinal` (pinned device memory, no
/// export handles), with its release threshold set to `keep` bytes: memory freed back to the
/// pool stays reserved up to that much across synchronizations, so stream-ordered
/// allocations after a sync do not go back to the operating system.
pub(crate) fn mem_pool_create(ordinal: usize, keep: u64) -> Result<sys::CUmemoryPool> {
    // SAFETY: an all-zero `CUmemPoolProps` is valid (no handle types, no security attributes,
    // no maximum size); the fields set below are the documented ones for device memory.
    let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
    props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
    props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.__bindgen_anon_1.id = ordinal as i32;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: out-pointer to a local; `props` is a valid description.
    let r = unsafe { sys::cuMemPoolCreate(&mut pool, &props) };
    check(r, "cuMemPoolCreate")?;
    let mut threshold = keep;
    // SAFETY: `pool` was just created; the attribute takes a `cuuint64_t`.
    let r = unsafe {
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
    };
    check(r, "cuMemPoolSetAttribute")?;
    Ok(pool)
}

/// `cuMemAllocFromPoolAsync` of `bytes` from `pool` on `s`.
///
/// # Safety
///
/// `pool` comes from [`mem_pool_create`] on the current context's device; `s` is a live
/// stream of the current context (or a sentinel); the memory is used in stream order after
/// it.
pub(crate) unsafe fn mem_alloc_from_pool_async(
    bytes: usize,
    pool: sys::CUmemoryPool,
    s: sys::CUstream,
) -> Result<u64> {
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: the caller's contract; out-pointer to a local.
    let r = unsafe { sys::cuMemAllocFromPoolAsync(&mut ptr, bytes, pool, s) };
    check(r, "cuMemAllocFromPoolAsync").map(|()| ptr)
}

/// `cuMemsetD8Async`: `bytes` bytes at `ptr` set to `value`, on `s`.
///
/// # Safety
///
/// `ptr..ptr + bytes` is device memory of the current context that nothing else uses
/// concurrently in stream order; `s` is a live stream (or a sentinel).
pub(crate) unsafe fn memset_d8_async(
    ptr: u64,
    value: u8,
    bytes: usize,
    s: sys::CUstream,
) -> Result<()> {
    // SAFETY: the caller's contract.
    check(
        unsafe { sys::cuMemsetD8Async(ptr, value, bytes, s) },
        "cuMemsetD8Async",
    )
}

/// `cuMemcpyHtoDAsync` of `src` to device address `dst`.
///
/// # Safety
///
/// `dst` holds `src.len()` bytes; `src` stays unchanged until the copy completes (callers
/// synchronize `s` before returning).
pub(crate) unsafe fn memcpy_htod_async(dst: u64, src: &[u8], s: sys::CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::memcpy_htod_async(dst, src, s) }.named("cuMemcpyHtoDAsync")
}

/// `cuMemcpyDtoHAsync` of `bytes` bytes from device address `src` to `dst`.
///
/// # Safety
///
/// `dst` is valid for writes of `bytes` bytes until the copy completes (callers synchronize
/// `s` before returning); `src` holds `bytes` bytes.
pub(crate) unsafe fn memcpy_dtoh_async(
    dst: *mut u8,
    src: u64,
    bytes: usize,
    s: sys::CUstream,
) -> Result<()> {
    // SAFETY: the caller's contract.
    let r = unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, s) };
    check(r, "cuMemcpyDtoHAsync")
}

/// `cuModuleLoadDataEx` of NUL-terminated PTX into the current context, with the JIT's
/// error log written to `log` (NUL-terminated text, when the load fails).
pub(crate) fn module_load(ptx: &CStr, log: &mut [u8]) -> Result<sys::CUmodule> {
    // SAFETY: NUL-terminated PTX text is an image the driver reads to its NUL.
    unsafe { module_load_image(ptx.to_bytes_with_nul(), log) }
}

/// `cuModuleLoadDataEx` of a cubin (an ELF image, read by the driver from its headers, so
/// bytes and not a C string) into the current context, with the error log written to `log`.
pub(crate) fn module_load_cubin(cubin: &[u8], log: &mut [u8]) -> Result<sys::CUmodule> {
    const ELF: &[u8] = b"\x7fELF";
    if !cubin.starts_with(ELF) {
        return Err(Error::value(
            "a cubin image does not start with the ELF magic",
        ));
    }
    // The driver reads the ELF headers in place: an image not 8-byte aligned (embedded bytes
    // are only byte-aligned) is copied into one that is.
    if cubin.as_ptr().align_offset(8) != 0 {
        let mut aligned = vec![0u64; cubin.len().div_ceil(8)];
        // SAFETY: `aligned` has at least `cubin.len()` bytes; the two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(cubin.as_ptr(), aligned.as_mut_ptr().cast(), cubin.len())
        };
        // SAFETY: as below, for the copy.
        let copy =
            unsafe { std::slice::from_raw_parts(aligned.as_ptr().cast::<u8>(), cubin.len()) };
        // SAFETY: an ELF image, whose headers give the driver its extent; the copy is the
        // whole file and outlives the call.
        return unsafe { module_load_image(copy, log) };
    }
    // SAFETY: an ELF image, whose headers give the driver its extent; the caller's bytes are
    // the whole file.
    unsafe { module_load_image(cubin, log) }
}

/// # Safety
///
/// `image` is NUL-terminated PTX or a whole cubin/fatbin file.
unsafe fn module_load_image(image: &[u8], log: &mut [u8]) -> Result<sys::CUmodule> {
    let mut opts = [
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut vals: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: the caller's image; two JIT options with matching value slots; the log buffer
    // and the image outlive the call.
    let res = unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            image.as_ptr().cast(),
            2,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
        )
    };
    check(res, "cuModuleLoadDataEx").map(|()| module)
}

/// `cuModuleUnload` (a module given up before any of its functions was used).
///
/// # Safety
///
/// `module` is a loaded module of the current context that nothing uses any more.
pub(crate) unsafe fn module_unload(module: sys::CUmodule) -> Result<()> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::cuModuleUnload(module) }, "cuModuleUnload")
}

/// `cuModuleGetGlobal` of `name`: its device address and size, or `None` when the module
/// has no such global.
///
/// # Safety
///
/// `module` is a loaded module of the current context.
pub(crate) unsafe fn module_global(
    module: sys::CUmodule,
    name: &CStr,
) -> Result<Option<(u64, usize)>> {
    let (mut dptr, mut size): (sys::CUdeviceptr, usize) = (0, 0);
    // SAFETY: the caller's contract; NUL-terminated name; out-pointers to locals.
    let r = unsafe { sys::cuModuleGetGlobal_v2(&mut dptr, &mut size, module, name.as_ptr()) };
    if r == sys::CUresult::CUDA_ERROR_NOT_FOUND {
        return Ok(None);
    }
    check(r, "cuModuleGetGlobal").map(|()| Some((dptr, size)))
}

/// `cuMemHostAlloc(DEVICEMAP)` of `bytes` zeroed bytes of page-locked host memory mapped
/// into the current context's address space: its host and device addresses. Never freed by
/// ferrocuda (callers keep it for the life of the process).
pub(crate) fn mem_host_alloc_mapped(bytes: usize) -> Result<(*mut u8, u64)> {
    let mut host: *mut c_void = std::ptr::null_mut();
    // SAFETY: out-pointer to a local.
    let r = unsafe { sys::cuMemHostAlloc(&mut host, bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP) };
    check(r, "cuMemHostAlloc")?;
    // SAFETY: `host` is a fresh allocation of `bytes` bytes.
    unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, bytes) };
    let mut mapped: sys::CUdeviceptr = 0;
    // SAFETY: `host` was allocated with DEVICEMAP in the current context.
    let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut mapped, host, 0) };
    check(r, "cuMemHostGetDevicePointer")?;
    Ok((host.cast(), mapped))
}

/// `cuModuleGetFunction`.
///
/// # Safety
///
/// `module` is a loaded module of the current context.
pub(crate) unsafe fn module_function(
    module: sys::CUmodule,
    name: &CString,
) -> Result<sys::CUfunction> {
    // SAFETY: the caller's contract.
    unsafe { cu::module::get_function(module, name.clone()) }.named("cuModuleGetFunction")
}

/// `cuFuncGetAttribute`.
///
/// # Safety
///
/// `f` comes from [`module_function`].
pub(crate) unsafe fn function_attribute(
    f: sys::CUfunction,
    attr: sys::CUfunction_attribute,
) -> Result<i32> {
    // SAFETY: the caller's contract.
    unsafe { cu::function::get_function_attribute(f, attr) }.named("cuFuncGetAttribute")
}

/// `cuFuncSetAttribute`.
///
/// # Safety
///
/// `f` comes from [`module_function`].
pub(crate) unsafe fn set_function_attribute(
    f: sys::CUfunction,
    attr: sys::CUfunction_attribute,
    value: i32,
) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::function::set_function_attribute(f, attr, value) }.named("cuFuncSetAttribute")
}

/// `cuOccupancyMaxPotentialBlockSize` without dynamic shared memory: the block size (at most
/// `limit` threads; 0: the kernel's maximum) that maximizes the kernel's occupancy.
///
/// # Safety
///
/// `f` comes from [`module_function`].
pub(crate) unsafe fn potential_block_size(f: sys::CUfunction, limit: u32) -> Result<u32> {
    let limit = i32::try_from(limit).unwrap_or(i32::MAX);
    // SAFETY: the caller's contract; no block-size-to-shared-memory callback.
    unsafe { cu::occupancy::max_potential_block_size(f, None, 0, limit) }
        .named("cuOccupancyMaxPotentialBlockSize")
        .map(|(_, block)| block.max(1) as u32)
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor`: how many blocks of `block` threads, each
/// with `dynamic_shared` bytes of dynamic shared memory, one SM holds at once (0 when not even
/// one fits).
///
/// # Safety
///
/// 1. `f` comes from [`module_function`].
pub(crate) unsafe fn blocks_per_multiprocessor(
    f: sys::CUfunction,
    block: u32,
    dynamic_shared: u32,
) -> Result<u32> {
    let block = i32::try_from(block).unwrap_or(i32::MAX);
    // SAFETY: the caller's contract.
    unsafe { cu::occupancy::max_active_block_per_multiprocessor(f, block, dynamic_shared as usize) }
        .named("cuOccupancyMaxActiveBlocksPerMultiprocessor")
        .map(|n| n.max(0) as u32)
}

/// What a launch asks of the driver beyond grid, block and shared memory: the launch
/// attributes of `cuLaunchKernelEx`, which [`Kernel::prepare`](crate::Kernel::prepare) decides
/// from the kernel's declarations ([`Prepared::attributes`](crate::Prepared::attributes)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LaunchAttrs {
    /// A plain launch (`cuLaunchKernel`).
    #[default]
    Plain,
    /// A cooperative launch (`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`): every block of the grid is
    /// resident at once, or the launch fails.
    Cooperative,
    /// A launch in thread-block clusters of this shape
    /// (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`; sm_90 and newer).
    Cluster([u32; 3]),
}

/// A `CUlaunchAttribute` of `attrs` (`None` for a plain launch).
fn launch_attribute(attrs: LaunchAttrs) -> Option<sys::CUlaunchAttribute> {
    use sys::CUlaunchAttributeID::*;
    // SAFETY: an all-zero attribute is valid (`CU_LAUNCH_ATTRIBUTE_IGNORE`, a zeroed value
    // union); the fields set below are the documented ones for each attribute.
    let mut a: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    match attrs {
        LaunchAttrs::Plain => return None,
        LaunchAttrs::Cooperative => {
            a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            a.value.cooperative = 1;
        }
        LaunchAttrs::Cluster([x, y, z]) => {
            a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            a.value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x, y, z };
        }
    }
    Some(a)
}

/// A `CUlaunchConfig` of grid, block, shared memory and stream, with `attrs` (null when
/// none).
fn launch_config(
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    s: sys::CUstream,
    attrs: Option<&mut sys::CUlaunchAttribute>,
) -> sys::CUlaunchConfig {
    let (attrs, num_attrs) = match attrs {
        Some(a) => (a as *mut sys::CUlaunchAttribute, 1),
        None => (std::ptr::null_mut(), 0),
    };
    sys::CUlaunchConfig {
        gridDimX: grid[0],
        gridDimY: grid[1],
        gridDimZ: grid[2],
        blockDimX: block[0],
        blockDimY: block[1],
        blockDimZ: block[2],
        sharedMemBytes: shared_mem_bytes,
        hStream: s,
        attrs,
        numAttrs: num_attrs,
    }
}

/// Whether the driver exports `cuLaunchKernelEx` (CUDA 11.8 and newer drivers), looked up
/// once.
fn launch_kernel_ex_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    exported(&PRESENT, b"cuLaunchKernelEx")
}

/// `cuOccupancyMaxActiveClusters`: how many clusters of `cluster` blocks — each block of
/// `block` threads with `shared_mem_bytes` of dynamic shared memory — the device can run at
/// once for a launch of `grid` (0: the kernel cannot be launched with that cluster).
///
/// # Errors
///
/// [`ErrorKind::Unsupported`] when the driver lacks the call (before CUDA 12.0); a driver
/// error otherwise.
///
/// # Safety
///
/// 1. `f` comes from [`module_function`] in the current context.
pub(crate) unsafe fn max_active_clusters(
    f: sys::CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    cluster: [u32; 3],
) -> Result<u32> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    if !exported(&PRESENT, b"cuOccupancyMaxActiveClusters") {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "the CUDA driver has no cuOccupancyMaxActiveClusters (CUDA 12.0 and newer drivers \
             launch thread-block clusters)",
        ));
    }
    let mut attr = launch_attribute(LaunchAttrs::Cluster(cluster));
    let config = launch_config(
        grid,
        block,
        shared_mem_bytes,
        std::ptr::null_mut(),
        attr.as_mut(),
    );
    let mut n: std::ffi::c_int = 0;
    // SAFETY: the caller's contract; `config` and its one attribute outlive the call; out-
    // pointer to a local.
    let r = unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, f, &config) };
    check(r, "cuOccupancyMaxActiveClusters").map(|()| n.max(0) as u32)
}

/// `cuLaunchKernel`.
///
/// # Safety
///
/// `f` is a function of a module loaded in the current context; `params` holds one pointer
/// per kernel parameter, each at a value of that parameter's size and layout, valid for the
/// call; the memory the parameters describe stays valid until the kernel has completed.
#[inline]
pub(crate) unsafe fn launch_kernel(
    f: sys::CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    s: sys::CUstream,
    params: &mut [*mut c_void],
) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        cu::launch_kernel(
            f,
            (grid[0], grid[1], grid[2]),
            (block[0], block[1], block[2]),
            shared_mem_bytes,
            s,
            params,
        )
    }
    .named("cuLaunchKernel")
}

/// A launch with attributes: `cuLaunchKernel` for [`LaunchAttrs::Plain`], else
/// `cuLaunchKernelEx` with the attribute — or, for a cooperative launch on a driver without
/// `cuLaunchKernelEx`, `cuLaunchCooperativeKernel`.
///
/// # Errors
///
/// [`ErrorKind::Unsupported`] for a cluster launch on a driver without `cuLaunchKernelEx`; the
/// driver's error otherwise (a cooperative grid too large to be resident:
/// `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE`).
///
/// # Safety
///
/// 1. `f` is a function of a module loaded in the current context;
/// 2. `params` holds one pointer per kernel parameter, each at a value of that parameter's
///    size and layout, valid for the call;
/// 3. the memory the parameters describe stays valid until the kernel has completed.
#[inline]
pub(crate) unsafe fn launch_kernel_with(
    f: sys::CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    s: sys::CUstream,
    params: &mut [*mut c_void],
    attrs: LaunchAttrs,
) -> Result<()> {
    let Some(mut attr) = launch_attribute(attrs) else {
        // SAFETY: the caller's contract.
        return unsafe { launch_kernel(f, grid, block, shared_mem_bytes, s, params) };
    };
    if !launch_kernel_ex_present() {
        if attrs != LaunchAttrs::Cooperative {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the CUDA driver has no cuLaunchKernelEx (CUDA 11.8 and newer drivers launch \
                 thread-block clusters)",
            ));
        }
        // SAFETY: the caller's contract; one pointer per kernel parameter.
        let r = unsafe {
            sys::cuLaunchCooperativeKernel(
                f,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_mem_bytes,
                s,
                params.as_mut_ptr(),
            )
        };
        return check(r, "cuLaunchCooperativeKernel");
    }
    let config = launch_config(grid, block, shared_mem_bytes, s, Some(&mut attr));
    // SAFETY: the caller's contract; `config` and its one attribute outlive the call; one
    // pointer per kernel parameter, no `extra` options.
    let r = unsafe { sys::cuLaunchKernelEx(&config, f, params.as_mut_ptr(), std::ptr::null_mut()) };
    check(r, "cuLaunchKernelEx")
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

/// `cuTensorMapEncodeTiled`: the 128-byte TMA descriptor of a tiled tensor into `out` (a
/// `CUtensorMap`). Dimensions, strides and box are innermost first, as the driver takes them;
/// `strides` has `dims.len() - 1` entries (bytes, for dimensions 1..).
#[allow(clippy::too_many_arguments)]
pub(crate) fn tensor_map_encode_tiled(
    out: &mut sys::CUtensorMap,
    dtype: sys::CUtensorMapDataType,
    address: u64,
    dims: &[u64],
    strides: &[u64],
    box_dims: &[u32],
    swizzle: sys::CUtensorMapSwizzle,
) -> Result<()> {
    let rank = dims.len();
    if rank == 0 || strides.len() + 1 != rank || box_dims.len() != rank {
        return Err(Error::value(
            "a tensor map needs matching dimensions, strides and box",
        ));
    }
    let element_strides = [1u32; 5];
    // SAFETY: every pointer points at `rank` (strides: `rank - 1`) readable values, `out` at a
    // writable `CUtensorMap`; the driver only encodes (no memory access at `address`).
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            out,
            dtype,
            rank as u32,
            address as usize as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            box_dims.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        e => Err(cuda_error(e, "cuTensorMapEncodeTiled")),
    }
}
