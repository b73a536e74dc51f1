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
    /// Source of copy 0 in `k` tile 0 (its row clamped into the operand).
    p: *const f32,
    /// Source distance between consecutive copies, and from one `k` tile to the next
    /// (elements).
    d: isize,
    step: isize,
    /// Destination of copy 0 in stage 0 (shared window, bytes).
    dst: u32,
    /// `k` of copy 0 within a tile.
    k0: u32,
    /// The copies whose rows lie inside the operand (bit `i`: copy `i`).
    rows: u32,
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
    /// (the shared-window address of the operand's tile in stage 0, row pitch `PITCH`).
    /// `op.outer > 0`.
    #[inline(always)]
    fn new<const MAP: u8, const TILE: usize, const PITCH: usize>(
        op: &Operand,
        t: usize,
        o0: usize,
        base: u32,
    ) -> Copies {
        let (o, k) = if MAP == BY_OUTER {
            (t % TILE, t / TILE)
        } else {
            (t / 8, t % 8)
        };
        let mut rows = 0u32;
        for i in 0..Self::count::<TILE>() {
            let r = if MAP == BY_OUTER {
                o0 + o
            } else {
                o0 + o + 32 * i
            };
            if r < op.outer {
                rows |= 1 << i;
            }
        }
        let row = (o0 + o).min(op.outer - 1);
        Copies {
            p: op
                .ptr
                .wrapping_offset(row as isize * op.so + k as isize * op.sk),
            d: if MAP == BY_OUTER {
                Self::dk::<MAP, TILE>() as isize * op.sk
            } else {
                32 * op.so
            },
            step: BK as isize * op.sk,
            dst: base + 4 * (k * PITCH + o) as u32,
            k0: k as u32,
            rows,
        }
    }

    /// Issues the copies of `k` tile `kt` into the stage `slot` bytes after stage 0; `left`
    /// is the count of the operand's `k` from the tile's first on (`>= BK`: a whole tile).
    /// Copies of rows beyond the operand, or of `k` at or beyond `left`, read nothing and
    /// write zeros (a zero-filled `k` is zero in both operands' tiles: it adds nothing).
    ///
    /// # Safety
    ///
    /// The copies' sources of tile `kt` with `k < left` in rows inside the operand are
    /// elements of it; the stage is one no thread reads until the copies' group is waited
    /// for and a block barrier passed, and no other copy of the block writes it meanwhile.
    #[inline(always)]
    unsafe fn issue<const MAP: u8, const TILE: usize, const PITCH: usize>(
        &self,
        kt: usize,
        slot: u32,
        left: usize,
    ) {
        let n = Self::count::<TILE>();
        let (dk, ddst) = (Self::dk::<MAP, TILE>(), Self::ddst::<MAP, TILE, PITCH>());
        let p = self.p.wrapping_offset(kt as isize * self.step);
        // SAFETY: (both arms) the caller's contract: the whole arm copies only elements inside
        // the operand (whole tile, every row inside); the other reads only those with ok.
        unsafe {
            if left >= BK && self.rows == (1u32 << n) - 1 {
                for_lanes!(8, |i| if i < n {
                    let src = p.wrapping_offset(i as isize * self.d);
                    cp_async::ca::<4>(self.dst + slot + i as u32 * ddst, src);
                });
            } else {
                for_lanes!(8, |i| if i < n {
                    let k = self.k0 as usize + i * dk;
                    let ok = k < left && self.rows & (1 << i) != 0;
                    let src = if ok {
                        p.wrapping_offset(i as isize * self.d)
                    } else {
                        self.p
                    };
                    let dst = self.dst + slot + i as u32 * ddst;
                    cp_async::ca_zfill::<4>(dst, src, if ok { 4 } else { 0 });
                });
            }
        }
    }
}

