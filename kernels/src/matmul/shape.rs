//! The shapes of `matmul_f32`'s tiled schedule (`Shape`: a group's threads, its tile of `C`,
//! its warps' and lanes' layout) and the shared memory their rings take.

/// `k` per shared tile.
pub(super) const BK: usize = 8;
/// Shared stages of a ring (the `k` tiles in flight).
pub(super) const STAGES: usize = 3;

/// A shape of the tiled schedule: the threads that share one ring of stages and one barrier
/// (a *group*), the tile of `C` a group computes, and how its warps and lanes cover it. Every
/// thread accumulates 8×16 of `C` (`tiles::outer_product`): two 4-row groups `4·LY` apart by
/// four 4-column groups `4·LX` apart, its warp's `LY × LX` lanes side by side, so that a
/// warp's fragment loads touch `LY` (`A`) or `LX` (`B`) consecutive 16-byte words — one
/// wavefront each when both are at most 8.
#[cfg(target_arch = "nvptx64")]
pub(super) trait Shape {
    /// Threads of a group.
    const THREADS: usize;
    /// Rows and columns of `C` per tile.
    const BM: usize;
    const BN: usize;
    /// Lanes of a warp along `n` (`32 / LX` along `m`).
    const LX: usize;
    /// Whether a group is the whole block (barrier 0, `bar.sync 0`). Otherwise the block is
    /// `block_threads / THREADS` groups, each with its own ring and tiles of `C` and its own
    /// barrier (`1 + group`, counted: `bar.sync 1 + group, THREADS`).
    const WHOLE: bool;

    /// Lanes along `m`; a warp's tile of `C`; warps along `n`.
    const LY: usize = 32 / Self::LX;
    const WTM: usize = 8 * Self::LY;
    const WTN: usize = 16 * Self::LX;
    const WN: usize = Self::BN / Self::WTN;
    /// Row pitches of the shared tiles (floats): 4 of padding, 4 modulo 32, so that a warp's
    /// copies write 32 distinct banks in either mapping (`tiles::BY_OUTER`, `tiles::BY_K`).
    const PA: usize = Self::BM + 4;
    const PB: usize = Self::BN + 4;
    /// Floats of one stage: the `A` tile (`As[k][m]`), then the `B` tile (`Bs[k][n]`); of a
    /// ring.
    const STAGE_A: usize = BK * Self::PA;
    const STAGE: usize = Self::STAGE_A + BK * Self::PB;
    const RING: usize = STAGES * Self::STAGE;
    /// The shape's rules, checked where the schedule is instantiated.
    const CHECK: () = {
        assert!(Self::LX * Self::LY == 32 && Self::LX <= 8 && Self::LY <= 8);
        assert!(Self::BM.is_multiple_of(Self::WTM) && Self::BN.is_multiple_of(Self::WTN));
        assert!((Self::BM / Self::WTM) * Self::WN * 32 == Self::THREADS);
        assert!(Self::BM.is_multiple_of(32) && Self::BN.is_multiple_of(32));
        // Copies: at most 8 per thread and operand; [`BY_OUTER`]: a tile row of threads, whole
        // `k` rows per pass; [`BY_K`]: 8 threads a tile row, whole passes.
        assert!(BK * Self::BM / Self::THREADS <= 8 && BK * Self::BN / Self::THREADS <= 8);
        assert!(
            Self::THREADS.is_multiple_of(Self::BM) && BK.is_multiple_of(Self::THREADS / Self::BM)
        );
        assert!(
            Self::THREADS.is_multiple_of(Self::BN) && BK.is_multiple_of(Self::THREADS / Self::BN)
        );
        assert!(
            Self::BM.is_multiple_of(Self::THREADS / BK)
                && Self::BN.is_multiple_of(Self::THREADS / BK)
        );
        // The rings of a 256-thread block's groups fit the launch's shared memory.
        assert!(4 * Self::RING * (256 / Self::THREADS) <= MATMUL_SMEM as usize);
    };
}

/// 256-thread blocks, one group: 128×256 tiles, 4×2 warps of 4×8 lanes (32×128 each).
#[cfg(target_arch = "nvptx64")]
pub(super) struct Wide;
#[cfg(target_arch = "nvptx64")]
impl Shape for Wide {
    const THREADS: usize = 256;
    const BM: usize = 128;
    const BN: usize = 256;
    const LX: usize = 8;
    const WHOLE: bool = true;
}

/// Groups of 128 threads (two in a 256-thread block, one in a 128-thread block): 128×128
/// tiles, 2×2 warps of 8×4 lanes (64×64 each) — cuBLAS's shape for SGEMM with both operands
/// contiguous along `k`.
#[cfg(target_arch = "nvptx64")]
pub(super) struct Square;
#[cfg(target_arch = "nvptx64")]
impl Shape for Square {
    const THREADS: usize = 128;
    const BM: usize = 128;
    const BN: usize = 128;
    const LX: usize = 4;
    const WHOLE: bool = false;
}

/// Dynamic shared memory of every launch of `matmul_f32` (bytes): two rings of 128×128
/// tiles (49.5 KiB; a ring of 128×256 tiles takes 36.75 KiB).
pub const MATMUL_SMEM: u32 = (2 * 4 * STAGES * BK * (2 * (128 + 4))) as u32;
