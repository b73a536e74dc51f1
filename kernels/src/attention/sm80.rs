//! The portable attention kernels (`attention_{bf16,f16}`, `attention_lse_{bf16,f16}`), on every
//! GPU from sm_80 (A100 on): the families' members beside the sm_90a kernels of [`super::sm90`]
//! — the same function for (B, H, S, D) views of **any strides**, D ≤ 128, on the warp-level
//! tensor cores (`mma.sync.m16n8k16`), FlashAttention-2's schedule — and the wide kernels
//! (`attention{,_lse}_{bf16,f16}_wide`), the same schedule for D ≤ 256 with tiles of 256
//! columns (rows of 264 elements) in 66 KiB of dynamic shared memory: 32 output accumulators
//! per thread instead of 16, 255 registers (ptxas 12.9, sm_80 and sm_90: none spilled, the
//! element-load path of a key tile issued in two halves — all eight of a thread's chunks in
//! flight at once spilled on sm_90).
//!
//! The launchers choose by the one selection rule: on an H100 the sm_90a kernel runs whenever
//! its TMA tensor maps take `q`, `k` and `v` (rows contiguous, 16-byte aligned), this one
//! otherwise (a head dimension with a stride, an odd row pitch); on sm_80 and sm_89 only this
//! one runs.
//!
//! # Schedule (blocks of 128 threads, 4 warps; 34 KiB of static shared memory; 4 barriers per key tile)
//!
//! * **Work**: an item is 64 query rows of one (batch, head), 16 per warp; blocks are
//!   persistent over the items (the automatic grid is one resident wave): block `b` takes items
//!   `b`, `b + grid`, … (`common::item_coords`: longest first under the causal mask; the
//!   sm_90a kernel takes its causal items in pairs of one head instead).
//! * **Tiles**: the item's `q` tile (64 × D, padded to 64, 128 or (wide) 256 columns with zeros) is loaded
//!   once into shared memory, and its A fragments read from there for each key tile
//!   (`ldmatrix.x4`). Each 32-key tile of `k` and `v` is copied into shared memory by the
//!   whole block: where both heads' rows are contiguous and 16-byte aligned, by `cp.async`
//!   (16 bytes, zero-filled outside the arrays), the next tile of `k` issued as soon as every
//!   warp has read this one (its latency hidden under the softmax and `P · v`), the next of
//!   `v` after `P · v` (hidden under the next `q · kᵀ`); otherwise by element loads through
//!   the views' strides when the tile is due. Rows are padded by 8 elements so that
//!   `ldmatrix`'s 8 rows fall in distinct banks.
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

/// Columns of a shared row of the wide kernels (D ≤ 256): 256 and 8 of padding (rows 528
/// bytes apart: 16 bytes past a multiple of 128, so that `ldmatrix`'s 8 rows fall in
/// distinct banks).
pub(crate) const WIDE_COLS: usize = 264;

/// Dynamic shared memory of the wide kernels (`attention_{bf16,f16}_wide` and their `lse`
/// forms): the `q` tile (64 rows) and one tile each of `k` and `v` (32 rows), rows of 264
/// elements — 66 KiB.
pub const ATTENTION_WIDE_SMEM: u32 = (2 * (64 + 32 + 32) * WIDE_COLS) as u32;

/// The device code.
#[cfg(target_arch = "nvptx64")]
mod gpu {
    use super::super::common::{here32, item_coords, pack, store_lse, OutHead};
    use crate::prelude::*;
    use ferrocuda_device::mma::{self, Acc16x8F32, FragA16x16, FragB16x8, Half16};
    use ferrocuda_device::shared::{dynamic_shared, SharedArray2};
    use ferrocuda_device::{cp_async, GpuFloat, View, ViewMut};

