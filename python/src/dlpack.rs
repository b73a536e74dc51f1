//! DLPack's Python side: the capsules and type attributes through which the host crate's
//! DLPack model (`ferrocuda_host::interop::dlpack`: the C structures, their validation,
//! ferrocuda's managed tensors) meets Python objects.
//!
//! # Import
//!
//! [`import`] calls `obj.__dlpack__(stream=<launch stream>, max_version=(1, 0))` — falling
//! back to `__dlpack__(stream=…)` and `__dlpack__()` for producers that raise `TypeError` for
//! the newer keywords — so that the *producer* orders its pending work before the consumer's
//! stream (the DLPack rule for CUDA). The capsule (`"dltensor_versioned"` or `"dltensor"`) is
//! renamed to `"used_…"` as the protocol demands, and the managed tensor becomes a
//! [`ManagedTensor`], which calls the producer's deleter exactly once when dropped; the host
//! describes it (no stream: ordering already happened inside `__dlpack__`).
//!
//! # Export
//!
//! [`export`] (`DeviceArray.__dlpack__`) wraps the host's managed tensor over a ferrocuda
//! array, whose context holds a strong reference to the Python array object (so the memory
//! outlives every consumer), in a capsule. The capsule's destructor calls the deleter only if
//! no consumer took the tensor (renamed the capsule).
//!
//! # Exchange API
//!
//! [`Exchange::of_type`] finds a producer type's `__dlpack_c_exchange_api__` capsule (torch
//! exports it on `torch.Tensor`); [`Exchange::view_with`] and [`Exchange::current_stream`]
//! call its functions, handing the producer's exception back as Python's. The torch fast path
//! (`read::fast`) reads tensors through it when present.

use std::ffi::CStr;
use std::ptr::NonNull;

use ferrocuda_host::interop::dlpack::{
    self, DLDevice, ExchangeApi, Fields, ManagedTensor, EXCHANGE_ATTR, EXCHANGE_NAME, NAME, NAME_V,
    USED_NAME, USED_NAME_V,
};
use ferrocuda_host::{ArrayDesc, Error};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyDict, PyType};

use crate::errors::{annotate, to_py, IntoPyResult};
use crate::util::type_name;

// ---------------------------------------------------------------------------------------
// Import.

fn call_dlpack<'py>(obj: &Bound<'py, PyAny>, stream: Option<i64>) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let f = obj.getattr(intern!(py, "__dlpack__"))?;
    let kw = PyDict::new(py);
    kw.set_item(intern!(py, "stream"), stream)?;
    kw.set_item(intern!(py, "max_version"), (1u32, 0u32))?;
    match f.call((), Some(&kw)) {
        Ok(c) => Ok(c),
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            // A producer from before DLPack 1.0 (no max_version keyword).
            let kw = PyDict::new(py);
            kw.set_item(intern!(py, "stream"), stream)?;
            match f.call((), Some(&kw)) {
                Ok(c) => Ok(c),
                Err(e2) if e2.is_instance_of::<PyTypeError>(py) && stream.is_none() => {
                    f.call0().map_err(|_| e)
                }
                Err(e2) => Err(e2),
            }
        }
        Err(e) => Err(e),
    }
}

/// Imports `obj` through DLPack, asking the producer to order its work before `stream`
/// (the CAI/DLPack integer of the consumer's stream; `-1` = no synchronization). Errors name
/// argument `arg`.
pub fn import(
    obj: &Bound<'_, PyAny>,
    stream: Option<i64>,
    arg: &str,
) -> PyResult<(ArrayDesc, ManagedTensor)> {
    let py = obj.py();
    let named = |e: Error| to_py(py, e.with_arg(arg.to_owned()));
    let cap = call_dlpack(obj, stream).map_err(|e| annotate(py, e, "__dlpack__", arg))?;
    let cap = cap.cast_into::<PyCapsule>().map_err(|e| {
        named(Error::type_error(format!(
            "__dlpack__() returned {}, not a capsule",
            type_name(e.into_inner().as_any())
        )))
    })?;
    let versioned = cap.is_valid_checked(Some(NAME_V));
    if !versioned && !cap.is_valid_checked(Some(NAME)) {
        return Err(named(Error::type_error(
            "__dlpack__() returned a capsule that is not an unused 'dltensor' or \
             'dltensor_versioned' (was it consumed already?)",
        )));
    }
    let (name, used) = if versioned {
        (NAME_V, USED_NAME_V)
    } else {
        (NAME, USED_NAME)
    };
    let ptr = cap.pointer_checked(Some(name))?;
    // SAFETY: a valid capsule; `used` is a static C string. After the rename the producer's
    // capsule destructor no longer deletes the tensor: ownership is ours.
    if unsafe { ffi::PyCapsule_SetName(cap.as_ptr(), used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: the capsule named "dltensor_versioned" holds a DLManagedTensorVersioned, the one
    // named "dltensor" a DLManagedTensor, alive and valid until its deleter runs; renamed, the
    // capsule no longer deletes it, so the owner below is the only one that does.
    let tensor = unsafe { ManagedTensor::from_raw(ptr, versioned) };
    match tensor.describe() {
        Ok(d) => Ok((d, tensor)),
        Err(e) => Err(named(e)),
    }
}

// ---------------------------------------------------------------------------------------
// Export.

/// The capsule destructor: deletes the tensor unless a consumer renamed (took) it.
///
/// # Safety
///
/// 1. Called by Python, with the GIL, on a capsule made by [`export`].
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the GIL held on a live capsule (1.). The pending exception
    // (if any) is saved and restored around the calls, as the DLPack reference implementation
    // does. A capsule still named "dltensor…" holds the managed tensor `export` made, which
    // nothing else owns: it is deleted here, once.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, USED_NAME.as_ptr()) != 0
            || ffi::PyCapsule_IsValid(capsule, USED_NAME_V.as_ptr()) != 0
        {
            return;
        }
        let mut t = std::ptr::null_mut();
        let mut v = std::ptr::null_mut();
        let mut tb = std::ptr::null_mut();
        ffi::PyErr_Fetch(&mut t, &mut v, &mut tb);
        let held = if ffi::PyCapsule_IsValid(capsule, NAME_V.as_ptr()) != 0 {
            Some((ffi::PyCapsule_GetPointer(capsule, NAME_V.as_ptr()), true))
        } else if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) != 0 {
            Some((ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()), false))
        } else {
            None
        };
        if let Some((Some(p), versioned)) = held.map(|(p, v)| (NonNull::new(p), v)) {
            drop(ManagedTensor::from_raw(p, versioned));
        }
        ffi::PyErr_Restore(t, v, tb);
    }
}

