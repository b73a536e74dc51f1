//! Asynchronous copies from global to shared memory (`cp.async`, sm_80) and a multi-stage
//! pipeline over them (device only).
//!
//! | CUDA C++ / CUTLASS | here |
//! | --- | --- |
//! | `cp.async.cg.shared.global [s], [g], 16, n;` (CUTLASS `cp_async_zfill<16>`) | `tile.copy_async::<16>(i, x, j)` (checked) or [`cg_zfill`] (raw) |
//! | `cp.async.ca.shared.global [s], [g], 4;` (CUTLASS `cp_async<4>`) | `tile.copy_async::<4>(i, x, j)` or [`ca::<4>`](ca) |
//! | `__pipeline_commit()` / `cp.async.commit_group` (CUTLASS `cp_async_fence`) | [`commit_group`] |
//! | `__pipeline_wait_prior(N)` / `cp.async.wait_group N` (CUTLASS `cp_async_wait<N>`) | [`wait_group::<N>`](wait_group) |
//! | `cp.async.wait_all` | [`wait_all`] |
//! | `cuda::pipeline` / CUTLASS's multistage main loop | [`Pipeline<STAGES>`](Pipeline) |
//!
//! A `cp.async` copies 4, 8 or 16 bytes from global memory to shared memory without passing
//! through registers, and without waiting: the thread goes on while the copy is in flight, so
//! a kernel can load tile `k + 1` while it computes on tile `k`. The `.cg` form (16 bytes only)
//! caches in L2 only — the choice for tiles streamed once per block; `.ca` also caches in L1.
//! **Zero-fill**: with a source size `n` below the copy size, only `n` bytes are read and the
//! rest of the destination is zeroed — how a GEMM loads the partial tiles at a matrix's edges
//! without a branch per element.
//!
//! # Thread model
//!
//! * **Per thread, not collective.** Every `cp.async`, `commit_group` and `wait_group` is an
//!   operation of the executing thread alone, under any condition; no convergence is needed.
//!   Each thread has its own sequence of copies and groups: [`commit_group`] closes the
//!   *executing thread's* copies issued since its previous commit into one group (an empty
//!   group if none), and [`wait_group::<N>`](wait_group) waits until at most `N` of the
//!   *executing thread's* most recent groups are still pending — all older ones complete.
//!   Copies not yet committed are not waited for by `wait_group` ([`wait_all`] commits them
//!   first: it is `commit_group` followed by `wait_group 0`).
//! * **Who sees the data when.** A copy's shared-memory writes are visible **to the thread
//!   that issued it** once a `wait_group`/`wait_all` of that thread has covered its group. They
//!   are visible **to the other threads of the block** only after that wait *and* a block
//!   barrier ([`sync_threads`]) that the issuing thread reaches
//!   after its wait and the reading thread reaches before its read (or an mbarrier phase the
//!   issuing thread's [`MBarrier::cp_async_arrive_noinc`](crate::mbarrier::MBarrier::cp_async_arrive_noinc)
//!   completed, see [`mbarrier`](crate::mbarrier)). This is why a cooperative tile load is
//!   `copy; commit; wait; sync_threads()` — [`Pipeline`] does exactly that.
//! * **Races.** Until the wait (and barrier) above, no thread may read or write the
//!   destination bytes: the copy writes them at an unspecified time (reading them returns
//!   old, new or mixed bytes). Two copies to the same destination bytes in flight at once
//!   complete in no defined order. The source is read at an unspecified time between the
//!   `cp.async` and the completion of its group: it must not be written meanwhile.
//! * **Addresses.** The destination is a 32-bit shared-window address
//!   ([`shared_addr`](crate::shared::SharedArray::shared_addr)), the source a global address;
//!   both aligned to the copy size.
//!
//! # Checked and raw forms
//!
//! The shared-array handles copy from a [`Slice`] with every address checked:
//! `tile.copy_async::<BYTES>(i, src, j)` copies `K = BYTES / size_of::<T>()` elements
//! `src[j..j + K]` into `tile[i..i + K]`, zero-filling the elements past `src.len()` (all `K`
//! if `j >= src.len()`); a destination range out of bounds, a misaligned address or a source
//! that is not global memory aborts the kernel with its location ([`diag`](crate::diag)). They
//! are `unsafe` for the one contract no check can see, the same as
//! [`SharedArray::write`]'s: no other thread accesses those elements until the copy is
//! complete and visible (see above). The destination must be aligned to the copy size:
//! declare the array with `align = 16` (`shared_array!(f32, 1024, align = 16)`,
//! `shared_array!(f32, [64, 68], align = 16)`) or use dynamic shared memory (16-byte
//! aligned). [`ca`], [`ca_zfill`], [`cg`] and [`cg_zfill`] are the raw instructions.
//!
//! # Example: a block-wide tile load
//!
//! ```ignore
//! let tile = shared_array!(f32, 1024, align = 16);
//! let t = thread::thread_idx().x as usize;          // 256 threads, 4 floats each
//! // SAFETY: each thread copies its own 4 elements; nobody reads them before the barrier.
//! unsafe { tile.copy_async::<16>(4 * t, x, base + 4 * t) };
//! cp_async::commit_group();
//! cp_async::wait_group::<0>();
//! thread::sync_threads();                            // now every thread may read `tile`
//! ```

