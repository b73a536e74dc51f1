//! DLPack: the C structures (as in `dlpack.h` 1.x), their validation into an [`ArrayDesc`]
//! (the consumer), and the managed tensors ferrocuda exports (the producer). A binding only
//! moves the pointers in and out of its capsules; the C structures and every unsafe operation
//! on them are the `ffi` module's.
//!
//! # Consumer
//!
//! A producer's managed tensor, taken from its capsule (`"dltensor_versioned"` or
//! `"dltensor"`, renamed to `"used_…"` by the taker as the protocol demands), is owned by a
//! [`ManagedTensor`], which calls the producer's deleter exactly once when dropped.
//! [`ManagedTensor::describe`] describes it as an [`ArrayDesc`] with no stream: for CUDA the
//! producer orders its pending work before the consumer's stream inside `__dlpack__`.
//!
//! Accepted tensors: device type CUDA (2) or CUDA managed (13); `lanes == 1`; integer,
//! unsigned, float (16/32/64 bits), bfloat16, bool (8 bits) and complex (64/128 bits) element
//! types; at most [`MAX_NDIM`] axes; strides in elements (NULL = C order); `byte_offset` added
//! to `data`. A versioned tensor with the read-only flag gives a read-only array; a major
//! version other than 1 is refused (its deleter is still called, when the owner drops). Errors
//! name the DLPack field (`__dlpack__['shape']: …`); the caller adds the argument.
//!
//! # Producer
//!
//! [`export`] builds a managed tensor over an array whose context holds an owner (a binding's
//! strong reference to its array object, so the memory outlives every consumer), the extents
//! and the strides (in elements); its deleter drops them. Versioned (DLPack 1.0, with the
//! read-only flag of a read-only array) or not, as the consumer asked.
//!
//! # Exchange API
//!
//! [`ExchangeApi`] is the consumer side of DLPack's C exchange API (`DLPackExchangeAPI`,
//! DLPack ≥ 1.2): a producer type's `__dlpack_c_exchange_api__` capsule of C functions that
//! view an object's tensor without building a capsule ([`ExchangeApi::view`], the tensor's
//! [`Fields`]) and report the producer's current stream. torch exports it on `torch.Tensor`
//! (2.11 does).

mod ffi;

pub use ffi::{
    code, CurrentWorkStream, DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned,
    DLPackExchangeAPI, DLPackExchangeAPIHeader, DLPackVersion, DLTensor, DLTensorFromPyObject,
    ExchangeApi, Fields, ManagedTensor, Refused, EXCHANGE_ATTR, EXCHANGE_NAME, FLAG_READ_ONLY,
    KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED, NAME, NAME_V, USED_NAME, USED_NAME_V,
};

use super::cai::ArrayDesc;
use crate::error::{Error, Key, Protocol, Result};
use ferrocuda_abi::{layout, DType, MAX_NDIM};

fn bad(msg: impl Into<std::borrow::Cow<'static, str>>) -> Error {
    Error::value(msg)
}

