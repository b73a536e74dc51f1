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
//! Also here:
//!
//! * [`Launchers`] ([`launchers`]) — typed Rust launchers generated from a manifest (the root
//!   crate's `ferrocuda::kernels::*`, and a user's host crate's, from its `build.rs`:
//!   `out.launchers().write_to_out_dir("my_kernels.rs")`);
//! * [`project`] — kernel crates as projects: `ferrocuda new` (a scaffold that builds as it
//!   is), `ferrocuda build` (toolchain installed when missing, the build cache, the crates'
//!   sources); [`cli`] — the `ferrocuda` command, this crate's binary and the Python package's;
//!   [`project::inline`] — kernels held in a string (Python's `ferrocuda.inline`), in a
//!   generated crate and an on-disk cache shared by processes;
//! * [`Control`] ([`control`]) — a build's progress per stage, with times, and its
//!   cancellation (the child cargo killed with every process it started).
//!
//! # How kernels are compiled
//!
//! Rust-CUDA's `cuda_builder` needs LLVM 7; rustc's built-in `nvptx64-nvidia-cuda` target
//! needs the toolchain's `rust-src` and `llvm-tools` components and nothing else. The pipeline:
//!
//! 1. **rustc** (through a child `cargo rustc`) compiles the kernel crate and `core`
//!    (`-Zbuild-std=core`: there is no prebuilt `core` for the target) as a `staticlib` with
//!    fat LTO, and emits the LTO'd, optimised module as LLVM bitcode (`--emit=llvm-bc`): LTO
//!    pulls `core` in, no linker runs, one self-contained module comes out. Flags: no debuginfo
//!    (ptxas rejects it), `opt-level=3` (lower levels leave `memcmp` calls),
//!    `-Cpanic=immediate-abort` (panics become `trap`, no panic strings),
//!    `-Ctarget-cpu=<arch>` for every crate. The unstable flags are enabled with
//!    `RUSTC_BOOTSTRAP=1` **on the child build only**.
//! 2. **`llvm-dis`** turns the bitcode into text, which the builder reads for what the module
//!    needs: statics in [`SHARED_SECTION`](ferrocuda_abi::SHARED_SECTION), a declaration of
//!    [`DYNAMIC_SHARED_SYMBOL`](ferrocuda_abi::DYNAMIC_SHARED_SYMBOL), calls to libdevice's
//!    `__nv_*` functions, calls to the state-space markers of `ferrocuda_abi::space`.
//! 3. **Shared memory** (only when used): Rust has no address spaces, so rustc puts every
//!    static in `.global` memory. The builder rewrites the text so that those statics live in
//!    address space 3 (PTX `.shared`, one copy per block) and dynamic shared memory becomes
//!    `.extern .shared .align 16 .b8 __ferrocuda_dynamic_shared[];`. The contract is on
//!    [`SHARED_SECTION`](ferrocuda_abi::SHARED_SECTION): uninitialised (`MaybeUninit`),
//!    mutable statics; misuse — an initial value, an immutable static, a lookalike section
//!    such as `.shared` or `.nv.shared` — is a build error naming the static.
//!
//!    **Global memory** (every kernel with an array parameter): array parameters arrive in
//!    by-value structs, so LLVM sees their data pointers as integers made generic pointers,
//!    and every access would be a generic `ld`/`st` (SASS `LD.E`/`ST.E`, which tests the
//!    address's window at run time). `#[kernel]`'s entry passes each array parameter's data
//!    pointer — the first field of every array kind, `AtomicSlice` and future kinds included
//!    — through the marker `__ferrocuda_global(ptr) -> ptr` (declared `ffi_const`, so it is
//!    no barrier to rustc's optimiser). The builder replaces each call by
//!    `addrspacecast … to ptr addrspace(1)` and a cast back: the same address, known to be
//!    global (the host checks every array argument with the driver; a zero-size array's null
//!    pointer is never dereferenced). The read-only accessors (`Slice::get_nc`, …) use a
//!    second marker, `__ferrocuda_global_nc`, whose loads — through the result, an offset of
//!    it, or `phi`/`select`s of such addresses — also get `!invariant.load`: `ld.global.nc`.
//!    Any other use of a marker is a build error. Why markers and not `llvm.assume` of
//!    `isspacep.global`: optimisation drops those assumptions before the backend sees them.
//!    Why a text rewrite and not `llc` alone: only the IR can carry the read-only loads'
//!    metadata, and the shared-memory path needs `opt` anyway.
//! 4. **`llvm-link`** (only when a kernel calls a libdevice function) links NVIDIA's
//!    `libdevice.10.bc` in with `--only-needed --internalize`: only the functions called come
//!    in, and as internal functions, so they can be inlined.
//! 5. **`opt`** (only after step 3 or 4: rustc has optimised the module already) first runs
//!    `infer-address-spaces`, which carries the casts of step 3 to every access
//!    (`ld.global`/`st.global`, `ld.shared`/`st.shared`) — it must run before InstCombine,
//!    which folds a cast pair back to the generic pointer — then, for shared memory and
//!    libdevice, the `-O3` pipeline: it resolves libdevice's `__nvvm_reflect` queries — IEEE:
//!    no flush to zero, correctly rounded `sqrt` — and inlines libdevice.
//! 6. **`llc`** generates the PTX with rustc's own code-generation settings (`-O3`,
//!    `-mcpu=<arch>` and so the PTX ISA version LLVM picks for it — raised to 7.1 for sm_80 and
//!    8.0 for sm_90, which `ferrocuda-device`'s mbarrier instructions need — traps for
//!    `unreachable`), and the [`FpContract`] setting.
//! 7. The PTX is post-processed: the manifest records that `#[kernel]` embeds (see
//!    `ferrocuda_abi::manifest`) are decoded, removed from the PTX, cross-checked against the
//!    `.entry` parameter lists, and written as JSON next to the PTX; the launch records (see
//!    `ferrocuda_abi::launch`) are removed too, their bounds written into the entries
//!    (`.maxntid` / `.reqntid`) and recorded in the manifest.
//! 8. **Checks** ([`check`]): unresolved `.extern` functions (a C math function such as
//!    `cbrtf` is pointed to `ferrocuda_device::math`), kernels that reach panic machinery
//!    through their calls, block barriers under thread-dependent branches, shared memory over
//!    the device's limits, and waits nothing in their kernel can complete (an mbarrier wait
//!    with no arrive, a `cp.async` group wait with no commit) fail the build — each finding
//!    with the kernel crate's file and line it comes from: a failing build compiles the crate
//!    once more with line tables (`.loc` directives, inlined call sites included), into
//!    `<target>/ferrocuda-lines` and never shipped, to find them;
//!    then **ptxas**, when one is found
//!    (`$FERROCUDA_PTXAS`, `$CUDA_HOME`, `$CUDA_PATH`, `PATH`, `/usr/local/cuda`, a Python's
//!    nvcc wheel, [`PtxBuilder::cuda_fallback`], the builder's own copy of the wheel — which
//!    it downloads when cubins are wanted and no ptxas is found, see [`cuda`]), assembles the PTX for the crate's arch: its
//!    per-kernel report (registers, stack frame, spills, shared memory) is
//!    [`BuildOutput::resources`], and stack frames, spills and local memory are warnings
//!    (`cargo:warning=` from [`PtxBuilder::build_script`]).
//! 9. **Cubins**: the same ptxas assembles the PTX for each of [`PtxBuilder::cubin_archs`]
//!    (`sm_80` and `sm_90` by default, `$FERROCUDA_CUBIN_ARCHS` to choose others at build
//!    time; one run per arch, in parallel, the crate arch's run
//!    making its report too), written next to the PTX as `<lib>.<arch>.cubin` and named in the
//!    manifest's `cubins`. The host loads the cubin of the device's major version when there
//!    is one (no JIT compilation at first launch), else the PTX. Without ptxas the build makes
//!    PTX only and says so in one line ([`BuildOutput::note`]).
//!
//! LLVM's location-less "Cannot select" crash on a floating-point operation NVPTX cannot
//! lower (`sin`, `exp`, `log`, `pow`, … through `core::intrinsics`) becomes an error naming
//! the operation and pointing to `ferrocuda_device::math`.
//!
//! The LLVM tools come from the sysroot of the toolchain the child build uses (the `rustc` the
//! kernel crate's directory selects), so they always match the LLVM inside that rustc.
//!
//! The child `cargo` runs with a scrubbed environment: the variables cargo sets for build
//! scripts (`CARGO_ENCODED_RUSTFLAGS`, `RUSTUP_TOOLCHAIN`, `CARGO_TARGET_DIR`, jobserver
//! `MAKEFLAGS`, …) would silently change the target CPU or break the build. It uses its own
//! target directory (sharing the outer one deadlocks on cargo's lock), and every file is
//! written to a path fixed per crate, profile and arch, then the results are copied, only when
//! changed, to the output directory.
//!
//! # libdevice
//!
//! Kernels call libdevice by declaring its functions
//! (`unsafe extern "C" { fn __nv_expf(x: f32) -> f32; }`; `ferrocuda_device::math` wraps
//! them). libdevice is searched only when a kernel calls one, in this order:
//! [`PtxBuilder::libdevice`], `$FERROCUDA_LIBDEVICE` (either, when given, is final),
//! `$CUDA_HOME` and `$CUDA_PATH` (`nvvm/libdevice/libdevice.10.bc`), `/usr/local/cuda`, the
//! `nvidia-cuda-nvcc-cu12` wheel of a Python environment (`nvidia/cuda_nvcc/…`: asked of the
//! interpreter maturin builds for, `$PYO3_PYTHON`, the active virtual environment's, then
//! `python3` — one `-c` query each, outside pip's isolated build environment, which hides the
//! user's packages), [`PtxBuilder::cuda_fallback`], then the builder's own copy of that wheel
//! ([`cuda::nvcc_cache_root`]). When none has it, the builder installs the wheel there
//! (`pip install --target`, once; [`PtxBuilder::download_cuda`], `FERROCUDA_OFFLINE=1` to
//! refuse) and says so in [`BuildOutput::note`] (a `cargo:warning` from a build script); when
//! it cannot, the error names every place looked at and the one command that installs it.

