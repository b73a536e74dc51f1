//! Finding NVIDIA's files the pipeline can use: `libdevice.10.bc` (math functions, linked when
//! a kernel calls one), `ptxas` (the per-kernel resource report) and `nvdisasm` (the SASS
//! checks of [`crate::check::sass`]).
//!
//! Both live under a *CUDA root*: a CUDA toolkit (`bin/ptxas`, `nvvm/libdevice/…`) or the PyPI
//! wheel `nvidia-cuda-nvcc-cu12`'s `nvidia/cuda_nvcc` directory, which has the same layout.
//!
//! When the machine has neither libdevice (and a kernel needs it) nor ptxas (and cubins are
//! wanted), the builder installs that wheel itself, once, into its cache
//! ([`nvcc_cache_root`]): `python -m pip install --no-deps --target …` with the first Python
//! that has pip — pip's own configuration (index, proxy, certificates) applies. Not when
//! `FERROCUDA_OFFLINE=1` or cargo is offline; then the error says the one command that
//! installs it.

use ferrocuda_config::Var;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The PyPI wheel with libdevice and ptxas (Linux x86-64 and aarch64, Windows) that the builder
/// installs when nothing on the machine provides them.
pub const NVCC_WHEEL: &str = "nvidia-cuda-nvcc-cu12";
/// Its pinned version (`scripts/ensure_ptxas.sh` installs the same one): ptxas 12.9 accepts
/// PTX ISA <= 8.8 and sm_50 .. sm_121.
pub const NVCC_WHEEL_VERSION: &str = "12.9.86";

