//! `matmul`: `C = α·A·B + β·C` in `f32` on CUDA cores (no tensor cores), for strided 2-D views.
//!
//! # Schedule (blocks of 256 threads)
//!
//! Each block computes 128×256 tiles of `C` (a grid-stride loop over tiles, so any grid is
//! correct), walking `K` in steps of 8:
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
//! * **Shared tiles**: `A` stored transposed (`As[k][m]`) and `B` as is (`Bs[k][n]`), rows padded
//!   by 4 floats so that the transposing stores of an operand read along `k` are
//!   conflict-free too; two stages (double buffering), one barrier per 8-wide step: the next
//!   step's tiles are loaded from global memory into registers while the current one is
//!   computed.
//! * **Global loads**: 16-byte vectors along whichever axis of each operand is contiguous
//!   (row-major or column-major `A` and `B` alike), when its base and other stride keep them
//!   aligned, else element loads. At the edges of `M` and `N` the loads are clamped to the last
//!   row or column — they only feed elements of `C` that are not stored — so the loop has no
//!   bounds checks; the last `K mod 8` steps are read straight from global memory. `C` is
//!   written with 16-byte stores where possible; `β = 0` never reads `C` (BLAS semantics: NaN in
//!   `C` is overwritten).
//!
//! # The sm_90a schedule (`matmul_f32_sm90`, the family's kernel on H100/H200)
//!
//! The same tiles, warp layout, fragments and epilogue, with the operands' tiles copied to
//! shared memory by `cp.async` (4-byte copies, so one code path serves any strides: a warp
//! copies 32 consecutive values of a `k` row, or 8 `k` of 4 rows, whichever axis the operand
//! is contiguous along) through three stages, two tiles ahead, one barrier per tile — no
//! register staging and no shared stores in the loop. The 8 `k` of a tile are unrolled, each
//! `k`'s fragments read while the previous `k`'s FMAs run (two fragment sets in registers).
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
//! 231 registers, no spill on sm_90a (nor on sm_80). Before: a whole-tile branch around the
//! copies, 1194 instructions and 1399–1442 cycles (ncu: 0.20 wait stalls per instruction),
//! 0.84–0.88× cuBLAS's SGEMM at 4096³ and 8192³. Its copies go through L1 (`.ca`): the
//! `k`-contiguous operand's rows are read one sector per row per warp, the sector's other
//! values from L1 by the next copies.
//!
//! Launch bounds: blocks of at most 256 threads (`max_threads = 256`, PTX `.maxntid`; larger
//! blocks are refused by the launcher), which lets ptxas give each thread the registers the
//! 8×16 accumulators and the double buffer need, without spills: one block per SM. Smaller
//! blocks run a simple correct loop (one thread per element of `C`).

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::{kernel, View, ViewMut};

/// Rows of `C` per block tile (the `A` tile's outer extent).
#[cfg(target_arch = "nvptx64")]
pub(crate) const BM: usize = 128;
/// Columns of `C` per block tile (the `B` tile's outer extent).
#[cfg(target_arch = "nvptx64")]
pub(crate) const BN: usize = 256;
#[cfg(target_arch = "nvptx64")]
pub(crate) const BK: usize = 8;
/// Row pitches of the shared tiles (floats): 4 of padding, so that the transposing stores of
/// a tile read along `k` (two `k` quads per warp, 16 rows apart in banks) are conflict-free.
#[cfg(target_arch = "nvptx64")]
pub(crate) const PA: usize = BM + 4;
#[cfg(target_arch = "nvptx64")]
pub(crate) const PB: usize = BN + 4;
/// Floats of one stage of each operand.
#[cfg(target_arch = "nvptx64")]
pub(crate) const STAGE_A: usize = BK * PA;
#[cfg(target_arch = "nvptx64")]
pub(crate) const STAGE_B: usize = BK * PB;
#[cfg(target_arch = "nvptx64")]
pub(crate) const THREADS: usize = 256;

/// An operand as the tile loader sees it: `outer` is `m` for `A` and `n` for `B`.
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
pub(crate) struct Operand {
    pub(crate) ptr: *const f32,
    /// Element strides along the outer axis and along `k`.
    pub(crate) so: isize,
    pub(crate) sk: isize,
    /// Extents.
    pub(crate) outer: usize,
    pub(crate) k: usize,
}

