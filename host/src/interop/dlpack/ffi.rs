//! The DLPack C structures, as in `dlpack.h` 1.x — the tensor, the managed tensors of both
//! capsule kinds, the exchange API of DLPack ≥ 1.2 — and every unsafe operation on them:
//! reading a tensor's fields while they are valid ([`Fields`]), owning a managed tensor and
//! calling its deleter once ([`ManagedTensor`]), building and deleting the managed tensors
//! ferrocuda exports, and calling a producer's exchange functions ([`ExchangeApi`]).
//!
//! Nothing here knows Python: a binding finds the pointers (in capsules, on a producer's
//! type) and hands them over, with the preconditions each `unsafe fn` states.

use std::ffi::{c_int, c_void, CStr};
use std::ptr::NonNull;

use ferrocuda_abi::MAX_NDIM;

/// `DLDeviceType::kDLCPU`.
pub const KDL_CPU: i32 = 1;
/// `DLDeviceType::kDLCUDA`.
pub const KDL_CUDA: i32 = 2;
/// `DLDeviceType::kDLCUDAHost` (page-locked host memory).
pub const KDL_CUDA_HOST: i32 = 3;
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

/// The capsule name of an unversioned managed tensor.
pub const NAME: &CStr = c"dltensor";
/// The name a consumer gives an unversioned capsule it took.
pub const USED_NAME: &CStr = c"used_dltensor";
/// The capsule name of a versioned managed tensor.
pub const NAME_V: &CStr = c"dltensor_versioned";
/// The name a consumer gives a versioned capsule it took.
pub const USED_NAME_V: &CStr = c"used_dltensor_versioned";

/// The name of the type attribute holding a producer's exchange API.
pub const EXCHANGE_ATTR: &str = "__dlpack_c_exchange_api__";
/// The name of the capsule holding a `DLPackExchangeAPI`.
pub const EXCHANGE_NAME: &CStr = c"dlpack_exchange_api";

/// `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    /// `DLDeviceType` (a C enum: `int`).
    pub device_type: i32,
    /// Device ordinal.
    pub device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    unsafe extern "C" fn(py_object: *mut c_void, out: *mut DLTensor) -> c_int;

/// `DLPackCurrentWorkStream`: the producer's current stream on a device (NULL for the default
/// one); 0, or -1 with a Python exception set.
pub type CurrentWorkStream = unsafe extern "C" fn(
    device_type: i32,
    device_id: i32,
    out_current_stream: *mut *mut c_void,
) -> c_int;

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

// ---------------------------------------------------------------------------------------
// A tensor's fields.

/// A `DLTensor`'s fields, copied out while the tensor was valid. The extents and strides are
/// read only when `ndim` is in `1..=`[`MAX_NDIM`] and `shape` is not NULL (else the arrays
/// hold zeros and [`shape`](Self::shape) is empty).
#[derive(Clone, Copy, Debug)]
pub struct Fields {
    /// Where the data lives.
    pub device: DLDevice,
    /// The element type.
    pub dtype: DLDataType,
    /// `ndim`, as given.
    pub ndim: i32,
    /// Whether `shape` was a pointer (not NULL).
    pub has_shape: bool,
    /// Whether `strides` was a pointer (NULL: C order).
    pub strided: bool,
    /// `data`, as an address.
    pub data: u64,
    /// `byte_offset`.
    pub byte_offset: u64,
    shape: [i64; MAX_NDIM],
    strides: [i64; MAX_NDIM],
}

impl Fields {
    /// The number of axes when `ndim` is in `0..=`[`MAX_NDIM`] and the extents could be
    /// read (`shape` is not NULL, or there is no axis); `None` otherwise.
    pub fn axes(&self) -> Option<usize> {
        let n = usize::try_from(self.ndim).ok().filter(|&n| n <= MAX_NDIM)?;
        (n == 0 || self.has_shape).then_some(n)
    }

    /// The extents (empty when they were not read: see [`axes`](Self::axes)).
    pub fn shape(&self) -> &[i64] {
        &self.shape[..self.axes().unwrap_or(0)]
    }

