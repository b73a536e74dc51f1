//! Reading array-interface dictionaries into the host crate's description.
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

use ferrocuda_host::interop::cai::{self, ArrayDesc, RawInterface, RawValue, MAX_NDIM};
use ferrocuda_host::{Error, Key, Protocol};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};

use crate::errors::Fail;
use crate::util::{read_int, repr, type_name, Seq, StrBuf};

fn key_err(protocol: Protocol, key: Key, msg: impl Into<Cow<'static, str>>) -> Fail {
    Fail::Host(Error::value(msg).with_key(key).with_protocol(protocol))
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
        }
    }
}

impl Default for Scratch {
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

/// Applies `read` to a present value; `Missing` and `None` pass through.
fn read_value<'py, T>(
    v: RawValue<Bound<'py, PyAny>>,
    read: impl FnOnce(Bound<'py, PyAny>) -> Result<T, Fail>,
) -> Result<RawValue<T>, Fail> {
    Ok(match v {
        RawValue::Missing => RawValue::Missing,
        RawValue::None => RawValue::None,
        RawValue::Value(v) => RawValue::Value(read(v)?),
    })
}

/// Reads an integer key.
fn int_key(
    protocol: Protocol,
    key: Key,
    v: RawValue<Bound<'_, PyAny>>,
) -> Result<RawValue<i128>, Fail> {
    read_value(v, |v| match read_int(&v)? {
        Some(i) if i == i128::MAX || i == i128::MIN => Err(key_err(
            protocol,
            key,
            format!("{} is out of range", repr(&v)),
        )),
        Some(i) => Ok(i),
        None => Err(key_err(
            protocol,
            key,
            format!("expected an int, got {}", type_name(&v)),
        )),
    })
}

/// Integers of a tuple/list into `out` (stack) or `spill` (more than [`MAX_NDIM`] items: the
/// host reports the rank error).
fn int_seq<'s>(
    protocol: Protocol,
    key: Key,
    v: &Bound<'_, PyAny>,
    out: &'s mut [i128; MAX_NDIM],
    spill: &'s mut Vec<i128>,
) -> Result<&'s [i128], Fail> {
    let Some(seq) = Seq::of(v) else {
        return Err(key_err(
            protocol,
            key,
            format!("expected a tuple of ints, got {}", type_name(v)),
        ));
    };
    let name = key.name();
    let read = |i: usize| -> Result<i128, Fail> {
        // An item's `__index__` may mutate a list while it is read.
        let item = seq.get(i).map_err(|_| {
            key_err(
                protocol,
                key,
                "the sequence changed size while it was being read",
            )
        })?;
        match read_int(&item)? {
            Some(v) if v == i128::MAX || v == i128::MIN => Err(key_err(
                protocol,
                key,
                format!("{name}[{i}] = {} is out of range", repr(&item)),
            )),
            Some(v) => Ok(v),
            None => Err(key_err(
                protocol,
                key,
                format!(
                    "expected a tuple of ints, got {} at index {i}",
                    type_name(&item)
                ),
            )),
        }
    };
    let n = seq.len();
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

/// `typestr`: a `str`.
fn read_typestr<'s>(
    protocol: Protocol,
    v: Bound<'_, PyAny>,
    buf: &'s mut StrBuf,
) -> Result<&'s str, Fail> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(buf.read(s)?),
        Err(_) => Err(key_err(
            protocol,
            Key::Typestr,
            format!("expected a str, got {}", type_name(&v)),
        )),
    }
}

/// `data`: a `(pointer: int, readonly: bool)` pair.
fn read_data(protocol: Protocol, v: Bound<'_, PyAny>) -> Result<(i128, bool), Fail> {
    let bad = |what: String| {
        key_err(
            protocol,
            Key::Data,
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
            protocol,
            Key::Data,
            format!("pointer {} is not an address", repr(&p)),
        ));
    }
    let ro = seq.get(1)?;
    let Ok(ro) = ro.cast::<PyBool>() else {
        return Err(bad(format!("{} as the readonly flag", type_name(&ro))));
    };
    Ok((ptr, ro.is_true()))
}

/// A `descr` as read: usually one `('', typestr)` field, read into stack buffers.
enum Descr<'s> {
    One(&'s str, &'s str),
    Many(Vec<(String, String)>),
}

