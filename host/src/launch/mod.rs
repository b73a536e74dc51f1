//! Launching a kernel on validated arrays, in two phases computed once each:
//!
//! 1. [`Kernel::prepare`] — argument checks against the manifest ([`check_args`]), the
//!    producers' streams, the device (from the pointers, which are checked against their
//!    allocations), the stream [`Plan`], the context and the launch configuration;
//! 2. [`Prepared::execute`] — the parameter buffer (packed from the abi parameter types
//!    themselves), the plan's work before the launch, `cuLaunchKernel` (`cuLaunchKernelEx`
//!    with the cooperative or cluster attribute for kernels that declare one), and the plan's
//!    work after it.
//!
//! Grid, block and dynamic shared memory — the caller's or the automatic ones — are checked
//! against the kernel's limits (read once per device when its module loads) and the device's
//! (read once per context) before anything happens on the device; see [`shape`]. So are the
//! launch attributes, decided in one place for every launch path (`Kernel::prepare`'s
//! configuration; [`Prepared::attributes`]): a cooperative kernel's grid must be resident at
//! once, a cluster kernel's grid whole clusters the device can schedule. Both work in bound
//! launches and under CUDA graph capture (the driver captures `cuLaunchKernelEx` with its
//! attributes as a kernel node's; the co-residency check made at capture holds for every
//! replay on that device, the same function, block and shared memory).
//!
//! Which kernel runs is decided before both, by [`select()`]: a family launcher picks the
//! family's kernel for the arguments' element types, ranks and layouts (the contiguous,
//! vectorised variant whenever every array allows it, a strided one otherwise), and a typed
//! launcher the kernel's layout variant ([`Kernel::variant_for`]); [`Kernel::launch`] runs
//! the kernel it is called on. A launcher holding one kernel or a family's kernels asks
//! [`Target::choose`](crate::launcher::Target::choose) once per launch: the argument count, that choice (remembered per
//! launcher) and the "no variant" error.
//!
//! [`Kernel::launch`] runs both. Between them a caller may stage host arrays on the prepared
//! device and launch stream ([`Arg::Host`]; the array module's `Staging`) — the one path by
//! which host arrays reach a kernel, from Rust (`Kernel::launch_host`) and Python.
//!
//! A prepared launch can be executed again on the same arguments: [`Kernel::bind`] prepares
//! and packs the parameters once ([`Prepared::pack`]) and [`BoundLaunch::launch`] executes as
//! often as asked (for loops), each time re-planning the streams under their capture state
//! now ([`Prepared::execute_replanned`]); a caller whose producers' streams move between
//! launches passes the streams as they are now, to which the stream policy's one rule
//! ([`stream::plan`](crate::stream::plan)) is applied.
//!
//! A call's whole path works on the stack: arguments are borrowed, the parameter buffer is a
//! fixed 4 KiB array, the stream plan has fixed capacity (a bound launch's packed image is
//! allocated once, at bind). Per launch it costs one
//! `cuPointerGetAttributes` per array (skippable with [`LaunchOptions::check_pointers`]; none
//! for an array wholly inside an allocation the launch already found for an earlier array —
//! views of one buffer, blocks of one caching-allocator segment),
//! `cuCtxGetCurrent`, the plan's syncs/waits (none when every array lives on the launch
//! stream) and `cuLaunchKernel`.

mod bind;
mod check;
mod execute;
mod extras;
mod prepare;
pub mod select;
pub mod shape;
pub mod tensormap;

pub use bind::BoundLaunch;
pub use check::check_args;
pub use execute::Packed;
pub use extras::{ScratchPlan, SCRATCH_ALIGN};
pub use prepare::Prepared;
pub use select::{select, Operand, SelectionKey, SelectionMemo};

use crate::error::{Error, Result};
use crate::interop::cai::ArrayDesc;
use crate::module::{Kernel, MAX_PARAMS};
use crate::scalar::Scalar;
use crate::stream::{Plan, StreamRef, SyncMode};
use std::sync::OnceLock;

pub use crate::driver::synchronize_on as synchronize;

/// One kernel argument.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A device array (from an array interface, or a `DeviceArray`).
    Array(&'a ArrayDesc),
    /// A scalar.
    Scalar(Scalar),
    /// A host array that will be staged on the device before the launch: checked by
    /// [`Kernel::prepare`] like a device array (element type, rank, shape, read-only) except
    /// for its pointer, then replaced by its staged copy for [`Prepared::execute`] (see the
    /// array module's `Staging`). The description is that of the staged copy: a C-contiguous
    /// array.
    Host(&'a ArrayDesc),
}

impl<'a> From<&'a ArrayDesc> for Arg<'a> {
    fn from(d: &'a ArrayDesc) -> Self {
        Arg::Array(d)
    }
}

/// A launch's arguments, in fixed-capacity storage ([`MAX_PARAMS`]): no heap allocation.
#[derive(Clone, Copy, Debug)]
pub struct ArgList<'a> {
    args: [Arg<'a>; MAX_PARAMS],
    len: usize,
}

impl<'a> ArgList<'a> {
    /// An empty list.
    #[inline]
    pub fn new() -> Self {
        ArgList {
            args: [Arg::Scalar(Scalar::I8(0)); MAX_PARAMS],
            len: 0,
        }
    }

