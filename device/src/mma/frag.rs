//! The fragment types and their element-to-lane mapping (host and device).
//!
//! Every formula here is the PTX ISA's ("Matrix fragments for mma.m16n8k16 with floating
//! point type", "… mma.m16n8k8", "… mma.m16n8k32", "… mma.m8n8k4 with .f64"), written with
//! `g = lane / 4` (PTX's `groupID`) and `t = lane % 4` (`threadID_in_group`).

use crate::half::{bf16, f16};

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::half::bf16 {}
    impl Sealed for crate::half::f16 {}
    impl Sealed for i8 {}
    impl Sealed for u8 {}
}

/// The 16-bit input types of `mma.m16n8k16`: [`bf16`] and [`f16`](crate::half::f16).
pub trait Half16: Copy + sealed::Sealed {
    /// `true` for `bf16`, `false` for `f16` (selects the instruction).
    #[doc(hidden)]
    const BF16: bool;
    #[doc(hidden)]
    fn __to_bits(self) -> u16;
    #[doc(hidden)]
    fn __from_bits(bits: u16) -> Self;
}

impl Half16 for bf16 {
    const BF16: bool = true;
    #[inline(always)]
    fn __to_bits(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn __from_bits(bits: u16) -> Self {
        bf16::from_bits(bits)
    }
}

impl Half16 for f16 {
    const BF16: bool = false;
    #[inline(always)]
    fn __to_bits(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn __from_bits(bits: u16) -> Self {
        f16::from_bits(bits)
    }
}

/// The 8-bit input types of `mma.m16n8k32`: `i8` (`.s8`) and `u8` (`.u8`); A and B may differ.
pub trait Int8: Copy + sealed::Sealed {
    /// `true` for `i8` (selects the instruction).
    #[doc(hidden)]
    const SIGNED: bool;
    #[doc(hidden)]
    fn __to_bits(self) -> u8;
    #[doc(hidden)]
    fn __from_bits(bits: u8) -> Self;
}

impl Int8 for i8 {
    const SIGNED: bool = true;
    #[inline(always)]
    fn __to_bits(self) -> u8 {
        self as u8
    }
    #[inline(always)]
    fn __from_bits(bits: u8) -> Self {
        bits as i8
    }
}

impl Int8 for u8 {
    const SIGNED: bool = false;
    #[inline(always)]
    fn __to_bits(self) -> u8 {
        self
    }
    #[inline(always)]
    fn __from_bits(bits: u8) -> Self {
        bits
    }
}

/// A warp's fragment of a matrix: the part of an `ROWS`×`COLS` matrix operand or accumulator
/// that one lane holds in registers, `LEN` elements per lane, `32 * LEN == ROWS * COLS`.
///
/// The mapping is explicit: lane `lane` holds, as its element `i` (`0..LEN`), the matrix
/// element at [`coords(lane, i)`](Fragment::coords); every element of the matrix is held by
/// exactly one `(lane, i)`. Element `i` lives in the register `regs[i / (LEN / regs.len())]`,
/// the lower index in the lower bits (PTX's "elements low to high"). The mapping is the
/// hardware's, fixed by the instruction (see [the module docs](super)), and usable on the
/// host: tests and host code can lay data out for it.
///
/// Device-only provided methods load a fragment from memory and store it back through the
/// mapping (`load_shared`, `load_slice`, `load_view`, `store_shared`, `store_slice`,
/// `store_view`); the `ldmatrix` forms are on the types that have them.
pub trait Fragment: Copy {
    /// The element type (for a TF32 operand, the `f32` whose upper 19 bits the tensor core
    /// reads).
    type Elem: Copy;
    /// Rows of the matrix.
    const ROWS: usize;
    /// Columns of the matrix.
    const COLS: usize;
    /// Elements per lane.
    const LEN: usize;

