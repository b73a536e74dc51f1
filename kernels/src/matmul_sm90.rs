//! `matmul_f32_sm90`: the `matmul` family's kernel on sm_90a (H100/H200) — the tiles, warp
//! layout, fragments and epilogue of the portable `matmul_f32`, with the operands' tiles
//! copied by `cp.async` through three stages and the `k` loop unrolled; see the
//! `matmul` module's documentation ("The sm_90a schedule").

#[cfg(ferrocuda_arch = "sm_90a")]
use crate::matmul::{
    outer_product, place, simple_parts, store_tile, tile_counts, Frag, Operand, Out, Parts, BK, BM,
    BN, PA, PB, STAGE_A, STAGE_B, THREADS,
};
#[cfg(ferrocuda_arch = "sm_90a")]
use crate::prelude::*;
#[cfg(ferrocuda_arch = "sm_90a")]
use ferrocuda_device::{cp_async, shared::shared_addr_of};
use ferrocuda_device::{kernel, View, ViewMut};

/// Shared stages of [`matmul_f32_sm90`]'s ring (the `k` tiles in flight).
#[cfg(ferrocuda_arch = "sm_90a")]
const STAGES: usize = 3;
/// Floats of one stage of the ring: the `A` tile, then the `B` tile.
#[cfg(ferrocuda_arch = "sm_90a")]
const STAGE: usize = STAGE_A + STAGE_B;

/// The `k` step of the unrolled loop at whose start the copies of the tile two ahead are
/// issued.
#[cfg(ferrocuda_arch = "sm_90a")]
const COPY_AT: usize = 0;

/// Copy mappings of an operand's tile onto the threads (4-byte `cp.async` copies, so any
/// strides): [`BY_OUTER`] — a warp copies 32 consecutive values of one `k` row (operands
/// contiguous along the outer axis); [`BY_K`] — a warp copies 8 `k` of 4 rows (operands
/// contiguous along `k`, and any other strides). Both write 32 distinct banks per warp (the
/// tiles' row pitches are 4 modulo 32 floats).
#[cfg(ferrocuda_arch = "sm_90a")]
const BY_OUTER: u8 = 0;
#[cfg(ferrocuda_arch = "sm_90a")]
const BY_K: u8 = 1;

/// One thread's `TILE / 32` copies of an operand's `TILE × BK` tiles, for one tile of `C`.
#[cfg(ferrocuda_arch = "sm_90a")]
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

#[cfg(ferrocuda_arch = "sm_90a")]
impl Copies {
    /// Copies per thread.
    const fn count<const TILE: usize>() -> usize {
        TILE / 32
    }

    /// `k` distance between consecutive copies ([`BY_K`]: all at one `k`).
    const fn dk<const MAP: u8, const TILE: usize>() -> usize {
        if MAP == BY_OUTER {
            THREADS / TILE
        } else {
            0
        }
    }

    /// Shared distance between consecutive copies (bytes).
    const fn ddst<const MAP: u8, const TILE: usize, const PITCH: usize>() -> u32 {
        if MAP == BY_OUTER {
            (4 * Self::dk::<MAP, TILE>() * PITCH) as u32
        } else {
            4 * 32
        }
    }

