//! Reading array interfaces from Python objects.
//!
//! [`read_interface`] turns an interface dictionary (`__cuda_array_interface__`,
//! `__sycl_usm_array_interface__`, or NumPy's `__array_interface__` for host arrays) into a
//! [`RawInterface`] and validates it with [`cai::validate`]. Well-formed dictionaries are read
//! without a heap allocation: shape and strides go to stack arrays of [`MAX_NDIM`] entries,
//! short ASCII strings (every `typestr`) are copied to stack buffers, and keys are interned.
//!
//! Type rules applied while reading (the host crate applies the value rules):
//!
//! * the interface must be a `dict` (subclasses allowed; their `__getitem__` is not used)
//!   — anything else is a `TypeError`;
//! * integers (`version`, `shape`, `strides`, the pointer in `data`, `stream`, `offset`) are
//!   Python `int`s or objects with `__index__`, **never `bool`**: `True` is refused although
//!   `bool` is an `int` subclass — a `ValueError` naming the key;
//! * `shape`, `strides`, `data` and `descr` are tuples or lists (the specification says
//!   tuples; lists are tolerated), `data` has exactly two items and its second is a `bool`;
//! * `typestr` is a `str`;
//! * a `descr` field with a sub-array shape (a 3-item entry) is `NotImplementedError`.
//!
//! Every error names the argument and the key, e.g.
//! ``argument `a`: __cuda_array_interface__['shape']: expected a tuple of ints, got str``.

use std::borrow::Cow;

use ferrocuda_abi::DType;
use ferrocuda_host::cai::{self, ArrayDesc, Protocol, RawInterface, RawValue, MAX_NDIM};
use ferrocuda_host::Error;
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::arrays::{PyDeviceArray, PyForeignArray};
use crate::fast::{self, Kind};
use crate::{to_py, IntoPyResult};

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

/// Where an interface came from, for messages and for the units of `strides`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `__cuda_array_interface__`.
    Cuda,
    /// `__sycl_usm_array_interface__`.
    Sycl,
    /// NumPy's `__array_interface__` (host memory; read with the CAI's rules).
    Host,
}

impl Source {
    fn protocol(self) -> Protocol {
        match self {
            Source::Sycl => Protocol::SyclUsm,
            Source::Cuda | Source::Host => Protocol::Cuda,
        }
    }

    /// The attribute name.
    pub fn key(self) -> &'static str {
        match self {
            Source::Cuda => "__cuda_array_interface__",
            Source::Sycl => "__sycl_usm_array_interface__",
            Source::Host => "__array_interface__",
        }
    }
}

fn key_err(source: Source, key: &'static str, msg: impl Into<Cow<'static, str>>) -> Fail {
    Fail::Host(Error::value(msg).with_key(key).with_protocol(source.key()))
}

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

/// Looks up `key`: `Missing`, `None`, or the value.
fn get<'py>(
    d: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
) -> PyResult<RawValue<Bound<'py, PyAny>>> {
    Ok(match d.get_item(key)? {
        None => RawValue::Missing,
        Some(v) if v.is_none() => RawValue::None,
        Some(v) => RawValue::Value(v),
    })
}

/// Reads an integer key.
fn int_key(
    source: Source,
    key: &'static str,
    v: RawValue<Bound<'_, PyAny>>,
) -> Result<RawValue<i128>, Fail> {
    Ok(match v {
        RawValue::Missing => RawValue::Missing,
        RawValue::None => RawValue::None,
        RawValue::Value(v) => match read_int(&v)? {
            Some(i) if i == i128::MAX || i == i128::MIN => {
                return Err(key_err(
                    source,
                    key,
                    format!("{} is out of range", repr(&v)),
                ))
            }
            Some(i) => RawValue::Value(i),
            None => {
                return Err(key_err(
                    source,
                    key,
                    format!("expected an int, got {}", type_name(&v)),
                ))
            }
        },
    })
}

/// A tuple or list, as a sequence of items.
enum Seq<'py> {
    Tuple(Bound<'py, PyTuple>),
    List(Bound<'py, PyList>),
}

impl<'py> Seq<'py> {
    fn of(v: &Bound<'py, PyAny>) -> Option<Seq<'py>> {
        if let Ok(t) = v.cast::<PyTuple>() {
            Some(Seq::Tuple(t.clone()))
        } else if let Ok(l) = v.cast::<PyList>() {
            Some(Seq::List(l.clone()))
        } else {
            None
        }
    }

    fn len(&self) -> usize {
        match self {
            Seq::Tuple(t) => t.len(),
            Seq::List(l) => l.len(),
        }
    }

    fn get(&self, i: usize) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Seq::Tuple(t) => t.get_item(i),
            Seq::List(l) => l.get_item(i),
        }
    }
}

