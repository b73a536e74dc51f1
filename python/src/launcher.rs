//! The launcher classes: `ferrocuda.Launcher`, the one class that launches, and its two kinds
//! — `Kernel` (one kernel, or its layout variant for the arguments' layouts) and `Family` (a
//! family's kernels, selected by the arguments' element types, ranks and layouts) — plus
//! `ConfiguredLauncher` (`launcher[grid, block, …]`) and `OpKernel`
//! (`launcher.op_kernel(name)`: the kernel a torch operator registers, which launches in the
//! call path's operator mode — `crate::call`, "Operator mode").
//!
//! Launchers pickle by name, not by pointer: a pickle names the module (bundled, or the
//! canonical path of its manifest), the launcher's name and whether it is a family, and
//! unpickling looks that name up in the module as loaded in the unpickling process (see
//! `module::_launcher`). Kernels load into each device at their first launch there, so a
//! launcher unpickled in a Dask worker or an MPI rank runs on that process's devices.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use ferrocuda_host::launcher::Target;
use ferrocuda_host::{Kernel, StreamRef, SyncMode};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyTuple};

use crate::args::Mode;
use crate::bind::{bind, PyBound};
use crate::call::{call, parse_config, CallOpts};
use crate::errors::IntoPyResult;
use crate::read::streams::parse_sync;

/// Launches kernels on arrays and scalars: the common base of :class:`Kernel` and
/// :class:`Family`, which differ only in how the kernel is selected (see their ``__doc__``).
#[pyclass(name = "Launcher", module = "ferrocuda", subclass, frozen, dict)]
pub struct PyLauncher {
    target: Arc<Target<'static>>,
    origin: Origin,
}

/// Where a module's code comes from: what a pickle of the module or of one of its launchers
/// names, so that another process can load it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The kernels bundled with ferrocuda.
    Bundled,
    /// A module loaded from a manifest file (its canonical path).
    Manifest(PathBuf),
}

impl Origin {
    /// The module's argument of the unpickling functions: `None` for the bundled kernels,
    /// else the manifest's path (a Python `str`).
    pub fn pickle_arg(&self) -> Option<OsString> {
        match self {
            Origin::Bundled => None,
            Origin::Manifest(p) => Some(p.clone().into_os_string()),
        }
    }
}