use crate::diag::fail;
#[cfg(target_arch = "nvptx64")]
use crate::shared::shared_addr_of;
use crate::shared::{DynamicSharedArray, SharedArray, SharedArray2, SharedElement};
use crate::thread::sync_threads;
use core::arch::asm;
use ferrocuda_abi::Slice;
use ferrocuda_macros::gpu_only;

/// `cvta.to.global` then `cp.async.<op>.shared.global [dst], [src], BYTES{, n};`, one `asm!` per
/// copy size (the size is an immediate of the instruction).
#[cfg(target_arch = "nvptx64")]
macro_rules! cp_async_asm {
    ($op:literal, $dst:expr, $src:expr, $bytes:ident) => {
        match $bytes {
            4 => cp_async_asm!(@ $op, "4", $dst, $src),
            8 => cp_async_asm!(@ $op, "8", $dst, $src),
            _ => cp_async_asm!(@ $op, "16", $dst, $src),
        }
    };
    ($op:literal, $dst:expr, $src:expr, $bytes:ident, $n:expr) => {
        match $bytes {
            4 => cp_async_asm!(@ $op, "4", $dst, $src, $n),
            8 => cp_async_asm!(@ $op, "8", $dst, $src, $n),
            _ => cp_async_asm!(@ $op, "16", $dst, $src, $n),
        }
    };
    (@ $op:literal, $b:literal, $dst:expr, $src:expr) => {
        asm!(
            "cvta.to.global.u64 {s}, {s};",
            concat!("cp.async.", $op, ".shared.global [{d}], [{s}], ", $b, ";"),
            d = in(reg32) $dst,
            s = inout(reg64) $src as u64 => _,
            options(nostack),
        )
    };
    (@ $op:literal, $b:literal, $dst:expr, $src:expr, $n:expr) => {
        asm!(
            "cvta.to.global.u64 {s}, {s};",
            concat!("cp.async.", $op, ".shared.global [{d}], [{s}], ", $b, ", {n};"),
            d = in(reg32) $dst,
            s = inout(reg64) $src as u64 => _,
            n = in(reg32) $n,
            options(nostack),
        )
    };
}

/// The copy sizes `cp.async` has.
#[cfg(target_arch = "nvptx64")]
const fn valid_size(bytes: usize) -> bool {
    bytes == 4 || bytes == 8 || bytes == 16
}

/// `cp.async.ca.shared.global [dst], [src], BYTES;` — copies `BYTES` (4, 8 or 16) bytes from
/// global memory at `src` to shared memory at `dst`, caching in L1 and L2, asynchronously.
///
/// # Safety
///
/// 1. `dst` is the shared-window address ([`shared_addr`](SharedArray::shared_addr)) of
///    `BYTES` bytes of this block's shared memory, aligned to `BYTES`.
/// 2. `src` points to `BYTES` readable bytes of global (device) memory, aligned to `BYTES`,
///    that no thread writes until the copy's group is complete.
/// 3. No thread accesses the destination bytes until the copy is complete and visible to it
///    (the issuing thread: after a [`wait_group`] covering it; other threads: after that and
///    a block barrier — see the [module docs](self)).
#[inline(always)]
#[gpu_only]
pub unsafe fn ca<const BYTES: usize>(dst: u32, src: *const impl Sized) {
    const { assert!(valid_size(BYTES), "cp.async copies 4, 8 or 16 bytes") };
    // SAFETY: the caller's contract.
    unsafe { cp_async_asm!("ca", dst, src, BYTES) }
}

