//! What a kernel declares about its launch — `#[kernel(max_threads = …)]`,
//! `#[kernel(block = (…))]`, `#[kernel(min_blocks = …)]`, `#[kernel(dynamic_shared = T)]`,
//! `#[kernel(grid = "2d")]`, `#[kernel(grid = "rows")]`, `#[kernel(cooperative)]`,
//! `#[kernel(cluster = (…))]` — and how the declaration travels from the kernel source to the
//! host.
//!
//! `#[kernel]` stores a [`LaunchDecl`] of a kernel that declares any of these as a second
//! record beside its manifest record: a PTX global named [`SYMBOL_PREFIX`]`<kernel>` holding
//! [`LaunchDecl::encode`]'s bytes. The builder reads it back ([`LaunchDecl::decode`]), removes
//! it, writes the bounds into the PTX entry (`.maxntid` / `.reqntid`, and `.minnctapersm`, so
//! that ptxas allocates registers for them) and records them in the manifest's `launch` field
//! ([`LaunchSpec`]). A kernel without declarations has no record.
//!
//! Record layout (24 bytes, integers little-endian):
//!
//! ```text
//! magic "FCL5"
//! u16 max_threads               upper bound of threads per block (0: none)
//! u16 block[3]                  the block shape the kernel requires (all 0: none)
//! u8  dynamic_shared            dtype code of the dynamic shared memory's elements (0: none)
//! u8  grid_dims                 dimensions of the automatic grid (0 or 1: one; 2; 3)
//! u8  min_blocks                blocks per SM the registers must allow (0: none)
//! u8  grid_rows                 1: the automatic grid follows the rows (0: it does not)
//! u8  flags                     bit 0: cooperative launch; bit 1: non-portable cluster size
//!                               (the other bits 0)
//! u8  cluster[3]                the cluster shape in blocks (all 0: no cluster)
//! u32 shared_bytes              dynamic shared memory a launch gets by default (0: none)
//! ```
//!
//! The earlier records, magic `"FCL4"` (the first 20 bytes of this one: no `shared_bytes`) and
//! `"FCL3"` (the first 16: no flags, no cluster), decode too, so PTX built before those
//! options still loads into a builder of this version.

/// Prefix of the PTX global that holds a kernel's launch record.
pub const SYMBOL_PREFIX: &str = "__ferrocuda_launch__";

/// First four bytes of every launch record this version writes.
pub const MAGIC: [u8; 4] = *b"FCL5";

/// Length of a launch record this version writes.
pub const LEN: usize = 24;

/// Magic of the record before `shared_bytes`.
pub const MAGIC_V4: [u8; 4] = *b"FCL4";

/// Length of the record before `shared_bytes` (magic [`MAGIC_V4`]).
pub const LEN_V4: usize = 20;

/// Most dynamic shared memory a block may have on the GPUs ferrocuda supports (sm_90: 227
/// KiB; an sm_80 device refuses more than its own 163 KiB at launch).
pub const MAX_SHARED_BYTES: u32 = 227 * 1024;

/// First four bytes of the earlier launch record (16 bytes, without flags and cluster),
/// which [`LaunchDecl::decode`] still reads.
pub const MAGIC_V3: [u8; 4] = *b"FCL3";

/// Length of the earlier launch record (magic [`MAGIC_V3`]).
pub const LEN_V3: usize = 16;

/// Most threads in a block on every GPU ferrocuda supports (sm_80 and newer).
pub const MAX_BLOCK_THREADS: u32 = 1024;

/// Largest block extent along x, y and z on every GPU ferrocuda supports.
pub const MAX_BLOCK_DIMS: [u32; 3] = [1024, 1024, 64];

/// Most resident threads of one SM on the GPUs ferrocuda supports (sm_80, sm_90: 2048).
pub const MAX_SM_THREADS: u32 = 2048;

/// Most resident blocks of one SM on the GPUs ferrocuda supports (sm_80, sm_90: 32).
pub const MAX_SM_BLOCKS: u8 = 32;

/// Most blocks in a cluster that every GPU with clusters (sm_90 and newer) runs: the portable
/// cluster size.
pub const MAX_CLUSTER_PORTABLE: u32 = 8;