/// Integers of a tuple/list into `out` (stack) or `spill` (more than [`MAX_NDIM`] items: the
/// host reports the rank error).
fn int_seq<'s>(
    source: Source,
    key: &'static str,
    v: &Bound<'_, PyAny>,
    out: &'s mut [i128; MAX_NDIM],
    spill: &'s mut Vec<i128>,
) -> Result<&'s [i128], Fail> {
    let Some(seq) = Seq::of(v) else {
        return Err(key_err(
            source,
            key,
            format!("expected a tuple of ints, got {}", type_name(v)),
        ));
    };
    let n = seq.len();
    let read = |i: usize| -> Result<i128, Fail> {
        // An item's `__index__` may mutate a list while it is read.
        let item = seq.get(i).map_err(|_| {
            key_err(
                source,
                key,
                "the sequence changed size while it was being read",
            )
        })?;
        let v = read_int(&item)?;
        if v == Some(i128::MAX) || v == Some(i128::MIN) {
            return Err(key_err(
                source,
                key,
                format!("{key}[{i}] = {} is out of range", repr(&item)),
            ));
        }
        v.ok_or_else(|| {
            key_err(
                source,
                key,
                format!(
                    "expected a tuple of ints, got {} at index {i}",
                    type_name(&item)
                ),
            )
        })
    };
    if n <= MAX_NDIM {
        for (i, slot) in out.iter_mut().enumerate().take(n) {
            *slot = read(i)?;
        }
        Ok(&out[..n])
    } else {
        spill.clear();
        for i in 0..n {
            spill.push(read(i)?);
        }
        Ok(&spill[..])
    }
}

/// Storage for one read interface (stack only, unless `descr` has several fields or the rank
/// exceeds [`MAX_NDIM`]).
pub struct Scratch {
    shape: [i128; MAX_NDIM],
    strides: [i128; MAX_NDIM],
    shape_spill: Vec<i128>,
    strides_spill: Vec<i128>,
    typestr: StrBuf,
    descr_name: StrBuf,
    descr_type: StrBuf,
    /// Producer state read once per launch (CuPy's and torch's current streams).
    pub call: fast::CallState,
}

