//! `ferrocuda.Module`: a PTX module and its manifest, its kernels and families as
//! launchers; `load` and `bundled`; `_launcher`, which unpickles launchers by name.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ferrocuda_host::{Kernel, Module};
use pyo3::exceptions::{PyAttributeError, PyLookupError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::docs::{family_doc, kernel_doc};
use crate::errors::IntoPyResult;
use crate::launcher::{extension_function, Origin, PyFamily, PyKernel};

/// A PTX module and its manifest (built by ``ferrocuda-builder``): its kernels are attributes
/// (``module.add_f32``), and so are its families (``module.add``, dispatching by type).
///
/// Modules and their launchers pickle by name (the bundled kernels, or the manifest's path):
/// unpickled in another process, they load the same files there, and their kernels load into
/// that process's devices at their first launch.
#[pyclass(name = "Module", module = "ferrocuda", frozen)]
pub struct PyKModule {
    module: &'static Module,
    origin: Origin,
    kernels: Py<PyDict>,
    families: Py<PyDict>,
}

fn make_module(py: Python<'_>, module: &'static Module, origin: Origin) -> PyResult<PyKModule> {
    let kernels = PyDict::new(py);
    let mut order: Vec<&str> = Vec::new();
    let mut by_family: HashMap<&str, Vec<(Kernel<'static>, Py<PyKernel>)>> = HashMap::new();
    for sig in module.signatures() {
        let k = module.kernel(&sig.name).py_err(py)?;
        let obj = Py::new(py, PyKernel::new(k, origin.clone()))?;
        obj.bind(py)
            .setattr(intern!(py, "__doc__"), kernel_doc(&k))?;
        kernels.set_item(&sig.name, &obj)?;
        let fam = sig.family.as_str();
        if !by_family.contains_key(fam) {
            order.push(fam);
        }
        by_family.entry(fam).or_default().push((k, obj));
    }
    let families = PyDict::new(py);
    for fam in order {
        let members = by_family.remove(fam).unwrap_or_default();
        if members.is_empty() {
            continue;
        }
        let ks: Vec<Kernel<'static>> = members.iter().map(|(k, _)| *k).collect();
        let doc = family_doc(fam, &ks);
        let objs = PyTuple::new(py, members.iter().map(|(_, o)| o.clone_ref(py)))?;
        let f = PyFamily::new(py, fam.to_owned(), ks, objs.unbind(), origin.clone())?;
        let f = Py::new(py, f)?;
        f.bind(py).setattr(intern!(py, "__doc__"), doc)?;
        families.set_item(fam, f)?;
    }
    Ok(PyKModule {
        module,
        origin,
        kernels: kernels.unbind(),
        families: families.unbind(),
    })
}

/// Modules loaded from files, by (canonical path, modification time, size): loading the same
/// files again returns the same module object (its code is JIT-loaded into each device once,
/// and never unloaded); a changed file is loaded anew.
type LoadKey = (PathBuf, Option<std::time::SystemTime>, u64);
static LOADED: Mutex<Vec<(LoadKey, Py<PyKModule>)>> = Mutex::new(Vec::new());

/// The cache key of the manifest at `path`.
fn load_key(path: &Path) -> ferrocuda_host::Result<LoadKey> {
    let canon = std::fs::canonicalize(path).map_err(|e| {
        ferrocuda_host::Error::value(format!("cannot read {}: {e}", path.display()))
    })?;
    let meta = std::fs::metadata(&canon).ok();
    Ok((
        canon,
        meta.as_ref().and_then(|m| m.modified().ok()),
        meta.as_ref().map(|m| m.len()).unwrap_or(0),
    ))
}

fn cached(py: Python<'_>, key: &LoadKey) -> Option<Py<PyKModule>> {
    let cache = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    cache
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, m)| m.clone_ref(py))
}

