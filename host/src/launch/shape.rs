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
//!   the limit, and nothing is launched.

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
