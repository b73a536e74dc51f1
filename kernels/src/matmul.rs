//! `matmul`: `C = α·A·B + β·C` in `f32` on CUDA cores (no tensor cores), for strided 2-D views:
//! the "SGEMM" of BLAS, TF32 off. One kernel, `matmul_f32`, built for sm_80 and sm_90 (its
//! SASS for sm_90 is the same as for sm_90a: no sm_90a instruction would help it).
//!
//! # Schedule (blocks of 256 threads)
//!
//! Each block computes 128×256 tiles of `C` (a grid-stride loop over tiles, so any grid is
//! correct), walking `K` in tiles of 8:
//!
//! * **Register blocking**: each thread accumulates an 8×16 sub-tile of `C` (128 `f32`), as
//!   two 4-row groups 16 apart by four 4-column groups 32 apart; per `k` it reads 8 values of
//!   `A` and 16 of `B` from shared memory with six 16-byte loads (`ld.shared.v4`) and issues
//!   128 fused multiply-adds (`fma.rn.f32`, written out: the crate is not built with FMA
//!   contraction). With an 8×8 sub-tile the shared loads (one wavefront each) would keep the
//!   shared-memory pipe as busy as the FMA pipe; 8×16 leaves it a margin.
//! * **Warp layout**: 4×2 warps, each of 4×8 lanes covering 32×128 of the tile, so each of a
//!   warp's shared loads touches 4 (A) or 8 (B) consecutive 16-byte words — one wavefront, no
//!   bank conflict.
//! * **Shared tiles**: `A` stored transposed (`As[k][m]`) and `B` as is (`Bs[k][n]`), rows
//!   padded by 4 floats; three stages, filled by `cp.async` two tiles ahead, one barrier per
//!   tile — no register staging and no shared stores in the loop. The copies are 4 bytes each,
//!   so one code path serves any strides: a warp copies 32 consecutive values of a `k` row, or
//!   8 `k` of 4 rows, whichever axis the operand is contiguous along; both write 32 distinct
//!   banks per warp (the pitches are 4 modulo 32 floats). They go through L1 (`.ca`): the
//!   `k`-contiguous operand's rows are read one sector per row per warp, the sector's other
//!   values from L1 by the next copies.
//! * **Unrolled `k`**: the 8 `k` of a tile are unrolled, each `k`'s fragments read while the
//!   previous `k`'s FMAs run (two fragment sets in registers).
//! * **Epilogue**: `C` is written with 16-byte stores where its rows allow; `β = 0` never reads
//!   `C` (BLAS semantics: NaN in `C` is overwritten).
//!
//! The loop has no branch but its back edge, so that ptxas schedules the copies and the
//! shared loads among the FMAs (a branch ends a basic block, and ptxas schedules within one):
//! * the `k` tiles start `K mod 8` before the first `k` — tile 0 holds the remainder, its
//!   first rows zero-filled, every later tile is whole (the zeros come first, so each element
//!   is still its K FMAs in `k` order from +0) — and the copies of a tile are predicated by a
//!   mask of the rows inside the operand, fixed for a tile of `C`;
//! * past the last tile the copies zero-fill free stages instead of being skipped, and the
//!   next tile's first fragments are read unconditionally (zeros, unused); every copy is
//!   complete before the epilogue;
//! * the copies are issued at the start of a tile's step, before its shared loads (ptxas
//!   cannot tell a copy's shared destination from a load's source, so loads before the copies
//!   in program order would be bunched ahead of them);
//! * the fragments are read by `ld.shared.v4` in `asm!` (LLVM otherwise merges the loads
//!   before the loop and at its end into scalar loads through a phi of addresses).
//!
//! The loop's SASS (`bench/sass_loop.py`) is cuBLAS's shape: 1157 instructions per tile
//! (cuBLAS 1154), stall counts summing to 1173–1213 (1161), no register-bank-conflicting FMA;
//! 231 registers on sm_90 (236 on sm_80), no spill. On the H200: 0.955× cuBLAS's SGEMM for
//! `a @ b` at 4096³ and 0.875× for `x @ w.T` (both operands contiguous along `k`, whose copies
//! crowd the shared-memory pipe; BENCHMARKS.md, SGEMM). The schedules before it: the same loop with
//! a whole-tile branch around the copies (sm_90a only, 1194 instructions and 1399–1442 cycles;
//! ncu: 0.20 wait stalls per instruction; 0.84–0.88× cuBLAS's SGEMM at 4096³ and 8192³), and
//! register-staged double buffering with 16-byte global loads (0.80–0.81×).
//!
//! Launch bounds: blocks of at most 256 threads (`max_threads = 256`, PTX `.maxntid`; larger
//! blocks are refused by the launcher), which lets ptxas give each thread the registers the
//! 8×16 accumulators and two fragment sets need, without spills: one block per SM. Smaller
//! blocks run a simple correct loop (one thread per element of `C`), as does a `K` of more than
//! `u32::MAX` tiles.

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{cp_async, shared::shared_addr_of, space::global};
use ferrocuda_device::{kernel, View, ViewMut};

