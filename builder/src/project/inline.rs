//! Inline kernels: Rust kernel source held in a string (Python's `ferrocuda.inline`), built
//! in a generated kernel crate and cached on disk.
//!
//! ```text
//! <dir>/                       (Python: $FERROCUDA_HOME/inline)
//!   entries/<key>/             one finished build: <lib>.json, <lib>.ptx, cubins
//!   crates/fc_inline_<key>/    the generated crate (Cargo.toml, src/lib.rs, src/kernel.rs)
//!   locks/<key>.lock           held (flock) while a process builds <key>
//!   target/                    the cargo target directory every inline kernel shares
//! ```
//!
//! The key ([`key`]) hashes the source, this builder's version and the fingerprint of the
//! ferrocuda crates it builds against, the toolchain (the pinned `rust-toolchain.toml` and
//! `RUSTUP_TOOLCHAIN`; `rustc -vV` too when that names no fixed compiler), the target and
//! the options (arch, floating-point contraction, `FERROCUDA_CUBIN_ARCHS`). A cache hit
//! ([`lookup`]) reads nothing but the entry's manifest path: no process is started.
//!
//! A miss ([`build`]) takes the key's lock (an OS file lock: released when the process ends,
//! however it ends, so it is never stale), looks again (another process may have built the
//! entry meanwhile), builds, and moves the finished outputs into `entries/<key>` with one
//! rename: an entry is complete or absent, never half-written, also when the build is
//! cancelled or the process killed. Every inline kernel shares one target directory, so
//! `core` for the GPU (built with `-Zbuild-std`) and the ferrocuda crates are compiled once
//! per arch; cargo's own lock orders builds of different kernels there.
//!
//! The user's source is `src/kernel.rs`, included by a generated `src/lib.rs` that adds
//! `#![no_std]`, the features kernels need and `use ferrocuda_device::prelude::*;`; so the
//! compiler's line numbers are the string's (line 1 = its first line), and its messages name
//! the file `<inline>` ([`INLINE_FILE`]). Leading inner attributes of the string
//! (`#![feature(f16)]`) move to `src/lib.rs` (their lines stay, blank).

use super::scaffold::{lock_file, toolchain_file};
use super::sources::CrateSources;
use crate::child::{fnv_field, FNV_OFFSET};
use crate::{BuildError, BuildErrorKind, Control, FpContract, PtxBuilder, TARGET};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The name compiler messages give the source string (`--> <inline>:3:14`).
pub const INLINE_FILE: &str = "<inline>";

/// The revision of the cache's layout and generated crate, part of every key.
const REVISION: &str = "inline-1";

/// One inline kernel to build.
#[derive(Clone, Debug)]
pub struct InlineRequest {
    /// The Rust source: items of a kernel crate (`#[kernel] pub fn …`).
    pub source: String,
    /// `sm_XY` (default `sm_80`).
    pub arch: String,
    /// Floating-point contraction (default off).
    pub fp_contract: FpContract,
    /// The cache directory (see the module docs).
    pub dir: PathBuf,
    /// Build even when an entry exists (and replace it).
    pub force: bool,
    /// Progress reports and cancellation.
    pub control: Control,
}

impl InlineRequest {
    /// The defaults for `source`, cached under `dir`.
    pub fn new(source: impl Into<String>, dir: impl Into<PathBuf>) -> InlineRequest {
        InlineRequest {
            source: source.into(),
            arch: "sm_80".into(),
            fp_contract: FpContract::Off,
            dir: dir.into(),
            force: false,
            control: Control::none(),
        }
    }
}

/// What [`build`] produced.
#[derive(Clone, Debug)]
pub struct InlineBuild {
    /// The entry's manifest (the PTX and cubins beside it).
    pub manifest_path: PathBuf,
    /// The cache key (hex).
    pub key: String,
    /// Found in the cache (built by another process, or before).
    pub cached: bool,
    /// Seconds taken (waiting for another process's build included).
    pub seconds: f64,
    /// Warnings of the PTX checks.
    pub warnings: Vec<String>,
}

