//! `ferrocuda.DeviceArray`: memory ferrocuda owns (the host crate's [`AnyDeviceArray`]),
//! exported through the CUDA Array Interface and DLPack.

use ferrocuda_abi::DType;
use ferrocuda_host::array::{AnyDeviceArray, HostArray};
use ferrocuda_host::interop::dlpack::KDL_CUDA;
use ferrocuda_host::runtime;
use ferrocuda_host::{ArrayDesc, Error, StreamRef};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyList, PyTuple};

use crate::dlpack;
use crate::errors::IntoPyResult;
use crate::read::host::{host_view, parse_dtype};
use crate::read::streams::parse_stream;
use crate::util::{numpy_attr, read_int, type_name};

/// `DeviceArray` holds the element types that have a Rust type (the element-type table's).
fn supported(d: DType) -> ferrocuda_host::Result<()> {
    if d.rust_name().is_some() {
        return Ok(());
    }
    let names: Vec<&str> = DType::ALL
        .iter()
        .filter(|d| d.rust_name().is_some())
        .map(|d| d.name())
        .collect();
    Err(Error::type_error(format!(
        "{} arrays are not supported by DeviceArray (supported: {})",
        d.name(),
        names.join(", ")
    )))
}

/// Copies a device array into a new NumPy array (of `ml_dtypes.bfloat16` for bfloat16).
fn download_new<'py>(py: Python<'py>, a: &AnyDeviceArray) -> PyResult<Bound<'py, PyAny>> {
    let d = a.desc();
    let shape = PyTuple::new(py, d.shape())?;
    let out = numpy_attr(py, "empty")?.call1((shape, numpy_dtype(py, d.dtype())?))?;
    let iface = out.getattr(intern!(py, "__array_interface__"))?;
    let data = iface.get_item(intern!(py, "data"))?.get_item(0)?;
    let ptr = read_int(&data)?.unwrap_or(0) as usize;
    let n = a.nbytes();
    py.detach(|| {
        let dst = if n == 0 {
            &mut []
        } else {
            // SAFETY: `out` is a fresh C-contiguous, aligned NumPy array of the same shape and
            // dtype (`n` bytes), referenced only by this function: nothing else can touch it
            // while the GIL is released.
            unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, n) }
        };
        a.copy_to_host_bytes(dst)
    })
    .py_err(py)?;
    Ok(out)
}

/// An owning, C-contiguous N-D array in CUDA device memory, ordered on one stream.
///
/// Allocation, copies and the free are stream-ordered on the array's stream (``stream``,
/// the legacy default stream unless given). The array exports ``__cuda_array_interface__``
/// (v3, with its stream) and ``__dlpack__``, so CuPy, PyTorch, Numba and JAX consume it without a
/// copy; ferrocuda's kernels take it directly.
#[pyclass(name = "DeviceArray", module = "ferrocuda", frozen, weakref)]
pub struct PyDeviceArray {
    // Field order matters: the array (whose drop frees the memory, stream-ordered on its
    // stream) drops before the stream object that keeps that stream alive.
    inner: AnyDeviceArray,
    /// The Python stream object the array was created with (CuPy, PyTorch, Numba, …): kept
    /// alive so that the stream outlives the stream-ordered free.
    _stream_owner: Option<Py<PyAny>>,
}

/// The stream object to keep alive with an array: `stream` when it is an object (not `None`
/// and not an int, whose lifetime the caller manages).
pub fn stream_owner(stream: Option<&Bound<'_, PyAny>>) -> Option<Py<PyAny>> {
    stream
        .filter(|s| !s.is_none() && read_int(s).ok().flatten().is_none())
        .map(|s| s.clone().unbind())
}

impl PyDeviceArray {
    /// Wraps an array.
    pub fn new(inner: AnyDeviceArray) -> Self {
        PyDeviceArray {
            inner,
            _stream_owner: None,
        }
    }

    /// The interface.
    pub fn desc(&self) -> &ArrayDesc {
        self.inner.desc()
    }
}

