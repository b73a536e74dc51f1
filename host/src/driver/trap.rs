//! Where a kernel trapped: the host half of `ferrocuda_abi::diag`'s trap record.
//!
//! When a module that defines the trap-record symbol is loaded, the module layer allocates
//! one zeroed, page-locked, device-mapped [`TrapRecord`], stores its device address in the
//! symbol and `remember`s it here. A failed check on the device fills the record before it
//! traps; the context is dead afterwards, but the record is host memory, so [`describe`] can
//! still read it. The driver's error text for a sticky error appends it: the file, line and
//! column of the failed check and the indices of the thread.
//!
//! Records are never freed (256 bytes per loaded module and device; a module is loaded once
//! per device and lives as long as the process). This module makes no driver call.

use ferrocuda_abi::diag::TrapRecord;
use std::sync::Mutex;

/// A registered record: the device it belongs to and its host address.
struct Registered {
    device: usize,
    record: *const TrapRecord,
}

// SAFETY: the pointer is to page-locked host memory that is never freed; the host only reads
// it (volatile).
unsafe impl Send for Registered {}

static RECORDS: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

/// Registers `record`, a zeroed trap record of `device` that lives as long as the process.
///
/// # Safety
///
/// `record` points to page-locked host memory of at least `size_of::<TrapRecord>()` bytes,
/// aligned for it, that is never freed or written by the host.
pub(crate) unsafe fn remember(device: usize, record: *const TrapRecord) {
    let mut all = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    all.push(Registered { device, record });
}

/// The first written trap record of `device` as `file:line:column, block (…), thread (…)`.
pub fn describe(device: usize) -> Option<String> {
    let all = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    all.iter().filter(|r| r.device == device).find_map(|r| {
        // SAFETY: a registered record is valid for reads for the life of the process
        // (`remember`'s contract); the device writes it with `state` last, behind a
        // system-scope fence.
        let rec = unsafe { std::ptr::read_volatile(r.record) };
        rec.describe()
    })
}