    /// The `(row, column)` of element `i` held by lane `lane`. Total: `lane` is taken modulo
    /// 32 and `i` modulo [`LEN`](Fragment::LEN).
    fn coords(lane: u32, i: usize) -> (usize, usize);

    /// This lane's element `i` (`i < LEN`, else a panic/trap).
    fn get(&self, i: usize) -> Self::Elem;

    /// Sets this lane's element `i` (`i < LEN`, else a panic/trap).
    fn set(&mut self, i: usize, value: Self::Elem);

    /// The fragment whose registers are all zero bits (0.0, or 0).
    fn zeroed() -> Self;

    /// Lane `lane`'s fragment of the matrix whose element `(row, col)` is `f(row, col)`:
    /// `f` is called for this lane's [`LEN`](Fragment::LEN) elements, in order of `i`.
    /// Values are taken as they are (no TF32 rounding: see [`to_tf32`](super::to_tf32)).
    #[inline(always)]
    fn from_fn(lane: u32, mut f: impl FnMut(usize, usize) -> Self::Elem) -> Self {
        let mut x = Self::zeroed();
        for i in 0..Self::LEN {
            let (r, c) = Self::coords(lane, i);
            x.set(i, f(r, c));
        }
        x
    }

    /// Calls `f(row, col, value)` for each of lane `lane`'s elements, in order of `i`.
    #[inline(always)]
    fn for_each(&self, lane: u32, mut f: impl FnMut(usize, usize, Self::Elem)) {
        for i in 0..Self::LEN {
            let (r, c) = Self::coords(lane, i);
            f(r, c, self.get(i));
        }
    }

    /// How a value read from memory by the `load_*` methods enters the fragment: unchanged,
    /// except TF32 operands, which are rounded with [`to_tf32`](super::to_tf32).
    #[doc(hidden)]
    #[inline(always)]
    fn __from_memory(x: Self::Elem) -> Self::Elem {
        x
    }

    /// This lane's fragment of the `ROWS`×`COLS` tile of the shared 2-D array `tile` whose
    /// top-left element is `tile[row0][col0]`, read element by element through the mapping
    /// (`ld.shared`). A tile reaching outside the array aborts the kernel (location
    /// recorded). Every lane may call it on its own (no convergence needed).
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    #[track_caller]
    fn load_shared<const R: usize, const C: usize>(
        tile: crate::shared::SharedArray2<Self::Elem, R, C>,
        row0: usize,
        col0: usize,
    ) -> Self
    where
        Self::Elem: crate::shared::SharedElement,
    {
        if row0 + Self::ROWS > R || col0 + Self::COLS > C {
            crate::diag::fail();
        }
        Self::from_fn(crate::warp::lane_id(), |r, c| {
            // SAFETY: the tile is in bounds (checked above).
            Self::__from_memory(unsafe { tile.get_unchecked(row0 + r, col0 + c) })
        })
    }

    /// This lane's fragment of the tile at `(row0, col0)` of the row-major matrix in `src`
    /// whose rows are `ld` elements apart: element `(r, c)` is `src[(row0 + r) * ld + col0 +
    /// c]`. An index outside `src` aborts the kernel (location recorded).
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    #[track_caller]
    fn load_slice(
        src: ferrocuda_abi::Slice<Self::Elem>,
        row0: usize,
        col0: usize,
        ld: usize,
    ) -> Self {
        Self::from_fn(crate::warp::lane_id(), |r, c| {
            match src.get((row0 + r) * ld + col0 + c) {
                Some(v) => Self::__from_memory(v),
                None => crate::diag::fail(),
            }
        })
    }

    /// This lane's fragment of the tile at `[row0, col0]` of the 2-D view `src` (any
    /// strides). An index outside the view aborts the kernel (location recorded).
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    #[track_caller]
    fn load_view(src: ferrocuda_abi::View<Self::Elem, 2>, row0: usize, col0: usize) -> Self {
        Self::from_fn(crate::warp::lane_id(), |r, c| {
            match src.get([row0 + r, col0 + c]) {
                Some(v) => Self::__from_memory(v),
                None => crate::diag::fail(),
            }
        })
    }

