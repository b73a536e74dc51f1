//! Build errors: their kind and message.

use std::fmt;

/// What kind of failure a [`BuildError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BuildErrorKind {
    /// The builder was configured wrongly (an arch not of the form `sm_XY`, a kernel crate
    /// without a package name).
    Config,
    /// A file could not be read, written or created.
    Io,
    /// The toolchain is missing or incomplete (cargo, rustc or an LLVM tool cannot run, no
    /// `rust-src` or `llvm-tools` component, no libdevice for a kernel that needs it).
    Toolchain,
    /// The kernel crate did not compile for the NVPTX target (rustc or an LLVM tool failed).
    Compile,
    /// The PTX does not agree with the kernels' manifest records.
    Manifest,
    /// The generated PTX breaks a rule of [`check`](crate::check) (an unresolved function, a barrier under
    /// a thread-dependent branch, …) or ptxas rejects it.
    Check,
    /// The build was cancelled through its [`Control`](crate::Control).
    Cancelled,
}

/// Why a build failed: a [`BuildErrorKind`], and a message whose `Display` form says what to
/// do about it.
#[derive(Debug)]
pub struct BuildError {
    pub(crate) kind: BuildErrorKind,
    pub(crate) message: String,
}

impl BuildError {
    /// What kind of failure it is.
    pub fn kind(&self) -> BuildErrorKind {
        self.kind
    }

    /// The message (also the `Display` form).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BuildError {}

pub(crate) fn fail<T>(kind: BuildErrorKind, message: impl Into<String>) -> Result<T, BuildError> {
    Err(BuildError {
        kind,
        message: message.into(),
    })
}
