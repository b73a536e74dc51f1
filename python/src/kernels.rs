//! `Module`, `Kernel`, `Family` and the per-call launch path.
//!
//! # One call
//!
//! 1. Each argument is classified by its parameter's kind (scalar or array; the kinds of a
//!    family's kernels agree, so the first kernel's are used): arrays are *probed* once —
//!    ferrocuda arrays give their descriptor directly, `__cuda_array_interface__` /
//!    `__sycl_usm_array_interface__` dictionaries are read and validated without heap
//!    allocation, DLPack-only objects and host (NumPy) arrays are noted.
//! 2. If there are DLPack or host arrays, the launch stream is fixed now: the caller's, else
//!    the producers' common stream, else the legacy default stream. DLPack producers are asked
//!    for their capsule with that stream (they order their own work before it).
//! 3. A family picks its kernel by the arrays' element types and ranks.
//! 4. Scalars are converted to the parameter's type (range-checked).
//! 5. Host arrays are copied to temporary device arrays on the launch stream
//!    (`PerformanceWarning`).
//! 6. The host crate checks everything against the manifest, orders the launch against the
//!    producers' streams and launches — with the GIL released.
//! 7. Mutable host arrays are copied back (the call then waits for the kernel). DLPack
//!    capsules are released once the kernel has completed: an event on the launch stream is
//!    polled at later calls (and by `ferrocuda.synchronize`).
//!
//! Scalars: integer parameters take `int` (or `__index__` objects such as NumPy integers) in
//! the parameter type's range (`OverflowError` otherwise) — never `float` or `bool`; float
//! parameters take `int`, `float` or `__float__` objects — never `bool`; a finite value beyond
//! `float32`'s range is an `OverflowError`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ferrocuda_abi::{DType, ParamKind};
use ferrocuda_host::driver::Fence;
use ferrocuda_host::module::Param;
use ferrocuda_host::{Arg, ArrayDesc, Kernel, LaunchOptions, Module, Scalar, StreamRef, SyncMode};
use pyo3::exceptions::{PyAttributeError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple};

use crate::arrays::{download_into, upload_host, AnyDeviceArray, HostView};
use crate::dlpack::{self, DlpackOwner};
use crate::interface::{probe, read_int, type_name, Found, Scratch};
use crate::streams::{parse_stream, parse_sync};
use crate::{IntoPyResult, PerformanceWarning};

const MAX_ARRAYS: usize = ferrocuda_host::stream::MAX_PRODUCERS;
const MAX_ARGS: usize = ferrocuda_host::module::MAX_PARAMS;

// ---------------------------------------------------------------------------------------
// Deferred release of DLPack capsules.

type Pending = (Fence, Vec<DlpackOwner>);

static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());
static PENDING_LEN: AtomicUsize = AtomicUsize::new(0);

/// Releases the DLPack capsules whose kernels have completed (a no-op, one atomic load, when
/// none is pending). Called at every launch and by `ferrocuda.synchronize`.
pub fn release_completed(_py: Python<'_>) {
    if PENDING_LEN.load(Ordering::Acquire) == 0 {
        return;
    }
    let done: Vec<Pending> = {
        let mut q = PENDING.lock().unwrap_or_else(|p| p.into_inner());
        let mut done = Vec::new();
        let mut i = 0;
        while i < q.len() {
            // A failed query (broken context) releases too: the kernel will not run.
            if q[i].0.is_complete().unwrap_or(true) {
                done.push(q.swap_remove(i));
            } else {
                i += 1;
            }
        }
        PENDING_LEN.store(q.len(), Ordering::Release);
        done
    };
    // Deleters run outside the lock (they may call back into Python), with the GIL held.
    drop(done);
}

fn defer(
    py: Python<'_>,
    device: usize,
    stream: StreamRef,
    owners: Vec<DlpackOwner>,
) -> PyResult<()> {
    match py.detach(|| Fence::record(device, stream)) {
        Ok(f) => {
            let mut q = PENDING.lock().unwrap_or_else(|p| p.into_inner());
            q.push((f, owners));
            PENDING_LEN.store(q.len(), Ordering::Release);
            Ok(())
        }
        Err(e) => {
            // Cannot fence: wait for the kernel instead, then release.
            let r = py.detach(|| ferrocuda_host::launch::synchronize(device, stream));
            drop(owners);
            r.map_err(|_| e).py_err(py)
        }
    }
}