    /// Query rows per item (16 per warp) and keys per tile.
    const BM: u32 = 64;
    const BN: u32 = 32;
    /// Columns of a shared row of the kernels for D ≤ 128: 128 and 8 of padding (16 bytes:
    /// `ldmatrix` rows 272 bytes apart cover the 32 banks once per 8 rows).
    const COLS: usize = 136;
    use super::{ATTENTION_WIDE_SMEM as WIDE_SMEM, WIDE_COLS};

    /// A tile of 16-bit elements, `R` rows of `C` (their bits: the tiles are read by
    /// `ldmatrix` alone).
    type Tile<const R: usize, const C: usize> = SharedArray2<u16, R, C>;

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

        /// `true` when the head's rows are contiguous, 16-byte aligned and a whole number
        /// of 16-byte chunks long: [`chunk`](Self::chunk) and [`copy_chunk`](Self::copy_chunk) then read 16 bytes at a time.
        #[inline(always)]
        fn vectors(&self) -> bool {
            self.s_col == 1
                && self.s_row % 8 == 0
                && (self.ptr as usize).is_multiple_of(16)
                && self.cols.is_multiple_of(8)
        }

        /// Chunk `i` of this thread (8 elements, zeros outside the head) of rows `r0 ..`
        /// (`DP` columns): chunk `t + 128 i` of the rows in row order, as [`put_chunk`] and
        /// [`copy_chunk`](Self::copy_chunk) place it. 16-byte loads when `vec`
        /// ([`vectors`](Self::vectors)), else element loads. A tile's chunks are loaded into
        /// registers first and stored after ([`load_tile!`]), so that its loads are in
        /// flight together.
        ///
        /// # Safety
        ///
        /// `rows ≥ 1`, `cols ≥ 1`; `vec` only when [`vectors`](Self::vectors) holds.
        #[inline(always)]
        unsafe fn chunk<const DP: u32>(&self, r0: u32, t: u32, i: u32, vec: bool) -> Chunk {
            let p = t + 128 * i;
            let (r, c) = (r0 + p / (DP / 8), 8 * (p % (DP / 8)));
            if vec {
                if r < self.rows && c < self.cols {
                    let at = r as isize * self.s_row + c as isize;
                    // SAFETY: 8 elements of the head (c + 8 ≤ cols: cols a multiple of 8),
                    // 16-byte aligned (base, row stride and c).
                    return unsafe { self.ptr.wrapping_offset(at).cast::<Chunk>().read() };
                }
                return Chunk([0; 4]);
            }
            let mut w = [0u32; 4];
            for (e, word) in w.iter_mut().enumerate() {
                let c = c + 2 * e as u32;
                // SAFETY: the caller's extents.
                *word = unsafe { self.bits(r, c) | self.bits(r, c + 1) << 16 };
            }
            Chunk(w)
        }