/// Tile-loading modes (see [`Operand::mode`]).
#[cfg(target_arch = "nvptx64")]
const ALONG_OUTER: u8 = 0;
#[cfg(target_arch = "nvptx64")]
const ALONG_K: u8 = 1;
#[cfg(target_arch = "nvptx64")]
const ELEMENTS: u8 = 2;

#[cfg(target_arch = "nvptx64")]
impl Operand {
    /// `A` (M×K) and `B` (K×N) as operands: `A`'s rows and `B`'s columns are their outer
    /// axes, `K` is `A`'s.
    #[inline(always)]
    pub(crate) fn of(a: &View<f32, 2>, b: &View<f32, 2>) -> (Operand, Operand) {
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

    /// How this operand's tiles are loaded: [`ALONG_OUTER`] (16-byte vectors along the outer
    /// axis), [`ALONG_K`] (16-byte vectors along `k`) or [`ELEMENTS`].
    #[inline(always)]
    fn mode(&self) -> u8 {
        let aligned = (self.ptr as usize).is_multiple_of(16);
        if aligned && self.so == 1 && self.sk % 4 == 0 {
            ALONG_OUTER
        } else if aligned && self.sk == 1 && self.so % 4 == 0 {
            ALONG_K
        } else {
            ELEMENTS
        }
    }

    /// Thread `t`'s cursor over quad `h` of its tiles (`TILE` wide along the outer axis, at
    /// outer offset `o0`), from `k = 0`.
    ///
    /// A tile of `TILE × BK` values is `TILE · BK / 4` quads, `TILE / 128` per thread: quad
    /// `q = t + 256·h` holds four consecutive `o` at row `k` (`ALONG_OUTER`: `k = q / (TILE/4)`,
    /// `o = 4·(q mod TILE/4)`), or four consecutive `k` at column `o` (the other modes:
    /// `o = t / 2 + 128·h`, `k = 4·(t mod 2)`, so that two lanes read one 32-byte sector).
    /// Rows beyond the operand's outer extent are read clamped to its last row: they only
    /// feed elements of `C` that are never stored, so the loads need no bounds check and no
    /// zero fill along `o`.
    ///
    /// `outer > 0`.
    #[inline(always)]
    fn cursor<const MODE: u8, const TILE: usize>(&self, t: usize, h: usize, o0: usize) -> Cursor {
        let last = self.outer - 1;
        let (k, o) = if MODE == ALONG_OUTER {
            let q = t + THREADS * h;
            (q / (TILE / 4), (q % (TILE / 4)) * 4)
        } else {
            (4 * (t % 2), t / 2 + (THREADS / 2) * h)
        };
        let row = (o0 + o).min(last);
        // Values of the quad inside the operand (ALONG_OUTER; at least 1 after clamping).
        let valid = (self.outer - row).min(4) as u32;
        Cursor {
            p: self
                .ptr
                .wrapping_offset(row as isize * self.so + k as isize * self.sk),
            sk: self.sk,
            k: k as u32,
            o: o as u32,
            valid,
        }
    }
}

/// Where one thread reads one of its quads of one operand, tile after tile along `k`.
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
struct Cursor {
    /// The quad's first element in the current `k` tile.
    p: *const f32,
    sk: isize,
    /// Position of the quad in the shared tile.
    k: u32,
    o: u32,
    /// ALONG_OUTER: how many of the quad's 4 values lie inside the operand.
    valid: u32,
}

#[cfg(target_arch = "nvptx64")]
impl Cursor {
    /// The quad of the current tile, whose `k` range is whole.
    ///
    /// # Safety
    ///
    /// The cursor's tile lies inside the operand along `k`.
    #[inline(always)]
    unsafe fn load<const MODE: u8>(&self) -> [f32; 4] {
        // SAFETY: (all) inside the operand, by the cursor's construction and the caller.
        unsafe {
            if MODE == ELEMENTS {
                core::array::from_fn(|i| self.p.wrapping_offset(i as isize * self.sk).read())
            } else if MODE == ALONG_K || self.valid == 4 {
                (self.p as *const Chunk<f32, 4>).read().0
            } else {
                core::array::from_fn(|i| self.p.add((i as u32).min(self.valid - 1) as usize).read())
            }
        }
    }