/// Where ferrocuda keeps what it downloads and writes for builds: `$FERROCUDA_HOME`, else
/// `$XDG_CACHE_HOME/ferrocuda`, else `~/.cache/ferrocuda` (the temporary directory without a
/// home).
pub fn home() -> PathBuf {
    if let Some(h) = ferrocuda_config::HOME.path() {
        return h;
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| Path::new(&h).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    cache.join("ferrocuda")
}

/// The directory the wheel is installed into (`pip install --target`).
fn nvcc_cache_dir() -> PathBuf {
    home()
        .join("cuda")
        .join(format!("{NVCC_WHEEL}-{NVCC_WHEEL_VERSION}"))
}

/// The CUDA root inside the builder's copy of the nvcc wheel:
/// `<home>/cuda/nvidia-cuda-nvcc-cu12-<version>/nvidia/cuda_nvcc` (see [`home`]).
pub fn nvcc_cache_root() -> PathBuf {
    nvcc_cache_dir().join("nvidia").join("cuda_nvcc")
}

/// The one command that installs the wheel where the builder looks (for error messages).
pub fn install_command() -> String {
    format!(
        "python3 -m pip install --no-deps --target {} {NVCC_WHEEL}=={NVCC_WHEEL_VERSION}",
        shell_word(&nvcc_cache_dir().display().to_string())
    )
}

fn shell_word(s: &str) -> String {
    if s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Why the builder may not download now (`None`: it may): `FERROCUDA_OFFLINE=1`, a value of
/// it that is not understood (the reason is that error, which names the values it takes), or
/// `CARGO_NET_OFFLINE=true`.
pub fn offline() -> Option<String> {
    match ferrocuda_config::OFFLINE.switch() {
        Ok(true) => return Some(format!("{}=1", ferrocuda_config::OFFLINE.name)),
        Ok(false) => {}
        Err(e) => return Some(e.to_string()),
    }
    std::env::var("CARGO_NET_OFFLINE")
        .ok()
        .filter(|v| v == "true")
        .map(|_| "CARGO_NET_OFFLINE=true".to_string())
}

/// What [`download`] did: a line saying so, or why it could not.
#[derive(Clone, Debug)]
pub struct Download {
    /// When it finished.
    pub at: Instant,
    /// `Ok(what was done)` or `Err(why not, with the command that fixes it)`.
    pub result: Result<String, String>,
}

static DOWNLOAD: Mutex<Option<Download>> = Mutex::new(None);

/// The last download attempt of this process, if any.
pub fn last_download() -> Option<Download> {
    DOWNLOAD.lock().ok().and_then(|d| d.clone())
}

/// Installs the nvcc wheel into [`nvcc_cache_root`] unless it is there already; at most one
/// attempt per process (a failed attempt is not retried until the process restarts).
/// Safe when several processes do it at once: they take turns on a lock file beside the copy
/// (`.<wheel>-<version>.lock`), and one that waited finds the copy the other installed; each
/// installs into a directory of its own and renames it into place, so a reader sees a
/// complete copy or none.
pub fn download() -> Result<String, String> {
    let mut slot = DOWNLOAD.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = slot.as_ref() {
        return d.result.clone();
    }
    let result = install_wheel();
    *slot = Some(Download {
        at: Instant::now(),
        result: result.clone(),
    });
    result
}

fn install_wheel() -> Result<String, String> {
    let dest = nvcc_cache_dir();
    let root = nvcc_cache_root();
    if root.join(LIBDEVICE_IN_ROOT).is_file() && root.join(PTXAS_IN_ROOT).is_file() {
        return Ok(format!(
            "{NVCC_WHEEL} {NVCC_WHEEL_VERSION} is already in {}",
            dest.display()
        ));
    }
    if let Some(why) = offline() {
        return Err(format!(
            "not downloaded ({why}); install it with:\n\n    {}\n",
            install_command()
        ));
    }
    let parent = dest.parent().expect("the cache directory has a parent");
    std::fs::create_dir_all(parent).map_err(|e| {
        format!(
            "cannot create {} ({e}); set FERROCUDA_HOME to a writable directory",
            parent.display()
        )
    })?;
    // One installer at a time (the loser of two would otherwise remove the winner's copy as
    // partial, or download it twice); not cancellable, as the download itself is not.
    let lock_path = parent.join(format!(".{NVCC_WHEEL}-{NVCC_WHEEL_VERSION}.lock"));
    let _lock = crate::lock::exclusive(&lock_path, &crate::Control::none(), "")
        .map_err(|e| format!("{e}; set FERROCUDA_HOME to a writable directory"))?;
    if root.join(LIBDEVICE_IN_ROOT).is_file() && root.join(PTXAS_IN_ROOT).is_file() {
        return Ok(format!(
            "{NVCC_WHEEL} {NVCC_WHEEL_VERSION} is already in {} (another process installed it)",
            dest.display()
        ));
    }
    let Some(python) = pythons().into_iter().find(|p| {
        python_command(p)
            .args(["-m", "pip", "--version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }) else {
        return Err(format!(
            "no Python with pip was found to download {NVCC_WHEEL} (tried {}); install it \
             with:\n\n    {}\n",
            pythons()
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(", "),
            install_command()
        ));
    };
    let tmp = parent.join(format!(
        ".{NVCC_WHEEL}-{NVCC_WHEEL_VERSION}.{}.tmp",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    let out = python_command(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "--no-deps",
            "--target",
        ])
        .arg(&tmp)
        .arg(format!("{NVCC_WHEEL}=={NVCC_WHEEL_VERSION}"))
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .stdin(Stdio::null())
        .output();
    let failed = |why: String| {
        let _ = std::fs::remove_dir_all(&tmp);
        Err(format!(
            "downloading {NVCC_WHEEL} {NVCC_WHEEL_VERSION} with `{} -m pip` failed: {why}\n\
             Install it with:\n\n    {}\n",
            python.to_string_lossy(),
            install_command()
        ))
    };
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let tail: Vec<&str> = err.trim().lines().rev().take(6).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return failed(format!("{}\n{}", o.status, tail.join("\n")));
        }
        Err(e) => return failed(e.to_string()),
    }
    let got = tmp.join("nvidia").join("cuda_nvcc");
    if !got.join(LIBDEVICE_IN_ROOT).is_file() {
        return failed(format!("the wheel has no {LIBDEVICE_IN_ROOT}"));
    }
    #[cfg(unix)]
    for tool in [PTXAS_IN_ROOT, "bin/nvlink", "bin/fatbinary"] {
        use std::os::unix::fs::PermissionsExt;
        let p = got.join(tool);
        if p.is_file() {
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755));
        }
    }
    // A partial earlier copy (no libdevice) is replaced; a complete one another process
    // renamed into place first is kept.
    if dest.exists() && !root.join(LIBDEVICE_IN_ROOT).is_file() {
        let _ = std::fs::remove_dir_all(&dest);
    }
    if std::fs::rename(&tmp, &dest).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
        if !root.join(LIBDEVICE_IN_ROOT).is_file() {
            return failed(format!("cannot move it into {}", dest.display()));
        }
    }
    Ok(format!(
        "downloaded {NVCC_WHEEL} {NVCC_WHEEL_VERSION} (libdevice, ptxas) with `{} -m pip` into {} \
         (once; FERROCUDA_OFFLINE=1 turns this off)",
        python.to_string_lossy(),
        dest.display()
    ))
}

/// The Python interpreters to ask, in order: the one maturin builds for (`$PYO3_PYTHON`,
/// `$PYTHON_SYS_EXECUTABLE`), the active virtual environment's, then `python3` and `python` on
/// `PATH`; each once.
fn pythons() -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let mut add = |p: OsString| {
        if !p.is_empty() && !out.contains(&p) {
            out.push(p);
        }
    };
    for var in ["PYO3_PYTHON", "PYTHON_SYS_EXECUTABLE"] {
        if let Some(p) = std::env::var_os(var) {
            add(p);
        }
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        let bin = if cfg!(windows) {
            "Scripts/python.exe"
        } else {
            "bin/python"
        };
        let p = Path::new(&venv).join(bin);
        if p.is_file() {
            add(p.into_os_string());
        }
    }
    add("python3".into());
    add("python".into());
    out
}

