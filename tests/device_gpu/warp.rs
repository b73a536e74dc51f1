//! Warp primitives lane by lane, with full and partial member masks.

use crate::{down, ensure, launch, rng, scalar, up, TestResult};
use ferrocuda::abi::Element;
use rand::rngs::StdRng;
use rand::RngExt;

pub const TESTS: &[crate::Test] = &[
    ("warp_u32", test_warp_u32),
    ("warp_shuffles_i32", || {
        shuffle_case::<i32>("shuffles_i32", 21)
    }),
    ("warp_shuffles_u32", || {
        shuffle_case::<u32>("shuffles_u32", 22)
    }),
    ("warp_shuffles_f32", || {
        shuffle_case::<f32>("shuffles_f32", 23)
    }),
    ("warp_shuffles_i64", || {
        shuffle_case::<i64>("shuffles_i64", 24)
    }),
    ("warp_shuffles_u64", || {
        shuffle_case::<u64>("shuffles_u64", 25)
    }),
    ("warp_shuffles_f64", || {
        shuffle_case::<f64>("shuffles_f64", 26)
    }),
];

/// Member masks: full, halves, alternating, two ends, one lane, and random ones. Block
/// shapes: whole warps, and 48 threads (a second warp of 16 lanes, for masks within 0xFFFF).
fn masks(r: &mut StdRng) -> Vec<(u32, u32)> {
    let mut m = vec![
        (u32::MAX, 128),
        (0x0000_FFFF, 128),
        (0xFFFF_0000, 64),
        (0xAAAA_AAAA, 96),
        (0x8000_0001, 32),
        (0x0000_0100, 64),
        (0x0000_FFFF, 48),
        (0x0000_0F0F, 48),
    ];
    for _ in 0..4 {
        m.push((r.random::<u32>() | 1, 128));
    }
    m
}

/// The lane a shuffle reads, if PTX defines its value for this mask: `None` when the source
/// lane is outside the mask (unspecified value).
fn source(lane: u32, kind: usize, k: u32, mask: u32) -> Option<u32> {
    let src = match kind {
        0 => (lane + k) % 32,
        1 => lane.checked_sub(k).unwrap_or(lane),
        2 => {
            if lane + k < 32 {
                lane + k
            } else {
                lane
            }
        }
        _ => lane ^ (k % 32),
    };
    (mask >> src & 1 == 1).then_some(src)
}

const RECORD: usize = 20;

fn test_warp_u32() -> TestResult {
    let mut r = rng(20);
    for (mask, block) in masks(&mut r) {
        for (s, d) in [(0u32, 1u32), (5, 2), (31, 16), (17, 7)] {
            let blocks = 3usize;
            let n = blocks * block as usize;
            // Warps alternate between random values and values whose top bits agree (so
            // match_all finds equality) and small values (so any/all/match see repeats).
            let x: Vec<u32> = (0..n)
                .map(|i| match (i / 32) % 3 {
                    0 => r.random(),
                    1 => r.random_range(0..1u32 << 30),
                    _ => r.random_range(0..10),
                })
                .collect();
            let (dx, dout) = (up(&x)?, up(&vec![0xDEAD_BEEFu32; RECORD * n])?);
            launch(
                "warp_u32",
                &[dx.arg(), dout.arg(), scalar(mask), scalar(s), scalar(d)],
                [blocks as u32, 1, 1],
                [block, 1, 1],
                0,
            )?;
            let out = down(&dout)?;
            for i in 0..n {
                let (lane, base) = (
                    (i % block as usize % 32) as u32,
                    i - i % block as usize % 32,
                );
                let lanes = (block as usize - (base % block as usize)).min(32) as u32;
                let m = mask
                    & if lanes >= 32 {
                        u32::MAX
                    } else {
                        (1 << lanes) - 1
                    };
                let got = &out[RECORD * i..RECORD * (i + 1)];
                if mask >> lane & 1 == 0 {
                    ensure(got.iter().all(|&w| w == 0xDEAD_BEEF), || {
                        format!("lane {lane} outside mask wrote")
                    })?;
                    continue;
                }
                ensure(m == mask, || {
                    format!("test bug: mask {mask:#x} names absent lanes")
                })?;
                let ctx = || {
                    format!("mask {mask:#010x} block {block} s={s} d={d} thread {i} lane {lane}")
                };
                let members: Vec<u32> = (0..32)
                    .filter(|l| mask >> l & 1 == 1)
                    .map(|l| x[base + l as usize])
                    .collect();
                let each = |p: &dyn Fn(u32) -> bool| {
                    (0..32u32)
                        .filter(|&l| mask >> l & 1 == 1 && p(x[base + l as usize]))
                        .fold(0u32, |b, l| b | 1 << l)
                };
                for (kind, k) in [(0usize, s), (1, d), (2, d), (3, d)] {
                    if let Some(src) = source(lane, kind, k, mask) {
                        ensure(got[kind] == x[base + src as usize], || {
                            format!("{}: shuffle {kind} got {:#x}", ctx(), got[kind])
                        })?;
                    }
                }
                let v = x[i];
                let want: [(usize, u32); 15] = [
                    (4, each(&|a| a & 1 == 1)),
                    (5, members.iter().any(|a| a % 5 == 0) as u32),
                    (6, members.iter().all(|a| a % 5 != 0) as u32),
                    (7, each(&|a| a % 4 == v % 4)),
                    (
                        8,
                        if members.iter().all(|a| a >> 30 == v >> 30) {
                            mask
                        } else {
                            0
                        },
                    ),
                    (9, mask),
                    (10, members.iter().fold(0u32, |s, &a| s.wrapping_add(a))),
                    (11, *members.iter().min().unwrap()),
                    (12, *members.iter().max().unwrap()),
                    (13, members.iter().fold(u32::MAX, |s, &a| s & a)),
                    (14, members.iter().fold(0, |s, &a| s | a)),
                    (15, members.iter().fold(0, |s, &a| s ^ a)),
                    (16, members.iter().map(|&a| a as i32).min().unwrap() as u32),
                    (17, members.iter().map(|&a| a as i32).max().unwrap() as u32),
                    (18, lane),
                ];
                for (k, w) in want {
                    ensure(got[k] == w, || {
                        format!("{}: record {k} = {:#x}, want {w:#x}", ctx(), got[k])
                    })?;
                }
                ensure(got[19] == 1, || {
                    format!("{}: active mask outside the member mask", ctx())
                })?;
            }
        }
    }
    Ok(())
}