/// Most blocks in a cluster on any GPU (H100: 16), for kernels that allow a non-portable
/// cluster size (`#[kernel(non_portable_cluster)]`: the launcher sets
/// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`).
pub const MAX_CLUSTER_NON_PORTABLE: u32 = 16;

/// Bit of [`LaunchDecl::cooperative`] in the record's flags byte.
const FLAG_COOPERATIVE: u8 = 1;
/// Bit of [`LaunchDecl::non_portable_cluster`] in the record's flags byte.
const FLAG_NON_PORTABLE: u8 = 2;

/// A kernel's launch-shape declarations (the record's contents).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LaunchDecl {
    /// `#[kernel(max_threads = n)]`: the kernel is compiled for at most `n` threads per block
    /// (PTX `.maxntid n, 1, 1`); 0 when not declared.
    pub max_threads: u16,
    /// `#[kernel(block = (x, y, z))]`: the block shape the kernel requires (PTX `.reqntid`);
    /// all 0 when not declared.
    pub block: [u16; 3],
    /// `#[kernel(dynamic_shared = T)]`: the dtype code of `T`, the element type of the
    /// kernel's dynamic shared memory (its size must be a multiple of `T`'s); 0 when not
    /// declared.
    pub dynamic_shared: u8,
    /// `#[kernel(grid = "2d")]` / `"3d"`: the automatic grid covers the largest array in 2 or
    /// 3 dimensions, one thread per element; 0 (or 1) for the 1-D automatic grid.
    pub grid_dims: u8,
    /// `#[kernel(min_blocks = n)]`: ptxas keeps the registers per thread low enough for `n`
    /// blocks of the bound (`max_threads` or `block`) on one SM (PTX `.minnctapersm n`) — an
    /// occupancy target it then neither exceeds nor undercuts with its own heuristics; 0 when
    /// not declared. Needs `max_threads` or `block`.
    pub min_blocks: u8,
    /// `#[kernel(grid = "rows")]`: the automatic 1-D grid follows the rows of the largest
    /// array (its last axis is a row; the others count the rows): one warp per row for rows
    /// of at most `32 × items_per_thread` elements, one block per longer row (one block per
    /// row when `items_per_thread` is not declared). For kernels that give each row a warp
    /// or a block and walk the rows grid-stride: every row has its worker from the start,
    /// however few elements the array holds.
    pub grid_rows: bool,
    /// `#[kernel(cooperative)]`: the kernel is launched cooperatively
    /// (`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`): every block of the grid is resident at once, so
    /// that the blocks may wait for each other (a grid-wide barrier, `GridBarrier`). The host
    /// refuses a grid larger than one resident wave, and its automatic grid is exactly one
    /// wave.
    pub cooperative: bool,
    /// `#[kernel(cluster = (x, y, z))]`: the kernel is launched in thread-block clusters of
    /// this shape (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`; sm_90 and newer): the blocks of a
    /// cluster run at once on one GPU processing cluster and may access each other's shared
    /// memory. All 0 when not declared.
    pub cluster: [u8; 3],
    /// `#[kernel(non_portable_cluster)]`: the cluster may hold more than
    /// [`MAX_CLUSTER_PORTABLE`] blocks (up to [`MAX_CLUSTER_NON_PORTABLE`]; the launcher sets
    /// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`). Needs `cluster`.
    pub non_portable_cluster: bool,
    /// `#[kernel(shared_bytes = n)]`: the dynamic shared memory (bytes) the kernel needs — a
    /// launch that names none gets this much, one that names less is refused; 0 when not
    /// declared.
    pub shared_bytes: u32,
}

impl LaunchDecl {
    /// `true` when nothing is declared (no record is needed).
    pub const fn is_empty(&self) -> bool {
        self.max_threads == 0
            && self.block[0] == 0
            && self.block[1] == 0
            && self.block[2] == 0
            && self.dynamic_shared == 0
            && self.grid_dims <= 1
            && self.min_blocks == 0
            && !self.grid_rows
            && !self.cooperative
            && self.cluster[0] == 0
            && self.cluster[1] == 0
            && self.cluster[2] == 0
            && !self.non_portable_cluster
            && self.shared_bytes == 0
    }

