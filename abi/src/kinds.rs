//! The parameter-kind table: which kinds of kernel parameters exist, how each is named in the
//! manifest, what a host checks for an argument of each kind, and the bytes such an argument
//! occupies in the launch parameter buffer — computed from the parameter types themselves
//! ([`Slice`], [`View`], …), so host and device cannot disagree on a layout.
//!
//! # Adding a parameter kind
//!
//! 1. Define its `#[repr(C)]` type(s) in [`params`](crate::params) — an array kind with its
//!    data pointer as the first field — and implement [`KernelParam`] for them here (their
//!    [`ParamDesc`]).
//! 2. Add a [`ParamKind`] variant with a new code (never reuse one) and fill every `match` of
//!    this file — the compiler lists them: its name, whether it takes an array, the ranks it
//!    allows, the host's checks ([`ParamKind::array_layout`], [`ParamKind::fixes_rank`]),
//!    its [`layout`](ParamKind::layout), its launch-buffer image
//!    ([`write_array`](ParamKind::write_array)) and its Rust type text.
//!
//! The host's launcher, the manifest reader and the launcher generator use only this table.
//!
//! # Layouts
//!
//! Each array kind says which memory layouts its arguments may have ([`ArrayLayout`]): a
//! [`Slice`] sees a pointer and a length, so it takes C-contiguous arrays only; a [`View`]
//! sees a shape and element strides, so it takes any strides that step by whole elements —
//! negative (reversed axes), zero (broadcast axes) and non-contiguous ones. The host checks
//! every argument against its parameter's layout, and a family launcher picks, among the
//! kernels of a family that take the arguments, the one whose parameters demand the most
//! ([`ArrayLayout::rank`]): the contiguous variant when every argument allows it.

use crate::dtype::{DType, Element};
use crate::indexer::Indexer;
use crate::layout::{self, MAX_NDIM};
use crate::params::{Scratch, Slice, SliceMut, View, ViewMut};
use crate::tensormap::{
    TensorMap, TensorMapMut, TileDesc, TENSOR_MAP_ALIGN, TENSOR_MAP_PARAM_BYTES,
};
use core::mem::{align_of, size_of};

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
    /// A launcher-managed workspace, [`Scratch`]: not passed by the caller; the launcher
    /// allocates it per launch (zero-filled) with the length the kernel declares.
    Scratch = 4,
    /// An array the launcher passes as a TMA descriptor encoded from it, with its extents
    /// ([`TensorMap`], [`TensorMapMut`]; see [`tensormap`](crate::tensormap)), 64-byte aligned.
    TensorMap = 5,
}

/// The memory layouts an array parameter kind takes ([`ParamKind::array_layout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArrayLayout {
    /// C-contiguous arrays only (NumPy's rule: axes of extent 1 may have any stride, empty
    /// arrays count as contiguous): the kernel walks the elements as one run, in C order, and
    /// may move them in 16-byte vectors.
    Contiguous,
    /// Any byte strides that step by whole elements on every axis that moves: positive,
    /// negative (a reversed axis) and zero (a broadcast axis, which only an input may have:
    /// a written array must not reach one element twice).
    Strided,
    /// What the Tensor Memory Accelerator reads: unit stride on the innermost axis, every
    /// other stride a positive multiple of 16 bytes below 2⁴⁰, extents below 2³² (and, checked
    /// with the pointer, a 16-byte aligned address). Row-major matrices whose rows span a
    /// multiple of 16 bytes, and row slices of them.
    Tiled,
}

impl ArrayLayout {
    /// `true` when an array of `shape`, with byte strides `byte_strides` and items of
    /// `itemsize` bytes, has this layout.
    pub fn admits(self, shape: &[usize], byte_strides: &[isize], itemsize: usize) -> bool {
        match self {
            ArrayLayout::Contiguous => layout::is_c_contiguous(shape, byte_strides, itemsize),
            ArrayLayout::Strided => layout::element_aligned(shape, byte_strides, itemsize),
            ArrayLayout::Tiled => tiled(shape, byte_strides, itemsize),
        }
    }

    /// How much the layout demands: 1 for [`Contiguous`](ArrayLayout::Contiguous), 0 for
    /// [`Strided`](ArrayLayout::Strided). Among kernels of one family that take the same
    /// arguments, a launcher prefers the one whose parameters demand the most (in sum): the
    /// kernel that may assume more about its arrays is the faster one.
    pub const fn rank(self) -> u32 {
        match self {
            ArrayLayout::Contiguous | ArrayLayout::Tiled => 1,
            ArrayLayout::Strided => 0,
        }
    }

