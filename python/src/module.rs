//! `ferrocuda.Module`: a PTX module and its manifest, its kernels and families as
//! launchers; `load` and `bundled`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use ferrocuda_host::{Kernel, Module};
use pyo3::exceptions::PyAttributeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::docs::{family_doc, kernel_doc};
use crate::errors::IntoPyResult;
use crate::launcher::{PyFamily, PyKernel};

/// A PTX module and its manifest (built by ``ferrocuda-builder``): its kernels are attributes
/// (``module.add_f32``), and so are its families (``module.add``, dispatching by type).
#[pyclass(name = "Module", module = "ferrocuda", frozen)]
pub struct PyKModule {
    module: &'static Module,
    source: String,
    kernels: Py<PyDict>,
    families: Py<PyDict>,
}

fn make_module(py: Python<'_>, module: &'static Module, source: String) -> PyResult<PyKModule> {
    let kernels = PyDict::new(py);
    let mut order: Vec<&str> = Vec::new();
    let mut by_family: HashMap<&str, Vec<(Kernel<'static>, Py<PyKernel>)>> = HashMap::new();
    for sig in module.signatures() {
        let k = module.kernel(&sig.name).py_err(py)?;
        let obj = Py::new(py, PyKernel::new(k))?;
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
        let f = Py::new(py, PyFamily::new(fam.to_owned(), ks, objs.unbind()))?;
        f.bind(py).setattr(intern!(py, "__doc__"), doc)?;
        families.set_item(fam, f)?;
    }
    Ok(PyKModule {
        module,
        source,
        kernels: kernels.unbind(),
        families: families.unbind(),
    })
}

/// Modules loaded from files, by (canonical path, modification time, size): loading the same
/// files again reuses the module (it is JIT-loaded into each device once, and never unloaded).
type LoadKey = (PathBuf, Option<std::time::SystemTime>, u64);
static LOADED: Mutex<Vec<(LoadKey, &'static Module)>> = Mutex::new(Vec::new());

fn load_static(path: &str) -> ferrocuda_host::Result<&'static Module> {
    let canon = std::fs::canonicalize(path)
        .map_err(|e| ferrocuda_host::Error::value(format!("cannot read {path}: {e}")))?;
    let meta = std::fs::metadata(&canon).ok();
    let key: LoadKey = (
        canon.clone(),
        meta.as_ref().and_then(|m| m.modified().ok()),
        meta.as_ref().map(|m| m.len()).unwrap_or(0),
    );
    let mut cache = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, m)) = cache.iter().find(|(k, _)| *k == key) {
        return Ok(m);
    }
    let m: &'static Module = Box::leak(Box::new(Module::from_manifest_file(&canon)?));
    cache.push((key, m));
    Ok(m)
}

#[pymethods]
impl PyKModule {
    /// Loads a module from the manifest JSON written by ``ferrocuda-builder`` (the PTX file
    /// it names sits beside it). Loading the same unchanged files again returns a module over
    /// the same loaded code.
    #[staticmethod]
    fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyKModule> {
        let p = path.to_string_lossy().into_owned();
        let m = py.detach(|| load_static(&p)).py_err(py)?;
        make_module(py, m, p)
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

    /// Where the module came from (a manifest path, or ``'<bundled>'``).
    #[getter]
    fn source(&self) -> &str {
        &self.source
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
            self.source
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
            "<ferrocuda.Module {} ({}, {} kernels, {} families)>",
            self.source,
            self.module.manifest().arch,
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
            Py::new(py, make_module(py, m, "<bundled>".to_owned())?)
        })
        .map(|m| m.clone_ref(py))
}

/// Loads a module built by ``ferrocuda-builder`` from its manifest JSON (see
/// :meth:`Module.load`).
#[pyfunction]
pub fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyKModule> {
    PyKModule::load(py, path)
}

/// The PTX text of the bundled kernels (with :attr:`Module.manifest` of :func:`bundled`, what
/// ``ferrocuda-builder`` writes to disk; tests use it to exercise :func:`load`).
#[pyfunction]
pub fn _bundled_ptx() -> &'static str {
    ferrocuda::bundled::PTX
}
