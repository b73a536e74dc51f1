//! Loading a module's images into a device: the cubin chosen for the device's compute
//! capability, else the PTX; the functions and their launch limits.

use super::image::{choose_cubin, Image};
use super::signature::Signature;
use crate::driver::result::{self as cu, FunctionAttribute};
use crate::driver::{init, trap, Context, FunctionHandle, ModuleHandle, Relaxed};
use crate::error::{Error, Result};
use ferrocuda_abi::arch::DeviceArch;
use ferrocuda_abi::diag::{TrapRecord, TRAP_RECORD_SYMBOL};
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// What the driver says about one loaded kernel: read once per device, when its module loads
/// (`cuFuncGetAttribute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionLimits {
    /// Most threads per block the kernel can be launched with: the device's limit, lowered by
    /// its registers per thread and by a declared `max_threads` or block
    /// (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`).
    pub max_threads: u32,
    /// Bytes of static shared memory per block (`CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`).
    pub static_shared: u32,
    /// Bytes of dynamic shared memory a launch may ask for without opting in
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` at load: 48 KiB minus the static
    /// shared memory).
    pub dynamic_shared: u32,
    /// Registers per thread (`CU_FUNC_ATTRIBUTE_NUM_REGS`).
    pub registers: u32,
}

/// A loaded function and the launch limits derived from it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Function {
    pub(crate) raw: FunctionHandle,
    /// Default block size (threads) of the 1-D automatic configuration.
    pub(crate) block: u32,
    /// Resident blocks of `block` threads per SM.
    pub(crate) blocks_per_sm: u32,
    /// Threads of the block that maximizes occupancy (`cuOccupancyMaxPotentialBlockSize`):
    /// the size of N-D automatic blocks.
    pub(crate) potential_block: u32,
    pub(crate) limits: FunctionLimits,
}

// SAFETY: a CUfunction handle may be used from any thread (the driver API is thread-safe);
// its module is never unloaded while the `Module` lives.
unsafe impl Send for Function {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Function {}

#[derive(Debug)]
pub(crate) struct Loaded {
    /// The module of each image the device runs (`None`: an image it cannot run).
    _modules: Vec<Option<ModuleHandle>>,
    /// What was loaded: `"sm_90 cubin"` or `"PTX"`, each part's after the base's.
    pub(super) image: String,
    /// Per kernel (manifest order): its function, `None` when the device cannot run the
    /// kernel's image.
    pub(crate) functions: Vec<Option<Function>>,
    /// Per function: the dynamic shared memory (bytes) launches may use now — the load-time
    /// limit, raised by each opt-in ([`Loaded::allow_dynamic_shared`]).
    dynamic_shared: Vec<AtomicU32>,
    /// Occupancy answers of cooperative and cluster launches ([`Loaded::occupancy`]).
    occupancy: Mutex<Vec<(OccupancyKey, u32)>>,
}

/// What an occupancy answer depends on: the function (its index), the block's threads (its
/// shape for clusters), the dynamic shared memory and the cluster shape (zero: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OccupancyKey {
    pub(crate) index: usize,
    pub(crate) block: [u32; 3],
    pub(crate) shared: u32,
    pub(crate) cluster: [u32; 3],
}

/// Most occupancy answers a module keeps (launch shapes of its cooperative and cluster
/// kernels); beyond, the driver is asked each time.
const OCCUPANCY_KEPT: usize = 64;

// SAFETY: CUmodule/CUfunction handles are usable from any thread; they are never mutated
// after loading and the module is never unloaded while the `Module` lives.
unsafe impl Send for Loaded {}
// SAFETY: as above.
unsafe impl Sync for Loaded {}

impl Loaded {
    /// The driver's occupancy answer for `key` — `compute` asks it — kept, so that a kernel
    /// launched again in the same shape costs no driver call (blocks per SM for a cooperative
    /// launch, active clusters for a cluster launch: both depend only on the function, the
    /// block, the dynamic shared memory and the cluster).
    pub(crate) fn occupancy(
        &self,
        key: OccupancyKey,
        compute: impl FnOnce() -> Result<u32>,
    ) -> Result<u32> {
        let lock = || {
            self.occupancy
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(&(_, n)) = lock().iter().find(|(k, _)| *k == key) {
            return Ok(n);
        }
        let n = compute()?;
        let mut kept = lock();
        if kept.len() < OCCUPANCY_KEPT && !kept.iter().any(|(k, _)| *k == key) {
            kept.push((key, n));
        }
        Ok(n)
    }

    /// Lets function `index` be launched with `bytes` of dynamic shared memory: when that is
    /// more than it may use now, sets its `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`
    /// to `bytes` (once per function and larger size; an atomic load otherwise). The caller
    /// has checked `bytes` against the device's opt-in limit.
    pub(crate) fn allow_dynamic_shared(&self, index: usize, bytes: u32) -> Result<()> {
        let allowed = &self.dynamic_shared[index];
        if bytes <= allowed.load(Ordering::Acquire) {
            return Ok(());
        }
        let value = i32::try_from(bytes)
            .map_err(|_| Error::value(format!("{bytes} bytes of shared memory is too many")))?;
        let Some(f) = self.functions[index] else {
            return Ok(());
        };
        // SAFETY: the function belongs to this loaded module (its context is bound by the
        // caller, which prepares a launch in it).
        unsafe {
            cu::set_function_attribute(f.raw, FunctionAttribute::MaxDynamicSharedSizeBytes, value)
        }?;
        allowed.fetch_max(bytes, Ordering::AcqRel);
        Ok(())
    }
}

/// Loads a module's `images` into `ctx`: each image a device runs, with the functions of the
/// kernels it holds (`kernel_image`: the image of each kernel of `signatures`).
pub(super) fn load(
    ctx: &'static Context,
    images: &[Image],
    kernel_image: &[usize],
    signatures: &[Signature],
) -> Result<Loaded> {
    init()?;
    let _caller = ctx.enter()?;
    // Once per device, possibly inside another library's graph capture: loading and the
    // trap record's page-locked allocation are calls a global-mode capture forbids.
    let _relaxed = Relaxed::enter()?;
    let cc = ctx.compute_capability();
    let mut functions: Vec<Option<Function>> = vec![None; signatures.len()];
    let mut modules = Vec::with_capacity(images.len());
    let mut described = Vec::with_capacity(images.len());
    for (i, image) in images.iter().enumerate() {
        let label = if i == 0 {
            String::new()
        } else {
            format!("{} part: ", image.arch)
        };
        if !image.arch.runs_on(cc) {
            modules.push(None);
            described.push(format!("{label}not loaded ({})", DeviceArch(cc)));
            continue;
        }
        let kernels: Vec<usize> = (0..signatures.len())
            .filter(|&k| kernel_image[k] == i)
            .collect();
        let (module, found, what) = load_image(ctx, image, signatures, &kernels)?;
        register_trap_record(ctx.ordinal(), module)?;
        for (k, f) in kernels.into_iter().zip(found) {
            functions[k] = Some(f);
        }
        modules.push(Some(module));
        described.push(format!("{label}{what}"));
    }
    Ok(Loaded {
        _modules: modules,
        image: described.join("; "),
        dynamic_shared: functions
            .iter()
            .map(|f| AtomicU32::new(f.map_or(0, |f| f.limits.dynamic_shared)))
            .collect(),
        functions,
        occupancy: Mutex::new(Vec::new()),
    })
}

/// Loads `image` into `ctx` (bound): the cubin [`choose_cubin`] picks, else the PTX.
/// Returns the module, the functions of `kernels` (indices into the manifest) and what
/// was loaded (`"sm_90 cubin"`, `"PTX"`).
fn load_image(
    ctx: &'static Context,
    image: &Image,
    signatures: &[Signature],
    kernels: &[usize],
) -> Result<(ModuleHandle, Vec<Function>, String)> {
    let cc = ctx.compute_capability();
    // A cubin the driver refuses, or that lacks a kernel, falls back to the PTX: the
    // cubin is never the cause of an error the PTX would not give.
    let from_cubin = choose_cubin(cc, image.cubin_archs()).and_then(|arch| {
        let bytes = image.cubin(arch)?;
        let mut log = vec![0u8; 4096];
        let module = cu::module_load_cubin(bytes, &mut log).ok()?;
        // SAFETY: `module` was just loaded into the bound context.
        match unsafe { functions(module, signatures, kernels) } {
            Ok(functions) => Some((module, functions, format!("{arch} cubin"))),
            Err(_) => {
                // SAFETY: loaded above, none of its functions used.
                let _ = unsafe { cu::module_unload(module) };
                None
            }
        }
    });
    if let Some(loaded) = from_cubin {
        return Ok(loaded);
    }
    let module = load_ptx(ctx, image)?;
    // SAFETY: `module` was just loaded into the bound context.
    let functions = unsafe { functions(module, signatures, kernels) }?;
    Ok((module, functions, "PTX".to_owned()))
}

/// The function and limits of each of `kernels` (indices into `signatures`) in `module`.
///
/// # Safety
///
/// `module` is loaded in the calling thread's current context.
unsafe fn functions(
    module: ModuleHandle,
    signatures: &[Signature],
    kernels: &[usize],
) -> Result<Vec<Function>> {
    kernels
        .iter()
        .map(|&k| {
            let s = &signatures[k];
            // SAFETY: the caller's contract.
            unsafe { Function::load(module, s) }
                .map_err(|e| Error::new(e.kind(), format!("kernel `{}`: {e}", s.name)))
        })
        .collect()
}

/// Loads `image`'s PTX into `ctx` (bound), the JIT's log in the error.
fn load_ptx(ctx: &'static Context, image: &Image) -> Result<ModuleHandle> {
    let mut log = vec![0u8; 8192];
    cu::module_load(&image.ptx, &mut log).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        let (maj, min) = ctx.compute_capability();
        Error::new(
            e.kind(),
            format!(
                "loading PTX built for {} on device {} (sm_{maj}{min}): {e}{}{}",
                image.arch,
                ctx.ordinal(),
                if text.is_empty() { "" } else { "\nJIT log: " },
                text
            ),
        )
    })
}

/// Gives a freshly loaded module its trap record (see [`trap`]), if it defines the symbol:
/// zeroed, page-locked, device-mapped host memory whose device address goes into the symbol.
fn register_trap_record(device: usize, module: ModuleHandle) -> Result<()> {
    let name = CString::new(TRAP_RECORD_SYMBOL).expect("no NUL in the symbol");
    // SAFETY: `module` was just loaded into the bound context.
    let Some((symbol, 8)) = (unsafe { cu::module_global(module, &name) })? else {
        return Ok(());
    };
    let (host, mapped) = cu::mem_host_alloc_mapped(std::mem::size_of::<TrapRecord>())?;
    // The address goes in through a private non-blocking stream: a synchronous copy would use
    // the legacy default stream, which is unusable while a blocking stream of the context
    // captures a graph.
    let bytes = mapped.to_ne_bytes();
    let s = cu::stream_create(true)?;
    // SAFETY: the symbol is 8 bytes of device memory of the bound context; `s` was just
    // created there; `bytes` outlives the copy, which the synchronization ends.
    let copied = unsafe { cu::memcpy_htod_async(symbol, &bytes, s) }
        // SAFETY: as above.
        .and_then(|()| unsafe { cu::stream_synchronize(s) });
    // SAFETY: created above and not used afterwards.
    let _ = unsafe { cu::stream_destroy(s) };
    copied?;
    // SAFETY: page-locked (page-aligned), zeroed, sized for a record, never freed, and the
    // host never writes it again.
    unsafe { trap::remember(device, host.cast::<TrapRecord>()) };
    Ok(())
}

impl Function {
    /// The function of `sig` in `module` and its launch limits: the driver's attributes, the
    /// default 1-D block (256 threads, or the kernel's maximum if lower), how many such blocks
    /// an SM holds, and the occupancy-maximizing block size.
    ///
    /// # Safety
    ///
    /// `module` is loaded in the calling thread's current context.
    unsafe fn load(module: ModuleHandle, sig: &Signature) -> Result<Function> {
        use FunctionAttribute::*;
        // SAFETY: the caller's contract; the function comes from that module.
        unsafe {
            let f = cu::module_function(module, &sig.c_name)?;
            let attr = |a| cu::function_attribute(f, a).map(|v| v.max(0) as u32);
            let limits = FunctionLimits {
                max_threads: attr(MaxThreadsPerBlock)?.max(1),
                static_shared: attr(SharedSizeBytes)?,
                dynamic_shared: attr(MaxDynamicSharedSizeBytes)?,
                registers: attr(NumRegs)?,
            };
            let block = limits.max_threads.min(256);
            let per_sm = cu::blocks_per_multiprocessor(f, block, 0)?;
            let potential_block = cu::potential_block_size(f, limits.max_threads)?;
            if sig.launch.non_portable_cluster {
                // Clusters of more than 8 blocks (`#[kernel(non_portable_cluster)]`), where
                // the GPU runs them: set once, at load. A device or driver that refuses it
                // keeps the kernel at the portable size, and a launch of a larger cluster is
                // then refused naming the kernel (the driver schedules none of them,
                // `cuOccupancyMaxActiveClusters`): not a reason to fail the module's other
                // kernels here.
                let _ = cu::set_function_attribute(f, NonPortableClusterSizeAllowed, 1);
            }
            Ok(Function {
                raw: f,
                block,
                blocks_per_sm: per_sm.max(1),
                potential_block: potential_block.min(limits.max_threads),
                limits,
            })
        }
    }
}
