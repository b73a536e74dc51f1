//! `matmul_f32`'s tiled schedule (the parent module's documentation): the copies of the
//! operands' tiles into a group's ring, the fragment loads, the outer products, the barrier of
//! a group and the loop over the tiles of `C`.

use super::operands::{Operand, Out};
use super::shape::{Shape, BK, STAGES};
use crate::prelude::*;
use ferrocuda_device::cp_async;

/// The `k` step of the unrolled loop at whose start the copies of the tile two ahead are
/// issued.
const COPY_AT: usize = 0;

/// Copy mappings of an operand's tile onto the threads (4-byte `cp.async` copies, so any
/// strides): [`BY_OUTER`] — a warp copies 32 consecutive values of one `k` row (operands
/// contiguous along the outer axis); [`BY_K`] — a warp copies 8 `k` of 4 rows (operands
/// contiguous along `k`, and any other strides). Both write 32 distinct banks per warp (the
/// tiles' row pitches are 4 modulo 32 floats).
pub(super) const BY_OUTER: u8 = 0;
pub(super) const BY_K: u8 = 1;

/// One thread's copies of an operand's `TILE × BK` tiles (`BK · TILE / THREADS` of them), for
/// one tile of `C`.
#[derive(Clone, Copy)]
struct Copies {
    /// Source of copy 0 in `k` tile 0 (`k` tiles start `shift` before the operand's first
    /// `k`: the first tile holds the remainder of `K` modulo `BK`, every later tile is whole).
    p: *const f32,
    /// Source distance between consecutive copies, and from one `k` tile to the next
    /// (elements).
    d: isize,
    step: isize,
    /// Destination of copy 0 in stage 0 (shared window, bytes).
    dst: u32,
    /// The copies whose rows lie inside the operand (bit `i`: copy `i`).
    rows: u32,
    /// The copies of `k` tile 0 that read: their rows inside, their `k` not before the first.
    first: u32,
}

impl Copies {
    /// The operand's tile extent and row pitch in shape `S` (`IS_A`: `A`'s, else `B`'s).
    const fn tile<S: Shape, const IS_A: bool>() -> (usize, usize) {
        if IS_A {
            (S::BM, S::PA)
        } else {
            (S::BN, S::PB)
        }
    }

    /// Copies per thread.
    const fn count<S: Shape, const IS_A: bool>() -> usize {
        BK * Self::tile::<S, IS_A>().0 / S::THREADS
    }

    /// `k` distance between consecutive copies ([`BY_K`]: all at one `k`).
    const fn dk<S: Shape, const MAP: u8, const IS_A: bool>() -> usize {
        if MAP == BY_OUTER {
            S::THREADS / Self::tile::<S, IS_A>().0
        } else {
            0
        }
    }

    /// Outer distance between consecutive copies ([`BY_K`]: the rows of one pass, 8 threads
    /// a row; [`BY_OUTER`]: all in one row).
    const fn dout<S: Shape, const MAP: u8>() -> usize {
        if MAP == BY_OUTER {
            0
        } else {
            S::THREADS / BK
        }
    }

    /// Shared distance between consecutive copies (bytes).
    const fn ddst<S: Shape, const MAP: u8, const IS_A: bool>() -> u32 {
        let pitch = Self::tile::<S, IS_A>().1;
        (4 * (Self::dk::<S, MAP, IS_A>() * pitch + Self::dout::<S, MAP>())) as u32
    }

    /// Thread `t`'s (rank in its group) copies of `op`'s tiles at outer offset `o0`, into
    /// stages based at `base` (the shared-window address of the operand's tile in stage 0),
    /// the `k` tiles starting `shift < BK` before the operand's first `k`.
    #[inline(always)]
    fn new<S: Shape, const MAP: u8, const IS_A: bool>(
        op: &Operand,
        t: usize,
        o0: usize,
        base: u32,
        shift: usize,
    ) -> Copies {
        let (tile, pitch) = Self::tile::<S, IS_A>();
        let (o, k) = if MAP == BY_OUTER {
            (t % tile, t / tile)
        } else {
            (t / BK, t % BK)
        };
        let (dk, dout) = (Self::dk::<S, MAP, IS_A>(), Self::dout::<S, MAP>());
        let (mut rows, mut first) = (0u32, 0u32);
        for i in 0..Self::count::<S, IS_A>() {
            if o0 + o + dout * i < op.outer {
                rows |= 1 << i;
                if k + i * dk >= shift {
                    first |= 1 << i;
                }
            }
        }
        Copies {
            p: op
                .ptr
                .wrapping_offset((o0 + o) as isize * op.so + (k as isize - shift as isize) * op.sk),
            d: dk as isize * op.sk + dout as isize * op.so,
            step: BK as isize * op.sk,
            dst: base + 4 * (k * pitch + o) as u32,
            rows,
            first,
        }
    }