    /// `"C-contiguous"` or `"strided"`, for messages and documentation.
    pub const fn name(self) -> &'static str {
        match self {
            ArrayLayout::Contiguous => "C-contiguous",
            ArrayLayout::Strided => "strided",
            ArrayLayout::Tiled => "TMA-tiled (unit inner stride, 16-byte multiple strides)",
        }
    }
}

/// [`ArrayLayout::Tiled`]'s rule on shape and byte strides.
fn tiled(shape: &[usize], byte_strides: &[isize], itemsize: usize) -> bool {
    let Some((&inner, outer)) = byte_strides.split_last() else {
        return false;
    };
    let inner_ok = inner == itemsize as isize || shape.last() == Some(&1);
    inner_ok
        && shape.iter().all(|&n| (n as u64) < 1 << 32)
        && outer
            .iter()
            .zip(shape)
            .all(|(&s, &n)| n == 1 || (s > 0 && s % 16 == 0 && (s as u64) < 1 << 40))
}

/// Description of one kernel parameter type, as recorded in the manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamDesc {
    /// Scalar, slice, view or scratch.
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

impl ParamDesc {
    /// The description of the scalar parameter type `T` (used by the element-type table).
    pub const fn scalar<T: Element>() -> ParamDesc {
        ParamDesc {
            kind: ParamKind::Scalar,
            dtype: T::DTYPE,
            rank: 0,
            mutable: false,
            size: core::mem::size_of::<T>() as u16,
            align: core::mem::align_of::<T>() as u16,
        }
    }
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
///
/// A type whose kind takes an array ([`ParamKind::is_array`]) must begin with its data
/// pointer (a `#[repr(C)]` first field, or `#[repr(transparent)]` over such a type): the
/// kernel entry marks that pointer as global memory ([`space::global`](crate::space::global)),
/// so the host must pass device memory there (it checks every array argument with the driver).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a kernel parameter",
    label = "not a kernel parameter type",
    note = "kernel parameters are passed by value: use a scalar (i8..i64, u8..u64, f16, bf16, f32, f64), \
            Slice<T>, SliceMut<T>, View<T, N> or ViewMut<T, N> — never a reference or an owning type"
)]
pub unsafe trait KernelParam: Copy {
    /// The manifest description of this parameter type.
    const DESC: ParamDesc;

    /// What a tensor-map parameter declares (box, swizzle); [`TileDesc::NONE`] for the others.
    const TILE: TileDesc = TileDesc::NONE;
}

// SAFETY: a `#[repr(C)]` pointer-plus-POD layout; the description is computed from the type.
unsafe impl<T: Element> KernelParam for Slice<T> {
    const DESC: ParamDesc = array_desc::<Self, T>(ParamKind::Slice, 1, false);
}
// SAFETY: as for `Slice`.
unsafe impl<T: Element> KernelParam for SliceMut<T> {
    const DESC: ParamDesc = array_desc::<Self, T>(ParamKind::Slice, 1, true);
}
// SAFETY: as for `Slice` (a `#[repr(C)]` pointer and length, the layout of `SliceMut`).
unsafe impl<T: Element> KernelParam for Scratch<T> {
    const DESC: ParamDesc = array_desc::<Self, T>(ParamKind::Scratch, 1, true);
}
// SAFETY: as for `Slice`.
unsafe impl<T: Element, const N: usize> KernelParam for View<T, N> {
    const DESC: ParamDesc = array_desc::<Self, T>(ParamKind::View, N, false);
}
// SAFETY: as for `Slice`.
unsafe impl<T: Element, const N: usize> KernelParam for ViewMut<T, N> {
    const DESC: ParamDesc = array_desc::<Self, T>(ParamKind::View, N, true);
}