impl Scratch {
    /// Empty storage.
    pub fn new() -> Self {
        Scratch {
            shape: [0; MAX_NDIM],
            strides: [0; MAX_NDIM],
            shape_spill: Vec::new(),
            strides_spill: Vec::new(),
            typestr: StrBuf::new(),
            descr_name: StrBuf::new(),
            descr_type: StrBuf::new(),
            call: fast::CallState::default(),
        }
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// Reads and validates an interface dictionary.
pub fn read_interface(
    iface: &Bound<'_, PyAny>,
    source: Source,
    scratch: &mut Scratch,
) -> Result<ArrayDesc, Fail> {
    let py = iface.py();
    let Ok(d) = iface.cast::<PyDict>() else {
        return Err(Fail::Host(Error::type_error(format!(
            "{} must be a dict, got {}",
            source.key(),
            type_name(iface)
        ))));
    };
    let mut raw = RawInterface::new(source.protocol());

    raw.version = int_key(source, "version", get(d, intern!(py, "version"))?)?;

    raw.mask = match get(d, intern!(py, "mask"))? {
        RawValue::Missing => RawValue::Missing,
        RawValue::None => RawValue::None,
        RawValue::Value(_) => RawValue::Value(()),
    };

    let Scratch {
        shape,
        strides,
        shape_spill,
        strides_spill,
        typestr,
        descr_name,
        descr_type,
        call: _,
    } = scratch;

    raw.typestr = match get(d, intern!(py, "typestr"))? {
        RawValue::Missing => RawValue::Missing,
        RawValue::None => RawValue::None,
        RawValue::Value(v) => match v.cast::<PyString>() {
            Ok(s) => RawValue::Value(typestr.read(s)?),
            Err(_) => {
                return Err(key_err(
                    source,
                    "typestr",
                    format!("expected a str, got {}", type_name(&v)),
                ))
            }
        },
    };

    raw.shape = match get(d, intern!(py, "shape"))? {
        RawValue::Missing => RawValue::Missing,
        RawValue::None => RawValue::None,
        RawValue::Value(v) => RawValue::Value(int_seq(source, "shape", &v, shape, shape_spill)?),
    };

    raw.strides = match get(d, intern!(py, "strides"))? {
        RawValue::Missing => RawValue::Missing,
        RawValue::None => RawValue::None,
        RawValue::Value(v) => {
            RawValue::Value(int_seq(source, "strides", &v, strides, strides_spill)?)
        }
    };

    raw.data = match get(d, intern!(py, "data"))? {
        RawValue::Missing => RawValue::Missing,
        RawValue::None => RawValue::None,
        RawValue::Value(v) => {
            let bad = |what: String| {
                key_err(
                    source,
                    "data",
                    format!("expected a (pointer: int, readonly: bool) tuple, got {what}"),
                )
            };
            let Some(seq) = Seq::of(&v) else {
                return Err(bad(type_name(&v)));
            };
            if seq.len() != 2 {
                return Err(bad(format!("a sequence of {} items", seq.len())));
            }
            let p = seq.get(0)?;
            let Some(ptr) = read_int(&p)? else {
                return Err(bad(format!("{} as the pointer", type_name(&p))));
            };
            if ptr == i128::MAX || ptr == i128::MIN {
                return Err(key_err(
                    source,
                    "data",
                    format!("pointer {} is not an address", repr(&p)),
                ));
            }
            let ro = seq.get(1)?;
            let Ok(ro) = ro.cast::<PyBool>() else {
                return Err(bad(format!("{} as the readonly flag", type_name(&ro))));
            };
            RawValue::Value((ptr, ro.is_true()))
        }
    };

    // descr: usually [('', typestr)], read on the stack; other shapes are rare (errors).
    let descr_one: [(&str, &str); 1];
    let descr_many: Vec<(String, String)>;
    let descr_refs: Vec<(&str, &str)>;
    raw.descr = match get(d, intern!(py, "descr"))? {
        RawValue::Missing => RawValue::Missing,
        RawValue::None => RawValue::None,
        RawValue::Value(v) => {
            let bad = |what: String| {
                key_err(
                    source,
                    "descr",
                    format!("expected a list of (name: str, typestr: str) tuples, got {what}"),
                )
            };
            let Some(seq) = Seq::of(&v) else {
                return Err(bad(type_name(&v)));
            };
            let n = seq.len();
            let field = |i: usize| -> Result<(Bound<'_, PyString>, Bound<'_, PyString>), Fail> {
                let f = seq.get(i)?;
                let Some(fs) = Seq::of(&f) else {
                    return Err(bad(format!("{} at index {i}", type_name(&f))));
                };
                if fs.len() == 3 {
                    return Err(Fail::Host(
                        Error::unsupported(
                            "fields with a sub-array shape (3-item descr entries) are not supported",
                        )
                        .with_key("descr")
                        .with_protocol(source.key()),
                    ));
                }
                if fs.len() != 2 {
                    return Err(bad(format!("an entry of {} items at index {i}", fs.len())));
                }
                let name = fs.get(0)?;
                let ty = fs.get(1)?;
                match (name.cast_into::<PyString>(), ty.cast_into::<PyString>()) {
                    (Ok(a), Ok(b)) => Ok((a, b)),
                    // A nested (structured) type or a non-str name.
                    (Ok(_), Err(_)) => Err(Fail::Host(
                        Error::unsupported("structured element types are not supported")
                            .with_key("descr")
                            .with_protocol(source.key()),
                    )),
                    (Err(_), _) => Err(bad(format!("a non-str field name at index {i}"))),
                }
            };
            if n == 1 {
                let (a, b) = field(0)?;
                let a = descr_name.read(&a)?;
                let b = descr_type.read(&b)?;
                descr_one = [(a, b)];
                RawValue::Value(&descr_one[..])
            } else {
                let mut many = Vec::with_capacity(n);
                for i in 0..n {
                    let (a, b) = field(i)?;
                    many.push((a.to_cow()?.into_owned(), b.to_cow()?.into_owned()));
                }
                descr_many = many;
                descr_refs = descr_many
                    .iter()
                    .map(|(a, b)| (a.as_str(), b.as_str()))
                    .collect();
                RawValue::Value(&descr_refs[..])
            }
        }
    };

    raw.stream = match source {
        Source::Cuda => int_key(source, "stream", get(d, intern!(py, "stream"))?)?,
        // SYCL defines no stream; NumPy host arrays have none.
        Source::Sycl | Source::Host => RawValue::Missing,
    };
    raw.offset = int_key(source, "offset", get(d, intern!(py, "offset"))?)?;

    cai::validate(&raw).map_err(|e| match source {
        // Host arrays: name NumPy's protocol, not the CAI.
        Source::Host => Fail::Host(rename_protocol(e, "__array_interface__")),
        _ => Fail::Host(e),
    })
}

/// The same error, reported under another protocol name.
pub fn rename_protocol(e: Error, protocol: &'static str) -> Error {
    let out = Error::new(e.kind(), e.message().to_owned());
    match e.key() {
        Some(k) => out.with_key(k.to_owned()).with_protocol(protocol),
        None => out,
    }
}

/// What an argument turned out to be.
// The descriptor is kept inline on purpose: boxing it would allocate on every launch.
#[allow(clippy::large_enum_variant)]
pub enum Found<'py> {
    /// A device array with its validated interface (CAI, SYCL USM, or a ferrocuda array).
    Desc(ArrayDesc),
    /// An object to import through DLPack (`__dlpack__` with the launch stream).
    Dlpack(Bound<'py, PyAny>),
    /// A host array (NumPy, or anything NumPy converts and whose DLPack device is the CPU).
    Host(Bound<'py, PyAny>),
}

/// Adds "while reading `attr` of argument `arg`" to an exception raised by the producer
/// (as a PEP 678 note where Python supports it) and returns it.
pub fn annotate(py: Python<'_>, e: PyErr, attr: &str, arg: &str) -> PyErr {
    let note = format!("while reading {attr} of argument `{arg}` (ferrocuda)");
    let _ = e.value(py).call_method1(intern!(py, "add_note"), (note,));
    e
}

/// Finds out what `obj` is, reading its interface when it has one.
///
/// Order: ferrocuda arrays; `__cuda_array_interface__`; `__sycl_usm_array_interface__`;
/// `__dlpack__` (a host array when `__dlpack_device__()` says CPU); `__array_interface__`
/// (host). Anything else is a `TypeError` ("not an array").
pub fn probe<'py>(
    obj: &Bound<'py, PyAny>,
    arg: &str,
    scratch: &mut Scratch,
) -> PyResult<Found<'py>> {
    let py = obj.py();
    // The producer kind first (one lookup by type address): CuPy arrays and torch tensors
    // then skip the checks for ferrocuda's own classes.
    let kind = fast::kind_of(obj);
    if kind == Kind::Other {
        if let Ok(a) = obj.cast::<PyDeviceArray>() {
            return Ok(Found::Desc(*a.get().desc()));
        }
        if let Ok(a) = obj.cast::<PyForeignArray>() {
            return Ok(Found::Desc(*a.get().desc()));
        }
    }
    ferrocuda_host::mark!(15);
    if let Some(d) = fast::describe(obj, kind, arg, &mut scratch.call)? {
        ferrocuda_host::mark!(18);
        let state = scratch.call;
        let d = fast::self_check(obj, kind, d, || {
            let mut s = Scratch::new();
            s.call = state;
            generic_cuda(obj, arg, kind, &mut s)?.ok_or_else(|| {
                pyo3::exceptions::PyRuntimeError::new_err("__cuda_array_interface__ disappeared")
            })
        })?;
        ferrocuda_host::mark!(19);
        return Ok(Found::Desc(d));
    }
    if let Some(d) = generic_cuda(obj, arg, kind, scratch)? {
        return Ok(Found::Desc(d));
    }
    match obj.getattr_opt(intern!(py, "__sycl_usm_array_interface__")) {
        Ok(Some(iface)) => {
            return read_interface(&iface, Source::Sycl, scratch)
                .map(Found::Desc)
                .map_err(|f| f.into_py(py, arg))
        }
        Ok(None) => {}
        Err(e) => return Err(annotate(py, e, "__sycl_usm_array_interface__", arg)),
    }
    if obj.hasattr(intern!(py, "__dlpack__"))? {
        // NumPy arrays and CPU tensors export DLPack too: host arrays.
        if dlpack_device_is_cpu(obj)? {
            return Ok(Found::Host(obj.clone()));
        }
        return Ok(Found::Dlpack(obj.clone()));
    }
    if obj.hasattr(intern!(py, "__array_interface__"))? {
        return Ok(Found::Host(obj.clone()));
    }
    Err(PyTypeError::new_err(format!(
        "argument `{arg}`: not an array: {} has no __cuda_array_interface__, \
         __sycl_usm_array_interface__, __dlpack__ or __array_interface__",
        type_name(obj)
    )))
}

/// Reads `__cuda_array_interface__` if `obj` has one (`None` if it has none), applying the
/// torch stream rule (see [`fast`]) to torch tensors whose interface names no stream.
fn generic_cuda(
    obj: &Bound<'_, PyAny>,
    arg: &str,
    kind: Kind,
    scratch: &mut Scratch,
) -> PyResult<Option<ArrayDesc>> {
    let py = obj.py();
    match obj.getattr_opt(intern!(py, "__cuda_array_interface__")) {
        Ok(Some(iface)) => {
            let mut d =
                read_interface(&iface, Source::Cuda, scratch).map_err(|f| f.into_py(py, arg))?;
            if matches!(kind, Kind::Torch | Kind::TorchSub) {
                fast::refuse_lazy_bits(obj, arg, true)?;
                if d.stream().is_none() {
                    d = d.with_stream(Some(fast::torch_stream(obj, &mut scratch.call)?));
                }
            }
            Ok(Some(d))
        }
        Ok(None) => Ok(None),
        Err(e) => Err(annotate(py, e, "__cuda_array_interface__", arg)),
    }
}

/// `True` when `obj.__dlpack_device__()` names the CPU (device type 1).
fn dlpack_device_is_cpu(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    let Ok(dev) = obj.call_method0(intern!(py, "__dlpack_device__")) else {
        return Ok(false);
    };
    let ty = dev.get_item(0).and_then(|t| t.extract::<i64>());
    Ok(matches!(ty, Ok(1)))
}

/// The `dict` describing a validated array (see `validate_interface`).
pub fn describe<'py>(
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
    let mut scratch = Scratch::new();
    match probe(obj, name, &mut scratch)? {
        Found::Desc(desc) => {
            let protocol = if obj.is_instance_of::<PyDeviceArray>()
                || obj.is_instance_of::<PyForeignArray>()
            {
                "ferrocuda"
            } else if desc.protocol() == Protocol::SyclUsm {
                Source::Sycl.key()
            } else {
                Source::Cuda.key()
            };
            describe(py, &desc, protocol)
        }
        Found::Dlpack(o) => {
            let (desc, _owner) = crate::dlpack::import(&o, None, name)?;
            describe(py, &desc, "__dlpack__")
        }
        Found::Host(o) => {
            let (desc, _arr) = crate::arrays::host_view(&o, name)?;
            describe(py, &desc, Source::Host.key())
        }
    }
}

