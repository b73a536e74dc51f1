//! The CUDA Array Interface (and the SYCL USM array interface): the model and every rule of
//! its validation, in one place.
//!
//! An array producer (CuPy, PyTorch, Numba, JAX, …) describes a device array with a small
//! dictionary, `obj.__cuda_array_interface__` (the *CAI*). ferrocuda reads that dictionary
//! into a [`RawInterface`] — borrowed, unvalidated, with integers as `i128` so that negative
//! and oversized Python integers reach validation instead of being truncated — and
//! [`validate`] turns it into an [`ArrayDesc`]: a fixed-size, heap-free, `Copy` description
//! of the array that the launch path can trust. Nothing here depends on Python; the pyo3 layer
//! (and Rust callers) only fill the [`RawInterface`].
//!
//! # The keys and their rules
//!
//! | key | required | rule (violations are errors of the kind shown) |
//! | --- | --- | --- |
//! | `version` | yes | CAI: `0`, `1`, `2` or `3`; SYCL USM: `1` (else `Value`). |
//! | `shape` | yes | Tuple of extents, each `>= 0` and fitting `usize`; at most [`MAX_NDIM`] axes; the product of the non-zero extents must fit `usize` and, times the item size, `isize` (else `Value`). `()` is a scalar (one element). |
//! | `typestr` | yes | See *Element types* below (`Type` errors; a `Value` error for the byte order "not applicable" on a wide type under the CAI). |
//! | `data` | yes | `(ptr, readonly)`. `ptr` in `0..=u64::MAX`; `0` only for zero-size arrays; for non-empty arrays aligned to the item size (else `Value`). |
//! | `strides` | no | Absent or `None`: C-contiguous. Otherwise one integer per axis, in **bytes** (CAI) or **elements** (SYCL USM), negative and zero allowed, each fitting `isize` (else `Value`). |
//! | `descr` | no | Absent/`None`, or NumPy's simple form `[("", typestr)]`; structured dtypes are `Unsupported`, an empty list is a `Value` error. |
//! | `mask` | no | Absent/`None`; a mask object is `Unsupported` ("masked arrays are not supported", as Numba raises `NotImplementedError`). |
//! | `stream` | no (v3) | Absent/`None`: no synchronization needed. `0` is disallowed by the specification (`Value`); `1` is the legacy default stream, `2` the per-thread default stream, any other value in `3..=u64::MAX` a `cudaStream_t`; negative or larger values are `Value` errors. |
//! | `offset` | SYCL only | Elements from `data` to element `[0, …, 0]`, `>= 0` (`Value` otherwise); the CAI has no such key: a CAI `offset` other than absent/`None`/`0` is `Unsupported`. |
//!
//! A required key that is absent is a `Value` error "required key is missing"; a required key
//! given as `None` is a `Value` error too. Every error names its key and protocol, e.g.
//! `__cuda_array_interface__['stream']: stream 0 is disallowed …`; the caller adds the
//! argument name ([`Error::with_arg`](crate::Error::with_arg)). Error kinds map to Python
//! exceptions: `Type` → `TypeError`, `Value` → `ValueError`, `Unsupported` →
//! `NotImplementedError`.
//!
//! # Element types (`typestr`)
//!
//! A `typestr` is NumPy's: a byte-order character, a kind character and the item size in
//! bytes, e.g. `"<f4"`. ferrocuda knows the kinds `b`, `i`, `u`, `f`, `c` with the sizes of
//! [`DType`] (`|b1`, `|i1`…`<i8`, `|u1`…`<u8`, `<f2`, `<f4`, `<f8`, `<c8`, `<c16`). Any other
//! kind or size — `V` (void/structured), `O` (object), `M`/`m` (datetime), `S`/`U` (strings),
//! `<f16` (long double), `<i3` — and anything malformed is a `Type` error naming the typestr.
//!
//! Byte order: `<` (little-endian) and `=` (native, and every CUDA device is little-endian)
//! are accepted. `|` ("not applicable") is accepted for one-byte types; for wider types NumPy
//! never writes it, so under the CAI it is a `Value` error — but dpctl writes `|` for *every*
//! type in the SYCL USM interface (`"|f8"`), so there it means native order and is accepted.
//! `>` (big-endian) is a `Type` error for wider types (the data would need byte-swapping);
//! on a one-byte type the byte order is moot and `>` is accepted.
//!
//! # Layout
//!
//! The descriptor always holds byte strides ([`ArrayDesc::byte_strides`]): when the interface
//! gave none, the C-order (row-major) strides are computed. Strides may be negative (a
//! reversed axis, `a[::-1]`: `data` then points at the element `[0, …]`, which is not the
//! lowest address) or zero (a broadcast axis). The descriptor keeps strides as given, even
//! ones that are not a multiple of the item size (possible with NumPy-style structured views);
//! [`ArrayDesc::indexer`] — which builds the *element*-stride [`Indexer`] a kernel receives —
//! refuses those. For non-empty arrays the byte extent is checked: the offsets of the lowest
//! and highest bytes touched must fit `isize`, and `[ptr + lowest, ptr + highest + itemsize)`
//! must lie within `0..=u64::MAX` (else `Value` "extent overflows"); [`ArrayDesc::byte_range`]
//! returns that interval. Zero-size arrays may carry any strides and any pointer (the spec
//! says `0`): no memory is ever touched. [`ArrayDesc::is_c_contiguous`] follows NumPy: axes
//! of extent 1 may have any stride, and empty arrays count as contiguous.
//!
//! The pointer of a non-empty array must be aligned to the full item size — also for complex
//! types, 16 bytes for `<c16` where NumPy only needs 8 — because kernels may load an element
//! with one vector access, and a misaligned access faults the whole CUDA context (a sticky
//! error).
//!
//! # Versions
//!
//! * v0 had no `mask` key; v0 and v1 did not say that `strides: None` means C order nor that
//!   zero-size arrays use pointer 0. ferrocuda reads all of them with the v2 meaning (a v0/v1
//!   producer that gave strides gave them explicitly; one that did not was C-contiguous) and
//!   refuses a mask whatever the version: ignoring one would compute on invalid elements.
//! * v2 (PyTorch, JAX) has no `stream` key: such arrays need no synchronization.
//! * v3 (CuPy, Numba) added `stream`. A `stream` key is honoured whatever the version, like
//!   Numba does.
//!
//! # The SYCL USM array interface
//!
//! `__sycl_usm_array_interface__` (dpctl) has the same keys with three differences:
//! `version` is `1`; `strides` count **elements**, not bytes (converted here: the descriptor
//! always holds bytes); and `offset` (elements, default `0`) is added to `data`, so
//! [`ArrayDesc::ptr`] is `data + offset * itemsize`. Its `syclobj` (the queue) is not modelled,
//! and a `stream` key, which SYCL does not define, is ignored.
//!
//! # Example
//!
//! ```
//! use ferrocuda_abi::DType;
//! use ferrocuda_host::cai::{self, Protocol, RawInterface, RawValue};
//! use ferrocuda_host::stream::StreamRef;
//! use ferrocuda_host::ErrorKind;
//!
//! // What CuPy exports for `cupy.zeros((2, 3), cupy.float32)` on the default stream.
//! let raw = RawInterface {
//!     version: RawValue::Value(3),
//!     shape: RawValue::Value(&[2, 3]),
//!     typestr: RawValue::Value("<f4"),
//!     descr: RawValue::Value(&[("", "<f4")]),
//!     data: RawValue::Value((0x7f3a_0000_0000, false)),
//!     strides: RawValue::None,
//!     stream: RawValue::Value(1),
//!     ..RawInterface::new(Protocol::Cuda)
//! };
//! let a = cai::validate(&raw)?;
//! assert_eq!(a.dtype(), DType::F32);
//! assert_eq!(a.shape(), &[2, 3]);
//! assert_eq!(a.byte_strides(), &[12, 4]); // computed: the interface said C order
//! assert!(a.is_c_contiguous());
//! assert_eq!(a.stream(), Some(StreamRef::Legacy));
//! assert_eq!(a.byte_range(), Some((0x7f3a_0000_0000, 0x7f3a_0000_0018)));
//! assert_eq!(a.indexer::<2>()?.strides, [3, 1]); // element strides for the kernel
//!
//! // The same array as a transposed (3, 2) view: strides in bytes, not contiguous.
//! let t = cai::validate(&RawInterface {
//!     shape: RawValue::Value(&[3, 2]),
//!     strides: RawValue::Value(&[4, 12]),
//!     ..raw
//! })?;
//! assert!(!t.is_c_contiguous());
//! assert_eq!(t.indexer::<2>()?.strides, [1, 3]);
//!
//! // Stream 0 is disallowed by the specification: refused, naming the key.
//! let err = cai::validate(&RawInterface { stream: RawValue::Value(0), ..raw }).unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::Value);
//! assert!(err.to_string().starts_with("__cuda_array_interface__['stream']: "));
//! # Ok::<(), ferrocuda_host::Error>(())
//! ```

