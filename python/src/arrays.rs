//! `DeviceArray` (memory ferrocuda owns), `ForeignArray` (another library's memory, kept
//! alive by its owner: Numba's `as_cuda_array` / `from_cuda_array_interface`), and host
//! (NumPy) arrays.

use ferrocuda_abi::DType;
use ferrocuda_host::driver::{Context, Fence};
use ferrocuda_host::{ArrayDesc, DeviceArray, StreamRef, SyncMode};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCapsule, PyDict, PyList, PyTuple};

use crate::dlpack::{self, DlpackOwner};
use crate::interface::{self, parse_dtype, read_int, type_name, Found, Scratch, Source};
use crate::streams::parse_stream;
use crate::IntoPyResult;

/// A NumPy attribute (`numpy.<name>`), imported once.
pub fn numpy_attr<'py>(py: Python<'py>, name: &'static str) -> PyResult<Bound<'py, PyAny>> {
    static REQUIRE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static EMPTY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static DTYPE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static COPYTO: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let cell = match name {
        "require" => &REQUIRE,
        "asarray" => &ASARRAY,
        "empty" => &EMPTY,
        "dtype" => &DTYPE,
        "copyto" => &COPYTO,
        _ => return py.import("numpy")?.getattr(name),
    };
    Ok(cell.import(py, "numpy", name)?.clone())
}

/// A [`DeviceArray`] of any of the ten element types kernels take.
pub enum AnyDeviceArray {
    /// `int8`
    I8(DeviceArray<i8>),
    /// `int16`
    I16(DeviceArray<i16>),
    /// `int32`
    I32(DeviceArray<i32>),
    /// `int64`
    I64(DeviceArray<i64>),
    /// `uint8`
    U8(DeviceArray<u8>),
    /// `uint16`
    U16(DeviceArray<u16>),
    /// `uint32`
    U32(DeviceArray<u32>),
    /// `uint64`
    U64(DeviceArray<u64>),
    /// `float32`
    F32(DeviceArray<f32>),
    /// `float64`
    F64(DeviceArray<f64>),
}

macro_rules! each {
    ($v:expr, $a:ident => $body:expr) => {
        match $v {
            AnyDeviceArray::I8($a) => $body,
            AnyDeviceArray::I16($a) => $body,
            AnyDeviceArray::I32($a) => $body,
            AnyDeviceArray::I64($a) => $body,
            AnyDeviceArray::U8($a) => $body,
            AnyDeviceArray::U16($a) => $body,
            AnyDeviceArray::U32($a) => $body,
            AnyDeviceArray::U64($a) => $body,
            AnyDeviceArray::F32($a) => $body,
            AnyDeviceArray::F64($a) => $body,
        }
    };
}

/// Runs `$body` with `$T` the Rust type of `$dtype`; `$other` for types without one.
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr, else $other:expr) => {
        match $dtype {
            DType::I8 => {
                type $T = i8;
                $body
            }
            DType::I16 => {
                type $T = i16;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            DType::U8 => {
                type $T = u8;
                $body
            }
            DType::U16 => {
                type $T = u16;
                $body
            }
            DType::U32 => {
                type $T = u32;
                $body
            }
            DType::U64 => {
                type $T = u64;
                $body
            }
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            _ => $other,
        }
    };
}

trait Wrap: ferrocuda_abi::Element {
    fn wrap(a: DeviceArray<Self>) -> AnyDeviceArray;
}

macro_rules! wrap_impl {
    ($($t:ty => $v:ident),*) => {$(
        impl Wrap for $t {
            fn wrap(a: DeviceArray<$t>) -> AnyDeviceArray { AnyDeviceArray::$v(a) }
        }
    )*};
}
wrap_impl!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32,
           u64 => U64, f32 => F32, f64 => F64);

fn unsupported_dtype(d: DType) -> ferrocuda_host::Error {
    ferrocuda_host::Error::type_error(format!(
        "{} arrays are not supported by DeviceArray (supported: int8, int16, int32, int64, \
         uint8, uint16, uint32, uint64, float32, float64)",
        d.name()
    ))
}

