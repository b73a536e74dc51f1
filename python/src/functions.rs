//! The module-level Python functions of `ferrocuda._ferrocuda`.

use ferrocuda_host::array::import;
use ferrocuda_host::runtime;
use ferrocuda_host::{ArrayDesc, Protocol, StreamRef};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::args::{generic_cuda, probe, ArgScratch, Found};
use crate::arrays::pending::{pending, release_completed};
use crate::arrays::{PyDeviceArray, PyForeignArray};
use crate::dlpack;
use crate::errors::IntoPyResult;
use crate::read::cai::{read_interface, Scratch};
use crate::read::fast;
use crate::read::host::host_view;
use crate::read::streams::{parse_stream, parse_sync, sync_name};
use crate::util::type_name;

/// `True` when a CUDA driver loads and reports at least one device. Never raises.
#[pyfunction]
pub fn driver_available(py: Python<'_>) -> bool {
    py.detach(runtime::is_available)
}

/// Number of CUDA devices. Raises `CudaError` when no driver can be loaded.
#[pyfunction]
pub fn device_count(py: Python<'_>) -> PyResult<usize> {
    py.detach(runtime::device_count).py_err(py)
}

/// The properties of `device` that decide how fast a kernel runs on it, as a dict:
/// ``compute_capability`` ``(major, minor)``, ``multiprocessors``, ``total_memory`` (bytes)
/// and ``max_shared_per_block`` (the opt-in maximum of dynamic shared memory, bytes). What
/// :func:`ferrocuda.autotune` keys its results on. Raises `CudaError` without a driver or
/// for a device that does not exist.
#[pyfunction]
#[pyo3(signature = (device = 0))]
pub fn device_properties(py: Python<'_>, device: usize) -> PyResult<Bound<'_, PyDict>> {
    let p = py
        .detach(|| runtime::device_properties(device))
        .py_err(py)?;
    let d = PyDict::new(py);
    d.set_item("compute_capability", p.compute_capability)?;
    d.set_item("multiprocessors", p.multiprocessors)?;
    d.set_item("total_memory", p.total_memory)?;
    d.set_item("max_shared_per_block", p.max_shared_per_block)?;
    Ok(d)
}

/// The directory ferrocuda keeps its files in (``$FERROCUDA_HOME``, else
/// ``$XDG_CACHE_HOME/ferrocuda``, else ``~/.cache/ferrocuda``); not created here.
#[pyfunction]
pub fn _home_dir() -> std::path::PathBuf {
    crate::project::home()
}

/// Number of CUDA events in ferrocuda's pool for `device` (for leak tests: the pool holds
/// events for reuse, it should not grow with the number of launches).
#[pyfunction]
#[pyo3(signature = (device = 0))]
pub fn _pooled_events(py: Python<'_>, device: usize) -> PyResult<usize> {
    py.detach(|| runtime::pooled_events(device)).py_err(py)
}

/// Number of DLPack capsules still held for kernels that may be running (for tests).
#[pyfunction]
pub fn _pending_releases(py: Python<'_>) -> usize {
    pending(py)
}

/// `[(stage, total ns, marks)]` of the launch path since the last call (a profiling build's
/// stage timing; see `ferrocuda_host::timing`). Resets the totals.
#[cfg(feature = "launch-timing")]
#[pyfunction]
pub fn _launch_timing() -> Vec<(&'static str, f64, u64)> {
    ferrocuda_host::timing::take()
}

/// The `dict` describing a validated array (see `validate_interface`).
fn describe<'py>(
    py: Python<'py>,
    desc: &ArrayDesc,
    protocol: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("protocol", protocol)?;
    d.set_item("version", desc.version())?;
    d.set_item("dtype", desc.dtype().name())?;
    d.set_item("typestr", desc.dtype().typestr())?;
    d.set_item("itemsize", desc.itemsize())?;
    d.set_item("shape", PyTuple::new(py, desc.shape())?)?;
    d.set_item("strides", PyTuple::new(py, desc.byte_strides())?)?;
    d.set_item("size", desc.size())?;
    d.set_item("ptr", desc.ptr())?;
    d.set_item("readonly", desc.readonly())?;
    d.set_item("c_contiguous", desc.is_c_contiguous())?;
    d.set_item("stream", desc.stream().map(|s| s.as_raw()))?;
    d.set_item("byte_range", desc.byte_range())?;
    Ok(d)
}

/// Validates the array interface of `obj` without launching anything (no GPU needed) and
/// returns a dict describing the array: ``protocol``, ``version``, ``dtype``, ``typestr``,
/// ``itemsize``, ``shape``, ``strides`` (bytes, always filled), ``size``, ``ptr``,
/// ``readonly``, ``c_contiguous``, ``stream`` (CAI integer or ``None``) and ``byte_range``
/// (``(lo, hi)`` or ``None`` for empty arrays).
///
/// Raises exactly what a kernel launch would raise for the same object as argument `name`.
/// DLPack producers are asked for a capsule with ``stream=None`` (the producer orders its
/// work before the legacy default stream).
#[pyfunction]
#[pyo3(signature = (obj, name = "x"))]
pub fn validate_interface<'py>(
    obj: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let py = obj.py();
    match probe(obj, name, &mut ArgScratch::new())? {
        Found::Desc(desc) => {
            let protocol = if obj.is_instance_of::<PyDeviceArray>()
                || obj.is_instance_of::<PyForeignArray>()
            {
                "ferrocuda"
            } else {
                desc.protocol().key()
            };
            describe(py, &desc, protocol)
        }
        Found::Dlpack(o) => {
            let (desc, _owner) = dlpack::import(&o, None, name)?;
            describe(py, &desc, Protocol::DLPack.key())
        }
        Found::Host(o) => {
            let view = host_view(&o, name)?;
            describe(py, &view.desc, Protocol::NumPy.key())
        }
    }
}

