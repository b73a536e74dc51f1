//! The build cache of `ferrocuda build`: a stamp beside the PTX and manifest that records
//! what they were built from, so that an unchanged crate is served without running cargo.
//!
//! The stamp's key is a hash of
//!
//! * this ferrocuda's version and the [fingerprint](super::CrateSources::fingerprint) of the
//!   ferrocuda crates the kernel crate is built against;
//! * the toolchain: the contents of the `rust-toolchain.toml` that selects it (and
//!   `RUSTUP_TOOLCHAIN`), plus `rustc -vV` when the channel is not pinned to a version or a
//!   date (`stable`, `nightly`: the same name means another compiler tomorrow);
//! * the target: triple, arch, profile, floating-point contraction;
//! * the CUDA tools a build would use (`tools_id`): the ptxas and the libdevice found (path,
//!   size, modification time) or their absence — a ptxas installed after a PTX-only build
//!   makes the next build assemble the cubins;
//! * every input file the compiler's dep-info listed (the crate's sources, `Cargo.toml`,
//!   `Cargo.lock`, other path dependencies), by path and contents — paths inside the crate
//!   relative to it, so a copied crate keeps its cache.
//!
//! The outputs' hashes are recorded too: a damaged or replaced PTX or manifest is rebuilt.
//!
//! The stamp also records the key without the CUDA tools (`sources`): a build current in
//! everything but the tools found — a crate built on one machine and loaded on another, whose
//! ptxas and libdevice lie elsewhere — is current for its sources only
//! (`Freshness::Sources`), which a machine without the Rust toolchain uses as it is (its PTX
//! is complete; only cubins depend on the tools).

use crate::child::{fnv_field, FNV_OFFSET};
use crate::toolchain::{scrub_env, toolchain_file};
use crate::{FpContract, TARGET};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a build was made from, and what it made.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stamp {
    /// The key (hex).
    pub key: String,
    /// The key without the CUDA tools (hex; empty in stamps older than this field).
    #[serde(default)]
    pub sources: String,
    /// The input files: relative to the crate, or absolute outside it.
    pub inputs: Vec<String>,
    /// Hash of the PTX (hex).
    pub ptx: String,
    /// Hash of the manifest (hex).
    pub manifest: String,
}

/// The revision of the stamp's rules, part of every key.
const STAMP_REVISION: &str = "stamp-3";

/// The part of the key that does not depend on the input files.
pub(crate) fn key_base(
    crate_dir: &Path,
    fingerprint: u64,
    arch: &str,
    release: bool,
    fp_contract: FpContract,
    tools: &str,
) -> u64 {
    let mut h = fnv_field(FNV_OFFSET, env!("CARGO_PKG_VERSION").as_bytes());
    // The stamp's rules: a new revision retires every older stamp (revision 2: a crate inside
    // a ferrocuda checkout records its own sources; revision-1 stamps of such crates listed
    // none, so they looked current after any edit; revision 3: the CUDA tools found are part
    // of the key).
    h = fnv_field(h, STAMP_REVISION.as_bytes());
    h = fnv_field(h, tools.as_bytes());
    h = fnv_field(h, &fingerprint.to_le_bytes());
    h = fnv_field(h, toolchain_id(crate_dir).as_bytes());
    for part in [TARGET, arch, if release { "release" } else { "dev" }] {
        h = fnv_field(h, part.as_bytes());
    }
    fnv_field(h, fp_contract.name().as_bytes())
}

/// What identifies the CUDA tools a build finds (`cuda_fallback`: see
/// [`PtxBuilder::cuda_fallback`](crate::PtxBuilder::cuda_fallback)): the ptxas and the
/// libdevice the builder's searches find — path, size and modification time — or their absence.
/// (The LLVM tools come with the toolchain, which the key covers.)
pub(crate) fn tools_id(cuda_fallback: Option<&Path>) -> String {
    let describe = |found: Option<PathBuf>| match found {
        Some(p) => {
            let meta = std::fs::metadata(&p).ok();
            let len = meta.as_ref().map_or(0, |m| m.len());
            let modified = meta
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{} {len} {modified}", p.display())
        }
        None => "absent".to_string(),
    };
    format!(
        "ptxas: {}\nlibdevice: {}",
        describe(crate::cuda::find_ptxas(cuda_fallback).found),
        describe(crate::cuda::find_libdevice(None, cuda_fallback).found)
    )
}