impl AnyDeviceArray {
    /// A new array with unspecified contents.
    pub fn empty(
        dtype: DType,
        shape: &[usize],
        device: usize,
        stream: StreamRef,
    ) -> ferrocuda_host::Result<AnyDeviceArray> {
        with_dtype!(dtype, T => Ok(T::wrap(DeviceArray::<T>::empty(shape, device, stream)?)),
                    else Err(unsupported_dtype(dtype)))
    }

    /// The interface (v3, the array's stream).
    pub fn desc(&self) -> &ArrayDesc {
        each!(self, a => a.desc())
    }

    /// Device ordinal.
    pub fn device(&self) -> usize {
        each!(self, a => a.device())
    }

    /// The array's stream.
    pub fn stream(&self) -> StreamRef {
        each!(self, a => a.stream())
    }

    /// Copies `len()` elements from host memory at `src` and waits.
    ///
    /// # Safety
    ///
    /// `src` must point at `len()` readable, initialized, aligned elements of the array's type
    /// that nothing writes during the call.
    pub unsafe fn upload_raw(&self, src: *const u8) -> ferrocuda_host::Result<()> {
        each!(self, a => {
            if a.is_empty() {
                return Ok(());
            }
            // SAFETY: the caller's contract.
            let s = unsafe { std::slice::from_raw_parts(src.cast(), a.len()) };
            a.copy_from_host(s)
        })
    }

    /// Copies the array to host memory at `dst` and waits.
    ///
    /// # Safety
    ///
    /// `dst` must point at `len()` writable, aligned elements of the array's type that nothing
    /// else reads or writes during the call.
    pub unsafe fn download_raw(&self, dst: *mut u8) -> ferrocuda_host::Result<()> {
        each!(self, a => {
            if a.is_empty() {
                return Ok(());
            }
            // SAFETY: the caller's contract.
            let s = unsafe { std::slice::from_raw_parts_mut(dst.cast(), a.len()) };
            a.copy_to_host(s)
        })
    }
}

/// A host array prepared for copying: C-contiguous, aligned, with its `__array_interface__`.
pub struct HostView<'py> {
    /// The NumPy array (possibly a contiguous copy of the argument).
    pub array: Bound<'py, PyAny>,
    /// Its description (host pointer).
    pub desc: ArrayDesc,
}

/// Reads a host array: `numpy.require(numpy.asarray(obj), requirements="CA")` (or
/// `numpy.from_dlpack(obj)` for a CPU DLPack producer NumPy cannot read otherwise) and its
/// `__array_interface__`. Returns the description and the (possibly new) array.
pub fn host_view<'py>(
    obj: &Bound<'py, PyAny>,
    arg: &str,
) -> PyResult<(ArrayDesc, Bound<'py, PyAny>)> {
    let py = obj.py();
    // NumPy masked arrays convert to their data with the mask dropped: refuse them, as a CUDA
    // interface with a mask is refused (computing on masked-out elements is silently wrong).
    static MASKED: PyOnceLock<Option<Py<PyAny>>> = PyOnceLock::new();
    let masked = MASKED.get_or_init(py, || {
        py.import("numpy.ma")
            .and_then(|m| m.getattr("MaskedArray"))
            .ok()
            .map(Bound::unbind)
    });
    if let Some(t) = masked {
        if obj.is_instance(t.bind(py))? {
            return Err(pyo3::exceptions::PyNotImplementedError::new_err(format!(
                "argument `{arg}`: masked arrays are not supported (a numpy.ma.MaskedArray); \
                 pass arr.filled(value) or arr.data"
            )));
        }
    }
    let arr = if !obj.hasattr(intern!(py, "__array_interface__"))?
        && !obj.hasattr(intern!(py, "__array__"))?
        && obj.hasattr(intern!(py, "__dlpack__"))?
    {
        // A CPU DLPack producer that NumPy cannot read otherwise.
        numpy_attr(py, "from_dlpack")?.call1((obj,))?
    } else {
        numpy_attr(py, "asarray")?.call1((obj,))?
    };
    let arr = numpy_attr(py, "require")?.call1((arr, py.None(), "CA"))?;
    let iface = arr.getattr(intern!(py, "__array_interface__"))?;
    let mut scratch = Scratch::new();
    let desc = interface::read_interface(&iface, Source::Host, &mut scratch)
        .map_err(|f| f.into_py(py, arg))?;
    Ok((desc, arr))
}