    /// The record's bytes. Fails to compile (const evaluation panics) when the declaration
    /// is invalid (see [`check`](Self::check)).
    pub const fn encode(&self) -> [u8; LEN] {
        if let Err(e) = self.check() {
            panic!("{}", e);
        }
        let mut out = [0u8; LEN];
        let mut i = 0;
        while i < 4 {
            out[i] = MAGIC[i];
            i += 1;
        }
        let words = [
            self.max_threads,
            self.block[0],
            self.block[1],
            self.block[2],
        ];
        i = 0;
        while i < 4 {
            out[4 + 2 * i] = words[i] as u8;
            out[5 + 2 * i] = (words[i] >> 8) as u8;
            i += 1;
        }
        out[12] = self.dynamic_shared;
        out[13] = self.grid_dims;
        out[14] = self.min_blocks;
        out[15] = self.grid_rows as u8;
        out[16] = (self.cooperative as u8 * FLAG_COOPERATIVE)
            | (self.non_portable_cluster as u8 * FLAG_NON_PORTABLE);
        out[17] = self.cluster[0];
        out[18] = self.cluster[1];
        out[19] = self.cluster[2];
        let sb = self.shared_bytes.to_le_bytes();
        out[20] = sb[0];
        out[21] = sb[1];
        out[22] = sb[2];
        out[23] = sb[3];
        out
    }

