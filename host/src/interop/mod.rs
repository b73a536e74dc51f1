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

pub mod cai;