/// Rows of `C` per block tile (the `A` tile's outer extent).
#[cfg(target_arch = "nvptx64")]
const BM: usize = 128;
/// Columns of `C` per block tile (the `B` tile's outer extent).
#[cfg(target_arch = "nvptx64")]
const BN: usize = 256;
#[cfg(target_arch = "nvptx64")]
const BK: usize = 8;
/// Row pitches of the shared tiles (floats): 4 of padding, 4 modulo 32, so that a warp's
/// copies write 32 distinct banks in either mapping ([`BY_OUTER`], [`BY_K`]).
#[cfg(target_arch = "nvptx64")]
const PA: usize = BM + 4;
#[cfg(target_arch = "nvptx64")]
const PB: usize = BN + 4;
/// Floats of one stage of each operand.
#[cfg(target_arch = "nvptx64")]
const STAGE_A: usize = BK * PA;
#[cfg(target_arch = "nvptx64")]
const STAGE_B: usize = BK * PB;
#[cfg(target_arch = "nvptx64")]
const THREADS: usize = 256;

/// Shared stages of the ring (the `k` tiles in flight).
#[cfg(target_arch = "nvptx64")]
const STAGES: usize = 3;
/// Floats of one stage of the ring: the `A` tile, then the `B` tile.
#[cfg(target_arch = "nvptx64")]
const STAGE: usize = STAGE_A + STAGE_B;

/// The `k` step of the unrolled loop at whose start the copies of the tile two ahead are
/// issued.
#[cfg(target_arch = "nvptx64")]
const COPY_AT: usize = 0;

/// Copy mappings of an operand's tile onto the threads (4-byte `cp.async` copies, so any
/// strides): [`BY_OUTER`] — a warp copies 32 consecutive values of one `k` row (operands
/// contiguous along the outer axis); [`BY_K`] — a warp copies 8 `k` of 4 rows (operands
/// contiguous along `k`, and any other strides). Both write 32 distinct banks per warp (the
/// tiles' row pitches are 4 modulo 32 floats).
#[cfg(target_arch = "nvptx64")]
const BY_OUTER: u8 = 0;
#[cfg(target_arch = "nvptx64")]
const BY_K: u8 = 1;

/// An operand as the tile loader sees it: `outer` is `m` for `A` and `n` for `B`.
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
struct Operand {
    ptr: *const f32,
    /// Element strides along the outer axis and along `k`.
    so: isize,
    sk: isize,
    /// Extents.
    outer: usize,
    k: usize,
}

