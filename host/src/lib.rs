//! ferrocuda's host runtime.
//!
//! * [`cai`] — the CUDA Array Interface (and SYCL USM array interface) model and its
//!   validation: every rule of the consumer contract, in one module.
//! * [`stream`] — the stream policy: which producer streams to synchronize or wait on, as an
//!   inspectable plan, then its execution.
//! * [`error`] — the one error type.
#![warn(missing_docs)]

pub mod cai;
pub mod error;
pub mod stream;

pub use error::{Error, ErrorKind, Result};
