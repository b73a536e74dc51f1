//! Array objects: `ferrocuda.DeviceArray` ([`device`]), `ferrocuda.ForeignArray`
//! ([`foreign`]), the DLPack export ([`export`]) and the capsules held until a kernel
//! completes ([`pending`]).
//!
//! Order (each uses only those above it): `pending`, `export`, `device`, `foreign`.

pub mod device;
pub mod export;
pub mod foreign;
pub mod pending;

pub use device::PyDeviceArray;
pub use foreign::PyForeignArray;
