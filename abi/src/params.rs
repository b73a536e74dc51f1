//! Kernel parameter types: what a kernel may take, and how it is described to the host.
//!
//! Every kernel parameter is a `#[repr(C)]` value passed by value through the launch's
//! parameter buffer. Four array parameter types exist, read-only and mutable flavours of a
//! contiguous slice and of a strided N-D view:
//!
//! | type | layout | may write |
//! | --- | --- | --- |
//! | [`Slice<T>`] | `ptr, len` (16 bytes) | no |
//! | [`SliceMut<T>`] | `ptr, len` (16 bytes) | yes |
//! | [`View<T, N>`] | `ptr, shape[N], strides[N]` (8 + 16·N bytes) | no |
//! | [`ViewMut<T, N>`] | `ptr, shape[N], strides[N]` (8 + 16·N bytes) | yes |
//!
//! plus the scalar [`Element`] types themselves. A read-only type has no method that writes:
//! the host may hand it memory of an array its producer exported as read-only.
//!
//! # Safety model
//!
//! The host guarantees, before a launch, that each array parameter describes memory that is
//! valid for the whole view (it checks the extent against the allocation). Reads through the
//! safe accessors are therefore sound as long as no *other* thread of the same launch writes
//! the same element concurrently. Writes are `unsafe`: the caller promises that no other
//! thread of the launch reads or writes that element at the same time (the usual "one thread
//! per output element" pattern satisfies this).
//!
//! Every type here implements [`KernelParam`], which is how `#[kernel]` rejects, at compile
//! time, parameters that cannot cross the launch boundary (references, `String`, …) and how
//! the parameter is described in the kernel manifest.

use crate::indexer::Indexer;
use core::marker::PhantomData;

/// Element types, with their CUDA Array Interface `typestr` kind and size.
///
/// The numeric values are part of the manifest encoding: never renumber.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `bool` (`|b1`).
    Bool = 1,
    /// `i8` (`|i1`).
    I8 = 2,
    /// `i16` (`<i2`).
    I16 = 3,
    /// `i32` (`<i4`).
    I32 = 4,
    /// `i64` (`<i8`).
    I64 = 5,
    /// `u8` (`|u1`).
    U8 = 6,
    /// `u16` (`<u2`).
    U16 = 7,
    /// `u32` (`<u4`).
    U32 = 8,
    /// `u64` (`<u8`).
    U64 = 9,
    /// IEEE half precision (`<f2`).
    F16 = 10,
    /// `f32` (`<f4`).
    F32 = 11,
    /// `f64` (`<f8`).
    F64 = 12,
    /// Complex of two `f32` (`<c8`).
    C64 = 13,
    /// Complex of two `f64` (`<c16`).
    C128 = 14,
}

impl DType {
    /// All element types, in code order.
    pub const ALL: [DType; 14] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
    ];

    /// Size of one element in bytes.
    pub const fn itemsize(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// The array-interface kind character: `b`, `i`, `u`, `f` or `c`.
    pub const fn kind_char(self) -> u8 {
        match self {
            DType::Bool => b'b',
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => b'i',
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => b'u',
            DType::F16 | DType::F32 | DType::F64 => b'f',
            DType::C64 | DType::C128 => b'c',
        }
    }

    /// The type for an array-interface kind character and item size, if ferrocuda knows it.
    pub const fn from_kind(kind: u8, itemsize: usize) -> Option<DType> {
        Some(match (kind, itemsize) {
            (b'b', 1) => DType::Bool,
            (b'i', 1) => DType::I8,
            (b'i', 2) => DType::I16,
            (b'i', 4) => DType::I32,
            (b'i', 8) => DType::I64,
            (b'u', 1) => DType::U8,
            (b'u', 2) => DType::U16,
            (b'u', 4) => DType::U32,
            (b'u', 8) => DType::U64,
            (b'f', 2) => DType::F16,
            (b'f', 4) => DType::F32,
            (b'f', 8) => DType::F64,
            (b'c', 8) => DType::C64,
            (b'c', 16) => DType::C128,
            _ => return None,
        })
    }

    /// The type with manifest code `code`.
    pub const fn from_code(code: u8) -> Option<DType> {
        if code >= 1 && code <= 14 {
            Some(Self::ALL[(code - 1) as usize])
        } else {
            None
        }
    }

    /// Short lowercase name, as NumPy spells it (`"float32"`, `"int64"`, `"bool"`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
        }
    }

    /// The little-endian array-interface `typestr`, e.g. `"<f4"` (`"|b1"` for one-byte types).
    pub const fn typestr(self) -> &'static str {
        match self {
            DType::Bool => "|b1",
            DType::I8 => "|i1",
            DType::I16 => "<i2",
            DType::I32 => "<i4",
            DType::I64 => "<i8",
            DType::U8 => "|u1",
            DType::U16 => "<u2",
            DType::U32 => "<u4",
            DType::U64 => "<u8",
            DType::F16 => "<f2",
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::C64 => "<c8",
            DType::C128 => "<c16",
        }
    }
}