/// The module of the manifest at `path`: the cached one while the file is unchanged, else
/// loaded (files read with the GIL released) and cached.
fn load_module(py: Python<'_>, path: &Path) -> PyResult<Py<PyKModule>> {
    let key = py.detach(|| load_key(path)).py_err(py)?;
    if let Some(m) = cached(py, &key) {
        return Ok(m);
    }
    let canon = key.0.clone();
    let module = py
        .detach(|| Module::from_manifest_file(&canon))
        .py_err(py)?;
    let module: &'static Module = Box::leak(Box::new(module));
    let obj = Py::new(py, make_module(py, module, Origin::Manifest(canon))?)?;
    let mut cache = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    // Another thread may have loaded it meanwhile: the first one stays the module.
    if let Some((_, m)) = cache.iter().find(|(k, _)| *k == key) {
        return Ok(m.clone_ref(py));
    }
    cache.push((key, obj.clone_ref(py)));
    Ok(obj)
}

impl PyKModule {
    /// The host crate's module.
    pub fn host_module(&self) -> &'static Module {
        self.module
    }

    /// Where the module came from (see `source`).
    pub fn source_name(&self) -> String {
        self.source()
    }
}

#[pymethods]
impl PyKModule {
    /// Loads a module: see :func:`ferrocuda.load`.
    #[staticmethod]
    #[pyo3(signature = (path, *, arch = "sm_80"))]
    fn load(py: Python<'_>, path: PathBuf, arch: &str) -> PyResult<Py<PyKModule>> {
        load(py, path, arch)
    }

    /// Kernel name → :class:`Kernel` (a new dict).
    #[getter]
    fn kernels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.kernels.bind(py).copy()
    }

    /// Family name → :class:`Family` (a new dict).
    #[getter]
    fn families<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.families.bind(py).copy()
    }

    /// The manifest, as JSON text.
    #[getter]
    fn manifest(&self) -> String {
        self.module.manifest().to_json()
    }

    /// The PTX target, e.g. ``'sm_80'``.
    #[getter]
    fn arch(&self) -> &str {
        &self.module.manifest().arch
    }

    /// The architectures of the module's cubins, e.g. ``('sm_80', 'sm_90')`` (empty when it
    /// was built without ptxas): a device of one of their major versions loads that machine
    /// code instead of JIT-compiling the PTX.
    #[getter]
    fn cubins(&self) -> Vec<String> {
        self.module.cubin_archs().map(str::to_owned).collect()
    }

    /// What device ``device`` runs, loading the module there (once): ``'sm_90 cubin'`` when
    /// a cubin was loaded, ``'PTX'`` when the PTX was JIT-compiled (no cubin for the device's
    /// compute capability, or the driver refused it).
    #[pyo3(signature = (device = 0))]
    fn loaded_image(&self, py: Python<'_>, device: usize) -> PyResult<String> {
        let module = self.module;
        py.detach(|| module.loaded_image(device)).py_err(py)
    }

    /// Where the module came from: the manifest's canonical path, or ``'<bundled>'``.
    #[getter]
    fn source(&self) -> String {
        match &self.origin {
            Origin::Bundled => "<bundled>".to_owned(),
            Origin::Manifest(p) => p.to_string_lossy().into_owned(),
        }
    }

    /// Pickles by name: the bundled kernels, or the manifest's path (which must name the same
    /// files wherever the pickle is loaded).
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Option<OsString>,))> {
        Ok((
            extension_function(py, "_module")?,
            (self.origin.pickle_arg(),),
        ))
    }

    /// ``module.<family>`` or ``module.<kernel>`` (a family wins when both have the name).
    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        if let Some(f) = self.families.bind(py).get_item(name)? {
            return Ok(f);
        }
        if let Some(k) = self.kernels.bind(py).get_item(name)? {
            return Ok(k);
        }
        Err(PyAttributeError::new_err(format!(
            "module {} has no kernel or family named {name:?}",
            self.source()
        )))
    }

    fn __dir__(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mut v: Vec<String> = self.families.bind(py).keys().extract()?;
        v.extend(self.kernels.bind(py).keys().extract::<Vec<String>>()?);
        v.extend(
            ["kernels", "families", "manifest", "arch", "source", "load"]
                .iter()
                .map(|s| s.to_string()),
        );
        v.sort();
        v.dedup();
        Ok(v)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<ferrocuda.Module {} ({}{}, {} kernels, {} families)>",
            self.source(),
            self.module.manifest().arch,
            self.cubins()
                .iter()
                .map(|a| format!(", {a} cubin"))
                .collect::<String>(),
            self.kernels.bind(py).len(),
            self.families.bind(py).len()
        )
    }
}

