//! Kernel crates from Python: `build_crate` and `new_crate` (`ferrocuda.build`, `ferrocuda
//! new`), the `ferrocuda` command (`_cli`, behind the console script and `python -m
//! ferrocuda`), and the crate path that `load` accepts — all through
//! `ferrocuda_builder::project`, which compiles with the user's cargo and rustup.
//!
//! The crates a kernel crate depends on (`ferrocuda-abi`, `-device`, `-macros`) are compiled
//! into this extension (`build.rs`) and written to `$FERROCUDA_HOME/crates/<version>-<hash>/`
//! (default `$XDG_CACHE_HOME/ferrocuda`, else `~/.cache/ferrocuda`) when a build first needs
//! them, so an installed wheel builds kernel crates anywhere, with the sources of its own
//! version.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ferrocuda_builder::project::{self, BuildRequest, CrateSources};
use ferrocuda_builder::{cli, BuildError as RustBuildError, BuildErrorKind};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/crate_sources.rs"));
}

pyo3::create_exception!(
    ferrocuda,
    BuildError,
    PyRuntimeError,
    "A kernel crate could not be built: the compiler's messages (with the crate's files,\n\
     lines and columns), a missing toolchain and what to install, or a crate that is not one."
);

/// Where ferrocuda keeps what it writes for builds (the crate sources, the nvcc wheel).
fn home() -> PathBuf {
    ferrocuda_builder::cuda::home()
}

/// The crate sources of this extension (hashed once per process and `FERROCUDA_HOME`).
fn sources() -> Result<CrateSources, RustBuildError> {
    static SOURCES: OnceLock<(PathBuf, CrateSources)> = OnceLock::new();
    let home = home();
    let (h, s) = SOURCES.get_or_init(|| {
        // The checkout this extension was built from, when it is still there: the host
        // example's crates (ferrocuda-host, ferrocuda-builder) come from it.
        let checkout = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(Path::to_path_buf);
        (
            home.clone(),
            CrateSources::embedded(embedded::FILES, &home, checkout),
        )
    });
    if *h == home {
        Ok(s.clone())
    } else {
        let checkout = s.checkout_root();
        Ok(CrateSources::embedded(embedded::FILES, home, checkout))
    }
}

/// A builder error as a Python exception: a crate that is not one → `ValueError`; anything
/// else → `ferrocuda.BuildError`.
fn to_py(e: RustBuildError) -> PyErr {
    match e.kind() {
        BuildErrorKind::Config => PyValueError::new_err(e.to_string()),
        _ => BuildError::new_err(e.to_string()),
    }
}

/// Whether `path` names a kernel crate (its directory or its `Cargo.toml`) rather than a
/// manifest JSON file.
pub fn is_crate(path: &Path) -> bool {
    path.is_dir() || path.file_name().is_some_and(|n| n == "Cargo.toml")
}

/// Builds the crate at `path` (or finds it current in the cache) and returns its manifest's
/// path; progress lines go to `sys.stderr`.
pub fn build_path(py: Python<'_>, req: &BuildRequest) -> PyResult<PathBuf> {
    let sources = sources().map_err(to_py)?;
    let result = py.detach(|| {
        let mut report = |m: &str| {
            Python::attach(|py| {
                if let Ok(stderr) = py.import("sys").and_then(|s| s.getattr("stderr")) {
                    let _ = stderr.call_method1("write", (format!("ferrocuda: {m}\n"),));
                    let _ = stderr.call_method0("flush");
                }
            })
        };
        project::build_crate(req, &sources, &mut report)
    });
    Ok(result.map_err(to_py)?.manifest_path)
}

/// Builds the kernel crate at ``path`` (its directory or ``Cargo.toml``) to PTX and a
/// manifest in ``path/target/ferrocuda/<arch>/``, and returns the manifest's path.
///
/// An unchanged crate is served from the build cache without running cargo (the cache's key:
/// the crate's source files, the toolchain, the target, this ferrocuda). A missing pinned
/// toolchain is installed with rustup first. Compiler errors raise ``ferrocuda.BuildError``
/// with the compiler's messages, which name the crate's files, lines and columns.
#[pyfunction]
#[pyo3(signature = (path, *, arch = "sm_80", force = false, target_dir = None, fp_contract = "off"))]
pub fn build(
    py: Python<'_>,
    path: PathBuf,
    arch: &str,
    force: bool,
    target_dir: Option<PathBuf>,
    fp_contract: &str,
) -> PyResult<String> {
    let mut req = BuildRequest::new(path);
    req.arch = arch.to_owned();
    req.force = force;
    req.target_dir = target_dir;
    req.fp_contract = match fp_contract {
        "off" => ferrocuda_builder::FpContract::Off,
        "fast" => ferrocuda_builder::FpContract::Fast,
        other => {
            return Err(PyValueError::new_err(format!(
                "fp_contract must be 'off' or 'fast', not {other:?}"
            )))
        }
    };
    Ok(build_path(py, &req)?.to_string_lossy().into_owned())
}

/// Makes a new kernel crate at ``path`` (its last component is the crate's name): one example
/// kernel, a README, a test and a Rust host example, ready for :func:`build` and :func:`load`.
/// Returns the crate's name.
#[pyfunction]
pub fn new_crate(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let sources = sources().map_err(to_py)?;
    py.detach(|| project::new_crate(&path, &sources))
        .map_err(to_py)
}

/// Runs the ``ferrocuda`` command with ``argv`` (without the program name); returns its exit
/// status.
#[pyfunction]
pub fn _cli(py: Python<'_>, argv: Vec<String>) -> i32 {
    let driver = || -> Result<String, String> {
        match ferrocuda_host::driver::device_count() {
            Ok(0) => Err("a CUDA driver loads, but reports no device".into()),
            Ok(n) => Ok(format!(
                "CUDA driver loaded, {n} device{}",
                if n == 1 { "" } else { "s" }
            )),
            Err(e) => Err(e.to_string()),
        }
    };
    py.detach(|| cli::run(&argv, &sources, None, Some(&driver)))
}
