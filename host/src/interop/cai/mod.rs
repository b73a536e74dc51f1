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
//! This module holds the model ([`RawValue`], [`RawInterface`]); `desc` holds [`ArrayDesc`]
//! with the rules every descriptor obeys, and `validate` (which uses `desc`) reads the keys. Layout arithmetic
//! (element count, extent, contiguity, stride units) is `ferrocuda_abi::layout`'s.
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
//! [`DType`](ferrocuda_abi::DType) (`|b1`, `|i1`…`<i8`, `|u1`…`<u8`, `<f2`, `<f4`, `<f8`, `<c8`, `<c16`). Any other
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
//! [`ArrayDesc::indexer`] — which builds the *element*-stride [`Indexer`](ferrocuda_abi::Indexer) a kernel receives —
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
//! use ferrocuda_host::interop::cai::{self, Protocol, RawInterface, RawValue};
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

mod desc;
mod validate;

pub use crate::error::Protocol;
pub use desc::ArrayDesc;
pub use ferrocuda_abi::MAX_NDIM;
pub use validate::{parse_typestr, validate};

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
