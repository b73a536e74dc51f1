//! `ferrocuda.ForeignArray`: another library's device array, validated, with the object that
//! owns its memory (and a DLPack import) kept alive.

use ferrocuda_host::interop::dlpack::ManagedTensor;
use ferrocuda_host::{ArrayDesc, StreamRef};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use super::device::{cai_dict, numpy_dtype};

/// Another library's device array, validated, with the object that owns its memory kept
/// alive (what :func:`ferrocuda.as_cuda_array` and :func:`ferrocuda.from_cuda_array_interface`
/// return, as Numba's functions of the same names do).
///
/// It re-exports ``__cuda_array_interface__`` (v3) and launches take it without reading the
/// producer's interface again.
#[pyclass(name = "ForeignArray", module = "ferrocuda", frozen, weakref)]
pub struct PyForeignArray {
    desc: ArrayDesc,
    owner: Py<PyAny>,
    /// A DLPack import, released when the array is.
    _dlpack: Option<ManagedTensor>,
}

impl PyForeignArray {
    /// An array of `desc` (already imported by the host crate's import rule) kept alive by
    /// `owner` and, for a DLPack import, `dlpack`.
    pub fn new(desc: ArrayDesc, owner: Py<PyAny>, dlpack: Option<ManagedTensor>) -> Self {
        PyForeignArray {
            desc,
            owner,
            _dlpack: dlpack,
        }
    }

    /// The interface.
    pub fn desc(&self) -> &ArrayDesc {
        &self.desc
    }
}

#[pymethods]
impl PyForeignArray {
    /// The object that owns the memory (kept alive by this array).
    #[getter]
    fn owner(&self, py: Python<'_>) -> Py<PyAny> {
        self.owner.clone_ref(py)
    }

    /// The extents.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.desc.shape())
    }

    /// Byte strides (always filled).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.desc.byte_strides())
    }

    /// The element type, a ``numpy.dtype``.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        numpy_dtype(py, self.desc.dtype())
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.desc.size()
    }

    /// Number of axes.
    #[getter]
    fn ndim(&self) -> usize {
        self.desc.ndim()
    }

    /// Whether the producer exported the array read-only.
    #[getter]
    fn readonly(&self) -> bool {
        self.desc.readonly()
    }

    /// The producer's stream (CAI integer), or ``None``.
    #[getter]
    fn stream(&self) -> Option<u64> {
        self.desc.stream().map(StreamRef::as_raw)
    }

    /// Device address of element ``[0, …, 0]``.
    #[getter]
    fn ptr(&self) -> u64 {
        self.desc.ptr()
    }

    /// The CUDA Array Interface (version 3) of the array.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cai_dict(py, &self.desc)
    }

    fn __repr__(&self) -> String {
        format!(
            "ferrocuda.ForeignArray(shape={:?}, dtype={}, readonly={}, stream={:?})",
            self.desc.shape(),
            self.desc.dtype().name(),
            self.desc.readonly(),
            self.desc.stream().map(StreamRef::as_raw)
        )
    }
}