/// `[(stage, total ns, marks)]` of the launch path since the last call (a profiling build's
/// stage timing; see `ferrocuda_host::timing`). Resets the totals.
#[cfg(feature = "launch-timing")]
#[pyfunction]
fn _launch_timing() -> Vec<(&'static str, f64, u64)> {
    ferrocuda_host::timing::take()
}

/// Number of DLPack capsules still held for kernels that may be running (for tests).
#[pyfunction]
fn _pending_releases(py: Python<'_>) -> usize {
    release_completed(py);
    PENDING_LEN.load(Ordering::Acquire)
}

// ---------------------------------------------------------------------------------------
// Targets and options.

/// What one launcher may launch: one kernel, or a family's kernels.
pub struct Target {
    name: String,
    is_family: bool,
    kernels: Box<[Kernel<'static>]>,
    /// The parameter kinds every kernel shares (`None` if they differ: arguments are then
    /// classified by their Python type).
    kinds: Option<Box<[ParamKind]>>,
}

impl Target {
    fn new(name: String, is_family: bool, kernels: Vec<Kernel<'static>>) -> Self {
        let first: Vec<ParamKind> = kernels[0]
            .signature()
            .params
            .iter()
            .map(|p| p.kind)
            .collect();
        let same = kernels.iter().all(|k| {
            let ps = &k.signature().params;
            ps.len() == first.len() && ps.iter().zip(&first).all(|(p, &f)| p.kind == f)
        });
        Target {
            name,
            is_family,
            kinds: same.then(|| first.into_boxed_slice()),
            kernels: kernels.into_boxed_slice(),
        }
    }

    fn param_name(&self, i: usize) -> &str {
        self.kernels[0]
            .signature()
            .params
            .get(i)
            .map(|p| p.name.as_str())
            .unwrap_or("?")
    }
}

/// Launch options of one call.
#[derive(Clone, Copy, Debug)]
pub struct CallOpts {
    stream: Option<StreamRef>,
    sync: Option<SyncMode>,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
    shared_mem: u32,
    check_pointers: bool,
}

fn dim3(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<[u32; 3]>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let bad = || {
        PyValueError::new_err(format!(
            "argument `{what}`: expected a positive int or a tuple of 1 to 3 positive ints, \
             got {}",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    };
    let one = |o: &Bound<'_, PyAny>| -> PyResult<u32> {
        match read_int(o)? {
            Some(v) if v >= 1 && v <= i128::from(u32::MAX) => Ok(v as u32),
            _ => Err(bad()),
        }
    };
    if obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return Ok(Some([one(obj)?, 1, 1]));
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = obj.cast::<PyList>() {
        l.iter().collect()
    } else {
        return Err(bad());
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

fn shared_mem(obj: Option<&Bound<'_, PyAny>>) -> PyResult<u32> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(0);
    };
    match read_int(obj)? {
        Some(v) if v >= 0 && v <= i128::from(u32::MAX) => Ok(v as u32),
        _ => Err(PyValueError::new_err(format!(
            "shared memory size must be an int in 0..=2**32-1, got {}",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        ))),
    }
}

/// Numba-style `[grid, block, stream, shared_mem]` configuration.
fn parse_config(cfg: &Bound<'_, PyAny>) -> PyResult<CallOpts> {
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
                crate::interface::repr(obj)
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
                    crate::interface::repr(obj)
                ))
            } else {
                PyTypeError::new_err(format!(
                    "argument `{name}`: expected a real number for the {want} parameter, got {}",
                    type_name(obj)
                ))
            }
        })
    };
    Ok(match p.dtype {
        DType::I8 => Scalar::I8(int(i8::MIN.into(), i8::MAX.into())? as i8),
        DType::I16 => Scalar::I16(int(i16::MIN.into(), i16::MAX.into())? as i16),
        DType::I32 => Scalar::I32(int(i32::MIN.into(), i32::MAX.into())? as i32),
        DType::I64 => Scalar::I64(int(i64::MIN.into(), i64::MAX.into())? as i64),
        DType::U8 => Scalar::U8(int(0, u8::MAX.into())? as u8),
        DType::U16 => Scalar::U16(int(0, u16::MAX.into())? as u16),
        DType::U32 => Scalar::U32(int(0, u32::MAX.into())? as u32),
        DType::U64 => Scalar::U64(int(0, u64::MAX.into())? as u64),
        DType::F32 => {
            let v = float()?;
            let f = v as f32;
            if v.is_finite() && f.is_infinite() {
                return Err(PyOverflowError::new_err(format!(
                    "argument `{name}`: {} is out of range for float32",
                    crate::interface::repr(obj)
                )));
            }
            Scalar::F32(f)
        }
        DType::F64 => Scalar::F64(float()?),
        other => {
            return Err(PyTypeError::new_err(format!(
                "argument `{name}`: {} scalar parameters are not supported",
                other.name()
            )))
        }
    })
}