/// The cache key of `req` with the ferrocuda crates `sources` (hex, 16 digits).
pub fn key(req: &InlineRequest, sources: &CrateSources) -> String {
    let mut h = fnv_field(FNV_OFFSET, REVISION.as_bytes());
    h = fnv_field(h, env!("CARGO_PKG_VERSION").as_bytes());
    h = fnv_field(h, &sources.fingerprint().to_le_bytes());
    h = fnv_field(h, toolchain_id(sources).as_bytes());
    // The CUDA tools found are not part of the key: a hit must stay a file lookup (no
    // search that runs Python, and the same entry whatever PATH holds), and a build that
    // fetched libdevice must find its own entry next. An entry built before a ptxas was
    // installed has no cubins (the driver compiles its PTX); `force` rebuilds it with them.
    // Unset (the default list) hashes as before; a list by its items, empty included.
    let cubins = match ferrocuda_config::CUBIN_ARCHS.list() {
        Ok(None) => String::new(),
        other => format!("{other:?}"),
    };
    for part in [
        TARGET,
        req.arch.as_str(),
        req.fp_contract.name(),
        cubins.as_str(),
    ] {
        h = fnv_field(h, part.as_bytes());
    }
    h = fnv_field(h, req.source.as_bytes());
    format!("{h:016x}")
}

/// The toolchain: `RUSTUP_TOOLCHAIN` and the pinned `rust-toolchain.toml` of the sources;
/// `rustc -vV` when they name no fixed compiler (once per process).
fn toolchain_id(sources: &CrateSources) -> String {
    let env = std::env::var("RUSTUP_TOOLCHAIN").ok();
    let file = sources.read("rust-toolchain.toml").unwrap_or_default();
    let mut id = format!("{}\n{file}", env.as_deref().unwrap_or(""));
    let channel = env.or_else(|| crate::toolchain::channel_of(&file));
    if !channel.as_deref().is_some_and(super::cache::is_pinned) {
        static VV: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        id.push_str(VV.get_or_init(|| {
            let mut cmd = std::process::Command::new("rustc");
            crate::toolchain::scrub_env(&mut cmd);
            cmd.arg("-vV")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        }));
    }
    id
}

fn lib_name(key: &str) -> String {
    format!("fc_inline_{key}")
}

/// The manifest of `key`'s entry under `dir`, when the entry exists (a cache hit).
pub fn lookup(dir: &Path, key: &str) -> Option<PathBuf> {
    let m = dir
        .join("entries")
        .join(key)
        .join(format!("{}.json", lib_name(key)));
    m.is_file().then_some(m)
}

fn io_err(what: &str, p: &Path, e: std::io::Error) -> BuildError {
    BuildError {
        kind: BuildErrorKind::Io,
        message: format!(
            "cannot {what} {} (the inline kernel cache; set FERROCUDA_HOME to a writable \
             directory): {e}",
            p.display()
        ),
    }
}

/// Writes `text` to `path` unless it holds it already.
fn write_file(path: &Path, text: &str) -> Result<(), BuildError> {
    if std::fs::read_to_string(path).is_ok_and(|t| t == text) {
        return Ok(());
    }
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| io_err("create", d, e))?;
    }
    std::fs::write(path, text).map_err(|e| io_err("write", path, e))
}

/// Takes `path`'s lock (see [`crate::lock`]), polling so that a cancel is seen while another
/// process holds it.
fn lock(path: &Path, control: &Control) -> Result<File, BuildError> {
    crate::lock::exclusive(
        path,
        control,
        "waiting for another process that builds this kernel",
    )
    .map_err(|e| match e.kind {
        BuildErrorKind::Io => BuildError {
            kind: e.kind,
            message: format!(
                "{} (the inline kernel cache; set FERROCUDA_HOME to a writable directory)",
                e.message
            ),
        },
        _ => e,
    })
}