    /// Writes this lane's elements to the `ROWS`×`COLS` tile of the shared 2-D array `tile`
    /// at `tile[row0][col0]` (`st.shared`). A tile reaching outside the array aborts the
    /// kernel.
    ///
    /// # Safety
    ///
    /// No other thread of the block accesses the written elements concurrently (the lanes
    /// of one warp write disjoint elements; a barrier orders the writes before other
    /// threads' reads).
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    #[track_caller]
    unsafe fn store_shared<const R: usize, const C: usize>(
        &self,
        tile: crate::shared::SharedArray2<Self::Elem, R, C>,
        row0: usize,
        col0: usize,
    ) where
        Self::Elem: crate::shared::SharedElement,
    {
        if row0 + Self::ROWS > R || col0 + Self::COLS > C {
            crate::diag::fail();
        }
        self.for_each(crate::warp::lane_id(), |r, c, v| {
            // SAFETY: in bounds (checked above); exclusivity is the caller's contract.
            unsafe { tile.write_unchecked(row0 + r, col0 + c, v) }
        });
    }

    /// Writes this lane's elements to the tile at `(row0, col0)` of the row-major matrix in
    /// `dst` whose rows are `ld` elements apart. An index outside `dst` aborts the kernel.
    ///
    /// # Safety
    ///
    /// No other thread of the launch accesses the written elements concurrently.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    #[track_caller]
    unsafe fn store_slice(
        &self,
        dst: ferrocuda_abi::SliceMut<Self::Elem>,
        row0: usize,
        col0: usize,
        ld: usize,
    ) {
        self.for_each(crate::warp::lane_id(), |r, c, v| {
            // SAFETY: bounds-checked write; exclusivity is the caller's contract.
            unsafe { dst.write((row0 + r) * ld + col0 + c, v) }
        });
    }

