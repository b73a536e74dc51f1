//! The portable attention kernels (`attention_{bf16,f16}`, `attention_lse_{bf16,f16}`), on every
//! GPU from sm_80 (A100 on): the families' members beside the sm_90a kernels of [`super::sm90`]
//! — the same function for (B, H, S, D) views of **any strides**, D ≤ 128, on the warp-level
//! tensor cores (`mma.sync.m16n8k16`), FlashAttention-2's schedule.
//!
//! The launchers choose by the one selection rule: on an H100 the sm_90a kernel runs whenever
//! its TMA tensor maps take `q`, `k` and `v` (rows contiguous, 16-byte aligned), this one
//! otherwise (a head dimension with a stride, an odd row pitch); on sm_80 and sm_89 only this
//! one runs.
//!
//! # Schedule (blocks of 128 threads, 4 warps; 34 KiB of static shared memory)
//!
//! * **Work**: an item is 64 query rows of one (batch, head), 16 per warp; blocks are
//!   persistent over the items (the automatic grid is one resident wave), in the sm_90a
//!   kernel's order (longest first under the causal mask).
//! * **Tiles**: the item's `q` tile (64 × D, padded to 64 or 128 columns with zeros) is loaded
//!   once into shared memory, and its A fragments read from there for each key tile
//!   (`ldmatrix.x4`); each 32-key tile of `k` and `v` is loaded into shared memory by the
//!   whole block (element loads through the views' strides, zeros outside the arrays), rows
//!   padded by 8 elements so that `ldmatrix`'s 8 rows fall in distinct banks.
//! * **Per key tile**, a warp: `S = q · kᵀ` (16 × 32: 4 accumulators `Acc16x8F32`, B from
//!   `k`'s rows by `ldmatrix.x2`), the masks, the online softmax (a row's 32 scores are in the
//!   4 lanes of a quad), then `O += P · v` with P converted to bf16 (f16) **in registers** (two
//!   adjacent 16 × 8 accumulators are one 16 × 16 A fragment) and `v` by `ldmatrix.x2.trans`.
//! * **Epilogue**: `O / l` rounded to the inputs' type, pairs stored into `out` of any
//!   strides; with `lse`, each row's log-sum-exp.
//!
//! Numerics as the sm_90a kernel's: f32 scores and sums, P rounded to the inputs' type before
//! `P · v`.

#[cfg(target_arch = "nvptx64")]
pub(super) use gpu::forward;

/// The device code.
#[cfg(target_arch = "nvptx64")]
mod gpu {
    use super::super::common::{here32, item_coords, pack, store_lse, OutHead};
    use crate::prelude::*;
    use ferrocuda_device::mma::{self, Acc16x8F32, FragA16x16, FragB16x8, Half16};
    use ferrocuda_device::shared::SharedArray2;
    use ferrocuda_device::{GpuFloat, View, ViewMut};

    /// Query rows per item (16 per warp) and keys per tile.
    const BM: u32 = 64;
    const BN: u32 = 32;
    /// Columns of a shared row: 128 and 8 of padding (16 bytes: `ldmatrix` rows 272 bytes
    /// apart cover the 32 banks once per 8 rows).
    const COLS: usize = 136;

    /// A tile of 16-bit elements (their bits: the tiles are read by `ldmatrix` alone).
    type Tile<const R: usize> = SharedArray2<u16, R, COLS>;

    /// A (B, H, S, D) operand's head: its base and strides (rows, columns), extents.
    #[derive(Clone, Copy)]
    struct Head {
        ptr: *const u16,
        s_row: isize,
        s_col: isize,
        rows: u32,
        cols: u32,
    }

    impl Head {
        #[inline(always)]
        fn of<T: Half16>(v: View<T, 4>, b: u32, h: u32) -> Head {
            let ix = v.indexer();
            let [_, _, rows, cols] = v.shape();
            Head {
                ptr: v
                    .as_ptr()
                    .wrapping_offset(ix.offset([b as usize, h as usize, 0, 0]))
                    .cast::<u16>(),
                s_row: ix.strides[2],
                s_col: ix.strides[3],
                rows: rows as u32,
                cols: cols as u32,
            }
        }

