//! Stream policy: how a launch is ordered against the streams of the arrays it uses.
//!
//! # The problem
//!
//! An array that arrives through the CUDA Array Interface (CAI) may still be *in flight*: its
//! producer (CuPy, PyTorch, Numba, …) can have enqueued work that writes it on some stream and
//! returned to Python before that work ran. The interface's `stream` key names that stream
//! (`1` = legacy default stream, `2` = per-thread default stream, otherwise a `cudaStream_t`;
//! absent or `None` = "no synchronization needed"). A consumer must order its kernel
//! **after** the producer's pending work, and — the part that is easy to forget — the
//! producer's stream must not **run ahead** of the consumer's kernel: work the producer
//! enqueues *later* (overwrite an input, read or free an output) has to wait for the kernel.
//!
//! # The specification's two legal strategies
//!
//! The CAI v3 specification allows a consumer either to
//!
//! 1. **synchronize on the producer's stream** before using the data (and then keep the
//!    producer's stream from running ahead of the consumer's work), or
//! 2. **enqueue its work on the producer's stream**, where stream order does everything.
//!
//! # What Numba does
//!
//! Numba, the reference consumer, takes strategy 1 bluntly: for every imported array whose
//! `stream` is an integer it calls `cuStreamSynchronize` on it — a host block — before the
//! launch, even when the launch goes on that very stream (its docs name eliding that sync as
//! an optimisation it has not done). `NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0` (or `sync=False`)
//! turns the sync off. For the second half it leans on the legacy default stream's implicit
//! ordering, which does not hold for streams created non-blocking (`CU_STREAM_NON_BLOCKING`,
//! as PyTorch's side streams are). Users measure its launches on foreign arrays at 2.5–7×
//! slower than on its own, and name the sync as the cause (on an H100: `cuStreamSynchronize` + launch 9.3 µs; event record +
//! `cuStreamWaitEvent` + launch 3.9 µs; a bare launch 3.0 µs).
//!
//! # ferrocuda's policy
//!
//! **Launch stream.** The caller's stream if it names one; otherwise the producers' stream if
//! every producer that names a stream names the same one (strategy 2: no ordering work at
//! all); otherwise — no producer names a stream, or they disagree — the legacy default stream.
//!
//! **Foreign streams.** Each distinct producer stream other than the launch stream, in
//! first-seen order. A producer stream equal to the launch stream needs nothing (stream
//! order); a producer that names no stream needs nothing. [`StreamRef::Legacy`],
//! [`StreamRef::PerThread`] and every [`StreamRef::Handle`] are treated as *distinct*
//! streams: no implicit legacy-stream synchronization is assumed, since non-blocking streams
//! do not get it and a handle does not tell whether its stream is one.
//!
//! **What happens to each foreign stream**, by [`SyncMode`]:
//!
//! | mode | before the launch | after the launch |
//! | --- | --- | --- |
//! | [`SyncMode::Default`] | `cuStreamSynchronize(s)` ([`Plan::host_syncs`]) | `s` waits on the kernel's event ([`Plan::waits_after`]) |
//! | [`SyncMode::Event`] | record an event on `s`; launch stream waits on it ([`Plan::waits_before`]) | `s` waits on the kernel's event ([`Plan::waits_after`]) |
//! | [`SyncMode::Off`] | nothing | nothing |
//!
//! The *after* column is the second half of both strategies: one event recorded on the
//! launch stream right after the kernel, and a `cuStreamWaitEvent` of each foreign stream on
//! it (≈0.7 µs, no host block). Even in Default mode, where the foreign stream was idle when
//! the host sync returned, the producer may enqueue more work on it while the kernel is still
//! running on the launch stream; the wait keeps that work behind the kernel.
//!
//! [`SyncMode::Default`] is Numba's semantics (minus the pointless same-stream sync, plus the
//! second half); [`SyncMode::Event`] never blocks the host, as NVIDIA's `cuda.core` does;
//! [`SyncMode::Off`] trusts the caller. The mode comes from
//! `FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC` ([`SyncMode::from_env`]) or a per-call switch.
//!
//! # Plan, then execute
//!
//! The policy is split in two so it can be read and tested without a GPU:
//!
//! * [`plan`] is a pure function from the producers' streams, the caller's stream and the
//!   mode to a [`Plan`]: fixed capacity, no heap, `Copy` — it sits on the launch hot path.
//! * [`Plan::before_launch`] and [`Plan::after_launch`] execute the plan through the
//!   [`StreamOps`] trait, implemented over the CUDA driver elsewhere and by a recorder in
//!   this module's tests.
//!
//! Keeping the producing objects alive while the kernel may use them is not this module's
//! business (the launcher holds them).
//!
//! # Example
//!
//! A CuPy array on a side stream (handle `0x5000`), a PyTorch tensor (CAI v2: no stream key)
//! and an output on the legacy default stream, launched on the caller's stream `0x7000`:
//!
//! ```
//! use std::num::NonZeroU64;
//! use ferrocuda_host::stream::{plan, StreamRef, SyncMode};
//!
//! let side = StreamRef::from_cai(0x5000).unwrap();
//! let mine = StreamRef::Handle(NonZeroU64::new(0x7000).unwrap());
//! let producers = [Some(side), None, Some(StreamRef::Legacy)];
//!
//! // Numba-like: block on both foreign streams, then make them wait for the kernel.
//! let p = plan(&producers, Some(mine), SyncMode::Default)?;
//! assert_eq!(p.launch_stream(), mine);
//! assert_eq!(p.host_syncs(), &[side, StreamRef::Legacy]);
//! assert!(p.waits_before().is_empty());
//! assert_eq!(p.waits_after(), &[side, StreamRef::Legacy]);
//!
//! // Never block the host: the same streams are ordered with events instead.
//! let p = plan(&producers, Some(mine), SyncMode::Event)?;
//! assert!(p.host_syncs().is_empty());
//! assert_eq!(p.waits_before(), &[side, StreamRef::Legacy]);
//! assert_eq!(p.waits_after(), &[side, StreamRef::Legacy]);
//!
//! // No caller stream, and the producers agree: launch on their stream, nothing else to do.
//! let p = plan(&[Some(side), None, Some(side)], None, SyncMode::Default)?;
//! assert_eq!(p.launch_stream(), side);
//! assert!(p.is_trivial());
//! # Ok::<(), ferrocuda_host::Error>(())
//! ```