    /// Writes this lane's elements to the tile at `[row0, col0]` of the 2-D view `dst`. An
    /// index outside the view aborts the kernel.
    ///
    /// # Safety
    ///
    /// No other thread of the launch accesses the written elements concurrently.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    #[track_caller]
    unsafe fn store_view(
        &self,
        dst: ferrocuda_abi::ViewMut<Self::Elem, 2>,
        row0: usize,
        col0: usize,
    ) {
        self.for_each(crate::warp::lane_id(), |r, c, v| {
            // SAFETY: bounds-checked write; exclusivity is the caller's contract.
            unsafe { dst.write([row0 + r, col0 + c], v) }
        });
    }
}

/// `(g, t) = (lane / 4, lane % 4)`: PTX's `groupID` and `threadID_in_group`.
#[inline(always)]
const fn group(lane: u32) -> (usize, usize) {
    let lane = (lane % 32) as usize;
    (lane / 4, lane % 4)
}

/// The tile row and column (in elements of `size` bytes) that lane `lane` addresses for an
/// `ldmatrix`/`stmatrix` `.x4` of operand A (16 rows of 32 bytes): lane `l` gives row
/// `l % 16` at byte `16 (l / 16)`, so 8×8 matrix `j` (lanes `8j..8j+8`) is the quadrant
/// (rows `8 (j % 2)..`, bytes `16 (j / 2)..`).
#[cfg(any(target_arch = "nvptx64", test))]
#[inline(always)]
pub(crate) const fn ldmatrix_a_offsets(lane: u32, size: usize) -> (usize, usize) {
    let l = (lane % 32) as usize;
    (l % 16, 16 / size * (l / 16))
}

/// The same for a `.x2` of operand B from an N×K tile (8 rows of 32 bytes): lane `l` gives row
/// `l % 8` at byte `16 ((l / 8) % 2)` (lanes `16..32`, whose addresses `.x2` ignores, repeat
/// lanes `0..16`).
#[cfg(any(target_arch = "nvptx64", test))]
#[inline(always)]
pub(crate) const fn ldmatrix_b_offsets(lane: u32, size: usize) -> (usize, usize) {
    let l = (lane % 32) as usize;
    (l % 8, 16 / size * ((l / 8) % 2))
}

/// The same for a `.x2.trans` of operand B (or a `.x2` of a 16×8 accumulator) from a K×N
/// tile of 16-bit elements (16 rows of 16 bytes): lane `l` gives row `l % 16`.
#[cfg(any(target_arch = "nvptx64", test))]
#[inline(always)]
pub(crate) const fn ldmatrix_rows16_offsets(lane: u32) -> (usize, usize) {
    ((lane % 16) as usize, 0)
}

/// Element `i` (16-bit) of packed registers: the low half holds the lower index.
#[inline(always)]
fn half_of(regs: &[u32], i: usize) -> u16 {
    (regs[i / 2] >> (16 * (i % 2))) as u16
}

#[inline(always)]
fn set_half(regs: &mut [u32], i: usize, bits: u16) {
    let s = 16 * (i % 2);
    regs[i / 2] = regs[i / 2] & !(0xFFFF << s) | (bits as u32) << s;
}

/// Element `i` (8-bit) of packed registers: the lowest byte holds the lowest index.
#[inline(always)]
fn byte_of(regs: &[u32], i: usize) -> u8 {
    (regs[i / 4] >> (8 * (i % 4))) as u8
}

#[inline(always)]
fn set_byte(regs: &mut [u32], i: usize, bits: u8) {
    let s = 8 * (i % 4);
    regs[i / 4] = regs[i / 4] & !(0xFF << s) | (bits as u32) << s;
}

mod types;

pub use types::{
    Acc16x8F16, Acc16x8F32, Acc16x8I32, Acc8x8F64, FragA16x16, FragA16x32, FragA16x8Tf32,
    FragA8x4F64, FragB16x8, FragB32x8, FragB4x8F64, FragB8x8Tf32,
};

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    /// Every element of the `ROWS`×`COLS` matrix is held by exactly one `(lane, i)`.
    fn bijective<F: Fragment>() {
        assert_eq!(32 * F::LEN, F::ROWS * F::COLS);
        let mut seen = [[None::<(u32, usize)>; 32]; 32];
        for lane in 0..32 {
            for i in 0..F::LEN {
                let (r, c) = F::coords(lane, i);
                assert!(r < F::ROWS && c < F::COLS, "({lane}, {i}) -> ({r}, {c})");
                if let Some(prev) = seen[r][c] {
                    panic!("({r}, {c}) held by {prev:?} and ({lane}, {i})");
                }
                seen[r][c] = Some((lane, i));
            }
        }
    }

    #[test]
    fn every_element_is_held_by_exactly_one_lane_slot() {
        bijective::<FragA16x16<bf16>>();
        bijective::<FragA16x16<f16>>();
        bijective::<FragB16x8<bf16>>();
        bijective::<FragA16x8Tf32>();
        bijective::<FragB8x8Tf32>();
        bijective::<FragA16x32<i8>>();
        bijective::<FragB32x8<u8>>();
        bijective::<FragA8x4F64>();
        bijective::<FragB4x8F64>();
        bijective::<Acc16x8F32>();
        bijective::<Acc16x8F16>();
        bijective::<Acc16x8I32>();
        bijective::<Acc8x8F64>();
    }

