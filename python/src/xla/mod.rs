//! XLA FFI handlers: ferrocuda kernels called inside `jax.jit` (`ferrocuda.jax`).
//!
//! Two handlers, alike but for their traits: [`execute_graph`] declares itself safe for XLA's
//! command buffers (CUDA graphs), [`execute_plain`] does not (kernels with scratch
//! workspaces: a captured launch would allocate and free them as graph memory nodes, which
//! a graph nested in XLA's command buffer may not contain). `ferrocuda.jax` registers each
//! under a target name with `jax.ffi.register_ffi_target` and picks one per kernel.
//!
//! # One call
//!
//! The call site names the module and the kernel in two attributes — `ferrocuda_module`, the
//! id [`register_module`] gave the module (a hash of its source and manifest, so an id baked
//! into a compiled executable never names another module's kernels), and `ferrocuda_kernel`,
//! the kernel's name — and passes each scalar parameter as an attribute of its name (an
//! `int64` or `float64`, converted to the parameter's type with the eager launchers' range
//! checks). The operands are the kernel's read-only array parameters, in order, then
//! optionally its writable ones (in-out values: each must alias its result); the results
//! are its writable array parameters, in order. Scratch workspaces are the host crate's.
//!
//! The handler describes XLA's buffers (dense row-major) as arrays, finds XLA's stream
//! (`XLA_FFI_Stream_Get`), and launches through the host crate on that stream with no
//! ordering against other streams (XLA orders its own stream) and no host synchronization:
//! the kernel's layout and architecture variant ([`ferrocuda_host::Kernel::variant_for`]),
//! the manifest's checks, zeroed outputs and workspaces all as in an eager call. XLA runs on
//! each device's primary context, which is the one the host crate loads modules into.
//!
//! Every failure is an XLA error naming the argument (`INVALID_ARGUMENT` for bad input,
//! `INTERNAL` for driver failures) — never a panic across the C boundary (the body runs
//! under `catch_unwind`).

pub mod capi;