    /// The quad of the last, partial tile: `k` positions at or beyond `kk_left` read as 0.
    ///
    /// # Safety
    ///
    /// `kk_left` (< BK) values of the tile along `k` lie inside the operand.
    #[inline(always)]
    unsafe fn load_tail<const MODE: u8>(&self, kk_left: u32) -> [f32; 4] {
        // SAFETY: (all) only positions k < kk_left are read.
        unsafe {
            if MODE == ALONG_OUTER {
                if self.k < kk_left {
                    self.load::<MODE>()
                } else {
                    [0.0; 4]
                }
            } else {
                let step = if MODE == ALONG_K { 1 } else { self.sk };
                core::array::from_fn(|i| {
                    if self.k + (i as u32) < kk_left {
                        self.p.wrapping_offset(i as isize * step).read()
                    } else {
                        0.0
                    }
                })
            }
        }
    }

    /// On to the next `k` tile.
    #[inline(always)]
    fn advance(&mut self) {
        self.p = self.p.wrapping_offset(BK as isize * self.sk);
    }

    /// Stores a quad at the cursor's place in a stage of its shared tile (row pitch `PITCH`).
    ///
    /// # Safety
    ///
    /// `base` points to one stage (`BK · PITCH` floats, 16-byte aligned) of the tile the
    /// cursor was made for.
    #[inline(always)]
    unsafe fn put<const MODE: u8, const PITCH: usize>(&self, base: *mut f32, v: [f32; 4]) {
        let (k, o) = (self.k as usize, self.o as usize);
        // SAFETY: (all) k < BK, o + 4 <= TILE (ALONG_OUTER) or k + 4 <= BK, o < TILE: inside.
        unsafe {
            if MODE == ALONG_OUTER {
                (base.add(k * PITCH + o) as *mut Chunk<f32, 4>).write(Chunk(v));
            } else {
                for (i, &vi) in v.iter().enumerate() {
                    base.add((k + i) * PITCH + o).write(vi);
                }
            }
        }
    }
}

/// `acc += As · Bs` over the 8 `k` of one stage: per `k`, six 16-byte shared loads (8 values
/// of `A`, 16 of `B`) and 128 fused multiply-adds.
///
/// # Safety
///
/// `pa`, `pb` point to this thread's first fragment columns of row 0 of one stage of each
/// tile, written and synchronized.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn step(acc: &mut [[f32; 16]; 8], pa: *const f32, pb: *const f32) {
    for k in 0..BK {
        // Keep this loop rolled in ptxas too: unrolled, ptxas hoists the shared loads of
        // several `k` at once, more registers than the 128 accumulators leave. (Loading the
        // next `k`'s fragments in this iteration changes nothing: ptxas moves them back.)
        // SAFETY: a PTX directive; no operands, no effect on memory.
        unsafe { core::arch::asm!(".pragma \"nounroll\";", options(nomem, nostack)) };
        // SAFETY: row k of the stages; 16-byte aligned (the pitches are multiples of 4
        // floats, and so are the fragment offsets).
        let fr = unsafe {
            let ra = pa.add(k * PA) as *const Chunk<f32, 4>;
            let rb = pb.add(k * PB) as *const Chunk<f32, 4>;
            let a: [[f32; 4]; 2] = [ra.read().0, ra.add(4).read().0];
            let b: [[f32; 4]; 4] = core::array::from_fn(|g| rb.add(8 * g).read().0);
            (a, b)
        };
        outer_product(acc, fr);
    }
}

/// A thread's fragments of one `k`: 8 values of `A` (rows `{0, 16} + 0..4` of its own) and
/// 16 of `B` (columns `32·g + 0..4`).
#[cfg(target_arch = "nvptx64")]
pub(crate) type Frag = ([[f32; 4]; 2], [[f32; 4]; 4]);

/// `acc += a ⊗ b` for one `k`: 128 fused multiply-adds, written out (constant indices: the
/// accumulators stay in registers).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn outer_product(acc: &mut [[f32; 16]; 8], (af, bf): Frag) {
    for_lanes!(8, |i| for_lanes!(16, |j| {
        acc[i][j] = fma(af[i / 4][i % 4], bf[j / 4][j % 4], acc[i][j]);
    }));
}

