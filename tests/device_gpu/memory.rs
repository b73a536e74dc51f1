//! Global-memory access forms (`tests/device-kernels/src/memory.rs`): 16-byte vectors with
//! scalar heads and tails at every relative misalignment, loads through the read-only cache,
//! empty arrays (null pointers, never dereferenced), grids of one thread and of many; the rows
//! of 2-D views in vectors (aligned, misaligned, padded and transposed views); rules on the
//! axes of C-contiguous arrays a kernel sees flat. Every element of every buffer is checked,
//! also outside the views (it must keep its value).

use crate::{down, ensure, err, launch, rng, scalar, up, TestResult};
use ferrocuda::abi::Element;
use ferrocuda::{Arg, ArrayDesc, DeviceArray};
use libtest_mimic::Failed;
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("memory_vector_axpy_nc", vector_axpy_nc),
    ("memory_vector_copy", vector_copy),
    ("memory_row_sums_nc", row_sums_nc),
    ("memory_empty_arrays", empty_arrays),
    ("memory_view_row_vectors", view_row_vectors),
    ("memory_flat_row_sums", flat_row_sums),
];

/// Grids (blocks, threads per block): a single thread, fewer threads than a vector has
/// elements, and many.
const GRIDS: [(u32, u32); 4] = [(1, 1), (1, 3), (4, 64), (1024, 256)];

/// `base`'s memory from element `offset` on, as an array of `shape` with element strides
/// `strides` (C order when `None`).
pub(crate) fn view<T: Element>(
    base: &DeviceArray<T>,
    offset: usize,
    shape: &[usize],
    strides: Option<&[isize]>,
    readonly: bool,
) -> Result<ArrayDesc, Failed> {
    let size = std::mem::size_of::<T>();
    let bytes: Option<Vec<isize>> = strides.map(|s| s.iter().map(|e| e * size as isize).collect());
    ArrayDesc::from_parts(
        T::DTYPE,
        shape,
        bytes.as_deref(),
        base.device_ptr() + (offset * size) as u64,
        readonly,
        Some(base.stream()),
    )
    .map_err(err)
}