/// Shuffle and match of any 32/64-bit type: compared bit for bit (NaN payloads included).
pub trait Bits: Element + Default {
    fn bits(self) -> u64;
    fn from_bits64(b: u64) -> Self;
}

macro_rules! bits {
    ($($t:ty => $u:ty, |$x:ident| $to:expr, |$b:ident| $from:expr;)*) => {$(
        impl Bits for $t {
            fn bits(self) -> u64 { let $x = self; $to as u64 }
            fn from_bits64($b: u64) -> $t { $from }
        }
    )*};
}
bits! {
    i32 => u32, |x| x as u32, |b| b as i32;
    u32 => u32, |x| x, |b| b as u32;
    f32 => u32, |x| x.to_bits(), |b| f32::from_bits(b as u32);
    i64 => u64, |x| x as u64, |b| b as i64;
    u64 => u64, |x| x, |b| b;
    f64 => u64, |x| x.to_bits(), |b| f64::from_bits(b);
}

fn shuffle_case<T: Bits>(kernel: &str, salt: u64) -> TestResult {
    let mut r = rng(salt);
    let wide = std::mem::size_of::<T>() == 8;
    for (mask, block) in masks(&mut r) {
        for (s, d) in [(0u32, 1u32), (7, 4), (31, 31)] {
            let n = 2 * block as usize;
            // Random bit patterns (NaNs included for floats) drawn from a small pool per
            // warp, so that match_any sees repeats; 64-bit values differ in both halves.
            let pool: Vec<u64> = (0..5)
                .map(|_| {
                    if wide {
                        r.random()
                    } else {
                        r.random::<u32>() as u64
                    }
                })
                .collect();
            let x: Vec<T> = (0..n)
                .map(|_| T::from_bits64(pool[r.random_range(0..5)]))
                .collect();
            let (dx, dout, dm) = (
                up(&x)?,
                up(&vec![T::from_bits64(0x5A5A); 4 * n])?,
                up(&vec![0xDEADu32; n])?,
            );
            launch(
                kernel,
                &[
                    dx.arg(),
                    dout.arg(),
                    dm.arg(),
                    scalar(mask),
                    scalar(s),
                    scalar(d),
                ],
                [2, 1, 1],
                [block, 1, 1],
                0,
            )?;
            let (out, matches) = (down(&dout)?, down(&dm)?);
            for i in 0..n {
                let (lane, base) = (
                    (i % block as usize % 32) as u32,
                    i - i % block as usize % 32,
                );
                if mask >> lane & 1 == 0 {
                    ensure(matches[i] == 0xDEAD, || {
                        format!("{kernel}: lane {lane} outside mask wrote")
                    })?;
                    continue;
                }
                for (kind, k) in [(0usize, s), (1, d), (2, d), (3, d)] {
                    if let Some(src) = source(lane, kind, k, mask) {
                        let (g, w) = (out[4 * i + kind].bits(), x[base + src as usize].bits());
                        ensure(g == w, || {
                            format!("{kernel} mask {mask:#x} s={s} d={d} thread {i}: shuffle {kind} {g:#x}, want {w:#x}")
                        })?;
                    }
                }
                let want = (0..32u32)
                    .filter(|&l| mask >> l & 1 == 1 && x[base + l as usize].bits() == x[i].bits())
                    .fold(0u32, |b, l| b | 1 << l);
                ensure(matches[i] == want, || {
                    format!(
                        "{kernel} mask {mask:#x} thread {i}: match {:#x}, want {want:#x}",
                        matches[i]
                    )
                })?;
            }
        }
    }
    Ok(())
}
