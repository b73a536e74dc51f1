//! [`validate`]: an interface dictionary's keys, read by the rules of the
//! [module documentation](super), in key order.

use ferrocuda_abi::{layout, DType, MAX_NDIM};

use super::desc::{build, value_err, ArrayDesc, Parts};
use super::{RawInterface, RawValue};
use crate::error::{Error, Key, Protocol, Result};
use crate::stream::StreamRef;

/// Validates an interface: every rule of the module documentation, in key order `version`,
/// `mask`, `typestr`, `descr`, `shape`, `strides`, `data`, `offset`, `stream`, then the
/// extent. The first violation is returned.
///
/// Every error names the key ([`Error::key`](crate::Error::key)) and the protocol; the caller
/// adds the argument name. Does not allocate unless it fails.
pub fn validate(raw: &RawInterface<'_>) -> Result<ArrayDesc> {
    validate_inner(raw).map_err(|e| e.with_protocol(raw.protocol))
}

/// Parses a `typestr` under `protocol`'s rules (see *Element types* in the module docs).
///
/// Errors name the key `typestr` and the protocol.
pub fn parse_typestr(protocol: Protocol, typestr: &str) -> Result<DType> {
    parse_typestr_inner(protocol, typestr).map_err(|e| e.with_protocol(protocol))
}

fn validate_inner(raw: &RawInterface<'_>) -> Result<ArrayDesc> {
    let protocol = raw.protocol;
    let version = read_version(protocol, raw.version)?;
    if let RawValue::Value(()) = raw.mask {
        return Err(Error::unsupported(
            "masked arrays are not supported (mask must be absent or None)",
        )
        .with_key(Key::Mask));
    }
    let typestr = required(raw.typestr, Key::Typestr)?;
    let dtype = parse_typestr_inner(protocol, typestr)?;
    check_descr(protocol, raw.descr, typestr, dtype)?;
    let mut shape = [0usize; MAX_NDIM];
    let shape = read_shape(required(raw.shape, Key::Shape)?, &mut shape)?;
    let mut strides = [0isize; MAX_NDIM];
    let strides = read_strides(protocol, raw.strides, shape.len(), dtype, &mut strides)?;
    let (data, readonly) = read_data(raw.data, shape.contains(&0))?;
    let ptr = apply_offset(protocol, raw.offset, data, dtype)?;
    let stream = match protocol {
        Protocol::SyclUsm => None,
        Protocol::Cuda | Protocol::NumPy | Protocol::DLPack => parse_stream(raw.stream)?,
    };
    build(Parts {
        protocol,
        version,
        dtype,
        shape,
        strides,
        ptr,
        readonly,
        stream,
    })
}

/// `version`: 0–3 under the CAI's rules, 1 for SYCL USM.
fn read_version(protocol: Protocol, version: RawValue<i128>) -> Result<u8> {
    let version = required(version, Key::Version)?;
    match (protocol, version) {
        (Protocol::SyclUsm, 1) => Ok(1),
        (Protocol::SyclUsm, v) => Err(value_err(
            Key::Version,
            format!("unsupported version {v}; the supported version is 1"),
        )),
        (_, 0..=3) => Ok(version as u8),
        (_, v) => Err(value_err(
            Key::Version,
            format!("unsupported version {v}; supported versions are 0, 1, 2, 3"),
        )),
    }
}

/// `shape`: at most [`MAX_NDIM`] extents, each in `0..=usize::MAX`.
fn read_shape<'b>(raw: &[i128], buf: &'b mut [usize; MAX_NDIM]) -> Result<&'b [usize]> {
    let ndim = raw.len();
    if ndim > MAX_NDIM {
        return Err(value_err(
            Key::Shape,
            format!("{ndim} axes; at most {MAX_NDIM} are supported"),
        ));
    }
    for (d, (&n, slot)) in raw.iter().zip(buf.iter_mut()).enumerate() {
        *slot = usize::try_from(n).map_err(|_| {
            let what = if n < 0 {
                "is negative"
            } else {
                "does not fit usize"
            };
            value_err(Key::Shape, format!("shape[{d}] = {n} {what}"))
        })?;
    }
    Ok(&buf[..ndim])
}