use std::ffi::{c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::RwLock;

use ferrocuda_abi::{DType, MAX_NDIM};
use ferrocuda_host::module::Param;
use ferrocuda_host::{
    Arg, ArgList, ArrayDesc, ErrorKind, Kernel, LaunchOptions, Module, Scalar, StreamRef, SyncMode,
};

use capi::{sizes, CallFrame, XlaError};

/// A failure of one call: an `XLA_FFI_Error_Code` and the message.
type Failure = (c_int, String);

fn invalid(msg: impl Into<String>) -> Failure {
    (capi::ERR_INVALID_ARGUMENT, msg.into())
}

// ---------------------------------------------------------------------------------------
// Modules.

/// The modules registered in this process, by id (a newer registration of an id replaces
/// the older: a module rebuilt with the same manifest at the same path).
static MODULES: RwLock<Vec<(i64, &'static Module)>> = RwLock::new(Vec::new());

/// The id of a module: FNV-1a (64-bit) of its source and manifest, as a non-negative `i64`
/// (an XLA attribute). Stable across processes for the same files.
pub fn module_id(source: &str, manifest_json: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in source
        .bytes()
        .chain(std::iter::once(0))
        .chain(manifest_json.bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h >> 1) as i64
}

/// Registers `module` for the handlers under [`module_id`] and returns the id.
pub fn register_module(module: &'static Module, source: &str) -> i64 {
    let id = module_id(source, &module.manifest().to_json());
    let mut m = MODULES.write().unwrap_or_else(|p| p.into_inner());
    match m.iter_mut().find(|(i, _)| *i == id) {
        Some(slot) => slot.1 = module,
        None => m.push((id, module)),
    }
    id
}

fn find_module(id: i64) -> Option<&'static Module> {
    let m = MODULES.read().unwrap_or_else(|p| p.into_inner());
    m.iter().find(|(i, _)| *i == id).map(|&(_, m)| m)
}

// ---------------------------------------------------------------------------------------
// The handlers.

/// The handler marked compatible with XLA's command buffers.
///
/// # Safety
///
/// Called by XLA with a call frame it owns (see the module documentation).
pub unsafe extern "C" fn execute_graph(frame: *mut CallFrame) -> *mut XlaError {
    // SAFETY: forwarded.
    unsafe { entry(frame, capi::TRAITS_COMMAND_BUFFER_COMPATIBLE) }
}

/// The handler without traits (kernels with scratch workspaces).
///
/// # Safety
///
/// Called by XLA with a call frame it owns (see the module documentation).
pub unsafe extern "C" fn execute_plain(frame: *mut CallFrame) -> *mut XlaError {
    // SAFETY: forwarded.
    unsafe { entry(frame, 0) }
}

/// The address of a handler, for `jax.ffi.pycapsule`.
pub fn handler_address(graph: bool) -> usize {
    let f: capi::Handler = if graph { execute_graph } else { execute_plain };
    f as usize
}

/// Reports that an error cannot be returned (no usable API table): a handler must not return
/// success for a call it did not carry out.
fn unreportable(msg: &str) -> ! {
    eprintln!("ferrocuda XLA handler: {msg}; aborting (XLA passed no API to report it with)");
    std::process::abort()
}

unsafe fn entry(frame: *mut CallFrame, traits: u32) -> *mut XlaError {
    if frame.is_null() {
        unreportable("null call frame");
    }
    // SAFETY: XLA passes a live call frame; its first word is its size.
    let size = unsafe { frame.cast::<usize>().read() };
    if size < std::mem::offset_of!(CallFrame, api) + std::mem::size_of::<usize>() {
        unreportable(&format!("call frame of {size} bytes"));
    }
    // SAFETY: the size covers `extension_start` and `api`.
    let (ext, api) = unsafe { ((*frame).extension_start, (*frame).api) };
    // The metadata query (at registration): its frame may carry no API table.
    // SAFETY: the chain's nodes are XLA's.
    if let Some(result) = unsafe { metadata_query(ext, traits) } {
        let Err(msg) = result else {
            return std::ptr::null_mut();
        };
        // SAFETY: `api` is null or XLA's table (checked for size before any use).
        let create = unsafe { api_table(api) };
        return match create {
            // SAFETY: XLA's `XLA_FFI_Error_Create`.
            Some(create) => unsafe { make_error(create, capi::ERR_INVALID_ARGUMENT, &msg) },
            None => unreportable(&msg),
        };
    }
    // SAFETY: a call frame's `api` is XLA's table (checked for size before any use).
    let Some(create) = (unsafe { api_table(api) }) else {
        unreportable("no usable XLA_FFI_Api table");
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if size < sizes::CALL_FRAME {
            return Err(invalid(format!(
                "XLA_FFI_CallFrame of {size} bytes, expected at least {}: the installed \
                 jaxlib is older than the XLA FFI ferrocuda was built for",
                sizes::CALL_FRAME
            )));
        }
        // SAFETY: the frame is at least as large as the fields read.
        unsafe { execute(&*frame) }
    }));
    let (code, msg) = match outcome {
        Ok(Ok(())) => return std::ptr::null_mut(),
        Ok(Err(f)) => f,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            (capi::ERR_INTERNAL, format!("internal error: {what}"))
        }
    };
    // SAFETY: `create` is XLA's `XLA_FFI_Error_Create`.
    unsafe { make_error(create, code, &format!("ferrocuda: {msg}")) }
}

/// `XLA_FFI_Error_Create` of a usable API table (`None` when `api` is null or smaller than
/// the prefix read).
unsafe fn api_table(api: *const capi::Api) -> Option<capi::ErrorCreateFn> {
    if api.is_null() {
        return None;
    }
    // SAFETY: an API table starts with its size; the fields read lie within it.
    unsafe {
        if api.cast::<usize>().read() < sizes::API_PREFIX {
            return None;
        }
        (*api).error_create
    }
}

