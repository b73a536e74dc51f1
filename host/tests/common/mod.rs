//! A recording `StreamOps` for the stream plan tests: the calls a plan makes, in order, with
//! an optional injected failure.

use ferrocuda_host::stream::{StreamOps, StreamRef};
use ferrocuda_host::{Error, ErrorKind, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Sync(StreamRef),
    /// Record of event `n` on a stream.
    Record(StreamRef, u32),
    /// A stream waits on event `n`.
    Wait(StreamRef, u32),
}

#[derive(Default)]
pub struct Recorder {
    pub calls: Vec<Call>,
    pub next_event: u32,
    /// Fail the call with this index (0-based), if set.
    pub fail_at: Option<usize>,
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
