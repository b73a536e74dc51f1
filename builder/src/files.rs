//! Writing the build's files: only when changed, and atomically.

use crate::{fail, BuildError, BuildErrorKind};
use std::path::Path;

pub(crate) fn write_if_changed(path: &Path, contents: &str) -> Result<(), BuildError> {
    write_bytes_if_changed(path, contents.as_bytes())
}

pub(crate) fn write_bytes_if_changed(path: &Path, contents: &[u8]) -> Result<(), BuildError> {
    if std::fs::read(path).ok().as_deref() == Some(contents) {
        return Ok(());
    }
    write_atomically(path, contents)
}

/// Writes `contents` to a temporary file beside `path`, then renames it: a reader (another
/// process loading the module) sees the old file or the new one, never half of one.
pub(crate) fn write_atomically(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), BuildError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, contents)
        .and_then(|()| std::fs::rename(&tmp, path))
        .or_else(|e| {
            let _ = std::fs::remove_file(&tmp);
            fail(
                BuildErrorKind::Io,
                format!("cannot write {}: {e}", path.display()),
            )
        })
}
