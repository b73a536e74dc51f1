//! mbarriers: split arrive/wait barriers in shared memory, with phases (`mbarrier.*`, sm_80;
//! transaction counts and `try_wait`, sm_90) (device only).
//!
//! | CUDA C++ / CUTLASS | here |
//! | --- | --- |
//! | `__shared__ uint64_t bar;` | `let bar = shared_mbarrier!();` → [`MBarrierStorage`] |
//! | `if (threadIdx.x == 0) mbarrier_init(&bar, n); __syncthreads();` | `let bar = unsafe { shared_mbarrier!().init(n) };` → [`MBarrier`] |
//! | `token = bar.arrive()` / `mbarrier.arrive` | [`bar.arrive()`](MBarrier::arrive) → [`ArrivalToken`] |
//! | `bar.wait(std::move(token))` | [`bar.wait_token(token)`](MBarrier::wait_token) |
//! | `mbarrier.test_wait.parity` / CUTLASS `ClusterBarrier::wait(phase)` | [`bar.wait(phase)`](MBarrier::wait) → next [`Phase`] |
//! | `bar.arrive_and_wait()` | [`bar.arrive_and_wait(phase)`](MBarrier::arrive_and_wait) |
//! | `bar.arrive_and_drop()` | [`bar.arrive_drop()`](MBarrier::arrive_drop) |
//! | `cp.async.mbarrier.arrive.noinc` (`cuda::pipeline` with a barrier) | [`bar.cp_async_arrive_noinc()`](MBarrier::cp_async_arrive_noinc) |
//! | `mbarrier.arrive.expect_tx` (TMA consumers, sm_90) | [`bar.arrive_expect_tx(bytes)`](MBarrier::arrive_expect_tx) |
//! | `mbarrier.try_wait.parity` (sm_90) | [`bar.try_wait(phase)`](MBarrier::try_wait) |
//! | CUTLASS `ClusterBarrier::arrive(cta_id, pred)` (a peer block's barrier, sm_90) | [`bar.arrive_cluster(rank)`](MBarrier::arrive_cluster) |
//!
//! # What an mbarrier is
//!
//! A 64-bit object in shared memory (8-byte aligned) that counts **arrivals**. It is
//! initialised with an expected arrival count `n` (1 to 2²⁰ − 1) and goes through a sequence
//! of **phases** 0, 1, 2, …: a phase completes when `n` arrivals have happened in it (and, on
//! sm_90, its transaction count is back to zero: [`expect_tx`](MBarrier::expect_tx)); the
//! barrier then moves to the next phase with `n` arrivals pending again. Arrivals are counts,
//! not threads: one thread may arrive several times in a phase, and `n` threads arriving once
//! each is the usual use. [`arrive_drop`](MBarrier::arrive_drop) arrives and lowers `n` for
//! every later phase (a thread leaving the protocol).
//!
//! Unlike [`sync_threads`](crate::thread::sync_threads), arriving does not wait: a thread
//! arrives when its part is done, does other work, and waits later — or never waits (a
//! producer). Any subset of the block's threads may take part, in any roles, under any
//! condition: no operation is collective except [`MBarrierStorage::init`] (a block barrier).
//!
//! # Phases and parity: the [`Phase`] type
//!
//! A waiter names the phase it waits for by its **parity** (even/odd): `test_wait.parity`
//! returns true once the phase of that parity has completed. The hardware distinguishes only
//! the *current* phase (incomplete) and the *immediately preceding* one (complete): a waiter
//! must never fall two phases behind the barrier, and every protocol here guarantees that
//! (the producer of phase `k + 1` first waits for the consumers of phase `k`, e.g. through a
//! second barrier).
//!
//! So that a thread cannot wait on the wrong phase by accident, the parity is a value of type
//! [`Phase`], which is neither `Copy` nor `Clone`: **each waiting thread keeps its own
//! `Phase` per barrier**, starting at [`Phase::first`], and [`wait`](MBarrier::wait) consumes
//! it and returns the next one (the parity flips after each completed wait):
//!
//! ```ignore
//! let mut phase = Phase::first();
//! for k in 0..rounds {
//!     phase = full.wait(phase);   // round k's data is ready
//!     // … read it …
//! }
//! ```
//!
//! A thread that knows a phase has completed without waiting (it saw a later one complete)
//! steps over it with [`Phase::skip`]. The token form ([`arrive`](MBarrier::arrive) returns an
//! [`ArrivalToken`] for the current phase, [`wait_token`](MBarrier::wait_token) waits for that
//! phase) needs no tracking but only serves threads that arrived.
//!
//! # Memory ordering
//!
//! Every arrive has **release** semantics and every wait that returns complete **acquire**
//! semantics, at block (CTA) scope: when a thread's wait for phase `k` returns, every memory
//! access that an arriving thread made before its arrive in phase `k` is visible to the
//! waiting thread, and the waiter's later accesses happen after them. A thread's accesses
//! between its arrive and its own wait are not ordered by the barrier. For asynchronous
//! copies: the copies a thread issued before its
//! [`cp_async_arrive_noinc`](MBarrier::cp_async_arrive_noinc) are complete and visible to a
//! thread whose wait for that phase returns — no [`cp_async::wait_group`](crate::cp_async::wait_group)
//! and no block barrier needed.
//!
//! In the PTX the order and scope are spelled out where the ISA has the qualifiers (PTX 8.0,
//! the builder's ISA for sm_90): `mbarrier.arrive.release.cta.shared::cta.b64`,
//! `mbarrier.test_wait.parity.acquire.cta.shared::cta.b64`, `mbarrier.try_wait.parity.acquire.cta…`.
//! Built for sm_80 (PTX 7.1) the instructions are `mbarrier.arrive.shared.b64` and
//! `mbarrier.test_wait.parity.shared.b64`, whose defaults are the same `.release` / `.acquire`
//! at `.cta` scope.
//!
//! # Life cycle and safety
//!
//! * [`shared_mbarrier!`](crate::shared_mbarrier) declares the storage (one array per
//!   expansion, as [`shared_array!`](crate::shared_array)); [`MBarrierStorage::init`] is the
//!   **block-collective** initialisation — thread 0 of the block runs `mbarrier.init`, then a
//!   block barrier publishes it — and returns the [`MBarrier`] handle to every thread. It is
//!   `unsafe` for the one rule a handle cannot check: PTX leaves initialising a live mbarrier
//!   undefined, so an expansion is initialised once per block (not in a loop) unless it was
//!   invalidated ([`MBarrier::inval`]) since.
//! * The handle's arrive and wait operations are safe: a wrong count or a wrong phase makes a
//!   waiter hang or return early — a protocol error, never a memory error of the barrier
//!   itself. The data the barrier protects is accessed under the usual contracts (shared
//!   writes are `unsafe`, [`SharedArray::write`](crate::shared::SharedArray::write)), and their
//!   `SAFETY` comments rest on the protocol.
//! * PTX also asks that in each phase at least one wait returns complete before any arrive of
//!   the next phase — which a protocol where the next phase's arrivals follow a wait satisfies.
//! * Operations whose misuse PTX leaves undefined are `unsafe` with numbered conditions:
//!   [`arrive_drop`](MBarrier::arrive_drop) (the expected count must stay ≥ 1),
//!   [`cp_async_arrive`](MBarrier::cp_async_arrive), the transaction counts (sm_90),
//!   [`MBarrier::inval`], [`MBarrier::from_shared_ptr`] and [`init`] (raw storage).
//!
//! # Example: a producer warp and consumer warps
//!
//! ```ignore
//! let full = unsafe { shared_mbarrier!().init(32) };  // the producer warp's 32 lanes
//! let empty = unsafe { shared_mbarrier!().init(96) }; // 3 consumer warps
//! let (mut pf, mut pe) = (Phase::first(), Phase::first());
//! for k in 0..rounds {
//!     if warp == 0 {
//!         if k > 0 { pe = empty.wait(pe); }           // consumers are done with round k-1
//!         unsafe { buf.write(lane, value(k, lane)) };
//!         full.arrive();                              // release: the write is published
//!     } else {
//!         pf = full.wait(pf);                         // acquire: round k's data is visible
//!         check(buf.get(lane));
//!         empty.arrive();
//!     }
//! }
//! ```

