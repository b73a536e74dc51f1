//! Stream policy: how a launch is ordered against the streams of the arrays it uses.
//!
//! (Module body to be written: see the plan types below.)

use std::num::NonZeroU64;

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