/// `descr`: a list of `(name: str, typestr: str)` pairs.
fn read_descr<'s>(
    protocol: Protocol,
    v: Bound<'_, PyAny>,
    name_buf: &'s mut StrBuf,
    type_buf: &'s mut StrBuf,
) -> Result<Descr<'s>, Fail> {
    let bad = |what: String| {
        key_err(
            protocol,
            Key::Descr,
            format!("expected a list of (name: str, typestr: str) tuples, got {what}"),
        )
    };
    let unsupported = |what: &'static str| {
        Fail::Host(
            Error::unsupported(what)
                .with_key(Key::Descr)
                .with_protocol(protocol),
        )
    };
    let Some(seq) = Seq::of(&v) else {
        return Err(bad(type_name(&v)));
    };
    let field = |i: usize| -> Result<(Bound<'_, PyString>, Bound<'_, PyString>), Fail> {
        let f = seq.get(i)?;
        let Some(fs) = Seq::of(&f) else {
            return Err(bad(format!("{} at index {i}", type_name(&f))));
        };
        if fs.len() == 3 {
            return Err(unsupported(
                "fields with a sub-array shape (3-item descr entries) are not supported",
            ));
        }
        if fs.len() != 2 {
            return Err(bad(format!("an entry of {} items at index {i}", fs.len())));
        }
        match (
            fs.get(0)?.cast_into::<PyString>(),
            fs.get(1)?.cast_into::<PyString>(),
        ) {
            (Ok(a), Ok(b)) => Ok((a, b)),
            // A nested (structured) type or a non-str name.
            (Ok(_), Err(_)) => Err(unsupported("structured element types are not supported")),
            (Err(_), _) => Err(bad(format!("a non-str field name at index {i}"))),
        }
    };
    if seq.len() == 1 {
        let (a, b) = field(0)?;
        return Ok(Descr::One(name_buf.read(&a)?, type_buf.read(&b)?));
    }
    let mut many = Vec::with_capacity(seq.len());
    for i in 0..seq.len() {
        let (a, b) = field(i)?;
        many.push((a.to_cow()?.into_owned(), b.to_cow()?.into_owned()));
    }
    Ok(Descr::Many(many))
}

/// Reads and validates an interface dictionary of `protocol`.
pub fn read_interface(
    iface: &Bound<'_, PyAny>,
    protocol: Protocol,
    scratch: &mut Scratch,
) -> Result<ArrayDesc, Fail> {
    let py = iface.py();
    let Ok(d) = iface.cast::<PyDict>() else {
        return Err(Fail::Host(Error::type_error(format!(
            "{} must be a dict, got {}",
            protocol.key(),
            type_name(iface)
        ))));
    };
    let Scratch {
        shape,
        strides,
        shape_spill,
        strides_spill,
        typestr,
        descr_name,
        descr_type,
    } = scratch;
    let mut raw = RawInterface::new(protocol);
    raw.version = int_key(protocol, Key::Version, get(d, intern!(py, "version"))?)?;
    raw.mask = read_value(get(d, intern!(py, "mask"))?, |_| Ok(()))?;
    raw.typestr = read_value(get(d, intern!(py, "typestr"))?, |v| {
        read_typestr(protocol, v, typestr)
    })?;
    raw.shape = read_value(get(d, intern!(py, "shape"))?, |v| {
        int_seq(protocol, Key::Shape, &v, shape, shape_spill)
    })?;
    raw.strides = read_value(get(d, intern!(py, "strides"))?, |v| {
        int_seq(protocol, Key::Strides, &v, strides, strides_spill)
    })?;
    raw.data = read_value(get(d, intern!(py, "data"))?, |v| read_data(protocol, v))?;
    let descr = read_value(get(d, intern!(py, "descr"))?, |v| {
        read_descr(protocol, v, descr_name, descr_type)
    })?;
    let one: [(&str, &str); 1];
    let many: Vec<(&str, &str)>;
    raw.descr = match &descr {
        RawValue::Missing => RawValue::Missing,
        RawValue::None => RawValue::None,
        RawValue::Value(Descr::One(a, b)) => {
            one = [(*a, *b)];
            RawValue::Value(&one[..])
        }
        RawValue::Value(Descr::Many(fields)) => {
            many = fields
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            RawValue::Value(&many[..])
        }
    };
    raw.stream = match protocol {
        Protocol::Cuda => int_key(protocol, Key::Stream, get(d, intern!(py, "stream"))?)?,
        // SYCL defines no stream; NumPy host arrays have none.
        _ => RawValue::Missing,
    };
    raw.offset = int_key(protocol, Key::Offset, get(d, intern!(py, "offset"))?)?;
    cai::validate(&raw).map_err(Fail::Host)
}