#![warn(missing_docs)]

pub mod check;
mod child;
pub mod cli;
pub mod control;
pub mod cuda;
pub mod doctor;
mod error;
mod files;
mod ir;
pub mod launchers;
mod llvm;
mod locate;
mod parts;
pub mod project;
mod ptx;
mod shared;
mod space;
mod toolchain;
mod verify;

pub use ferrocuda_abi::manifest::FpContract;
pub use launchers::Launchers;
pub use ptx::{process_ptx, ptx_entries, Processed, PtxEntry};

pub use control::Control;
use error::fail;
pub use error::{BuildError, BuildErrorKind};
use ferrocuda_abi::manifest::Manifest;
pub(crate) use files::write_atomically;
pub use parts::PartOutput;
use std::path::{Path, PathBuf};

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
    libdevice: Option<PathBuf>,
    cuda_fallback: Option<PathBuf>,
    fp_contract: FpContract,
    ptxas_report: bool,
    cubin_archs: Option<Vec<String>>,
    control: Control,
    download: bool,
}

/// The architectures cubins are made for by default (those not older than the crate's arch,
/// and the crate's arch itself).
pub const DEFAULT_CUBIN_ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// The number of `sm_XY` (`80`), `None` for anything else.
fn arch_number(arch: &str) -> Option<u32> {
    arch.strip_prefix("sm_")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse().ok())
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