use crate::diag::fail;
#[cfg(target_arch = "nvptx64")]
use crate::shared::shared_addr_of;
#[cfg(target_arch = "nvptx64")]
use crate::thread;
use core::arch::asm;
use ferrocuda_macros::gpu_only;

pub use ring::RingState;

/// The largest expected arrival count of an mbarrier (2²⁰ − 1).
pub const MAX_COUNT: u32 = (1 << 20) - 1;

/// Storage for `N` mbarriers in shared memory, not yet initialised; made by
/// [`shared_mbarrier!`](crate::shared_mbarrier). Its methods initialise it (block-collective)
/// and return the handles.
#[derive(Debug)]
pub struct MBarrierStorage<const N: usize> {
    #[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
    ptr: *mut u64,
}

impl<const N: usize> MBarrierStorage<N> {
    /// The storage at `ptr` (what [`shared_mbarrier!`](crate::shared_mbarrier) calls).
    ///
    /// # Safety
    ///
    /// `ptr` points to `N` 8-byte aligned `u64` of block-shared memory that live for the
    /// kernel and are accessed only through this storage's handles.
    #[doc(hidden)]
    #[inline(always)]
    pub const unsafe fn from_raw(ptr: *mut u64) -> Self {
        const { assert!(N >= 1, "shared_mbarrier!(N): N >= 1") };
        MBarrierStorage { ptr }
    }