/// `C = α·A·B + β·C`; see the module documentation.
///
/// # Safety
///
/// Kernel-launch context; the shapes agree (the kernel's requirements) and `c` overlaps
/// neither `a` nor `b`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn matmul(a: View<f32, 2>, b: View<f32, 2>, c: ViewMut<f32, 2>, alpha: f32, beta: f32) {
    if thread::block_threads() as usize != THREADS {
        // SAFETY: forwarded contract.
        unsafe { matmul_simple(a, b, c, alpha, beta) };
        return;
    }
    let (opa, opb) = Operand::of(&a, &b);
    let cv = Out::new(c, alpha, beta);
    // One instance of the tile loop per pair of loading modes: a runtime choice inside one
    // loop would keep every mode's registers live at once.
    // SAFETY: (every arm) forwarded contract; the modes are the operands' own (or ELEMENTS).
    unsafe {
        match (opa.mode(), opb.mode()) {
            (ALONG_K, ALONG_OUTER) => tiles::<ALONG_K, ALONG_OUTER>(opa, opb, cv),
            (ALONG_OUTER, ALONG_OUTER) => tiles::<ALONG_OUTER, ALONG_OUTER>(opa, opb, cv),
            (ALONG_K, ALONG_K) => tiles::<ALONG_K, ALONG_K>(opa, opb, cv),
            (ALONG_OUTER, ALONG_K) => tiles::<ALONG_OUTER, ALONG_K>(opa, opb, cv),
            _ => tiles::<ELEMENTS, ELEMENTS>(opa, opb, cv),
        }
    }
}

/// `C` as the tiled schedules write it: the view, its element strides, `α` and `β`.
#[cfg(target_arch = "nvptx64")]
pub(crate) struct Out {
    c: ViewMut<f32, 2>,
    s: [isize; 2],
    alpha: f32,
    beta: f32,
}

#[cfg(target_arch = "nvptx64")]
impl Out {
    #[inline(always)]
    pub(crate) fn new(c: ViewMut<f32, 2>, alpha: f32, beta: f32) -> Out {
        let s = c.indexer().strides;
        Out { c, s, alpha, beta }
    }

    /// Whether `C`'s rows take 16-byte stores: contiguous, a pitch of a multiple of 4, a
    /// 16-byte-aligned base (the `vec` of [`store_tile`]; computed once, before the
    /// tiles).
    #[inline(always)]
    pub(crate) fn vec(&self) -> bool {
        let [s0, s1] = self.s;
        s1 == 1 && s0 % 4 == 0 && (self.c.as_mut_ptr() as usize).is_multiple_of(16)
    }