unsafe fn make_error(create: capi::ErrorCreateFn, code: c_int, msg: &str) -> *mut XlaError {
    let text = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    let mut args = capi::ErrorCreateArgs {
        struct_size: sizes::ERROR_CREATE_ARGS,
        extension_start: std::ptr::null_mut(),
        message: text.as_ptr(),
        errc: code,
    };
    // SAFETY: XLA copies the message into the error it returns.
    unsafe { create(&mut args) }
}

/// `Some` when the frame is the metadata query: the handler's API version and `traits`
/// written into the metadata (or why they could not be).
unsafe fn metadata_query(
    mut ext: *mut capi::ExtensionBase,
    traits: u32,
) -> Option<Result<(), String>> {
    while !ext.is_null() {
        // SAFETY: each extension starts with its size; the rest is read once it covers it.
        let size = unsafe { ext.cast::<usize>().read() };
        if size < sizes::EXTENSION_BASE {
            return Some(Err(format!(
                "XLA FFI extension of {size} bytes, expected at least {}",
                sizes::EXTENSION_BASE
            )));
        }
        // SAFETY: the size covers the base.
        let (ty, next) = unsafe { ((*ext).type_, (*ext).next) };
        if ty != capi::EXTENSION_METADATA {
            ext = next;
            continue;
        }
        if size < sizes::METADATA_EXTENSION {
            return Some(Err(format!(
                "XLA_FFI_Metadata_Extension of {size} bytes, expected at least {}",
                sizes::METADATA_EXTENSION
            )));
        }
        // SAFETY: the size covers the metadata pointer.
        let md = unsafe { (*ext.cast::<capi::MetadataExtension>()).metadata };
        if md.is_null() {
            return Some(Err("XLA_FFI_Metadata_Extension without metadata".to_owned()));
        }
        // SAFETY: XLA's metadata, checked for size before it is written.
        unsafe {
            let msize = md.cast::<usize>().read();
            if msize < sizes::METADATA {
                return Some(Err(format!(
                    "XLA_FFI_Metadata of {msize} bytes, expected at least {}",
                    sizes::METADATA
                )));
            }
            (*md).api_version = capi::ApiVersion {
                struct_size: sizes::API_VERSION,
                extension_start: std::ptr::null_mut(),
                major_version: capi::API_MAJOR,
                minor_version: capi::API_MINOR,
            };
            (*md).traits = traits;
        }
        return Some(Ok(()));
    }
    None
}

// ---------------------------------------------------------------------------------------
// Reading the call frame.

/// The attributes, as (name, type, value pointer).
struct AttrList<'f> {
    items: Vec<(&'f [u8], c_int, *mut c_void)>,
}

unsafe fn read_attrs(a: &capi::Attrs) -> Result<AttrList<'_>, Failure> {
    if a.struct_size < sizes::ATTRS {
        return Err(invalid(format!(
            "XLA_FFI_Attrs of {} bytes, expected at least {}",
            a.struct_size,
            sizes::ATTRS
        )));
    }
    let n = usize::try_from(a.size).map_err(|_| invalid("negative attribute count"))?;
    let mut items = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: XLA's arrays hold `size` entries.
        let (ty, name, value) = unsafe { (*a.types.add(i), *a.names.add(i), *a.attrs.add(i)) };
        let name: &[u8] = if name.is_null() {
            &[]
        } else {
            // SAFETY: a byte span of XLA's.
            unsafe {
                let s = &*name;
                if s.ptr.is_null() {
                    &[]
                } else {
                    std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len)
                }
            }
        };
        items.push((name, ty, value));
    }
    Ok(AttrList { items })
}

