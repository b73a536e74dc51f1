//! GPU tests of bound launches (`Kernel::bind`, `BoundLaunch::launch`; a module of
//! `tests/gpu.rs`).
//!
//! * `bind_repeated`: `add_f32` bound once on `DeviceArray`s and launched 100 times, the
//!   output poisoned and an input rewritten (same memory) before each launch: every launch
//!   reads the inputs as they are then and writes every element; the plan is trivial (all
//!   arrays on the launch stream); a host array is refused at bind, naming the argument;
//! * `bind_side_stream`: inputs produced on a non-blocking producer stream behind a slow
//!   kernel, the bound launch on a consumer stream, in the default and event modes: each of 20
//!   launches sees the producer's values of its own trial; a bound launch from another thread
//!   works as well.

use super::race::Race;
use super::{ensure, err, opts, rng, upload, GpuTest, TestResult, DEV, L};
use ferrocuda::host::array::HostArray;
use ferrocuda::{bundled, kernels, AsArg, DeviceArray, ErrorKind, SyncMode};
use rand::RngExt;

pub const TESTS: [GpuTest; 2] = [
    GpuTest::new("bind_repeated", test_repeated),
    GpuTest::new("bind_side_stream", test_side_stream),
];

const POISON: f32 = -7.25e30;

fn test_repeated() -> TestResult {
    let mut r = rng(41);
    let n = 4099;
    let b: Vec<f32> = (0..n).map(|_| r.random_range(-1e3..1e3f32)).collect();
    let (da, db) = (upload(&vec![0.0f32; n])?, upload(&b)?);
    let out = DeviceArray::<f32>::empty(&[n], DEV, L).map_err(err)?;
    let k = bundled::module()
        .map_err(err)?
        .kernel("add_f32")
        .map_err(err)?;
    let bound = k
        .bind(&[da.as_arg(), db.as_arg(), out.as_arg()], &opts())
        .map_err(err)?;
    ensure(bound.prepared().plan().is_trivial(), || {
        format!("plan: {:?}", bound.prepared().plan())
    })?;
    for t in 0..100 {
        let a: Vec<f32> = (0..n).map(|_| r.random_range(-1e3..1e3f32)).collect();
        da.copy_from_host(&a).map_err(err)?;
        out.copy_from_host(&vec![POISON; n]).map_err(err)?;
        // SAFETY: bundled kernel; the arrays outlive `bound` (borrowed by it).
        let launched = unsafe { bound.launch() }.map_err(err)?;
        ensure(launched.config == bound.prepared().config(), || {
            "configuration".into()
        })?;
        let got = out.to_ndarray().map_err(err)?;
        for i in 0..n {
            ensure(got[i] == a[i] + b[i], || {
                format!("launch {t}: out[{i}] = {}, want {}", got[i], a[i] + b[i])
            })?;
        }
    }
    let h = ndarray::ArrayD::from_elem(ndarray::IxDyn(&[n]), 1.0f32);
    let hd = h.view().desc().map_err(err)?;
    let e = k
        .bind(
            &[da.as_arg(), ferrocuda::Arg::Host(&hd), out.as_arg()],
            &opts(),
        )
        .err()
        .ok_or_else(|| err("a host array was bound"))?;
    ensure(e.kind() == ErrorKind::Type && e.arg() == Some("b"), || {
        format!("host array at bind: {e}")
    })
}

fn side_stream_trials(mode: SyncMode) -> TestResult {
    let Race {
        n,
        producer,
        consumer,
        a,
        b,
        out,
    } = Race::new(1 << 16)?;
    let on = Race::on;
    let k = bundled::module()
        .map_err(err)?
        .kernel("add_f32")
        .map_err(err)?;
    let bound = k
        .bind(
            &[a.as_arg(), b.as_arg(), out.as_arg()],
            &on(&consumer, mode),
        )
        .map_err(err)?;
    ensure(
        bound.prepared().plan().foreign_streams() == [producer.as_ref()],
        || format!("plan: {:?}", bound.prepared().plan()),
    )?;
    for t in 0..20 {
        out.copy_from_host(&vec![POISON; n]).map_err(err)?;
        let v = t as f32;
        kernels::fill_slow(&a, v, 400_000, &on(&producer, SyncMode::Off)).map_err(err)?;
        let go = || {
            // SAFETY: bundled kernel; the arrays outlive `bound`.
            unsafe { bound.launch() }.map(|_| ())
        };
        if t % 2 == 0 {
            go().map_err(err)?;
        } else {
            std::thread::scope(|s| s.spawn(go).join())
                .map_err(|_| err("launching thread panicked"))?
                .map_err(err)?;
        }
        consumer.synchronize().map_err(err)?;
        let got = out.to_ndarray().map_err(err)?;
        if let Some(i) = got.iter().position(|&x| x != v + 1.0) {
            return Err(err(format!(
                "{mode:?}: trial {t}: out[{i}] = {} (want {})",
                got[i],
                v + 1.0
            )));
        }
    }
    producer.synchronize().map_err(err)
}

fn test_side_stream() -> TestResult {
    side_stream_trials(SyncMode::Default)?;
    side_stream_trials(SyncMode::Event)
}