/// `strides`, as byte strides: `None` for C order; SYCL USM strides count elements.
fn read_strides<'b>(
    protocol: Protocol,
    raw: RawValue<&[i128]>,
    ndim: usize,
    dtype: DType,
    buf: &'b mut [isize; MAX_NDIM],
) -> Result<Option<&'b [isize]>> {
    let RawValue::Value(raw) = raw else {
        return Ok(None);
    };
    if raw.len() != ndim {
        return Err(value_err(
            Key::Strides,
            format!("{} strides for {ndim} axes", raw.len()),
        ));
    }
    let sycl = protocol == Protocol::SyclUsm;
    let itemsize = dtype.itemsize();
    let too_big = |d: usize| {
        let s = raw[d];
        value_err(
            Key::Strides,
            if sycl {
                format!("strides[{d}] = {s} elements of {itemsize} bytes does not fit isize bytes")
            } else {
                format!("strides[{d}] = {s} does not fit isize")
            },
        )
    };
    let mut given = [0isize; MAX_NDIM];
    for (d, (&s, slot)) in raw.iter().zip(given.iter_mut()).enumerate() {
        *slot = isize::try_from(s).map_err(|_| too_big(d))?;
    }
    if sycl {
        // SYCL USM strides count elements; the descriptor holds bytes.
        layout::byte_strides(&given[..ndim], itemsize, buf).map_err(too_big)?;
    } else {
        buf[..ndim].copy_from_slice(&given[..ndim]);
    }
    Ok(Some(&buf[..ndim]))
}

/// `data`: `(pointer, readonly)`, the pointer an address, non-null unless the array is empty.
fn read_data(data: RawValue<(i128, bool)>, empty: bool) -> Result<(u64, bool)> {
    let (data, readonly) = required(data, Key::Data)?;
    let data = u64::try_from(data).map_err(|_| {
        value_err(
            Key::Data,
            format!("pointer {data} is not an address (must be in 0..=2**64-1)"),
        )
    })?;
    if data == 0 && !empty {
        return Err(value_err(
            Key::Data,
            "null pointer for a non-empty array (0 is only for zero-size arrays)",
        ));
    }
    Ok((data, readonly))
}

/// The address of element `[0, …]`: `data`, plus SYCL USM's `offset` elements (the CAI has no
/// such key).
fn apply_offset(
    protocol: Protocol,
    offset: RawValue<i128>,
    data: u64,
    dtype: DType,
) -> Result<u64> {
    if protocol != Protocol::SyclUsm {
        return match offset {
            RawValue::Missing | RawValue::None | RawValue::Value(0) => Ok(data),
            RawValue::Value(o) => Err(Error::unsupported(format!(
                "offset {o}: the CUDA Array Interface has no 'offset' key; data must point at \
                 the first element"
            ))
            .with_key(Key::Offset)),
        };
    }
    let offset = offset.into_option().unwrap_or(0);
    if offset < 0 {
        return Err(value_err(
            Key::Offset,
            format!("offset {offset} is negative"),
        ));
    }
    let itemsize = dtype.itemsize() as i128;
    offset
        .checked_mul(itemsize)
        .and_then(|b| b.checked_add(i128::from(data)))
        .and_then(|p| u64::try_from(p).ok())
        .ok_or_else(|| {
            value_err(
                Key::Offset,
                format!(
                    "data {data:#x} + offset {offset} * {itemsize} bytes overflows a 64-bit \
                     address"
                ),
            )
        })
}

/// A required key's value: `Missing` and `None` are `Value` errors.
fn required<T>(v: RawValue<T>, key: Key) -> Result<T> {
    match v {
        RawValue::Value(t) => Ok(t),
        RawValue::Missing => Err(value_err(key, "required key is missing")),
        RawValue::None => Err(value_err(key, "required key is None")),
    }
}

/// `typestr` for messages: quoted, cut at 24 characters.
fn quoted(s: &str) -> String {
    const MAX: usize = 24;
    if s.chars().count() > MAX {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut:?}…")
    } else {
        format!("{s:?}")
    }
}

