//! `ferrocuda._ferrocuda`: the Python extension of ferrocuda.
//!
//! A thin layer over [`ferrocuda_host`]: it reads the array interfaces of Python objects
//! (`__cuda_array_interface__` v0–v3, `__sycl_usm_array_interface__`, DLPack), normalizes
//! stream arguments, converts scalars by the kernel manifest, and hands everything to the host
//! crate, which validates, orders the launch against the producers' streams and launches.
//!
//! Module map:
//!
//! * [`interface`] — reading interface dictionaries into [`ferrocuda_host::cai::RawInterface`]
//!   (no heap allocation for well-formed ones) and `validate_interface`;
//! * [`dlpack`] — the DLPack C structures, the consumer (capsule import) and the producer
//!   (`DeviceArray.__dlpack__`);
//! * [`streams`] — stream and sync-mode arguments;
//! * [`arrays`] — the `DeviceArray` and `ForeignArray` classes, and host (NumPy) arrays;
//! * [`kernels`] — `Module`, `Kernel`, `Family` and the per-call launch path.
//!
//! No function here panics on any input: every failure is a Python exception. Host-crate
//! errors map by kind: `Type` → `TypeError`, `Value` → `ValueError`, `Unsupported` →
//! `NotImplementedError`, `Cuda`/`NoDriver` → `ferrocuda.CudaError`.

use ferrocuda_host::{Error, ErrorKind};
use pyo3::exceptions::{
    PyNotImplementedError, PyRuntimeError, PyTypeError, PyUserWarning, PyValueError,
};
use pyo3::prelude::*;

pub mod arrays;
pub mod dlpack;
pub mod fast;
pub mod interface;
pub mod kernels;
pub mod streams;

pyo3::create_exception!(
    ferrocuda,
    CudaError,
    PyRuntimeError,
    "A CUDA driver call failed, or no CUDA driver/device is available.\n\n\
     The attribute ``code`` holds the raw ``CUresult`` (``None`` when no driver was found)."
);

pyo3::create_exception!(
    ferrocuda,
    PerformanceWarning,
    PyUserWarning,
    "Emitted when a launch takes host (NumPy) arrays: they are copied to the device, and \
     mutable ones copied back, on every call. Keep data on the device in loops."
);

/// Converts a host-crate error into the Python exception of its kind.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    match e.kind() {
        ErrorKind::Type => PyTypeError::new_err(msg),
        ErrorKind::Value => PyValueError::new_err(msg),
        ErrorKind::Unsupported => PyNotImplementedError::new_err(msg),
        ErrorKind::Cuda { code } => cuda_error(py, msg, Some(code)),
        // NoDriver, and any kind added later.
        _ => cuda_error(py, msg, None),
    }
}

fn cuda_error(py: Python<'_>, msg: String, code: Option<u32>) -> PyErr {
    let err = CudaError::new_err(msg);
    // Best effort: an exception instance always accepts attributes.
    let _ = err.value(py).setattr(pyo3::intern!(py, "code"), code);
    err
}

/// Extension trait: `.py_err(py)?` on host-crate results.
pub trait IntoPyResult<T> {
    /// Maps the error with [`to_py`].
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    #[inline]
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// `True` when a CUDA driver loads and reports at least one device. Never raises.
#[pyfunction]
fn driver_available(py: Python<'_>) -> bool {
    py.detach(ferrocuda_host::driver::is_available)
}

/// Number of CUDA devices. Raises `CudaError` when no driver can be loaded.
#[pyfunction]
fn device_count(py: Python<'_>) -> PyResult<usize> {
    py.detach(ferrocuda_host::driver::device_count).py_err(py)
}

/// Number of CUDA events in ferrocuda's pool for `device` (for leak tests: the pool holds
/// events for reuse, it should not grow with the number of launches).
#[pyfunction]
#[pyo3(signature = (device = 0))]
fn _pooled_events(py: Python<'_>, device: usize) -> PyResult<usize> {
    py.detach(|| ferrocuda_host::driver::Context::get(device).map(|c| c.pooled_events()))
        .py_err(py)
}

/// The extension module.
#[pymodule]
fn _ferrocuda(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CudaError", py.get_type::<CudaError>())?;
    m.add("PerformanceWarning", py.get_type::<PerformanceWarning>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_NDIM", ferrocuda_host::cai::MAX_NDIM)?;
    m.add("SYNC_ENV_VAR", ferrocuda_host::stream::SYNC_ENV_VAR)?;
    m.add_function(wrap_pyfunction!(driver_available, m)?)?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    m.add_function(wrap_pyfunction!(_pooled_events, m)?)?;
    interface::register(m)?;
    streams::register(m)?;
    arrays::register(m)?;
    kernels::register(m)?;
    Ok(())
}