/// Uploads a host array (see [`host_view`]) to a new device array on `device`/`stream`.
/// The GIL stays held during the copy, so Python code cannot modify the source meanwhile.
pub fn upload_host(
    py: Python<'_>,
    view: &HostView<'_>,
    device: usize,
    stream: StreamRef,
    arg: &str,
) -> PyResult<AnyDeviceArray> {
    let d = &view.desc;
    let dev = AnyDeviceArray::empty(d.dtype(), d.shape(), device, stream)
        .map_err(|e| e.with_arg(arg.to_owned()))
        .py_err(py)?;
    // SAFETY: `view.array` is a live, C-contiguous, aligned NumPy array of `d.size()` elements
    // of the same dtype (validated interface); it stays referenced during the copy, and the GIL
    // is held, so no Python code writes it meanwhile.
    unsafe { dev.upload_raw(d.ptr() as usize as *const u8) }.py_err(py)?;
    Ok(dev)
}

/// Copies a device array into a new NumPy array.
pub fn download_new<'py>(py: Python<'py>, a: &AnyDeviceArray) -> PyResult<Bound<'py, PyAny>> {
    let d = a.desc();
    let shape = PyTuple::new(py, d.shape())?;
    let out = numpy_attr(py, "empty")?.call1((shape, d.dtype().typestr()))?;
    let iface = out.getattr(intern!(py, "__array_interface__"))?;
    let data = iface.get_item(intern!(py, "data"))?.get_item(0)?;
    let ptr = read_int(&data)?.unwrap_or(0) as usize;
    // SAFETY: `out` is a fresh C-contiguous, aligned NumPy array of the same shape and dtype,
    // referenced only by this function: nothing else can touch it while the GIL is released.
    py.detach(|| unsafe { a.download_raw(ptr as *mut u8) })
        .py_err(py)?;
    Ok(out)
}

