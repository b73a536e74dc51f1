//! The one error type of the host crate.
//!
//! [`Error`] is opaque (as in ndarray): inspect it through [`Error::kind`], which is a
//! `#[non_exhaustive]` [`ErrorKind`]; the message is in its `Display`. Every error about an
//! argument names the argument (`arg`) and, for array-interface problems, the key (`key`) —
//! e.g. ``argument `out`: __cuda_array_interface__['data']: array is read-only``.
//!
//! The Python layer maps kinds to exceptions: [`ErrorKind::Type`] → `TypeError`,
//! [`ErrorKind::Value`] → `ValueError`, [`ErrorKind::Unsupported`] → `NotImplementedError`,
//! [`ErrorKind::Cuda`] and [`ErrorKind::NoDriver`] → `ferrocuda.CudaError`.

use std::borrow::Cow;
use std::fmt;

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
    key: Option<Cow<'static, str>>,
    protocol: Option<&'static str>,
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
    pub fn with_key(mut self, key: impl Into<Cow<'static, str>>) -> Self {
        if self.key.is_none() {
            self.key = Some(key.into());
        }
        self
    }

    /// Names the interface protocol (`__cuda_array_interface__`, …) the key belongs to.
    pub fn with_protocol(mut self, protocol: &'static str) -> Self {
        if self.protocol.is_none() {
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

    /// The interface key this error concerns, if any.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
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
        if let Some(key) = &self.key {
            let proto = self.protocol.unwrap_or("__cuda_array_interface__");
            write!(f, "{proto}['{key}']: ")?;
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
            .with_key("data")
            .with_arg("out");
        assert_eq!(
            e.to_string(),
            "argument `out`: __cuda_array_interface__['data']: array is read-only"
        );
        assert_eq!(e.kind(), ErrorKind::Value);
        // First name wins: inner layers name more precisely than outer ones.
        let e = e.with_arg("other");
        assert_eq!(e.arg(), Some("out"));
    }
}
