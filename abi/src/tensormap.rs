//! Tensor-map parameters: an array argument that reaches the kernel as a TMA descriptor
//! (`CUtensorMap`, 128 bytes) encoded **on the host** from the array the launcher validated,
//! for the Tensor Memory Accelerator's bulk tile copies (`cp.async.bulk.tensor`, sm_90).
//!
//! ```ignore
//! #[kernel(arch = "sm_90a")]
//! pub unsafe fn gemm(
//!     a: TensorMap<bf16, 128, 128, 64>,
//!     b: TensorMap<bf16, 128, 256, 64>,
//!     out: ViewMut<f32, 2>,
//! ) {}
//! ```
//!
//! The type states what the descriptor needs beyond the array: the **swizzle** of the tiles
//! it writes to shared memory (`SW`: 0, 32, 64 or 128 bytes) and the **box** — the tile one copy
//! moves — in the array's axis order, outermost first (`B0, B1, …`, up to five; the rank is
//! the number of non-zero extents). `TensorMap<bf16, 128, 128, 64>` is a rank-2 map whose
//! copies move 128 rows × 64 columns, stored with the 128-byte swizzle. [`TensorMapMut`] also
//! allows TMA stores (the launcher refuses a read-only array for it).
//!
//! What the launcher checks (with an error naming the parameter): the array's rank is the
//! box's; its innermost axis has unit stride; every other stride is a positive multiple of
//! 16 bytes (and below 2⁴⁰); its address is 16-byte aligned; the box's innermost extent spans
//! a multiple of 16 bytes and at most the swizzle's width. Arrays that fail (a transposed view,
//! an odd row length) go to another kernel of the family when one takes them (the
//! [`ArrayLayout::Tiled`](crate::kinds::ArrayLayout::Tiled) layout of the selection rule).
//!
//! # How the descriptor reaches the instructions
//!
//! TMA reads its descriptor from the kernel's parameter space (CUDA's `__grid_constant__`),
//! 64-byte aligned. The parameter is the 128-byte descriptor followed by the array's extents
//! ([`TensorMap::dim`]: the kernel sees the array's shape), at a 64-byte aligned offset of the
//! launch buffer; the builder declares it `.align 64` in the PTX; and `#[kernel]` hands the body a
//! value whose first word is the parameter's generic address (`mov` of the parameter symbol,
//! `cvta.param`) — the body never copies the 128 bytes. [`TensorMap::addr`] is that address.

use crate::dtype::Element;
use core::marker::PhantomData;

/// Bytes of a `CUtensorMap`.
pub const TENSOR_MAP_BYTES: usize = 128;

/// Bytes of a tensor-map parameter: the `CUtensorMap`, then the array's extents (outermost
/// first, [`TENSOR_MAP_MAX_RANK`] `u64`s, unused ones 0), padded to 16.
pub const TENSOR_MAP_PARAM_BYTES: usize = TENSOR_MAP_BYTES + 8 * TENSOR_MAP_MAX_RANK + 8;

/// Alignment of a tensor map in the launch buffer (and so in the kernel's parameter space).
pub const TENSOR_MAP_ALIGN: usize = 64;

/// Most axes of a tensor map.
pub const TENSOR_MAP_MAX_RANK: usize = 5;

/// What a tensor-map parameter declares: box extents (outermost first; `rank` of them) and the
/// swizzle width in bytes (0, 32, 64, 128).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileDesc {
    /// Number of axes (0: not a tensor map).
    pub rank: u8,
    /// Box extents, outermost first; `rank` of them, the rest 0.
    pub box_dims: [u16; TENSOR_MAP_MAX_RANK],
    /// Swizzle width in bytes: 0 (none), 32, 64 or 128.
    pub swizzle: u8,
}

impl TileDesc {
    /// Not a tensor map.
    pub const NONE: TileDesc = TileDesc {
        rank: 0,
        box_dims: [0; TENSOR_MAP_MAX_RANK],
        swizzle: 0,
    };

    /// The declaration of `TensorMap<T, SW, B0, …, B4>`: the rank is the number of leading
    /// non-zero extents. Const evaluation fails on a zero first extent, a non-zero extent
    /// after a zero one, an extent above 256, a swizzle other than 0/32/64/128, or an
    /// innermost box that is not a multiple of 16 bytes or wider than the swizzle.
    pub const fn new(itemsize: usize, swizzle: u32, dims: [u32; TENSOR_MAP_MAX_RANK]) -> TileDesc {
        assert!(
            swizzle == 0 || swizzle == 32 || swizzle == 64 || swizzle == 128,
            "TensorMap: the swizzle is 0, 32, 64 or 128 (bytes)"
        );
        let mut rank = 0;
        while rank < TENSOR_MAP_MAX_RANK && dims[rank] != 0 {
            assert!(dims[rank] <= 256, "TensorMap: box extents are at most 256");
            rank += 1;
        }
        assert!(rank >= 1, "TensorMap: the box needs at least one extent");
        let mut i = rank;
        while i < TENSOR_MAP_MAX_RANK {
            assert!(dims[i] == 0, "TensorMap: a box extent after a zero one");
            i += 1;
        }
        let inner = dims[rank - 1] as usize * itemsize;
        assert!(
            inner.is_multiple_of(16),
            "TensorMap: the innermost box extent must span a multiple of 16 bytes"
        );
        assert!(
            swizzle == 0 || inner <= swizzle as usize,
            "TensorMap: the innermost box extent spans more bytes than the swizzle"
        );
        let mut box_dims = [0u16; TENSOR_MAP_MAX_RANK];
        i = 0;
        while i < rank {
            box_dims[i] = dims[i] as u16;
            i += 1;
        }
        TileDesc {
            rank: rank as u8,
            box_dims,
            swizzle: swizzle as u8,
        }
    }