/// The arguments of a call with keyword arguments for parameters (`add(a, b, out=out)`):
/// `args` followed, in parameter order, by the parameters named in `kwargs`. Every parameter
/// after the positional ones must be named (a `TypeError` names the missing ones, an unknown
/// keyword, or one given twice). A family's kernels must agree on the names of their
/// parameters (its variants do: they differ in types, ranks and layouts).
pub fn with_keywords<'py>(
    t: &Target<'static>,
    args: &Bound<'py, PyTuple>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let Some(kwargs) = kwargs.filter(|k| !k.is_empty()) else {
        return Ok(args.clone());
    };
    let params = &t.first().signature().params;
    let what = t.what();
    let named = |i: usize| params[i].name.as_str();
    if let Some(k) = t.renamed() {
        return Err(PyTypeError::new_err(format!(
            "{what} `{}`: its kernels name their parameters differently ({} and {}); pass the \
             arguments by position",
            t.name(),
            t.first().signature().param_list(),
            k.signature().param_list()
        )));
    }
    for (key, _) in kwargs.iter() {
        let key: String = key.extract().map_err(|_| {
            PyTypeError::new_err(format!("{what} `{}`: keywords must be strings", t.name()))
        })?;
        match params.iter().position(|p| p.name == key) {
            None => {
                return Err(PyTypeError::new_err(format!(
                    "{what} `{}` has no parameter `{key}` (its parameters: {})",
                    t.name(),
                    params
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
            Some(i) if i < args.len() => {
                return Err(PyTypeError::new_err(format!(
                    "{what} `{}`: argument `{key}` given by position and by keyword",
                    t.name()
                )))
            }
            Some(_) => {}
        }
    }
    let mut all: Vec<Bound<'py, PyAny>> = args.iter().collect();
    let mut missing = Vec::new();
    for i in args.len()..params.len() {
        match kwargs.get_item(named(i))? {
            Some(v) => all.push(v),
            None => missing.push(format!("`{}`", named(i))),
        }
    }
    if !missing.is_empty() {
        return Err(PyTypeError::new_err(format!(
            "{what} `{}` is missing argument(s) {} ({})",
            t.name(),
            missing.join(", "),
            t.first().signature().param_list()
        )));
    }
    PyTuple::new(args.py(), all)
}

/// The function of the extension module named `name` (what pickles refer to).
pub fn extension_function<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import(intern!(py, "ferrocuda._ferrocuda"))?
        .getattr(name)
}

#[pymethods]
impl PyLauncher {
    /// Launches; see the class documentation for the arguments.
    #[pyo3(signature = (*args, stream = None, sync = None, grid = None, block = None, shared_mem = None, check_pointers = true, **kwargs))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        stream: Option<&Bound<'_, PyAny>>,
        sync: Option<&Bound<'_, PyAny>>,
        grid: Option<&Bound<'_, PyAny>>,
        block: Option<&Bound<'_, PyAny>>,
        shared_mem: Option<&Bound<'_, PyAny>>,
        check_pointers: bool,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let shape = [grid, block, shared_mem];
        let o = CallOpts::from_keywords(stream, sync, shape, check_pointers)?;
        let args = with_keywords(&self.target, args, kwargs)?;
        call(py, &self.target, &args, o, Mode::Launcher)
    }

    /// The kernel of the torch operator ``op`` (its qualified name, ``namespace::name``) that
    /// launches this launcher: an :class:`OpKernel`, what ``ferrocuda.torch`` registers with
    /// ``torch.library``. Its parameters are this launcher's, by position.
    fn op_kernel(slf: &Bound<'_, Self>, op: String) -> PyResult<PyOpKernel> {
        if op.is_empty() {
            return Err(PyValueError::new_err(
                "argument `op`: expected the operator's qualified name, namespace::name",
            ));
        }
        Ok(PyOpKernel {
            op,
            launcher: Mutex::new(OpLauncher::of(slf)),
        })
    }

    /// Binds the arguments and options for launches in a loop: reads, checks and converts
    /// them once (a family selects its variant once) and returns a :class:`BoundLaunch`,
    /// which launches when called with no arguments. Raises what a call with the same
    /// arguments would raise; host (NumPy) arrays are refused (``TypeError``).
    #[pyo3(signature = (*args, stream = None, sync = None, grid = None, block = None, shared_mem = None, check_pointers = true, **kwargs))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn bind(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        stream: Option<&Bound<'_, PyAny>>,
        sync: Option<&Bound<'_, PyAny>>,
        grid: Option<&Bound<'_, PyAny>>,
        block: Option<&Bound<'_, PyAny>>,
        shared_mem: Option<&Bound<'_, PyAny>>,
        check_pointers: bool,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyBound> {
        let shape = [grid, block, shared_mem];
        let o = CallOpts::from_keywords(stream, sync, shape, check_pointers)?;
        let args = with_keywords(&self.target, args, kwargs)?;
        bind(py, &self.target, &args, o, stream)
    }

    /// Numba-style configuration: ``launcher[grid, block]``, ``launcher[grid, block, stream]``
    /// or ``launcher[grid, block, stream, shared_mem]``.
    fn __getitem__(&self, config: &Bound<'_, PyAny>) -> PyResult<PyConfigured> {
        Ok(PyConfigured {
            target: self.target.clone(),
            opts: parse_config(config)?,
        })
    }

    /// The kernel's (PTX entry) name, or the family's name.
    #[getter]
    fn name(&self) -> &str {
        self.target.name()
    }

    /// Pickles by name: unpickling returns the launcher of the same name in the same module
    /// as loaded in the unpickling process (the bundled kernels, or the manifest at the same
    /// path) — in this process, this very object.
    #[allow(clippy::type_complexity)] // the pickle protocol's tuple
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Option<OsString>, String, bool))> {
        let py = slf.py();
        let this = slf.get();
        let family = slf.is_instance_of::<PyFamily>();
        Ok((
            extension_function(py, "_launcher")?,
            (
                this.origin.pickle_arg(),
                this.target.name().to_owned(),
                family,
            ),
        ))
    }
}

impl PyLauncher {
    /// The first (for a kernel: the) kernel.
    fn kernel(&self) -> Kernel<'static> {
        self.target.first()
    }
}

