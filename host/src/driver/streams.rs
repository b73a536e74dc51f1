//! Streams and events: ferrocuda's own streams, fences, and the [`StreamOps`] a stream
//! [`Plan`](crate::stream::Plan) executes through.

use super::capture::{blocking, capture_plan, idle, Relaxed};
use super::context::Context;
use super::result::{self as cu, raw_stream, StreamHandle};
use crate::error::Result;
use crate::stream::{self, StreamOps, StreamRef, SyncMode};
use cudarc::driver::sys;

/// Blocks until all work on `s` is done, in the calling thread's current context (which
/// ferrocuda's own calls leave as they found it: with none current, use
/// [`synchronize_on`](super::synchronize_on)).
///
/// Capture-safe: refused ([`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)) while
/// `s` is capturing a graph, or is the legacy stream while a blocking stream captures — either
/// would invalidate the capture — and made in the relaxed capture mode otherwise, so that a
/// capture elsewhere in the process is not invalidated by it (see the capture module).
pub fn synchronize(s: StreamRef) -> Result<()> {
    let _relaxed = blocking(s, "synchronize")?;
    // SAFETY: callers pass streams named by live arrays or the caller, or the sentinels; an
    // invalid handle yields an error code.
    unsafe { cu::stream_synchronize(raw_stream(s)) }
}

/// Records a pooled event of `ctx` (bound) on `s`; the event goes back to the pool on failure.
fn record_pooled(ctx: &Context, s: StreamRef) -> Result<sys::CUevent> {
    let e = ctx.take_event()?;
    // SAFETY: a pooled event of the bound context; `s` is a stream named by a live array or
    // the caller.
    match unsafe { cu::event_record(e, raw_stream(s)) } {
        Ok(()) => Ok(e),
        Err(err) => {
            ctx.give_event(e);
            Err(err)
        }
    }
}

/// Makes `s` wait for the work `e` captured.
fn wait(s: StreamRef, e: sys::CUevent) -> Result<()> {
    // SAFETY: `e` was recorded by `record_pooled`; the wait captures that recording now.
    unsafe { cu::stream_wait_event(raw_stream(s), e) }
}

/// [`StreamOps`] over the driver, with the context's event pool.
pub(crate) struct DriverOps<'c> {
    pub(crate) ctx: &'c Context,
}

impl StreamOps for DriverOps<'_> {
    type Event = sys::CUevent;

    fn synchronize(&mut self, s: StreamRef) -> Result<()> {
        synchronize(s)
    }

    fn record(&mut self, s: StreamRef) -> Result<sys::CUevent> {
        record_pooled(self.ctx, s)
    }

    fn wait(&mut self, s: StreamRef, e: sys::CUevent) -> Result<()> {
        wait(s, e)
    }

    fn release(&mut self, e: sys::CUevent) {
        self.ctx.give_event(e);
    }
}

/// A stream created (and destroyed) by ferrocuda, in a device's primary context.
#[derive(Debug)]
pub struct Stream {
    raw: StreamHandle,
    ctx: &'static Context,
}

// SAFETY: stream handles may be used from any thread.
unsafe impl Send for Stream {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream on `device`; `non_blocking` streams do not synchronize implicitly with
    /// the legacy default stream (`CU_STREAM_NON_BLOCKING`, as PyTorch's side streams).
    pub fn new(device: usize, non_blocking: bool) -> Result<Stream> {
        let ctx = Context::get(device)?;
        let _caller = ctx.enter()?;
        let raw = cu::stream_create(non_blocking)?;
        Ok(Stream { raw, ctx })
    }

    /// The stream as arrays and launches name it.
    pub fn as_ref(&self) -> StreamRef {
        StreamRef::from_cai(self.raw.0 as usize as u64).expect("driver streams are never 0, 1 or 2")
    }

    /// Blocks until all work on the stream is done.
    pub fn synchronize(&self) -> Result<()> {
        let _caller = self.ctx.enter()?;
        synchronize(self.as_ref())
    }