    /// Whether this describes a tensor map.
    pub const fn is_some(&self) -> bool {
        self.rank != 0
    }

    /// Elements of one box.
    pub const fn box_elements(&self) -> usize {
        let mut n = 1;
        let mut i = 0;
        while i < self.rank as usize {
            n *= self.box_dims[i] as usize;
            i += 1;
        }
        n
    }
}

/// The parameter-space image of a tensor map: the 128 opaque bytes of the descriptor, then
/// the array's extents (16-byte aligned as a Rust type; the builder and the launcher give it
/// 64 in the parameter space). The first word, as the kernel body sees it, is the parameter's
/// generic address (see the module docs); the rest of the descriptor is never read by device
/// code.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct Opaque {
    /// Word 0: the address the entry wrote; the rest: the descriptor.
    pub words: [u64; TENSOR_MAP_BYTES / 8],
    /// The array's extents, outermost first (the launcher writes them; unused axes 0).
    pub dims: [u64; TENSOR_MAP_MAX_RANK],
    _pad: u64,
}

const _: () = assert!(core::mem::size_of::<Opaque>() == TENSOR_MAP_PARAM_BYTES);

/// A read-only tensor-map parameter over elements `T` (see the [module docs](self)).
#[repr(transparent)]
pub struct TensorMap<
    T,
    const SW: u32,
    const B0: u32,
    const B1: u32 = 0,
    const B2: u32 = 0,
    const B3: u32 = 0,
    const B4: u32 = 0,
> {
    map: Opaque,
    _t: PhantomData<T>,
}

/// A tensor-map parameter over a writable array: TMA loads and stores.
#[repr(transparent)]
pub struct TensorMapMut<
    T,
    const SW: u32,
    const B0: u32,
    const B1: u32 = 0,
    const B2: u32 = 0,
    const B3: u32 = 0,
    const B4: u32 = 0,
> {
    map: Opaque,
    _t: PhantomData<T>,
}

macro_rules! tensor_map_common {
    ($($ty:ident),*) => {$(
        impl<T, const SW: u32, const B0: u32, const B1: u32, const B2: u32, const B3: u32,
             const B4: u32> Clone for $ty<T, SW, B0, B1, B2, B3, B4>
        {
            #[inline(always)]
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T, const SW: u32, const B0: u32, const B1: u32, const B2: u32, const B3: u32,
             const B4: u32> Copy for $ty<T, SW, B0, B1, B2, B3, B4> {}

        impl<T: Element, const SW: u32, const B0: u32, const B1: u32, const B2: u32,
             const B3: u32, const B4: u32> $ty<T, SW, B0, B1, B2, B3, B4>
        {
            /// The declaration (rank, box, swizzle), checked at compile time.
            pub const TILE: TileDesc =
                TileDesc::new(core::mem::size_of::<T>(), SW, [B0, B1, B2, B3, B4]);

            /// Number of axes.
            pub const RANK: usize = Self::TILE.rank as usize;

            /// Elements one box copy moves.
            pub const BOX_ELEMENTS: usize = Self::TILE.box_elements();

            /// Bytes one box copy moves (what an mbarrier expects per copy).
            pub const BOX_BYTES: usize = Self::BOX_ELEMENTS * core::mem::size_of::<T>();

            /// The generic address of the descriptor in the kernel's parameter space — what
            /// `cp.async.bulk.tensor` and `prefetch.tensormap` take. Valid in the kernel body
            /// that received this value from `#[kernel]`'s entry.
            #[inline(always)]
            pub fn addr(&self) -> u64 {
                self.map.words[0]
            }

            /// The array's extent along axis `i` (outermost first; 0 past the rank).
            #[inline(always)]
            pub fn dim(&self, i: usize) -> usize {
                self.map.dims[i] as usize
            }

            /// The value an entry passes on: its first word replaced by `addr`.
            #[doc(hidden)]
            #[inline(always)]
            pub fn with_addr(mut self, addr: u64) -> Self {
                self.map.words[0] = addr;
                self
            }
        }
    )*};
}
tensor_map_common!(TensorMap, TensorMapMut);