/// A scalar type a kernel can read and write in device memory.
///
/// # Safety
///
/// `DTYPE` must describe `Self` exactly (size and bit layout), and every bit pattern the
/// array-interface type admits must be a valid `Self`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an array element type",
    note = "elements are i8, i16, i32, i64, u8, u16, u32, u64, f32 or f64 (usize/isize have no \
            fixed size across host and device)"
)]
pub unsafe trait Element: Copy + 'static {
    /// The array-interface type of `Self`.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        // SAFETY: the primitive has exactly the size and representation of the dtype.
        unsafe impl Element for $t { const DTYPE: DType = DType::$d; }
    )*};
}
element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32,
         u64 => U64, f32 => F32, f64 => F64);
// The device's half precision is the `f16` primitive (nightly, kernel build only); on the host
// `ferrocuda_device::half::f16` stands in for it in kernel signatures.
#[cfg(target_arch = "nvptx64")]
element!(f16 => F16);

/// What kind of kernel parameter a type is.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A scalar passed by value.
    Scalar = 1,
    /// A contiguous 1-D array: [`Slice`] or [`SliceMut`].
    Slice = 2,
    /// A strided N-D array: [`View`] or [`ViewMut`].
    View = 3,
}

impl ParamKind {
    /// The kind with manifest code `code`.
    pub const fn from_code(code: u8) -> Option<ParamKind> {
        match code {
            1 => Some(ParamKind::Scalar),
            2 => Some(ParamKind::Slice),
            3 => Some(ParamKind::View),
            _ => None,
        }
    }

    /// `"scalar"`, `"slice"` or `"view"`.
    pub const fn name(self) -> &'static str {
        match self {
            ParamKind::Scalar => "scalar",
            ParamKind::Slice => "slice",
            ParamKind::View => "view",
        }
    }
}

/// Description of one kernel parameter type, as recorded in the manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamDesc {
    /// Scalar, slice or view.
    pub kind: ParamKind,
    /// Element type (the scalar's own type for scalars).
    pub dtype: DType,
    /// Number of axes: 0 for scalars, 1 for slices, `N` for views.
    pub rank: u8,
    /// Whether the kernel may write through it.
    pub mutable: bool,
    /// `size_of` the parameter in the launch buffer.
    pub size: u16,
    /// `align_of` the parameter in the launch buffer.
    pub align: u16,
}

/// A type that can be a kernel parameter.
///
/// `#[kernel]` requires every parameter type to implement this trait; implementing it for
/// anything else than the types of this crate is not supported.
///
/// # Safety
///
/// `DESC` must describe `Self` exactly: size, alignment, element type, rank and whether the
/// type can write. The host packs launch arguments according to `DESC`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a kernel parameter",
    label = "not a kernel parameter type",
    note = "kernel parameters are passed by value: use a scalar (i8..i64, u8..u64, f32, f64), \
            Slice<T>, SliceMut<T>, View<T, N> or ViewMut<T, N> — never a reference or an owning type"
)]
pub unsafe trait KernelParam: Copy {
    /// The manifest description of this parameter type.
    const DESC: ParamDesc;
}

macro_rules! scalar_param {
    ($($t:ty),*) => {$(
        // SAFETY: a primitive passed by value; size/align are its own.
        unsafe impl KernelParam for $t {
            const DESC: ParamDesc = ParamDesc {
                kind: ParamKind::Scalar,
                dtype: <$t as Element>::DTYPE,
                rank: 0,
                mutable: false,
                size: core::mem::size_of::<$t>() as u16,
                align: core::mem::align_of::<$t>() as u16,
            };
        }
    )*};
}
scalar_param!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

/// A read-only contiguous array of `len` elements of `T`.
#[repr(C)]
pub struct Slice<T> {
    ptr: *const T,
    len: usize,
}

/// A mutable contiguous array of `len` elements of `T`.
#[repr(C)]
pub struct SliceMut<T> {
    ptr: *mut T,
    len: usize,
}

/// A read-only strided `N`-dimensional view of `T`.
#[repr(C)]
pub struct View<T, const N: usize> {
    ptr: *const T,
    indexer: Indexer<N>,
}

