//! Where a kernel crate made by `ferrocuda new` finds ferrocuda's own crates.
//!
//! The crates are not on crates.io yet, so a kernel crate depends on `ferrocuda-device =
//! "0.1.0"` and its `.cargo/config.toml` patches that dependency to a source copy on this
//! machine ([`CrateSources::patch_config`]); `ferrocuda build` rewrites that file when the copy
//! moves (a new ferrocuda, another machine). The user's `Cargo.toml` stays what it will be
//! once the crates are published, `cargo check` and rust-analyzer resolve the dependency, and
//! nothing machine-specific is committed (the scaffold's `.gitignore` lists the file).
//!
//! The copy is either a ferrocuda checkout ([`CrateSources::checkout`]: `cargo run -p
//! ferrocuda-builder --bin ferrocuda`) or the sources compiled into the Python extension
//! ([`CrateSources::embedded`]): `abi`, `device` and `macros` with a workspace root made from
//! the project's (so that their `*.workspace = true` fields resolve as in the repository),
//! written on first use to `<cache>/crates/<version>-<fingerprint>/` — the fingerprint is a
//! hash of the files, so the copy always matches the extension that wrote it.
//!
//! A [fingerprint](CrateSources::fingerprint) of the copy is part of the build cache's key:
//! files under the copy are not listed one by one.

use crate::child::{fnv_field, FNV_OFFSET};
use crate::{fail, BuildError, BuildErrorKind};
use std::path::{Path, PathBuf};

/// The crates a kernel crate needs, relative to the source root, in dependency order.
pub const DEVICE_CRATES: [&str; 3] = ["abi", "macros", "device"];

/// The ferrocuda crates a kernel crate (and its host example) can be patched to.
#[derive(Clone, Debug)]
pub struct CrateSources {
    kind: Kind,
    fingerprint: u64,
}

#[derive(Clone, Debug)]
enum Kind {
    Checkout(PathBuf),
    Embedded {
        files: &'static [(&'static str, &'static str)],
        cache: PathBuf,
        checkout: Option<PathBuf>,
    },
}

impl CrateSources {
    /// The crates of a ferrocuda checkout at `root` (the directory of the workspace
    /// `Cargo.toml`, with `abi/`, `device/`, `macros/`, `host/`, `builder/`).
    pub fn checkout(root: impl Into<PathBuf>) -> Result<CrateSources, BuildError> {
        let root = root.into();
        let mut files = Vec::new();
        for name in ["Cargo.toml", "rust-toolchain.toml", "kernels/Cargo.lock"] {
            files.push(PathBuf::from(name));
        }
        for krate in DEVICE_CRATES {
            files.push(Path::new(krate).join("Cargo.toml"));
            collect(&root, &Path::new(krate).join("src"), &mut files)?;
        }
        files.sort();
        let mut h = fnv_field(FNV_OFFSET, env!("CARGO_PKG_VERSION").as_bytes());
        for f in &files {
            let text = std::fs::read(root.join(f)).or_else(|e| {
                fail(
                    BuildErrorKind::Io,
                    format!(
                        "ferrocuda sources: cannot read {}: {e}",
                        root.join(f).display()
                    ),
                )
            })?;
            h = fnv_field(fnv_field(h, f.to_string_lossy().as_bytes()), &text);
        }
        Ok(CrateSources {
            kind: Kind::Checkout(root),
            fingerprint: h,
        })
    }

    /// Sources embedded in a program: `files` as [`embed_list`] lists them (relative path and
    /// contents), written under `cache/crates/` when first needed. `checkout` is a ferrocuda
    /// checkout to patch the host example's crates to, when there is one.
    pub fn embedded(
        files: &'static [(&'static str, &'static str)],
        cache: impl Into<PathBuf>,
        checkout: Option<PathBuf>,
    ) -> CrateSources {
        let h = fingerprint_of(files.iter().copied());
        CrateSources::embedded_with(files, h, cache, checkout)
    }

