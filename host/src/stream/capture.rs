//! The stream policy under CUDA graph capture: what a [`Plan`] becomes when its launch stream,
//! or a producer stream it orders, is capturing a graph.
//!
//! # What capture changes
//!
//! While a stream captures (`cuStreamBeginCapture`, which `torch.cuda.graph`, CuPy's
//! `Stream.begin_capture` and `torch.compile(mode="reduce-overhead")` call), the work enqueued
//! on it does not run: it becomes nodes of a graph that runs, possibly many times, when the
//! graph is launched. Two things follow for the stream policy:
//!
//! * a **host synchronization** of a producer stream orders nothing that matters — the graph
//!   runs later — and synchronizing a capturing stream is invalid anyway;
//! * an **event edge** between two streams is recorded in the graph only when both streams are
//!   in the same capture. An edge from a stream outside the capture cannot be: the driver
//!   refuses a wait on an event recorded outside the capture (and would not replay it), and a
//!   stream that waits on an event recorded inside the capture is pulled into the capture —
//!   everything later enqueued on it is captured instead of run, and the capture then fails to
//!   end (`CUDA_ERROR_STREAM_CAPTURE_UNJOINED`) unless that stream is joined back.
//!
//! # The rules
//!
//! [`Plan::under_capture`] takes the capture state of the launch stream and of each stream the
//! plan orders ([`Plan::ordered_streams`]: the foreign producer streams in the `default` and
//! `event` modes; none in `off`):
//!
//! | launch stream | producer stream | `default` | `event` | `off` |
//! | --- | --- | --- | --- | --- |
//! | capturing (capture *X*) | capturing, capture *X* | event recorded on the producer, the launch stream waits on it; after the kernel the producer waits on the kernel's event (all captured: graph edges) | the same | nothing |
//! | capturing (capture *X*) | not capturing, another capture, the legacy default stream, or an invalidated capture | refused | refused | nothing |
//! | not capturing | capturing, or an invalidated capture | refused | refused | nothing |
//! | not capturing | not capturing | host synchronization, then the wait after the kernel (the usual plan) | events (the usual plan) | nothing |
//! | the legacy default stream while a blocking stream of the context captures | — | refused | refused | refused |
//! | an invalidated capture | — | refused | refused | refused |
//!
//! Refusals are [`ErrorKind::Unsupported`] errors ([`Refused`] names the producer stream they
//! concern) made before any driver call on the streams, so the capture stays valid and can
//! be ended; the launch does not happen. In the `off` mode nothing is asked of any producer
//! stream, so a launch on a capturing stream is always captured: ordering the producers
//! before each replay is then the caller's business, as it is for every CUDA graph.
//!
//! # The driver rules relied on
//!
//! From the CUDA Programming Guide, section "CUDA Graphs", "Creating a Graph Using Stream
//! Capture":
//!
//! * *Cross-stream Dependencies and Events*: stream capture handles dependencies expressed
//!   with `cudaEventRecord` and `cudaStreamWaitEvent` "provided the event being waited upon
//!   was recorded into the same capture graph"; a stream waiting on a captured event is placed
//!   in capture mode; every stream joined to a capture must be joined back to the origin
//!   stream, or the capture fails.
//! * *Prohibited and Unhandled Operations*: synchronizing or querying a capturing stream or a
//!   captured event is invalid; while a blocking stream (not `CU_STREAM_NON_BLOCKING`) of the
//!   context captures, any use of the legacy default stream, synchronous APIs included, is
//!   invalid; merging two captures by a wait is invalid; "it is invalid to wait on a
//!   non-captured event from a stream which is being captured without specifying the
//!   `cudaEventWaitExternal` flag" (such an external wait would replay as a wait on whatever
//!   the event's last record is at replay, which nothing here re-records).
//! * *Invalidation*: an invalid operation invalidates the capture; `cudaStreamEndCapture` then
//!   returns an error and no graph.
//!
//! From the driver API reference: `cuStreamIsCapturing` / `cuStreamGetCaptureInfo` on the
//! legacy stream while a blocking stream captures return `CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`,
//! and "the blocking stream capture is not invalidated" — so asking is always safe
//! ([`Capture::Implicit`]); `cuStreamGetCaptureInfo`'s id is "unique over the lifetime of the
//! process", which is how two streams are known to be in one capture.

pub use super::state::Capture;
use super::{Plan, StreamRef, SyncMode};
use crate::error::{Error, ErrorKind};

/// A plan refused under capture: the error, and the producer stream it concerns (`None`: the
/// launch stream).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The producer stream that cannot be ordered (`None` when the launch stream itself is
    /// unusable).
    pub stream: Option<StreamRef>,
    /// An [`ErrorKind::Unsupported`] error saying why and what to do instead.
    pub error: Error,
}

impl From<Refused> for Error {
    fn from(r: Refused) -> Error {
        r.error
    }
}

/// A stream as messages name it.
pub fn describe(s: StreamRef) -> String {
    match s {
        StreamRef::Legacy => "the legacy default stream (1)".to_string(),
        StreamRef::PerThread => "the per-thread default stream (2)".to_string(),
        StreamRef::Handle(h) => format!("stream {:#x}", h.get()),
    }
}

fn refused(stream: Option<StreamRef>, message: String) -> Refused {
    Refused {
        stream,
        error: Error::new(ErrorKind::Unsupported, message),
    }
}