#[cfg(target_arch = "nvptx64")]
impl Operand {
    /// `A` (M×K) and `B` (K×N) as operands: `A`'s rows and `B`'s columns are their outer
    /// axes, `K` is `A`'s.
    #[inline(always)]
    fn of(a: &View<f32, 2>, b: &View<f32, 2>) -> (Operand, Operand) {
        let [m, kk] = a.shape();
        let n = b.shape()[1];
        let ([sa0, sa1], [sb0, sb1]) = (a.indexer().strides, b.indexer().strides);
        let opa = Operand {
            ptr: a.as_ptr(),
            so: sa0,
            sk: sa1,
            outer: m,
            k: kk,
        };
        let opb = Operand {
            ptr: b.as_ptr(),
            so: sb1,
            sk: sb0,
            outer: n,
            k: kk,
        };
        (opa, opb)
    }
}

/// One thread's `TILE / 32` copies of an operand's `TILE × BK` tiles, for one tile of `C`.
#[cfg(target_arch = "nvptx64")]
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

#[cfg(target_arch = "nvptx64")]
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
#[cfg(target_arch = "nvptx64")]
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
#[cfg(target_arch = "nvptx64")]
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
#[cfg(target_arch = "nvptx64")]
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

/// A thread's fragments of one `k`: 8 values of `A` (rows `{0, 16} + 0..4` of its own) and
/// 16 of `B` (columns `32·g + 0..4`).
#[cfg(target_arch = "nvptx64")]
type Frag = ([[f32; 4]; 2], [[f32; 4]; 4]);

/// `acc += a ⊗ b` for one `k`: 128 fused multiply-adds, written out (constant indices: the
/// accumulators stay in registers).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn outer_product(acc: &mut [[f32; 16]; 8], (af, bf): Frag) {
    for_lanes!(8, |i| for_lanes!(16, |j| {
        acc[i][j] = fma(af[i / 4][i % 4], bf[j / 4][j % 4], acc[i][j]);
    }));
}

/// `C` as the tiled schedule writes it: the view, its element strides, `α` and `β`.
#[cfg(target_arch = "nvptx64")]
struct Out {
    c: ViewMut<f32, 2>,
    s: [isize; 2],
    alpha: f32,
    beta: f32,
}

#[cfg(target_arch = "nvptx64")]
impl Out {
    #[inline(always)]
    fn new(c: ViewMut<f32, 2>, alpha: f32, beta: f32) -> Out {
        let s = c.indexer().strides;
        Out { c, s, alpha, beta }
    }

    /// Whether `C`'s rows take 16-byte stores: contiguous, a pitch of a multiple of 4, a
    /// 16-byte-aligned base (computed once, before the tiles).
    #[inline(always)]
    fn vec(&self) -> bool {
        let [s0, s1] = self.s;
        s1 == 1 && s0 % 4 == 0 && (self.c.as_mut_ptr() as usize).is_multiple_of(16)
    }

    /// `C[row, col + j] = α·v[j] + β·C[row, col + j]` for the `j < 4` with `col + j < n`.
    ///
    /// # Safety
    ///
    /// `row` is a row of `C`; this thread alone owns these elements.
    #[inline(always)]
    unsafe fn store_quad(&self, row: usize, col: usize, n: usize, vec: bool, v: [f32; 4]) {
        let ([s0, s1], alpha, beta) = (self.s, self.alpha, self.beta);
        let base = row as isize * s0 + col as isize * s1;
        if vec && col + 4 <= n {
            // SAFETY: 4 in-bounds, contiguous, 16-byte aligned elements (`vec`).
            unsafe {
                let p = self.c.as_mut_ptr().offset(base) as *mut Chunk<f32, 4>;
                let mut out = Chunk(v);
                if beta == 0.0 {
                    // Lane j of the vector from lane j of `v` (and of `old`), as the scalar
                    // path.
                    #[allow(clippy::needless_range_loop)]
                    for j in 0..4 {
                        out.0[j] = alpha * v[j];
                    }
                } else {
                    let old = p.read();
                    #[allow(clippy::needless_range_loop)]
                    for j in 0..4 {
                        out.0[j] = fma(alpha, v[j], beta * old.0[j]);
                    }
                }
                p.write(out);
            }
        } else {
            for (j, &vj) in v.iter().enumerate() {
                if col + j < n {
                    // SAFETY: (row, col + j) is in bounds; this thread alone owns it.
                    unsafe { blend(&self.c, base + j as isize * s1, vj, alpha, beta) };
                }
            }
        }
    }
}