    /// Appends `arg`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Value`](crate::ErrorKind::Value) beyond [`MAX_PARAMS`] arguments.
    pub fn push(&mut self, arg: Arg<'a>) -> Result<()> {
        let slot = self.args.get_mut(self.len).ok_or_else(|| {
            Error::value(format!("a launch takes at most {MAX_PARAMS} arguments"))
        })?;
        *slot = arg;
        self.len += 1;
        Ok(())
    }

    /// The arguments, mutably (e.g. to put a converted scalar in place).
    pub fn as_mut_slice(&mut self) -> &mut [Arg<'a>] {
        &mut self.args[..self.len]
    }
}

impl Default for ArgList<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> std::ops::Deref for ArgList<'a> {
    type Target = [Arg<'a>];
    fn deref(&self) -> &[Arg<'a>] {
        &self.args[..self.len]
    }
}

/// How to launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchOptions {
    /// Launch stream; `None` = the producers' common stream, else the legacy default stream
    /// (see [`stream::plan`](crate::stream::plan)).
    pub stream: Option<StreamRef>,
    /// Ordering against producer streams; `None` = from `FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC`
    /// (read once per process), which defaults to [`SyncMode::Default`].
    pub sync: Option<SyncMode>,
    /// Ask the driver, per array, whether the pointer is device memory on the launch device
    /// and whether the described extent lies inside its allocation (default `true`).
    pub check_pointers: bool,
    /// Grid size (x, y, z); `None` = automatic: for 1-D kernels enough blocks for the largest
    /// array (one thread per `items_per_thread` elements), capped at one resident wave
    /// otherwise (kernels use grid-stride loops); for `#[kernel(grid = "2d")]`/`"3d"` kernels
    /// an N-D grid over the largest array, one thread per element (see
    /// [`shape::nd_grid`]); for `#[kernel(cooperative)]` kernels exactly one resident wave
    /// (a caller's grid may not be larger: [`shape::check_cooperative`]); for
    /// `#[kernel(cluster = …)]` kernels rounded up to whole clusters (a caller's grid must be
    /// whole clusters: [`shape::check_cluster`]).
    pub grid: Option<[u32; 3]>,
    /// Block size (x, y, z); `None` = the kernel's declared block, else 256 threads (or the
    /// kernel's maximum if lower) for 1-D kernels and the occupancy-maximizing size, 32 wide,
    /// for N-D ones (see [`shape::auto_block`]). A kernel that declares a block takes no
    /// other.
    pub block: Option<[u32; 3]>,
    /// Dynamic shared memory in bytes. Above 48 KiB the kernel is opted in to more
    /// (`cuFuncSetAttribute`, once per kernel and size), up to the device's limit per block
    /// less the kernel's static shared memory; a kernel that declares the element type of its
    /// dynamic shared memory takes only whole elements.
    pub shared_mem_bytes: u32,
    /// The device to launch on when no argument is in device memory (only scalars, empty or
    /// host arrays); `None` = the calling thread's current device, else device 0. With device
    /// arrays, their device decides.
    pub device: Option<usize>,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            stream: None,
            sync: None,
            check_pointers: true,
            grid: None,
            block: None,
            shared_mem_bytes: 0,
            device: None,
        }
    }
}

/// What a launch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launched {
    /// The stream plan that was executed.
    pub plan: Plan,
    /// Device ordinal.
    pub device: usize,
    /// Grid and block used; `None` when nothing was launched because every array is empty.
    pub config: Option<([u32; 3], [u32; 3])>,
}

static ENV_MODE: OnceLock<std::result::Result<SyncMode, Error>> = OnceLock::new();

/// The process-wide default sync mode (`FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC`, read once).
pub fn default_sync_mode() -> Result<SyncMode> {
    ENV_MODE
        .get_or_init(SyncMode::from_env)
        .as_ref()
        .copied()
        .map_err(Clone::clone)
}

impl Kernel<'_> {
    /// Checks the arguments and launches the kernel: [`prepare`](Kernel::prepare), then
    /// [`execute`](Prepared::execute).
    ///
    /// The call returns once the launch is enqueued (and, in [`SyncMode::Default`], after the
    /// host synchronization of foreign producer streams). It does not wait for the kernel.
    /// The calling thread's current context is the same afterwards as before, whichever
    /// device the launch ran on ([`CallerContext`](crate::driver::CallerContext)).
    ///
    /// # Safety
    ///
    /// Everything the manifest can express is checked: argument count, kinds, element types,
    /// ranks, read-only arrays, equal shapes where the kernel demands them, overlap of
    /// outputs with other arguments, and (with `check_pointers`) that every array is device
    /// memory of one device whose described extent lies inside its allocation. What remains
    /// for the caller:
    ///
    /// * the kernel itself must be memory-safe for any arguments that pass these checks (the
    ///   bundled kernels are; the typed launchers of the `ferrocuda` crate are safe);
    /// * every array must stay allocated, and its producer must not free or reuse it, until
    ///   the kernel has completed — the stream plan orders the producer streams behind the
    ///   kernel, but the memory's owner must be kept alive by the caller;
    /// * with `check_pointers: false`, the caller vouches for the pointers and extents.
    pub unsafe fn launch(&self, args: &[Arg<'_>], opts: &LaunchOptions) -> Result<Launched> {
        let _caller = crate::driver::CallerContext::save();
        let prepared = self.prepare(args, opts)?;
        // SAFETY: the same arguments as prepared (no host arrays to stage), on the thread that
        // just bound the prepared context; the rest is the caller's contract, forwarded.
        unsafe { prepared.execute_bound(args) }
    }
}
