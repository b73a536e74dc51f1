//! The sm_90a attention kernels (`attention{,_lse}_{bf16,f16}_d64_sm90` for D ≤ 64,
//! `attention_{bf16,f16}_sm90`, `attention_lse_{bf16,f16}_sm90` for D ≤ 128;
//! `attention{,_lse}_{bf16,f16}_wide_sm90` for D ≤ 256): the forward pass on Hopper's tensor
//! cores, generic over the 16-bit element type, the log-sum-exp output and the tiles'
//! geometry.
//!
//! # Geometries
//!
//! | kernels | D | consumers (threads) | query rows an item | key tile | `k`/`v` stages | shared memory | `S` per consumer thread | `O` |
//! | --- | --- | --- | --- | --- | --- | --- | --- | --- |
//! | `_d64_sm90` | ≤ 64 (1 panel of 64 columns) | 3 (512; 2 compute under the causal mask) | 192 (128 under the causal mask) | 128 keys | 4 | 153.2 KiB | 64 f32 | 32 f32 |
//! | `_sm90` | ≤ 64 or ≤ 128 (1 or 2 panels) | 2 (384) | 128 | 128 keys | 3 | 225.1 KiB | 64 f32 | 32 or 64 f32 |
//! | `_wide_sm90` | ≤ 256 (4 panels) | 2 (384) | 128 | 64 keys | 2 | 193.1 KiB | 32 f32 | 128 f32 |
//!
//! At D ≤ 64 a key tile's exponentials cost about as much time as its MMAs (one `MUFU.EX2`
//! per score, 16 a cycle per SM, against half the MMAs of D = 128), so two consumers cannot
//! hide each other's softmax; the `_d64` kernels run three (FlashAttention-3's 192-row tile
//! for D ≤ 64), each `k` and `v` tile then serving 192 query rows instead of 128. Their
//! registers: 160 per consumer thread, 32 for the producer (`3 × 128 × 160 + 128 × 32` =
//! 65 536).
//!
//! The wide kernels halve the key tile so that the scores, `P` and the 64 × 256 output fit
//! a consumer's 232 registers, and keep two stages of 64 KiB beside the 64 KiB `q` tile.
//! Each stage's `k` and `v` are released separately (`k` once its scores are done, `v` once
//! its `P · v` is): with two stages a consumer holds this tile's `k` and the previous tile's
//! `v`, and the producer loads the next `k` into the stage whose `k` was released.
//!
//! # Schedule (sm_90a: `wgmma`, TMA, mbarriers; one block of 384 threads per SM, 512 for D ≤ 64)
//!
//! * **Work**: an item is 64 query rows a consumer (128; 192 in the `_d64` kernels without
//!   the mask) of one
//!   (batch, head); blocks are persistent over the
//!   items (block `b` takes items `b`, `b + grid`, …). Without a mask the query tiles of one
//!   head are adjacent items (the blocks running together share that head's `k` and `v` in
//!   L2); with the causal mask a block takes its items in pairs of one head, query tiles
//!   `tiles_m − 1 − p` and `p`, which together see the same number of keys whatever `p` is
//!   (under the mask the items are 128 rows in every kernel, the key tiles 128 or 64), so the
//!   blocks' shares of work even out; the pairs of one head adjacent (so the blocks running
//!   together share its `k` and `v` in L2: `common::paired_item`).
//! * **Warp specialisation**: warpgroup 0 is the *producer* — one thread issues the TMA loads
//!   (boxes of 128 rows — 192 for the `_d64` kernels' `q`, 64 for the wide kernels' `k` and
//!   `v` — × 64 columns, 128-byte
//!   swizzle: one box per 64 of the head dimension): the item's `q` tile once, then each tile
//!   of `k` and of `v` into a ring of stages (see the geometries), `k` and `v` on barriers of
//!   their own so that the scores start before `v` lands, and each loaded once the consumers
//!   released the stage's `k` (or `v`);
//!   it keeps 40 registers (`setmaxnreg.dec`; 32 with three consumers). Warpgroups 1 and 2
//!   (and 3) are the *consumers* (`setmaxnreg.inc` to 232; 160 with three), 64 query rows
//!   each.
//! * **Per key tile**, a consumer: `S = q · kᵀ` (64 × 128, f32: `wgmma m64n128k16`, A and B
//!   from shared memory, D / 16 steps; the wide kernels 64 × 64, `m64n64k16`); masks (keys past the end, keys after the query under
//!   the causal mask — only in the tiles that need it); the *online softmax* in registers:
//!   each row's running maximum `m` and sum `l` (a row's 128 scores live in the 4 lanes of a
//!   quad: two shuffles), `P = 2^(S·scale·log₂e − m)`, the output rescaled by `2^(m_old −
//!   m)`; then `O += P · v` with `P` converted to bf16 (f16) **in registers** — the f32 accumulator's
//!   layout is the A-fragment layout of the next `wgmma` (`m64nDk16`, A from registers, `v`
//!   N-major from shared memory: `mma_bf16_rs_nb`, `mma_f16_rs_nb`) — releasing the stage's
//!   `k` once the scores are done and its `v` after `P · v`.
//! * **Intra-warpgroup overlap** (FlashAttention-3's): a consumer issues tile `j`'s `q · kᵀ`,
//!   then tile `j − 1`'s `P · v`, and runs tile `j`'s softmax while `P · v` is on the tensor
//!   cores (so it holds two stages: this tile's `k`, the previous tile's `v` — hence three in
//!   the narrow kernels' ring; the wide kernels' two suffice because `k` and `v` are released
//!   apart). The first tile is peeled off and the last `P · v` follows the loop: every
//!   `wgmma` of the loop is issued and waited for on every path.
//! * **Tiles a consumer passes**: an item's key tiles are those its last row sees; under the
//!   causal mask a consumer's own 64 rows may see fewer (in the wide kernels consumer 0 one
//!   64-key tile fewer each item), and in a partial last item a consumer may have no row at
//!   all. Such tiles it *passes*: waits for their `k` and `v`, takes their turns and releases
//!   them, without MMAs or softmax (all its scores would be masked: nothing would change).
//!   Every consumer that computes so keeps the item's every turn and ring position.
//! * **The `_d64` kernels under the causal mask** run two of their three consumers, in items
//!   of 128 rows (`layout::active`: with 192-row items the consumers' key tiles differ under
//!   the mask and a partial last item runs on one consumer; the two-consumer schedule is the
//!   faster there).
//! * **Head dimensions**: the tiles are 64, 128 or (wide) 256 columns wide: TMA
//!   fills the columns past `D` with zeros, which add nothing to `q · kᵀ` and give columns of
//!   `O` that are not stored. Sequence lengths need no multiple either: rows past the end
//!   read as zeros, their keys are masked, their queries not stored.
//! * **Epilogue**: `O / l` rounded to the inputs' type, stored pairwise into `out` of any
//!   strides: a consumer's 64 × D block inside `out` with contiguous, 4-byte aligned rows from
//!   one base pointer at constant offsets, any other pair by pair, each checked. The `q` tile
//!   is released as soon as the item's last scores are done, so that the next item's `q`
//!   loads under the last softmax, `P · v` and this store.
//!
//! * **Ping-pong**: the consumers issue their tensor-core work — a tile's `q · kᵀ` and,
//!   in the loop, the previous tile's `P · v` with it — in turns (a "turn" mbarrier each,
//!   round the consumers: FlashAttention-3's inter-warpgroup order), so that one's softmax
//!   runs under the others' MMAs.
//! * **Softmax**: one FFMA and one `ex2.approx.ftz` per score — `2^(s · c − m)` with
//!   `c = scale · log₂e` and `m` the row's extreme raw score, signed by the scale (weights
//!   below 2⁻¹²⁶ of the row's largest flush to zero).
//!
//! Launch: `block = 384` (`.reqntid`; 512 for the `_d64` kernels), `min_blocks = 1`;
//! [`ATTENTION_SMEM`] bytes of dynamic shared memory ([`ATTENTION_D64_SMEM`] for the `_d64`
//! kernels, [`ATTENTION_WIDE_SM90_SMEM`] for the wide ones).

