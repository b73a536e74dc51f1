//! [`ArrayDesc`], the validated description of an array, and the rules every descriptor
//! obeys however it was made ([`build`]).

use std::borrow::Cow;
use std::fmt;

use ferrocuda_abi::{layout, DType, Indexer, MAX_NDIM};

use crate::error::{Error, Key, Protocol, Result};
use crate::stream::StreamRef;

/// A validated array interface.
///
/// Fixed-capacity storage ([`MAX_NDIM`] axes inline), no heap allocation: it is built on the
/// per-launch hot path. Slots beyond `ndim` are always zero, so the derived equality is the
/// equality of the arrays described.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ArrayDesc {
    protocol: Protocol,
    version: u8,
    dtype: DType,
    ndim: u8,
    readonly: bool,
    c_contiguous: bool,
    shape: [usize; MAX_NDIM],
    strides: [isize; MAX_NDIM],
    size: usize,
    ptr: u64,
    byte_range: Option<(u64, u64)>,
    stream: Option<StreamRef>,
}

impl fmt::Debug for ArrayDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArrayDesc")
            .field("protocol", &self.protocol)
            .field("version", &self.version)
            .field("dtype", &self.dtype)
            .field("shape", &self.shape())
            .field("byte_strides", &self.byte_strides())
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("readonly", &self.readonly)
            .field("stream", &self.stream)
            .finish()
    }
}