        /// Element `(r, c)`'s bits, 0 outside the head (the load is from a clamped address
        /// inside it: a select, not a branch).
        ///
        /// # Safety
        ///
        /// `rows ≥ 1`, `cols ≥ 1`.
        #[inline(always)]
        unsafe fn bits(&self, r: u32, c: u32) -> u32 {
            let at = (r.min(self.rows - 1) as isize) * self.s_row
                + (c.min(self.cols - 1) as isize) * self.s_col;
            // SAFETY: the clamped index is an element of the head.
            let x = unsafe { self.ptr.wrapping_offset(at).read() };
            if r < self.rows && c < self.cols {
                x as u32
            } else {
                0
            }
        }

        /// Rows `r0 .. r0 + R` (`DP` columns) of the head into `tile`, zeros outside; the
        /// block's 128 threads each store `R · DP / 256` pairs.
        ///
        /// # Safety
        ///
        /// `rows ≥ 1`, `cols ≥ 1`; every thread of the block calls it, and no thread reads
        /// `tile` until a barrier after it.
        #[inline(always)]
        unsafe fn load<const R: usize, const DP: u32>(&self, tile: Tile<R>, r0: u32, t: u32) {
            let pairs = R as u32 * DP / 2;
            let mut p = t;
            while p < pairs {
                let (r, c) = (p / (DP / 2), 2 * (p % (DP / 2)));
                // SAFETY: the caller's extents; (r, c..c + 2) is inside the tile (r < R,
                // c + 1 < DP ≤ 128).
                unsafe {
                    let pair = self.bits(r0 + r, c) | self.bits(r0 + r, c + 1) << 16;
                    let addr = tile.shared_addr(r as usize, c as usize);
                    core::arch::asm!("st.shared.b32 [{a}], {v};", a = in(reg32) addr,
                                     v = in(reg32) pair, options(nostack));
                }
                p += 128;
            }
        }
    }

    /// Bytes between two rows of a shared tile.
    const ROW: u32 = 2 * COLS as u32;

    /// # Safety
    ///
    /// Launched with 128 threads per block over views whose shapes agree as the kernel
    /// requires.
    #[inline(always)]
    pub(in super::super) unsafe fn forward<T: Half16>(
        q: View<T, 4>,
        k: View<T, 4>,
        v: View<T, 4>,
        out: ViewMut<T, 4>,
        lse: Option<ViewMut<f32, 3>>,
        scale: f32,
        causal: bool,
    ) {
        let q_s: Tile<64> = shared_array!(u16, [64, COLS], align = 16);
        let k_s: Tile<32> = shared_array!(u16, [32, COLS], align = 16);
        let v_s: Tile<32> = shared_array!(u16, [32, COLS], align = 16);
        let [batch, heads, s_q, d] = q.shape();
        let s_kv = k.shape()[2] as u32;
        if d == 0 || s_q == 0 {
            return;
        }
        let (heads, s_q) = (heads as u32, s_q as u32);
        let bh_count = batch as u32 * heads;
        let tiles_m = s_q.div_ceil(BM);
        let items = bh_count * tiles_m;
        let ctx = Ctx {
            q_s,
            k_s,
            v_s,
            t: thread::rank_in_block(),
            s_kv,
            scale_log2: scale * core::f32::consts::LOG2_E,
            causal,
        };
        let mut item = thread::block_idx().x;
        while item < items {
            let (bh, tm) = item_coords(item, bh_count, tiles_m, causal);
            let (b, h) = (bh / heads, bh % heads);
            // SAFETY: every thread of the block, in a loop whose trip count is uniform.
            unsafe {
                if d <= 64 {
                    ctx.item64(q, k, v, out, lse, b, h, tm)
                } else {
                    ctx.item128(q, k, v, out, lse, b, h, tm)
                }
            }
            item += thread::grid_dim().x;
        }
    }

    struct Ctx {
        q_s: Tile<64>,
        k_s: Tile<32>,
        v_s: Tile<32>,
        t: u32,
        s_kv: u32,
        scale_log2: f32,
        causal: bool,
    }