use std::borrow::Cow;
use std::fmt;

use ferrocuda_abi::{DType, Indexer};

use crate::error::{Error, Result};
use crate::stream::StreamRef;

/// The most axes an array may have; more is a `Value` error (NumPy's own limit is 64, CuPy's
/// and ferrocuda's kernel views' 32).
pub const MAX_NDIM: usize = 32;

const KEY_VERSION: &str = "version";
const KEY_SHAPE: &str = "shape";
const KEY_TYPESTR: &str = "typestr";
const KEY_DATA: &str = "data";
const KEY_STRIDES: &str = "strides";
const KEY_DESCR: &str = "descr";
const KEY_MASK: &str = "mask";
const KEY_STREAM: &str = "stream";
const KEY_OFFSET: &str = "offset";

/// Which array-interface protocol a dictionary came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `__cuda_array_interface__` (versions 0–3).
    Cuda,
    /// `__sycl_usm_array_interface__` (dpctl, version 1): strides in elements, an `offset` key.
    SyclUsm,
}

impl Protocol {
    /// The attribute name: `"__cuda_array_interface__"` or `"__sycl_usm_array_interface__"`.
    pub fn key(self) -> &'static str {
        match self {
            Protocol::Cuda => "__cuda_array_interface__",
            Protocol::SyclUsm => "__sycl_usm_array_interface__",
        }
    }
}

/// How a key's value was given (the pyo3 layer and Rust callers fill this).
///
/// The three states matter: for optional keys `Missing` and `None` usually mean the same
/// (e.g. `strides`), but for required keys both are errors with different messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawValue<T> {
    /// The key is absent from the dictionary.
    Missing,
    /// The key is present with the value `None`.
    None,
    /// The key is present with a value.
    Value(T),
}

impl<T> RawValue<T> {
    /// The value, with `Missing` and `None` both mapped to `Option::None`.
    pub fn into_option(self) -> Option<T> {
        match self {
            RawValue::Value(v) => Some(v),
            RawValue::Missing | RawValue::None => None,
        }
    }
}

/// An unvalidated interface, borrowed from the caller's storage.
///
/// Integers are `i128` so that negative and huge values (Python integers) reach validation;
/// build one with struct-update syntax from [`RawInterface::new`].
#[derive(Clone, Copy, Debug)]
pub struct RawInterface<'a> {
    /// Which protocol the dictionary came from (it decides units and allowed values).
    pub protocol: Protocol,
    /// `version`.
    pub version: RawValue<i128>,
    /// `shape`: one extent per axis.
    pub shape: RawValue<&'a [i128]>,
    /// `typestr`, e.g. `"<f4"`.
    pub typestr: RawValue<&'a str>,
    /// `data`: `(pointer, readonly)`.
    pub data: RawValue<(i128, bool)>,
    /// `strides`: bytes for the CAI, elements for SYCL USM; `Missing` or `None` = C-contiguous.
    pub strides: RawValue<&'a [i128]>,
    /// `descr`: the list of `(name, typestr)` fields as given; only the simple
    /// `[("", typestr)]` is accepted. (A NumPy field with a sub-array shape, a 3-tuple, cannot
    /// be expressed here: the filling layer must refuse it as `Unsupported`.)
    pub descr: RawValue<&'a [(&'a str, &'a str)]>,
    /// `mask`: `Value(())` means a mask object is present, which is refused.
    pub mask: RawValue<()>,
    /// `stream` (CAI v3); ignored for SYCL USM.
    pub stream: RawValue<i128>,
    /// `offset` (SYCL USM only): elements added to the data pointer.
    pub offset: RawValue<i128>,
}

impl<'a> RawInterface<'a> {
    /// An interface of `protocol` with every key `Missing`.
    pub fn new(protocol: Protocol) -> Self {
        RawInterface {
            protocol,
            version: RawValue::Missing,
            shape: RawValue::Missing,
            typestr: RawValue::Missing,
            data: RawValue::Missing,
            strides: RawValue::Missing,
            descr: RawValue::Missing,
            mask: RawValue::Missing,
            stream: RawValue::Missing,
            offset: RawValue::Missing,
        }
    }
}

/// A validated array interface.
///
/// Fixed-capacity storage ([`MAX_NDIM`] axes inline), no heap allocation: it is built on the
/// per-launch hot path. Slots beyond `ndim` are always zero, so the derived equality is the
/// equality of the arrays described.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ArrayDesc {
    protocol: Protocol,
    version: u8,
    dtype: DType,
    ndim: u8,
    readonly: bool,
    c_contiguous: bool,
    shape: [usize; MAX_NDIM],
    strides: [isize; MAX_NDIM],
    size: usize,
    ptr: u64,
    byte_range: Option<(u64, u64)>,
    stream: Option<StreamRef>,
}

impl fmt::Debug for ArrayDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArrayDesc")
            .field("protocol", &self.protocol)
            .field("version", &self.version)
            .field("dtype", &self.dtype)
            .field("shape", &self.shape())
            .field("byte_strides", &self.byte_strides())
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("readonly", &self.readonly)
            .field("stream", &self.stream)
            .finish()
    }
}