/// `cp.async.ca.shared.global [dst], [src], BYTES, src_bytes;` — as [`ca`], but reads only the
/// first `src_bytes` bytes at `src` and fills the remaining `BYTES - src_bytes` bytes of the
/// destination with zeros (`src_bytes == 0`: all zeros, nothing is read; `src_bytes ==
/// BYTES`: the whole copy, as [`ca`]). One instruction for any `src_bytes`, so that a loader
/// whose chunks are whole, partial or empty by lane needs no lane-dependent branch. (The PTX
/// ISA's text asks for a `src-size` below the copy size and calls a larger one undefined;
/// CUTLASS's `SM80_CP_ASYNC_*_ZFILL` copies pass the full size or 0 alike, and so may this.)
///
/// # Safety
///
/// 1. `src_bytes <= BYTES`.
/// 2. `dst` is the shared-window address of `BYTES` bytes of this block's shared memory,
///    aligned to `BYTES`.
/// 3. `src` is aligned to `BYTES` and its first `src_bytes` bytes are readable global memory
///    that no thread writes until the copy's group is complete.
/// 4. No thread accesses the destination bytes until the copy is complete and visible to it
///    (see [`ca`] and the [module docs](self)).
#[inline(always)]
#[gpu_only]
pub unsafe fn ca_zfill<const BYTES: usize>(dst: u32, src: *const impl Sized, src_bytes: u32) {
    const { assert!(valid_size(BYTES), "cp.async copies 4, 8 or 16 bytes") };
    // SAFETY: the caller's contract.
    unsafe { cp_async_asm!("ca", dst, src, BYTES, src_bytes) }
}

/// `cp.async.cg.shared.global [dst], [src], 16;` — copies 16 bytes from global to shared
/// memory, caching in L2 only (the form for tiles read once per block).
///
/// # Safety
///
/// As [`ca`] with `BYTES = 16`:
///
/// 1. `dst` is the shared-window address of 16 bytes of this block's shared memory, aligned
///    to 16.
/// 2. `src` points to 16 readable bytes of global memory, aligned to 16, that no thread writes
///    until the copy's group is complete.
/// 3. No thread accesses the destination bytes until the copy is complete and visible to it.
#[inline(always)]
#[gpu_only]
pub unsafe fn cg(dst: u32, src: *const impl Sized) {
    const B: usize = 16;
    // SAFETY: the caller's contract.
    unsafe { cp_async_asm!("cg", dst, src, B) }
}

/// `cp.async.cg.shared.global [dst], [src], 16, src_bytes;` — as [`cg`], reading only
/// `src_bytes` bytes and zero-filling the rest of the 16 (`src_bytes == 16`: the whole copy;
/// see [`ca_zfill`]).
///
/// # Safety
///
/// As [`ca_zfill`] with `BYTES = 16`:
///
/// 1. `src_bytes <= 16`.
/// 2. `dst` is the shared-window address of 16 bytes of this block's shared memory, aligned
///    to 16.
/// 3. `src` is aligned to 16 and its first `src_bytes` bytes are readable global memory that no
///    thread writes until the copy's group is complete.
/// 4. No thread accesses the destination bytes until the copy is complete and visible to it.
#[inline(always)]
#[gpu_only]
pub unsafe fn cg_zfill(dst: u32, src: *const impl Sized, src_bytes: u32) {
    const B: usize = 16;
    // SAFETY: the caller's contract.
    unsafe { cp_async_asm!("cg", dst, src, B, src_bytes) }
}

/// `cp.async.commit_group`: closes this thread's copies issued since its previous commit into
/// one group (an empty group if there are none), for [`wait_group`] to wait on.
#[inline(always)]
pub fn commit_group() {
    // SAFETY: no operands; bookkeeping of this thread's copies.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) }
}