    /// Initialises all `N` mbarriers with the expected arrival count `count` and returns them:
    /// thread 0 of the block runs `mbarrier.init` on each, then a block barrier
    /// ([`sync_threads`](crate::thread::sync_threads)) makes the initialisation visible to the
    /// block. **Block-collective**: every thread of the block calls it (under no condition
    /// that differs between threads), and every thread gets the handles. Aborts if `count` is
    /// not in `1..=MAX_COUNT`.
    ///
    /// # Safety
    ///
    /// 1. The storage holds no initialised mbarrier: this is the first `init`/`init_all` of
    ///    this [`shared_mbarrier!`](crate::shared_mbarrier) expansion in the block — not
    ///    evaluated again in a loop — or its mbarriers were invalidated
    ///    ([`MBarrier::inval`]) since, followed by a block barrier.
    #[inline(always)]
    #[track_caller]
    #[gpu_only]
    pub unsafe fn init_all(self, count: u32) -> MBarriers<N> {
        if count == 0 || count > MAX_COUNT {
            fail();
        }
        if thread::rank_in_block() == 0 {
            for i in 0..N {
                // SAFETY: an 8-byte aligned shared u64 of this storage, holding no mbarrier
                // (the caller's contract); the barrier below publishes the initialisation.
                unsafe { init(self.ptr.wrapping_add(i), count) };
            }
        }
        thread::sync_threads();
        MBarriers {
            base: shared_addr_of(self.ptr),
        }
    }
}

impl MBarrierStorage<1> {
    /// [`init_all`](Self::init_all) for one mbarrier: the handle itself. **Block-collective.**
    ///
    /// # Safety
    ///
    /// 1. As [`init_all`](Self::init_all): the storage holds no initialised mbarrier (first
    ///    initialisation of this expansion in the block, or invalidated since).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn init(self, count: u32) -> MBarrier {
        // SAFETY: the caller's contract.
        unsafe { self.init_all(count) }.get(0)
    }
}

/// `N` initialised mbarriers in shared memory (from [`MBarrierStorage::init_all`]): one per
/// pipeline stage, for instance.
#[derive(Clone, Copy, Debug)]
pub struct MBarriers<const N: usize> {
    base: u32,
}

impl<const N: usize> MBarriers<N> {
    /// Barrier `i`; an out-of-bounds `i` aborts the kernel.
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, i: usize) -> MBarrier {
        if i >= N {
            fail();
        }
        MBarrier {
            addr: self.base + 8 * i as u32,
        }
    }

    /// The number of barriers.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        N
    }

    /// Always `false` (storage holds at least one barrier).
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        false
    }
}

/// The phase of an mbarrier a thread waits for next, as its parity (see the
/// [module docs](self)). Neither `Copy` nor `Clone`: [`MBarrier::wait`] consumes it and
/// returns the next one, so each waiter's phase advances exactly once per completed wait.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a Phase is the next phase to wait for; dropping it loses track of the barrier"]
pub struct Phase {
    parity: u32,
}

impl Phase {
    /// Phase 0, the first phase after initialisation (parity 0).
    #[inline(always)]
    pub const fn first() -> Phase {
        Phase { parity: 0 }
    }

    /// The parity (0 or 1) the PTX instructions take.
    #[inline(always)]
    pub const fn parity(&self) -> u32 {
        self.parity
    }

