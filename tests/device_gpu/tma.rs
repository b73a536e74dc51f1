//! The Tensor Memory Accelerator (`tests/device-kernels/src/tma.rs`, sm_90):
//! * every box of a grid of 16 × 32 boxes over an f32 array, at offsets (negative ones too;
//!   the innermost one a multiple of 16 bytes, as TMA requires) that put boxes partly and
//!   wholly outside it: the loaded tile is the array's elements with zeros outside, and the
//!   TMA store writes exactly the boxes' elements inside the destination (the rest keeps its
//!   poison);
//! * boxes of 3 (f32) and 5 (u16) axes at random coordinates inside, across and outside
//!   arrays of random extents, and stores of a tiling of boxes over the destination;
//! * each swizzle (32, 64, 128 bytes): the tile in shared memory is the box with its 16-byte
//!   chunks permuted as the swizzle says (chunk `j` of 128-byte line `l` at `j ^ (l mod
//!   8) & (swizzle / 16 − 1)`), and a store through a swizzled map undoes it;
//! * a load multicast to both blocks of a cluster of 2, each half issued by its own block or
//!   both by rank 0: both blocks see the whole tile.

use crate::{down, ensure, err, launch, module, rng, scalar, up, TestResult, DEV};
use ferrocuda::abi::Element;
use ferrocuda::host::driver::Context;
use ferrocuda::{Arg, ArrayDesc, DeviceArray};
use rand::rngs::StdRng;
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("tma_box_loads_and_stores", test_tma),
    ("tma_boxes_of_3_and_5_axes", test_nd),
    ("tma_swizzles_32_64_128", test_swizzles),
    ("tma_multicast_to_a_cluster", test_multicast),
];

const POISON: f32 = -777.25;

