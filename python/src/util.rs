//! Small helpers every other module uses: integers, short strings, tuples and lists, type
//! names for messages, NumPy attributes.

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyString, PyTuple};

/// The Python type name of `obj`, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// `repr(obj)`, for messages.
pub fn repr(obj: &Bound<'_, PyAny>) -> String {
    obj.repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// Reads a Python integer (or `__index__` object) as `i128`, saturating beyond `i128`
/// (validation then reports "does not fit"). `Ok(None)` for a value of the wrong type,
/// including `bool`.
pub fn read_int(obj: &Bound<'_, PyAny>) -> PyResult<Option<i128>> {
    if obj.is_instance_of::<PyBool>() {
        return Ok(None);
    }
    let int;
    let obj = if obj.is_instance_of::<PyInt>() {
        obj
    } else {
        // `operator.index`: NumPy integers and other `__index__` objects; no `float`.
        if obj.is_instance_of::<PyFloat>() || !obj.hasattr(intern!(obj.py(), "__index__"))? {
            return Ok(None);
        }
        // SAFETY: `obj` is a valid object; PyNumber_Index returns a new reference or NULL
        // with an exception set, which `from_owned_ptr_or_err` turns into `Err`.
        int = unsafe {
            Bound::from_owned_ptr_or_err(obj.py(), pyo3::ffi::PyNumber_Index(obj.as_ptr()))?
        };
        &int
    };
    match obj.extract::<i64>() {
        Ok(v) => return Ok(Some(i128::from(v))),
        Err(e) if !e.is_instance_of::<PyOverflowError>(obj.py()) => return Err(e),
        Err(_) => {}
    }
    match obj.extract::<i128>() {
        Ok(v) => Ok(Some(v)),
        Err(e) if !e.is_instance_of::<PyOverflowError>(obj.py()) => Err(e),
        Err(_) => {
            let negative = obj.lt(0)?;
            Ok(Some(if negative { i128::MIN } else { i128::MAX }))
        }
    }
}

/// Small strings without allocation: ASCII strings up to 32 characters are copied to a stack
/// buffer; anything else falls back to an owned copy.
pub struct StrBuf {
    buf: [u8; 32],
    len: usize,
    owned: Option<String>,
}

impl StrBuf {
    /// An empty buffer.
    pub const fn new() -> Self {
        StrBuf {
            buf: [0; 32],
            len: 0,
            owned: None,
        }
    }

    /// Reads `s` into the buffer and returns it.
    pub fn read<'a>(&'a mut self, s: &Bound<'_, PyString>) -> PyResult<&'a str> {
        // SAFETY: `s` is a str object; PyUnicode_GetLength fails only for non-str objects.
        let n = unsafe { pyo3::ffi::PyUnicode_GetLength(s.as_ptr()) };
        if n < 0 {
            return Err(PyErr::fetch(s.py()));
        }
        let n = n as usize;
        if n <= self.buf.len() {
            let mut ascii = true;
            for i in 0..n {
                // SAFETY: `i < len(s)`: PyUnicode_ReadChar cannot fail for an in-range index.
                let c = unsafe { pyo3::ffi::PyUnicode_ReadChar(s.as_ptr(), i as isize) };
                if c >= 0x80 {
                    ascii = false;
                    break;
                }
                self.buf[i] = c as u8;
            }
            if ascii {
                self.len = n;
                self.owned = None;
                // ASCII bytes are valid UTF-8.
                return std::str::from_utf8(&self.buf[..n])
                    .map_err(|e| PyTypeError::new_err(e.to_string()));
            }
        }
        // Lossy: a lone surrogate becomes U+FFFD, which validation then refuses with an
        // error naming the key (never a bare UnicodeEncodeError).
        self.owned = Some(s.to_string_lossy().into_owned());
        Ok(self.owned.as_deref().unwrap_or(""))
    }
}

impl Default for StrBuf {
    fn default() -> Self {
        Self::new()
    }
}

/// A tuple or list, as a sequence of items.
pub enum Seq<'py> {
    /// A tuple.
    Tuple(Bound<'py, PyTuple>),
    /// A list.
    List(Bound<'py, PyList>),
}

impl<'py> Seq<'py> {
    /// `v` as a sequence, if it is a tuple or a list.
    pub fn of(v: &Bound<'py, PyAny>) -> Option<Seq<'py>> {
        if let Ok(t) = v.cast::<PyTuple>() {
            Some(Seq::Tuple(t.clone()))
        } else if let Ok(l) = v.cast::<PyList>() {
            Some(Seq::List(l.clone()))
        } else {
            None
        }
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        match self {
            Seq::Tuple(t) => t.len(),
            Seq::List(l) => l.len(),
        }
    }

    /// `true` when there is no item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Item `i`.
    pub fn get(&self, i: usize) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Seq::Tuple(t) => t.get_item(i),
            Seq::List(l) => l.get_item(i),
        }
    }
}

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
