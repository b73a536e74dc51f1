//! Primary contexts: one per device, retained once for the life of the process, each with a
//! pool of events.

use super::capture::Relaxed;
use super::result::{self as cu, init, MAX_DEVICES};
use crate::error::{Error, Result};
use cudarc::driver::sys;
use std::sync::{Mutex, OnceLock};

/// What a device allows one launch: read once, when its context is retained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Largest block extent along x, y, z (`CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X/Y/Z`).
    pub max_block: [u32; 3],
    /// Largest grid extent along x, y, z (`CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X/Y/Z`).
    pub max_grid: [u32; 3],
    /// Most threads in a block (`CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK`).
    pub max_threads: u32,
    /// Shared memory (static plus dynamic) a block may use after the kernel opts in, in bytes
    /// (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`; 227 KiB on compute capability
    /// 9.0).
    pub shared_optin: u32,
}

impl DeviceLimits {
    /// The limits of every GPU ferrocuda supports (sm_80 and newer), with `shared_optin`
    /// bytes of opt-in shared memory: for tests and documentation.
    pub const fn sm80_family(shared_optin: u32) -> DeviceLimits {
        DeviceLimits {
            max_block: [1024, 1024, 64],
            max_grid: [i32::MAX as u32, 65535, 65535],
            max_threads: 1024,
            shared_optin,
        }
    }
}

/// A device's primary context, retained for the life of the process.
#[derive(Debug)]
pub struct Context {
    ordinal: usize,
    raw: sys::CUcontext,
    sm_count: u32,
    compute_capability: (u32, u32),
    limits: DeviceLimits,
    /// Whether the device runs cooperative launches (`CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`).
    cooperative_launch: bool,
    /// Whether the device runs thread-block clusters (`CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH`).
    cluster_launch: bool,
    events: Mutex<Vec<sys::CUevent>>,
    /// Whether the device supports stream-ordered memory pools.
    pools_supported: bool,
    /// The pool of launcher-managed workspaces (created at the first use).
    scratch_pool: OnceLock<std::result::Result<Pool, Error>>,
    /// Workspaces kept per stream (by the driver's stream id) between launches outside graph
    /// capture: at most [`KEPT_WORKSPACES`], each leaked once (the context and its pool live
    /// for the process).
    kept: Mutex<Vec<(u64, &'static Mutex<KeptWorkspace>)>>,
}

/// Most streams whose launches keep a workspace between launches; launches on further streams
/// allocate and free theirs each time.
pub(crate) const KEPT_WORKSPACES: usize = 16;

/// A workspace kept for one stream: `bytes` bytes at `ptr` from the context's scratch pool
/// (`ptr` 0: none yet). Only work enqueued on that stream uses it, so stream order separates
/// its launches; the lock is held from its zero-fill through the launch's enqueue, so that
/// two host threads launching on the same stream cannot interleave the two.
///
/// `owner` is the persistent kernel ([`Signature::persist`](crate::module::Signature)) whose
/// state the workspace holds — all `bytes` zero-filled before its first launch here and
/// touched by no other launch since — and `launches` its launches since that fill; `owner` 0:
/// none (the next persistent launch fills).
#[derive(Debug)]
pub(crate) struct KeptWorkspace {
    pub(crate) ptr: u64,
    pub(crate) bytes: usize,
    pub(crate) owner: u64,
    pub(crate) launches: u32,
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
        // Once per device, possibly while another library captures a graph (see the capture
        // module): made in the relaxed capture mode.
        let _relaxed = Relaxed::enter()?;
        if ordinal >= count {
            return Err(Error::value(format!(
                "device {ordinal} does not exist ({count} CUDA device(s) present)"
            )));
        }
        let dev = cu::device(ordinal)?;
        use sys::CUdevice_attribute::*;
        // SAFETY: `dev` comes from `cu::device`.
        let (raw, sms, major, minor, pools, cooperative, clusters) = unsafe {
            (
                cu::primary_context_retain(dev)?,
                cu::device_attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
                cu::device_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                cu::device_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
                // A driver too old to know the attribute has no pools either.
                cu::device_attribute(dev, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED).unwrap_or(0),
                cu::device_attribute(dev, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH).unwrap_or(0),
                // Likewise for clusters (CUDA 11.8 and newer drivers know the attribute).
                cu::device_attribute(dev, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH).unwrap_or(0),
            )
        };
        // SAFETY: `dev` comes from `cu::device`.
        let limits = unsafe { read_limits(dev) }?;
        Ok(Context {
            ordinal,
            raw,
            sm_count: sms.max(1) as u32,
            compute_capability: (major as u32, minor as u32),
            limits,
            cooperative_launch: cooperative != 0,
            cluster_launch: clusters != 0,
            events: Mutex::new(Vec::new()),
            pools_supported: pools != 0,
            scratch_pool: OnceLock::new(),
            kept: Mutex::new(Vec::new()),
        })
    }