/// A mutable strided `N`-dimensional view of `T`.
#[repr(C)]
pub struct ViewMut<T, const N: usize> {
    ptr: *mut T,
    indexer: Indexer<N>,
    _marker: PhantomData<*mut T>,
}

// Manual Clone/Copy: derive would demand `T: Clone`, which raw pointers don't need.
macro_rules! copy_impls {
    ($($ty:ident $(< const $n:ident >)?),*) => {$(
        impl<T $(, const $n: usize)?> Clone for $ty<T $(, $n)?> {
            #[inline(always)]
            fn clone(&self) -> Self { *self }
        }
        impl<T $(, const $n: usize)?> Copy for $ty<T $(, $n)?> {}
    )*};
}
copy_impls!(Slice, SliceMut, View<const N>, ViewMut<const N>);

// SAFETY (all four): `#[repr(C)]` pointer-plus-POD layouts; the descriptions below are
// computed from the types themselves.
unsafe impl<T: Element> KernelParam for Slice<T> {
    const DESC: ParamDesc = array_desc::<Self, T>(ParamKind::Slice, 1, false);
}
unsafe impl<T: Element> KernelParam for SliceMut<T> {
    const DESC: ParamDesc = array_desc::<Self, T>(ParamKind::Slice, 1, true);
}
unsafe impl<T: Element, const N: usize> KernelParam for View<T, N> {
    const DESC: ParamDesc = array_desc::<Self, T>(ParamKind::View, N, false);
}
unsafe impl<T: Element, const N: usize> KernelParam for ViewMut<T, N> {
    const DESC: ParamDesc = array_desc::<Self, T>(ParamKind::View, N, true);
}

const fn array_desc<P, T: Element>(kind: ParamKind, rank: usize, mutable: bool) -> ParamDesc {
    assert!(rank <= 32, "views of more than 32 axes are not supported");
    ParamDesc {
        kind,
        dtype: T::DTYPE,
        rank: rank as u8,
        mutable,
        size: core::mem::size_of::<P>() as u16,
        align: core::mem::align_of::<P>() as u16,
    }
}

impl<T> Slice<T> {
    /// A slice of `len` elements at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads of `len` elements of `T` for as long as the slice is
    /// used, and properly aligned (any pointer if `len == 0`).
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *const T, len: usize) -> Self {
        Slice { ptr, len }
    }

    /// Number of elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// `true` if the slice holds no element.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The base pointer.
    #[inline(always)]
    pub const fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// Element `i`, or `None` if `i >= len`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<T> {
        if i < self.len {
            // SAFETY: in bounds; validity is the constructor's contract.
            Some(unsafe { self.ptr.add(i).read() })
        } else {
            None
        }
    }

    /// Element `i` without a bounds check.
    ///
    /// # Safety
    ///
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        debug_assert!(i < self.len);
        // SAFETY: the caller keeps `i` in bounds.
        unsafe { self.ptr.add(i).read() }
    }
}

impl<T> SliceMut<T> {
    /// A mutable slice of `len` elements at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads and writes of `len` elements of `T` for as long as the
    /// slice is used, and properly aligned (any pointer if `len == 0`).
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        SliceMut { ptr, len }
    }

    /// Number of elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// `true` if the slice holds no element.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The base pointer.
    #[inline(always)]
    pub const fn as_mut_ptr(&self) -> *mut T {
        self.ptr
    }

    /// A read-only view of the same elements.
    #[inline(always)]
    pub const fn as_slice(&self) -> Slice<T> {
        Slice {
            ptr: self.ptr,
            len: self.len,
        }
    }

    /// Element `i`, or `None` if `i >= len`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<T> {
        self.as_slice().get(i)
    }

    /// Element `i` without a bounds check.
    ///
    /// # Safety
    ///
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        // SAFETY: forwarded contract.
        unsafe { self.as_slice().get_unchecked(i) }
    }

    /// Writes `value` to element `i`; out-of-bounds indices abort the kernel (`trap`, with
    /// the caller's location in the trap record: [`diag`](crate::diag)).
    ///
    /// # Safety
    ///
    /// No other thread of the launch may access element `i` concurrently.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&self, i: usize, value: T) {
        if i >= self.len {
            crate::abort();
        }
        // SAFETY: in bounds; exclusivity is the caller's contract.
        unsafe { self.ptr.add(i).write(value) }
    }

    /// Writes `value` to element `i` without a bounds check.
    ///
    /// # Safety
    ///
    /// `i < self.len()`, and no other thread of the launch accesses element `i` concurrently.
    #[inline(always)]
    pub unsafe fn write_unchecked(&self, i: usize, value: T) {
        debug_assert!(i < self.len);
        // SAFETY: the caller's contract.
        unsafe { self.ptr.add(i).write(value) }
    }
}

