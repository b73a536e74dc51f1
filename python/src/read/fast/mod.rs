//! Fast paths for the two most common producers: exact `cupy.ndarray` and `torch.Tensor`.
//!
//! Both producers build their `__cuda_array_interface__` dict in Python-level code on every
//! access, which costs more than a whole kernel launch's budget (`bench/field_costs.py`
//! measures it; BENCHMARKS.md, "Launch overhead"). For instances of exactly these two types the
//! same fields are read directly — a few attribute reads, each a small fraction of the dict's
//! cost — and the descriptor is built with the getter's meaning kept (each producer's module
//! says how it reads which field).
//!
//! # What lives where
//!
//! * this module — what both paths share: the producer [`Kind`] of a type ([`kind_of`], cached
//!   per type), the on/off switches ([`status`]), the per-launch [`CallState`], the [`Layout`]
//!   a path reads, the entry points that dispatch on the kind ([`describe_into`],
//!   [`same_layout`], [`describes`], [`current_stream`]), the [`self_check`] against the
//!   getter, the table of element types by dtype object, and the reading of tuples of ints;
//! * `cupy` — exact `cupy.ndarray`: its layout and pointer, CuPy's current stream (through
//!   CuPy's C function where it can, [`cupy_stream_source`]), the checks of a bound array;
//! * `torch` — exact `torch.Tensor`: through torch's DLPack exchange API or attribute reads
//!   ([`torch_read_source`]), torch's current stream ([`torch_stream`]), the refusal of lazy
//!   bits ([`refuse_lazy_bits`]).
//!
//! Anything the fast path does not recognise — another type (subclasses included: they may
//! override the getter), an attribute that raises, a dtype without a ferrocuda element type, a
//! descriptor that fails validation — falls back to the generic path, so errors always come
//! from the producer's own interface. The first array of each kind in a process is read both
//! ways and compared; if they ever disagree (a future CuPy or torch changed the getter) that
//! fast path is switched off for the process with a `RuntimeWarning`. Setting
//! `FERROCUDA_FAST_PATHS=0` (read once) switches both off.
//!
//! # torch's producer stream
//!
//! torch exports CAI version 2, without a stream. torch's own operations run on its *current*
//! stream, and torch's DLPack export orders that stream before the consumer's, so ferrocuda
//! treats the current stream of the tensor's device
//! (`torch._C._cuda_getCurrentRawStream`, 0 meaning the legacy stream) as the producer stream
//! of every `torch.Tensor` (subclasses included) whose interface names no stream: with
//! `stream=None` a launch then runs on that stream, like a torch operation would, and inside
//! `with torch.cuda.stream(s):` it runs on `s`. The device is read from the first tensor of a
//! launch; all arrays of a launch must be on one device (checked with the pointers).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use ferrocuda_abi::DType;
use ferrocuda_host::interop::cai::ArrayDesc;
use ferrocuda_host::StreamRef;
use pyo3::exceptions::PyRuntimeWarning;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

mod cupy;
mod shared;
mod torch;

pub use cupy::cupy_stream_source;
use cupy::{cupy, cupy_layout, cupy_stream, cupy_unchanged};
use shared::{dtype_code, dtype_of_code, int_tuple, switch, PtrTable, CUPY_NULL, CUPY_ON, DTYPES};
pub use shared::{CallState, Layout};
pub use torch::{refuse_lazy_bits, torch_read_source, torch_stream};
use torch::{torch, torch_api, torch_layout, torch_stream_on, torch_view};

// ---------------------------------------------------------------------------------------
// Kinds of producer types.

/// What a Python type is, for the fast paths and the torch stream rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Anything else.
    Other = 1,
    /// Exactly `torch.Tensor`.
    Torch = 2,
    /// A subclass of `torch.Tensor` (e.g. `nn.Parameter`): generic path, torch stream rule.
    TorchSub = 3,
    /// Exactly `cupy.ndarray`.
    Cupy = 4,
}

impl Kind {
    fn from_code(c: u8) -> Kind {
        [Kind::Torch, Kind::TorchSub, Kind::Cupy]
            .into_iter()
            .find(|k| *k as u8 == c)
            .unwrap_or(Kind::Other)
    }
}

static KINDS: PtrTable<32> = PtrTable::new();