    /// [`embedded`](Self::embedded) with the fingerprint computed already (by a build script,
    /// with [`fingerprint_of`] over the same files): no hashing at run time, which keeps an
    /// inline kernel's cache hit within a millisecond.
    pub fn embedded_with(
        files: &'static [(&'static str, &'static str)],
        fingerprint: u64,
        cache: impl Into<PathBuf>,
        checkout: Option<PathBuf>,
    ) -> CrateSources {
        let h = fingerprint;
        CrateSources {
            kind: Kind::Embedded {
                files,
                cache: cache.into(),
                checkout: checkout.filter(|c| c.join("host").join("Cargo.toml").is_file()),
            },
            fingerprint: h,
        }
    }

    /// A hash of every file of the copy and of this ferrocuda's version.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The directory the copy is (or will be) in.
    pub fn root(&self) -> PathBuf {
        match &self.kind {
            Kind::Checkout(root) => root.clone(),
            Kind::Embedded { cache, .. } => cache.join("crates").join(format!(
                "{}-{:016x}",
                env!("CARGO_PKG_VERSION"),
                self.fingerprint
            )),
        }
    }

    /// A ferrocuda checkout (for the host example's `ferrocuda-host` and `ferrocuda-builder`).
    pub fn checkout_root(&self) -> Option<PathBuf> {
        match &self.kind {
            Kind::Checkout(root) => Some(root.clone()),
            Kind::Embedded { checkout, .. } => checkout.clone(),
        }
    }

    /// A file of the copy as text (`rust-toolchain.toml`, `kernels/Cargo.lock`).
    pub fn read(&self, rel: &str) -> Result<String, BuildError> {
        match &self.kind {
            Kind::Checkout(root) => std::fs::read_to_string(root.join(rel)).or_else(|e| {
                fail(
                    BuildErrorKind::Io,
                    format!("cannot read {}: {e}", root.join(rel).display()),
                )
            }),
            Kind::Embedded { files, .. } => match files.iter().find(|(p, _)| *p == rel) {
                Some((_, text)) => Ok((*text).to_owned()),
                None => fail(
                    BuildErrorKind::Config,
                    format!("the embedded ferrocuda sources have no {rel}"),
                ),
            },
        }
    }

    /// Makes sure the copy is on disk (writes embedded sources the first time; a directory
    /// being written by another process is never used half-written) and returns its root.
    pub fn materialize(&self) -> Result<PathBuf, BuildError> {
        let root = self.root();
        let Kind::Embedded { files, .. } = &self.kind else {
            return Ok(root);
        };
        if root.join(".complete").is_file() {
            return Ok(root);
        }
        let io = |what: &str, p: &Path, e: std::io::Error| BuildError {
            kind: BuildErrorKind::Io,
            message: format!(
                "cannot {what} {} (ferrocuda's crate sources; set FERROCUDA_HOME to a writable \
                 directory): {e}",
                p.display()
            ),
        };
        let parent = root.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| io("create", parent, e))?;
        // Its own directory: another thread of this process may be writing the copy too.
        let tmp = crate::files::temp_path(&root);
        let write = || {
            for (rel, text) in *files {
                let dst = tmp.join(rel);
                if let Some(dir) = dst.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
                }
                std::fs::write(&dst, text).map_err(|e| io("write", &dst, e))?;
            }
            std::fs::write(tmp.join(".complete"), b"").map_err(|e| io("write", &tmp, e))
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        if std::fs::rename(&tmp, &root).is_err() {
            // Another process finished first: its copy has the same files.
            let _ = std::fs::remove_dir_all(&tmp);
            if !root.join(".complete").is_file() {
                return fail(
                    BuildErrorKind::Io,
                    format!(
                        "cannot write ferrocuda's crate sources to {}",
                        root.display()
                    ),
                );
            }
        }
        Ok(root)
    }

    /// The `.cargo/config.toml` of a kernel crate: `ferrocuda-device` patched to the copy.
    pub fn patch_config(&self) -> String {
        patch_text(&[("ferrocuda-device", self.root().join("device"))])
    }

    /// The `.cargo/config.toml` of the host example (`None` without a checkout).
    pub fn host_patch_config(&self) -> Option<String> {
        let root = self.checkout_root()?;
        Some(patch_text(&[
            ("ferrocuda-host", root.join("host")),
            ("ferrocuda-builder", root.join("builder")),
        ]))
    }
}