impl ArrayDesc {
    /// The protocol the array came from ([`Protocol::Cuda`] for [`from_parts`](Self::from_parts)).
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The interface version (3 for [`from_parts`](Self::from_parts)).
    pub fn version(&self) -> u8 {
        self.version
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Size of one element in bytes.
    pub fn itemsize(&self) -> usize {
        self.dtype.itemsize()
    }

    /// Number of axes (0 for a scalar).
    pub fn ndim(&self) -> usize {
        usize::from(self.ndim)
    }

    /// Extent of each axis.
    pub fn shape(&self) -> &[usize] {
        &self.shape[..self.ndim()]
    }

    /// Byte strides of each axis; always filled (C-order strides are computed when the
    /// interface gave none). For SYCL USM arrays, the element strides times the item size.
    pub fn byte_strides(&self) -> &[isize] {
        &self.strides[..self.ndim()]
    }

    /// Number of elements (1 for a scalar, 0 if any extent is 0).
    pub fn size(&self) -> usize {
        self.size
    }

    /// `true` when the array holds no element.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The address of element `[0, …, 0]` (for SYCL USM: `data + offset * itemsize`).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Whether the producer exported the array read-only: it must never be written.
    pub fn readonly(&self) -> bool {
        self.readonly
    }

    /// `true` when the layout is C-contiguous, as NumPy decides: axes of extent 1 may have
    /// any stride, and empty arrays count as contiguous.
    pub fn is_c_contiguous(&self) -> bool {
        self.c_contiguous
    }

    /// The producer's stream; `None` when the interface had no stream (absent or `None`):
    /// no synchronization is needed.
    pub fn stream(&self) -> Option<StreamRef> {
        self.stream
    }

    /// Lowest byte address touched and one past the highest, or `None` for zero-size arrays.
    ///
    /// `lo = ptr + Σ min(0, (n-1)·s)`, `hi = ptr + Σ max(0, (n-1)·s) + itemsize` over the axes
    /// (extent `n`, byte stride `s`). Validation guarantees both fit `u64`.
    pub fn byte_range(&self) -> Option<(u64, u64)> {
        self.byte_range
    }

    /// The element-stride indexer for a kernel view of rank `N`.
    ///
    /// Errors: `Type` if `ndim != N`; `Value` if a byte stride is not a multiple of the item
    /// size (the elements would be misaligned). A stride that never moves the pointer (on an
    /// axis of extent 1, or any axis of an empty array) is exempt and becomes 0.
    pub fn indexer<const N: usize>(&self) -> Result<Indexer<N>> {
        let protocol = self.protocol.key();
        if self.ndim() != N {
            return Err(Error::type_error(format!(
                "expected a {N}-D array, got a {}-D array of shape {:?}",
                self.ndim(),
                self.shape()
            ))
            .with_key(KEY_SHAPE)
            .with_protocol(protocol));
        }
        let item = self.dtype.itemsize() as isize;
        let mut shape = [0usize; N];
        let mut strides = [0isize; N];
        let axes = shape.iter_mut().zip(strides.iter_mut()).enumerate();
        for (d, (shape_d, stride_d)) in axes {
            let (n, s) = (self.shape[d], self.strides[d]);
            *shape_d = n;
            *stride_d = if s % item == 0 {
                s / item
            } else if n <= 1 || self.size == 0 {
                0
            } else {
                return Err(Error::value(format!(
                    "strides[{d}] = {s} bytes is not a multiple of the item size \
                     ({item} bytes of {}): kernels need element-aligned strides",
                    self.dtype.name()
                ))
                .with_key(KEY_STRIDES)
                .with_protocol(protocol));
            };
        }
        Ok(Indexer::new(shape, strides))
    }

    /// The same array with another producer stream (`None`: no ordering needed).
    pub fn with_stream(mut self, stream: Option<StreamRef>) -> ArrayDesc {
        self.stream = stream;
        self
    }

    /// The same array reported as coming from CAI `version` (clamped to 0..=3), for
    /// descriptors built with [`from_parts`](Self::from_parts) that mirror a producer's
    /// interface (the version is informational: validation rules do not depend on it).
    pub fn with_version(mut self, version: u8) -> ArrayDesc {
        self.version = version.min(3);
        self
    }

    /// The same array marked read-only (it can only become more restricted).
    pub fn into_readonly(mut self) -> ArrayDesc {
        self.readonly = true;
        self
    }

    /// Builds a descriptor directly, for arrays ferrocuda owns (or describes itself).
    ///
    /// `byte_strides: None` means C-contiguous. The result is validated like an interface:
    /// at most [`MAX_NDIM`] axes, no overflow of the element count or the extent, a non-null
    /// pointer aligned to the item size for non-empty arrays. The descriptor reports
    /// [`Protocol::Cuda`] and version 3 (what ferrocuda exports).
    pub fn from_parts(
        dtype: DType,
        shape: &[usize],
        byte_strides: Option<&[isize]>,
        ptr: u64,
        readonly: bool,
        stream: Option<StreamRef>,
    ) -> Result<ArrayDesc> {
        build(Parts {
            protocol: Protocol::Cuda,
            version: 3,
            dtype,
            shape,
            strides: byte_strides,
            ptr,
            readonly,
            stream,
        })
        .map_err(|e| e.with_protocol(Protocol::Cuda.key()))
    }
}

/// Validates an interface: every rule of the module documentation, in key order `version`,
/// `mask`, `typestr`, `descr`, `shape`, `strides`, `data`, `offset`, `stream`, then the
/// extent. The first violation is returned.
///
/// Every error names the key ([`Error::key`](crate::Error::key)) and the protocol; the caller
/// adds the argument name. Does not allocate unless it fails.
pub fn validate(raw: &RawInterface<'_>) -> Result<ArrayDesc> {
    validate_inner(raw).map_err(|e| e.with_protocol(raw.protocol.key()))
}

/// Parses a `typestr` under `protocol`'s rules (see *Element types* in the module docs).
///
/// Errors name the key `typestr` and the protocol.
pub fn parse_typestr(protocol: Protocol, typestr: &str) -> Result<DType> {
    parse_typestr_inner(protocol, typestr).map_err(|e| e.with_protocol(protocol.key()))
}

fn validate_inner(raw: &RawInterface<'_>) -> Result<ArrayDesc> {
    let protocol = raw.protocol;

    // version
    let version = required(raw.version, KEY_VERSION)?;
    let version = match (protocol, version) {
        (Protocol::Cuda, 0..=3) | (Protocol::SyclUsm, 1) => version as u8,
        (Protocol::Cuda, v) => {
            return Err(value_err(
                KEY_VERSION,
                format!("unsupported version {v}; supported versions are 0, 1, 2, 3"),
            ))
        }
        (Protocol::SyclUsm, v) => {
            return Err(value_err(
                KEY_VERSION,
                format!("unsupported version {v}; the supported version is 1"),
            ))
        }
    };

    // mask
    if let RawValue::Value(()) = raw.mask {
        return Err(Error::unsupported(
            "masked arrays are not supported (mask must be absent or None)",
        )
        .with_key(KEY_MASK));
    }

    // typestr, descr
    let typestr = required(raw.typestr, KEY_TYPESTR)?;
    let dtype = parse_typestr_inner(protocol, typestr)?;
    check_descr(protocol, raw.descr, typestr, dtype)?;
    let itemsize = dtype.itemsize() as i128;

    // shape
    let raw_shape = required(raw.shape, KEY_SHAPE)?;
    let ndim = raw_shape.len();
    if ndim > MAX_NDIM {
        return Err(value_err(
            KEY_SHAPE,
            format!("{ndim} axes; at most {MAX_NDIM} are supported"),
        ));
    }
    let mut shape_buf = [0usize; MAX_NDIM];
    for (d, (&n, slot)) in raw_shape.iter().zip(shape_buf.iter_mut()).enumerate() {
        *slot = usize::try_from(n).map_err(|_| {
            let what = if n < 0 {
                "is negative"
            } else {
                "does not fit usize"
            };
            value_err(KEY_SHAPE, format!("shape[{d}] = {n} {what}"))
        })?;
    }
    let shape = &shape_buf[..ndim];
    let empty = shape.contains(&0);

    // strides
    let mut strides_buf = [0isize; MAX_NDIM];
    let strides_given = match raw.strides {
        RawValue::Missing | RawValue::None => false,
        RawValue::Value(s) => {
            if s.len() != ndim {
                return Err(value_err(
                    KEY_STRIDES,
                    format!("{} strides for {ndim} axes", s.len()),
                ));
            }
            for (d, (&s, slot)) in s.iter().zip(strides_buf.iter_mut()).enumerate() {
                *slot = match protocol {
                    Protocol::Cuda => isize::try_from(s).map_err(|_| {
                        value_err(
                            KEY_STRIDES,
                            format!("strides[{d}] = {s} does not fit isize"),
                        )
                    })?,
                    Protocol::SyclUsm => s
                        .checked_mul(itemsize)
                        .and_then(|b| isize::try_from(b).ok())
                        .ok_or_else(|| {
                            value_err(
                                KEY_STRIDES,
                                format!(
                                    "strides[{d}] = {s} elements of {itemsize} bytes does not \
                                     fit isize bytes"
                                ),
                            )
                        })?,
                };
            }
            true
        }
    };
    let strides = strides_given.then_some(&strides_buf[..ndim]);

    // data
    let (data, readonly) = required(raw.data, KEY_DATA)?;
    let data = u64::try_from(data).map_err(|_| {
        value_err(
            KEY_DATA,
            format!("pointer {data} is not an address (must be in 0..=2**64-1)"),
        )
    })?;
    if data == 0 && !empty {
        return Err(value_err(
            KEY_DATA,
            "null pointer for a non-empty array (0 is only for zero-size arrays)",
        ));
    }

    // offset
    let ptr = match protocol {
        Protocol::Cuda => match raw.offset {
            RawValue::Missing | RawValue::None | RawValue::Value(0) => data,
            RawValue::Value(o) => {
                return Err(Error::unsupported(format!(
                    "offset {o}: the CUDA Array Interface has no 'offset' key; \
                     data must point at the first element"
                ))
                .with_key(KEY_OFFSET))
            }
        },
        Protocol::SyclUsm => {
            let offset = raw.offset.into_option().unwrap_or(0);
            if offset < 0 {
                return Err(value_err(
                    KEY_OFFSET,
                    format!("offset {offset} is negative"),
                ));
            }
            offset
                .checked_mul(itemsize)
                .and_then(|b| b.checked_add(i128::from(data)))
                .and_then(|p| u64::try_from(p).ok())
                .ok_or_else(|| {
                    value_err(
                        KEY_OFFSET,
                        format!(
                            "data {data:#x} + offset {offset} * {itemsize} bytes overflows \
                             a 64-bit address"
                        ),
                    )
                })?
        }
    };

    // stream
    let stream = match protocol {
        Protocol::Cuda => parse_stream(raw.stream)?,
        Protocol::SyclUsm => None,
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

/// A required key's value: `Missing` and `None` are `Value` errors.
fn required<T>(v: RawValue<T>, key: &'static str) -> Result<T> {
    match v {
        RawValue::Value(t) => Ok(t),
        RawValue::Missing => Err(value_err(key, "required key is missing")),
        RawValue::None => Err(value_err(key, "required key is None")),
    }
}

fn value_err(key: &'static str, message: impl Into<Cow<'static, str>>) -> Error {
    Error::value(message).with_key(key)
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
        .with_key(KEY_TYPESTR)
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
        .with_key(KEY_TYPESTR));
    };
    match b[0] {
        b'>' if size > 1 => Err(Error::type_error(format!(
            "big-endian element type {} is not supported (CUDA devices are little-endian)",
            quoted(typestr)
        ))
        .with_key(KEY_TYPESTR)),
        b'|' if size > 1 && protocol == Protocol::Cuda => Err(value_err(
            KEY_TYPESTR,
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
    match fields {
        [] => Err(value_err(KEY_DESCR, "descr is an empty list")),
        [("", ts)] if *ts == typestr || parse_typestr_inner(protocol, ts).ok() == Some(dtype) => {
            Ok(())
        }
        [("", ts)] => Err(Error::unsupported(format!(
            "descr type {} differs from typestr {}; only descr [('', typestr)] is supported",
            quoted(ts),
            quoted(typestr)
        ))
        .with_key(KEY_DESCR)),
        [(name, _)] => Err(Error::unsupported(format!(
            "structured element types are not supported (named field {})",
            quoted(name)
        ))
        .with_key(KEY_DESCR)),
        _ => Err(Error::unsupported(format!(
            "structured element types are not supported ({} fields)",
            fields.len()
        ))
        .with_key(KEY_DESCR)),
    }
}

fn parse_stream(stream: RawValue<i128>) -> Result<Option<StreamRef>> {
    match stream {
        RawValue::Missing | RawValue::None => Ok(None),
        RawValue::Value(0) => Err(value_err(
            KEY_STREAM,
            "stream 0 is disallowed by the CUDA Array Interface (it is ambiguous); use 1 for \
             the legacy default stream, 2 for the per-thread default stream, or None when no \
             synchronization is needed",
        )),
        RawValue::Value(s) => u64::try_from(s)
            .ok()
            .and_then(StreamRef::from_cai)
            .map(Some)
            .ok_or_else(|| {
                value_err(
                    KEY_STREAM,
                    format!("stream {s} is not a stream handle (must be in 1..=2**64-1)"),
                )
            }),
    }
}

/// Checked pieces for [`build`]: the shape is already `usize`, strides (if any) bytes.
struct Parts<'s> {
    protocol: Protocol,
    version: u8,
    dtype: DType,
    shape: &'s [usize],
    strides: Option<&'s [isize]>,
    ptr: u64,
    readonly: bool,
    stream: Option<StreamRef>,
}

/// The rules shared by [`validate`] and [`ArrayDesc::from_parts`]: rank, element count,
/// stride count, C strides, null and misaligned pointers, extent. Errors carry their key.
fn build(p: Parts<'_>) -> Result<ArrayDesc> {
    let ndim = p.shape.len();
    if ndim > MAX_NDIM {
        return Err(value_err(
            KEY_SHAPE,
            format!("{ndim} axes; at most {MAX_NDIM} are supported"),
        ));
    }
    let itemsize = p.dtype.itemsize();
    let item = itemsize as i128;

    // Element count; like NumPy, the non-zero extents must multiply without overflow even
    // when another extent is 0.
    let mut nonzero: usize = 1;
    for &n in p.shape {
        nonzero = nonzero.checked_mul(n.max(1)).ok_or_else(|| {
            value_err(
                KEY_SHAPE,
                format!("the element count of shape {:?} overflows usize", p.shape),
            )
        })?;
    }
    let size = if p.shape.contains(&0) { 0 } else { nonzero };

    let mut desc = ArrayDesc {
        protocol: p.protocol,
        version: p.version,
        dtype: p.dtype,
        ndim: ndim as u8,
        readonly: p.readonly,
        c_contiguous: false,
        shape: [0; MAX_NDIM],
        strides: [0; MAX_NDIM],
        size,
        ptr: p.ptr,
        byte_range: None,
        stream: p.stream,
    };
    desc.shape[..ndim].copy_from_slice(p.shape);

    let too_big = |key: &'static str| {
        value_err(
            key,
            format!(
                "extent overflows: shape {:?} with {itemsize}-byte items does not fit the \
                 address space",
                p.shape
            ),
        )
    };
    let strides_key = match p.strides {
        Some(s) => {
            if s.len() != ndim {
                return Err(value_err(
                    KEY_STRIDES,
                    format!("{} strides for {ndim} axes", s.len()),
                ));
            }
            desc.strides[..ndim].copy_from_slice(s);
            KEY_STRIDES
        }
        None => {
            // C order: the last axis moves by one item; extents of 0 count as 1 (NumPy).
            let mut acc = item;
            for d in (0..ndim).rev() {
                desc.strides[d] = isize::try_from(acc).map_err(|_| too_big(KEY_SHAPE))?;
                acc *= p.shape[d].max(1) as i128;
            }
            isize::try_from(acc).map_err(|_| too_big(KEY_SHAPE))?;
            KEY_SHAPE
        }
    };
    let shape = &desc.shape[..ndim];
    let strides = &desc.strides[..ndim];

    let mut byte_range = None;

    if size > 0 {
        if p.ptr == 0 {
            return Err(value_err(
                KEY_DATA,
                "null pointer for a non-empty array (0 is only for zero-size arrays)",
            ));
        }
        if !p.ptr.is_multiple_of(itemsize as u64) {
            return Err(value_err(
                KEY_DATA,
                format!(
                    "pointer {:#x} is not aligned to the item size ({itemsize} bytes of {}); \
                     a misaligned access would fault on the GPU",
                    p.ptr,
                    p.dtype.name()
                ),
            ));
        }
        // Offsets (bytes, from ptr) of the lowest and highest element starts.
        let (lo, hi) = relative_extent(shape, strides)
            .filter(|&(lo, hi)| lo >= isize::MIN as i128 && hi <= isize::MAX as i128 - item)
            .ok_or_else(|| {
                value_err(
                    strides_key,
                    format!(
                        "extent overflows: shape {shape:?} with byte strides {strides:?} \
                         spans more than isize::MAX bytes"
                    ),
                )
            })?;
        let start = u64::try_from(i128::from(p.ptr) + lo);
        let end = u64::try_from(i128::from(p.ptr) + hi + item);
        let (Ok(start), Ok(end)) = (start, end) else {
            return Err(value_err(
                KEY_DATA,
                format!(
                    "extent overflows: bytes {lo}..{} around pointer {:#x} leave the 64-bit \
                     address space",
                    hi + item,
                    p.ptr
                ),
            ));
        };
        byte_range = Some((start, end));
    }
    let c_contiguous = c_contiguous(shape, strides, itemsize, size == 0);
    desc.byte_range = byte_range;
    desc.c_contiguous = c_contiguous;
    Ok(desc)
}

/// `(Σ min(0, (n-1)·s), Σ max(0, (n-1)·s))` for a non-empty array; `None` on `i128`
/// overflow (possible only with many huge axes).
fn relative_extent(shape: &[usize], strides: &[isize]) -> Option<(i128, i128)> {
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&n, &s) in shape.iter().zip(strides) {
        // |(n-1)·s| < 2^64 · 2^63 = 2^127: the product itself cannot overflow.
        let span = (n as i128 - 1) * s as i128;
        if span < 0 {
            lo = lo.checked_add(span)?;
        } else {
            hi = hi.checked_add(span)?;
        }
    }
    Some((lo, hi))
}

/// NumPy's C-contiguity: axes of extent 1 are skipped; empty arrays are contiguous.
fn c_contiguous(shape: &[usize], strides: &[isize], itemsize: usize, empty: bool) -> bool {
    if empty {
        return true;
    }
    let mut expected = itemsize as i128;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 {
            if s as i128 != expected {
                return false;
            }
            expected *= n as i128;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use std::num::NonZeroU64;
    use RawValue::{Missing, Value as V};

    type R<T> = RawValue<T>;

    /// An aligned device-looking address.
    const P: u64 = 0x7f00_0000_1000;
    const PI: i128 = P as i128;
    const TOP: u64 = 0xFFFF_FFFF_FFFF_FFF0;

    fn cuda(version: i128, shape: &'static [i128], typestr: &'static str) -> RawInterface<'static> {
        RawInterface {
            version: V(version),
            shape: V(shape),
            typestr: V(typestr),
            data: V((PI, false)),
            ..RawInterface::new(Protocol::Cuda)
        }
    }

    fn sycl(shape: &'static [i128], typestr: &'static str) -> RawInterface<'static> {
        RawInterface {
            protocol: Protocol::SyclUsm,
            ..cuda(1, shape, typestr)
        }
    }