impl<T, const N: usize> View<T, N> {
    /// A view of the elements at `ptr + indexer.offset(idx)`.
    ///
    /// # Safety
    ///
    /// For every in-bounds multi-index `idx`, `ptr.offset(indexer.offset(idx))` must be valid
    /// for reads of a `T` for as long as the view is used.
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *const T, indexer: Indexer<N>) -> Self {
        View { ptr, indexer }
    }

    /// The view's indexer (shape and element strides).
    #[inline(always)]
    pub const fn indexer(&self) -> &Indexer<N> {
        &self.indexer
    }

    /// The extents.
    #[inline(always)]
    pub const fn shape(&self) -> [usize; N] {
        self.indexer.shape
    }

    /// Number of elements.
    #[inline(always)]
    pub fn size(&self) -> usize {
        self.indexer.size()
    }

    /// The pointer to element `[0; N]`.
    #[inline(always)]
    pub const fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// Element at `idx`, or `None` if out of bounds.
    #[inline(always)]
    pub fn get(&self, idx: [usize; N]) -> Option<T> {
        let off = self.indexer.get_offset(idx)?;
        // SAFETY: in bounds; validity is the constructor's contract.
        Some(unsafe { self.ptr.offset(off).read() })
    }

    /// Element at element offset `off` from the base pointer.
    ///
    /// # Safety
    ///
    /// `off` must be the offset of an in-bounds multi-index (e.g. from
    /// [`Indexer::offset_of`] with `linear < size()`).
    #[inline(always)]
    pub unsafe fn read_at(&self, off: isize) -> T {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.offset(off).read() }
    }
}

impl<T, const N: usize> ViewMut<T, N> {
    /// A mutable view of the elements at `ptr + indexer.offset(idx)`.
    ///
    /// # Safety
    ///
    /// For every in-bounds multi-index `idx`, `ptr.offset(indexer.offset(idx))` must be valid
    /// for reads and writes of a `T` for as long as the view is used. Distinct in-bounds
    /// multi-indices may alias only if the view is never written (zero strides).
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, indexer: Indexer<N>) -> Self {
        ViewMut {
            ptr,
            indexer,
            _marker: PhantomData,
        }
    }

    /// The view's indexer (shape and element strides).
    #[inline(always)]
    pub const fn indexer(&self) -> &Indexer<N> {
        &self.indexer
    }

    /// The extents.
    #[inline(always)]
    pub const fn shape(&self) -> [usize; N] {
        self.indexer.shape
    }

    /// Number of elements.
    #[inline(always)]
    pub fn size(&self) -> usize {
        self.indexer.size()
    }

    /// The pointer to element `[0; N]`.
    #[inline(always)]
    pub const fn as_mut_ptr(&self) -> *mut T {
        self.ptr
    }

    /// A read-only view of the same elements.
    #[inline(always)]
    pub const fn as_view(&self) -> View<T, N> {
        View {
            ptr: self.ptr,
            indexer: self.indexer,
        }
    }

    /// Element at `idx`, or `None` if out of bounds.
    #[inline(always)]
    pub fn get(&self, idx: [usize; N]) -> Option<T> {
        self.as_view().get(idx)
    }

    /// Element at element offset `off` from the base pointer.
    ///
    /// # Safety
    ///
    /// As [`View::read_at`].
    #[inline(always)]
    pub unsafe fn read_at(&self, off: isize) -> T {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.offset(off).read() }
    }

    /// Writes `value` at `idx`; an out-of-bounds index aborts the kernel (`trap`, with the
    /// caller's location in the trap record: [`diag`](crate::diag)).
    ///
    /// # Safety
    ///
    /// No other thread of the launch may access that element concurrently.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&self, idx: [usize; N], value: T) {
        match self.indexer.get_offset(idx) {
            // SAFETY: in bounds; exclusivity is the caller's contract.
            Some(off) => unsafe { self.ptr.offset(off).write(value) },
            None => crate::abort(),
        }
    }

    /// Writes `value` at element offset `off` from the base pointer.
    ///
    /// # Safety
    ///
    /// As [`View::read_at`], and no other thread of the launch accesses that element
    /// concurrently.
    #[inline(always)]
    pub unsafe fn write_at(&self, off: isize, value: T) {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.offset(off).write(value) }
    }
}
