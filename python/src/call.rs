//! The per-call launch path of every launcher.
//!
//! # One call
//!
//! 1. Each argument is classified by its parameter's kind (scalar or array; the kinds of a
//!    family's kernels agree, so the first kernel's are used): arrays are *probed* once —
//!    ferrocuda arrays give their descriptor directly, `__cuda_array_interface__` /
//!    `__sycl_usm_array_interface__` dictionaries are read and validated without heap
//!    allocation, DLPack-only objects and host (NumPy) arrays are noted.
//! 2. DLPack producers are asked for their capsule with the stream the launch will go on (the
//!    caller's, else the producers' common stream, else the legacy default stream); they order
//!    their own work before it.
//! 3. The kernel is chosen by the host crate, in one call of the launcher's
//!    `ferrocuda_host::launcher::Target` (the argument count, the rule of
//!    `ferrocuda_host::launch::select`, the "no variant" error): a family picks its kernel by
//!    the arrays' element types, ranks and layouts (its contiguous kernel whenever every array
//!    is C-contiguous, a strided one otherwise), a kernel launcher runs its kernel or, when the
//!    arrays' layouts need it, that kernel's layout variant.
//! 4. Scalars are converted to the parameter's type (range-checked).
//! 5. The host crate checks everything against the manifest, orders the launch against the
//!    producers' streams and launches — with the GIL released. Host arrays go through the
//!    host crate's staging path between its two phases (`PerformanceWarning`): copied to the
//!    launch's device and stream after the launch is prepared, and written ones copied back
//!    after it (the call then waits for the kernel).
//! 6. DLPack capsules are released once the kernel has completed: an event on the launch
//!    stream is polled at later calls (and by `ferrocuda.synchronize`) — in the relaxed capture
//!    mode, so that the poll never invalidates a graph capture elsewhere. A launch captured in
//!    a CUDA graph runs nothing: its capsules are released when the call returns, and the
//!    arrays' owners must outlive the graph's replays, as for any graph.
//!
//! Under CUDA graph capture (the launch stream capturing, e.g. inside `torch.cuda.graph`) the
//! host crate's stream plan applies the capture rules (`ferrocuda_host::stream::capture`),
//! and host (NumPy) arguments are refused before anything is staged.
//!
//! # Operator mode
//!
//! The kernel a torch operator registers (`ferrocuda.OpKernel`, made once per operator by
//! `Launcher.op_kernel` — `crate::launcher`) is one call of this path with its one
//! difference, [`Mode::Operator`], which carries the operator's name:
//!
//! * the arguments come by position only (the dispatcher passes every parameter so), and the
//!   options are fixed — `sync="off"` (a torch operator's tensors are ordered on torch's
//!   current stream already), every other option its default — so nothing is parsed per call;
//! * step 1 reads by the operator's rules (`crate::args::Mode`): a torch tensor not on a CUDA
//!   device is refused with a `ValueError` naming the argument and the operator, and host
//!   arrays too, so step 5's staging never happens; a tensor that requires grad is read as
//!   its `detach()` (the same memory), where a launcher's call gets torch's own refusal;
//! * steps 2–6 are those of every call.
//!
//! Scalars: integer parameters take `int` (or `__index__` objects such as NumPy integers) in
//! the parameter type's range (`OverflowError` otherwise) — never `float` or `bool`; float
//! parameters take `int`, `float` or `__float__` objects — never `bool`; a finite value beyond
//! `float32`'s range is an `OverflowError`.

use ferrocuda_host::array::Staging;
use ferrocuda_host::interop::dlpack::ManagedTensor;
use ferrocuda_host::launch::Operand;
use ferrocuda_host::launcher::Target;
use ferrocuda_host::module::{Param, Signature};
use ferrocuda_host::runtime::CallerContext;
use ferrocuda_host::stream;
use ferrocuda_host::{
    Arg, ArgList, ArrayDesc, Kernel, LaunchOptions, Launched, Scalar, StreamRef, SyncMode,
};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyTuple};