impl Plan {
    /// The launch stream's capture state, as given to [`under_capture`](Plan::under_capture)
    /// ([`Capture::None`] before).
    pub fn capture(&self) -> Capture {
        self.capture
    }

    /// `true` when the launch stream is capturing a graph: the kernel becomes a graph node.
    pub fn is_captured(&self) -> bool {
        self.capture.is_active()
    }

    /// The producer streams whose capture state [`under_capture`](Plan::under_capture) needs:
    /// those the mode orders (the foreign streams in [`SyncMode::Default`] and
    /// [`SyncMode::Event`], none in [`SyncMode::Off`]).
    pub fn ordered_streams(&self) -> &[StreamRef] {
        match self.mode {
            SyncMode::Default | SyncMode::Event => self.foreign_streams(),
            SyncMode::Off => &[],
        }
    }

    /// The plan for the capture states `launch` (of the launch stream) and `ordered` (of each
    /// of [`ordered_streams`](Plan::ordered_streams), in that order): the same streams, with
    /// [`SyncMode::Default`]'s host synchronizations turned into event waits when the launch
    /// is captured — or the refusal of the [module documentation](self)'s table. Pure.
    ///
    /// # Errors
    ///
    /// [`Refused`] as the table says, or when `ordered` does not match
    /// [`ordered_streams`](Plan::ordered_streams) in length.
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use ferrocuda_host::stream::{plan, Capture, StreamRef, SyncMode};
    ///
    /// let (side, graph) = (StreamRef::from_cai(0x5000).unwrap(), StreamRef::from_cai(0x7000).unwrap());
    /// let p = plan(&[Some(side)], Some(graph), SyncMode::Default)?;
    /// // Both streams in capture 9: the host sync becomes a captured event edge.
    /// let c = p.under_capture(Capture::Active(9), &[Capture::Active(9)]).unwrap();
    /// assert!(c.host_syncs().is_empty());
    /// assert_eq!(c.waits_before(), &[side]);
    /// assert_eq!(c.waits_after(), &[side]);
    /// // The producer outside the capture: refused, naming it.
    /// let r = p.under_capture(Capture::Active(9), &[Capture::None]).unwrap_err();
    /// assert_eq!(r.stream, Some(side));
    /// # Ok::<(), ferrocuda_host::Error>(())
    /// ```
    pub fn under_capture(self, launch: Capture, ordered: &[Capture]) -> Result<Plan, Refused> {
        match launch {
            Capture::Implicit | Capture::Invalidated => {
                return Err(refused(
                    None,
                    format!(
                        "cannot launch on {}: {}",
                        describe(self.launch),
                        launch.reason()
                    ),
                ))
            }
            Capture::None | Capture::Active(_) => {}
        }
        let streams = self.ordered_streams();
        if streams.len() != ordered.len() {
            return Err(Refused {
                stream: None,
                error: Error::value(format!(
                    "capture states of {} streams given for a plan that orders {}",
                    ordered.len(),
                    streams.len()
                )),
            });
        }
        for (&s, &c) in streams.iter().zip(ordered) {
            if let Some(message) = producer_refusal(self.launch, launch, s, c) {
                return Err(refused(Some(s), message));
            }
        }
        Ok(Plan {
            capture: launch,
            ..self
        })
    }
}

/// Why producer stream `p` (in state `pc`) cannot be ordered before a launch on `l` (in state
/// `lc`, neither implicit nor invalidated); `None` when it can.
fn producer_refusal(l: StreamRef, lc: Capture, p: StreamRef, pc: Capture) -> Option<String> {
    let (ln, pn) = (describe(l), describe(p));
    let off = "or, to leave it unordered, launch with sync mode off";
    Some(match (lc, pc) {
        (Capture::Active(a), Capture::Active(b)) if a == b && a != 0 => return None,
        (Capture::None, Capture::None) => return None,
        (_, Capture::Implicit | Capture::Invalidated) => {
            format!(
                "cannot order the launch after producer {pn}: {}; {off}",
                pc.reason()
            )
        }
        (Capture::None, Capture::Active(_)) => format!(
            "producer {pn} is capturing a CUDA graph but the launch stream, {ln}, is not: an \
             event wait would pull {ln} into that capture, and a capturing stream cannot be \
             synchronized. Launch on the capturing stream (stream=...), {off}"
        ),
        (Capture::Active(_), Capture::None) => format!(
            "the launch stream, {ln}, is capturing a CUDA graph, but producer {pn} is not part \
             of that capture: the graph cannot wait for work on {pn} (a captured stream may not \
             wait on an event recorded outside its capture, and a host synchronization now \
             orders nothing at replay). Produce the array on the capturing stream, join {pn} \
             to the capture first (make it wait on an event recorded on {ln} before it \
             produces the array), {off} and order the work on {pn} before each replay"
        ),
        (Capture::Active(0), Capture::Active(_)) | (Capture::Active(_), Capture::Active(0)) => {
            format!(
                "the launch stream, {ln}, and producer {pn} are both capturing CUDA graphs, \
                 but this driver cannot tell whether they are in the same capture \
                 (cuStreamGetCaptureInfo_v3 needs a CUDA 12.3 driver): launch on {pn}, {off}"
            )
        }
        (Capture::Active(_), Capture::Active(_)) => format!(
            "the launch stream, {ln}, and producer {pn} are capturing different CUDA graphs; a \
             wait between them would merge the captures, which the driver forbids: launch on \
             {pn}, {off}"
        ),
        (Capture::Implicit | Capture::Invalidated, _) => return None,
    })
}