    /// The next phase, without waiting: for a thread that knows this phase has completed
    /// (it arrived last, or a later phase it waited for implies it) or that does not take part
    /// in it.
    #[inline(always)]
    pub const fn skip(self) -> Phase {
        Phase {
            parity: self.parity ^ 1,
        }
    }
}

/// The opaque state [`MBarrier::arrive`] returns: the phase it arrived in (PTX's `state`
/// operand). [`MBarrier::wait_token`] waits for that phase to complete; valid while the
/// barrier is in that phase or the next one.
#[derive(Clone, Copy, Debug)]
pub struct ArrivalToken(u64);

impl ArrivalToken {
    /// The raw 64-bit state (implementation-specific bits).
    #[inline(always)]
    pub const fn raw(self) -> u64 {
        self.0
    }
}

/// A handle to an initialised mbarrier in this block's shared memory (a 32-bit shared-window
/// address). `Copy`: pass it to the functions that use it. See the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MBarrier {
    addr: u32,
}

/// Runs a predicate-producing mbarrier instruction `$instr p, [a], <operand>;` and returns `p`.
#[cfg(target_arch = "nvptx64")]
macro_rules! test_asm {
    ($instr:literal, $a:expr, $op:ident = $reg:ident $v:expr) => {{
        let r: u32;
        // SAFETY: an initialised mbarrier (the handle's invariant); the asm is a compiler
        // barrier for memory, as the acquire it performs requires.
        unsafe {
            ::core::arch::asm!(
                concat!("{{ .reg .pred p; ", $instr, " p, [{a}], {", stringify!($op), "}; selp.u32 {r}, 1, 0, p; }}"),
                a = in(reg32) $a,
                $op = in($reg) $v,
                r = out(reg32) r,
                options(nostack),
            )
        };
        r != 0
    }};
}

/// Runs the arrival `mbarrier.$op` on the barrier at shared address `$a` — release at CTA
/// scope where the target has the qualifiers (sm_90; the default semantics before) — and
/// returns the phase token.
#[cfg(target_arch = "nvptx64")]
macro_rules! arrive_asm {
    ($op:literal, $a:expr) => {{
        let s: u64;
        // SAFETY: an initialised mbarrier (the handle's invariant); the asm is a compiler
        // barrier for memory, as the release requires.
        unsafe {
            #[cfg(target_feature = "sm_90")]
            ::core::arch::asm!(concat!("mbarrier.", $op, ".release.cta.shared::cta.b64 {s}, [{a}];"),
                s = out(reg64) s, a = in(reg32) $a, options(nostack));
            #[cfg(not(target_feature = "sm_90"))]
            ::core::arch::asm!(concat!("mbarrier.", $op, ".shared.b64 {s}, [{a}];"),
                s = out(reg64) s, a = in(reg32) $a, options(nostack));
        }
        ArrivalToken(s)
    }};
}

impl MBarrier {
    /// The handle of an initialised mbarrier at `ptr`, e.g. in dynamic shared memory
    /// (initialised with [`init`]). Aborts if `ptr` is not 8-byte aligned.
    ///
    /// # Safety
    ///
    /// 1. `ptr` points into this block's shared memory.
    /// 2. The mbarrier there is initialised, and the initialisation is visible to this thread
    ///    (a block barrier after [`init`]), whenever the handle is used; it is not invalidated
    ///    while a handle is in use.
    /// 3. The 8 bytes are accessed by mbarrier operations only, while initialised.
    #[inline(always)]
    #[track_caller]
    #[gpu_only]
    pub unsafe fn from_shared_ptr(ptr: *mut u64) -> MBarrier {
        if !(ptr as usize).is_multiple_of(8) {
            fail();
        }
        MBarrier {
            addr: shared_addr_of(ptr),
        }
    }

    /// The 32-bit shared-window address of the barrier (for hand-written `asm!`, e.g. a TMA
    /// copy's completion barrier).
    #[inline(always)]
    pub const fn shared_addr(&self) -> u32 {
        self.addr
    }

    /// Arrives (`mbarrier.arrive`, release at CTA scope): one of the expected arrivals of the
    /// current phase. Returns the token of the phase it arrived in. Does not wait.
    #[inline(always)]
    #[gpu_only]
    pub fn arrive(&self) -> ArrivalToken {
        arrive_asm!("arrive", self.addr)
    }

