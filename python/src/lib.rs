//! `ferrocuda._ferrocuda`: the Python extension of ferrocuda.
//!
//! A thin layer over [`ferrocuda_host`]: it reads the array interfaces of Python objects
//! (`__cuda_array_interface__` v0–v3, `__sycl_usm_array_interface__`, DLPack, NumPy),
//! normalizes stream arguments, converts scalars by the kernel manifest, and hands everything
//! to the host crate, which validates (`ferrocuda_host::interop`: the CAI and DLPack rules),
//! chooses the kernel (`ferrocuda_host::launcher::Target`), orders the launch against the
//! producers' streams and launches. What it needs of the CUDA driver — devices, stream
//! synchronization and ordering, fences, the caller's context, trap records — comes through
//! the host's facade, `ferrocuda_host::runtime`; no module here names the driver layer
//! (`tests/layers` checks it).
//!
//! # Layers
//!
//! Each module uses only the modules listed above it:
//!
//! 1. [`config`] — the environment variables' table and values, for the pure-Python
//!    package.
//! 2. [`util`] — small helpers: integers, short strings, tuples and lists, type names, NumPy
//!    attributes.
//! 3. [`errors`] — `CudaError`, `PerformanceWarning`, host errors as Python exceptions,
//!    failures of reading a producer's objects, `Trap` and `last_trap` (failed device checks).
//! 4. [`dlpack`] — DLPack's Python side over the host's model: a producer's capsule taken
//!    (import), ferrocuda's managed tensors in capsules (export), a producer type's exchange
//!    API.
//! 5. [`read`] — readers of foreign objects, each producing the host crate's description:
//!    interface dictionaries (`read::cai`), CuPy and torch fast paths (`read::fast`), NumPy
//!    host arrays (`read::host`), stream and sync arguments (`read::streams`).
//! 6. [`arrays`] — the array objects: `DeviceArray` (with its DLPack export), `ForeignArray`,
//!    and the DLPack imports held until a kernel completes.
//! 7. [`args`] — argument classification: what each launch argument is, by the launch's mode
//!    (a launcher's call, or a torch operator's kernel).
//! 8. [`docs`] — docstrings of launchers.
//! 9. [`call`] — the call path: options, the kernel chosen by the host's launcher target,
//!    scalars, the launch through the host crate's two phases (host arrays staged between
//!    them).
//! 10. [`bind`] — bound launches: `BoundLaunch`, the call path's first half done once, the
//!     second half per launch with what can change read again (streams, moved memory).
//! 11. [`launcher`] — the launcher classes: `Launcher`, and its `Kernel` and `Family`, which
//!     differ only in selection; `ConfiguredLauncher`; `OpKernel`, a torch operator's kernel
//!     (a launch in the call path's operator mode).
//! 12. [`project`] — kernel crates: `build`, `new_crate`, the `ferrocuda` command (`_cli`),
//!     `BuildError` (through `ferrocuda_builder::project`).
//! 13. [`module`] — `Module`, `load` (a manifest, or a crate it builds first), `bundled`.
//! 14. [`functions`] — the module-level functions.
//! 15. [`xla`] — XLA FFI handlers (`jax.jit`), over the host crate and [`module`].
//!
//! This file registers the classes and functions (it uses every layer).
//!
//! No function here panics on any input: every failure is a Python exception. Host-crate
//! errors map by kind: `Type` → `TypeError`, `Value` → `ValueError`, `Unsupported` →
//! `NotImplementedError`, `Cuda`/`NoDriver` → `ferrocuda.CudaError`.

use pyo3::prelude::*;

pub mod args;
pub mod arrays;
pub mod bind;
pub mod call;
pub mod config;
pub mod dlpack;
pub mod docs;
pub mod errors;
pub mod functions;
pub mod launcher;
pub mod module;
pub mod project;
pub mod read;
pub mod util;
pub mod xla;

pub use errors::{to_py, CudaError, IntoPyResult, PerformanceWarning, PyTrap};

