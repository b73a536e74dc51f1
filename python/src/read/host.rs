//! Host (NumPy) arrays: read into the host crate's description ([`host_view`]), staged
//! through the host crate's one staging path ([`HostView`] is a
//! [`HostArray`]), and NumPy dtype-likes ([`parse_dtype`]).

use ferrocuda_abi::DType;
use ferrocuda_host::array::{AnyDeviceArray, HostArray, HostArrayMut};
use ferrocuda_host::interop::cai::{self, ArrayDesc};
use ferrocuda_host::{Error, Protocol, Result, StreamRef};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

use super::cai::{read_interface, Scratch};
use crate::errors::IntoPyResult;
use crate::util::{numpy_attr, StrBuf};

/// A host array prepared for copying: C-contiguous, aligned, with its `__array_interface__`.
pub struct HostView<'py> {
    /// The NumPy array (possibly a contiguous copy of the argument).
    pub array: Bound<'py, PyAny>,
    /// Its description (host pointer).
    pub desc: ArrayDesc,
}

/// Reads a host array: `numpy.require(numpy.asarray(obj), requirements="CA")` (or
/// `numpy.from_dlpack(obj)` for a CPU DLPack producer NumPy cannot read otherwise) and its
/// `__array_interface__`.
pub fn host_view<'py>(obj: &Bound<'py, PyAny>, arg: &str) -> PyResult<HostView<'py>> {
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
    let desc = read_interface(&iface, Protocol::NumPy, &mut Scratch::new())
        .map_err(|f| f.into_py(py, arg))?;
    Ok(HostView { array: arr, desc })
}

impl HostView<'_> {
    /// The elements, as bytes.
    ///
    /// # Safety
    ///
    /// The GIL must be held for as long as the slice is used (no Python code may resize or
    /// free the array meanwhile).
    unsafe fn bytes(&self) -> &[u8] {
        let n = self.desc.size() * self.desc.itemsize();
        if n == 0 {
            return &[];
        }
        // SAFETY: `array` is a live, C-contiguous, aligned NumPy array of `size()` elements
        // (a validated interface), referenced by `self`; the caller holds the GIL.
        unsafe { std::slice::from_raw_parts(self.desc.ptr() as usize as *const u8, n) }
    }
}

/// Staged with the GIL held: Python code cannot modify the source during the copies.
impl HostArray for HostView<'_> {
    fn desc(&self) -> Result<ArrayDesc> {
        Ok(self.desc)
    }

    fn upload(&self, device: usize, stream: StreamRef) -> Result<AnyDeviceArray> {
        let d = &self.desc;
        let dev = AnyDeviceArray::empty(d.dtype(), d.shape(), device, stream)?;
        // SAFETY: a `HostView` lives only while its Python thread holds the GIL.
        dev.copy_from_host_bytes(unsafe { self.bytes() })?;
        Ok(dev)
    }
}

/// Copies back into [`HostView::array`] (the caller copies on to the argument when that is
/// another array).
impl HostArrayMut for HostView<'_> {
    fn download(&mut self, src: &AnyDeviceArray) -> Result<()> {
        let n = self.desc.size() * self.desc.itemsize();
        if self.desc.readonly() {
            return Err(Error::value("host array is read-only"));
        }
        let dst = if n == 0 {
            &mut []
        } else {
            // SAFETY: the array is writable (checked above), C-contiguous and aligned, holds
            // `n` bytes, and the GIL is held: nothing else touches it during the copy.
            unsafe { std::slice::from_raw_parts_mut(self.desc.ptr() as usize as *mut u8, n) }
        };
        src.copy_to_host_bytes(dst)
    }
}

/// The element type named by a NumPy dtype-like (`"float32"`, `"<f4"`, `numpy.float32`,
/// `numpy.dtype("f4")`, …).
pub fn parse_dtype(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    let py = obj.py();
    if let Ok(s) = obj.cast::<PyString>() {
        let mut buf = StrBuf::new();
        let s = buf.read(s)?;
        if let Some(d) = DType::from_name(s) {
            return Ok(d);
        }
    }
    let np_dtype = numpy_attr(py, "dtype")?;
    let dt = np_dtype.call1((obj,)).map_err(|e| {
        PyTypeError::new_err(format!(
            "not a dtype: {} ({e})",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })?;
    let ts = dt.getattr(intern!(py, "str"))?;
    let ts = ts.cast::<PyString>()?;
    let mut buf = StrBuf::new();
    let ts = buf.read(ts)?;
    cai::parse_typestr(Protocol::Cuda, ts)
        .map_err(|e| Error::type_error(format!("unsupported dtype: {}", e.message())))
        .py_err(py)
}