/// A command running `python` with the user's environment: inside pip's isolated build
/// environment (`PYTHONPATH` pointing into a `pip-build-env-*` directory, which hides the
/// user's site-packages), without pip's `PYTHONPATH` and `PYTHONNOUSERSITE`.
fn python_command(python: &std::ffi::OsStr) -> Command {
    python_command_in(python, std::env::var_os("PYTHONPATH"))
}

fn python_command_in(python: &std::ffi::OsStr, pythonpath: Option<OsString>) -> Command {
    let mut cmd = Command::new(python);
    if pythonpath.is_some_and(|p| p.to_string_lossy().contains("pip-build-env")) {
        cmd.env_remove("PYTHONPATH").env_remove("PYTHONNOUSERSITE");
    }
    cmd
}

/// Where libdevice lies under a CUDA root.
pub(crate) const LIBDEVICE_IN_ROOT: &str = "nvvm/libdevice/libdevice.10.bc";
/// Where ptxas lies under a CUDA root.
pub(crate) const PTXAS_IN_ROOT: &str = "bin/ptxas";
/// Where nvdisasm lies under a CUDA root (a toolkit, or the `nvidia-cuda-nvdisasm` wheel's
/// `nvidia/cu13` directory).
pub(crate) const NVDISASM_IN_ROOT: &str = "bin/nvdisasm";

/// A place that was looked at, for "not found" messages.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    /// Where the candidate came from (`FERROCUDA_LIBDEVICE`, `$CUDA_HOME`, …).
    pub origin: String,
    /// The path looked at.
    pub path: PathBuf,
    /// An explicit choice (an argument or a `FERROCUDA_*` variable): when it is missing the
    /// search stops there, rather than silently taking another file.
    pub decisive: bool,
}

/// The result of a search: the first existing candidate, and everything looked at.
#[derive(Clone, Debug)]
pub(crate) struct Search {
    /// The file found.
    pub found: Option<PathBuf>,
    /// Every place looked at, in order.
    pub tried: Vec<Candidate>,
    /// Why the builder's download of the nvcc wheel, tried when nothing was found, did not
    /// help (with the command that fixes it).
    pub download_error: Option<String>,
}