/// The element type named by a NumPy dtype-like (`"float32"`, `"<f4"`, `numpy.float32`,
/// `numpy.dtype("f4")`, …).
pub fn parse_dtype(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    let py = obj.py();
    if let Ok(s) = obj.cast::<PyString>() {
        let mut buf = StrBuf::new();
        let s = buf.read(s)?;
        if let Some(d) = DType::ALL.iter().find(|d| d.name() == s) {
            return Ok(*d);
        }
    }
    let np_dtype = crate::arrays::numpy_attr(py, "dtype")?;
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

/// The description of `obj` read through its `__cuda_array_interface__` only (never a fast
/// path): the reference the fast paths are tested against.
#[pyfunction]
#[pyo3(signature = (obj, name = "x"))]
fn _describe_generic<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    let py = obj.py();
    let mut scratch = Scratch::new();
    match generic_cuda(obj, name, fast::kind_of(obj), &mut scratch)? {
        Some(d) => describe(py, &d, Source::Cuda.key()),
        None => Err(PyTypeError::new_err(format!(
            "argument `{name}`: {} has no __cuda_array_interface__",
            type_name(obj)
        ))),
    }
}

/// Which producer fast paths are on: ``(cupy, torch)``.
#[pyfunction]
fn _fast_paths() -> (bool, bool) {
    fast::status()
}

/// Where the CuPy fast path reads CuPy's current stream: ``"capi"`` (the C function CuPy's
/// own getter calls) or ``"python"`` (``cupy.cuda.get_current_stream().ptr``); for
/// diagnostics (looked up on first use, which imports CuPy).
#[pyfunction]
fn _cupy_stream_source(py: Python<'_>) -> &'static str {
    fast::cupy_stream_source(py)
}

/// Registers the functions of this module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(validate_interface, m)?)?;
    m.add_function(wrap_pyfunction!(_describe_generic, m)?)?;
    m.add_function(wrap_pyfunction!(_fast_paths, m)?)?;
    m.add_function(wrap_pyfunction!(_cupy_stream_source, m)?)?;
    Ok(())
}
