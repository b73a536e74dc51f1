//! The race tests (a module of `tests/gpu.rs`): a producer fills `a` on its own non-blocking
//! stream behind a slow kernel and overwrites it right after ferrocuda's launch on another
//! stream; [`Race`] is their set of streams and arrays (also used by the bound-launch tests).

use super::{ensure, err, opts, GpuTest, TestResult, DEV};
use ferrocuda::host::driver::Stream;
use ferrocuda::{kernels, DeviceArray, LaunchOptions, SyncMode};
use libtest_mimic::Failed;

/// The arrays of a race between two non-blocking streams: `a` and `b` (all ones) on the
/// producer stream, `out` on the consumer stream, `n` elements each.
pub struct Race {
    pub n: usize,
    pub producer: Stream,
    pub consumer: Stream,
    pub a: DeviceArray<f32>,
    pub b: DeviceArray<f32>,
    pub out: DeviceArray<f32>,
}

impl Race {
    pub fn new(n: usize) -> Result<Race, Failed> {
        let producer = Stream::new(DEV, true).map_err(err)?;
        let consumer = Stream::new(DEV, true).map_err(err)?;
        let a = DeviceArray::<f32>::empty(&[n], DEV, producer.as_ref()).map_err(err)?;
        let b = DeviceArray::<f32>::empty(&[n], DEV, producer.as_ref()).map_err(err)?;
        let out = DeviceArray::<f32>::empty(&[n], DEV, consumer.as_ref()).map_err(err)?;
        b.copy_from_host(&vec![1.0; n]).map_err(err)?;
        Ok(Race {
            n,
            producer,
            consumer,
            a,
            b,
            out,
        })
    }

    /// Launch options on stream `s` in mode `sync`.
    pub fn on(s: &Stream, sync: SyncMode) -> LaunchOptions {
        LaunchOptions {
            stream: Some(s.as_ref()),
            sync: Some(sync),
            ..opts()
        }
    }
}

/// The race test: a producer fills `a` on its own stream behind a slow kernel; ferrocuda then
/// launches on another stream. Default and event modes must see the producer's values in
/// 100 of 100 trials; with sync off the race must be observable.
fn race_trials(mode: SyncMode, trials: usize) -> Result<usize, Failed> {
    let Race {
        n,
        producer,
        consumer,
        a,
        b,
        out,
    } = Race::new(1 << 16)?;
    let mut stale = 0;
    let on = Race::on;
    for t in 0..trials {
        a.copy_from_host(&vec![0.0; n]).map_err(err)?;
        out.copy_from_host(&vec![-1.0; n]).map_err(err)?;
        // The producer: ~1 ms of spinning, then a = 7 (on the producer stream only).
        kernels::fill_slow(&a, 7.0, 400_000, &on(&producer, SyncMode::Off)).map_err(err)?;
        // The consumer: out = a + b on the consumer stream.
        let launched = kernels::add_f32(&a, &b, &out, &on(&consumer, mode)).map_err(err)?;
        ensure(launched.plan.launch_stream() == consumer.as_ref(), || {
            "launch stream".into()
        })?;
        // The producer then overwrites `a` right away: without the "after" half of the plan
        // this would race with the consumer's kernel.
        kernels::fill_slow(&a, 9.0, 0, &on(&producer, SyncMode::Off)).map_err(err)?;
        consumer.synchronize().map_err(err)?;
        producer.synchronize().map_err(err)?;
        let got = out.to_ndarray().map_err(err)?;
        let ok = got.iter().all(|&x| x == 8.0);
        if !ok {
            stale += 1;
            if mode != SyncMode::Off {
                let bad = got.iter().position(|&x| x != 8.0).unwrap();
                return Err(
                    format!("{mode:?}: trial {t}: out[{bad}] = {} (want 8)", got[bad]).into(),
                );
            }
        }
    }
    Ok(stale)
}

fn test_race_default() -> TestResult {
    ensure(race_trials(SyncMode::Default, 100)? == 0, || {
        "stale reads".into()
    })
}

pub const RACE_DEFAULT: GpuTest = GpuTest::new("race_default", test_race_default);

fn test_race_event() -> TestResult {
    ensure(race_trials(SyncMode::Event, 100)? == 0, || {
        "stale reads".into()
    })
}

pub const RACE_EVENT: GpuTest = GpuTest::new("race_event", test_race_event);

fn test_race_off_observed() -> TestResult {
    let stale = race_trials(SyncMode::Off, 20)?;
    eprintln!("  sync off: {stale}/20 trials read stale or overwritten data");
    ensure(stale > 0, || {
        "with sync off the race was never observed: the race test has no teeth".into()
    })
}

pub const RACE_OFF_OBSERVED: GpuTest = GpuTest::new("race_off_observed", test_race_off_observed);
