//! Warp and block reductions and scans for every block shape, against sequential folds.

use crate::warp::Bits;
use crate::{down, ensure, launch, rng, up, TestResult, BLOCKS};
use ferrocuda::Scalar;
use rand::rngs::StdRng;
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("block_sum_u32", || {
        case::<u32>(
            "collectives_sum_u32",
            |a, b| a.wrapping_add(b),
            |r| r.random(),
        )
    }),
    ("block_min_u32", || {
        case::<u32>("collectives_min_u32", |a, b| a.min(b), |r| r.random())
    }),
    ("block_max_i32", || {
        case::<i32>("collectives_max_i32", |a, b| a.max(b), |r| r.random())
    }),
    ("block_xor_u32", || {
        case::<u32>("collectives_xor_u32", |a, b| a ^ b, |r| r.random())
    }),
    ("block_sum_u64", || {
        case::<u64>(
            "collectives_sum_u64",
            |a, b| a.wrapping_add(b),
            |r| r.random(),
        )
    }),
    ("block_min_i64", || {
        case::<i64>("collectives_min_i64", |a, b| a.min(b), |r| r.random())
    }),
    // Integer-valued floats: every partial sum is exact whatever the order.
    ("block_sum_f32", || {
        case::<f32>(
            "collectives_sum_f32",
            |a, b| a + b,
            |r| r.random_range(-100i32..=100) as f32,
        )
    }),
    ("block_sum_f64", || {
        case::<f64>(
            "collectives_sum_f64",
            |a, b| a + b,
            |r| r.random_range(-1e6f64..1e6).round(),
        )
    }),
    ("block_max_f32", || {
        case::<f32>("collectives_max_f32", f32::max, |r| {
            if r.random_range(0..50) == 0 {
                f32::NAN
            } else {
                r.random_range(-1e3f32..1e3)
            }
        })
    }),
    ("block_affine_u64", || {
        case::<u64>("collectives_affine_u64", affine, |r| r.random())
    }),
];

/// Composition of affine maps mod 2^32, packed `m << 32 | c` (as the kernel's operation).
fn affine(a: u64, b: u64) -> u64 {
    let (ma, ca, mb, cb) = ((a >> 32) as u32, a as u32, (b >> 32) as u32, b as u32);
    (ma.wrapping_mul(mb) as u64) << 32 | ca.wrapping_mul(mb).wrapping_add(cb) as u64
}

/// Bitwise equality, with any NaN equal to any NaN (the kernels may canonicalize NaNs).
fn same<T: Bits>(a: T, b: T) -> bool {
    let nan = |x: u64| {
        if std::mem::size_of::<T>() == 4 {
            f32::from_bits(x as u32).is_nan()
        } else {
            f64::from_bits(x).is_nan()
        }
    };
    a.bits() == b.bits()
        || (std::any::type_name::<T>().starts_with('f') && nan(a.bits()) && nan(b.bits()))
}

const RECORD: usize = 7;

/// One (type, operation): 3 blocks of every shape, random inputs and a random `initial`.
fn case<T: Bits + std::fmt::Debug + Into<Scalar>>(
    kernel: &str,
    op: fn(T, T) -> T,
    gen: fn(&mut StdRng) -> T,
) -> TestResult {
    let mut r = rng(kernel.len() as u64 * 31 + 7);
    let fold = |v: &[T]| v[1..].iter().fold(v[0], |s, &a| op(s, a));
    for &b in BLOCKS {
        let n = (b[0] * b[1] * b[2]) as usize;
        let blocks = 3usize;
        let x: Vec<T> = (0..n * blocks).map(|_| gen(&mut r)).collect();
        let initial = gen(&mut r);
        let poison = T::from_bits64(0x7A7A_7A7A_5A5A_5A5A);
        let (dx, dout) = (up(&x)?, up(&vec![poison; RECORD * n * blocks])?);
        let smem = (2 * n.div_ceil(32) * std::mem::size_of::<T>()) as u32;
        launch(
            kernel,
            &[dx.arg(), dout.arg(), crate::scalar(initial)],
            [blocks as u32, 1, 1],
            b,
            smem,
        )?;
        let out = down(&dout)?;
        for blk in 0..blocks {
            let v = &x[blk * n..(blk + 1) * n];
            let total = fold(v);
            for rank in 0..n {
                let g = blk * n + rank;
                let (lane, w0) = (rank % 32, rank - rank % 32);
                let before = |from: usize| {
                    if rank == from {
                        initial
                    } else {
                        op(initial, fold(&v[from..rank]))
                    }
                };
                let mut want = vec![
                    total,
                    fold(&v[..=rank]),
                    before(0),
                    total,
                    fold(&v[w0..=rank]),
                    before(w0),
                ];
                let got = &out[RECORD * g..RECORD * (g + 1)];
                want.push(if lane == 0 {
                    fold(&v[w0..(w0 + 32).min(n)])
                } else {
                    poison
                });
                for k in 0..RECORD {
                    ensure(same(got[k], want[k]), || {
                        format!(
                            "{kernel} block {b:?} #{blk} rank {rank}: value {k} = {:?}, want {:?}",
                            got[k], want[k]
                        )
                    })?;
                }
            }
        }
    }
    Ok(())
}
