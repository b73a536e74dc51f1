//! Atomics under full contention, shared-memory atomics, packed half atomics, message
//! passing with release/acquire and fences, counting barriers and clocks.

use crate::{down, ensure, launch, launch_1d, rng, scalar, up, TestResult, BLOCKS};
use ferrocuda::abi::{DType, Element};
use ferrocuda::Scalar;
use rand::rngs::StdRng;
use rand::RngExt;
use std::fmt::Debug;

pub const TESTS: &[crate::Test] = &[
    ("atomics_int_u32", || int_case::<u32>("int_atomics_u32", 11)),
    ("atomics_int_i32", || int_case::<i32>("int_atomics_i32", 12)),
    ("atomics_int_u64", || int_case::<u64>("int_atomics_u64", 13)),
    ("atomics_int_i64", || int_case::<i64>("int_atomics_i64", 14)),
    ("atomics_float_f32", || {
        float_case::<f32>("float_atomics_f32", 15)
    }),
    ("atomics_float_f64", || {
        float_case::<f64>("float_atomics_f64", 16)
    }),
    ("atomics_half", test_half_atomics),
    ("atomics_shared", test_shared_atomics),
    ("atomics_message_passing", test_message_passing),
    ("fences", test_fences),
    ("barrier_counts", test_barrier_counts),
    ("group_barriers", test_group_barriers),
    ("clocks", test_clocks),
];

/// Sizes of the contention tests: one thread, a few blocks, 2^20 + 3 threads.
const SIZES: &[usize] = &[1, 1000, (1 << 20) + 3];
/// Elements that run the compare-exchange loops in the contention kernels (their
/// `CAS_THREADS`).
const CAS_THREADS: usize = 4096;

/// The integer element types, with the host reference operations.
pub trait Int: Element + Default + Ord + Debug + std::hash::Hash + Into<Scalar> {
    const ONE: Self;
    const MIN: Self;
    const MAX: Self;
    fn wadd(self, o: Self) -> Self;
    fn wsub(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn random(r: &mut StdRng) -> Self;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            const ONE: $t = 1;
            const MIN: $t = <$t>::MIN;
            const MAX: $t = <$t>::MAX;
            fn wadd(self, o: $t) -> $t { self.wrapping_add(o) }
            fn wsub(self, o: $t) -> $t { self.wrapping_sub(o) }
            fn and(self, o: $t) -> $t { self & o }
            fn or(self, o: $t) -> $t { self | o }
            fn xor(self, o: $t) -> $t { self ^ o }
            fn random(r: &mut StdRng) -> $t { r.random() }
        }
    )*};
}
int!(u32, i32, u64, i64);

fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

/// Every thread applies every integer operation to the same 18 words (see the kernel's
/// slot list); the totals, extrema, bit patterns, tickets and swap chain are checked.
fn int_case<T: Int>(kernel: &str, salt: u64) -> TestResult {
    let mut r = rng(salt);
    for &n in SIZES {
        let inputs: [(&str, Vec<T>); 4] = [
            ("random", (0..n).map(|_| T::random(&mut r)).collect()),
            ("all MAX", vec![T::MAX; n]),
            (
                "MIN/MAX alternating",
                (0..n)
                    .map(|i| if i % 2 == 0 { T::MIN } else { T::MAX })
                    .collect(),
            ),
            (
                "one odd value",
                (0..n)
                    .map(|i| {
                        if i == n / 2 {
                            T::random(&mut r)
                        } else {
                            T::ONE
                        }
                    })
                    .collect(),
            ),
        ];
        for (what, x) in &inputs {
            let init: Vec<T> = (0..18).map(|_| T::random(&mut r)).collect();
            let (dx, dacc) = (up(x)?, up(&init)?);
            let poison = T::random(&mut r);
            let (dt, dold) = (up(&vec![poison; n])?, up(&vec![poison; n])?);
            launch_1d(
                kernel,
                &[dx.arg(), dacc.arg(), dt.arg(), dold.arg(), scalar(T::ONE)],
                n,
                256,
            )?;
            let (acc, tickets, olds) = (down(&dacc)?, down(&dt)?, down(&dold)?);
            let fold = |f: fn(T, T) -> T, a: T| x.iter().fold(a, |s, &v| f(s, v));
            let sum = |a: T| fold(T::wadd, a);
            let want: [(usize, T); 16] = [
                (0, (0..n).fold(init[0], |s, _| s.wadd(T::ONE))),
                (1, sum(init[1])),
                (2, fold(T::wsub, init[2])),
                (3, fold(T::wsub, init[3])),
                (4, fold(Ord::min, init[4])),
                (5, fold(Ord::max, init[5])),
                (6, fold(Ord::min, init[6])),
                (7, fold(Ord::max, init[7])),
                (8, fold(T::and, init[8])),
                (9, fold(T::or, init[9])),
                (10, fold(T::xor, init[10])),
                (11, fold(T::and, init[11])),
                (12, fold(T::or, init[12])),
                (13, fold(T::xor, init[13])),
                (
                    14,
                    x[..n.min(CAS_THREADS)]
                        .iter()
                        .fold(init[14], |s, &v| s.wadd(v)),
                ),
                (16, sum(init[16])),
            ];
            for (slot, w) in want {
                ensure(acc[slot] == w, || {
                    format!(
                        "{kernel} n={n} {what}: slot {slot} = {:?}, want {w:?}",
                        acc[slot]
                    )
                })?;
            }
            ensure(acc[17] == sum(init[17]), || {
                format!("{kernel} n={n} {what}: free-function red_add")
            })?;
            // Tickets: fetch_add(1) hands out init, init+1, …, each exactly once.
            let expect: Vec<T> = std::iter::successors(Some(init[0]), |t| Some(t.wadd(T::ONE)))
                .take(n)
                .collect();
            ensure(sorted(&tickets) == sorted(&expect), || {
                format!("{kernel} n={n} {what}: tickets are not a permutation")
            })?;
            // Swap chain: the old values and the final value are the initial value and the
            // inputs, as multisets.
            let mut got: Vec<T> = olds.clone();
            got.push(acc[15]);
            let mut want: Vec<T> = x.clone();
            want.push(init[15]);
            ensure(sorted(&got) == sorted(&want), || {
                format!("{kernel} n={n} {what}: swap chain lost or duplicated a value")
            })?;
        }
    }
    Ok(())
}