    /// One item's method, `$dp` columns wide (64 or 128): `$ks` = DP / 16 k-steps of
    /// `q · kᵀ`, `$nt` = DP / 8 output accumulators per warp. Every loop over the fragment
    /// arrays is written out (`unroll!`, literal bounds), so that they stay in registers.
    macro_rules! item_fn {
        ($name:ident, $dp:literal, $ks:literal, $nt:literal) => {
            /// # Safety
            ///
            /// Every thread of the block calls it (its barriers are the block's).
            #[allow(clippy::too_many_arguments, clippy::erasing_op, clippy::identity_op)]
            #[inline(always)]
            unsafe fn $name<T: Half16>(
                &self,
                q: View<T, 4>,
                k: View<T, 4>,
                v: View<T, 4>,
                out: ViewMut<T, 4>,
                lse: Option<ViewMut<f32, 3>>,
                b: u32,
                h: u32,
                tm: u32,
            ) {
                let t = self.t;
                let (w, lane) = (t / 32, t % 32);
                let (g, tq) = (lane / 4, lane % 4);
                let row0 = tm * BM;
                // This thread's two query rows.
                let rows = [row0 + 16 * w + g, row0 + 16 * w + g + 8];
                let (qh, kh, vh) = (Head::of(q, b, h), Head::of(k, b, h), Head::of(v, b, h));
                // The previous item's readers of q_s, k_s, v_s are done.
                thread::sync_threads();
                // SAFETY: the whole block; read after the barrier below.
                unsafe { qh.load::<64, $dp>(self.q_s, row0, t) };
                thread::sync_threads();
                let mut o = [Acc16x8F32::default(); $nt];
                let mut m = [f32::NEG_INFINITY; 2];
                let mut l = [0f32; 2];
                let all = self.s_kv.div_ceil(BN);
                let n_kv = if self.causal {
                    all.min((row0 + BM).div_ceil(BN))
                } else {
                    all
                };
                let sl2 = self.scale_log2;
                for j in 0..n_kv {
                    let kv0 = j * BN;
                    thread::sync_threads();
                    // SAFETY: the whole block; s_kv ≥ 1 (a key tile exists); read after the
                    // barrier below.
                    unsafe {
                        kh.load::<32, $dp>(self.k_s, kv0, t);
                        vh.load::<32, $dp>(self.v_s, kv0, t);
                    }
                    thread::sync_threads();
                    let mut s = [Acc16x8F32::default(); 4];
                    // This lane's `ldmatrix` row addresses (see `ferrocuda_device::mma`): A
                    // (.x4) rows l % 16 at column 8 (l / 16) of the warp's 16 q rows; B of
                    // k (.x2, N × K) rows l % 8 at column 8 (l / 8 % 2); B of v (.x2.trans,
                    // K × N) rows l % 16. The fragments are these plus constants.
                    let qa = here32(
                        self.q_s.shared_addr(0, 0) + (16 * w + lane % 16) * ROW + 16 * (lane / 16),
                    );
                    let ka = here32(self.k_s.shared_addr(0, 0) + (lane % 8) * ROW + 16 * (lane / 8 % 2));
                    let va = here32(self.v_s.shared_addr(0, 0) + (lane % 16) * ROW);
                    // The q fragments are read from shared memory for each tile rather than
                    // kept (32 registers fewer).
                    ferrocuda_device::unroll!(KK in 0..$ks {
                        // SAFETY: 16 aligned bytes of q_s per lane (rows of 272 bytes, columns
                        // a multiple of 8), the whole warp together.
                        let a = FragA16x16::<T>::from_regs(unsafe { mma::ldmatrix_x4(qa + 32 * KK) });
                        ferrocuda_device::unroll!(NT in 0..4 {
                            // SAFETY: as above, of k_s.
                            let bf = FragB16x8::<T>::from_regs(unsafe {
                                mma::ldmatrix_x2(ka + 8 * NT * ROW + 32 * KK)
                            });
                            s[NT] = mma::mma(a, bf, s[NT]);
                        });
                    });
                    // Scale, mask, row maxima (element I of accumulator NT: row I / 2, key
                    // 8 NT + 2 tq + I % 2 of the tile).
                    let mut mx = m;
                    ferrocuda_device::unroll!(NT in 0..4 {
                        ferrocuda_device::unroll!(I in 0..4 {
                            let key = kv0 + 8 * NT + 2 * tq + I % 2;
                            let masked =
                                key >= self.s_kv || (self.causal && key > rows[I / 2]);
                            let x = s[NT].regs[I];
                            let x = if masked { f32::NEG_INFINITY } else { x * sl2 };
                            s[NT].regs[I] = x;
                            mx[I / 2] = mx[I / 2].max(x);
                        });
                    });
                    let mut use_m = [0f32; 2];
                    let mut corr = [0f32; 2];
                    ferrocuda_device::unroll!(H in 0..2 {
                        mx[H] = mx[H].max(warp::shfl_xor_sync(u32::MAX, mx[H], 1));
                        mx[H] = mx[H].max(warp::shfl_xor_sync(u32::MAX, mx[H], 2));
                        use_m[H] = if mx[H] == f32::NEG_INFINITY { 0.0 } else { mx[H] };
                        corr[H] = GpuFloat::exp2(m[H] - use_m[H]);
                        m[H] = mx[H];
                    });
                    let mut sum = [0f32; 2];
                    ferrocuda_device::unroll!(NT in 0..4 {
                        ferrocuda_device::unroll!(I in 0..4 {
                            let e = GpuFloat::exp2(s[NT].regs[I] - use_m[I / 2]);
                            s[NT].regs[I] = e;
                            sum[I / 2] += e;
                        });
                    });
                    ferrocuda_device::unroll!(H in 0..2 {
                        l[H] = l[H] * corr[H] + sum[H];
                    });
                    ferrocuda_device::unroll!(NT in 0..$nt {
                        ferrocuda_device::unroll!(I in 0..4 {
                            o[NT].regs[I] *= corr[I / 2];
                        });
                    });
                    // P (16 × 32) as two A fragments: accumulators 2 KK and 2 KK + 1 side by
                    // side are one 16 × 16 A fragment.
                    ferrocuda_device::unroll!(KK in 0..2 {
                        let (x, y) = (s[2 * KK].regs, s[2 * KK + 1].regs);
                        let a = FragA16x16::<T>::from_regs([
                            pack::<T>(x[0], x[1]),
                            pack::<T>(x[2], x[3]),
                            pack::<T>(y[0], y[1]),
                            pack::<T>(y[2], y[3]),
                        ]);
                        ferrocuda_device::unroll!(NT in 0..$nt {
                            // SAFETY: 16 aligned bytes of v_s per lane, the whole warp together.
                            let bf = FragB16x8::<T>::from_regs(unsafe {
                                mma::ldmatrix_x2_trans(va + 16 * KK * ROW + 16 * NT)
                            });
                            o[NT] = mma::mma(a, bf, o[NT]);
                        });
                    });
                }
                let mut inv = [0f32; 2];
                ferrocuda_device::unroll!(H in 0..2 {
                    l[H] += warp::shfl_xor_sync(u32::MAX, l[H], 1);
                    l[H] += warp::shfl_xor_sync(u32::MAX, l[H], 2);
                    inv[H] = if l[H] > 0.0 { 1.0 / l[H] } else { 0.0 };
                });
                if let Some(lse) = lse {
                    // The quad's first lane stores its two rows' (the quad shares m and l).
                    if tq == 0 {
                        store_lse(lse, b, h, rows[0], m[0], l[0]);
                        store_lse(lse, b, h, rows[1], m[1], l[1]);
                    }
                }
                let oh = OutHead::of(out, b, h);
                ferrocuda_device::unroll!(NT in 0..$nt {
                    let c = 8 * NT + 2 * tq;
                    let r = o[NT].regs;
                    oh.store_pair::<T>(rows[0], c, r[0] * inv[0], r[1] * inv[0]);
                    oh.store_pair::<T>(rows[1], c, r[2] * inv[1], r[3] * inv[1]);
                });
            }
        };
    }

    impl Ctx {
        item_fn!(item64, 64, 4, 8);
        item_fn!(item128, 128, 8, 16);
    }
}
