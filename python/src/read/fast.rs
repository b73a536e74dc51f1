//! Fast paths for the two most common producers: exact `cupy.ndarray` and `torch.Tensor`.
//!
//! Both producers build their `__cuda_array_interface__` dict in Python-level code on every
//! access, which costs more than a whole kernel launch's budget (`bench/field_costs.py`
//! measures it; BENCHMARKS.md, "Launch overhead"). For instances of exactly these two types the
//! same fields are read directly — a few attribute reads, each a small fraction of the dict's
//! cost — and the descriptor is built with the getter's meaning kept:
//!
//! * **CuPy** (`cupy/_core/core.pyx`, `ndarray.__cuda_array_interface__`): `shape` (for 1-D
//!   arrays `(size,)`, as `size` is a stored int and `shape` a tuple built per access); strides
//!   `None` when the array's `_c_contiguous` flag is set, else `strides`; pointer `data.ptr`
//!   (0 for empty arrays); never read-only; with `cupy._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION`
//!   3 the stream is CuPy's current stream, read once per launch through the C function the
//!   getter itself calls (`get_current_stream_ptr`, from the table Cython exports for
//!   `cimport`, when its signature is a known one; else `cupy.cuda.get_current_stream().ptr`);
//!   CuPy's null stream (pointer 0) is exported by the getter as CuPy's default stream (legacy or
//!   per-thread, by CuPy's configuration), which the fast path learns from the getter the first
//!   time it meets the null stream; with version 2 there is no stream; any other version falls
//!   back to the getter (which raises its own error).
//! * **torch, through its exchange API** (when `torch.Tensor.__dlpack_c_exchange_api__` is a
//!   DLPack ≥ 1.2 `DLPackExchangeAPI`, as in torch 2.11): `dltensor_from_py_object_no_sync`
//!   fills a non-owning `DLTensor` (pointer, device, element type, shape, strides) in one C
//!   call, and `current_work_stream` gives torch's current stream of the tensor's device (once
//!   per launch) — the documented C interface torch exports for consumers. The getter's
//!   meaning is kept as below: CUDA tensors of the exported dtypes (else the generic path);
//!   `requires_grad` is read as an attribute (such tensors go to the getter, which raises), and
//!   the lazy bits as below (the exchange API reports neither). `FERROCUDA_TORCH_EXCHANGE=0`
//!   (read once) uses the attribute reads below instead.
//! * **torch** (`torch/_tensor.py`, `Tensor.__cuda_array_interface__`): CUDA tensors only;
//!   tensors that require grad, sparse tensors and dtypes the getter does not export fall
//!   back to the getter (and its errors); shape `shape`, strides `stride()` × itemsize,
//!   pointer `data_ptr()` (0 when empty), never read-only (for 1-D tensors `numel()` and,
//!   when `is_contiguous()`, stride 1). Stricter than the getter: a tensor with an unresolved
//!   negative bit (real ones too: `z.conj().imag`), or a complex one with a conjugate bit, is
//!   refused (the generic path does the same for tensors).
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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use ferrocuda_abi::{layout, DType};
use ferrocuda_host::cai::{self, ArrayDesc, Protocol, MAX_NDIM};
use ferrocuda_host::StreamRef;
use pyo3::exceptions::{PyRuntimeWarning, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple};

use crate::read::dlpack::{self, ExchangeApi};
use crate::util::StrBuf;

// ---------------------------------------------------------------------------------------
// A lock-free map from Python object addresses to a byte.

/// Up to `N` entries `address → byte`, lock-free (read on every launch). An address is only
/// inserted together with a leaked strong reference to its object, so it can never be freed
/// and reused by another object. Once full, lookups of new addresses just miss.
struct PtrTable<const N: usize>([AtomicU64; N]);

impl<const N: usize> PtrTable<N> {
    const fn new() -> Self {
        PtrTable([const { AtomicU64::new(0) }; N])
    }

    fn key(obj: &Bound<'_, PyAny>) -> Option<u64> {
        Self::key_of(obj.as_ptr())
    }

