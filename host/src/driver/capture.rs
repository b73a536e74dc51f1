//! CUDA graph capture on the driver side: the capture state of a stream, a stream plan under
//! capture, and the calling thread's capture interaction mode around ferrocuda's own
//! host-blocking calls.
//!
//! # The launch stream
//!
//! [`capture_plan`] asks the driver for the capture state of the launch stream — one call
//! (`cuStreamGetCaptureInfo`), the only one capture adds to a launch whose arrays all live on
//! the launch stream — and, when the plan orders producer streams, for theirs; then
//! [`Plan::under_capture`] applies the rules of [`stream::capture`](crate::stream::capture).
//!
//! # Unsafe calls while some other stream captures
//!
//! A capture begun in `CU_STREAM_CAPTURE_MODE_GLOBAL` — the default of `cuStreamBeginCapture`
//! and of `torch.cuda.graph` — makes every thread whose own interaction mode is global (the
//! default) "prohibited from potentially unsafe API calls" (`cuThreadExchangeStreamCaptureMode`):
//! such a call fails and invalidates that capture, whichever stream it concerns. The calls
//! ferrocuda makes that block the host or set up state — `cuStreamSynchronize` (the `default`
//! mode's host synchronization, the import rule, copies to and from the host and their waits,
//! `synchronize`), `cuEventQuery` and `cuEventSynchronize` of fences (the Python layer's release
//! of DLPack capsules), and the once-per-device setup (primary context, module load with its
//! page-locked trap record, the workspace pool) — are therefore made with the calling thread's
//! mode exchanged to `CU_STREAM_CAPTURE_MODE_RELAXED` for their duration ([`Relaxed`]), the way
//! PyTorch's allocators wrap `cudaMalloc` and `cudaHostAlloc` during a capture. Relaxed mode
//! still forbids calls that "necessarily conflict with stream capture" (querying a captured
//! event, synchronizing a capturing stream, using the legacy stream while a blocking stream
//! captures), so each blocking call first checks that its own stream is not capturing
//! ([`blocking`]) and refuses otherwise. Kernel launches, event records and waits, and
//! stream-ordered allocations are not among the unsafe calls and need no exchange.

use std::marker::PhantomData;

use super::result::{self as cu, raw_stream};
use crate::error::{Error, ErrorKind, Result};
use crate::stream::capture::describe;
use crate::stream::{Capture, Plan, Refused, StreamRef, MAX_PRODUCERS};

/// The capture state of `s` (one driver call), in the calling thread's current context (for
/// the sentinels 1 and 2).
pub fn capture_state(s: StreamRef) -> Result<Capture> {
    // SAFETY: callers pass streams named by live arrays or the caller, or the sentinels; an
    // invalid handle yields an error code.
    unsafe { cu::stream_capture(raw_stream(s)) }
}

/// The calling thread's stream-capture interaction mode set to relaxed until the guard drops,
/// when the previous mode comes back (see the [module documentation](self)). Not `Send`: the
/// mode belongs to the thread.
#[derive(Debug)]
#[must_use = "the thread's capture mode is restored when the guard is dropped"]
pub(crate) struct Relaxed {
    previous: u32,
    _thread: PhantomData<*const ()>,
}

impl Relaxed {
    /// Sets the calling thread's mode to relaxed (`cuThreadExchangeStreamCaptureMode`).
    pub(crate) fn enter() -> Result<Relaxed> {
        let previous = cu::exchange_capture_mode(cu::CAPTURE_MODE_RELAXED)?;
        Ok(Relaxed {
            previous,
            _thread: PhantomData,
        })
    }
}

impl Drop for Relaxed {
    fn drop(&mut self) {
        let _ = cu::exchange_capture_mode(self.previous);
    }
}

/// `Ok` when `s` is not capturing (nor unusable because of a capture), so that host-blocking
/// work on it is legal; an [`ErrorKind::Unsupported`] error saying why not otherwise, `what`
/// naming the work ("synchronize", "copy host data to", …).
pub(crate) fn idle(s: StreamRef, what: &str) -> Result<()> {
    match capture_state(s)? {
        Capture::None => Ok(()),
        c => Err(Error::new(
            ErrorKind::Unsupported,
            format!("cannot {what} {}: {}", describe(s), c.reason()),
        )),
    }
}

/// [`idle`], then the relaxed mode under which to do the blocking work on `s`.
pub(crate) fn blocking(s: StreamRef, what: &str) -> Result<Relaxed> {
    idle(s, what)?;
    Relaxed::enter()
}

/// `plan` under the capture state of its launch stream and of the producer streams it orders
/// ([`Plan::under_capture`]), asked of the driver: one call for the launch stream, one per
/// ordered producer stream. The launch's context is current.
///
/// # Errors
///
/// [`Refused`] by the capture rules, or a failed query (as refused for the launch stream).
pub fn capture_plan(plan: Plan) -> std::result::Result<Plan, Refused> {
    let query = |s: StreamRef| {
        capture_state(s).map_err(|error| Refused {
            stream: (s != plan.launch_stream()).then_some(s),
            error,
        })
    };
    let launch = query(plan.launch_stream())?;
    let ordered = plan.ordered_streams();
    let mut states = [Capture::None; MAX_PRODUCERS];
    for (state, &s) in states.iter_mut().zip(ordered) {
        *state = query(s)?;
    }
    plan.under_capture(launch, &states[..ordered.len()])
}