/// The source split into the generated crate's `src/lib.rs` (the leading inner attributes)
/// and `src/kernel.rs` (the rest, those lines left blank: the line numbers stay).
fn split_source(source: &str) -> (String, String) {
    let mut attrs = String::new();
    let mut body = String::new();
    let mut leading = true;
    for line in source.split_inclusive('\n') {
        let t = line.trim();
        if leading && t.starts_with("#![") && t.ends_with(']') {
            attrs.push_str(t);
            attrs.push('\n');
            body.push('\n');
            continue;
        }
        if leading && !(t.is_empty() || t.starts_with("//")) {
            leading = false;
        }
        body.push_str(line);
    }
    (attrs, body)
}

/// The generated crate's files: (relative path, contents).
fn crate_files(
    lib: &str,
    source: &str,
    sources: &CrateSources,
) -> Result<Vec<(&'static str, String)>, BuildError> {
    let (attrs, body) = split_source(source);
    let cargo_toml = format!(
        "[package]\nname = \"{lib}\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n\
         [workspace]\n\n[lib]\npath = \"src/lib.rs\"\n\n[dependencies]\nferrocuda-device = \"0.1.0\"\n"
    );
    let lib_rs = format!(
        "// Generated by ferrocuda for an inline kernel: the source is src/kernel.rs.\n\
         #![no_std]\n#![cfg_attr(target_arch = \"nvptx64\", feature(abi_ptx))]\n{attrs}\
         #[allow(unused_imports)]\nuse ferrocuda_device::prelude::*;\ninclude!(\"kernel.rs\");\n"
    );
    Ok(vec![
        ("Cargo.toml", cargo_toml),
        (
            "Cargo.lock",
            lock_file(&sources.read("kernels/Cargo.lock")?, lib),
        ),
        (
            "rust-toolchain.toml",
            toolchain_file(&sources.read("rust-toolchain.toml")?),
        ),
        (".cargo/config.toml", sources.patch_config()),
        ("src/lib.rs", lib_rs),
        ("src/kernel.rs", body),
    ])
}

/// Compiler messages with the generated crate's `src/kernel.rs` named [`INLINE_FILE`].
pub fn map_message(message: &str, crate_dir: &Path) -> String {
    let abs = crate_dir.join("src").join("kernel.rs");
    message
        .replace(&format!("{}:", abs.display()), &format!("{INLINE_FILE}:"))
        .replace("src/kernel.rs:", &format!("{INLINE_FILE}:"))
}

/// A failed build's message for the user of the string: its locations named [`INLINE_FILE`]
/// (see [`map_message`]), and of cargo's output only the errors and the diagnostics that
/// point into the string (not the warnings cargo replays for ferrocuda's own crates).
pub fn user_message(message: &str, crate_dir: &Path) -> String {
    let mapped = map_message(message, crate_dir);
    // Diagnostics begin at column 0 with `error` or `warning`; everything up to the next one
    // belongs to it.
    let mut blocks: Vec<String> = Vec::new();
    let mut intro = String::new();
    for line in mapped.split_inclusive('\n') {
        if line.starts_with("error") || line.starts_with("warning") {
            blocks.push(String::new());
        }
        match blocks.last_mut() {
            Some(b) => b.push_str(line),
            None => intro.push_str(line),
        }
    }
    if blocks.is_empty() {
        return mapped;
    }
    let kept: String = blocks
        .into_iter()
        .filter(|b| b.starts_with("error") || b.contains(&format!("{INLINE_FILE}:")))
        .collect();
    let intro = if intro.contains("failed:") {
        format!("the inline kernel did not compile ({INLINE_FILE} is its source string, line 1 its first line):\n")
    } else {
        intro
    };
    format!("{intro}{kept}")
}

