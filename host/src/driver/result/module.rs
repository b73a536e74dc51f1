//! Modules and functions: loading PTX and cubins (with the JIT's error log), unloading,
//! globals, functions, their attributes, and occupancy.

use super::{check, FunctionHandle, ModuleHandle, Named};
use crate::error::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::ffi::{c_void, CStr, CString};

/// `cuModuleLoadDataEx` of NUL-terminated PTX into the current context, with the JIT's
/// error log written to `log` (NUL-terminated text, when the load fails).
pub(crate) fn module_load(ptx: &CStr, log: &mut [u8]) -> Result<ModuleHandle> {
    // SAFETY: NUL-terminated PTX text is an image the driver reads to its NUL.
    unsafe { module_load_image(ptx.to_bytes_with_nul(), log) }
}

/// `cuModuleLoadDataEx` of a cubin (an ELF image, read by the driver from its headers, so
/// bytes and not a C string) into the current context, with the error log written to `log`.
pub(crate) fn module_load_cubin(cubin: &[u8], log: &mut [u8]) -> Result<ModuleHandle> {
    const ELF: &[u8] = b"\x7fELF";
    if !cubin.starts_with(ELF) {
        return Err(Error::value(
            "a cubin image does not start with the ELF magic",
        ));
    }
    // The driver reads the ELF headers in place: an image not 8-byte aligned (embedded bytes
    // are only byte-aligned) is copied into one that is.
    if cubin.as_ptr().align_offset(8) != 0 {
        let mut aligned = vec![0u64; cubin.len().div_ceil(8)];
        // SAFETY: `aligned` has at least `cubin.len()` bytes; the two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(cubin.as_ptr(), aligned.as_mut_ptr().cast(), cubin.len())
        };
        // SAFETY: as below, for the copy.
        let copy =
            unsafe { std::slice::from_raw_parts(aligned.as_ptr().cast::<u8>(), cubin.len()) };
        // SAFETY: an ELF image, whose headers give the driver its extent; the copy is the
        // whole file and outlives the call.
        return unsafe { module_load_image(copy, log) };
    }
    // SAFETY: an ELF image, whose headers give the driver its extent; the caller's bytes are
    // the whole file.
    unsafe { module_load_image(cubin, log) }
}

/// # Safety
///
/// `image` is NUL-terminated PTX or a whole cubin/fatbin file.
unsafe fn module_load_image(image: &[u8], log: &mut [u8]) -> Result<ModuleHandle> {
    let mut opts = [
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut vals: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: the caller's image; two JIT options with matching value slots; the log buffer
    // and the image outlive the call.
    let res = unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            image.as_ptr().cast(),
            2,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
        )
    };
    check(res, "cuModuleLoadDataEx").map(|()| ModuleHandle(module))
}

/// `cuModuleUnload` (a module given up before any of its functions was used).
///
/// # Safety
///
/// `module` is a loaded module of the current context that nothing uses any more.
pub(crate) unsafe fn module_unload(module: ModuleHandle) -> Result<()> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::cuModuleUnload(module.0) }, "cuModuleUnload")
}

/// `cuModuleGetGlobal` of `name`: its device address and size, or `None` when the module
/// has no such global.
///
/// # Safety
///
/// `module` is a loaded module of the current context.
pub(crate) unsafe fn module_global(
    module: ModuleHandle,
    name: &CStr,
) -> Result<Option<(u64, usize)>> {
    let (mut dptr, mut size): (sys::CUdeviceptr, usize) = (0, 0);
    // SAFETY: the caller's contract; NUL-terminated name; out-pointers to locals.
    let r = unsafe { sys::cuModuleGetGlobal_v2(&mut dptr, &mut size, module.0, name.as_ptr()) };
    if r == sys::CUresult::CUDA_ERROR_NOT_FOUND {
        return Ok(None);
    }
    check(r, "cuModuleGetGlobal").map(|()| Some((dptr, size)))
}

