//! The launch shape — grid, block, dynamic shared memory — as pure functions of the kernel's
//! declarations ([`LaunchDecl`]), its limits ([`FunctionLimits`], read once per device at
//! load) and the device's ([`DeviceLimits`], read once per context):
//!
//! * the automatic shape when the caller gives none: [`auto_block`], [`auto_grid`] (1-D:
//!   one resident wave, or one thread per `items_per_thread` elements), [`rows_grid`] (1-D,
//!   a warp or a block per row of the largest array: `#[kernel(grid = "rows")]`) and
//!   [`nd_grid`] (the N-D grid of `#[kernel(grid = "2d")]` kernels over their largest array);
//! * the checks every shape passes before a launch — automatic or the caller's —
//!   [`check_block`], [`check_grid`] and [`check_shared`]: each refusal names the kernel and
//!   the limit, and nothing is launched;
//! * the launches with attributes: a cooperative kernel's grid is one resident wave at most
//!   ([`cooperative_grid`], the automatic one; [`check_cooperative`], the numbers in the
//!   refusal), a cluster kernel's a whole number of clusters ([`cluster_grid`],
//!   [`check_cluster`]) that the device can schedule ([`check_cluster_occupancy`]).

use crate::driver::DeviceLimits;
use crate::error::{Error, Result};
use crate::module::FunctionLimits;
use ferrocuda_abi::launch::LaunchDecl;
use ferrocuda_abi::DType;

const AXES: [char; 3] = ['x', 'y', 'z'];

/// The block when the caller gives none: the kernel's declared block; else, for an N-D
/// automatic grid, `potential` threads (the occupancy-maximizing block size) as 32 along x —
/// a warp along the contiguous last axis — and the rest along y (`"2d"`), or shared by y and
/// up to 4 along z (`"3d"`); else `default_1d` threads along x.
pub fn auto_block(decl: &LaunchDecl, default_1d: u32, potential: u32) -> [u32; 3] {
    if let Some(b) = decl.fixed_block() {
        return b;
    }
    if decl.grid_dims < 2 {
        return [default_1d.max(1), 1, 1];
    }
    let potential = potential.max(1);
    let x = potential.min(32);
    let rest = (potential / x).max(1);
    if decl.grid_dims == 2 {
        return [x, rest, 1];
    }
    // The largest power of two (at most 4) that divides `rest`.
    let z = [4, 2, 1]
        .into_iter()
        .find(|&z| rest.is_multiple_of(z))
        .unwrap_or(1);
    [x, rest / z, z]
}

/// The automatic 1-D grid (x only) for `work` elements in blocks of `threads`: one thread per
/// `items_per_thread` elements when the kernel declares it, else at most one resident wave
/// (`resident()` blocks; the kernel's grid-stride loop covers the rest). At least one block,
/// at most the driver's 2^31 − 1.
pub fn auto_grid(
    work: usize,
    threads: usize,
    items_per_thread: Option<u16>,
    resident: impl FnOnce() -> usize,
) -> u32 {
    let threads = threads.max(1);
    let grid = match items_per_thread {
        Some(k) => work.div_ceil(usize::from(k.max(1))).div_ceil(threads),
        None => work.div_ceil(threads).min(resident()),
    };
    grid.clamp(1, i32::MAX as usize) as u32
}

/// The automatic grid (x only) of a `#[kernel(grid = "rows")]` kernel whose largest array has
/// shape `shape`, in blocks of `threads`: its last axis is a row, the other axes count the
/// rows (one row for a 1-D array). A row of at most `32 × items_per_thread` elements gets one
/// warp (`threads / 32` rows per block), a longer one — or any row when `items_per_thread`
/// is not declared, or the block is narrower than a warp — one block. At least one block, at
/// most the driver's 2^31 − 1 (the kernel's grid-stride loop over rows covers the rest).
pub fn rows_grid(shape: &[usize], threads: usize, items_per_thread: Option<u16>) -> u32 {
    let (rows, cols) = match shape.split_last() {
        Some((&cols, lead)) => (
            lead.iter()
                .try_fold(1usize, |acc, &a| acc.checked_mul(a))
                .unwrap_or(usize::MAX),
            cols,
        ),
        None => (1, 1),
    };
    let warp_row = items_per_thread.map_or(0, |k| 32 * usize::from(k));
    let per_block = if cols <= warp_row && threads >= 32 {
        threads / 32
    } else {
        1
    };
    rows.div_ceil(per_block).clamp(1, i32::MAX as usize) as u32
}