#[cfg(ferrocuda_arch = "sm_90a")]
use crate::prelude::*;
#[cfg(ferrocuda_arch = "sm_90a")]
use ferrocuda_device::mma::Half16;
#[cfg(ferrocuda_arch = "sm_90a")]
use ferrocuda_device::TensorMap;
#[cfg(ferrocuda_arch = "sm_90a")]
use ferrocuda_device::ViewMut;

/// The consumer warpgroups' work: scores, softmax, `P · v` and the epilogue of an item.
#[cfg(ferrocuda_arch = "sm_90a")]
mod consumer;
/// The tensor maps, the shared-memory layout and the launch's shape.
mod layout;
#[cfg(ferrocuda_arch = "sm_90a")]
use consumer::Consumer;
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_arch = "sm_90a"))]
use layout::smem_bytes;
#[cfg(ferrocuda_arch = "sm_90a")]
use layout::{active, kv_tiles, tiles_base, Bars, Geometry, Launch};
pub use layout::{HeadsMap, HeadsMap192, KeysMap64};

/// Dynamic shared memory of an `attention` launch (D ≤ 128): the `q` tile (two panels,
/// 32 KiB), three stages of `k` and `v` (128 rows × 128 columns each: 64 KiB a stage), 16
/// mbarriers, and 1 KiB to align the tiles to the 128-byte swizzle's 1024-byte atom
/// (225.1 KiB of the H100's 227).
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_arch = "sm_90a"))]
pub const ATTENTION_SMEM: u32 = smem_bytes(2, 2, 128, 3);