    /// Every observable of a valid descriptor, exactly.
    struct Want {
        version: u8,
        dtype: DType,
        shape: &'static [usize],
        strides: &'static [isize],
        ptr: u64,
        readonly: bool,
        stream: Option<StreamRef>,
        contig: bool,
        size: usize,
        range: Option<(u64, u64)>,
    }

    /// The usual expectation: version 3, writable, no stream; the rest is given.
    fn want(
        dtype: DType,
        shape: &'static [usize],
        strides: &'static [isize],
        contig: bool,
        size: usize,
        range: Option<(u64, u64)>,
    ) -> Want {
        Want {
            version: 3,
            dtype,
            shape,
            strides,
            ptr: P,
            readonly: false,
            stream: None,
            contig,
            size,
            range,
        }
    }

    enum Expect {
        Ok(Want),
        /// Kind, key, and a substring the message must contain.
        Err(ErrorKind, &'static str, &'static str),
    }
    use Expect::Err as E;

    fn handle(h: u64) -> Option<StreamRef> {
        Some(StreamRef::Handle(NonZeroU64::new(h).unwrap()))
    }

    const HUGE: i128 = 1 << 64; // u64::MAX + 1
    static AXES_33: [i128; 33] = [1; 33];
    static AXES_32: [i128; 32] = [1; 32];

