//! The torch fast path: exact `torch.Tensor`, read with the meaning of its getter
//! (`torch/_tensor.py`, `Tensor.__cuda_array_interface__`) kept.
//!
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
//! In a launch's operator mode ([`CallState::detaching`]: the kernel of a torch operator) a
//! tensor that requires grad is read either way like any other — as its `detach()` would be,
//! the same memory and layout (the exchange API reads such tensors) — and `requires_grad` is
//! not read at all.
//!
//! torch's current stream, the producer stream of every tensor whose interface names no
//! stream (see the parent module, "torch's producer stream"), is read here too
//! ([`torch_stream`]).

use ferrocuda_abi::{layout, DType};
use ferrocuda_host::interop::cai::{ArrayDesc, MAX_NDIM};
use ferrocuda_host::StreamRef;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

use super::{dtype_code, dtype_of_code, int_tuple, CallState, Layout, DTYPES};
use crate::dlpack::Exchange;
use ferrocuda_host::interop::dlpack::{DLDataType, DLDevice, Fields, KDL_CUDA};

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
    if let Some(api) = torch_api(py)? {
        // The device through the exchange API too (a C call, where `get_device()` is a
        // Python method call).
        if let Some(device) = api
            .view_with(tensor, |v| v.device)
            .filter(|d| d.device_type == KDL_CUDA)
        {
            return torch_stream_on(py, api, device, state);
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
pub(super) fn torch_stream_on(
    py: Python<'_>,
    api: &Exchange,
    device: DLDevice,
    state: &mut CallState,
) -> PyResult<StreamRef> {
    let s = StreamRef::from_cai(api.current_stream(py, device)?).unwrap_or(StreamRef::Legacy);
    state.torch = Some(s);
    Ok(s)
}

/// torch's DLPack exchange API (`torch.Tensor.__dlpack_c_exchange_api__`, of `torch.Tensor`
/// itself: subclasses are read by the generic path), looked up once; `None` for a torch
/// without it (or an unusable one) and with `FERROCUDA_TORCH_EXCHANGE=0`.
/// A value of `FERROCUDA_TORCH_EXCHANGE` other than `1`, `0` or empty is a `ValueError`.
pub(super) fn torch_api(py: Python<'_>) -> PyResult<Option<&'static Exchange>> {
    static ON: std::sync::OnceLock<Result<bool, ferrocuda_config::Error>> =
        std::sync::OnceLock::new();
    if !super::shared::switch(&ferrocuda_config::TORCH_EXCHANGE, &ON)? {
        return Ok(None);
    }
    static API: PyOnceLock<Option<Exchange>> = PyOnceLock::new();
    Ok(API
        .get_or_init(py, || {
            let ty = py.import("torch").ok()?.getattr("Tensor").ok()?;
            Exchange::of_type(ty.cast::<pyo3::types::PyType>().ok()?)
        })
        .as_ref())
}

/// `"exchange"` when torch tensors are read through torch's exchange API, else
/// `"attributes"`.
pub fn torch_read_source(py: Python<'_>) -> PyResult<&'static str> {
    Ok(match torch_api(py)? {
        Some(_) => "exchange",
        None => "attributes",
    })
}

/// The element type of a tensor viewed through the exchange API: the dtypes the getter
/// exports ([`TORCH_EXPORTS`]), else `None`.
fn torch_dl_dtype(t: DLDataType) -> Option<DType> {
    let d = (t.lanes == 1)
        .then(|| DType::from_dlpack(t.code, t.bits))
        .flatten()?;
    TORCH_EXPORTS.contains(&d).then_some(d)
}

/// The pointer and layout of a tensor through the exchange API (`None` to fall back): CUDA
/// tensors only, of an exported dtype. Returns the element type and device too.
pub(super) fn torch_view(
    obj: &Bound<'_, PyAny>,
    api: &Exchange,
    l: &mut Layout,
) -> Option<(DType, DLDevice)> {
    api.view_with(obj, |v| torch_layout_of(v, l)).flatten()
}

/// [`torch_view`]'s reading of the fields (in place: they are not moved per tensor).
#[inline]
fn torch_layout_of(v: &Fields, l: &mut Layout) -> Option<(DType, DLDevice)> {
    if v.device.device_type != KDL_CUDA {
        return None;
    }
    let dtype = torch_dl_dtype(v.dtype)?;
    let shape = v.shape();
    l.n = shape.len();
    for (slot, &n) in l.shape.iter_mut().zip(shape) {
        *slot = usize::try_from(n).ok()?;
    }
    l.strided = v.strided;
    if let Some(elem) = v.strides() {
        let mut e = [0isize; MAX_NDIM];
        for (slot, &s) in e.iter_mut().zip(elem) {
            *slot = isize::try_from(s).ok()?;
        }
        layout::byte_strides(&e[..l.n], dtype.itemsize(), &mut l.strides).ok()?;
    }
    // An empty tensor's pointer is 0, as the getter exports it (views keep an address).
    l.ptr = match layout::element_count(l.shape())? {
        0 => 0,
        _ => v.ptr()?,
    };
    Some((dtype, v.device))
}

/// A tensor through torch's exchange API: one C call for pointer, device, element type, shape
/// and strides, one for the current stream (once per launch); `requires_grad` and the lazy
/// bits, which the exchange API does not report, are read as attributes.
fn torch_exchanged(
    obj: &Bound<'_, PyAny>,
    api: &Exchange,
    arg: &str,
    state: &mut CallState,
    slot: &mut Option<ArrayDesc>,
) -> PyResult<bool> {
    let py = obj.py();
    // The getter refuses tensors that require grad: fall back to it for its error (unless the
    // launch reads them as their `detach()`: then the flag is not even read).
    if !state.detach_grad && obj.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
        return Ok(false);
    }
    let mut l = Layout::new();
    // Sparse, meta and CPU tensors, other dtypes: the getter's own error or reading.
    let Some((dtype, device)) = torch_view(obj, api, &mut l) else {
        return Ok(false);
    };
    refuse_lazy_bits(obj, arg, matches!(dtype, DType::C64 | DType::C128))?;
    ferrocuda_host::mark!("py:   fast path: attribute reads");
    let stream = match state.torch {
        Some(s) => s,
        None => torch_stream_on(py, api, device, state)?,
    };
    ferrocuda_host::mark!("py:   fast path: current stream");
    let stream = Some(stream);
    let (shape, strides, ptr) = (l.shape(), l.strides(), l.ptr);
    Ok(ArrayDesc::from_parts_into(slot, dtype, shape, strides, ptr, false, stream, 2).is_ok())
}

pub(super) fn torch(
    obj: &Bound<'_, PyAny>,
    arg: &str,
    state: &mut CallState,
    slot: &mut Option<ArrayDesc>,
) -> PyResult<bool> {
    if let Some(api) = torch_api(obj.py())? {
        return torch_exchanged(obj, api, arg, state, slot);
    }
    let py = obj.py();
    let flag = |name: &Bound<'_, PyString>| -> PyResult<bool> { obj.getattr(name)?.is_truthy() };
    if !flag(intern!(py, "is_cuda"))?
        || (!state.detach_grad && flag(intern!(py, "requires_grad"))?)
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
    ferrocuda_host::mark!("py:   fast path: attribute reads");
    let stream = torch_stream(obj, state)?;
    ferrocuda_host::mark!("py:   fast path: current stream");
    let stream = Some(stream);
    let (shape, strides, ptr) = (l.shape(), l.strides(), l.ptr);
    Ok(ArrayDesc::from_parts_into(slot, dtype, shape, strides, ptr, false, stream, 2).is_ok())
}

/// The pointer and layout of a CUDA tensor of `itemsize`-byte elements (`None` to fall back).
pub(super) fn torch_layout(
    obj: &Bound<'_, PyAny>,
    itemsize: usize,
    l: &mut Layout,
) -> PyResult<Option<()>> {
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
