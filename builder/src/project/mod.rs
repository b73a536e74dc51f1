//! Kernel crates as projects: `ferrocuda new` ([`new_crate`]) and `ferrocuda build`
//! ([`build_crate`]), shared by the `ferrocuda` command (this crate's binary) and the Python
//! package (`ferrocuda new`/`build`, `python -m ferrocuda`, `ferrocuda.load(crate_dir)`).
//!
//! A build compiles the crate with [`PtxBuilder`] into `<crate>/target/ferrocuda/<arch>/`
//! (`<lib>.ptx`, `<lib>.json`) and records there what it was built from (`<lib>.stamp.json`,
//! see [`cache`]): an unchanged crate is then served from that directory without running
//! cargo. Before compiling, it installs a missing toolchain (with rustup) and points
//! the crate's `.cargo/config.toml` at ferrocuda's crate sources ([`CrateSources`]).
//!
//! Two builds of one crate and arch at once (two processes, two threads) take turns on
//! `<lib>.lock` in that directory, from before the build to after the stamp is written; the
//! second, once it has the lock, looks at the stamp again and is served from the cache when
//! the first made the outputs current.

pub mod cache;
pub mod inline;
pub mod scaffold;
pub mod sources;

pub use scaffold::new_crate;
pub use sources::CrateSources;

use crate::child::package_name;
use crate::{fail, BuildError, BuildErrorKind, FpContract, PtxBuilder};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What to build, and how (the options of `ferrocuda build`).
#[derive(Clone, Debug)]
pub struct BuildRequest {
    /// The kernel crate: its directory or its `Cargo.toml`.
    pub path: PathBuf,
    /// `sm_XY` (default `sm_80`: loads on every GPU from the A100 on).
    pub arch: String,
    /// Release profile (default; the dev profile differs only in cargo's directories).
    pub release: bool,
    /// Floating-point contraction (default off: Rust's rounding).
    pub fp_contract: FpContract,
    /// The child build's target directory (default `<crate>/target`).
    pub target_dir: Option<PathBuf>,
    /// A CUDA root searched last for libdevice and ptxas (see
    /// [`PtxBuilder::cuda_fallback`]).
    pub cuda_fallback: Option<PathBuf>,
    /// Build even when the cache says the outputs are current.
    pub force: bool,
    /// Progress reports and cancellation of the build (default: none).
    pub control: crate::Control,
}

impl BuildRequest {
    /// The defaults for the crate at `path`.
    pub fn new(path: impl Into<PathBuf>) -> BuildRequest {
        BuildRequest {
            path: path.into(),
            arch: "sm_80".into(),
            release: true,
            fp_contract: FpContract::Off,
            target_dir: None,
            cuda_fallback: None,
            force: false,
            control: crate::Control::none(),
        }
    }
}

/// What [`build_crate`] produced.
#[derive(Clone, Debug)]
pub struct CrateBuild {
    /// The crate's package name.
    pub name: String,
    /// The manifest JSON (the PTX file it names is beside it).
    pub manifest_path: PathBuf,
    /// The PTX.
    pub ptx: PathBuf,
    /// How many kernels the manifest has.
    pub kernels: usize,
    /// Served from the cache (no cargo run).
    pub cached: bool,
    /// Seconds taken.
    pub seconds: f64,
    /// Warnings of the PTX checks (stack frames, spills, …).
    pub warnings: Vec<String>,
}

/// The crate directory of `path` (a directory, or its `Cargo.toml`), absolute.
fn crate_dir(path: &Path) -> Result<PathBuf, BuildError> {
    let path = std::path::absolute(path).or_else(|e| {
        fail(
            BuildErrorKind::Io,
            format!("cannot resolve {}: {e}", path.display()),
        )
    })?;
    let dir = if path.file_name().is_some_and(|n| n == "Cargo.toml") {
        path.parent().map(Path::to_path_buf).unwrap_or(path)
    } else {
        path
    };
    if !dir.join("Cargo.toml").is_file() {
        return fail(
            BuildErrorKind::Config,
            format!(
                "{} is not a kernel crate (it has no Cargo.toml); `ferrocuda new NAME` makes one",
                dir.display()
            ),
        );
    }
    Ok(dir)
}

/// First line of the `.cargo/config.toml` files that ferrocuda writes (and may rewrite).
const CONFIG_MARK: &str = "# Written by `ferrocuda build`";

/// Points the crate's `.cargo/config.toml` at `sources` when the crate depends on
/// `ferrocuda-device` by version and the file is absent or ferrocuda's own; leaves it alone
/// otherwise (a path dependency, a user's own config).
fn update_patch(dir: &Path, toml: &str, sources: &CrateSources) -> Result<(), BuildError> {
    let by_version = toml.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("ferrocuda-device") && !l.contains("path")
    });
    let config = dir.join(".cargo").join("config.toml");
    let current = std::fs::read_to_string(&config).ok();
    if !by_version
        || current
            .as_deref()
            .is_some_and(|c| !c.starts_with(CONFIG_MARK))
    {
        return Ok(());
    }
    sources.materialize()?;
    let wanted = sources.patch_config();
    if current.as_deref() != Some(wanted.as_str()) {
        // Renamed into place: a child cargo of another build of the crate (another arch) may
        // be reading it.
        std::fs::create_dir_all(dir.join(".cargo")).or_else(|e| {
            fail(
                BuildErrorKind::Io,
                format!("cannot write {}: {e}", config.display()),
            )
        })?;
        crate::write_atomically(&config, wanted)?;
    }
    Ok(())
}