    #[rustfmt::skip]
    fn cases() -> Vec<(&'static str, RawInterface<'static>, Expect)> {
        use DType::*;
        use ErrorKind::{Type, Unsupported, Value};
        vec![
            // ---- producers as they export today ----------------------------------------
            ("cupy v3: C-contiguous f32 (2,3), descr, strides None, stream 1",
             RawInterface { descr: V(&[("", "<f4")]), strides: R::None, stream: V(1), ..cuda(3, &[2, 3], "<f4") },
             Expect::Ok(Want { stream: Some(StreamRef::Legacy), ..want(F32, &[2, 3], &[12, 4], true, 6, Some((P, P + 24))) })),
            ("cupy v3: transposed (3,2) view of a (2,3) f32",
             RawInterface { descr: V(&[("", "<f4")]), strides: V(&[4, 12]), stream: V(1), ..cuda(3, &[3, 2], "<f4") },
             Expect::Ok(Want { stream: Some(StreamRef::Legacy), ..want(F32, &[3, 2], &[4, 12], false, 6, Some((P, P + 24))) })),
            ("cupy v3: step slice a[::2] of 10 f64",
             RawInterface { strides: V(&[16]), stream: V(1), ..cuda(3, &[5], "<f8") },
             Expect::Ok(Want { stream: Some(StreamRef::Legacy), ..want(F64, &[5], &[16], false, 5, Some((P, P + 72))) })),
            ("pytorch v2: no stream key, int64 (4,)",
             cuda(2, &[4], "<i8"),
             Expect::Ok(Want { version: 2, ..want(I64, &[4], &[8], true, 4, Some((P, P + 32))) })),
            ("pytorch v2: transposed f16 tensor, strides in bytes",
             RawInterface { strides: V(&[2, 6]), ..cuda(2, &[3, 4], "<f2") },
             Expect::Ok(Want { version: 2, ..want(F16, &[3, 4], &[2, 6], false, 12, Some((P, P + 24))) })),
            ("pytorch v2: bool tensor |b1",
             cuda(2, &[8], "|b1"),
             Expect::Ok(Want { version: 2, ..want(Bool, &[8], &[1], true, 8, Some((P, P + 8))) })),
            ("jax v2: read-only f32 (16,)",
             RawInterface { data: V((PI, true)), ..cuda(2, &[16], "<f4") },
             Expect::Ok(Want { version: 2, readonly: true, ..want(F32, &[16], &[4], true, 16, Some((P, P + 64))) })),
            ("numba v3: stream None on the default stream, strides None",
             RawInterface { strides: R::None, stream: R::None, ..cuda(3, &[2, 2], "<f8") },
             Expect::Ok(want(F64, &[2, 2], &[16, 8], true, 4, Some((P, P + 32))))),
            ("numba v3: a stream handle",
             RawInterface { stream: V(0x55d0_c0a1_b2c0), ..cuda(3, &[3], "<u4") },
             Expect::Ok(Want { stream: handle(0x55d0_c0a1_b2c0), ..want(U32, &[3], &[4], true, 3, Some((P, P + 12))) })),
            // ---- versions ---------------------------------------------------------------
            ("version 0 accepted",
             cuda(0, &[3], "<i4"),
             Expect::Ok(Want { version: 0, ..want(I32, &[3], &[4], true, 3, Some((P, P + 12))) })),
            ("version 1 accepted",
             cuda(1, &[3], "<i4"),
             Expect::Ok(Want { version: 1, ..want(I32, &[3], &[4], true, 3, Some((P, P + 12))) })),
            ("version 2 accepted, 3-D C order computed",
             cuda(2, &[2, 3, 4], "<i2"),
             Expect::Ok(Want { version: 2, ..want(I16, &[2, 3, 4], &[24, 8, 2], true, 24, Some((P, P + 48))) })),
            ("version 3, stream 2 = per-thread default stream",
             RawInterface { stream: V(2), ..cuda(3, &[2], "<f4") },
             Expect::Ok(Want { stream: Some(StreamRef::PerThread), ..want(F32, &[2], &[4], true, 2, Some((P, P + 8))) })),
            ("version 2 with a stream key: honoured",
             RawInterface { stream: V(7), ..cuda(2, &[2], "<f4") },
             Expect::Ok(Want { version: 2, stream: handle(7), ..want(F32, &[2], &[4], true, 2, Some((P, P + 8))) })),
            ("version Missing", RawInterface { version: Missing, ..cuda(3, &[2], "<f4") }, E(Value, "version", "required key is missing")),
            ("version None", RawInterface { version: R::None, ..cuda(3, &[2], "<f4") }, E(Value, "version", "required key is None")),
            ("version 4", cuda(4, &[2], "<f4"), E(Value, "version", "supported versions are 0, 1, 2, 3")),
            ("version -1", cuda(-1, &[2], "<f4"), E(Value, "version", "unsupported version -1")),
            ("version 2**100", cuda(1 << 100, &[2], "<f4"), E(Value, "version", "unsupported version")),
            // ---- shapes -----------------------------------------------------------------
            ("rank 0: a scalar has one element",
             cuda(3, &[], "<f8"),
             Expect::Ok(want(F64, &[], &[], true, 1, Some((P, P + 8))))),
            ("zero-size with pointer 0",
             RawInterface { data: V((0, false)), ..cuda(3, &[0], "<f4") },
             Expect::Ok(Want { ptr: 0, ..want(F32, &[0], &[4], true, 0, None) })),
            ("zero-size (3,0) with odd strides and pointer 0",
             RawInterface { data: V((0, false)), strides: V(&[7, -5]), ..cuda(3, &[3, 0], "<f4") },
             Expect::Ok(Want { ptr: 0, ..want(F32, &[3, 0], &[7, -5], true, 0, None) })),
            ("zero-size with a misaligned pointer: nothing is touched",
             RawInterface { data: V((0x1001, false)), ..cuda(3, &[0, 5], "<f4") },
             Expect::Ok(Want { ptr: 0x1001, ..want(F32, &[0, 5], &[20, 4], true, 0, None) })),
            ("zero-size C strides count extent 0 as 1",
             cuda(3, &[3, 0, 2], "<f8"),
             Expect::Ok(want(F64, &[3, 0, 2], &[16, 16, 8], true, 0, None))),
            ("32 axes of extent 1",
             cuda(3, &AXES_32, "<f4"),
             Expect::Ok(want(F32, &[1; 32], &[4; 32], true, 1, Some((P, P + 4))))),
            ("broadcast of 2**63 elements through a zero stride",
             RawInterface { strides: V(&[0]), ..cuda(3, &[1 << 63], "<f4") },
             Expect::Ok(want(F32, &[1 << 63], &[0], false, 1 << 63, Some((P, P + 4))))),
            ("shape Missing", RawInterface { shape: Missing, ..cuda(3, &[2], "<f4") }, E(Value, "shape", "required key is missing")),
            ("shape None", RawInterface { shape: R::None, ..cuda(3, &[2], "<f4") }, E(Value, "shape", "required key is None")),
            ("negative extent", cuda(3, &[2, -3], "<f4"), E(Value, "shape", "shape[1] = -3 is negative")),
            ("extent beyond usize", cuda(3, &[HUGE], "<f4"), E(Value, "shape", "does not fit usize")),
            ("33 axes", cuda(3, &AXES_33, "<f4"), E(Value, "shape", "33 axes; at most 32")),
            ("element count overflows", cuda(3, &[1 << 32, 1 << 32], "<f4"), E(Value, "shape", "overflows usize")),
            ("element count overflows even with an extent 0", cuda(3, &[0, 1 << 32, 1 << 32], "<f4"), E(Value, "shape", "overflows usize")),
            ("C-contiguous bytes overflow isize", cuda(3, &[1 << 62], "<f4"), E(Value, "shape", "extent overflows")),
            // ---- typestr and descr ------------------------------------------------------
            ("'<u1': '<' on a one-byte type", cuda(3, &[2], "<u1"), Expect::Ok(want(U8, &[2], &[1], true, 2, Some((P, P + 2))))),
            ("'|i1'", cuda(3, &[2], "|i1"), Expect::Ok(want(I8, &[2], &[1], true, 2, Some((P, P + 2))))),
            ("'>i1': byte order is moot for one byte", cuda(3, &[2], ">i1"), Expect::Ok(want(I8, &[2], &[1], true, 2, Some((P, P + 2))))),
            ("'=f4': native order is little-endian", cuda(3, &[2], "=f4"), Expect::Ok(want(F32, &[2], &[4], true, 2, Some((P, P + 8))))),
            ("'<u2'", cuda(3, &[2], "<u2"), Expect::Ok(want(U16, &[2], &[2], true, 2, Some((P, P + 4))))),
            ("'<u8'", cuda(3, &[2], "<u8"), Expect::Ok(want(U64, &[2], &[8], true, 2, Some((P, P + 16))))),
            ("'<c8'", cuda(3, &[2], "<c8"), Expect::Ok(want(C64, &[2], &[8], true, 2, Some((P, P + 16))))),
            ("'<c16'", cuda(3, &[2], "<c16"), Expect::Ok(want(C128, &[2], &[16], true, 2, Some((P, P + 32))))),
            ("descr None", RawInterface { descr: R::None, ..cuda(3, &[2], "<f4") }, Expect::Ok(want(F32, &[2], &[4], true, 2, Some((P, P + 8))))),
            ("descr for '|b1'", RawInterface { descr: V(&[("", "|b1")]), ..cuda(3, &[2], "|b1") }, Expect::Ok(want(Bool, &[2], &[1], true, 2, Some((P, P + 2))))),
            ("descr '=f4' for '<f4': same type", RawInterface { descr: V(&[("", "=f4")]), ..cuda(3, &[2], "<f4") }, Expect::Ok(want(F32, &[2], &[4], true, 2, Some((P, P + 8))))),
            ("typestr Missing", RawInterface { typestr: Missing, ..cuda(3, &[2], "<f4") }, E(Value, "typestr", "required key is missing")),
            ("typestr None", RawInterface { typestr: R::None, ..cuda(3, &[2], "<f4") }, E(Value, "typestr", "required key is None")),
            ("'|V8' structured/void", cuda(3, &[2], "|V8"), E(Type, "typestr", "unsupported element type \"|V8\"")),
            ("'|O8' object", cuda(3, &[2], "|O8"), E(Type, "typestr", "unsupported element type \"|O8\"")),
            ("'<M8' datetime", cuda(3, &[2], "<M8"), E(Type, "typestr", "\"<M8\"")),
            ("'|S5' bytes", cuda(3, &[2], "|S5"), E(Type, "typestr", "\"|S5\"")),
            ("'<U4' unicode", cuda(3, &[2], "<U4"), E(Type, "typestr", "\"<U4\"")),
            ("'<f16' long double", cuda(3, &[2], "<f16"), E(Type, "typestr", "unsupported element type \"<f16\"; supported: |b1, |i1, <i2")),
            ("'<i3' odd size", cuda(3, &[2], "<i3"), E(Type, "typestr", "\"<i3\"")),
            ("'<f99999999999999999999' huge size", cuda(3, &[2], "<f99999999999999999999"), E(Type, "typestr", "unsupported element type")),
            ("'garbage'", cuda(3, &[2], "garbage"), E(Type, "typestr", "malformed typestr \"garbage\"")),
            ("empty typestr", cuda(3, &[2], ""), E(Type, "typestr", "malformed typestr \"\"")),
            ("'<f' without a size", cuda(3, &[2], "<f"), E(Type, "typestr", "malformed")),
            ("'<f4x' trailing garbage", cuda(3, &[2], "<f4x"), E(Type, "typestr", "malformed")),
            ("'?f4' unknown byte order", cuda(3, &[2], "?f4"), E(Type, "typestr", "malformed")),
            ("'>f4' big-endian", cuda(3, &[2], ">f4"), E(Type, "typestr", "big-endian element type \">f4\"")),
            ("'|f4' under the CAI", cuda(3, &[2], "|f4"), E(Value, "typestr", "expected '<' (NumPy writes \"<f4\")")),
            ("descr with two fields", RawInterface { descr: V(&[("a", "<f4"), ("b", "<i4")]), ..cuda(3, &[2], "<f4") }, E(Unsupported, "descr", "2 fields")),
            ("descr with a named field", RawInterface { descr: V(&[("x", "<f4")]), ..cuda(3, &[2], "<f4") }, E(Unsupported, "descr", "named field \"x\"")),
            ("descr type differs from typestr", RawInterface { descr: V(&[("", "<i4")]), ..cuda(3, &[2], "<f4") }, E(Unsupported, "descr", "differs from typestr")),
            ("descr empty", RawInterface { descr: V(&[]), ..cuda(3, &[2], "<f4") }, E(Value, "descr", "empty list")),
            // ---- mask -------------------------------------------------------------------
            ("mask None", RawInterface { mask: R::None, ..cuda(3, &[2], "<f4") }, Expect::Ok(want(F32, &[2], &[4], true, 2, Some((P, P + 8))))),
            ("mask present", RawInterface { mask: V(()), ..cuda(3, &[2], "<f4") }, E(Unsupported, "mask", "masked arrays are not supported")),
            ("mask present on v0 too", RawInterface { mask: V(()), ..cuda(0, &[2], "<f4") }, E(Unsupported, "mask", "masked arrays are not supported")),
            // ---- data -------------------------------------------------------------------
            ("pointer at the top of the address space",
             RawInterface { data: V((TOP as i128, false)), ..cuda(3, &[1], "<f8") },
             Expect::Ok(Want { ptr: TOP, ..want(F64, &[1], &[8], true, 1, Some((TOP, TOP + 8))) })),
            ("data Missing", RawInterface { data: Missing, ..cuda(3, &[2], "<f4") }, E(Value, "data", "required key is missing")),
            ("data None", RawInterface { data: R::None, ..cuda(3, &[2], "<f4") }, E(Value, "data", "required key is None")),
            ("negative pointer", RawInterface { data: V((-8, false)), ..cuda(3, &[2], "<f4") }, E(Value, "data", "pointer -8 is not an address")),
            ("pointer beyond 64 bits", RawInterface { data: V((HUGE, false)), ..cuda(3, &[2], "<f4") }, E(Value, "data", "is not an address")),
            ("null pointer for a non-empty array", RawInterface { data: V((0, false)), ..cuda(3, &[2], "<f4") }, E(Value, "data", "null pointer")),
            ("misaligned f32 pointer", RawInterface { data: V((0x1002, false)), ..cuda(3, &[2], "<f4") }, E(Value, "data", "0x1002 is not aligned to the item size (4 bytes of float32)")),
            ("complex128 at 8 mod 16", RawInterface { data: V((0x1008, false)), ..cuda(3, &[2], "<c16") }, E(Value, "data", "not aligned")),
            // ---- strides ----------------------------------------------------------------
            ("reversed a[::-1] of 5 f32: negative stride",
             RawInterface { data: V((PI + 16, false)), strides: V(&[-4]), ..cuda(3, &[5], "<f4") },
             Expect::Ok(Want { ptr: P + 16, ..want(F32, &[5], &[-4], false, 5, Some((P, P + 20))) })),
            ("broadcast axis: zero stride",
             RawInterface { strides: V(&[0, 4]), ..cuda(3, &[3, 4], "<f4") },
             Expect::Ok(want(F32, &[3, 4], &[0, 4], false, 12, Some((P, P + 16))))),
            ("explicit C strides are contiguous",
             RawInterface { strides: V(&[24, 8, 2]), ..cuda(3, &[2, 3, 4], "<i2") },
             Expect::Ok(want(I16, &[2, 3, 4], &[24, 8, 2], true, 24, Some((P, P + 48))))),
            ("Fortran order is not C-contiguous",
             RawInterface { strides: V(&[4, 8]), ..cuda(3, &[2, 3], "<f4") },
             Expect::Ok(want(F32, &[2, 3], &[4, 8], false, 6, Some((P, P + 24))))),
            ("extent-1 axis with any stride is still contiguous",
             RawInterface { strides: V(&[1234, 4]), ..cuda(3, &[1, 4], "<f4") },
             Expect::Ok(want(F32, &[1, 4], &[1234, 4], true, 4, Some((P, P + 16))))),
            ("non-multiple stride kept by the descriptor",
             RawInterface { strides: V(&[6]), ..cuda(3, &[3], "<f4") },
             Expect::Ok(want(F32, &[3], &[6], false, 3, Some((P, P + 16))))),
            ("strides length mismatch", RawInterface { strides: V(&[4]), ..cuda(3, &[2, 2], "<f4") }, E(Value, "strides", "1 strides for 2 axes")),
            ("strides length mismatch on an empty array", RawInterface { data: V((0, false)), strides: V(&[4, 4, 4]), ..cuda(3, &[0, 2], "<f4") }, E(Value, "strides", "3 strides for 2 axes")),
            ("stride beyond isize::MAX", RawInterface { strides: V(&[isize::MAX as i128 + 1]), ..cuda(3, &[2], "<f4") }, E(Value, "strides", "strides[0] = 9223372036854775808 does not fit isize")),
            ("stride below isize::MIN", RawInterface { strides: V(&[isize::MIN as i128 - 1]), ..cuda(3, &[2], "<f4") }, E(Value, "strides", "does not fit isize")),
            ("huge stride: extent overflows isize", RawInterface { strides: V(&[1 << 62]), ..cuda(3, &[3], "<f4") }, E(Value, "strides", "extent overflows")),
            ("two huge strides: sum overflows isize", RawInterface { strides: V(&[1 << 62, 1 << 62]), ..cuda(3, &[2, 2], "<f4") }, E(Value, "strides", "extent overflows")),
            ("negative stride reaching below address 0", RawInterface { data: V((0x1000, false)), strides: V(&[-8]), ..cuda(3, &[1000], "<f8") }, E(Value, "data", "extent overflows")),
            ("end beyond the 64-bit address space", RawInterface { data: V((TOP as i128, false)), ..cuda(3, &[2], "<f8") }, E(Value, "data", "extent overflows")),
            // ---- stream -----------------------------------------------------------------
            ("stream 0", RawInterface { stream: V(0), ..cuda(3, &[2], "<f4") }, E(Value, "stream", "use 1 for the legacy default stream, 2 for the per-thread default stream")),
            ("stream -1", RawInterface { stream: V(-1), ..cuda(3, &[2], "<f4") }, E(Value, "stream", "stream -1 is not a stream handle")),
            ("stream 2**64", RawInterface { stream: V(HUGE), ..cuda(3, &[2], "<f4") }, E(Value, "stream", "is not a stream handle")),
            ("stream u64::MAX is a handle",
             RawInterface { stream: V(u64::MAX as i128), ..cuda(3, &[2], "<f4") },
             Expect::Ok(Want { stream: handle(u64::MAX), ..want(F32, &[2], &[4], true, 2, Some((P, P + 8))) })),
            // ---- offset under the CAI ---------------------------------------------------
            ("CAI offset 0 is harmless", RawInterface { offset: V(0), ..cuda(3, &[2], "<f4") }, Expect::Ok(want(F32, &[2], &[4], true, 2, Some((P, P + 8))))),
            ("CAI offset 4 is unsupported", RawInterface { offset: V(4), ..cuda(3, &[2], "<f4") }, E(Unsupported, "offset", "no 'offset' key")),
            // ---- SYCL USM ---------------------------------------------------------------
            ("sycl v1: element strides become bytes, '|f4' accepted",
             RawInterface { strides: V(&[1, 3]), ..sycl(&[3, 2], "|f4") },
             Expect::Ok(Want { version: 1, ..want(F32, &[3, 2], &[4, 12], false, 6, Some((P, P + 24))) })),
            ("sycl: offset in elements moves the pointer",
             RawInterface { offset: V(2), ..sycl(&[4], "|f8") },
             Expect::Ok(Want { version: 1, ptr: P + 16, ..want(F64, &[4], &[8], true, 4, Some((P + 16, P + 48))) })),
            ("sycl: offset None = 0, '<' accepted too",
             RawInterface { offset: R::None, ..sycl(&[2], "<i4") },
             Expect::Ok(Want { version: 1, ..want(I32, &[2], &[4], true, 2, Some((P, P + 8))) })),
            ("sycl: a stream key is ignored",
             RawInterface { stream: V(0), ..sycl(&[2], "|f4") },
             Expect::Ok(Want { version: 1, ..want(F32, &[2], &[4], true, 2, Some((P, P + 8))) })),
            ("sycl: zero-size with pointer 0",
             RawInterface { data: V((0, false)), offset: V(0), ..sycl(&[0], "|f4") },
             Expect::Ok(Want { version: 1, ptr: 0, ..want(F32, &[0], &[4], true, 0, None) })),
            ("sycl: version 2", RawInterface { version: V(2), ..sycl(&[2], "|f4") }, E(Value, "version", "the supported version is 1")),
            ("sycl: version 3", RawInterface { version: V(3), ..sycl(&[2], "|f4") }, E(Value, "version", "unsupported version 3")),
            ("sycl: version Missing", RawInterface { version: Missing, ..sycl(&[2], "|f4") }, E(Value, "version", "required key is missing")),
            ("sycl: data Missing", RawInterface { data: Missing, ..sycl(&[2], "|f4") }, E(Value, "data", "required key is missing")),
            ("sycl: negative offset", RawInterface { offset: V(-1), ..sycl(&[2], "|f4") }, E(Value, "offset", "offset -1 is negative")),
            ("sycl: offset overflows the address", RawInterface { offset: V(1 << 62), ..sycl(&[2], "|f4") }, E(Value, "offset", "overflows a 64-bit address")),
            ("sycl: null data with an offset", RawInterface { data: V((0, false)), offset: V(4), ..sycl(&[2], "|f4") }, E(Value, "data", "null pointer")),
            ("sycl: element stride too big in bytes", RawInterface { strides: V(&[1 << 62]), ..sycl(&[2], "|f4") }, E(Value, "strides", "elements of 4 bytes does not fit isize")),
            ("sycl: misaligned data", RawInterface { data: V((0x1001, false)), ..sycl(&[2], "|f4") }, E(Value, "data", "not aligned")),
            ("sycl: mask present", RawInterface { mask: V(()), ..sycl(&[2], "|f4") }, E(Unsupported, "mask", "masked arrays")),
            ("sycl: big-endian", sycl(&[2], ">f8"), E(Type, "typestr", "big-endian")),
        ]
    }