    /// Issues the copies from `p` (copy 0's source in this `k` tile) into the stage `slot`
    /// bytes after stage 0: copy `i` reads if bit `i` of `mask` is set, and otherwise reads
    /// nothing and writes zeros. No branch: the copies are predicated, so that ptxas schedules
    /// them among the FMAs.
    ///
    /// # Safety
    ///
    /// The sources of the copies in `mask` are elements of the operand; the stage is one no
    /// thread reads until the copies' group is waited for and the group's barrier passed, and
    /// no other copy of the block writes it meanwhile.
    #[inline(always)]
    unsafe fn issue<S: Shape, const MAP: u8, const IS_A: bool>(
        &self,
        p: *const f32,
        slot: u32,
        mask: u32,
    ) {
        let n = Self::count::<S, IS_A>();
        let ddst = Self::ddst::<S, MAP, IS_A>();
        for_lanes!(8, |i| if i < n {
            let src = p.wrapping_offset(i as isize * self.d);
            let bytes = if mask & (1 << i) != 0 { 4 } else { 0 };
            // SAFETY: the caller's contract (a copy outside `mask` reads nothing).
            unsafe { cp_async::ca_zfill::<4>(self.dst + slot + i as u32 * ddst, src, bytes) };
        });
    }
}

/// The stage after the one `s` floats after stage 0 of a ring of shape `S` (offsets in
/// floats, 32-bit).
#[inline(always)]
fn ring_next<S: Shape>(s: u32) -> u32 {
    if s == ((STAGES - 1) * S::STAGE) as u32 {
        0
    } else {
        s + S::STAGE as u32
    }
}

/// Four floats at `addr` (shared window, 16-byte aligned): one `ld.shared.v4.f32`, opaque to
/// LLVM (which otherwise merges the fragment loads before the loop and at its end into scalar
/// loads through a phi of addresses).
///
/// # Safety
///
/// `addr` is the shared-window address of 16 bytes of this block's shared memory, aligned to
/// 16, that no thread writes meanwhile.
#[inline(always)]
unsafe fn lds128(addr: u32) -> [f32; 4] {
    let (x, y, z, w): (f32, f32, f32, f32);
    // SAFETY: the caller's contract; reads shared memory only.
    unsafe {
        core::arch::asm!(
            "ld.shared.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
            a = in(reg32) addr,
            x = out(reg32) x,
            y = out(reg32) y,
            z = out(reg32) z,
            w = out(reg32) w,
            options(pure, readonly, nostack),
        )
    };
    [x, y, z, w]
}

/// The fragments of row `k` of the stage `r` floats after stage 0 of a ring of shape `S`
/// (`fa`, `fb`: the shared addresses of this thread's first fragment columns of stage 0's
/// tiles).
///
/// # Safety
///
/// The stage's row `k` was written (copies waited for, the group's barrier passed) and is not
/// being written.
#[inline(always)]
unsafe fn fragments<S: Shape>(fa: u32, fb: u32, r: u32, k: usize) -> Frag {
    let ra = fa + 4 * (r + (k * S::PA) as u32);
    let rb = fb + 4 * (r + (k * S::PB) as u32);
    let (da, db) = ((4 * 4 * S::LY) as u32, (4 * 4 * S::LX) as u32);
    // SAFETY: row k < BK of a stage, 16-byte aligned (pitches and offsets are multiples of 4
    // floats), written and synchronized (the caller).
    unsafe {
        // A: rows {0, 4·LY} + 0..4 of the lane's; B: columns 4·LX·g + 0..4 (4 bytes a float).
        let a: [[f32; 4]; 2] = [lds128(ra), lds128(ra + da)];
        let b: [[f32; 4]; 4] = core::array::from_fn(|g| lds128(rb + db * g as u32));
        (a, b)
    }
}

/// A thread's fragments of one `k`: 8 values of `A` (rows `{0, 4·LY} + 0..4` of its own) and
/// 16 of `B` (columns `4·LX·g + 0..4`).
type Frag = ([[f32; 4]; 2], [[f32; 4]; 4]);

