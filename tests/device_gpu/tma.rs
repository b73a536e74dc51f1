//! The Tensor Memory Accelerator (`tests/device-kernels/src/tma.rs`, sm_90): every box of a
//! grid of 16 × 32 boxes over an f32 array, at offsets (negative ones too; the innermost one a
//! multiple of 16 bytes, as TMA requires) that put boxes partly and wholly outside it: the loaded tile is the array's elements with zeros outside, and the TMA store
//! writes exactly the boxes' elements inside the destination (the rest keeps its poison).

use crate::{down, ensure, err, launch, module, rng, scalar, up, TestResult, DEV};
use ferrocuda::host::driver::Context;
use ferrocuda::Arg;
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[("tma_box_loads_and_stores", test_tma)];

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
