//! Build a ferrocuda kernel crate to PTX from a `build.rs`, with rustc's own NVPTX backend.
//!
//! ```no_run
//! // In build.rs's `main`:
//! let out = ferrocuda_builder::PtxBuilder::new("kernels")
//!     .arch("sm_80")
//!     .build_script();
//! // out.ptx and out.manifest_path are in $OUT_DIR; include them with include_str!.
//! println!("{} kernels", out.manifest.kernels.len());
//! ```
//!
//! # Why this recipe
//!
//! Rust-CUDA's `cuda_builder` needs LLVM 7; rustc's built-in `nvptx64-nvidia-cuda` target
//! needs nothing but the `rust-src` component. The recipe (see the project brief):
//!
//! * `-Zbuild-std=core` — there is no prebuilt `core` for the target. The unstable flags are
//!   enabled with `RUSTC_BOOTSTRAP=1` **on the child build only**;
//! * the kernel crate is built as a `staticlib` with fat LTO and `--emit=asm=<file>`: LTO pulls
//!   `core` in, no linker runs (the NVPTX `cdylib` path needs `llvm-bitcode-linker`), and one
//!   self-contained PTX file comes out;
//! * no debuginfo (ptxas rejects it), `opt-level=3` (lower levels leave `memcmp` calls),
//!   `-Cpanic=immediate-abort` (panics become `trap`, no panic strings);
//! * `-Ctarget-cpu=sm_80` by default: PTX ISA 7.0, loads on sm_80 and newer.
//!
//! The child `cargo` runs with a scrubbed environment: the variables cargo sets for build
//! scripts (`CARGO_ENCODED_RUSTFLAGS`, `RUSTUP_TOOLCHAIN`, `CARGO_TARGET_DIR`, jobserver
//! `MAKEFLAGS`, …) would silently change the target CPU or break the build. It uses its own
//! target directory (sharing the outer one deadlocks on cargo's lock), and the PTX is emitted
//! to a path fixed per crate, profile and arch, then copied, only when changed, to the output
//! directory.
//!
//! After the build the PTX is post-processed: the manifest records that `#[kernel]` embeds
//! (see `ferrocuda_abi::manifest`) are decoded, removed from the PTX, cross-checked against the
//! `.entry` parameter lists, and written as JSON next to the PTX.

#![warn(missing_docs)]

use ferrocuda_abi::manifest::{self, KernelSig, Manifest};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The NVPTX target triple.
pub const TARGET: &str = "nvptx64-nvidia-cuda";

/// Builder for one kernel crate, in the spirit of `cuda_builder::CudaBuilder`.
#[derive(Clone, Debug)]
pub struct PtxBuilder {
    crate_path: PathBuf,
    arch: String,
    out_dir: Option<PathBuf>,
    target_dir: Option<PathBuf>,
    release: bool,
    extra_watch: Vec<PathBuf>,
}

/// What a successful build produced.
#[derive(Clone, Debug)]
pub struct BuildOutput {
    /// The PTX file (manifest records removed).
    pub ptx: PathBuf,
    /// The manifest JSON file next to it.
    pub manifest_path: PathBuf,
    /// The manifest itself.
    pub manifest: Manifest,
    /// Source files the PTX depends on (from the compiler's dep-info), for change tracking.
    pub sources: Vec<PathBuf>,
    /// Wall-clock seconds the build took (child cargo included).
    pub seconds: f64,
}

/// What kind of failure a build hit.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildErrorKind {
    /// The builder was configured wrongly (an arch not of the form `sm_XY`, a kernel crate
    /// without a package name).
    Config,
    /// A file could not be read, written or created.
    Io,
    /// The toolchain is missing or incomplete (cargo or rustc cannot run, no `rust-src`).
    Toolchain,
    /// The kernel crate did not compile for the NVPTX target.
    Compile,
    /// The PTX does not agree with the kernels' manifest records.
    Manifest,
}