impl Search {
    /// The places looked at, one per line, for an error message.
    pub fn tried_list(&self) -> String {
        self.tried
            .iter()
            .map(|c| format!("    {} ({})", c.path.display(), c.origin))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Searches `candidates` in order, computing the lazy ones only when reached.
fn search(candidates: Vec<Box<dyn FnOnce() -> Vec<Candidate> + '_>>) -> Search {
    let mut tried = Vec::new();
    for make in candidates {
        for c in make() {
            let (hit, decisive) = (c.path.is_file(), c.decisive);
            tried.push(c);
            if hit {
                let found = tried.last().map(|c| c.path.clone());
                return Search {
                    found,
                    tried,
                    download_error: None,
                };
            }
            if decisive {
                return Search {
                    found: None,
                    tried,
                    download_error: None,
                };
            }
        }
    }
    Search {
        found: None,
        tried,
        download_error: None,
    }
}

/// `search()`, and when it finds nothing — and no explicit choice (an argument, a
/// `FERROCUDA_*` variable) decided that — and `download` allows, the builder's download of the
/// nvcc wheel ([`download`]) and `search()` again.
pub(crate) fn or_download(search: impl Fn() -> Search, download: bool) -> Search {
    or_fetch(search, download, self::download)
}

fn or_fetch(
    search: impl Fn() -> Search,
    download: bool,
    fetch: impl FnOnce() -> Result<String, String>,
) -> Search {
    let first = search();
    if first.found.is_some() || !download || first.tried.iter().any(|c| c.decisive) {
        return first;
    }
    match fetch() {
        Ok(_) => search(),
        Err(e) => Search {
            download_error: Some(e),
            ..first
        },
    }
}

fn candidate(origin: &str, path: PathBuf) -> Candidate {
    Candidate {
        origin: origin.into(),
        path,
        decisive: false,
    }
}

/// An explicit choice: `explicit` if given, else the path in the environment variable `var`.
fn decisive(explicit: Option<(&str, &Path)>, var: &Var) -> Vec<Candidate> {
    let chosen = explicit
        .map(|(origin, p)| (origin.to_string(), p.to_path_buf()))
        .or_else(|| Some((format!("${}", var.name), var.path()?)));
    chosen
        .map(|(origin, path)| {
            vec![Candidate {
                origin,
                path,
                decisive: true,
            }]
        })
        .unwrap_or_default()
}

/// `<root>/<rel>` for each of `$CUDA_HOME` and `$CUDA_PATH` that is set.
fn env_roots(rel: &str) -> Vec<Candidate> {
    ["CUDA_HOME", "CUDA_PATH"]
        .into_iter()
        .filter_map(|var| {
            let root = std::env::var_os(var).filter(|v| !v.is_empty())?;
            Some(candidate(&format!("${var}"), PathBuf::from(root).join(rel)))
        })
        .collect()
}

fn system_root(rel: &str) -> Vec<Candidate> {
    vec![candidate(
        "default CUDA install",
        Path::new("/usr/local/cuda").join(rel),
    )]
}

/// `<dir>/<rel>` for each `nvidia/cuda_nvcc` directory a Python of [`pythons`] can import.
fn wheel_roots(rel: &str) -> Vec<Candidate> {
    wheel_dirs()
        .iter()
        .map(|(py, d)| {
            candidate(
                &format!(
                    "the nvidia-cuda-nvcc-cu12 wheel of {}",
                    py.to_string_lossy()
                ),
                d.join(rel),
            )
        })
        .collect()
}

/// The `nvidia/cuda_nvcc` package directories of the Pythons of [`pythons`], each with the
/// interpreter that has it (asked once per process).
fn wheel_dirs() -> &'static [(OsString, PathBuf)] {
    static DIRS: OnceLock<Vec<(OsString, PathBuf)>> = OnceLock::new();
    DIRS.get_or_init(|| {
        let mut out: Vec<(OsString, PathBuf)> = Vec::new();
        for py in pythons() {
            for d in query_wheel_dirs(python_command(&py)) {
                if !out.iter().any(|(_, o)| *o == d) {
                    out.push((py.clone(), d));
                }
            }
        }
        out
    })
}

/// The builder's own copy of the wheel ([`nvcc_cache_root`]).
fn cache_roots(rel: &str) -> Vec<Candidate> {
    vec![candidate(
        "ferrocuda's copy of the nvidia-cuda-nvcc-cu12 wheel",
        nvcc_cache_root().join(rel),
    )]
}

/// Asks `python` (a `python3` command) where its `nvidia.cuda_nvcc` package is.
fn query_wheel_dirs(mut python: Command) -> Vec<PathBuf> {
    let script = "import importlib.util as u\n\
                  try:\n    s = u.find_spec('nvidia.cuda_nvcc')\n\
                  except ImportError:\n    s = None\n\
                  print('\\n'.join(s.submodule_search_locations or []) if s else '')";
    match python.args(["-c", script]).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| PathBuf::from(l.trim()))
            .collect(),
        _ => Vec::new(),
    }
}

