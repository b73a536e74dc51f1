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
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use ferrocuda_builder::project::inline::{self, InlineRequest};
use ferrocuda_builder::project::{self, BuildRequest, CrateSources};
use ferrocuda_builder::{cli, BuildError as RustBuildError, BuildErrorKind, Control, FpContract};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
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

pyo3::create_exception!(
    ferrocuda,
    CompileError,
    BuildError,
    "An inline kernel's source did not compile: the compiler's messages, whose locations\n\
     name the source string as ``<inline>`` with its lines (line 1 = the string's first line).\n\n\
     The attribute ``locations`` lists them as ``(line, column)`` pairs."
);

/// Where ferrocuda keeps what it writes for builds (the crate sources, the inline kernels, the
/// nvcc wheel).
pub(crate) fn home() -> PathBuf {
    ferrocuda_builder::cuda::home()
}

/// The crate sources of this extension (their fingerprint computed by `build.rs`).
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
            CrateSources::embedded_with(embedded::FILES, embedded::FINGERPRINT, &home, checkout),
        )
    });
    if *h == home {
        Ok(s.clone())
    } else {
        let checkout = s.checkout_root();
        Ok(CrateSources::embedded_with(
            embedded::FILES,
            embedded::FINGERPRINT,
            home,
            checkout,
        ))
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

/// Where a build's progress lines go (the ``progress`` argument).
pub enum Progress {
    /// To ``sys.stderr``, as ``ferrocuda: [  1.2 s] …`` (``None`` or ``True``).
    Stderr,
    /// Nowhere (``False``).
    Quiet,
    /// To a callable, one line (a ``str``) per call.
    Call(Py<PyAny>),
}

impl Progress {
    /// The ``progress`` argument: ``None``/``True``, ``False``, or a callable.
    pub fn from_arg(arg: Option<&Bound<'_, PyAny>>) -> PyResult<Progress> {
        let Some(a) = arg.filter(|a| !a.is_none()) else {
            return Ok(Progress::Stderr);
        };
        if let Ok(b) = a.cast::<pyo3::types::PyBool>() {
            return Ok(if b.is_true() {
                Progress::Stderr
            } else {
                Progress::Quiet
            });
        }
        if a.is_callable() {
            return Ok(Progress::Call(a.clone().unbind()));
        }
        Err(PyTypeError::new_err(format!(
            "progress must be True, False, None or a callable taking one str, not {}",
            a.get_type().name()?
        )))
    }

    fn emit(&self, py: Python<'_>, line: &str) -> PyResult<()> {
        match self {
            Progress::Quiet => Ok(()),
            Progress::Stderr => {
                let stderr = py.import("sys")?.getattr("stderr")?;
                if !stderr.is_none() {
                    stderr.call_method1("write", (format!("ferrocuda: {line}\n"),))?;
                    stderr.call_method0("flush")?;
                }
                Ok(())
            }
            Progress::Call(f) => f.call1(py, (line,)).map(drop),
        }
    }
}

/// Runs `work` on a thread of its own with the GIL released, handing it a [`Control`] whose
/// progress lines come back to this thread (written out, or passed to the callback, with the
/// GIL held). Every 50 ms this thread checks for signals: on Ctrl-C (or an exception of the
/// progress callback) it cancels the build — the running child is killed with its process
/// group — waits for the thread (promptly) and raises that exception.
pub fn run_build<T: Send>(
    py: Python<'_>,
    progress: &Progress,
    work: impl FnOnce(Control) -> T + Send,
) -> PyResult<T> {
    let (tx, rx) = mpsc::channel::<String>();
    let control = Control::new(move |line| {
        let _ = tx.send(line.to_owned());
    });
    let rx = Mutex::new(rx);
    std::thread::scope(|s| {
        let worker_control = control.clone();
        let handle = s.spawn(move || work(worker_control));
        let mut failure: Option<PyErr> = None;
        loop {
            let finished = handle.is_finished();
            let next = py.detach(|| {
                let rx = rx.lock().unwrap_or_else(|p| p.into_inner());
                if finished {
                    rx.try_recv().map_err(|_| RecvTimeoutError::Disconnected)
                } else {
                    rx.recv_timeout(Duration::from_millis(50))
                }
            });
            match next {
                Ok(line) => {
                    if failure.is_none() {
                        if let Err(e) = progress.emit(py, &line) {
                            control.cancel();
                            failure = Some(e);
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if failure.is_none() {
                if let Err(e) = py.check_signals() {
                    control.cancel();
                    failure = Some(e);
                }
            }
        }
        let out = py.detach(|| handle.join());
        match (failure, out) {
            (Some(e), _) => Err(e),
            (None, Ok(v)) => Ok(v),
            (None, Err(_)) => Err(PyRuntimeError::new_err(
                "ferrocuda: the build thread panicked (a bug: please report it)",
            )),
        }
    })
}

/// Builds the crate at `path` (or finds it current in the cache) and returns its manifest's
/// path; progress lines go where `progress` says, and Ctrl-C stops the build.
pub fn build_path(py: Python<'_>, req: &BuildRequest, progress: &Progress) -> PyResult<PathBuf> {
    let sources = sources().map_err(to_py)?;
    let result = run_build(py, progress, |control| {
        let mut req = req.clone();
        req.control = control.clone();
        let mut report = |m: &str| control.report(m);
        project::build_crate(&req, &sources, &mut report)
    })?;
    Ok(result.map_err(to_py)?.manifest_path)
}

/// The ``fp_contract`` argument.
fn fp_contract_arg(fp_contract: &str) -> PyResult<FpContract> {
    match fp_contract {
        "off" => Ok(FpContract::Off),
        "fast" => Ok(FpContract::Fast),
        other => Err(PyValueError::new_err(format!(
            "fp_contract must be 'off' or 'fast', not {other:?}"
        ))),
    }
}

/// The directory of the inline kernel cache: ``$FERROCUDA_INLINE_CACHE``, else
/// ``$FERROCUDA_HOME/inline``.
#[pyfunction]
pub fn _inline_cache_dir() -> String {
    inline_dir().to_string_lossy().into_owned()
}

/// ``$FERROCUDA_INLINE_CACHE``, else ``$FERROCUDA_HOME/inline``.
fn inline_dir() -> PathBuf {
    ferrocuda_config::INLINE_CACHE
        .path()
        .unwrap_or_else(|| home().join("inline"))
}

/// The manifest of the inline kernel `source` with these options: from the cache (no
/// process started), else built (see :func:`ferrocuda.inline`).
pub fn inline_manifest(
    py: Python<'_>,
    source: &str,
    arch: &str,
    fp_contract: &str,
    force: bool,
    progress: &Progress,
) -> PyResult<PathBuf> {
    if source.trim().is_empty() {
        return Err(PyValueError::new_err(
            "source is empty: an inline kernel is Rust source with at least one #[kernel] \
             function",
        ));
    }
    let mut req = InlineRequest::new(source, inline_dir());
    req.arch = arch.to_owned();
    req.fp_contract = fp_contract_arg(fp_contract)?;
    req.force = force;
    let sources = sources().map_err(to_py)?;
    if !force {
        if let Some(m) = inline::lookup(&req.dir, &inline::key(&req, &sources)) {
            return Ok(m);
        }
    }
    let built = run_build(py, progress, |control| {
        req.control = control;
        inline::build(&req, &sources)
    })?;
    let built = built.map_err(|e| inline_error(py, e))?;
    for w in &built.warnings {
        progress.emit(py, &format!("warning: {w}"))?;
    }
    if !built.cached {
        progress.emit(
            py,
            &format!(
                "built inline kernel {} for {arch} in {:.1} s",
                built.key, built.seconds
            ),
        )?;
    }
    Ok(built.manifest_path)
}

/// A builder error of an inline kernel: a compile error → ``ferrocuda.CompileError`` with
/// ``locations``; else as [`to_py`].
fn inline_error(py: Python<'_>, e: RustBuildError) -> PyErr {
    if e.kind() != BuildErrorKind::Compile {
        return to_py(e);
    }
    let locations = inline::locations(e.message());
    let err = CompileError::new_err(e.to_string());
    let _ = err.value(py).setattr(intern!(py, "locations"), locations);
    err
}

/// Builds the kernel crate at ``path`` (its directory or ``Cargo.toml``) to PTX and a
/// manifest in ``path/target/ferrocuda/<arch>/``, and returns the manifest's path.
///
/// An unchanged crate is served from the build cache without running cargo (the cache's key:
/// the crate's source files, the toolchain, the target, this ferrocuda). A missing pinned
/// toolchain is installed with rustup first. Compiler errors raise ``ferrocuda.BuildError``
/// with the compiler's messages, which name the crate's files, lines and columns.
///
/// ``progress``: where the build's stages go, each with its time (``None``/``True``:
/// ``sys.stderr``; ``False``: nowhere; a callable: each line as a ``str``). Ctrl-C stops the
/// build promptly: the child cargo is killed with every process it started, no stamp is
/// written, and ``KeyboardInterrupt`` is raised.
#[pyfunction]
#[pyo3(signature = (path, *, arch = "sm_80", force = false, target_dir = None, fp_contract = "off", progress = None))]
pub fn build(
    py: Python<'_>,
    path: PathBuf,
    arch: &str,
    force: bool,
    target_dir: Option<PathBuf>,
    fp_contract: &str,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    let progress = Progress::from_arg(progress)?;
    let mut req = BuildRequest::new(path);
    req.arch = arch.to_owned();
    req.force = force;
    req.target_dir = target_dir;
    req.fp_contract = fp_contract_arg(fp_contract)?;
    Ok(build_path(py, &req, &progress)?
        .to_string_lossy()
        .into_owned())
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
/// status. Progress goes to standard error; Ctrl-C stops a build (its child cargo killed) and
/// raises ``KeyboardInterrupt``.
#[pyfunction]
pub fn _cli(py: Python<'_>, argv: Vec<String>) -> PyResult<i32> {
    let driver = || -> Result<String, String> {
        match ferrocuda_host::runtime::device_count() {
            Ok(0) => Err("a CUDA driver loads, but reports no device".into()),
            Ok(n) => Ok(format!(
                "CUDA driver loaded, {n} device{}",
                if n == 1 { "" } else { "s" }
            )),
            Err(e) => Err(e.to_string()),
        }
    };
    run_build(py, &Progress::Stderr, |control| {
        cli::run_with(&argv, &sources, None, Some(&driver), &control)
    })
}