    /// Thread `t`'s copies of `op`'s tiles at outer offset `o0`, into stages based at `base`
    /// (the shared-window address of the operand's tile in stage 0, row pitch `PITCH`), the
    /// `k` tiles starting `shift < BK` before the operand's first `k`.
    #[inline(always)]
    fn new<const MAP: u8, const TILE: usize, const PITCH: usize>(
        op: &Operand,
        t: usize,
        o0: usize,
        base: u32,
        shift: usize,
    ) -> Copies {
        let (o, k) = if MAP == BY_OUTER {
            (t % TILE, t / TILE)
        } else {
            (t / 8, t % 8)
        };
        let (mut rows, mut first) = (0u32, 0u32);
        for i in 0..Self::count::<TILE>() {
            let r = if MAP == BY_OUTER {
                o0 + o
            } else {
                o0 + o + 32 * i
            };
            if r < op.outer {
                rows |= 1 << i;
                if k + i * Self::dk::<MAP, TILE>() >= shift {
                    first |= 1 << i;
                }
            }
        }
        Copies {
            p: op
                .ptr
                .wrapping_offset((o0 + o) as isize * op.so + (k as isize - shift as isize) * op.sk),
            d: if MAP == BY_OUTER {
                Self::dk::<MAP, TILE>() as isize * op.sk
            } else {
                32 * op.so
            },
            step: BK as isize * op.sk,
            dst: base + 4 * (k * PITCH + o) as u32,
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
    /// thread reads until the copies' group is waited for and a block barrier passed, and no
    /// other copy of the block writes it meanwhile.
    #[inline(always)]
    unsafe fn issue<const MAP: u8, const TILE: usize, const PITCH: usize>(
        &self,
        p: *const f32,
        slot: u32,
        mask: u32,
    ) {
        let n = Self::count::<TILE>();
        let ddst = Self::ddst::<MAP, TILE, PITCH>();
        for_lanes!(8, |i| if i < n {
            let src = p.wrapping_offset(i as isize * self.d);
            let bytes = if mask & (1 << i) != 0 { 4 } else { 0 };
            // SAFETY: the caller's contract (a copy outside `mask` reads nothing).
            unsafe { cp_async::ca_zfill::<4>(self.dst + slot + i as u32 * ddst, src, bytes) };
        });
    }
}

/// The stage after the one `s` floats after stage 0 (offsets in floats, 32-bit).
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
fn ring_next(s: u32) -> u32 {
    if s == ((STAGES - 1) * STAGE) as u32 {
        0
    } else {
        s + STAGE as u32
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
#[cfg(ferrocuda_arch = "sm_90a")]
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

/// The fragments of row `k` of the stage `r` floats after stage 0 (`fa`, `fb`: the shared
/// addresses of this thread's first fragment columns of stage 0's tiles).
///
/// # Safety
///
/// The stage's row `k` was written (copies waited for, block barrier passed) and is not being
/// written.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
unsafe fn fragments(fa: u32, fb: u32, r: u32, k: usize) -> Frag {
    let ra = fa + 4 * (r + (k * PA) as u32);
    let rb = fb + 4 * (r + (k * PB) as u32);
    // SAFETY: row k < BK of a stage, 16-byte aligned (pitches and offsets are multiples of 4
    // floats), written and synchronized (the caller).
    unsafe {
        // A: rows {0, 16} + 0..4 of the lane's; B: columns 32·g + 0..4 (4 bytes a float).
        let a: [[f32; 4]; 2] = [lds128(ra), lds128(ra + 4 * 16)];
        let b: [[f32; 4]; 4] = core::array::from_fn(|g| lds128(rb + 4 * 32 * g as u32));
        (a, b)
    }
}

/// The sm_90a schedule with copy mappings `MA` and `MB` (see the module documentation).
///
/// # Safety
///
/// As `matmul` (the portable schedule's), with blocks of [`THREADS`] threads.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
unsafe fn tiles_async<const MA: u8, const MB: u8>(opa: Operand, opb: Operand, out: Out) {
    let (m, n, kk) = (opa.outer, opb.outer, opa.k);
    let t = thread::rank_in_block() as usize;
    // The tiles and places of `tiles`.
    let (wm, wn, ly, lx) = place!(t);
    let (tiles_n, tiles) = tile_counts(m, n);
    let kts = kk.div_ceil(BK);
    // Three stages of (A tile, B tile): 36.75 KiB.
    let smem = shared_array!(f32, STAGES * STAGE, align = 16).as_mut_ptr();
    let base = shared_addr_of(smem);
    let (fa, fb) = (
        base + 4 * (32 * wm + 4 * ly) as u32,
        base + 4 * (STAGE_A + 128 * wn + 4 * lx) as u32,
    );
    let vec = out.vec();
    let bytes = (4 * STAGE) as u32;
    let mut tile = block_rank();
    // `k` tiles start `shift` before the first `k`: tile 0 holds the remainder (its first
    // `shift` rows zero-filled), the others are whole, so that the loop's copies need no `k`
    // bounds (the zeros come first: each element is still its K FMAs in `k` order from +0).
    let shift = kts * BK - kk;
    // Tile counts in 32 bits (the loop counter and stage offsets stay 32-bit); larger K takes
    // the simple loop (the caller).
    let kts = kts as u32;
    while tile < tiles {
        let (m0, n0) = ((tile / tiles_n) * BM, (tile % tiles_n) * BN);
        let ca = Copies::new::<MA, BM, PA>(&opa, t, m0, base, shift);
        let cb = Copies::new::<MB, BN, PB>(&opb, t, n0, base + 4 * STAGE_A as u32, shift);
        let mut acc = [[0.0f32; 16]; 8];
        if kts > 0 {
            // SAFETY: (every copy, wait and fragment read below) tile kt goes to stage kt mod 3,
            // issued two tiles ahead: into the stage of tile kt - 1, which every thread finished
            // reading before the barrier at the end of step kt - 1 (its last fragments are read
            // before that barrier); a stage is read after `wait_group::<1>` (all but the newest
            // group of this thread complete) and the barrier that follows it (every thread's).
            // Tiles beyond the last are zero-filled copies into free stages (read once, at the
            // end, and unused); all are complete before the tile's epilogue (`wait_all`), so none
            // is in flight when the next tile's copies start.
            unsafe {
                let (mut pa, mut pb) = (ca.p, cb.p);
                ca.issue::<MA, BM, PA>(pa, 0, ca.first);
                cb.issue::<MB, BN, PB>(pb, 0, cb.first);
                cp_async::commit_group();
                pa = pa.wrapping_offset(ca.step);
                pb = pb.wrapping_offset(cb.step);
                let live = kts > 1;
                ca.issue::<MA, BM, PA>(pa, bytes, if live { ca.rows } else { 0 });
                cb.issue::<MB, BN, PB>(pb, bytes, if live { cb.rows } else { 0 });
                cp_async::commit_group();
                cp_async::wait_group::<1>();
                thread::sync_threads();
                let mut fr = fragments(fa, fb, 0, 0);
                // Offsets (floats) of the stage read and of the stage the copies fill.
                let (mut rd, mut wr) = (0u32, ((STAGES - 1) * STAGE) as u32);
                let mut kt = 0u32;
                while kt < kts {
                    // Each k's fragments are read while the previous k's FMAs run.
                    for_lanes!(7, |k| {
                        if k == COPY_AT {
                            pa = pa.wrapping_offset(ca.step);
                            pb = pb.wrapping_offset(cb.step);
                            let live = kt + 2 < kts;
                            ca.issue::<MA, BM, PA>(pa, 4 * wr, if live { ca.rows } else { 0 });
                            cb.issue::<MB, BN, PB>(pb, 4 * wr, if live { cb.rows } else { 0 });
                        }
                        let next = fragments(fa, fb, rd, k + 1);
                        outer_product(&mut acc, fr);
                        fr = next;
                    });
                    cp_async::commit_group();
                    cp_async::wait_group::<1>();
                    thread::sync_threads();
                    (rd, wr) = (ring_next(rd), ring_next(wr));
                    // The next tile's first fragments (past the last tile: zeros, unused).
                    let next = fragments(fa, fb, rd, 0);
                    outer_product(&mut acc, fr);
                    fr = next;
                    kt += 1;
                }
                cp_async::wait_all();
            }
        }
        // The tiles and places partition C among the blocks and threads.
        store_tile!(out, acc, vec, (wm, wn, ly, lx), [m0, n0], [m, n]);
        // The next tile's first copies go to stages that slower threads may still read.
        thread::sync_threads();
        tile += blocks();
    }
}

/// [`simple_parts`] as a call, not inlined, its arguments scalars (aggregates would pass
/// through local memory): inlined, its registers weighed on the allocation of the tiled
/// schedule's and ptxas spilled the sm_90a kernel.
///
/// # Safety
///
/// As [`simple_parts`].
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn simple_call(
    pa: *const f32,
    sa0: isize,
    sa1: isize,
    pb: *const f32,
    sb0: isize,
    sb1: isize,
    pc: *mut f32,
    sc0: isize,
    sc1: isize,
    m: usize,
    n: usize,
    kk: usize,
    alpha: f32,
    beta: f32,
) {
    let parts = (pa, [sa0, sa1], pb, [sb0, sb1], pc, [sc0, sc1]);
    // SAFETY: forwarded contract.
    unsafe { simple_parts(parts, [m, n, kk], alpha, beta) }
}

/// `c = alpha · a @ b + beta · c` in `f32`: `matmul_f32` with the sm_90a schedule — the
/// same arguments, results (each element the same K fused multiply-adds in `k` order) and
/// block rules (blocks of 256 threads: one 128×256 tile of `c` at a time; smaller blocks a
/// simple loop; larger ones refused), with the tiles of `a` and `b` copied to shared memory by
/// `cp.async` through three stages and each `k`'s fragments read while the previous `k`'s FMAs
/// run. Built for sm_90a (H100/H200): the `matmul` family runs it there, `matmul_f32`
/// elsewhere.
#[kernel(family = "matmul", arch = "sm_90a", items_per_thread = 128, max_threads = 256,
         require(a.shape[1] == b.shape[0], "the inner dimensions of a and b must agree"),
         require(c.shape[0] == a.shape[0], "c must have a's row count"),
         require(c.shape[1] == b.shape[1], "c must have b's column count"),
         require(c.ptr() != a.ptr(), "c must not be a"),
         require(c.ptr() != b.ptr(), "c must not be b"))]
pub unsafe fn matmul_f32_sm90(
    a: View<f32, 2>,
    b: View<f32, 2>,
    c: ViewMut<f32, 2>,
    alpha: f32,
    beta: f32,
) {
    #[cfg(ferrocuda_arch = "sm_90a")]
    // SAFETY: launched as a kernel over host-validated views whose shapes agree.
    unsafe {
        let [m, kk] = a.shape();
        let n = b.shape()[1];
        let ([sa0, sa1], [sb0, sb1], [sc0, sc1]) = (
            a.indexer().strides,
            b.indexer().strides,
            c.indexer().strides,
        );
        // Blocks other than THREADS threads, and K beyond 32-bit tile counts: the simple loop.
        if thread::block_threads() as usize != THREADS || kk.div_ceil(BK) > u32::MAX as usize {
            let (pa, pb, pc) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
            return simple_call(
                pa, sa0, sa1, pb, sb0, sb1, pc, sc0, sc1, m, n, kk, alpha, beta,
            );
        }
        let (opa, opb) = Operand::of(&a, &b);
        let cv = Out::new(c, alpha, beta);
        match (opa.so == 1, opb.so == 1) {
            (false, true) => tiles_async::<BY_K, BY_OUTER>(opa, opb, cv),
            (true, true) => tiles_async::<BY_OUTER, BY_OUTER>(opa, opb, cv),
            (false, false) => tiles_async::<BY_K, BY_K>(opa, opb, cv),
            (true, false) => tiles_async::<BY_OUTER, BY_K>(opa, opb, cv),
        }
    }
}
