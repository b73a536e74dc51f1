//! Where a kernel stopped: the trap record, shared by the device (which writes it) and the
//! host (which reads it after a failed launch).
//!
//! A failed check on the device (an out-of-bounds index, a `panic!`, an `assert!` or
//! `device_assert!`) ends the kernel with a PTX `trap`. The context is unusable afterwards —
//! no device memory can be read — but **host memory mapped into the device's address space
//! stays readable by the host**. So a module carries one pointer-sized global,
//! [`TRAP_RECORD_SYMBOL`], and the contract is:
//!
//! 1. **Host, after loading a module**: if the module defines the symbol
//!    (`cuModuleGetGlobal(…, "__ferrocuda_trap_record")`, 8 bytes), allocate one
//!    [`TrapRecord`] of zeroed, page-locked, device-mapped host memory
//!    (`cuMemHostAlloc(…, CU_MEMHOSTALLOC_DEVICEMAP)`), and copy its device address
//!    (`cuMemHostGetDevicePointer`) into the symbol (`cuMemcpyHtoD`, 8 bytes). A module whose
//!    symbol stays 0 still traps, without a record.
//! 2. **Device, on a failed check**: the first thread of the context to fail (elected by an
//!    atomic on device memory, so the record is never torn) fills every field but `state`,
//!    issues a system-scope fence, sets `state` to [`TrapRecord::WRITTEN`], fences again and
//!    traps. Other failing threads trap without writing.
//! 3. **Host, when a launch or synchronization reports `CUDA_ERROR_ILLEGAL_INSTRUCTION`,
//!    `CUDA_ERROR_LAUNCH_FAILED` or `CUDA_ERROR_ASSERT`**: read `state` (volatile); if it is
//!    [`TrapRecord::WRITTEN`], the other fields are complete — report
//!    [`TrapRecord::describe`]. The record belongs to the context: it is written at most once
//!    per context (the context is dead after the first trap anyway).
//!
//! The record does not name the kernel (the device does not know its entry's name); the
//! host names the last kernel it launched on the device.

/// The symbol of the module global that holds the device address of the [`TrapRecord`]
/// (a `.global .u64`, 0 until the host sets it).
pub const TRAP_RECORD_SYMBOL: &str = "__ferrocuda_trap_record";

/// Bytes of the source path a [`TrapRecord`] keeps (the path's end, when it is longer).
pub const TRAP_FILE_CAP: usize = 208;

/// What a kernel writes before it traps: where, and which thread. 256 bytes, `#[repr(C)]`,
/// little-endian fields as the GPU writes them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrapRecord {
    /// 0 while nothing is written; [`TrapRecord::WRITTEN`] once every other field is.
    pub state: u32,
    /// Source line (1-based).
    pub line: u32,
    /// Source column (1-based).
    pub column: u32,
    /// Bytes of `file` used.
    pub file_len: u32,
    /// `blockIdx` of the thread that wrote the record.
    pub block: [u32; 3],
    /// `threadIdx` of the thread that wrote the record.
    pub thread: [u32; 3],
    /// Bit 0: `file` holds only the path's last [`TRAP_FILE_CAP`] bytes.
    pub flags: u32,
    /// Reserved (0).
    pub reserved: u32,
    /// The source path as the compiler recorded it (UTF-8).
    pub file: [u8; TRAP_FILE_CAP],
}

const _: () = assert!(core::mem::size_of::<TrapRecord>() == 256);

impl TrapRecord {
    /// The value of `state` once the record is complete.
    pub const WRITTEN: u32 = 1;
    /// `flags` bit: the path was cut to its end.
    pub const TRUNCATED: u32 = 1;

    /// An empty record (`state` 0).
    pub const fn new() -> Self {
        TrapRecord {
            state: 0,
            line: 0,
            column: 0,
            file_len: 0,
            block: [0; 3],
            thread: [0; 3],
            flags: 0,
            reserved: 0,
            file: [0; TRAP_FILE_CAP],
        }
    }

    /// Whether the record is complete.
    pub fn is_written(&self) -> bool {
        self.state == Self::WRITTEN
    }