/// The description of `obj` read through its `__cuda_array_interface__` only (never a fast
/// path): the reference the fast paths are tested against.
#[pyfunction]
#[pyo3(signature = (obj, name = "x"))]
pub fn _describe_generic<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    let py = obj.py();
    match generic_cuda(obj, name, fast::kind_of(obj), &mut ArgScratch::new())? {
        Some(d) => describe(py, &d, Protocol::Cuda.key()),
        None => Err(PyTypeError::new_err(format!(
            "argument `{name}`: {} has no __cuda_array_interface__",
            type_name(obj)
        ))),
    }
}

/// Which producer fast paths are on: ``(cupy, torch)``.
#[pyfunction]
pub fn _fast_paths() -> PyResult<(bool, bool)> {
    fast::status()
}

/// Where the CuPy fast path reads CuPy's current stream: ``"capi"`` (the C function CuPy's
/// own getter calls) or ``"python"`` (``cupy.cuda.get_current_stream().ptr``); for
/// diagnostics (looked up on first use, which imports CuPy).
#[pyfunction]
pub fn _cupy_stream_source(py: Python<'_>) -> &'static str {
    fast::cupy_stream_source(py)
}

/// How the torch fast path reads exact ``torch.Tensor`` arguments: ``"exchange"`` (torch's
/// DLPack C exchange API, ``torch.Tensor.__dlpack_c_exchange_api__``: one C call per tensor
/// and one for the current stream) or ``"attributes"`` (Python attribute reads, for a torch
/// without it or with ``FERROCUDA_TORCH_EXCHANGE=0``); for diagnostics (imports torch).
#[pyfunction]
pub fn _torch_read_source(py: Python<'_>) -> PyResult<&'static str> {
    py.import("torch")?;
    fast::torch_read_source(py)
}

/// ``True`` when ``obj`` exposes ``__cuda_array_interface__``: ``hasattr(obj,
/// "__cuda_array_interface__")``, as Numba's ``numba.cuda.is_cuda_array``. DLPack-only objects
/// (JAX arrays) and SYCL USM arrays are not CUDA arrays by this test, although launchers take
/// them. Like ``hasattr``, the attribute is read: a getter that raises ``AttributeError`` (a
/// torch tensor on the CPU) gives ``False``, any other exception propagates (a torch tensor
/// that requires grad raises ``RuntimeError``). No GPU needed.
#[pyfunction]
pub fn is_cuda_array(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    obj.hasattr(pyo3::intern!(obj.py(), "__cuda_array_interface__"))
}

/// `as_cuda_array` for an already probed object.
fn foreign_from(py: Python<'_>, obj: &Bound<'_, PyAny>, sync: bool) -> PyResult<PyForeignArray> {
    let (desc, dl) = match probe(obj, "obj", &mut ArgScratch::new())? {
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
    let desc = py.detach(|| import(desc, sync)).py_err(py)?;
    Ok(PyForeignArray::new(desc, obj.clone().unbind(), dl))
}

/// Wraps ``obj`` — any object exporting ``__cuda_array_interface__``,
/// ``__sycl_usm_array_interface__`` or DLPack — as a :class:`ForeignArray` that keeps ``obj``
/// alive.
///
/// With ``sync=True``, a producer stream named by the interface is kept as the array's stream and
/// (in the default sync mode) synchronized now, as Numba does; with ``sync=False`` it is dropped
/// and launches do no ordering for this array.
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
    let d = read_interface(desc, Protocol::Cuda, &mut Scratch::new())
        .map_err(|f| f.into_py(py, "desc"))?;
    let d = py.detach(|| import(d, sync)).py_err(py)?;
    let owner = owner
        .map(|o| o.clone().unbind())
        .unwrap_or_else(|| py.None());
    Ok(PyForeignArray::new(d, owner, None))
}

/// Normalizes a stream argument to its CAI integer (``None`` stays ``None``): the function
/// every launcher applies to ``stream=``. Raises for ``0``, negative or oversized integers,
/// ``bool``, and objects that are no stream.
#[pyfunction]
#[pyo3(signature = (stream))]
pub fn normalize_stream(stream: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    Ok(parse_stream(Some(stream))?.map(StreamRef::as_raw))
}

/// The sync mode a ``sync=`` argument selects, as a string (``'default'``, ``'event'`` or
/// ``'off'``); ``None`` gives the process default (``FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC``).
#[pyfunction]
#[pyo3(signature = (sync = None))]
pub fn normalize_sync(py: Python<'_>, sync: Option<&Bound<'_, PyAny>>) -> PyResult<&'static str> {
    let m = match parse_sync(sync)? {
        Some(m) => m,
        None => ferrocuda_host::launch::default_sync_mode().py_err(py)?,
    };
    Ok(sync_name(m))
}

/// Blocks until all work on `stream` (default: the legacy default stream) of `device` is done.
/// Also releases DLPack capsules whose kernels have completed. Raises `NotImplementedError`
/// while `stream` is capturing a CUDA graph (or is the legacy stream while a blocking stream
/// captures), which a synchronization would invalidate.
#[pyfunction]
#[pyo3(signature = (stream = None, device = 0))]
pub fn synchronize(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    device: usize,
) -> PyResult<()> {
    let s = parse_stream(stream)?.unwrap_or(StreamRef::Legacy);
    py.detach(|| runtime::synchronize(device, s)).py_err(py)?;
    release_completed(py);
    Ok(())
}