fn is_named(ty: &Bound<'_, PyAny>, module: &str, name: &str) -> bool {
    let py = ty.py();
    let m = ty
        .getattr(intern!(py, "__module__"))
        .ok()
        .and_then(|m| m.extract::<String>().ok());
    let n = ty
        .getattr(intern!(py, "__name__"))
        .ok()
        .and_then(|n| n.extract::<String>().ok());
    matches!((m, n), (Some(m), Some(n)) if (m == module || m.starts_with(&format!("{module}."))) && n == name)
}

/// The kind of `obj`'s type (cached per type).
pub fn kind_of(obj: &Bound<'_, PyAny>) -> Kind {
    // SAFETY: `obj` is a live object, so its type pointer is valid; only the address is read.
    let ty_ptr = unsafe { pyo3::ffi::Py_TYPE(obj.as_ptr()) }.cast::<pyo3::ffi::PyObject>();
    if let Some(c) = KINDS.get_ptr(ty_ptr) {
        return Kind::from_code(c);
    }
    let ty = obj.get_type().into_any();
    let py = obj.py();
    let kind = if is_named(&ty, "torch", "Tensor") {
        Kind::Torch
    } else if is_named(&ty, "cupy", "ndarray")
        && py
            .import("cupy")
            .and_then(|m| m.getattr("ndarray"))
            .map(|t| t.is(&ty))
            .unwrap_or(false)
    {
        Kind::Cupy
    } else {
        let mro = ty
            .getattr(intern!(py, "__mro__"))
            .ok()
            .and_then(|m| m.cast_into::<PyTuple>().ok());
        match mro {
            Some(m) if m.iter().skip(1).any(|b| is_named(&b, "torch", "Tensor")) => Kind::TorchSub,
            _ => Kind::Other,
        }
    };
    KINDS.insert(&ty, kind as u8);
    kind
}

/// `FERROCUDA_FAST_PATHS`, read once.
fn fast_paths_enabled() -> PyResult<bool> {
    static ON: OnceLock<Result<bool, ferrocuda_config::Error>> = OnceLock::new();
    switch(&ferrocuda_config::FAST_PATHS, &ON)
}

static TORCH_ON: AtomicBool = AtomicBool::new(true);
static CUPY_CHECKED: AtomicBool = AtomicBool::new(false);
static TORCH_CHECKED: AtomicBool = AtomicBool::new(false);

/// Which fast paths are on: `(cupy, torch)` (for tests and diagnostics).
pub fn status() -> PyResult<(bool, bool)> {
    let on = fast_paths_enabled()?;
    Ok((
        on && CUPY_ON.load(Ordering::Relaxed),
        on && TORCH_ON.load(Ordering::Relaxed),
    ))
}

/// Whether `obj` (of `kind`), read by its fast path, is still the memory and layout `desc`
/// describes — the few reads a bound launch repeats to detect a producer that reallocated or
/// re-laid out the same object. `None` when no fast path reads `obj` (another kind, the fast
/// paths switched off, an attribute that raises): the caller reads the interface instead.
///
/// * A torch tensor: pointer, dtype, shape and strides in one exchange-API call (or the
///   attribute reads without the API); the API's view also gives the tensor's device, so
///   torch's current stream on it is read into `state` here when it is not there yet (one view
///   per tensor per launch, not a second one for the stream).
/// * A CuPy array: `cupy_unchanged`'s reads, which see every change CuPy's public API can
///   make to an existing array.
pub fn same_layout(
    obj: &Bound<'_, PyAny>,
    kind: Kind,
    desc: &ArrayDesc,
    state: &mut CallState,
) -> PyResult<Option<bool>> {
    if !fast_paths_enabled()? {
        return Ok(None);
    }
    let mut l = Layout::new();
    Ok(match kind {
        Kind::Cupy if CUPY_ON.load(Ordering::Relaxed) => cupy_unchanged(obj, desc),
        Kind::Torch if TORCH_ON.load(Ordering::Relaxed) => match torch_api(obj.py())? {
            Some(api) => match torch_view(obj, api, &mut l) {
                Some((dtype, device)) if dtype == desc.dtype() => {
                    let same = l.matches(desc);
                    if same && state.torch.is_none() {
                        torch_stream_on(obj.py(), api, device, state)?;
                    }
                    Some(same)
                }
                _ => None,
            },
            None => torch_layout(obj, desc.itemsize(), &mut l)?.map(|()| l.matches(desc)),
        },
        _ => None,
    })
}

