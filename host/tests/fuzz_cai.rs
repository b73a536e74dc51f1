//! Structured fuzzing of the array-interface validation and extent logic.
//!
//! Generates adversarial interfaces — wrong and huge numbers, negative extents and strides,
//! overflowing shape × stride products, odd pointers, garbage type strings, every
//! `Missing`/`None`/value combination of every key — and checks that validation never panics
//! and that whatever it accepts is internally consistent: the element count is the product of
//! the shape, the byte range covers exactly the addresses the indexer can produce, pointers are
//! aligned, read-only flags survive.
//!
//! The case count comes from `FERROCUDA_FUZZ_CASES` (default 20 000, a few seconds; CI runs the
//! default). A long run: `FERROCUDA_FUZZ_CASES=10000000 cargo test --release -p
//! ferrocuda-host --test fuzz_cai`.

use ferrocuda_host::interop::cai::{validate, Protocol, RawInterface, RawValue, MAX_NDIM};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn int() -> impl Strategy<Value = i128> {
    prop_oneof![
        4 => 0i128..8,
        2 => -4i128..0,
        2 => prop::sample::select(vec![
            16i128, 64, 1 << 20, 1 << 31, (1 << 31) - 1, 1 << 32, 1 << 62, i64::MAX as i128,
            i64::MIN as i128, u64::MAX as i128, (u64::MAX as i128) + 1, i128::MAX, i128::MIN,
            isize::MAX as i128, (isize::MAX as i128) + 1,
        ]),
        1 => any::<i128>(),
        1 => any::<i64>().prop_map(i128::from),
    ]
}

fn extent() -> impl Strategy<Value = i128> {
    prop_oneof![16 => 0i128..6, 1 => int()]
}

fn stride() -> impl Strategy<Value = i128> {
    prop_oneof![
        16 => prop::sample::select(vec![0i128, 1, 2, 4, 8, 16, 24, -4, -8, -16, 3, 12, 48]),
        1 => int(),
    ]
}

fn pointer() -> impl Strategy<Value = i128> {
    prop_oneof![
        12 => (1i128..1 << 20).prop_map(|p| p * 256),
        1 => Just(0i128),
        1 => 1i128..64,
        1 => int(),
        1 => Just(u64::MAX as i128 - 7),
    ]
}

fn typestr() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => prop::sample::select(vec![
            "<f4", "<f8", "<f2", "<i4", "<i8", "|i1", "|u1", "|b1", "<u2", "<c8", "<c16",
        ]).prop_map(String::from),
        3 => prop::sample::select(vec![
            "<f4", "<f8", "<f2", "<i4", "<i8", "|i1", "|u1", "|b1", "<u2", "<c8", "<c16", "=f4",
            ">f4", "|f4", ">i1", "<i3", "<f16", "<V8", "|O8", "<M8", "S5", "", "<", "<f", "f4",
            "<f4x", "<f-4", "<f99999999999999999999",
        ]).prop_map(String::from),
        1 => ".{0,6}",
    ]
}

fn raw<T: Clone + std::fmt::Debug>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = RawValue<T>> {
    prop_oneof![1 => Just(RawValue::Missing), 1 => Just(RawValue::None), 30 => s.prop_map(RawValue::Value)]
}

fn optional<T: Clone + std::fmt::Debug>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = RawValue<T>> {
    prop_oneof![4 => Just(RawValue::Missing), 2 => Just(RawValue::None), 3 => s.prop_map(RawValue::Value)]
}

/// An owned interface; borrowed as a `RawInterface` for validation.
#[derive(Clone, Debug)]
struct Owned {
    sycl: bool,
    version: RawValue<i128>,
    shape: RawValue<Vec<i128>>,
    typestr: RawValue<String>,
    data: RawValue<(i128, bool)>,
    strides: RawValue<Vec<i128>>,
    descr: RawValue<Vec<(String, String)>>,
    mask: RawValue<()>,
    stream: RawValue<i128>,
    offset: RawValue<i128>,
}

fn owned() -> impl Strategy<Value = Owned> {
    (0usize..6, prop::bool::weighted(0.1)).prop_flat_map(|(ndim, sycl)| {
        let shape = prop_oneof![
            20 => prop::collection::vec(extent(), ndim),
            1 => prop::collection::vec(extent(), 0..MAX_NDIM + 4),
        ];
        let strides = prop_oneof![
            20 => prop::collection::vec(stride(), ndim),
            1 => prop::collection::vec(stride(), 0..8),
        ];
        (
            Just(sycl),
            raw(prop_oneof![12 => 0i128..4, 1 => int()]),
            raw(shape),
            raw(typestr()),
            raw((pointer(), any::<bool>())),
            optional(strides),
            optional(prop::collection::vec((prop_oneof![4 => Just(String::new()), 1 => "[a-z]{1,3}"], typestr()), 0..3)),
            prop_oneof![12 => Just(RawValue::Missing), 4 => Just(RawValue::None), 1 => Just(RawValue::Value(()))],
            optional(prop_oneof![8 => 1i128..4, 1 => Just(0i128), 2 => int()]),
            optional(prop_oneof![8 => 0i128..4, 1 => int()]),
        )
            .prop_map(|(sycl, version, shape, typestr, data, strides, descr, mask, stream, offset)| Owned {
                sycl,
                version,
                shape,
                typestr,
                data,
                strides,
                descr,
                mask,
                stream,
                offset,
            })
    })
}