use std::fmt;
use std::num::NonZeroU64;

use crate::error::{Error, Result};

/// A CUDA stream as the array interface names it.
///
/// The CAI `stream` values 1 and 2 are the legacy and per-thread default streams; the driver
/// accepts those same values as `CUstream` handles (`CU_STREAM_LEGACY`,
/// `CU_STREAM_PER_THREAD`). Any other non-zero value is a `cudaStream_t` / `CUstream` handle.
/// Value 0 is disallowed by the specification and has no representation here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamRef {
    /// The legacy default stream (CAI value 1).
    Legacy,
    /// The per-thread default stream (CAI value 2).
    PerThread,
    /// Any other stream handle (never 0, 1 or 2).
    Handle(NonZeroU64),
}

impl StreamRef {
    /// The stream for a CAI `stream` integer; `None` for 0 (which the spec disallows).
    pub fn from_cai(value: u64) -> Option<StreamRef> {
        match value {
            0 => None,
            1 => Some(StreamRef::Legacy),
            2 => Some(StreamRef::PerThread),
            v => NonZeroU64::new(v).map(StreamRef::Handle),
        }
    }

    /// The CAI integer (and driver `CUstream` value) of this stream.
    pub fn as_raw(self) -> u64 {
        match self {
            StreamRef::Legacy => 1,
            StreamRef::PerThread => 2,
            StreamRef::Handle(h) => h.get(),
        }
    }
}

/// The environment variable that selects the [`SyncMode`] (see [`SyncMode::from_env`]).
pub const SYNC_ENV_VAR: &str = "FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC";

/// Synchronization mode: how a launch is ordered against its producers' foreign streams.
///
/// See the [module documentation](self) for the rationale and the table of what each mode
/// does before and after the launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Numba's consumer semantics: host-synchronize (`cuStreamSynchronize`) each producer
    /// stream that is not the launch stream; skip it when the launch goes on the producer's
    /// own stream (the optimisation Numba's docs name but never did). After the launch, each
    /// of those streams waits on the kernel's completion event.
    #[default]
    Default,
    /// Never block the host: record an event on each foreign producer stream and make the
    /// launch stream wait on it. After the launch, each of those streams waits on the
    /// kernel's completion event.
    Event,
    /// No ordering at all (`FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC=0` or a per-call switch).
    /// The caller guarantees the producers' work is complete and stays out of the way.
    Off,
}

impl SyncMode {
    /// Parses a value of [`SYNC_ENV_VAR`] (`FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC`); `None`
    /// means the variable is unset.
    ///
    /// | value | mode |
    /// | --- | --- |
    /// | unset | [`SyncMode::Default`] |
    /// | `"1"` | [`SyncMode::Default`] |
    /// | `"0"` | [`SyncMode::Off`] |
    /// | `"event"` | [`SyncMode::Event`] |
    ///
    /// Anything else (including the empty string) is an [`ErrorKind::Value`] error naming
    /// the variable: a typo must not silently change how work is ordered.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Value`] for a value other than `0`, `1` or `event`.
    ///
    /// ```
    /// use ferrocuda_host::stream::SyncMode;
    /// assert_eq!(SyncMode::from_env_value(None)?, SyncMode::Default);
    /// assert_eq!(SyncMode::from_env_value(Some("event"))?, SyncMode::Event);
    /// assert!(SyncMode::from_env_value(Some("yes")).is_err());
    /// # Ok::<(), ferrocuda_host::Error>(())
    /// ```
    ///
    /// [`ErrorKind::Value`]: crate::ErrorKind::Value
    pub fn from_env_value(value: Option<&str>) -> Result<SyncMode> {
        match value {
            None | Some("1") => Ok(SyncMode::Default),
            Some("0") => Ok(SyncMode::Off),
            Some("event") => Ok(SyncMode::Event),
            Some(other) => Err(Error::value(format!(
                "{SYNC_ENV_VAR}={other:?} is not understood; use 0 (off), 1 (host sync, the \
                 default) or event (event waits, no host block)"
            ))),
        }
    }

