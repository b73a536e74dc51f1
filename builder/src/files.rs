//! Writing the build's files: only when changed, and atomically.

use crate::{fail, BuildError, BuildErrorKind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) fn write_if_changed(path: &Path, contents: &str) -> Result<(), BuildError> {
    write_bytes_if_changed(path, contents.as_bytes())
}

pub(crate) fn write_bytes_if_changed(path: &Path, contents: &[u8]) -> Result<(), BuildError> {
    if std::fs::read(path).ok().as_deref() == Some(contents) {
        return Ok(());
    }
    write_atomically(path, contents)
}

/// Writes `contents` to a temporary file beside `path` (its own: see [`temp_path`]), then
/// renames it: a reader (another process loading the module) sees the old file or the new
/// one, never half of one, and of two writers at once the last rename wins, whole.
pub(crate) fn write_atomically(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), BuildError> {
    let tmp = temp_path(path);
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

/// A temporary name beside `path` (`.<name>.<pid>.<n>.tmp`) that no other writer uses at the
/// same time: not another process, nor another thread of this one.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads writing one file at once each rename a whole file of their own into place.
    #[test]
    fn writers_at_once_never_share_a_temporary_file() {
        let dir = std::env::temp_dir().join(format!("ferrocuda-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.ptx");
        let texts: Vec<String> = (0..8u8)
            .map(|i| char::from(b'a' + i).to_string().repeat(1 << 20))
            .collect();
        std::thread::scope(|s| {
            for t in &texts {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..4 {
                        write_atomically(path, t).unwrap();
                    }
                });
            }
        });
        let got = std::fs::read_to_string(&path).unwrap();
        assert!(texts.contains(&got), "a mixed or partial file");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
