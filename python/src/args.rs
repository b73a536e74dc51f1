//! Argument classification: what each launch argument is ([`probe`]) — a ferrocuda array,
//! an object with an array interface (read by a fast path or the generic reader), a
//! DLPack-only object, or a host array — with the torch stream rule applied, by the rules of
//! the launch's [`Mode`]: a launcher's call, or the kernel of a torch operator.

use ferrocuda_host::interop::dlpack::KDL_CPU;
use ferrocuda_host::{ArrayDesc, Protocol};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;

use crate::arrays::{PyDeviceArray, PyForeignArray};
use crate::errors::annotate;
use crate::read::cai::{read_interface, Scratch};
use crate::read::fast::{self, CallState, Kind};
use crate::util::{repr, type_name};

/// How a launch reads its array arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode<'a> {
    /// A launcher's call (or bind): every producer by the rules of its own interface — a
    /// torch tensor that requires grad is refused with the error of torch's getter, a CPU
    /// tensor is a host array (staged).
    Launcher,
    /// The kernel of the torch operator named here (`namespace::name`): every torch tensor
    /// must be on a CUDA device — else a `ValueError` naming the argument and the operator
    /// (the text `ferrocuda.torch` has always used) before anything is staged or launched, and
    /// host arrays are refused the same way — and a tensor that requires grad is read as its
    /// `detach()` (the same memory, no autograd).
    Operator(&'a str),
}

/// Storage for classifying the arguments of one call: the interface reader's buffers, the
/// readers' state of the call (CuPy's and torch's current streams, read at most once; how
/// tensors that require grad are read) and the launch's [`Mode`].
pub struct ArgScratch<'a> {
    /// The interface reader's buffers (≈ 1 KiB), made on first use: calls whose arrays all
    /// take a fast path never need them.
    cai: Option<Scratch>,
    /// Producer state of this call.
    pub call: CallState,
    /// How the arguments are read.
    mode: Mode<'a>,
}

impl ArgScratch<'static> {
    /// Empty storage of a launcher's call ([`Mode::Launcher`]).
    pub fn new() -> Self {
        ArgScratch::with_mode(Mode::Launcher)
    }
}

impl<'a> ArgScratch<'a> {
    /// Empty storage of a launch in `mode`.
    pub fn with_mode(mode: Mode<'a>) -> Self {
        ArgScratch {
            cai: None,
            call: match mode {
                Mode::Launcher => CallState::default(),
                Mode::Operator(_) => CallState::detaching(),
            },
            mode,
        }
    }

    /// The interface reader's buffers.
    pub fn cai(&mut self) -> &mut Scratch {
        self.cai.get_or_insert_with(Scratch::new)
    }
}

impl Default for ArgScratch<'static> {
    fn default() -> Self {
        Self::new()
    }
}

/// What an argument turned out to be.
// The descriptor is kept inline on purpose: boxing it would allocate on every launch.
#[allow(clippy::large_enum_variant)]
pub enum Found<'py> {
    /// A device array with its validated interface (CAI, SYCL USM, or a ferrocuda array).
    Desc(ArrayDesc),
    /// An object to import through DLPack (`__dlpack__` with the launch stream).
    Dlpack(Bound<'py, PyAny>),
    /// A host array (NumPy, or anything NumPy converts and whose DLPack device is the CPU).
    Host(Bound<'py, PyAny>),
}

/// Finds out what `obj` is, reading its interface when it has one.
///
/// Order: ferrocuda arrays; `__cuda_array_interface__`; `__sycl_usm_array_interface__`;
/// `__dlpack__` (a host array when `__dlpack_device__()` says CPU); `__array_interface__`
/// (host). Anything else is a `TypeError` ("not an array").
pub fn probe<'py>(
    obj: &Bound<'py, PyAny>,
    arg: &str,
    scratch: &mut ArgScratch<'_>,
) -> PyResult<Found<'py>> {
    let mut slot = None;
    Ok(match probe_into(obj, arg, scratch, &mut slot)? {
        Probed::Desc => match slot {
            Some(d) => Found::Desc(d),
            None => return Err(PyValueError::new_err("array argument not described")),
        },
        Probed::Dlpack(o) => Found::Dlpack(o),
        Probed::Host(o) => Found::Host(o),
    })
}