macro_rules! tensor_map_params {
    ($($ty:ident => $mutable:literal),*) => {$(
        // SAFETY: 128 opaque bytes (the `CUtensorMap` the host encodes) whose launch-buffer
        // alignment is 64, as the description says; no data pointer comes first, which the
        // kind records (`ParamKind::has_data_pointer`).
        unsafe impl<T: Element, const SW: u32, const B0: u32, const B1: u32, const B2: u32,
                    const B3: u32, const B4: u32> KernelParam for $ty<T, SW, B0, B1, B2, B3, B4>
        {
            const DESC: ParamDesc = ParamDesc {
                kind: ParamKind::TensorMap,
                dtype: T::DTYPE,
                rank: Self::TILE.rank,
                mutable: $mutable,
                size: TENSOR_MAP_PARAM_BYTES as u16,
                align: TENSOR_MAP_ALIGN as u16,
            };
            const TILE: TileDesc = $ty::<T, SW, B0, B1, B2, B3, B4>::TILE;
        }
    )*};
}
tensor_map_params!(TensorMap => false, TensorMapMut => true);

const fn array_desc<P, T: Element>(kind: ParamKind, rank: usize, mutable: bool) -> ParamDesc {
    assert!(
        rank <= MAX_NDIM,
        "views of more than 32 axes are not supported"
    );
    ParamDesc {
        kind,
        dtype: T::DTYPE,
        rank: rank as u8,
        mutable,
        size: core::mem::size_of::<P>() as u16,
        align: core::mem::align_of::<P>() as u16,
    }
}

/// The scalar parameter types: the primitive Rust types of the element-type table (`int` and
/// `float` rows; the device's 16-bit floats are below and in the device crate).
macro_rules! scalar_params {
    ($($variant:ident = $code:literal, $name:literal, $typestr:literal, $dl:literal,
       $class:ident $(($rust:ty))?;)*) => {
        $(scalar_params!(@one $class $(($rust))?);)*
    };
    (@one int ($rust:ty)) => { scalar_params!(@impl $rust); };
    (@one float ($rust:ty)) => { scalar_params!(@impl $rust); };
    (@one $class:ident $(($rust:ty))?) => {};
    (@impl $rust:ty) => {
        // SAFETY: a primitive passed by value; size and alignment are its own.
        unsafe impl KernelParam for $rust {
            const DESC: ParamDesc = ParamDesc::scalar::<$rust>();
        }
    };
}
crate::element_types!(scalar_params);

// SAFETY: the device's `f16` primitive, passed by value; size and alignment are its own.
#[cfg(target_arch = "nvptx64")]
unsafe impl KernelParam for f16 {
    const DESC: ParamDesc = ParamDesc::scalar::<f16>();
}

/// Runs `$body` with the const `$n` equal to `$rank` (0..=[`MAX_NDIM`]), else `$other`.
macro_rules! with_rank {
    ($rank:expr, $n:ident => $body:expr, else $other:expr) => {
        with_rank!(@arms $rank, $n, $body, $other;
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30
            31 32)
    };
    (@arms $rank:expr, $n:ident, $body:expr, $other:expr; $($r:literal)*) => {
        match $rank {
            $($r => {
                const $n: usize = $r;
                $body
            })*
            _ => $other,
        }
    };
}

// `with_rank!` lists the ranks 0..=32 by hand.
const _: () = assert!(MAX_NDIM == 32);

/// An array argument as a kernel parameter receives it: the address of element `[0, …, 0]`,
/// the element count, and the shape with **element** strides (host side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayArg<'a> {
    /// Address of element `[0, …, 0]`.
    pub ptr: u64,
    /// Number of elements.
    pub len: usize,
    /// Extent of each axis.
    pub shape: &'a [usize],
    /// Stride of each axis, in elements.
    pub strides: &'a [isize],
}

impl ParamKind {
    /// Every kind, in code order.
    pub const ALL: [ParamKind; 5] = [
        ParamKind::Scalar,
        ParamKind::Slice,
        ParamKind::View,
        ParamKind::Scratch,
        ParamKind::TensorMap,
    ];

    /// The kind with manifest code `code`.
    pub const fn from_code(code: u8) -> Option<ParamKind> {
        match code {
            1 => Some(ParamKind::Scalar),
            2 => Some(ParamKind::Slice),
            3 => Some(ParamKind::View),
            4 => Some(ParamKind::Scratch),
            5 => Some(ParamKind::TensorMap),
            _ => None,
        }
    }

