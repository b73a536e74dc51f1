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
#![warn(missing_docs)]

pub mod array;
pub mod cai;
pub mod driver;
pub mod error;
pub mod launch;
pub mod module;
pub mod stream;

pub use array::DeviceArray;
pub use cai::ArrayDesc;
pub use error::{Error, ErrorKind, Result};
pub use launch::{Arg, LaunchOptions, Launched, Scalar};
pub use module::{Kernel, Module};
pub use stream::{StreamRef, SyncMode};