use crate::args::{probe_into, ArgScratch, Mode, Probed};
use crate::arrays::pending::{defer, release_completed};
use crate::dlpack;
use crate::errors::{to_py, IntoPyResult, PerformanceWarning};
use crate::read::host::{host_view, HostView};
use crate::read::streams::{parse_stream, parse_sync};
use crate::util::{numpy_attr, read_int, repr, type_name};

const MAX_ARRAYS: usize = ferrocuda_host::stream::MAX_PRODUCERS;
const MAX_ARGS: usize = ferrocuda_host::module::MAX_PARAMS;

// ---------------------------------------------------------------------------------------
// Options.

/// Launch options of one call.
#[derive(Clone, Copy, Debug)]
pub struct CallOpts {
    /// `stream=`.
    pub stream: Option<StreamRef>,
    /// `sync=`.
    pub sync: Option<SyncMode>,
    /// `grid=`.
    pub grid: Option<[u32; 3]>,
    /// `block=`.
    pub block: Option<[u32; 3]>,
    /// `shared_mem=`, or the fourth item of a Numba-style configuration: bytes of dynamic
    /// shared memory.
    pub shared_mem: u32,
    /// `check_pointers=`.
    pub check_pointers: bool,
}

impl CallOpts {
    /// The options of a call with keyword arguments.
    pub fn from_keywords(
        stream: Option<&Bound<'_, PyAny>>,
        sync: Option<&Bound<'_, PyAny>>,
        shape: [Option<&Bound<'_, PyAny>>; 3],
        check_pointers: bool,
    ) -> PyResult<CallOpts> {
        let [grid, block, shared] = shape;
        Ok(CallOpts {
            stream: parse_stream(stream)?,
            sync: parse_sync(sync)?,
            grid: dim3(grid, "grid")?,
            block: dim3(block, "block")?,
            shared_mem: shared_mem(shared)?,
            check_pointers,
        })
    }

    /// The host crate's options of this call.
    pub fn launch_options(&self) -> LaunchOptions {
        LaunchOptions {
            stream: self.stream,
            sync: self.sync,
            check_pointers: self.check_pointers,
            grid: self.grid,
            block: self.block,
            shared_mem_bytes: self.shared_mem,
            device: None,
        }
    }
}

/// A grid or block: `None`, a positive int, or a tuple (or list) of 1 to 3 positive ints
/// (ints by `__index__`, so NumPy integers too; never `bool`). Missing extents are 1. Device
/// limits are checked at launch, by the host crate.
fn dim3(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<[u32; 3]>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let bad = || {
        PyValueError::new_err(format!(
            "argument `{what}`: expected a positive int or a tuple of 1 to 3 positive ints \
             (each at most 2**32-1), got {}",
            repr(obj)
        ))
    };
    let one = |o: &Bound<'_, PyAny>| -> PyResult<u32> {
        if o.is_instance_of::<PyBool>() {
            return Err(bad());
        }
        match read_int(o)? {
            Some(v) if v >= 1 && v <= i128::from(u32::MAX) => Ok(v as u32),
            _ => Err(bad()),
        }
    };
    let items: Vec<Bound<'_, PyAny>> = if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = obj.cast::<PyList>() {
        l.iter().collect()
    } else {
        return Ok(Some([one(obj)?, 1, 1]));
    };
    if items.is_empty() || items.len() > 3 {
        return Err(bad());
    }
    let mut out = [1u32; 3];
    for (slot, it) in out.iter_mut().zip(&items) {
        *slot = one(it)?;
    }
    Ok(Some(out))
}

/// Bytes of dynamic shared memory: `None` (0) or an int in `0..=2**32-1` (never `bool`).
fn shared_mem(obj: Option<&Bound<'_, PyAny>>) -> PyResult<u32> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(0);
    };
    let v = if obj.is_instance_of::<PyBool>() {
        None
    } else {
        read_int(obj)?
    };
    match v {
        Some(v) if v >= 0 && v <= i128::from(u32::MAX) => Ok(v as u32),
        _ => Err(PyValueError::new_err(format!(
            "argument `shared_mem`: expected bytes of dynamic shared memory, an int in \
             0..=2**32-1, got {}",
            repr(obj)
        ))),
    }
}