    /// Reads [`SYNC_ENV_VAR`] from the environment and parses it with
    /// [`SyncMode::from_env_value`]. A value that is not valid Unicode is an error too.
    ///
    /// This reads the environment on every call; launchers read it once and keep the mode.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Value`](crate::ErrorKind::Value) for a value other than `0`, `1` or
    /// `event`.
    pub fn from_env() -> Result<SyncMode> {
        match std::env::var(SYNC_ENV_VAR) {
            Ok(v) => SyncMode::from_env_value(Some(&v)),
            Err(std::env::VarError::NotPresent) => SyncMode::from_env_value(None),
            Err(std::env::VarError::NotUnicode(v)) => Err(Error::value(format!(
                "{SYNC_ENV_VAR}={v:?} is not understood; use 0, 1 or event"
            ))),
        }
    }
}

/// The most array arguments one launch may have; [`plan`] refuses more.
pub const MAX_PRODUCERS: usize = 16;

/// What to do around one launch, as computed by [`plan`].
///
/// Fixed capacity, no heap (it is built on every launch). The foreign streams are
/// deduplicated and kept in first-seen order, so the plan — and the order of driver calls
/// made from it — is deterministic. Which of the lists is non-empty depends on the
/// [`mode`](Plan::mode); see the [module documentation](self).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    launch: StreamRef,
    mode: SyncMode,
    /// Number of valid entries in `foreign`.
    len: u8,
    /// Distinct producer streams other than `launch`, first-seen order, in `[..len]`.
    /// Unused slots always hold `StreamRef::Legacy`, so the derived equality is exact.
    foreign: [StreamRef; MAX_PRODUCERS],
}

impl Plan {
    /// The stream the kernel is launched on.
    pub fn launch_stream(&self) -> StreamRef {
        self.launch
    }

    /// The mode the plan was computed for.
    pub fn mode(&self) -> SyncMode {
        self.mode
    }

    /// The distinct producer streams other than the launch stream, in first-seen order —
    /// whatever the mode. In [`SyncMode::Off`] these are the streams left unordered.
    pub fn foreign_streams(&self) -> &[StreamRef] {
        &self.foreign[..usize::from(self.len)]
    }

    /// Streams to `cuStreamSynchronize` before the launch ([`SyncMode::Default`]; empty in
    /// the other modes).
    pub fn host_syncs(&self) -> &[StreamRef] {
        match self.mode {
            SyncMode::Default => self.foreign_streams(),
            SyncMode::Event | SyncMode::Off => &[],
        }
    }

    /// Streams on which to record an event that the launch stream waits on before the launch
    /// ([`SyncMode::Event`]; empty in the other modes).
    pub fn waits_before(&self) -> &[StreamRef] {
        match self.mode {
            SyncMode::Event => self.foreign_streams(),
            SyncMode::Default | SyncMode::Off => &[],
        }
    }

    /// Streams that must wait (`cuStreamWaitEvent`) on an event recorded on the launch stream
    /// after the kernel, so producer streams do not run ahead of the kernel
    /// ([`SyncMode::Default`] and [`SyncMode::Event`]; empty in [`SyncMode::Off`]).
    pub fn waits_after(&self) -> &[StreamRef] {
        match self.mode {
            SyncMode::Default | SyncMode::Event => self.foreign_streams(),
            SyncMode::Off => &[],
        }
    }

    /// `true` when nothing but the launch happens: no syncs, no events, no waits.
    pub fn is_trivial(&self) -> bool {
        self.host_syncs().is_empty()
            && self.waits_before().is_empty()
            && self.waits_after().is_empty()
    }

    /// Runs everything the plan asks for before the launch: `synchronize` each of
    /// [`host_syncs`](Plan::host_syncs); for each of [`waits_before`](Plan::waits_before),
    /// `record` an event on it and make the launch stream `wait` on that event.
    ///
    /// # Errors
    ///
    /// The first error of `ops`; nothing more is done after it, and the launch must then not
    /// happen.
    pub fn before_launch<O: StreamOps>(&self, ops: &mut O) -> Result<()> {
        for &s in self.host_syncs() {
            ops.synchronize(s)?;
        }
        for &s in self.waits_before() {
            let e = ops.record(s)?;
            let waited = ops.wait(self.launch, e);
            ops.release(e);
            waited?;
        }
        Ok(())
    }