/// Whether `obj` (of `kind`), read whole by its fast path, has exactly the pointer, shape and
/// strides of `desc` — what a bound launch checks once, at bind, before it relies on the
/// lighter per-launch reads of [`same_layout`]. `None` as for [`same_layout`].
pub fn describes(obj: &Bound<'_, PyAny>, kind: Kind, desc: &ArrayDesc) -> PyResult<Option<bool>> {
    match kind {
        Kind::Cupy if fast_paths_enabled()? && CUPY_ON.load(Ordering::Relaxed) => {
            let mut l = Layout::new();
            Ok(cupy_layout(obj, &mut l).map(|()| l.matches(desc)))
        }
        _ => same_layout(obj, kind, desc, &mut CallState::default()),
    }
}

/// The producer stream of `obj` (of `kind`) as a launch now reads it: CuPy's current stream
/// (export version 3; none for version 2), torch's current stream on the tensor's device.
/// `None` when no fast path reads it (the caller reads the interface instead). Read once per
/// launch, through `state`.
pub fn current_stream(
    obj: &Bound<'_, PyAny>,
    kind: Kind,
    state: &mut CallState,
) -> PyResult<Option<Option<StreamRef>>> {
    match kind {
        Kind::Cupy => Ok(match state.cupy {
            Some((_, s)) => Some(s),
            None => cupy_stream(obj).map(|v| {
                state.cupy = Some(v);
                v.1
            }),
        }),
        Kind::Torch => torch_stream(obj, state).map(|s| Some(Some(s))),
        _ => Ok(None),
    }
}

/// Describes `obj` by a fast path into `slot` (built in place: descriptors are ≈ 580 bytes);
/// `false` (and `slot` left `None`) for the generic path.
pub fn describe_into(
    obj: &Bound<'_, PyAny>,
    kind: Kind,
    arg: &str,
    state: &mut CallState,
    slot: &mut Option<ArrayDesc>,
) -> PyResult<bool> {
    *slot = None;
    if !fast_paths_enabled()? {
        return Ok(false);
    }
    match kind {
        Kind::Cupy if CUPY_ON.load(Ordering::Relaxed) => Ok(cupy(obj, state, slot).is_some()),
        Kind::Torch if TORCH_ON.load(Ordering::Relaxed) => torch(obj, arg, state, slot),
        _ => Ok(false),
    }
}

/// Compares the first fast-path descriptor of a kind with the generic one (strides only where
/// they move the pointer: an empty tensor's are the producer's choice); on a mismatch,
/// switches that fast path off (with a warning) and replaces `fast` with the generic
/// descriptor.
pub fn self_check(
    obj: &Bound<'_, PyAny>,
    kind: Kind,
    fast: &mut ArrayDesc,
    generic: impl FnOnce() -> PyResult<ArrayDesc>,
) -> PyResult<()> {
    let (checked, on, who) = match kind {
        Kind::Cupy => (&CUPY_CHECKED, &CUPY_ON, "CuPy"),
        // bfloat16 tensors are not compared: older torch getters refuse them.
        Kind::Torch if fast.dtype() == DType::BF16 => return Ok(()),
        Kind::Torch => (&TORCH_CHECKED, &TORCH_ON, "PyTorch"),
        _ => return Ok(()),
    };
    if checked.load(Ordering::Relaxed) || checked.swap(true, Ordering::Relaxed) {
        return Ok(());
    }
    let g = generic()?;
    if g.same_elements(fast) {
        return Ok(());
    }
    on.store(false, Ordering::Relaxed);
    let py = obj.py();
    let msg = std::ffi::CString::new(format!(
        "ferrocuda: the {who} fast path read {fast:?} but __cuda_array_interface__ says \
         {g:?}; using the interface from now on (please report this)"
    ))
    .unwrap_or_default();
    PyErr::warn(py, &py.get_type::<PyRuntimeWarning>(), &msg, 1)?;
    *fast = g;
    Ok(())
}
