//! PTX modules and their kernels: loaded once per device, looked up by name or family.
//!
//! A [`Module`] pairs PTX text with its [`Manifest`] (both produced by `ferrocuda-builder`),
//! and the cubins the builder assembled from that PTX (`sm_80`, `sm_90`, … machine code). The
//! first time a kernel of the module launches on a device, the module is loaded into that
//! device's primary context: the cubin [`choose_cubin`] picks for its compute capability
//! (machine code: nothing to compile), else the PTX, which the driver JIT-compiles (seconds
//! for a large module when its JIT cache is cold or disabled). A cubin the driver refuses (one
//! made by a ptxas newer than the driver, say) falls back to the PTX for that device;
//! [`Module::loaded_image`] says which was loaded. The loaded functions, their
//! occupancy-derived launch limits and the manifest index are cached: a launch does no lookup
//! by string and no allocation.

use crate::driver::result as cu;
use crate::driver::{init, trap, Context, Relaxed, MAX_DEVICES};
use crate::error::{Error, Result};
use crate::extras::{Requirement, ScratchParam};
use cudarc::driver::sys;
use ferrocuda_abi::diag::{TrapRecord, TRAP_RECORD_SYMBOL};
use ferrocuda_abi::launch::LaunchDecl;
use ferrocuda_abi::manifest::{KernelSig, Manifest};
use ferrocuda_abi::{DType, ParamKind};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// Most parameters a kernel may have.
pub const MAX_PARAMS: usize = 64;

/// A kernel parameter the caller passes an argument for, decoded from the manifest once at
/// module creation (scratch parameters, which the launcher provides, are in
/// [`Signature::scratch`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Name in the kernel source (used in every error about the argument).
    pub name: String,
    /// Scalar, slice or view.
    pub kind: ParamKind,
    /// Element type.
    pub dtype: DType,
    /// 0 for scalars, 1 for slices, N for views.
    pub rank: usize,
    /// Whether the kernel may write through it.
    pub mutable: bool,
    /// Position in the kernel's full parameter list (scratch parameters included).
    pub entry: usize,
    /// Byte offset in the launch parameter buffer.
    pub offset: usize,
    /// Byte size in the launch parameter buffer.
    pub size: usize,
}

/// A kernel's signature in the form launches use.
#[derive(Clone, Debug)]
pub struct Signature {
    /// PTX entry name.
    pub name: String,
    /// Family name.
    pub family: String,
    /// The parameters callers pass arguments for, in order.
    pub params: Vec<Param>,
    /// The workspaces the launcher provides (`Scratch<T>` parameters).
    pub scratch: Vec<ScratchParam>,
    /// Outputs the launcher zero-fills before the launch (indices into `params`).
    pub zero: Vec<usize>,
    /// Conditions on the arguments, checked before the launch.
    pub require: Vec<Requirement>,
    /// Number of parameters of the PTX entry (`params` and `scratch` together).
    pub entry_params: usize,
    /// Groups of parameter indices whose arrays must have equal shapes.
    pub same_shape: Vec<Vec<usize>>,
    /// Elements of the largest array one thread handles per pass (`#[kernel(items_per_thread
    /// = k)]`): the automatic grid has one thread per `k` elements. `None`: one resident wave.
    pub items_per_thread: Option<u16>,
    /// What the kernel declares about its launch shape: `max_threads`, a fixed `block`, the
    /// element type of its dynamic shared memory, the automatic grid's dimensions.
    pub launch: LaunchDecl,
    /// Size of the whole parameter buffer.
    pub buffer_size: usize,
    c_name: CString,
    /// The name, leaked once per module so that fault reports can name the last kernel.
    pub(crate) static_name: &'static String,
}

/// Launch parameters fit in this many bytes (the driver's classic limit is 4 KiB).
pub const PARAM_BUFFER_SIZE: usize = 4096;