/// The `__cuda_array_interface__` v3 dict of `desc`.
pub fn cai_dict<'py>(py: Python<'py>, desc: &ArrayDesc) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let ts = desc.dtype().typestr();
    d.set_item(intern!(py, "shape"), PyTuple::new(py, desc.shape())?)?;
    d.set_item(intern!(py, "typestr"), ts)?;
    d.set_item(intern!(py, "data"), (desc.ptr(), desc.readonly()))?;
    d.set_item(intern!(py, "version"), 3)?;
    if desc.is_c_contiguous() {
        d.set_item(intern!(py, "strides"), py.None())?;
    } else {
        d.set_item(
            intern!(py, "strides"),
            PyTuple::new(py, desc.byte_strides())?,
        )?;
    }
    d.set_item(intern!(py, "descr"), PyList::new(py, [("", ts)])?)?;
    d.set_item(intern!(py, "stream"), desc.stream().map(StreamRef::as_raw))?;
    Ok(d)
}

pub fn numpy_dtype<'py>(py: Python<'py>, d: DType) -> PyResult<Bound<'py, PyAny>> {
    if d == DType::BF16 {
        // NumPy has no bfloat16; ml_dtypes' is the one JAX and PyTorch interoperate with.
        let bf16 = py
            .import("ml_dtypes")
            .and_then(|m| m.getattr("bfloat16"))
            .map_err(|_| {
                PyTypeError::new_err(
                    "bfloat16 arrays need the ml_dtypes package on the host (NumPy has no \
                     bfloat16): pip install ml_dtypes",
                )
            })?;
        return numpy_attr(py, "dtype")?.call1((bf16,));
    }
    numpy_attr(py, "dtype")?.call1((d.name(),))
}

fn parse_shape(obj: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    if let Some(n) = read_int(obj)? {
        return usize::try_from(n)
            .map(|n| vec![n])
            .map_err(|_| PyValueError::new_err(format!("shape: {n} is not a valid extent")));
    }
    let mut out = Vec::new();
    for item in obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "shape: expected an int or a tuple of ints, got {}",
            type_name(obj)
        ))
    })? {
        let item = item?;
        let n = read_int(&item)?.ok_or_else(|| {
            PyTypeError::new_err(format!("shape: expected ints, got {}", type_name(&item)))
        })?;
        out.push(
            usize::try_from(n)
                .map_err(|_| PyValueError::new_err(format!("shape: {n} is not a valid extent")))?,
        );
    }
    Ok(out)
}

/// The DLPack stream of a consumer: `None` means the legacy default stream (DLPack's rule for
/// CUDA); `-1` means "do not synchronize".
fn consumer_stream(stream: Option<&Bound<'_, PyAny>>) -> PyResult<Option<StreamRef>> {
    let Some(s) = stream else {
        return Ok(Some(StreamRef::Legacy));
    };
    if s.is_none() {
        return Ok(Some(StreamRef::Legacy));
    }
    if let Some(-1) = read_int(s)? {
        return Ok(None);
    }
    parse_stream(Some(s))
}

#[pymethods]
impl PyDeviceArray {
    /// A new array of ``shape`` and ``dtype`` (any NumPy dtype-like of the twelve supported
    /// types; default float64) with unspecified contents, on ``device``, ordered on ``stream``
    /// (default: the legacy default stream). A stream *object* is kept alive by the array (its
    /// memory is freed on that stream); with a raw integer handle, keep the stream alive for as
    /// long as the array yourself.
    #[staticmethod]
    #[pyo3(signature = (shape, dtype = None, device = 0, stream = None))]
    fn empty(
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: usize,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let shape = parse_shape(shape)?;
        let dtype = match dtype {
            Some(d) if !d.is_none() => parse_dtype(d)?,
            _ => DType::F64,
        };
        supported(dtype).py_err(py)?;
        let stream_obj = stream;
        let stream = parse_stream(stream)?.unwrap_or(StreamRef::Legacy);
        let inner = py
            .detach(|| AnyDeviceArray::empty(dtype, &shape, device, stream))
            .py_err(py)?;
        Ok(PyDeviceArray {
            inner,
            _stream_owner: stream_owner(stream_obj),
        })
    }

    /// Copies a host array (anything ``numpy.asarray`` accepts) to a new device array on
    /// ``device``, ordered on ``stream``. Returns once the data is on the device.
    #[staticmethod]
    #[pyo3(signature = (array, device = 0, stream = None))]
    fn from_numpy(
        py: Python<'_>,
        array: &Bound<'_, PyAny>,
        device: usize,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let stream_obj = stream;
        let stream = parse_stream(stream)?.unwrap_or(StreamRef::Legacy);
        let view = host_view(array, "array")?;
        let inner = supported(view.desc.dtype())
            .and_then(|()| view.upload(device, stream))
            .map_err(|e| e.with_arg("array"))
            .py_err(py)?;
        Ok(PyDeviceArray {
            inner,
            _stream_owner: stream_owner(stream_obj),
        })
    }

