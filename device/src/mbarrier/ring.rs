//! A ring of stage buffers guarded by mbarriers: the position in it ([`RingState`]) and the
//! wait on it ([`MBarrier::wait_ring`]).

use super::MBarrier;
use ferrocuda_macros::gpu_only;

/// A position in a ring of `STAGES` buffers, each guarded by an mbarrier (CUTLASS's
/// `PipelineState`): the stage index and the parity of the phase to wait for there. A ring's
/// consumers start at [`RingState::consumer`] (wait for each stage's first phase), its
/// producers at [`RingState::producer`] (the "empty" barriers have not completed a phase yet,
/// and a producer's first pass must not wait: parity 1 names the phase before the first,
/// which counts as complete). [`advance`](Self::advance) moves to the next stage, flipping the
/// parity when it wraps — so a thread that advances once per use can never wait on the wrong
/// phase, which is the same guarantee [`Phase`](super::Phase) gives for a single barrier.
#[derive(Debug)]
pub struct RingState<const STAGES: usize> {
    index: u32,
    parity: u32,
}

impl<const STAGES: usize> RingState<STAGES> {
    /// The first use of a ring whose barriers signal "full" (consumers wait for producers).
    pub const fn consumer() -> Self {
        const { assert!(STAGES >= 1 && STAGES <= 64, "a ring of 1 to 64 stages") };
        RingState {
            index: 0,
            parity: 0,
        }
    }

    /// The first use of a ring whose barriers signal "empty" (producers wait for consumers):
    /// the first pass over the stages does not wait.
    pub const fn producer() -> Self {
        const { assert!(STAGES >= 1 && STAGES <= 64, "a ring of 1 to 64 stages") };
        RingState {
            index: 0,
            parity: 1,
        }
    }

    /// The stage this use is at.
    #[inline(always)]
    pub const fn index(&self) -> usize {
        self.index as usize
    }

    /// The parity of the phase to wait for at this stage.
    #[inline(always)]
    pub const fn parity(&self) -> u32 {
        self.parity
    }

    /// The next stage (the parity flips after the last).
    #[inline(always)]
    pub fn advance(&mut self) {
        self.index += 1;
        if self.index as usize == STAGES {
            self.index = 0;
            self.parity ^= 1;
        }
    }
}

impl MBarrier {
    /// Waits (with `try_wait`, sm_90) until the phase `state` names at this barrier has
    /// completed: the wait of a ring of barriers ([`RingState`]). An sm_90 instruction: for kernels built for sm_90 or newer (`#[kernel(arch = "sm_90")]`; the builder refuses it in an older module).
    #[inline(always)]
    #[gpu_only]
    pub fn wait_ring<const STAGES: usize>(&self, state: &RingState<STAGES>) {
        loop {
            let done = test_asm!(
                "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64",
                self.addr,
                par = reg32 state.parity
            );
            if done {
                return;
            }
        }
    }
}
