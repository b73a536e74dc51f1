//! What both attention kernels do alike (device code): the order of the items, the output
//! head's pair stores (checked, or a whole block's unchecked), P's packing into 16-bit pairs,
//! the log-sum-exp store, and the register moves that keep loop-invariant values from being
//! hoisted.

#[cfg(ferrocuda_arch = "sm_90a")]
use crate::epilogue::OutElem;
use ferrocuda_device::mma::Half16;
use ferrocuda_device::{GpuFloat, ViewMut};

/// `x`, through an instruction the compiler cannot look through or move: values derived
/// from it stay where they are computed. The epilogue's column offsets (`col · stride`, 32 of
/// them) are invariant over the item loop; hoisted out of it they would stay live across the
/// main loop (registers, and spills).
#[inline(always)]
pub(super) fn here(x: isize) -> isize {
    let mut y = x as i64;
    // SAFETY: a register move.
    unsafe { core::arch::asm!("mov.b64 {y}, {y};", y = inout(reg64) y, options(nomem, nostack)) };
    y as isize
}

/// [`here`] for a 32-bit value.
#[inline(always)]
pub(super) fn here32(x: u32) -> u32 {
    let mut y = x;
    // SAFETY: a register move.
    unsafe { core::arch::asm!("mov.b32 {y}, {y};", y = inout(reg32) y, options(nomem, nostack)) };
    y
}

/// The (batch × heads + head, query tile) of item `item`: without the mask the query tiles of
/// one head are adjacent items (blocks running together share that head's `k` and `v` in
/// L2); with the causal mask the items go longest first (the last query tiles, which see the
/// most keys), heads adjacent, so that persistent blocks' shares of work even out.
#[inline(always)]
pub(super) fn item_coords(item: u32, bh_count: u32, tiles_m: u32, causal: bool) -> (u32, u32) {
    if causal {
        (item % bh_count, tiles_m - 1 - item / bh_count)
    } else {
        (item / tiles_m, item % tiles_m)
    }
}

/// The causal sm_90a kernel's item `item` — (batch × heads + head, query tile) — when
/// persistent blocks take items `b`, `b + grid`, … : block `b`'s `k`-th item is the first
/// (`k` even) or second (`k` odd) half of *unit* `b + ⌊k / 2⌋ · grid`, and unit `u` of head
/// `u / ⌈tiles_m / 2⌉` is query tile `tiles_m − 1 − p` then tile `p` (`p = u % ⌈tiles_m / 2⌉`):
/// the two see `tiles_m + 1` key tiles together whatever `p` is where query and key tiles are
/// of one height (within a key tile where they are not), so every block's share is the same,
/// and the units of one head are adjacent, so the blocks running together share its `k`
/// and `v` in L2 (longest-first items gave them 132 different heads, whose `k` and `v` did not
/// fit side by side: at S = 1024, D = 128, 643 MB read from DRAM against cuDNN's 201). With
/// an odd `tiles_m` the middle tile is both halves of its unit: computed twice by one block,
/// the same values stored twice.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
pub(super) fn paired_item(item: u32, grid: u32, tiles_m: u32) -> (u32, u32) {
    let (k, b) = (item / grid, item % grid);
    let pairs = tiles_m.div_ceil(2);
    let unit = b + (k / 2) * grid;
    let (bh, p) = (unit / pairs, unit % pairs);
    (bh, if k % 2 == 0 { tiles_m - 1 - p } else { p })
}

/// Whether item `item` of [`paired_item`]'s order lies past the last unit (of `units`): the
/// block is done.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
pub(super) fn paired_done(item: u32, grid: u32, units: u32) -> bool {
    let (k, b) = (item / grid, item % grid);
    b as u64 + (k / 2) as u64 * grid as u64 >= units as u64
}

/// Two f32 values rounded to `T` (bf16 or f16) and packed as one register, the first in the
/// low half: an A-fragment register of `mma`/`wgmma`, or a pair of `out`.
#[inline(always)]
pub(super) fn pack<T: Half16>(a: f32, b: f32) -> u32 {
    use ferrocuda_device::half::{bf16x2, f16x2};
    if T::BF16 {
        bf16x2::from_f32s(a, b).to_bits()
    } else {
        f16x2::from_f32s(a, b).to_bits()
    }
}

/// One head of `out`: its base, strides and extents (made per item: see [`here`]).
#[derive(Clone, Copy)]
pub(super) struct OutHead {
    ptr: *mut u16,
    rows: u32,
    cols: u32,
    row_stride: isize,
    col_stride: isize,
}

impl OutHead {
    /// Head `(b, h)` of `out` (B, H, S_q, D).
    #[inline(always)]
    pub(super) fn of<T: Half16>(out: ViewMut<T, 4>, b: u32, h: u32) -> OutHead {
        let ix = out.indexer();
        let [_, _, rows, cols] = out.shape();
        OutHead {
            ptr: out
                .as_mut_ptr()
                .wrapping_offset(ix.offset([b as usize, h as usize, 0, 0]))
                .cast::<u16>(),
            rows: here32(rows as u32),
            cols: here32(cols as u32),
            row_stride: here(ix.strides[2]),
            col_stride: here(ix.strides[3]),
        }
    }