    /// Runs everything the plan asks for after the launch: one `record` on the launch stream,
    /// then a `wait` of each of [`waits_after`](Plan::waits_after) on that event. No-op (no
    /// event is recorded) when `waits_after` is empty.
    ///
    /// # Errors
    ///
    /// The first error of `ops`; nothing more is done after it.
    pub fn after_launch<O: StreamOps>(&self, ops: &mut O) -> Result<()> {
        let streams = self.waits_after();
        if streams.is_empty() {
            return Ok(());
        }
        let e = ops.record(self.launch)?;
        let mut waited = Ok(());
        for &s in streams {
            waited = ops.wait(s, e);
            if waited.is_err() {
                break;
            }
        }
        ops.release(e);
        waited
    }
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("launch_stream", &self.launch)
            .field("mode", &self.mode)
            .field("host_syncs", &self.host_syncs())
            .field("waits_before", &self.waits_before())
            .field("waits_after", &self.waits_after())
            .finish()
    }
}

/// Computes the plan for one launch. Pure: no driver calls.
///
/// `producers[i]` is the `i`-th array argument's stream (`None`: the interface named no
/// stream, so no ordering is needed for it). `caller` is an explicit launch stream from the
/// caller.
///
/// Launch stream: the caller's if given; else the producers' common stream if all producers
/// that name a stream agree; else (no producer streams, or they disagree) the legacy default
/// stream. The foreign streams are the distinct producer streams other than the launch
/// stream, in first-seen order; what is done with them depends on `mode` (see [`Plan`] and
/// the [module documentation](self)).
///
/// # Errors
///
/// [`ErrorKind::Value`](crate::ErrorKind::Value) when `producers` has more than
/// [`MAX_PRODUCERS`] entries.
pub fn plan(
    producers: &[Option<StreamRef>],
    caller: Option<StreamRef>,
    mode: SyncMode,
) -> Result<Plan> {
    if producers.len() > MAX_PRODUCERS {
        return Err(Error::value(format!(
            "too many array arguments: {} (a launch takes at most {MAX_PRODUCERS})",
            producers.len()
        )));
    }
    let launch = match caller {
        Some(s) => s,
        None => common_stream(producers).unwrap_or(StreamRef::Legacy),
    };
    let mut p = Plan {
        launch,
        mode,
        len: 0,
        foreign: [StreamRef::Legacy; MAX_PRODUCERS],
    };
    for &s in producers.iter().flatten() {
        if s != launch && !p.foreign_streams().contains(&s) {
            p.foreign[usize::from(p.len)] = s;
            p.len += 1;
        }
    }
    Ok(p)
}

/// The one stream every stream-naming producer names; `None` if none names one or they
/// disagree.
fn common_stream(producers: &[Option<StreamRef>]) -> Option<StreamRef> {
    let mut common = None;
    for &s in producers.iter().flatten() {
        match common {
            None => common = Some(s),
            Some(c) if c != s => return None,
            Some(_) => {}
        }
    }
    common
}

/// The driver operations a [`Plan`] needs. Implemented over the CUDA driver elsewhere; tests
/// implement it with a recorder.
///
/// ```
/// use ferrocuda_host::stream::{plan, StreamOps, StreamRef, SyncMode};
/// use ferrocuda_host::Result;
///
/// /// Logs the calls instead of making them.
/// #[derive(Default)]
/// struct Log(Vec<String>);
/// impl StreamOps for Log {
///     type Event = usize;
///     fn synchronize(&mut self, s: StreamRef) -> Result<()> {
///         self.0.push(format!("sync {}", s.as_raw()));
///         Ok(())
///     }
///     fn record(&mut self, s: StreamRef) -> Result<usize> {
///         self.0.push(format!("record e{} on {}", self.0.len(), s.as_raw()));
///         Ok(self.0.len() - 1)
///     }
///     fn wait(&mut self, s: StreamRef, e: usize) -> Result<()> {
///         self.0.push(format!("{} waits e{e}", s.as_raw()));
///         Ok(())
///     }
/// }
///
/// let side = StreamRef::from_cai(0x5000).unwrap();
/// let p = plan(&[Some(side)], None, SyncMode::Default)?; // launches on `side` itself
/// assert!(p.is_trivial());
///
/// let p = plan(&[Some(side)], Some(StreamRef::PerThread), SyncMode::Event)?;
/// let mut log = Log::default();
/// p.before_launch(&mut log)?;
/// // ... cuLaunchKernel on p.launch_stream() ...
/// p.after_launch(&mut log)?;
/// assert_eq!(log.0, ["record e0 on 20480", "2 waits e0", "record e2 on 2", "20480 waits e2"]);
/// # Ok::<(), ferrocuda_host::Error>(())
/// ```
pub trait StreamOps {
    /// An event handle. An implementation may hand the same event out again once `wait` has
    /// been called for it: `cuStreamWaitEvent` waits on the work captured by the event's
    /// record *at the time of the wait call*, later records do not affect it. Events without
    /// timing (`CU_EVENT_DISABLE_TIMING`) are cheaper.
    type Event: Copy;

    /// Blocks the host until all work enqueued on `s` has completed (`cuStreamSynchronize`).
    fn synchronize(&mut self, s: StreamRef) -> Result<()>;

    /// Takes an event (e.g. from a pool) and records it on `s` (`cuEventRecord`).
    fn record(&mut self, s: StreamRef) -> Result<Self::Event>;

    /// Makes future work on `s` wait for `e` (`cuStreamWaitEvent`), without blocking the host.
    fn wait(&mut self, s: StreamRef, e: Self::Event) -> Result<()>;