    /// The PTX ISA's formulas, spelled as it spells them, against `coords`.
    #[test]
    fn mappings_are_the_ptx_isa_formulas() {
        for lane in 0..32u32 {
            let (g, t) = ((lane >> 2) as usize, (lane % 4) as usize);
            for i in 0..8 {
                let row = if i < 2 || (4..6).contains(&i) {
                    g
                } else {
                    g + 8
                };
                let col = if i < 4 {
                    t * 2 + (i & 1)
                } else {
                    t * 2 + (i & 1) + 8
                };
                assert_eq!(FragA16x16::<bf16>::coords(lane, i), (row, col));
            }
            for i in 0..4 {
                let row = if i < 2 {
                    t * 2 + (i & 1)
                } else {
                    t * 2 + (i & 1) + 8
                };
                assert_eq!(FragB16x8::<f16>::coords(lane, i), (row, g));
                let acc = (if i < 2 { g } else { g + 8 }, t * 2 + (i & 1));
                assert_eq!(Acc16x8F32::coords(lane, i), acc);
                assert_eq!(Acc16x8I32::coords(lane, i), acc);
                let tf = (
                    if i == 0 || i == 2 { g } else { g + 8 },
                    if i < 2 { t } else { t + 4 },
                );
                assert_eq!(FragA16x8Tf32::coords(lane, i), tf);
            }
            for i in 0..2 {
                let row = if i == 0 { t } else { t + 4 };
                assert_eq!(FragB8x8Tf32::coords(lane, i), (row, g));
                assert_eq!(Acc8x8F64::coords(lane, i), (g, t * 2 + i));
            }
            for i in 0..16 {
                let row = if i < 4 || (8..12).contains(&i) {
                    g
                } else {
                    g + 8
                };
                let col = if i < 8 {
                    t * 4 + (i & 3)
                } else {
                    t * 4 + (i & 3) + 16
                };
                assert_eq!(FragA16x32::<i8>::coords(lane, i), (row, col));
            }
            for i in 0..8 {
                let row = if i < 4 {
                    t * 4 + (i & 3)
                } else {
                    t * 4 + (i & 3) + 16
                };
                assert_eq!(FragB32x8::<u8>::coords(lane, i), (row, g));
            }
            assert_eq!(FragA8x4F64::coords(lane, 0), (g, t));
            assert_eq!(FragB4x8F64::coords(lane, 0), (t, g));
        }
    }

    /// `ldmatrix` hands lane `l`, for each 8×8 matrix `j` of 16-bit elements, the pair at
    /// row `l / 4`, columns `2 (l % 4) ..+2` in register `j`; `.x4` of a 16×16 tile with
    /// lane `l` addressing row `l % 16`, column `8 (l / 16)` makes matrix `j` the quadrant
    /// (rows `8 (j % 2)..`, columns `8 (j / 2)..`): that is operand A.
    #[test]
    fn ldmatrix_x4_quadrants_are_operand_a() {
        for lane in 0..32u32 {
            for j in 0..4usize {
                for h in 0..2 {
                    let (r, c) = (
                        (lane / 4) as usize + 8 * (j % 2),
                        2 * (lane % 4) as usize + h + 8 * (j / 2),
                    );
                    assert_eq!(FragA16x16::<bf16>::coords(lane, 2 * j + h), (r, c));
                }
            }
        }
    }

    /// `ldmatrix.sync.aligned.m8n8.x{n}[.trans].shared.b16` as the PTX ISA defines it, over
    /// the bytes `mem`: lane `8j + r` gives (through `addr`) the byte address of row `r` of
    /// matrix `j`; lane `l` receives in register `j` the 16-bit elements at row `l / 4`,
    /// columns `2 (l % 4)` (low half) and `2 (l % 4) + 1` (high half) — with `.trans`, at
    /// column `l / 4`, rows `2 (l % 4)` and `2 (l % 4) + 1`.
    fn ldmatrix(mem: &[u8], addr: impl Fn(usize) -> usize, n: usize, trans: bool) -> Vec<[u32; 4]> {
        let half = |a: usize| u16::from_le_bytes([mem[a], mem[a + 1]]) as u32;
        (0..32)
            .map(|l| {
                let mut regs = [0u32; 4];
                for (j, reg) in regs.iter_mut().enumerate().take(n) {
                    *reg = if trans {
                        let r = 2 * (l % 4);
                        half(addr(8 * j + r) + 2 * (l / 4))
                            | half(addr(8 * j + r + 1) + 2 * (l / 4)) << 16
                    } else {
                        let a = addr(8 * j + l / 4) + 4 * (l % 4);
                        half(a) | half(a + 2) << 16
                    };
                }
                regs
            })
            .collect()
    }