    fn key_of(ptr: *mut pyo3::ffi::PyObject) -> Option<u64> {
        let k = ptr as u64;
        // Packed as `address << 8 | byte`: addresses must fit 56 bits (x86-64 and AArch64
        // user space do).
        (k != 0 && k >> 56 == 0).then_some(k)
    }

    fn get(&self, obj: &Bound<'_, PyAny>) -> Option<u8> {
        self.get_ptr(obj.as_ptr())
    }

    /// As [`get`](Self::get), by address (no reference taken).
    fn get_ptr(&self, ptr: *mut pyo3::ffi::PyObject) -> Option<u8> {
        let k = Self::key_of(ptr)?;
        for slot in &self.0 {
            let v = slot.load(Ordering::Acquire);
            if v == 0 {
                return None;
            }
            if v >> 8 == k {
                return Some(v as u8);
            }
        }
        None
    }

    fn insert(&self, obj: &Bound<'_, PyAny>, value: u8) {
        let Some(k) = Self::key(obj) else { return };
        let packed = k << 8 | u64::from(value);
        for slot in &self.0 {
            match slot.compare_exchange(0, packed, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    // Keep the object alive for the process: its address must never be reused.
                    std::mem::forget(obj.clone().unbind());
                    return;
                }
                Err(cur) if cur >> 8 == k => return,
                Err(_) => {}
            }
        }
    }
}

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

fn fast_paths_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        !matches!(
            std::env::var("FERROCUDA_FAST_PATHS").as_deref(),
            Ok("0") | Ok("off") | Ok("false")
        )
    })
}

static CUPY_ON: AtomicBool = AtomicBool::new(true);
/// What CuPy's getter exports for its null stream (0 until first seen).
static CUPY_NULL: AtomicU64 = AtomicU64::new(0);
static TORCH_ON: AtomicBool = AtomicBool::new(true);
static CUPY_CHECKED: AtomicBool = AtomicBool::new(false);
static TORCH_CHECKED: AtomicBool = AtomicBool::new(false);

/// Which fast paths are on: `(cupy, torch)` (for tests and diagnostics).
pub fn status() -> (bool, bool) {
    let on = fast_paths_enabled();
    (
        on && CUPY_ON.load(Ordering::Relaxed),
        on && TORCH_ON.load(Ordering::Relaxed),
    )
}

// ---------------------------------------------------------------------------------------
// Per-launch state.

/// Producer state read at most once per launch.
#[derive(Clone, Copy, Default)]
pub struct CallState {
    /// CuPy: `(export version, stream)`.
    cupy: Option<(u8, Option<StreamRef>)>,
    /// torch: the current stream of the first tensor's device.
    torch: Option<StreamRef>,
}

/// The pointer and layout of an array as a fast path reads them: what can change on the same
/// producer object between launches (torch's `resize_`, `set_`, `as_strided_`, assigning
/// `.data`; CuPy's `shape` setter).
pub struct Layout {
    n: usize,
    shape: [usize; MAX_NDIM],
    /// Byte strides in `[..n]` when `strided`, else C-contiguous.
    strides: [isize; MAX_NDIM],
    strided: bool,
    ptr: u64,
}

impl Layout {
    fn new() -> Self {
        Layout {
            n: 0,
            shape: [0; MAX_NDIM],
            strides: [0; MAX_NDIM],
            strided: false,
            ptr: 0,
        }
    }

    fn shape(&self) -> &[usize] {
        &self.shape[..self.n]
    }

    fn strides(&self) -> Option<&[isize]> {
        self.strided.then(|| &self.strides[..self.n])
    }