/// One kernel of a module: call it on arrays and scalars (see its ``__doc__``).
#[pyclass(name = "Kernel", module = "ferrocuda", extends = PyLauncher, frozen)]
pub struct PyKernel;

impl PyKernel {
    /// A launcher of kernel `k` of the module from `origin`.
    pub fn new(k: Kernel<'static>, origin: Origin) -> PyClassInitializer<Self> {
        let target = Target::kernel(k);
        PyClassInitializer::from(PyLauncher {
            target: Arc::new(target),
            origin,
        })
        .add_subclass(PyKernel)
    }
}

#[pymethods]
impl PyKernel {
    /// The kernel's family.
    #[getter]
    fn family(slf: PyRef<'_, Self>) -> String {
        slf.as_super().kernel().signature().family.clone()
    }

    /// The parameters: ``(name, kind, dtype, rank, mutable)`` tuples, ``kind`` being
    /// ``'scalar'``, ``'slice'`` or ``'view'``.
    #[getter]
    fn params<'py>(slf: PyRef<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let items: Vec<Bound<'py, PyTuple>> = slf
            .as_super()
            .kernel()
            .signature()
            .params
            .iter()
            .map(|p| {
                PyTuple::new(
                    py,
                    [
                        p.name.as_str().into_pyobject(py)?.into_any(),
                        p.kind.name().into_pyobject(py)?.into_any(),
                        p.dtype.name().into_pyobject(py)?.into_any(),
                        p.rank.into_pyobject(py)?.into_any(),
                        PyBool::new(py, p.mutable).to_owned().into_any(),
                    ],
                )
            })
            .collect::<PyResult<_>>()?;
        PyTuple::new(py, items)
    }

    /// The signature as text, e.g. ``add_f32(a: float32[:] (C-contiguous), …)``.
    #[getter]
    fn signature(slf: PyRef<'_, Self>) -> String {
        slf.as_super().kernel().signature().text()
    }

    fn __repr__(slf: PyRef<'_, Self>) -> String {
        format!(
            "<ferrocuda.Kernel {}>",
            slf.as_super().kernel().signature().text()
        )
    }
}

/// A kernel family: launches the variant that matches the arguments' element types, ranks and
/// layouts (see its ``__doc__``).
#[pyclass(name = "Family", module = "ferrocuda", extends = PyLauncher, frozen)]
pub struct PyFamily {
    kernels: Py<PyTuple>,
}

impl PyFamily {
    /// A launcher of family `name` of the module from `origin`, whose kernels are `kernels`
    /// with the launcher objects `objects`.
    ///
    /// # Errors
    ///
    /// `ValueError` when `kernels` is empty.
    pub fn new(
        py: Python<'_>,
        name: String,
        kernels: Vec<Kernel<'static>>,
        objects: Py<PyTuple>,
        origin: Origin,
    ) -> PyResult<PyClassInitializer<Self>> {
        let target = Target::family(name, kernels).py_err(py)?;
        Ok(PyClassInitializer::from(PyLauncher {
            target: Arc::new(target),
            origin,
        })
        .add_subclass(PyFamily { kernels: objects }))
    }
}

#[pymethods]
impl PyFamily {
    /// The variants, a tuple of :class:`Kernel`.
    #[getter]
    fn kernels(&self, py: Python<'_>) -> Py<PyTuple> {
        self.kernels.clone_ref(py)
    }

    fn __repr__(slf: PyRef<'_, Self>) -> String {
        let t = &slf.as_super().target;
        let names: Vec<&str> = t.kernels().iter().map(|k| k.name()).collect();
        format!("<ferrocuda.Family {} [{}]>", t.name(), names.join(", "))
    }
}

/// A kernel or family with a fixed launch configuration (``launcher[grid, block, stream]``).
#[pyclass(name = "ConfiguredLauncher", module = "ferrocuda", frozen)]
pub struct PyConfigured {
    target: Arc<Target<'static>>,
    opts: CallOpts,
}

#[pymethods]
impl PyConfigured {
    /// Launches with the configured grid, block, stream and shared memory.
    #[pyo3(signature = (*args, sync = None, check_pointers = true, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        sync: Option<&Bound<'_, PyAny>>,
        check_pointers: bool,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let args = with_keywords(&self.target, args, kwargs)?;
        let o = CallOpts {
            sync: parse_sync(sync)?,
            check_pointers,
            ..self.opts
        };
        call(py, &self.target, &args, o, Mode::Launcher)
    }

    fn __repr__(&self) -> String {
        format!(
            "<ferrocuda.ConfiguredLauncher {} grid={:?} block={:?} stream={:?} shared_mem={}>",
            self.target.name(),
            self.opts.grid,
            self.opts.block,
            self.opts.stream.map(StreamRef::as_raw),
            self.opts.shared_mem
        )
    }
}