impl AttrList<'_> {
    fn get(&self, name: &str) -> Option<(c_int, *mut c_void)> {
        self.items
            .iter()
            .find(|(n, _, _)| *n == name.as_bytes())
            .map(|&(_, t, v)| (t, v))
    }

    fn string(&self, name: &str) -> Result<String, Failure> {
        match self.get(name) {
            Some((capi::ATTR_STRING, v)) if !v.is_null() => {
                // SAFETY: a string attribute is a byte span.
                let s = unsafe { &*v.cast::<capi::ByteSpan>() };
                let bytes = if s.ptr.is_null() {
                    &[][..]
                } else {
                    // SAFETY: as above.
                    unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) }
                };
                Ok(String::from_utf8_lossy(bytes).into_owned())
            }
            Some(_) => Err(invalid(format!("attribute `{name}` must be a string"))),
            None => Err(invalid(format!(
                "attribute `{name}` is missing (call ferrocuda kernels through ferrocuda.jax)"
            ))),
        }
    }

    /// A scalar attribute: (value as an integer, or as a float).
    fn scalar(&self, name: &str) -> Result<Option<Num>, Failure> {
        let Some((ty, v)) = self.get(name) else {
            return Ok(None);
        };
        if ty != capi::ATTR_SCALAR || v.is_null() {
            return Err(invalid(format!("attribute `{name}` must be a scalar")));
        }
        // SAFETY: a scalar attribute points to an `XLA_FFI_Scalar` whose value has its dtype.
        unsafe {
            let s = &*v.cast::<capi::Scalar>();
            let p = s.value;
            if p.is_null() {
                return Err(invalid(format!("attribute `{name}` has no value")));
            }
            use capi::dtype as t;
            Ok(Some(match s.dtype {
                t::S8 => Num::Int(i128::from(p.cast::<i8>().read())),
                t::S16 => Num::Int(i128::from(p.cast::<i16>().read_unaligned())),
                t::S32 => Num::Int(i128::from(p.cast::<i32>().read_unaligned())),
                t::S64 => Num::Int(i128::from(p.cast::<i64>().read_unaligned())),
                t::U8 => Num::Int(i128::from(p.cast::<u8>().read())),
                t::U16 => Num::Int(i128::from(p.cast::<u16>().read_unaligned())),
                t::U32 => Num::Int(i128::from(p.cast::<u32>().read_unaligned())),
                t::U64 => Num::Int(i128::from(p.cast::<u64>().read_unaligned())),
                t::F32 => Num::Float(f64::from(p.cast::<f32>().read_unaligned())),
                t::F64 => Num::Float(p.cast::<f64>().read_unaligned()),
                other => {
                    return Err(invalid(format!(
                        "attribute `{name}`: scalar of XLA type {other} is not supported \
                         (pass an integer or a float)"
                    )))
                }
            }))
        }
    }
}

/// A scalar attribute's value.
#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

/// The host's element type of an XLA data type.
fn dtype_of(code: c_int) -> Option<DType> {
    use capi::dtype as t;
    Some(match code {
        t::PRED => DType::Bool,
        t::S8 => DType::I8,
        t::S16 => DType::I16,
        t::S32 => DType::I32,
        t::S64 => DType::I64,
        t::U8 => DType::U8,
        t::U16 => DType::U16,
        t::U32 => DType::U32,
        t::U64 => DType::U64,
        t::F16 => DType::F16,
        t::F32 => DType::F32,
        t::F64 => DType::F64,
        t::C64 => DType::C64,
        t::C128 => DType::C128,
        t::BF16 => DType::BF16,
        _ => return None,
    })
}