fn launch_on(name: &str, args: &[Arg<'_>], (blocks, threads): (u32, u32)) -> TestResult {
    launch(name, args, [blocks, 1, 1], [threads, 1, 1], 0)
}

/// `y = alpha * x + y` at offsets that make the heads equal (vector path) and unequal (scalar
/// path), every grid: bit-exact (two roundings, as on the host).
fn vector_axpy_nc() -> TestResult {
    let mut r = rng(91);
    let alpha = 1.75f32;
    for n in [1usize, 3, 4, 5, 17, 1000, 100_003] {
        for (ox, oy) in [(0, 0), (1, 1), (3, 3), (1, 2), (0, 3)] {
            for grid in GRIDS {
                let x: Vec<f32> = (0..n + 4).map(|_| r.random_range(-1e3f32..1e3)).collect();
                let y: Vec<f32> = (0..n + 4).map(|_| r.random_range(-1e3f32..1e3)).collect();
                let (dx, dy) = (up(&x)?, up(&y)?);
                let (vx, vy) = (
                    view(&dx, ox, &[n], None, true)?,
                    view(&dy, oy, &[n], None, false)?,
                );
                launch_on(
                    "vector_axpy_nc",
                    &[scalar(alpha), Arg::Array(&vx), Arg::Array(&vy)],
                    grid,
                )?;
                let got = down(&dy)?;
                for i in 0..n + 4 {
                    let want = if (oy..oy + n).contains(&i) {
                        alpha * x[i - oy + ox] + y[i]
                    } else {
                        y[i]
                    };
                    ensure(got[i].to_bits() == want.to_bits(), || {
                        format!(
                            "n {n}, offsets ({ox}, {oy}), grid {grid:?}: y[{i}] = {}, want {want}",
                            got[i]
                        )
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// Copies of `u8` (16 per vector) and `f64` (2 per vector) at several relative
/// misalignments, and in place.
fn vector_copy() -> TestResult {
    let mut r = rng(92);
    for n in [1usize, 15, 16, 17, 33, 1000, 65_537] {
        for (ox, oy) in [(0, 0), (1, 1), (15, 15), (7, 3), (0, 1)] {
            let x: Vec<u8> = (0..n + 16).map(|_| r.random::<u8>()).collect();
            let y: Vec<u8> = (0..n + 16).map(|_| r.random::<u8>()).collect();
            check_copy("vector_copy_u8", &x, &y, n, (ox, oy), GRIDS[(n + ox) % 4])?;
        }
        for (ox, oy) in [(0, 0), (1, 1), (0, 1)] {
            let x: Vec<f64> = (0..n + 2).map(|_| r.random_range(-1e9f64..1e9)).collect();
            let y: Vec<f64> = (0..n + 2).map(|_| r.random_range(-1e9f64..1e9)).collect();
            check_copy("vector_copy_f64", &x, &y, n, (ox, oy), GRIDS[(n + oy) % 4])?;
        }
    }
    // In place: the same view as input and output (coherent loads) changes nothing.
    let x: Vec<f64> = (0..1001).map(|i| i as f64 * 0.5).collect();
    let dx = up(&x)?;
    let (v, w) = (
        view(&dx, 1, &[1000], None, true)?,
        view(&dx, 1, &[1000], None, false)?,
    );
    launch_on(
        "vector_copy_f64",
        &[Arg::Array(&v), Arg::Array(&w)],
        (8, 128),
    )?;
    let got = down(&dx)?;
    ensure(got == x, || "the in-place copy changed the array".into())
}

fn check_copy<T: Element + Default + PartialEq + std::fmt::Debug>(
    kernel: &str,
    x: &[T],
    y: &[T],
    n: usize,
    (ox, oy): (usize, usize),
    grid: (u32, u32),
) -> TestResult {
    let (dx, dy) = (up(x)?, up(y)?);
    let (vx, vy) = (
        view(&dx, ox, &[n], None, true)?,
        view(&dy, oy, &[n], None, false)?,
    );
    launch_on(kernel, &[Arg::Array(&vx), Arg::Array(&vy)], grid)?;
    let got = down(&dy)?;
    for i in 0..y.len() {
        let want = if (oy..oy + n).contains(&i) {
            x[i - oy + ox]
        } else {
            y[i]
        };
        ensure(got[i] == want, || {
            format!(
                "{kernel} n {n}, offsets ({ox}, {oy}): y[{i}] = {:?}, want {want:?}",
                got[i]
            )
        })?;
    }
    Ok(())
}

/// Row sums of C-order and transposed 2-D views through the read-only cache: bit-exact (the
/// host adds in the same order).
fn row_sums_nc() -> TestResult {
    let mut r = rng(93);
    for (rows, cols) in [(1usize, 1usize), (7, 33), (1000, 17), (64, 300)] {
        let data: Vec<f32> = (0..rows * cols)
            .map(|_| r.random_range(-1f32..1.0))
            .collect();
        let dd = up(&data)?;
        for transposed in [false, true] {
            // Element (i, j) at i * cols + j, or (transposed) at j * rows + i.
            let strides = if transposed {
                [1, rows as isize]
            } else {
                [cols as isize, 1]
            };
            let at = |i: usize, j: usize| i * strides[0] as usize + j * strides[1] as usize;
            let x = view(&dd, 0, &[rows, cols], Some(&strides), true)?;
            let out = up(&vec![f32::NAN; rows + 1])?;
            let o = view(&out, 0, &[rows], None, false)?;
            launch_on("row_sums_nc", &[Arg::Array(&x), Arg::Array(&o)], (3, 32))?;
            let got = down(&out)?;
            for i in 0..rows {
                let want = (0..cols).fold(0f32, |s, j| s + data[at(i, j)]);
                ensure(got[i].to_bits() == want.to_bits(), || {
                    format!(
                        "{rows}x{cols} (transposed {transposed}): sum {i} = {}, want {want}",
                        got[i]
                    )
                })?;
            }
            ensure(got[rows].is_nan(), || {
                "row_sums_nc wrote past its output".into()
            })?;
        }
    }
    Ok(())
}

/// Zero-size arrays arrive with a null data pointer: the kernels must launch and touch
/// nothing.
fn empty_arrays() -> TestResult {
    let null = |dtype, shape: &[usize], readonly| {
        ArrayDesc::from_parts(dtype, shape, None, 0, readonly, None).map_err(err)
    };
    let (x, y) = (
        null(f32::DTYPE, &[0], true)?,
        null(f32::DTYPE, &[0], false)?,
    );
    let (b, c) = (null(u8::DTYPE, &[0], true)?, null(u8::DTYPE, &[0], false)?);
    let (m, o) = (
        null(f32::DTYPE, &[0, 5], true)?,
        null(f32::DTYPE, &[0], false)?,
    );
    for grid in GRIDS {
        launch_on(
            "vector_axpy_nc",
            &[scalar(2.0f32), Arg::Array(&x), Arg::Array(&y)],
            grid,
        )?;
        launch_on("vector_copy_u8", &[Arg::Array(&b), Arg::Array(&c)], grid)?;
        launch_on("row_sums_nc", &[Arg::Array(&m), Arg::Array(&o)], grid)?;
    }
    // A row of zero columns sums to zero.
    let out = up(&[f32::NAN; 3])?;
    let (m, o) = (
        null(f32::DTYPE, &[3, 0], true)?,
        view(&out, 0, &[3], None, false)?,
    );
    launch_on("row_sums_nc", &[Arg::Array(&m), Arg::Array(&o)], (1, 32))?;
    let got = down(&out)?;
    ensure(got == [0.0; 3], || format!("sums of empty rows: {got:?}"))
}

/// `out = 2 x + row` over 2-D views whose rows take vectors (C order from an aligned base;
/// rows padded to a multiple of 4) and whose rows do not (a misaligned base, an odd row
/// stride, transposed), with column counts that leave partial groups: bit-exact, every element
/// of `out`'s buffer checked (outside the view it keeps its poison).
fn view_row_vectors() -> TestResult {
    let mut r = rng(95);
    for (rows, cols) in [
        (1usize, 4usize),
        (3, 8),
        (5, 7),
        (64, 33),
        (17, 256),
        (1000, 12),
    ] {
        // (base offset, row stride, transposed) of x and of out.
        for (offset, stride, transposed) in [
            (0, cols, false),
            (0, cols.next_multiple_of(4) + 4, false),
            (1, cols, false),
            (0, cols + 1, false),
            (0, rows, true),
        ] {
            let len = offset + rows.max(cols) * (stride.max(rows) + 1);
            let data: Vec<f32> = (0..len).map(|_| r.random_range(-1e3f32..1e3)).collect();
            let dx = up(&data)?;
            let dout = up(&vec![f32::NAN; len])?;
            let strides = if transposed {
                [1, stride as isize]
            } else {
                [stride as isize, 1]
            };
            let at =
                |i: usize, j: usize| offset + i * strides[0] as usize + j * strides[1] as usize;
            let x = view(&dx, offset, &[rows, cols], Some(&strides), true)?;
            let o = view(&dout, offset, &[rows, cols], Some(&strides), false)?;
            for grid in [(1, 1), (4, 64), (256, 128)] {
                launch_on("view_row_vectors", &[Arg::Array(&x), Arg::Array(&o)], grid)?;
            }
            let got = down(&dout)?;
            let mut want = vec![f32::NAN; len];
            for i in 0..rows {
                for j in 0..cols {
                    want[at(i, j)] = 2.0 * data[at(i, j)] + i as f32;
                }
            }
            for k in 0..len {
                ensure(got[k].to_bits() == want[k].to_bits(), || {
                    format!(
                        "{rows}x{cols}, offset {offset}, stride {stride}, transposed \
                         {transposed}: out buffer [{k}] = {}, want {}",
                        got[k], want[k]
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// Row sums of C-contiguous 2-D arrays passed to a kernel that sees them flat with their
/// row length as a scalar: exact (integer values, every partial sum representable); the
/// host refuses a `cols` other than the array's second extent, a 1-D array, and an `out` of
/// another length, before any launch, naming the argument.
fn flat_row_sums() -> TestResult {
    let mut r = rng(96);
    for (rows, cols) in [(1usize, 1usize), (7, 33), (100, 4), (3, 1000), (1000, 5)] {
        let data: Vec<f32> = (0..rows * cols)
            .map(|_| r.random_range(-1000i32..=1000) as f32)
            .collect();
        let dd = up(&data)?;
        let out = up(&vec![f32::NAN; rows + 1])?;
        let x = view(&dd, 0, &[rows, cols], None, true)?;
        let o = view(&out, 0, &[rows], None, false)?;
        launch_on(
            "flat_row_sums",
            &[Arg::Array(&x), Arg::Array(&o), scalar(cols as u32)],
            (3, 64),
        )?;
        let got = down(&out)?;
        for i in 0..rows {
            let want: f32 = data[i * cols..(i + 1) * cols].iter().sum();
            ensure(got[i] == want, || {
                format!("{rows}x{cols}: sum {i} = {}, want {want}", got[i])
            })?;
        }
        ensure(got[rows].is_nan(), || "flat_row_sums wrote past out".into())?;
        // The rules, checked before the launch (nothing is launched: out keeps its values).
        let flat = view(&dd, 0, &[rows * cols], None, true)?;
        let refused = |args: &[Arg<'_>], arg: &str, text: &str| -> TestResult {
            let k = crate::module()?.kernel("flat_row_sums").map_err(err)?;
            let opts = ferrocuda::LaunchOptions::default();
            // SAFETY: refused before any launch (and memory-safe if it were not).
            match unsafe { k.launch(args, &opts) } {
                Ok(_) => Err(err(format!("{rows}x{cols}: not refused: {text}"))),
                Err(e) => ensure(e.arg() == Some(arg) && e.to_string().contains(text), || {
                    format!("{rows}x{cols}: want argument `{arg}` and {text:?}; got {e}")
                }),
            }
        };
        let c = |v: usize| scalar(v as u32);
        refused(
            &[Arg::Array(&x), Arg::Array(&o), c(cols + 1)],
            "x",
            "requires x.shape[1] == cols (cols is the length of x's rows)",
        )?;
        refused(
            &[Arg::Array(&flat), Arg::Array(&o), c(cols)],
            "x",
            "reads axis 1 of `x`",
        )?;
        let short = view(&out, 0, &[rows + 1], None, false)?;
        refused(
            &[Arg::Array(&x), Arg::Array(&short), c(cols)],
            "out",
            "out holds one sum per row of x",
        )?;
        ensure(down(&out)?[..rows] == got[..rows], || {
            "a refused launch changed out".into()
        })?;
    }
    Ok(())
}
