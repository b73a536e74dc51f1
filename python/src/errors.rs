//! Errors: ferrocuda's Python exception and warning types, the mapping of host-crate errors
//! to Python exceptions, and the failures of reading a producer's objects.
//!
//! Host-crate errors map by kind: `Type` → `TypeError`, `Value` → `ValueError`,
//! `Unsupported` → `NotImplementedError`, `Cuda`/`NoDriver` → `ferrocuda.CudaError`.

use ferrocuda_host::{Error, ErrorKind};
use pyo3::exceptions::{
    PyNotImplementedError, PyRuntimeError, PyTypeError, PyUserWarning, PyValueError,
};
use pyo3::intern;
use pyo3::prelude::*;

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
    let _ = err.value(py).setattr(intern!(py, "code"), code);
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

/// A failure while reading: a host-crate error (named later with the argument), or a Python
/// exception raised by the producer's objects (propagated as it is).
pub enum Fail {
    /// A rule violation.
    Host(Error),
    /// An exception raised by Python code of the producer (a property, `__index__`, …).
    Py(PyErr),
}

impl From<PyErr> for Fail {
    fn from(e: PyErr) -> Self {
        Fail::Py(e)
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Host(e)
    }
}

impl Fail {
    /// The Python exception, naming argument `arg` (in the message for rule violations; in
    /// a PEP 678 note for the producer's own exceptions, which are passed on unchanged).
    pub fn into_py(self, py: Python<'_>, arg: &str) -> PyErr {
        match self {
            Fail::Host(e) => to_py(py, e.with_arg(arg.to_owned())),
            Fail::Py(e) => annotate(py, e, "the array interface", arg),
        }
    }
}

/// Adds "while reading `attr` of argument `arg`" to an exception raised by the producer
/// (as a PEP 678 note where Python supports it) and returns it.
pub fn annotate(py: Python<'_>, e: PyErr, attr: &str, arg: &str) -> PyErr {
    let note = format!("while reading {attr} of argument `{arg}` (ferrocuda)");
    let _ = e.value(py).call_method1(intern!(py, "add_note"), (note,));
    e
}