/// Buffer `i` of `n` (`types`/`ptrs` of an `XLA_FFI_Args` or `XLA_FFI_Rets`) described as an
/// array for parameter `p`.
unsafe fn describe(
    what: &str,
    types: *mut c_int,
    ptrs: *mut *mut c_void,
    i: usize,
    p: &Param,
    writable: bool,
) -> Result<(ArrayDesc, u64), Failure> {
    let name = &p.name;
    // SAFETY: the caller checked `i` against the count.
    let (ty, buf) = unsafe { (*types.add(i), *ptrs.add(i)) };
    if ty != capi::BUFFER || buf.is_null() {
        return Err(invalid(format!(
            "argument `{name}`: XLA {what} {i} is not a buffer"
        )));
    }
    // SAFETY: a buffer starts with its size; the fields read lie within it once checked.
    let b = unsafe { &*buf.cast::<capi::Buffer>() };
    if b.struct_size < sizes::BUFFER {
        return Err(invalid(format!(
            "argument `{name}`: XLA_FFI_Buffer of {} bytes, expected at least {}",
            b.struct_size,
            sizes::BUFFER
        )));
    }
    let dtype = dtype_of(b.dtype).ok_or_else(|| {
        invalid(format!(
            "argument `{name}`: XLA element type {} has no ferrocuda equivalent",
            b.dtype
        ))
    })?;
    let rank = usize::try_from(b.rank)
        .ok()
        .filter(|&r| r <= MAX_NDIM)
        .ok_or_else(|| {
            invalid(format!(
                "argument `{name}`: rank {} (ferrocuda takes 0 to {MAX_NDIM} axes)",
                b.rank
            ))
        })?;
    let mut shape = [0usize; MAX_NDIM];
    for (d, slot) in shape[..rank].iter_mut().enumerate() {
        // SAFETY: `dims` holds `rank` extents.
        let e = unsafe { *b.dims.add(d) };
        *slot = usize::try_from(e)
            .map_err(|_| invalid(format!("argument `{name}`: negative extent {e}")))?;
    }
    let ptr = b.data as u64;
    let desc = ArrayDesc::from_parts(dtype, &shape[..rank], None, ptr, !writable, None)
        .map_err(|e| invalid(format!("argument `{name}`: {e}")))?;
    Ok((desc, ptr))
}

/// Converts scalar attribute `v` to parameter `p`'s type (the eager launchers' rules: an
/// integer parameter takes only integers in its range, a float parameter any real number
/// within its range).
fn scalar_arg(v: Num, p: &Param) -> Result<Scalar, Failure> {
    let name = &p.name;
    let want = p.dtype.name();
    let out = if p.dtype.int_range().is_some() {
        match v {
            Num::Int(i) => Scalar::from_int(p.dtype, i),
            Num::Float(_) => {
                return Err(invalid(format!(
                    "argument `{name}`: expected an integer for the {want} parameter, got a float"
                )))
            }
        }
    } else if p.dtype.is_float_scalar() {
        let f = match v {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        };
        Scalar::from_f64(p.dtype, f)
    } else {
        return Err(invalid(format!(
            "argument `{name}`: {want} scalar parameters are not supported"
        )));
    };
    out.ok_or_else(|| invalid(format!("argument `{name}`: value out of range for {want}")))
}

// ---------------------------------------------------------------------------------------
// The call.