/// The element type of a DLPack data type (the element-type table's DLPack codes).
///
/// # Errors
///
/// `Type` for vector types (`lanes != 1`) and codes or sizes without a ferrocuda element
/// type.
pub fn dtype_of(t: DLDataType) -> Result<DType> {
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

/// Describes a tensor's fields as an [`ArrayDesc`] (no stream), by the consumer's rules (see
/// the [module documentation](self)). Errors name the field (their protocol is the CAI's
/// until the caller reports them under DLPack, as [`ManagedTensor::describe`] does).
///
/// # Errors
///
/// `Value` naming `device` (not a CUDA device), `ndim`, `shape`, `strides` or `byte_offset`;
/// `Type` naming `dtype`; the descriptor's own rules ([`ArrayDesc::from_parts`]).
pub fn describe(f: &Fields, readonly: bool) -> Result<ArrayDesc> {
    match f.device.device_type {
        KDL_CUDA | KDL_CUDA_MANAGED => {}
        other => {
            let name = match other {
                KDL_CPU => " (CPU)",
                KDL_CUDA_HOST => " (CUDA host)",
                _ => "",
            };
            return Err(bad(format!(
                "the DLPack tensor is on device type {other}{name}, not a CUDA device"
            ))
            .with_key(Key::Device));
        }
    }
    let dtype = dtype_of(f.dtype).map_err(|e| e.with_key(Key::Dtype))?;
    let ndim = usize::try_from(f.ndim)
        .map_err(|_| bad(format!("ndim {} is negative", f.ndim)).with_key(Key::Ndim))?;
    if ndim > MAX_NDIM {
        return Err(
            bad(format!("{ndim} axes; at most {} are supported", MAX_NDIM)).with_key(Key::Shape),
        );
    }
    if ndim > 0 && !f.has_shape {
        return Err(bad("shape is NULL").with_key(Key::Shape));
    }
    let mut shape = [0usize; MAX_NDIM];
    let mut elem = [0isize; MAX_NDIM];
    let given = f.strides();
    for (d, &n) in f.shape().iter().enumerate() {
        shape[d] = usize::try_from(n)
            .map_err(|_| bad(format!("shape[{d}] = {n} is negative")).with_key(Key::Shape))?;
        if let Some(s) = given {
            elem[d] = s[d] as isize;
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
    let ptr = f.ptr().ok_or_else(|| {
        bad(format!(
            "data {:#x} + byte_offset {} overflows",
            f.data, f.byte_offset
        ))
        .with_key(Key::ByteOffset)
    })?;
    let strides = given.is_some().then_some(&strides[..ndim]);
    ArrayDesc::from_parts(dtype, &shape[..ndim], strides, ptr, readonly, None)
}

impl ManagedTensor {
    /// The tensor as an [`ArrayDesc`] with no stream ([`describe`]; read-only when a versioned
    /// tensor's flags say so). Errors name their field under [`Protocol::DLPack`]
    /// (`__dlpack__['version']: …`).
    ///
    /// # Errors
    ///
    /// `Value` naming `version` for a major version other than 1; [`describe`]'s.
    pub fn describe(&self) -> Result<ArrayDesc> {
        let described = match self.fields() {
            Some((f, readonly)) => describe(&f, readonly),
            None => {
                let v = self
                    .version()
                    .unwrap_or(DLPackVersion { major: 0, minor: 0 });
                Err(bad(format!(
                    "DLPack version {}.{} is not supported (ferrocuda reads major version 1)",
                    v.major, v.minor
                ))
                .with_key(Key::Version))
            }
        };
        described.map_err(|e| e.under_protocol(Protocol::DLPack))
    }
}

/// Exports the array `desc` on CUDA device `device` as a managed tensor that keeps `owner`
/// alive until its deleter runs: versioned (`"dltensor_versioned"`, DLPack 1.0, flagged
/// read-only for a read-only array) or not (`"dltensor"`). Strides are given in elements,
/// `byte_offset` is 0.
///
/// # Errors
///
/// `Value` when a stride is not a multiple of the item size (DLPack counts elements) or the
/// device ordinal does not fit DLPack's `int`.
pub fn export(
    desc: &ArrayDesc,
    device: usize,
    versioned: bool,
    owner: Box<dyn Send>,
) -> Result<ManagedTensor> {
    let shape: Box<[i64]> = desc.shape().iter().map(|&n| n as i64).collect();
    let mut elem = [0isize; MAX_NDIM];
    layout::element_strides(
        desc.shape(),
        desc.byte_strides(),
        desc.itemsize(),
        &mut elem,
    )
    .map_err(|d| {
        bad(format!(
            "strides[{d}] is not a multiple of the item size: DLPack counts elements"
        ))
    })?;
    let strides: Box<[i64]> = elem[..desc.ndim()].iter().map(|&s| s as i64).collect();
    let device_id =
        i32::try_from(device).map_err(|_| bad(format!("device {device} out of range")))?;
    let device = DLDevice {
        device_type: KDL_CUDA,
        device_id,
    };
    let flags = versioned.then_some(if desc.readonly() { FLAG_READ_ONLY } else { 0 });
    Ok(ManagedTensor::exported(
        owner,
        device,
        dl_dtype(desc.dtype()),
        desc.ptr(),
        shape,
        strides,
        flags,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use std::ffi::c_void;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its drops (an exported tensor's owner).
    struct Owner(Arc<AtomicUsize>);

    impl Drop for Owner {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn strided_desc() -> ArrayDesc {
        // A (2, 3) float32 array, transposed view of a (3, 2) one: strides 4 and 8 bytes.
        ArrayDesc::from_parts(DType::F32, &[2, 3], Some(&[4, 8]), 0x1000, true, None).unwrap()
    }

    #[test]
    fn an_export_reads_back_as_the_array_and_releases_its_owner_once() {
        for versioned in [false, true] {
            let drops = Arc::new(AtomicUsize::new(0));
            let d = strided_desc();
            let t = export(&d, 3, versioned, Box::new(Owner(drops.clone()))).unwrap();
            assert_eq!(t.is_versioned(), versioned);
            let (f, ro) = t.fields().unwrap();
            assert_eq!(
                f.device,
                DLDevice {
                    device_type: KDL_CUDA,
                    device_id: 3
                }
            );
            assert_eq!(f.shape(), &[2, 3]);
            assert_eq!(f.strides(), Some(&[1i64, 2][..]));
            // The read-only flag travels only in the versioned structure.
            assert_eq!(ro, versioned);
            let back = t.describe().unwrap();
            assert_eq!(back.shape(), d.shape());
            assert_eq!(back.byte_strides(), d.byte_strides());
            assert_eq!(back.ptr(), d.ptr());
            assert_eq!(back.dtype(), DType::F32);
            assert_eq!(back.readonly(), versioned);
            // Ownership through a raw pointer (a capsule) and back.
            let (ptr, v) = t.into_raw();
            assert_eq!(drops.load(Ordering::SeqCst), 0);
            // SAFETY: the tensor just given up, owned by nothing else.
            drop(unsafe { ManagedTensor::from_raw(ptr, v) });
            assert_eq!(drops.load(Ordering::SeqCst), 1);
        }
    }

    #[test]
    fn strides_that_split_elements_are_not_exported() {
        let d = ArrayDesc::from_parts(DType::F32, &[2], Some(&[6]), 0x1000, false, None).unwrap();
        let e = export(&d, 0, true, Box::new(())).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value);
        assert_eq!(
            e.to_string(),
            "strides[0] is not a multiple of the item size: DLPack counts elements"
        );
    }

    /// A producer's tensor with a deleter that counts its calls.
    static DELETED: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn count_delete(m: *mut DLManagedTensorVersioned) {
        DELETED.fetch_add(1, Ordering::SeqCst);
        // SAFETY: made by `producer` below with `Box`, deleted once.
        drop(unsafe { Box::from_raw(m) });
    }

    fn producer(major: u32, device_type: i32, shape: &mut [i64]) -> ManagedTensor {
        let m = Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major, minor: 3 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(count_delete),
            flags: 0,
            dl_tensor: DLTensor {
                data: 0x2000 as *mut c_void,
                device: DLDevice {
                    device_type,
                    device_id: 0,
                },
                ndim: shape.len() as i32,
                dtype: dl_dtype(DType::I16),
                shape: shape.as_mut_ptr(),
                strides: std::ptr::null_mut(),
                byte_offset: 8,
            },
        });
        let ptr = std::ptr::NonNull::from(Box::leak(m)).cast();
        // SAFETY: a live versioned tensor, owned by nothing else; `shape` outlives it (the
        // callers drop the tensor first).
        unsafe { ManagedTensor::from_raw(ptr, true) }
    }

    #[test]
    fn a_producers_tensor_is_described_or_refused_naming_its_field() {
        let before = DELETED.load(Ordering::SeqCst);
        let mut shape = [4i64, 5];
        let t = producer(1, KDL_CUDA_MANAGED, &mut shape);
        let d = t.describe().unwrap();
        assert_eq!((d.shape(), d.ptr()), (&[4usize, 5][..], 0x2008));
        assert_eq!(d.byte_strides(), &[10, 2]);
        assert!(d.stream().is_none());
        drop(t);
        let t = producer(1, KDL_CPU, &mut shape);
        let e = t.describe().unwrap_err();
        assert_eq!(
            e.to_string(),
            "__dlpack__['device']: the DLPack tensor is on device type 1 (CPU), not a CUDA device"
        );
        drop(t);
        let t = producer(2, KDL_CUDA, &mut shape);
        assert_eq!(
            t.describe().unwrap_err().to_string(),
            "__dlpack__['version']: DLPack version 2.3 is not supported (ferrocuda reads major \
             version 1)"
        );
        drop(t);
        let mut negative = [3i64, -1];
        let t = producer(1, KDL_CUDA, &mut negative);
        assert_eq!(
            t.describe().unwrap_err().to_string(),
            "__dlpack__['shape']: shape[1] = -1 is negative"
        );
        drop(t);
        // Each deleter ran once, the refused version's too.
        assert_eq!(DELETED.load(Ordering::SeqCst) - before, 4);
    }
    /// A producer's exchange API, faked: `view` and `view_with` read the same fields (shape and
    /// strides copied from the producer's arrays), and a refusal is `Err`.
    #[test]
    fn an_exchange_api_view_reads_the_producer_s_fields() {
        static SHAPE: [i64; 3] = [4, 5, 6];
        static STRIDES: [i64; 3] = [30, 6, 1];
        unsafe extern "C" fn fill(obj: *mut c_void, out: *mut DLTensor) -> std::ffi::c_int {
            if obj.is_null() {
                return -1;
            }
            // SAFETY: `out` is the caller's writable DLTensor.
            unsafe {
                (*out).data = 0x1000 as *mut c_void;
                (*out).device = DLDevice {
                    device_type: KDL_CUDA,
                    device_id: 1,
                };
                (*out).ndim = 3;
                (*out).dtype = DLDataType {
                    code: 2,
                    bits: 32,
                    lanes: 1,
                };
                (*out).shape = SHAPE.as_ptr().cast_mut();
                (*out).strides = STRIDES.as_ptr().cast_mut();
                (*out).byte_offset = 16;
            }
            0
        }
        unsafe extern "C" fn stream(_: i32, _: i32, out: *mut *mut c_void) -> std::ffi::c_int {
            // SAFETY: `out` is the caller's writable pointer.
            unsafe { *out = 0x77 as *mut c_void };
            0
        }
        let api = DLPackExchangeAPI {
            header: DLPackExchangeAPIHeader {
                version: DLPackVersion { major: 1, minor: 2 },
                prev_api: std::ptr::null_mut(),
            },
            managed_tensor_allocator: std::ptr::null(),
            managed_tensor_from_py_object_no_sync: std::ptr::null(),
            managed_tensor_to_py_object_no_sync: std::ptr::null(),
            dltensor_from_py_object_no_sync: Some(fill),
            current_work_stream: Some(stream),
        };
        let ptr = std::ptr::NonNull::from(&api).cast::<c_void>();
        // SAFETY: a whole structure of version 1.2 with both functions, alive for the test.
        let x = unsafe { ExchangeApi::from_raw(ptr) }.expect("a usable API");
        let obj = std::ptr::dangling_mut::<c_void>();
        // SAFETY: the fake functions need no interpreter and read no object.
        let (f, seen) = unsafe {
            (
                x.view(obj).unwrap(),
                x.view_with(obj, |f| {
                    (f.shape().to_vec(), f.strides().map(<[i64]>::to_vec))
                }),
            )
        };
        assert_eq!(f.shape(), [4, 5, 6]);
        assert_eq!(f.strides(), Some(&[30i64, 6, 1][..]));
        assert_eq!((f.ptr(), f.device.device_id), (Some(0x1010), 1));
        assert_eq!(seen, Ok((vec![4, 5, 6], Some(vec![30, 6, 1]))));
        // SAFETY: as above.
        unsafe {
            assert_eq!(x.view(std::ptr::null_mut()).err(), Some(Refused));
            assert_eq!(x.view_with(std::ptr::null_mut(), |_| ()), Err(Refused));
            assert_eq!(x.current_stream(f.device), Ok(0x77));
        }
    }
}