/// The module of the kernels bundled with ferrocuda (``add``, ``initialize_array``,
/// ``add_index``, ``saxpy``); the same object on every call.
#[pyfunction]
pub fn bundled(py: Python<'_>) -> PyResult<Py<PyKModule>> {
    static BUNDLED: PyOnceLock<Py<PyKModule>> = PyOnceLock::new();
    BUNDLED
        .get_or_try_init(py, || {
            let m = ferrocuda::bundled::module().py_err(py)?;
            Py::new(py, make_module(py, m, Origin::Bundled)?)
        })
        .map(|m| m.clone_ref(py))
}

/// Loads a module of your own kernels: ``path`` is a kernel crate (its directory or its
/// ``Cargo.toml``), built first when a source changed (see :func:`ferrocuda.build`; for
/// ``arch``), or a manifest JSON written by ``ferrocuda-builder`` (the PTX file it names sits
/// beside it).
///
/// Families and kernels are the module's attributes: ``mod.scale(alpha, x, y)`` picks the
/// kernel by the arrays' element types, ``mod.scale_f32[grid, block](...)`` launches one.
/// Loading the same unchanged files again returns the same module. A build reports its
/// stages on ``sys.stderr`` and stops on Ctrl-C (see :func:`build`). Raises
/// ``ferrocuda.BuildError`` when the crate does not compile (nothing is loaded then), and
/// ``ValueError`` for a missing, damaged or incompatible manifest or PTX.
#[pyfunction]
#[pyo3(signature = (path, *, arch = "sm_80"))]
pub fn load(py: Python<'_>, path: PathBuf, arch: &str) -> PyResult<Py<PyKModule>> {
    if crate::project::is_crate(&path) {
        let mut req = ferrocuda_builder::project::BuildRequest::new(&path);
        req.arch = arch.to_owned();
        let manifest = crate::project::build_path(py, &req, &crate::project::Progress::Stderr)?;
        return load_module(py, &manifest);
    }
    load_module(py, &path)
}

/// Compiles a kernel written in a string — Rust source: ``#[kernel]`` functions, as in a kernel
/// crate's ``src/lib.rs`` — and loads it as a :class:`Module`. ``use
/// ferrocuda_device::prelude::*;`` is in scope already (``kernel``, ``Slice``, ``SliceMut``,
/// ``thread``, ``Element``, …); leading inner attributes (``#![feature(f16)]``) are allowed.
///
/// The result is cached on disk under ``$FERROCUDA_INLINE_CACHE``, else
/// ``$FERROCUDA_HOME/inline`` (default ``~/.cache/ferrocuda/inline``), keyed by a hash of the source, the toolchain, this
/// ferrocuda (its version and device crates) and the options: a later call with the same
/// source — in this process or another, after a restart — loads the cached PTX without
/// starting any process. Two processes compiling the same kernel at once build it once (a
/// file lock; the entry appears complete, by one rename). Every inline kernel shares one cargo
/// target directory there, so the GPU's ``core`` is compiled once per ``arch``: the first
/// inline kernel takes about a minute, later new ones a few seconds.
///
/// A build reports its stages with their times (``progress``: ``None``/``True`` writes them
/// to ``sys.stderr``, ``False`` nothing, a callable gets each line as a ``str``); Ctrl-C stops
/// it promptly (``KeyboardInterrupt``; the child cargo is killed, the lock released, no entry
/// written). ``force=True`` builds again and replaces the entry.
///
/// Raises ``ferrocuda.CompileError`` (a ``BuildError``) when the source does not compile: the
/// compiler's messages name the string ``<inline>``, with its line numbers (line 1 = the
/// string's first line), also in the exception's ``locations`` (``(line, column)`` pairs);
/// ``ValueError`` for an empty source, a source without kernels, or a bad ``arch`` /
/// ``fp_contract``.
#[pyfunction]
#[pyo3(signature = (source, *, arch = "sm_80", fp_contract = "off", force = false, progress = None))]
pub fn inline(
    py: Python<'_>,
    source: &str,
    arch: &str,
    fp_contract: &str,
    force: bool,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyKModule>> {
    let progress = crate::project::Progress::from_arg(progress)?;
    let manifest =
        crate::project::inline_manifest(py, source, arch, fp_contract, force, &progress)?;
    let m = load_module(py, &manifest)?;
    if m.get().kernels.bind(py).is_empty() {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "the inline source defines no kernels: mark at least one function #[kernel] \
             (e.g. `#[kernel] pub fn scale(x: Slice<f32>, out: SliceMut<f32>, a: f32) { … }`)",
        ));
    }
    Ok(m)
}