/// Environment variables a build reads (for `cargo:rerun-if-env-changed`).
const ENV_INPUTS: [&str; 8] = [
    ferrocuda_config::CARGO.name,
    ferrocuda_config::HOME.name,
    ferrocuda_config::OFFLINE.name,
    ferrocuda_config::CUBIN_ARCHS.name,
    ferrocuda_config::LIBDEVICE.name,
    ferrocuda_config::PTXAS.name,
    "CUDA_HOME",
    "CUDA_PATH",
];

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
    /// ([`cuda::nvcc_cache_root`]) when libdevice is needed, or ptxas wanted for cubins, and
    /// nothing on the machine provides it (default `true`; also off with `FERROCUDA_OFFLINE=1`
    /// or `CARGO_NET_OFFLINE=true`). What it did is in [`BuildOutput::note`].
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
    fn cubin_list(&self) -> Result<Vec<String>, BuildError> {
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
        for var in ENV_INPUTS {
            println!("cargo:rerun-if-env-changed={var}");
        }
        match self.build() {
            Ok(out) => {
                for s in out.sources.iter().chain(&self.extra_watch) {
                    println!("cargo:rerun-if-changed={}", s.display());
                }
                if let Some(lib) = &out.libdevice {
                    println!("cargo:rerun-if-changed={}", lib.display());
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

    /// The output and child target directories.
    fn dirs(&self, crate_dir: &Path) -> Result<(PathBuf, PathBuf), BuildError> {
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
    fn crate_info(&self) -> Result<(PathBuf, PathBuf, String), BuildError> {
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
    use super::*;

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