// ---------------------------------------------------------------------------------------
// The call.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Scalar,
    Array(u8),
    Dlpack(u8),
    Host(u8),
}

struct HostEntry<'py> {
    arg: usize,
    view: HostView<'py>,
    device: Option<AnyDeviceArray>,
}

fn is_number(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>()
}

fn arity_error(t: &Target, n: usize) -> PyErr {
    let sig = t.kernels[0].signature();
    PyTypeError::new_err(format!(
        "{} `{}` takes {} argument(s) ({}), got {n}",
        if t.is_family {
            "kernel family"
        } else {
            "kernel"
        },
        t.name,
        sig.params.len(),
        sig.param_list()
    ))
}

fn describe_args(slots: &[Slot], descs: &[Option<ArrayDesc>]) -> String {
    let mut s = String::new();
    for (i, slot) in slots.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        match slot {
            Slot::Scalar => s.push_str("scalar"),
            Slot::Array(k) | Slot::Dlpack(k) | Slot::Host(k) => match &descs[*k as usize] {
                Some(d) => {
                    let _ = write!(s, "{} {}-D array", d.dtype().name(), d.ndim());
                }
                None => s.push_str("array"),
            },
        }
    }
    s
}

fn matches(k: &Kernel<'_>, slots: &[Slot], descs: &[Option<ArrayDesc>]) -> bool {
    let ps = &k.signature().params;
    ps.len() == slots.len()
        && ps.iter().zip(slots).all(|(p, s)| match (p.kind, s) {
            (ParamKind::Scalar, Slot::Scalar) => true,
            (ParamKind::Scalar, _) | (_, Slot::Scalar) => false,
            (kind, Slot::Array(i) | Slot::Dlpack(i) | Slot::Host(i)) => match &descs[*i as usize] {
                Some(d) => d.dtype() == p.dtype && (kind != ParamKind::View || d.ndim() == p.rank),
                None => false,
            },
        })
}

fn select(t: &Target, slots: &[Slot], descs: &[Option<ArrayDesc>]) -> PyResult<Kernel<'static>> {
    if let Some(k) = t.kernels.iter().find(|k| matches(k, slots, descs)) {
        return Ok(*k);
    }
    if t.kernels.len() == 1 {
        // The host's argument check names the mismatch.
        return Ok(t.kernels[0]);
    }
    let mut variants = String::new();
    for k in t.kernels.iter() {
        let _ = write!(variants, "\n    {}", signature_text(k));
    }
    Err(PyTypeError::new_err(format!(
        "kernel family `{}` has no variant for ({}); variants:{variants}",
        t.name,
        describe_args(slots, descs)
    )))
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

fn device_of(descs: &[Option<ArrayDesc>], slots: &[Slot]) -> usize {
    for s in slots {
        if let Slot::Array(i) | Slot::Dlpack(i) = s {
            if let Some(d) = &descs[*i as usize] {
                if !d.is_empty() {
                    if let Ok(info) = ferrocuda_host::driver::pointer_info(d.ptr()) {
                        if info.device >= 0 {
                            return info.device as usize;
                        }
                    }
                }
            }
        }
    }
    0
}