/// What identifies the toolchain the crate directory selects (see the module docs).
fn toolchain_id(crate_dir: &Path) -> String {
    let mut id = String::new();
    let env = std::env::var("RUSTUP_TOOLCHAIN").ok();
    let file = toolchain_file(crate_dir);
    let text = file
        .as_deref()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .unwrap_or_default();
    id.push_str(env.as_deref().unwrap_or(""));
    id.push('\n');
    id.push_str(&text);
    let channel = env.or_else(|| crate::toolchain::pinned_channel(crate_dir));
    if !channel.as_deref().is_some_and(is_pinned) {
        let mut cmd = Command::new("rustc");
        scrub_env(&mut cmd);
        if let Ok(out) = cmd.current_dir(crate_dir).arg("-vV").output() {
            id.push_str(&String::from_utf8_lossy(&out.stdout));
        }
    }
    id
}

/// Whether a rustup channel names one compiler: `1.99.0`, `nightly-2026-01-01`,
/// `1.99.0-x86_64-unknown-linux-gnu`.
pub(crate) fn is_pinned(channel: &str) -> bool {
    let first = channel.split('-').next().unwrap_or("");
    let version =
        first.split('.').count() == 3 && first.split('.').all(|p| p.parse::<u32>().is_ok());
    let dated = ["nightly-", "beta-", "stable-"].iter().any(|p| {
        channel.strip_prefix(p).is_some_and(|d| {
            d.len() >= 10 && d.as_bytes()[..10].iter().filter(|b| **b == b'-').count() == 2
        })
    });
    version || dated
}

/// The key: `base` and every input by path and contents (`None` when one cannot be read).
pub(crate) fn key(base: u64, crate_dir: &Path, inputs: &[String]) -> Option<String> {
    let mut h = base;
    for rel in inputs {
        let bytes = std::fs::read(crate_dir.join(rel)).ok()?;
        h = fnv_field(fnv_field(h, rel.as_bytes()), &bytes);
    }
    Some(format!("{h:016x}"))
}

/// The hash of a file's contents (hex), `None` when it cannot be read.
pub(crate) fn file_hash(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    Some(format!("{:016x}", fnv_field(FNV_OFFSET, &bytes)))
}

/// The stamp at `path` if it still describes the sources and the outputs.
pub(crate) fn fresh(
    path: &Path,
    base: u64,
    sources_base: u64,
    crate_dir: &Path,
    ptx: &Path,
    manifest: &Path,
) -> Freshness {
    let check = || {
        let stamp: Stamp = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
        if file_hash(ptx)? != stamp.ptx || file_hash(manifest)? != stamp.manifest {
            return None;
        }
        if key(base, crate_dir, &stamp.inputs)? == stamp.key {
            return Some(Freshness::Current);
        }
        (key(sources_base, crate_dir, &stamp.inputs)? == stamp.sources)
            .then_some(Freshness::Sources)
    };
    check().unwrap_or(Freshness::Stale)
}

/// How current a build's outputs are ([`fresh`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Current in everything the key covers.
    Current,
    /// Current but for the CUDA tools found (another ptxas or libdevice, or one appeared).
    Sources,
    /// Not current, damaged, or without a stamp.
    Stale,
}