    /// Gives back an event from [`record`](StreamOps::record) once every wait on it has been
    /// enqueued (also after a failed wait). The default does nothing.
    fn release(&mut self, e: Self::Event) {
        let _ = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use proptest::prelude::*;

    const fn h(n: u64) -> StreamRef {
        match NonZeroU64::new(n) {
            Some(v) => StreamRef::Handle(v),
            None => panic!("handle 0"),
        }
    }

    const L: StreamRef = StreamRef::Legacy;
    const P: StreamRef = StreamRef::PerThread;
    const A: StreamRef = h(0xA0);
    const B: StreamRef = h(0xB0);
    const C: StreamRef = h(0xC0);

    use SyncMode::{Default as Def, Event as Ev, Off};

    /// One row of the plan table: inputs, then the exact expected plan.
    struct Case {
        producers: &'static [Option<StreamRef>],
        caller: Option<StreamRef>,
        mode: SyncMode,
        launch: StreamRef,
        host_syncs: &'static [StreamRef],
        waits_before: &'static [StreamRef],
        waits_after: &'static [StreamRef],
    }

    const fn case(
        producers: &'static [Option<StreamRef>],
        caller: Option<StreamRef>,
        mode: SyncMode,
        launch: StreamRef,
        host_syncs: &'static [StreamRef],
        waits_before: &'static [StreamRef],
        waits_after: &'static [StreamRef],
    ) -> Case {
        Case {
            producers,
            caller,
            mode,
            launch,
            host_syncs,
            waits_before,
            waits_after,
        }
    }

    // Producer lists.
    const NONE: &[Option<StreamRef>] = &[];
    const ALL_NONE: &[Option<StreamRef>] = &[None, None, None];
    const ONE: &[Option<StreamRef>] = &[Some(A)];
    const EQUAL: &[Option<StreamRef>] = &[Some(A), Some(A), Some(A)];
    const DISTINCT: &[Option<StreamRef>] = &[Some(A), Some(B)];
    const MIXED: &[Option<StreamRef>] = &[None, Some(A), None, Some(B), Some(A)];
    const KINDS: &[Option<StreamRef>] = &[Some(L), Some(P), Some(A), Some(L)];
    const ONE_AMONG_NONE: &[Option<StreamRef>] = &[None, Some(B), None];
    const PER_THREAD_PAIR: &[Option<StreamRef>] = &[Some(P), Some(P)];
    const LEGACY_ONLY: &[Option<StreamRef>] = &[Some(L)];

    const E: &[StreamRef] = &[];

    /// Every combination: producers × caller (none / equal to a producer / different) × mode.
    #[rustfmt::skip]
    const CASES: &[Case] = &[
        // no producers: legacy unless the caller names a stream; never anything to order
        case(NONE, None,    Def, L, E, E, E),
        case(NONE, None,    Ev,  L, E, E, E),
        case(NONE, None,    Off, L, E, E, E),
        case(NONE, Some(C), Def, C, E, E, E),
        case(NONE, Some(C), Ev,  C, E, E, E),
        case(NONE, Some(C), Off, C, E, E, E),
        // producers that name no stream: same as no producers
        case(ALL_NONE, None,    Def, L, E, E, E),
        case(ALL_NONE, None,    Ev,  L, E, E, E),
        case(ALL_NONE, None,    Off, L, E, E, E),
        case(ALL_NONE, Some(P), Def, P, E, E, E),
        case(ALL_NONE, Some(P), Ev,  P, E, E, E),
        case(ALL_NONE, Some(P), Off, P, E, E, E),
        // one producer stream: launch on it (nothing to do) unless the caller differs
        case(ONE, None,    Def, A, E, E, E),
        case(ONE, None,    Ev,  A, E, E, E),
        case(ONE, None,    Off, A, E, E, E),
        case(ONE, Some(A), Def, A, E, E, E),
        case(ONE, Some(A), Ev,  A, E, E, E),
        case(ONE, Some(A), Off, A, E, E, E),
        case(ONE, Some(C), Def, C, &[A], E, &[A]),
        case(ONE, Some(C), Ev,  C, E, &[A], &[A]),
        case(ONE, Some(C), Off, C, E, E, E),
        // several equal producer streams: as one, deduplicated
        case(EQUAL, None,    Def, A, E, E, E),
        case(EQUAL, None,    Ev,  A, E, E, E),
        case(EQUAL, None,    Off, A, E, E, E),
        case(EQUAL, Some(A), Def, A, E, E, E),
        case(EQUAL, Some(A), Ev,  A, E, E, E),
        case(EQUAL, Some(A), Off, A, E, E, E),
        case(EQUAL, Some(C), Def, C, &[A], E, &[A]),
        case(EQUAL, Some(C), Ev,  C, E, &[A], &[A]),
        case(EQUAL, Some(C), Off, C, E, E, E),
        // several distinct producer streams: they disagree, so legacy unless the caller names one
        case(DISTINCT, None,    Def, L, &[A, B], E, &[A, B]),
        case(DISTINCT, None,    Ev,  L, E, &[A, B], &[A, B]),
        case(DISTINCT, None,    Off, L, E, E, E),
        case(DISTINCT, Some(B), Def, B, &[A], E, &[A]),
        case(DISTINCT, Some(B), Ev,  B, E, &[A], &[A]),
        case(DISTINCT, Some(B), Off, B, E, E, E),
        case(DISTINCT, Some(C), Def, C, &[A, B], E, &[A, B]),
        case(DISTINCT, Some(C), Ev,  C, E, &[A, B], &[A, B]),
        case(DISTINCT, Some(C), Off, C, E, E, E),
        // None mixed with streams: None is ignored; duplicates collapse, first-seen order
        case(MIXED, None,    Def, L, &[A, B], E, &[A, B]),
        case(MIXED, None,    Ev,  L, E, &[A, B], &[A, B]),
        case(MIXED, None,    Off, L, E, E, E),
        case(MIXED, Some(A), Def, A, &[B], E, &[B]),
        case(MIXED, Some(A), Ev,  A, E, &[B], &[B]),
        case(MIXED, Some(A), Off, A, E, E, E),
        case(MIXED, Some(C), Def, C, &[A, B], E, &[A, B]),
        case(MIXED, Some(C), Ev,  C, E, &[A, B], &[A, B]),
        case(MIXED, Some(C), Off, C, E, E, E),
        // legacy, per-thread and a handle are three distinct streams
        case(KINDS, None,    Def, L, &[P, A], E, &[P, A]),
        case(KINDS, None,    Ev,  L, E, &[P, A], &[P, A]),
        case(KINDS, None,    Off, L, E, E, E),
        case(KINDS, Some(P), Def, P, &[L, A], E, &[L, A]),
        case(KINDS, Some(P), Ev,  P, E, &[L, A], &[L, A]),
        case(KINDS, Some(P), Off, P, E, E, E),
        case(KINDS, Some(C), Def, C, &[L, P, A], E, &[L, P, A]),
        case(KINDS, Some(C), Ev,  C, E, &[L, P, A], &[L, P, A]),
        case(KINDS, Some(C), Off, C, E, E, E),
        // one stream among Nones: the producers agree
        case(ONE_AMONG_NONE, None,    Def, B, E, E, E),
        case(ONE_AMONG_NONE, None,    Ev,  B, E, E, E),
        case(ONE_AMONG_NONE, Some(L), Def, L, &[B], E, &[B]),
        case(ONE_AMONG_NONE, Some(L), Ev,  L, E, &[B], &[B]),
        // per-thread producers agree: launch there, not on legacy
        case(PER_THREAD_PAIR, None,    Def, P, E, E, E),
        case(PER_THREAD_PAIR, Some(L), Def, L, &[P], E, &[P]),
        case(PER_THREAD_PAIR, Some(L), Ev,  L, E, &[P], &[P]),
        // a legacy producer with a per-thread caller: no implicit legacy synchronization assumed
        case(LEGACY_ONLY, None,    Def, L, E, E, E),
        case(LEGACY_ONLY, Some(P), Def, P, &[L], E, &[L]),
        case(LEGACY_ONLY, Some(A), Ev,  A, E, &[L], &[L]),
        case(LEGACY_ONLY, Some(A), Off, A, E, E, E),
    ];

    #[test]
    fn plan_table() {
        assert!(CASES.len() >= 30);
        for (i, c) in CASES.iter().enumerate() {
            let p = plan(c.producers, c.caller, c.mode).unwrap();
            let what = format!(
                "case {i}: producers {:?}, caller {:?}, {:?} → {p:?}",
                c.producers, c.caller, c.mode
            );
            assert_eq!(p.mode(), c.mode, "{what}");
            assert_eq!(p.launch_stream(), c.launch, "{what}");
            assert_eq!(p.host_syncs(), c.host_syncs, "{what}");
            assert_eq!(p.waits_before(), c.waits_before, "{what}");
            assert_eq!(p.waits_after(), c.waits_after, "{what}");
            let trivial =
                c.host_syncs.is_empty() && c.waits_before.is_empty() && c.waits_after.is_empty();
            assert_eq!(p.is_trivial(), trivial, "{what}");
            if c.mode == Off {
                assert!(p.is_trivial(), "{what}");
            }
        }
    }

    #[test]
    fn table_covers_every_combination() {
        // Each producer list × caller kind × mode named in the brief appears.
        for producers in [NONE, ALL_NONE, ONE, EQUAL, DISTINCT, MIXED, KINDS] {
            for mode in [Def, Ev, Off] {
                let callers: Vec<Option<StreamRef>> = CASES
                    .iter()
                    .filter(|c| std::ptr::eq(c.producers, producers) && c.mode == mode)
                    .map(|c| c.caller)
                    .collect();
                assert!(callers.contains(&None), "{producers:?} {mode:?}: no caller");
                assert!(
                    callers.contains(&Some(C)) || callers.contains(&Some(P)),
                    "{producers:?} {mode:?}: different caller"
                );
                let any_stream = producers.iter().any(Option::is_some);
                if any_stream {
                    assert!(
                        callers
                            .iter()
                            .flatten()
                            .any(|s| producers.contains(&Some(*s))),
                        "{producers:?} {mode:?}: caller equal to a producer"
                    );
                }
            }
        }
    }

    #[test]
    fn deduplicates_in_first_seen_order() {
        let p = plan(
            &[Some(B), Some(A), Some(B), None, Some(A), Some(B)],
            Some(C),
            Def,
        )
        .unwrap();
        assert_eq!(p.host_syncs(), &[B, A]);
        assert_eq!(p.waits_after(), &[B, A]);
        assert_eq!(p.foreign_streams(), &[B, A]);
        // The same producer stream for 3 arrays is synced once.
        let mut rec = Recorder::default();
        plan(&[Some(A); 3], Some(C), Def)
            .unwrap()
            .before_launch(&mut rec)
            .unwrap();
        assert_eq!(rec.calls, [Call::Sync(A)]);
    }

    #[test]
    fn max_producers() {
        // Exactly MAX_PRODUCERS distinct streams fit.
        let all: Vec<Option<StreamRef>> = (0..MAX_PRODUCERS as u64)
            .map(|i| Some(h(100 + i)))
            .collect();
        let p = plan(&all, Some(L), Ev).unwrap();
        assert_eq!(p.waits_before().len(), MAX_PRODUCERS);
        assert_eq!(p.waits_before()[0], h(100));
        assert_eq!(
            p.waits_before()[MAX_PRODUCERS - 1],
            h(100 + MAX_PRODUCERS as u64 - 1)
        );
        // One more is refused, even if it names no stream, in every mode.
        let mut more = all.clone();
        more.push(None);
        for mode in [Def, Ev, Off] {
            let e = plan(&more, None, mode).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Value);
            assert!(e.message().starts_with("too many array arguments"), "{e}");
            assert!(
                e.message().contains("17") && e.message().contains("16"),
                "{e}"
            );
        }
    }

