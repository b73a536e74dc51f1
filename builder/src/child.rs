//! The child `cargo rustc` that compiles a kernel crate (with `core`) to one LTO'd LLVM
//! bitcode module, and what is read back from its outputs (dep-info, package name).

use crate::arch::TARGET;
use crate::llvm::explain_llvm_error;
use crate::toolchain::scrub_env;
use crate::{fail, BuildError, BuildErrorKind};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One child build: which crate, where, how.
pub(crate) struct ChildBuild<'a> {
    /// The kernel crate's `Cargo.toml`.
    pub cargo_toml: &'a Path,
    /// The crate's package name (for messages).
    pub crate_name: &'a str,
    /// The target CPU: `sm_XY`, or `sm_90a` for a part built for it.
    pub arch: &'a str,
    /// The part of the crate to build: `None` for the base (every kernel without an `arch`),
    /// `Some(arch)` for the kernels declared `#[kernel(arch = "…")]` with it (set as
    /// `--cfg ferrocuda_arch="…"`).
    pub part: Option<&'a str>,
    /// The child's target directory.
    pub target_dir: &'a Path,
    /// Release (`true`) or dev profile.
    pub release: bool,
    /// Where rustc writes the bitcode.
    pub bitcode: &'a Path,
    /// Progress and cancellation.
    pub control: &'a crate::Control,
    /// Line tables in the bitcode (`debug = "line-tables-only"`), for locating findings.
    pub line_tables: bool,
}

/// Cargo profile settings of every kernel build: one codegen unit with fat LTO (pulls `core`
/// in; one module comes out), `opt-level=3` (lower levels leave `memcmp` calls), no debuginfo
/// (ptxas rejects it), abort on panic, no overflow checks or debug assertions.
const PROFILE: [(&str, &str); 8] = [
    ("lto", "\"fat\""),
    ("codegen-units", "1"),
    ("opt-level", "3"),
    ("debug", "false"),
    ("panic", "\"abort\""),
    ("incremental", "false"),
    ("overflow-checks", "false"),
    ("debug-assertions", "false"),
];

/// The profile's name for cargo and its directory name.
pub(crate) fn profile(release: bool) -> (&'static str, &'static str) {
    if release {
        ("release", "release")
    } else {
        ("dev", "debug")
    }
}