/// `cuModuleGetFunction`.
///
/// # Safety
///
/// `module` is a loaded module of the current context.
pub(crate) unsafe fn module_function(
    module: ModuleHandle,
    name: &CString,
) -> Result<FunctionHandle> {
    // SAFETY: the caller's contract.
    unsafe { cu::module::get_function(module.0, name.clone()) }
        .named("cuModuleGetFunction")
        .map(FunctionHandle)
}

/// The function attributes ferrocuda reads or sets (`CU_FUNC_ATTRIBUTE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FunctionAttribute {
    /// `MAX_THREADS_PER_BLOCK`.
    MaxThreadsPerBlock,
    /// `SHARED_SIZE_BYTES` (static shared memory).
    SharedSizeBytes,
    /// `MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    MaxDynamicSharedSizeBytes,
    /// `NUM_REGS`.
    NumRegs,
    /// `NON_PORTABLE_CLUSTER_SIZE_ALLOWED`.
    NonPortableClusterSizeAllowed,
}

impl FunctionAttribute {
    fn raw(self) -> sys::CUfunction_attribute {
        use sys::CUfunction_attribute::*;
        match self {
            FunctionAttribute::MaxThreadsPerBlock => CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            FunctionAttribute::SharedSizeBytes => CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            FunctionAttribute::MaxDynamicSharedSizeBytes => {
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            }
            FunctionAttribute::NumRegs => CU_FUNC_ATTRIBUTE_NUM_REGS,
            FunctionAttribute::NonPortableClusterSizeAllowed => {
                CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
            }
        }
    }
}

/// `cuFuncGetAttribute`.
///
/// # Safety
///
/// `f` comes from [`module_function`].
pub(crate) unsafe fn function_attribute(f: FunctionHandle, attr: FunctionAttribute) -> Result<i32> {
    // SAFETY: the caller's contract.
    unsafe { cu::function::get_function_attribute(f.0, attr.raw()) }.named("cuFuncGetAttribute")
}

/// `cuFuncSetAttribute`.
///
/// # Safety
///
/// `f` comes from [`module_function`].
pub(crate) unsafe fn set_function_attribute(
    f: FunctionHandle,
    attr: FunctionAttribute,
    value: i32,
) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { cu::function::set_function_attribute(f.0, attr.raw(), value) }
        .named("cuFuncSetAttribute")
}

/// `cuOccupancyMaxPotentialBlockSize` without dynamic shared memory: the block size (at most
/// `limit` threads; 0: the kernel's maximum) that maximizes the kernel's occupancy.
///
/// # Safety
///
/// `f` comes from [`module_function`].
pub(crate) unsafe fn potential_block_size(f: FunctionHandle, limit: u32) -> Result<u32> {
    let limit = i32::try_from(limit).unwrap_or(i32::MAX);
    // SAFETY: the caller's contract; no block-size-to-shared-memory callback.
    unsafe { cu::occupancy::max_potential_block_size(f.0, None, 0, limit) }
        .named("cuOccupancyMaxPotentialBlockSize")
        .map(|(_, block)| block.max(1) as u32)
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor`: how many blocks of `block` threads, each
/// with `dynamic_shared` bytes of dynamic shared memory, one SM holds at once (0 when not even
/// one fits).
///
/// # Safety
///
/// 1. `f` comes from [`module_function`].
pub(crate) unsafe fn blocks_per_multiprocessor(
    f: FunctionHandle,
    block: u32,
    dynamic_shared: u32,
) -> Result<u32> {
    let block = i32::try_from(block).unwrap_or(i32::MAX);
    // SAFETY: the caller's contract.
    unsafe {
        cu::occupancy::max_active_block_per_multiprocessor(f.0, block, dynamic_shared as usize)
    }
    .named("cuOccupancyMaxActiveBlocksPerMultiprocessor")
    .map(|n| n.max(0) as u32)
}