/// The launcher a [`PyOpKernel`] launches: its target, and the launcher object (what the
/// `launcher` property returns).
struct OpLauncher {
    target: Arc<Target<'static>>,
    object: Py<PyLauncher>,
}

impl OpLauncher {
    fn of(launcher: &Bound<'_, PyLauncher>) -> Self {
        OpLauncher {
            target: launcher.get().target.clone(),
            object: launcher.clone().unbind(),
        }
    }
}

/// The options of every launch of an operator's kernel: ``sync="off"``, the rest their
/// defaults.
const OPERATOR_OPTIONS: CallOpts = CallOpts {
    stream: None,
    sync: Some(SyncMode::Off),
    grid: None,
    block: None,
    shared_mem: 0,
    check_pointers: true,
};

/// The kernel of a torch operator (``launcher.op_kernel("namespace::name")``): called with
/// the launcher's arguments by position, it launches as ``launcher(*args, sync="off")`` does
/// except in how it reads them — every tensor must be on a CUDA device (else ``ValueError``
/// naming the argument and the operator, before anything is launched; host arrays are
/// refused too), and a tensor that requires grad is read as its ``detach()`` (the same
/// memory, no autograd). ``ferrocuda.torch`` registers it as its operators' kernel.
#[pyclass(name = "OpKernel", module = "ferrocuda", frozen)]
pub struct PyOpKernel {
    /// The operator's qualified name (`namespace::name`), for the errors.
    op: String,
    /// What it launches: replaced when the operators' module is reloaded with the same kernels.
    launcher: Mutex<OpLauncher>,
}

impl PyOpKernel {
    fn target(&self) -> Arc<Target<'static>> {
        let l = self.launcher.lock().unwrap_or_else(PoisonError::into_inner);
        l.target.clone()
    }
}

#[pymethods]
impl PyOpKernel {
    /// Launches on ``args`` (the launcher's parameters, by position).
    #[pyo3(signature = (*args))]
    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<()> {
        // The target is taken out of the lock: the launch releases the GIL, and a rebinding
        // thread must never wait on a lock a launch holds.
        let target = self.target();
        call(
            py,
            &target,
            args,
            OPERATOR_OPTIONS,
            Mode::Operator(&self.op),
        )
    }

    /// The operator's qualified name, ``namespace::name``.
    #[getter]
    fn op(&self) -> &str {
        &self.op
    }

    /// The launcher it launches; assigning another (a reloaded module's launcher of the same
    /// kernels) makes later calls launch that one.
    #[getter]
    fn launcher(&self, py: Python<'_>) -> Py<PyLauncher> {
        let l = self.launcher.lock().unwrap_or_else(PoisonError::into_inner);
        l.object.clone_ref(py)
    }

    #[setter]
    fn set_launcher(&self, launcher: &Bound<'_, PyLauncher>) -> PyResult<()> {
        let new = OpLauncher::of(launcher);
        let (now, then) = (self.target(), &new.target);
        let params = |t: &Target<'static>| -> Vec<(String, bool, bool)> {
            let sig = t.first().signature();
            let p = sig.params.iter();
            p.map(|p| (p.name.clone(), p.kind.is_array(), p.mutable))
                .collect()
        };
        if now.name() != then.name() || params(&now) != params(then) {
            return Err(PyValueError::new_err(format!(
                "operator {}: launcher `{}` ({}) cannot replace `{}` ({}): the operator's \
                 parameters are fixed",
                self.op,
                then.name(),
                then.first().signature().param_list(),
                now.name(),
                now.first().signature().param_list()
            )));
        }
        let old = std::mem::replace(
            &mut *self.launcher.lock().unwrap_or_else(PoisonError::into_inner),
            new,
        );
        // The old launcher object is released after the lock (its last reference may run
        // Python code).
        drop(old);
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "<ferrocuda.OpKernel {} launching {}>",
            self.op,
            self.target().name()
        )
    }
}
