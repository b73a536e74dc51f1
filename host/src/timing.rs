//! Stage timing of the launch path, for profiling (cargo feature `launch-timing`, off by
//! default: without it [`mark!`](crate::mark) expands to nothing and this module is absent).
//!
//! A launch calls `mark!(start)` once and `mark!("stage name")` at the end of each stage: the
//! caller names its stage where it ends it, and each mark adds the cycles since the previous
//! one (time-stamp counter, per thread) to the total of its [`Stage`] — a static of the call
//! site. [`take`] returns the totals in nanoseconds, one row per name in the order the stages
//! were first reached (marks of one name in several places add to one row), and resets them.
//! A stage inside another (its name indented, by convention) is marked before the enclosing
//! one ends, which keeps the rest. Each mark has a cost of its own (clock reads), which the
//! totals include; the stage profiles in BENCHMARKS.md's launch runs state it.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// One named stage: the totals of the marks of one call site of [`mark!`](crate::mark).
pub struct Stage {
    name: &'static str,
    cycles: AtomicU64,
    count: AtomicU64,
    registered: AtomicBool,
}

/// The stages marked so far, in the order they were first reached.
static STAGES: Mutex<Vec<&'static Stage>> = Mutex::new(Vec::new());

thread_local! {
    static LAST: Cell<u64> = const { Cell::new(0) };
}

impl Stage {
    /// A stage named `name` (what [`take`] reports).
    pub const fn new(name: &'static str) -> Stage {
        Stage {
            name,
            cycles: AtomicU64::new(0),
            count: AtomicU64::new(0),
            registered: AtomicBool::new(false),
        }
    }

    /// Ends this stage: adds the time since the previous mark or [`start`] on this thread.
    #[inline]
    pub fn mark(&'static self) {
        let t = now();
        let d = LAST.with(|l| t.wrapping_sub(l.replace(t)));
        self.cycles.fetch_add(d, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        if !self.registered.load(Ordering::Relaxed) {
            self.register();
        }
    }

    #[cold]
    fn register(&'static self) {
        let mut stages = STAGES.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.registered.swap(true, Ordering::Relaxed) {
            stages.push(self);
        }
    }
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

/// `(stage, total ns, marks)` per stage name since the last call, in the order the stages
/// were first reached; resets the totals.
pub fn take() -> Vec<(&'static str, f64, u64)> {
    let f = ticks_per_ns();
    let stages = STAGES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let mut out: Vec<(&'static str, f64, u64)> = Vec::new();
    for s in stages {
        let ns = s.cycles.swap(0, Ordering::Relaxed) as f64 / f;
        let n = s.count.swap(0, Ordering::Relaxed);
        match out.iter_mut().find(|row| row.0 == s.name) {
            Some(row) => {
                row.1 += ns;
                row.2 += n;
            }
            None => out.push((s.name, ns, n)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_reported_by_name_in_first_reached_order() {
        static A: Stage = Stage::new("test: a");
        static B1: Stage = Stage::new("test: b");
        static B2: Stage = Stage::new("test: b");
        start();
        B1.mark();
        A.mark();
        B2.mark();
        B1.mark();
        let rows = take();
        let mine: Vec<_> = rows.iter().filter(|r| r.0.starts_with("test: ")).collect();
        assert_eq!(mine.len(), 2, "{rows:?}");
        assert_eq!((mine[0].0, mine[0].2), ("test: b", 3));
        assert_eq!((mine[1].0, mine[1].2), ("test: a", 1));
        assert!(mine.iter().all(|r| r.1 >= 0.0));
        // Reset: a second report has the rows, with nothing in them.
        let again = take();
        assert!(again
            .iter()
            .filter(|r| r.0.starts_with("test: "))
            .all(|r| r.2 == 0 && r.1 == 0.0));
    }
}