impl ChildBuild<'_> {
    /// Runs the build; on success the bitcode is at `self.bitcode`.
    pub fn run(&self) -> Result<(), BuildError> {
        let cargo = ferrocuda_config::CARGO
            .raw()
            .unwrap_or_else(|| OsString::from("cargo"));
        let crate_dir = self.cargo_toml.parent().unwrap_or(Path::new("."));
        let (profile, _) = profile(self.release);
        let mut cmd = Command::new(&cargo);
        scrub_env(&mut cmd);
        cmd.current_dir(crate_dir)
            .env("RUSTC_BOOTSTRAP", "1")
            // Through RUSTFLAGS so that `core` gets the same target CPU (rustc refuses mixed
            // ones) and the same panic strategy.
            .env("CARGO_ENCODED_RUSTFLAGS", self.rustflags().join("\x1f"))
            .args(["rustc", "--lib", "--crate-type=staticlib"])
            .arg("--manifest-path")
            .arg(self.cargo_toml)
            .args(["--target", TARGET, "-Zbuild-std=core"])
            .arg("--target-dir")
            .arg(self.target_dir)
            .args(["--profile", profile]);
        for (k, v) in PROFILE {
            let v = if k == "debug" && self.line_tables {
                "\"line-tables-only\""
            } else {
                v
            };
            cmd.arg("--config")
                .arg(format!("profile.{profile}.{k}={v}"));
        }
        // The LTO'd module as bitcode, with its use-list order: `llc` then generates the
        // same code from the file as rustc would from memory.
        cmd.arg("--")
            .arg(format!("--emit=llvm-bc={}", self.bitcode.display()))
            .arg("-Cllvm-args=-preserve-bc-uselistorder");

        // Cargo's status lines (`Compiling core …`, `Blocking waiting for file lock …`) are
        // progress, never part of an error message.
        let output = self.control.output(&mut cmd, &mut |c, line| {
            let Some((verb, rest)) = cargo_status(line) else {
                return false;
            };
            match verb {
                "Compiling" => c.report(&format!(
                    "cargo: compiling {}",
                    rest.split(" (").next().unwrap_or(rest)
                )),
                "Blocking" => c.report(&format!("cargo: {}", line.trim())),
                _ => {}
            }
            true
        });
        let output = output.or_else(|e| {
            if crate::control::is_cancel(&e) {
                return Err(crate::control::cancelled());
            }
            fail(
                BuildErrorKind::Toolchain,
                format!(
                    "could not run `{}`: {e}\n\nferrocuda builds kernels with cargo from rustup; \
                 install rustup (https://rustup.rs) or set FERROCUDA_CARGO to a cargo binary.",
                    cargo.to_string_lossy()
                ),
            )
        })?;
        if !output.status.success() {
            let mut stderr = with_crate_paths(&String::from_utf8_lossy(&output.stderr), crate_dir);
            if stderr.contains("believes it's in a workspace when it's not") {
                stderr.push_str(
                    "\nferrocuda: a kernel crate is built on its own, for the GPU: give its \
                     Cargo.toml an empty `[workspace]` table (or list it under `exclude` of the \
                     enclosing workspace).\n",
                );
            }
            return fail(
                BuildErrorKind::Compile,
                format!(
                    "building the kernel crate `{}` for {TARGET} ({}) failed:\n{}",
                    self.crate_name,
                    self.arch,
                    explain_llvm_error(&stderr).unwrap_or(stderr)
                ),
            );
        }
        Ok(())
    }

    /// The flags of every crate of the build (`core` included): the target CPU (rustc refuses
    /// mixed ones; the PTX ISA version is `llc`'s choice, see `llvm::ptx_isa`), the panic
    /// strategy, and the part's cfg.
    pub(crate) fn rustflags(&self) -> Vec<String> {
        let mut flags = vec![format!("-Ctarget-cpu={}", self.arch)];
        flags.push("-Zunstable-options".into());
        flags.push("-Cpanic=immediate-abort".into());
        // Declared in every build, so that a crate's own `cfg(ferrocuda_arch …)` is checked.
        flags.push("--check-cfg=cfg(ferrocuda_arch)".into());
        flags.push("--check-cfg=cfg(ferrocuda_arch,values(any()))".into());
        if let Some(part) = self.part {
            // The bare name too: `cfg(ferrocuda_arch)` holds only when it is set itself.
            flags.push("--cfg=ferrocuda_arch".into());
            flags.push(format!("--cfg=ferrocuda_arch=\"{part}\""));
        }
        flags
    }

    /// The source files the build read (the crate's and its path dependencies', not the
    /// toolchain's), its `Cargo.toml` and `Cargo.lock`, sorted.
    pub fn sources(&self, lib_name: &str) -> Vec<PathBuf> {
        let crate_dir = self.cargo_toml.parent().unwrap_or(Path::new("."));
        let depfile = self
            .target_dir
            .join(TARGET)
            .join(profile(self.release).1)
            .join(format!("lib{lib_name}.d"));
        let mut sources = dep_sources(&depfile, crate_dir);
        sources.push(self.cargo_toml.to_path_buf());
        let lock = crate_dir.join("Cargo.lock");
        if lock.exists() {
            sources.push(lock);
        }
        sources.sort();
        sources.dedup();
        sources
    }
}

/// A status line of cargo (`   Compiling core v0.0.0 (…)`): its verb and the rest.
fn cargo_status(line: &str) -> Option<(&str, &str)> {
    const VERBS: [&str; 9] = [
        "Compiling",
        "Finished",
        "Blocking",
        "Locking",
        "Updating",
        "Downloading",
        "Downloaded",
        "Fresh",
        "Adding",
    ];
    let t = line.trim_start();
    if line.len() - t.len() > 12 {
        return None;
    }
    let (verb, rest) = t.split_once(' ')?;
    VERBS.contains(&verb).then_some((verb, rest))
}