/// Numba-style `[grid, block, stream, shared_mem]` configuration.
pub fn parse_config(cfg: &Bound<'_, PyAny>) -> PyResult<CallOpts> {
    let t = cfg.cast::<PyTuple>().map_err(|_| {
        PyTypeError::new_err(
            "launch configuration must be [grid, block] or [grid, block, stream(, shared_mem)]",
        )
    })?;
    if !(2..=4).contains(&t.len()) {
        return Err(PyTypeError::new_err(format!(
            "launch configuration takes 2 to 4 items (grid, block, stream, shared_mem), got {}",
            t.len()
        )));
    }
    let g = t.get_item(0)?;
    let b = t.get_item(1)?;
    let s = if t.len() > 2 {
        Some(t.get_item(2)?)
    } else {
        None
    };
    let m = if t.len() > 3 {
        Some(t.get_item(3)?)
    } else {
        None
    };
    Ok(CallOpts {
        grid: dim3(Some(&g), "grid")?,
        block: dim3(Some(&b), "block")?,
        stream: parse_stream(s.as_ref())?,
        sync: None,
        shared_mem: shared_mem(m.as_ref())?,
        check_pointers: true,
    })
}

// ---------------------------------------------------------------------------------------
// Scalars.

fn scalar(obj: &Bound<'_, PyAny>, p: &Param) -> PyResult<Scalar> {
    let name = &p.name;
    let want = p.dtype.name();
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "argument `{name}`: expected a {want} scalar, got bool"
        )));
    }
    let int = |lo: i128, hi: i128| -> PyResult<i128> {
        if obj.is_instance_of::<PyFloat>() {
            return Err(PyTypeError::new_err(format!(
                "argument `{name}`: expected an integer for the {want} parameter, got {}",
                type_name(obj)
            )));
        }
        let v = read_int(obj)?.ok_or_else(|| {
            PyTypeError::new_err(format!(
                "argument `{name}`: expected an integer for the {want} parameter, got {}",
                type_name(obj)
            ))
        })?;
        if v < lo || v > hi {
            return Err(PyOverflowError::new_err(format!(
                "argument `{name}`: {} is out of range for {want} ({lo}..={hi})",
                repr(obj)
            )));
        }
        Ok(v)
    };
    let float = || -> PyResult<f64> {
        // Python's own conversion: correctly rounded for any int, OverflowError beyond the
        // float range (never a silently clamped value).
        obj.extract::<f64>().map_err(|e| {
            if e.is_instance_of::<PyOverflowError>(obj.py()) {
                PyOverflowError::new_err(format!(
                    "argument `{name}`: {} is out of range for {want}",
                    repr(obj)
                ))
            } else {
                PyTypeError::new_err(format!(
                    "argument `{name}`: expected a real number for the {want} parameter, got {}",
                    type_name(obj)
                ))
            }
        })
    };
    if let Some((lo, hi)) = p.dtype.int_range() {
        let v = int(lo, hi)?;
        return Scalar::from_int(p.dtype, v).ok_or_else(|| {
            PyOverflowError::new_err(format!("argument `{name}`: {v} is out of range for {want}"))
        });
    }
    if p.dtype.is_float_scalar() {
        let v = float()?;
        return Scalar::from_f64(p.dtype, v).ok_or_else(|| {
            PyOverflowError::new_err(format!(
                "argument `{name}`: {} is out of range for {want}",
                repr(obj)
            ))
        });
    }
    Err(PyTypeError::new_err(format!(
        "argument `{name}`: {want} scalar parameters are not supported"
    )))
}

// ---------------------------------------------------------------------------------------
// The call.

/// What one argument is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// A scalar.
    Scalar,
    /// A device array described by an interface (or a ferrocuda array): its description.
    Array(u8),
    /// A DLPack-only object: its description once imported.
    Dlpack(u8),
    /// A host array: its description (host pointer).
    Host(u8),
}

/// The arguments of one call, classified: a slot per argument, the array descriptions, the
/// host arrays.
pub struct Classified<'py> {
    slots: [Slot; MAX_ARGS],
    n: usize,
    descs: [Option<ArrayDesc>; MAX_ARRAYS],
    arrays: usize,
    has_dlpack: bool,
    /// Host arrays: the argument index and its view.
    hosts: Vec<(usize, HostView<'py>)>,
}

