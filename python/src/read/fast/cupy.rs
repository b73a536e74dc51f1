//! The CuPy fast path: exact `cupy.ndarray`, read as its getter (`cupy/_core/core.pyx`,
//! `ndarray.__cuda_array_interface__`) computes the interface: `shape` (for 1-D arrays
//! `(size,)`, as `size` is a stored int and `shape` a tuple built per access); strides `None`
//! when the array's `_c_contiguous` flag is set, else `strides`; pointer `data.ptr` (0 for
//! empty arrays); never read-only; with `cupy._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION` 3 the
//! stream is CuPy's current stream, read once per launch through the C function the getter
//! itself calls (`get_current_stream_ptr`, from the table Cython exports for `cimport`, when
//! its signature is a known one; else `cupy.cuda.get_current_stream().ptr`); CuPy's null stream
//! (pointer 0) is exported by the getter as CuPy's default stream (legacy or per-thread, by
//! CuPy's configuration), which the fast path learns from the getter the first time it meets
//! the null stream; with version 2 there is no stream; any other version falls back to the
//! getter (which raises its own error).

use std::sync::atomic::Ordering;

use ferrocuda_abi::{layout, DType};
use ferrocuda_host::interop::cai::{self, ArrayDesc, Protocol, MAX_NDIM};
use ferrocuda_host::StreamRef;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

use super::{dtype_code, dtype_of_code, int_tuple, CallState, Layout, CUPY_NULL, CUPY_ON, DTYPES};
use crate::util::StrBuf;

/// The element type of a NumPy dtype object (CuPy's `dtype`), from its typestr.
fn numpy_dtype(dtype: &Bound<'_, PyAny>) -> Option<DType> {
    if let Some(c) = DTYPES.get(dtype) {
        return dtype_of_code(c);
    }
    let py = dtype.py();
    let d = dtype.getattr(intern!(py, "str")).ok().and_then(|s| {
        let s = s.cast_into::<PyString>().ok()?;
        let mut buf = StrBuf::new();
        let s = buf.read(&s).ok()?;
        cai::parse_typestr(Protocol::Cuda, s).ok()
    });
    DTYPES.insert(dtype, dtype_code(d));
    d
}

// ---------------------------------------------------------------------------------------
// CuPy.

/// CuPy's C function `get_current_stream_ptr()` — the one its `__cuda_array_interface__` getter
/// calls — from the table of C functions that Cython exports for `cimport`
/// (`cupy_backends.cuda.stream.__pyx_capi__`, one capsule per function, named by its C
/// signature). Used only when the signature is one of `KNOWN`; `0` when absent or unknown.
static CUPY_STREAM_FN: PyOnceLock<usize> = PyOnceLock::new();

fn cupy_stream_fn_lookup(py: Python<'_>) -> Option<usize> {
    const KNOWN: [&[u8]; 4] = [
        b"intptr_t (void)",
        b"intptr_t (void) except *",
        b"intptr_t (void) except? -1",
        b"intptr_t (void) noexcept",
    ];
    let cap = py
        .import("cupy_backends.cuda.stream")
        .ok()?
        .getattr("__pyx_capi__")
        .ok()?
        .get_item("get_current_stream_ptr")
        .ok()?;
    // SAFETY: `cap` is a live object; the capsule calls only read it (and check its type).
    unsafe {
        if pyo3::ffi::PyCapsule_CheckExact(cap.as_ptr()) == 0 {
            return None;
        }
        let name = pyo3::ffi::PyCapsule_GetName(cap.as_ptr());
        if name.is_null() {
            let _ = PyErr::take(py);
            return None;
        }
        if !KNOWN.contains(&std::ffi::CStr::from_ptr(name).to_bytes()) {
            return None;
        }
        let f = pyo3::ffi::PyCapsule_GetPointer(cap.as_ptr(), name);
        if f.is_null() {
            let _ = PyErr::take(py);
            return None;
        }
        // The function lives in CuPy's extension module, which is never unloaded; keep the
        // capsule too.
        std::mem::forget(cap.unbind());
        Some(f as usize)
    }
}

