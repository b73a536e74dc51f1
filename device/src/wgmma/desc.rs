//! Shared-memory matrix descriptors and the swizzle modes of their tiles (see the parent
//! module's "Shared-memory operands").

/// How the 16-byte chunks of a shared-memory tile's rows are permuted (the descriptor's
/// layout type; TMA's `CU_TENSOR_MAP_SWIZZLE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// No swizzle ("interleave"): rows of one 16-byte core-matrix row, 8 rows per core matrix.
    None,
    /// 32-byte rows (see [`offset`](Self::offset)).
    B32,
    /// 64-byte rows.
    B64,
    /// 128-byte rows: the layout of 64 bf16 (or 32 f32) per row, GEMM's usual choice.
    B128,
}

impl Swizzle {
    /// Bytes per row of the swizzle atom (16 for [`Swizzle::None`]).
    pub const fn row_bytes(self) -> u32 {
        match self {
            Swizzle::None => 16,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }

    /// The alignment a tile's base address needs: the atom's size (8 rows).
    pub const fn base_alignment(self) -> u32 {
        8 * self.row_bytes()
    }

    /// The descriptor's 2-bit layout code (bits 62–63).
    pub const fn code(self) -> u64 {
        match self {
            Swizzle::None => 0,
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        }
    }

    /// The byte offset, from a tile's (aligned) base, of byte `byte` of row `row` of a
    /// K-major tile whose rows are [`row_bytes`](Self::row_bytes) long: row `r` starts at
    /// `r * row_bytes`, and its 16-byte chunk `c` is stored at chunk `c ^ s`, where `s` is
    /// address bits 7.. of the unswizzled offset masked to the chunks of a row — `r % 8` for
    /// the 128-byte swizzle, `(r / 2) % 4` for 64 bytes, `(r / 4) % 2` for 32 bytes (for
    /// [`Swizzle::None`], rows are 16 bytes and unpermuted).
    ///
    /// This is the address function of TMA's swizzled writes (bits 4.. of the address XOR
    /// bits 7..), so a tile written with it is read correctly by `wgmma` through a descriptor
    /// of the same swizzle.
    pub const fn offset(self, row: u32, byte: u32) -> u32 {
        let rb = self.row_bytes();
        let plain = row * rb + byte;
        match self {
            Swizzle::None => plain,
            _ => {
                // CuTe's Swizzle<B, 4, 3>: the B bits of the 16-byte chunk index (address bits
                // 4..4+B) XOR address bits 7..7+B.
                let chunks = rb / 16;
                let chunk = (byte / 16) ^ ((plain >> 7) & (chunks - 1));
                row * rb + chunk * 16 + byte % 16
            }
        }
    }
}

/// The offset of a 32-bit shared address in its block's window: the address without the
/// cluster rank that a block of a cluster launch finds above bit 24 of its own shared
/// addresses (16 MiB per block in the cluster's window; a block holds at most 228 KiB).
pub const fn block_offset(addr: u32) -> u32 {
    addr & ((1 << 24) - 1)
}

/// A 64-bit shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start
/// address, leading- and stride-dimension byte offsets (each in 16-byte units), base offset
/// and layout type.
///
/// | bits | field |
/// | --- | --- |
/// | 0–13 | start address >> 4 |
/// | 16–29 | leading dimension byte offset (LBO) >> 4 |
/// | 32–45 | stride dimension byte offset (SBO) >> 4 |
/// | 49–51 | matrix base offset (0: tiles aligned to their swizzle atom, as here) |
/// | 62–63 | layout type ([`Swizzle::code`]) |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct MatrixDesc(pub u64);

/// Why [`MatrixDesc::new`] refused its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescError {
    /// The tile's address is not aligned to its swizzle atom ([`Swizzle::base_alignment`]).
    Misaligned,
    /// An offset is not a multiple of 16 bytes, or does not fit the field (< 2^18 bytes).
    BadOffset,
    /// The address is beyond the 256 KiB a descriptor can reach.
    OutOfRange,
}