/// The fingerprint of embedded sources: this ferrocuda's version and every (path, text).
pub fn fingerprint_of<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> u64 {
    let mut h = fnv_field(FNV_OFFSET, env!("CARGO_PKG_VERSION").as_bytes());
    for (path, text) in files {
        h = fnv_field(fnv_field(h, path.as_bytes()), text.as_bytes());
    }
    h
}

fn patch_text(crates: &[(&str, PathBuf)]) -> String {
    let mut s = String::from(
        "# Written by `ferrocuda build` (and `ferrocuda new`): where this machine keeps the sources\n\
         # of ferrocuda's crates, which are not on crates.io yet. Rewritten when they move; not for\n\
         # version control.\n[patch.crates-io]\n",
    );
    for (name, path) in crates {
        // TOML basic strings escape like Rust's Debug of a str.
        s.push_str(&format!(
            "{name} = {{ path = {:?} }}\n",
            path.to_string_lossy()
        ));
    }
    s
}

/// Adds the files under `root/dir` (recursively, relative to `root`) to `out`.
fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), BuildError> {
    let entries = std::fs::read_dir(root.join(dir)).or_else(|e| {
        fail(
            BuildErrorKind::Io,
            format!(
                "ferrocuda sources: cannot list {}: {e}",
                root.join(dir).display()
            ),
        )
    })?;
    for entry in entries.flatten() {
        let rel = dir.join(entry.file_name());
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            collect(root, &rel, out)?;
        } else {
            out.push(rel);
        }
    }
    Ok(())
}

/// The files to embed from the ferrocuda checkout at `root`, as (relative path, file on disk
/// or generated text): the device crates' `Cargo.toml` and `src/`, the project's
/// `rust-toolchain.toml`, the bundled kernels' `Cargo.lock` (the versions a new crate starts
/// from), and a workspace root `Cargo.toml` made from the project's (its `[workspace.*]`
/// tables, members the device crates).
pub fn embed_list(root: &Path) -> Result<Vec<(String, Embedded)>, BuildError> {
    let mut files = Vec::new();
    for krate in DEVICE_CRATES {
        files.push(Path::new(krate).join("Cargo.toml"));
        collect(root, &Path::new(krate).join("src"), &mut files)?;
    }
    files.push("rust-toolchain.toml".into());
    files.push("kernels/Cargo.lock".into());
    files.sort();
    let mut out: Vec<(String, Embedded)> = files
        .into_iter()
        .map(|f| {
            (
                f.to_string_lossy().replace('\\', "/"),
                Embedded::File(root.join(&f)),
            )
        })
        .collect();
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).or_else(|e| {
        fail(
            BuildErrorKind::Io,
            format!("cannot read {}: {e}", root.join("Cargo.toml").display()),
        )
    })?;
    out.push((
        "Cargo.toml".into(),
        Embedded::Text(workspace_root(&workspace, &DEVICE_CRATES)),
    ));
    Ok(out)
}

/// One file of [`embed_list`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Embedded {
    /// A file of the checkout.
    File(PathBuf),
    /// Generated text.
    Text(String),
}

