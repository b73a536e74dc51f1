//! The Rust toolchain that builds a kernel crate, and the LLVM tools that ship with it.

use crate::arch::TARGET;
use crate::{fail, BuildError, BuildErrorKind};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
        Toolchain::detect_with(crate_dir, OsStr::new("rustc"))
    }

    fn detect_with(crate_dir: &Path, rustc: &OsStr) -> Result<Toolchain, BuildError> {
        let sysroot = sysroot(crate_dir, rustc).map_err(|m| BuildError {
            kind: BuildErrorKind::Toolchain,
            message: m,
        })?;
        let toolchain = toolchain_name(&sysroot);
        let core = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
        if !core.exists() {
            return fail(
                BuildErrorKind::Toolchain,
                format!(
                    "the Rust toolchain at {} has no `rust-src` component, which -Zbuild-std=core \
                 needs to compile `core` for {TARGET}.\n\nInstall it with:\n\n    \
                 rustup component add rust-src --toolchain {toolchain}\n",
                    sysroot.display()
                ),
            );
        }
        let Some(llvm_bin) = llvm_bin(&sysroot) else {
            return fail(
                BuildErrorKind::Toolchain,
                format!(
                    "the Rust toolchain at {} has no `llvm-tools` component ({}), which ferrocuda \
                 runs after rustc to place shared memory, link libdevice and generate the \
                 PTX.\n\nInstall it with:\n\n    \
                 rustup component add llvm-tools --toolchain {toolchain}\n",
                    sysroot.display(),
                    LLVM_TOOLS.join(", ")
                ),
            );
        };
        Ok(Toolchain { llvm_bin })
    }

    /// The path of one of [`LLVM_TOOLS`].
    pub fn tool(&self, name: &str) -> PathBuf {
        self.llvm_bin.join(name)
    }
}

