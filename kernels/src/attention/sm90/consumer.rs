//! The consumer warpgroups of the sm_90a attention kernels (see the [parent module](super)):
//! per key tile the scores (`wgmma` from shared memory), the online softmax in registers and
//! `P · v` (`wgmma` with `P` from registers), overlapped within each consumer and between
//! the consumers (two, or three in the `_d64` kernels); then the item's epilogue.

use super::super::common::{here32, pack, store_lse, OutHead};
use super::layout::{active, kv_tiles, lead, tiles_base, Bars, Geometry, Launch};
use crate::prelude::*;
use ferrocuda_device::mma::Half16;
use ferrocuda_device::ViewMut;

/// What a consumer warpgroup knows of the launch.
pub(super) struct Consumer<const BN: u32, const PMAX: u32, const STAGES: usize, const NC: u32> {
    pub(super) geo: Geometry<BN, PMAX, STAGES, NC>,
    pub(super) bars: Bars<STAGES, NC>,
    /// Which consumer (0 to `NC − 1`): its 64 rows of the item's `64 ·` [`nc`](Self::nc).
    pub(super) cw: u32,
    /// Thread of the warpgroup.
    pub(super) t: u32,
    pub(super) scale_log2: f32,
    pub(super) causal: bool,
}

impl<const BN: u32, const PMAX: u32, const STAGES: usize, const NC: u32>
    Consumer<BN, PMAX, STAGES, NC>
{
    /// The consumers that compute ([`active`]): the item's rows are 64 for each, the turns
    /// go round them.
    #[inline(always)]
    pub(super) fn nc(&self) -> u32 {
        active::<NC>(self.causal)
    }

    /// The consumer whose turn follows this one's (the round goes 0, 1, …, `nc − 1`).
    #[inline(always)]
    fn next(&self) -> u32 {
        if self.cw + 1 == self.nc() {
            0
        } else {
            self.cw + 1
        }
    }

    /// Issues `S = q · kᵀ` (64 × `N`, f32: `wgmma m64nNk16`, A and B from shared memory,
    /// 4 k-steps per 64-column panel, `P` panels) against the `k` of the stage at `stage`, as
    /// one commit group; `SR` = N / 2 accumulators per thread.
    ///
    /// # Safety
    ///
    /// The whole warpgroup, convergently; `q` and the stage's `k` were written by TMA (their
    /// barriers waited on) and are not rewritten before this group is waited for; `sc` is not
    /// read or written before then.
    // (`unroll!` writes its counter out as a literal, 0 included: `32 * K` is the step's
    // offset and `K > 0` the first-step test, alike for each step.)
    #[allow(clippy::erasing_op, clippy::identity_op, clippy::eq_op)]
    #[inline(always)]
    unsafe fn issue_scores<T: Half16, const P: u32, const N: usize, const SR: usize>(
        &self,
        base: u32,
        stage: u32,
        sc: &mut [f32; SR],
    ) where
        ferrocuda_device::wgmma::Cols<N>: ferrocuda_device::wgmma::WgmmaN<SR>,
        [f32; SR]: ferrocuda_device::wgmma::Accumulator,
    {
        use ferrocuda_device::wgmma::{self, MatrixDesc, Swizzle};
        wgmma::fence_operand(sc);
        // SAFETY: the caller's contract.
        unsafe {
            wgmma::fence();
            for p in 0..P {
                let kd = MatrixDesc::k_major(stage + p * self.geo.kv_panel(), Swizzle::B128)
                    .unwrap_or_else(|_| ferrocuda_device::diag::fail());
                let qd = MatrixDesc::k_major(
                    base + p * self.geo.q_panel() + self.cw * 64 * 128,
                    Swizzle::B128,
                )
                .unwrap_or_else(|_| ferrocuda_device::diag::fail());
                ferrocuda_device::unroll!(K in 0..4 {
                    let (qk, kk, acc) = (qd.advance(32 * K), kd.advance(32 * K), p > 0 || K > 0);
                    if T::BF16 {
                        wgmma::mma_bf16::<N, SR>(sc, qk, kk, acc);
                    } else {
                        wgmma::mma_f16::<N, SR>(sc, qk, kk, acc);
                    }
                });
            }
            wgmma::commit_group();
        }
    }

    /// Issues `O += P · v` (`m64nDk16`, `P` from registers as the A fragments of the `KS`
    /// k16 steps — `BN` / 16 — `v` N-major from shared memory) against the `v` of the stage at
    /// `stage`, as one commit group.
    ///
    /// # Safety
    ///
    /// The whole warpgroup, convergently; the stage's `v` was written by TMA (its barrier
    /// waited on) and is released only after this group is waited for; `o` is not read or
    /// written before then.
    // (`unroll!`'s literal counter: `2048 * KK` is the step's offset, alike for each step.)
    #[allow(clippy::erasing_op, clippy::identity_op)]
    #[inline(always)]
    unsafe fn issue_pv<T: Half16, const D: usize, const R: usize, const KS: usize>(
        &self,
        stage: u32,
        o: &mut [f32; R],
        a: &[[u32; 4]; KS],
    ) where
        ferrocuda_device::wgmma::Cols<D>: ferrocuda_device::wgmma::WgmmaN<R>,
        [f32; R]: ferrocuda_device::wgmma::Accumulator,
    {
        use ferrocuda_device::wgmma::{self, MatrixDesc, Swizzle};
        let vd = MatrixDesc::n_major(self.geo.v_of(stage), self.geo.kv_panel(), Swizzle::B128)
            .unwrap_or_else(|_| ferrocuda_device::diag::fail());
        wgmma::fence_operand(o);
        // SAFETY: the caller's contract.
        unsafe {
            wgmma::fence();
            // Step k16: 16 rows of `v` (rows of 128 bytes) further. (Written out for the
            // longest, 8 steps; `KK < KS` a constant.)
            ferrocuda_device::unroll!(KK in 0..8 {
                if KK < KS {
                    if T::BF16 {
                        wgmma::mma_bf16_rs_nb::<D, R>(o, a[KK], vd.advance(2048 * KK), true);
                    } else {
                        wgmma::mma_f16_rs_nb::<D, R>(o, a[KK], vd.advance(2048 * KK), true);
                    }
                }
            });
            wgmma::commit_group();
        }
    }

    /// The online softmax of key tile `j`'s scores, in place: the masks (keys past the end,
    /// keys after the query under the causal mask — only in the tiles that need them), each
    /// row's running maximum `m` and sum `l` updated, `P = 2^(S·scale·log₂e − m)` left in
    /// `sc`. Returns each row's factor `2^(m_old − m)` for the output accumulated so far.
    /// (`t` is the caller's: the thread's rank as the item made it opaque; `SR` = `BN` / 2.)
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn softmax<const SR: usize>(
        &self,
        t: u32,
        s_kv: u32,
        j: u32,
        row0: u32,
        sc: &mut [f32; SR],
        m: &mut [f32; 2],
        l: &mut [f32; 2],
    ) -> [f32; 2]
    where
        [f32; SR]: ferrocuda_device::wgmma::Accumulator,
    {
        use ferrocuda_device::math::FastMath;
        use ferrocuda_device::wgmma::{self, Accumulator};
        // Mask, then each row's extreme raw score: with `scale_log2 > 0` the maximum (the
        // largest scaled score), with `< 0` the minimum (masked scores are set past the
        // other end). The exponentials below then take one FFMA each: 2^(s·c − m).
        let kv0 = j * BN;
        let sl2 = self.scale_log2;
        let pos = sl2 > 0.0;
        let far = if pos {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        };
        if kv0 + BN > s_kv || (self.causal && kv0 + BN - 1 > row0) {
            let causal = self.causal;
            sc.map_each(|r, x| {
                let (row, col) = wgmma::acc_coords(t, r);
                let key = kv0 + col;
                if key >= s_kv || (causal && key > row0 + row) {
                    far
                } else {
                    x
                }
            });
        }
        // Each row half's extreme in one chain of dependent min/max instructions. (Four
        // independent chains a row half, joined at the end, ran 1–4 % slower on an H100 at
        // D = 64 and 128, beside this in one process, at all but two points of the
        // three-consumer kernel — S = 4096 and 16384 under the mask, +1 % and +4 %: the
        // chain's latency mostly hides under the other consumers' MMAs.)
        let mut ext = [far; 2];
        if pos {
            sc.each_pair(|r, a, b| {
                let h = ((r / 2) % 2) as usize;
                ext[h] = ext[h].max(a).max(b);
            });
        } else {
            sc.each_pair(|r, a, b| {
                let h = ((r / 2) % 2) as usize;
                ext[h] = ext[h].min(a).min(b);
            });
        }
        let mut corr = [0f32; 2];
        let mut neg_m = [0f32; 2];
        for h in 0..2 {
            let (a, b) = (ext[h], warp::shfl_xor_sync(u32::MAX, ext[h], 1));
            ext[h] = if pos { a.max(b) } else { a.min(b) };
            let (a, b) = (ext[h], warp::shfl_xor_sync(u32::MAX, ext[h], 2));
            ext[h] = if pos { a.max(b) } else { a.min(b) };
            // Every key of the row masked so far: the maximum stays -inf, and 0 is
            // subtracted instead (the exponentials of masked scores are 0 either way).
            let tile_m = if ext[h] == far {
                f32::NEG_INFINITY
            } else {
                ext[h] * sl2
            };
            let new_m = m[h].max(tile_m);
            let use_m = if new_m == f32::NEG_INFINITY {
                0.0
            } else {
                new_m
            };
            corr[h] = (m[h] - use_m).exp2_fast();
            m[h] = new_m;
            neg_m[h] = -use_m;
        }
        let mut sum = [0f32; 2];
        sc.map_each(|r, x| {
            let h = ((r / 2) % 2) as usize;
            let e = fma(x, sl2, neg_m[h]).exp2_fast();
            sum[h] += e;
            e
        });
        for h in 0..2 {
            l[h] = l[h] * corr[h] + sum[h];
        }
        corr
    }

    /// Passes `n` key tiles of the item that this consumer's rows do not need (past the
    /// causal mask's diagonal, or rows past the end): each tile's `k` and `v` waited for and
    /// released and its turn taken, in the order a computed tile keeps, without its MMAs or
    /// softmax — so that the ring positions and the round of turns stay in step with the
    /// producer's and the other consumers' (every consumer takes an item's every turn).
    /// Skipping a tile changes no result: its scores would all be masked (`P = 0`, the
    /// maximum and the sum unchanged), or its rows are not stored.
    ///
    /// # Safety
    ///
    /// Run by all 128 threads of the consumer warpgroup, convergently, with `ks`, `vs` at
    /// the same position, in step with the producer's ring, and `turn` at this consumer's
    /// next turn.
    #[inline(always)]
    unsafe fn pass_tiles(
        &self,
        t: u32,
        n: u32,
        ks: &mut ferrocuda_device::mbarrier::RingState<STAGES>,
        vs: &mut ferrocuda_device::mbarrier::RingState<STAGES>,
        turn: &mut ferrocuda_device::mbarrier::RingState<1>,
    ) {
        let bars = self.bars;
        for _ in 0..n {
            let (sk, sv) = (ks.index(), vs.index());
            bars.k_full(sk).wait_ring(ks);
            bars.turn(self.cw).wait_ring(turn);
            bars.v_full(sv).wait_ring(vs);
            // Each warp arrives for itself (`Bars`), once all its lanes are past the waits.
            warp::sync_warp(u32::MAX);
            if lead(t) {
                bars.turn(self.next()).arrive();
                bars.k_empty(sk).arrive();
                bars.v_empty(sv).arrive();
            }
            turn.advance();
            ks.advance();
            vs.advance();
        }
    }

    /// One item: the key tiles, then the epilogue. `D` = tile width (64, 128 or 256), `R` =
    /// D / 2 output registers per thread, `P` = D / 64 panels; `N` = `BN` keys per tile, `SR`
    /// = N / 2 score registers per thread, `KS` = N / 16 k-steps of `P · v`.
    ///
    /// The key tiles overlap within the warpgroup (FlashAttention-3's intra-warpgroup
    /// order): tile `j`'s `q · kᵀ` is issued before tile `j − 1`'s `P · v`, and the softmax of
    /// tile `j` runs while `P · v` is on the tensor cores. A consumer so holds two stages of
    /// the ring (this tile's `k`, the previous tile's `v`). The first tile is peeled off and
    /// the last `P · v` follows the loop, so that every `wgmma` of the loop is issued and
    /// waited for on every path (issued under a condition, ptxas serialises them).
    ///
    /// # Safety
    ///
    /// Run by all 128 threads of the consumer warpgroup, convergently, after the item's q
    /// tile was waited for; `ks` (the stage whose `k` is next) and `vs` (whose `v` is next)
    /// at the same position, in step with the producer's ring; `S_kv ≥ 1`.
    // (`unroll!`'s literal counters: `8 * KK + 2 * RR` are the fragment indices. The
    // arguments: the item, the three ring positions it moves, the outputs.)
    #[allow(clippy::erasing_op, clippy::identity_op, clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) unsafe fn item<
        T: Half16 + crate::epilogue::OutElem,
        const D: usize,
        const R: usize,
        const P: u32,
        const N: usize,
        const SR: usize,
        const KS: usize,
    >(
        &self,
        la: &Launch,
        bh: u32,
        tm: u32,
        ks: &mut ferrocuda_device::mbarrier::RingState<STAGES>,
        vs: &mut ferrocuda_device::mbarrier::RingState<STAGES>,
        turn: &mut ferrocuda_device::mbarrier::RingState<1>,
        out: ViewMut<T, 4>,
        lse: Option<ViewMut<f32, 3>>,
    ) where
        ferrocuda_device::wgmma::Cols<D>: ferrocuda_device::wgmma::WgmmaN<R>,
        [f32; R]: ferrocuda_device::wgmma::Accumulator,
        ferrocuda_device::wgmma::Cols<N>: ferrocuda_device::wgmma::WgmmaN<SR>,
        [f32; SR]: ferrocuda_device::wgmma::Accumulator,
    {
        use ferrocuda_device::wgmma::{self, Accumulator};

        // The thread's rank through a register move: what derives from it alone (each
        // score's row and column, the mask's and the epilogue's offsets: some 100 values) is
        // invariant over the items, and LLVM may hoist it out of the item loop, where it
        // stays live across the key-tile loop (and spills).
        let (t, bars) = (here32(self.t), self.bars);
        let base = tiles_base();
        let row0 = tm * la.bm + self.cw * 64;
        // P in the inputs' type, as the A fragments of the KS k16 steps of P · v (written
        // out for the longest, 8; `KK < KS` a constant).
        let pack_p = |sc: &[f32; SR]| {
            let mut a = [[0u32; 4]; KS];
            ferrocuda_device::unroll!(KK in 0..8 {
                if KK < KS {
                    ferrocuda_device::unroll!(RR in 0..4 {
                        a[KK][RR] = pack::<T>(sc[8 * KK + 2 * RR], sc[8 * KK + 2 * RR + 1]);
                    });
                }
            });
            a
        };
        let mut o = [0f32; R];
        let mut m = [f32::NEG_INFINITY; 2];
        let mut l = [0f32; 2];
        let s_kv = la.s_kv;
        let n_kv = kv_tiles(tm, la.bm, s_kv, self.causal, BN);
        // The key tiles this consumer's 64 rows need: under the causal mask those up to its
        // last row's key (the item's later tiles are its other rows'), none for rows past
        // the end (a partial last item). The others' tiles it passes (`pass_tiles`).
        let s_q = out.shape()[2] as u32;
        let n_own = if row0 >= s_q {
            0
        } else if self.causal {
            n_kv.min((row0 + 64).min(s_q).div_ceil(BN))
        } else {
            n_kv
        };
        if n_own == 0 {
            // No row to compute: q is not read, every tile only passed (the warp's lanes all
            // past the q wait before it arrives, as in `pass_tiles`).
            warp::sync_warp(u32::MAX);
            if lead(t) {
                bars.q_empty().arrive();
            }
            // SAFETY: the caller's contract (the whole warpgroup, positions in step).
            unsafe { self.pass_tiles(t, n_kv, ks, vs, turn) };
            return;
        }

        // Tile 0: its scores and softmax (no `P · v` before it).
        let sk = ks.index();
        bars.k_full(sk).wait_ring(ks);
        // Ping-pong: the consumers issue their tensor-core work in turns (a round of all
        // `NC`), so that one's softmax runs under the others' MMAs (FlashAttention-3's
        // inter-warpgroup order).
        bars.turn(self.cw).wait_ring(turn);
        turn.advance();
        let mut sc = [0f32; SR];
        // SAFETY: the whole warpgroup; k waited for above, q by the caller; `sc` is read
        // only after the wait below.
        unsafe {
            self.issue_scores::<T, P, N, SR>(base, self.geo.stage(base, sk), &mut sc);
            if lead(t) {
                bars.turn(self.next()).arrive();
            }
            wgmma::wait_group::<0>();
        }
        wgmma::fence_operand(&mut sc);
        // The stage's `k` is read: the producer may load another tile into it (with two
        // stages, the tile after next, while this consumer still holds the other stage's `v`).
        if lead(t) {
            bars.k_empty(sk).arrive();
        }
        // The q tile is free for the next item once the item's last scores are done: the
        // producer loads the next q under this item's last softmax, `P · v` and epilogue.
        if n_own == 1 && lead(t) {
            bars.q_empty().arrive();
        }
        ks.advance();
        let mut corr = self.softmax(t, s_kv, 0, row0, &mut sc, &mut m, &mut l);
        let mut a = pack_p(&sc);
        // Each tile's `k` is waited for at the end of the tile before it — where, in the
        // loop, the wait is also what ends the softmax's basic block: ptxas schedules a
        // `wgmma.wait_group` at the top of its block, so the `P · v` wait below, in the same
        // block as the softmax, would run before the exponentials and undo the overlap.
        if n_own > 1 {
            bars.k_full(ks.index()).wait_ring(ks);
        }

        for j in 1..n_own {
            let sk = ks.index();
            bars.turn(self.cw).wait_ring(turn);
            turn.advance();
            let mut sc = [0f32; SR];
            // SAFETY: the whole warpgroup (a uniform loop); k waited for at the end of the
            // tile before; `sc` is read only after the first wait below.
            unsafe { self.issue_scores::<T, P, N, SR>(base, self.geo.stage(base, sk), &mut sc) };
            // The previous tile's P · v, under this tile's scores: the output first brought
            // to the previous tile's maximum.
            o.map_each(|r, x| x * corr[((r / 2) % 2) as usize]);
            let sv = vs.index();
            bars.v_full(sv).wait_ring(vs);
            // SAFETY: the whole warpgroup; v waited for above, released only after the
            // second wait below; `o` is read only after it; `a` is not rewritten before it.
            unsafe {
                self.issue_pv::<T, D, R, KS>(self.geo.stage(base, sv), &mut o, &a);
                if lead(t) {
                    bars.turn(self.next()).arrive();
                }
                wgmma::wait_group::<1>();
            }
            wgmma::fence_operand(&mut sc);
            // This tile's scores are done: its `k` is released (as above).
            if lead(t) {
                bars.k_empty(sk).arrive();
            }
            if j + 1 == n_own && lead(t) {
                bars.q_empty().arrive();
            }
            ks.advance();
            corr = self.softmax(t, s_kv, j, row0, &mut sc, &mut m, &mut l);
            if j + 1 < n_own {
                bars.k_full(ks.index()).wait_ring(ks);
            }
            // SAFETY: the whole warpgroup; waits for the P · v issued above.
            unsafe { wgmma::wait_group::<0>() };
            wgmma::fence_operand(&mut o);
            if lead(t) {
                bars.v_empty(sv).arrive();
            }
            vs.advance();
            a = pack_p(&sc);
        }

        // The last tile's P · v.
        o.map_each(|r, x| x * corr[((r / 2) % 2) as usize]);
        let sv = vs.index();
        bars.v_full(sv).wait_ring(vs);
        // SAFETY: the whole warpgroup; v waited for above, released after the wait.
        unsafe {
            self.issue_pv::<T, D, R, KS>(self.geo.stage(base, sv), &mut o, &a);
            wgmma::wait_group::<0>();
        }
        wgmma::fence_operand(&mut o);
        if lead(t) {
            bars.v_empty(sv).arrive();
        }
        vs.advance();
        // The item's tiles past this consumer's rows, before the epilogue: the others' turns
        // wait for this one's.
        // SAFETY: the caller's contract.
        unsafe { self.pass_tiles(t, n_kv - n_own, ks, vs, turn) };

        let mut inv = [0f32; 2];
        for h in 0..2 {
            l[h] += warp::shfl_xor_sync(u32::MAX, l[h], 1);
            l[h] += warp::shfl_xor_sync(u32::MAX, l[h], 2);
            inv[h] = if l[h] > 0.0 { 1.0 / l[h] } else { 0.0 };
        }
        let (b, h) = (bh / la.heads, bh % la.heads);
        if let Some(lse) = lse {
            // The quad's first lane stores its two rows' (the quad shares m and l).
            if t % 4 == 0 {
                for hh in 0..2 {
                    let row = wgmma::acc_coords(t, 2 * hh as u32).0;
                    store_lse(lse, b, h, row0 + row, m[hh], l[hh]);
                }
            }
        }
        let head = OutHead::of(out, b, h);
        // The consumer's 64 rows × D columns inside `out` with contiguous rows: stored from
        // one base pointer at constant offsets; else pair by pair, each checked.
        if let Some(w) = head.whole(row0, 64, D as u32) {
            o.each_pair(|r, v0, v1| {
                let (row, col) = wgmma::acc_coords(t, r);
                let f = inv[((r / 2) % 2) as usize];
                // SAFETY: (row, col + 1) inside the 64 × D block (the accumulator's
                // coordinates), col even; each element has one writer thread.
                unsafe { w.put_pair::<T>(row, col, v0 * f, v1 * f) };
            });
        } else {
            o.each_pair(|r, v0, v1| {
                let (row, col) = wgmma::acc_coords(t, r);
                let f = inv[((r / 2) % 2) as usize];
                head.store_pair::<T>(row0 + row, col, v0 * f, v1 * f);
            });
        }
    }
}
