//! DLPack: the C structures (as in `dlpack.h` 1.x) and the consumer (importing a producer's
//! capsule). The producer (`DeviceArray.__dlpack__`) is `arrays::export`.
//!
//! # Consumer
//!
//! [`import`] calls `obj.__dlpack__(stream=<launch stream>, max_version=(1, 0))` — falling
//! back to `__dlpack__(stream=…)` and `__dlpack__()` for producers that raise `TypeError` for
//! the newer keywords — so that the *producer* orders its pending work before the consumer's
//! stream (the DLPack rule for CUDA). The capsule (`"dltensor_versioned"` or `"dltensor"`) is
//! renamed to `"used_…"` as the protocol demands, and the managed tensor is owned by a
//! [`DlpackOwner`] that calls the producer's deleter exactly once when dropped. The resulting
//! [`ArrayDesc`] has no stream: ordering already happened inside `__dlpack__`.
//!
//! Accepted tensors: device type CUDA (2) or CUDA managed (13); `lanes == 1`; integer,
//! unsigned, float (16/32/64 bits), bfloat16, bool (8 bits) and complex (64/128 bits) element
//! types;
//! strides in elements (NULL = C order); `byte_offset` added to `data`. A versioned tensor
//! with the read-only flag gives a read-only array; a major version other than 1 is refused
//! (its deleter is still called).
//!
//! # Exchange API
//!
//! [`ExchangeApi`] is the consumer side of DLPack's C exchange API (`DLPackExchangeAPI`,
//! DLPack ≥ 1.2): a producer type's `__dlpack_c_exchange_api__` capsule of C functions that
//! view an object's tensor without building a capsule and report the producer's current
//! stream. torch exports it on `torch.Tensor` (2.11 does); the torch fast path (`read::fast`)
//! reads tensors through it when present.
//!

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use ferrocuda_abi::{layout, DType, MAX_NDIM};
use ferrocuda_host::{ArrayDesc, Error, Key, Protocol};
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyDict};

use crate::errors::{annotate, to_py};
use crate::util::type_name;

/// `DLDeviceType::kDLCPU`.
pub const KDL_CPU: i32 = 1;
/// `DLDeviceType::kDLCUDA`.
pub const KDL_CUDA: i32 = 2;
/// `DLDeviceType::kDLCUDAManaged`.
pub const KDL_CUDA_MANAGED: i32 = 13;

/// `DLDataTypeCode` values.
pub mod code {
    /// Signed integer.
    pub const INT: u8 = 0;
    /// Unsigned integer.
    pub const UINT: u8 = 1;
    /// IEEE float.
    pub const FLOAT: u8 = 2;
    /// bfloat16.
    pub const BFLOAT: u8 = 4;
    /// Complex (two floats).
    pub const COMPLEX: u8 = 5;
    /// Boolean.
    pub const BOOL: u8 = 6;
}

/// `DLPACK_FLAG_BITMASK_READ_ONLY`.
pub const FLAG_READ_ONLY: u64 = 1 << 0;