    #[test]
    fn plans_compare_by_content() {
        let a = plan(&[Some(A), Some(B)], Some(C), Ev).unwrap();
        let b = plan(&[Some(B), Some(A), Some(B)], Some(C), Ev).unwrap();
        assert_ne!(a, b, "order is part of the plan");
        assert_eq!(
            a,
            plan(&[None, Some(A), Some(B), Some(A)], Some(C), Ev).unwrap()
        );
        assert_ne!(a, plan(&[Some(A), Some(B)], Some(C), Def).unwrap());
        let dbg = format!("{a:?}");
        assert!(
            dbg.contains("waits_before") && dbg.contains("launch_stream"),
            "{dbg}"
        );
    }

    #[test]
    fn from_env_value() {
        assert_eq!(SyncMode::from_env_value(None).unwrap(), Def);
        assert_eq!(SyncMode::from_env_value(Some("1")).unwrap(), Def);
        assert_eq!(SyncMode::from_env_value(Some("0")).unwrap(), Off);
        assert_eq!(SyncMode::from_env_value(Some("event")).unwrap(), Ev);
        assert_eq!(SyncMode::default(), Def);
        for bad in ["", "2", "true", "off", "Event", " 1", "events"] {
            let e = SyncMode::from_env_value(Some(bad)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Value, "{bad:?}");
            assert!(e.to_string().contains(SYNC_ENV_VAR), "{bad:?}: {e}");
        }
    }

