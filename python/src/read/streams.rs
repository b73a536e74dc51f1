//! Stream and sync-mode arguments.
//!
//! A `stream=` argument may be:
//!
//! | value | stream |
//! | --- | --- |
//! | `None` | none given: the launch goes on the producers' common stream, else the legacy default stream |
//! | `1`, `2` | the legacy / per-thread default stream (the CAI's encoding) |
//! | any other positive `int` | a `CUstream` handle |
//! | `0` | refused (`ValueError`): ambiguous, as in the CAI |
//! | an object with `__cuda_stream__()` | its handle (`(version, handle)`; `cuda.core`, recent CuPy/PyTorch) |
//! | an object with `cuda_stream` | PyTorch's `torch.cuda.Stream` |
//! | an object with `ptr` | CuPy's `cupy.cuda.Stream` |
//! | an object with `handle` | Numba's stream (`handle.value`, or `int(handle)`) |
//!
//! Stream *objects* are detected by attribute, never by importing their library. For them a
//! handle of 0 is the null stream, which in the driver API is the legacy default stream, so
//! it maps to `1` (CuPy's `Stream.null`, PyTorch's default stream and Numba's default stream
//! all report 0).
//!
//! A `sync=` argument: `None` (the process default from
//! `FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC`: unset or `1` = default, `0` = off, `event`),
//! `True` or `"default"` (host-synchronize foreign producer streams, as Numba), `"event"`
//! (order them with events, never block the host), `False` or `"off"` (no ordering).

use ferrocuda_host::{StreamRef, SyncMode};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString, PyTuple};

use crate::errors::to_py;
use crate::util::{read_int, type_name, StrBuf};

/// A stream from a CAI-style integer (`0` refused: [`StreamRef::from_int`]).
pub fn stream_from_int(py: Python<'_>, v: i128) -> PyResult<StreamRef> {
    StreamRef::from_int(v).map_err(|e| to_py(py, e.with_arg("stream")))
}

/// A stream from a raw `CUstream` handle of a stream object (`0` = the null stream = legacy).
fn stream_from_handle(py: Python<'_>, v: i128) -> PyResult<StreamRef> {
    if v == 0 {
        return Ok(StreamRef::Legacy);
    }
    stream_from_int(py, v)
}

fn handle_int(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<i128> {
    if obj.is_none() {
        return Ok(0);
    }
    read_int(obj)?.ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{what}: the stream handle is a {}, not an int",
            type_name(obj)
        ))
    })
}

/// Normalizes a `stream=` argument (see the module documentation).
pub fn parse_stream(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<StreamRef>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    let py = obj.py();
    let what = "argument `stream`";
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what}: expected None, an int or a stream object, got bool"
        )));
    }
    if obj.is_instance_of::<PyInt>() {
        let v = read_int(obj)?.unwrap_or(0);
        return stream_from_int(py, v).map(Some);
    }
    if let Some(f) = obj.getattr_opt(intern!(py, "__cuda_stream__"))? {
        let t = f.call0()?;
        let t = t.cast::<PyTuple>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{what}: __cuda_stream__() must return a (version, handle) tuple"
            ))
        })?;
        if t.len() != 2 {
            return Err(PyTypeError::new_err(format!(
                "{what}: __cuda_stream__() must return a (version, handle) tuple"
            )));
        }
        let h = handle_int(&t.get_item(1)?, what)?;
        return stream_from_handle(py, h).map(Some);
    }
    for attr in [
        intern!(py, "cuda_stream"), // torch.cuda.Stream
        intern!(py, "ptr"),         // cupy.cuda.Stream
    ] {
        if let Some(h) = obj.getattr_opt(attr)? {
            let h = handle_int(&h, what)?;
            return stream_from_handle(py, h).map(Some);
        }
    }
    if let Some(h) = obj.getattr_opt(intern!(py, "handle"))? {
        // Numba: a ctypes c_void_p (`.value`, None for 0) or, with the NVIDIA bindings, an
        // object that converts with int().
        let v = match h.getattr_opt(intern!(py, "value"))? {
            Some(v) => v,
            None => h,
        };
        let v = if v.is_none() || v.is_instance_of::<PyInt>() {
            v
        } else {
            v.call_method0(intern!(py, "__int__"))?
        };
        let h = handle_int(&v, what)?;
        return stream_from_handle(py, h).map(Some);
    }
    // NumPy integers and other `__index__` objects: a CAI-style integer.
    if let Some(v) = read_int(obj)? {
        return stream_from_int(py, v).map(Some);
    }
    Err(PyTypeError::new_err(format!(
        "{what}: expected None, an int, or a stream object (with __cuda_stream__, \
         cuda_stream, ptr or handle), got {}",
        type_name(obj)
    )))
}

/// Normalizes a `sync=` argument; `None` = the process default.
pub fn parse_sync(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<SyncMode>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Some(if b.is_true() {
            SyncMode::Default
        } else {
            SyncMode::Off
        }));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        let mut buf = StrBuf::new();
        return match buf.read(s)? {
            "default" | "1" => Ok(Some(SyncMode::Default)),
            "event" => Ok(Some(SyncMode::Event)),
            "off" | "0" => Ok(Some(SyncMode::Off)),
            other => Err(PyValueError::new_err(format!(
                "argument `sync`: {other:?} is not a sync mode; use None, True, False, \
                 'default', 'event' or 'off'"
            ))),
        };
    }
    // An enum member whose value is one of the strings (``ferrocuda.SyncMode``).
    if let Some(v) = obj.getattr_opt(intern!(obj.py(), "value"))? {
        if v.is_instance_of::<PyString>() {
            return parse_sync(Some(&v));
        }
    }
    Err(PyTypeError::new_err(format!(
        "argument `sync`: expected None, a bool, 'default'/'event'/'off' or a SyncMode, got {}",
        type_name(obj)
    )))
}

/// The name of a sync mode, as `sync=` accepts it.
pub fn sync_name(m: SyncMode) -> &'static str {
    match m {
        SyncMode::Default => "default",
        SyncMode::Event => "event",
        SyncMode::Off => "off",
    }
}