/// Searches libdevice: `explicit` or else `$FERROCUDA_LIBDEVICE` (either one, when given, is
/// the answer: missing means not found), `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`,
/// the Pythons' nvcc wheel, `fallback_root`, then the builder's own copy of the wheel.
pub(crate) fn find_libdevice(explicit: Option<&Path>, fallback_root: Option<&Path>) -> Search {
    let rel = LIBDEVICE_IN_ROOT;
    search(vec![
        Box::new(|| {
            decisive(
                explicit.map(|p| ("PtxBuilder::libdevice", p)),
                &ferrocuda_config::LIBDEVICE,
            )
        }),
        Box::new(|| env_roots(rel)),
        Box::new(|| system_root(rel)),
        Box::new(|| wheel_roots(rel)),
        Box::new(|| fallback(fallback_root, rel)),
        Box::new(|| cache_roots(rel)),
    ])
}

/// Searches ptxas: `$FERROCUDA_PTXAS` (when set, the answer), `$CUDA_HOME`, `$CUDA_PATH`,
/// `PATH`, `/usr/local/cuda`, the Pythons' nvcc wheel, `fallback_root`, then the builder's own
/// copy of the wheel.
pub(crate) fn find_ptxas(fallback_root: Option<&Path>) -> Search {
    find_program(
        &ferrocuda_config::PTXAS,
        "ptxas",
        PTXAS_IN_ROOT,
        true,
        fallback_root,
    )
}

/// Searches nvdisasm: `$FERROCUDA_NVDISASM` (when set, the answer), `$CUDA_HOME`,
/// `$CUDA_PATH`, `PATH`, `/usr/local/cuda`, then `fallback_root` (`<root>/bin/nvdisasm`).
pub(crate) fn find_nvdisasm(fallback_root: Option<&Path>) -> Search {
    find_program(
        &ferrocuda_config::NVDISASM,
        "nvdisasm",
        NVDISASM_IN_ROOT,
        false,
        fallback_root,
    )
}

/// Searches `program` (at `rel` under a CUDA root): `$<var>`, the environment's CUDA roots,
/// `PATH`, `/usr/local/cuda`, the Pythons' nvcc wheel (when `wheel`), `fallback_root`, then the
/// builder's copy of the wheel (when `wheel`).
fn find_program(
    var: &Var,
    program: &str,
    rel: &str,
    wheel: bool,
    fallback_root: Option<&Path>,
) -> Search {
    search(vec![
        Box::new(|| decisive(None, var)),
        Box::new(|| env_roots(rel)),
        Box::new(|| {
            std::env::var_os("PATH")
                .map(|p| {
                    std::env::split_paths(&p)
                        .map(|d| candidate("PATH", d.join(program)))
                        .collect()
                })
                .unwrap_or_default()
        }),
        Box::new(|| system_root(rel)),
        Box::new(|| if wheel { wheel_roots(rel) } else { Vec::new() }),
        Box::new(|| fallback(fallback_root, rel)),
        Box::new(|| if wheel { cache_roots(rel) } else { Vec::new() }),
    ])
}