    /// A row-major tile of `rows`×`cols` elements of `size` bytes, element `(r, c)` holding
    /// distinct bytes; `at(r, c)` its byte address.
    struct Tile {
        mem: Vec<u8>,
        cols: usize,
        size: usize,
    }
    impl Tile {
        fn new(rows: usize, cols: usize, size: usize) -> Tile {
            let mem = (0..rows * cols * size)
                .map(|b| (b as u32).wrapping_mul(0x9E37_79B1).rotate_left(7) as u8)
                .collect();
            Tile { mem, cols, size }
        }
        fn at(&self, r: usize, c: usize) -> usize {
            (r * self.cols + c) * self.size
        }
        fn u8(&self, r: usize, c: usize) -> u8 {
            self.mem[self.at(r, c)]
        }
        fn u16(&self, r: usize, c: usize) -> u16 {
            let a = self.at(r, c);
            u16::from_le_bytes([self.mem[a], self.mem[a + 1]])
        }
        fn u32(&self, r: usize, c: usize) -> u32 {
            let a = self.at(r, c);
            u32::from_le_bytes(self.mem[a..a + 4].try_into().unwrap())
        }
    }

    /// Each fragment-level `ldmatrix` (its lane addresses, instruction and `.trans`) loads
    /// exactly the fragment that `from_fn` builds through `coords` from the tile's matrix —
    /// the composition the device loaders rely on. (`stmatrix` is its inverse.)
    #[test]
    fn ldmatrix_loads_the_mma_fragments() {
        let (r0, c0) = (3, 8);
        // A, 16-bit: .x4, the tile holding A itself.
        let t = Tile::new(24, 40, 2);
        let addr = |l: usize| {
            let (r, c) = ldmatrix_a_offsets(l as u32, 2);
            t.at(r0 + r, c0 + c)
        };
        let regs = ldmatrix(&t.mem, addr, 4, false);
        for lane in 0..32 {
            let want =
                FragA16x16::<bf16>::from_fn(lane, |r, c| bf16::from_bits(t.u16(r0 + r, c0 + c)));
            assert_eq!(regs[lane as usize], want.regs, "A16 lane {lane}");
        }
        // B, 16-bit: .x2.trans of a K×N tile.
        let addr = |l: usize| {
            let (r, c) = ldmatrix_rows16_offsets(l as u32);
            t.at(r0 + r, c0 + c)
        };
        let regs = ldmatrix(&t.mem, addr, 2, true);
        for lane in 0..32 {
            let want =
                FragB16x8::<f16>::from_fn(lane, |k, n| f16::from_bits(t.u16(r0 + k, c0 + n)));
            assert_eq!(regs[lane as usize][..2], want.regs, "B16 trans lane {lane}");
            // The f16 accumulator: .x2 (no .trans) of a 16×8 tile with the same addresses.
            let acc = Acc16x8F16::from_fn(lane, |r, c| f16::from_bits(t.u16(r0 + r, c0 + c)));
            let plain = ldmatrix(&t.mem, addr, 2, false);
            assert_eq!(
                plain[lane as usize][..2],
                acc.regs,
                "Acc16x8F16 lane {lane}"
            );
        }
        // B, 16-bit: .x2 of an N×K tile (B transposed).
        let addr = |l: usize| {
            let (r, c) = ldmatrix_b_offsets(l as u32, 2);
            t.at(r0 + r, c0 + c)
        };
        let regs = ldmatrix(&t.mem, addr, 2, false);
        for lane in 0..32 {
            let want =
                FragB16x8::<bf16>::from_fn(lane, |k, n| bf16::from_bits(t.u16(r0 + n, c0 + k)));
            assert_eq!(regs[lane as usize][..2], want.regs, "B16 N×K lane {lane}");
        }
        // 8-bit A (.x4) and B (.x2 of N×K).
        let t = Tile::new(24, 64, 1);
        let (r0, c0) = (5, 16);
        let addr = |l: usize| {
            let (r, c) = ldmatrix_a_offsets(l as u32, 1);
            t.at(r0 + r, c0 + c)
        };
        let regs = ldmatrix(&t.mem, addr, 4, false);
        for lane in 0..32 {
            let want = FragA16x32::<u8>::from_fn(lane, |r, c| t.u8(r0 + r, c0 + c));
            assert_eq!(regs[lane as usize], want.regs, "A8 lane {lane}");
        }
        let addr = |l: usize| {
            let (r, c) = ldmatrix_b_offsets(l as u32, 1);
            t.at(r0 + r, c0 + c)
        };
        let regs = ldmatrix(&t.mem, addr, 2, false);
        for lane in 0..32 {
            let want = FragB32x8::<i8>::from_fn(lane, |k, n| t.u8(r0 + n, c0 + k) as i8);
            assert_eq!(regs[lane as usize][..2], want.regs, "B8 lane {lane}");
        }
        // TF32 A (.x4) and B (.x2 of N×K), 32-bit elements moved as halves.
        let t = Tile::new(24, 20, 4);
        let (r0, c0) = (2, 4);
        let addr = |l: usize| {
            let (r, c) = ldmatrix_a_offsets(l as u32, 4);
            t.at(r0 + r, c0 + c)
        };
        let regs = ldmatrix(&t.mem, addr, 4, false);
        for lane in 0..32 {
            let want = FragA16x8Tf32::from_fn(lane, |r, c| f32::from_bits(t.u32(r0 + r, c0 + c)));
            assert_eq!(regs[lane as usize], want.regs, "A tf32 lane {lane}");
        }
        let addr = |l: usize| {
            let (r, c) = ldmatrix_b_offsets(l as u32, 4);
            t.at(r0 + r, c0 + c)
        };
        let regs = ldmatrix(&t.mem, addr, 2, false);
        for lane in 0..32 {
            let want = FragB8x8Tf32::from_fn(lane, |k, n| f32::from_bits(t.u32(r0 + n, c0 + k)));
            assert_eq!(regs[lane as usize][..2], want.regs, "B tf32 lane {lane}");
        }
    }

    #[test]
    fn elements_pack_low_to_high() {
        let mut a = FragA16x16::<bf16>::zeroed();
        a.set(0, bf16::from_bits(0x1111));
        a.set(1, bf16::from_bits(0x2222));
        a.set(7, bf16::from_bits(0x7777));
        assert_eq!(a.regs, [0x2222_1111, 0, 0, 0x7777_0000]);
        assert_eq!(a.get(1).to_bits(), 0x2222);
        let mut b = FragA16x32::<i8>::zeroed();
        b.set(0, 1);
        b.set(3, -1);
        b.set(4, 2);
        assert_eq!(b.regs[0], 0xFF00_0001);
        assert_eq!(b.regs[1], 2);
        assert_eq!(b.get(3), -1);
        let mut c = Acc16x8F16::zeroed();
        c.set(3, f16::from_bits(0x3C00));
        assert_eq!(c.regs, [0, 0x3C00_0000]);
        let lane = 13;
        let a = FragB32x8::<u8>::from_fn(lane, |r, c| (r * 8 + c) as u8);
        a.for_each(lane, |r, c, v| assert_eq!(v as usize, r * 8 + c));
    }
}