    /// Copies the array into a new NumPy array (after the work pending on its stream).
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        download_new(py, &self.inner)
    }

    /// Same as :meth:`to_numpy` (Numba's name).
    fn copy_to_host<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        download_new(py, &self.inner)
    }

    /// Blocks until the work pending on the array's stream is done.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.inner.stream();
        let dev = self.inner.device();
        py.detach(|| runtime::synchronize(dev, s)).py_err(py)
    }

    /// The extents, a tuple of ints.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.desc().shape())
    }

    /// The element type, a ``numpy.dtype``.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        numpy_dtype(py, self.desc().dtype())
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.desc().size()
    }

    /// Number of axes.
    #[getter]
    fn ndim(&self) -> usize {
        self.desc().ndim()
    }

    /// Bytes of the elements.
    #[getter]
    fn nbytes(&self) -> usize {
        self.desc().size() * self.desc().itemsize()
    }

    /// Byte strides (always C order).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.desc().byte_strides())
    }

    /// The device ordinal.
    #[getter]
    fn device(&self) -> usize {
        self.inner.device()
    }

    /// The array's stream, as the CAI integer (1 = legacy default stream, 2 = per-thread
    /// default stream, else a ``CUstream`` handle).
    #[getter]
    fn stream(&self) -> u64 {
        self.inner.stream().as_raw()
    }

    /// Device address of the first element (0 for an empty array).
    #[getter]
    fn ptr(&self) -> u64 {
        self.desc().ptr()
    }

    /// The CUDA Array Interface, version 3, with ``stream`` = the array's stream.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cai_dict(py, self.desc())
    }

    /// A DLPack capsule of the array (DLPack 1.0 ``dltensor_versioned`` when
    /// ``max_version >= (1, 0)``, else ``dltensor``). The capsule keeps the array alive.
    ///
    /// ``stream`` is the consumer's stream (``None`` = legacy default stream, ``-1`` = no
    /// synchronization): when it differs from the array's stream, it is made to wait (an event,
    /// no host block) for the work pending on the array's stream. While the consumer's stream
    /// captures a CUDA graph, that is possible only when the array's stream is in the same
    /// capture; otherwise ``NotImplementedError`` says so (export before the capture, or
    /// with ``stream=-1``). ``dl_device`` must be
    /// ``None`` or this array's ``(2, device)``; ``copy=True`` is refused (``BufferError``).
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let py = slf.py();
        let this = slf.get();
        let device = this.inner.device();
        if let Some(dd) = dl_device.filter(|d| !d.is_none()) {
            let (t, id): (i64, i64) = dd.extract().map_err(|_| {
                PyTypeError::new_err("dl_device must be a (device_type, device_id) tuple")
            })?;
            if t != i64::from(KDL_CUDA) || id != device as i64 {
                return Err(PyBufferError::new_err(format!(
                    "cannot export to device ({t}, {id}): the array is on (2, {device}) and \
                     copies are not supported"
                )));
            }
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "copy=True is not supported by ferrocuda.DeviceArray.__dlpack__",
            ));
        }
        let versioned = match max_version.filter(|v| !v.is_none()) {
            None => false,
            Some(v) => {
                let (major, _minor): (i64, i64) = v.extract().map_err(|_| {
                    PyTypeError::new_err("max_version must be a (major, minor) tuple")
                })?;
                major >= 1
            }
        };
        if let Some(consumer) = consumer_stream(stream)? {
            let own = this.inner.stream();
            // An event edge, by the capture rules: refused when the consumer's stream is
            // capturing a graph that the array's stream is not part of.
            py.detach(|| runtime::order_before(device, own, consumer))
                .py_err(py)?;
        }
        dlpack::export(
            py,
            slf.clone().into_any().unbind(),
            this.desc(),
            device,
            versioned,
        )
    }

    /// ``(2, device)``: a CUDA device (``kDLCUDA``).
    fn __dlpack_device__(&self) -> (i32, usize) {
        (KDL_CUDA, self.inner.device())
    }

    fn __len__(&self) -> PyResult<usize> {
        self.desc()
            .shape()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d array"))
    }

    fn __repr__(&self) -> String {
        let d = self.desc();
        format!(
            "ferrocuda.DeviceArray(shape={:?}, dtype={}, device={}, stream={})",
            d.shape(),
            d.dtype().name(),
            self.inner.device(),
            self.inner.stream().as_raw()
        )
    }
}