impl ArrayDesc {
    /// The protocol the array came from ([`Protocol::Cuda`] for [`from_parts`](Self::from_parts)).
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The interface version (3 for [`from_parts`](Self::from_parts)).
    pub fn version(&self) -> u8 {
        self.version
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Size of one element in bytes.
    pub fn itemsize(&self) -> usize {
        self.dtype.itemsize()
    }

    /// Number of axes (0 for a scalar).
    pub fn ndim(&self) -> usize {
        usize::from(self.ndim)
    }

    /// Extent of each axis.
    pub fn shape(&self) -> &[usize] {
        &self.shape[..self.ndim()]
    }

    /// Byte strides of each axis; always filled (C-order strides are computed when the
    /// interface gave none). For SYCL USM arrays, the element strides times the item size.
    pub fn byte_strides(&self) -> &[isize] {
        &self.strides[..self.ndim()]
    }

    /// Number of elements (1 for a scalar, 0 if any extent is 0).
    pub fn size(&self) -> usize {
        self.size
    }

    /// `true` when the array holds no element.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The address of element `[0, …, 0]` (for SYCL USM: `data + offset * itemsize`).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Whether the producer exported the array read-only: it must never be written.
    pub fn readonly(&self) -> bool {
        self.readonly
    }

    /// `true` when the layout is C-contiguous, as NumPy decides: axes of extent 1 may have
    /// any stride, and empty arrays count as contiguous.
    pub fn is_c_contiguous(&self) -> bool {
        self.c_contiguous
    }

    /// `true` when `other` describes the same elements in the same way: the same protocol,
    /// version, element type, shape, pointer, read-only flag and stream, and the same byte
    /// strides wherever a stride moves the pointer — not along an axis of extent 1, nor on
    /// any axis of an empty array, where producers write what they like (torch reports 0 for
    /// an empty tensor's stride, its interface the C-contiguous one).
    pub fn same_elements(&self, other: &ArrayDesc) -> bool {
        let strides = self.is_empty()
            || self
                .shape()
                .iter()
                .zip(self.byte_strides().iter().zip(other.byte_strides()))
                .all(|(&n, (a, b))| n <= 1 || a == b);
        self.protocol == other.protocol
            && self.version == other.version
            && self.dtype == other.dtype
            && self.shape() == other.shape()
            && self.ptr == other.ptr
            && self.readonly == other.readonly
            && self.stream == other.stream
            && strides
    }

    /// The producer's stream; `None` when the interface had no stream (absent or `None`):
    /// no synchronization is needed.
    pub fn stream(&self) -> Option<StreamRef> {
        self.stream
    }

    /// Lowest byte address touched and one past the highest, or `None` for zero-size arrays.
    ///
    /// `lo = ptr + Σ min(0, (n-1)·s)`, `hi = ptr + Σ max(0, (n-1)·s) + itemsize` over the axes
    /// (extent `n`, byte stride `s`). Validation guarantees both fit `u64`.
    pub fn byte_range(&self) -> Option<(u64, u64)> {
        self.byte_range
    }

    /// The element strides of the array (the byte strides divided by the item size), written
    /// to `out`, for a kernel that indexes elements ([`layout::element_strides`]).
    ///
    /// Errors: `Value` if a byte stride is not a multiple of the item size (the elements would
    /// be misaligned). A stride that never moves the pointer (on an axis of extent 1, or any
    /// axis of an empty array) is exempt and becomes 0.
    pub fn element_strides<'o>(&self, out: &'o mut [isize; MAX_NDIM]) -> Result<&'o [isize]> {
        let (shape, strides) = (self.shape(), self.byte_strides());
        match layout::element_strides(shape, strides, self.itemsize(), out) {
            Ok(()) => Ok(&out[..shape.len()]),
            Err(d) => Err(Error::value(format!(
                "strides[{d}] = {} bytes is not a multiple of the item size ({} bytes of {}): \
                 kernels need element-aligned strides",
                strides[d],
                self.itemsize(),
                self.dtype.name()
            ))
            .with_key(Key::Strides)
            .with_protocol(self.protocol)),
        }
    }

    /// The element-stride indexer for a kernel view of rank `N`.
    ///
    /// Errors: `Type` if `ndim != N`; `Value` if a byte stride is not a multiple of the item
    /// size (see [`element_strides`](Self::element_strides)).
    pub fn indexer<const N: usize>(&self) -> Result<Indexer<N>> {
        if self.ndim() != N {
            return Err(Error::type_error(format!(
                "expected a {N}-D array, got a {}-D array of shape {:?}",
                self.ndim(),
                self.shape()
            ))
            .with_key(Key::Shape)
            .with_protocol(self.protocol));
        }
        let mut strides = [0isize; MAX_NDIM];
        let strides = self.element_strides(&mut strides)?;
        let mut shape = [0usize; N];
        let mut elem = [0isize; N];
        shape.copy_from_slice(self.shape());
        elem.copy_from_slice(strides);
        Ok(Indexer::new(shape, elem))
    }

    /// The same array with another producer stream (`None`: no ordering needed).
    pub fn with_stream(mut self, stream: Option<StreamRef>) -> ArrayDesc {
        self.stream = stream;
        self
    }

    /// The same array reported as coming from CAI `version` (clamped to 0..=3), for
    /// descriptors built with [`from_parts`](Self::from_parts) that mirror a producer's
    /// interface (the version is informational: validation rules do not depend on it).
    pub fn with_version(mut self, version: u8) -> ArrayDesc {
        self.version = version.min(3);
        self
    }

    /// The same array marked read-only (it can only become more restricted).
    pub fn into_readonly(mut self) -> ArrayDesc {
        self.readonly = true;
        self
    }

    /// Builds a descriptor directly, for arrays ferrocuda owns (or describes itself).
    ///
    /// `byte_strides: None` means C-contiguous. The result is validated like an interface:
    /// at most [`MAX_NDIM`] axes, no overflow of the element count or the extent, a non-null
    /// pointer aligned to the item size for non-empty arrays. The descriptor reports
    /// [`Protocol::Cuda`] and version 3 (what ferrocuda exports).
    pub fn from_parts(
        dtype: DType,
        shape: &[usize],
        byte_strides: Option<&[isize]>,
        ptr: u64,
        readonly: bool,
        stream: Option<StreamRef>,
    ) -> Result<ArrayDesc> {
        let mut slot = None;
        Self::from_parts_into(
            &mut slot,
            dtype,
            shape,
            byte_strides,
            ptr,
            readonly,
            stream,
            3,
        )
        .map(|d| *d)
    }

    /// [`from_parts`](Self::from_parts) written into `slot` (left `None` on an error), with
    /// CAI `version` (clamped to 0..=3): for hot paths that keep the descriptor where it is
    /// built instead of moving its ≈ 580 bytes through each layer that returns it.
    ///
    /// # Errors
    ///
    /// As [`from_parts`](Self::from_parts).
    #[allow(clippy::too_many_arguments)] // the parts of `from_parts`, and where they go
    pub fn from_parts_into<'a>(
        slot: &'a mut Option<ArrayDesc>,
        dtype: DType,
        shape: &[usize],
        byte_strides: Option<&[isize]>,
        ptr: u64,
        readonly: bool,
        stream: Option<StreamRef>,
        version: u8,
    ) -> Result<&'a mut ArrayDesc> {
        let parts = Parts {
            protocol: Protocol::Cuda,
            version: version.min(3),
            dtype,
            shape,
            strides: byte_strides,
            ptr,
            readonly,
            stream,
        };
        build_into(parts, slot).map_err(|e| e.with_protocol(Protocol::Cuda))?;
        slot.as_mut()
            .ok_or_else(|| Error::value("descriptor not built"))
    }
}