    /// Reads a record written by [`encode`](Self::encode) — or the earlier 16-byte record
    /// (magic [`MAGIC_V3`]: no cooperative flag, no cluster) — and checks it.
    pub fn decode(bytes: &[u8]) -> Result<LaunchDecl, &'static str> {
        let (b, version) = match bytes.get(..4) {
            Some(m) if m == MAGIC => (bytes, 5),
            Some(m) if m == MAGIC_V4 => (bytes, 4),
            Some(m) if m == MAGIC_V3 => (bytes, 3),
            Some(_) if [LEN, LEN_V4, LEN_V3].contains(&bytes.len()) => {
                return Err("bad launch record magic")
            }
            _ => return Err("launch record has the wrong length"),
        };
        let current = version >= 4;
        let want = match version {
            5 => LEN,
            4 => LEN_V4,
            _ => LEN_V3,
        };
        if b.len() != want {
            return Err("launch record has the wrong length");
        }
        let word = |i: usize| u16::from_le_bytes([b[4 + 2 * i], b[5 + 2 * i]]);
        let d = LaunchDecl {
            max_threads: word(0),
            block: [word(1), word(2), word(3)],
            dynamic_shared: b[12],
            grid_dims: b[13],
            min_blocks: b[14],
            grid_rows: match b[15] {
                0 => false,
                1 => true,
                _ => return Err("bad grid_rows byte in the launch record"),
            },
            ..LaunchDecl::default()
        };
        let d = if current {
            let flags = b[16];
            if flags & !(FLAG_COOPERATIVE | FLAG_NON_PORTABLE) != 0 {
                return Err("unknown flags in the launch record");
            }
            LaunchDecl {
                cooperative: flags & FLAG_COOPERATIVE != 0,
                non_portable_cluster: flags & FLAG_NON_PORTABLE != 0,
                cluster: [b[17], b[18], b[19]],
                shared_bytes: if version >= 5 {
                    u32::from_le_bytes([b[20], b[21], b[22], b[23]])
                } else {
                    0
                },
                ..d
            }
        } else {
            d
        };
        d.check()?;
        Ok(d)
    }

    /// The block shape, if declared.
    pub const fn fixed_block(&self) -> Option<[u32; 3]> {
        if self.block[0] == 0 {
            None
        } else {
            Some([
                self.block[0] as u32,
                self.block[1] as u32,
                self.block[2] as u32,
            ])
        }
    }

    /// The cluster shape, if declared.
    pub const fn cluster_dims(&self) -> Option<[u32; 3]> {
        if self.cluster[0] == 0 {
            None
        } else {
            Some([
                self.cluster[0] as u32,
                self.cluster[1] as u32,
                self.cluster[2] as u32,
            ])
        }
    }

    /// Blocks per cluster (0 without a cluster).
    pub const fn cluster_size(&self) -> u32 {
        self.cluster[0] as u32 * self.cluster[1] as u32 * self.cluster[2] as u32
    }

    /// Most blocks a cluster of this kernel may hold: [`MAX_CLUSTER_PORTABLE`], or
    /// [`MAX_CLUSTER_NON_PORTABLE`] with `non_portable_cluster`.
    pub const fn max_cluster_size(&self) -> u32 {
        if self.non_portable_cluster {
            MAX_CLUSTER_NON_PORTABLE
        } else {
            MAX_CLUSTER_PORTABLE
        }
    }

    /// Checks the declaration: `max_threads` in 1..=1024; a block of 1..=1024 × 1..=1024 ×
    /// 1..=64 extents and at most 1024 threads; not both (`.reqntid` and `.maxntid` exclude
    /// each other in PTX: a fixed block already bounds the threads); a known dtype code; 1 to 3
    /// grid dimensions or a grid that follows the rows, not both; `min_blocks` only with a
    /// bound, at most 32 blocks and 2048 threads of the bound per SM; a cluster of extents at
    /// least 1 and at most 8 blocks (16 with `non_portable_cluster`, which needs a cluster); a
    /// cooperative kernel with neither a cluster nor an N-D or per-row automatic grid (its
    /// automatic grid is one resident wave, 1-D).
    pub const fn check(&self) -> Result<(), &'static str> {
        if self.max_threads as u32 > MAX_BLOCK_THREADS {
            return Err("max_threads must be in 1..=1024");
        }
        let b = self.block;
        let any = b[0] != 0 || b[1] != 0 || b[2] != 0;
        if any {
            if b[0] == 0 || b[1] == 0 || b[2] == 0 {
                return Err("every block extent must be at least 1");
            }
            if b[0] as u32 > MAX_BLOCK_DIMS[0]
                || b[1] as u32 > MAX_BLOCK_DIMS[1]
                || b[2] as u32 > MAX_BLOCK_DIMS[2]
            {
                return Err("block extents must be at most (1024, 1024, 64)");
            }
            if b[0] as u32 * b[1] as u32 * b[2] as u32 > MAX_BLOCK_THREADS {
                return Err("a block has at most 1024 threads");
            }
            if self.max_threads != 0 {
                return Err(
                    "declare either block or max_threads: a fixed block bounds the threads",
                );
            }
        }
        if self.dynamic_shared != 0 && crate::DType::from_code(self.dynamic_shared).is_none() {
            return Err("unknown element type of dynamic shared memory");
        }
        if self.grid_dims > 3 {
            return Err("the automatic grid has 1, 2 or 3 dimensions");
        }
        if self.grid_rows && self.grid_dims > 1 {
            return Err("the automatic grid follows the rows or has 2 or 3 dimensions, not both");
        }
        if self.min_blocks != 0 {
            let threads = match self.fixed_block() {
                Some([x, y, z]) => x * y * z,
                None => self.max_threads as u32,
            };
            if threads == 0 {
                return Err("min_blocks needs max_threads or block: the threads of a block");
            }
            if self.min_blocks > MAX_SM_BLOCKS || self.min_blocks as u32 * threads > MAX_SM_THREADS
            {
                return Err(
                    "min_blocks blocks of the bound must fit on one SM (at most 32 \
                            blocks and 2048 threads)",
                );
            }
        }
        let c = self.cluster;
        if c[0] != 0 || c[1] != 0 || c[2] != 0 {
            if c[0] == 0 || c[1] == 0 || c[2] == 0 {
                return Err("every cluster extent must be at least 1");
            }
            if self.cluster_size() > self.max_cluster_size() {
                return Err(if self.non_portable_cluster {
                    "a cluster holds at most 16 blocks"
                } else {
                    "a portable cluster holds at most 8 blocks (up to 16 with \
                     non_portable_cluster)"
                });
            }
        } else if self.non_portable_cluster {
            return Err("non_portable_cluster needs a cluster");
        }
        if self.shared_bytes > MAX_SHARED_BYTES {
            return Err("shared_bytes is at most 227 KiB (232448 bytes)");
        }
        if self.cooperative {
            if c[0] != 0 {
                return Err("a kernel is either cooperative or launched in clusters, not both");
            }
            if self.grid_dims > 1 || self.grid_rows {
                return Err(
                    "a cooperative kernel's automatic grid is one resident wave of blocks \
                     (1-D): no grid = \"2d\", \"3d\" or \"rows\"",
                );
            }
        }
        Ok(())
    }
}

#[cfg(feature = "std")]
mod spec;
#[cfg(feature = "std")]
pub use spec::LaunchSpec;

#[cfg(test)]
mod tests;