/// The inputs to record for a build whose dep-info listed `sources`: paths under the crate
/// relative to it, and nothing else under `skip` (the ferrocuda crates: the fingerprint covers
/// them). A crate inside a ferrocuda checkout (`skip`) keeps its own files: the fingerprint
/// covers only the device crates.
pub(crate) fn inputs(sources: &[PathBuf], crate_dir: &Path, skip: &Path) -> Vec<String> {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let (crate_dir, skip) = (canon(crate_dir), canon(skip));
    let mut out: Vec<String> = sources
        .iter()
        .map(|s| canon(s))
        .filter(|s| (s.starts_with(&crate_dir) || !s.starts_with(&skip)) && s.is_file())
        .map(|s| match s.strip_prefix(&crate_dir) {
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => s.to_string_lossy().into_owned(),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_channels() {
        for c in [
            "1.99.0",
            "nightly-2026-01-31",
            "1.99.0-x86_64-unknown-linux-gnu",
            "beta-2026-02-01",
        ] {
            assert!(is_pinned(c), "{c}");
        }
        for c in ["stable", "nightly", "beta", "1.99", "nightly-2026"] {
            assert!(!is_pinned(c), "{c}");
        }
    }

    /// A stamp is current for its key; with other tools (another base) but the same sources
    /// it is current for the sources alone; an edited input, a replaced output or a stamp
    /// without the sources key (older ferrocuda) make it stale.
    #[test]
    fn freshness_separates_the_tools_from_the_sources() {
        let dir = std::env::temp_dir().join(format!("fc-fresh-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "a").unwrap();
        let (ptx, manifest) = (dir.join("k.ptx"), dir.join("k.json"));
        std::fs::write(&ptx, "ptx").unwrap();
        std::fs::write(&manifest, "{}").unwrap();
        let inputs = vec!["src/lib.rs".to_string()];
        let (here, elsewhere, sources) = (1u64, 2u64, 3u64);
        let stamp = Stamp {
            key: key(elsewhere, &dir, &inputs).unwrap(),
            sources: key(sources, &dir, &inputs).unwrap(),
            inputs,
            ptx: file_hash(&ptx).unwrap(),
            manifest: file_hash(&manifest).unwrap(),
        };
        let path = dir.join("k.stamp.json");
        let write = |s: &Stamp| std::fs::write(&path, serde_json::to_string(s).unwrap()).unwrap();
        write(&stamp);
        let at = |base| fresh(&path, base, sources, &dir, &ptx, &manifest);
        assert_eq!(at(elsewhere), Freshness::Current);
        assert_eq!(at(here), Freshness::Sources);
        assert_eq!(
            fresh(&path, here, here, &dir, &ptx, &manifest),
            Freshness::Stale
        );
        write(&Stamp {
            sources: String::new(),
            ..stamp.clone()
        });
        assert_eq!(at(here), Freshness::Stale);
        write(&stamp);
        std::fs::write(&ptx, "other ptx").unwrap();
        assert_eq!(at(elsewhere), Freshness::Stale);
        assert_eq!(at(here), Freshness::Stale);
        std::fs::write(&ptx, "ptx").unwrap();
        std::fs::write(dir.join("src/lib.rs"), "b").unwrap();
        assert_eq!(at(here), Freshness::Stale);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn keys_follow_paths_and_contents() {
        let dir = std::env::temp_dir().join(format!("fc-cache-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "a").unwrap();
        std::fs::write(dir.join("Cargo.toml"), "b").unwrap();
        let inputs = vec!["Cargo.toml".to_string(), "src/lib.rs".to_string()];
        let k1 = key(7, &dir, &inputs).unwrap();
        assert_eq!(key(7, &dir, &inputs).unwrap(), k1);
        assert_ne!(key(8, &dir, &inputs).unwrap(), k1, "another base");
        std::fs::write(dir.join("src/lib.rs"), "ab").unwrap();
        assert_ne!(key(7, &dir, &inputs).unwrap(), k1, "another content");
        assert!(key(7, &dir, &["gone.rs".into()]).is_none());
        let listed = inputs_of(&dir);
        assert_eq!(listed, ["Cargo.toml", "src/lib.rs"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_crate_inside_the_skipped_checkout_keeps_its_files() {
        let root = std::env::temp_dir().join(format!("fc-inside-{}", std::process::id()));
        let krate = root.join("my_kernels");
        std::fs::create_dir_all(krate.join("src")).unwrap();
        std::fs::create_dir_all(root.join("device/src")).unwrap();
        std::fs::write(krate.join("src/lib.rs"), "a").unwrap();
        std::fs::write(root.join("device/src/lib.rs"), "d").unwrap();
        let sources = [krate.join("src/lib.rs"), root.join("device/src/lib.rs")];
        assert_eq!(inputs(&sources, &krate, &root), ["src/lib.rs"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_key_follows_the_tools_found() {
        let root = std::env::temp_dir().join(format!("fc-tools-{}", std::process::id()));
        let ptxas = root.join("bin/ptxas");
        std::fs::create_dir_all(ptxas.parent().unwrap()).unwrap();
        std::fs::write(&ptxas, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&ptxas, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let without = tools_id(None);
        let with = tools_id(Some(&root));
        let base = |tools: &str| key_base(&root, 1, "sm_80", true, FpContract::Off, tools);
        if crate::cuda::find_ptxas(Some(&root)).found.as_deref() == Some(ptxas.as_path()) {
            // The fallback's ptxas is the one a build would use (nothing earlier in the search
            // order found one): it is named, and the key is another than without it.
            assert!(with.contains(&ptxas.display().to_string()), "{with}");
            assert!(!without.contains(&ptxas.display().to_string()), "{without}");
            assert_ne!(base(&with), base(&without));
        } else {
            // A ptxas found earlier (CUDA_HOME, PATH, …) wins either way.
            assert_eq!(with.lines().next(), without.lines().next());
        }
        // Replacing the ptxas (another size) changes the id.
        std::fs::write(&ptxas, "#!/bin/sh\n# another version\n").unwrap();
        if crate::cuda::find_ptxas(Some(&root)).found.as_deref() == Some(ptxas.as_path()) {
            assert_ne!(tools_id(Some(&root)), with);
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn inputs_of(dir: &Path) -> Vec<String> {
        let sources = [
            dir.join("src/lib.rs"),
            dir.join("Cargo.toml"),
            dir.join("src/lib.rs"),
        ];
        inputs(&sources, dir, Path::new("/nonexistent-skip"))
    }
}
