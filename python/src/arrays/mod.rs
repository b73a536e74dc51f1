//! Array objects: `ferrocuda.DeviceArray` ([`device`], exported through the CAI and DLPack),
//! `ferrocuda.ForeignArray` ([`foreign`]) and the DLPack imports held until a kernel
//! completes ([`pending`]).
//!
//! Order (each uses only those above it): `pending`, `device`, `foreign`.

pub mod device;
pub mod foreign;
pub mod pending;

pub use device::PyDeviceArray;
pub use foreign::PyForeignArray;
