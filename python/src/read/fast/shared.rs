//! What the CuPy and torch readers share: a lock-free table of Python object addresses, the
//! per-launch producer state, the layout a fast path reads, element types by dtype object,
//! tuples of ints, and CuPy's switch and null stream.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ferrocuda_abi::{layout, DType};
use ferrocuda_host::interop::cai::{ArrayDesc, MAX_NDIM};
use ferrocuda_host::StreamRef;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

// ---------------------------------------------------------------------------------------
// A lock-free map from Python object addresses to a byte.

/// Up to `N` entries `address → byte`, lock-free (read on every launch). An address is only
/// inserted together with a leaked strong reference to its object, so it can never be freed
/// and reused by another object. Once full, lookups of new addresses just miss.
pub(super) struct PtrTable<const N: usize>([AtomicU64; N]);

impl<const N: usize> PtrTable<N> {
    pub(super) const fn new() -> Self {
        PtrTable([const { AtomicU64::new(0) }; N])
    }

    pub(super) fn key(obj: &Bound<'_, PyAny>) -> Option<u64> {
        Self::key_of(obj.as_ptr())
    }

    pub(super) fn key_of(ptr: *mut pyo3::ffi::PyObject) -> Option<u64> {
        let k = ptr as u64;
        // Packed as `address << 8 | byte`: addresses must fit 56 bits (x86-64 and AArch64
        // user space do).
        (k != 0 && k >> 56 == 0).then_some(k)
    }

    pub(super) fn get(&self, obj: &Bound<'_, PyAny>) -> Option<u8> {
        self.get_ptr(obj.as_ptr())
    }

    /// As [`get`](Self::get), by address (no reference taken).
    pub(super) fn get_ptr(&self, ptr: *mut pyo3::ffi::PyObject) -> Option<u8> {
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

    pub(super) fn insert(&self, obj: &Bound<'_, PyAny>, value: u8) {
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

pub(super) static CUPY_ON: AtomicBool = AtomicBool::new(true);
/// What CuPy's getter exports for its null stream (0 until first seen).
pub(super) static CUPY_NULL: AtomicU64 = AtomicU64::new(0);

// ---------------------------------------------------------------------------------------
// Per-launch state.

/// The readers' state of one launch: producer state read at most once per launch, and how a
/// torch tensor that requires grad is read.
#[derive(Clone, Copy, Default)]
pub struct CallState {
    /// CuPy: `(export version, stream)`.
    pub(super) cupy: Option<(u8, Option<StreamRef>)>,
    /// torch: the current stream of the first tensor's device.
    pub(super) torch: Option<StreamRef>,
    /// `true`: a tensor that requires grad is read as its `detach()` is (the same memory and
    /// layout), by the fast path like any other tensor — the operator mode of a launch.
    /// `false` (a launcher's call): the fast path leaves it to torch's getter, which refuses
    /// it.
    pub(super) detach_grad: bool,
}

impl CallState {
    /// The state of a launch that reads tensors that require grad as their `detach()`.
    pub fn detaching() -> Self {
        CallState {
            detach_grad: true,
            ..CallState::default()
        }
    }
}

/// The pointer and layout of an array as a fast path reads them: what can change on the same
/// producer object between launches (torch's `resize_`, `set_`, `as_strided_`, assigning
/// `.data`; CuPy's `shape` setter).
pub struct Layout {
    pub(super) n: usize,
    pub(super) shape: [usize; MAX_NDIM],
    /// Byte strides in `[..n]` when `strided`, else C-contiguous.
    pub(super) strides: [isize; MAX_NDIM],
    pub(super) strided: bool,
    pub(super) ptr: u64,
}

impl Layout {
    pub(super) fn new() -> Self {
        Layout {
            n: 0,
            shape: [0; MAX_NDIM],
            strides: [0; MAX_NDIM],
            strided: false,
            ptr: 0,
        }
    }

    pub(super) fn shape(&self) -> &[usize] {
        &self.shape[..self.n]
    }

    pub(super) fn strides(&self) -> Option<&[isize]> {
        self.strided.then(|| &self.strides[..self.n])
    }

    /// Whether this is the pointer, shape and strides `desc` describes.
    pub(super) fn matches(&self, desc: &ArrayDesc) -> bool {
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

// ---------------------------------------------------------------------------------------
// Element types by dtype object (each producer's reader of its dtype objects is in its own
// module).

pub(super) const NO_DTYPE: u8 = 0xff;
pub(super) static DTYPES: PtrTable<32> = PtrTable::new();

pub(super) fn dtype_code(d: Option<DType>) -> u8 {
    match d {
        Some(d) => DType::ALL
            .iter()
            .position(|x| *x == d)
            .map_or(NO_DTYPE, |i| i as u8),
        None => NO_DTYPE,
    }
}

pub(super) fn dtype_of_code(c: u8) -> Option<DType> {
    DType::ALL.get(c as usize).copied()
}

// ---------------------------------------------------------------------------------------
// Reading tuples of ints.

/// The ints of a tuple of at most [`MAX_NDIM`] items into `out`; `None` if it is anything else.
pub(super) fn int_tuple<'py, T>(obj: &Bound<'py, PyAny>, out: &mut [T; MAX_NDIM]) -> Option<usize>
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
// Configuration switches.

/// A switch of [`ferrocuda_config`] read once into `cell`; a value it does not take is a
/// `ValueError` (at every call: the launch that reads it fails).
pub(super) fn switch(
    var: &ferrocuda_config::Var,
    cell: &std::sync::OnceLock<Result<bool, ferrocuda_config::Error>>,
) -> PyResult<bool> {
    match cell.get_or_init(|| var.switch()) {
        Ok(on) => Ok(*on),
        Err(e) => Err(pyo3::exceptions::PyValueError::new_err(e.to_string())),
    }
}