    #[test]
    fn from_env_reads_the_variable() {
        // Only checks agreement with from_env_value for whatever the environment holds
        // (tests run concurrently; setting variables would race).
        let expected = match std::env::var(SYNC_ENV_VAR) {
            Ok(v) => SyncMode::from_env_value(Some(&v)),
            Err(std::env::VarError::NotPresent) => Ok(Def),
            Err(_) => return,
        };
        assert_eq!(SyncMode::from_env().ok(), expected.ok());
    }

    // ----- execution, with a recording StreamOps -----

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Call {
        Sync(StreamRef),
        /// Record of event `n` on a stream.
        Record(StreamRef, u32),
        /// A stream waits on event `n`.
        Wait(StreamRef, u32),
    }

    #[derive(Default)]
    struct Recorder {
        calls: Vec<Call>,
        next_event: u32,
        /// Fail the call with this index (0-based), if set.
        fail_at: Option<usize>,
    }

    impl Recorder {
        fn step(&mut self, call: Call) -> Result<()> {
            if self.fail_at == Some(self.calls.len()) {
                return Err(Error::new(
                    ErrorKind::Cuda { code: 700 },
                    "injected failure",
                ));
            }
            self.calls.push(call);
            Ok(())
        }
    }

    impl StreamOps for Recorder {
        type Event = u32;
        fn synchronize(&mut self, s: StreamRef) -> Result<()> {
            self.step(Call::Sync(s))
        }
        fn record(&mut self, s: StreamRef) -> Result<u32> {
            let e = self.next_event;
            self.step(Call::Record(s, e))?;
            self.next_event += 1;
            Ok(e)
        }
        fn wait(&mut self, s: StreamRef, e: u32) -> Result<()> {
            self.step(Call::Wait(s, e))
        }
    }