/// The `(line, column)` of each compiler message location in the string (`--> <inline>:L:C`),
/// in order, without repeats.
pub fn locations(message: &str) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for line in message.lines() {
        let t = line.trim_start();
        let Some(rest) = t
            .strip_prefix("--> ")
            .or_else(|| t.strip_prefix("::: "))
            .and_then(|r| r.strip_prefix(INLINE_FILE))
            .and_then(|r| r.strip_prefix(':'))
        else {
            continue;
        };
        let mut nums = rest.split(':').map(|n| n.trim().parse::<u32>());
        if let (Some(Ok(l)), Some(Ok(c))) = (nums.next(), nums.next()) {
            if !out.contains(&(l, c)) {
                out.push((l, c));
            }
        }
    }
    out
}

/// Builds the inline kernel of `req` (after its key's lock), or finds it built.
pub fn build(req: &InlineRequest, sources: &CrateSources) -> Result<InlineBuild, BuildError> {
    let start = Instant::now();
    if crate::arch::arch_number(&req.arch).is_none() {
        return Err(BuildError {
            kind: BuildErrorKind::Config,
            message: format!("arch `{}` is not of the form sm_XY (e.g. sm_80)", req.arch),
        });
    }
    let control = &req.control;
    let key = key(req, sources);
    let done = |manifest_path: PathBuf, cached: bool, warnings: Vec<String>| InlineBuild {
        manifest_path,
        key: key.clone(),
        cached,
        seconds: start.elapsed().as_secs_f64(),
        warnings,
    };
    if !req.force {
        if let Some(m) = lookup(&req.dir, &key) {
            return Ok(done(m, true, Vec::new()));
        }
    }
    let _lock = lock(&req.dir.join("locks").join(format!("{key}.lock")), control)?;
    if !req.force {
        if let Some(m) = lookup(&req.dir, &key) {
            control.report("built by another process meanwhile");
            return Ok(done(m, true, Vec::new()));
        }
    }
    let lib = lib_name(&key);
    let crate_dir = req.dir.join("crates").join(&lib);
    control.stage("writing the kernel crate", || {
        sources.materialize()?;
        for (rel, text) in crate_files(&lib, &req.source, sources)? {
            write_file(&crate_dir.join(rel), &text)?;
        }
        Ok(())
    })?;
    control.stage(
        "toolchain: checking (rustup installs it when missing)",
        || crate::toolchain::ensure(&crate_dir, &mut |m| control.report(m)),
    )?;
    let out_dir = crate_dir.join("out");
    // A cancelled or failed build may have left outputs: they are never an entry.
    let _ = std::fs::remove_dir_all(&out_dir);
    let target = req.dir.join("target");
    let built = PtxBuilder::new(&crate_dir)
        .control(control.clone())
        .arch(&req.arch)
        .fp_contract(req.fp_contract)
        .out_dir(&out_dir)
        .target_dir(&target)
        .build()
        .map_err(|e| BuildError {
            kind: e.kind,
            message: user_message(&e.message, &crate_dir),
        })?;
    control.check()?;
    // Publish: one rename of the complete directory (a forced rebuild moves the old entry
    // aside first; a process that loaded it has its files in memory).
    let entries = req.dir.join("entries");
    std::fs::create_dir_all(&entries).map_err(|e| io_err("create", &entries, e))?;
    let entry = entries.join(&key);
    if entry.exists() {
        let old = entries.join(format!(".old-{key}-{}", std::process::id()));
        std::fs::rename(&entry, &old).map_err(|e| io_err("replace", &entry, e))?;
        let _ = std::fs::remove_dir_all(&old);
    }
    std::fs::rename(&out_dir, &entry).map_err(|e| io_err("publish", &entry, e))?;
    let manifest = entry.join(format!("{lib}.json"));
    let warnings = built
        .warnings
        .iter()
        .map(|w| map_message(&w.to_string(), &crate_dir))
        .chain(built.note.clone())
        .collect();
    Ok(done(manifest, false, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_attributes_move_and_lines_stay() {
        let src = "\n#![feature(f16)]\n// c\n#[kernel]\npub fn k() {}\n#![not_moved]\n";
        let (attrs, body) = split_source(src);
        assert_eq!(attrs, "#![feature(f16)]\n");
        assert_eq!(body, "\n\n// c\n#[kernel]\npub fn k() {}\n#![not_moved]\n");
        assert_eq!(body.lines().count(), src.lines().count());
    }

    #[test]
    fn messages_name_the_string() {
        let dir = Path::new("/c/fc_inline_1");
        let m = "error[E0308]: mismatched types\n --> /c/fc_inline_1/src/kernel.rs:3:18\n  |\n\
                 3 |     let x: u32 = 1.0;\n\n  ::: /c/fc_inline_1/src/kernel.rs:7:1\n\
                 --> /c/fc_inline_1/src/kernel.rs:3:18\n --> /elsewhere/lib.rs:2:2\n";
        let mapped = map_message(m, dir);
        assert!(mapped.contains(" --> <inline>:3:18\n"), "{mapped}");
        assert!(!mapped.contains("kernel.rs"), "{mapped}");
        assert_eq!(locations(&mapped), [(3, 18), (7, 1)]);
    }

    #[test]
    fn user_messages_keep_errors_and_the_strings_diagnostics() {
        let dir = Path::new("/c/fc_inline_1");
        let m = "building the kernel crate `fc_inline_1` for nvptx64-nvidia-cuda (sm_80) failed:\n\
                 warning: patch `ferrocuda-device` was not used\nhelp: check\n\
                 warning: unnecessary `unsafe` block\n   --> /h/device/src/cluster.rs:307:9\n\n\
                 warning: `ferrocuda-device` (lib) generated 8 warnings\n\
                 warning: unused variable: `y`\n --> /c/fc_inline_1/src/kernel.rs:2:9\n\n\
                 error[E0425]: cannot find value `z`\n --> /c/fc_inline_1/src/kernel.rs:5:31\n\n\
                 error: could not compile `fc_inline_1` (lib) due to 1 previous error\n";
        let got = user_message(m, dir);
        assert!(
            got.starts_with("the inline kernel did not compile"),
            "{got}"
        );
        assert!(
            !got.contains("ferrocuda-device") && !got.contains("cluster.rs"),
            "{got}"
        );
        assert!(
            got.contains("warning: unused variable: `y`\n --> <inline>:2:9"),
            "{got}"
        );
        assert!(
            got.contains("error[E0425]: cannot find value `z`\n --> <inline>:5:31"),
            "{got}"
        );
        assert!(got.contains("error: could not compile"), "{got}");
        assert_eq!(locations(&got), [(2, 9), (5, 31)]);
    }

    #[test]
    fn keys_follow_source_and_options() {
        let sources = CrateSources::embedded(
            &[("rust-toolchain.toml", "[toolchain]\nchannel = \"1.99.0\"\n")],
            "/nonexistent",
            None,
        );
        let a = InlineRequest::new("fn a() {}", "/x");
        let k = key(&a, &sources);
        assert_eq!(k.len(), 16);
        assert_eq!(key(&a, &sources), k);
        let mut b = a.clone();
        b.source.push(' ');
        assert_ne!(key(&b, &sources), k, "source");
        let mut b = a.clone();
        b.arch = "sm_90".into();
        assert_ne!(key(&b, &sources), k, "arch");
        let mut b = a.clone();
        b.fp_contract = FpContract::Fast;
        assert_ne!(key(&b, &sources), k, "fp_contract");
        let other = CrateSources::embedded(
            &[("rust-toolchain.toml", "[toolchain]\nchannel = \"1.98.0\"\n")],
            "/nonexistent",
            None,
        );
        assert_ne!(key(&a, &other), k, "toolchain");
        let mut b = a.clone();
        b.dir = "/y".into();
        assert_eq!(key(&b, &sources), k, "the directory is not part of the key");
    }
}
