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
//! slower than on its own, and name the sync as the cause: a `cuStreamSynchronize` before a
//! launch costs about two more launches, an event record and `cuStreamWaitEvent` a fraction of
//! one (the C floor's rows of BENCHMARKS.md's launch runs; "Method", floor).
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
//! it (a fraction of a launch, no host block). Even in Default mode, where the foreign stream
//! was idle when the host sync returned, the producer may enqueue more work on it while the
//! kernel is still running on the launch stream; the wait keeps that work behind the kernel.
//!
//! [`SyncMode::Default`] is Numba's semantics (minus the pointless same-stream sync, plus the
//! second half); [`SyncMode::Event`] never blocks the host, as NVIDIA's `cuda.core` does;
//! [`SyncMode::Off`] trusts the caller. The mode comes from
//! `FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC` ([`SyncMode::from_env`]) or a per-call switch.
//!
//! # Under CUDA graph capture
//!
//! When the launch stream is capturing a CUDA graph (`torch.cuda.graph`, CuPy's
//! `Stream.begin_capture`, `cuStreamBeginCapture`), nothing runs until the graph is launched,
//! and the driver forbids what would tie captured work to work that runs now. A plan is then
//! taken through [`Plan::under_capture`], given the capture state of the launch stream and of
//! each producer stream it orders ([`Capture`]): Default mode's host synchronization becomes
//! the event record and wait of Event mode (legal, and replayed, between streams of one
//! capture), and whatever cannot be recorded in the graph is refused before any driver call
//! could invalidate the capture. The rules and the driver documentation they rest on are in
//! the [`capture`] module.
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

pub mod capture;
mod state;

pub use capture::Refused;
pub use state::Capture;

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

    /// The stream a CAI-style integer names — the interface's `stream` key, a `stream=`
    /// argument: `1`, `2` or another handle.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Value`](crate::ErrorKind::Value) for `0` (disallowed by the CUDA Array
    /// Interface as ambiguous) and for integers outside `1..=u64::MAX`. The caller names the
    /// key or the argument.
    pub fn from_int(value: i128) -> Result<StreamRef> {
        if value == 0 {
            return Err(Error::value(
                "stream 0 is disallowed (the CUDA Array Interface forbids it because stream 0 \
                 is ambiguous); use 1 for the legacy default stream, 2 for the per-thread \
                 default stream, a stream handle, or None when no synchronization is needed",
            ));
        }
        u64::try_from(value)
            .ok()
            .and_then(StreamRef::from_cai)
            .ok_or_else(|| {
                Error::value(format!(
                    "stream {value} is not a stream handle (must be in 1..=2**64-1)"
                ))
            })
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
pub const SYNC_ENV_VAR: &str = ferrocuda_config::CUDA_ARRAY_INTERFACE_SYNC.name;

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
    /// The empty string counts as unset; anything else is an [`ErrorKind::Value`] error
    /// naming the variable: a typo must not silently change how work is ordered (the
    /// spelling rules of every variable: the `ferrocuda-config` crate).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Value`] for a value other than `0`, `1`, `event` or empty.
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
        Self::from_word(
            ferrocuda_config::CUDA_ARRAY_INTERFACE_SYNC.parse_choice(value.map(AsRef::as_ref)),
        )
    }

    fn from_word(
        word: std::result::Result<Option<&str>, ferrocuda_config::Error>,
    ) -> Result<SyncMode> {
        match word.map_err(|e| Error::value(e.to_string()))? {
            None | Some("1") => Ok(SyncMode::Default),
            Some("0") => Ok(SyncMode::Off),
            Some("event") => Ok(SyncMode::Event),
            Some(other) => Err(Error::value(format!(
                "{SYNC_ENV_VAR}={other:?} names no sync mode"
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
    /// [`ErrorKind::Value`](crate::ErrorKind::Value) for a value other than `0`, `1`,
    /// `event` or empty.
    pub fn from_env() -> Result<SyncMode> {
        Self::from_word(ferrocuda_config::CUDA_ARRAY_INTERFACE_SYNC.choice())
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
    /// The launch stream's capture state ([`Capture::None`] until [`Plan::under_capture`]).
    capture: Capture,
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

    /// Streams to `cuStreamSynchronize` before the launch ([`SyncMode::Default`], unless the
    /// launch is captured; empty otherwise).
    pub fn host_syncs(&self) -> &[StreamRef] {
        match self.mode {
            SyncMode::Default if !self.is_captured() => self.foreign_streams(),
            SyncMode::Default | SyncMode::Event | SyncMode::Off => &[],
        }
    }

    /// Streams on which to record an event that the launch stream waits on before the launch
    /// ([`SyncMode::Event`], and [`SyncMode::Default`] when the launch is captured; empty
    /// otherwise).
    pub fn waits_before(&self) -> &[StreamRef] {
        match self.mode {
            SyncMode::Event => self.foreign_streams(),
            SyncMode::Default if self.is_captured() => self.foreign_streams(),
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
            .field("capture", &self.capture)
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
    let launch = launch_stream(producers, caller);
    let mut p = Plan {
        launch,
        mode,
        capture: Capture::None,
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

/// The stream a launch goes on — the rule [`plan`] applies: the caller's if given; else the
/// producers' common stream if all producers that name a stream agree; else the legacy
/// default stream.
///
/// For callers that must know the launch stream before they have every argument (a DLPack
/// producer is asked for its capsule with it): arrays added later that name no stream (or
/// the launch stream itself) leave the result unchanged, so the plan of the whole launch
/// agrees.
pub fn launch_stream(producers: &[Option<StreamRef>], caller: Option<StreamRef>) -> StreamRef {
    match caller {
        Some(s) => s,
        None => common_stream(producers).unwrap_or(StreamRef::Legacy),
    }
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
