//! Memory and copies: free memory, stream-ordered allocation (plain and from a pool), memset,
//! host-to-device and device-to-host copies, mapped host memory, and the tensor maps (TMA
//! descriptors) that describe device memory to a kernel.

use super::{check, cuda_error, Named, StreamHandle};
use crate::error::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use ferrocuda_abi::DType;
use std::ffi::c_void;

/// `cuMemGetInfo`: free and total memory of the current context's device.
pub(crate) fn mem_get_info() -> Result<(usize, usize)> {
    cu::mem_get_info().named("cuMemGetInfo")
}

/// `cuMemAllocAsync` of `bytes` on `s`.
///
/// # Safety
///
/// `s` is a live stream of the current context (or a sentinel); the memory is used in stream
/// order after it.
pub(crate) unsafe fn mem_alloc_async(bytes: usize, s: StreamHandle) -> Result<u64> {
    // SAFETY: the caller's contract.
    unsafe { cu::malloc_async(s.0, bytes) }.named("cuMemAllocAsync")
}

/// `cuMemFreeAsync`.
///
/// # Safety
///
/// `ptr` was allocated by [`mem_alloc_async`] and is not used after the free in stream order.
pub(crate) unsafe fn mem_free_async(ptr: u64, s: StreamHandle) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::free_async(ptr, s.0) }.named("cuMemFreeAsync")
}

/// `cuMemPoolCreate` of a device-memory pool on device `ordinal` (pinned device memory, no
/// export handles), with its release threshold set to `keep` bytes: memory freed back to the
/// pool stays reserved up to that much across synchronizations, so stream-ordered
/// allocations after a sync do not go back to the operating system.
pub(crate) fn mem_pool_create(ordinal: usize, keep: u64) -> Result<sys::CUmemoryPool> {
    // SAFETY: an all-zero `CUmemPoolProps` is valid (no handle types, no security attributes,
    // no maximum size); the fields set below are the documented ones for device memory.
    let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
    props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
    props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.__bindgen_anon_1.id = ordinal as i32;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: out-pointer to a local; `props` is a valid description.
    let r = unsafe { sys::cuMemPoolCreate(&mut pool, &props) };
    check(r, "cuMemPoolCreate")?;
    let mut threshold = keep;
    // SAFETY: `pool` was just created; the attribute takes a `cuuint64_t`.
    let r = unsafe {
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
    };
    check(r, "cuMemPoolSetAttribute")?;
    Ok(pool)
}

/// `cuMemAllocFromPoolAsync` of `bytes` from `pool` on `s`.
///
/// # Safety
///
/// `pool` comes from [`mem_pool_create`] on the current context's device; `s` is a live
/// stream of the current context (or a sentinel); the memory is used in stream order after
/// it.
pub(crate) unsafe fn mem_alloc_from_pool_async(
    bytes: usize,
    pool: sys::CUmemoryPool,
    s: StreamHandle,
) -> Result<u64> {
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: the caller's contract; out-pointer to a local.
    let r = unsafe { sys::cuMemAllocFromPoolAsync(&mut ptr, bytes, pool, s.0) };
    check(r, "cuMemAllocFromPoolAsync").map(|()| ptr)
}

/// `cuMemsetD8Async`: `bytes` bytes at `ptr` set to `value`, on `s`.
///
/// # Safety
///
/// `ptr..ptr + bytes` is device memory of the current context that nothing else uses
/// concurrently in stream order; `s` is a live stream (or a sentinel).
pub(crate) unsafe fn memset_d8_async(
    ptr: u64,
    value: u8,
    bytes: usize,
    s: StreamHandle,
) -> Result<()> {
    // SAFETY: the caller's contract.
    check(
        unsafe { sys::cuMemsetD8Async(ptr, value, bytes, s.0) },
        "cuMemsetD8Async",
    )
}

/// `cuMemcpyHtoDAsync` of `src` to device address `dst`.
///
/// # Safety
///
/// `dst` holds `src.len()` bytes; `src` stays unchanged until the copy completes (callers
/// synchronize `s` before returning).
pub(crate) unsafe fn memcpy_htod_async(dst: u64, src: &[u8], s: StreamHandle) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::memcpy_htod_async(dst, src, s.0) }.named("cuMemcpyHtoDAsync")
}

/// `cuMemcpyDtoHAsync` of `bytes` bytes from device address `src` to `dst`.
///
/// # Safety
///
/// `dst` is valid for writes of `bytes` bytes until the copy completes (callers synchronize
/// `s` before returning); `src` holds `bytes` bytes.
pub(crate) unsafe fn memcpy_dtoh_async(
    dst: *mut u8,
    src: u64,
    bytes: usize,
    s: StreamHandle,
) -> Result<()> {
    // SAFETY: the caller's contract.
    let r = unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, s.0) };
    check(r, "cuMemcpyDtoHAsync")
}