impl Signature {
    fn from_sig(k: &KernelSig) -> Result<Signature> {
        let bad = |m: String| Error::value(format!("kernel manifest, kernel `{}`: {m}", k.name));
        if k.params.len() > MAX_PARAMS {
            return Err(bad(format!("more than {MAX_PARAMS} parameters")));
        }
        let (params, mut scratch, map, offset) = Self::lay_out_params(k, &bad)?;
        if offset > PARAM_BUFFER_SIZE {
            return Err(bad(format!(
                "parameters take {offset} bytes (> {PARAM_BUFFER_SIZE})"
            )));
        }
        let same_shape = k
            .same_shape
            .iter()
            .map(|g| {
                g.iter()
                    .map(|&i| map.get(i as usize).copied().flatten().unwrap_or(usize::MAX))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>();
        let extras = crate::extras::resolve(k, &map, &params, &mut scratch).map_err(bad)?;
        for g in &same_shape {
            if g.iter()
                .any(|&i| i >= params.len() || !params[i].kind.is_array())
            {
                return Err(bad("same_shape names a missing or scalar parameter".into()));
            }
        }
        let launch = k
            .launch
            .decl()
            .map_err(|e| bad(format!("launch declaration: {e}")))?;
        let c_name =
            CString::new(k.name.clone()).map_err(|_| bad("kernel name contains NUL".into()))?;
        Ok(Signature {
            name: k.name.clone(),
            family: k.family.clone(),
            entry_params: params.len() + scratch.len(),
            params,
            scratch,
            zero: extras.zero,
            require: extras.require,
            same_shape,
            items_per_thread: k.items_per_thread,
            launch,
            buffer_size: offset,
            c_name,
            static_name: Box::leak(Box::new(k.name.clone())),
        })
    }

    /// The parameters of `k` in entry order, laid out in the parameter buffer: the caller's
    /// parameters, the scratch workspaces, the map from entry index to caller index (`None`
    /// for scratch) and the buffer's size. Each layout is checked against the abi's.
    #[allow(clippy::type_complexity)]
    fn lay_out_params(
        k: &KernelSig,
        bad: &dyn Fn(String) -> Error,
    ) -> Result<(Vec<Param>, Vec<ScratchParam>, Vec<Option<usize>>, usize)> {
        let mut params = Vec::with_capacity(k.params.len());
        let mut scratch = Vec::new();
        // Full parameter index -> caller parameter index (None for scratch parameters).
        let mut map = Vec::with_capacity(k.params.len());
        let mut offset = 0usize;
        for (entry, p) in k.params.iter().enumerate() {
            let kind = p
                .param_kind()
                .ok_or_else(|| bad(format!("parameter `{}` has unknown kind", p.name)))?;
            let dtype = p
                .element()
                .ok_or_else(|| bad(format!("parameter `{}` has unknown dtype", p.name)))?;
            let rank = p.rank as usize;
            // The layouts of ferrocuda-abi's parameter types, checked against the manifest.
            let layout = kind.layout(dtype, rank);
            let Some((size, align)) = layout.filter(|&l| l == (p.size.into(), p.align.into()))
            else {
                let expected = match layout {
                    Some((size, align)) => format!("expected {size}/{align}"),
                    None => format!("no {} parameter has rank {rank}", kind.name()),
                };
                return Err(bad(format!(
                    "parameter `{}` ({} {} rank {}) has size/align {}/{}, {expected}",
                    p.name, p.kind, p.dtype, p.rank, p.size, p.align
                )));
            };
            offset = offset.next_multiple_of(align);
            if kind.is_argument() {
                map.push(Some(params.len()));
                params.push(Param {
                    name: p.name.clone(),
                    kind,
                    dtype,
                    rank,
                    mutable: p.mutable,
                    entry,
                    offset,
                    size,
                });
            } else {
                map.push(None);
                scratch.push(ScratchParam {
                    name: p.name.clone(),
                    dtype,
                    entry,
                    offset,
                    size,
                    len: ferrocuda_abi::extras::ScratchLen {
                        param: entry as u8,
                        per_block: 0,
                        constant: 0,
                        of: ferrocuda_abi::extras::NONE,
                        mult: 0,
                        div: 1,
                    },
                });
            }
            offset += size;
        }
        Ok((params, scratch, map, offset))
    }

    /// Whether a launch has work around it: zeroed outputs or scratch workspaces.
    pub fn has_extras(&self) -> bool {
        !self.zero.is_empty() || !self.scratch.is_empty()
    }

    /// `"a, b, out"` — for error messages.
    pub fn param_list(&self) -> String {
        self.params
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

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
    pub(crate) raw: sys::CUfunction,
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
    _module: sys::CUmodule,
    /// What was loaded: `"sm_90 cubin"` or `"PTX"`.
    image: String,
    pub(crate) functions: Vec<Function>,
    /// Per function: the dynamic shared memory (bytes) launches may use now — the load-time
    /// limit, raised by each opt-in ([`Loaded::allow_dynamic_shared`]).
    dynamic_shared: Vec<AtomicU32>,
}

// SAFETY: CUmodule/CUfunction handles are usable from any thread; they are never mutated
// after loading and the module is never unloaded while the `Module` lives.
unsafe impl Send for Loaded {}
// SAFETY: as above.
unsafe impl Sync for Loaded {}

impl Loaded {
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
        use sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as MAX;
        // SAFETY: the function belongs to this loaded module (its context is bound by the
        // caller, which prepares a launch in it).
        unsafe { cu::set_function_attribute(self.functions[index].raw, MAX, value) }?;
        allowed.fetch_max(bytes, Ordering::AcqRel);
        Ok(())
    }
}

/// The cubin for a device of compute capability `cc` among `archs` (`"sm_80"`, …): the highest
/// `sm_AB` with `A` equal to the major version and `B` not above the minor (machine code runs
/// on GPUs of its major version and a minor not below its own), `None` when there is none (the
/// PTX is loaded then). `sm_90` for 9.0; `sm_80` for 8.6 and 8.9 when the cubins are `sm_80`
/// and `sm_90`; none for 10.0 or 12.0.
pub fn choose_cubin<'a>(
    cc: (u32, u32),
    archs: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let (major, minor) = cc;
    archs
        .into_iter()
        .filter_map(|a| {
            let n: u32 = a.strip_prefix("sm_")?.parse().ok()?;
            (n / 10 == major && n % 10 <= minor).then_some((n, a))
        })
        .max_by_key(|&(n, _)| n)
        .map(|(_, a)| a)
}

/// A PTX module with its manifest (and cubins).
pub struct Module {
    ptx: CString,
    /// (arch, image) of each cubin, in the manifest's order.
    cubins: Vec<(String, Cow<'static, [u8]>)>,
    manifest: Manifest,
    signatures: Vec<Signature>,
    by_name: HashMap<String, usize>,
    /// Per kernel, the indices of its layout variants
    /// ([`KernelSig::is_layout_variant_of`]), in manifest order.
    layout_variants: Vec<Box<[usize]>>,
    loaded: [OnceLock<std::result::Result<Loaded, Error>>; MAX_DEVICES],
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("arch", &self.manifest.arch)
            .field("cubins", &self.cubin_archs().collect::<Vec<_>>())
            .field("kernels", &self.by_name.len())
            .finish()
    }
}

impl Module {
    /// A module from PTX text and its manifest. Loads nothing yet (no driver needed).
    pub fn new(ptx: impl Into<String>, manifest: Manifest) -> Result<Module> {
        Module::with_cubins(ptx, manifest, Vec::new())
    }