/// Dynamic shared memory of a launch for D ≤ 64 with three consumers: the `q` tile (one
/// panel of 192 rows, 24 KiB), four stages of `k` and `v` (128 rows × 64 columns each: 32 KiB
/// a stage), 21 mbarriers and the 1 KiB of alignment (153.2 KiB).
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_arch = "sm_90a"))]
pub const ATTENTION_D64_SMEM: u32 = smem_bytes(3, 1, 128, 4);

/// Dynamic shared memory of a wide launch (D ≤ 256): the `q` tile (four panels, 64 KiB),
/// two stages of `k` and `v` (64 rows × 256 columns each: 64 KiB a stage), 12 mbarriers and
/// the 1 KiB of alignment (193.1 KiB).
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_arch = "sm_90a"))]
pub const ATTENTION_WIDE_SM90_SMEM: u32 = smem_bytes(2, 4, 64, 2);

/// The producer and consumer loops of a kernel with `NC` consumer warpgroups (items of `QB`
/// = 64 · `NC` query rows), whose key tiles have `BN` rows, whose tiles have `PMAX` panels of
/// 64 columns (D ≤ 64 · `PMAX`), with `STAGES` stages of `k` and `v`: `(QB, BN, PMAX,
/// STAGES, NC)` = `(128, 128, 2, 3, 2)` for D ≤ 128 ([`ATTENTION_SMEM`]), `(192, 128, 1, 4,
/// 3)` for D ≤ 64 ([`ATTENTION_D64_SMEM`]), `(128, 64, 4, 2, 2)` for D ≤ 256
/// ([`ATTENTION_WIDE_SM90_SMEM`]).
///
/// # Safety
///
/// Launched with `128 · (NC + 1)` threads per block and at least
/// [`smem_bytes`]`(NC, PMAX, BN, STAGES)` bytes of dynamic shared memory; `q`, `k`, `v` the
/// maps of (B, H, S, D) arrays whose shapes agree as the kernel requires, D ≤ 64 · `PMAX`.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
pub(super) unsafe fn forward<
    T: Half16 + crate::epilogue::OutElem,
    const QB: u32,
    const BN: u32,
    const PMAX: u32,
    const STAGES: usize,
    const NC: u32,