/// The extension module.
#[pymodule]
fn _ferrocuda(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CudaError", py.get_type::<CudaError>())?;
    m.add("PerformanceWarning", py.get_type::<PerformanceWarning>())?;
    m.add("BuildError", py.get_type::<project::BuildError>())?;
    m.add("CompileError", py.get_type::<project::CompileError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_NDIM", ferrocuda_host::interop::cai::MAX_NDIM)?;
    m.add("SYNC_ENV_VAR", ferrocuda_host::stream::SYNC_ENV_VAR)?;
    m.add_class::<arrays::PyDeviceArray>()?;
    m.add_class::<arrays::PyForeignArray>()?;
    m.add_class::<module::PyKModule>()?;
    m.add_class::<launcher::PyLauncher>()?;
    m.add_class::<launcher::PyKernel>()?;
    m.add_class::<launcher::PyFamily>()?;
    m.add_class::<launcher::PyConfigured>()?;
    m.add_class::<launcher::PyOpKernel>()?;
    m.add_class::<bind::PyBound>()?;
    m.add_class::<errors::PyTrap>()?;
    m.add_function(wrap_pyfunction!(module::bundled, m)?)?;
    m.add_function(wrap_pyfunction!(module::load, m)?)?;
    m.add_function(wrap_pyfunction!(module::inline, m)?)?;
    m.add_function(wrap_pyfunction!(project::_inline_cache_dir, m)?)?;
    m.add_function(wrap_pyfunction!(module::_bundled_ptx, m)?)?;
    m.add_function(wrap_pyfunction!(module::_bundled_cubin, m)?)?;
    m.add_function(wrap_pyfunction!(module::_bundled_part_file, m)?)?;
    m.add_function(wrap_pyfunction!(module::_module, m)?)?;
    m.add_function(wrap_pyfunction!(module::_launcher, m)?)?;
    m.add_function(wrap_pyfunction!(project::build, m)?)?;
    m.add_function(wrap_pyfunction!(project::new_crate, m)?)?;
    m.add_function(wrap_pyfunction!(project::_cli, m)?)?;
    m.add_function(wrap_pyfunction!(xla::_xla_handler, m)?)?;
    m.add_function(wrap_pyfunction!(xla::_xla_capsule, m)?)?;
    m.add_function(wrap_pyfunction!(xla::_xla_register, m)?)?;
    m.add_function(wrap_pyfunction!(xla::_xla_layout, m)?)?;
    m.add_function(wrap_pyfunction!(xla::_xla_api_version, m)?)?;
    use functions as f;
    m.add_function(wrap_pyfunction!(f::driver_available, m)?)?;
    m.add_function(wrap_pyfunction!(f::device_count, m)?)?;
    m.add_function(wrap_pyfunction!(f::device_properties, m)?)?;
    m.add_function(wrap_pyfunction!(f::_home_dir, m)?)?;
    m.add_function(wrap_pyfunction!(config::_env_vars, m)?)?;
    m.add_function(wrap_pyfunction!(config::_env_value, m)?)?;
    m.add_function(wrap_pyfunction!(f::_pooled_events, m)?)?;
    m.add_function(wrap_pyfunction!(f::_pending_releases, m)?)?;
    #[cfg(feature = "launch-timing")]
    m.add_function(wrap_pyfunction!(f::_launch_timing, m)?)?;
    m.add_function(wrap_pyfunction!(f::validate_interface, m)?)?;
    m.add_function(wrap_pyfunction!(f::_describe_generic, m)?)?;
    m.add_function(wrap_pyfunction!(f::_fast_paths, m)?)?;
    m.add_function(wrap_pyfunction!(f::_cupy_stream_source, m)?)?;
    m.add_function(wrap_pyfunction!(f::_torch_read_source, m)?)?;
    m.add_function(wrap_pyfunction!(f::as_cuda_array, m)?)?;
    m.add_function(wrap_pyfunction!(f::is_cuda_array, m)?)?;
    m.add_function(wrap_pyfunction!(f::from_cuda_array_interface, m)?)?;
    m.add_function(wrap_pyfunction!(f::normalize_stream, m)?)?;
    m.add_function(wrap_pyfunction!(f::normalize_sync, m)?)?;
    m.add_function(wrap_pyfunction!(f::synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(errors::last_trap, m)?)?;
    Ok(())
}