    /// Arrives on the barrier at this barrier's shared offset **in the block of cluster rank
    /// `rank`** (`mapa.shared::cluster` then `mbarrier.arrive.shared::cluster`, release at CTA
    /// scope, as CUTLASS's `ClusterBarrier::arrive(cta_id, pred)`): one of the expected
    /// arrivals of that barrier's current phase. `rank` may be this block's own. Does not
    /// wait. An sm_90 instruction: for kernels built for sm_90 or newer (`#[kernel(arch =
    /// "sm_90")]`; the builder refuses it in an older module).
    ///
    /// The use it serves is a consumer telling a peer's producer that a stage of this block's
    /// shared memory, which the peer's TMA multicast refills, is no longer read (the reads were
    /// the tensor cores', completed by `wgmma.wait_group`), which needs no cluster scope. With
    /// the arrival released at cluster scope (`.release.cluster`, which also orders the
    /// thread's earlier global stores) and the producer's wait acquired at cluster scope, the
    /// `linear` GEMM ran markedly slower (BENCHMARKS.md, the GEMM section).
    ///
    /// # Safety
    ///
    /// 1. The kernel runs in clusters (`#[kernel(cluster = …)]`) of more than `rank` blocks.
    /// 2. The barrier at this offset in block `rank` is initialised, its initialisation made
    ///    visible cluster-wide before this arrival ([`fence_mbarrier_init`] by the
    ///    initialising thread, then a cluster barrier), and not invalidated.
    /// 3. Block `rank` has not exited: it waits at a cluster barrier after its last use of
    ///    the barrier, which this thread reaches after this arrival.
    #[inline(always)]
    #[gpu_only]
    pub unsafe fn arrive_cluster(&self, rank: u32) {
        // SAFETY: the caller's contract (a barrier of a running block of the cluster).
        unsafe {
            asm!(
                "{{ .reg .b32 ra; mapa.shared::cluster.u32 ra, {a}, {r}; \
                 mbarrier.arrive.shared::cluster.b64 _, [ra]; }}",
                a = in(reg32) self.addr,
                r = in(reg32) rank,
                options(nostack),
            )
        }
    }

    /// Arrives and leaves the protocol (`mbarrier.arrive_drop`, release at CTA scope): one
    /// arrival of the current phase, and the expected count of every later phase is one less.
    /// For a thread that exits early or stops taking part.
    ///
    /// # Safety
    ///
    /// 1. The expected arrival count stays at least 1 (PTX leaves a count of 0 undefined):
    ///    fewer `arrive_drop`s over the barrier's life than its initial count.
    #[inline(always)]
    #[gpu_only]
    pub unsafe fn arrive_drop(&self) -> ArrivalToken {
        // The count is the caller's contract.
        arrive_asm!("arrive_drop", self.addr)
    }

    /// Tests, without blocking, whether `phase` has completed (`mbarrier.test_wait.parity`,
    /// acquire at CTA scope when it has): `Ok(next phase)` if it has — the arriving threads'
    /// earlier accesses are then visible — else `Err(phase)` unchanged.
    #[inline(always)]
    #[gpu_only]
    pub fn test_wait(&self, phase: Phase) -> Result<Phase, Phase> {
        #[cfg(target_feature = "sm_90")]
        let done = test_asm!(
            "mbarrier.test_wait.parity.acquire.cta.shared::cta.b64",
            self.addr,
            par = reg32 phase.parity
        );
        #[cfg(not(target_feature = "sm_90"))]
        let done = test_asm!(
            "mbarrier.test_wait.parity.shared.b64",
            self.addr,
            par = reg32 phase.parity
        );
        if done {
            Ok(phase.skip())
        } else {
            Err(phase)
        }
    }

    /// Waits until `phase` has completed and returns the next phase (the thread's next wait).
    /// Acquire at CTA scope: every memory access an arriving thread made before its arrive in
    /// `phase` is visible afterwards. Built for sm_90 it polls with `mbarrier.try_wait.parity`
    /// (the hardware may suspend the thread until the phase completes), for sm_80 with
    /// `mbarrier.test_wait.parity`.
    #[inline(always)]
    pub fn wait(&self, phase: Phase) -> Phase {
        let mut phase = phase;
        loop {
            #[cfg(target_feature = "sm_90")]
            let r = self.try_wait(phase);
            #[cfg(not(target_feature = "sm_90"))]
            let r = self.test_wait(phase);
            match r {
                Ok(next) => return next,
                Err(same) => phase = same,
            }
        }
    }