impl MatrixDesc {
    /// The descriptor of a K-major tile at shared address `addr` (32-bit, as from
    /// `shared_addr`), with leading- and stride-dimension byte offsets `lbo`, `sbo` and
    /// `swizzle`. For the swizzled layouts, `sbo` is the distance between groups of 8 rows
    /// (`8 * row_bytes` for a dense tile) and `lbo` is unused by K-major operands whose k16
    /// step fits in a row (every case here; pass 16); for [`Swizzle::None`], `lbo` is the
    /// distance between core matrices adjacent along K and `sbo` along M (or N).
    ///
    /// Checked: `addr` aligned to the swizzle atom, offsets multiples of 16 that fit.
    ///
    /// In a cluster launch (sm_90), a block's shared addresses carry its rank in the cluster
    /// above bit 24 (the block of rank 1 sees its own shared memory at `0x100_0000` and up, in
    /// the cluster's window); a descriptor reaches only the executing block's own shared
    /// memory, by the address's offset in that block's window ([`block_offset`]), which is
    /// what it holds and what the range check applies to.
    pub const fn new(addr: u32, lbo: u32, sbo: u32, swizzle: Swizzle) -> Result<Self, DescError> {
        let addr = block_offset(addr);
        if !addr.is_multiple_of(swizzle.base_alignment()) {
            return Err(DescError::Misaligned);
        }
        if !lbo.is_multiple_of(16) || !sbo.is_multiple_of(16) || lbo >= 1 << 18 || sbo >= 1 << 18 {
            return Err(DescError::BadOffset);
        }
        if addr >= 1 << 18 {
            return Err(DescError::OutOfRange);
        }
        Ok(MatrixDesc(
            ((addr as u64 >> 4) & 0x3FFF)
                | (((lbo as u64 >> 4) & 0x3FFF) << 16)
                | (((sbo as u64 >> 4) & 0x3FFF) << 32)
                | (swizzle.code() << 62),
        ))
    }

    /// The descriptor of a dense K-major tile at `addr` with `swizzle` (rows of
    /// [`Swizzle::row_bytes`], 8-row groups one after another): `sbo` = the atom's size.
    /// For [`Swizzle::None`], the tile is stored as core matrices (8 rows × 16 bytes each),
    /// K-adjacent ones `lbo` apart and M/N-adjacent ones `sbo` apart: use [`new`](Self::new).
    pub const fn k_major(addr: u32, swizzle: Swizzle) -> Result<Self, DescError> {
        MatrixDesc::new(addr, 16, swizzle.base_alignment(), swizzle)
    }

    /// The descriptor of an **N-major** (or M-major) swizzled tile at `addr`, for the
    /// `_nb` instructions (`mma_bf16_rs_nb`): the K × N tile is stored
    /// as *panels* of `row_bytes` along N (64 bf16 for [`Swizzle::B128`]), each a stack of
    /// K rows (one row per k, swizzled as [`Swizzle::offset`] says), panels `panel_bytes`
    /// apart (the LBO field); groups of 8 k-rows are one atom apart (the SBO field). Step k16
    /// of such a tile is `16 * row_bytes` bytes further ([`advance`](Self::advance)).
    ///
    /// Checked as [`new`](Self::new); [`Swizzle::None`] has no panels of this form (use `new`).
    pub const fn n_major(addr: u32, panel_bytes: u32, swizzle: Swizzle) -> Result<Self, DescError> {
        if matches!(swizzle, Swizzle::None) {
            return Err(DescError::BadOffset);
        }
        MatrixDesc::new(addr, panel_bytes, swizzle.base_alignment(), swizzle)
    }

    /// The same descriptor with its start address `bytes` further (a multiple of 16): the next
    /// k16 step within a swizzled row is 32 bytes on (bf16, f16, tf32 k8).
    pub const fn advance(self, bytes: u32) -> Self {
        MatrixDesc(self.0 + (bytes as u64 >> 4))
    }

    /// The start address (shared, 32-bit) the descriptor holds.
    pub const fn addr(self) -> u32 {
        ((self.0 & 0x3FFF) << 4) as u32
    }
}