/// `cp.async.wait_group N`: waits until at most `N` (0 to 7) of this thread's most recently
/// committed groups are pending; every older group of this thread is then complete and its
/// writes visible to this thread (to the block after a barrier). `wait_group::<0>()` waits for
/// every committed group. Copies not yet committed are not waited for.
#[inline(always)]
pub fn wait_group<const N: u32>() {
    const { assert!(N <= 7, "wait_group::<N>: N is 0 to 7") };
    wait_pending(N)
}

/// `cp.async.wait_group n` for an `n` that is a constant after inlining (one instruction);
/// `n > 7` waits for 7 (more than is asked: still correct).
#[inline(always)]
fn wait_pending(n: u32) {
    // SAFETY: waiting has no preconditions; the asm is a compiler barrier for memory, so no
    // shared-memory access moves above it.
    unsafe {
        match n {
            0 => asm!("cp.async.wait_group 0;", options(nostack)),
            1 => asm!("cp.async.wait_group 1;", options(nostack)),
            2 => asm!("cp.async.wait_group 2;", options(nostack)),
            3 => asm!("cp.async.wait_group 3;", options(nostack)),
            4 => asm!("cp.async.wait_group 4;", options(nostack)),
            5 => asm!("cp.async.wait_group 5;", options(nostack)),
            6 => asm!("cp.async.wait_group 6;", options(nostack)),
            _ => asm!("cp.async.wait_group 7;", options(nostack)),
        }
    }
}

/// `cp.async.wait_all`: commits this thread's outstanding copies and waits for all of them
/// (`commit_group` + `wait_group 0`).
#[inline(always)]
pub fn wait_all() {
    // SAFETY: as `wait_group`.
    unsafe { asm!("cp.async.wait_all;", options(nostack)) }
}

