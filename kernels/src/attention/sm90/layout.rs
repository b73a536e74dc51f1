//! Where the sm_90a attention kernels keep things (see the [parent module](super)): the
//! tensor maps' boxes, the shared-memory layout of the tiles and mbarriers for each geometry,
//! and the launch's shape as the item loops read it. Used by the producer ([`super`]) and the
//! consumers ([`super::consumer`]).

#[cfg(ferrocuda_arch = "sm_90a")]
use super::super::common::{here, here32, item_coords, paired_done, paired_item};
#[cfg(ferrocuda_arch = "sm_90a")]
use crate::prelude::*;
use ferrocuda_device::TensorMap;

/// The tiles of a launch with `nc` consumer warpgroups (a `q` tile of `64 · nc` rows) whose
/// `q` tile has `panels` panels (and each `k` and `v` tile as many, of `bn` rows), with
/// `stages` stages of `k` and `v`; its mbarriers (`q` full and empty, four per stage, a turn
/// per consumer); and 1 KiB to align the tiles.
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_arch = "sm_90a"))]
pub(super) const fn smem_bytes(nc: u32, panels: u32, bn: u32, stages: u32) -> u32 {
    panels * 64 * nc * 128 + stages * 2 * panels * bn * 128 + (2 + 4 * stages + nc) * 8 + 1024
}

/// The map of `q`, `k` or `v` (B, H, S, D) of `T` (bf16 or f16): boxes of one head's 128
/// rows × 64 columns, 128-byte swizzle.
pub type HeadsMap<T> = TensorMap<T, 128, 1, 1, 128, 64>;

/// The map of `q` (B, H, S, D) of the kernels for D ≤ 64, whose three consumers take 192 query
/// rows an item: boxes of one head's 192 rows × 64 columns, 128-byte swizzle (their `k` and
/// `v` are [`HeadsMap`]s).
pub type HeadsMap192<T> = TensorMap<T, 128, 1, 1, 192, 64>;

/// The map of the wide kernels' `k` and `v` (B, H_kv, S_kv, D): boxes of one head's 64 rows
/// × 64 columns, 128-byte swizzle (their `q` is a [`HeadsMap`]).
pub type KeysMap64<T> = TensorMap<T, 128, 1, 1, 64, 64>;

/// The key tiles (of `bn` rows) query tile `tm` (of `bm` rows) visits: all of them, or up to
/// the diagonal under the mask.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
pub(super) fn kv_tiles(tm: u32, bm: u32, s_kv: u32, causal: bool, bn: u32) -> u32 {
    let all = s_kv.div_ceil(bn);
    if causal {
        all.min(((tm + 1) * bm).div_ceil(bn))
    } else {
        all
    }
}

/// The shared-memory address of the tiles: the dynamic shared memory's, rounded up to the
/// 128-byte swizzle's 1024-byte atom. Computed again where it is asked for (the address goes
/// through [`here`]): kept from before the item loop, ptxas found no register for it across
/// `setmaxnreg` and the key-tile loop and spilled it.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
pub(super) fn tiles_base() -> u32 {
    use ferrocuda_device::shared::{dynamic_shared, shared_addr_of};
    let raw = here(dynamic_shared::<u8>().as_mut_ptr() as isize) as *const u8;
    let at = shared_addr_of(raw);
    at + ((1024 - (at & 1023)) & 1023)
}

/// Where a kernel's tiles lie: the `q` tile (`PMAX` panels of `64 · NC` rows: a slice of 64
/// for each of the `NC` consumers), then `STAGES` stages of a `k` tile and a `v` tile (`PMAX`
/// panels of `BN` rows each), then the mbarriers — all from the tiles' base (1024-byte
/// aligned: [`tiles_base`]).
#[cfg(ferrocuda_arch = "sm_90a")]
#[derive(Clone, Copy)]
pub(super) struct Geometry<const BN: u32, const PMAX: u32, const STAGES: usize, const NC: u32>;

#[cfg(ferrocuda_arch = "sm_90a")]
impl<const BN: u32, const PMAX: u32, const STAGES: usize, const NC: u32>
    Geometry<BN, PMAX, STAGES, NC>
{
    /// Bytes of one box of `q`: `64 · NC` rows (64 for each consumer; an item's rows are
    /// [`Launch::bm`], fewer where not every consumer computes) × 64 16-bit elements (a
    /// *panel* of the `q` tile).
    #[inline(always)]
    pub(super) fn q_panel(self) -> u32 {
        64 * NC * 128
    }
    /// Bytes of one box of `k` or `v` (`BN` rows × 64 columns): a panel of their tiles.
    #[inline(always)]
    pub(super) fn kv_panel(self) -> u32 {
        BN * 128
    }
    /// The address of stage `s` (its `k` tile; its `v` tile at [`v_of`](Self::v_of)).
    #[inline(always)]
    pub(super) fn stage(self, base: u32, s: usize) -> u32 {
        base + PMAX * self.q_panel() + s as u32 * 2 * PMAX * self.kv_panel()
    }
    /// The `v` tile of the stage at `stage`.
    #[inline(always)]
    pub(super) fn v_of(self, stage: u32) -> u32 {
        stage + PMAX * self.kv_panel()
    }
    /// The offset of the mbarriers from the tiles' base.
    #[inline(always)]
    pub(super) fn barriers_at(self) -> u32 {
        PMAX * self.q_panel() + STAGES as u32 * 2 * PMAX * self.kv_panel()
    }
}

