//! Where a kernel trapped: the host half of `ferrocuda_abi::diag`'s trap record.
//!
//! When a module that defines the trap-record symbol is loaded, the module layer allocates
//! one zeroed, page-locked, device-mapped [`TrapRecord`], stores its device address in the
//! symbol and `remember`s it here. A failed check on the device fills the record before it
//! traps; the context is dead afterwards, but the record is host memory, so [`describe`] can
//! still read it. The driver's error text for a sticky error appends it: the file, line and
//! column of the failed check and the indices of the thread.
//!
//! [`last_trap`] returns the same as a [`Trap`] for code that saw the failure elsewhere:
//! when another library's synchronization (`torch.cuda.synchronize()`, CuPy's) is the first
//! call to report the sticky error, the record still says where a ferrocuda kernel stopped.
//!
//! Records are never freed (256 bytes per loaded module and device; a module is loaded once
//! per device and lives as long as the process). This module makes no driver call.

use ferrocuda_abi::diag::TrapRecord;
use std::fmt;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

/// The words that introduce a trap record in an error message (`…; a device check failed at
/// src/diag.rs:36:22, block (2, 0, 0), thread (5, 0, 0)`).
pub const TRAP_NOTE: &str = "a device check failed at";

/// Where a ferrocuda kernel stopped: a written trap record, read back on the host.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Trap {
    /// The device (ordinal) whose kernel failed the check.
    pub device: usize,
    /// The most recent kernel ferrocuda launched on that device (the record does not name
    /// the kernel: the device does not know its entry's name), if any.
    pub kernel: Option<&'static str>,
    /// The source path of the failed check, as the compiler recorded it (its end only, with
    /// `truncated` set, when it was longer than the record holds).
    pub file: String,
    /// Whether `file` is only the end of the path.
    pub truncated: bool,
    /// Source line (1-based).
    pub line: u32,
    /// Source column (1-based).
    pub column: u32,
    /// `blockIdx` of the thread that failed the check.
    pub block: [u32; 3],
    /// `threadIdx` of the thread that failed the check.
    pub thread: [u32; 3],
}

impl Trap {
    fn from_record(device: usize, rec: &TrapRecord) -> Option<Trap> {
        rec.is_written().then(|| Trap {
            device,
            kernel: last_kernel(device),
            file: String::from_utf8_lossy(rec.file_bytes()).into_owned(),
            truncated: rec.flags & TrapRecord::TRUNCATED != 0,
            line: rec.line,
            column: rec.column,
            block: rec.block,
            thread: rec.thread,
        })
    }
}

/// `` `kernel` at file:line:column, block (x, y, z), thread (x, y, z) (device N)``.
impl fmt::Display for Trap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(k) = self.kernel {
            write!(f, "`{k}` at ")?;
        }
        let cut = if self.truncated { "…" } else { "" };
        let ([bx, by, bz], [tx, ty, tz]) = (self.block, self.thread);
        write!(
            f,
            "{cut}{}:{}:{}, block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz}) (device {})",
            self.file, self.line, self.column, self.device
        )
    }
}

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

/// The failed device check recorded by a ferrocuda kernel on `device` (any device: `None`),
/// if one is: the file, line and column of the check, the failing thread, and the kernel
/// ferrocuda launched last on the device. Reads host memory only (no driver call), so it
/// works after the CUDA context died — whichever library reported the error.
///
/// A record is written at most once per module and context; the first failure of a
/// process is the one reported (the context is unusable after it anyway).
pub fn last_trap(device: Option<usize>) -> Option<Trap> {
    let all = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    all.iter()
        .filter(|r| device.is_none_or(|d| r.device == d))
        .find_map(|r| {
            // SAFETY: as in `describe`.
            let rec = unsafe { std::ptr::read_volatile(r.record) };
            Trap::from_record(r.device, &rec)
        })
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

/// Most devices ferrocuda addresses in one process.
pub const MAX_DEVICES: usize = 64;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A written record registered for a device no test launches on (the registry is
    /// process-wide) is read back field by field.
    #[test]
    fn a_written_record_is_read_back() {
        const DEVICE: usize = crate::driver::MAX_DEVICES - 1;
        assert_eq!(last_trap(Some(DEVICE)), None);
        let mut rec = Box::new(TrapRecord::new());
        let file = b"kernels/src/rows.rs";
        rec.file[..file.len()].copy_from_slice(file);
        rec.file_len = file.len() as u32;
        (rec.line, rec.column) = (41, 17);
        (rec.block, rec.thread) = ([3, 1, 0], [31, 2, 1]);
        let rec: *mut TrapRecord = Box::into_raw(rec);
        // SAFETY: leaked (never freed), aligned, and not written again...
        unsafe { remember(DEVICE, rec) };
        // ...until `state` says it is complete: before that, nothing is reported.
        assert_eq!(last_trap(Some(DEVICE)), None);
        assert_eq!(describe(DEVICE), None);
        // SAFETY: the leaked record, valid for writes; the device's last store, simulated.
        unsafe { std::ptr::write_volatile(&raw mut (*rec).state, TrapRecord::WRITTEN) };
        let got = last_trap(Some(DEVICE)).expect("a written record");
        assert_eq!(
            got,
            Trap {
                device: DEVICE,
                kernel: None,
                file: "kernels/src/rows.rs".into(),
                truncated: false,
                line: 41,
                column: 17,
                block: [3, 1, 0],
                thread: [31, 2, 1],
            }
        );
        assert_eq!(
            got.to_string(),
            format!(
                "kernels/src/rows.rs:41:17, block (3, 1, 0), thread (31, 2, 1) (device {DEVICE})"
            )
        );
        assert_eq!(last_trap(Some(DEVICE - 1)), None);
        assert!(last_trap(None).is_some());
    }
}
