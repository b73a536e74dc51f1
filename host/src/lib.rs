//! ferrocuda's host runtime.
//!
//! * [`cai`] — the CUDA Array Interface (and SYCL USM array interface) model and its
//!   validation: every rule of the consumer contract, in one module.
//! * [`stream`] — the stream policy: which producer streams to synchronize or wait on, as an
//!   inspectable plan, then its execution.
//! * [`driver`] — the CUDA driver (through cudarc, loaded at run time): contexts, pointer
//!   queries, events.
//! * [`module`] — PTX modules with their manifests, loaded once per device.
//! * [`launch`] — argument checks against the manifest and the launch itself.
//! * [`array`] — [`DeviceArray`], an owning typed N-D device array that exports the CAI.
//! * [`error`] — the one error type.
//! * `timing` — stage timing of the launch path (cargo feature `launch-timing`, profiling only).
#![warn(missing_docs)]

/// Marks the end of launch stage `$stage` when the calling crate's feature `launch-timing`
/// is on; nothing otherwise. `mark!(start)` starts a launch.
#[macro_export]
macro_rules! mark {
    (start) => {
        #[cfg(feature = "launch-timing")]
        $crate::timing::start();
    };
    ($stage:expr) => {
        #[cfg(feature = "launch-timing")]
        $crate::timing::mark($stage);
    };
}

pub mod array;
pub mod cai;
pub mod driver;
pub mod error;
pub mod launch;
pub mod module;
pub mod stream;
#[cfg(feature = "launch-timing")]
pub mod timing;
pub mod trap;

pub use array::DeviceArray;
pub use cai::ArrayDesc;
pub use error::{Error, ErrorKind, Result};
pub use launch::{Arg, LaunchOptions, Launched, Scalar};
pub use module::{Kernel, Module};
pub use stream::{StreamRef, SyncMode};