/// Warps of a consumer warpgroup: the arrivals each consumer gives a barrier's phase.
#[cfg(ferrocuda_arch = "sm_90a")]
const WARPS: u32 = 4;

/// The consumers that compute, of `NC`: all of them, except that the kernels with three
/// (192-row items) run two under the causal mask, in items of 128 rows. With 192 rows the
/// consumers of an item would see different numbers of key tiles under the mask (consumer 0
/// one 128-key tile fewer every other item: passed while the others compute) and a partial
/// last item (1024 = 5⅓ × 192) would run on one consumer alone; measured on an H100 at D = 64
/// the two-consumer schedule is the faster there (S = 1024: the two-consumer kernel 269
/// TFLOPS, 192-row items 234 with the passed tiles and 223 without, this mode 263–265), the
/// three-consumer one without the mask (S = 4096: 458 against 413). The third warpgroup then
/// has no work (its `q` rows are loaded and not read). The one rule the barrier counts
/// ([`Bars::init`]), the items ([`Launch::of`]) and the turns (the consumers) follow.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
pub(super) fn active<const NC: u32>(causal: bool) -> u32 {
    if NC == 3 && causal {
        2
    } else {
        NC
    }
}

/// Whether thread `t` of a consumer warpgroup arrives for its warp (lane 0).
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
pub(super) fn lead(t: u32) -> bool {
    t.is_multiple_of(32)
}

/// The block's mbarriers, in shared memory after the tiles: `q` full (1 arrival: the
/// producer's, plus the bytes), `q` empty (`4 · nc`: one per warp of the `nc` consumers that
/// compute, [`active`]), then per stage `k` full, `v` full (1 each, plus the bytes), `k` empty
/// and `v` empty (`4 · nc` each: one per consumer warp); then the consumers' turns, one each
/// (4 arrivals: one per warp).
///
/// A consumer's warps arrive each for itself (lane 0, [`lead`]), so that a barrier's phase
/// completes only once every warp has passed the waits before its arrival: a warp left
/// behind cannot find a phase gone round, whether the warpgroup's `wgmma` or nothing (a
/// passed tile) keeps its warps together.
#[cfg(ferrocuda_arch = "sm_90a")]
#[derive(Clone, Copy)]
pub(super) struct Bars<const STAGES: usize, const NC: u32>(pub(super) *mut u64);

#[cfg(ferrocuda_arch = "sm_90a")]
impl<const STAGES: usize, const NC: u32> Bars<STAGES, NC> {
    /// Initialises every barrier with its arrival count (the indices of the accessors
    /// below), for `nc` consumers that compute ([`active`]; the others never arrive).
    ///
    /// # Safety
    ///
    /// One thread of the block, before a block barrier that precedes every other use; the
    /// `2 + 4 · STAGES + NC` words at `self.0` are shared memory of this block that only
    /// mbarrier operations touch.
    #[inline(always)]
    pub(super) unsafe fn init(self, nc: u32) {
        use ferrocuda_device::mbarrier::init;
        // SAFETY: the caller's contract; every index below `2 + 4 · STAGES + NC`.
        unsafe {
            init(self.0, 1);
            init(self.0.add(1), WARPS * nc);
            for s in 0..STAGES {
                init(self.0.add(2 + 4 * s), 1);
                init(self.0.add(3 + 4 * s), 1);
                init(self.0.add(4 + 4 * s), WARPS * nc);
                init(self.0.add(5 + 4 * s), WARPS * nc);
            }
            for c in 0..NC as usize {
                init(self.0.add(2 + 4 * STAGES + c), WARPS);
            }
        }
    }
    #[inline(always)]
    pub(super) fn at(self, i: usize) -> ferrocuda_device::mbarrier::MBarrier {
        // SAFETY: `forward` initialised the barriers before the block barrier that precedes
        // every use.
        unsafe { ferrocuda_device::mbarrier::MBarrier::from_shared_ptr(self.0.add(i)) }
    }
    #[inline(always)]
    pub(super) fn q_full(self) -> ferrocuda_device::mbarrier::MBarrier {
        self.at(0)
    }
    #[inline(always)]
    pub(super) fn q_empty(self) -> ferrocuda_device::mbarrier::MBarrier {
        self.at(1)
    }
    #[inline(always)]
    pub(super) fn k_full(self, s: usize) -> ferrocuda_device::mbarrier::MBarrier {
        self.at(2 + 4 * s)
    }
    #[inline(always)]
    pub(super) fn v_full(self, s: usize) -> ferrocuda_device::mbarrier::MBarrier {
        self.at(3 + 4 * s)
    }
    #[inline(always)]
    pub(super) fn k_empty(self, s: usize) -> ferrocuda_device::mbarrier::MBarrier {
        self.at(4 + 4 * s)
    }
    #[inline(always)]
    pub(super) fn v_empty(self, s: usize) -> ferrocuda_device::mbarrier::MBarrier {
        self.at(5 + 4 * s)
    }
    /// Consumer `cw`'s turn to issue its `q · kᵀ` (an arrival of each warp of the consumer
    /// before it in the round, `cw − 1` modulo the consumers that compute, `nc`).
    #[inline(always)]
    pub(super) fn turn(self, cw: u32) -> ferrocuda_device::mbarrier::MBarrier {
        self.at(2 + 4 * STAGES + cw as usize)
    }
}

