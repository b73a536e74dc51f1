//! `ferrocuda doctor`: what building one's own kernels needs on this machine — rustup, the
//! pinned toolchain with its `rust-src` and `llvm-tools` components, NVIDIA's libdevice, ptxas
//! — and a CUDA driver to run them; with `--install`, installs what it can (the toolchain and
//! its components with rustup, libdevice and ptxas from NVIDIA's `nvidia-cuda-nvcc-cu12` wheel
//! into ferrocuda's cache, see [`crate::cuda`]).

use crate::cuda;
use crate::toolchain::{self, scrub_env, LLVM_TOOLS};
use std::path::Path;
use std::process::Command;

/// How one requirement stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Present.
    Ok,
    /// Missing, and building kernels needs it.
    Missing,
    /// Missing, and builds work without it (with less: no cubins, or nothing to run on).
    Optional,
}

/// One line of the report.
#[derive(Clone, Debug)]
pub struct Check {
    /// What is checked (`toolchain`, `libdevice`, …).
    pub name: &'static str,
    /// How it stands.
    pub state: State,
    /// Where it is, or what is missing and the command that installs it.
    pub detail: String,
}

impl Check {
    fn new(name: &'static str, state: State, detail: impl Into<String>) -> Check {
        Check {
            name,
            state,
            detail: detail.into(),
        }
    }
}

/// What the CUDA driver says: `Ok(description)` or `Err(why none)`; `None`: not checked.
pub type DriverProbe<'a> = Option<&'a dyn Fn() -> Result<String, String>>;