    /// Whether this is the pointer, shape and strides `desc` describes.
    fn matches(&self, desc: &ArrayDesc) -> bool {
        if self.ptr != desc.ptr() || self.shape() != desc.shape() {
            return false;
        }
        match self.strides() {
            Some(s) => s == desc.byte_strides(),
            None => {
                let mut c = [0isize; MAX_NDIM];
                layout::c_strides(self.shape(), desc.itemsize(), &mut c).is_some()
                    && &c[..self.n] == desc.byte_strides()
            }
        }
    }
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
    if !fast_paths_enabled() {
        return Ok(None);
    }
    let mut l = Layout::new();
    Ok(match kind {
        Kind::Cupy if CUPY_ON.load(Ordering::Relaxed) => cupy_unchanged(obj, desc),
        Kind::Torch if TORCH_ON.load(Ordering::Relaxed) => match torch_api(obj.py()) {
            Some(api) => match torch_view(obj, &api, &mut l) {
                Some((dtype, device)) if dtype == desc.dtype() => {
                    let same = l.matches(desc);
                    if same && state.torch.is_none() {
                        torch_stream_on(obj.py(), &api, device, state)?;
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
        Kind::Cupy if fast_paths_enabled() && CUPY_ON.load(Ordering::Relaxed) => {
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
    if !fast_paths_enabled() {
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

// ---------------------------------------------------------------------------------------
// Element types by dtype object.

const NO_DTYPE: u8 = 0xff;
static DTYPES: PtrTable<32> = PtrTable::new();

fn dtype_code(d: Option<DType>) -> u8 {
    match d {
        Some(d) => DType::ALL
            .iter()
            .position(|x| *x == d)
            .map_or(NO_DTYPE, |i| i as u8),
        None => NO_DTYPE,
    }
}

fn dtype_of_code(c: u8) -> Option<DType> {
    DType::ALL.get(c as usize).copied()
}

/// The element type of a NumPy dtype object (CuPy's `dtype`), from its typestr.
fn numpy_dtype(dtype: &Bound<'_, PyAny>) -> Option<DType> {
    if let Some(c) = DTYPES.get(dtype) {
        return dtype_of_code(c);
    }
    let py = dtype.py();
    let d = dtype.getattr(intern!(py, "str")).ok().and_then(|s| {
        let s = s.cast_into::<PyString>().ok()?;
        let mut buf = StrBuf::new();
        let s = buf.read(&s).ok()?;
        cai::parse_typestr(Protocol::Cuda, s).ok()
    });
    DTYPES.insert(dtype, dtype_code(d));
    d
}

/// The element types the torch fast path reads: those torch's `__cuda_array_interface__`
/// getter exports (its typestr table), and `bfloat16`, which newer getters export as `"<V2"`
/// and older ones refuse (DLPack then being the generic way in); torch names each
/// `torch.<NumPy name>`.
const TORCH_EXPORTS: [DType; 12] = [
    DType::Bool,
    DType::U8,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::C64,
    DType::C128,
];

/// The element type of a torch dtype object (`torch.float32`, …): the dtypes the getter
/// exports.
fn torch_dtype(dtype: &Bound<'_, PyAny>) -> Option<DType> {
    if let Some(c) = DTYPES.get(dtype) {
        return dtype_of_code(c);
    }
    let text = dtype.str().ok()?.to_string();
    let name = text.strip_prefix("torch.");
    let d = TORCH_EXPORTS.into_iter().find(|d| name == Some(d.name()));
    DTYPES.insert(dtype, dtype_code(d));
    d
}

// ---------------------------------------------------------------------------------------
// Reading tuples of ints.

/// The ints of a tuple of at most [`MAX_NDIM`] items into `out`; `None` if it is anything else.
fn int_tuple<'py, T>(obj: &Bound<'py, PyAny>, out: &mut [T; MAX_NDIM]) -> Option<usize>
where
    T: pyo3::conversion::FromPyObjectOwned<'py>,
{
    let t = obj.cast::<PyTuple>().ok()?;
    let n = t.len();
    if n > MAX_NDIM {
        return None;
    }
    for (k, slot) in out.iter_mut().enumerate().take(n) {
        *slot = t.get_item(k).ok()?.extract().ok()?;
    }
    Some(n)
}

// ---------------------------------------------------------------------------------------
// CuPy.

/// CuPy's C function `get_current_stream_ptr()` — the one its `__cuda_array_interface__` getter
/// calls — from the table of C functions that Cython exports for `cimport`
/// (`cupy_backends.cuda.stream.__pyx_capi__`, one capsule per function, named by its C
/// signature). Used only when the signature is one of `KNOWN`; `0` when absent or unknown.
static CUPY_STREAM_FN: PyOnceLock<usize> = PyOnceLock::new();

fn cupy_stream_fn_lookup(py: Python<'_>) -> Option<usize> {
    const KNOWN: [&[u8]; 4] = [
        b"intptr_t (void)",
        b"intptr_t (void) except *",
        b"intptr_t (void) except? -1",
        b"intptr_t (void) noexcept",
    ];
    let cap = py
        .import("cupy_backends.cuda.stream")
        .ok()?
        .getattr("__pyx_capi__")
        .ok()?
        .get_item("get_current_stream_ptr")
        .ok()?;
    // SAFETY: `cap` is a live object; the capsule calls only read it (and check its type).
    unsafe {
        if pyo3::ffi::PyCapsule_CheckExact(cap.as_ptr()) == 0 {
            return None;
        }
        let name = pyo3::ffi::PyCapsule_GetName(cap.as_ptr());
        if name.is_null() {
            let _ = PyErr::take(py);
            return None;
        }
        if !KNOWN.contains(&std::ffi::CStr::from_ptr(name).to_bytes()) {
            return None;
        }
        let f = pyo3::ffi::PyCapsule_GetPointer(cap.as_ptr(), name);
        if f.is_null() {
            let _ = PyErr::take(py);
            return None;
        }
        // The function lives in CuPy's extension module, which is never unloaded; keep the
        // capsule too.
        std::mem::forget(cap.unbind());
        Some(f as usize)
    }
}

/// The address of CuPy's `get_current_stream_ptr` (looked up once), `0` when unusable.
fn cupy_stream_fn(py: Python<'_>) -> usize {
    *CUPY_STREAM_FN.get_or_init(py, || cupy_stream_fn_lookup(py).unwrap_or(0))
}

/// CuPy's current stream pointer through its C function (see [`CUPY_STREAM_FN`]), or `None`
/// to use the Python API.
fn cupy_current_stream_capi(py: Python<'_>) -> Option<u64> {
    let f = cupy_stream_fn(py);
    if f == 0 {
        return None;
    }
    // SAFETY: `f` is CuPy's `intptr_t get_current_stream_ptr(void)`, its signature checked
    // against the capsule's name; it needs the GIL, which `py` proves. A Cython function
    // reports an error by setting the Python error indicator, checked right after.
    let p = unsafe {
        let f: unsafe extern "C" fn() -> isize = std::mem::transmute(f);
        f()
    };
    if PyErr::take(py).is_some() {
        return None;
    }
    u64::try_from(p).ok()
}

/// Where the CuPy fast path reads CuPy's current stream: `"capi"` (CuPy's C function) or
/// `"python"` (`cupy.cuda.get_current_stream().ptr`), for diagnostics.
pub fn cupy_stream_source(py: Python<'_>) -> &'static str {
    if cupy_stream_fn(py) == 0 {
        "python"
    } else {
        "capi"
    }
}

/// `(export version, stream)` as CuPy's getter computes them now for `obj`, or `None` to fall
/// back.
fn cupy_stream(obj: &Bound<'_, PyAny>) -> Option<(u8, Option<StreamRef>)> {
    let py = obj.py();
    static UTIL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static CURRENT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let util = UTIL
        .get_or_try_init(py, || {
            py.import("cupy._util").map(|m| m.into_any().unbind())
        })
        .ok()?;
    let ver: i64 = util
        .bind(py)
        .getattr(intern!(py, "CUDA_ARRAY_INTERFACE_EXPORT_VERSION"))
        .ok()?
        .extract()
        .ok()?;
    match ver {
        2 => Some((2, None)),
        3 => {
            let ptr: u64 = match cupy_current_stream_capi(py) {
                Some(p) => p,
                None => {
                    let current = CURRENT
                        .get_or_try_init(py, || {
                            py.import("cupy.cuda")
                                .and_then(|m| m.getattr("get_current_stream"))
                                .map(Bound::unbind)
                        })
                        .ok()?;
                    current
                        .bind(py)
                        .call0()
                        .ok()?
                        .getattr(intern!(py, "ptr"))
                        .ok()?
                        .extract()
                        .ok()?
                }
            };
            // 0 is CuPy's null stream, which the getter exports as CuPy's default stream
            // (legacy or per-thread, by CuPy's configuration): learnt from the getter itself
            // the first time it is seen, then remembered.
            let ptr = match (ptr, CUPY_NULL.load(Ordering::Relaxed)) {
                (0, 0) => {
                    let s: u64 = obj
                        .getattr(intern!(py, "__cuda_array_interface__"))
                        .ok()?
                        .get_item(intern!(py, "stream"))
                        .ok()?
                        .extract()
                        .ok()?;
                    if s == 0 {
                        return None;
                    }
                    CUPY_NULL.store(s, Ordering::Relaxed);
                    s
                }
                (0, null) => null,
                (p, _) => p,
            };
            Some((3, StreamRef::from_cai(ptr)))
        }
        _ => None,
    }
}

/// The pointer and layout of a CuPy array (`None` to fall back).
fn cupy_layout(obj: &Bound<'_, PyAny>, l: &mut Layout) -> Option<()> {
    let py = obj.py();
    // 1-D (the common case): `size` is a stored int, where `shape` builds a tuple each time.
    let ndim: usize = obj.getattr(intern!(py, "ndim")).ok()?.extract().ok()?;
    l.n = if ndim == 1 {
        l.shape[0] = obj.getattr(intern!(py, "size")).ok()?.extract().ok()?;
        1
    } else {
        int_tuple(&obj.getattr(intern!(py, "shape")).ok()?, &mut l.shape)?
    };
    let c_contiguous = match obj.getattr(intern!(py, "_c_contiguous")) {
        Ok(f) => f.is_truthy().ok()?,
        Err(_) => {
            // Not the CuPy this path was written for: use the getter from now on.
            CUPY_ON.store(false, Ordering::Relaxed);
            return None;
        }
    };
    l.strided = !c_contiguous;
    if l.strided {
        let m = int_tuple(&obj.getattr(intern!(py, "strides")).ok()?, &mut l.strides)?;
        if m != l.n {
            return None;
        }
    }
    let size = layout::element_count(l.shape())?;
    l.ptr = if size > 0 { cupy_data_ptr(obj)? } else { 0 };
    Some(())
}

/// `obj.data.ptr` of a CuPy array: its data pointer (`None` when it cannot be read).
fn cupy_data_ptr(obj: &Bound<'_, PyAny>) -> Option<u64> {
    let py = obj.py();
    obj.getattr(intern!(py, "data"))
        .ok()?
        .getattr(intern!(py, "ptr"))
        .ok()?
        .extract()
        .ok()
}

/// Whether CuPy array `obj` still has the shape and data pointer of `desc` (its description
/// at bind), by the fewest reads that see every change CuPy's public API can make to an
/// existing array; `None` when an attribute cannot be read.
///
/// * The `shape` setter (an in-place reshape): it keeps the size and derives the strides from
///   the new shape, so a 1-D array can only change rank (`ndim` is read) and an N-D array is
///   compared by `shape`.
/// * `MemoryPointer.__iadd__` / `__isub__`, which move `data.ptr` in place (`p = a.data;
///   p += n` moves `a`): `data.ptr` is read.
///
/// `data` is read-only and CuPy has no in-place resize. Strides are not read: only private
/// attributes (`_strides`, `_set_shape_and_strides`) change them alone, and the bound launch
/// holds the `MemoryPointer` it bound (see `bind`), so even then the launch writes only bytes
/// of the allocation it checked at bind, which cannot be freed while it is bound.
fn cupy_unchanged(obj: &Bound<'_, PyAny>, desc: &ArrayDesc) -> Option<bool> {
    let py = obj.py();
    let shape = desc.shape();
    let same_shape = if shape.len() == 1 {
        obj.getattr(intern!(py, "ndim"))
            .ok()?
            .extract::<usize>()
            .ok()?
            == 1
    } else {
        let mut now = [0usize; MAX_NDIM];
        let n = int_tuple(&obj.getattr(intern!(py, "shape")).ok()?, &mut now)?;
        now[..n] == *shape
    };
    if !same_shape {
        return Some(false);
    }
    if desc.byte_range().is_none() {
        // Empty at bind, and the same shape: still empty, nothing addressed.
        return Some(true);
    }
    Some(cupy_data_ptr(obj)? == desc.ptr())
}

fn cupy(obj: &Bound<'_, PyAny>, state: &mut CallState, slot: &mut Option<ArrayDesc>) -> Option<()> {
    let py = obj.py();
    let dtype = numpy_dtype(&obj.getattr(intern!(py, "dtype")).ok()?)?;
    let mut l = Layout::new();
    cupy_layout(obj, &mut l)?;
    ferrocuda_host::mark!(16);
    let (ver, stream) = match state.cupy {
        Some(s) => s,
        None => {
            let s = cupy_stream(obj)?;
            state.cupy = Some(s);
            s
        }
    };
    ferrocuda_host::mark!(17);
    ArrayDesc::from_parts_into(
        slot,
        dtype,
        l.shape(),
        l.strides(),
        l.ptr,
        false,
        stream,
        ver,
    )
    .ok()
    .map(|_| ())
}

// ---------------------------------------------------------------------------------------
// torch.

/// Refuses a torch tensor whose values are not its memory: a negative bit (set on real
/// tensors too, e.g. `z.conj().imag`) or, for complex tensors (`complex`), a conjugate bit.
/// torch's own `__cuda_array_interface__` exports such a tensor's memory as it is, which a
/// kernel would read with the wrong sign.
pub fn refuse_lazy_bits(tensor: &Bound<'_, PyAny>, arg: &str, complex: bool) -> PyResult<()> {
    let py = tensor.py();
    if tensor.call_method0(intern!(py, "is_neg"))?.is_truthy()?
        || (complex && tensor.call_method0(intern!(py, "is_conj"))?.is_truthy()?)
    {
        return Err(PyValueError::new_err(format!(
            "argument `{arg}`: tensor has an unresolved negative or conjugate bit (its values \
             are not its memory); pass t.resolve_neg().resolve_conj()"
        )));
    }
    Ok(())
}

/// torch's current stream on the device of `tensor` (once per launch).
pub fn torch_stream(tensor: &Bound<'_, PyAny>, state: &mut CallState) -> PyResult<StreamRef> {
    if let Some(s) = state.torch {
        return Ok(s);
    }
    // `Some(f)`: torch's private `_cuda_getCurrentRawStream(device) -> int` (one cheap call);
    // `None`: a torch without it, where the public API — many times slower, as
    // `bench/field_costs.py` shows — is used.
    static RAW: PyOnceLock<Option<Py<PyAny>>> = PyOnceLock::new();
    let py = tensor.py();
    if let Some(api) = torch_api(py) {
        // The device through the exchange API too (a C call, where `get_device()` is a
        // Python method call).
        let mut shape = [0i64; MAX_NDIM];
        let mut strides = [0i64; MAX_NDIM];
        if let Some(v) = api
            .view(tensor, &mut shape, &mut strides)
            .filter(|v| v.device.device_type == dlpack::KDL_CUDA)
        {
            return torch_stream_on(py, &api, v.device, state);
        }
    }
    let device: i64 = tensor.call_method0(intern!(py, "get_device"))?.extract()?;
    let raw = RAW.get_or_try_init(py, || -> PyResult<Option<Py<PyAny>>> {
        Ok(py
            .import("torch._C")?
            .getattr("_cuda_getCurrentRawStream")
            .ok()
            .map(Bound::unbind))
    })?;
    let ptr: u64 = match raw {
        Some(f) => f.bind(py).call1((device,))?.extract()?,
        None => py
            .import("torch.cuda")?
            .call_method1("current_stream", (device,))?
            .getattr("cuda_stream")?
            .extract()?,
    };
    // 0 is the legacy default stream (torch's default stream).
    let s = StreamRef::from_cai(ptr).unwrap_or(StreamRef::Legacy);
    state.torch = Some(s);
    Ok(s)
}

/// torch's current stream on `device` through its exchange API (0, its default stream, is the
/// legacy stream), remembered for the rest of the launch in `state`.
fn torch_stream_on(
    py: Python<'_>,
    api: &ExchangeApi,
    device: dlpack::DLDevice,
    state: &mut CallState,
) -> PyResult<StreamRef> {
    let s = StreamRef::from_cai(api.current_stream(py, device)?).unwrap_or(StreamRef::Legacy);
    state.torch = Some(s);
    Ok(s)
}

/// torch's DLPack exchange API (`torch.Tensor.__dlpack_c_exchange_api__`, of `torch.Tensor`
/// itself: subclasses are read by the generic path), looked up once; `None` for a torch
/// without it (or an unusable one) and with `FERROCUDA_TORCH_EXCHANGE=0`.
fn torch_api(py: Python<'_>) -> Option<ExchangeApi> {
    static API: PyOnceLock<Option<ExchangeApi>> = PyOnceLock::new();
    *API.get_or_init(py, || {
        if matches!(
            std::env::var("FERROCUDA_TORCH_EXCHANGE").as_deref(),
            Ok("0") | Ok("off") | Ok("false")
        ) {
            return None;
        }
        let ty = py.import("torch").ok()?.getattr("Tensor").ok()?;
        ExchangeApi::of_type(ty.cast::<pyo3::types::PyType>().ok()?)
    })
}

/// `"exchange"` when torch tensors are read through torch's exchange API, else
/// `"attributes"`.
pub fn torch_read_source(py: Python<'_>) -> &'static str {
    match torch_api(py) {
        Some(_) => "exchange",
        None => "attributes",
    }
}

/// The element type of a tensor viewed through the exchange API: the dtypes the getter
/// exports ([`TORCH_EXPORTS`]), else `None`.
fn torch_dl_dtype(t: dlpack::DLDataType) -> Option<DType> {
    let d = (t.lanes == 1)
        .then(|| DType::from_dlpack(t.code, t.bits))
        .flatten()?;
    TORCH_EXPORTS.contains(&d).then_some(d)
}

/// The pointer and layout of a tensor through the exchange API (`None` to fall back): CUDA
/// tensors only, of an exported dtype. Returns the element type and device too.
fn torch_view(
    obj: &Bound<'_, PyAny>,
    api: &ExchangeApi,
    l: &mut Layout,
) -> Option<(DType, dlpack::DLDevice)> {
    let mut shape = [0i64; MAX_NDIM];
    let mut elem = [0i64; MAX_NDIM];
    let v = api.view(obj, &mut shape, &mut elem)?;
    if v.device.device_type != dlpack::KDL_CUDA {
        return None;
    }
    let dtype = torch_dl_dtype(v.dtype)?;
    l.n = v.ndim;
    for (slot, &n) in l.shape.iter_mut().zip(&shape[..v.ndim]) {
        *slot = usize::try_from(n).ok()?;
    }
    l.strided = v.strided;
    if l.strided {
        let mut e = [0isize; MAX_NDIM];
        for (slot, &s) in e.iter_mut().zip(&elem[..v.ndim]) {
            *slot = isize::try_from(s).ok()?;
        }
        layout::byte_strides(&e[..l.n], dtype.itemsize(), &mut l.strides).ok()?;
    }
    // An empty tensor's pointer is 0, as the getter exports it (views keep an address).
    l.ptr = match layout::element_count(l.shape())? {
        0 => 0,
        _ => v.ptr,
    };
    Some((dtype, v.device))
}

/// A tensor through torch's exchange API: one C call for pointer, device, element type, shape
/// and strides, one for the current stream (once per launch); `requires_grad` and the lazy
/// bits, which the exchange API does not report, are read as attributes.
fn torch_exchanged(
    obj: &Bound<'_, PyAny>,
    api: &ExchangeApi,
    arg: &str,
    state: &mut CallState,
    slot: &mut Option<ArrayDesc>,
) -> PyResult<bool> {
    let py = obj.py();
    // The getter refuses tensors that require grad: fall back to it for its error.
    if obj.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
        return Ok(false);
    }
    let mut l = Layout::new();
    // Sparse, meta and CPU tensors, other dtypes: the getter's own error or reading.
    let Some((dtype, device)) = torch_view(obj, api, &mut l) else {
        return Ok(false);
    };
    refuse_lazy_bits(obj, arg, matches!(dtype, DType::C64 | DType::C128))?;
    ferrocuda_host::mark!(16);
    let stream = match state.torch {
        Some(s) => s,
        None => torch_stream_on(py, api, device, state)?,
    };
    ferrocuda_host::mark!(17);
    let stream = Some(stream);
    let (shape, strides, ptr) = (l.shape(), l.strides(), l.ptr);
    Ok(ArrayDesc::from_parts_into(slot, dtype, shape, strides, ptr, false, stream, 2).is_ok())
}

fn torch(
    obj: &Bound<'_, PyAny>,
    arg: &str,
    state: &mut CallState,
    slot: &mut Option<ArrayDesc>,
) -> PyResult<bool> {
    if let Some(api) = torch_api(obj.py()) {
        return torch_exchanged(obj, &api, arg, state, slot);
    }
    let py = obj.py();
    let flag = |name: &Bound<'_, PyString>| -> PyResult<bool> { obj.getattr(name)?.is_truthy() };
    if !flag(intern!(py, "is_cuda"))?
        || flag(intern!(py, "requires_grad"))?
        || flag(intern!(py, "is_sparse"))?
    {
        return Ok(false);
    }
    let Some(dtype) = torch_dtype(&obj.getattr(intern!(py, "dtype"))?) else {
        return Ok(false);
    };
    refuse_lazy_bits(obj, arg, matches!(dtype, DType::C64 | DType::C128))?;
    let mut l = Layout::new();
    if torch_layout(obj, dtype.itemsize(), &mut l)?.is_none() {
        return Ok(false);
    }
    ferrocuda_host::mark!(16);
    let stream = torch_stream(obj, state)?;
    ferrocuda_host::mark!(17);
    let stream = Some(stream);
    let (shape, strides, ptr) = (l.shape(), l.strides(), l.ptr);
    Ok(ArrayDesc::from_parts_into(slot, dtype, shape, strides, ptr, false, stream, 2).is_ok())
}

/// The pointer and layout of a CUDA tensor of `itemsize`-byte elements (`None` to fall back).
fn torch_layout(obj: &Bound<'_, PyAny>, itemsize: usize, l: &mut Layout) -> PyResult<Option<()>> {
    let py = obj.py();
    let mut elem = [0isize; MAX_NDIM];
    // 1-D (the common case): `numel()` and `is_contiguous()` cost half of building the
    // `shape` tuple and the `stride()` tuple.
    let ndim: usize = obj.call_method0(intern!(py, "dim"))?.extract()?;
    l.n = if ndim == 1
        && obj
            .call_method0(intern!(py, "is_contiguous"))?
            .is_truthy()?
    {
        l.shape[0] = obj.call_method0(intern!(py, "numel"))?.extract()?;
        elem[0] = 1;
        1
    } else {
        let Some(n) = int_tuple(&obj.getattr(intern!(py, "shape"))?, &mut l.shape) else {
            return Ok(None);
        };
        let Some(m) = int_tuple(&obj.call_method0(intern!(py, "stride"))?, &mut elem) else {
            return Ok(None);
        };
        if m != n {
            return Ok(None);
        }
        n
    };
    l.strided = true;
    if layout::byte_strides(&elem[..l.n], itemsize, &mut l.strides).is_err() {
        return Ok(None);
    }
    l.ptr = match layout::element_count(l.shape()) {
        None => return Ok(None),
        Some(0) => 0,
        Some(_) => obj.call_method0(intern!(py, "data_ptr"))?.extract()?,
    };
    Ok(Some(()))
}