/// A `Value` error naming `key`.
pub(super) fn value_err(key: Key, message: impl Into<Cow<'static, str>>) -> Error {
    Error::value(message).with_key(key)
}

/// Checked pieces for [`build`]: the shape is already `usize`, strides (if any) bytes.
pub(super) struct Parts<'s> {
    pub(super) protocol: Protocol,
    pub(super) version: u8,
    pub(super) dtype: DType,
    pub(super) shape: &'s [usize],
    pub(super) strides: Option<&'s [isize]>,
    pub(super) ptr: u64,
    pub(super) readonly: bool,
    pub(super) stream: Option<StreamRef>,
}

/// The rules shared by [`validate`](super::validate) and [`ArrayDesc::from_parts`]: rank,
/// element count, stride count, C strides, null and misaligned pointers, extent. Errors carry
/// their key.
pub(super) fn build(p: Parts<'_>) -> Result<ArrayDesc> {
    let mut slot = None;
    build_into(p, &mut slot)?;
    slot.ok_or_else(|| Error::value("descriptor not built"))
}

/// [`build`] in place: the descriptor is written into `slot` (`None` again on an error).
/// Descriptors hold [`MAX_NDIM`] axes inline (≈ 580 bytes), and the launch path builds several
/// per call: building each where it stays saves moving it through every layer that returns it.
pub(super) fn build_into(p: Parts<'_>, slot: &mut Option<ArrayDesc>) -> Result<()> {
    let ndim = p.shape.len();
    if ndim > MAX_NDIM {
        *slot = None;
        return Err(value_err(
            Key::Shape,
            format!("{ndim} axes; at most {MAX_NDIM} are supported"),
        ));
    }
    // Like NumPy, the non-zero extents must multiply without overflow even when another
    // extent is 0.
    let Some(size) = layout::element_count(p.shape) else {
        *slot = None;
        return Err(value_err(
            Key::Shape,
            format!("the element count of shape {:?} overflows usize", p.shape),
        ));
    };
    let desc = slot.insert(ArrayDesc {
        protocol: p.protocol,
        version: p.version,
        dtype: p.dtype,
        ndim: ndim as u8,
        readonly: p.readonly,
        c_contiguous: false,
        shape: [0; MAX_NDIM],
        strides: [0; MAX_NDIM],
        size,
        ptr: p.ptr,
        byte_range: None,
        stream: p.stream,
    });
    desc.shape[..ndim].copy_from_slice(p.shape);
    let checked = fill_strides(desc, p.strides).and_then(|strides_key| {
        if size > 0 {
            desc.byte_range = Some(byte_range(desc, strides_key)?);
        }
        desc.c_contiguous =
            layout::is_c_contiguous(desc.shape(), desc.byte_strides(), desc.itemsize());
        Ok(())
    });
    if checked.is_err() {
        *slot = None;
    }
    checked
}

/// Fills the descriptor's byte strides: the given ones, else the C-order ones. Returns the key
/// an extent error should name (`strides` when given, else `shape`).
fn fill_strides(desc: &mut ArrayDesc, strides: Option<&[isize]>) -> Result<Key> {
    let ndim = desc.ndim();
    match strides {
        Some(s) => {
            if s.len() != ndim {
                return Err(value_err(
                    Key::Strides,
                    format!("{} strides for {ndim} axes", s.len()),
                ));
            }
            desc.strides[..ndim].copy_from_slice(s);
            Ok(Key::Strides)
        }
        None => {
            let (shape, item) = (&desc.shape[..ndim], desc.dtype.itemsize());
            layout::c_strides(shape, item, &mut desc.strides).ok_or_else(|| {
                value_err(
                    Key::Shape,
                    format!(
                        "extent overflows: shape {shape:?} with {item}-byte items does not fit \
                         the address space"
                    ),
                )
            })?;
            Ok(Key::Shape)
        }
    }
}