/// The launch's shape as the item loops use it, read again from the parameters at each item
/// ([`here32`]): computed once before the loops, these values stayed live across
/// `setmaxnreg` and the key-tile loop, where ptxas had no uniform registers left for them
/// and spilled them to local memory.
#[cfg(ferrocuda_arch = "sm_90a")]
pub(super) struct Launch {
    pub(super) heads: u32,
    /// Query heads per key/value head (grouped-query attention; 1 without).
    pub(super) group: u32,
    pub(super) bh_count: u32,
    /// Query rows of an item: 64 for each consumer that computes ([`active`]).
    pub(super) bm: u32,
    pub(super) tiles_m: u32,
    pub(super) items: u32,
    pub(super) step: u32,
    pub(super) s_kv: u32,
    /// 64-column panels of the tiles the producer loads: 1 or 2 (D ≤ 64, ≤ 128) in the
    /// kernels for D ≤ 128, always 1 in those for D ≤ 64 and 4 in the wide ones.
    pub(super) panels: u32,
}

#[cfg(ferrocuda_arch = "sm_90a")]
impl Launch {
    /// Whether this block is done before its item `item` (`b`, `b + grid`, …).
    #[inline(always)]
    pub(super) fn done(&self, item: u32, causal: bool) -> bool {
        if causal {
            paired_done(item, self.step, self.bh_count * self.tiles_m.div_ceil(2))
        } else {
            item >= self.items
        }
    }

    /// This block's item `item` as (batch × heads + head, query tile): without the mask the
    /// query tiles of one head adjacent ([`item_coords`]), with it in pairs of a long and a
    /// short tile ([`paired_item`]).
    #[inline(always)]
    pub(super) fn item(&self, item: u32, causal: bool) -> (u32, u32) {
        if causal {
            paired_item(item, self.step, self.tiles_m)
        } else {
            item_coords(item, self.bh_count, self.tiles_m, false)
        }
    }

    /// The launch of `q` (boxes of `QB` rows) over `k` (boxes of `BN` rows), for tiles of
    /// `PMAX` panels and `NC` consumers, in items of 64 query rows for each consumer that
    /// computes ([`active`]: `QB`, or fewer under the causal mask).
    #[inline(always)]
    pub(super) fn of<
        T: ferrocuda_device::Element,
        const QB: u32,
        const BN: u32,
        const PMAX: u32,
        const NC: u32,
    >(
        q: &TensorMap<T, 128, 1, 1, QB, 64>,
        k: &TensorMap<T, 128, 1, 1, BN, 64>,
        causal: bool,
    ) -> Launch {
        let bm = 64 * active::<NC>(causal);
        let (batch, heads, s_q, d) = (
            here32(q.dim(0) as u32),
            here32(q.dim(1) as u32),
            here32(q.dim(2) as u32),
            here32(q.dim(3) as u32),
        );
        let tiles_m = s_q.div_ceil(bm);
        let bh_count = batch * heads;
        Launch {
            bm,
            heads,
            group: heads / here32(k.dim(1) as u32).max(1),
            bh_count,
            tiles_m,
            items: bh_count * tiles_m,
            step: here32(thread::grid_dim().x),
            s_kv: here32(k.dim(2) as u32),
            panels: if PMAX == 4 {
                4
            } else if PMAX == 1 || d <= 64 {
                1
            } else {
                2
            },
        }
    }
}