    #[test]
    fn table() {
        let cases = cases();
        assert!(cases.len() >= 60, "only {} cases", cases.len());
        for (name, raw, expect) in cases {
            let got = validate(&raw);
            match (expect, got) {
                (Expect::Ok(w), Ok(a)) => {
                    assert_eq!(a.protocol(), raw.protocol, "{name}: protocol");
                    assert_eq!(a.version(), w.version, "{name}: version");
                    assert_eq!(a.dtype(), w.dtype, "{name}: dtype");
                    assert_eq!(a.itemsize(), w.dtype.itemsize(), "{name}: itemsize");
                    assert_eq!(a.ndim(), w.shape.len(), "{name}: ndim");
                    assert_eq!(a.shape(), w.shape, "{name}: shape");
                    assert_eq!(a.byte_strides(), w.strides, "{name}: strides");
                    assert_eq!(a.ptr(), w.ptr, "{name}: ptr");
                    assert_eq!(a.readonly(), w.readonly, "{name}: readonly");
                    assert_eq!(a.stream(), w.stream, "{name}: stream");
                    assert_eq!(a.is_c_contiguous(), w.contig, "{name}: contiguity");
                    assert_eq!(a.size(), w.size, "{name}: size");
                    assert_eq!(a.is_empty(), w.size == 0, "{name}: is_empty");
                    assert_eq!(a.byte_range(), w.range, "{name}: byte_range");
                }
                (Expect::Err(kind, key, text), Err(e)) => {
                    assert_eq!(e.kind(), kind, "{name}: kind of {e}");
                    assert_eq!(e.key(), Some(key), "{name}: key of {e}");
                    assert_eq!(e.arg(), None, "{name}: arg of {e}");
                    let shown = e.to_string();
                    let prefix = format!("{}['{key}']: ", raw.protocol.key());
                    assert!(
                        shown.starts_with(&prefix),
                        "{name}: {shown:?} lacks {prefix:?}"
                    );
                    assert!(shown.contains(text), "{name}: {shown:?} lacks {text:?}");
                    // The argument name is added by the caller, in front.
                    let named = e.with_arg("x").to_string();
                    assert_eq!(named, format!("argument `x`: {shown}"), "{name}");
                }
                (Expect::Ok(_), Err(e)) => panic!("{name}: expected Ok, got {e}"),
                (Expect::Err(kind, key, _), Ok(a)) => {
                    panic!("{name}: expected {kind:?} on {key}, got {a:?}")
                }
            }
        }
    }