/// Launches the kernel a call frame names (see the module documentation).
unsafe fn execute(f: &CallFrame) -> Result<(), Failure> {
    if f.stage != capi::STAGE_EXECUTE {
        return Err(invalid(format!(
            "called at execution stage {}; ferrocuda's handlers run only at the execute stage",
            f.stage
        )));
    }
    if f.args.struct_size < sizes::ARGS || f.rets.struct_size < sizes::RETS {
        return Err(invalid(format!(
            "XLA_FFI_Args/XLA_FFI_Rets of {}/{} bytes, expected at least {}/{}",
            f.args.struct_size,
            f.rets.struct_size,
            sizes::ARGS,
            sizes::RETS
        )));
    }
    // SAFETY: XLA's attributes.
    let attrs = unsafe { read_attrs(&f.attrs)? };
    let id = match attrs.scalar("ferrocuda_module")? {
        Some(Num::Int(i)) => i64::try_from(i).unwrap_or(-1),
        _ => {
            return Err(invalid(
                "attribute `ferrocuda_module` (an integer) is missing (call ferrocuda kernels \
                 through ferrocuda.jax)",
            ))
        }
    };
    let module = find_module(id).ok_or_else(|| {
        (
            capi::ERR_FAILED_PRECONDITION,
            format!(
                "module {id} is not registered in this process (ferrocuda.jax registers a \
                 module when one of its kernels is first called)"
            ),
        )
    })?;
    let name = attrs.string("ferrocuda_kernel")?;
    let kernel: Kernel<'static> = module
        .kernel(&name)
        .map_err(|e| invalid(format!("kernel `{name}`: {e}")))?;
    let sig = kernel.signature();
    let n_args = usize::try_from(f.args.size).map_err(|_| invalid("negative operand count"))?;
    let n_rets = usize::try_from(f.rets.size).map_err(|_| invalid("negative result count"))?;
    let inputs = sig
        .params
        .iter()
        .filter(|p| p.kind.is_array() && !p.mutable)
        .count();
    let outputs = sig
        .params
        .iter()
        .filter(|p| p.kind.is_array() && p.mutable)
        .count();
    if n_rets != outputs || (n_args != inputs && n_args != inputs + outputs) {
        return Err(invalid(format!(
            "kernel `{name}` takes {inputs} read-only array(s) (then optionally its {outputs} \
             writable one(s)) and returns {outputs}; XLA passed {n_args} operand(s) and \
             {n_rets} result(s)"
        )));
    }

    let mut descs: [Option<ArrayDesc>; MAX_ARGS] = [None; MAX_ARGS];
    let mut scalars: [Option<Scalar>; MAX_ARGS] = [None; MAX_ARGS];
    let (mut next_in, mut next_out) = (0usize, 0usize);
    for (k, p) in sig.params.iter().enumerate() {
        if k >= MAX_ARGS {
            return Err(invalid("too many parameters"));
        }
        if !p.kind.is_array() {
            let v = attrs.scalar(&p.name)?.ok_or_else(|| {
                invalid(format!(
                    "argument `{}`: scalar attribute `{}` is missing",
                    p.name, p.name
                ))
            })?;
            scalars[k] = Some(scalar_arg(v, p)?);
        } else if p.mutable {
            // SAFETY: `next_out < n_rets` (counted above).
            let (d, ptr) =
                unsafe { describe("result", f.rets.types, f.rets.rets, next_out, p, true)? };
            if n_args == inputs + outputs {
                // The in-out value: XLA must have aliased it to the result.
                let j = inputs + next_out;
                // SAFETY: `j < n_args`.
                let (_, in_ptr) =
                    unsafe { describe("operand", f.args.types, f.args.args, j, p, false)? };
                if in_ptr != ptr && d.size() > 0 {
                    return Err(invalid(format!(
                        "argument `{}`: the in-out operand was not aliased to its result \
                         (ferrocuda.jax declares input_output_aliases; call through it)",
                        p.name
                    )));
                }
            }
            next_out += 1;
            descs[k] = Some(d);
        } else {
            // SAFETY: `next_in < inputs <= n_args`.
            let (d, _) =
                unsafe { describe("operand", f.args.types, f.args.args, next_in, p, false)? };
            next_in += 1;
            descs[k] = Some(d);
        }
    }
    let mut args = ArgList::new();
    for k in 0..sig.params.len() {
        let a = match (&descs[k], scalars[k]) {
            (Some(d), _) => Arg::Array(d),
            (None, Some(s)) => Arg::Scalar(s),
            (None, None) => return Err(invalid("parameter not filled")),
        };
        args.push(a).map_err(|e| invalid(e.to_string()))?;
    }

    // SAFETY: the frame's context and API table.
    let stream = unsafe { stream_of(f)? };
    let opts = LaunchOptions {
        stream: Some(stream),
        sync: Some(SyncMode::Off),
        ..LaunchOptions::default()
    };
    let k = kernel.variant_for(&args);
    // SAFETY: the kernels of a module are memory-safe for arguments that pass the host's
    // checks; XLA keeps its buffers allocated until the work on its stream has completed.
    unsafe { k.launch(&args, &opts) }.map_err(|e| {
        let code = match e.kind() {
            ErrorKind::Type | ErrorKind::Value => capi::ERR_INVALID_ARGUMENT,
            ErrorKind::Unsupported => capi::ERR_UNIMPLEMENTED,
            _ => capi::ERR_INTERNAL,
        };
        (code, format!("kernel `{}`: {e}", k.name()))
    })?;
    Ok(())
}