    /// Arrives, then waits for the phase it arrived in (`cuda::barrier::arrive_and_wait`);
    /// `phase` must be that phase (this thread's current one). Returns the next phase.
    #[inline(always)]
    pub fn arrive_and_wait(&self, phase: Phase) -> Phase {
        self.arrive();
        self.wait(phase)
    }

    /// Tests, without blocking, whether the phase `token` arrived in has completed
    /// (`mbarrier.test_wait` with the state operand, acquire at CTA scope when it has).
    #[inline(always)]
    #[gpu_only]
    pub fn test_wait_token(&self, token: ArrivalToken) -> bool {
        #[cfg(target_feature = "sm_90")]
        let done = test_asm!(
            "mbarrier.test_wait.acquire.cta.shared::cta.b64",
            self.addr,
            state = reg64 token.0
        );
        #[cfg(not(target_feature = "sm_90"))]
        let done = test_asm!("mbarrier.test_wait.shared.b64", self.addr, state = reg64 token.0);
        done
    }

    /// Waits until the phase `token` arrived in has completed (`cuda::barrier::wait`).
    #[inline(always)]
    pub fn wait_token(&self, token: ArrivalToken) {
        while !self.test_wait_token(token) {}
    }

    /// Makes the barrier track this thread's `cp.async` copies issued so far
    /// (`cp.async.mbarrier.arrive.shared.b64`): when they are all complete, the hardware
    /// arrives on the barrier; the pending count is raised by one first, so the net count of
    /// the current phase is unchanged and the thread still arrives itself. A waiter of the
    /// phase then sees the copies (no `wait_group`, no block barrier).
    ///
    /// # Safety
    ///
    /// 1. The barrier's pending count stays at most [`MAX_COUNT`] (the expected count plus
    ///    the number of these arrivals in flight at once); PTX leaves more undefined.
    #[inline(always)]
    #[gpu_only]
    pub unsafe fn cp_async_arrive(&self) {
        // SAFETY: an initialised mbarrier; the count is the caller's contract.
        unsafe {
            asm!("cp.async.mbarrier.arrive.shared.b64 [{a}];", a = in(reg32) self.addr, options(nostack))
        }
    }

    /// Makes the barrier track this thread's `cp.async` copies issued so far and count their
    /// completion as one of the phase's expected arrivals
    /// (`cp.async.mbarrier.arrive.noinc.shared.b64`): when the copies are all complete, the
    /// hardware arrives on the barrier. The expected count must include these arrivals (e.g.
    /// `threads` copying threads that also arrive themselves: `2 * threads`, or `threads` if
    /// they only call this). A thread whose wait for the phase returns sees the copies — no
    /// `wait_group` and no block barrier.
    #[inline(always)]
    #[gpu_only]
    pub fn cp_async_arrive_noinc(&self) {
        // SAFETY: an initialised mbarrier; the arrival is asynchronous and counted like any
        // other (the handle stays valid: invalidation is unsafe and excludes pending ones).
        unsafe {
            asm!("cp.async.mbarrier.arrive.noinc.shared.b64 [{a}];", a = in(reg32) self.addr, options(nostack))
        }
    }

    /// Invalidates the barrier (`mbarrier.inval`), so that its memory can be used for
    /// something else or initialised again.
    ///
    /// # Safety
    ///
    /// 1. One thread invalidates it, after a block barrier that follows every other use of
    ///    the barrier by any thread, and no `cp.async` arrival or transaction
    ///    ([`cp_async_arrive`](Self::cp_async_arrive), a TMA copy) is still pending on it.
    /// 2. No handle to it is used afterwards (until its storage is initialised again, after a
    ///    block barrier).
    #[inline(always)]
    #[gpu_only]
    pub unsafe fn inval(&self) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!("mbarrier.inval.shared.b64 [{a}];", a = in(reg32) self.addr, options(nostack))
        }
    }
}