/// The fragments of row `k` of the stage `r` floats after stage 0 (`fa`, `fb`: this thread's
/// first fragment columns of stage 0's tiles).
///
/// # Safety
///
/// The stage's row `k` was written (copies waited for, block barrier passed) and is not being
/// written.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
unsafe fn fragments(fa: *const f32, fb: *const f32, r: usize, k: usize) -> Frag {
    // SAFETY: row k < BK of a stage, 16-byte aligned (pitches and offsets are multiples of 4
    // floats), written and synchronized (the caller).
    unsafe {
        let ra = fa.add(r + k * PA) as *const Chunk<f32, 4>;
        let rb = fb.add(r + k * PB) as *const Chunk<f32, 4>;
        let a: [[f32; 4]; 2] = [ra.read().0, ra.add(4).read().0];
        let b: [[f32; 4]; 4] = core::array::from_fn(|g| rb.add(8 * g).read().0);
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
        smem.wrapping_add(32 * wm + 4 * ly) as *const f32,
        smem.wrapping_add(STAGE_A + 128 * wn + 4 * lx) as *const f32,
    );
    let vec = out.vec();
    let bytes = (4 * STAGE) as u32;
    let mut tile = block_rank();
    while tile < tiles {
        let (m0, n0) = ((tile / tiles_n) * BM, (tile % tiles_n) * BN);
        let ca = Copies::new::<MA, BM, PA>(&opa, t, m0, base);
        let cb = Copies::new::<MB, BN, PB>(&opb, t, n0, base + 4 * STAGE_A as u32);
        let mut acc = [[0.0f32; 16]; 8];
        // SAFETY: (every copy, wait and fragment read below) tile kt goes to stage kt mod 3,
        // issued two tiles ahead: into the stage of tile kt - 1, which every thread finished
        // reading before the barrier at the end of step kt - 1 (its last fragments are read
        // before that barrier); a stage is read after `wait_group::<1>` (all but the newest
        // group of this thread complete) and the barrier that follows it (every thread's).
        unsafe {
            if kts > 0 {
                ca.issue::<MA, BM, PA>(0, 0, kk);
                cb.issue::<MB, BN, PB>(0, 0, kk);
            }
            cp_async::commit_group();
            if kts > 1 {
                ca.issue::<MA, BM, PA>(1, bytes, kk - BK);
                cb.issue::<MB, BN, PB>(1, bytes, kk - BK);
            }
            cp_async::commit_group();
            cp_async::wait_group::<1>();
            thread::sync_threads();
            let mut fr = ([[0.0; 4]; 2], [[0.0; 4]; 4]);
            if kts > 0 {
                fr = fragments(fa, fb, 0, 0);
            }
            // Offsets (floats) of the stage read and of the stage the copies fill.
            let (mut rd, mut wr) = (0usize, 2 * STAGE);
            let mut kt = 0;
            while kt < kts {
                // Each k's fragments are read while the previous k's FMAs run.
                for_lanes!(7, |k| {
                    let next = fragments(fa, fb, rd, k + 1);
                    outer_product(&mut acc, fr);
                    fr = next;
                });
                if kt + 2 < kts {
                    let left = kk - (kt + 2) * BK;
                    ca.issue::<MA, BM, PA>(kt + 2, 4 * wr as u32, left);
                    cb.issue::<MB, BN, PB>(kt + 2, 4 * wr as u32, left);
                }
                // Always one group per step (empty near the end), so that "all but the newest"
                // is always tile kt + 1.
                cp_async::commit_group();
                cp_async::wait_group::<1>();
                thread::sync_threads();
                rd = if rd == 2 * STAGE { 0 } else { rd + STAGE };
                wr = if wr == 2 * STAGE { 0 } else { wr + STAGE };
                let mut next = fr;
                if kt + 1 < kts {
                    next = fragments(fa, fb, rd, 0);
                }
                outer_product(&mut acc, fr);
                fr = next;
                kt += 1;
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
        if thread::block_threads() as usize != THREADS {
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