/// What [`probe_into`] found; for [`Probed::Desc`] the description is in its slot.
pub enum Probed<'py> {
    /// A device array, described in the slot.
    Desc,
    /// An object to import through DLPack.
    Dlpack(Bound<'py, PyAny>),
    /// A host array.
    Host(Bound<'py, PyAny>),
}

/// [`probe`], describing a device array in `slot` (the fast paths build it there, in place;
/// `None` unless the result is [`Probed::Desc`]).
///
/// In [`Mode::Operator`], a torch tensor that the fast path did not read is checked first
/// (`operator_tensor`: on a CUDA device, else refused; read as its `detach()` when it
/// requires grad), and a host array is refused.
pub fn probe_into<'py>(
    obj: &Bound<'py, PyAny>,
    arg: &str,
    scratch: &mut ArgScratch<'_>,
    slot: &mut Option<ArrayDesc>,
) -> PyResult<Probed<'py>> {
    let py = obj.py();
    // The producer kind first (one lookup by type address): CuPy arrays and torch tensors
    // then skip the checks for ferrocuda's own classes.
    let kind = fast::kind_of(obj);
    if kind == Kind::Other {
        if let Ok(a) = obj.cast::<PyDeviceArray>() {
            *slot = Some(*a.get().desc());
            return Ok(Probed::Desc);
        }
        if let Ok(a) = obj.cast::<PyForeignArray>() {
            *slot = Some(*a.get().desc());
            return Ok(Probed::Desc);
        }
    }
    ferrocuda_host::mark!("py:   type checks, kind");
    if fast::describe_into(obj, kind, arg, &mut scratch.call, slot)? {
        ferrocuda_host::mark!("py:   fast path: build the descriptor");
        let (state, mode) = (scratch.call, scratch.mode);
        if let Some(d) = slot.as_mut() {
            fast::self_check(obj, kind, d, || {
                let mut s = ArgScratch::with_mode(mode);
                s.call = state;
                generic_device(obj, arg, kind, &mut s)?.ok_or_else(|| {
                    pyo3::exceptions::PyRuntimeError::new_err(
                        "__cuda_array_interface__ disappeared",
                    )
                })
            })?;
        }
        ferrocuda_host::mark!("py:   self-check");
        return Ok(Probed::Desc);
    }
    // `describe_into` left the slot empty.
    if let Some(d) = generic_device(obj, arg, kind, scratch)? {
        *slot = Some(d);
        return Ok(Probed::Desc);
    }
    match obj.getattr_opt(intern!(py, "__sycl_usm_array_interface__")) {
        Ok(Some(iface)) => {
            let d = read_interface(&iface, Protocol::SyclUsm, scratch.cai())
                .map_err(|f| f.into_py(py, arg))?;
            *slot = Some(d);
            return Ok(Probed::Desc);
        }
        Ok(None) => {}
        Err(e) => return Err(annotate(py, e, "__sycl_usm_array_interface__", arg)),
    }
    let host = if obj.hasattr(intern!(py, "__dlpack__"))? {
        // NumPy arrays and CPU tensors export DLPack too: host arrays.
        if !dlpack_device_is_cpu(obj)? {
            return Ok(Probed::Dlpack(obj.clone()));
        }
        true
    } else {
        obj.hasattr(intern!(py, "__array_interface__"))?
    };
    match (host, scratch.mode) {
        (true, Mode::Launcher) => Ok(Probed::Host(obj.clone())),
        (true, Mode::Operator(op)) => Err(not_on_cuda(obj, arg, op)),
        (false, _) => Err(PyTypeError::new_err(format!(
            "argument `{arg}`: not an array: {} has no __cuda_array_interface__, \
             __sycl_usm_array_interface__, __dlpack__ or __array_interface__",
            type_name(obj)
        ))),
    }
}