    /// `C[row, col + j] = α·v[j] + β·C[row, col + j]` for the `j < 4` with `col + j < n`.
    ///
    /// # Safety
    ///
    /// `row` is a row of `C`; this thread alone owns these elements.
    #[inline(always)]
    pub(crate) unsafe fn store_quad(
        &self,
        row: usize,
        col: usize,
        n: usize,
        vec: bool,
        v: [f32; 4],
    ) {
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

/// The epilogue: `store_tile!(out, acc, vec, (wm, wn, ly, lx), [m0, n0], [m, n])` stores a
/// thread's accumulators `acc` of the tile of `C` at `(m0, n0)` (`C` is `M × N`) —
/// `C = α·acc + β·C` for the elements of the thread's [`place`] inside `C` — through `out`
/// ([`Out`]), by 16-byte stores where `vec` ([`Out::vec`]). Written out (constant indices into
/// `acc`: registers, never local memory).
///
/// A macro, not a function: as a method given the place, LLVM computed the place's four
/// fields apart instead of folding them into the fragment addresses and the rows (one mask of
/// `t`), and the kernels' register allocation changed.
///
/// # Safety
///
/// Expands to unsafe stores: this thread alone owns these elements of `C` (the schedule's
/// tiles and places partition `C`).
#[cfg(target_arch = "nvptx64")]
macro_rules! store_tile {
    ($out:expr, $acc:expr, $vec:expr, ($wm:expr, $wn:expr, $ly:expr, $lx:expr),
     [$m0:expr, $n0:expr], [$m:expr, $n:expr]) => {
        for_lanes!(8, |i| {
            let row = $m0 + 32 * $wm + (i / 4) * 16 + 4 * $ly + i % 4;
            if row < $m {
                let r = $acc[i];
                for_lanes!(4, |g| {
                    let v = [r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]];
                    let col = $n0 + 128 * $wn + 32 * g + 4 * $lx;
                    // SAFETY: (row, col + j) checked against (m, n) before every access; this
                    // thread alone owns these elements of C (the macro's contract).
                    unsafe { $out.store_quad(row, col, $n, $vec, v) };
                });
            }
        })
    };
}
#[cfg(ferrocuda_arch = "sm_90a")]
pub(crate) use store_tile;

/// A thread's place in a tile of `C`, `(wm, wn, ly, lx)`: 4×2 warps of 4×8 lanes — warp
/// `(wm, wn)` covers rows `32·wm..` and columns `128·wn..` of the tile, lane `(ly, lx)` rows
/// `{0, 16} + 4·ly + 0..4` and columns `32·g + 4·lx + 0..4` of those (`g < 4`); its fragment
/// columns start at `32·wm + 4·ly` in `A`'s tile and `128·wn + 4·lx` in `B`'s. A warp's
/// fragment loads then touch 4 (`A`) or 8 (`B`) consecutive 16-byte words: one wavefront each.
///
/// A macro beside [`store_tile`], so that the place's divisions stand in the same body as
/// their uses, as when each schedule wrote them out (a `Place` struct returned by a function
/// and given to an epilogue method changed the kernels' register allocation; the function
/// alone was not tried).
#[cfg(target_arch = "nvptx64")]
macro_rules! place {
    ($t:expr) => {{
        let (w, lane) = ($t / 32, $t % 32);
        (w / 2, w % 2, lane / 8, lane % 8)
    }};
}
#[cfg(ferrocuda_arch = "sm_90a")]
pub(crate) use place;

/// Tiles of `C` along `N`, and in all (`M × N`).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn tile_counts(m: usize, n: usize) -> (usize, usize) {
    let tiles_n = n.div_ceil(BN);
    (tiles_n, m.div_ceil(BM) * tiles_n)
}

/// The tiled schedule with operand loading modes `MA` and `MB`.
///
/// # Safety
///
/// As [`matmul`], with blocks of [`THREADS`] threads; the modes are the operands' own (or
/// `ELEMENTS`).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn tiles<const MA: u8, const MB: u8>(opa: Operand, opb: Operand, out: Out) {
    let (m, n, kk) = (opa.outer, opb.outer, opa.k);
    let t = thread::rank_in_block() as usize;
    let (wm, wn, ly, lx) = place!(t);
    let (tiles_n, tiles) = tile_counts(m, n);
    // Whole 8-wide `k` steps are double-buffered; a last partial one is zero-filled.
    let ktiles = kk / BK;
    let kk_left = (kk % BK) as u32;
    // Two stages of `As`, then two of `Bs` (24.3 KiB); 16-byte aligned for the vector loads.
    let smem = shared_array!(f32, 2 * (STAGE_A + STAGE_B), align = 16).as_mut_ptr();
    let (sa, sb) = (smem, smem.wrapping_add(2 * STAGE_A));
    // This thread's fragment columns in stage 0 of each tile.
    let (fa, fb) = (
        sa.wrapping_add(32 * wm + 4 * ly) as *const f32,
        sb.wrapping_add(128 * wn + 4 * lx) as *const f32,
    );
    let vec = out.vec();
    let mut tile = block_rank();
    while tile < tiles {
        let (m0, n0) = ((tile / tiles_n) * BM, (tile % tiles_n) * BN);
        let mut ca = opa.cursor::<MA, BM>(t, 0, m0);
        // B's tile holds two quads per thread (two cursors, not an array: an array iterated
        // over would live in local memory).
        let (mut cb0, mut cb1) = (
            opb.cursor::<MB, BN>(t, 0, n0),
            opb.cursor::<MB, BN>(t, 1, n0),
        );
        let mut acc = [[0.0f32; 16]; 8];
        // SAFETY: (every load, store and step below) the cursors stay inside the operands
        // (whole tiles while kt < ktiles, the partial one through `load_tail`); stage writes
        // and reads are separated by the barriers.
        unsafe {
            if ktiles > 0 {
                ca.put::<MA, PA>(sa, ca.load::<MA>());
                cb0.put::<MB, PB>(sb, cb0.load::<MB>());
                cb1.put::<MB, PB>(sb, cb1.load::<MB>());
            }
            thread::sync_threads();
            let mut kt = 0;
            while kt < ktiles {
                let stage = kt % 2;
                let next = kt + 1 < ktiles;
                // The next step's quads, in flight while this step computes.
                let (mut qa, mut qb0, mut qb1) = ([0.0; 4], [0.0; 4], [0.0; 4]);
                if next {
                    ca.advance();
                    cb0.advance();
                    cb1.advance();
                    qa = ca.load::<MA>();
                    qb0 = cb0.load::<MB>();
                    qb1 = cb1.load::<MB>();
                }
                step(&mut acc, fa.add(stage * STAGE_A), fb.add(stage * STAGE_B));
                if next {
                    // The other stage: every thread finished reading it before the barrier
                    // that ended the previous step.
                    let (ta, tb) = (sa.add((1 - stage) * STAGE_A), sb.add((1 - stage) * STAGE_B));
                    ca.put::<MA, PA>(ta, qa);
                    cb0.put::<MB, PB>(tb, qb0);
                    cb1.put::<MB, PB>(tb, qb1);
                }
                thread::sync_threads();
                kt += 1;
            }
            if kk_left > 0 {
                if ktiles > 0 {
                    ca.advance();
                    cb0.advance();
                    cb1.advance();
                }
                ca.put::<MA, PA>(sa, ca.load_tail::<MA>(kk_left));
                cb0.put::<MB, PB>(sb, cb0.load_tail::<MB>(kk_left));
                cb1.put::<MB, PB>(sb, cb1.load_tail::<MB>(kk_left));
                thread::sync_threads();
                step(&mut acc, fa, fb);
                thread::sync_threads();
            }
        }
        // The tiles and places partition C among the blocks and threads.
        store_tile!(out, acc, vec, (wm, wn, ly, lx), [m0, n0], [m, n]);
        tile += blocks();
    }
}