/// The sm_90 operations: transaction counts (for TMA copies) and the potentially blocking
/// wait.
impl MBarrier {
    /// Tests whether `phase` has completed, suspending the thread for a while if it has not
    /// (`mbarrier.try_wait.parity.acquire.cta`, sm_90): `Ok(next phase)` or `Err(phase)` after
    /// a system-dependent time limit. An sm_90 instruction: for kernels built for sm_90 or newer (`#[kernel(arch = "sm_90")]`; the builder refuses it in an older module).
    #[inline(always)]
    #[gpu_only]
    pub fn try_wait(&self, phase: Phase) -> Result<Phase, Phase> {
        let done = test_asm!(
            "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64",
            self.addr,
            par = reg32 phase.parity
        );
        if done {
            Ok(phase.skip())
        } else {
            Err(phase)
        }
    }

    /// Expects `bytes` more bytes of asynchronous transactions in the current phase, then
    /// arrives (`mbarrier.arrive.expect_tx.release.cta`, sm_90): the phase completes once its
    /// arrivals are done **and** that many bytes have completed (a TMA copy signalling this
    /// barrier, or [`complete_tx`](Self::complete_tx)). The usual producer call before a TMA
    /// load. An sm_90 instruction: for kernels built for sm_90 or newer (`#[kernel(arch = "sm_90")]`; the builder refuses it in an older module).
    ///
    /// # Safety
    ///
    /// 1. The phase's transaction count stays within ±[`MAX_COUNT`] (`bytes` ≤ 2²⁰ − 1 and the
    ///    phase's expectations not exceeding it together); PTX leaves more undefined.
    #[inline(always)]
    #[gpu_only]
    pub unsafe fn arrive_expect_tx(&self, bytes: u32) -> ArrivalToken {
        let s: u64;
        // SAFETY: an initialised mbarrier; the count is the caller's contract.
        unsafe {
            asm!(
                "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 {s}, [{a}], {t};",
                s = out(reg64) s,
                a = in(reg32) self.addr,
                t = in(reg32) bytes,
                options(nostack),
            )
        };
        ArrivalToken(s)
    }

    /// Expects `bytes` more bytes of asynchronous transactions in the current phase, without
    /// arriving (`mbarrier.expect_tx.relaxed.cta`, sm_90; relaxed: it orders no memory). Built
    /// for sm_90 or newer.
    ///
    /// # Safety
    ///
    /// 1. As [`arrive_expect_tx`](Self::arrive_expect_tx): the transaction count stays within
    ///    ±[`MAX_COUNT`].
    #[inline(always)]
    #[gpu_only]
    pub unsafe fn expect_tx(&self, bytes: u32) {
        // SAFETY: an initialised mbarrier; the count is the caller's contract.
        unsafe {
            asm!(
                "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [{a}], {t};",
                a = in(reg32) self.addr,
                t = in(reg32) bytes,
                options(nostack),
            )
        }
    }

    /// Marks `bytes` bytes of the current phase's expected transactions complete, as a TMA
    /// copy does when it lands (`mbarrier.complete_tx.relaxed.cta`, sm_90; relaxed: it
    /// publishes no memory — data written by threads is published by their arrive). Built for
    /// sm_90 or newer.
    ///
    /// # Safety
    ///
    /// 1. As [`arrive_expect_tx`](Self::arrive_expect_tx): the transaction count stays within
    ///    ±[`MAX_COUNT`].
    #[inline(always)]
    #[gpu_only]
    pub unsafe fn complete_tx(&self, bytes: u32) {
        // SAFETY: an initialised mbarrier; the count is the caller's contract.
        unsafe {
            asm!(
                "mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [{a}], {t};",
                a = in(reg32) self.addr,
                t = in(reg32) bytes,
                options(nostack),
            )
        }
    }
}

/// Initialises the mbarrier at `ptr` with the expected arrival count `count`
/// (`mbarrier.init.shared.b64`) — the raw form, run by one thread, for storage the caller
/// manages (dynamic shared memory); aborts if `count` is not in `1..=MAX_COUNT`. Other threads
/// may use it after a block barrier (or, within a cluster, [`fence_mbarrier_init`] and a
/// cluster barrier), through [`MBarrier::from_shared_ptr`].
///
/// # Safety
///
/// 1. `ptr` points to 8 bytes of this block's shared memory, 8-byte aligned.
/// 2. Those bytes hold no initialised mbarrier (never initialised in this block, or
///    invalidated since), and no thread accesses them meanwhile.
#[inline(always)]
#[track_caller]
#[gpu_only]
pub unsafe fn init(ptr: *mut u64, count: u32) {
    if count == 0 || count > MAX_COUNT {
        fail();
    }
    // SAFETY: the caller's contract.
    unsafe {
        asm!(
            "mbarrier.init.shared.b64 [{a}], {c};",
            a = in(reg32) shared_addr_of(ptr),
            c = in(reg32) count,
            options(nostack),
        )
    }
}

