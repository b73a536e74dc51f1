//! Pointer queries: what the driver knows about a pointer, in one call.

use super::cuda_error;
use crate::error::Result;
use cudarc::driver::sys;
use std::ffi::c_void;

/// What the driver knows about a pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerInfo {
    /// `CUmemorytype`: 1 host, 2 device, 3 array, 4 unified; 0 when the driver does not know
    /// the pointer (plain host memory).
    pub memory_type: u32,
    /// Whether it is managed (unified) memory.
    pub managed: bool,
    /// Device the memory lives on.
    pub device: i32,
    /// Start of the allocation that contains the pointer.
    pub range_start: u64,
    /// Size in bytes of that allocation.
    pub range_size: u64,
}

impl PointerInfo {
    /// What the driver says of a pointer it does not know (plain host memory, or garbage).
    const UNKNOWN: PointerInfo = PointerInfo {
        memory_type: 0,
        managed: false,
        device: -1,
        range_start: 0,
        range_size: 0,
    };

    /// `true` for memory a kernel can address: device or managed memory.
    pub fn is_device_accessible(&self) -> bool {
        self.memory_type == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
            || self.memory_type == sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32
            || self.managed
    }
}

/// Memory type, device and allocation range of `ptr` in one `cuPointerGetAttributes` call
/// (what it adds to a launch: BENCHMARKS.md, "Launch overhead"). A pointer the driver does not
/// know is not an error: its memory type is 0.
pub(crate) fn pointer_attributes(ptr: u64) -> Result<PointerInfo> {
    use sys::CUpointer_attribute::*;
    let mut attrs = [
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let mut memory_type: u32 = 0;
    let mut managed: u32 = 0;
    let mut device: i32 = -1;
    let mut start: u64 = 0;
    let mut size: usize = 0;
    let mut data: [*mut c_void; 5] = [
        (&mut memory_type as *mut u32).cast(),
        (&mut managed as *mut u32).cast(),
        (&mut device as *mut i32).cast(),
        (&mut start as *mut u64).cast(),
        (&mut size as *mut usize).cast(),
    ];
    // SAFETY: five attributes, five out-pointers of the documented types, all locals.
    let res = unsafe {
        sys::cuPointerGetAttributes(
            5,
            attrs.as_mut_ptr(),
            data.as_mut_ptr(),
            ptr as sys::CUdeviceptr,
        )
    };
    match res {
        sys::CUresult::CUDA_SUCCESS => Ok(PointerInfo {
            memory_type,
            managed: managed != 0,
            device,
            range_start: start,
            range_size: size as u64,
        }),
        sys::CUresult::CUDA_ERROR_INVALID_VALUE => Ok(PointerInfo::UNKNOWN),
        other => Err(cuda_error(other, "cuPointerGetAttributes")),
    }
}