/// Unpickles a module: the bundled kernels (`manifest` is ``None``) or the module of the
/// manifest at `manifest` (see :meth:`Module.load`).
#[pyfunction]
pub fn _module(py: Python<'_>, manifest: Option<PathBuf>) -> PyResult<Py<PyKModule>> {
    match manifest {
        None => bundled(py),
        Some(p) => load_module(py, &p),
    }
}

/// Unpickles a launcher: family (`family`) or kernel `name` of the module that `_module`
/// returns for `manifest`. A name the module lacks is a ``LookupError`` that says so (a
/// pickle from another version of the kernels).
#[pyfunction]
pub fn _launcher<'py>(
    py: Python<'py>,
    manifest: Option<PathBuf>,
    name: &str,
    family: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let m = _module(py, manifest)?;
    let m = m.get();
    let (table, what) = if family {
        (&m.families, "family")
    } else {
        (&m.kernels, "kernel")
    };
    table.bind(py).get_item(name)?.ok_or_else(|| {
        PyLookupError::new_err(format!(
            "cannot unpickle launcher `{name}`: module {} (ferrocuda {}) has no {what} named \
             {name:?}; the pickle comes from other kernels (is the same ferrocuda, and the same \
             manifest, installed where it is loaded?)",
            m.source(),
            env!("CARGO_PKG_VERSION"),
        ))
    })
}

/// The PTX text of the bundled kernels (with :attr:`Module.manifest` of :func:`bundled`, what
/// ``ferrocuda-builder`` writes to disk; tests use it to exercise :func:`load`).
#[pyfunction]
pub fn _bundled_ptx() -> &'static str {
    ferrocuda::bundled::PTX
}

/// The bundled kernels' cubin for ``arch`` (``'sm_90'``), ``None`` when there is none (with
/// :func:`_bundled_ptx`, the files ``ferrocuda-builder`` writes; tests use them with
/// :func:`load`).
#[pyfunction]
pub fn _bundled_cubin(py: Python<'_>, arch: &str) -> Option<Py<pyo3::types::PyBytes>> {
    ferrocuda::bundled::CUBINS
        .iter()
        .find(|(a, _)| *a == arch)
        .map(|(_, bytes)| pyo3::types::PyBytes::new(py, bytes).unbind())
}

/// The bundled kernels' part file ``name`` (the PTX or a cubin of the kernels built for another
/// architecture, as the manifest's ``parts`` names it), ``None`` when there is none (with
/// :func:`_bundled_ptx`, the files ``ferrocuda-builder`` writes; tests use them with
/// :func:`load`).
#[pyfunction]
pub fn _bundled_part_file(py: Python<'_>, name: &str) -> Option<Py<pyo3::types::PyBytes>> {
    ferrocuda::bundled::PART_FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| pyo3::types::PyBytes::new(py, bytes).unbind())
}