/// [`generic_cuda`] by the launch's mode: in [`Mode::Operator`] a torch tensor is checked
/// first and read as its `detach()` when it requires grad ([`operator_tensor`]).
fn generic_device(
    obj: &Bound<'_, PyAny>,
    arg: &str,
    kind: Kind,
    scratch: &mut ArgScratch<'_>,
) -> PyResult<Option<ArrayDesc>> {
    if let (Mode::Operator(op), Kind::Torch | Kind::TorchSub) = (scratch.mode, kind) {
        if let Some(detached) = operator_tensor(obj, arg, op)? {
            return generic_cuda(&detached, arg, kind, scratch);
        }
    }
    generic_cuda(obj, arg, kind, scratch)
}

/// A torch tensor as an argument of operator `op` (outside the fast path: a subclass, the fast
/// paths switched off, a tensor the fast path does not read): refused unless on a CUDA device
/// (the operator's `ValueError`); `Some(tensor.detach())` when it requires grad (the same
/// memory, which torch's getter exports), `None` to read it as it is.
fn operator_tensor<'py>(
    obj: &Bound<'py, PyAny>,
    arg: &str,
    op: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = obj.py();
    if !obj.getattr(intern!(py, "is_cuda"))?.is_truthy()? {
        return Err(not_on_cuda(obj, arg, op));
    }
    if obj.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
        return Ok(Some(obj.call_method0(intern!(py, "detach"))?));
    }
    Ok(None)
}

/// The refusal of an argument of operator `op` that is not on a CUDA device: a tensor on
/// another device (named as torch names it), a host array.
fn not_on_cuda(obj: &Bound<'_, PyAny>, arg: &str, op: &str) -> PyErr {
    let py = obj.py();
    let got = match obj.getattr_opt(intern!(py, "device")) {
        Ok(Some(d)) if matches!(fast::kind_of(obj), Kind::Torch | Kind::TorchSub) => format!(
            "a tensor on {} (move it with .cuda())",
            d.str().map_or_else(|_| repr(&d), |s| s.to_string())
        ),
        _ => format!(
            "{}, a host array (copy it to a CUDA tensor)",
            type_name(obj)
        ),
    };
    PyValueError::new_err(format!(
        "argument `{arg}` of {op}: ferrocuda kernels run on CUDA tensors, got {got}"
    ))
}

/// Reads `__cuda_array_interface__` if `obj` has one (`None` if it has none), applying the
/// torch stream rule (see [`fast`]) to torch tensors whose interface names no stream.
pub fn generic_cuda(
    obj: &Bound<'_, PyAny>,
    arg: &str,
    kind: Kind,
    scratch: &mut ArgScratch,
) -> PyResult<Option<ArrayDesc>> {
    let py = obj.py();
    match obj.getattr_opt(intern!(py, "__cuda_array_interface__")) {
        Ok(Some(iface)) => {
            let mut d = read_interface(&iface, Protocol::Cuda, scratch.cai())
                .map_err(|f| f.into_py(py, arg))?;
            if matches!(kind, Kind::Torch | Kind::TorchSub) {
                fast::refuse_lazy_bits(obj, arg, true)?;
                if d.stream().is_none() {
                    d = d.with_stream(Some(fast::torch_stream(obj, &mut scratch.call)?));
                }
            }
            Ok(Some(d))
        }
        Ok(None) => Ok(None),
        Err(e) => Err(annotate(py, e, "__cuda_array_interface__", arg)),
    }
}

/// `True` when `obj.__dlpack_device__()` names the CPU (device type 1).
fn dlpack_device_is_cpu(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    let Ok(dev) = obj.call_method0(intern!(py, "__dlpack_device__")) else {
        return Ok(false);
    };
    let ty = dev.get_item(0).and_then(|t| t.extract::<i64>());
    Ok(ty.is_ok_and(|t| t == i64::from(KDL_CPU)))
}