    /// A module from PTX text, its manifest and cubins assembled from that PTX: (arch such as
    /// `"sm_90"`, the cubin file's bytes). Loads nothing yet (no driver needed); a device loads
    /// the cubin [`choose_cubin`] picks for it, else the PTX.
    pub fn with_cubins(
        ptx: impl Into<String>,
        manifest: Manifest,
        cubins: Vec<(String, Cow<'static, [u8]>)>,
    ) -> Result<Module> {
        for (arch, image) in &cubins {
            let number = arch.strip_prefix("sm_").and_then(|d| d.parse::<u32>().ok());
            if number.is_none() {
                return Err(Error::value(format!(
                    "cubin arch `{arch}` is not of the form sm_XY (e.g. sm_90)"
                )));
            }
            if !image.starts_with(b"\x7fELF") {
                return Err(Error::value(format!(
                    "the {arch} cubin is not an ELF image (damaged, or not a cubin)"
                )));
            }
        }
        let ptx =
            CString::new(ptx.into()).map_err(|_| Error::value("PTX text contains a NUL byte"))?;
        let signatures = manifest
            .kernels
            .iter()
            .map(Signature::from_sig)
            .collect::<Result<Vec<_>>>()?;
        let mut by_name = HashMap::with_capacity(signatures.len());
        for (i, s) in signatures.iter().enumerate() {
            if by_name.insert(s.name.clone(), i).is_some() {
                return Err(Error::value(format!(
                    "kernel manifest: kernel `{}` is defined twice (a module's kernel names are \
                     its PTX entry names and must be unique; kernels of the same name in \
                     different modules are fine, each module has its own)",
                    s.name
                )));
            }
        }
        let layout_variants = manifest
            .kernels
            .iter()
            .map(|k| {
                let variants = manifest.kernels.iter().enumerate();
                variants
                    .filter(|(_, o)| o.is_layout_variant_of(k))
                    .map(|(i, _)| i)
                    .collect()
            })
            .collect();
        Ok(Module {
            ptx,
            cubins,
            manifest,
            signatures,
            by_name,
            layout_variants,
            loaded: [const { OnceLock::new() }; MAX_DEVICES],
        })
    }

    /// A module from PTX text and its manifest's JSON form (as the builder writes them;
    /// typed launchers embed both).
    pub fn from_json(ptx: impl Into<String>, manifest_json: &str) -> Result<Module> {
        let manifest = Manifest::from_json(manifest_json).map_err(Error::value)?;
        Module::new(ptx, manifest)
    }

    /// A module from PTX text, its manifest's JSON form and embedded cubins (arch, bytes), as
    /// typed launchers embed them.
    pub fn from_json_with_cubins(
        ptx: impl Into<String>,
        manifest_json: &str,
        cubins: &[(&str, &'static [u8])],
    ) -> Result<Module> {
        let manifest = Manifest::from_json(manifest_json).map_err(Error::value)?;
        let cubins = cubins
            .iter()
            .map(|&(arch, bytes)| (arch.to_owned(), Cow::Borrowed(bytes)))
            .collect();
        Module::with_cubins(ptx, manifest, cubins)
    }

    /// Reads a module written by the builder: `<name>.json`, and the PTX and cubins it names
    /// beside it (a cubin file that is missing or not a cubin is left out: the PTX serves
    /// those devices).
    pub fn from_manifest_file(manifest_path: impl AsRef<Path>) -> Result<Module> {
        let path = manifest_path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::value(format!("cannot read {}: {e}", path.display())))?;
        let manifest = Manifest::from_json(&text)
            .map_err(|e| Error::value(format!("{}: {e}", path.display())))?;
        let ptx_path = path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join(&manifest.ptx);
        let ptx = std::fs::read_to_string(&ptx_path)
            .map_err(|e| Error::value(format!("cannot read {}: {e}", ptx_path.display())))?;
        // A truncated, replaced or foreign PTX file fails here, naming it, rather than at the
        // first launch on a GPU.
        if let Some(k) = manifest
            .kernels
            .iter()
            .find(|k| !ptx.contains(&format!(".entry {}(", k.name)))
        {
            return Err(Error::value(format!(
                "{} does not define kernel `{}` of its manifest {}: the PTX is damaged or from \
                 another build (rebuild the kernel crate)",
                ptx_path.display(),
                k.name,
                path.display()
            )));
        }
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let cubins = manifest
            .cubins
            .iter()
            .filter_map(|(arch, name)| {
                let bytes = std::fs::read(dir.join(name)).ok()?;
                bytes
                    .starts_with(b"\x7fELF")
                    .then(|| (arch.clone(), Cow::Owned(bytes)))
            })
            .collect();
        Module::with_cubins(ptx, manifest, cubins)
    }

    /// The architectures of the module's cubins (`"sm_80"`, …).
    pub fn cubin_archs(&self) -> impl Iterator<Item = &str> + '_ {
        self.cubins.iter().map(|(a, _)| a.as_str())
    }

    /// The cubin of `arch`, if the module has one.
    pub fn cubin(&self, arch: &str) -> Option<&[u8]> {
        self.cubins
            .iter()
            .find(|(a, _)| a == arch)
            .map(|(_, c)| &c[..])
    }

    /// What device `device` runs (loading the module there, once): `"sm_90 cubin"` when a
    /// cubin was loaded, `"PTX"` when the PTX was (no cubin for the device's compute
    /// capability, or the driver refused it).
    pub fn loaded_image(&self, device: usize) -> Result<String> {
        init()?;
        let ctx = Context::get(device)?;
        let _caller = ctx.enter()?;
        Ok(self.loaded(ctx)?.image.clone())
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Every kernel's signature, in manifest order (sorted by name).
    pub fn signatures(&self) -> &[Signature] {
        &self.signatures
    }

    /// The kernel named `name`.
    pub fn kernel(&self, name: &str) -> Result<Kernel<'_>> {
        match self.by_name.get(name) {
            Some(&index) => Ok(Kernel {
                module: self,
                index,
            }),
            None => Err(Error::value(format!(
                "no kernel named `{name}` in this module"
            ))),
        }
    }

    /// The kernel at `index` in manifest order (as generated launchers address them).
    pub fn kernel_at(&self, index: usize) -> Result<Kernel<'_>> {
        if index < self.signatures.len() {
            Ok(Kernel {
                module: self,
                index,
            })
        } else {
            Err(Error::value(format!(
                "no kernel at index {index} in this module"
            )))
        }
    }