    /// What the device allows one launch.
    pub fn limits(&self) -> &DeviceLimits {
        &self.limits
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
                let _caller = self.enter()?;
                let _relaxed = Relaxed::enter()?;
                cu::mem_pool_create(self.ordinal, SCRATCH_POOL_KEEP).map(Pool)
            })
            .clone()
    }

    /// The workspace kept for the stream with driver id `stream_id`, created empty at its
    /// first use; `None` once [`KEPT_WORKSPACES`] streams have one.
    pub(crate) fn kept_workspace(&self, stream_id: u64) -> Option<&'static Mutex<KeptWorkspace>> {
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&(_, w)) = kept.iter().find(|(id, _)| *id == stream_id) {
            return Some(w);
        }
        if kept.len() >= KEPT_WORKSPACES {
            return None;
        }
        let w: &'static Mutex<KeptWorkspace> = Box::leak(Box::new(Mutex::new(KeptWorkspace {
            ptr: 0,
            bytes: 0,
            owner: 0,
            launches: 0,
        })));
        kept.push((stream_id, w));
        Some(w)
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// Whether the device runs cooperative launches (every sm_80 and newer GPU does;
    /// `CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`).
    pub fn cooperative_launch(&self) -> bool {
        self.cooperative_launch
    }

    /// Whether the device runs thread-block clusters (sm_90 and newer;
    /// `CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH`).
    pub fn cluster_launch(&self) -> bool {
        self.cluster_launch
    }

    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.compute_capability
    }

    /// The raw `CUcontext` (cudarc's type).
    pub fn raw(&self) -> sys::CUcontext {
        self.raw
    }

    /// Makes this context current on the calling thread for a scope: the caller's current
    /// context comes back when the returned guard is dropped (see [`CallerContext`]). What
    /// every public operation that needs a device's context uses, so that it leaves the
    /// caller's current device as it found it.
    #[inline]
    pub fn enter(&self) -> Result<CallerContext> {
        let caller = CallerContext::save();
        self.bind()?;
        Ok(caller)
    }

    /// Makes this context current on the calling thread (a no-op when it already is), and
    /// leaves it current: [`Kernel::prepare`](crate::Kernel::prepare) binds the launch's
    /// context for [`Prepared::execute`](crate::Prepared::execute) this way.
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

/// The calling thread's current context, as it was before ferrocuda made a device's context
/// current: made current again when this guard is dropped, if it changed meanwhile (null —
/// no current context — included).
///
/// The CUDA runtime, and with it CuPy's `Device(n)`, torch's `cuda:n` and `cudaSetDevice`,
/// keeps the caller's device as the thread's current context. A launch on arrays of another
/// device, an allocation or copy there, or freeing an array there, binds that device's
/// context; this guard puts the caller's back, so that the caller's next operation runs on
/// the device it chose. Costs one `cuCtxGetCurrent` at creation and one at the drop — cheap
/// next to a launch (BENCHMARKS.md, "Launch overhead") — plus one `cuCtxSetCurrent` each way
/// when the devices differ.
#[derive(Debug)]
#[must_use = "the caller's context is restored when the guard is dropped"]
pub struct CallerContext {
    /// The saved context; `None` when the driver is not loaded (nothing to restore).
    saved: Option<sys::CUcontext>,
}

impl CallerContext {
    /// Saves the calling thread's current context (nothing, without a driver: then nothing
    /// can be bound either).
    pub fn save() -> CallerContext {
        CallerContext {
            saved: init().ok().and_then(|()| cu::current_context().ok()),
        }
    }
}

impl Drop for CallerContext {
    fn drop(&mut self) {
        let Some(saved) = self.saved else { return };
        if cu::current_context().is_ok_and(|now| now != saved) {
            // SAFETY: `saved` was current on this thread when the guard was made, and a
            // context current on a thread stays alive while it is (its owner must not destroy
            // it under the thread); null unbinds.
            let _ = unsafe { cu::set_current_context(saved) };
        }
    }
}

/// The launch limits of device `dev`.
///
/// # Safety
///
/// `dev` comes from `cu::device`.
unsafe fn read_limits(dev: sys::CUdevice) -> Result<DeviceLimits> {
    use sys::CUdevice_attribute::*;
    // SAFETY: the caller's contract.
    let get = |a| unsafe { cu::device_attribute(dev, a) }.map(|v| v.max(0) as u32);
    Ok(DeviceLimits {
        max_block: [
            get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_grid: [
            get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        max_threads: get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        shared_optin: get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
    })
}
