//! Another library's memory: [`ForeignArray`] and the import-time synchronization rule,
//! [`import`] — Numba's `as_cuda_array` / `from_cuda_array_interface`.

use crate::driver::{self, Context};
use crate::error::Result;
use crate::interop::cai::ArrayDesc;
use crate::launch::{default_sync_mode, Arg};
use crate::stream::{Capture, SyncMode};

/// Imports an array interface the way Numba's `from_cuda_array_interface(desc, owner, sync)`
/// does — the one import rule of both the Rust and the Python API:
///
/// * with `sync` and a producer stream in the interface, the stream is kept as the array's
///   stream (launches order themselves against it), and when the process sync mode
///   ([`default_sync_mode`], `FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC`) is
///   [`SyncMode::Default`] it is host-synchronized now — Numba's
///   `sync and NUMBA_CUDA_ARRAY_INTERFACE_SYNC`. In the `event` and `off` modes there is no
///   host synchronization: launches order the stream (or not) as those modes say.
/// * without `sync` the stream is dropped: launches do no ordering for this array.
///
/// The synchronization happens in the primary context of the device that holds the memory
/// (device 0 for an empty array). It is skipped while the stream is capturing a CUDA graph
/// (or is unusable because of one): nothing enqueued there has run, a host synchronization
/// of it would invalidate the capture, and launches order the array by the capture rules
/// ([`stream::capture`](crate::stream::capture)).
pub fn import(desc: ArrayDesc, sync: bool) -> Result<ArrayDesc> {
    if !sync {
        return Ok(desc.with_stream(None));
    }
    let Some(s) = desc.stream() else {
        return Ok(desc);
    };
    if default_sync_mode()? != SyncMode::Default {
        return Ok(desc);
    }
    let device = if desc.is_empty() {
        0
    } else {
        driver::device_of(desc.ptr())?.unwrap_or(0)
    };
    let _caller = Context::get(device)?.enter()?;
    if driver::capture_state(s)? == Capture::None {
        driver::synchronize(s)?;
    }
    Ok(desc)
}

/// Another library's device array: a validated interface plus the owner that keeps the
/// memory alive (Numba's `as_cuda_array` / `from_cuda_array_interface`).
#[derive(Debug)]
pub struct ForeignArray<O> {
    desc: ArrayDesc,
    owner: O,
}

impl<O> ForeignArray<O> {
    /// Wraps an interface and its owner, synchronizing by the import rule (see [`import`]).
    pub fn new(desc: ArrayDesc, owner: O, sync: bool) -> Result<Self> {
        Ok(ForeignArray {
            desc: import(desc, sync)?,
            owner,
        })
    }

    /// The interface.
    pub fn desc(&self) -> &ArrayDesc {
        &self.desc
    }

    /// The owner.
    pub fn owner(&self) -> &O {
        &self.owner
    }

    /// As a kernel argument.
    pub fn arg(&self) -> Arg<'_> {
        Arg::Array(&self.desc)
    }
}
