//! Errors: ferrocuda's Python exception and warning types, the mapping of host-crate errors
//! to Python exceptions, and the failures of reading a producer's objects.
//!
//! Host-crate errors map by kind: `Type` → `TypeError`, `Value` → `ValueError`,
//! `Unsupported` → `NotImplementedError`, `Cuda`/`NoDriver` → `ferrocuda.CudaError`. A
//! `CudaError` for an error that ends the context (a kernel faulted) carries the failed
//! device check of a ferrocuda kernel, if one was recorded, as `.trap` (a [`PyTrap`]).

use ferrocuda_host::runtime::{self, Trap, TRAP_NOTE};
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
     The attribute ``code`` holds the raw ``CUresult`` (``None`` when no driver was found). \
     ``trap`` is a :class:`Trap` when the error ended the CUDA context (a kernel faulted) and a \
     ferrocuda kernel recorded a failed device check (``device_assert!``, a checked access out \
     of bounds): its file, line, thread and kernel; else ``None``."
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

fn cuda_error(py: Python<'_>, mut msg: String, code: Option<u32>) -> PyErr {
    // After a fault, the record of a failed device check (host memory: readable although
    // the context is dead). The host's message names it when the failing call ran with the
    // device's context current; where it did not, the record is added here.
    let trap = code.and_then(runtime::trap_of_error);
    if let Some(t) = &trap {
        if !msg.contains(TRAP_NOTE) {
            msg.push_str(&format!(" [{TRAP_NOTE} {t}]"));
        }
    }
    let err = CudaError::new_err(msg);
    // Best effort: an exception instance always accepts attributes.
    let value = err.value(py);
    let _ = value.setattr(intern!(py, "code"), code);
    let _ = value.setattr(intern!(py, "trap"), trap.map(PyTrap));
    err
}

/// Where a ferrocuda kernel stopped: a failed device check (``device_assert!``, a checked
/// access out of bounds) that the kernel recorded before it trapped.
///
/// Returned by :func:`last_trap` and set as ``CudaError.trap``. ``file``, ``line`` and
/// ``column`` locate the check in the kernel's source (the path as the compiler recorded it;
/// ``truncated`` when only its end was kept), ``block`` and ``thread`` are the failing
/// thread's ``blockIdx`` and ``threadIdx``, ``kernel`` is the kernel ferrocuda launched last
/// on ``device`` (the record itself does not name it), or ``None``.
#[pyclass(name = "Trap", module = "ferrocuda", frozen, eq, hash)]
#[derive(PartialEq, Hash)]
pub struct PyTrap(pub Trap);

#[pymethods]
impl PyTrap {
    /// The device (ordinal) of the failed check.
    #[getter]
    fn device(&self) -> usize {
        self.0.device
    }
    /// The kernel ferrocuda launched last on the device, or ``None``.
    #[getter]
    fn kernel(&self) -> Option<&'static str> {
        self.0.kernel
    }
    /// The source path of the check, as the compiler recorded it.
    #[getter]
    fn file(&self) -> &str {
        &self.0.file
    }
    /// Whether ``file`` is only the end of a longer path.
    #[getter]
    fn truncated(&self) -> bool {
        self.0.truncated
    }
    /// The source line (1-based).
    #[getter]
    fn line(&self) -> u32 {
        self.0.line
    }
    /// The source column (1-based).
    #[getter]
    fn column(&self) -> u32 {
        self.0.column
    }
    /// ``blockIdx`` of the failing thread, ``(x, y, z)``.
    #[getter]
    fn block(&self) -> (u32, u32, u32) {
        let [x, y, z] = self.0.block;
        (x, y, z)
    }
    /// ``threadIdx`` of the failing thread, ``(x, y, z)``.
    #[getter]
    fn thread(&self) -> (u32, u32, u32) {
        let [x, y, z] = self.0.thread;
        (x, y, z)
    }
    fn __str__(&self) -> String {
        self.0.to_string()
    }
    fn __repr__(&self) -> String {
        format!("<ferrocuda.Trap {}>", self.0)
    }
}

/// The failed device check a ferrocuda kernel recorded on ``device`` (``None``: any device)
/// before it trapped, as a :class:`Trap`; ``None`` if no kernel failed a check.
///
/// For the case where another library reports the fault first: after a trap the CUDA context
/// is dead, and the next driver call of any library fails — ``torch.cuda.synchronize()``
/// raises ``RuntimeError: CUDA error: an illegal instruction was encountered``, CuPy a
/// ``CUDARuntimeError`` — without saying where. The record is host memory, so this reads it
/// without the driver: ``ferrocuda.last_trap()`` names the file, line, thread and kernel.
/// (A ``CudaError`` raised by ferrocuda carries the same as ``.trap``.)
#[pyfunction]
#[pyo3(signature = (device = None))]
pub fn last_trap(py: Python<'_>, device: Option<usize>) -> PyResult<Option<PyTrap>> {
    Ok(runtime::last_trap(device).py_err(py)?.map(PyTrap))
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
