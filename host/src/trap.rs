//! Where a kernel trapped: the host half of `ferrocuda_abi::diag`'s trap record.
//!
//! When a module that defines the trap-record symbol is loaded, [`register`] allocates one
//! zeroed, page-locked, device-mapped [`TrapRecord`] and stores its device address in the
//! symbol. A failed check on the device fills the record before it traps; the context is dead
//! afterwards, but the record is host memory, so [`describe`] can still read it. The driver's
//! error text for a sticky error (`driver::cuda_error`) appends it: the file, line and column
//! of the failed check and the indices of the thread.
//!
//! Records are never freed (256 bytes per loaded module and device; a module is loaded once
//! per device and lives as long as the process).

use crate::driver::check;
use crate::error::Result;
use cudarc::driver::sys;
use ferrocuda_abi::diag::{TrapRecord, TRAP_RECORD_SYMBOL};
use std::sync::Mutex;

/// A registered record: the device it belongs to and its host address.
struct Registered {
    device: usize,
    record: *const TrapRecord,
}

// SAFETY: the pointer is to page-locked host memory that is never freed; it is only read
// (volatile) by the host.
unsafe impl Send for Registered {}

static RECORDS: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

/// Gives a freshly loaded module its trap record, if it has the symbol (the current context
/// must be `device`'s). A module without the symbol is left alone.
pub(crate) fn register(device: usize, module: sys::CUmodule) -> Result<()> {
    let name = std::ffi::CString::new(TRAP_RECORD_SYMBOL).expect("no NUL in the symbol");
    let (mut dptr, mut size): (sys::CUdeviceptr, usize) = (0, 0);
    // SAFETY: a loaded module; NUL-terminated name; out-pointers to locals.
    let found = unsafe { sys::cuModuleGetGlobal_v2(&mut dptr, &mut size, module, name.as_ptr()) };
    if found != sys::CUresult::CUDA_SUCCESS || size != 8 {
        return Ok(());
    }
    let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
    let bytes = std::mem::size_of::<TrapRecord>();
    // SAFETY: out-pointer to a local; a mapped, page-locked allocation of one record.
    check(
        unsafe { sys::cuMemHostAlloc(&mut host, bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP) },
        "cuMemHostAlloc",
    )?;
    // SAFETY: `host` is a fresh allocation of `bytes` bytes.
    unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, bytes) };
    let mut mapped: sys::CUdeviceptr = 0;
    // SAFETY: `host` was allocated with DEVICEMAP in the current context.
    check(
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut mapped, host, 0) },
        "cuMemHostGetDevicePointer",
    )?;
    // SAFETY: the symbol is 8 bytes of device memory; the source is a local u64.
    check(
        unsafe { sys::cuMemcpyHtoD_v2(dptr, (&raw const mapped).cast(), 8) },
        "cuMemcpyHtoD",
    )?;
    let mut all = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    all.push(Registered {
        device,
        record: host.cast(),
    });
    Ok(())
}

/// The first written trap record of `device` as `file:line:column, block (…), thread (…)`.
pub fn describe(device: usize) -> Option<String> {
    let all = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    all.iter().filter(|r| r.device == device).find_map(|r| {
        // SAFETY: a registered record is valid for reads for the life of the process; the
        // device wrote it with `state` last, behind a system-scope fence.
        let rec = unsafe { std::ptr::read_volatile(r.record) };
        rec.describe()
    })
}