/// The automatic N-D grid (`dims` = 2 or 3) over an array of `shape`, one thread per element
/// in blocks of `block`: x covers the last axis; with 2 dimensions y covers all the others
/// (their product); with 3, y covers the one before the last and z the others. Each extent is
/// at least 1 and at most the device's (`max_grid`): beyond it the kernel's grid-stride loops
/// cover the rest.
pub fn nd_grid(shape: &[usize], dims: u8, block: [u32; 3], max_grid: [u32; 3]) -> [u32; 3] {
    let n = shape.len();
    let last = |k: usize| if n > k { shape[n - 1 - k] } else { 1 };
    let product = |axes: &[usize]| {
        axes.iter()
            .try_fold(1usize, |acc, &a| acc.checked_mul(a))
            .unwrap_or(usize::MAX)
    };
    let extents = if dims >= 3 {
        [last(0), last(1), product(&shape[..n.saturating_sub(2)])]
    } else {
        [last(0), product(&shape[..n.saturating_sub(1)]), 1]
    };
    let mut grid = [1u32; 3];
    for i in 0..3 {
        let blocks = extents[i].div_ceil(block[i].max(1) as usize);
        grid[i] = blocks.clamp(1, max_grid[i].max(1) as usize) as u32;
    }
    grid
}

/// `(x, y, z)` for messages.
fn show(v: [u32; 3]) -> String {
    format!("({}, {}, {})", v[0], v[1], v[2])
}

/// Checks `block` for kernel `name`: no zero extent, each extent within the device's, the
/// kernel's fixed block if it declares one, and at most as many threads as the kernel can run
/// per block (its registers, its declared `max_threads`).
pub fn check_block(
    name: &str,
    decl: &LaunchDecl,
    f: &FunctionLimits,
    d: &DeviceLimits,
    block: [u32; 3],
) -> Result<()> {
    check_extents(name, "block", block, d.max_block)?;
    if let Some(fixed) = decl.fixed_block() {
        if block != fixed {
            return Err(Error::value(format!(
                "kernel `{name}` requires block {} (#[kernel(block = …)]); got block {}",
                show(fixed),
                show(block)
            )));
        }
    }
    let threads = block.iter().map(|&b| u64::from(b)).product::<u64>();
    let declared = u32::from(decl.max_threads);
    if declared != 0 && threads > u64::from(declared) {
        return Err(Error::value(format!(
            "kernel `{name}`: block {} has {threads} threads; the kernel is compiled for at \
             most {declared} (#[kernel(max_threads = {declared})])",
            show(block)
        )));
    }
    let most = f.max_threads.min(d.max_threads);
    if threads > u64::from(most) {
        return Err(Error::value(format!(
            "kernel `{name}`: block {} has {threads} threads; the kernel can run at most {most} \
             per block on this device (it uses {} registers per thread; \
             CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)",
            show(block),
            f.registers
        )));
    }
    Ok(())
}

/// Checks `grid` for kernel `name`: no zero extent, each extent within the device's.
pub fn check_grid(name: &str, d: &DeviceLimits, grid: [u32; 3]) -> Result<()> {
    check_extents(name, "grid", grid, d.max_grid)
}

/// No zero extent in `extents` (a `"block"` or `"grid"`), none beyond the device's `max`.
fn check_extents(name: &str, what: &str, extents: [u32; 3], max: [u32; 3]) -> Result<()> {
    if extents.contains(&0) {
        return Err(Error::value(format!(
            "kernel `{name}`: {what} {} has a zero extent",
            show(extents)
        )));
    }
    let (unit, attr) = if what == "block" {
        ("threads", "BLOCK")
    } else {
        ("blocks", "GRID")
    };
    for i in 0..3 {
        if extents[i] > max[i] {
            return Err(Error::value(format!(
                "kernel `{name}`: {what} {} is {} {unit} along {}, more than the device's \
                 limit of {} (CU_DEVICE_ATTRIBUTE_MAX_{attr}_DIM_{})",
                show(extents),
                extents[i],
                AXES[i],
                max[i],
                AXES[i].to_ascii_uppercase()
            )));
        }
    }
    Ok(())
}

