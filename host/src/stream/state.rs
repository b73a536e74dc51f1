//! [`Capture`], a stream's capture state: what the plan records about its launch stream, and
//! what the capture rules ([`capture`](super::capture)) decide by.

/// A stream's capture state, as the driver reports it (`cuStreamGetCaptureInfo`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Capture {
    /// Not capturing: enqueued work runs.
    #[default]
    None,
    /// Capturing into the capture sequence with this id (unique in the process; `0` when the
    /// driver cannot tell, before CUDA 12.3's `cuStreamGetCaptureInfo_v3`).
    Active(u64),
    /// Capturing, but an invalid operation invalidated the capture: the stream is unusable
    /// until the capture is ended on its origin stream.
    Invalidated,
    /// The legacy default stream while a blocking stream of its context captures: unusable
    /// until that capture ends (the driver answers `CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`).
    Implicit,
}

impl Capture {
    /// `true` for [`Capture::Active`].
    pub fn is_active(self) -> bool {
        matches!(self, Capture::Active(_))
    }

    /// Why work on a stream in this state cannot be done now (empty for [`Capture::None`]).
    pub fn reason(self) -> &'static str {
        match self {
            Capture::None => "",
            Capture::Active(_) => {
                "it is capturing a CUDA graph (its work is recorded, not run, until the graph \
                 is launched)"
            }
            Capture::Invalidated => {
                "its CUDA graph capture was invalidated by an earlier error (end the capture \
                 on its origin stream first)"
            }
            Capture::Implicit => {
                "it is the legacy default stream, which is unusable while a blocking stream \
                 (one created without CU_STREAM_NON_BLOCKING) of its context captures a CUDA \
                 graph"
            }
        }
    }
}