/// `cuMemHostAlloc(DEVICEMAP)` of `bytes` zeroed bytes of page-locked host memory mapped
/// into the current context's address space: its host and device addresses. Never freed by
/// ferrocuda (callers keep it for the life of the process).
pub(crate) fn mem_host_alloc_mapped(bytes: usize) -> Result<(*mut u8, u64)> {
    let mut host: *mut c_void = std::ptr::null_mut();
    // SAFETY: out-pointer to a local.
    let r = unsafe { sys::cuMemHostAlloc(&mut host, bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP) };
    check(r, "cuMemHostAlloc")?;
    // SAFETY: `host` is a fresh allocation of `bytes` bytes.
    unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, bytes) };
    let mut mapped: sys::CUdeviceptr = 0;
    // SAFETY: `host` was allocated with DEVICEMAP in the current context.
    let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut mapped, host, 0) };
    check(r, "cuMemHostGetDevicePointer")?;
    Ok((host.cast(), mapped))
}

/// A tensor map's element type as the driver takes it ([`tensor_map_data_type`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TensorMapDataType(sys::CUtensorMapDataType);

/// A tensor map's swizzle as the driver takes it ([`tensor_map_swizzle`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TensorMapSwizzle(sys::CUtensorMapSwizzle);

/// The driver's element type for `dtype`: integers by their width (the bits are copied, the
/// sign never matters to a copy), floats by their kind.
pub(crate) fn tensor_map_data_type(dtype: DType) -> Option<TensorMapDataType> {
    use sys::CUtensorMapDataType::*;
    Some(TensorMapDataType(match dtype {
        DType::Bool | DType::I8 | DType::U8 => CU_TENSOR_MAP_DATA_TYPE_UINT8,
        DType::I16 | DType::U16 => CU_TENSOR_MAP_DATA_TYPE_UINT16,
        DType::U32 => CU_TENSOR_MAP_DATA_TYPE_UINT32,
        DType::I32 => CU_TENSOR_MAP_DATA_TYPE_INT32,
        DType::U64 => CU_TENSOR_MAP_DATA_TYPE_UINT64,
        DType::I64 => CU_TENSOR_MAP_DATA_TYPE_INT64,
        DType::F16 => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::BF16 => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::F32 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        DType::F64 => CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        DType::C64 | DType::C128 => return None,
    }))
}

/// The driver's swizzle of `bytes` (0, 32, 64 or 128) bytes.
pub(crate) fn tensor_map_swizzle(bytes: u32) -> Option<TensorMapSwizzle> {
    use sys::CUtensorMapSwizzle::*;
    Some(TensorMapSwizzle(match bytes {
        0 => CU_TENSOR_MAP_SWIZZLE_NONE,
        32 => CU_TENSOR_MAP_SWIZZLE_32B,
        64 => CU_TENSOR_MAP_SWIZZLE_64B,
        128 => CU_TENSOR_MAP_SWIZZLE_128B,
        _ => return None,
    }))
}

/// `cuTensorMapEncodeTiled`: the TMA descriptor (a `CUtensorMap`) of a tiled tensor, its
/// bytes into the start of `out`; returns how many (the descriptor's size, at most
/// `out.len()`). Dimensions, strides and box are innermost first, as the driver takes them;
/// `strides` has `dims.len() - 1` entries (bytes, for dimensions 1..).
#[allow(clippy::too_many_arguments)]
pub(crate) fn tensor_map_encode_tiled(
    out: &mut [u8],
    dtype: TensorMapDataType,
    address: u64,
    dims: &[u64],
    strides: &[u64],
    box_dims: &[u32],
    swizzle: TensorMapSwizzle,
) -> Result<usize> {
    let rank = dims.len();
    if rank == 0 || strides.len() + 1 != rank || box_dims.len() != rank {
        return Err(Error::value(
            "a tensor map needs matching dimensions, strides and box",
        ));
    }
    let element_strides = [1u32; 5];
    // SAFETY: `CUtensorMap` is 16 (or 8) plain words; all zeros is a valid value to overwrite.
    let mut map: sys::CUtensorMap = unsafe { std::mem::zeroed() };
    // SAFETY: every pointer points at `rank` (strides: `rank - 1`) readable values, `map` is a
    // writable `CUtensorMap`; the driver only encodes (no memory access at `address`).
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            dtype.0,
            rank as u32,
            address as usize as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            box_dims.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle.0,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(cuda_error(r, "cuTensorMapEncodeTiled"));
    }
    let bytes = std::mem::size_of_val(&map).min(out.len());
    // SAFETY: `bytes` bytes of a plain-data value, copied into `out`, which holds them.
    unsafe {
        std::ptr::copy_nonoverlapping((&raw const map).cast::<u8>(), out.as_mut_ptr(), bytes)
    };
    Ok(bytes)
}
