//! State spaces: how device code tells the code generator that a pointer addresses global
//! memory, and which loads may use the read-only data cache.
//!
//! Rust has no address spaces, and array parameters reach a kernel inside by-value structs
//! ([`Slice`](crate::Slice) and the other `#[repr(C)]` parameter types), so LLVM sees their
//! data pointers as plain integers turned into generic pointers: every access through them
//! would be a generic `ld`/`st` (SASS `LD.E`/`ST.E`), which must test at run time which window
//! the address falls in. Two marker functions, declared here and never defined, carry what the
//! kernel knows to `ferrocuda-builder`, whose IR rewrite replaces every call to them:
//!
//! * `%q = call ptr @__ferrocuda_global(ptr %p)` ([`GLOBAL_SYMBOL`]) becomes
//!   `addrspacecast ptr %p to ptr addrspace(1)` followed by a cast back to `ptr`: the same
//!   address, now known to be global, so LLVM's address-space inference turns the accesses
//!   through `%q` into `ld.global`/`st.global` (SASS `LDG`/`STG`);
//! * `@__ferrocuda_global_nc` ([`GLOBAL_NC_SYMBOL`]) is rewritten the same way, and every
//!   plain load through its result (directly, at an offset, or through a `phi`/`select` of such
//!   pointers) gets `!invariant.load`: `ld.global.nc` (SASS `LDG.E.CONSTANT`), the read-only
//!   data cache.
//!
//! The markers are declared `ffi_const` (no memory access), so until the rewrite the optimizer
//! may move, merge or drop them like any pure function, and never treats them as a barrier. A
//! module that still refers to a marker after the rewrite (its address taken, for instance) is
//! a build error.
//!
//! `#[kernel]` passes the data pointer of every array parameter through [`global`] before the
//! body runs (the host checks, before every launch, that each array argument is device
//! memory, and a zero-size array's null pointer is never dereferenced). [`global_nc`] is behind
//! the `get_nc_unchecked` accessors, whose contract the caller keeps. On the host both are the
//! identity.

/// The symbol of the global-memory marker.
pub const GLOBAL_SYMBOL: &str = "__ferrocuda_global";

/// The symbol of the read-only (non-coherent) global-memory marker.
pub const GLOBAL_NC_SYMBOL: &str = "__ferrocuda_global_nc";

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    #[link_name = "__ferrocuda_global"]
    #[unsafe(ffi_const)]
    fn global_marker(p: *mut u8) -> *mut u8;

    #[link_name = "__ferrocuda_global_nc"]
    #[unsafe(ffi_const)]
    fn global_nc_marker(p: *const u8) -> *const u8;
}

/// `p`, known to the code generator to address global memory (device memory, or host memory
/// mapped for the device): accesses through the result are `ld.global`/`st.global`.
///
/// # Safety
///
/// `p` must address global memory, or never be dereferenced (a zero-size array's null
/// pointer). An access through the result to memory of another state space (shared, local,
/// the parameter space) is undefined behaviour.
#[inline(always)]
pub unsafe fn global<T>(p: *mut T) -> *mut T {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the marker is rewritten into address-space casts of the same address.
    return unsafe { global_marker(p.cast()).cast() };
    #[cfg(not(target_arch = "nvptx64"))]
    p
}

/// `p`, known to address global memory that no thread of the launch writes: loads through
/// the result are `ld.global.nc`, through the read-only data cache (CUDA's `__ldg`).
///
/// # Safety
///
/// As [`global`], and no thread of the running launch may write the memory read through the
/// result while the launch runs — not through this pointer, and not through another
/// parameter or pointer that aliases it (the host lets an output be the same array as an
/// input). The read-only cache is not coherent with such writes: a load may return stale data.
#[inline(always)]
pub unsafe fn global_nc<T>(p: *const T) -> *const T {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the marker is rewritten into address-space casts of the same address.
    return unsafe { global_nc_marker(p.cast()).cast() };
    #[cfg(not(target_arch = "nvptx64"))]
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_the_identity_on_the_host() {
        let mut x = [1u32, 2];
        let p = x.as_mut_ptr();
        // SAFETY: a valid host pointer; the host forms only return it.
        unsafe {
            assert_eq!(global(p), p);
            assert_eq!(global_nc(p.cast_const()), p.cast_const());
            assert_eq!(*global_nc(p.add(1).cast_const()), 2);
        }
    }
}