/// Launches `t` on `args` (the whole per-call path; see the module documentation).
fn call(py: Python<'_>, t: &Target, args: &Bound<'_, PyTuple>, opts: CallOpts) -> PyResult<()> {
    ferrocuda_host::mark!(start);
    release_completed(py);
    ferrocuda_host::mark!(0);
    let n = args.len();
    if let Some(kinds) = &t.kinds {
        if n != kinds.len() {
            return Err(arity_error(t, n));
        }
    }
    if n > MAX_ARGS {
        return Err(arity_error(t, n));
    }
    let mut slots = [Slot::Scalar; MAX_ARGS];
    let mut descs: [Option<ArrayDesc>; MAX_ARRAYS] = [None; MAX_ARRAYS];
    let mut nd = 0usize;
    let mut has_dlpack = false;
    let mut hosts: Vec<HostEntry<'_>> = Vec::new();
    let mut scratch = Scratch::new();

    for i in 0..n {
        let a = args.get_item(i)?;
        let is_scalar = match &t.kinds {
            Some(k) => k[i] == ParamKind::Scalar,
            None => is_number(&a),
        };
        if is_scalar {
            continue;
        }
        if nd == MAX_ARRAYS {
            return Err(PyValueError::new_err(format!(
                "a launch takes at most {MAX_ARRAYS} array arguments"
            )));
        }
        let name = t.param_name(i);
        slots[i] = match probe(&a, name, &mut scratch)? {
            Found::Desc(d) => {
                descs[nd] = Some(d);
                Slot::Array(nd as u8)
            }
            Found::Dlpack(_) => {
                has_dlpack = true;
                Slot::Dlpack(nd as u8)
            }
            Found::Host(o) => {
                let (d, arr) = crate::arrays::host_view(&o, name)?;
                descs[nd] = Some(d);
                hosts.push(HostEntry {
                    arg: i,
                    view: HostView {
                        array: arr,
                        desc: d,
                    },
                    device: None,
                });
                Slot::Host(nd as u8)
            }
        };
        nd += 1;
    }
    let slots = &slots[..n];
    ferrocuda_host::mark!(1);

    // The launch stream, fixed now when DLPack producers or host copies need it.
    let mut launch_stream = opts.stream;
    if has_dlpack || !hosts.is_empty() {
        let mut producers = [None; MAX_ARRAYS];
        for (p, d) in producers.iter_mut().zip(&descs[..nd]) {
            *p = d.as_ref().and_then(ArrayDesc::stream);
        }
        let s = ferrocuda_host::stream::plan(&producers[..nd], opts.stream, SyncMode::Off)
            .py_err(py)?
            .launch_stream();
        launch_stream = Some(s);
    }

    let mut owners: Vec<DlpackOwner> = Vec::new();
    if has_dlpack {
        let s = launch_stream.unwrap_or(StreamRef::Legacy).as_raw();
        let s = i64::try_from(s).map_err(|_| {
            PyValueError::new_err(format!("stream {s:#x} does not fit DLPack's int64"))
        })?;
        for (i, slot) in slots.iter().enumerate() {
            if let Slot::Dlpack(k) = slot {
                let a = args.get_item(i)?;
                let (d, owner) = dlpack::import(&a, Some(s), t.param_name(i))?;
                descs[*k as usize] = Some(d);
                owners.push(owner);
            }
        }
    }

    let kernel = select(t, slots, &descs)?;
    let sig = kernel.signature();
    if sig.params.len() != n {
        return Err(arity_error(t, n));
    }

    let mut argv = [Arg::Scalar(Scalar::I8(0)); MAX_ARGS];
    for (i, slot) in slots.iter().enumerate() {
        if *slot == Slot::Scalar {
            let p = &sig.params[i];
            if p.kind != ParamKind::Scalar {
                let a = args.get_item(i)?;
                return Err(PyTypeError::new_err(format!(
                    "argument `{}`: expected a {} array, got {}",
                    p.name,
                    p.dtype.name(),
                    type_name(&a)
                )));
            }
            argv[i] = Arg::Scalar(scalar(&args.get_item(i)?, p)?);
        }
    }

    if !hosts.is_empty() {
        for h in &hosts {
            let p = &sig.params[h.arg];
            if p.mutable {
                check_host_output(&args.get_item(h.arg)?, p, &sig.name)?;
            }
        }
        PyErr::warn(
            py,
            &py.get_type::<PerformanceWarning>(),
            c"ferrocuda: host (NumPy) arrays are copied to the device, and mutable ones back, on every launch; keep data on the device (ferrocuda.DeviceArray, CuPy, PyTorch) in loops",
            1,
        )?;
        let stream = launch_stream.unwrap_or(StreamRef::Legacy);
        let device = py.detach(|| device_of(&descs[..nd], slots));
        for h in hosts.iter_mut() {
            let name = &sig.params[h.arg].name;
            let dev = upload_host(py, &h.view, device, stream, name)?;
            if let Slot::Host(k) = slots[h.arg] {
                descs[k as usize] = Some(*dev.desc());
            }
            h.device = Some(dev);
        }
    }

    for (i, slot) in slots.iter().enumerate() {
        if let Slot::Array(k) | Slot::Dlpack(k) | Slot::Host(k) = slot {
            if let Some(d) = &descs[*k as usize] {
                argv[i] = Arg::Array(d);
            }
        }
    }
    let lo = LaunchOptions {
        stream: launch_stream,
        sync: opts.sync,
        check_pointers: opts.check_pointers,
        grid: opts.grid,
        block: opts.block,
        shared_mem_bytes: opts.shared_mem,
    };
    let argv = &argv[..n];
    ferrocuda_host::mark!(2);
    let launched = py
        .detach(|| {
            ferrocuda_host::mark!(3);
            // Load the driver first, so that every driver call of the launch finds it. Without
            // one, argument errors still come first (they need no GPU), then NoDriver.
            if let Err(e) = ferrocuda_host::driver::init() {
                ferrocuda_host::launch::check_args(sig, argv)?;
                return Err(e);
            }
            // SAFETY: kernels come from modules built by ferrocuda's builder, whose kernels
            // are memory-safe for any arguments that pass the host's checks (the manifest
            // contract); every array's owner is alive for the call (the argument tuple, the
            // DLPack owners, the host temporaries), and afterwards the stream plan orders the
            // producers' streams behind the kernel, DLPack capsules are released only once
            // the kernel completed, and host temporaries are freed stream-ordered on the
            // launch stream.
            unsafe { kernel.launch(argv, &lo) }
        })
        .py_err(py)?;
    ferrocuda_host::mark!(14);

    for h in &hosts {
        if sig.params[h.arg].mutable {
            if let Some(dev) = &h.device {
                download_into(py, dev, &h.view, &args.get_item(h.arg)?)?;
            }
        }
    }
    if !owners.is_empty() {
        if launched.config.is_some() {
            defer(py, launched.device, launched.plan.launch_stream(), owners)?;
        } else {
            drop(owners);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Documentation text.

fn param_text(p: &Param) -> String {
    let dt = p.dtype.name();
    match p.kind {
        ParamKind::Scalar => format!("{}: {dt}", p.name),
        ParamKind::Slice => format!(
            "{}: {dt}[:] (C-contiguous{})",
            p.name,
            if p.mutable { ", written" } else { "" }
        ),
        ParamKind::View => format!(
            "{}: {dt} {}-D array (any strides{})",
            p.name,
            p.rank,
            if p.mutable { ", written" } else { "" }
        ),
    }
}

fn signature_text(k: &Kernel<'_>) -> String {
    let sig = k.signature();
    let ps: Vec<String> = sig.params.iter().map(param_text).collect();
    format!("{}({})", sig.name, ps.join(", "))
}

const CALL_DOC: &str = "\
Arrays may be any objects exporting ``__cuda_array_interface__`` (v0-v3) or
``__sycl_usm_array_interface__``, DLPack-only objects (JAX; imported with the launch stream),
``ferrocuda.DeviceArray`` / ``ForeignArray``, or NumPy host arrays (copied in, and back for
written arguments, with a ``ferrocuda.PerformanceWarning``).

Keyword arguments: ``stream`` (None, 1, 2, a handle, or a CuPy/PyTorch/Numba/``__cuda_stream__``
stream object), ``sync`` (None = FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC, True/'default', 'event',
False/'off'), ``grid`` and ``block`` (int or tuple of up to 3 ints; default: automatic),
``check_pointers`` (ask the driver whether every pointer is device memory; default True).
Numba-style ``launcher[grid, block, stream, shared_mem](...)`` works too. Returns None once
the launch is enqueued.";

fn kernel_doc(k: &Kernel<'_>) -> String {
    let sig = k.signature();
    let names: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
    let mut s = format!(
        "Kernel ``{}`` (family ``{}``).\n\n    {}\n\nCall as ``{}({}, *, stream=None, sync=None, grid=None, block=None, \
         check_pointers=True)``.\n",
        sig.name,
        sig.family,
        signature_text(k),
        sig.name,
        names.join(", ")
    );
    for g in &sig.same_shape {
        let g: Vec<&str> = g.iter().map(|&i| sig.params[i].name.as_str()).collect();
        let _ = writeln!(s, "Arguments {} must have the same shape.", g.join(", "));
    }
    s.push('\n');
    s.push_str(CALL_DOC);
    s
}

fn family_doc(name: &str, ks: &[Kernel<'_>]) -> String {
    let names: Vec<&str> = ks[0]
        .signature()
        .params
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let mut s = format!(
        "Kernel family ``{name}``: launches the variant matching the arrays' element types \
         and ranks.\n\nCall as ``{name}({}, *, stream=None, sync=None, grid=None, block=None, \
         check_pointers=True)``.\n\nVariants:\n",
        names.join(", ")
    );
    for k in ks {
        let _ = writeln!(s, "    {}", signature_text(k));
    }
    let sig = ks[0].signature();
    for g in &sig.same_shape {
        let g: Vec<&str> = g.iter().map(|&i| sig.params[i].name.as_str()).collect();
        let _ = writeln!(s, "\nArguments {} must have the same shape.", g.join(", "));
    }
    s.push('\n');
    s.push_str(CALL_DOC);
    s
}

// ---------------------------------------------------------------------------------------
// Python classes.

fn opts_from(
    stream: Option<&Bound<'_, PyAny>>,
    sync: Option<&Bound<'_, PyAny>>,
    grid: Option<&Bound<'_, PyAny>>,
    block: Option<&Bound<'_, PyAny>>,
    check_pointers: bool,
) -> PyResult<CallOpts> {
    Ok(CallOpts {
        stream: parse_stream(stream)?,
        sync: parse_sync(sync)?,
        grid: dim3(grid, "grid")?,
        block: dim3(block, "block")?,
        shared_mem: 0,
        check_pointers,
    })
}

/// One kernel of a module: call it on arrays and scalars (see its ``__doc__``).
#[pyclass(name = "Kernel", module = "ferrocuda", frozen, dict)]
pub struct PyKernel {
    target: Arc<Target>,
}

#[pymethods]
impl PyKernel {
    /// Launches the kernel; see the class documentation for the arguments.
    #[pyo3(signature = (*args, stream = None, sync = None, grid = None, block = None, check_pointers = true))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        stream: Option<&Bound<'_, PyAny>>,
        sync: Option<&Bound<'_, PyAny>>,
        grid: Option<&Bound<'_, PyAny>>,
        block: Option<&Bound<'_, PyAny>>,
        check_pointers: bool,
    ) -> PyResult<()> {
        let o = opts_from(stream, sync, grid, block, check_pointers)?;
        call(py, &self.target, args, o)
    }

    /// Numba-style configuration: ``kernel[grid, block]``, ``kernel[grid, block, stream]`` or
    /// ``kernel[grid, block, stream, shared_mem]``.
    fn __getitem__(&self, config: &Bound<'_, PyAny>) -> PyResult<PyConfigured> {
        Ok(PyConfigured {
            target: self.target.clone(),
            opts: parse_config(config)?,
        })
    }

    /// The kernel's (PTX entry) name.
    #[getter]
    fn name(&self) -> &str {
        self.target.kernels[0].name()
    }

    /// The kernel's family.
    #[getter]
    fn family(&self) -> &str {
        &self.target.kernels[0].signature().family
    }

    /// The parameters: ``(name, kind, dtype, rank, mutable)`` tuples, ``kind`` being
    /// ``'scalar'``, ``'slice'`` or ``'view'``.
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        params_tuple(py, &self.target.kernels[0])
    }

    /// The signature as text, e.g. ``add_f32(a: float32[:] (C-contiguous), …)``.
    #[getter]
    fn signature(&self) -> String {
        signature_text(&self.target.kernels[0])
    }

    fn __repr__(&self) -> String {
        format!(
            "<ferrocuda.Kernel {}>",
            signature_text(&self.target.kernels[0])
        )
    }
}

fn params_tuple<'py>(py: Python<'py>, k: &Kernel<'_>) -> PyResult<Bound<'py, PyTuple>> {
    let items: Vec<Bound<'py, PyTuple>> = k
        .signature()
        .params
        .iter()
        .map(|p| {
            PyTuple::new(
                py,
                [
                    p.name.as_str().into_pyobject(py)?.into_any(),
                    p.kind.name().into_pyobject(py)?.into_any(),
                    p.dtype.name().into_pyobject(py)?.into_any(),
                    p.rank.into_pyobject(py)?.into_any(),
                    PyBool::new(py, p.mutable).to_owned().into_any(),
                ],
            )
        })
        .collect::<PyResult<_>>()?;
    PyTuple::new(py, items)
}

/// A kernel family: launches the variant that matches the arguments' element types and ranks
/// (see its ``__doc__``).
#[pyclass(name = "Family", module = "ferrocuda", frozen, dict)]
pub struct PyFamily {
    target: Arc<Target>,
    kernels: Py<PyTuple>,
}

#[pymethods]
impl PyFamily {
    /// Launches the matching variant; see the class documentation for the arguments.
    #[pyo3(signature = (*args, stream = None, sync = None, grid = None, block = None, check_pointers = true))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        stream: Option<&Bound<'_, PyAny>>,
        sync: Option<&Bound<'_, PyAny>>,
        grid: Option<&Bound<'_, PyAny>>,
        block: Option<&Bound<'_, PyAny>>,
        check_pointers: bool,
    ) -> PyResult<()> {
        let o = opts_from(stream, sync, grid, block, check_pointers)?;
        call(py, &self.target, args, o)
    }

    /// Numba-style configuration, as :meth:`Kernel.__getitem__`.
    fn __getitem__(&self, config: &Bound<'_, PyAny>) -> PyResult<PyConfigured> {
        Ok(PyConfigured {
            target: self.target.clone(),
            opts: parse_config(config)?,
        })
    }

    /// The family's name.
    #[getter]
    fn name(&self) -> &str {
        &self.target.name
    }

    /// The variants, a tuple of :class:`Kernel`.
    #[getter]
    fn kernels(&self, py: Python<'_>) -> Py<PyTuple> {
        self.kernels.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        let names: Vec<&str> = self.target.kernels.iter().map(|k| k.name()).collect();
        format!(
            "<ferrocuda.Family {} [{}]>",
            self.target.name,
            names.join(", ")
        )
    }
}

/// A kernel or family with a fixed launch configuration (``launcher[grid, block, stream]``).
#[pyclass(name = "ConfiguredLauncher", module = "ferrocuda", frozen)]
pub struct PyConfigured {
    target: Arc<Target>,
    opts: CallOpts,
}

#[pymethods]
impl PyConfigured {
    /// Launches with the configured grid, block, stream and shared memory.
    #[pyo3(signature = (*args, sync = None, check_pointers = true))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        sync: Option<&Bound<'_, PyAny>>,
        check_pointers: bool,
    ) -> PyResult<()> {
        let o = CallOpts {
            sync: parse_sync(sync)?,
            check_pointers,
            ..self.opts
        };
        call(py, &self.target, args, o)
    }

    fn __repr__(&self) -> String {
        format!(
            "<ferrocuda.ConfiguredLauncher {} grid={:?} block={:?} stream={:?}>",
            self.target.name,
            self.opts.grid,
            self.opts.block,
            self.opts.stream.map(StreamRef::as_raw)
        )
    }
}