/// The address of CuPy's `get_current_stream_ptr` (looked up once), `0` when unusable.
fn cupy_stream_fn(py: Python<'_>) -> usize {
    *CUPY_STREAM_FN.get_or_init(py, || cupy_stream_fn_lookup(py).unwrap_or(0))
}

/// CuPy's current stream pointer through its C function (see [`CUPY_STREAM_FN`]), or `None`
/// to use the Python API.
fn cupy_current_stream_capi(py: Python<'_>) -> Option<u64> {
    let f = cupy_stream_fn(py);
    if f == 0 {
        return None;
    }
    // SAFETY: `f` is CuPy's `intptr_t get_current_stream_ptr(void)`, its signature checked
    // against the capsule's name; it needs the GIL, which `py` proves. A Cython function
    // reports an error by setting the Python error indicator, checked right after.
    let p = unsafe {
        let f: unsafe extern "C" fn() -> isize = std::mem::transmute(f);
        f()
    };
    if PyErr::take(py).is_some() {
        return None;
    }
    u64::try_from(p).ok()
}

/// Where the CuPy fast path reads CuPy's current stream: `"capi"` (CuPy's C function) or
/// `"python"` (`cupy.cuda.get_current_stream().ptr`), for diagnostics.
pub fn cupy_stream_source(py: Python<'_>) -> &'static str {
    if cupy_stream_fn(py) == 0 {
        "python"
    } else {
        "capi"
    }
}

/// `(export version, stream)` as CuPy's getter computes them now for `obj`, or `None` to fall
/// back.
pub(super) fn cupy_stream(obj: &Bound<'_, PyAny>) -> Option<(u8, Option<StreamRef>)> {
    let py = obj.py();
    static UTIL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static CURRENT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let util = UTIL
        .get_or_try_init(py, || {
            py.import("cupy._util").map(|m| m.into_any().unbind())
        })
        .ok()?;
    let ver: i64 = util
        .bind(py)
        .getattr(intern!(py, "CUDA_ARRAY_INTERFACE_EXPORT_VERSION"))
        .ok()?
        .extract()
        .ok()?;
    match ver {
        2 => Some((2, None)),
        3 => {
            let ptr: u64 = match cupy_current_stream_capi(py) {
                Some(p) => p,
                None => {
                    let current = CURRENT
                        .get_or_try_init(py, || {
                            py.import("cupy.cuda")
                                .and_then(|m| m.getattr("get_current_stream"))
                                .map(Bound::unbind)
                        })
                        .ok()?;
                    current
                        .bind(py)
                        .call0()
                        .ok()?
                        .getattr(intern!(py, "ptr"))
                        .ok()?
                        .extract()
                        .ok()?
                }
            };
            // 0 is CuPy's null stream, which the getter exports as CuPy's default stream
            // (legacy or per-thread, by CuPy's configuration): learnt from the getter itself
            // the first time it is seen, then remembered.
            let ptr = match (ptr, CUPY_NULL.load(Ordering::Relaxed)) {
                (0, 0) => {
                    let s: u64 = obj
                        .getattr(intern!(py, "__cuda_array_interface__"))
                        .ok()?
                        .get_item(intern!(py, "stream"))
                        .ok()?
                        .extract()
                        .ok()?;
                    if s == 0 {
                        return None;
                    }
                    CUPY_NULL.store(s, Ordering::Relaxed);
                    s
                }
                (0, null) => null,
                (p, _) => p,
            };
            Some((3, StreamRef::from_cai(ptr)))
        }
        _ => None,
    }
}

/// The pointer and layout of a CuPy array (`None` to fall back).
pub(super) fn cupy_layout(obj: &Bound<'_, PyAny>, l: &mut Layout) -> Option<()> {
    let py = obj.py();
    // 1-D (the common case): `size` is a stored int, where `shape` builds a tuple each time.
    let ndim: usize = obj.getattr(intern!(py, "ndim")).ok()?.extract().ok()?;
    l.n = if ndim == 1 {
        l.shape[0] = obj.getattr(intern!(py, "size")).ok()?.extract().ok()?;
        1
    } else {
        int_tuple(&obj.getattr(intern!(py, "shape")).ok()?, &mut l.shape)?
    };
    let c_contiguous = match obj.getattr(intern!(py, "_c_contiguous")) {
        Ok(f) => f.is_truthy().ok()?,
        Err(_) => {
            // Not the CuPy this path was written for: use the getter from now on.
            CUPY_ON.store(false, Ordering::Relaxed);
            return None;
        }
    };
    l.strided = !c_contiguous;
    if l.strided {
        let m = int_tuple(&obj.getattr(intern!(py, "strides")).ok()?, &mut l.strides)?;
        if m != l.n {
            return None;
        }
    }
    let size = layout::element_count(l.shape())?;
    l.ptr = if size > 0 { cupy_data_ptr(obj)? } else { 0 };
    Some(())
}

/// `obj.data.ptr` of a CuPy array: its data pointer (`None` when it cannot be read).
fn cupy_data_ptr(obj: &Bound<'_, PyAny>) -> Option<u64> {
    let py = obj.py();
    obj.getattr(intern!(py, "data"))
        .ok()?
        .getattr(intern!(py, "ptr"))
        .ok()?
        .extract()
        .ok()
}

/// Whether CuPy array `obj` still has the shape and data pointer of `desc` (its description
/// at bind), by the fewest reads that see every change CuPy's public API can make to an
/// existing array; `None` when an attribute cannot be read.
///
/// * The `shape` setter (an in-place reshape): it keeps the size and derives the strides from
///   the new shape, so a 1-D array can only change rank (`ndim` is read) and an N-D array is
///   compared by `shape`.
/// * `MemoryPointer.__iadd__` / `__isub__`, which move `data.ptr` in place (`p = a.data;
///   p += n` moves `a`): `data.ptr` is read.
///
/// `data` is read-only and CuPy has no in-place resize. Strides are not read: only private
/// attributes (`_strides`, `_set_shape_and_strides`) change them alone, and the bound launch
/// holds the `MemoryPointer` it bound (see `bind`), so even then the launch writes only bytes
/// of the allocation it checked at bind, which cannot be freed while it is bound.
pub(super) fn cupy_unchanged(obj: &Bound<'_, PyAny>, desc: &ArrayDesc) -> Option<bool> {
    let py = obj.py();
    let shape = desc.shape();
    let same_shape = if shape.len() == 1 {
        obj.getattr(intern!(py, "ndim"))
            .ok()?
            .extract::<usize>()
            .ok()?
            == 1
    } else {
        let mut now = [0usize; MAX_NDIM];
        let n = int_tuple(&obj.getattr(intern!(py, "shape")).ok()?, &mut now)?;
        now[..n] == *shape
    };
    if !same_shape {
        return Some(false);
    }
    if desc.byte_range().is_none() {
        // Empty at bind, and the same shape: still empty, nothing addressed.
        return Some(true);
    }
    Some(cupy_data_ptr(obj)? == desc.ptr())
}

pub(super) fn cupy(
    obj: &Bound<'_, PyAny>,
    state: &mut CallState,
    slot: &mut Option<ArrayDesc>,
) -> Option<()> {
    let py = obj.py();
    let dtype = numpy_dtype(&obj.getattr(intern!(py, "dtype")).ok()?)?;
    let mut l = Layout::new();
    cupy_layout(obj, &mut l)?;
    ferrocuda_host::mark!("py:   fast path: attribute reads");
    let (ver, stream) = match state.cupy {
        Some(s) => s,
        None => {
            let s = cupy_stream(obj)?;
            state.cupy = Some(s);
            s
        }
    };
    ferrocuda_host::mark!("py:   fast path: current stream");
    ArrayDesc::from_parts_into(
        slot,
        dtype,
        l.shape(),
        l.strides(),
        l.ptr,
        false,
        stream,
        ver,
    )
    .ok()
    .map(|_| ())
}