/// A workspace root for `members` alone, from the project's root `Cargo.toml`: its
/// `[workspace…]` tables, with `members` replaced, `exclude` dropped, and path dependencies
/// to other crates of the project left out of `[workspace.dependencies]`.
pub fn workspace_root(project: &str, members: &[&str]) -> String {
    let mut out = String::from(
        "# The ferrocuda crates a kernel crate needs, as a workspace of their own (written by\n\
         # ferrocuda from its project's Cargo.toml, so that `*.workspace = true` resolves).\n",
    );
    let mut section = String::new();
    for line in project.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            section = t.to_string();
            if section.starts_with("[workspace") {
                out.push('\n');
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        if !section.starts_with("[workspace") {
            continue;
        }
        if section == "[workspace]" && (t.starts_with("members") || t.starts_with("exclude")) {
            if t.starts_with("members") {
                let list: Vec<String> = members.iter().map(|m| format!("{m:?}")).collect();
                out.push_str(&format!("members = [{}]\n", list.join(", ")));
            }
            continue;
        }
        if section == "[workspace.dependencies]" && t.contains("path =") {
            let keep = members
                .iter()
                .any(|m| t.contains(&format!("path = \"{m}\"")));
            if !keep {
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_root_keeps_the_workspace_tables() {
        let project = "[workspace]\nmembers = [\"abi\", \"host\"]\nexclude = [\"kernels\"]\n\
                       resolver = \"2\"\n\n[workspace.package]\nversion = \"0.1.0\"\n\n\
                       [workspace.lints.rust]\nunsafe_op_in_unsafe_fn = \"deny\"\n\n\
                       [workspace.dependencies]\nferrocuda-abi = { path = \"abi\", version = \"0.1.0\" }\n\
                       ferrocuda-host = { path = \"host\", version = \"0.1.0\" }\n\
                       ferrocuda = { path = \".\", version = \"0.1.0\" }\nserde = \"1.0\"\n\n\
                       [package]\nname = \"ferrocuda\"\n\n[dependencies]\nx = \"1\"\n";
        let root = workspace_root(project, &["abi", "device"]);
        assert!(root.contains("[workspace]\nmembers = [\"abi\", \"device\"]\nresolver = \"2\"\n"));
        assert!(!root.contains("exclude") && !root.contains("[package]") && !root.contains("x ="));
        assert!(root.contains("[workspace.package]\nversion = \"0.1.0\""));
        assert!(root.contains("[workspace.lints.rust]\nunsafe_op_in_unsafe_fn"));
        assert!(root.contains("ferrocuda-abi = { path = \"abi\""));
        assert!(root.contains("serde = \"1.0\""));
        assert!(!root.contains("ferrocuda-host") && !root.contains("path = \".\""));
    }

    #[test]
    fn the_embed_list_has_the_device_crates_and_a_workspace() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let list = embed_list(repo).unwrap();
        let names: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
        for n in [
            "Cargo.toml",
            "abi/Cargo.toml",
            "abi/src/lib.rs",
            "device/src/lib.rs",
            "macros/src/instances.rs",
            "rust-toolchain.toml",
            "kernels/Cargo.lock",
        ] {
            assert!(names.contains(&n), "{n} not in {names:?}");
        }
        assert!(!names
            .iter()
            .any(|n| n.starts_with("host/") || n.starts_with("abi/tests")));
        // The checkout's fingerprint changes with any file.
        let a = CrateSources::checkout(repo).unwrap().fingerprint();
        assert_eq!(a, CrateSources::checkout(repo).unwrap().fingerprint());
    }

    #[test]
    fn embedded_sources_are_written_once_and_completely() {
        static FILES: &[(&str, &str)] = &[
            ("Cargo.toml", "[workspace]\n"),
            ("device/src/lib.rs", "//! x\n"),
            ("rust-toolchain.toml", "[toolchain]\nchannel = \"1.99.0\"\n"),
        ];
        let cache = std::env::temp_dir().join(format!("fc-src-{}", std::process::id()));
        let s = CrateSources::embedded(FILES, &cache, None);
        let root = s.materialize().unwrap();
        assert!(root.starts_with(cache.join("crates")));
        assert_eq!(
            std::fs::read_to_string(root.join("device/src/lib.rs")).unwrap(),
            "//! x\n"
        );
        assert_eq!(s.materialize().unwrap(), root);
        assert!(s.read("rust-toolchain.toml").unwrap().contains("1.99.0"));
        assert!(s.read("nope").is_err());
        let config = s.patch_config();
        assert!(config.contains("[patch.crates-io]\nferrocuda-device = { path = "));
        assert!(config.contains(&format!("{:?}", root.join("device").to_string_lossy())));
        assert!(s.host_patch_config().is_none());
        std::fs::remove_dir_all(&cache).unwrap();
    }
}