/// The float element types.
pub trait Float: Element + Default + PartialOrd + Debug + Into<Scalar> {
    const EPS: f64;
    fn to_f64(self) -> f64;
    fn from_f64(x: f64) -> Self;
    fn bits(self) -> u64;
    fn is_nan(self) -> bool;
}

macro_rules! float {
    ($($t:ty),*) => {$(
        impl Float for $t {
            const EPS: f64 = <$t>::EPSILON as f64;
            fn to_f64(self) -> f64 { self as f64 }
            fn from_f64(x: f64) -> $t { x as $t }
            fn bits(self) -> u64 { self.to_bits() as u64 }
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
        }
    )*};
}
float!(f32, f64);

/// NaN-ignoring extremum of the kernel's CAS-loop min/max.
fn extremum<T: Float>(init: T, x: &[T], less: bool) -> T {
    x.iter().fold(init, |cur, &v| {
        let better = if less { v < cur } else { v > cur };
        if better || cur.is_nan() {
            v
        } else {
            cur
        }
    })
}

/// Float atomics (see the kernel's slots). Sums: exact for inputs whose partial sums are all
/// representable, else within `n · ε · (Σ|x| + |init|)` of the exactly rounded sum.
fn float_case<T: Float>(kernel: &str, salt: u64) -> TestResult {
    let mut r = rng(salt);
    // Small integers (f32: partial sums below 2^24) or multiples of 2^-10 (f64): exact.
    let exact = |r: &mut StdRng| {
        if T::EPS > 1e-10 {
            T::from_f64(r.random_range(-8i32..=8) as f64)
        } else {
            T::from_f64(r.random_range(-1000i32..=1000) as f64 / 1024.0)
        }
    };
    for &n in SIZES {
        let sets: [(&str, Vec<T>, bool); 3] = [
            ("exact", (0..n).map(|_| exact(&mut r)).collect(), true),
            (
                "random",
                (0..n)
                    .map(|_| T::from_f64(r.random_range(-1.0..1.0)))
                    .collect(),
                false,
            ),
            (
                "NaN-sprinkled",
                (0..n)
                    .map(|i| {
                        if i % 17 == 3 {
                            T::from_f64(f64::NAN)
                        } else {
                            exact(&mut r)
                        }
                    })
                    .collect(),
                false,
            ),
        ];
        for (what, x, is_exact) in &sets {
            let init: Vec<T> = (0..10).map(|_| exact(&mut r)).collect();
            let (dx, dacc) = (up(x)?, up(&init)?);
            let dold = up(&vec![T::from_f64(-7.25e30); n])?;
            launch_1d(kernel, &[dx.arg(), dacc.arg(), dold.arg()], n, 256)?;
            let (acc, olds) = (down(&dacc)?, down(&dold)?);
            let has_nan = x.iter().any(|v| v.is_nan());
            let abs: f64 = x.iter().map(|v| v.to_f64().abs()).sum();
            for (slot, sign) in [(0usize, 1.0), (1, 1.0), (2, -1.0), (8, 1.0), (9, 1.0)] {
                let g = acc[slot];
                if has_nan {
                    ensure(g.is_nan(), || {
                        format!("{kernel} n={n} {what}: slot {slot} = {g:?}, want NaN")
                    })?;
                    continue;
                }
                // Slot 8 is the compare-exchange loop of the first CAS_THREADS elements.
                let part = if slot == 8 {
                    &x[..n.min(CAS_THREADS)]
                } else {
                    &x[..]
                };
                let exact_sum = part
                    .iter()
                    .fold(init[slot].to_f64(), |s, v| s + sign * v.to_f64());
                let bound = if *is_exact {
                    0.0
                } else {
                    n as f64 * T::EPS * (abs + init[slot].to_f64().abs())
                };
                ensure((g.to_f64() - exact_sum).abs() <= bound, || {
                    format!(
                        "{kernel} n={n} {what}: slot {slot} = {g:?}, want {exact_sum} ± {bound}"
                    )
                })?;
            }
            for (slot, less) in [(3usize, true), (4, false), (5, true), (6, false)] {
                let w = extremum(init[slot], x, less);
                ensure(acc[slot] == w, || {
                    format!(
                        "{kernel} n={n} {what}: slot {slot} = {:?}, want {w:?}",
                        acc[slot]
                    )
                })?;
            }
            let mut got: Vec<u64> = olds.iter().map(|v| v.bits()).collect();
            got.push(acc[7].bits());
            let mut want: Vec<u64> = x.iter().map(|v| v.bits()).collect();
            want.push(init[7].bits());
            ensure(sorted(&got) == sorted(&want), || {
                format!("{kernel} n={n} {what}: swap chain")
            })?;
        }
    }
    Ok(())
}