fn test_tma() -> TestResult {
    let cc = Context::get(DEV).map_err(err)?.compute_capability();
    let k = module()?.kernel("tma_box_copy").map_err(err)?;
    if !k.runs_on(cc) {
        eprintln!("tma test: compute capability {cc:?} has no TMA (the kernel is refused)");
        return Ok(());
    }
    let mut r = rng(0x7a7a);
    // Modes (bit 0: prefetch the descriptor, bit 1: store): `FERROCUDA_TMA_MODES` ("0,2,3")
    // runs some of them only.
    let modes: Vec<u32> = match ferrocuda_config::TMA_MODES.list().map_err(err)? {
        Some(list) => list
            .iter()
            .map(|m| match m.parse() {
                Ok(n) if n < 4 => Ok(n),
                _ => Err(err(format!(
                    "FERROCUDA_TMA_MODES: {m:?} is no mode (0 to 3)"
                ))),
            })
            .collect::<Result<_, _>>()?,
        None => vec![0, 1, 2, 3],
    };
    for mode in modes {
        for (rows, cols, dr, dc) in [
            (64usize, 96usize, 0i32, 0i32),
            (50, 72, -5, -8),
            (17, 4, 3, -28),
        ] {
            eprintln!("  tma_box_copy mode {mode}: {rows}x{cols} at ({dr}, {dc})");
            let src: Vec<f32> = (0..rows * cols)
                .map(|_| r.random_range(-1e3f32..1e3))
                .collect();
            let (gx, gy) = (cols.div_ceil(32) + 1, rows.div_ceil(16) + 1);
            let blocks = gx * gy;
            let dsrc = up(&src)?;
            let ddst = up(&vec![POISON; rows * cols])?;
            let seen = up(&vec![f32::NAN; 512 * blocks])?;
            // 2-D descriptions of the flat device arrays.
            let as2d = |a: &ferrocuda::DeviceArray<f32>| {
                ferrocuda::ArrayDesc::from_parts(
                    ferrocuda::abi::DType::F32,
                    &[rows, cols],
                    None,
                    a.device_ptr(),
                    false,
                    Some(a.stream()),
                )
                .map_err(err)
            };
            let (s2, d2) = (as2d(&dsrc)?, as2d(&ddst)?);
            launch(
                "tma_box_copy",
                &[
                    Arg::Array(&s2),
                    Arg::Array(&d2),
                    Arg::Array(seen.desc()),
                    scalar(dr),
                    scalar(dc),
                    scalar(mode),
                ],
                [gx as u32, gy as u32, 1],
                [128, 1, 1],
                0,
            )?;
            let got = down(&seen)?;
            let out = down(&ddst)?;
            let mut covered = vec![false; rows * cols];
            for by in 0..gy {
                for bx in 0..gx {
                    let b = by * gx + bx;
                    let (r0, c0) = (16 * by as i64 + dr as i64, 32 * bx as i64 + dc as i64);
                    for i in 0..16i64 {
                        for j in 0..32i64 {
                            let (rr, cc) = (r0 + i, c0 + j);
                            let inside =
                                rr >= 0 && cc >= 0 && (rr as usize) < rows && (cc as usize) < cols;
                            let want = if inside {
                                src[rr as usize * cols + cc as usize]
                            } else {
                                0.0
                            };
                            let g = got[512 * b + (i * 32 + j) as usize];
                            ensure(g.to_bits() == want.to_bits(), || {
                                format!("{rows}x{cols} @({dr},{dc}) box ({by},{bx}) [{i},{j}]: loaded {g}, expected {want}")
                            })?;
                            if inside && r0 >= 0 && c0 >= 0 {
                                covered[rr as usize * cols + cc as usize] = true;
                            }
                        }
                    }
                }
            }
            for (e, (&o, &c)) in out.iter().zip(&covered).enumerate() {
                let want = if c && mode & 2 != 0 { src[e] } else { POISON };
                ensure(o.to_bits() == want.to_bits(), || {
                    format!(
                        "{rows}x{cols} @({dr},{dc}): stored dst[{}, {}] = {o}, expected {want}",
                        e / cols,
                        e % cols
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// Whether the device runs kernel `name` (its part's architecture); prints why not.
fn runs(name: &str) -> Result<bool, libtest_mimic::Failed> {
    let cc = Context::get(DEV).map_err(err)?.compute_capability();
    let k = module()?.kernel(name).map_err(err)?;
    if !k.runs_on(cc) {
        eprintln!("{name}: compute capability {cc:?} has no TMA (the kernel is refused)");
    }
    Ok(k.runs_on(cc))
}

/// `a` (flat, C order) described with `shape`.
fn shaped<T: Element>(
    a: &DeviceArray<T>,
    shape: &[usize],
) -> Result<ArrayDesc, libtest_mimic::Failed> {
    ArrayDesc::from_parts(
        T::DTYPE,
        shape,
        None,
        a.device_ptr(),
        false,
        Some(a.stream()),
    )
    .map_err(err)
}

/// Flat C-order index of `idx` in `shape`, or `None` outside.
fn flat(shape: &[usize], idx: &[i64]) -> Option<usize> {
    let mut f = 0usize;
    for (&n, &i) in shape.iter().zip(idx) {
        if i < 0 || i as usize >= n {
            return None;
        }
        f = f * n + i as usize;
    }
    Some(f)
}

/// The multi-index (C order) of element `e` of a box of extents `bx`.
fn unflat(bx: &[usize], mut e: usize) -> Vec<i64> {
    let mut idx = vec![0i64; bx.len()];
    for d in (0..bx.len()).rev() {
        idx[d] = (e % bx[d]) as i64;
        e /= bx[d];
    }
    idx
}

/// Where element `e` of a box lies in shared memory under a `sw`-byte swizzle (0: as is):
/// its 16-byte chunk index within each 128-byte line XORed with the line's index modulo 8,
/// masked to the swizzle's width (CUTLASS's `Swizzle<log2(sw/16), 4, 3>`).
fn swizzled(e: usize, itemsize: usize, sw: usize) -> usize {
    if sw == 0 {
        return e;
    }
    let o = e * itemsize;
    let mask = sw / 16 - 1;
    (o ^ (((o >> 7) & mask) << 4)) / itemsize
}

/// One run of a boxes-by-list kernel over a `shape` array of `T` with boxes `bx`: `loads`
/// coordinates per block, the destination tiled by boxes at `stores` (`None`: no store),
/// every loaded tile and every destination element checked.
#[allow(clippy::too_many_arguments)]
fn boxes_run<T: Element + Default + PartialEq + std::fmt::Debug>(
    name: &str,
    shape: &[usize],
    bx: &[usize],
    sw: usize,
    src: &[T],
    poison: T,
    loads: &[Vec<i32>],
    stores: &[Option<Vec<i32>>],
) -> TestResult {
    let rank = shape.len();
    let elems: usize = bx.iter().product();
    let blocks = loads.len();
    let load_at: Vec<i32> = loads.iter().flatten().copied().collect();
    let store_at: Vec<i32> = stores
        .iter()
        .flat_map(|s| s.clone().unwrap_or_else(|| vec![i32::MIN; rank]))
        .collect();
    let dsrc = up(src)?;
    let ddst = up(&vec![poison; src.len()])?;
    let seen = up(&vec![poison; elems * blocks])?;
    let (dl, ds) = (up(&load_at)?, up(&store_at)?);
    let (s_desc, d_desc) = (shaped(&dsrc, shape)?, shaped(&ddst, shape)?);
    launch(
        name,
        &[
            Arg::Array(&s_desc),
            Arg::Array(&d_desc),
            Arg::Array(dl.desc()),
            Arg::Array(ds.desc()),
            Arg::Array(seen.desc()),
        ],
        [blocks as u32, 1, 1],
        [128, 1, 1],
        0,
    )?;
    let got = down(&seen)?;
    let out = down(&ddst)?;
    let itemsize = std::mem::size_of::<T>();
    let zero = T::default();
    let mut want_dst = vec![poison; src.len()];
    for (b, at) in loads.iter().enumerate() {
        let mut tile = vec![zero; elems];
        for (e, t) in tile.iter_mut().enumerate() {
            let idx: Vec<i64> = unflat(bx, e)
                .iter()
                .zip(at)
                .map(|(&i, &a)| i + a as i64)
                .collect();
            let want = flat(shape, &idx).map_or(zero, |f| src[f]);
            let g = got[elems * b + swizzled(e, itemsize, sw)];
            ensure(g == want, || {
                format!("{name} {shape:?}: block {b}'s box at {at:?}, element {:?}: loaded {g:?}, expected {want:?}", unflat(bx, e))
            })?;
            *t = want;
        }
        if let Some(to) = &stores[b] {
            for (e, &v) in tile.iter().enumerate() {
                let idx: Vec<i64> = unflat(bx, e)
                    .iter()
                    .zip(to)
                    .map(|(&i, &a)| i + a as i64)
                    .collect();
                if let Some(f) = flat(shape, &idx) {
                    want_dst[f] = v;
                }
            }
        }
    }
    for (f, (&o, &w)) in out.iter().zip(&want_dst).enumerate() {
        ensure(o == w, || {
            format!(
                "{name} {shape:?}: dst{:?} = {o:?}, expected {w:?}",
                unflat(shape, f)
            )
        })?;
    }
    Ok(())
}

/// Random load coordinates for `blocks` boxes of `bx` over `shape`: inside, across the edges
/// and wholly outside (both sides), the innermost one a multiple of `inner_step` elements
/// (16 bytes); and a tiling of the array by boxes (each box once, in random block order,
/// the blocks past the tiling storing nothing).
fn coords(
    r: &mut StdRng,
    shape: &[usize],
    bx: &[usize],
    inner_step: usize,
    blocks: usize,
) -> (Vec<Vec<i32>>, Vec<Option<Vec<i32>>>) {
    let rank = shape.len();
    let loads = (0..blocks)
        .map(|_| {
            (0..rank)
                .map(|d| {
                    let (n, b) = (shape[d] as i32, bx[d] as i32);
                    let c = r.random_range(-2 * b..n + b);
                    if d == rank - 1 {
                        c.div_euclid(inner_step as i32) * inner_step as i32
                    } else {
                        c
                    }
                })
                .collect()
        })
        .collect();
    let counts: Vec<usize> = shape.iter().zip(bx).map(|(&n, &b)| n.div_ceil(b)).collect();
    let tiles: usize = counts.iter().product();
    let mut order: Vec<usize> = (0..tiles).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, r.random_range(0..=i));
    }
    let stores = (0..blocks)
        .map(|b| {
            order.get(b).map(|&t| {
                unflat(&counts, t)
                    .iter()
                    .zip(bx)
                    .map(|(&i, &b)| (i as usize * b) as i32)
                    .collect()
            })
        })
        .collect();
    (loads, stores)
}

fn test_nd() -> TestResult {
    for name in ["tma_boxes_3d", "tma_boxes_5d"] {
        if !runs(name)? {
            return Ok(());
        }
    }
    let mut r = rng(0x3d5d);
    // 3-D f32, box 2 × 8 × 16: extents below, at and above the box's, none a multiple of
    // it but the first.
    for shape in [[4usize, 16, 32], [3, 13, 20], [1, 7, 4], [5, 30, 52]] {
        let bx = [2usize, 8, 16];
        let n: usize = shape.iter().product();
        let src: Vec<f32> = (0..n).map(|_| r.random_range(-1e3f32..1e3)).collect();
        let tiles: usize = shape
            .iter()
            .zip(&bx)
            .map(|(&s, &b)| s.div_ceil(b))
            .product();
        let blocks = tiles.max(24);
        let (loads, stores) = coords(&mut r, &shape, &bx, 4, blocks);
        eprintln!("  tma_boxes_3d {shape:?}: {blocks} boxes");
        boxes_run(
            "tma_boxes_3d",
            &shape,
            &bx,
            0,
            &src,
            -777.25f32,
            &loads,
            &stores,
        )?;
    }
    // 5-D u16, box 2 × 2 × 3 × 4 × 8.
    for shape in [
        [2usize, 2, 3, 4, 8],
        [3, 5, 4, 7, 24],
        [1, 3, 2, 9, 8],
        [4, 1, 6, 5, 40],
    ] {
        let bx = [2usize, 2, 3, 4, 8];
        let n: usize = shape.iter().product();
        let src: Vec<u16> = (0..n).map(|_| r.random_range(1u16..u16::MAX)).collect();
        let tiles: usize = shape
            .iter()
            .zip(&bx)
            .map(|(&s, &b)| s.div_ceil(b))
            .product();
        let blocks = tiles.max(24);
        let (loads, stores) = coords(&mut r, &shape, &bx, 8, blocks);
        eprintln!("  tma_boxes_5d {shape:?}: {blocks} boxes");
        boxes_run(
            "tma_boxes_5d",
            &shape,
            &bx,
            0,
            &src,
            u16::MAX,
            &loads,
            &stores,
        )?;
    }
    Ok(())
}

fn test_swizzles() -> TestResult {
    let mut r = rng(0x5a1e);
    for (name, sw) in [
        ("tma_swizzle_32", 32usize),
        ("tma_swizzle_64", 64),
        ("tma_swizzle_128", 128),
    ] {
        if !runs(name)? {
            return Ok(());
        }
        let bx = [16usize, sw / 4];
        for shape in [[32usize, 2 * sw / 4], [45, 3 * sw / 4 + 4], [7, 12]] {
            let n: usize = shape.iter().product();
            // Distinct values, so that a permuted chunk cannot pass for the right one.
            let mut src: Vec<f32> = (0..n).map(|i| i as f32 + 0.5).collect();
            for i in (1..n).rev() {
                src.swap(i, r.random_range(0..=i));
            }
            let tiles: usize = shape
                .iter()
                .zip(&bx)
                .map(|(&s, &b)| s.div_ceil(b))
                .product();
            let blocks = tiles.max(12);
            let (loads, stores) = coords(&mut r, &shape, &bx, 4, blocks);
            eprintln!("  {name} {shape:?}: {blocks} boxes");
            boxes_run(name, &shape, &bx, sw, &src, -777.25f32, &loads, &stores)?;
        }
    }
    Ok(())
}

fn test_multicast() -> TestResult {
    let name = "tma_multicast";
    if !runs(name)? {
        return Ok(());
    }
    let mut r = rng(0x3c57);
    for mode in [0u32, 1] {
        for (rows, cols) in [(64usize, 96usize), (21, 36)] {
            let src: Vec<f32> = (0..rows * cols)
                .map(|_| r.random_range(-1e3f32..1e3))
                .collect();
            let clusters = 40usize;
            let at: Vec<Vec<i32>> = (0..clusters)
                .map(|_| {
                    vec![
                        r.random_range(-20..rows as i32 + 8),
                        r.random_range(-12..cols as i32 + 8) / 4 * 4,
                    ]
                })
                .collect();
            let flat_at: Vec<i32> = at.iter().flatten().copied().collect();
            let dsrc = up(&src)?;
            let dat = up(&flat_at)?;
            let seen = up(&vec![f32::NAN; 512 * 2 * clusters])?;
            let s2 = shaped(&dsrc, &[rows, cols])?;
            eprintln!("  {name} mode {mode}: {rows}x{cols}, {clusters} clusters");
            launch(
                name,
                &[
                    Arg::Array(&s2),
                    Arg::Array(dat.desc()),
                    Arg::Array(seen.desc()),
                    scalar(mode),
                ],
                [2 * clusters as u32, 1, 1],
                [128, 1, 1],
                0,
            )?;
            let got = down(&seen)?;
            for b in 0..2 * clusters {
                let (r0, c0) = (at[b / 2][0] as i64, at[b / 2][1] as i64);
                for i in 0..16i64 {
                    for j in 0..32i64 {
                        let want = flat(&[rows, cols], &[r0 + i, c0 + j]).map_or(0.0, |f| src[f]);
                        let g = got[512 * b + (32 * i + j) as usize];
                        ensure(g.to_bits() == want.to_bits(), || {
                            format!("{name} mode {mode} {rows}x{cols}: block {b} (cluster {}, box at ({r0}, {c0})) [{i},{j}]: {g}, expected {want}", b / 2)
                        })?;
                    }
                }
            }
        }
    }
    Ok(())
}
