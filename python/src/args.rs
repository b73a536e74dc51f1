//! Argument classification: what each launch argument is ([`probe`]) — a ferrocuda array,
//! an object with an array interface (read by a fast path or the generic reader), a
//! DLPack-only object, or a host array — with the torch stream rule applied.

use ferrocuda_host::interop::dlpack::KDL_CPU;
use ferrocuda_host::{ArrayDesc, Protocol};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;

use crate::arrays::{PyDeviceArray, PyForeignArray};
use crate::errors::annotate;
use crate::read::cai::{read_interface, Scratch};
use crate::read::fast::{self, CallState, Kind};
use crate::util::type_name;

/// Storage for classifying the arguments of one call: the interface reader's buffers, and the
/// producer state read at most once per call (CuPy's and torch's current streams).
pub struct ArgScratch {
    /// The interface reader's buffers (≈ 1 KiB), made on first use: calls whose arrays all
    /// take a fast path never need them.
    cai: Option<Scratch>,
    /// Producer state of this call.
    pub call: CallState,
}

impl ArgScratch {
    /// Empty storage.
    pub fn new() -> Self {
        ArgScratch {
            cai: None,
            call: CallState::default(),
        }
    }

    /// The interface reader's buffers.
    pub fn cai(&mut self) -> &mut Scratch {
        self.cai.get_or_insert_with(Scratch::new)
    }
}

impl Default for ArgScratch {
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
    scratch: &mut ArgScratch,
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
pub fn probe_into<'py>(
    obj: &Bound<'py, PyAny>,
    arg: &str,
    scratch: &mut ArgScratch,
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
        let state = scratch.call;
        if let Some(d) = slot.as_mut() {
            fast::self_check(obj, kind, d, || {
                let mut s = ArgScratch::new();
                s.call = state;
                generic_cuda(obj, arg, kind, &mut s)?.ok_or_else(|| {
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
    if let Some(d) = generic_cuda(obj, arg, kind, scratch)? {
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
    if obj.hasattr(intern!(py, "__dlpack__"))? {
        // NumPy arrays and CPU tensors export DLPack too: host arrays.
        if dlpack_device_is_cpu(obj)? {
            return Ok(Probed::Host(obj.clone()));
        }
        return Ok(Probed::Dlpack(obj.clone()));
    }
    if obj.hasattr(intern!(py, "__array_interface__"))? {
        return Ok(Probed::Host(obj.clone()));
    }
    Err(PyTypeError::new_err(format!(
        "argument `{arg}`: not an array: {} has no __cuda_array_interface__, \
         __sycl_usm_array_interface__, __dlpack__ or __array_interface__",
        type_name(obj)
    )))
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