/// Checks `bytes` of dynamic shared memory for kernel `name`: a multiple of the size of the
/// element type the kernel declares for it, and at most what a block can get — the device's
/// opt-in limit less the kernel's static shared memory.
///
/// Returns `Some(bytes)` when the launch needs more than the kernel may use without opting in
/// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`, 48 KiB less its static shared memory
/// at load): the caller raises the function's limit before launching.
pub fn check_shared(
    name: &str,
    decl: &LaunchDecl,
    f: &FunctionLimits,
    d: &DeviceLimits,
    bytes: u32,
) -> Result<Option<u32>> {
    if let Some(t) = DType::from_code(decl.dynamic_shared) {
        if !(bytes as usize).is_multiple_of(t.itemsize()) {
            return Err(Error::value(format!(
                "kernel `{name}`: {bytes} bytes of dynamic shared memory is not a whole number \
                 of its {} elements ({} bytes each; #[kernel(dynamic_shared = …)])",
                t.name(),
                t.itemsize()
            )));
        }
    }
    if bytes <= f.dynamic_shared {
        return Ok(None);
    }
    let most = d.shared_optin.saturating_sub(f.static_shared);
    if bytes > most {
        return Err(Error::value(format!(
            "kernel `{name}`: {bytes} bytes of dynamic shared memory requested; a block can get \
             at most {most} (the device's {} bytes per block \
             (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) less the kernel's {} bytes \
             of static shared memory)",
            d.shared_optin, f.static_shared
        )));
    }
    Ok(Some(bytes))
}

/// The automatic grid of a `#[kernel(cooperative)]` kernel: exactly one resident wave,
/// `blocks_per_sm × sms` blocks along x (`blocks_per_sm` from
/// `cuOccupancyMaxActiveBlocksPerMultiprocessor` for the launch's block and dynamic shared
/// memory); one block when no block fits, which [`check_cooperative`] then refuses.
pub fn cooperative_grid(blocks_per_sm: u32, sms: u32) -> [u32; 3] {
    let wave = u64::from(blocks_per_sm) * u64::from(sms);
    [wave.clamp(1, i32::MAX as u64) as u32, 1, 1]
}

/// Checks that a cooperative launch of kernel `name` — `grid` blocks of `block` threads with
/// `shared` bytes of dynamic shared memory — can be resident at once: at most `blocks_per_sm`
/// (the driver's occupancy for that block and shared memory) × `sms` blocks. A larger grid
/// would never finish its grid-wide barriers; the refusal gives the numbers.
pub fn check_cooperative(
    name: &str,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    blocks_per_sm: u32,
    sms: u32,
) -> Result<()> {
    let blocks = grid.iter().map(|&g| u64::from(g)).product::<u64>();
    let threads = block.iter().map(|&b| u64::from(b)).product::<u64>();
    let resident = u64::from(blocks_per_sm) * u64::from(sms);
    if blocks_per_sm == 0 {
        return Err(Error::value(format!(
            "kernel `{name}` is cooperative (#[kernel(cooperative)]), but no block of {threads} \
             threads with {shared} bytes of dynamic shared memory fits on an SM of this device \
             (0 blocks per SM): every block of a cooperative grid must be resident at once; use \
             a smaller block or less shared memory"
        )));
    }
    if blocks > resident {
        return Err(Error::value(format!(
            "kernel `{name}` is cooperative (#[kernel(cooperative)]): every block of its grid \
             must be resident at once, but grid {} has {blocks} blocks and this device holds \
             at most {resident} = {blocks_per_sm} blocks per SM (of {threads} threads with \
             {shared} bytes of dynamic shared memory) × {sms} SMs; pass a grid of at most \
             {resident} blocks, or leave the grid automatic (one resident wave)",
            show(grid)
        )));
    }
    Ok(())
}

/// The automatic grid of a cluster kernel: `grid` with each extent rounded up to a multiple
/// of the cluster's, or down to one (at least the cluster's extent) where rounding up would
/// pass the device's limit `max_grid` (the kernel's grid-stride loops cover the rest).
pub fn cluster_grid(grid: [u32; 3], cluster: [u32; 3], max_grid: [u32; 3]) -> [u32; 3] {
    let mut out = grid;
    for i in 0..3 {
        let c = u64::from(cluster[i].max(1));
        let up = u64::from(grid[i].max(1)).div_ceil(c) * c;
        let most = u64::from(max_grid[i]) / c * c;
        out[i] = up.min(most).max(c) as u32;
    }
    out
}

