//! Array interchange: how a foreign array reaches ferrocuda, and how ferrocuda's arrays reach
//! others — every rule of the protocols, with nothing of Python in it (a binding reads the
//! Python objects and fills or unwraps these models).
//!
//! # Layers
//!
//! Each module uses only the modules listed above it:
//!
//! 1. [`cai`] — the CUDA Array Interface (and SYCL USM array interface) model and its
//!    validation into an [`ArrayDesc`](cai::ArrayDesc), the description every launch trusts.
//! 2. [`dlpack`] — DLPack: the C structures, a producer's managed tensor validated into an
//!    `ArrayDesc` (import), ferrocuda's own managed tensors (export), and a producer type's
//!    exchange API; the unsafe FFI in one module.

pub mod cai;
pub mod dlpack;