    /// The strides in elements (`None`: C order); as long as [`shape`](Self::shape).
    pub fn strides(&self) -> Option<&[i64]> {
        self.strided
            .then(|| &self.strides[..self.axes().unwrap_or(0)])
    }

    /// `data + byte_offset`, when it fits 64 bits.
    pub fn ptr(&self) -> Option<u64> {
        self.data.checked_add(self.byte_offset)
    }

    /// Copies the fields of `t`.
    ///
    /// # Safety
    ///
    /// When `t.ndim` is in `1..=MAX_NDIM` and `t.shape` is not NULL:
    ///
    /// 1. `t.shape` points at `t.ndim` readable integers;
    /// 2. `t.strides` is NULL or points at `t.ndim` readable integers.
    #[inline]
    unsafe fn read(t: &DLTensor) -> Fields {
        let mut f = Fields {
            device: t.device,
            dtype: t.dtype,
            ndim: t.ndim,
            has_shape: !t.shape.is_null(),
            strided: !t.strides.is_null(),
            data: t.data as u64,
            byte_offset: t.byte_offset,
            shape: [0; MAX_NDIM],
            strides: [0; MAX_NDIM],
        };
        let n = usize::try_from(t.ndim).unwrap_or(0).min(MAX_NDIM + 1);
        if n == 0 || n > MAX_NDIM || !f.has_shape {
            return f;
        }
        for d in 0..n {
            // SAFETY: `shape` (and `strides` when not NULL) hold `ndim` integers (1., 2.).
            unsafe {
                f.shape[d] = *t.shape.add(d);
                if f.strided {
                    f.strides[d] = *t.strides.add(d);
                }
            }
        }
        f
    }
}

// ---------------------------------------------------------------------------------------
// Owned managed tensors.

/// A managed tensor ferrocuda owns — a producer's, taken from its capsule, or one
/// [`export`](super::export) built — released by calling its deleter once, when dropped.
#[derive(Debug)]
pub struct ManagedTensor {
    ptr: NonNull<c_void>,
    versioned: bool,
}

// SAFETY: the DLPack protocol allows the deleter to be called from any thread; the owner only
// holds the pointer until then. (A binding whose producers' deleters need an interpreter lock
// drops its tensors while holding it.)
unsafe impl Send for ManagedTensor {}
// SAFETY: shared access only reads the structure, which nothing writes while it is owned.
unsafe impl Sync for ManagedTensor {}

impl ManagedTensor {
    /// Takes ownership of the managed tensor at `ptr`: a `DLManagedTensorVersioned` when
    /// `versioned`, else a `DLManagedTensor`.
    ///
    /// # Safety
    ///
    /// 1. `ptr` points at a live managed tensor of that kind;
    /// 2. ownership passes to the result: nothing else calls its deleter, and nothing frees
    ///    it before the result is dropped (which calls the deleter);
    /// 3. its tensor is valid while it lives: `shape` (and `strides` when not NULL) point at
    ///    `ndim` integers, as DLPack requires (for a versioned tensor, when its major version
    ///    is 1: the layout of other versions is not read).
    pub unsafe fn from_raw(ptr: NonNull<c_void>, versioned: bool) -> ManagedTensor {
        ManagedTensor { ptr, versioned }
    }

    /// Gives up ownership without calling the deleter: the pointer and whether the tensor is
    /// versioned, for [`from_raw`](Self::from_raw) later (a capsule that holds it).
    pub fn into_raw(self) -> (NonNull<c_void>, bool) {
        let raw = (self.ptr, self.versioned);
        std::mem::forget(self);
        raw
    }

    /// Whether it is a `DLManagedTensorVersioned` (else a `DLManagedTensor`).
    pub fn is_versioned(&self) -> bool {
        self.versioned
    }

    /// The structure's version; `None` for an unversioned tensor.
    pub fn version(&self) -> Option<DLPackVersion> {
        // SAFETY: a live versioned tensor (`from_raw`'s 1.); `version` is its first field in
        // every major version.
        self.versioned
            .then(|| unsafe { (*self.ptr.as_ptr().cast::<DLManagedTensorVersioned>()).version })
    }

