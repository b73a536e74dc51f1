//! [`PtxBuilder`], the settings of one kernel crate's build and its entry point for build
//! scripts, and what a build produces ([`BuildOutput`], [`PartOutput`]). The build itself is
//! [`PtxBuilder::build`] (in `parts`).

use crate::arch::{arch_number, DEFAULT_CUBIN_ARCHS};
use crate::check;
use crate::child;
use crate::control::Control;
use crate::error::{fail, BuildError, BuildErrorKind};
use ferrocuda_abi::manifest::{FpContract, Manifest};
use std::path::{Path, PathBuf};

/// Builder for one kernel crate, in the spirit of `cuda_builder::CudaBuilder`.
#[derive(Clone, Debug)]
pub struct PtxBuilder {
    crate_path: PathBuf,
    pub(crate) arch: String,
    out_dir: Option<PathBuf>,
    target_dir: Option<PathBuf>,
    pub(crate) release: bool,
    extra_watch: Vec<PathBuf>,
    pub(crate) libdevice: Option<PathBuf>,
    pub(crate) cuda_fallback: Option<PathBuf>,
    pub(crate) fp_contract: FpContract,
    pub(crate) ptxas_report: bool,
    cubin_archs: Option<Vec<String>>,
    pub(crate) control: Control,
    pub(crate) download: bool,
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
    /// The libdevice file linked in (`None` when no kernel calls a libdevice function).
    pub libdevice: Option<PathBuf>,
    /// ptxas's resource report for the crate's arch — registers, stack frame, spills, shared
    /// memory of every kernel (and non-inlined function); empty when no ptxas was found.
    pub resources: Vec<check::ptxas::Resources>,
    /// The ptxas that made the report.
    pub ptxas: Option<PathBuf>,
    /// Findings of the [PTX rules](check) that do not fail a build (local memory, stack
    /// frames, spills, barriers under branches on loaded data).
    pub warnings: Vec<check::Finding>,
    /// The cubins beside the PTX, arch (`"sm_90"`) → file (as the manifest's `cubins` names
    /// them); empty when no ptxas was found.
    pub cubins: std::collections::BTreeMap<String, PathBuf>,
    /// The further parts (kernels declared for another architecture): arch (`"sm_90a"`) →
    /// its PTX and cubins, as the manifest's `parts` names them.
    pub parts: std::collections::BTreeMap<String, PartOutput>,
    /// A one-line note for the user (e.g. that no ptxas was found, so PTX only).
    pub note: Option<String>,
    /// Wall-clock seconds the build took (child cargo included).
    pub seconds: f64,
}

/// The files of one further part of a build (see [`BuildOutput::parts`]).
#[derive(Clone, Debug)]
pub struct PartOutput {
    /// The part's PTX file.
    pub ptx: PathBuf,
    /// Its cubins: arch → file.
    pub cubins: std::collections::BTreeMap<String, PathBuf>,
}

/// Environment variables a build reads (for `cargo:rerun-if-env-changed`).
const ENV_INPUTS: [&str; 9] = [
    ferrocuda_config::CARGO.name,
    ferrocuda_config::PTX_TARGET_DIR.name,
    ferrocuda_config::HOME.name,
    ferrocuda_config::OFFLINE.name,
    ferrocuda_config::CUBIN_ARCHS.name,
    ferrocuda_config::LIBDEVICE.name,
    ferrocuda_config::PTXAS.name,
    "CUDA_HOME",
    "CUDA_PATH",
];

/// The child target directory of builds under a cargo target directory `target`
/// (`<target>/ferrocuda-ptx`): where a build script's kernel builds go (unless
/// `FERROCUDA_PTX_TARGET_DIR` names another), and every other child build that wants to reuse
/// what they compiled (NVPTX `core`, the device crate), such as the test suites' kernel crates.
pub fn child_target_dir(target: &Path) -> PathBuf {
    target.join("ferrocuda-ptx")
}

