//! Lifetime and soak tests (a module of `tests/gpu.rs`): an owned input dropped while a kernel
//! that reads it is queued on another stream, with its sync-off control; 10^5 launches from 8
//! threads without a wrong result or a leak.

use super::{check_thread_out, ensure, err, opts, upload, GpuTest, TestResult, DEV};
use ferrocuda::host::driver::{self, Stream};
use ferrocuda::{kernels, DeviceArray, LaunchOptions, StreamRef, SyncMode};
use libtest_mimic::Failed;

/// One lifetime trial: an owned input dropped while a kernel that reads it is still queued on
/// another stream (behind a slow kernel), then a new allocation on the input's stream (likely
/// the same memory, from the stream-ordered pool) overwritten at once. Returns the index and
/// value of the first wrong output element, if any.
fn dropped_input_trial(sync: SyncMode) -> Result<Option<(usize, f32)>, Failed> {
    let n = 1 << 16;
    let producer = Stream::new(DEV, true).map_err(err)?;
    let consumer = Stream::new(DEV, true).map_err(err)?;
    let a = DeviceArray::<f32>::empty(&[n], DEV, producer.as_ref()).map_err(err)?;
    let b = DeviceArray::<f32>::empty(&[n], DEV, consumer.as_ref()).map_err(err)?;
    b.copy_from_host(&vec![1.0; n]).map_err(err)?;
    let out = DeviceArray::<f32>::empty(&[n], DEV, consumer.as_ref()).map_err(err)?;
    let spin = DeviceArray::<f32>::empty(&[1], DEV, consumer.as_ref()).map_err(err)?;
    let on = |s: &Stream, sync: SyncMode| LaunchOptions {
        stream: Some(s.as_ref()),
        sync: Some(sync),
        ..opts()
    };
    kernels::fill_slow(&a, 7.0, 0, &on(&producer, SyncMode::Event)).map_err(err)?;
    // The input is ready before the add (so only the free can go wrong), and the consumer
    // stays busy for a while.
    producer.synchronize().map_err(err)?;
    kernels::fill_slow(&spin, 0.0, 400_000, &on(&consumer, SyncMode::Event)).map_err(err)?;
    kernels::add_f32(&a, &b, &out, &on(&consumer, sync)).map_err(err)?;
    drop(a); // freed on the producer stream: behind the add unless sync is off
    let reuse = DeviceArray::<f32>::empty(&[n], DEV, producer.as_ref()).map_err(err)?;
    kernels::fill_slow(&reuse, 100.0, 0, &on(&producer, SyncMode::Event)).map_err(err)?;
    consumer.synchronize().map_err(err)?;
    producer.synchronize().map_err(err)?;
    let got = out.to_ndarray().map_err(err)?;
    Ok(got.iter().position(|&x| x != 8.0).map(|i| (i, got[i])))
}

/// Lifetime: the free of a dropped input is stream-ordered on the array's stream, which waits
/// on the kernel, so memory reused on that stream cannot be overwritten under the kernel.
/// 100 trials in each ordering mode.
fn test_dropped_input_in_flight() -> TestResult {
    for sync in [SyncMode::Event, SyncMode::Default] {
        for trial in 0..100 {
            if let Some((i, v)) = dropped_input_trial(sync)? {
                return Err(format!(
                    "{sync:?} trial {trial}: out[{i}] = {v} (want 8): input freed under the kernel"
                )
                .into());
            }
        }
    }
    Ok(())
}

pub const DROPPED_INPUT_IN_FLIGHT: GpuTest =
    GpuTest::new("dropped_input_in_flight", test_dropped_input_in_flight);

/// The control of `dropped_input_in_flight`: with sync off the producer stream does not wait
/// for the kernel, so the free and the overwrite of the reused memory overtake it — the test
/// above would see it.
fn test_dropped_input_off_observed() -> TestResult {
    let mut wrong = 0;
    for _ in 0..20 {
        if dropped_input_trial(SyncMode::Off)?.is_some() {
            wrong += 1;
        }
    }
    eprintln!("dropped_input_off_observed: {wrong}/20 trials read reused memory");
    ensure(wrong > 0, || {
        "with sync off no trial read the reused memory: the lifetime test cannot fail".into()
    })
}

pub const DROPPED_INPUT_OFF_OBSERVED: GpuTest = GpuTest::new(
    "dropped_input_off_observed",
    test_dropped_input_off_observed,
);

/// Soak: 10^5 launches from 8 threads on 16 streams, shared and distinct arrays; no wrong
/// result, and no leak of events or device memory.
fn test_soak_no_leaks() -> TestResult {
    let n = 1024;
    let ctx_events_before = ferrocuda::host::driver::Context::get(DEV)
        .map_err(err)?
        .pooled_events();
    let shared = upload(&(0..n).map(|i| i as f32).collect::<Vec<_>>())?;
    shared.synchronize().map_err(err)?;
    let (free_before, _) = driver::mem_get_info(DEV).map_err(err)?;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let shared = &shared;
                scope.spawn(move || -> TestResult {
                    let streams = [
                        Stream::new(DEV, true).map_err(err)?,
                        Stream::new(DEV, t % 2 == 0).map_err(err)?,
                    ];
                    let mine =
                        DeviceArray::<f32>::empty(&[n], DEV, streams[0].as_ref()).map_err(err)?;
                    mine.copy_from_host(&vec![t as f32; n]).map_err(err)?;
                    let outs = [
                        DeviceArray::<f32>::empty(&[n], DEV, streams[0].as_ref()).map_err(err)?,
                        DeviceArray::<f32>::empty(&[n], DEV, streams[1].as_ref()).map_err(err)?,
                    ];
                    for i in 0..12_500 {
                        let k = i % 2;
                        let sync = [SyncMode::Default, SyncMode::Event][(i / 2) % 2];
                        let o = LaunchOptions {
                            stream: Some(streams[k].as_ref()),
                            sync: Some(sync),
                            ..opts()
                        };
                        kernels::add_f32(shared, &mine, &outs[k], &o).map_err(err)?;
                    }
                    outs.iter().try_for_each(|out| check_thread_out(out, t))
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().unwrap())
    })?;
    let ctx = ferrocuda::host::driver::Context::get(DEV).map_err(err)?;
    let pooled = ctx.pooled_events();
    // Events are reused: the pool holds at most a few per concurrent launcher.
    ensure(pooled <= ctx_events_before + 64, || {
        format!("{pooled} pooled events after 10^5 launches")
    })?;
    driver::synchronize_on(DEV, StreamRef::Legacy).map_err(err)?;
    let (free_after, _) = driver::mem_get_info(DEV).map_err(err)?;
    // Stream-ordered frees return memory to the pool; allow the pool's slack, not a leak.
    ensure(free_after + (64 << 20) >= free_before, || {
        format!("free memory {free_before} -> {free_after}")
    })?;
    eprintln!("  soak: 100000 launches, {pooled} pooled events, free memory {free_before} -> {free_after}");
    Ok(())
}

pub const SOAK_NO_LEAKS: GpuTest = GpuTest::new("soak_no_leaks", test_soak_no_leaks);