fn fallback(root: Option<&Path>, rel: &str) -> Vec<Candidate> {
    root.map(|r| vec![candidate("PtxBuilder::cuda_fallback", r.join(rel))])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wheel_version_is_the_scripts_one() {
        // scripts/ensure_ptxas.sh installs the same wheel into .tools/ (absent from a
        // packaged builder: nothing to compare then).
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ensure_ptxas.sh");
        if let Ok(text) = std::fs::read_to_string(script) {
            assert!(
                text.contains(&format!("NVCC_WHEEL_VERSION=\"{NVCC_WHEEL_VERSION}\"")),
                "ensure_ptxas.sh pins another nvcc wheel than cuda::NVCC_WHEEL_VERSION"
            );
            assert!(text.contains(NVCC_WHEEL));
        }
        assert!(nvcc_cache_root().ends_with(format!(
            "cuda/{NVCC_WHEEL}-{NVCC_WHEEL_VERSION}/nvidia/cuda_nvcc"
        )));
        assert!(install_command().contains(&format!("{NVCC_WHEEL}=={NVCC_WHEEL_VERSION}")));
        assert_eq!(shell_word("/a/b c"), "'/a/b c'");
        assert_eq!(shell_word("/a/it's"), "'/a/it'\\''s'");
    }

    #[test]
    fn pip_isolation_is_undone_for_the_user_python() {
        let removed = |cmd: &Command| -> Vec<String> {
            cmd.get_envs()
                .filter(|(_, v)| v.is_none())
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect()
        };
        let py = std::ffi::OsStr::new("python3");
        let isolated = python_command_in(py, Some("/tmp/pip-build-env-x1y2/site".into()));
        let mut gone = removed(&isolated);
        gone.sort();
        assert_eq!(gone, ["PYTHONNOUSERSITE", "PYTHONPATH"]);
        // A user's own PYTHONPATH is kept.
        assert!(removed(&python_command_in(py, Some("/home/u/lib".into()))).is_empty());
        assert!(removed(&python_command_in(py, None)).is_empty());
    }

    #[test]
    fn downloads_only_when_nothing_and_no_explicit_choice_was_found() {
        let dir = std::env::temp_dir().join(format!("fc-fetch-{}", std::process::id()));
        let lib = dir.join(LIBDEVICE_IN_ROOT);
        let tried = |decisive: bool| Candidate {
            origin: "x".into(),
            path: lib.clone(),
            decisive,
        };
        let search = |decisive: bool| {
            let path = lib.clone();
            let c = tried(decisive);
            move || Search {
                found: path.is_file().then(|| path.clone()),
                tried: vec![c.clone()],
                download_error: None,
            }
        };
        // Not found, no explicit choice: fetched, then searched again.
        let s = or_fetch(search(false), true, || {
            std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
            std::fs::write(&lib, b"BC").unwrap();
            Ok("downloaded".into())
        });
        assert_eq!(s.found.as_deref(), Some(lib.as_path()));
        std::fs::remove_file(&lib).unwrap();
        // A failed fetch is reported with the search.
        let s = or_fetch(search(false), true, || Err("offline".into()));
        assert_eq!(
            (s.found, s.download_error.as_deref()),
            (None, Some("offline"))
        );
        // Not allowed, or an explicit (missing) choice: never fetched.
        let never = || -> Result<String, String> { panic!("must not download") };
        assert!(or_fetch(search(false), false, never).found.is_none());
        let s = or_fetch(search(true), true, never);
        assert!(s.found.is_none() && s.download_error.is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn asks_python_for_the_wheel() {
        let dir = std::env::temp_dir().join(format!("fc-wheel-{}", std::process::id()));
        let pkg = dir.join("nvidia").join("cuda_nvcc");
        std::fs::create_dir_all(&pkg).unwrap();
        let mut python = Command::new("python3");
        python.env("PYTHONPATH", &dir);
        assert_eq!(query_wheel_dirs(python), [pkg]);
        // No such package (and no `nvidia` namespace at all): nothing, not an error.
        let mut python = Command::new("python3");
        python.env("PYTHONPATH", dir.join("nvidia").join("cuda_nvcc"));
        python.env("PYTHONNOUSERSITE", "1");
        let found = query_wheel_dirs(python);
        assert!(found.iter().all(|d| !d.starts_with(&dir)), "{found:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn explicit_path_wins_and_every_place_is_listed() {
        let dir = std::env::temp_dir().join(format!("fc-cuda-{}", std::process::id()));
        let lib = dir.join(LIBDEVICE_IN_ROOT);
        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(&lib, b"BC").unwrap();
        let s = find_libdevice(Some(&lib), None);
        assert_eq!(s.found.as_deref(), Some(lib.as_path()));
        assert_eq!(s.tried.len(), 1);

        // A missing explicit path is an answer (not found), never a silent substitute.
        let missing = dir.join("nope.bc");
        let s = find_libdevice(Some(&missing), Some(&dir));
        assert_eq!(s.found, None);
        assert_eq!(s.tried.len(), 1);
        assert!(s.tried_list().contains("nope.bc (PtxBuilder::libdevice)"));

        // The fallback root is searched last.
        let s = find_libdevice(None, Some(&dir));
        if ferrocuda_config::LIBDEVICE.path().is_none() {
            let last = s.tried.last().unwrap();
            assert!(s.found.is_some());
            if s.found.as_deref() == Some(lib.as_path()) {
                assert_eq!(last.origin, "PtxBuilder::cuda_fallback");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