    /// The device ordinal.
    pub fn device(&self) -> usize {
        self.ctx.ordinal()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Ok(_caller) = self.ctx.enter() {
            // SAFETY: we created the stream; pending work still completes after destroy.
            let _ = unsafe { cu::stream_destroy(self.raw) };
        }
    }
}

/// An event recorded on a stream: it completes when the work enqueued on that stream before
/// it has completed.
///
/// Two uses: ordering another stream after that work without blocking the host
/// ([`Fence::wait_on`], e.g. when a DLPack consumer names a stream other than the producer
/// array's), and learning without blocking whether work is done ([`Fence::is_complete`], e.g.
/// to release objects that must outlive a kernel). The event comes from, and goes back to,
/// the device context's pool.
#[derive(Debug)]
pub struct Fence {
    ctx: &'static Context,
    event: sys::CUevent,
}

// SAFETY: a CUevent handle may be used from any thread (the driver API is thread-safe); the
// fence owns its event until `Drop` returns it to the pool.
unsafe impl Send for Fence {}
// SAFETY: every method only passes the handle to thread-safe driver calls.
unsafe impl Sync for Fence {}

impl Fence {
    /// Records a fence on `stream` in device `ordinal`'s primary context.
    ///
    /// Refused ([`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)) while `stream` is
    /// capturing a graph: work recorded there has not run, and an event recorded there could
    /// be neither queried nor waited on by a stream outside the capture (order streams of a
    /// capture with [`order_before`](super::order_before)).
    pub fn record(ordinal: usize, stream: StreamRef) -> Result<Fence> {
        let ctx = Context::get(ordinal)?;
        let _caller = ctx.enter()?;
        idle(stream, "record a fence on")?;
        let event = record_pooled(ctx, stream)?;
        Ok(Fence { ctx, event })
    }

    /// Makes `stream` wait (on the device, without blocking the host) until the fence has
    /// completed. Refused while `stream` is capturing: a captured stream may not wait on an
    /// event recorded outside its capture.
    pub fn wait_on(&self, stream: StreamRef) -> Result<()> {
        let _caller = self.ctx.enter()?;
        idle(stream, "wait for a fence on")?;
        wait(stream, self.event)
    }

    /// `true` once the work before the fence has completed (`cuEventQuery`, in the relaxed
    /// capture mode; never blocks).
    pub fn is_complete(&self) -> Result<bool> {
        let _caller = self.ctx.enter()?;
        let _relaxed = Relaxed::enter()?;
        // SAFETY: a recorded event owned by this fence (recorded outside any capture).
        unsafe { cu::event_query(self.event) }
    }

    /// Blocks until the fence has completed (in the relaxed capture mode).
    pub fn synchronize(&self) -> Result<()> {
        let _caller = self.ctx.enter()?;
        let _relaxed = Relaxed::enter()?;
        // SAFETY: a recorded event owned by this fence (recorded outside any capture).
        unsafe { cu::event_synchronize(self.event) }
    }

    /// The device ordinal.
    pub fn device(&self) -> usize {
        self.ctx.ordinal()
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        // Safe to reuse at once: waits already enqueued captured the recording.
        self.ctx.give_event(self.event);
    }
}

/// Makes `consumer` wait, without blocking the host, for the work enqueued so far on
/// `producer` (both streams of device `ordinal`) — an event recorded on `producer` and waited
/// on by `consumer` — under the capture rules of a launch on `consumer` in the `event` mode:
/// when `consumer` is capturing, `producer` must be in the same capture, and a capturing
/// `producer` is never waited on by a stream outside its capture. Nothing to do when they are
/// the same stream. (The DLPack export's ordering before its consumer's stream.)
///
/// # Errors
///
/// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) by those rules; a failed driver call.
pub fn order_before(ordinal: usize, producer: StreamRef, consumer: StreamRef) -> Result<()> {
    if producer == consumer {
        return Ok(());
    }
    let ctx = Context::get(ordinal)?;
    let _caller = ctx.enter()?;
    let p = stream::plan(&[Some(producer)], Some(consumer), SyncMode::Event)?;
    let p = capture_plan(p)?;
    p.before_launch(&mut DriverOps { ctx })
}
