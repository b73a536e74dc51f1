//! The Rust toolchain that builds a kernel crate, and the LLVM tools that ship with it.

use crate::{fail, BuildError, TARGET};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The LLVM tools the pipeline runs, from the toolchain's `llvm-tools` component.
pub(crate) const LLVM_TOOLS: [&str; 4] = ["llvm-dis", "llvm-link", "opt", "llc"];

/// The toolchain that the kernel crate's directory selects (its `rust-toolchain.toml`, or
/// rustup's default): the same `rustc` the child cargo runs.
#[derive(Clone, Debug)]
pub(crate) struct Toolchain {
    /// Directory of `llvm-link`, `opt`, `llc`, `llvm-dis`.
    pub llvm_bin: PathBuf,
}

impl Toolchain {
    /// Finds the toolchain, and fails with the exact command to run when `rust-src` or
    /// `llvm-tools` is missing.
    pub fn detect(crate_dir: &Path) -> Result<Toolchain, BuildError> {
        let mut cmd = Command::new("rustc");
        scrub_env(&mut cmd);
        let out = cmd
            .current_dir(crate_dir)
            .args(["--print", "sysroot"])
            .output()
            .or_else(|e| fail(format!("could not run `rustc --print sysroot`: {e}")))?;
        if !out.status.success() {
            return fail(format!(
                "`rustc --print sysroot` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let toolchain = toolchain_name(&sysroot);
        let core = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
        if !core.exists() {
            return fail(format!(
                "the Rust toolchain at {} has no `rust-src` component, which -Zbuild-std=core \
                 needs to compile `core` for {TARGET}.\n\nInstall it with:\n\n    \
                 rustup component add rust-src --toolchain {toolchain}\n",
                sysroot.display()
            ));
        }
        let Some(llvm_bin) = llvm_bin(&sysroot) else {
            return fail(format!(
                "the Rust toolchain at {} has no `llvm-tools` component ({}), which ferrocuda \
                 runs after rustc to place shared memory, link libdevice and generate the \
                 PTX.\n\nInstall it with:\n\n    \
                 rustup component add llvm-tools --toolchain {toolchain}\n",
                sysroot.display(),
                LLVM_TOOLS.join(", ")
            ));
        };
        Ok(Toolchain { llvm_bin })
    }

    /// The path of one of [`LLVM_TOOLS`].
    pub fn tool(&self, name: &str) -> PathBuf {
        self.llvm_bin.join(name)
    }
}

/// `<sysroot>/lib/rustlib/<host>/bin` if it holds every one of [`LLVM_TOOLS`].
fn llvm_bin(sysroot: &Path) -> Option<PathBuf> {
    let rustlib = sysroot.join("lib/rustlib");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&rustlib)
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .collect();
    dirs.sort();
    dirs.into_iter()
        .find(|d| LLVM_TOOLS.iter().all(|t| d.join(t).is_file()))
}

/// The toolchain's name for rustup (`1.99.0`), from its sysroot directory's name.
fn toolchain_name(sysroot: &Path) -> String {
    let name = sysroot
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "<toolchain>".into());
    name.strip_suffix("-x86_64-unknown-linux-gnu")
        .unwrap_or(&name)
        .to_string()
}

/// Removes the variables cargo and rustup set for build scripts from the child's environment.
pub(crate) fn scrub_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(k) = key.to_str() else { continue };
        let drop = (k.starts_with("CARGO") && k != "CARGO_HOME" && k != "CARGO_NET_OFFLINE")
            || k.starts_with("RUSTC")
            || k.starts_with("RUSTDOC")
            || k.starts_with("DEP_")
            || matches!(
                k,
                "RUSTFLAGS"
                    | "RUSTUP_TOOLCHAIN"
                    | "MAKEFLAGS"
                    | "MFLAGS"
                    | "CARGO_MAKEFLAGS"
                    | "OUT_DIR"
                    | "TARGET"
                    | "HOST"
                    | "NUM_JOBS"
                    | "OPT_LEVEL"
                    | "DEBUG"
                    | "PROFILE"
            );
        if drop {
            cmd.env_remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_toolchain_and_finds_the_tools() {
        assert_eq!(
            toolchain_name(Path::new("/r/toolchains/1.99.0-x86_64-unknown-linux-gnu")),
            "1.99.0"
        );
        let dir = std::env::temp_dir().join(format!("fc-tc-{}", std::process::id()));
        let bin = dir.join("lib/rustlib/x86_64-unknown-linux-gnu/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(dir.join("lib/rustlib/nvptx64-nvidia-cuda")).unwrap();
        for t in &LLVM_TOOLS[..3] {
            std::fs::write(bin.join(t), b"").unwrap();
        }
        assert_eq!(llvm_bin(&dir), None, "llc is missing");
        std::fs::write(bin.join("llc"), b"").unwrap();
        assert_eq!(llvm_bin(&dir), Some(bin));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
