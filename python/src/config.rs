//! The environment variables for the pure-Python package: the table of the
//! `ferrocuda-config` crate (`_env_vars`) and a variable's value parsed by its rules
//! (`_env_value`), so that Python reads every variable as Rust does (`ferrocuda/_config.py`).

use ferrocuda_config::{Scope, Value};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

/// Every ``FERROCUDA_*`` variable: ``(name, kind, scope, read_by, values, default)``; kind
/// is ``"switch"``, ``"choice"``, ``"path"``, ``"list"``, ``"words"``, ``"count"`` or
/// ``"text"``, scope ``"library"`` or ``"tools"``.
#[pyfunction]
pub fn _env_vars() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
)> {
    ferrocuda_config::VARS
        .iter()
        .map(|v| {
            let scope = match v.scope {
                Scope::Library => "library",
                Scope::Tools => "tools",
            };
            (v.name, v.kind.name(), scope, v.read_by, v.values, v.default)
        })
        .collect()
}

/// The value of the variable ``name`` in this process's environment, parsed by its kind: a
/// switch ``bool`` (its default when unset), a choice or text ``str``, a path
/// ``os.PathLike``/``str``, a list or words ``list[str]``, a count ``int``; ``None`` when
/// unset (or empty). ``KeyError`` for a name not in the table, ``ValueError`` (naming the
/// variable and the values it takes) for a value it does not take.
#[pyfunction]
pub fn _env_value(py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
    let var = ferrocuda_config::lookup(name).ok_or_else(|| {
        PyKeyError::new_err(format!(
            "{name:?} is not one of ferrocuda's environment variables"
        ))
    })?;
    match var
        .value()
        .map_err(|e| PyValueError::new_err(e.to_string()))?
    {
        Value::Unset => Ok(py.None()),
        Value::Switch(b) => b.into_py_any(py),
        Value::Choice(w) => w.into_py_any(py),
        Value::Path(p) => p.into_py_any(py),
        Value::Items(items) => items.into_py_any(py),
        Value::Count(n) => n.into_py_any(py),
        Value::Text(t) => t.into_py_any(py),
    }
}