/// The same product for any block size: one thread per element of `C`, a plain dot product.
///
/// # Safety
///
/// As [`matmul`].
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn matmul_simple(
    a: View<f32, 2>,
    b: View<f32, 2>,
    c: ViewMut<f32, 2>,
    alpha: f32,
    beta: f32,
) {
    let ([m, kk], n) = (a.shape(), b.shape()[1]);
    let (sa, sb, sc) = (
        a.indexer().strides,
        b.indexer().strides,
        c.indexer().strides,
    );
    // SAFETY: forwarded contract: the views' pointers, strides and shapes.
    unsafe {
        simple_parts(
            (a.as_ptr(), sa, b.as_ptr(), sb, c.as_mut_ptr(), sc),
            [m, n, kk],
            alpha,
            beta,
        )
    }
}

/// Pointers and element strides of `A`, `B` and `C`.
#[cfg(target_arch = "nvptx64")]
pub(crate) type Parts = (
    *const f32,
    [isize; 2],
    *const f32,
    [isize; 2],
    *mut f32,
    [isize; 2],
);

/// [`matmul_simple`] over the views' parts (scalars: a call passes them in registers).
///
/// # Safety
///
/// As [`matmul`], for the views these parts and shapes `[M, N, K]` describe.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) unsafe fn simple_parts(
    (pa, [sa0, sa1], pb, [sb0, sb1], pc, [sc0, sc1]): Parts,
    [m, n, kk]: [usize; 3],
    alpha: f32,
    beta: f32,
) {
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
/// `a`: M×K, `b`: K×N, `c`: M×N, each a 2-D view with any strides (16-byte vector loads where
/// an operand is row- or column-major with aligned rows); any M, N, K (K = 0 gives `β·c`).
/// `β = 0` never reads `c`. `c` must overlap neither input. Refused: inner dimensions that
/// differ, a `c` of the wrong shape. Accuracy: each element is a sequence of K fused
/// multiply-adds in `k` order (error ≲ K·ε·Σ|a||b|), then `α·s + β·c` with one more FMA.
/// Blocks of 256 threads (the automatic block) take the tiled schedule, one 128×256 tile of
/// `c` per block at a time (automatic grid: one block per tile); smaller blocks a simple
/// loop; larger blocks are refused (`max_threads = 256`).
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
    // SAFETY: launched as a kernel over host-validated views whose shapes agree.
    unsafe { matmul(a, b, c, alpha, beta) }
}