/// `acc += a ⊗ b` for one `k`: 128 fused multiply-adds, written out (constant indices: the
/// accumulators stay in registers).
#[inline(always)]
fn outer_product(acc: &mut [[f32; 16]; 8], (af, bf): Frag) {
    for_lanes!(8, |i| for_lanes!(16, |j| {
        acc[i][j] = fma(af[i / 4][i % 4], bf[j / 4][j % 4], acc[i][j]);
    }));
}

/// The barrier of this thread's group in shape `S`: the block's (`bar.sync 0`) or the
/// group's own (`bar.sync 1 + group, S::THREADS`).
///
/// # Safety
///
/// Every thread of the group reaches the same call (warp-uniform: groups are whole warps);
/// `group` is this thread's group, fewer than 15.
#[inline(always)]
unsafe fn group_sync<S: Shape>(group: usize) {
    if S::WHOLE {
        thread::sync_threads();
    } else {
        // SAFETY: barrier 1 + group < 16, S::THREADS a multiple of 32 (`Shape::CHECK`); the
        // group's warps, all of them, reach it (the caller), and no other group uses it.
        unsafe { thread::sync_warps(1 + group as u32, S::THREADS as u32) };
    }
}

/// The tiled schedule of shape `S` with copy mappings `MA` and `MB` (see the module
/// documentation), its rings from `smem` (the shared-window address of at least
/// [`MATMUL_SMEM`](super::MATMUL_SMEM) bytes, 16-byte aligned).
///
/// # Safety
///
/// Kernel-launch context, blocks of `S::THREADS` threads (a multiple of them, fewer than 15
/// groups, where `S` is not `WHOLE`); the operands' shapes agree, `C` ([`Out`]) is `M × N` and
/// overlaps neither operand; `K` is at most `u32::MAX` tiles; `smem` as above, touched by
/// nothing else.
#[inline(always)]
pub(super) unsafe fn tiles<S: Shape, const MA: u8, const MB: u8>(
    opa: Operand,
    opb: Operand,
    out: Out,
    smem: u32,
) {
    #[allow(clippy::let_unit_value)]
    let () = S::CHECK;
    let (m, n, kk) = (opa.outer, opb.outer, opa.k);
    let r = thread::rank_in_block() as usize;
    // The group: its rank among the block's groups and this thread's rank in it.
    let (groups, group, t) = if S::WHOLE {
        (1, 0, r)
    } else {
        (
            thread::block_threads() as usize / S::THREADS,
            r / S::THREADS,
            r % S::THREADS,
        )
    };
    // Warp (wm, wn) covers rows WTM·wm.. and columns WTN·wn.. of the tile; lane (ly, lx) rows
    // {0, 4·LY} + 4·ly + 0..4 and columns 4·LX·g + 4·lx + 0..4 of those. A warp's fragment
    // loads then touch LY (A) or LX (B) consecutive 16-byte words: one wavefront each.
    let (w, lane) = (t / 32, t % 32);
    let (wm, wn, ly, lx) = (w / S::WN, w % S::WN, lane / S::LX, lane % S::LX);
    let tiles_n = n.div_ceil(S::BN);
    let tiles = m.div_ceil(S::BM) * tiles_n;
    let kts = kk.div_ceil(BK);
    // The group's ring of three stages of (A tile, B tile).
    let base = smem + (4 * S::RING * group) as u32;
    let (fa, fb) = (
        base + 4 * (S::WTM * wm + 4 * ly) as u32,
        base + 4 * (S::STAGE_A + S::WTN * wn + 4 * lx) as u32,
    );
    let vec = out.vec();
    let bytes = (4 * S::STAGE) as u32;
    // The block's groups take consecutive tiles, `groups` at a time: a loop whose bounds are
    // the block's (every barrier of the loop reached by every warp, whatever its group). A
    // group whose tile lies past the last (the last step of an odd count) computes it all the
    // same — its rows are past `M`: `A`'s copies zero-fill, the epilogue stores nothing.
    let mut step = block_rank();
    // `k` tiles start `shift` before the first `k`: tile 0 holds the remainder (its first
    // `shift` rows zero-filled), the others are whole, so that the loop's copies need no `k`
    // bounds (the zeros come first: each element is still its K FMAs in `k` order from +0).
    let shift = kts * BK - kk;
    // Tile counts in 32 bits (the loop counter and stage offsets stay 32-bit); larger K takes
    // the simple loop (the caller).
    let kts = kts as u32;
    while step * groups < tiles {
        let tile = step * groups + group;
        let (m0, n0) = ((tile / tiles_n) * S::BM, (tile % tiles_n) * S::BN);
        let ca = Copies::new::<S, MA, true>(&opa, t, m0, base, shift);
        let cb = Copies::new::<S, MB, false>(&opb, t, n0, base + 4 * S::STAGE_A as u32, shift);
        let mut acc = [[0.0f32; 16]; 8];
        if kts > 0 {
            // SAFETY: (every copy, wait and fragment read below) tile kt goes to stage kt mod 3
            // of the group's ring, issued two tiles ahead: into the stage of tile kt - 1, which
            // every thread of the group finished reading before the group's barrier at the end
            // of step kt - 1 (its last fragments are read before that barrier); a stage is read
            // after `wait_group::<1>` (all but the newest group of this thread complete) and
            // the barrier that follows it (every thread's of the group: only they copy into
            // the ring). Tiles beyond the last are zero-filled copies into free stages (read
            // once, at the end, and unused); all are complete before the tile's epilogue
            // (`wait_all`), so none is in flight when the next tile's copies start.
            unsafe {
                let (mut pa, mut pb) = (ca.p, cb.p);
                ca.issue::<S, MA, true>(pa, 0, ca.first);
                cb.issue::<S, MB, false>(pb, 0, cb.first);
                cp_async::commit_group();
                pa = pa.wrapping_offset(ca.step);
                pb = pb.wrapping_offset(cb.step);
                let live = kts > 1;
                ca.issue::<S, MA, true>(pa, bytes, if live { ca.rows } else { 0 });
                cb.issue::<S, MB, false>(pb, bytes, if live { cb.rows } else { 0 });
                cp_async::commit_group();
                cp_async::wait_group::<1>();
                group_sync::<S>(group);
                let mut fr = fragments::<S>(fa, fb, 0, 0);
                // Offsets (floats) of the stage read and of the stage the copies fill.
                let (mut rd, mut wr) = (0u32, ((STAGES - 1) * S::STAGE) as u32);
                let mut kt = 0u32;
                while kt < kts {
                    // Each k's fragments are read while the previous k's FMAs run.
                    for_lanes!(7, |k| {
                        if k == COPY_AT {
                            pa = pa.wrapping_offset(ca.step);
                            pb = pb.wrapping_offset(cb.step);
                            let live = kt + 2 < kts;
                            ca.issue::<S, MA, true>(pa, 4 * wr, if live { ca.rows } else { 0 });
                            cb.issue::<S, MB, false>(pb, 4 * wr, if live { cb.rows } else { 0 });
                        }
                        let next = fragments::<S>(fa, fb, rd, k + 1);
                        outer_product(&mut acc, fr);
                        fr = next;
                    });
                    cp_async::commit_group();
                    cp_async::wait_group::<1>();
                    group_sync::<S>(group);
                    (rd, wr) = (ring_next::<S>(rd), ring_next::<S>(wr));
                    // The next tile's first fragments (past the last tile: zeros, unused).
                    let next = fragments::<S>(fa, fb, rd, 0);
                    outer_product(&mut acc, fr);
                    fr = next;
                    kt += 1;
                }
                cp_async::wait_all();
            }
        }
        // Epilogue: rows m0 + WTM·wm + {0, 4·LY} + 4·ly + 0..4, columns n0 + WTN·wn +
        // 4·LX·g + 4·lx + 0..4. Written out (constant indices into `acc`: registers, never
        // local memory).
        for_lanes!(8, |i| {
            let row = m0 + S::WTM * wm + (i / 4) * 4 * S::LY + 4 * ly + i % 4;
            if row < m {
                let r = acc[i];
                for_lanes!(4, |g| {
                    let v = [r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]];
                    let col = n0 + S::WTN * wn + 4 * S::LX * g + 4 * lx;
                    // SAFETY: (row, col + j) checked against (m, n) before every access; this
                    // thread alone owns these elements of C (the tiles and the places
                    // partition C among the groups and threads).
                    unsafe { out.store_quad(row, col, n, vec, v) };
                });
            }
        });
        // The next tile's first copies go to stages that slower threads of the group may
        // still read.
        // SAFETY: reached by every thread of the group (the loop's bounds are the group's).
        unsafe { group_sync::<S>(group) };
        step += blocks();
    }
}