/// `rustc --print sysroot` in `crate_dir` (rustup told not to install anything on its own);
/// the reason when it fails.
pub(crate) fn sysroot(crate_dir: &Path, rustc: &OsStr) -> Result<PathBuf, String> {
    let mut cmd = Command::new(rustc);
    scrub_env(&mut cmd);
    let out = cmd
        .current_dir(crate_dir)
        .env("RUSTUP_AUTO_INSTALL", "0")
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("could not run `rustc --print sysroot`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`rustc --print sysroot` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// The toolchain a kernel crate's directory selects, installed first when it is missing:
/// the toolchain with `rustup toolchain install` (which reads the crate's
/// `rust-toolchain.toml`, components included), missing `rust-src` / `llvm-tools` with `rustup
/// component add`. `report` gets a line before each (they take minutes). Without rustup, an
/// error that says what to install.
pub(crate) fn ensure(
    crate_dir: &Path,
    report: &mut dyn FnMut(&str),
) -> Result<Toolchain, BuildError> {
    ensure_with(crate_dir, OsStr::new("rustc"), OsStr::new("rustup"), report)
}

fn ensure_with(
    crate_dir: &Path,
    rustc: &OsStr,
    rustup: &OsStr,
    report: &mut dyn FnMut(&str),
) -> Result<Toolchain, BuildError> {
    let channel = pinned_channel(crate_dir);
    let wanted = channel
        .as_deref()
        .unwrap_or("the toolchain of rust-toolchain.toml");
    let has_rustup = {
        let mut cmd = Command::new(rustup);
        scrub_env(&mut cmd);
        cmd.arg("--version")
            .env("RUSTUP_AUTO_INSTALL", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let run_rustup = |args: &[&str]| -> Result<(), BuildError> {
        let mut cmd = Command::new(rustup);
        scrub_env(&mut cmd);
        // rustup's progress goes to the terminal; its stdout would mix with ours.
        let status = cmd
            .current_dir(crate_dir)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status();
        match status {
            Ok(s) if s.success() => Ok(()),
            other => fail(
                BuildErrorKind::Toolchain,
                format!(
                    "`rustup {}` failed ({}); install {wanted} with rust-src and llvm-tools by \
                     hand: rustup toolchain install {wanted} --component rust-src,llvm-tools",
                    args.join(" "),
                    match other {
                        Ok(s) => s.to_string(),
                        Err(e) => e.to_string(),
                    }
                ),
            ),
        }
    };
    if let Err(why) = sysroot(crate_dir, rustc) {
        if !has_rustup {
            return fail(
                BuildErrorKind::Toolchain,
                format!(
                    "ferrocuda builds kernels with the Rust toolchain {wanted} and its rust-src \
                     and llvm-tools components, installed with rustup, which is missing \
                     ({why}).\n\nInstall rustup (https://rustup.rs), then:\n\n    \
                     rustup toolchain install {wanted} --component rust-src,llvm-tools\n"
                ),
            );
        }
        report(&format!(
            "installing the Rust toolchain {wanted} with rust-src and llvm-tools (rustup \
             toolchain install; once, a few minutes)"
        ));
        run_rustup(&["toolchain", "install"])?;
    }
    match Toolchain::detect_with(crate_dir, rustc) {
        Err(e) if has_rustup && e.kind == BuildErrorKind::Toolchain => {
            let sysroot = sysroot(crate_dir, rustc).map_err(|m| BuildError {
                kind: BuildErrorKind::Toolchain,
                message: m,
            })?;
            let name = toolchain_name(&sysroot);
            report(&format!(
                "adding the rust-src and llvm-tools components to the Rust toolchain {name} \
                 (rustup component add; once)"
            ));
            run_rustup(&[
                "component",
                "add",
                "rust-src",
                "llvm-tools",
                "--toolchain",
                &name,
            ])?;
            Toolchain::detect_with(crate_dir, rustc)
        }
        other => other,
    }
}

/// The channel of the first `rust-toolchain.toml` (or `rust-toolchain`) in `dir` or above it.
pub(crate) fn pinned_channel(dir: &Path) -> Option<String> {
    let file = toolchain_file(dir)?;
    let text = std::fs::read_to_string(file).ok()?;
    channel_of(&text)
}

/// The `channel = "…"` of a toolchain file's text.
pub(crate) fn channel_of(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l
            .trim()
            .strip_prefix("channel")?
            .trim_start()
            .strip_prefix('=')?;
        Some(rest.trim().trim_matches('"').to_string())
    })
}

/// The toolchain file that rustup reads for `dir`.
pub(crate) fn toolchain_file(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .flat_map(|d| [d.join("rust-toolchain.toml"), d.join("rust-toolchain")])
        .find(|f| f.is_file())
}

/// `<sysroot>/lib/rustlib/<host>/bin` if it holds every one of [`LLVM_TOOLS`].
pub(crate) fn llvm_bin(sysroot: &Path) -> Option<PathBuf> {
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
pub(crate) fn toolchain_name(sysroot: &Path) -> String {
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

    /// A directory with a fake sysroot (`sys/…/1.99.0-x86_64-unknown-linux-gnu`, with or
    /// without `rust-src`), a crate whose `rust-toolchain.toml` pins 1.99.0, and fake `rustc`
    /// and `rustup` scripts: `rustc` fails as rustup's proxy does for a toolchain that is not
    /// installed until `rustup toolchain install` has run; `rustup` logs its arguments and
    /// adds `rust-src` on `component add`.
    #[cfg(unix)]
    fn fake_rustup(tag: &str, installed: bool, rust_src: bool) -> (PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("fc-rustup-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let sys = dir.join("sys/1.99.0-x86_64-unknown-linux-gnu");
        let bin = sys.join("lib/rustlib/x86_64-unknown-linux-gnu/bin");
        std::fs::create_dir_all(&bin).unwrap();
        for t in LLVM_TOOLS {
            std::fs::write(bin.join(t), b"").unwrap();
        }
        let core = sys.join("lib/rustlib/src/rust/library/core");
        if rust_src {
            std::fs::create_dir_all(&core).unwrap();
            std::fs::write(core.join("Cargo.toml"), b"").unwrap();
        }
        if installed {
            std::fs::write(dir.join("installed"), b"").unwrap();
        }
        let krate = dir.join("crate");
        std::fs::create_dir_all(&krate).unwrap();
        std::fs::write(
            krate.join("rust-toolchain.toml"),
            "[toolchain]\nchannel = \"1.99.0\"\n",
        )
        .unwrap();
        let d = dir.display();
        let scripts = [
            (
                "rustc",
                format!(
                    "#!/bin/sh\nif [ -f {d}/installed ]; then echo {}; else \
                     echo \"error: toolchain '1.99.0-x86_64-unknown-linux-gnu' is not installed\" >&2; \
                     exit 1; fi\n",
                    sys.display()
                ),
            ),
            (
                "rustup",
                format!(
                    "#!/bin/sh\necho \"$@\" >> {d}/log\n\
                     if [ \"$1\" = toolchain ]; then touch {d}/installed; fi\n\
                     if [ \"$1\" = component ]; then mkdir -p {c} && touch {c}/Cargo.toml; fi\n",
                    c = core.display()
                ),
            ),
        ];
        for (name, text) in scripts {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        (dir, krate)
    }

    #[cfg(unix)]
    #[test]
    fn installs_a_missing_toolchain_and_components_with_rustup() {
        for (tag, installed, rust_src, expect) in [
            ("toolchain", false, true, "toolchain install"),
            (
                "component",
                true,
                false,
                "component add rust-src llvm-tools --toolchain 1.99.0",
            ),
        ] {
            let (dir, krate) = fake_rustup(tag, installed, rust_src);
            let mut said = Vec::new();
            let tc = ensure_with(
                &krate,
                dir.join("rustc").as_os_str(),
                dir.join("rustup").as_os_str(),
                &mut |m: &str| said.push(m.to_string()),
            )
            .unwrap_or_else(|e| panic!("{tag}: {e}"));
            assert!(tc.llvm_bin.ends_with("bin"));
            let log = std::fs::read_to_string(dir.join("log")).unwrap();
            assert!(log.contains(expect), "{tag}: rustup ran `{log}`");
            assert_eq!(said.len(), 1, "{said:?}");
            assert!(said[0].contains("1.99.0"), "{said:?}");
            // Present now: nothing is installed again, nothing said.
            said.clear();
            ensure_with(
                &krate,
                dir.join("rustc").as_os_str(),
                dir.join("rustup").as_os_str(),
                &mut |m: &str| said.push(m.to_string()),
            )
            .unwrap();
            assert!(said.is_empty(), "{said:?}");
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[cfg(unix)]
    #[test]
    fn without_rustup_the_error_says_what_to_install() {
        let (dir, krate) = fake_rustup("none", false, true);
        let e = ensure_with(
            &krate,
            dir.join("rustc").as_os_str(),
            dir.join("no-rustup").as_os_str(),
            &mut |m: &str| panic!("nothing can be installed, yet: {m}"),
        )
        .unwrap_err();
        assert_eq!(e.kind(), BuildErrorKind::Toolchain);
        for part in [
            "Install rustup (https://rustup.rs)",
            "rustup toolchain install 1.99.0 --component rust-src,llvm-tools",
            "is not installed",
        ] {
            assert!(e.message().contains(part), "{e}");
        }
        assert_eq!(pinned_channel(&krate).as_deref(), Some("1.99.0"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