/// `stderr` with the source locations that cargo prints relative to the crate's directory
/// (`--> src/lib.rs:3:14`) made paths that work from anywhere (`--> /…/crate/src/lib.rs:3:14`).
fn with_crate_paths(stderr: &str, crate_dir: &Path) -> String {
    let mut out = String::with_capacity(stderr.len());
    for line in stderr.lines() {
        let indent = line.len() - line.trim_start().len();
        let rest = &line[indent..];
        let located = ["--> ", "::: "].iter().find_map(|mark| {
            let path = rest.strip_prefix(mark)?;
            let file = path.split(':').next()?;
            Path::new(file)
                .is_relative()
                .then(|| format!("{mark}{}", crate_dir.join(path).display()))
        });
        out.push_str(&line[..indent]);
        out.push_str(located.as_deref().unwrap_or(rest));
        out.push('\n');
    }
    out
}

/// FNV-1a's 64-bit offset basis: the hash of nothing.
pub(crate) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a (64 bits) of `bytes`, continuing from `h` ([`FNV_OFFSET`] to start). For change
/// detection (stable across runs, platforms and toolchains), not against adversaries.
pub(crate) fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// [`fnv1a`] of one field of a record: its length, then its bytes (so that the fields'
/// boundaries are part of the hash).
pub(crate) fn fnv_field(h: u64, bytes: &[u8]) -> u64 {
    fnv1a(fnv1a(h, &(bytes.len() as u64).to_le_bytes()), bytes)
}

/// FNV-1a of a directory's canonical path (stable across runs and toolchains).
pub(crate) fn path_hash(dir: &Path) -> u64 {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    fnv1a(FNV_OFFSET, dir.as_os_str().as_encoded_bytes())
}

/// `name` under `[package]` of a Cargo.toml (a minimal reader; no TOML dependency).
pub(crate) fn package_name(toml: &str) -> Option<String> {
    let mut in_package = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
            continue;
        }
        if in_package {
            if let Some(rest) = line.strip_prefix("name") {
                let rest = rest.trim_start().strip_prefix('=')?.trim();
                return Some(rest.trim_matches('"').to_string());
            }
        }
    }
    None
}

/// Source files listed in a make-style dep-info file, excluding the toolchain's own sources.
fn dep_sources(depfile: &Path, crate_dir: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(depfile) else {
        return vec![crate_dir.join("src")];
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((_, deps)) = line.split_once(": ") else {
            continue;
        };
        // Paths are space-separated with spaces escaped as "\ ".
        let mut cur = String::new();
        let mut chars = deps.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' && chars.peek() == Some(&' ') {
                cur.push(' ');
                chars.next();
            } else if c == ' ' {
                if !cur.is_empty() {
                    out.push(PathBuf::from(std::mem::take(&mut cur)));
                }
            } else {
                cur.push(c);
            }
        }
        if !cur.is_empty() {
            out.push(PathBuf::from(cur));
        }
    }
    out.retain(|p| !p.components().any(|c| c.as_os_str() == "rustlib"));
    if out.is_empty() {
        out.push(crate_dir.join("src"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiler_locations_name_the_crate() {
        let err = "error[E0277]: x\n  --> src/lib.rs:13:40\n   |\n   ::: src/a b.rs:1:2\n  --> /abs/x.rs:1:1\n";
        let got = with_crate_paths(err, Path::new("/k"));
        assert_eq!(
            got,
            "error[E0277]: x\n  --> /k/src/lib.rs:13:40\n   |\n   ::: /k/src/a b.rs:1:2\n  --> /abs/x.rs:1:1\n"
        );
    }

    #[test]
    fn reads_package_name() {
        let t = "[workspace]\n\n[package]\nversion = \"1\"\nname = \"my-kernels\"\n";
        assert_eq!(package_name(t).as_deref(), Some("my-kernels"));
        assert_eq!(package_name("[lib]\nname = \"x\"\n"), None);
    }

    #[test]
    fn reads_dep_info() {
        let dir = std::env::temp_dir().join(format!("fc-dep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.join("lib.d");
        std::fs::write(
            &d,
            "/t/libk.rlib: /k/src/lib.rs /k/src/a\\ b.rs /r/lib/rustlib/src/core/lib.rs\n\n\
             /k/src/lib.rs:\n",
        )
        .unwrap();
        let got = dep_sources(&d, &dir);
        assert_eq!(
            got,
            [
                PathBuf::from("/k/src/lib.rs"),
                PathBuf::from("/k/src/a b.rs")
            ]
        );
        // No dep-info: the crate's src/ directory.
        assert_eq!(dep_sources(&dir.join("none.d"), &dir), [dir.join("src")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