/// The child build's target directory: the builder's own setting, else the one
/// `FERROCUDA_PTX_TARGET_DIR` names, else — in a build script, whose `OUT_DIR` is
/// `<target>/<profile>/build/<pkg>-<hash>/out` — [`child_target_dir`] of cargo's target
/// directory, else `<crate>/target`.
fn child_dir(
    explicit: Option<PathBuf>,
    named: Option<PathBuf>,
    out_dir: Option<&Path>,
    crate_dir: &Path,
) -> PathBuf {
    explicit
        .or(named)
        .or_else(|| out_dir?.ancestors().nth(4).map(child_target_dir))
        .unwrap_or_else(|| crate_dir.join("target"))
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
            libdevice: None,
            cuda_fallback: None,
            fp_contract: FpContract::Off,
            ptxas_report: true,
            cubin_archs: None,
            control: Control::none(),
            download: true,
        }
    }

    /// Progress reports and cancellation (see [`Control`]; default: none).
    pub fn control(mut self, control: Control) -> Self {
        self.control = control;
        self
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

    /// The child build's target directory (default: `$FERROCUDA_PTX_TARGET_DIR` when set, else
    /// `ferrocuda-ptx` beside the outer target directory when run from a build script, else
    /// `<crate>/target`).
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

    /// The `libdevice.10.bc` to link when a kernel calls a libdevice function (first in the
    /// search order, see the [crate docs](crate#libdevice); a missing file is an error).
    /// Relative paths are resolved like the crate path.
    pub fn libdevice(mut self, path: impl Into<PathBuf>) -> Self {
        self.libdevice = Some(path.into());
        self
    }

    /// A CUDA root searched last for `nvvm/libdevice/libdevice.10.bc` (and `bin/ptxas`): a
    /// CUDA toolkit, or the `nvidia/cuda_nvcc` directory of an unpacked
    /// `nvidia-cuda-nvcc-cu12` wheel. Relative paths are resolved like the crate path.
    pub fn cuda_fallback(mut self, root: impl Into<PathBuf>) -> Self {
        self.cuda_fallback = Some(root.into());
        self
    }

    /// Floating-point contraction ([`FpContract::Off`] by default: Rust rounds every operation
    /// on its own, and the host computes the same results). [`FpContract::Fast`] lets the code
    /// generator fuse `a * b + c` into `fma.rn` as nvcc does by default. Recorded in the
    /// manifest.
    pub fn fp_contract(mut self, mode: FpContract) -> Self {
        self.fp_contract = mode;
        self
    }

    /// Whether to assemble the PTX with ptxas (when one is found; see [`check::ptxas::find`],
    /// with [`cuda_fallback`](Self::cuda_fallback) last) for the resource report in
    /// [`BuildOutput::resources`] and the cubins (default `true`; `false`: PTX only).
    pub fn ptxas_report(mut self, run: bool) -> Self {
        self.ptxas_report = run;
        self
    }

    /// Whether the builder may install NVIDIA's `nvidia-cuda-nvcc-cu12` wheel into its cache
    /// ([`cuda::nvcc_cache_root`](crate::cuda::nvcc_cache_root)) when libdevice is needed, or
    /// ptxas wanted for cubins, and nothing on the machine provides it (default `true`; also
    /// off with `FERROCUDA_OFFLINE=1` or `CARGO_NET_OFFLINE=true`). What it did is in
    /// [`BuildOutput::note`].
    pub fn download_cuda(mut self, allow: bool) -> Self {
        self.download = allow;
        self
    }

    /// The real architectures to assemble cubins for (default: `$FERROCUDA_CUBIN_ARCHS`,
    /// comma-separated, when set — empty for none; else [`DEFAULT_CUBIN_ARCHS`] not older than
    /// [`arch`](Self::arch), and the arch itself). Each is `sm_XY`, not older than the arch
    /// (the PTX's `.target`); an empty list makes PTX only.
    pub fn cubin_archs<I, S>(mut self, archs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.cubin_archs = Some(archs.into_iter().map(Into::into).collect());
        self
    }

    /// The cubin architectures of this build, checked against the arch.
    pub(crate) fn cubin_list(&self) -> Result<Vec<String>, BuildError> {
        let base = arch_number(&self.arch).unwrap_or(0);
        let from_env = || ferrocuda_config::CUBIN_ARCHS.list();
        let chosen = (self.cubin_archs.clone())
            .map_or_else(from_env, |l| Ok(Some(l)))
            .or_else(|e| fail(BuildErrorKind::Config, e.to_string()))?;
        let mut list: Vec<String> = match chosen {
            Some(l) => l,
            None => std::iter::once(self.arch.clone())
                .chain(
                    DEFAULT_CUBIN_ARCHS
                        .iter()
                        .filter(|a| arch_number(a).is_some_and(|n| n > base))
                        .map(|a| a.to_string()),
                )
                .collect(),
        };
        for a in &list {
            match arch_number(a) {
                Some(n) if n >= base => {}
                Some(_) => {
                    return fail(
                        BuildErrorKind::Config,
                        format!(
                            "cubin arch `{a}` is older than the PTX's arch `{}`: ptxas cannot \
                             assemble it (drop it, or build the PTX for an older arch)",
                            self.arch
                        ),
                    )
                }
                None => {
                    return fail(
                        BuildErrorKind::Config,
                        format!("cubin arch `{a}` is not of the form sm_XY (e.g. sm_90)"),
                    )
                }
            }
        }
        list.sort_by_key(|a| arch_number(a));
        list.dedup();
        Ok(list)
    }

    pub(crate) fn resolve(&self, p: &Path) -> PathBuf {
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
        for var in ENV_INPUTS {
            println!("cargo:rerun-if-env-changed={var}");
        }
        match self.build() {
            Ok(out) => {
                for line in self.rerun_lines(&out) {
                    println!("{line}");
                }
                for w in &out.warnings {
                    let line = w.to_string().replace('\n', " ");
                    println!("cargo:warning=ferrocuda kernels: {line}");
                }
                if let Some(note) = &out.note {
                    println!("cargo:warning=ferrocuda kernels: {note}");
                }
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

    /// The `cargo:rerun-if-…` lines of a build that succeeded (beyond the environment
    /// variables it reads): the sources the PTX depends on, libdevice, and the CUDA tools —
    /// the ptxas used (so that another version rebuilds the cubins) or, when none was found,
    /// `PATH` (so that a ptxas put on it later gives cubins; `FERROCUDA_PTXAS`, `CUDA_HOME`
    /// and `CUDA_PATH` are watched already).
    pub(crate) fn rerun_lines(&self, out: &BuildOutput) -> Vec<String> {
        let mut lines: Vec<String> = out
            .sources
            .iter()
            .chain(&self.extra_watch)
            .chain(&out.libdevice)
            .chain(&out.ptxas)
            .map(|s| format!("cargo:rerun-if-changed={}", s.display()))
            .collect();
        if out.ptxas.is_none() {
            lines.push("cargo:rerun-if-env-changed=PATH".to_string());
        }
        lines
    }

    /// The output and child target directories.
    pub(crate) fn dirs(&self, crate_dir: &Path) -> Result<(PathBuf, PathBuf), BuildError> {
        let out_dir = match (&self.out_dir, std::env::var_os("OUT_DIR")) {
            (Some(d), _) => self.resolve(d),
            (None, Some(d)) => PathBuf::from(d),
            (None, None) => crate_dir.join("target").join("ptx"),
        };
        let target_dir = child_dir(
            self.target_dir.as_deref().map(|d| self.resolve(d)),
            ferrocuda_config::PTX_TARGET_DIR
                .path()
                .map(|d| self.resolve(&d)),
            std::env::var_os("OUT_DIR").map(PathBuf::from).as_deref(),
            crate_dir,
        );
        for d in [&out_dir, &target_dir] {
            std::fs::create_dir_all(d).or_else(|e| {
                fail(
                    BuildErrorKind::Io,
                    format!("cannot create {}: {e}", d.display()),
                )
            })?;
        }
        Ok((out_dir, target_dir))
    }

    /// The crate's directory, `Cargo.toml` and package name; checks the arch.
    pub(crate) fn crate_info(&self) -> Result<(PathBuf, PathBuf, String), BuildError> {
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
        let crate_name = child::package_name(&toml).ok_or_else(|| BuildError {
            kind: BuildErrorKind::Config,
            message: format!("no `[package] name` in {}", cargo_toml.display()),
        })?;
        if arch_number(&self.arch).is_none() {
            return fail(
                BuildErrorKind::Config,
                format!("arch `{}` is not of the form sm_XY (e.g. sm_80)", self.arch),
            );
        }
        Ok((crate_dir, cargo_toml, crate_name))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_child_target_directory_is_the_setting_then_the_variable_then_cargo_s() {
        let out = Path::new("/w/target/release/build/ferrocuda-1a2b/out");
        let krate = Path::new("/w/kernels");
        let (set, named) = (PathBuf::from("/set"), PathBuf::from("/named"));
        assert_eq!(
            child_dir(Some(set.clone()), Some(named.clone()), Some(out), krate),
            set
        );
        assert_eq!(
            child_dir(None, Some(named.clone()), Some(out), krate),
            named
        );
        assert_eq!(
            child_dir(None, None, Some(out), krate),
            Path::new("/w/target/ferrocuda-ptx")
        );
        assert_eq!(child_dir(None, None, None, krate), krate.join("target"));
    }
    use super::*;

    #[test]
    fn a_build_script_reruns_for_its_tools_too() {
        let out = |ptxas: Option<&str>| BuildOutput {
            ptx: "k.ptx".into(),
            manifest_path: "k.json".into(),
            manifest: Manifest {
                format: 0,
                arch: "sm_80".into(),
                ptx: "k.ptx".into(),
                fp_contract: FpContract::default(),
                kernels: Vec::new(),
                cubins: Default::default(),
                parts: Default::default(),
            },
            sources: vec!["/k/src/lib.rs".into()],
            libdevice: Some("/cuda/libdevice.10.bc".into()),
            resources: Vec::new(),
            ptxas: ptxas.map(PathBuf::from),
            warnings: Vec::new(),
            cubins: Default::default(),
            parts: Default::default(),
            note: None,
            seconds: 0.0,
        };
        let b = PtxBuilder::new("/k");
        let with = b.rerun_lines(&out(Some("/cuda/bin/ptxas")));
        assert_eq!(
            with,
            [
                "cargo:rerun-if-changed=/k/src/lib.rs",
                "cargo:rerun-if-changed=/cuda/libdevice.10.bc",
                "cargo:rerun-if-changed=/cuda/bin/ptxas",
            ]
        );
        // Without ptxas: a ptxas put on PATH later makes the cubins (no missing path is
        // watched: cargo would rerun the script on every build).
        let without = b.rerun_lines(&out(None));
        assert_eq!(without.last().unwrap(), "cargo:rerun-if-env-changed=PATH");
        assert!(!without.iter().any(|l| l.contains("ptxas")), "{without:?}");
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
    fn cubin_archs_default_to_the_arch_and_newer_and_are_checked() {
        let b = PtxBuilder::new(env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os(ferrocuda_config::CUBIN_ARCHS.name).is_none() {
            assert_eq!(b.cubin_list().unwrap(), ["sm_80", "sm_90"]);
            let sm86 = b.clone().arch("sm_86").cubin_list().unwrap();
            assert_eq!(sm86, ["sm_86", "sm_90"]);
            assert_eq!(b.clone().arch("sm_90").cubin_list().unwrap(), ["sm_90"]);
        }
        let explicit = b.clone().cubin_archs(["sm_90", "sm_80", "sm_90"]);
        assert_eq!(explicit.cubin_list().unwrap(), ["sm_80", "sm_90"]);
        assert!(b
            .clone()
            .cubin_archs(Vec::<String>::new())
            .cubin_list()
            .unwrap()
            .is_empty());
        let old = b.clone().arch("sm_90").cubin_archs(["sm_80"]).cubin_list();
        assert_eq!(old.unwrap_err().kind(), BuildErrorKind::Config);
        let bad = b.cubin_archs(["compute_90"]).cubin_list();
        assert!(bad.unwrap_err().message().contains("sm_XY"));
    }
}