fn f16_bits(x: f32) -> u16 {
    half::f16::from_f32(x).to_bits()
}

fn bf16_bits(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}

fn pair(lo: u16, hi: u16) -> u32 {
    lo as u32 | (hi as u32) << 16
}

/// Packed and scalar half atomic adds from 4096 threads (2048 and 256 of them add, so every
/// partial sum is exact).
fn test_half_atomics() -> TestResult {
    let acc = up(&[0u32; 5])?;
    let h = up(&[0u16; 2])?;
    let hd = crate::as_dtype(&h, DType::F16)?;
    launch_1d(
        "half_atomics",
        &[scalar(4096u32), acc.arg(), ferrocuda::Arg::Array(&hd)],
        4096,
        128,
    )?;
    let (got, goth) = (down(&acc)?, down(&h)?);
    let want = [
        pair(f16_bits(2048.0), f16_bits(1024.0)),
        pair(f16_bits(2048.0), f16_bits(-1024.0)),
        pair(bf16_bits(256.0), bf16_bits(64.0)),
        pair(bf16_bits(-256.0), bf16_bits(128.0)),
        pair(bf16_bits(256.0), bf16_bits(-128.0)),
    ];
    for k in 0..5 {
        ensure(got[k] == want[k], || {
            format!("word {k}: {:#010x}, want {:#010x}", got[k], want[k])
        })?;
    }
    ensure(goth == [f16_bits(2048.0), f16_bits(-512.0)], || {
        format!("f16 scalars: {goth:x?}")
    })
}