/// The tiled schedule with copy mappings `MA` and `MB` (see the module documentation).
///
/// # Safety
///
/// Kernel-launch context, blocks of [`THREADS`] threads; the operands' shapes agree, `C`
/// ([`Out`]) is `M × N` and overlaps neither operand; `K` is at most `u32::MAX` tiles.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn tiles<const MA: u8, const MB: u8>(opa: Operand, opb: Operand, out: Out) {
    let (m, n, kk) = (opa.outer, opb.outer, opa.k);
    let t = thread::rank_in_block() as usize;
    // 4×2 warps of 4×8 lanes: warp (wm, wn) covers rows 32·wm.. and columns 128·wn.. of the
    // tile; lane (ly, lx) rows {0, 16} + 4·ly + 0..4 and columns 32·g + 4·lx + 0..4 of those.
    // A warp's fragment loads then touch 4 (A) or 8 (B) consecutive 16-byte words: one
    // wavefront each.
    let (w, lane) = (t / 32, t % 32);
    let (wm, wn, ly, lx) = (w / 2, w % 2, lane / 8, lane % 8);
    let tiles_n = n.div_ceil(BN);
    let tiles = m.div_ceil(BM) * tiles_n;
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
        // Epilogue: rows m0 + 32·wm + {0, 16} + 4·ly + 0..4, columns n0 + 128·wn + 32·g +
        // 4·lx + 0..4. Written out (constant indices into `acc`: registers, never local
        // memory).
        for_lanes!(8, |i| {
            let row = m0 + 32 * wm + (i / 4) * 16 + 4 * ly + i % 4;
            if row < m {
                let r = acc[i];
                for_lanes!(4, |g| {
                    let v = [r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]];
                    let col = n0 + 128 * wn + 32 * g + 4 * lx;
                    // SAFETY: (row, col + j) checked against (m, n) before every access; this
                    // thread alone owns these elements of C (the tiles and the places
                    // partition C among the blocks and threads).
                    unsafe { out.store_quad(row, col, n, vec, v) };
                });
            }
        });
        // The next tile's first copies go to stages that slower threads may still read.
        thread::sync_threads();
        tile += blocks();
    }
}

/// The simple loop, for any block size: one thread per element of `C`, a plain dot product
/// (the same K fused multiply-adds in `k` order as the tiles). A call, not inlined, its
/// arguments scalars (aggregates would pass through local memory): inlined, its registers
/// weighed on the tiled schedule's allocation and ptxas spilled the kernel.
///
/// # Safety
///
/// Kernel-launch context; the pointers, strides and `[M, N, K]` describe `A` (M×K), `B` (K×N)
/// and `C` (M×N), and `C` overlaps neither.
#[cfg(target_arch = "nvptx64")]
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
    // The pointers arrive as scalars: marked global again, so that the accesses are
    // `ld.global`/`st.global` (the entry's marks do not cross the call).
    // SAFETY: the views' data pointers, device memory (the launcher's checks).
    let (pa, pb, pc) = unsafe { (global(pa.cast_mut()), global(pb.cast_mut()), global(pc)) };
    let (tid, threads) = thread_rank();
    let mut e = tid;
    while e < m * n {
        let (i, j) = (e / n, e % n);
        let mut s = 0.0f32;
        for k in 0..kk {
            // SAFETY: i < m, j < n, k < kk: in-bounds elements.
            unsafe {
                s = fma(
                    pa.offset(i as isize * sa0 + k as isize * sa1).read(),
                    pb.offset(k as isize * sb0 + j as isize * sb1).read(),
                    s,
                );
            }
        }
        // SAFETY: (i, j) in bounds; one thread per element; β = 0 does not read it.
        unsafe {
            let p = pc.offset(i as isize * sc0 + j as isize * sc1);
            p.write(if beta == 0.0 {
                alpha * s
            } else {
                fma(alpha, s, beta * p.read())
            });
        }
        e += threads;
    }
}