const MAX_ARGS: usize = ferrocuda_host::module::MAX_PARAMS;

/// XLA's CUDA stream for this call (`XLA_FFI_Stream_Get`).
unsafe fn stream_of(f: &CallFrame) -> Result<StreamRef, Failure> {
    // SAFETY: checked for size by the caller (`api_table`).
    let get = unsafe { (*f.api).stream_get }
        .ok_or_else(|| (capi::ERR_INTERNAL, "XLA_FFI_Stream_Get is null".to_owned()))?;
    let mut a = capi::StreamGetArgs {
        struct_size: sizes::STREAM_GET_ARGS,
        extension_start: std::ptr::null_mut(),
        ctx: f.ctx,
        stream: std::ptr::null_mut(),
    };
    // SAFETY: XLA's function with its argument struct.
    let err = unsafe { get(&mut a) };
    if !err.is_null() {
        // The error is XLA's to destroy with `XLA_FFI_Error_Destroy`; it is leaked here (a
        // few bytes, on a path that fails the whole execution).
        return Err((
            capi::ERR_INTERNAL,
            "XLA_FFI_Stream_Get failed (no CUDA stream for this call: is the target \
             registered for platform CUDA?)"
                .to_owned(),
        ));
    }
    // A null stream is the legacy default stream.
    Ok(StreamRef::from_cai(a.stream as u64).unwrap_or(StreamRef::Legacy))
}

// ---------------------------------------------------------------------------------------
// Python entry points (private: `ferrocuda.jax` uses them).

use pyo3::prelude::*;

/// The address of the XLA FFI handler (``graph``: the one marked compatible with command
/// buffers), for ``jax.ffi.pycapsule``.
#[pyfunction]
pub fn _xla_handler(graph: bool) -> usize {
    handler_address(graph)
}

/// The XLA FFI handler (``graph``: the one marked compatible with command buffers) in an
/// unnamed ``PyCapsule``, as ``jax.ffi.register_ffi_target`` takes it (what
/// ``jax.ffi.pycapsule`` makes, without its change of ``ctypes.pythonapi.PyCapsule_New``'s
/// argument types for the whole process).
#[pyfunction]
pub fn _xla_capsule(py: Python<'_>, graph: bool) -> PyResult<Py<PyAny>> {
    let ptr = handler_address(graph) as *mut std::ffi::c_void;
    // SAFETY: a capsule of a static function's address, without name or destructor.
    unsafe {
        let obj = pyo3::ffi::PyCapsule_New(ptr, std::ptr::null(), None);
        Ok(Bound::from_owned_ptr_or_err(py, obj)?.unbind())
    }
}

/// Registers ``module`` for the XLA FFI handlers and returns its id (the ``ferrocuda_module``
/// attribute of its calls).
#[pyfunction]
pub fn _xla_register(module: &Bound<'_, crate::module::PyKModule>) -> i64 {
    let m = module.get();
    register_module(m.host_module(), &m.source_name())
}

/// The sizes and field offsets of the XLA FFI structs as the handlers declare them:
/// ``[(struct, size, [(field, offset), ...]), ...]``.
#[pyfunction]
pub fn _xla_layout() -> Vec<capi::StructLayout> {
    capi::layout()
}

/// The XLA FFI API version the handlers report, ``(major, minor)``.
#[pyfunction]
pub fn _xla_api_version() -> (i32, i32) {
    (capi::API_MAJOR, capi::API_MINOR)
}