    /// `"scalar"`, `"slice"`, `"view"`, `"scratch"` or `"tensormap"` (the manifest's
    /// spelling).
    pub const fn name(self) -> &'static str {
        match self {
            ParamKind::Scalar => "scalar",
            ParamKind::Slice => "slice",
            ParamKind::View => "view",
            ParamKind::Scratch => "scratch",
            ParamKind::TensorMap => "tensormap",
        }
    }

    /// The kind the manifest spells `name`.
    pub fn from_name(name: &str) -> Option<ParamKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// `true` when an argument of this kind is an array (else a scalar).
    pub const fn is_array(self) -> bool {
        match self {
            ParamKind::Scalar => false,
            ParamKind::Slice | ParamKind::View | ParamKind::Scratch | ParamKind::TensorMap => true,
        }
    }

    /// `true` when the parameter type begins with the array's data pointer (which `#[kernel]`
    /// marks as global memory): every array kind but [`TensorMap`](ParamKind::TensorMap),
    /// whose 128 bytes are the descriptor.
    pub const fn has_data_pointer(self) -> bool {
        matches!(
            self,
            ParamKind::Slice | ParamKind::View | ParamKind::Scratch
        )
    }

    /// `true` when the caller passes an argument for a parameter of this kind; `false` for
    /// [`Scratch`](ParamKind::Scratch), which the launcher provides.
    pub const fn is_argument(self) -> bool {
        !matches!(self, ParamKind::Scratch)
    }

    /// `true` for the ranks a parameter of this kind can have: 0 for scalars, 1 for slices,
    /// 0..=[`MAX_NDIM`] for views.
    pub const fn allows_rank(self, rank: usize) -> bool {
        match self {
            ParamKind::Scalar => rank == 0,
            ParamKind::Slice | ParamKind::Scratch => rank == 1,
            ParamKind::View => rank <= MAX_NDIM,
            ParamKind::TensorMap => rank >= 1 && rank <= crate::tensormap::TENSOR_MAP_MAX_RANK,
        }
    }

    /// The layouts an argument of this kind may have; `None` for scalars. Slices (and
    /// workspaces) see only a pointer and a length: C-contiguous arrays; views see shape and
    /// element strides: any strides of whole elements.
    pub const fn array_layout(self) -> Option<ArrayLayout> {
        match self {
            ParamKind::Scalar => None,
            ParamKind::Slice | ParamKind::Scratch => Some(ArrayLayout::Contiguous),
            ParamKind::View => Some(ArrayLayout::Strided),
            ParamKind::TensorMap => Some(ArrayLayout::Tiled),
        }
    }

    /// `true` when the argument must be C-contiguous ([`array_layout`](Self::array_layout)
    /// is [`ArrayLayout::Contiguous`]).
    pub const fn needs_c_contiguous(self) -> bool {
        matches!(self.array_layout(), Some(ArrayLayout::Contiguous))
    }

    /// `true` when the argument's rank must equal the parameter's (views; a slice takes an
    /// array of any rank as its elements in C order).
    pub const fn fixes_rank(self) -> bool {
        matches!(self, ParamKind::View | ParamKind::TensorMap)
    }

    /// Size and alignment in the launch buffer of a parameter of this kind, element type and
    /// rank: those of the parameter type itself. `None` when no such parameter type exists
    /// (a rank the kind does not allow).
    pub fn layout(self, dtype: DType, rank: usize) -> Option<(usize, usize)> {
        if !self.allows_rank(rank) {
            return None;
        }
        match self {
            ParamKind::Scalar => Some((dtype.itemsize(), dtype.itemsize())),
            // The element type only types the pointer: every `Slice<T>` is laid out alike.
            ParamKind::Slice => Some((size_of::<Slice<u8>>(), align_of::<Slice<u8>>())),
            ParamKind::Scratch => Some((size_of::<Scratch<u8>>(), align_of::<Scratch<u8>>())),
            ParamKind::View => with_rank!(rank, N => {
                Some((size_of::<View<u8, N>>(), align_of::<View<u8, N>>()))
            }, else None),
            ParamKind::TensorMap => Some((TENSOR_MAP_PARAM_BYTES, TENSOR_MAP_ALIGN)),
        }
    }

    /// Writes the launch-buffer image of `arr` as a parameter of this kind — a [`Slice`] or a
    /// [`View`] of rank `arr.shape.len()`, built with the types' own constructors — to the
    /// start of `out`, and returns its size.
    ///
    /// `None` when the kind takes no array, the rank is not one it allows, shape and strides
    /// differ in length, or `out` is too short.
    /// A [`TensorMap`](ParamKind::TensorMap)'s image is a descriptor only the driver can
    /// encode: `None` here (the host's launcher encodes it).
    pub fn write_array(self, arr: &ArrayArg<'_>, out: &mut [u8]) -> Option<usize> {
        match self {
            ParamKind::Scalar | ParamKind::TensorMap => None,
            ParamKind::Slice => {
                // SAFETY: the value is only copied, as bytes, into a launch buffer; the host's
                // launch checks (extent inside the allocation, element type) stand for the
                // validity the constructor asks of a pointer the kernel will use.
                let s = unsafe { Slice::from_raw_parts(arr.ptr as usize as *const u8, arr.len) };
                write_image(&s, out)
            }
            ParamKind::Scratch => {
                // SAFETY: as for slices; the launcher allocated `len` elements at `ptr`.
                let s = unsafe { Scratch::from_raw_parts(arr.ptr as usize as *mut u8, arr.len) };
                write_image(&s, out)
            }
            ParamKind::View => {
                if arr.shape.len() != arr.strides.len() {
                    return None;
                }
                with_rank!(arr.shape.len(), N => {
                    let ix = Indexer::<N>::new(arr.shape.try_into().ok()?, arr.strides.try_into().ok()?);
                    // SAFETY: as for slices: the view is only copied into a launch buffer.
                    let v = unsafe { View::from_raw_parts(arr.ptr as usize as *const u8, ix) };
                    write_image(&v, out)
                }, else None)
            }
        }
    }

    /// The Rust parameter type of this kind for elements of Rust type `elem`: `elem` itself,
    /// `Slice<elem>`, `ViewMut<elem, 3>`, ….
    #[cfg(feature = "std")]
    pub fn rust_type(self, elem: &str, rank: usize, mutable: bool) -> std::string::String {
        let m = if mutable { "Mut" } else { "" };
        match self {
            ParamKind::Scalar => elem.into(),
            ParamKind::Slice => std::format!("Slice{m}<{elem}>"),
            ParamKind::View => std::format!("View{m}<{elem}, {rank}>"),
            ParamKind::Scratch => std::format!("Scratch<{elem}>"),
            ParamKind::TensorMap => std::format!("TensorMap{m}<{elem}, …>"),
        }
    }
}

