//! DLPack export (`DeviceArray.__dlpack__`, the producer): [`export`] builds a managed tensor
//! over a ferrocuda array. The tensor's context holds a strong reference to the Python array
//! object, so the memory outlives every consumer; the deleter drops it. The capsule's
//! destructor calls the deleter only if no consumer took the tensor (the capsule was not
//! renamed).

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use ferrocuda_abi::layout;
use ferrocuda_host::ArrayDesc;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::read::dlpack::{
    dl_dtype, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
    FLAG_READ_ONLY, KDL_CUDA, NAME, NAME_V, USED_NAME, USED_NAME_V,
};

/// What an exported tensor keeps alive.
struct ExportCtx {
    _owner: Py<PyAny>,
    _shape: Box<[i64]>,
    _strides: Box<[i64]>,
}

/// The deleter of unversioned tensors made by [`export`].
///
/// # Safety
///
/// `m` is NULL or a tensor made by [`export`] that was not deleted yet.
unsafe extern "C" fn delete_unversioned(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` and its context were created by `export` with Box::into_raw and are
    // released exactly once, here (the DLPack contract: the deleter is called once).
    // Dropping the Py reference without the GIL is deferred by PyO3's reference pool.
    unsafe {
        let m = Box::from_raw(m);
        drop(Box::from_raw(m.manager_ctx.cast::<ExportCtx>()));
    }
}

/// The deleter of versioned tensors made by [`export`].
///
/// # Safety
///
/// `m` is NULL or a tensor made by [`export`] that was not deleted yet.
unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    if m.is_null() {
        return;
    }
    // SAFETY: as in `delete_unversioned`.
    unsafe {
        let m = Box::from_raw(m);
        drop(Box::from_raw(m.manager_ctx.cast::<ExportCtx>()));
    }
}

/// The capsule destructor: deletes the tensor unless a consumer renamed (took) it.
///
/// # Safety
///
/// Called by Python, with the GIL, on a capsule made by [`export`].
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the GIL held on a live capsule. The pending exception (if
    // any) is saved and restored around the calls, as the DLPack reference implementation does.
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
        if ffi::PyCapsule_IsValid(capsule, NAME_V.as_ptr()) != 0 {
            let p = ffi::PyCapsule_GetPointer(capsule, NAME_V.as_ptr());
            delete_versioned(p.cast());
        } else if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) != 0 {
            let p = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr());
            delete_unversioned(p.cast());
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
    let shape: Box<[i64]> = desc.shape().iter().map(|&n| n as i64).collect();
    let mut elem = [0isize; ferrocuda_abi::MAX_NDIM];
    layout::element_strides(
        desc.shape(),
        desc.byte_strides(),
        desc.itemsize(),
        &mut elem,
    )
    .map_err(|d| {
        PyValueError::new_err(format!(
            "strides[{d}] is not a multiple of the item size: DLPack counts elements"
        ))
    })?;
    let strides: Box<[i64]> = elem[..desc.ndim()].iter().map(|&s| s as i64).collect();
    let device_id = i32::try_from(device)
        .map_err(|_| PyValueError::new_err(format!("device {device} out of range")))?;
    let mut ctx = Box::new(ExportCtx {
        _owner: owner,
        _shape: shape,
        _strides: strides,
    });
    let tensor = DLTensor {
        data: desc.ptr() as usize as *mut c_void,
        device: DLDevice {
            device_type: KDL_CUDA,
            device_id,
        },
        ndim: desc.ndim() as i32,
        dtype: dl_dtype(desc.dtype()),
        shape: ctx._shape.as_mut_ptr(),
        strides: ctx._strides.as_mut_ptr(),
        byte_offset: 0,
    };
    let ctx = Box::into_raw(ctx).cast::<c_void>();
    let (ptr, name): (*mut c_void, &'static CStr) = if versioned {
        let m = Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 0 },
            manager_ctx: ctx,
            deleter: Some(delete_versioned),
            flags: if desc.readonly() { FLAG_READ_ONLY } else { 0 },
            dl_tensor: tensor,
        });
        (Box::into_raw(m).cast(), NAME_V)
    } else {
        let m = Box::new(DLManagedTensor {
            dl_tensor: tensor,
            manager_ctx: ctx,
            deleter: Some(delete_unversioned),
        });
        (Box::into_raw(m).cast(), NAME)
    };
    let Some(nn) = NonNull::new(ptr) else {
        return Err(PyBufferError::new_err("allocation failed"));
    };
    // SAFETY: `nn` points at the managed tensor just built; the destructor deletes it unless
    // a consumer takes it (renames the capsule) and then calls the deleter itself.
    let cap = unsafe {
        PyCapsule::new_with_pointer_and_destructor(py, nn, name, Some(capsule_destructor))
    };
    match cap {
        Ok(c) => Ok(c),
        Err(e) => {
            // SAFETY: the capsule was not created: the tensor is still ours to delete.
            unsafe {
                if versioned {
                    delete_versioned(ptr.cast());
                } else {
                    delete_unversioned(ptr.cast());
                }
            }
            Err(e)
        }
    }
}