/// Checks each requirement, for kernel crates built with the toolchain that `dir`'s
/// `rust-toolchain.toml` pins; `cuda_fallback` is a CUDA root searched for libdevice and
/// ptxas before the builder's own copy (see [`crate::PtxBuilder::cuda_fallback`]).
pub fn checks(dir: &Path, cuda_fallback: Option<&Path>, driver: DriverProbe<'_>) -> Vec<Check> {
    let mut out = Vec::new();
    let channel = toolchain::pinned_channel(dir);
    let wanted = channel.clone().unwrap_or_else(|| "stable".into());
    let mut rustup = Command::new("rustup");
    scrub_env(&mut rustup);
    match rustup
        .arg("--version")
        .env("RUSTUP_AUTO_INSTALL", "0")
        .output()
    {
        Ok(o) if o.status.success() => {
            let v = String::from_utf8_lossy(&o.stdout);
            out.push(Check::new(
                "rustup",
                State::Ok,
                v.lines().next().unwrap_or("").trim(),
            ));
        }
        _ => out.push(Check::new(
            "rustup",
            State::Missing,
            "not found: install it from https://rustup.rs (then `ferrocuda doctor --install`)",
        )),
    }
    let install_tc = format!("rustup toolchain install {wanted} --component rust-src,llvm-tools");
    match toolchain::sysroot(dir, "rustc".as_ref()) {
        Err(why) => {
            out.push(Check::new(
                "toolchain",
                State::Missing,
                format!("Rust {wanted} is not installed ({why}); install it with: {install_tc}"),
            ));
            for c in ["rust-src", "llvm-tools"] {
                out.push(Check::new(c, State::Missing, "comes with the toolchain"));
            }
        }
        Ok(sysroot) => {
            let name = toolchain::toolchain_name(&sysroot);
            let pinned = match toolchain::toolchain_file(dir) {
                Some(f) => format!(" (pinned by {})", f.display()),
                None => String::new(),
            };
            out.push(Check::new(
                "toolchain",
                State::Ok,
                format!("Rust {name}{pinned}"),
            ));
            let core = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
            out.push(if core.is_file() {
                Check::new("rust-src", State::Ok, "installed")
            } else {
                Check::new(
                    "rust-src",
                    State::Missing,
                    format!("install it with: rustup component add rust-src --toolchain {name}"),
                )
            });
            out.push(match toolchain::llvm_bin(&sysroot) {
                Some(bin) => Check::new("llvm-tools", State::Ok, bin.display().to_string()),
                None => Check::new(
                    "llvm-tools",
                    State::Missing,
                    format!(
                        "no {} in the toolchain; install them with: rustup component add \
                         llvm-tools --toolchain {name}",
                        LLVM_TOOLS.join(", ")
                    ),
                ),
            });
        }
    }
    let fix = format!(
        "`ferrocuda doctor --install`, or: {}; or set CUDA_HOME to a CUDA toolkit",
        cuda::install_command()
    );
    let lib = cuda::find_libdevice(None, cuda_fallback);
    out.push(
        match (
            &lib.found,
            lib.tried
                .iter()
                .find(|c| Some(&c.path) == lib.found.as_ref()),
        ) {
            (Some(p), Some(c)) => Check::new(
                "libdevice",
                State::Ok,
                format!("{} ({})", p.display(), c.origin),
            ),
            _ => Check::new(
                "libdevice",
                State::Missing,
                format!(
                "NVIDIA's libdevice.10.bc (for kernels that call math functions) not found; the \
                 first build that needs it downloads it — or {fix}"
            ),
            ),
        },
    );
    let ptxas = cuda::find_ptxas(cuda_fallback);
    out.push(
        match (
            &ptxas.found,
            ptxas
                .tried
                .iter()
                .find(|c| Some(&c.path) == ptxas.found.as_ref()),
        ) {
            (Some(p), Some(c)) => Check::new(
                "ptxas",
                State::Ok,
                format!("{} ({})", p.display(), c.origin),
            ),
            _ => Check::new(
                "ptxas",
                State::Optional,
                format!(
                    "not found: builds check less and make PTX only, no cubins; the first build \
                 downloads it — or {fix}"
                ),
            ),
        },
    );
    if let Some(probe) = driver {
        out.push(match probe() {
            Ok(d) => Check::new("driver", State::Ok, d),
            Err(why) => Check::new(
                "driver",
                State::Optional,
                format!("{why} (kernels build here, but run only where a driver and GPU are)"),
            ),
        });
    }
    if let Some(why) = cuda::offline() {
        out.push(Check::new(
            "downloads",
            State::Optional,
            format!("off ({why}): the builder will not download libdevice or ptxas"),
        ));
    }
    out
}

/// Installs what [`checks`] finds missing and can be installed: the pinned toolchain and its
/// components (rustup), libdevice and ptxas (the nvcc wheel, into ferrocuda's cache).
/// `report` gets a line per step. Returns the errors.
pub fn install(
    dir: &Path,
    cuda_fallback: Option<&Path>,
    report: &mut dyn FnMut(&str),
) -> Vec<String> {
    let mut errors = Vec::new();
    if let Err(e) = toolchain::ensure(dir, report) {
        errors.push(e.to_string());
    }
    let lib = cuda::find_libdevice(None, cuda_fallback).found;
    let ptxas = cuda::find_ptxas(cuda_fallback).found;
    if lib.is_none() || ptxas.is_none() {
        report(&format!(
            "installing NVIDIA's {} {} (libdevice, ptxas; about 100 MB unpacked) into {}",
            cuda::NVCC_WHEEL,
            cuda::NVCC_WHEEL_VERSION,
            cuda::nvcc_cache_root().display()
        ));
        match cuda::download() {
            Ok(m) => report(&m),
            Err(e) => errors.push(e),
        }
    }
    errors
}

/// The report as text, one aligned line per check.
pub fn render(checks: &[Check]) -> String {
    let mut s = String::new();
    for c in checks {
        let mark = match c.state {
            State::Ok => "ok",
            State::Missing => "MISSING",
            State::Optional => "--",
        };
        s.push_str(&format!("  {:<11} {:<8} {}\n", c.name, mark, c.detail));
    }
    s
}
