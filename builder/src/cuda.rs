//! Finding NVIDIA's files the pipeline can use: `libdevice.10.bc` (math functions, linked when
//! a kernel calls one), `ptxas` (the per-kernel resource report) and `nvdisasm` (the SASS
//! checks of [`crate::check::sass`]).
//!
//! Both live under a *CUDA root*: a CUDA toolkit (`bin/ptxas`, `nvvm/libdevice/…`) or the PyPI
//! wheel `nvidia-cuda-nvcc-cu12`'s `nvidia/cuda_nvcc` directory, which has the same layout.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

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
                return Search { found, tried };
            }
            if decisive {
                return Search { found: None, tried };
            }
        }
    }
    Search { found: None, tried }
}

fn candidate(origin: &str, path: PathBuf) -> Candidate {
    Candidate {
        origin: origin.into(),
        path,
        decisive: false,
    }
}

/// An explicit choice: `explicit` if given, else the path in the environment variable `var`.
fn decisive(explicit: Option<(&str, &Path)>, var: &str) -> Vec<Candidate> {
    let chosen = explicit
        .map(|(origin, p)| (origin.to_string(), p.to_path_buf()))
        .or_else(|| {
            let v = std::env::var_os(var).filter(|v| !v.is_empty())?;
            Some((format!("${var}"), PathBuf::from(v)))
        });
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

/// `<dir>/<rel>` for each `nvidia/cuda_nvcc` directory `python3` can import.
fn wheel_roots(rel: &str) -> Vec<Candidate> {
    wheel_dirs()
        .iter()
        .map(|d| candidate("python3's nvidia-cuda-nvcc-cu12 wheel", d.join(rel)))
        .collect()
}

/// The `nvidia/cuda_nvcc` package directories of `python3` (asked once per process).
fn wheel_dirs() -> &'static [PathBuf] {
    static DIRS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    DIRS.get_or_init(|| query_wheel_dirs(Command::new("python3")))
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
/// python3's wheel, then `fallback_root`.
pub(crate) fn find_libdevice(explicit: Option<&Path>, fallback_root: Option<&Path>) -> Search {
    let rel = LIBDEVICE_IN_ROOT;
    search(vec![
        Box::new(|| {
            decisive(
                explicit.map(|p| ("PtxBuilder::libdevice", p)),
                "FERROCUDA_LIBDEVICE",
            )
        }),
        Box::new(|| env_roots(rel)),
        Box::new(|| system_root(rel)),
        Box::new(|| wheel_roots(rel)),
        Box::new(|| fallback(fallback_root, rel)),
    ])
}

/// Searches ptxas: `$FERROCUDA_PTXAS` (when set, the answer), `$CUDA_HOME`, `$CUDA_PATH`,
/// `PATH`, `/usr/local/cuda`, python3's wheel, then `fallback_root`.
pub(crate) fn find_ptxas(fallback_root: Option<&Path>) -> Search {
    find_program(
        "FERROCUDA_PTXAS",
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
        "FERROCUDA_NVDISASM",
        "nvdisasm",
        NVDISASM_IN_ROOT,
        false,
        fallback_root,
    )
}

/// Searches `program` (at `rel` under a CUDA root): `$<var>`, the environment's CUDA roots,
/// `PATH`, `/usr/local/cuda`, python3's nvcc wheel (when `wheel`), then `fallback_root`.
fn find_program(
    var: &str,
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
        if std::env::var_os("FERROCUDA_LIBDEVICE").is_none() {
            let last = s.tried.last().unwrap();
            assert!(s.found.is_some());
            if s.found.as_deref() == Some(lib.as_path()) {
                assert_eq!(last.origin, "PtxBuilder::cuda_fallback");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
