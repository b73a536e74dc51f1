//! Launches: the launch attributes ([`LaunchAttrs`]), `cuLaunchKernel`, `cuLaunchKernelEx`
//! (with the cooperative fallback on drivers without it), and the cluster occupancy query,
//! which takes a launch's configuration.

use super::{check, exported, FunctionHandle, Named, StreamHandle};
use crate::error::{Error, ErrorKind, Result};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::ffi::c_void;
use std::sync::OnceLock;

/// What a launch asks of the driver beyond grid, block and shared memory: the launch
/// attributes of `cuLaunchKernelEx`, which [`Kernel::prepare`](crate::Kernel::prepare) decides
/// from the kernel's declarations ([`Prepared::attributes`](crate::Prepared::attributes)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LaunchAttrs {
    /// A plain launch (`cuLaunchKernel`).
    #[default]
    Plain,
    /// A cooperative launch (`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`): every block of the grid is
    /// resident at once, or the launch fails.
    Cooperative,
    /// A launch in thread-block clusters of this shape
    /// (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`; sm_90 and newer).
    Cluster([u32; 3]),
}

/// A `CUlaunchAttribute` of `attrs` (`None` for a plain launch).
fn launch_attribute(attrs: LaunchAttrs) -> Option<sys::CUlaunchAttribute> {
    use sys::CUlaunchAttributeID::*;
    // SAFETY: an all-zero attribute is valid (`CU_LAUNCH_ATTRIBUTE_IGNORE`, a zeroed value
    // union); the fields set below are the documented ones for each attribute.
    let mut a: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    match attrs {
        LaunchAttrs::Plain => return None,
        LaunchAttrs::Cooperative => {
            a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            a.value.cooperative = 1;
        }
        LaunchAttrs::Cluster([x, y, z]) => {
            a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            a.value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x, y, z };
        }
    }
    Some(a)
}

/// A `CUlaunchConfig` of grid, block, shared memory and stream, with `attrs` (null when
/// none).
fn launch_config(
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    s: StreamHandle,
    attrs: Option<&mut sys::CUlaunchAttribute>,
) -> sys::CUlaunchConfig {
    let (attrs, num_attrs) = match attrs {
        Some(a) => (a as *mut sys::CUlaunchAttribute, 1),
        None => (std::ptr::null_mut(), 0),
    };
    sys::CUlaunchConfig {
        gridDimX: grid[0],
        gridDimY: grid[1],
        gridDimZ: grid[2],
        blockDimX: block[0],
        blockDimY: block[1],
        blockDimZ: block[2],
        sharedMemBytes: shared_mem_bytes,
        hStream: s.0,
        attrs,
        numAttrs: num_attrs,
    }
}

/// Whether the driver exports `cuLaunchKernelEx` (CUDA 11.8 and newer drivers), looked up
/// once.
fn launch_kernel_ex_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    exported(&PRESENT, b"cuLaunchKernelEx")
}

/// `cuOccupancyMaxActiveClusters`: how many clusters of `cluster` blocks — each block of
/// `block` threads with `shared_mem_bytes` of dynamic shared memory — the device can run at
/// once for a launch of `grid` (0: the kernel cannot be launched with that cluster).
///
/// # Errors
///
/// [`ErrorKind::Unsupported`] when the driver lacks the call (before CUDA 12.0); a driver
/// error otherwise.
///
/// # Safety
///
/// 1. `f` comes from [`module_function`](super::module_function) in the current context.
pub(crate) unsafe fn max_active_clusters(
    f: FunctionHandle,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    cluster: [u32; 3],
) -> Result<u32> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    if !exported(&PRESENT, b"cuOccupancyMaxActiveClusters") {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "the CUDA driver has no cuOccupancyMaxActiveClusters (CUDA 12.0 and newer drivers \
             launch thread-block clusters)",
        ));
    }
    let mut attr = launch_attribute(LaunchAttrs::Cluster(cluster));
    let config = launch_config(
        grid,
        block,
        shared_mem_bytes,
        StreamHandle(std::ptr::null_mut()),
        attr.as_mut(),
    );
    let mut n: std::ffi::c_int = 0;
    // SAFETY: the caller's contract; `config` and its one attribute outlive the call; out-
    // pointer to a local.
    let r = unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, f.0, &config) };
    check(r, "cuOccupancyMaxActiveClusters").map(|()| n.max(0) as u32)
}

/// `cuLaunchKernel`.
///
/// # Safety
///
/// `f` is a function of a module loaded in the current context; `params` holds one pointer
/// per kernel parameter, each at a value of that parameter's size and layout, valid for the
/// call; the memory the parameters describe stays valid until the kernel has completed.
#[inline]
pub(crate) unsafe fn launch_kernel(
    f: FunctionHandle,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    s: StreamHandle,
    params: &mut [*mut c_void],
) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        cu::launch_kernel(
            f.0,
            (grid[0], grid[1], grid[2]),
            (block[0], block[1], block[2]),
            shared_mem_bytes,
            s.0,
            params,
        )
    }
    .named("cuLaunchKernel")
}

/// A launch with attributes: `cuLaunchKernel` for [`LaunchAttrs::Plain`], else
/// `cuLaunchKernelEx` with the attribute — or, for a cooperative launch on a driver without
/// `cuLaunchKernelEx`, `cuLaunchCooperativeKernel`.
///
/// # Errors
///
/// [`ErrorKind::Unsupported`] for a cluster launch on a driver without `cuLaunchKernelEx`; the
/// driver's error otherwise (a cooperative grid too large to be resident:
/// `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE`).
///
/// # Safety
///
/// 1. `f` is a function of a module loaded in the current context;
/// 2. `params` holds one pointer per kernel parameter, each at a value of that parameter's
///    size and layout, valid for the call;
/// 3. the memory the parameters describe stays valid until the kernel has completed.
#[inline]
pub(crate) unsafe fn launch_kernel_with(
    f: FunctionHandle,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    s: StreamHandle,
    params: &mut [*mut c_void],
    attrs: LaunchAttrs,
) -> Result<()> {
    let Some(mut attr) = launch_attribute(attrs) else {
        // SAFETY: the caller's contract.
        return unsafe { launch_kernel(f, grid, block, shared_mem_bytes, s, params) };
    };
    if !launch_kernel_ex_present() {
        if attrs != LaunchAttrs::Cooperative {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the CUDA driver has no cuLaunchKernelEx (CUDA 11.8 and newer drivers launch \
                 thread-block clusters)",
            ));
        }
        // SAFETY: the caller's contract; one pointer per kernel parameter.
        let r = unsafe {
            sys::cuLaunchCooperativeKernel(
                f.0,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_mem_bytes,
                s.0,
                params.as_mut_ptr(),
            )
        };
        return check(r, "cuLaunchCooperativeKernel");
    }
    let config = launch_config(grid, block, shared_mem_bytes, s, Some(&mut attr));
    // SAFETY: the caller's contract; `config` and its one attribute outlive the call; one
    // pointer per kernel parameter, no `extra` options.
    let r =
        unsafe { sys::cuLaunchKernelEx(&config, f.0, params.as_mut_ptr(), std::ptr::null_mut()) };
    check(r, "cuLaunchKernelEx")
}