/// A PTX module and its manifest (built by ``ferrocuda-builder``): its kernels are attributes
/// (``module.add_f32``), and so are its families (``module.add``, dispatching by type).
#[pyclass(name = "Module", module = "ferrocuda", frozen)]
pub struct PyKModule {
    module: &'static Module,
    source: String,
    kernels: Py<PyDict>,
    families: Py<PyDict>,
}

fn make_module(py: Python<'_>, module: &'static Module, source: String) -> PyResult<PyKModule> {
    let kernels = PyDict::new(py);
    let mut order: Vec<&str> = Vec::new();
    let mut by_family: HashMap<&str, Vec<(Kernel<'static>, Py<PyKernel>)>> = HashMap::new();
    for sig in module.signatures() {
        let k = module.kernel(&sig.name).py_err(py)?;
        let obj = Py::new(
            py,
            PyKernel {
                target: Arc::new(Target::new(sig.name.clone(), false, vec![k])),
            },
        )?;
        obj.bind(py)
            .setattr(intern!(py, "__doc__"), kernel_doc(&k))?;
        kernels.set_item(&sig.name, &obj)?;
        let fam = sig.family.as_str();
        if !by_family.contains_key(fam) {
            order.push(fam);
        }
        by_family.entry(fam).or_default().push((k, obj));
    }
    let families = PyDict::new(py);
    for fam in order {
        let members = by_family.remove(fam).unwrap_or_default();
        if members.is_empty() {
            continue;
        }
        let ks: Vec<Kernel<'static>> = members.iter().map(|(k, _)| *k).collect();
        let doc = family_doc(fam, &ks);
        let objs = PyTuple::new(py, members.iter().map(|(_, o)| o.clone_ref(py)))?;
        let f = Py::new(
            py,
            PyFamily {
                target: Arc::new(Target::new(fam.to_owned(), true, ks)),
                kernels: objs.unbind(),
            },
        )?;
        f.bind(py).setattr(intern!(py, "__doc__"), doc)?;
        families.set_item(fam, f)?;
    }
    Ok(PyKModule {
        module,
        source,
        kernels: kernels.unbind(),
        families: families.unbind(),
    })
}

/// Modules loaded from files, by (canonical path, modification time, size): loading the same
/// files again reuses the module (it is JIT-loaded into each device once, and never unloaded).
type LoadKey = (PathBuf, Option<std::time::SystemTime>, u64);
static LOADED: Mutex<Vec<(LoadKey, &'static Module)>> = Mutex::new(Vec::new());

fn load_static(path: &str) -> ferrocuda_host::Result<&'static Module> {
    let canon = std::fs::canonicalize(path)
        .map_err(|e| ferrocuda_host::Error::value(format!("cannot read {path}: {e}")))?;
    let meta = std::fs::metadata(&canon).ok();
    let key: LoadKey = (
        canon.clone(),
        meta.as_ref().and_then(|m| m.modified().ok()),
        meta.as_ref().map(|m| m.len()).unwrap_or(0),
    );
    let mut cache = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, m)) = cache.iter().find(|(k, _)| *k == key) {
        return Ok(m);
    }
    let m: &'static Module = Box::leak(Box::new(Module::from_manifest_file(&canon)?));
    cache.push((key, m));
    Ok(m)
}