fn borrow<T, U: ?Sized>(v: &RawValue<T>, f: impl FnOnce(&T) -> &U) -> RawValue<&U> {
    match v {
        RawValue::Missing => RawValue::Missing,
        RawValue::None => RawValue::None,
        RawValue::Value(x) => RawValue::Value(f(x)),
    }
}

static ACCEPTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn check(o: &Owned) -> Result<(), TestCaseError> {
    let descr_pairs: Option<Vec<(&str, &str)>> = match &o.descr {
        RawValue::Value(v) => Some(v.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()),
        _ => None,
    };
    let raw = RawInterface {
        protocol: if o.sycl {
            Protocol::SyclUsm
        } else {
            Protocol::Cuda
        },
        version: o.version,
        shape: borrow(&o.shape, |v| v.as_slice()),
        typestr: borrow(&o.typestr, |s| s.as_str()),
        data: o.data,
        strides: borrow(&o.strides, |v| v.as_slice()),
        descr: match (&o.descr, &descr_pairs) {
            (RawValue::Value(_), Some(p)) => RawValue::Value(p.as_slice()),
            (RawValue::None, _) => RawValue::None,
            _ => RawValue::Missing,
        },
        mask: o.mask,
        stream: o.stream,
        offset: o.offset,
    };
    let Ok(d) = validate(&raw) else {
        // Refusals must carry a key and a message; the Display form names the key.
        let e = validate(&raw).unwrap_err();
        prop_assert!(!e.message().is_empty());
        if let Some(k) = e.key() {
            prop_assert!(e.to_string().contains(k), "{e}");
        }
        return Ok(());
    };
    ACCEPTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Accepted: check consistency against an independent computation.
    let item = d.dtype().itemsize() as i128;
    let shape: Vec<i128> = d.shape().iter().map(|&s| s as i128).collect();
    let size: i128 = shape.iter().product();
    prop_assert_eq!(size, d.size() as i128);
    prop_assert_eq!(d.ndim(), shape.len());
    prop_assert!(d.ndim() <= MAX_NDIM);
    if let RawValue::Value((_, ro)) = o.data {
        prop_assert_eq!(d.readonly(), ro);
    }
    prop_assert!(
        !matches!(o.mask, RawValue::Value(())),
        "a mask was accepted"
    );
    if !o.sycl {
        prop_assert!(
            !matches!(o.stream, RawValue::Value(0)),
            "stream 0 was accepted"
        );
    }
    match d.byte_range() {
        None => prop_assert_eq!(size, 0),
        Some((lo, hi)) => {
            prop_assert!(size > 0);
            let ptr = d.ptr() as i128;
            prop_assert!(ptr != 0, "null pointer accepted for a non-empty array");
            prop_assert_eq!(ptr % item, 0, "misaligned pointer accepted");
            // Independent extent: min/max over the corners of the index box.
            let (mut mn, mut mx) = (0i128, 0i128);
            for (&n, &s) in shape.iter().zip(d.byte_strides()) {
                let span = (n - 1) * s as i128;
                if span < 0 {
                    mn += span
                } else {
                    mx += span
                }
            }
            prop_assert_eq!(lo as i128, ptr + mn);
            prop_assert_eq!(hi as i128, ptr + mx + item);
            prop_assert!(hi as i128 <= u64::MAX as i128);
            // The indexer's offsets stay inside the byte range (ranks 1..=3 here).
            let corners =
                |offs: &mut dyn FnMut(&[usize]) -> Option<isize>| -> Result<(), TestCaseError> {
                    let n = shape.len();
                    for mask in 0..(1u32 << n) {
                        let idx: Vec<usize> = (0..n)
                            .map(|k| {
                                if mask >> k & 1 == 1 {
                                    shape[k] as usize - 1
                                } else {
                                    0
                                }
                            })
                            .collect();
                        if let Some(off) = offs(&idx) {
                            let addr = ptr + off as i128 * item;
                            prop_assert!(
                                addr >= lo as i128 && addr + item <= hi as i128,
                                "offset outside range"
                            );
                        }
                    }
                    Ok(())
                };
            match d.ndim() {
                1 => {
                    if let Ok(ix) = d.indexer::<1>() {
                        corners(&mut |i| ix.get_offset([i[0]]))?
                    }
                }
                2 => {
                    if let Ok(ix) = d.indexer::<2>() {
                        corners(&mut |i| ix.get_offset([i[0], i[1]]))?
                    }
                }
                3 => {
                    if let Ok(ix) = d.indexer::<3>() {
                        corners(&mut |i| ix.get_offset([i[0], i[1], i[2]]))?
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[test]
fn validation_never_panics_and_accepts_only_consistent_interfaces() {
    let cases: u32 = ferrocuda_config::FUZZ_CASES
        .count()
        .unwrap_or_else(|e| panic!("{e}"))
        .map_or(20_000, |n| {
            u32::try_from(n).expect("FERROCUDA_FUZZ_CASES fits in u32")
        });
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let start = std::time::Instant::now();
    let result = runner.run(&owned(), |o| check(&o));
    let accepted = ACCEPTED.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "fuzz_cai: {cases} cases in {:.1}s, {accepted} accepted",
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // The generator must reach the acceptance paths, or the consistency checks test nothing.
    assert!(
        accepted as f64 > 0.02 * cases as f64,
        "only {accepted} of {cases} cases were valid"
    );
}