/// Exports the array `desc` on CUDA device `device` as a DLPack capsule that keeps `owner`
/// alive; versioned (`"dltensor_versioned"`, DLPack 1.0) or not (`"dltensor"`).
pub fn export<'py>(
    py: Python<'py>,
    owner: Py<PyAny>,
    desc: &ArrayDesc,
    device: usize,
    versioned: bool,
) -> PyResult<Bound<'py, PyCapsule>> {
    let tensor = dlpack::export(desc, device, versioned, Box::new(owner)).py_err(py)?;
    let name: &'static CStr = if tensor.is_versioned() { NAME_V } else { NAME };
    let (ptr, versioned) = tensor.into_raw();
    // SAFETY: `ptr` points at the managed tensor just built; the destructor deletes it unless
    // a consumer takes it (renames the capsule) and then calls the deleter itself.
    let cap = unsafe {
        PyCapsule::new_with_pointer_and_destructor(py, ptr, name, Some(capsule_destructor))
    };
    if cap.is_err() {
        // SAFETY: the capsule was not created: the tensor given up above is still ours alone.
        drop(unsafe { ManagedTensor::from_raw(ptr, versioned) });
    }
    cap
}

// ---------------------------------------------------------------------------------------
// The exchange API.

/// A producer type's exchange API ([`ExchangeApi`]) with the type it came from: its
/// functions are called only on instances of that type.
#[derive(Debug)]
pub struct Exchange {
    api: ExchangeApi,
    ty: Py<PyType>,
}

impl Exchange {
    /// The exchange API of the instances of `ty`: its `__dlpack_c_exchange_api__` attribute, a
    /// capsule named `"dlpack_exchange_api"` holding a `DLPackExchangeAPI` of major version
    /// 1 and minor version at least 2 with both functions present; `None` otherwise (and
    /// for anything that raises). The capsule is kept alive for the process.
    pub fn of_type(ty: &Bound<'_, PyType>) -> Option<Exchange> {
        let py = ty.py();
        let cap = ty.getattr(intern!(py, EXCHANGE_ATTR)).ok()?;
        let cap = cap.cast_into::<PyCapsule>().ok()?;
        if !cap.is_valid_checked(Some(EXCHANGE_NAME)) {
            return None;
        }
        let ptr = cap.pointer_checked(Some(EXCHANGE_NAME)).ok()?;
        // SAFETY: a valid capsule of that name holds a `DLPackExchangeAPI` that lives as long
        // as the capsule (a static structure of the producer's library, in practice), which is
        // kept for the process below when the API is usable.
        let api = unsafe { ExchangeApi::from_raw(ptr) }?;
        // The function pointers stay valid while the capsule (and the producer's library)
        // does: keep the capsule.
        std::mem::forget(cap.unbind());
        Some(Exchange {
            api,
            ty: ty.clone().unbind(),
        })
    }

    /// `f` of the fields of `obj`'s tensor through `dltensor_from_py_object_no_sync`, read in
    /// place (the per-launch path: they are not moved per array); `None` when `obj` is not an
    /// instance of the API's type, the producer refused (its exception is discarded: the
    /// caller falls back to a Python-level protocol, which raises the producer's own error),
    /// or the tensor has more than `MAX_NDIM` axes, no shape, or an address beyond 64 bits.
    #[inline]
    pub fn view_with<R>(&self, obj: &Bound<'_, PyAny>, f: impl FnOnce(&Fields) -> R) -> Option<R> {
        let py = obj.py();
        if !obj.is_instance(self.ty.bind(py)).unwrap_or(false) {
            let _ = PyErr::take(py);
            return None;
        }
        let usable = |v: &Fields| (v.axes().is_some() && v.ptr().is_some()).then(|| f(v));
        // SAFETY: attached to the interpreter (`obj` is bound), and `obj` is an instance of
        // the producer's type (checked above).
        match unsafe { self.api.view_with(obj.as_ptr().cast(), usable) } {
            Ok(r) => r,
            Err(_) => {
                let _ = PyErr::take(py);
                None
            }
        }
    }

    /// The producer's current work stream on `device` (`0` for its default stream).
    ///
    /// # Errors
    ///
    /// The producer's exception (an unknown device, …).
    pub fn current_stream(&self, py: Python<'_>, device: DLDevice) -> PyResult<u64> {
        // SAFETY: attached to the interpreter (`py`).
        unsafe { self.api.current_stream(device) }.map_err(|_| {
            PyErr::take(py).unwrap_or_else(|| {
                PyRuntimeError::new_err(
                    "the producer's current_work_stream failed without an exception",
                )
            })
        })
    }
}
