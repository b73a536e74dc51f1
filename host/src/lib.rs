//! ferrocuda's host runtime.
//!
//! # Layers
//!
//! Each module uses only the modules listed above it (layout arithmetic, element types and
//! parameter kinds come from `ferrocuda_abi`, below all of them; checked by the workspace's
//! `tests/layers`):
//!
//! 1. `timing` — stage timing of the launch path (cargo feature `launch-timing`, profiling
//!    only; the crate root's `mark!` calls it).
//! 2. [`error`] — the one error type, with the interface [`Key`] and [`Protocol`] it names.
//! 3. [`stream`] — the stream policy: which producer streams to synchronize or wait on, as an
//!    inspectable plan (pure), its rules under CUDA graph capture ([`stream::capture`]), and
//!    the operations that execute it.
//! 4. [`driver`] — the CUDA driver (through cudarc, loaded at run time), layered as cudarc
//!    is: `driver::result` (thin `Result` wrappers, the only calls into the driver) →
//!    contexts, streams, events, graph capture states → the safe entry points.
//! 5. [`runtime`] — the facade above the driver for bindings and applications: whether a
//!    driver and devices are there, device properties, stream synchronization and ordering,
//!    fences, the caller's context, the trap records of failed device checks.
//! 6. [`interop`] — array interchange: the CUDA Array Interface (and SYCL USM array interface)
//!    model and its validation ([`interop::cai`]: every rule of the consumer contract, in one
//!    module), and DLPack ([`interop::dlpack`]: the C structures, import into an
//!    [`ArrayDesc`], export, a producer's exchange API).
//! 7. [`scalar`] — [`Scalar`], generated from the element-type table.
//! 8. [`module`] — PTX modules with their manifests, loaded once per device; each kernel's
//!    signature decoded once, with its extras (requirements, zeroed outputs, scratch
//!    workspaces) resolved against its parameters.
//! 9. [`launch`] — the two-phase launch: [`Kernel::prepare`] (checks, producers, device,
//!    stream plan, configuration), then [`Prepared::execute`] (parameters packed from the abi
//!    types, the plan around `cuLaunchKernel`, or `cuLaunchKernelEx` for cooperative and
//!    cluster kernels); [`Kernel::bind`] prepares once for a [`BoundLaunch`] executed many
//!    times. The extras are checked and carried out around the launch here.
//! 10. [`launcher`] — the launcher facade: a launcher's [`Target`](launcher::Target) (one
//!     kernel, or a family's kernels) and its one call per launch that decides which kernel
//!     runs: the argument count, the selection rule, the "no variant" error.
//! 11. [`array`](mod@array) — [`DeviceArray`] and [`AnyDeviceArray`],
//!     [`ForeignArray`](array::ForeignArray) with the import-sync rule, and the staging of host
//!     arrays.
//! 12. [`extras`] — the extras' types under one path (re-exports from [`module`] and
//!     [`launch`]).
#![warn(missing_docs)]

/// Ends the launch stage named `$stage` (a string literal: the caller names its stage) when
/// the calling crate's feature `launch-timing` is on; nothing otherwise. `mark!(start)`
/// starts a launch. See `timing` (with the feature).
#[macro_export]
macro_rules! mark {
    (start) => {
        #[cfg(feature = "launch-timing")]
        $crate::timing::start();
    };
    ($stage:literal) => {
        #[cfg(feature = "launch-timing")]
        {
            static STAGE: $crate::timing::Stage = $crate::timing::Stage::new($stage);
            STAGE.mark();
        }
    };
}

pub mod array;
pub mod driver;
pub mod error;
pub mod interop;
pub mod launch;
pub mod launcher;
pub mod module;
pub mod runtime;
pub mod scalar;
pub mod stream;
#[cfg(feature = "launch-timing")]
pub mod timing;

/// Kernel extras (`#[kernel(zero(…), scratch(…), require(…))]`): resolved with a kernel's
/// signature ([`module`]), checked and carried out around its launch ([`launch`]).
pub mod extras {
    pub use crate::launch::{ScratchPlan, SCRATCH_ALIGN};
    pub use crate::module::{Requirement, ScratchParam, MAX_SCRATCH};
}

/// The `half` crate, whose `f16` and `bf16` are the host's 16-bit float element types.
pub use half;

pub use array::{AnyDeviceArray, AsArg, DeviceArray};
pub use error::{Error, ErrorKind, Key, Protocol, Result};
pub use interop::cai::ArrayDesc;
pub use launch::{Arg, ArgList, BoundLaunch, LaunchOptions, Launched, Packed, Prepared};
pub use module::{choose_cubin, Kernel, Module};
pub use scalar::Scalar;
pub use stream::{StreamRef, SyncMode};
