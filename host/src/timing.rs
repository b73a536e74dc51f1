//! Stage timing of the launch path, for profiling (cargo feature `launch-timing`, off by
//! default: without it `mark!` expands to nothing and this module is absent).
//!
//! A launch calls [`start`] once and [`mark`] after each stage; each mark adds the cycles
//! since the previous one (time-stamp counter, per thread) to its stage's total. [`take`]
//! returns the totals in nanoseconds and resets them. Each mark has a cost of its own (clock
//! reads), which the totals include; the stage profiles in BENCHMARKS.md's launch runs state it.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The stages, in the order a launch passes them (index = the `mark!` argument).
pub const STAGES: [&str; 20] = [
    "py: call entry, options, completed releases",
    "py: describe the arguments",
    "py: select the kernel, scalars",
    "py: release the GIL",
    "rs: check_args",
    "rs: driver init, sync mode",
    "rs: producers, pointer checks",
    "rs: stream plan",
    "rs: context, capture state",
    "rs: module, block, grid",
    "rs: pack parameters",
    "rs: plan before launch",
    "rs: cuLaunchKernel",
    "rs: plan after launch",
    "py: retake the GIL, return",
    // Parts of "py: describe the arguments" (that stage keeps the rest: the loop over the
    // arguments, copies of the descriptors).
    "py:   type checks, kind",
    "py:   fast path: attribute reads",
    "py:   fast path: current stream",
    "py:   fast path: build the descriptor",
    "py:   self-check",
];

static CYCLES: [AtomicU64; STAGES.len()] = [const { AtomicU64::new(0) }; STAGES.len()];
static COUNTS: [AtomicU64; STAGES.len()] = [const { AtomicU64::new(0) }; STAGES.len()];

thread_local! {
    static LAST: Cell<u64> = const { Cell::new(0) };
}

#[inline]
fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC has no preconditions on x86-64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static T0: OnceLock<std::time::Instant> = OnceLock::new();
        T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
}

/// Starts timing a launch on this thread.
#[inline]
pub fn start() {
    LAST.with(|l| l.set(now()));
}

/// Ends stage `stage` (adds the time since the previous mark or [`start`]).
#[inline]
pub fn mark(stage: usize) {
    let t = now();
    let d = LAST.with(|l| t.wrapping_sub(l.replace(t)));
    if let (Some(c), Some(n)) = (CYCLES.get(stage), COUNTS.get(stage)) {
        c.fetch_add(d, Ordering::Relaxed);
        n.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counter ticks per nanosecond (measured over 20 ms, once).
fn ticks_per_ns() -> f64 {
    use std::sync::OnceLock;
    static F: OnceLock<f64> = OnceLock::new();
    *F.get_or_init(|| {
        let (t0, c0) = (std::time::Instant::now(), now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (ns, c) = (
            t0.elapsed().as_nanos() as f64,
            now().wrapping_sub(c0) as f64,
        );
        if ns > 0.0 && c > 0.0 {
            c / ns
        } else {
            1.0
        }
    })
}

/// `(stage, total ns, marks)` per stage since the last call; resets the totals.
pub fn take() -> Vec<(&'static str, f64, u64)> {
    let f = ticks_per_ns();
    STAGES
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let c = CYCLES[i].swap(0, Ordering::Relaxed);
            let n = COUNTS[i].swap(0, Ordering::Relaxed);
            (*name, c as f64 / f, n)
        })
        .collect()
}