/// Why a build failed: a [`BuildErrorKind`], and a message whose `Display` form says what to
/// do about it.
#[derive(Debug)]
pub struct BuildError {
    kind: BuildErrorKind,
    message: String,
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

fn fail<T>(kind: BuildErrorKind, message: impl Into<String>) -> Result<T, BuildError> {
    Err(BuildError {
        kind,
        message: message.into(),
    })
}

impl PtxBuilder {
    /// A builder for the kernel crate at `crate_path` (relative paths are taken from
    /// `CARGO_MANIFEST_DIR` when run from a build script, else from the current directory).
    pub fn new(crate_path: impl Into<PathBuf>) -> Self {
        PtxBuilder {
            crate_path: crate_path.into(),
            arch: "sm_80".into(),
            out_dir: None,
            target_dir: None,
            release: true,
            extra_watch: Vec::new(),
        }
    }

    /// The virtual GPU architecture (`sm_80` by default; PTX for `sm_XY` loads on `sm_XY`
    /// and newer GPUs).
    pub fn arch(mut self, arch: impl Into<String>) -> Self {
        self.arch = arch.into();
        self
    }

    /// Where the PTX and manifest go (default: `$OUT_DIR`).
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// The child build's target directory (default: `ferrocuda-ptx` beside the outer target
    /// directory when run from a build script, else `<crate>/target`).
    pub fn target_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.target_dir = Some(dir.into());
        self
    }

    /// Release profile (default `true`). The debug profile is still built without debuginfo
    /// and at `opt-level=3`: ptxas rejects debuginfo and lower levels leave `memcmp` calls.
    pub fn release(mut self, release: bool) -> Self {
        self.release = release;
        self
    }

    /// Also rebuild when `path` changes (sources of path dependencies are found
    /// automatically; this is for anything else the build reads).
    pub fn watch(mut self, path: impl Into<PathBuf>) -> Self {
        self.extra_watch.push(path.into());
        self
    }

    fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            return p.to_path_buf();
        }
        match std::env::var_os("CARGO_MANIFEST_DIR") {
            Some(dir) => PathBuf::from(dir).join(p),
            None => p.to_path_buf(),
        }
    }

    /// For `build.rs`: builds, prints `cargo:rerun-if-changed` lines for every source the PTX
    /// depends on, and on failure prints the reason and exits the build script with an error.
    pub fn build_script(&self) -> BuildOutput {
        match self.build() {
            Ok(out) => {
                for s in out.sources.iter().chain(&self.extra_watch) {
                    println!("cargo:rerun-if-changed={}", s.display());
                }
                println!("cargo:rerun-if-env-changed=FERROCUDA_CARGO");
                out
            }
            Err(e) => {
                // Keep watching the crate so that a fix triggers a rebuild.
                println!(
                    "cargo:rerun-if-changed={}",
                    self.resolve(&self.crate_path).display()
                );
                eprintln!("error: ferrocuda kernel build failed\n\n{e}");
                std::process::exit(1);
            }
        }
    }

    /// Builds the kernel crate and writes `<lib>.ptx` and `<lib>.json` to the output directory.
    pub fn build(&self) -> Result<BuildOutput, BuildError> {
        let start = Instant::now();
        let crate_dir = self.resolve(&self.crate_path);
        let cargo_toml = crate_dir.join("Cargo.toml");
        let toml = std::fs::read_to_string(&cargo_toml).or_else(|e| {
            fail(
                BuildErrorKind::Io,
                format!(
                    "cannot read the kernel crate's manifest {}: {e}",
                    cargo_toml.display()
                ),
            )
        })?;
        let crate_name = package_name(&toml).ok_or_else(|| BuildError {
            kind: BuildErrorKind::Config,
            message: format!("no `[package] name` in {}", cargo_toml.display()),
        })?;
        let lib_name = crate_name.replace('-', "_");
        if !self.arch.starts_with("sm_") || self.arch[3..].parse::<u32>().is_err() {
            return fail(
                BuildErrorKind::Config,
                format!("arch `{}` is not of the form sm_XY (e.g. sm_80)", self.arch),
            );
        }
        let out_dir = match (&self.out_dir, std::env::var_os("OUT_DIR")) {
            (Some(d), _) => self.resolve(d),
            (None, Some(d)) => PathBuf::from(d),
            (None, None) => crate_dir.join("target").join("ptx"),
        };
        let target_dir = match (&self.target_dir, std::env::var_os("OUT_DIR")) {
            (Some(d), _) => self.resolve(d),
            // OUT_DIR = <target>/<profile>/build/<pkg>-<hash>/out
            (None, Some(d)) => PathBuf::from(d)
                .ancestors()
                .nth(4)
                .map(|t| t.join("ferrocuda-ptx"))
                .unwrap_or_else(|| crate_dir.join("target")),
            (None, None) => crate_dir.join("target"),
        };
        std::fs::create_dir_all(&out_dir).or_else(|e| {
            fail(
                BuildErrorKind::Io,
                format!("cannot create {}: {e}", out_dir.display()),
            )
        })?;
        std::fs::create_dir_all(&target_dir).or_else(|e| {
            fail(
                BuildErrorKind::Io,
                format!("cannot create {}: {e}", target_dir.display()),
            )
        })?;

        let cargo = std::env::var_os("FERROCUDA_CARGO").unwrap_or_else(|| OsString::from("cargo"));
        check_rust_src(&crate_dir)?;

        let profile = if self.release { "release" } else { "dev" };
        let profile_dir = if self.release { "release" } else { "debug" };
        // Cargo leaves this file alone when it finds the crate fresh, so its name must be
        // private to this crate, profile and arch: a target directory shared by two crates of
        // one library name (or one crate in both profiles) must never hand back the other's PTX.
        let emitted = target_dir.join(format!(
            "{lib_name}.{}.{profile_dir}.{:016x}.ptx",
            self.arch,
            path_hash(&crate_dir)
        ));
        let mut cmd = Command::new(&cargo);
        scrub_env(&mut cmd);
        cmd.current_dir(&crate_dir)
            .env("RUSTC_BOOTSTRAP", "1")
            .env(
                "CARGO_ENCODED_RUSTFLAGS",
                [
                    format!("-Ctarget-cpu={}", self.arch),
                    "-Zunstable-options".into(),
                    "-Cpanic=immediate-abort".into(),
                ]
                .join("\x1f"),
            )
            .arg("rustc")
            .arg("--quiet")
            .arg("--lib")
            .arg("--crate-type=staticlib")
            .arg("--manifest-path")
            .arg(&cargo_toml)
            .arg("--target")
            .arg(TARGET)
            .arg("-Zbuild-std=core")
            .arg("--target-dir")
            .arg(&target_dir)
            .arg("--profile")
            .arg(profile);
        for (k, v) in [
            ("lto", "\"fat\""),
            ("codegen-units", "1"),
            ("opt-level", "3"),
            ("debug", "false"),
            ("panic", "\"abort\""),
            ("incremental", "false"),
            ("overflow-checks", "false"),
            ("debug-assertions", "false"),
        ] {
            cmd.arg("--config")
                .arg(format!("profile.{profile}.{k}={v}"));
        }
        cmd.arg("--")
            .arg(format!("--emit=asm={}", emitted.display()));

        let output = cmd.output().or_else(|e| {
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
            return fail(
                BuildErrorKind::Compile,
                format!(
                    "building the kernel crate `{crate_name}` for {TARGET} ({}) failed:\n{}",
                    self.arch,
                    String::from_utf8_lossy(&output.stderr)
                ),
            );
        }
        let raw = std::fs::read_to_string(&emitted).or_else(|e| {
            fail(
                BuildErrorKind::Io,
                format!(
                    "the kernel build succeeded but wrote no PTX at {}: {e}",
                    emitted.display()
                ),
            )
        })?;
        let (ptx, kernels) = process_ptx(&raw).map_err(|m| BuildError {
            kind: BuildErrorKind::Manifest,
            message: format!("kernel crate `{crate_name}`: {m}"),
        })?;
        let ptx_name = format!("{lib_name}.ptx");
        let manifest = Manifest {
            format: manifest::FORMAT,
            arch: self.arch.clone(),
            ptx: ptx_name.clone(),
            kernels,
        };
        let ptx_path = out_dir.join(&ptx_name);
        let manifest_path = out_dir.join(format!("{lib_name}.json"));
        write_if_changed(&ptx_path, &ptx)?;
        write_if_changed(&manifest_path, &(manifest.to_json() + "\n"))?;

        let depfile = target_dir
            .join(TARGET)
            .join(profile_dir)
            .join(format!("lib{lib_name}.d"));
        let mut sources = dep_sources(&depfile, &crate_dir);
        sources.push(cargo_toml.clone());
        let lock = crate_dir.join("Cargo.lock");
        if lock.exists() {
            sources.push(lock);
        }
        sources.sort();
        sources.dedup();
        Ok(BuildOutput {
            ptx: ptx_path,
            manifest_path,
            manifest,
            sources,
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}

/// Removes the variables cargo and rustup set for build scripts from the child's environment.
fn scrub_env(cmd: &mut Command) {
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

/// Fails with the exact command to run when `rust-src` is missing from the toolchain that
/// the kernel crate's directory selects.
fn check_rust_src(crate_dir: &Path) -> Result<(), BuildError> {
    let mut cmd = Command::new("rustc");
    scrub_env(&mut cmd);
    let out = cmd
        .current_dir(crate_dir)
        .args(["--print", "sysroot"])
        .output()
        .or_else(|e| {
            fail(
                BuildErrorKind::Toolchain,
                format!("could not run `rustc --print sysroot`: {e}"),
            )
        })?;
    if !out.status.success() {
        return fail(
            BuildErrorKind::Toolchain,
            format!(
                "`rustc --print sysroot` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        );
    }
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let core = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
    if !core.exists() {
        let toolchain = sysroot
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "<toolchain>".into());
        let toolchain = toolchain
            .strip_suffix("-x86_64-unknown-linux-gnu")
            .unwrap_or(&toolchain)
            .to_string();
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
    Ok(())
}

/// FNV-1a of a directory's canonical path (stable across runs and toolchains).
fn path_hash(dir: &Path) -> u64 {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    dir.as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

fn write_if_changed(path: &Path, contents: &str) -> Result<(), BuildError> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(contents) {
        return Ok(());
    }
    std::fs::write(path, contents).or_else(|e| {
        fail(
            BuildErrorKind::Io,
            format!("cannot write {}: {e}", path.display()),
        )
    })
}

/// `name` under `[package]` of a Cargo.toml (a minimal reader; no TOML dependency).
fn package_name(toml: &str) -> Option<String> {
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

/// One `.entry` of a PTX module: its name and the byte size of each parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxEntry {
    /// Entry name.
    pub name: String,
    /// Size in bytes of each `.param`.
    pub param_sizes: Vec<usize>,
}

/// Parses the `.entry` declarations of a PTX module.
pub fn ptx_entries(ptx: &str) -> Result<Vec<PtxEntry>, String> {
    let mut entries = Vec::new();
    let mut lines = ptx.lines();
    while let Some(line) = lines.next() {
        let t = line.trim();
        let Some(pos) = t.find(".entry ") else {
            continue;
        };
        if t.starts_with("//") {
            continue;
        }
        let rest = t[pos + ".entry ".len()..].trim();
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        let mut sizes = Vec::new();
        if !rest.ends_with("()") {
            for pline in lines.by_ref() {
                let p = pline.trim();
                if p.starts_with(')') {
                    break;
                }
                if !p.starts_with(".param") {
                    continue;
                }
                sizes.push(param_size(p).ok_or_else(|| {
                    format!("cannot read the size of PTX parameter `{p}` of `{name}`")
                })?);
            }
        }
        entries.push(PtxEntry {
            name,
            param_sizes: sizes,
        });
    }
    Ok(entries)
}

fn param_size(decl: &str) -> Option<usize> {
    // `.param .align 8 .b8 name[24]` or `.param .f32 name` / `.param .u64 name`
    let decl = decl.trim_end_matches(',');
    if let Some(open) = decl.rfind('[') {
        let close = decl.rfind(']')?;
        return decl[open + 1..close].parse().ok();
    }
    let ty = decl.split_whitespace().find(|w| {
        w.len() > 2
            && w.starts_with('.')
            && matches!(&w[1..2], "b" | "u" | "s" | "f")
            && w[2..].chars().all(|c| c.is_ascii_digit())
    })?;
    let bits: usize = ty[2..].parse().ok()?;
    Some(bits.div_ceil(8))
}

/// Extracts and removes the manifest records from `ptx`, decodes them, and checks them
/// against the `.entry` declarations. Returns the cleaned PTX and the kernels, sorted by name.
pub fn process_ptx(ptx: &str) -> Result<(String, Vec<KernelSig>), String> {
    let mut records: BTreeMap<String, KernelSig> = BTreeMap::new();
    let mut cleaned = String::with_capacity(ptx.len());
    let mut lines = ptx.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(at) = line.find(manifest::SYMBOL_PREFIX) else {
            cleaned.push_str(line);
            cleaned.push('\n');
            continue;
        };
        if line.trim_start().starts_with("//") {
            // `// .globl __ferrocuda_manifest__x` comment: drop it too.
            continue;
        }
        // Gather the whole declaration (it may span lines) up to the closing `};`.
        let mut decl = line.to_string();
        while !decl.trim_end().ends_with(';') {
            match lines.next() {
                Some(l) => decl.push_str(l),
                None => return Err("unterminated manifest record in PTX".into()),
            }
        }
        let sym: String = decl[at + manifest::SYMBOL_PREFIX.len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let open = decl
            .find('{')
            .ok_or("manifest record without initializer")?;
        let close = decl
            .rfind('}')
            .ok_or("manifest record without initializer")?;
        let bytes: Result<Vec<u8>, _> = decl[open + 1..close]
            .split(',')
            .map(|b| b.trim().parse::<u8>())
            .collect();
        let mut bytes =
            bytes.map_err(|e| format!("bad byte in manifest record of `{sym}`: {e}"))?;
        // LLVM leaves trailing zero bytes out of the initializer: pad to the declared length.
        let declared: usize = decl[..open]
            .rfind('[')
            .and_then(|l| decl[l + 1..open].split(']').next()?.parse().ok())
            .ok_or_else(|| format!("manifest record of `{sym}` has no length"))?;
        if bytes.len() > declared {
            return Err(format!(
                "manifest record of `{sym}` is longer than declared"
            ));
        }
        bytes.resize(declared, 0);
        let sig =
            manifest::decode(&bytes).map_err(|e| format!("manifest record of `{sym}`: {e}"))?;
        if sig.name != sym {
            return Err(format!(
                "manifest record `{sym}` describes a kernel named `{}`",
                sig.name
            ));
        }
        records.insert(sym, sig);
    }
    let entries = ptx_entries(&cleaned)?;
    for e in &entries {
        let Some(sig) = records.get(&e.name) else {
            return Err(format!(
                "PTX entry `{}` has no manifest record: mark kernels with #[kernel], not by hand",
                e.name
            ));
        };
        let want: Vec<usize> = sig.params.iter().map(|p| p.size as usize).collect();
        if want != e.param_sizes {
            return Err(format!(
                "kernel `{}`: PTX parameter sizes {:?} do not match the manifest's {:?}",
                e.name, e.param_sizes, want
            ));
        }
    }
    for name in records.keys() {
        if !entries.iter().any(|e| &e.name == name) {
            return Err(format!(
                "manifest record for `{name}` but no such .entry in the PTX"
            ));
        }
    }
    Ok((cleaned, records.into_values().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
.version 7.0
.target sm_80
.address_size 64

\t// .globl\tk
.visible .global .align 1 .b8 __ferrocuda_manifest__k[36] = {70, 67, 75, 49, 1, 107, 1, 107, 2, 1, 97, 2, 11, 1, 0, 16, 0, 8, 0, 5, 97, 108, 112, 104, 97, 1, 11, 0, 0, 4, 0, 4, 0, 0, 0, 0};

.visible .entry k(
\t.param .align 8 .b8 k_param_0[16],
\t.param .f32 k_param_1
)
{
\tret;
}
";

    #[test]
    fn extracts_and_strips_records() {
        // Build the sample's record with the real encoder to keep the test honest.
        use ferrocuda_abi::{KernelParam, Slice};
        let params = [
            ("a", <Slice<f32> as KernelParam>::DESC),
            ("alpha", <f32 as KernelParam>::DESC),
        ];
        let bytes: [u8; 36] = manifest::encode("k", "k", &params, &[], 0);
        let list: Vec<String> = bytes.iter().map(|b| b.to_string()).collect();
        let ptx = SAMPLE.replace(
            "[36] = {70, 67, 75, 49, 1, 107, 1, 107, 2, 1, 97, 2, 11, 1, 0, 16, 0, 8, 0, 5, 97, 108, 112, 104, 97, 1, 11, 0, 0, 4, 0, 4, 0, 0, 0, 0}",
            &format!("[36] = {{{}}}", list.join(", ")),
        );
        let (clean, kernels) = process_ptx(&ptx).unwrap();
        assert!(!clean.contains("__ferrocuda_manifest__"));
        assert!(clean.contains(".visible .entry k("));
        assert_eq!(kernels.len(), 1);
        assert_eq!(kernels[0].params[0].kind, "slice");
        assert_eq!(kernels[0].params[1].name, "alpha");

        // A size mismatch between PTX and manifest is caught.
        let bad = ptx.replace("k_param_0[16]", "k_param_0[24]");
        assert!(process_ptx(&bad).unwrap_err().contains("do not match"));
        // An entry without a record is caught.
        let extra = format!("{ptx}\n.visible .entry rogue()\n{{\nret;\n}}\n");
        assert!(process_ptx(&extra).unwrap_err().contains("rogue"));
    }

    #[test]
    fn parses_param_sizes() {
        assert_eq!(param_size(".param .align 8 .b8 add_param_1[24],"), Some(24));
        assert_eq!(param_size(".param .f32 add_param_2"), Some(4));
        assert_eq!(param_size(".param .u64 p,"), Some(8));
        assert_eq!(param_size(".param .b8 p"), Some(1));
        assert_eq!(param_size(".param .pred p"), None);
    }

    #[test]
    fn bad_arch_is_a_config_error() {
        // The builder's own crate has a package name; its arch is what is wrong.
        let e = PtxBuilder::new(env!("CARGO_MANIFEST_DIR"))
            .arch("compute_80")
            .build()
            .unwrap_err();
        assert_eq!(e.kind(), BuildErrorKind::Config, "{e}");
        assert!(e.message().contains("sm_XY"), "{e}");
    }

    #[test]
    fn reads_package_name() {
        let t = "[workspace]\n\n[package]\nversion = \"1\"\nname = \"my-kernels\"\n";
        assert_eq!(package_name(t).as_deref(), Some("my-kernels"));
        assert_eq!(package_name("[lib]\nname = \"x\"\n"), None);
    }
}