/// Copies `value`'s bytes to the start of `out`; returns their number.
fn write_image<P: Copy>(value: &P, out: &mut [u8]) -> Option<usize> {
    let n = size_of::<P>();
    let out = out.get_mut(..n)?;
    // SAFETY: `out` holds `n` writable bytes; `write_unaligned` needs no alignment, and `P` is
    // `Copy` (no destructor to skip).
    unsafe { out.as_mut_ptr().cast::<P>().write_unaligned(*value) };
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tiled_rule_is_tmas() {
        let t = |shape: &[usize], strides: &[isize]| ArrayLayout::Tiled.admits(shape, strides, 2);
        // C-order bf16 rows of 8 elements (16 bytes) and more: every row stride a multiple of 16.
        assert!(t(&[4, 8], &[16, 2]));
        assert!(t(&[3, 5, 64], &[5 * 128, 128, 2]));
        // A row stride not a multiple of 16 bytes (7 bf16 per row), an inner stride ≠ 1,
        // a transposed view, a negative or zero row stride: not TMA's.
        assert!(!t(&[4, 7], &[14, 2]));
        assert!(!t(&[4, 8], &[32, 4]));
        assert!(!t(&[8, 8], &[2, 16]));
        assert!(!t(&[4, 8], &[-16, 2]));
        assert!(!t(&[4, 8], &[0, 2]));
        // Axes of extent 1 carry no stride to check, the inner one included.
        assert!(t(&[1, 7], &[14, 2]));
        assert!(t(&[4, 1], &[16, 6]));
        assert!(t(&[4, 1, 8], &[16, 3, 2]));
        // Strides of 2^40 bytes and extents of 2^32 are beyond the descriptor.
        assert!(!t(&[2, 8], &[1 << 40, 2]));
        assert!(!t(&[1 << 32], &[2]));
        // A 0-D array has no axes for a tensor map.
        assert!(!t(&[], &[]));
    }

    #[test]
    fn layouts_are_the_types_own() {
        let slice = <Slice<f64> as KernelParam>::DESC;
        assert_eq!(
            ParamKind::Slice.layout(DType::F64, 1),
            Some((slice.size.into(), slice.align.into()))
        );
        let view = <ViewMut<i8, 3> as KernelParam>::DESC;
        assert_eq!(
            ParamKind::View.layout(DType::I8, 3),
            Some((view.size.into(), view.align.into()))
        );
        assert_eq!(ParamKind::View.layout(DType::I8, 0), Some((8, 8)));
        assert_eq!(ParamKind::View.layout(DType::I8, 33), None);
        assert_eq!(ParamKind::Slice.layout(DType::I8, 2), None);
        assert_eq!(ParamKind::Scalar.layout(DType::F32, 0), Some((4, 4)));
        assert_eq!(ParamKind::Scalar.layout(DType::F32, 1), None);
    }

    #[test]
    fn images_match_the_types() {
        let mut buf = [0xAAu8; 64];
        let arr = ArrayArg {
            ptr: 0x1000,
            len: 6,
            shape: &[2, 3],
            strides: &[-3, 1],
        };
        assert_eq!(ParamKind::Slice.write_array(&arr, &mut buf), Some(16));
        assert_eq!(buf[..8], 0x1000u64.to_ne_bytes());
        assert_eq!(buf[8..16], 6u64.to_ne_bytes());
        assert_eq!(ParamKind::View.write_array(&arr, &mut buf), Some(40));
        let words: [i64; 5] =
            core::array::from_fn(|i| i64::from_ne_bytes(buf[8 * i..8 * i + 8].try_into().unwrap()));
        assert_eq!(words, [0x1000, 2, 3, -3, 1]);
        assert_eq!(ParamKind::View.write_array(&arr, &mut buf[..39]), None);
        assert_eq!(ParamKind::Scalar.write_array(&arr, &mut buf), None);
        let odd = ArrayArg {
            strides: &[1],
            ..arr
        };
        assert_eq!(ParamKind::View.write_array(&odd, &mut buf), None);
        assert_eq!(
            core::mem::size_of::<SliceMut<u64>>(),
            core::mem::size_of::<Slice<u8>>()
        );
    }

    #[test]
    fn names_and_codes() {
        for k in ParamKind::ALL {
            assert_eq!(ParamKind::from_code(k as u8), Some(k));
            assert_eq!(ParamKind::from_name(k.name()), Some(k));
        }
        assert_eq!(ParamKind::from_code(0), None);
        assert!(ParamKind::Slice.needs_c_contiguous() && !ParamKind::View.needs_c_contiguous());
        assert_eq!(ParamKind::Scalar.array_layout(), None);
        assert_eq!(
            ParamKind::Scratch.array_layout(),
            Some(ArrayLayout::Contiguous)
        );
        let strided = ArrayLayout::Strided;
        assert!(ArrayLayout::Contiguous.rank() > strided.rank());
        // A reversed, a broadcast and a stepped f32 axis: views only.
        for (shape, strides) in [([4], [-4]), ([4], [0]), ([4], [8])] {
            assert!(strided.admits(&shape, &strides, 4));
            assert!(!ArrayLayout::Contiguous.admits(&shape, &strides, 4));
        }
        assert!(
            ArrayLayout::Contiguous.admits(&[2, 3], &[12, 4], 4)
                && strided.admits(&[2, 3], &[12, 4], 4)
        );
        // Strides that split elements: neither.
        assert!(!strided.admits(&[3], &[6], 4) && !ArrayLayout::Contiguous.admits(&[3], &[6], 4));
        assert!(ParamKind::View.fixes_rank() && !ParamKind::Slice.fixes_rank());
        assert!(!ParamKind::Scalar.is_array() && ParamKind::View.is_array());
        assert!(ParamKind::Slice.is_argument() && !ParamKind::Scratch.is_argument());
        let scratch = <Scratch<u32> as KernelParam>::DESC;
        assert_eq!(
            (scratch.kind, scratch.rank, scratch.mutable),
            (ParamKind::Scratch, 1, true)
        );
        assert_eq!(
            ParamKind::Scratch.layout(DType::U32, 1),
            Some((scratch.size.into(), scratch.align.into()))
        );
        let mut buf = [0u8; 16];
        let arr = ArrayArg {
            ptr: 0x2000,
            len: 9,
            shape: &[9],
            strides: &[1],
        };
        assert_eq!(ParamKind::Scratch.write_array(&arr, &mut buf), Some(16));
        assert_eq!(buf[8..16], 9u64.to_ne_bytes());
    }
}