    /// The tensor's fields and whether it is read-only; `None` for a versioned tensor of a
    /// major version other than 1 (whose layout is not known).
    pub fn fields(&self) -> Option<(Fields, bool)> {
        if self.versioned {
            if self.version()?.major != 1 {
                return None;
            }
            // SAFETY: a live versioned tensor of major version 1 (`from_raw`'s 1., 3.).
            let m = unsafe { &*self.ptr.as_ptr().cast::<DLManagedTensorVersioned>() };
            // SAFETY: its tensor is valid while it is owned (`from_raw`'s 3.).
            let f = unsafe { Fields::read(&m.dl_tensor) };
            Some((f, m.flags & FLAG_READ_ONLY != 0))
        } else {
            // SAFETY: a live unversioned tensor (`from_raw`'s 1.).
            let m = unsafe { &*self.ptr.as_ptr().cast::<DLManagedTensor>() };
            // SAFETY: as above.
            Some((unsafe { Fields::read(&m.dl_tensor) }, false))
        }
    }

    /// A managed tensor over `data` on `device` whose context keeps `owner`, `shape` and
    /// `strides` (elements, as long as `shape`) alive until its deleter runs: versioned
    /// (DLPack 1.0) with `flags` when they are given, else unversioned (which has none).
    pub(super) fn exported(
        owner: Box<dyn Send>,
        device: DLDevice,
        dtype: DLDataType,
        data: u64,
        shape: Box<[i64]>,
        strides: Box<[i64]>,
        flags: Option<u64>,
    ) -> ManagedTensor {
        let mut ctx = Box::new(ExportCtx {
            _owner: owner,
            shape,
            strides,
        });
        let tensor = DLTensor {
            data: data as usize as *mut c_void,
            device,
            ndim: ctx.shape.len() as i32,
            dtype,
            shape: ctx.shape.as_mut_ptr(),
            strides: ctx.strides.as_mut_ptr(),
            byte_offset: 0,
        };
        let ctx = Box::into_raw(ctx).cast::<c_void>();
        let ptr: NonNull<c_void> = match flags {
            Some(flags) => NonNull::from(Box::leak(Box::new(DLManagedTensorVersioned {
                version: DLPackVersion { major: 1, minor: 0 },
                manager_ctx: ctx,
                deleter: Some(delete_versioned),
                flags,
                dl_tensor: tensor,
            })))
            .cast(),
            None => NonNull::from(Box::leak(Box::new(DLManagedTensor {
                dl_tensor: tensor,
                manager_ctx: ctx,
                deleter: Some(delete_unversioned),
            })))
            .cast(),
        };
        ManagedTensor {
            ptr,
            versioned: flags.is_some(),
        }
    }
}

