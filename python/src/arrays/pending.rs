//! DLPack capsules that must outlive a kernel: held with a fence on the launch stream, and
//! released once the kernel has completed ([`release_completed`], polled at every launch and
//! by `ferrocuda.synchronize`). The poll (`cuEventQuery`) runs in the relaxed capture mode
//! (the host crate's `Fence::is_complete`), so that a graph capture in progress anywhere in the
//! process is not invalidated by it; fences are never recorded on capturing streams (captured
//! launches release their capsules at once).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ferrocuda_host::interop::dlpack::ManagedTensor;
use ferrocuda_host::runtime::{self, Fence};
use ferrocuda_host::StreamRef;
use pyo3::prelude::*;

use crate::errors::IntoPyResult;

type Pending = (Fence, Vec<ManagedTensor>);

static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());
static PENDING_LEN: AtomicUsize = AtomicUsize::new(0);

/// Releases the DLPack capsules whose kernels have completed (a no-op, one atomic load, when
/// none is pending). Called at every launch and by `ferrocuda.synchronize`.
pub fn release_completed(_py: Python<'_>) {
    if PENDING_LEN.load(Ordering::Acquire) == 0 {
        return;
    }
    let done: Vec<Pending> = {
        let mut q = PENDING.lock().unwrap_or_else(|p| p.into_inner());
        let mut done = Vec::new();
        let mut i = 0;
        while i < q.len() {
            // A failed query (broken context) releases too: the kernel will not run.
            if q[i].0.is_complete().unwrap_or(true) {
                done.push(q.swap_remove(i));
            } else {
                i += 1;
            }
        }
        PENDING_LEN.store(q.len(), Ordering::Release);
        done
    };
    // Deleters run outside the lock (they may call back into Python), with the GIL held.
    drop(done);
}

/// Holds `owners` until the work now enqueued on `stream` of `device` (a kernel that uses
/// their memory) has completed; if no fence can be recorded, waits for it and releases them.
pub fn defer(
    py: Python<'_>,
    device: usize,
    stream: StreamRef,
    owners: Vec<ManagedTensor>,
) -> PyResult<()> {
    match py.detach(|| Fence::record(device, stream)) {
        Ok(f) => {
            let mut q = PENDING.lock().unwrap_or_else(|p| p.into_inner());
            q.push((f, owners));
            PENDING_LEN.store(q.len(), Ordering::Release);
            Ok(())
        }
        Err(e) => {
            // Cannot fence: wait for the kernel instead, then release.
            let r = py.detach(|| runtime::synchronize(device, stream));
            drop(owners);
            r.map_err(|_| e).py_err(py)
        }
    }
}

/// Number of DLPack capsules still held for kernels that may be running.
pub fn pending(py: Python<'_>) -> usize {
    release_completed(py);
    PENDING_LEN.load(Ordering::Acquire)
}