/// Copies a device array back into the host array `target` (a kernel output).
pub fn download_into(
    py: Python<'_>,
    a: &AnyDeviceArray,
    view: &HostView<'_>,
    target: &Bound<'_, PyAny>,
) -> PyResult<()> {
    if view.array.is(target) {
        // SAFETY: `target` is a C-contiguous, aligned, writable (checked by the launch:
        // read-only host outputs are refused) NumPy array of the device array's shape and
        // dtype; the GIL stays held, so no Python code touches it during the copy.
        unsafe { a.download_raw(view.desc.ptr() as usize as *mut u8) }.py_err(py)
    } else {
        let tmp = download_new(py, a)?;
        numpy_attr(py, "copyto")?.call1((target, tmp))?;
        Ok(())
    }
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
fn stream_owner(stream: Option<&Bound<'_, PyAny>>) -> Option<Py<PyAny>> {
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

fn numpy_dtype<'py>(py: Python<'py>, d: DType) -> PyResult<Bound<'py, PyAny>> {
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
    /// A new array of ``shape`` and ``dtype`` (any NumPy dtype-like of the ten supported
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
        let (desc, arr) = host_view(array, "array")?;
        let view = HostView { array: arr, desc };
        let inner = upload_host(py, &view, device, stream, "array")?;
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
        py.detach(|| ferrocuda_host::launch::synchronize(dev, s))
            .py_err(py)
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
    /// no host block) for the work pending on the array's stream. ``dl_device`` must be
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
            if t != i64::from(dlpack::KDL_CUDA) || id != device as i64 {
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
            if consumer != own {
                py.detach(|| Fence::record(device, own)?.wait_on(consumer))
                    .py_err(py)?;
            }
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
        (dlpack::KDL_CUDA, self.inner.device())
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
    _dlpack: Option<DlpackOwner>,
}

impl PyForeignArray {
    /// The interface.
    pub fn desc(&self) -> &ArrayDesc {
        &self.desc
    }
}

/// Applies Numba's import-time `sync` rule to a freshly read interface.
fn import_sync(py: Python<'_>, desc: ArrayDesc, sync: bool) -> PyResult<ArrayDesc> {
    if !sync {
        return Ok(desc.with_stream(None));
    }
    let Some(s) = desc.stream() else {
        return Ok(desc);
    };
    let mode = ferrocuda_host::launch::default_sync_mode().py_err(py)?;
    if mode != SyncMode::Default {
        // Event mode orders at launch without blocking; Off does no ordering. The stream is
        // kept so launches (and re-exports) know it.
        return Ok(desc);
    }
    py.detach(|| {
        let ordinal = if desc.is_empty() {
            0
        } else {
            ferrocuda_host::driver::pointer_info(desc.ptr())?
                .device
                .max(0) as usize
        };
        Context::get(ordinal)?.bind()?;
        ferrocuda_host::driver::synchronize(s)
    })
    .py_err(py)?;
    Ok(desc)
}

/// `as_cuda_array` for an already probed object.
fn foreign_from(py: Python<'_>, obj: &Bound<'_, PyAny>, sync: bool) -> PyResult<PyForeignArray> {
    let mut scratch = Scratch::new();
    let (desc, dl) = match interface::probe(obj, "obj", &mut scratch)? {
        Found::Desc(d) => (d, None),
        Found::Dlpack(o) => {
            // The producer orders its work before the legacy default stream.
            let (d, owner) = dlpack::import(&o, Some(1), "obj")?;
            (d, Some(owner))
        }
        Found::Host(_) => {
            return Err(PyTypeError::new_err(format!(
                "argument `obj`: {} is a host array; as_cuda_array needs device memory \
                 (use ferrocuda.DeviceArray.from_numpy to copy it)",
                type_name(obj)
            )))
        }
    };
    let desc = import_sync(py, desc, sync)?;
    Ok(PyForeignArray {
        desc,
        owner: obj.clone().unbind(),
        _dlpack: dl,
    })
}

/// Wraps ``obj`` — any object exporting ``__cuda_array_interface__``,
/// ``__sycl_usm_array_interface__`` or DLPack — as a :class:`ForeignArray` that keeps ``obj``
/// alive.
///
/// With ``sync=True`` (and the default sync mode), a producer stream named by the interface is
/// synchronized now, as Numba does, and kept as the array's stream; with ``sync=False`` it is
/// dropped and launches do no ordering for this array.
#[pyfunction]
#[pyo3(signature = (obj, sync = true))]
pub fn as_cuda_array(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    sync: bool,
) -> PyResult<PyForeignArray> {
    foreign_from(py, obj, sync)
}

/// A :class:`ForeignArray` from an interface dict ``desc`` (``__cuda_array_interface__``
/// format), keeping ``owner`` alive; ``sync`` as in :func:`as_cuda_array`.
#[pyfunction]
#[pyo3(signature = (desc, owner = None, sync = true))]
pub fn from_cuda_array_interface(
    py: Python<'_>,
    desc: &Bound<'_, PyAny>,
    owner: Option<&Bound<'_, PyAny>>,
    sync: bool,
) -> PyResult<PyForeignArray> {
    let mut scratch = Scratch::new();
    let d = interface::read_interface(desc, Source::Cuda, &mut scratch)
        .map_err(|f| f.into_py(py, "desc"))?;
    let d = import_sync(py, d, sync)?;
    Ok(PyForeignArray {
        desc: d,
        owner: owner
            .map(|o| o.clone().unbind())
            .unwrap_or_else(|| py.None()),
        _dlpack: None,
    })
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

/// Registers the classes and functions of this module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeviceArray>()?;
    m.add_class::<PyForeignArray>()?;
    m.add_function(wrap_pyfunction!(as_cuda_array, m)?)?;
    m.add_function(wrap_pyfunction!(from_cuda_array_interface, m)?)?;
    Ok(())
}
