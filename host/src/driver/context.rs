//! Primary contexts: one per device, retained once for the life of the process, each with a
//! pool of events.

use super::result::{self as cu, MAX_DEVICES};
use crate::error::{Error, Result};
use cudarc::driver::sys;
use std::sync::{Mutex, OnceLock};

/// A device's primary context, retained for the life of the process.
#[derive(Debug)]
pub struct Context {
    ordinal: usize,
    raw: sys::CUcontext,
    sm_count: u32,
    compute_capability: (u32, u32),
    events: Mutex<Vec<sys::CUevent>>,
    /// Whether the device supports stream-ordered memory pools.
    pools_supported: bool,
    /// The pool of launcher-managed workspaces (created at the first use).
    scratch_pool: OnceLock<std::result::Result<Pool, Error>>,
}

/// A memory pool handle, created once per context and never destroyed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pool(pub(crate) sys::CUmemoryPool);

// SAFETY: a CUmemoryPool handle may be used from any thread (the driver API is thread-safe).
unsafe impl Send for Pool {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Pool {}

/// Bytes the workspace pool keeps reserved across synchronizations (its release threshold).
pub const SCRATCH_POOL_KEEP: u64 = 64 << 20;

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
        let count = cu::device_count()?;
        if ordinal >= count {
            return Err(Error::value(format!(
                "device {ordinal} does not exist ({count} CUDA device(s) present)"
            )));
        }
        let dev = cu::device(ordinal)?;
        use sys::CUdevice_attribute::*;
        // SAFETY: `dev` comes from `cu::device`.
        let (raw, sms, major, minor, pools) = unsafe {
            (
                cu::primary_context_retain(dev)?,
                cu::device_attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
                cu::device_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                cu::device_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
                // A driver too old to know the attribute has no pools either.
                cu::device_attribute(dev, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED).unwrap_or(0),
            )
        };
        Ok(Context {
            ordinal,
            raw,
            sm_count: sms.max(1) as u32,
            compute_capability: (major as u32, minor as u32),
            events: Mutex::new(Vec::new()),
            pools_supported: pools != 0,
            scratch_pool: OnceLock::new(),
        })
    }

    /// The stream-ordered memory pool of launcher-managed workspaces (`Scratch` parameters),
    /// created at the first call with a release threshold of [`SCRATCH_POOL_KEEP`] bytes.
    /// A pool of its own, so that neither the device's default pool (which other libraries
    /// share) nor its release threshold is touched.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) when the device has no
    /// memory-pool support (`CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED` is 0); a driver error
    /// if creating the pool fails.
    pub(crate) fn scratch_pool(&self) -> Result<Pool> {
        if !self.pools_supported {
            return Err(Error::new(
                crate::ErrorKind::Unsupported,
                format!(
                    "device {} does not support stream-ordered memory pools \
                     (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0), which kernels with \
                     Scratch workspaces need",
                    self.ordinal
                ),
            ));
        }
        self.scratch_pool
            .get_or_init(|| {
                self.bind()?;
                cu::mem_pool_create(self.ordinal, SCRATCH_POOL_KEEP).map(Pool)
            })
            .clone()
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
        if cu::current_context()? != self.raw {
            // SAFETY: `raw` is a retained primary context.
            unsafe { cu::set_current_context(self.raw) }?;
        }
        Ok(())
    }

    /// An event from the pool (created with `CU_EVENT_DISABLE_TIMING`). The context must be
    /// bound.
    pub(crate) fn take_event(&self) -> Result<sys::CUevent> {
        if let Some(e) = self.events.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(e);
        }
        cu::event_create()
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
