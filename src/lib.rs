//! ferrocuda — write NVIDIA GPU kernels in Rust, launch them on the arrays people already
//! have.
//!
//! This crate bundles the example kernels of `kernels/` (compiled to PTX at build time by
//! `build.rs` with rustc's NVPTX backend) and re-exports the host runtime
//! ([`ferrocuda_host`]):
//!
//! * [`bundled::module`] — the bundled PTX module and its cubins, loaded once per device;
//! * [`kernels`] — one typed launcher per bundled kernel, generated from the manifest;
//! * [`DeviceArray`], [`ForeignArray`](host::array::ForeignArray), [`ArrayDesc`] and the
//!   CAI validation in [`host::interop::cai`].
//!
//! ```no_run
//! use ferrocuda::{kernels, DeviceArray, LaunchOptions, StreamRef};
//! use ndarray::Array1;
//!
//! let a = DeviceArray::from_ndarray(&Array1::from_vec(vec![1.0f32, 2.0, 3.0]), 0, StreamRef::Legacy)?;
//! let b = DeviceArray::from_ndarray(&Array1::from_vec(vec![10.0f32, 20.0, 30.0]), 0, StreamRef::Legacy)?;
//! let out = DeviceArray::<f32>::empty(&[3], 0, StreamRef::Legacy)?;
//! kernels::add_f32(&a, &b, &out, &LaunchOptions::default())?;
//! assert_eq!(out.to_ndarray()?.as_slice().unwrap(), &[11.0, 22.0, 33.0]);
//! # Ok::<(), ferrocuda::Error>(())
//! ```
//!
//! # Layers
//!
//! Each module uses only the modules listed above it (checked by the workspace's
//! `tests/layers`):
//!
//! 1. [`bundled`] — the bundled module, loaded once per device.
//! 2. [`kernels`] — the typed launchers generated from the manifest (they load [`bundled`]).
#![warn(missing_docs)]

pub use ferrocuda_abi as abi;
pub use ferrocuda_host as host;
/// The `half` crate: `half::f16` and `half::bf16` are the host's 16-bit float element types
/// (for `DeviceArray<f16>`, scalars, and the launchers of `f16`/`bf16` kernels).
pub use ferrocuda_host::half;
pub use ferrocuda_host::{
    Arg, ArrayDesc, AsArg, BoundLaunch, DeviceArray, Error, ErrorKind, Kernel, LaunchOptions,
    Launched, Module, Result, Scalar, StreamRef, SyncMode,
};

/// The bundled kernels' PTX, cubins and manifest.
pub mod bundled {
    use ferrocuda_host::{Module, Result};
    use std::sync::OnceLock;

    // Statics, not constants: every use of a constant may embed its own copy of the bytes
    // (the Python extension had the PTX twice).

    /// The PTX of `kernels/` (target `sm_80`; loads on sm_80 and newer GPUs).
    pub static PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/ferrocuda_kernels.ptx"));

    /// The manifest of [`PTX`], as JSON.
    pub static MANIFEST_JSON: &str =
        include_str!(concat!(env!("OUT_DIR"), "/ferrocuda_kernels.json"));

    /// The cubins of [`PTX`] (arch, image; `sm_80` and `sm_90` when the build found ptxas,
    /// none else): a device of compute capability 8.x loads the `sm_80` one, 9.x the `sm_90`
    /// one, without JIT compilation; others JIT-compile the PTX.
    pub static CUBINS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/cubins.rs"));

    /// The files of the module's further parts — the kernels built for another architecture
    /// than `sm_80` (`#[kernel(arch = "sm_90a")]`), each part a PTX with its cubins — by the
    /// names the manifest gives them.
    pub static PART_FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/parts.rs"));

    static MODULE: OnceLock<Module> = OnceLock::new();

    /// The bundled module (parsed once; loaded into a device at its first launch there).
    pub fn module() -> Result<&'static Module> {
        if let Some(m) = MODULE.get() {
            return Ok(m);
        }
        let m = Module::embedded(PTX, MANIFEST_JSON, CUBINS, PART_FILES)?;
        Ok(MODULE.get_or_init(|| m))
    }
}

/// Typed launchers for the bundled kernels, one per kernel, generated from the manifest.
///
/// Each takes its array arguments as [`AsArg`] (a [`DeviceArray`] or a
/// [`ForeignArray`](host::array::ForeignArray)) and its scalars by value, checks them all
/// against the manifest, orders the launch against the arrays' streams and launches.
pub mod kernels {
    include!(concat!(env!("OUT_DIR"), "/launchers.rs"));
}