/// `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLDevice {
    /// `DLDeviceType` (a C enum: `int`).
    pub device_type: i32,
    /// Device ordinal.
    pub device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLDataType {
    /// `DLDataTypeCode`.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes (1 for scalars).
    pub lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// Base pointer (add `byte_offset`).
    pub data: *mut c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// Number of axes.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for C order.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensor` (the unversioned, pre-1.0 capsule content, `"dltensor"`).
#[repr(C)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// Producer's context.
    pub manager_ctx: *mut c_void,
    /// Releases the tensor (may be NULL).
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLPackVersion {
    /// Major version (ABI break when it changes).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLManagedTensorVersioned` (DLPack ≥ 1.0, `"dltensor_versioned"`).
#[repr(C)]
pub struct DLManagedTensorVersioned {
    /// Version of the structure.
    pub version: DLPackVersion,
    /// Producer's context.
    pub manager_ctx: *mut c_void,
    /// Releases the tensor (may be NULL).
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*`.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

// ---------------------------------------------------------------------------------------
// The exchange API (DLPack ≥ 1.2): a producer's C functions, found on its type.

/// `DLPackExchangeAPIHeader`.
#[repr(C)]
pub struct DLPackExchangeAPIHeader {
    /// The DLPack version the structure follows.
    pub version: DLPackVersion,
    /// An older API the producer also offers (may be NULL).
    pub prev_api: *mut DLPackExchangeAPIHeader,
}

/// `DLPackDLTensorFromPyObjectNoSync`: fills a non-owning `DLTensor` of a Python object of
/// the producer's type, valid until control returns to Python; 0, or -1 with a Python
/// exception set.
pub type DLTensorFromPyObject =
    unsafe extern "C" fn(py_object: *mut c_void, out: *mut DLTensor) -> std::ffi::c_int;

/// `DLPackCurrentWorkStream`: the producer's current stream on a device (NULL for the default
/// one); 0, or -1 with a Python exception set.
pub type CurrentWorkStream = unsafe extern "C" fn(
    device_type: i32,
    device_id: i32,
    out_current_stream: *mut *mut c_void,
) -> std::ffi::c_int;

/// `DLPackExchangeAPI`. The three members ferrocuda does not call are kept opaque.
#[repr(C)]
pub struct DLPackExchangeAPI {
    /// Version and older API.
    pub header: DLPackExchangeAPIHeader,
    /// `managed_tensor_allocator` (not used).
    pub managed_tensor_allocator: *const c_void,
    /// `managed_tensor_from_py_object_no_sync` (not used).
    pub managed_tensor_from_py_object_no_sync: *const c_void,
    /// `managed_tensor_to_py_object_no_sync` (not used).
    pub managed_tensor_to_py_object_no_sync: *const c_void,
    /// `dltensor_from_py_object_no_sync`.
    pub dltensor_from_py_object_no_sync: Option<DLTensorFromPyObject>,
    /// `current_work_stream`.
    pub current_work_stream: Option<CurrentWorkStream>,
}

/// The name of the type attribute holding a producer's exchange API.
pub const EXCHANGE_ATTR: &str = "__dlpack_c_exchange_api__";
/// The name of the capsule holding a `DLPackExchangeAPI`.
pub const EXCHANGE_NAME: &CStr = c"dlpack_exchange_api";

/// The two functions of a producer's exchange API that a consumer needs: a non-owning view
/// of an object's tensor and the producer's current stream — one C call each, where the
/// Python-level protocols (`__dlpack__`, `__cuda_array_interface__`) build objects.
#[derive(Clone, Copy, Debug)]
pub struct ExchangeApi {
    tensor: DLTensorFromPyObject,
    stream: CurrentWorkStream,
}

/// What [`ExchangeApi::view`] copies out of a producer's `DLTensor` (shape and strides go to
/// the caller's arrays).
#[derive(Clone, Copy, Debug)]
pub struct Viewed {
    /// Where the data lives.
    pub device: DLDevice,
    /// The element type.
    pub dtype: DLDataType,
    /// Number of axes (at most [`MAX_NDIM`]).
    pub ndim: usize,
    /// Whether strides were given (else C order).
    pub strided: bool,
    /// `data + byte_offset`.
    pub ptr: u64,
}

impl ExchangeApi {
    /// The exchange API of the instances of `ty`: its `__dlpack_c_exchange_api__` attribute, a
    /// capsule named `"dlpack_exchange_api"` holding a `DLPackExchangeAPI` of major version
    /// 1 and minor version at least 2 with both functions present; `None` otherwise (and
    /// for anything that raises). The capsule is kept alive for the process.
    pub fn of_type(ty: &Bound<'_, pyo3::types::PyType>) -> Option<ExchangeApi> {
        let py = ty.py();
        let cap = ty.getattr(intern!(py, EXCHANGE_ATTR)).ok()?;
        let cap = cap.cast_into::<PyCapsule>().ok()?;
        if !cap.is_valid_checked(Some(EXCHANGE_NAME)) {
            return None;
        }
        let ptr = cap.pointer_checked(Some(EXCHANGE_NAME)).ok()?;
        // SAFETY: a valid capsule of that name holds a `DLPackExchangeAPI` that lives as long
        // as the capsule (a static structure of the producer's library, in practice); only
        // the header is read before its version is known.
        let api = unsafe { &*ptr.as_ptr().cast::<DLPackExchangeAPI>() };
        let v = api.header.version;
        if v.major != 1 || v.minor < 2 {
            return None;
        }
        let found = ExchangeApi {
            tensor: api.dltensor_from_py_object_no_sync?,
            stream: api.current_work_stream?,
        };
        // The function pointers stay valid while the capsule (and the producer's library)
        // does: keep the capsule.
        std::mem::forget(cap.unbind());
        Some(found)
    }

    /// Views `obj` (an instance of the type this API came from) through
    /// `dltensor_from_py_object_no_sync`, copying its shape and strides (in elements) into
    /// `shape` and `strides` while they are valid. `Ok(None)` when the producer refused
    /// (its exception is discarded: the caller falls back to a Python-level protocol, which
    /// raises the producer's own error) or the tensor has more than [`MAX_NDIM`] axes.
    pub fn view(
        &self,
        obj: &Bound<'_, PyAny>,
        shape: &mut [i64; MAX_NDIM],
        strides: &mut [i64; MAX_NDIM],
    ) -> Option<Viewed> {
        let mut t = DLTensor {
            data: std::ptr::null_mut(),
            device: DLDevice {
                device_type: 0,
                device_id: 0,
            },
            ndim: 0,
            dtype: DLDataType {
                code: 0,
                bits: 0,
                lanes: 0,
            },
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        // SAFETY: the GIL is held (`obj`), `obj` is of the producer's type (the caller's
        // contract, stated above), and `t` is a writable DLTensor on this stack frame.
        let rc = unsafe { (self.tensor)(obj.as_ptr().cast(), &mut t) };
        if rc != 0 {
            let _ = PyErr::take(obj.py());
            return None;
        }
        let ndim = usize::try_from(t.ndim).ok().filter(|&n| n <= MAX_NDIM)?;
        if ndim > 0 && t.shape.is_null() {
            return None;
        }
        for d in 0..ndim {
            // SAFETY: the producer's `shape` (and `strides` when not NULL) hold `ndim`
            // integers, valid until control returns to Python — it has not.
            unsafe {
                shape[d] = *t.shape.add(d);
                if !t.strides.is_null() {
                    strides[d] = *t.strides.add(d);
                }
            }
        }
        Some(Viewed {
            device: t.device,
            dtype: t.dtype,
            ndim,
            strided: !t.strides.is_null(),
            ptr: (t.data as u64).checked_add(t.byte_offset)?,
        })
    }

    /// The producer's current work stream on `device` (`0` for its default stream).
    ///
    /// # Errors
    ///
    /// The producer's exception (an unknown device, …).
    pub fn current_stream(&self, py: Python<'_>, device: DLDevice) -> PyResult<u64> {
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: the GIL is held (`py`); `out` is a writable pointer on this stack frame.
        let rc = unsafe { (self.stream)(device.device_type, device.device_id, &mut out) };
        if rc != 0 {
            return Err(PyErr::take(py).unwrap_or_else(|| {
                pyo3::exceptions::PyRuntimeError::new_err(
                    "the producer's current_work_stream failed without an exception",
                )
            }));
        }
        Ok(out as u64)
    }
}

/// The capsule name of an unversioned managed tensor.
pub const NAME: &CStr = c"dltensor";
/// The name a consumer gives an unversioned capsule it took.
pub const USED_NAME: &CStr = c"used_dltensor";
/// The capsule name of a versioned managed tensor.
pub const NAME_V: &CStr = c"dltensor_versioned";
/// The name a consumer gives a versioned capsule it took.
pub const USED_NAME_V: &CStr = c"used_dltensor_versioned";

/// A consumed managed tensor; drops it by calling the producer's deleter once.
#[derive(Debug)]
pub struct DlpackOwner {
    ptr: NonNull<c_void>,
    versioned: bool,
}

// SAFETY: the DLPack protocol allows the deleter to be called from any thread; the owner only
// holds the pointer until then. The crate drops owners only while attached to Python, so
// producers whose deleters need the GIL get it.
unsafe impl Send for DlpackOwner {}
// SAFETY: shared access never touches the pointer.
unsafe impl Sync for DlpackOwner {}

impl Drop for DlpackOwner {
    fn drop(&mut self) {
        if self.versioned {
            let m = self.ptr.as_ptr().cast::<DLManagedTensorVersioned>();
            // SAFETY: a live managed tensor taken from a renamed capsule, released only here.
            // The `deleter` field's position is ABI-stable across DLPack major versions.
            unsafe {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
        } else {
            let m = self.ptr.as_ptr().cast::<DLManagedTensor>();
            // SAFETY: as above, for the unversioned structure.
            unsafe {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
        }
    }
}

fn bad(msg: impl Into<std::borrow::Cow<'static, str>>) -> Error {
    Error::value(msg)
}

/// The element type of a DLPack data type (the element-type table's DLPack codes).
pub fn dtype_of(t: DLDataType) -> Result<DType, Error> {
    if t.lanes != 1 {
        return Err(Error::type_error(format!(
            "DLPack vector types (lanes = {}) are not supported",
            t.lanes
        )));
    }
    DType::from_dlpack(t.code, t.bits).ok_or_else(|| {
        Error::type_error(format!(
            "unsupported DLPack element type (code {}, {} bits)",
            t.code, t.bits
        ))
    })
}

/// The DLPack data type of an element type.
pub fn dl_dtype(d: DType) -> DLDataType {
    DLDataType {
        code: d.dlpack_code(),
        bits: (d.itemsize() * 8) as u8,
        lanes: 1,
    }
}

/// Describes a `DLTensor` as an [`ArrayDesc`] (no stream).
///
/// # Safety
///
/// `t` must be a valid tensor of a live managed tensor: `shape` (and `strides` when not NULL)
/// point at `ndim` integers.
unsafe fn describe_tensor(t: &DLTensor, readonly: bool) -> Result<ArrayDesc, Error> {
    match t.device.device_type {
        KDL_CUDA | KDL_CUDA_MANAGED => {}
        other => {
            let name = match other {
                KDL_CPU => " (CPU)",
                3 => " (CUDA host)",
                _ => "",
            };
            return Err(bad(format!(
                "the DLPack tensor is on device type {other}{name}, not a CUDA device"
            ))
            .with_key(Key::Device));
        }
    }
    let dtype = dtype_of(t.dtype).map_err(|e| e.with_key(Key::Dtype))?;
    let ndim = usize::try_from(t.ndim)
        .map_err(|_| bad(format!("ndim {} is negative", t.ndim)).with_key(Key::Ndim))?;
    if ndim > MAX_NDIM {
        return Err(
            bad(format!("{ndim} axes; at most {} are supported", MAX_NDIM)).with_key(Key::Shape),
        );
    }
    if ndim > 0 && t.shape.is_null() {
        return Err(bad("shape is NULL").with_key(Key::Shape));
    }
    let mut shape = [0usize; MAX_NDIM];
    let mut elem = [0isize; MAX_NDIM];
    for d in 0..ndim {
        // SAFETY: `shape` holds `ndim` integers (caller's contract).
        let n = unsafe { *t.shape.add(d) };
        shape[d] = usize::try_from(n)
            .map_err(|_| bad(format!("shape[{d}] = {n} is negative")).with_key(Key::Shape))?;
        if !t.strides.is_null() {
            // SAFETY: `strides` holds `ndim` integers when not NULL.
            elem[d] = unsafe { *t.strides.add(d) } as isize;
        }
    }
    let mut strides = [0isize; MAX_NDIM];
    layout::byte_strides(&elem[..ndim], dtype.itemsize(), &mut strides).map_err(|d| {
        bad(format!(
            "strides[{d}] = {} elements overflows in bytes",
            elem[d]
        ))
        .with_key(Key::Strides)
    })?;
    let ptr = (t.data as u64).checked_add(t.byte_offset).ok_or_else(|| {
        bad(format!(
            "data {:#x} + byte_offset {} overflows",
            t.data as u64, t.byte_offset
        ))
        .with_key(Key::ByteOffset)
    })?;
    let strides = (!t.strides.is_null()).then_some(&strides[..ndim]);
    ArrayDesc::from_parts(dtype, &shape[..ndim], strides, ptr, readonly, None)
}

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
) -> PyResult<(ArrayDesc, DlpackOwner)> {
    let py = obj.py();
    let named = |e: Error| {
        to_py(
            py,
            e.under_protocol(Protocol::DLPack).with_arg(arg.to_owned()),
        )
    };
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
    let owner = DlpackOwner { ptr, versioned };
    let desc = if versioned {
        // SAFETY: the capsule named "dltensor_versioned" holds a DLManagedTensorVersioned,
        // alive until its deleter runs (when `owner` drops).
        let m = unsafe { &*ptr.as_ptr().cast::<DLManagedTensorVersioned>() };
        if m.version.major != 1 {
            return Err(named(
                bad(format!(
                    "DLPack version {}.{} is not supported (ferrocuda reads major version 1)",
                    m.version.major, m.version.minor
                ))
                .with_key(Key::Version),
            ));
        }
        let ro = m.flags & FLAG_READ_ONLY != 0;
        // SAFETY: a live versioned tensor of a supported major version.
        unsafe { describe_tensor(&m.dl_tensor, ro) }
    } else {
        // SAFETY: the capsule named "dltensor" holds a DLManagedTensor, alive until its
        // deleter runs.
        let m = unsafe { &*ptr.as_ptr().cast::<DLManagedTensor>() };
        // SAFETY: a live tensor.
        unsafe { describe_tensor(&m.dl_tensor, false) }
    };
    match desc {
        Ok(d) => Ok((d, owner)),
        Err(e) => Err(named(e)),
    }
}