        /// Issues the `cp.async` copy of this thread's chunk `i` of rows `r0 ..` (`DP`
        /// columns) into `tile` (rows of `C ≥ DP` elements; placed as [`put_chunk`] places
        /// it), zero-filled outside the head; not committed.
        ///
        /// # Safety
        ///
        /// [`vectors`](Self::vectors) holds; chunk `i` lies inside the tile of `R` rows
        /// (`t + 128 i < R · DP / 8`); no thread accesses `tile` until a `wait_group` that
        /// covers the copy and a barrier after it, and the previous readers of `tile` passed a
        /// barrier before.
        #[inline(always)]
        unsafe fn copy_chunk<const R: usize, const C: usize, const DP: u32>(
            &self,
            tile: Tile<R, C>,
            r0: u32,
            t: u32,
            i: u32,
        ) {
            let p = t + 128 * i;
            let (r, c) = (p / (DP / 8), 8 * (p % (DP / 8)));
            let inside = r0 + r < self.rows && c < self.cols;
            let at = if inside {
                (r0 + r) as isize * self.s_row + c as isize
            } else {
                0
            };
            // SAFETY: 16 bytes inside the tile, 16-byte aligned (see `put_chunk`); the source
            // 8 elements of the head, 16-byte aligned (`vectors`), or none read (the
            // destination zero-filled) from the head's base.
            unsafe {
                cp_async::cg_zfill(
                    tile.shared_addr(r as usize, c as usize),
                    self.ptr.wrapping_offset(at),
                    if inside { 16 } else { 0 },
                )
            };
        }
    }

    /// 16 bytes of a tile row: 8 elements' bits.
    #[derive(Clone, Copy)]
    #[repr(C, align(16))]
    struct Chunk([u32; 4]);

    /// Stores this thread's chunk `i` ([`Head::chunk`]) into `tile` (`DP` columns of its rows of
    /// `C ≥ DP` elements).
    ///
    /// # Safety
    ///
    /// Chunk `i` lies inside the tile of `R` rows (`t + 128 i < R · DP / 8`); no other thread accesses
    /// those bytes between the barriers around the store.
    #[inline(always)]
    unsafe fn put_chunk<const R: usize, const C: usize, const DP: u32>(
        tile: Tile<R, C>,
        chunk: Chunk,
        t: u32,
        i: u32,
    ) {
        let p = t + 128 * i;
        let (r, c) = (p / (DP / 8), 8 * (p % (DP / 8)));
        let addr = tile.shared_addr(r as usize, c as usize);
        let [a, b, cc, d] = chunk.0;
        // SAFETY: 16 bytes inside the tile (r < R, c + 8 ≤ DP ≤ C), 16-byte aligned (rows of
        // 2·C bytes, a multiple of 16; c a multiple of 8; the tile 16-byte aligned).
        unsafe {
            core::arch::asm!("st.shared.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};",
                             p = in(reg32) addr, a = in(reg32) a, b = in(reg32) b,
                             c = in(reg32) cc, d = in(reg32) d, options(nostack));
        }
    }

    /// Rows `$r0 ..` of `$head` into `$tile` (`$rows` × `$dp`, `$n` = `$rows · $dp / 1024`
    /// chunks per thread), every thread of the block: the loads into registers first, then
    /// the stores — or, in the `@chunks` form, only chunks `$lo .. $hi` of them (a wide tile in
    /// parts, fewer registers in flight). `$t` is made per call (see
    /// [`here`](super::super::common::here)): the chunks' addresses are invariant over the key
    /// tiles, and hoisted out of the loop they would stay live across it.
    ///
    /// Safety: as [`Head::chunk`] and [`put_chunk`].
    macro_rules! load_tile {
        ($head:expr, $tile:expr, $rows:literal, $dp:literal, $n:tt, $r0:expr, $t:expr, $vec:expr) => {
            load_tile!(@chunks $head, $tile, $rows, $dp, 0, $n, $r0, $t, $vec)
        };
        (@chunks $head:expr, $tile:expr, $rows:literal, $dp:literal, $lo:tt, $hi:tt, $r0:expr, $t:expr, $vec:expr) => {{
            let t = here32($t);
            let mut c = [Chunk([0; 4]); $hi];
            ferrocuda_device::unroll!(I in $lo..$hi {
                c[I] = $head.chunk::<$dp>($r0, t, I, $vec);
            });
            ferrocuda_device::unroll!(I in $lo..$hi {
                put_chunk::<$rows, _, $dp>($tile, c[I], t, I);
            });
        }};
    }

    /// Issues the `cp.async` copies of rows `$r0 ..` of `$head` into `$tile`, as
    /// [`load_tile!`] places them; not committed.
    ///
    /// Safety: as [`Head::copy_chunk`].
    macro_rules! copy_tile {
        ($head:expr, $tile:expr, $rows:literal, $dp:literal, $n:literal, $r0:expr, $t:expr) => {{
            let t = here32($t);
            ferrocuda_device::unroll!(I in 0..$n {
                $head.copy_chunk::<$rows, _, $dp>($tile, $r0, t, I);
            });
        }};
    }

    /// Key tile rows `$r0 ..` of `$head` into `$tile` (32 rows, `$n` chunks per thread): by
    /// [`copy_tile!`] when `$asynchronous` (not committed), else by [`load_tile!`] through
    /// registers, in the parts `[$lo $hi]` (chunks `$lo .. $hi`) one after the other.
    ///
    /// Safety: as [`copy_tile!`] and [`load_tile!`].
    macro_rules! key_tile {
        ($asynchronous:expr, $head:expr, $tile:expr, $dp:literal, $n:literal, [$([$lo:tt $hi:tt])+], $r0:expr, $t:expr) => {
            if $asynchronous {
                copy_tile!($head, $tile, 32, $dp, $n, $r0, $t);
            } else {
                $(load_tile!(@chunks $head, $tile, 32, $dp, $lo, $hi, $r0, $t, false);)+
            }
        };
    }

    /// The forward pass of a portable kernel: with `WIDE`, tiles of 256 columns in the
    /// launch's dynamic shared memory ([`WIDE_SMEM`] bytes: D ≤ 256); else tiles of 128 in
    /// static shared memory (34 KiB: D ≤ 128). `WIDE` is a constant of the kernel: its other
    /// branch, and the static tiles with it, are not in the wide kernels.
    ///
    /// # Safety
    ///
    /// Launched with 128 threads per block over views whose shapes agree as the kernel
    /// requires (D ≤ 256 with `WIDE`, else D ≤ 128), with `WIDE` at least [`WIDE_SMEM`]
    /// bytes of dynamic shared memory.
    #[inline(always)]
    pub(in super::super) unsafe fn forward<T: Half16, const WIDE: bool>(
        q: View<T, 4>,
        k: View<T, 4>,
        v: View<T, 4>,
        out: ViewMut<T, 4>,
        lse: Option<ViewMut<f32, 3>>,
        scale: f32,
        causal: bool,
    ) {
        if !WIDE {
            let q_s: Tile<64, COLS> = shared_array!(u16, [64, COLS], align = 16);
            let k_s: Tile<32, COLS> = shared_array!(u16, [32, COLS], align = 16);
            let v_s: Tile<32, COLS> = shared_array!(u16, [32, COLS], align = 16);
            // SAFETY: the caller's contract; tiles of 64, 32 and 32 rows of COLS elements.
            return unsafe { items(q_s, k_s, v_s, q, k, v, out, lse, scale, causal) };
        }
        let smem = dynamic_shared::<u8>();
        // Launched with too little shared memory (the launchers give every launch WIDE_SMEM):
        // abort, location recorded.
        ferrocuda_device::device_assert!(smem.len() >= WIDE_SMEM as usize);
        let base = smem.cast::<u16>().as_mut_ptr();
        // SAFETY: three tiles of 64, 32 and 32 rows of WIDE_COLS elements, apart, inside the
        // launch's dynamic shared memory (checked above; 16-byte aligned, rows of 528 bytes),
        // which nothing else of the kernel uses: the handles `shared_array!` would give three
        // statics of those shapes.
        let (q_s, k_s, v_s): (
            Tile<64, WIDE_COLS>,
            Tile<32, WIDE_COLS>,
            Tile<32, WIDE_COLS>,
        ) = unsafe {
            (
                SharedArray2::from_raw(base),
                SharedArray2::from_raw(base.wrapping_add(64 * WIDE_COLS)),
                SharedArray2::from_raw(base.wrapping_add(96 * WIDE_COLS)),
            )
        };
        // SAFETY: the caller's contract.
        unsafe { items(q_s, k_s, v_s, q, k, v, out, lse, scale, causal) }
    }

    /// The block's items (64 query rows of one head each), persistent over the grid, each by
    /// the item method of its head dimension: [`Ctx::item256`] with tiles of rows of
    /// [`WIDE_COLS`], else [`Ctx::item64`] or [`Ctx::item128`].
    ///
    /// # Safety
    ///
    /// As [`forward`]; `q_s`, `k_s`, `v_s` are tiles of 64, 32 and 32 rows of `C ≥ D + 8`
    /// elements in shared memory that only this block uses.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn items<T: Half16, const C: usize>(
        q_s: Tile<64, C>,
        k_s: Tile<32, C>,
        v_s: Tile<32, C>,
        q: View<T, 4>,
        k: View<T, 4>,
        v: View<T, 4>,
        out: ViewMut<T, 4>,
        lse: Option<ViewMut<f32, 3>>,
        scale: f32,
        causal: bool,
    ) {
        let [batch, heads, s_q, d] = q.shape();
        let s_kv = k.shape()[2] as u32;
        if d == 0 || s_q == 0 {
            return;
        }
        let (heads, s_q) = (heads as u32, s_q as u32);
        // Query heads per key/value head (`k`'s heads divide `q`'s: the launch's rule).
        let group = heads / (k.shape()[1] as u32).max(1);
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
            // Grouped-query attention: `group` query heads share key/value head `h / group`.
            let hk = h / group;
            // SAFETY: every thread of the block, in a loop whose trip count is uniform; the
            // tiles' rows hold the item's columns (C is a constant of the kernel).
            unsafe {
                if C == WIDE_COLS {
                    ctx.item256(q, k, v, out, lse, b, h, hk, tm)
                } else if d <= 64 {
                    ctx.item64(q, k, v, out, lse, b, h, hk, tm)
                } else {
                    ctx.item128(q, k, v, out, lse, b, h, hk, tm)
                }
            }
            item += thread::grid_dim().x;
        }
    }

    struct Ctx<const C: usize> {
        q_s: Tile<64, C>,
        k_s: Tile<32, C>,
        v_s: Tile<32, C>,
        t: u32,
        s_kv: u32,
        scale_log2: f32,
        causal: bool,
    }

    /// One item's method, `$dp` columns wide (64, 128 or 256): `$ks` = DP / 16 k-steps of
    /// `q · kᵀ`, `$nt` = DP / 8 output accumulators per warp, `$nq` and `$nkv` = the 16-byte
    /// chunks per thread of the q tile and of a key tile (64 · DP / 1024, 32 · DP / 1024),
    /// `$parts` the key tile's chunks loaded together by the element-load path (see
    /// [`key_tile!`]). Every loop over the fragment arrays is written out (`unroll!`, literal
    /// bounds), so that they stay in registers.
    macro_rules! item_fn {
        ($name:ident, $dp:literal, $ks:literal, $nt:literal, $nq:literal, $nkv:literal, $parts:tt) => {
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
                hk: u32,
                tm: u32,
            ) {
                let t = self.t;
                let (w, lane) = (t / 32, t % 32);
                let (g, tq) = (lane / 4, lane % 4);
                let row0 = tm * BM;
                // This thread's two query rows.
                let rows = [row0 + 16 * w + g, row0 + 16 * w + g + 8];
                let (qh, kh, vh) = (Head::of(q, b, h), Head::of(k, b, hk), Head::of(v, b, hk));
                // The previous item's readers of q_s, k_s, v_s are done.
                thread::sync_threads();
                // SAFETY: the whole block; q has rows (s_q ≥ 1) and columns (D ≥ 1); read
                // after the barrier below.
                unsafe { load_tile!(qh, self.q_s, 64, $dp, $nq, row0, t, qh.vectors()) };
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
                // The key tiles: where both heads' rows allow (`vectors`), `cp.async` copies
                // straight to shared memory, each tile's issued while the previous one is in
                // use — k's next tile once every warp has read k_s, v's once every warp has
                // read v_s — two groups per tile (k, then v), waited for one at a time. Else
                // loads through registers when the tile is due.
                let asynchronous = kh.vectors() && vh.vectors();
                if n_kv > 0 {
                    // SAFETY: the whole block, after the barrier above (no reader of k_s, v_s
                    // left); s_kv ≥ 1, D ≥ 1; read after a wait and a barrier below.
                    unsafe {
                        key_tile!(asynchronous, kh, self.k_s, $dp, $nkv, $parts, 0, t);
                        cp_async::commit_group();
                        key_tile!(asynchronous, vh, self.v_s, $dp, $nkv, $parts, 0, t);
                        cp_async::commit_group();
                    }
                }
                for j in 0..n_kv {
                    let kv0 = j * BN;
                    // Tile j of k has landed (v's may still be in flight).
                    cp_async::wait_group::<1>();
                    thread::sync_threads();
                    let mut s = [Acc16x8F32::default(); 4];
                    // This lane's `ldmatrix` row addresses (see `ferrocuda_device::mma`): A
                    // (.x4) rows l % 16 at column 8 (l / 16) of the warp's 16 q rows; B of
                    // k (.x2, N × K) rows l % 8 at column 8 (l / 8 % 2); B of v (.x2.trans,
                    // K × N) rows l % 16. The fragments are these plus constants.
                    let qa = here32(
                        self.q_s.shared_addr(0, 0) + (16 * w + lane % 16) * Self::ROW + 16 * (lane / 16),
                    );
                    let ka = here32(self.k_s.shared_addr(0, 0) + (lane % 8) * Self::ROW + 16 * (lane / 8 % 2));
                    let va = here32(self.v_s.shared_addr(0, 0) + (lane % 16) * Self::ROW);
                    // The q fragments are read from shared memory for each tile rather than
                    // kept (a whole fragment's registers fewer).
                    ferrocuda_device::unroll!(KK in 0..$ks {
                        // SAFETY: 16 aligned bytes of q_s per lane (rows of 272 bytes, columns
                        // a multiple of 8), the whole warp together.
                        let a = FragA16x16::<T>::from_regs(unsafe { mma::ldmatrix_x4(qa + 32 * KK) });
                        ferrocuda_device::unroll!(NT in 0..4 {
                            // SAFETY: as above, of k_s.
                            let bf = FragB16x8::<T>::from_regs(unsafe {
                                mma::ldmatrix_x2(ka + 8 * NT * Self::ROW + 32 * KK)
                            });
                            s[NT] = mma::mma(a, bf, s[NT]);
                        });
                    });
                    // Every warp has read k_s: tile j + 1 of k may be written.
                    thread::sync_threads();
                    if j + 1 < n_kv {
                        // SAFETY: the whole block, after the barrier above; read after a wait
                        // and a barrier.
                        unsafe { key_tile!(asynchronous, kh, self.k_s, $dp, $nkv, $parts, kv0 + BN, t) };
                    }
                    cp_async::commit_group();
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
                    // Tile j of v has landed (k's next may still be in flight).
                    cp_async::wait_group::<1>();
                    thread::sync_threads();
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
                                mma::ldmatrix_x2_trans(va + 16 * KK * Self::ROW + 16 * NT)
                            });
                            o[NT] = mma::mma(a, bf, o[NT]);
                        });
                    });
                    // Every warp has read v_s: tile j + 1 of v may be written.
                    thread::sync_threads();
                    if j + 1 < n_kv {
                        // SAFETY: as for k above.
                        unsafe { key_tile!(asynchronous, vh, self.v_s, $dp, $nkv, $parts, kv0 + BN, t) };
                    }
                    cp_async::commit_group();
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

    impl<const C: usize> Ctx<C> {
        /// Bytes between two rows of a shared tile.
        const ROW: u32 = 2 * C as u32;

        item_fn!(item64, 64, 4, 8, 4, 2, [[0 2]]);
        item_fn!(item128, 128, 8, 16, 8, 4, [[0 4]]);
        item_fn!(item256, 256, 16, 32, 16, 8, [[0 4] [4 8]]);
    }
}