/// `fence.proxy.async.shared::cta` (sm_90): orders this thread's generic-proxy accesses to
/// shared memory (ordinary loads and stores) with later async-proxy ones (TMA copies,
/// `cp.async.bulk`) — e.g. before a TMA store reads a tile threads wrote, or before threads
/// reuse a buffer a TMA load wrote. An sm_90 instruction: for kernels built for sm_90 or newer (`#[kernel(arch = "sm_90")]`; the builder refuses it in an older module).
#[inline(always)]
pub fn fence_proxy_async_shared() {
    // SAFETY: a fence has no operands and no preconditions.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) }
}

/// `fence.mbarrier_init.release.cluster` (sm_90): makes this thread's prior `mbarrier.init`s
/// visible to the other blocks of the cluster (which arrive on them remotely), together with a
/// cluster barrier. Within one block a block barrier suffices. An sm_90 instruction: for kernels built for sm_90 or newer (`#[kernel(arch = "sm_90")]`; the builder refuses it in an older module).
#[inline(always)]
pub fn fence_mbarrier_init() {
    // SAFETY: a fence has no operands and no preconditions.
    unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) }
}

/// Declares storage for mbarriers in block-shared memory and evaluates to its
/// [`MBarrierStorage`] (see [`mbarrier`](crate::mbarrier)):
///
/// * `shared_mbarrier!()` — one barrier: `unsafe { shared_mbarrier!().init(count) }` is the
///   [`MBarrier`];
/// * `shared_mbarrier!(N)` — `N` barriers: `.init_all(count)` gives [`MBarriers<N>`].
///
/// Every expansion is its own storage (8-byte aligned `u64`s), one per block, as
/// [`shared_array!`](crate::shared_array)'s arrays are.
///
/// ```ignore
/// let full = unsafe { shared_mbarrier!(STAGES).init_all(1) };
/// let empty = unsafe { shared_mbarrier!(STAGES).init_all(CONSUMERS) };
/// ```
///
/// On the host (a kernel crate's `cargo check`, clippy, its host tests) the macro type-checks
/// the same way and evaluates to a panic naming it: there is no block-shared memory there.
#[macro_export]
macro_rules! shared_mbarrier {
    () => {
        $crate::shared_mbarrier!(1)
    };
    ($n:expr $(,)?) => {
        $crate::__shared_mbarrier!($n)
    };
}

/// The expansion of [`shared_mbarrier!`](crate::shared_mbarrier) on the device: a `static` of
/// this expansion in the shared section, and its storage. Not a public API.
#[doc(hidden)]
#[cfg(target_arch = "nvptx64")]
#[macro_export]
macro_rules! __shared_mbarrier {
    ($n:expr) => {{
        #[link_section = $crate::shared_section!()]
        static mut STORAGE: ::core::mem::MaybeUninit<[u64; $n]> =
            ::core::mem::MaybeUninit::uninit();
        // SAFETY: a static of this expansion only, in the shared section: N 8-byte aligned
        // u64 of block-shared memory for the kernel's lifetime, reached only through the
        // storage's handles.
        unsafe {
            $crate::mbarrier::MBarrierStorage::<{ $n }>::from_raw((&raw mut STORAGE).cast::<u64>())
        }
    }};
}

/// The expansion of [`shared_mbarrier!`](crate::shared_mbarrier) on the host: the storage's
/// type, then a panic naming the macro. Not a public API.
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
#[macro_export]
macro_rules! __shared_mbarrier {
    ($n:expr) => {
        $crate::mbarrier::MBarrierStorage::<{ $n }>::__host_stub()
    };
}

#[cfg(not(target_arch = "nvptx64"))]
impl<const N: usize> MBarrierStorage<N> {
    /// What [`shared_mbarrier!`](crate::shared_mbarrier) makes on the host: a panic naming it
    /// (after the same compile-time check of `N` as on the device).
    #[doc(hidden)]
    pub fn __host_stub() -> Self {
        const { assert!(N >= 1, "shared_mbarrier!(N): N >= 1") };
        panic!("`shared_mbarrier!` runs only on the GPU (nvptx64): this is its host stub")
    }
}

// After `test_asm!`, which it uses.
mod ring;