impl<'py> Classified<'py> {
    /// The slot of each argument.
    pub fn slots(&self) -> &[Slot] {
        &self.slots[..self.n]
    }

    /// The producers' streams of the arrays described so far.
    fn producers(&self) -> [Option<StreamRef>; MAX_ARRAYS] {
        let mut p = [None; MAX_ARRAYS];
        for (p, d) in p.iter_mut().zip(&self.descs[..self.arrays]) {
            *p = d.as_ref().and_then(ArrayDesc::stream);
        }
        p
    }
}

impl Classified<'_> {
    /// No argument classified yet. (Large: built in place in the caller's frame, and passed
    /// by reference from there.)
    #[inline(always)]
    pub fn new(n: usize) -> Self {
        Classified {
            slots: [Slot::Scalar; MAX_ARGS],
            n,
            descs: [None; MAX_ARRAYS],
            arrays: 0,
            has_dlpack: false,
            hosts: Vec::new(),
        }
    }
}

/// Classifies every argument (scalar or array, by the parameter kinds when a family's kernels
/// share them) and describes the arrays (see [`probe`]).
fn classify<'py>(
    t: &Target<'static>,
    args: &Bound<'py, PyTuple>,
    c: &mut Classified<'py>,
    mode: Mode<'_>,
) -> PyResult<()> {
    let mut scratch = ArgScratch::with_mode(mode);
    for i in 0..c.n {
        let a = args.get_item(i)?;
        let is_scalar = match t.is_array(i) {
            Some(array) => !array,
            None => is_number(&a),
        };
        if is_scalar {
            continue;
        }
        if c.arrays == MAX_ARRAYS {
            return Err(PyValueError::new_err(format!(
                "a launch takes at most {MAX_ARRAYS} array arguments"
            )));
        }
        let k = c.arrays as u8;
        let name = t.param_name(i);
        // Described in place, in the slot it keeps for the launch.
        c.slots[i] = match probe_into(&a, name, &mut scratch, &mut c.descs[c.arrays])? {
            Probed::Desc => Slot::Array(k),
            Probed::Dlpack(_) => {
                c.has_dlpack = true;
                Slot::Dlpack(k)
            }
            Probed::Host(o) => {
                let view = host_view(&o, name)?;
                c.descs[c.arrays] = Some(view.desc);
                c.hosts.push((i, view));
                Slot::Host(k)
            }
        };
        c.arrays += 1;
    }
    Ok(())
}

/// Imports the DLPack arguments, asking each producer to order its work before the stream the
/// launch will go on ([`stream::launch_stream`]: the arrays imported here name no stream, so
/// the launch's plan agrees).
fn import_dlpack(
    t: &Target<'static>,
    args: &Bound<'_, PyTuple>,
    c: &mut Classified<'_>,
    caller: Option<StreamRef>,
) -> PyResult<Vec<ManagedTensor>> {
    let producers = c.producers();
    let s = stream::launch_stream(&producers[..c.arrays], caller).as_raw();
    let s = i64::try_from(s)
        .map_err(|_| PyValueError::new_err(format!("stream {s:#x} does not fit DLPack's int64")))?;
    let mut owners = Vec::new();
    for i in 0..c.n {
        if let Slot::Dlpack(k) = c.slots[i] {
            let a = args.get_item(i)?;
            let (d, owner) = dlpack::import(&a, Some(s), t.param_name(i))?;
            c.descs[k as usize] = Some(d);
            owners.push(owner);
        }
    }
    Ok(owners)
}