#[pymethods]
impl PyKModule {
    /// Loads a module from the manifest JSON written by ``ferrocuda-builder`` (the PTX file
    /// it names sits beside it). Loading the same unchanged files again returns a module over
    /// the same loaded code.
    #[staticmethod]
    fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyKModule> {
        let p = path.to_string_lossy().into_owned();
        let m = py.detach(|| load_static(&p)).py_err(py)?;
        make_module(py, m, p)
    }

    /// Kernel name → :class:`Kernel` (a new dict).
    #[getter]
    fn kernels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.kernels.bind(py).copy()
    }

    /// Family name → :class:`Family` (a new dict).
    #[getter]
    fn families<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.families.bind(py).copy()
    }

    /// The manifest, as JSON text.
    #[getter]
    fn manifest(&self) -> String {
        self.module.manifest().to_json()
    }

    /// The PTX target, e.g. ``'sm_80'``.
    #[getter]
    fn arch(&self) -> &str {
        &self.module.manifest().arch
    }

    /// Where the module came from (a manifest path, or ``'<bundled>'``).
    #[getter]
    fn source(&self) -> &str {
        &self.source
    }

    /// ``module.<family>`` or ``module.<kernel>`` (a family wins when both have the name).
    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        if let Some(f) = self.families.bind(py).get_item(name)? {
            return Ok(f);
        }
        if let Some(k) = self.kernels.bind(py).get_item(name)? {
            return Ok(k);
        }
        Err(PyAttributeError::new_err(format!(
            "module {} has no kernel or family named {name:?}",
            self.source
        )))
    }

    fn __dir__(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mut v: Vec<String> = self.families.bind(py).keys().extract()?;
        v.extend(self.kernels.bind(py).keys().extract::<Vec<String>>()?);
        v.extend(
            ["kernels", "families", "manifest", "arch", "source", "load"]
                .iter()
                .map(|s| s.to_string()),
        );
        v.sort();
        v.dedup();
        Ok(v)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<ferrocuda.Module {} ({}, {} kernels, {} families)>",
            self.source,
            self.module.manifest().arch,
            self.kernels.bind(py).len(),
            self.families.bind(py).len()
        )
    }
}

