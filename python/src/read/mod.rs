//! Readers of foreign objects: each turns a Python object into the host crate's description
//! ([`ArrayDesc`](ferrocuda_host::ArrayDesc), [`StreamRef`](ferrocuda_host::StreamRef),
//! [`SyncMode`](ferrocuda_host::SyncMode)), applying the host crate's rules.
//!
//! * [`cai`] — interface dictionaries (CAI, SYCL USM, NumPy's `__array_interface__`);
//! * [`fast`] — exact CuPy arrays and torch tensors, read field by field (torch's through its
//!   DLPack exchange API, [`crate::dlpack::Exchange`], where it has one);
//! * [`host`] — NumPy host arrays and dtype-likes;
//! * [`streams`] — `stream=` and `sync=` arguments.
//!
//! `host` uses `cai`; the others use only the modules below this layer.

pub mod cai;
pub mod fast;
pub mod host;
pub mod streams;
