//! `ldmatrix` and `stmatrix` (device only): warp-collective moves of 8×8 matrices of 16-bit
//! elements between shared memory and fragments, through `asm!` with 32-bit shared addresses.

use super::frag::{
    FragA16x16, FragA16x32, FragA16x8Tf32, FragB16x8, FragB32x8, FragB8x8Tf32, Half16, Int8,
};
use crate::diag::fail;
use crate::shared::{shared_addr_of, SharedArray2, SharedElement};
use core::arch::asm;

macro_rules! ldmatrix_fns {
    ($($(#[$doc:meta])* $name:ident, $instr:literal, $n:literal, [$($r:ident),+];)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// Every lane of the warp executes this call together (converged, all 32 lanes:
        /// see [the thread model](super)), and each lane whose address is used (lanes
        /// `0..8` for `.x1`, `0..16` for `.x2`, all for `.x4`) passes the 32-bit
        /// shared-state-space address ([`shared_addr`](crate::shared::SharedArray2::shared_addr))
        /// of 16 bytes of shared memory, 16-byte aligned, that it may read. The other lanes'
        /// addresses are ignored.
        #[inline(always)]
        pub unsafe fn $name(addr: u32) -> [u32; $n] {
            $(let $r: u32;)+
            // SAFETY: the caller's contract. Not `pure`: the instruction is a collective of
            // the warp, kept where the source puts it (it reads memory, `readonly`).
            unsafe {
                asm!(
                    concat!($instr, " {{", ldmatrix_fns!(@regs $($r),+), "}}, [{addr}];"),
                    $($r = out(reg32) $r,)+
                    addr = in(reg32) addr,
                    options(nostack, readonly),
                )
            };
            [$($r),+]
        }
    )*};
    (@regs $r0:ident) => { concat!("{", stringify!($r0), "}") };
    (@regs $r0:ident, $($r:ident),+) => {
        concat!("{", stringify!($r0), "}", $(", {", stringify!($r), "}"),+)
    };
}

ldmatrix_fns! {
    /// `ldmatrix.sync.aligned.m8n8.x1.shared.b16`: one 8×8 matrix of 16-bit elements whose
    /// row `j` starts at lane `j`'s address; lane `l` receives row `l / 4`, columns
    /// `2 (l % 4)` (low half) and `2 (l % 4) + 1` (high half).
    ldmatrix_x1, "ldmatrix.sync.aligned.m8n8.x1.shared.b16", 1, [r0];
    /// `ldmatrix.sync.aligned.m8n8.x2.shared.b16`: two 8×8 matrices (rows from lanes `0..8`
    /// and `8..16`), matrix `j` into register `j`, each as in [`ldmatrix_x1`].
    ldmatrix_x2, "ldmatrix.sync.aligned.m8n8.x2.shared.b16", 2, [r0, r1];
    /// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: four 8×8 matrices (rows from lanes
    /// `8j..8j+8` for matrix `j`), matrix `j` into register `j`, each as in [`ldmatrix_x1`].
    ldmatrix_x4, "ldmatrix.sync.aligned.m8n8.x4.shared.b16", 4, [r0, r1, r2, r3];
    /// `ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16`: as [`ldmatrix_x1`], transposed: lane
    /// `l` receives column `l / 4`, rows `2 (l % 4)` (low half) and `2 (l % 4) + 1` (high
    /// half) of the matrix whose rows the lanes address.
    ldmatrix_x1_trans, "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16", 1, [r0];
    /// `ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16`: as [`ldmatrix_x2`], each matrix
    /// transposed as in [`ldmatrix_x1_trans`].
    ldmatrix_x2_trans, "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", 2, [r0, r1];
    /// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: as [`ldmatrix_x4`], each matrix
    /// transposed as in [`ldmatrix_x1_trans`].
    ldmatrix_x4_trans, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", 4, [r0, r1, r2, r3];
}

macro_rules! stmatrix_fns {
    ($($(#[$doc:meta])* $name:ident, $instr:literal, $n:literal, [$($r:ident),+];)*) => {$(
        $(#[$doc])*
        ///
        /// **sm_90 and newer** (PTX ISA 7.8): present when the kernel crate is built for
        /// `sm_90` or newer (`#[kernel(arch = "sm_90")]`; the builder refuses `stmatrix` in an older module).
        ///
        /// # Safety
        ///
        /// Every lane of the warp executes this call together (converged, all 32 lanes), and
        /// each lane whose address is used (lanes `0..8` for `.x1`, `0..16` for `.x2`, all
        /// for `.x4`) passes the 32-bit shared address of 16 bytes of shared memory,
        /// 16-byte aligned, that no other thread of the block accesses concurrently. The
        /// other lanes' addresses are ignored.
        #[inline(always)]
        pub unsafe fn $name(addr: u32, regs: [u32; $n]) {
            let [$($r),+] = regs;
            // SAFETY: the caller's contract.
            unsafe {
                asm!(
                    concat!($instr, " [{addr}], {{", ldmatrix_fns!(@regs $($r),+), "}};"),
                    $($r = in(reg32) $r,)+
                    addr = in(reg32) addr,
                    options(nostack),
                )
            };
        }
    )*};
}

stmatrix_fns! {
    /// `stmatrix.sync.aligned.m8n8.x1.shared.b16`: the inverse of [`ldmatrix_x1`] — lane `l`
    /// gives row `l / 4`, columns `2 (l % 4)..+2` of one 8×8 matrix whose row `j` is stored at
    /// lane `j`'s address.
    stmatrix_x1, "stmatrix.sync.aligned.m8n8.x1.shared.b16", 1, [r0];
    /// `stmatrix.sync.aligned.m8n8.x2.shared.b16`: the inverse of [`ldmatrix_x2`].
    stmatrix_x2, "stmatrix.sync.aligned.m8n8.x2.shared.b16", 2, [r0, r1];
    /// `stmatrix.sync.aligned.m8n8.x4.shared.b16`: the inverse of [`ldmatrix_x4`].
    stmatrix_x4, "stmatrix.sync.aligned.m8n8.x4.shared.b16", 4, [r0, r1, r2, r3];
    /// `stmatrix.sync.aligned.m8n8.x1.trans.shared.b16`: the inverse of
    /// [`ldmatrix_x1_trans`].
    stmatrix_x1_trans, "stmatrix.sync.aligned.m8n8.x1.trans.shared.b16", 1, [r0];
    /// `stmatrix.sync.aligned.m8n8.x2.trans.shared.b16`: the inverse of
    /// [`ldmatrix_x2_trans`].
    stmatrix_x2_trans, "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16", 2, [r0, r1];
    /// `stmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: the inverse of
    /// [`ldmatrix_x4_trans`].
    stmatrix_x4_trans, "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16", 4, [r0, r1, r2, r3];
}

/// This lane's row address for an `ldmatrix`/`stmatrix` of the `rows`×`cols` tile at
/// `tile[row0][col0]`: element `[row0 + r][col0 + c]`. Aborts the kernel (location recorded)
/// if the tile leaves the array or the address is not 16-byte aligned.
#[inline(always)]
#[track_caller]
#[allow(clippy::manual_is_multiple_of)] // `%`: is_multiple_of generates other code here
fn row_addr<T: SharedElement, const R: usize, const C: usize>(
    tile: SharedArray2<T, R, C>,
    (row0, col0): (usize, usize),
    (rows, cols): (usize, usize),
    (r, c): (usize, usize),
) -> u32 {
    if row0 + rows > R || col0 + cols > C {
        fail();
    }
    // In bounds: r < rows and c < cols (the callers' lane formulas).
    let addr = shared_addr_of(tile.as_ptr().wrapping_add((row0 + r) * C + col0 + c));
    if addr % 16 != 0 {
        fail();
    }
    addr
}

/// This lane's `(row, col)` offsets for a `.x4` load of an A tile of `T`
/// ([`ldmatrix_a_offsets`](super::frag::ldmatrix_a_offsets)).
#[inline(always)]
fn a_lane<T>() -> (usize, usize) {
    super::frag::ldmatrix_a_offsets(crate::warp::lane_id(), core::mem::size_of::<T>())
}

/// This lane's `(row, col)` offsets for a `.x2` load of an N×K B tile of `T`
/// ([`ldmatrix_b_offsets`](super::frag::ldmatrix_b_offsets)).
#[inline(always)]
fn b_lane<T>() -> (usize, usize) {
    super::frag::ldmatrix_b_offsets(crate::warp::lane_id(), core::mem::size_of::<T>())
}

/// This lane's `(row, col)` offsets for a 16-row load of 16-bit elements
/// ([`ldmatrix_rows16_offsets`](super::frag::ldmatrix_rows16_offsets)).
#[inline(always)]
fn rows16_lane() -> (usize, usize) {
    super::frag::ldmatrix_rows16_offsets(crate::warp::lane_id())
}

impl<T: Half16 + SharedElement> FragA16x16<T> {
    /// Operand A from the 16×16 tile at `tile[row0][col0]` of a row-major shared array
    /// (`ldmatrix.sync.aligned.m8n8.x4.shared.b16`): lane `l` addresses row `l % 16`, column
    /// `8 (l / 16)`, so 8×8 matrix `j` is the quadrant (rows `8 (j % 2)..`, columns
    /// `8 (j / 2)..`) and register `j` of every lane is exactly `regs[j]` of the mma
    /// fragment. The rows must be 16-byte aligned: an array from
    /// `shared_array!(T, [R, C], align = 16)` with `C * 2` a multiple of 16 and `col0` a
    /// multiple of 8. A tile outside the array or a misaligned row aborts the kernel.
    ///
    /// Every lane of the warp calls it together with the same `tile`, `row0`, `col0` (see
    /// [the thread model](super)).
    #[inline(always)]
    #[track_caller]
    pub fn ldmatrix<const R: usize, const C: usize>(
        tile: SharedArray2<T, R, C>,
        row0: usize,
        col0: usize,
    ) -> Self {
        let addr = row_addr(tile, (row0, col0), (16, 16), a_lane::<T>());
        // SAFETY: 16 aligned bytes of the array (checked); the warp-convergence contract is
        // this function's, documented.
        Self::from_regs(unsafe { ldmatrix_x4(addr) })
    }

    /// Stores the fragment to the 16×16 tile at `tile[row0][col0]`, the inverse of
    /// [`ldmatrix`](Self::ldmatrix) (`stmatrix.sync.aligned.m8n8.x4.shared.b16`; **sm_90**).
    ///
    /// # Safety
    ///
    /// Every lane of the warp calls it together with the same arguments, and no other thread
    /// of the block accesses the tile concurrently.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn stmatrix<const R: usize, const C: usize>(
        &self,
        tile: SharedArray2<T, R, C>,
        row0: usize,
        col0: usize,
    ) {
        let addr = row_addr(tile, (row0, col0), (16, 16), a_lane::<T>());
        // SAFETY: 16 aligned bytes of the array (checked); the rest is the caller's contract.
        unsafe { stmatrix_x4(addr, self.regs) }
    }
}

impl<T: Half16 + SharedElement> FragB16x8<T> {
    /// Operand B from the 16×8 (K×N) tile at `tile[k0][n0]` of a row-major shared array
    /// holding B itself, K rows of N (`ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16`):
    /// lanes `0..16` address rows `k0..k0+16`; the transposing load gives lane `4g + t` the
    /// pairs `(2t, g), (2t+1, g)` and `(2t+8, g), (2t+9, g)` — the mma fragment. Rows
    /// 16-byte aligned (as for [`FragA16x16::ldmatrix`], `n0` a multiple of 8).
    ///
    /// Every lane of the warp calls it together with the same arguments.
    #[inline(always)]
    #[track_caller]
    pub fn ldmatrix_trans<const R: usize, const C: usize>(
        tile: SharedArray2<T, R, C>,
        k0: usize,
        n0: usize,
    ) -> Self {
        let addr = row_addr(tile, (k0, n0), (16, 8), rows16_lane());
        // SAFETY: as in `FragA16x16::ldmatrix`.
        Self::from_regs(unsafe { ldmatrix_x2_trans(addr) })
    }

    /// Operand B from the 8×16 (N×K) tile at `tile[n0][k0]` of a row-major shared array
    /// holding Bᵀ, N rows of K — B column-major
    /// (`ldmatrix.sync.aligned.m8n8.x2.shared.b16`): lanes `0..8` address rows `n0..n0+8`
    /// at `k0`, lanes `8..16` the same rows at `k0 + 8`. Rows 16-byte aligned.
    ///
    /// Every lane of the warp calls it together with the same arguments.
    #[inline(always)]
    #[track_caller]
    pub fn ldmatrix<const R: usize, const C: usize>(
        tile: SharedArray2<T, R, C>,
        n0: usize,
        k0: usize,
    ) -> Self {
        let addr = row_addr(tile, (n0, k0), (8, 16), b_lane::<T>());
        // SAFETY: as in `FragA16x16::ldmatrix`.
        Self::from_regs(unsafe { ldmatrix_x2(addr) })
    }

    /// Stores the fragment to the 16×8 (K×N) tile at `tile[k0][n0]`, the inverse of
    /// [`ldmatrix_trans`](Self::ldmatrix_trans)
    /// (`stmatrix.sync.aligned.m8n8.x2.trans.shared.b16`; **sm_90**).
    ///
    /// # Safety
    ///
    /// As [`FragA16x16::stmatrix`].
    #[inline(always)]
    #[track_caller]
    pub unsafe fn stmatrix_trans<const R: usize, const C: usize>(
        &self,
        tile: SharedArray2<T, R, C>,
        k0: usize,
        n0: usize,
    ) {
        let addr = row_addr(tile, (k0, n0), (16, 8), rows16_lane());
        // SAFETY: 16 aligned bytes of the array (checked); the rest is the caller's contract.
        unsafe { stmatrix_x2_trans(addr, self.regs) }
    }
}

impl<T: Int8 + SharedElement> FragA16x32<T> {
    /// Operand A from the 16×32 tile at `tile[row0][col0]` of a row-major shared array of
    /// 8-bit elements (`ldmatrix.sync.aligned.m8n8.x4.shared.b16`, the bytes moved in pairs):
    /// lane `l` addresses row `l % 16`, column `16 (l / 16)`; register `j` of every lane is
    /// exactly `regs[j]` of the mma fragment. Rows 16-byte aligned (`col0` a multiple of 16).
    ///
    /// Every lane of the warp calls it together with the same arguments.
    #[inline(always)]
    #[track_caller]
    pub fn ldmatrix<const R: usize, const C: usize>(
        tile: SharedArray2<T, R, C>,
        row0: usize,
        col0: usize,
    ) -> Self {
        let addr = row_addr(tile, (row0, col0), (16, 32), a_lane::<T>());
        // SAFETY: as in `FragA16x16::ldmatrix`.
        Self::from_regs(unsafe { ldmatrix_x4(addr) })
    }
}

impl<T: Int8 + SharedElement> FragB32x8<T> {
    /// Operand B from the 8×32 (N×K) tile at `tile[n0][k0]` of a row-major shared array
    /// holding Bᵀ (`ldmatrix.sync.aligned.m8n8.x2.shared.b16`): lanes `0..8` address rows
    /// `n0..n0+8` at `k0`, lanes `8..16` at `k0 + 16`. (A K×N tile of bytes cannot be
    /// loaded transposed: `.trans` moves 16-bit elements.) Rows 16-byte aligned.
    ///
    /// Every lane of the warp calls it together with the same arguments.
    #[inline(always)]
    #[track_caller]
    pub fn ldmatrix<const R: usize, const C: usize>(
        tile: SharedArray2<T, R, C>,
        n0: usize,
        k0: usize,
    ) -> Self {
        let addr = row_addr(tile, (n0, k0), (8, 32), b_lane::<T>());
        // SAFETY: as in `FragA16x16::ldmatrix`.
        Self::from_regs(unsafe { ldmatrix_x2(addr) })
    }
}

impl FragA16x8Tf32 {
    /// Operand A from the 16×8 tile at `tile[row0][col0]` of a row-major shared `f32` array
    /// (`ldmatrix.sync.aligned.m8n8.x4.shared.b16`, each `f32` moved as two halves): lane `l`
    /// addresses row `l % 16`, column `4 (l / 16)`. The bits are taken as they are: store
    /// values already rounded with [`to_tf32`](super::to_tf32) (the tensor core ignores the
    /// low 13 bits of others). Rows 16-byte aligned (`col0` a multiple of 4).
    ///
    /// Every lane of the warp calls it together with the same arguments.
    #[inline(always)]
    #[track_caller]
    pub fn ldmatrix<const R: usize, const C: usize>(
        tile: SharedArray2<f32, R, C>,
        row0: usize,
        col0: usize,
    ) -> Self {
        let addr = row_addr(tile, (row0, col0), (16, 8), a_lane::<f32>());
        FragA16x8Tf32 {
            // SAFETY: as in `FragA16x16::ldmatrix`.
            regs: unsafe { ldmatrix_x4(addr) },
        }
    }
}

impl FragB8x8Tf32 {
    /// Operand B from the 8×8 (N×K) tile at `tile[n0][k0]` of a row-major shared `f32` array
    /// holding Bᵀ (`ldmatrix.sync.aligned.m8n8.x2.shared.b16`): lanes `0..8` address rows
    /// `n0..n0+8` at `k0`, lanes `8..16` at `k0 + 4`. Bits as they are (see
    /// [`FragA16x8Tf32::ldmatrix`]). Rows 16-byte aligned.
    ///
    /// Every lane of the warp calls it together with the same arguments.
    #[inline(always)]
    #[track_caller]
    pub fn ldmatrix<const R: usize, const C: usize>(
        tile: SharedArray2<f32, R, C>,
        n0: usize,
        k0: usize,
    ) -> Self {
        let addr = row_addr(tile, (n0, k0), (8, 8), b_lane::<f32>());
        FragB8x8Tf32 {
            // SAFETY: as in `FragA16x16::ldmatrix`.
            regs: unsafe { ldmatrix_x2(addr) },
        }
    }
}

impl super::frag::Acc16x8F16 {
    /// Stores the accumulator to the 16×8 tile at `tile[row0][col0]` of a row-major shared
    /// `f16` array (`stmatrix.sync.aligned.m8n8.x2.shared.b16`; **sm_90**): lanes `0..16`
    /// address rows `row0..row0+16`; register `j` is 8×8 matrix `j` (rows `8j..`). Rows
    /// 16-byte aligned.
    ///
    /// # Safety
    ///
    /// As [`FragA16x16::stmatrix`].
    #[inline(always)]
    #[track_caller]
    pub unsafe fn stmatrix<const R: usize, const C: usize>(
        &self,
        tile: SharedArray2<crate::half::f16, R, C>,
        row0: usize,
        col0: usize,
    ) {
        let addr = row_addr(tile, (row0, col0), (16, 8), rows16_lane());
        // SAFETY: 16 aligned bytes of the array (checked); the rest is the caller's contract.
        unsafe { stmatrix_x2(addr, self.regs) }
    }
}