/// The byte range of a non-empty array: its pointer must be non-null and aligned to the item
/// size, the offsets of its lowest and highest bytes must fit `isize`, and the range must lie
/// within the 64-bit address space.
fn byte_range(desc: &ArrayDesc, strides_key: Key) -> Result<(u64, u64)> {
    let (ptr, itemsize) = (desc.ptr, desc.itemsize());
    let item = itemsize as i128;
    if ptr == 0 {
        return Err(value_err(
            Key::Data,
            "null pointer for a non-empty array (0 is only for zero-size arrays)",
        ));
    }
    if !ptr.is_multiple_of(itemsize as u64) {
        return Err(value_err(
            Key::Data,
            format!(
                "pointer {ptr:#x} is not aligned to the item size ({itemsize} bytes of {}); \
                 a misaligned access would fault on the GPU",
                desc.dtype.name()
            ),
        ));
    }
    let (shape, strides) = (desc.shape(), desc.byte_strides());
    // Offsets (bytes, from ptr) of the lowest and highest element starts.
    let (lo, hi) = layout::span(shape, strides)
        .filter(|&(lo, hi)| lo >= isize::MIN as i128 && hi <= isize::MAX as i128 - item)
        .ok_or_else(|| {
            value_err(
                strides_key,
                format!(
                    "extent overflows: shape {shape:?} with byte strides {strides:?} \
                     spans more than isize::MAX bytes"
                ),
            )
        })?;
    let start = u64::try_from(i128::from(ptr) + lo);
    let end = u64::try_from(i128::from(ptr) + hi + item);
    match (start, end) {
        (Ok(start), Ok(end)) => Ok((start, end)),
        _ => Err(value_err(
            Key::Data,
            format!(
                "extent overflows: bytes {lo}..{} around pointer {ptr:#x} leave the 64-bit \
                 address space",
                hi + item
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 0x7f00_0000_1000;

    #[test]
    fn same_elements_ignores_strides_that_do_not_move_the_pointer() {
        let desc = |shape: &[usize], strides: Option<&[isize]>| {
            ArrayDesc::from_parts(DType::F32, shape, strides, P, false, None).unwrap()
        };
        // An empty tensor: torch's stride 0 against the interface's C-contiguous 4.
        assert!(desc(&[0], Some(&[0])).same_elements(&desc(&[0], None)));
        assert!(desc(&[3, 0], Some(&[0, 0])).same_elements(&desc(&[3, 0], None)));
        // An axis of extent 1 may have any stride.
        assert!(desc(&[1, 5], Some(&[999 * 4, 4])).same_elements(&desc(&[1, 5], None)));
        // Strides that move the pointer must agree; so must everything else.
        assert!(!desc(&[2, 5], Some(&[40, 8])).same_elements(&desc(&[2, 5], None)));
        assert!(!desc(&[5, 2], Some(&[4, 20])).same_elements(&desc(&[5, 2], None)));
        assert!(!desc(&[4], None).same_elements(&desc(&[5], None)));
        let other_ptr = ArrayDesc::from_parts(DType::F32, &[4], None, P + 4, false, None).unwrap();
        assert!(!desc(&[4], None).same_elements(&other_ptr));
        let other_type = ArrayDesc::from_parts(DType::I32, &[4], None, P, false, None).unwrap();
        assert!(!desc(&[4], None).same_elements(&other_type));
        let readonly = ArrayDesc::from_parts(DType::F32, &[4], None, P, true, None).unwrap();
        assert!(!desc(&[4], None).same_elements(&readonly));
    }

    #[test]
    fn unused_slots_are_zero_and_debug_is_short() {
        let a = ArrayDesc::from_parts(DType::F32, &[2, 3], None, P, false, None).unwrap();
        assert!(a.shape[2..].iter().all(|&n| n == 0));
        assert!(a.strides[2..].iter().all(|&s| s == 0));
        let dbg = format!("{a:?}");
        assert!(dbg.contains("shape: [2, 3]"), "{dbg}");
        assert!(dbg.contains("byte_strides: [12, 4]"), "{dbg}");
        assert!(dbg.contains("ptr: 0x7f0000001000"), "{dbg}");
    }
}