/// Block-scope atomics on shared memory, per block, for every block shape.
fn test_shared_atomics() -> TestResult {
    let mut r = rng(17);
    for &b in BLOCKS {
        let n = (b[0] * b[1] * b[2]) as usize;
        let blocks = 3;
        for small in [false, true] {
            let x: Vec<u32> = (0..n * blocks)
                .map(|_| {
                    if small {
                        r.random_range(0..4)
                    } else {
                        r.random()
                    }
                })
                .collect();
            let dx = up(&x)?;
            let dout = up(&vec![0xDEAD_BEEFu32; 8 * blocks])?;
            launch(
                "shared_atomics",
                &[dx.arg(), dout.arg()],
                [blocks as u32, 1, 1],
                b,
                32,
            )?;
            let out = down(&dout)?;
            for blk in 0..blocks {
                let v = &x[blk * n..(blk + 1) * n];
                let sum = v.iter().fold(0u32, |s, &a| s.wrapping_add(a));
                let want = [
                    sum,
                    sum,
                    *v.iter().min().unwrap(),
                    *v.iter().max().unwrap(),
                    v.iter().fold(u32::MAX, |s, &a| s & a),
                    v.iter().fold(0, |s, &a| s | a),
                    v.iter().fold(0, |s, &a| s ^ a),
                    n as u32,
                ];
                ensure(out[8 * blk..8 * blk + 8] == want, || {
                    format!(
                        "block {b:?} #{blk}: {:x?}, want {want:x?}",
                        &out[8 * blk..8 * blk + 8]
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// Release/acquire and fence-based publication between two blocks, 50 times.
fn test_message_passing() -> TestResult {
    for round in 0..50 {
        let data = up(&[0u32; 64])?;
        let flags = up(&[0u32; 2])?;
        let result = up(&[7u32; 64])?;
        launch(
            "message_passing",
            &[data.arg(), flags.arg(), result.arg(), scalar(10_000_000u32)],
            [2, 1, 1],
            [32, 1, 1],
            0,
        )?;
        let got = down(&result)?;
        for t in 0..32 {
            ensure(
                got[t] == 1000 + t as u32 && got[32 + t] == 2000 + t as u32,
                || {
                    format!(
                        "round {round}: consumer read {:?} / {:?}",
                        &got[..32],
                        &got[32..]
                    )
                },
            )?;
        }
    }
    Ok(())
}

fn test_fences() -> TestResult {
    let out = up(&[0u32])?;
    launch_1d("fences", &[out.arg()], 4096, 256)?;
    ensure(down(&out)? == [1], || "fences kernel did not finish".into())
}

/// `sync_threads_count/and/or` per block for all-false, all-true, one-true and random
/// predicates, every block shape.
fn test_barrier_counts() -> TestResult {
    let mut r = rng(18);
    for &b in BLOCKS {
        let n = (b[0] * b[1] * b[2]) as usize;
        let blocks = 4;
        let total = n * blocks;
        let one = r.random_range(0..total);
        let sets: [Vec<u32>; 4] = [
            vec![0; total],
            vec![1; total],
            (0..total).map(|i| (i == one) as u32).collect(),
            (0..total).map(|_| r.random_range(0..3)).collect(),
        ];
        for x in &sets {
            let dx = up(x)?;
            let dout = up(&vec![u32::MAX; 3 * total])?;
            launch(
                "barrier_counts",
                &[dx.arg(), dout.arg()],
                [blocks as u32, 1, 1],
                b,
                0,
            )?;
            let out = down(&dout)?;
            for blk in 0..blocks {
                let v = &x[blk * n..(blk + 1) * n];
                let count = v.iter().filter(|&&a| a != 0).count() as u32;
                let want = [count, (count as usize == n) as u32, (count > 0) as u32];
                for t in blk * n..(blk + 1) * n {
                    ensure(out[3 * t..3 * t + 3] == want, || {
                        format!(
                            "block {b:?} thread {t}: {:?}, want {want:?}",
                            &out[3 * t..3 * t + 3]
                        )
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// `sync_warps`: four groups of 64 threads per block, each with its own barrier, exchange
/// values through shared memory for 50 rounds; every read sees the value its group wrote
/// before the barrier (run under racecheck and synccheck by the sanitizer suite).
fn test_group_barriers() -> TestResult {
    let blocks = 132;
    let out = up(&vec![u32::MAX; blocks * 256])?;
    launch(
        "group_barriers",
        &[out.arg(), scalar(50u32)],
        [blocks as u32, 1, 1],
        [256, 1, 1],
        0,
    )?;
    let got = down(&out)?;
    let bad = got.iter().filter(|&&b| b != 0).count();
    ensure(bad == 0, || {
        format!("{bad} threads read stale values; first: {:?}", &got[..8])
    })
}

/// The cycle counter and the global timer advance across a 2 µs `nanosleep`.
fn test_clocks() -> TestResult {
    let threads = 256;
    let out = up(&vec![0u64; 4 * threads])?;
    launch_1d("clocks", &[out.arg(), scalar(2000u32)], threads, 128)?;
    let v = down(&out)?;
    for t in 0..threads {
        let (c0, c1, t0, t1) = (v[4 * t], v[4 * t + 1], v[4 * t + 2], v[4 * t + 3]);
        ensure(
            c1 > c0 && t1 >= t0 && t0 > 0 && t1 - t0 < 1_000_000_000,
            || format!("thread {t}: clock64 {c0} -> {c1}, globaltimer {t0} -> {t1}"),
        )?;
    }
    Ok(())
}