impl Drop for ManagedTensor {
    fn drop(&mut self) {
        if self.versioned {
            let m = self.ptr.as_ptr().cast::<DLManagedTensorVersioned>();
            // SAFETY: a live managed tensor owned here, released only here (`from_raw`'s 1.,
            // 2.). The `deleter` field's position is ABI-stable across DLPack major versions.
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

/// What an exported tensor keeps alive.
struct ExportCtx {
    _owner: Box<dyn Send>,
    shape: Box<[i64]>,
    strides: Box<[i64]>,
}

/// The deleter of unversioned tensors made by [`ManagedTensor::exported`].
///
/// # Safety
///
/// 1. `m` is NULL or a tensor made by [`ManagedTensor::exported`] that was not deleted yet.
unsafe extern "C" fn delete_unversioned(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` and its context were made by `exported` with `Box` and are released
    // exactly once, here (the DLPack contract: the deleter is called once). An owner that
    // needs an interpreter lock to drop defers it (PyO3's reference pool does).
    unsafe {
        let m = Box::from_raw(m);
        drop(Box::from_raw(m.manager_ctx.cast::<ExportCtx>()));
    }
}

/// The deleter of versioned tensors made by [`ManagedTensor::exported`].
///
/// # Safety
///
/// 1. `m` is NULL or a tensor made by [`ManagedTensor::exported`] that was not deleted yet.
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

// ---------------------------------------------------------------------------------------
// The exchange API (DLPack ≥ 1.2): a producer's C functions, found on its type.

/// The two functions of a producer's exchange API that a consumer needs: a non-owning view
/// of an object's tensor and the producer's current stream — one C call each, where the
/// Python-level protocols (`__dlpack__`, `__cuda_array_interface__`) build objects.
#[derive(Clone, Copy, Debug)]
pub struct ExchangeApi {
    tensor: DLTensorFromPyObject,
    stream: CurrentWorkStream,
}

/// A producer's exchange function refused: it returned non-zero, with a Python exception set
/// (which the caller takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused;

impl ExchangeApi {
    /// The exchange API at `api`: a `DLPackExchangeAPI` of major version 1 and minor version
    /// at least 2 with both functions present; `None` otherwise.
    ///
    /// # Safety
    ///
    /// 1. `api` points at a readable `DLPackExchangeAPIHeader` and, when its version is 1.2 or
    ///    later, at a whole `DLPackExchangeAPI`;
    /// 2. the functions it holds stay callable for as long as the result is used (a binding
    ///    keeps the capsule, and with it the producer's library, alive for the process).
    pub unsafe fn from_raw(api: NonNull<c_void>) -> Option<ExchangeApi> {
        // SAFETY: the header is readable (1.); only it is read before the version is known.
        let v = unsafe { api.cast::<DLPackExchangeAPIHeader>().as_ref() }.version;
        if v.major != 1 || v.minor < 2 {
            return None;
        }
        // SAFETY: a structure of version 1.2 or later is whole (1.).
        let api = unsafe { api.cast::<DLPackExchangeAPI>().as_ref() };
        Some(ExchangeApi {
            tensor: api.dltensor_from_py_object_no_sync?,
            stream: api.current_work_stream?,
        })
    }

    /// The fields of `object`'s tensor through `dltensor_from_py_object_no_sync` (shape and
    /// strides copied while they are valid). `Err` when the producer refused: its Python
    /// exception is set.
    ///
    /// # Safety
    ///
    /// 1. The calling thread is attached to the Python interpreter (holds the GIL);
    /// 2. `object` is a live Python object of the type this API came from.
    pub unsafe fn view(&self, object: *mut c_void) -> Result<Fields, Refused> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.view_with(object, |f| *f) }
    }

    /// [`view`](Self::view), with `f` reading the fields where they were read (a launch's
    /// per-array path: the fields, over 500 bytes, are not moved across calls).
    ///
    /// # Safety
    ///
    /// As [`view`](Self::view).
    #[inline]
    pub unsafe fn view_with<R>(
        &self,
        object: *mut c_void,
        f: impl FnOnce(&Fields) -> R,
    ) -> Result<R, Refused> {
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
        // SAFETY: attached to the interpreter (1.), `object` of the producer's type (2.), and
        // `t` is a writable DLTensor on this stack frame.
        let rc = unsafe { (self.tensor)(object, &mut t) };
        if rc != 0 {
            return Err(Refused);
        }
        // SAFETY: the producer's `shape` (and `strides` when not NULL) hold `ndim` integers,
        // valid until control returns to Python — it has not.
        let fields = unsafe { Fields::read(&t) };
        Ok(f(&fields))
    }

    /// The producer's current work stream on `device` (`0` for its default stream). `Err`
    /// when the producer refused (an unknown device, …): its Python exception is set, if it
    /// set one.
    ///
    /// # Safety
    ///
    /// 1. The calling thread is attached to the Python interpreter (holds the GIL).
    pub unsafe fn current_stream(&self, device: DLDevice) -> Result<u64, Refused> {
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: attached to the interpreter (1.); `out` is a writable pointer on this stack
        // frame.
        let rc = unsafe { (self.stream)(device.device_type, device.device_id, &mut out) };
        if rc != 0 {
            return Err(Refused);
        }
        Ok(out as u64)
    }
}