/// Checks a cluster launch of kernel `name` (declaration `decl`, cluster `cluster`): at most
/// 8 blocks per cluster (16 when the kernel allows a non-portable size), and a grid that is a
/// whole number of clusters along every axis.
pub fn check_cluster(
    name: &str,
    decl: &LaunchDecl,
    grid: [u32; 3],
    cluster: [u32; 3],
) -> Result<()> {
    let size = cluster.iter().map(|&c| u64::from(c)).product::<u64>();
    let most = decl.max_cluster_size();
    if cluster.contains(&0) || size > u64::from(most) {
        let why = if decl.non_portable_cluster {
            "a cluster holds at most 16 blocks"
        } else {
            "a portable cluster holds at most 8 blocks (#[kernel(non_portable_cluster)] allows \
             16 where the GPU runs them)"
        };
        return Err(Error::value(format!(
            "kernel `{name}`: cluster {} of {size} blocks: {why}",
            show(cluster)
        )));
    }
    if let Some(i) = (0..3).find(|&i| !grid[i].is_multiple_of(cluster[i])) {
        return Err(Error::value(format!(
            "kernel `{name}` runs in clusters of {} blocks (#[kernel(cluster = …)]): its grid \
             must be a whole number of clusters along every axis, but grid {} has {} blocks \
             along {}, not a multiple of {}",
            show(cluster),
            show(grid),
            grid[i],
            AXES[i],
            cluster[i]
        )));
    }
    Ok(())
}

/// The automatic grid of a grid-stride cluster kernel (a whole number of clusters, from
/// [`cluster_grid`]) capped at the clusters the device runs at once (`active`, from
/// `cuOccupancyMaxActiveClusters`, at least 1): blocks beyond them would wait for a second
/// wave while the first holds the work, where a persistent kernel's grid-stride loop gives it
/// to the resident ones. Only the x axis is capped (the kernel's grid is 1-D).
pub fn resident_cluster_grid(grid: [u32; 3], cluster: [u32; 3], active: u32) -> [u32; 3] {
    let c = cluster.map(|c| c.max(1));
    // One cluster along y and z: the clusters are the x axis's.
    if grid[1] != c[1] || grid[2] != c[2] {
        return grid;
    }
    let most = u64::from(active.max(1)) * u64::from(c[0]);
    [u64::from(grid[0]).min(most) as u32, grid[1], grid[2]]
}

/// Checks the driver's answer for a cluster launch of kernel `name`: `active` clusters of
/// `cluster` (blocks of `block` threads with `shared` bytes of dynamic shared memory) can run
/// at once (`cuOccupancyMaxActiveClusters`); 0 means the kernel cannot be launched so.
pub fn check_cluster_occupancy(
    name: &str,
    cluster: [u32; 3],
    block: [u32; 3],
    shared: u32,
    active: u32,
) -> Result<()> {
    if active == 0 {
        let threads = block.iter().map(|&b| u64::from(b)).product::<u64>();
        return Err(Error::value(format!(
            "kernel `{name}` cannot be launched in clusters of {} blocks of {threads} threads \
             with {shared} bytes of dynamic shared memory on this device: the driver schedules \
             0 such clusters (cuOccupancyMaxActiveClusters); use a smaller block, less shared \
             memory or a smaller cluster",
            show(cluster)
        )));
    }
    Ok(())
}