/// The launch arguments: scalars converted to their parameters' types, arrays by their
/// descriptions (host arrays as [`Arg::Host`]).
pub fn arguments<'d>(
    sig: &Signature,
    args: &Bound<'_, PyTuple>,
    c: &'d Classified<'_>,
    argv: &mut ArgList<'d>,
) -> PyResult<()> {
    for (i, slot) in c.slots().iter().enumerate() {
        let p = &sig.params[i];
        let arg = match *slot {
            Slot::Scalar if p.kind.is_array() => {
                return Err(PyTypeError::new_err(format!(
                    "argument `{}`: expected a {} array, got {}",
                    p.name,
                    p.dtype.name(),
                    type_name(&args.get_item(i)?)
                )));
            }
            Slot::Scalar => Arg::Scalar(scalar(&args.get_item(i)?, p)?),
            Slot::Array(k) | Slot::Dlpack(k) | Slot::Host(k) => {
                let d = c.descs[k as usize]
                    .as_ref()
                    .ok_or_else(|| PyValueError::new_err("array argument not described"))?;
                if matches!(slot, Slot::Host(_)) {
                    Arg::Host(d)
                } else {
                    Arg::Array(d)
                }
            }
        };
        argv.push(arg)
            .map_err(|_| to_py(args.py(), sig.arity_error(c.n)))?;
    }
    Ok(())
}

/// A launch with host arrays: prepared, the host arrays staged on its device and stream (the
/// host crate's [`Staging`], with the GIL held so that Python code cannot touch the sources),
/// executed, and the written ones copied back.
fn launch_with_hosts(
    py: Python<'_>,
    kernel: Kernel<'static>,
    args: &Bound<'_, PyTuple>,
    hosts: &mut [(usize, HostView<'_>)],
    argv: &ArgList<'_>,
    opts: &LaunchOptions,
) -> PyResult<Launched> {
    let sig = kernel.signature();
    for (i, _) in hosts.iter() {
        let p = &sig.params[*i];
        if p.mutable {
            check_host_output(&args.get_item(*i)?, p, &sig.name)?;
        }
    }
    PyErr::warn(
        py,
        &py.get_type::<PerformanceWarning>(),
        c"ferrocuda: host (NumPy) arrays are copied to the device, and mutable ones back, on every launch; keep data on the device (ferrocuda.DeviceArray, CuPy, PyTorch) in loops",
        1,
    )?;
    // The caller's current context comes back after the staging, launch and copies back.
    let _caller = CallerContext::save();
    // Under graph capture the staging refuses the host arrays before copying anything.
    let prepared = py.detach(|| kernel.prepare(argv, opts)).py_err(py)?;
    let mut staging = Staging::new();
    for (i, view) in hosts.iter() {
        staging.stage(&prepared, *i, view).py_err(py)?;
    }
    let resolved = staging.resolve(argv).py_err(py)?;
    // SAFETY: as in `call`; the staged copies live in `staging` until after the downloads,
    // and are freed stream-ordered on the launch stream.
    let launched = py
        .detach(|| unsafe { prepared.execute(&resolved) })
        .py_err(py)?;
    for (i, view) in hosts.iter_mut() {
        if sig.params[*i].mutable {
            staging.download(*i, view).py_err(py)?;
            let target = args.get_item(*i)?;
            if !view.array.is(&target) {
                numpy_attr(py, "copyto")?.call1((target, &view.array))?;
            }
        }
    }
    Ok(launched)
}

/// What [`read`] found besides the classified arguments: the host arrays (argument index and
/// view), the DLPack imports, the selected kernel.
pub type ReadArgs<'py> = (
    Vec<(usize, HostView<'py>)>,
    Vec<ManagedTensor>,
    Kernel<'static>,
);

/// Steps 1–3 of a call (see the module documentation), shared by calls and `bind`: classifies
/// `args` into `c` by the rules of `mode`, imports DLPack arguments for the launch stream that
/// `caller` and the producers decide, and selects the kernel (the host's [`Target::choose`]:
/// arity, selection, the "no variant" error).
pub fn read<'py>(
    t: &Target<'static>,
    args: &Bound<'py, PyTuple>,
    c: &mut Classified<'py>,
    caller: Option<StreamRef>,
    mode: Mode<'_>,
) -> PyResult<ReadArgs<'py>> {
    let py = args.py();
    // Before anything is read (or imported): a wrong number of arguments fails first.
    t.check_arity(args.len()).py_err(py)?;
    classify(t, args, c, mode)?;
    let hosts = std::mem::take(&mut c.hosts);
    ferrocuda_host::mark!("py: describe the arguments");
    let owners = if c.has_dlpack {
        import_dlpack(t, args, c, caller)?
    } else {
        Vec::new()
    };
    let mut ops = [Operand::Scalar; MAX_ARGS];
    let n = operands(c.slots(), &c.descs, &mut ops);
    let kernel = t.choose(&ops[..n]).py_err(py)?;
    Ok((hosts, owners, kernel))
}