    /// The source path (lossy UTF-8 is the caller's business: these are the raw bytes).
    pub fn file_bytes(&self) -> &[u8] {
        &self.file[..(self.file_len as usize).min(TRAP_FILE_CAP)]
    }
}

impl Default for TrapRecord {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "std")]
impl TrapRecord {
    /// `file:line:column, block (x, y, z), thread (x, y, z)` — `None` if not written.
    pub fn describe(&self) -> Option<std::string::String> {
        if !self.is_written() {
            return None;
        }
        let file = std::string::String::from_utf8_lossy(self.file_bytes());
        let cut = if self.flags & Self::TRUNCATED != 0 {
            "…"
        } else {
            ""
        };
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        Some(std::format!(
            "{cut}{file}:{}:{}, block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz})",
            self.line,
            self.column
        ))
    }
}

#[cfg(target_arch = "nvptx64")]
pub use device::trap_at;

#[cfg(target_arch = "nvptx64")]
mod device {
    use super::{TrapRecord, TRAP_FILE_CAP};
    use core::arch::nvptx;
    use core::panic::Location;
    use core::ptr::{addr_of_mut, null_mut, write_volatile};
    use core::sync::atomic::{fence, AtomicU32, Ordering};

    /// The device address of the host's [`TrapRecord`] (0: none registered).
    #[export_name = "__ferrocuda_trap_record"]
    static mut TRAP_RECORD: *mut TrapRecord = null_mut();

    /// Which thread writes the record: the first to turn it from 0 to 1.
    static CLAIM: AtomicU32 = AtomicU32::new(0);

    /// Records `location` and this thread's indices in the host's [`TrapRecord`] (first
    /// failing thread of the context only), then traps.
    ///
    /// Inlined into every failed-check path (see the module docs for why).
    #[inline(always)]
    pub fn trap_at(location: &Location<'_>) -> ! {
        // SAFETY: a plain read of a pointer the host sets before any launch.
        let rec = unsafe { core::ptr::read_volatile(addr_of_mut!(TRAP_RECORD)) };
        if cfg!(feature = "trap-locations")
            && !rec.is_null()
            && CLAIM
                .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // SAFETY: `rec` is the host's mapped record (the host's contract), written by this
            // thread only (the claim above); volatile stores reach host memory in order with
            // the fences. Mapped host memory is in the global window, so the stores are
            // `st.volatile.global` rather than generic.
            unsafe { write_record(crate::space::global(rec), location) };
        }
        // SAFETY: `trap` has no preconditions.
        unsafe { nvptx::trap() }
    }

    /// # Safety
    ///
    /// `rec` is valid for writes of a `TrapRecord` and no other thread writes it.
    #[inline(always)]
    unsafe fn write_record(rec: *mut TrapRecord, location: &Location<'_>) {
        let file = location.file().as_bytes();
        let (skip, flags) = match file.len().checked_sub(TRAP_FILE_CAP) {
            Some(s) if s > 0 => (s, TrapRecord::TRUNCATED),
            _ => (0, 0),
        };
        let kept = &file[skip..];
        // SAFETY: the caller's contract (for all the stores below); every field is in bounds.
        unsafe {
            let r = &raw mut *rec;
            write_volatile(&raw mut (*r).line, location.line());
            write_volatile(&raw mut (*r).column, location.column());
            write_volatile(&raw mut (*r).file_len, kept.len() as u32);
            let (b, t) = (
                [
                    nvptx::_block_idx_x(),
                    nvptx::_block_idx_y(),
                    nvptx::_block_idx_z(),
                ],
                [
                    nvptx::_thread_idx_x(),
                    nvptx::_thread_idx_y(),
                    nvptx::_thread_idx_z(),
                ],
            );
            for k in 0..3 {
                write_volatile(&raw mut (*r).block[k], b[k]);
                write_volatile(&raw mut (*r).thread[k], t[k]);
            }
            write_volatile(&raw mut (*r).flags, flags);
            let dst = (&raw mut (*r).file).cast::<u8>();
            for (k, &byte) in kept.iter().enumerate() {
                write_volatile(dst.add(k), byte);
            }
            fence(Ordering::SeqCst);
            write_volatile(&raw mut (*r).state, TrapRecord::WRITTEN);
            fence(Ordering::SeqCst);
        }
    }
}