fn parse_typestr_inner(protocol: Protocol, typestr: &str) -> Result<DType> {
    let b = typestr.as_bytes();
    let malformed = || {
        Error::type_error(format!(
            "malformed typestr {}: expected a byte order (<, =, |), a kind (b, i, u, f, c) \
             and an item size in bytes, e.g. \"<f4\"",
            quoted(typestr)
        ))
        .with_key(Key::Typestr)
    };
    if b.len() < 3 || !matches!(b[0], b'<' | b'>' | b'=' | b'|') || !b[1].is_ascii_alphabetic() {
        return Err(malformed());
    }
    let digits = &b[2..];
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(malformed());
    }
    // More than 4 digits is no known size (and must not overflow the parse).
    let size = if digits.len() <= 4 {
        digits
            .iter()
            .fold(0usize, |acc, &c| acc * 10 + usize::from(c - b'0'))
    } else {
        usize::MAX
    };
    let Some(dtype) = DType::from_kind(b[1], size) else {
        let known: Vec<&str> = DType::ALL.iter().map(|d| d.typestr()).collect();
        return Err(Error::type_error(format!(
            "unsupported element type {}; supported: {}",
            quoted(typestr),
            known.join(", ")
        ))
        .with_key(Key::Typestr));
    };
    match b[0] {
        b'>' if size > 1 => Err(Error::type_error(format!(
            "big-endian element type {} is not supported (CUDA devices are little-endian)",
            quoted(typestr)
        ))
        .with_key(Key::Typestr)),
        // NumPy's plain void: not bfloat16 (which ml_dtypes, PyTorch and JAX write "<V2").
        b'|' if b[1] == b'V' && protocol != Protocol::SyclUsm => Err(Error::type_error(format!(
            "opaque element type {} (NumPy's void) is not supported; bfloat16 arrays are \
             exported as \"<V2\" (ml_dtypes, PyTorch, JAX) or through DLPack",
            quoted(typestr)
        ))
        .with_key(Key::Typestr)),
        // dpctl writes '|' for every type in the SYCL USM interface; NumPy never does.
        b'|' if size > 1 && protocol != Protocol::SyclUsm => Err(value_err(
            Key::Typestr,
            format!(
                "byte order '|' (not applicable) given for the {size}-byte type {}; \
                 expected '<' (NumPy writes {:?})",
                quoted(typestr),
                dtype.typestr()
            ),
        )),
        _ => Ok(dtype),
    }
}

fn check_descr(
    protocol: Protocol,
    descr: RawValue<&[(&str, &str)]>,
    typestr: &str,
    dtype: DType,
) -> Result<()> {
    let fields = match descr {
        RawValue::Missing | RawValue::None => return Ok(()),
        RawValue::Value(fields) => fields,
    };
    let unsupported = |message: String| Err(Error::unsupported(message).with_key(Key::Descr));
    match fields {
        [] => Err(value_err(Key::Descr, "descr is an empty list")),
        [("", ts)] if *ts == typestr || parse_typestr_inner(protocol, ts).ok() == Some(dtype) => {
            Ok(())
        }
        [("", ts)] => unsupported(format!(
            "descr type {} differs from typestr {}; only descr [('', typestr)] is supported",
            quoted(ts),
            quoted(typestr)
        )),
        [(name, _)] => unsupported(format!(
            "structured element types are not supported (named field {})",
            quoted(name)
        )),
        _ => unsupported(format!(
            "structured element types are not supported ({} fields)",
            fields.len()
        )),
    }
}

/// `stream`: absent or `None` (no synchronization needed), else a stream by
/// [`StreamRef::from_int`]'s rule.
fn parse_stream(stream: RawValue<i128>) -> Result<Option<StreamRef>> {
    match stream {
        RawValue::Missing | RawValue::None => Ok(None),
        RawValue::Value(s) => StreamRef::from_int(s)
            .map(Some)
            .map_err(|e| e.with_key(Key::Stream)),
    }
}