/// Launches `t` on `args` with the arguments read by the rules of `mode`: the whole per-call
/// path (see the module documentation).
pub fn call(
    py: Python<'_>,
    t: &Target<'static>,
    args: &Bound<'_, PyTuple>,
    opts: CallOpts,
    mode: Mode<'_>,
) -> PyResult<()> {
    ferrocuda_host::mark!(start);
    release_completed(py);
    ferrocuda_host::mark!("py: call entry, options, completed releases");
    let mut c = Classified::new(args.len().min(MAX_ARGS));
    let (mut hosts, owners, kernel) = read(t, args, &mut c, opts.stream, mode)?;
    let sig = kernel.signature();
    let mut argv = ArgList::new();
    arguments(sig, args, &c, &mut argv)?;
    let lo = opts.launch_options();
    ferrocuda_host::mark!("py: select the kernel, scalars");
    let launched = if hosts.is_empty() {
        py.detach(|| {
            ferrocuda_host::mark!("py: release the GIL");
            // SAFETY: kernels come from modules built by ferrocuda's builder, whose kernels
            // are memory-safe for any arguments that pass the host's checks (the manifest
            // contract); every array's owner is alive for the call (the argument tuple, the
            // DLPack owners), and afterwards the stream plan orders the producers' streams
            // behind the kernel and DLPack capsules are released only once the kernel
            // completed.
            unsafe { kernel.launch(&argv, &lo) }
        })
        .py_err(py)?
    } else {
        launch_with_hosts(py, kernel, args, &mut hosts, &argv, &lo)?
    };
    ferrocuda_host::mark!("py: retake the GIL, return");
    if !owners.is_empty() {
        // A captured launch ran nothing: the graph's replays use the arrays as long as their
        // owners (the caller's objects) keep them, and a fence on the capturing stream could
        // not be queried. Without a launch there is nothing to wait for either.
        if launched.config.is_some() && !launched.plan.is_captured() {
            defer(py, launched.device, launched.plan.launch_stream(), owners)?;
        } else {
            drop(owners);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Selection and checks.

fn is_number(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>()
}

/// What the host's selection rule sees of the arguments: scalars, and arrays by their
/// descriptions (an array not described yet is seen as a scalar, which no array parameter
/// takes).
fn operands<'d>(
    slots: &[Slot],
    descs: &'d [Option<ArrayDesc>],
    out: &mut [Operand<'d>; MAX_ARGS],
) -> usize {
    for (op, slot) in out.iter_mut().zip(slots) {
        *op = match slot {
            Slot::Scalar => Operand::Scalar,
            Slot::Array(k) | Slot::Dlpack(k) | Slot::Host(k) => descs[*k as usize]
                .as_ref()
                .map_or(Operand::Scalar, Operand::Array),
        };
    }
    slots.len()
}

/// Checks that the host array behind a mutable parameter can be written back.
fn check_host_output(obj: &Bound<'_, PyAny>, p: &Param, kernel: &str) -> PyResult<()> {
    let py = obj.py();
    let ro = obj
        .getattr_opt(intern!(py, "__array_interface__"))?
        .map(|i| -> PyResult<bool> { i.get_item(intern!(py, "data"))?.get_item(1)?.is_truthy() })
        .transpose()?;
    match ro {
        None => Err(PyValueError::new_err(format!(
            "argument `{}`: kernel `{kernel}` writes to `{}`, so a host argument there must be \
             a writable NumPy array, not {}",
            p.name,
            p.name,
            type_name(obj)
        ))),
        Some(true) => Err(PyValueError::new_err(format!(
            "argument `{}`: __array_interface__['data']: array is read-only, but kernel \
             `{kernel}` writes to `{}`",
            p.name, p.name
        ))),
        Some(false) => Ok(()),
    }
}