/// Whether a generic address points to global memory (`isspacep.global`).
#[inline(always)]
#[gpu_only]
fn is_global<T>(p: *const T) -> bool {
    let r: u32;
    // SAFETY: tests an address; no memory access.
    unsafe {
        asm!(
            "{{ .reg .pred g; isspacep.global g, {p}; selp.u32 {r}, 1, 0, g; }}",
            p = in(reg64) p as u64,
            r = out(reg32) r,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    r != 0
}

/// 16 aligned bytes of global memory: the source operand of a checked copy that reads nothing.
#[cfg(target_arch = "nvptx64")]
#[repr(C, align(16))]
struct Zeros([u8; 16]);
#[cfg(target_arch = "nvptx64")]
static ZEROS: Zeros = Zeros([0; 16]);

/// The checked copy behind the handles' `copy_async` methods: `K = BYTES / size_of::<T>()`
/// elements of `src` from `from` to the `K` elements of shared memory at `dst` (whose
/// `K` elements the caller has bounds-checked), zero-filling past `src.len()`. `cg`: the `.cg`
/// form when `BYTES` is 16 (a constant after inlining).
#[inline(always)]
#[track_caller]
#[gpu_only]
unsafe fn copy_checked<T: crate::shared::SharedElement, const BYTES: usize>(
    dst: *mut T,
    src: Slice<T>,
    from: usize,
    cg: bool,
) {
    const {
        assert!(valid_size(BYTES), "cp.async copies 4, 8 or 16 bytes");
        assert!(
            size_of::<T>() > 0 && size_of::<T>() <= BYTES && BYTES.is_multiple_of(size_of::<T>()),
            "the copy size must be a multiple of the element size"
        );
    };
    let k = BYTES / size_of::<T>();
    let d = shared_addr_of(dst);
    let valid = src.len().saturating_sub(from).min(k);
    let p = src.as_ptr().wrapping_add(from);
    if !d.is_multiple_of(BYTES as u32)
        || (valid > 0 && (!(p as usize).is_multiple_of(BYTES) || !is_global(p)))
    {
        fail();
    }
    if valid == k {
        // SAFETY: `dst`: K in-bounds shared elements (the caller), aligned (checked); `p`:
        // K elements of the slice, global and aligned (checked); exclusivity: the caller's.
        unsafe {
            if cg && BYTES == 16 {
                self::cg(d, p)
            } else {
                ca::<BYTES>(d, p)
            }
        }
    } else {
        // Nothing past the slice is read. When none of it is (`from >= len`, an empty slice
        // included), the instruction reads nothing (`src-size` 0) and zero-fills; its source
        // operand is then `ZEROS`, 16 aligned bytes of global memory, so that even the address
        // it is given is a valid one. A partial chunk (some elements valid) is not copied with
        // a partial `src-size`: memory checkers take the instruction to read its whole size,
        // past the slice's allocation — this thread loads the valid elements itself and
        // stores them and the zeros into shared memory at once (the copy's group then orders
        // nothing for them; the barrier every reader waits behind does).
        if valid > 0 {
            let mut e = 0;
            while e < k {
                let v = if e < valid {
                    // SAFETY: element `from + e` of the slice (e < valid).
                    unsafe { p.add(e).read() }
                } else {
                    // SAFETY: every bit pattern is a `T` (`SharedElement`).
                    unsafe { core::mem::zeroed() }
                };
                // SAFETY: `dst[e]` is one of the caller's K in-bounds shared elements, which
                // no other thread accesses until the group's consumers are released.
                unsafe { dst.add(e).write(v) };
                e += 1;
            }
            return;
        }
        let p = (&raw const ZEROS).cast::<T>();
        // SAFETY: as above, with nothing read.
        unsafe {
            if cg && BYTES == 16 {
                cg_zfill(d, p, 0)
            } else {
                ca_zfill::<BYTES>(d, p, 0)
            }
        }
    }
}

/// The checked copies of a 1-D handle (`SharedArray`, `DynamicSharedArray`); `$len` is the
/// length expression (`self` in scope).
macro_rules! copy_methods_1d {
    ($len:expr) => {
        /// Copies `K = BYTES / size_of::<T>()` elements `src[from..from + K]` into
        /// `self[i..i + K]` asynchronously (`cp.async`): `.cg` for 16 bytes, `.ca` for 4 and 8
        /// (the only form those sizes have). Elements at or past `src.len()` are filled with
        /// zeros (all `K` when `from >= src.len()`) and never read. The copy belongs to this
        /// thread's next [`commit_group`](crate::cp_async::commit_group).
        ///
        /// Aborts the kernel (location recorded) if `i + K > self.len()`, if the shared address
        /// of element `i` or (when anything is read) the address of `src[from]` is not aligned
        /// to `BYTES`, or if `src` is not global memory.
        ///
        /// # Safety
        ///
        /// 1. No thread accesses `self[i..i + K]` until the copy is complete and visible to it:
        ///    this thread after a [`wait_group`](crate::cp_async::wait_group) that covers the
        ///    copy's group, other threads after that and a block barrier (see
        ///    [`cp_async`](crate::cp_async)), as [`write`](Self::write) requires for a plain
        ///    store.
        #[inline(always)]
        #[track_caller]
        pub unsafe fn copy_async<const BYTES: usize>(&self, i: usize, src: Slice<T>, from: usize) {
            let len = $len(self);
            if i > len || len - i < BYTES / size_of::<T>() {
                fail();
            }
            // SAFETY: `i..i + K` in bounds (checked); the rest is the caller's contract.
            unsafe { copy_checked::<T, BYTES>(self.as_mut_ptr().wrapping_add(i), src, from, true) }
        }

        /// As [`copy_async`](Self::copy_async), always with `.ca` (cached in L1 as well: for
        /// data that other threads of the SM read again soon).
        ///
        /// # Safety
        ///
        /// 1. As [`copy_async`](Self::copy_async): no thread accesses `self[i..i + K]` until
        ///    the copy is complete and visible to it.
        #[inline(always)]
        #[track_caller]
        pub unsafe fn copy_async_ca<const BYTES: usize>(
            &self,
            i: usize,
            src: Slice<T>,
            from: usize,
        ) {
            let len = $len(self);
            if i > len || len - i < BYTES / size_of::<T>() {
                fail();
            }
            // SAFETY: as `copy_async`.
            unsafe { copy_checked::<T, BYTES>(self.as_mut_ptr().wrapping_add(i), src, from, false) }
        }
    };
}

impl<T: SharedElement, const N: usize> SharedArray<T, N> {
    copy_methods_1d!(|_: &Self| N);
}

impl<T: SharedElement> DynamicSharedArray<T> {
    copy_methods_1d!(|s: &Self| s.len());
}

impl<T: SharedElement, const R: usize, const C: usize> SharedArray2<T, R, C> {
    /// Copies `K = BYTES / size_of::<T>()` elements `src[from..from + K]` into row `r`,
    /// columns `c..c + K` asynchronously, zero-filling past `src.len()`: as
    /// [`SharedArray::copy_async`] (`.cg` for 16 bytes, `.ca` for 4 and 8). Aborts the kernel
    /// if `r >= R`, `c + K > C`, an address is misaligned or `src` is not global memory.
    ///
    /// # Safety
    ///
    /// 1. No thread accesses those `K` elements until the copy is complete and visible to it
    ///    (see [`cp_async`](crate::cp_async)).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn copy_async<const BYTES: usize>(
        &self,
        r: usize,
        c: usize,
        src: Slice<T>,
        from: usize,
    ) {
        if r >= R || c > C || C - c < BYTES / size_of::<T>() {
            fail();
        }
        // SAFETY: in bounds (checked); the rest is the caller's contract.
        unsafe {
            copy_checked::<T, BYTES>(self.as_mut_ptr().wrapping_add(r * C + c), src, from, true)
        }
    }
}

/// A multi-stage copy pipeline over `STAGES` (2 to 8) shared-memory buffers, run by the whole
/// block: CUTLASS's multistage main loop and `cuda::pipeline` in spirit. It keeps the stage
/// indices and the number of committed groups, so the loop never spells a `wait_group` count:
///
/// ```ignore
/// let mut pipe = Pipeline::<3>::new();
/// for k in 0..STAGES - 1 {                 // prologue: fill all stages but one
///     let s = pipe.producer_acquire();
///     unsafe { load(s, k) };               // this thread's cp.async copies into stage s
///     pipe.producer_commit();
/// }
/// for k in 0..tiles {
///     let s = pipe.consumer_wait();        // tile k is in stage s, for every thread
///     if k + STAGES - 1 < tiles {          // the same condition in every thread
///         let p = pipe.producer_acquire(); // the stage tile k - 1 used
///         unsafe { load(p, k + STAGES - 1) };
///         pipe.producer_commit();
///     }
///     compute(s);
///     pipe.consumer_release();
/// }
/// ```
///
/// * [`producer_acquire`](Self::producer_acquire) returns the next stage to fill. If that stage
///   was released ([`consumer_release`](Self::consumer_release)) after the block's last barrier
///   of this pipeline, it runs a block barrier first, so no thread still reads it when the new
///   copies start; in the order above (acquire after [`consumer_wait`](Self::consumer_wait))
///   the stage was released before `consumer_wait`'s barrier and no extra barrier is needed —
///   one barrier per tile, as in CUTLASS. The order "acquire, copy, commit, wait, compute,
///   release" is correct too, with a second barrier per tile.
/// * [`producer_commit`](Self::producer_commit) commits this thread's copies as the stage's
///   group.
/// * [`consumer_wait`](Self::consumer_wait) waits for the oldest filled stage — `wait_group n`
///   with `n` the number of groups committed after it: `STAGES - 2` in the order above,
///   `STAGES - 1` when the next stage is acquired first, and `wait_group 0` in the last
///   iterations, when fewer groups follow (waiting for them too is correct, and keeps the
///   count a constant of the instruction) — then runs a block barrier, after which every
///   thread's copies into it are visible to every thread; it returns the stage.
/// * [`consumer_release`](Self::consumer_release) marks that stage free.
///
/// # Thread model
///
/// **Collective over the block**: every thread of the block makes the same sequence of calls
/// (they contain block barriers; a thread that skips one hangs the block, as with
/// [`sync_threads`]), and each thread issues its own part of each stage's copies between
/// `producer_acquire` and `producer_commit`. A stage's contents may be read from
/// `consumer_wait` until `consumer_release`, and written (by the copies) only between
/// `producer_acquire` and the `consumer_wait` that returns it. Acquiring with every stage
/// filled, or waiting with none, aborts the kernel (the caller's sequence is wrong).
#[derive(Debug)]
pub struct Pipeline<const STAGES: usize> {
    /// Stages acquired and committed so far (one group each).
    filled: u32,
    /// Stages released so far.
    released: u32,
    /// How many releases a block barrier of this pipeline has ordered before it.
    fenced: u32,
    /// A stage is acquired and not yet committed.
    open: bool,
}

impl<const STAGES: usize> Default for Pipeline<STAGES> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const STAGES: usize> Pipeline<STAGES> {
    /// An empty pipeline (no stage filled). Every thread of the block makes its own; they
    /// stay equal because every thread makes the same calls.
    #[inline(always)]
    pub const fn new() -> Self {
        const { assert!(STAGES >= 2 && STAGES <= 8, "a Pipeline has 2 to 8 stages") };
        Pipeline {
            filled: 0,
            released: 0,
            fenced: 0,
            open: false,
        }
    }

    /// The number of stages.
    pub const STAGES: usize = STAGES;

    /// The next stage to fill (`0..STAGES`), after a block barrier if that stage was released
    /// since the pipeline's last barrier. Aborts if every stage is filled and unreleased, or a
    /// stage is already acquired.
    #[inline(always)]
    #[track_caller]
    pub fn producer_acquire(&mut self) -> usize {
        if self.open || self.filled - self.released >= STAGES as u32 {
            fail();
        }
        // The stage of fill number `filled` was last used by fill `filled - STAGES`, freed by
        // release number `filled - STAGES + 1`.
        if self.filled >= STAGES as u32 && self.fenced < self.filled - STAGES as u32 + 1 {
            sync_threads();
            self.fenced = self.released;
        }
        self.open = true;
        self.filled as usize % STAGES
    }

    /// Commits this thread's copies since the last commit as the acquired stage's group
    /// ([`commit_group`]). Aborts if no stage is acquired.
    #[inline(always)]
    #[track_caller]
    pub fn producer_commit(&mut self) {
        if !self.open {
            fail();
        }
        commit_group();
        self.open = false;
        self.filled += 1;
    }

    /// Waits until the oldest filled stage is complete in this thread
    /// (`cp.async.wait_group n`, `n` = the groups committed after it when that is
    /// `STAGES - 2` or `STAGES - 1`, else 0), then runs a block barrier:
    /// afterwards every thread's copies into that stage are visible to every thread. Returns
    /// the stage (`0..STAGES`). Aborts if no filled stage is waiting.
    #[inline(always)]
    #[track_caller]
    pub fn consumer_wait(&mut self) -> usize {
        if self.filled == self.released {
            fail();
        }
        // Groups committed after the oldest stage's: STAGES - 2 in CUTLASS's order,
        // STAGES - 1 when the next stage is acquired before this wait, fewer in the last
        // iterations (nothing left to load). `wait_group` needs a constant, so the tail waits
        // for everything: one or two exact instructions and `wait_group 0`, not a switch over
        // every count.
        let after = self.filled - self.released - 1;
        let s = STAGES as u32;
        if after >= s - 1 {
            wait_pending(s - 1);
        } else if after == s - 2 {
            wait_pending(s - 2);
        } else {
            wait_pending(0);
        }
        sync_threads();
        self.fenced = self.released;
        self.released as usize % STAGES
    }

    /// Releases the stage [`consumer_wait`](Self::consumer_wait) returned: the block is done
    /// reading it (the next [`producer_acquire`](Self::producer_acquire) of that stage
    /// orders the reads before the new copies with a barrier, unless one came since).
    #[inline(always)]
    #[track_caller]
    pub fn consumer_release(&mut self) {
        if self.released == self.filled {
            fail();
        }
        self.released += 1;
    }

    /// Waits for every copy of this thread, committed or not ([`wait_all`]), then runs a block
    /// barrier: nothing of the pipeline is in flight afterwards. Call it before the kernel
    /// ends or the buffers are reused for something else if stages may still be filling.
    #[inline(always)]
    pub fn drain(&mut self) {
        wait_all();
        sync_threads();
        self.fenced = self.released;
    }
}
