//! The one error type of the host crate, and the names it reports.
//!
//! [`Error`] is opaque (as in ndarray): inspect it through [`Error::kind`], which is a
//! `#[non_exhaustive]` [`ErrorKind`]; the message is in its `Display`. Every error about an
//! argument names the argument (`arg`) and, for array-interface problems, the [`Key`] and the
//! [`Protocol`] it belongs to — e.g.
//! ``argument `out`: __cuda_array_interface__['data']: array is read-only``.
//!
//! The Python layer maps kinds to exceptions: [`ErrorKind::Type`] → `TypeError`,
//! [`ErrorKind::Value`] → `ValueError`, [`ErrorKind::Unsupported`] → `NotImplementedError`,
//! [`ErrorKind::Cuda`] and [`ErrorKind::NoDriver`] → `ferrocuda.CudaError`.

use std::borrow::Cow;
use std::fmt;

/// Which protocol described an array: the interface whose keys errors name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// `__cuda_array_interface__` (versions 0–3).
    Cuda,
    /// `__sycl_usm_array_interface__` (dpctl, version 1): strides in elements, an `offset` key.
    SyclUsm,
    /// NumPy's `__array_interface__` (host memory), read with the CUDA Array Interface's rules.
    NumPy,
    /// DLPack (`__dlpack__`): a C structure, not a dictionary; its fields are named as keys.
    DLPack,
}

impl Protocol {
    /// The attribute name: `"__cuda_array_interface__"`, `"__sycl_usm_array_interface__"`,
    /// `"__array_interface__"` or `"__dlpack__"`.
    pub fn key(self) -> &'static str {
        match self {
            Protocol::Cuda => "__cuda_array_interface__",
            Protocol::SyclUsm => "__sycl_usm_array_interface__",
            Protocol::NumPy => "__array_interface__",
            Protocol::DLPack => "__dlpack__",
        }
    }
}

/// A key of an array interface (or a field of a DLPack tensor) that an error concerns.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// `version`.
    Version,
    /// `shape`.
    Shape,
    /// `typestr`.
    Typestr,
    /// `data`.
    Data,
    /// `strides`.
    Strides,
    /// `descr`.
    Descr,
    /// `mask`.
    Mask,
    /// `stream`.
    Stream,
    /// `offset` (SYCL USM).
    Offset,
    /// DLPack: `device`.
    Device,
    /// DLPack: `dtype`.
    Dtype,
    /// DLPack: `ndim`.
    Ndim,
    /// DLPack: `byte_offset`.
    ByteOffset,
}

impl Key {
    /// The key as the interface spells it (`"data"`, `"byte_offset"`, …).
    pub fn name(self) -> &'static str {
        match self {
            Key::Version => "version",
            Key::Shape => "shape",
            Key::Typestr => "typestr",
            Key::Data => "data",
            Key::Strides => "strides",
            Key::Descr => "descr",
            Key::Mask => "mask",
            Key::Stream => "stream",
            Key::Offset => "offset",
            Key::Device => "device",
            Key::Dtype => "dtype",
            Key::Ndim => "ndim",
            Key::ByteOffset => "byte_offset",
        }
    }
}

/// What went wrong, in categories a caller can act on.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// An argument has the wrong type, element type or rank.
    Type,
    /// An argument's value is malformed or out of range (shape, strides, pointer, extent,
    /// read-only output, stream 0, …).
    Value,
    /// A feature the array interface allows but ferrocuda does not support (e.g. `mask`).
    Unsupported,
    /// A CUDA driver call failed; `code` is the `CUresult`.
    Cuda {
        /// The raw `CUresult` value.
        code: u32,
    },
    /// No CUDA driver (or no device) could be found.
    NoDriver,
}

/// ferrocuda's error: a kind, the argument and interface key it concerns, and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    arg: Option<Cow<'static, str>>,
    key: Option<Key>,
    protocol: Option<Protocol>,
    message: Cow<'static, str>,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Error {
            kind,
            arg: None,
            key: None,
            protocol: None,
            message: message.into(),
        }
    }

    /// Shorthand for [`ErrorKind::Type`].
    pub fn type_error(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Type, message)
    }

    /// Shorthand for [`ErrorKind::Value`].
    pub fn value(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Value, message)
    }

    /// Shorthand for [`ErrorKind::Unsupported`].
    pub fn unsupported(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }

    /// Names the argument this error is about (kept if already set).
    pub fn with_arg(mut self, arg: impl Into<Cow<'static, str>>) -> Self {
        if self.arg.is_none() {
            self.arg = Some(arg.into());
        }
        self
    }

    /// Names the interface key this error is about (kept if already set).
    pub fn with_key(mut self, key: Key) -> Self {
        if self.key.is_none() {
            self.key = Some(key);
        }
        self
    }

    /// Names the interface protocol the key belongs to (kept if already set).
    pub fn with_protocol(mut self, protocol: Protocol) -> Self {
        if self.protocol.is_none() {
            self.protocol = Some(protocol);
        }
        self
    }

    /// The same error reported under `protocol` (for a reader that applies one protocol's
    /// rules to another's data, e.g. NumPy's interface read with the CAI's rules). Errors
    /// without a key name no protocol and are returned unchanged.
    pub fn under_protocol(mut self, protocol: Protocol) -> Self {
        if self.key.is_some() {
            self.protocol = Some(protocol);
        }
        self
    }

    /// The category.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The argument this error concerns, if any.
    pub fn arg(&self) -> Option<&str> {
        self.arg.as_deref()
    }

    /// The name of the interface key this error concerns, if any (`"data"`, …).
    pub fn key(&self) -> Option<&'static str> {
        self.key.map(Key::name)
    }

    /// The interface key this error concerns, if any.
    pub fn interface_key(&self) -> Option<Key> {
        self.key
    }

    /// The protocol the key belongs to, if the error names one.
    pub fn protocol(&self) -> Option<Protocol> {
        self.protocol
    }

    /// The message without the argument/key prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(arg) = &self.arg {
            write!(f, "argument `{arg}`: ")?;
        }
        if let Some(key) = self.key {
            let proto = self.protocol.unwrap_or(Protocol::Cuda).key();
            write!(f, "{proto}['{}']: ", key.name())?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_argument_and_key() {
        let e = Error::value("array is read-only")
            .with_key(Key::Data)
            .with_arg("out");
        assert_eq!(
            e.to_string(),
            "argument `out`: __cuda_array_interface__['data']: array is read-only"
        );
        assert_eq!(e.kind(), ErrorKind::Value);
        // First name wins: inner layers name more precisely than outer ones.
        let e = e.with_arg("other");
        assert_eq!(e.arg(), Some("out"));
        assert_eq!(e.interface_key(), Some(Key::Data));
        let e = e.under_protocol(Protocol::NumPy);
        assert_eq!(
            e.to_string(),
            "argument `out`: __array_interface__['data']: array is read-only"
        );
        assert_eq!(
            Error::value("x")
                .under_protocol(Protocol::DLPack)
                .protocol(),
            None
        );
    }
}