    /// The `rows` × `cols` block at row `row0`, column 0 when it lies inside the head, its
    /// columns have unit stride, and its first element and row pitch are multiples of 4
    /// bytes (so that every pair at an even column is one aligned 4-byte store); `None`
    /// otherwise.
    #[cfg(ferrocuda_arch = "sm_90a")]
    #[inline(always)]
    pub(super) fn whole(self, row0: u32, rows: u32, cols: u32) -> Option<WholeBlock> {
        let first = self
            .ptr
            .wrapping_offset((row0 as isize).wrapping_mul(self.row_stride));
        let fits = row0 as u64 + rows as u64 <= self.rows as u64 && cols <= self.cols;
        if !fits
            || self.col_stride != 1
            || self.row_stride % 2 != 0
            || !(first as usize).is_multiple_of(4)
        {
            return None;
        }
        Some(WholeBlock {
            first,
            pitch: self.row_stride,
        })
    }

    /// Stores `v0`, `v1` rounded to `T` at (row `row`, columns `col`, `col + 1`) where they
    /// lie inside the head: one 4-byte store when the row is contiguous and the pair aligned.
    #[inline(always)]
    pub(super) fn store_pair<T: Half16>(self, row: u32, col: u32, v0: f32, v1: f32) {
        if row >= self.rows || col >= self.cols {
            return;
        }
        let bits = pack::<T>(v0, v1);
        let at = (row as isize).wrapping_mul(self.row_stride)
            + (col as isize).wrapping_mul(self.col_stride);
        let p = self.ptr.wrapping_offset(at);
        if self.col_stride == 1 && col + 1 < self.cols && (p as usize).is_multiple_of(4) {
            // SAFETY: two elements inside `out` (checked), 4-byte aligned; each element has
            // one owner thread.
            unsafe { p.cast::<u32>().write(bits) };
            return;
        }
        // SAFETY: inside `out` (checked); one owner thread per element.
        unsafe { p.write(bits as u16) };
        if col + 1 < self.cols {
            // SAFETY: as above, the next column.
            unsafe {
                p.wrapping_offset(self.col_stride)
                    .write((bits >> 16) as u16)
            };
        }
    }
}

/// A block of an output head that lies wholly inside it with contiguous rows whose pitch and
/// first element are 4-byte aligned ([`OutHead::whole`]): its pairs are stored from one base
/// pointer at constant offsets, with no checks.
#[cfg(ferrocuda_arch = "sm_90a")]
#[derive(Clone, Copy)]
pub(super) struct WholeBlock {
    first: *mut u16,
    pitch: isize,
}

#[cfg(ferrocuda_arch = "sm_90a")]
impl WholeBlock {
    /// Stores `v0`, `v1` rounded to `T` at (row `row`, columns `col`, `col + 1`) of the block.
    ///
    /// # Safety
    ///
    /// (`row`, `col + 1`) inside the block [`OutHead::whole`] returned, `col` even; each
    /// element has one writer thread.
    #[inline(always)]
    pub(super) unsafe fn put_pair<T: Half16 + OutElem>(self, row: u32, col: u32, v0: f32, v1: f32) {
        let p = self
            .first
            .wrapping_offset(row as isize * self.pitch + col as isize);
        // SAFETY: inside the head (the caller's contract and `whole`'s checks), aligned to a
        // pair (aligned first element and pitch, even column); one writer.
        unsafe { T::write_pair(p.cast::<T>(), v0, v1) };
    }
}

/// Stores row `row`'s log-sum-exp into `lse` (B, H, S_q) at `(b, h, row)` when the row is
/// inside it: `ln Σ_j exp(scale · q_row · k_j)` over the keys the row sees, from the online
/// softmax's running maximum `m` (of the scores times `scale · log₂e`) and sum `l` (of
/// `2^(score − m)`): `(m + log₂ l) · ln 2`; −∞ for a row that sees no key (`l = 0`).
#[inline(always)]
pub(super) fn store_lse(lse: ViewMut<f32, 3>, b: u32, h: u32, row: u32, m: f32, l: f32) {
    let [_, _, rows] = lse.shape();
    if row as usize >= rows {
        return;
    }
    let value = if l > 0.0 {
        (m + GpuFloat::log2(l)) * core::f32::consts::LN_2
    } else {
        f32::NEG_INFINITY
    };
    let at = lse.indexer().offset([b as usize, h as usize, row as usize]);
    // SAFETY: inside `lse` (checked); each row has one owner thread.
    unsafe { lse.as_mut_ptr().wrapping_offset(at).write(value) };
}