    /// The kernels of `family`, in manifest order.
    pub fn family<'m>(&'m self, family: &'m str) -> impl Iterator<Item = Kernel<'m>> + 'm {
        self.signatures
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.family == family)
            .map(move |(index, _)| Kernel {
                module: self,
                index,
            })
    }

    /// The indices of kernel `index`'s layout variants (empty for most kernels).
    pub(crate) fn layout_variants_of(&self, index: usize) -> &[usize] {
        self.layout_variants.get(index).map_or(&[], |v| &v[..])
    }

    /// Loads (once) the module into `ctx`, which must be current on this thread.
    pub(crate) fn loaded(&self, ctx: &'static Context) -> Result<&Loaded> {
        self.loaded[ctx.ordinal()]
            .get_or_init(|| self.load(ctx))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn load(&self, ctx: &'static Context) -> Result<Loaded> {
        init()?;
        let _caller = ctx.enter()?;
        // Once per device, possibly inside another library's graph capture: loading and the
        // trap record's page-locked allocation are calls a global-mode capture forbids.
        let _relaxed = Relaxed::enter()?;
        let cc = ctx.compute_capability();
        let chosen = choose_cubin(cc, self.cubin_archs());
        // A cubin the driver refuses, or that lacks a kernel, falls back to the PTX: the
        // cubin is never the cause of an error the PTX would not give.
        let from_cubin = chosen.and_then(|arch| {
            let image = self.cubin(arch)?;
            let mut log = vec![0u8; 4096];
            let module = cu::module_load_cubin(image, &mut log).ok()?;
            // SAFETY: `module` was just loaded into the bound context.
            match unsafe { self.functions(module) } {
                Ok(functions) => Some((module, functions, format!("{arch} cubin"))),
                Err(_) => {
                    // SAFETY: loaded above, none of its functions used.
                    let _ = unsafe { cu::module_unload(module) };
                    None
                }
            }
        });
        let (module, functions, image) = match from_cubin {
            Some(loaded) => loaded,
            None => {
                let module = self.load_ptx(ctx)?;
                // SAFETY: `module` was just loaded into the bound context.
                let functions = unsafe { self.functions(module) }?;
                (module, functions, "PTX".to_owned())
            }
        };
        register_trap_record(ctx.ordinal(), module)?;
        Ok(Loaded {
            _module: module,
            image,
            dynamic_shared: functions
                .iter()
                .map(|f| AtomicU32::new(f.limits.dynamic_shared))
                .collect(),
            functions,
        })
    }

    /// Loads the PTX into `ctx` (bound), the JIT's log in the error.
    fn load_ptx(&self, ctx: &'static Context) -> Result<sys::CUmodule> {
        let mut log = vec![0u8; 8192];
        cu::module_load(&self.ptx, &mut log).map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let (maj, min) = ctx.compute_capability();
            Error::new(
                e.kind(),
                format!(
                    "loading PTX built for {} on device {} (sm_{maj}{min}): {e}{}{}",
                    self.manifest.arch,
                    ctx.ordinal(),
                    if text.is_empty() { "" } else { "\nJIT log: " },
                    text
                ),
            )
        })
    }

    /// Every kernel's function and limits in `module`.
    ///
    /// # Safety
    ///
    /// `module` is loaded in the calling thread's current context.
    unsafe fn functions(&self, module: sys::CUmodule) -> Result<Vec<Function>> {
        self.signatures
            .iter()
            .map(|s| {
                // SAFETY: the caller's contract.
                unsafe { Function::load(module, s) }
                    .map_err(|e| Error::new(e.kind(), format!("kernel `{}`: {e}", s.name)))
            })
            .collect()
    }
}