    fn run(p: &Plan) -> (Vec<Call>, Vec<Call>) {
        let mut rec = Recorder::default();
        p.before_launch(&mut rec).unwrap();
        let before = std::mem::take(&mut rec.calls);
        p.after_launch(&mut rec).unwrap();
        (before, rec.calls)
    }

    #[test]
    fn default_mode_sequence() {
        let p = plan(&[Some(A), None, Some(B), Some(A)], Some(C), Def).unwrap();
        let (before, after) = run(&p);
        assert_eq!(before, [Call::Sync(A), Call::Sync(B)]);
        assert_eq!(
            after,
            [Call::Record(C, 0), Call::Wait(A, 0), Call::Wait(B, 0)]
        );
    }

    #[test]
    fn event_mode_sequence() {
        let p = plan(&[Some(L), Some(A), Some(P)], None, Ev).unwrap();
        assert_eq!(p.launch_stream(), L);
        let (before, after) = run(&p);
        assert_eq!(
            before,
            [
                Call::Record(A, 0),
                Call::Wait(L, 0),
                Call::Record(P, 1),
                Call::Wait(L, 1)
            ]
        );
        assert_eq!(
            after,
            [Call::Record(L, 2), Call::Wait(A, 2), Call::Wait(P, 2)]
        );
    }

    #[test]
    fn trivial_plans_make_no_calls() {
        for p in [
            plan(&[Some(A), Some(B)], Some(C), Off).unwrap(),
            plan(&[Some(A), Some(A)], None, Def).unwrap(),
            plan(&[Some(A)], Some(A), Ev).unwrap(),
            plan(&[None, None], None, Def).unwrap(),
            plan(&[], Some(C), Ev).unwrap(),
        ] {
            assert!(p.is_trivial(), "{p:?}");
            assert_eq!(run(&p), (vec![], vec![]), "{p:?}");
        }
    }

    #[test]
    fn errors_stop_execution() {
        let p = plan(&[Some(A), Some(B)], Some(C), Def).unwrap();
        let mut rec = Recorder {
            fail_at: Some(0),
            ..Recorder::default()
        };
        let e = p.before_launch(&mut rec).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cuda { code: 700 });
        assert!(rec.calls.is_empty(), "nothing after the failing sync");

        let p = plan(&[Some(A), Some(B)], Some(C), Ev).unwrap();
        let mut rec = Recorder {
            fail_at: Some(1),
            ..Recorder::default()
        };
        assert!(p.before_launch(&mut rec).is_err());
        assert_eq!(rec.calls, [Call::Record(A, 0)], "stops at the failing wait");

        let mut rec = Recorder {
            fail_at: Some(0),
            ..Recorder::default()
        };
        assert!(p.after_launch(&mut rec).is_err());
        assert!(rec.calls.is_empty(), "no waits without the kernel's event");
    }

    // ----- property -----

    fn stream() -> impl Strategy<Value = StreamRef> {
        // Few distinct handles, so that duplicates and agreements are common.
        prop_oneof![
            Just(L),
            Just(P),
            (3u64..7).prop_map(h),
            any::<u64>().prop_filter_map("0..=2", |v| NonZeroU64::new(v)
                .filter(|v| v.get() > 2)
                .map(StreamRef::Handle))
        ]
    }

    fn mode() -> impl Strategy<Value = SyncMode> {
        prop_oneof![Just(Def), Just(Ev), Just(Off)]
    }

    proptest! {
        #[test]
        fn every_producer_stream_is_ordered(
            producers in proptest::collection::vec(proptest::option::of(stream()), 0..=MAX_PRODUCERS),
            caller in proptest::option::of(stream()),
            mode in mode(),
        ) {
            let p = plan(&producers, caller, mode).unwrap();
            if let Some(c) = caller {
                prop_assert_eq!(p.launch_stream(), c);
            }
            for s in producers.iter().flatten() {
                if *s == p.launch_stream() {
                    continue;
                }
                match mode {
                    Def => {
                        prop_assert!(p.host_syncs().contains(s));
                        prop_assert!(p.waits_after().contains(s));
                    }
                    Ev => {
                        prop_assert!(p.waits_before().contains(s));
                        prop_assert!(p.waits_after().contains(s));
                    }
                    Off => {}
                }
            }
            if mode == Off {
                prop_assert!(p.is_trivial());
            }
            // Nothing beyond the producers' foreign streams, each once, never the launch stream.
            let f = p.foreign_streams();
            for (i, s) in f.iter().enumerate() {
                prop_assert!(*s != p.launch_stream());
                prop_assert!(producers.contains(&Some(*s)));
                prop_assert!(!f[..i].contains(s));
            }
            // Execution makes exactly the calls the plan lists.
            let (before, after) = run(&p);
            prop_assert_eq!(before.len(), p.host_syncs().len() + 2 * p.waits_before().len());
            let expected_after = if p.waits_after().is_empty() { 0 } else { 1 + p.waits_after().len() };
            prop_assert_eq!(after.len(), expected_after);
        }
    }
}