>(
    q: TensorMap<T, 128, 1, 1, QB, 64>,
    k: TensorMap<T, 128, 1, 1, BN, 64>,
    v: TensorMap<T, 128, 1, 1, BN, 64>,
    out: ViewMut<T, 4>,
    lse: Option<ViewMut<f32, 3>>,
    scale: f32,
    causal: bool,
) {
    use ferrocuda_device::mbarrier::RingState;
    use ferrocuda_device::shared::{dynamic_shared, shared_addr_of};
    use ferrocuda_device::tma::Tma;
    use ferrocuda_device::wgmma;
    // The three geometries the item method is written for.
    const {
        assert!(QB == 64 * NC);
        assert!(
            (BN == 128 && PMAX == 2 && STAGES == 3 && NC == 2)
                || (BN == 128 && PMAX == 1 && STAGES == 4 && NC == 3)
                || (BN == 64 && PMAX == 4 && STAGES == 2 && NC == 2)
        )
    };
    let geo = Geometry::<BN, PMAX, STAGES, NC>;

    let smem = dynamic_shared::<u8>();
    // Launched with too little shared memory: abort, location recorded.
    ferrocuda_device::device_assert!(
        smem.len() >= smem_bytes(NC, PMAX, BN, STAGES as u32) as usize
    );
    let raw = smem.as_mut_ptr();
    let skew = (1024 - (shared_addr_of(raw) & 1023)) & 1023;
    let tiles = raw.wrapping_add(skew as usize);
    let base = tiles_base();
    // Barriers: q full, q empty, then per stage k full, v full, k empty, v empty; the turns.
    let bars = Bars::<STAGES, NC>(tiles.wrapping_add(geo.barriers_at() as usize).cast::<u64>());
    let tid = thread::rank_in_block();
    if tid == 0 {
        // SAFETY: one thread, before the block barrier below; 8-byte aligned shared memory of
        // this block (inside the launch's, checked above), not yet initialised, that only
        // mbarrier operations touch.
        unsafe { bars.init(active::<NC>(causal)) };
    }
    thread::sync_threads();
    let (q_full, q_empty) = (bars.q_full(), bars.q_empty());
    let first = thread::block_idx().x;
    let wg = tid / 128;
    if wg == 0 {
        // SAFETY: every thread of the producer warpgroup, convergently; the consumers'
        // increase and this fit the SM's 65 536 registers: 2 × 128 × 232 + 128 × 40 with two
        // consumers (384 threads), 3 × 128 × 160 + 128 × 32 with three (512).
        unsafe {
            if NC == 3 {
                wgmma::setmaxnreg_dec::<32>()
            } else {
                wgmma::setmaxnreg_dec::<40>()
            }
        };
        if tid == 0 {
            q.prefetch();
            k.prefetch();
            v.prefetch();
            let mut qs = RingState::<1>::producer();
            let mut st = RingState::<STAGES>::producer();
            let mut item = first;
            loop {
                let la = Launch::of::<T, QB, BN, PMAX, NC>(&q, &k, causal);
                if la.done(item, causal) {
                    break;
                }
                let (bh, tm) = la.item(item, causal);
                let (b, h) = ((bh / la.heads) as i32, (bh % la.heads) as i32);
                // Grouped-query attention: `group` query heads share key/value head
                // `h / group`.
                let hk = h / la.group as i32;
                let panels = la.panels;
                q_empty.wait_ring(&qs);
                // SAFETY: the q tile is free (every consumer released it); the barrier
                // expects exactly the boxes' bytes, which the loads deliver.
                unsafe {
                    q_full.arrive_expect_tx(panels * geo.q_panel());
                    for p in 0..panels {
                        let dst = base + p * geo.q_panel();
                        let c = [b, h, (tm * la.bm) as i32, (p * 64) as i32];
                        q.load(dst, q_full.shared_addr(), &c);
                    }
                }
                qs.advance();
                for j in 0..kv_tiles(tm, la.bm, la.s_kv, causal, BN) {
                    let s = st.index();
                    let stage = geo.stage(base, s);
                    let c = |p: u32| [b, hk, (j * BN) as i32, (p * 64) as i32];
                    // `k` and `v` each once the consumers released the stage's tile of it
                    // (`k` after its scores, `v` after its `P · v`).
                    bars.k_empty(s).wait_ring(&st);
                    // SAFETY: the stage's k is free; the barrier expects the boxes' bytes.
                    unsafe {
                        bars.k_full(s).arrive_expect_tx(panels * geo.kv_panel());
                        for p in 0..panels {
                            k.load(
                                stage + p * geo.kv_panel(),
                                bars.k_full(s).shared_addr(),
                                &c(p),
                            );
                        }
                    }
                    bars.v_empty(s).wait_ring(&st);
                    // SAFETY: as for k.
                    unsafe {
                        bars.v_full(s).arrive_expect_tx(panels * geo.kv_panel());
                        for p in 0..panels {
                            v.load(
                                geo.v_of(stage) + p * geo.kv_panel(),
                                bars.v_full(s).shared_addr(),
                                &c(p),
                            );
                        }
                    }
                    st.advance();
                }
                item += la.step;
            }
        }
    } else {
        // SAFETY: every thread of each consumer warpgroup, convergently (see above).
        unsafe {
            if NC == 3 {
                wgmma::setmaxnreg_inc::<160>()
            } else {
                wgmma::setmaxnreg_inc::<232>()
            }
        };
        let ctx = Consumer {
            geo,
            bars,
            cw: wg - 1,
            t: tid % 128,
            // A scale of 0 (every allowed key weighted alike) as the smallest normal scale:
            // its products flush to 0 alike, and masked (infinite) scores stay infinite.
            scale_log2: if scale == 0.0 {
                f32::MIN_POSITIVE
            } else {
                scale * core::f32::consts::LOG2_E
            },
            causal,
        };
        let mut qs = RingState::<1>::consumer();
        // Where the next `k` and the next `v` are (a consumer holds the previous tile's `v`
        // beside this tile's `k`; the two meet again at each item's end).
        let (mut ks, mut vs) = (
            RingState::<STAGES>::consumer(),
            RingState::<STAGES>::consumer(),
        );
        // The turns go round, consumer 0 first: its first wait passes (a producer's parity).
        let mut turn = if wg == 1 {
            RingState::<1>::producer()
        } else {
            RingState::<1>::consumer()
        };
        let mut item = first;
        // A consumer that does not compute (the third under the causal mask: `active`) has
        // no item: it neither waits nor arrives.
        let idle = ctx.cw >= ctx.nc();
        loop {
            let la = Launch::of::<T, QB, BN, PMAX, NC>(&q, &k, causal);
            if idle || la.done(item, causal) {
                break;
            }
            let (bh, tm) = la.item(item, causal);
            q_full.wait_ring(&qs);
            qs.advance();
            // SAFETY: the whole warpgroup runs this (a uniform branch), after the item's q
            // tile was waited for, its ring positions in step with the producer's; S_kv ≥ 1
            // (the launch's rule: TMA takes no empty array). The geometry is the kernel's
            // (a constant): 64-row key tiles with four panels, else 128-row ones with one or
            // two.
            unsafe {
                if BN == 64 {
                    ctx.item::<T, 256, 128, 4, 64, 32, 4>(
                        &la, bh, tm, &mut ks, &mut vs, &mut turn, out, lse,
                    )
                } else if PMAX == 1 || la.panels == 1 {
                    ctx.item::<T, 64, 32, 1, 128, 64, 8>(
                        &la, bh, tm, &mut ks, &mut vs, &mut turn, out, lse,
                    )
                } else {
                    ctx.item::<T, 128, 64, 2, 128, 64, 8>(
                        &la, bh, tm, &mut ks, &mut vs, &mut turn, out, lse,
                    )
                }
            }
            item += la.step;
        }
    }
}