/// The module of the kernels bundled with ferrocuda (``add``, ``initialize_array``,
/// ``add_index``, ``saxpy``); the same object on every call.
#[pyfunction]
fn bundled(py: Python<'_>) -> PyResult<Py<PyKModule>> {
    static BUNDLED: PyOnceLock<Py<PyKModule>> = PyOnceLock::new();
    BUNDLED
        .get_or_try_init(py, || {
            let m = ferrocuda::bundled::module().py_err(py)?;
            Py::new(py, make_module(py, m, "<bundled>".to_owned())?)
        })
        .map(|m| m.clone_ref(py))
}

/// Loads a module built by ``ferrocuda-builder`` from its manifest JSON (see
/// :meth:`Module.load`).
#[pyfunction]
fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyKModule> {
    PyKModule::load(py, path)
}

/// The PTX text of the bundled kernels (with :attr:`Module.manifest` of :func:`bundled`, what
/// ``ferrocuda-builder`` writes to disk; tests use it to exercise :func:`load`).
#[pyfunction]
fn _bundled_ptx() -> &'static str {
    ferrocuda::bundled::PTX
}

/// Registers the classes and functions of this module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyKModule>()?;
    m.add_class::<PyKernel>()?;
    m.add_class::<PyFamily>()?;
    m.add_class::<PyConfigured>()?;
    m.add_function(wrap_pyfunction!(bundled, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(_pending_releases, m)?)?;
    #[cfg(feature = "launch-timing")]
    m.add_function(wrap_pyfunction!(_launch_timing, m)?)?;
    m.add_function(wrap_pyfunction!(_bundled_ptx, m)?)?;
    Ok(())
}