/// The dynamic shared memory of a launch of `sig` whose caller asked for `asked` bytes: what
/// the kernel declares it needs (`#[kernel(shared_bytes = n)]`) when the caller asked for none,
/// else the caller's; a caller's amount below the declared need is refused, naming the kernel.
pub fn dynamic_shared(sig: &crate::module::Signature, asked: u32) -> Result<u32> {
    let need = sig.launch.shared_bytes;
    if asked == 0 {
        return Ok(need);
    }
    if asked < need {
        return Err(Error::value(format!(
            "kernel `{}` needs {need} bytes of dynamic shared memory (its shared_bytes); the \
             launch asked for {asked}",
            sig.name
        )));
    }
    Ok(asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: DeviceLimits = DeviceLimits::sm80_family(232_448);

    fn limits(max_threads: u32, static_shared: u32) -> FunctionLimits {
        FunctionLimits {
            max_threads,
            static_shared,
            dynamic_shared: 49_152 - static_shared,
            registers: 40,
        }
    }

    fn decl(
        max_threads: u16,
        block: [u16; 3],
        dynamic_shared: Option<DType>,
        grid_dims: u8,
    ) -> LaunchDecl {
        LaunchDecl {
            max_threads,
            block,
            dynamic_shared: dynamic_shared.map_or(0, |t| t as u8),
            grid_dims,
            ..LaunchDecl::default()
        }
    }

    fn message(r: Result<impl std::fmt::Debug>) -> String {
        r.unwrap_err().message().to_string()
    }

    #[test]
    fn automatic_grid() {
        // One resident wave without a hint.
        assert_eq!(auto_grid(1 << 28, 256, None, || 1056), 1056);
        assert_eq!(auto_grid(1000, 256, None, || 1056), 4);
        // One thread per declared number of elements, no wave cap.
        assert_eq!(auto_grid(1 << 28, 256, Some(4), || 1056), 1 << 18);
        assert_eq!(auto_grid(1 << 28, 256, Some(2), || unreachable!()), 1 << 19);
        assert_eq!(auto_grid(1025, 256, Some(4), || 0), 2);
        // Never zero blocks, never beyond the driver's limit.
        assert_eq!(auto_grid(0, 256, Some(4), || 0), 1);
        assert_eq!(auto_grid(usize::MAX, 1, Some(1), || 0), i32::MAX as u32);
    }

    #[test]
    fn rows_grid_gives_every_row_a_worker() {
        // Rows of up to 32 × 32 elements: a warp each, 8 rows per block of 256 threads.
        assert_eq!(rows_grid(&[32768, 1024], 256, Some(32)), 4096);
        assert_eq!(rows_grid(&[32768, 1024], 128, Some(32)), 8192);
        assert_eq!(rows_grid(&[1000, 7], 256, Some(32)), 125);
        assert_eq!(rows_grid(&[1001, 7], 256, Some(32)), 126);
        // Longer rows: a block each.
        assert_eq!(rows_grid(&[4096, 4096], 256, Some(32)), 4096);
        assert_eq!(rows_grid(&[3, 1025], 256, Some(32)), 3);
        // The leading axes count the rows; a 1-D array is one row.
        assert_eq!(rows_grid(&[4, 5, 6, 2048], 256, Some(32)), 120);
        assert_eq!(rows_grid(&[4, 5, 6, 16], 256, Some(32)), 15);
        assert_eq!(rows_grid(&[1 << 20], 256, Some(32)), 1);
        assert_eq!(rows_grid(&[], 256, Some(32)), 1);
        // Without items_per_thread, or with blocks narrower than a warp: a block per row.
        assert_eq!(rows_grid(&[1000, 7], 256, None), 1000);
        assert_eq!(rows_grid(&[1000, 7], 16, Some(32)), 1000);
        // Blocks that are not whole warps count their whole warps.
        assert_eq!(rows_grid(&[1000, 7], 48, Some(32)), 1000);
        assert_eq!(rows_grid(&[1000, 7], 96, Some(32)), 334);
        // Never zero blocks (no rows), never beyond the driver's limit.
        assert_eq!(rows_grid(&[0, 1024], 256, Some(32)), 1);
        assert_eq!(
            rows_grid(&[usize::MAX, 2, 2048], 256, Some(32)),
            i32::MAX as u32
        );
    }

    #[test]
    fn automatic_blocks() {
        let none = LaunchDecl::default();
        assert_eq!(auto_block(&none, 256, 768), [256, 1, 1]);
        let fixed = decl(0, [16, 16, 1], None, 2);
        assert_eq!(auto_block(&fixed, 256, 768), [16, 16, 1]);
        assert_eq!(auto_block(&decl(0, [0; 3], None, 2), 256, 768), [32, 24, 1]);
        assert_eq!(auto_block(&decl(0, [0; 3], None, 3), 256, 768), [32, 6, 4]);
        assert_eq!(auto_block(&decl(0, [0; 3], None, 3), 256, 96), [32, 3, 1]);
        assert_eq!(auto_block(&decl(0, [0; 3], None, 3), 256, 192), [32, 3, 2]);
        assert_eq!(auto_block(&decl(0, [0; 3], None, 2), 256, 16), [16, 1, 1]);
        assert_eq!(auto_block(&decl(0, [0; 3], None, 2), 256, 0), [1, 1, 1]);
        // Every automatic block passes the checks of a kernel whose limit it came from.
        for potential in [1, 32, 100, 128, 640, 1024] {
            for dims in 1..=3 {
                let d = decl(0, [0; 3], None, dims);
                let b = auto_block(&d, potential.min(256), potential);
                check_block("k", &d, &limits(potential, 0), &H100, b).unwrap();
            }
        }
    }

    #[test]
    fn n_dimensional_grids() {
        let max = H100.max_grid;
        // 2-D over a 1000 × 333 array in 32 × 8 blocks: columns along x, rows along y.
        assert_eq!(nd_grid(&[1000, 333], 2, [32, 8, 1], max), [11, 125, 1]);
        // 2-D over 3-D: y covers the product of the leading axes.
        assert_eq!(nd_grid(&[3, 5, 7], 2, [32, 8, 1], max), [1, 2, 1]);
        // 3-D: z covers the leading axes.
        assert_eq!(nd_grid(&[4, 6, 65, 33], 3, [32, 4, 2], max), [2, 17, 12]);
        // Rank 1 and 0: one row.
        assert_eq!(nd_grid(&[100], 2, [32, 8, 1], max), [4, 1, 1]);
        assert_eq!(nd_grid(&[], 3, [32, 2, 2], max), [1, 1, 1]);
        // Empty axes still give one block; huge ones stop at the device's limits.
        assert_eq!(nd_grid(&[0, 5], 2, [32, 8, 1], max), [1, 1, 1]);
        assert_eq!(nd_grid(&[1 << 40, 64], 2, [32, 8, 1], max), [2, 65535, 1]);
        assert_eq!(
            nd_grid(&[usize::MAX, usize::MAX, 2], 2, [32, 1, 1], max),
            [1, 65535, 1]
        );
        // Every automatic grid passes the grid check.
        check_grid("k", &H100, nd_grid(&[1 << 40, 1 << 40], 2, [1, 1, 1], max)).unwrap();
    }

    #[test]
    fn blocks_over_a_limit_are_refused_naming_kernel_and_limit() {
        let none = LaunchDecl::default();
        let f = limits(1024, 0);
        assert!(check_block("k", &none, &f, &H100, [1024, 1, 1]).is_ok());
        assert!(check_block("k", &none, &f, &H100, [8, 8, 16]).is_ok());
        let e = message(check_block("k", &none, &f, &H100, [1025, 1, 1]));
        assert!(
            e.contains("kernel `k`") && e.contains("1024") && e.contains("MAX_BLOCK_DIM_X"),
            "{e}"
        );
        let e = message(check_block("k", &none, &f, &H100, [1, 1, 65]));
        assert!(
            e.contains("along z") && e.contains("MAX_BLOCK_DIM_Z"),
            "{e}"
        );
        let e = message(check_block("k", &none, &f, &H100, [64, 32, 1]));
        assert!(
            e.contains("2048 threads") && e.contains("at most 1024"),
            "{e}"
        );
        let e = message(check_block("k", &none, &f, &H100, [0, 1, 1]));
        assert!(e.contains("zero extent"), "{e}");
        // The kernel's own limit (registers): named with its registers.
        let heavy = limits(384, 0);
        let e = message(check_block("heavy", &none, &heavy, &H100, [512, 1, 1]));
        assert!(
            e.contains("kernel `heavy`") && e.contains("at most 384") && e.contains("40 registers"),
            "{e}"
        );
        // A declared max_threads is named as such.
        let bounded = decl(128, [0; 3], None, 0);
        let e = message(check_block(
            "b",
            &bounded,
            &limits(128, 0),
            &H100,
            [16, 16, 1],
        ));
        assert!(
            e.contains("max_threads = 128") && e.contains("256 threads"),
            "{e}"
        );
        assert!(check_block("b", &bounded, &limits(128, 0), &H100, [32, 4, 1]).is_ok());
        // A fixed block: exactly that block.
        let fixed = decl(0, [32, 8, 1], None, 2);
        assert!(check_block("t", &fixed, &f, &H100, [32, 8, 1]).is_ok());
        let e = message(check_block("t", &fixed, &f, &H100, [8, 32, 1]));
        assert!(
            e.contains("requires block (32, 8, 1)") && e.contains("got block (8, 32, 1)"),
            "{e}"
        );
    }

    #[test]
    fn grids_over_a_limit_are_refused() {
        assert!(check_grid("k", &H100, [i32::MAX as u32, 65535, 65535]).is_ok());
        let e = message(check_grid("k", &H100, [1, 65536, 1]));
        assert!(
            e.contains("kernel `k`") && e.contains("65535") && e.contains("MAX_GRID_DIM_Y"),
            "{e}"
        );
        let e = message(check_grid("k", &H100, [1u32 << 31, 1, 1]));
        assert!(e.contains("MAX_GRID_DIM_X"), "{e}");
        let e = message(check_grid("k", &H100, [4, 0, 1]));
        assert!(e.contains("zero extent"), "{e}");
    }

    #[test]
    fn cooperative_grids_are_one_resident_wave_at_most() {
        // The automatic grid: exactly one wave.
        assert_eq!(cooperative_grid(8, 132), [1056, 1, 1]);
        assert_eq!(cooperative_grid(1, 1), [1, 1, 1]);
        assert_eq!(cooperative_grid(0, 132), [1, 1, 1]);
        let block = [256, 1, 1];
        check_cooperative("k", cooperative_grid(8, 132), block, 0, 8, 132).unwrap();
        // Any grid up to the wave, of any shape; one block beyond is refused with the numbers.
        check_cooperative("k", [33, 32, 1], block, 0, 8, 132).unwrap();
        check_cooperative("k", [1, 1, 1], block, 0, 8, 132).unwrap();
        let e = message(check_cooperative("norm", [1057, 1, 1], block, 4096, 8, 132));
        assert!(
            e.contains("kernel `norm`")
                && e.contains("cooperative")
                && e.contains("grid (1057, 1, 1)")
                && e.contains("1057 blocks")
                && e.contains("at most 1056")
                && e.contains("8 blocks per SM")
                && e.contains("256 threads")
                && e.contains("4096 bytes")
                && e.contains("132 SMs"),
            "{e}"
        );
        let e = message(check_cooperative("k", [2, 2, 2], block, 0, 1, 7));
        assert!(e.contains("8 blocks") && e.contains("at most 7"), "{e}");
        // No block fits: refused, whatever the grid.
        let e = message(check_cooperative(
            "k",
            [1, 1, 1],
            [1024, 1, 1],
            200_000,
            0,
            132,
        ));
        assert!(
            e.contains("0 blocks per SM") && e.contains("200000 bytes"),
            "{e}"
        );
    }

    #[test]
    fn resident_cluster_grids_hold_the_active_clusters() {
        // 132 blocks in pairs, 60 pairs resident: 120 blocks; fewer asked, as asked.
        assert_eq!(
            resident_cluster_grid([132, 1, 1], [2, 1, 1], 60),
            [120, 1, 1]
        );
        assert_eq!(
            resident_cluster_grid([132, 1, 1], [2, 1, 1], 66),
            [132, 1, 1]
        );
        assert_eq!(resident_cluster_grid([8, 1, 1], [2, 1, 1], 66), [8, 1, 1]);
        assert_eq!(resident_cluster_grid([16, 2, 1], [4, 2, 1], 2), [8, 2, 1]);
        // Still a whole number of clusters, at least one.
        assert_eq!(resident_cluster_grid([132, 1, 1], [2, 1, 1], 0), [2, 1, 1]);
        // Several clusters along y: left as it is.
        assert_eq!(resident_cluster_grid([8, 4, 1], [2, 2, 1], 1), [8, 4, 1]);
    }

    #[test]
    fn cluster_grids_are_whole_clusters() {
        let max = H100.max_grid;
        assert_eq!(cluster_grid([5, 1, 1], [2, 1, 1], max), [6, 1, 1]);
        assert_eq!(cluster_grid([6, 1, 1], [2, 1, 1], max), [6, 1, 1]);
        assert_eq!(cluster_grid([1, 1, 1], [4, 2, 1], max), [4, 2, 1]);
        assert_eq!(cluster_grid([7, 3, 5], [2, 2, 2], max), [8, 4, 6]);
        // At the device's limit: rounded down instead.
        assert_eq!(
            cluster_grid([65535, 65535, 1], [1, 2, 1], max),
            [65535, 65534, 1]
        );
        let decl = |cluster: [u8; 3], non_portable: bool| LaunchDecl {
            cluster,
            non_portable_cluster: non_portable,
            ..LaunchDecl::default()
        };
        let two = decl([2, 1, 1], false);
        check_cluster("k", &two, [6, 1, 1], [2, 1, 1]).unwrap();
        check_cluster("k", &two, [2, 5, 3], [2, 1, 1]).unwrap();
        // Every automatic grid passes.
        for g in [[1, 1, 1], [5, 7, 9], [65535, 65535, 65535]] {
            let c = [2, 2, 2];
            check_cluster("k", &decl([2, 2, 2], false), cluster_grid(g, c, max), c).unwrap();
            check_grid("k", &H100, cluster_grid(g, c, max)).unwrap();
        }
        // A grid that is not a whole number of clusters: refused, naming the axis.
        let e = message(check_cluster("pairs", &two, [7, 1, 1], [2, 1, 1]));
        assert!(
            e.contains("kernel `pairs`")
                && e.contains("clusters of (2, 1, 1)")
                && e.contains("grid (7, 1, 1)")
                && e.contains("7 blocks along x, not a multiple of 2"),
            "{e}"
        );
        let quad = decl([1, 2, 2], false);
        let e = message(check_cluster("k", &quad, [4, 4, 3], [1, 2, 2]));
        assert!(e.contains("along z, not a multiple of 2"), "{e}");
        // More than 8 blocks without the non-portable declaration; more than 16 with it.
        let e = message(check_cluster("k", &two, [16, 1, 1], [16, 1, 1]));
        assert!(e.contains("at most 8") && e.contains("16 blocks"), "{e}");
        check_cluster("k", &decl([16, 1, 1], true), [16, 1, 1], [16, 1, 1]).unwrap();
        let e = message(check_cluster(
            "k",
            &decl([16, 1, 1], true),
            [32, 1, 1],
            [32, 1, 1],
        ));
        assert!(e.contains("at most 16"), "{e}");
        // The driver's answer: no cluster can be scheduled.
        check_cluster_occupancy("k", [2, 1, 1], [256, 1, 1], 0, 66).unwrap();
        let e = message(check_cluster_occupancy(
            "big",
            [8, 1, 1],
            [1024, 1, 1],
            200_000,
            0,
        ));
        assert!(
            e.contains("kernel `big`")
                && e.contains("clusters of (8, 1, 1)")
                && e.contains("1024 threads")
                && e.contains("200000 bytes")
                && e.contains("cuOccupancyMaxActiveClusters"),
            "{e}"
        );
    }

    #[test]
    fn dynamic_shared_memory() {
        let none = LaunchDecl::default();
        let f = limits(1024, 1024);
        // Within the load-time limit: no opt-in.
        assert_eq!(check_shared("k", &none, &f, &H100, 0).unwrap(), None);
        assert_eq!(check_shared("k", &none, &f, &H100, 48_128).unwrap(), None);
        // Above it: opt in to exactly the request, up to the device's limit less static.
        assert_eq!(
            check_shared("k", &none, &f, &H100, 48_129).unwrap(),
            Some(48_129)
        );
        assert_eq!(
            check_shared("k", &none, &f, &H100, 65_536).unwrap(),
            Some(65_536)
        );
        assert_eq!(
            check_shared("k", &none, &f, &H100, 204_800).unwrap(),
            Some(204_800)
        );
        assert_eq!(
            check_shared("k", &none, &f, &H100, 231_424).unwrap(),
            Some(231_424)
        );
        let e = message(check_shared("k", &none, &f, &H100, 231_425));
        assert!(
            e.contains("kernel `k`")
                && e.contains("at most 231424")
                && e.contains("1024 bytes of static"),
            "{e}"
        );
        // A declared element type: whole elements only.
        let floats = decl(0, [0; 3], Some(DType::F32), 0);
        assert!(check_shared("r", &floats, &f, &H100, 65_536).is_ok());
        let e = message(check_shared("r", &floats, &f, &H100, 65_538));
        assert!(
            e.contains("float32") && e.contains("4 bytes each") && e.contains("65538"),
            "{e}"
        );
        let halves = decl(0, [0; 3], Some(DType::BF16), 0);
        assert!(check_shared("r", &halves, &f, &H100, 6).is_ok());
    }
}