/// `c[off] = α·v + β·c[off]`; `β = 0` does not read `c[off]` (BLAS semantics).
///
/// # Safety
///
/// `off` is the offset of an element of `c` that this thread alone accesses.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn blend(c: &ViewMut<f32, 2>, off: isize, v: f32, alpha: f32, beta: f32) {
    // SAFETY: the caller's contract.
    unsafe {
        let y = if beta == 0.0 {
            alpha * v
        } else {
            fma(alpha, v, beta * c.read_at(off))
        };
        c.write_at(off, y);
    }
}

/// `c = alpha · a @ b + beta · c` in `f32` (no tensor cores; the "SGEMM" of BLAS, TF32 off).
///
/// `a`: M×K, `b`: K×N, `c`: M×N, each a 2-D view with any strides (the tiles of `a` and `b`
/// are copied by 4-byte `cp.async`, along whichever axis is contiguous; `c` is written with
/// 16-byte stores where its rows allow); any M, N, K (K = 0 gives `β·c`).
/// `β = 0` never reads `c`. `c` must overlap neither input. Refused: inner dimensions that
/// differ, a `c` of the wrong shape. Accuracy: each element is a sequence of K fused
/// multiply-adds in `k` order (error ≲ K·ε·Σ|a||b|), then `α·s + β·c` with one more FMA.
/// Blocks of 256 threads (the automatic block) take the tiled schedule, one 128×256 tile of
/// `c` per block at a time (automatic grid: one block per tile) through three shared stages;
/// smaller blocks a simple loop; larger blocks are refused (`max_threads = 256`). Built for
/// sm_80 and sm_90 (every GPU from the A100 on).
#[kernel(family = "matmul", items_per_thread = 128, max_threads = 256,
         require(a.shape[1] == b.shape[0], "the inner dimensions of a and b must agree"),
         require(c.shape[0] == a.shape[0], "c must have a's row count"),
         require(c.shape[1] == b.shape[1], "c must have b's column count"),
         require(c.ptr() != a.ptr(), "c must not be a"),
         require(c.ptr() != b.ptr(), "c must not be b"))]
pub unsafe fn matmul_f32(
    a: View<f32, 2>,
    b: View<f32, 2>,
    c: ViewMut<f32, 2>,
    alpha: f32,
    beta: f32,
) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: launched as a kernel over host-validated views whose shapes agree.
    unsafe {
        let (opa, opb) = Operand::of(&a, &b);
        let cv = Out::new(c, alpha, beta);
        // Blocks other than THREADS threads, and K beyond 32-bit tile counts: the simple loop
        // (on the same pointers, strides and extents: `A`'s are (outer, k), `B`'s (k, outer)).
        if thread::block_threads() as usize != THREADS || opa.k.div_ceil(BK) > u32::MAX as usize {
            let [sc0, sc1] = cv.s;
            return simple_call(
                opa.ptr,
                opa.so,
                opa.sk,
                opb.ptr,
                opb.sk,
                opb.so,
                cv.c.as_mut_ptr(),
                sc0,
                sc1,
                opa.outer,
                opb.outer,
                opa.k,
                alpha,
                beta,
            );
        }
        match (opa.so == 1, opb.so == 1) {
            (false, true) => tiles::<BY_K, BY_OUTER>(opa, opb, cv),
            (true, true) => tiles::<BY_OUTER, BY_OUTER>(opa, opb, cv),
            (false, false) => tiles::<BY_K, BY_K>(opa, opb, cv),
            (true, false) => tiles::<BY_OUTER, BY_K>(opa, opb, cv),
        }
    }
}