/// Gives a freshly loaded module its trap record (see [`trap`]), if it defines the symbol:
/// zeroed, page-locked, device-mapped host memory whose device address goes into the symbol.
fn register_trap_record(device: usize, module: sys::CUmodule) -> Result<()> {
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
    unsafe fn load(module: sys::CUmodule, sig: &Signature) -> Result<Function> {
        use sys::CUfunction_attribute::*;
        // SAFETY: the caller's contract; the function comes from that module.
        unsafe {
            let f = cu::module_function(module, &sig.c_name)?;
            let attr = |a| cu::function_attribute(f, a).map(|v| v.max(0) as u32);
            let limits = FunctionLimits {
                max_threads: attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?.max(1),
                static_shared: attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
                dynamic_shared: attr(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
                registers: attr(CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            };
            let block = limits.max_threads.min(256);
            let per_sm = cu::blocks_per_multiprocessor(f, block)?;
            let potential_block = cu::potential_block_size(f, limits.max_threads)?;
            Ok(Function {
                raw: f,
                block,
                blocks_per_sm: per_sm.max(1) as u32,
                potential_block: potential_block.min(limits.max_threads),
                limits,
            })
        }
    }
}

/// One kernel of a [`Module`].
#[derive(Clone, Copy, Debug)]
pub struct Kernel<'m> {
    pub(crate) module: &'m Module,
    pub(crate) index: usize,
}

impl<'m> Kernel<'m> {
    /// The kernel's signature.
    pub fn signature(&self) -> &'m Signature {
        &self.module.signatures[self.index]
    }

    /// The kernel's name.
    pub fn name(&self) -> &'m str {
        &self.module.signatures[self.index].name
    }

    /// The module.
    pub fn module(&self) -> &'m Module {
        self.module
    }

    /// The kernel's layout variants: the kernels of its family that differ from it only in
    /// the kinds of their array parameters, hence in the layouts they take
    /// ([`KernelSig::is_layout_variant_of`]; e.g. `add_f32_1d` … `add_f32_4d`, on views of
    /// any strides, for `add_f32`, on contiguous arrays of any rank; `add_f32` for
    /// `add_f32_2d`). [`variant_for`](Self::variant_for) chooses among the kernel and these.
    pub fn layout_variants(&self) -> impl Iterator<Item = Kernel<'m>> + 'm {
        let module = self.module;
        module
            .layout_variants_of(self.index)
            .iter()
            .map(move |&index| Kernel { module, index })
    }

    /// The kernel's limits on device `device`, as the driver reports them (loads the module
    /// there, once). Launches are checked against these and the device's
    /// ([`Context::limits`]).
    pub fn limits(&self, device: usize) -> Result<FunctionLimits> {
        init()?;
        let ctx = Context::get(device)?;
        let _caller = ctx.enter()?;
        Ok(self.module.loaded(ctx)?.functions[self.index].limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cubin_of_the_major_version_not_above_the_minor_is_chosen() {
        let both = ["sm_80", "sm_90"];
        let choose = |cc| choose_cubin(cc, both);
        assert_eq!(choose((8, 0)), Some("sm_80"));
        assert_eq!(choose((8, 6)), Some("sm_80"));
        assert_eq!(choose((8, 9)), Some("sm_80"));
        assert_eq!(choose((9, 0)), Some("sm_90"));
        // Another major version: machine code does not carry over, the PTX is JIT-compiled.
        assert_eq!(choose((10, 0)), None);
        assert_eq!(choose((12, 0)), None);
        assert_eq!(choose((7, 5)), None);
        // The highest minor not above the device's.
        let more = ["sm_80", "sm_86", "sm_89", "sm_90"];
        assert_eq!(choose_cubin((8, 6), more), Some("sm_86"));
        assert_eq!(choose_cubin((8, 7), more), Some("sm_86"));
        assert_eq!(choose_cubin((8, 9), more), Some("sm_89"));
        assert_eq!(choose_cubin((8, 0), ["sm_86"]), None);
        assert_eq!(choose_cubin((9, 0), ["sm_90a", "junk"]), None);
        assert_eq!(choose_cubin((9, 0), []), None);
    }

    #[test]
    fn cubins_must_be_elf_images_of_sm_archs() {
        let manifest = || {
            Manifest::from_json(r#"{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": []}"#)
                .unwrap()
        };
        let elf: &'static [u8] = b"\x7fELF\x02\x01\x01";
        let m = Module::with_cubins("", manifest(), vec![("sm_90".into(), elf.into())]).unwrap();
        assert_eq!(m.cubin_archs().collect::<Vec<_>>(), ["sm_90"]);
        assert_eq!(m.cubin("sm_90"), Some(elf));
        assert_eq!(m.cubin("sm_80"), None);
        let text: &'static [u8] = b"// PTX";
        let not_elf = Module::with_cubins("", manifest(), vec![("sm_90".into(), text.into())]);
        assert!(not_elf.unwrap_err().to_string().contains("ELF"));
        let bad_arch = Module::with_cubins("", manifest(), vec![("compute_90".into(), elf.into())]);
        assert!(bad_arch.unwrap_err().to_string().contains("sm_XY"));
    }
}