/// Builds the kernel crate of `req` to PTX and a manifest, or finds them current in the
/// cache. `report` gets progress lines (a toolchain being installed, a build starting).
pub fn build_crate(
    req: &BuildRequest,
    sources: &CrateSources,
    report: &mut dyn FnMut(&str),
) -> Result<CrateBuild, BuildError> {
    let start = Instant::now();
    let dir = crate_dir(&req.path)?;
    let toml_path = dir.join("Cargo.toml");
    let toml = std::fs::read_to_string(&toml_path).or_else(|e| {
        fail(
            BuildErrorKind::Io,
            format!("cannot read {}: {e}", toml_path.display()),
        )
    })?;
    let name = package_name(&toml).ok_or_else(|| BuildError {
        kind: BuildErrorKind::Config,
        message: format!("no `[package] name` in {}", toml_path.display()),
    })?;
    let lib = name.replace('-', "_");
    let out_dir = dir.join("target").join("ferrocuda").join(&req.arch);
    let ptx = out_dir.join(format!("{lib}.ptx"));
    let manifest_path = out_dir.join(format!("{lib}.json"));
    let stamp_path = out_dir.join(format!("{lib}.stamp.json"));
    let key_base = |tools: &str| {
        cache::key_base(
            &dir,
            sources.fingerprint(),
            &req.arch,
            req.release,
            req.fp_contract,
            tools,
        )
    };
    let base = key_base(&cache::tools_id(req.cuda_fallback.as_deref()));
    let sources_base = key_base("");
    let freshness = if req.force {
        cache::Freshness::Stale
    } else {
        cache::fresh(&stamp_path, base, sources_base, &dir, &ptx, &manifest_path)
    };
    let cached = |warnings: Vec<String>| {
        let kernels = std::fs::read_to_string(&manifest_path)
            .ok()
            .and_then(|t| ferrocuda_abi::manifest::Manifest::from_json(&t).ok())
            .map_or(0, |m| m.kernels.len());
        CrateBuild {
            name: name.clone(),
            manifest_path: manifest_path.clone(),
            ptx: ptx.clone(),
            kernels,
            cached: true,
            seconds: start.elapsed().as_secs_f64(),
            warnings,
        }
    };
    if freshness == cache::Freshness::Current {
        return Ok(cached(Vec::new()));
    }
    // One build (and stamp) of this output directory at a time: the stamp must record the
    // outputs of its own build, not those of another one that ran at once (another profile or
    // floating-point mode writes the same files). A build that waited looks again: the other
    // may have made the outputs current.
    let _lock = crate::lock::exclusive(
        &out_dir.join(format!("{lib}.lock")),
        &req.control,
        &format!(
            "waiting for another `ferrocuda build` of {name} ({})",
            out_dir.display()
        ),
    )?;
    let freshness = if req.force {
        freshness
    } else {
        cache::fresh(&stamp_path, base, sources_base, &dir, &ptx, &manifest_path)
    };
    if freshness == cache::Freshness::Current {
        return Ok(cached(Vec::new()));
    }

    if let Err(e) = crate::toolchain::ensure(&dir, report) {
        // Built elsewhere, with other CUDA tools, and no toolchain here to build again: the
        // PTX and manifest are current for the sources (only cubins depend on the tools).
        if freshness == cache::Freshness::Sources {
            return Ok(cached(vec![format!(
                "{name} was built with other CUDA tools (ptxas, libdevice) than this machine \
                 finds, and no Rust toolchain is here to build it again: its PTX is used as \
                 built ({})",
                e.message.lines().next().unwrap_or_default()
            )]));
        }
        return Err(e);
    }
    update_patch(&dir, &toml, sources)?;
    report(&format!("building {name} for {} …", req.arch));
    let mut builder = PtxBuilder::new(&dir)
        .control(req.control.clone())
        .arch(&req.arch)
        .release(req.release)
        .fp_contract(req.fp_contract)
        .out_dir(&out_dir)
        .target_dir(req.target_dir.clone().unwrap_or_else(|| dir.join("target")));
    if let Some(cuda) = &req.cuda_fallback {
        builder = builder.cuda_fallback(cuda);
    }
    let began = std::time::SystemTime::now();
    let out = builder.build()?;
    let inputs = cache::inputs(&out.sources, &dir, &sources.root());
    // An input edited while the build ran may not be in the outputs: no stamp, so that the
    // next call builds again. (Cargo itself may rewrite Cargo.lock, consistently.)
    let edited = inputs.iter().filter(|f| *f != "Cargo.lock").any(|f| {
        std::fs::metadata(dir.join(f))
            .and_then(|m| m.modified())
            .is_ok_and(|t| t > began)
    });
    let stamp = cache::Stamp {
        key: cache::key(base, &dir, &inputs).ok_or_else(|| BuildError {
            kind: BuildErrorKind::Io,
            message: format!("an input of {name} vanished during the build: build again"),
        })?,
        sources: cache::key(sources_base, &dir, &inputs).unwrap_or_default(),
        inputs,
        ptx: cache::file_hash(&out.ptx).unwrap_or_default(),
        manifest: cache::file_hash(&out.manifest_path).unwrap_or_default(),
    };
    if !edited {
        let text = serde_json::to_string_pretty(&stamp).expect("a stamp serializes");
        crate::write_atomically(&stamp_path, &text)?;
    }
    Ok(CrateBuild {
        name,
        manifest_path: out.manifest_path,
        ptx: out.ptx,
        kernels: out.manifest.kernels.len(),
        cached: false,
        seconds: start.elapsed().as_secs_f64(),
        warnings: out
            .warnings
            .iter()
            .map(|w| w.to_string())
            .chain(out.note.clone())
            .collect(),
    })
}