    #[test]
    fn protocol_keys_and_new() {
        assert_eq!(Protocol::Cuda.key(), "__cuda_array_interface__");
        assert_eq!(Protocol::SyclUsm.key(), "__sycl_usm_array_interface__");
        let raw = RawInterface::new(Protocol::SyclUsm);
        assert_eq!(raw.protocol, Protocol::SyclUsm);
        assert_eq!(raw.version, Missing);
        assert_eq!(raw.shape, Missing);
        assert_eq!(raw.typestr, Missing);
        assert_eq!(raw.data, Missing);
        assert_eq!(raw.strides, Missing);
        assert_eq!(raw.descr, Missing);
        assert_eq!(raw.mask, Missing);
        assert_eq!(raw.stream, Missing);
        assert_eq!(raw.offset, Missing);
        assert_eq!(V(3).into_option(), Some(3));
        assert_eq!(R::<i32>::None.into_option(), None);
        assert_eq!(R::<i32>::Missing.into_option(), None);
    }

    #[test]
    fn every_dtype_typestr_round_trips() {
        for d in DType::ALL {
            assert_eq!(parse_typestr(Protocol::Cuda, d.typestr()).unwrap(), d);
            assert_eq!(parse_typestr(Protocol::SyclUsm, d.typestr()).unwrap(), d);
            // dpctl's spelling: '|' for every type.
            let dpctl = format!("|{}", &d.typestr()[1..]);
            assert_eq!(parse_typestr(Protocol::SyclUsm, &dpctl).unwrap(), d);
            let native = format!("={}", &d.typestr()[1..]);
            assert_eq!(parse_typestr(Protocol::Cuda, &native).unwrap(), d);
        }
        let e = parse_typestr(Protocol::Cuda, "|f8").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value);
        assert!(e
            .to_string()
            .starts_with("__cuda_array_interface__['typestr']: "));
        let long = "x".repeat(100);
        let e = parse_typestr(Protocol::SyclUsm, &long).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Type);
        assert!(e
            .to_string()
            .starts_with("__sycl_usm_array_interface__['typestr']: "));
        assert!(
            e.message().contains(&format!("\"{}\"…", "x".repeat(24))),
            "{e}"
        );
    }

    #[test]
    fn byte_range_exact() {
        let f = |dtype, shape: &[usize], strides: Option<&[isize]>, ptr| {
            ArrayDesc::from_parts(dtype, shape, strides, ptr, false, None)
                .unwrap()
                .byte_range()
        };
        // C order: one contiguous block.
        assert_eq!(f(DType::F32, &[2, 3], None, 0x1000), Some((0x1000, 0x1018)));
        // Reversed axis: ptr is the highest element.
        assert_eq!(
            f(DType::F64, &[4], Some(&[-8]), 0x1018),
            Some((0x1000, 0x1020))
        );
        // Mixed signs: lo from the negative axis, hi from the positive one.
        assert_eq!(
            f(DType::I32, &[3, 2], Some(&[-16, 4]), 0x2000),
            Some((0x2000 - 32, 0x2000 + 4 + 4))
        );
        // Broadcast: every element at ptr.
        assert_eq!(
            f(DType::U8, &[100, 100], Some(&[0, 0]), 0x10),
            Some((0x10, 0x11))
        );
        // Scalar and empty.
        assert_eq!(f(DType::C128, &[], None, 0x100), Some((0x100, 0x110)));
        assert_eq!(f(DType::C128, &[5, 0], None, 0), None);
        // Strided sub-array a[1:3, ::2] of a (4, 6) f32 at 0x1000: ptr 0x1018.
        assert_eq!(
            f(DType::F32, &[2, 3], Some(&[24, 8]), 0x1018),
            Some((0x1018, 0x1018 + 24 + 16 + 4))
        );
    }

    #[test]
    fn from_parts_validates_like_validate() {
        let a = ArrayDesc::from_parts(
            DType::F32,
            &[2, 3],
            None,
            P,
            true,
            Some(StreamRef::PerThread),
        )
        .unwrap();
        assert_eq!(a.protocol(), Protocol::Cuda);
        assert_eq!(a.version(), 3);
        assert_eq!(a.byte_strides(), &[12, 4]);
        assert!(a.readonly());
        assert_eq!(a.stream(), Some(StreamRef::PerThread));
        // The same array through validate compares equal.
        let raw = RawInterface {
            data: V((PI, true)),
            stream: V(2),
            ..cuda(3, &[2, 3], "<f4")
        };
        assert_eq!(validate(&raw).unwrap(), a);

        let err = |r: Result<ArrayDesc>| {
            let e = r.unwrap_err();
            (e.kind(), e.key().map(str::to_owned))
        };
        let value = |k: &str| (ErrorKind::Value, Some(k.to_owned()));
        let fp = ArrayDesc::from_parts;
        assert_eq!(
            err(fp(DType::F32, &[2], None, 0, false, None)),
            value("data")
        );
        assert_eq!(
            err(fp(DType::F32, &[2], None, P + 2, false, None)),
            value("data")
        );
        assert_eq!(
            err(fp(DType::F32, &[2], Some(&[4, 4]), P, false, None)),
            value("strides")
        );
        assert_eq!(
            err(fp(DType::F32, &[1; 33], None, P, false, None)),
            value("shape")
        );
        assert_eq!(
            err(fp(DType::F32, &[usize::MAX, 2], None, P, false, None)),
            value("shape")
        );
        assert_eq!(
            err(fp(DType::F64, &[3], Some(&[isize::MAX]), P, false, None)),
            value("strides")
        );
        let e = fp(DType::F32, &[2], None, 0, false, None).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("__cuda_array_interface__['data']: null pointer"));
        // Empty arrays take any pointer and strides.
        let e = fp(DType::F32, &[0, 2], Some(&[3, -7]), 0, false, None).unwrap();
        assert_eq!(e.size(), 0);
        assert_eq!(e.byte_range(), None);
    }

    #[test]
    fn indexer_for_kernels() {
        // Transposed (3, 2) view of a (2, 3) f32.
        let t = ArrayDesc::from_parts(DType::F32, &[3, 2], Some(&[4, 12]), P, false, None).unwrap();
        let ix = t.indexer::<2>().unwrap();
        assert_eq!(ix.shape, [3, 2]);
        assert_eq!(ix.strides, [1, 3]);
        assert_eq!(ix.offset([2, 1]), 5);
        // Reversed f64 axis.
        let r = ArrayDesc::from_parts(DType::F64, &[4], Some(&[-8]), P + 24, false, None).unwrap();
        let ix = r.indexer::<1>().unwrap();
        assert_eq!(ix.strides, [-1]);
        let (lo, hi) = ix.extent().unwrap();
        let (blo, bhi) = r.byte_range().unwrap();
        assert_eq!((r.ptr() as i128 + lo as i128 * 8) as u64, blo);
        assert_eq!((r.ptr() as i128 + hi as i128 * 8 + 8) as u64, bhi);
        // Scalar.
        let s = ArrayDesc::from_parts(DType::I8, &[], None, P, false, None).unwrap();
        assert_eq!(s.indexer::<0>().unwrap().size(), 1);

        // Wrong rank: Type error naming the shape key.
        let e = t.indexer::<3>().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Type);
        assert_eq!(e.key(), Some("shape"));
        assert_eq!(
            e.to_string(),
            "__cuda_array_interface__['shape']: expected a 3-D array, got a 2-D array of shape [3, 2]"
        );
        // Non-multiple stride on a real axis: Value error naming strides.
        let odd = ArrayDesc::from_parts(DType::F32, &[3], Some(&[6]), P, false, None).unwrap();
        let e = odd.indexer::<1>().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value);
        assert_eq!(e.key(), Some("strides"));
        assert!(
            e.to_string()
                .contains("strides[0] = 6 bytes is not a multiple"),
            "{e}"
        );
        // ... but harmless on an axis of extent 1 or an empty array: becomes 0.
        let one =
            ArrayDesc::from_parts(DType::F32, &[1, 4], Some(&[1234, 4]), P, false, None).unwrap();
        assert_eq!(one.indexer::<2>().unwrap().strides, [0, 1]);
        let empty =
            ArrayDesc::from_parts(DType::F32, &[0, 4], Some(&[6, 5]), 0, false, None).unwrap();
        assert_eq!(empty.indexer::<2>().unwrap().strides, [0, 0]);
        // SYCL errors name their protocol.
        let raw = RawInterface {
            strides: V(&[1, 3]),
            ..sycl(&[3, 2], "|f4")
        };
        let e = validate(&raw).unwrap().indexer::<1>().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("__sycl_usm_array_interface__['shape']: "),
            "{e}"
        );
    }

    #[test]
    fn unused_slots_are_zero_and_debug_is_short() {
        let a = ArrayDesc::from_parts(DType::F32, &[2, 3], None, P, false, None).unwrap();
        assert!(a.shape[2..].iter().all(|&n| n == 0));
        assert!(a.strides[2..].iter().all(|&s| s == 0));
        let dbg = format!("{a:?}");
        assert!(dbg.contains("shape: [2, 3]"), "{dbg}");
        assert!(dbg.contains("byte_strides: [12, 4]"), "{dbg}");
        assert!(dbg.contains("ptr: 0x7f0000001000"), "{dbg}");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// byte_range and the indexer agree with visiting every element.
            #[test]
            fn byte_range_matches_enumeration(
                shape in proptest::collection::vec(1usize..5, 0..4),
                raw_strides in proptest::collection::vec(-6isize..7, 4),
                dtype in proptest::sample::select(DType::ALL.to_vec()),
            ) {
                let item = dtype.itemsize() as isize;
                let strides: Vec<isize> =
                    raw_strides[..shape.len()].iter().map(|s| s * item).collect();
                let ptr = 0x10_0000u64;
                let a = ArrayDesc::from_parts(dtype, &shape, Some(&strides), ptr, false, None)
                    .unwrap();
                let size: usize = shape.iter().product();
                prop_assert_eq!(a.size(), size);
                let (mut lo, mut hi) = (i128::MAX, i128::MIN);
                for linear in 0..size {
                    let mut rest = linear;
                    let mut off = 0i128;
                    for d in (0..shape.len()).rev() {
                        off += (rest % shape[d]) as i128 * strides[d] as i128;
                        rest /= shape[d];
                    }
                    lo = lo.min(off);
                    hi = hi.max(off);
                }
                let want = (ptr as i128 + lo, ptr as i128 + hi + item as i128);
                let (blo, bhi) = a.byte_range().unwrap();
                prop_assert_eq!((blo as i128, bhi as i128), want);
                // The element-stride indexer of the same array gives the same offsets.
                if shape.len() == 2 {
                    let ix = a.indexer::<2>().unwrap();
                    for linear in 0..size {
                        let off = ix.offset_of(linear) as i128 * item as i128 + ptr as i128;
                        prop_assert!(off >= want.0 && off + (item as i128) <= want.1);
                    }
                }
                // Contiguity agrees with the abi crate's definition.
                if shape.len() == 3 {
                    let ix = a.indexer::<3>().unwrap();
                    prop_assert_eq!(a.is_c_contiguous(), ix.is_c_contiguous());
                }
            }
        }
    }
}
