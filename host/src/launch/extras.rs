//! Kernel extras at launch time: what `#[kernel(zero(…), scratch(…), require(…))]` declares,
//! resolved once with the kernel's signature ([`Signature`]), checked before a launch and
//! carried out around it.
//!
//! * [`Requirement`](crate::module::Requirement)s are checked by
//!   [`check_args`](crate::launch::check_args) — pure, before
//!   any driver call — with an error that names the first argument the condition reads.
//! * Zeroed outputs must be dense (their elements fill their extent); right before the launch
//!   each is cleared with one `cuMemsetD8Async` on the launch stream.
//! * Scratch workspaces ([`ScratchParam`](crate::module::ScratchParam)) are sized by
//!   [`ScratchPlan::new`] when the launch is prepared (their formulas read the grid and the
//!   arguments' lengths); right before the launch one allocation holds them all (each at a
//!   256-byte aligned offset) and one `cuMemsetD8Async` zero-fills it, on the launch stream.
//!   Outside graph capture the allocation is the one the context keeps for that stream (by the
//!   driver's stream id, never reused for another stream; grown with a stream-ordered free and
//!   allocation when a launch needs more, up to `KEPT_MAX_BYTES`, 1 MiB), locked from the memset
//!   through the launch's enqueue: launches that share it are ordered by their stream and cannot
//!   interleave. A kernel whose workspaces all persist (`#[kernel(persist(…))]`,
//!   [`Signature::persist`]) gets the kept workspace without the memset when it was the
//!   workspace's last user, the allocation has not grown, and fewer than `PERSIST_REFILL` (2^20)
//!   of its launches have passed since the fill; otherwise the whole allocation is filled and the
//!   kernel becomes its owner. Under capture, for larger workspaces, and on streams beyond the
//!   first 16 of a context, each launch allocates from the context's stream-ordered pool and
//!   frees right after the launch (graph memory nodes under capture, so a replayed graph owns its
//!   workspace and races with nothing).
//!
//! Cost per launch (host side): nothing for kernels without extras; one memset per zeroed output;
//! for a launch's workspaces, a stream-id query and one memset (none for a persistent kernel's
//! repeated launches; allocate, memset and free under capture) — whether the launch is captured
//! is the plan's, asked once per launch (every plan is made for its launch: a bound launch
//! replans each time). The query costs a small fraction of the stream-ordered allocation and free
//! it replaces (the kept workspaces were measured against them: BENCHMARKS.md, "Measured, without
//! a goal").

use ferrocuda_abi::extras::{Cmp, Operand, Value, NONE, PERSIST_REFILL};

use super::Arg;
use crate::driver::{result as cu, Context, KeptWorkspace, StreamHandle};
use crate::error::{Error, Result};
use crate::interop::cai::ArrayDesc;
use crate::module::{operand_text, Requirement, ScratchParam, Signature, MAX_SCRATCH};
use crate::scalar::Scalar;

/// Alignment of each workspace inside a launch's allocation, in bytes.
pub const SCRATCH_ALIGN: u64 = 256;

/// The array of an array argument.
fn array<'a>(a: &Arg<'a>) -> Option<&'a ArrayDesc> {
    match *a {
        Arg::Array(d) | Arg::Host(d) => Some(d),
        Arg::Scalar(_) => None,
    }
}

fn scalar_value(s: &Scalar) -> Value {
    match *s {
        Scalar::I8(v) => Value::Int(v.into()),
        Scalar::I16(v) => Value::Int(v.into()),
        Scalar::I32(v) => Value::Int(v.into()),
        Scalar::I64(v) => Value::Int(v.into()),
        Scalar::U8(v) => Value::Int(v.into()),
        Scalar::U16(v) => Value::Int(v.into()),
        Scalar::U32(v) => Value::Int(v.into()),
        Scalar::U64(v) => Value::Int(v.into()),
        Scalar::F16(v) => Value::Float(v.to_f64()),
        Scalar::BF16(v) => Value::Float(v.to_f64()),
        Scalar::F32(v) => Value::Float(v.into()),
        Scalar::F64(v) => Value::Float(v),
    }
}

/// The value of `o`, the arrays read through `array` and the scalars through `scalar` (by
/// parameter index); `None` when `o` reads what they do not give (a scalar not known, an array
/// missing, an axis it lacks).
fn value_of<'a>(
    o: Operand,
    array: impl Fn(u8) -> Option<&'a ArrayDesc>,
    scalar: impl Fn(u8) -> Option<Value>,
) -> Option<Value> {
    let int = |v: usize| Value::Int(v as i128);
    match o {
        Operand::Int(v) => Some(Value::Int(v.into())),
        Operand::Scalar(p) => scalar(p),
        Operand::Len(p) => array(p).map(|d| int(d.size())),
        Operand::Dim(p, a) => array(p).and_then(|d| d.shape().get(a as usize).map(|&n| int(n))),
        Operand::Ptr(p) => array(p).map(|d| Value::Int(d.ptr().into())),
    }
}

/// The value of `o` for `args` (checked arguments: kinds and ranks match the parameters, and
/// every axis an operand reads exists: [`missing_axis`]).
fn value(o: Operand, args: &[Arg<'_>]) -> Value {
    let scalar = |p: u8| match args.get(p as usize) {
        Some(Arg::Scalar(s)) => Some(scalar_value(s)),
        _ => None,
    };
    value_of(o, |p| args.get(p as usize).and_then(array), scalar).unwrap_or(Value::Int(0))
}

/// `o` is the address of an empty array (of those `array` gives): it names no memory, so a
/// condition on it (`out.ptr() != x.ptr()`: no aliasing) holds whatever the address (empty
/// arrays often share null).
fn empty_ptr_of<'a>(o: Operand, array: impl Fn(u8) -> Option<&'a ArrayDesc>) -> bool {
    match o {
        Operand::Ptr(p) => array(p).is_some_and(|d| d.size() == 0),
        _ => false,
    }
}

fn empty_ptr(o: Operand, args: &[Arg<'_>]) -> bool {
    empty_ptr_of(o, |p| args.get(p as usize).and_then(array))
}

/// Whether requirement `r` holds as far as the arrays tell (`array`: the array argument of
/// a parameter index, `None` for a scalar): `false` only when every value it reads is an
/// array's — its length, an axis it has, its address — and the condition fails on them; a
/// requirement that reads a scalar or an axis the array lacks is left to the launch's check
/// ([`check`]). For choosing among a family's kernels before their scalars are converted
/// ([`select_for`](super::select::select_for)).
pub(crate) fn holds_on_arrays<'a>(
    r: &Requirement,
    array: impl Fn(u8) -> Option<&'a ArrayDesc> + Copy,
) -> bool {
    let no_scalar = |_: u8| None;
    match (
        value_of(r.lhs, array, no_scalar),
        value_of(r.rhs, array, no_scalar),
    ) {
        (Some(a), Some(b)) => {
            r.cmp.holds(a, b) || [r.lhs, r.rhs].into_iter().any(|o| empty_ptr_of(o, array))
        }
        _ => true,
    }
}

fn value_text(v: Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
    }
}

/// The error for a requirement that reads `x.shape[k]` of an array with `k` axes or fewer:
/// a slice parameter takes C-contiguous arrays of any rank, so its axes are the array's.
fn missing_axis(sig: &Signature, r: &Requirement, args: &[Arg<'_>]) -> Option<Error> {
    [r.lhs, r.rhs].into_iter().find_map(|o| {
        let Operand::Dim(p, axis) = o else {
            return None;
        };
        let d = args.get(p as usize).and_then(array)?;
        let name = &sig.params[p as usize].name;
        (d.ndim() <= axis as usize).then(|| {
            Error::value(format!(
                "kernel `{}` requires {}, which reads axis {axis} of `{name}`; got an array of \
                 shape {:?} ({} {}): pass `{name}` with at least {} axes",
                sig.name,
                r.text,
                d.shape(),
                d.ndim(),
                if d.ndim() == 1 { "axis" } else { "axes" },
                axis as usize + 1
            ))
            .with_arg(name.clone())
        })
    })
}

/// Checks the kernel's requirements and its zeroed outputs' layout against checked `args`.
pub(crate) fn check(sig: &Signature, args: &[Arg<'_>]) -> Result<()> {
    for r in &sig.require {
        if let Some(e) = missing_axis(sig, r, args) {
            return Err(e);
        }
        let (a, b) = (value(r.lhs, args), value(r.rhs, args));
        if r.cmp.holds(a, b) || [r.lhs, r.rhs].into_iter().any(|o| empty_ptr(o, args)) {
            continue;
        }
        let mut got = Vec::new();
        for (o, v) in [(r.lhs, a), (r.rhs, b)] {
            if matches!(o, Operand::Int(_)) || (r.cmp == Cmp::Finite && o == r.rhs) {
                continue;
            }
            got.push(format!(
                "{} = {}",
                operand_text(o, &sig.params),
                value_text(v)
            ));
        }
        let why = if r.message.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.message)
        };
        return Err(Error::value(format!(
            "kernel `{}` requires {}{why}; got {}",
            sig.name,
            r.text,
            got.join(", ")
        ))
        .with_arg(sig.params[r.arg].name.clone()));
    }
    for &z in &sig.zero {
        if let Some(d) = args.get(z).and_then(array) {
            if let Some((lo, hi)) = d.byte_range() {
                if (hi - lo) as usize != d.size() * d.itemsize() {
                    return Err(Error::value(format!(
                        "kernel `{}` zero-fills `{}` before the launch, which needs a \
                         contiguous array (its elements filling its extent); got shape {:?}, \
                         strides {:?} bytes: pass a contiguous array",
                        sig.name,
                        sig.params[z].name,
                        d.shape(),
                        d.byte_strides()
                    ))
                    .with_arg(sig.params[z].name.clone()));
                }
            }
        }
    }
    Ok(())
}

/// The workspaces of one launch: each one's byte offset in the launch's allocation and its
/// element count, and the allocation's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchPlan {
    parts: [(u64, u64); MAX_SCRATCH],
    count: usize,
    bytes: u64,
}

impl ScratchPlan {
    /// No workspace.
    pub const EMPTY: ScratchPlan = ScratchPlan {
        parts: [(0, 0); MAX_SCRATCH],
        count: 0,
        bytes: 0,
    };

    /// The workspaces of `sig` for a launch of `blocks` blocks on `args`.
    pub fn new(sig: &Signature, args: &[Arg<'_>], blocks: u64) -> Result<ScratchPlan> {
        let mut plan = ScratchPlan::EMPTY;
        let too_large =
            |s: &ScratchParam| Error::value(format!("scratch workspace `{}` is too large", s.name));
        for s in &sig.scratch {
            let of_len = if s.len.of == NONE {
                0
            } else {
                args.get(s.len.of as usize)
                    .and_then(array)
                    .map_or(0, |d| d.size() as u64)
            };
            let len = s.len.elements(blocks, of_len).ok_or_else(|| too_large(s))?;
            let bytes = len
                .checked_mul(s.dtype.itemsize() as u64)
                .ok_or_else(|| too_large(s))?;
            let at = plan.bytes.next_multiple_of(SCRATCH_ALIGN);
            plan.parts[plan.count] = (at, len);
            plan.count += 1;
            plan.bytes = at.checked_add(bytes).ok_or_else(|| too_large(s))?;
        }
        Ok(plan)
    }

    /// Total bytes of the launch's allocation.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// (byte offset, element count) of each workspace, in [`Signature::scratch`] order.
    pub fn parts(&self) -> &[(u64, u64)] {
        &self.parts[..self.count]
    }
}

/// Largest workspace kept for a stream between launches (1 MiB: `sum`'s and `cumsum`'s on
/// 2^28 elements need 8 KiB and 256 KiB). A launch that needs more allocates and frees its
/// own — its kernel's run dwarfs the two calls — so that a large workspace is never held
/// after its launch.
pub(crate) const KEPT_MAX_BYTES: usize = 1 << 20;

/// A launch's workspaces: none, an allocation of its own (freed after the launch), or the
/// workspace kept for its stream (locked until the launch is enqueued).
pub(crate) enum Workspace {
    /// The kernel has no scratch parameters.
    None,
    /// Allocated for this launch from the context's pool on the launch stream.
    Owned(u64),
    /// The launch stream's kept workspace, locked.
    Kept(std::sync::MutexGuard<'static, KeptWorkspace>),
}

impl Workspace {
    /// The device address of the allocation (0 for none).
    pub(crate) fn ptr(&self) -> u64 {
        match self {
            Workspace::None => 0,
            Workspace::Owned(p) => *p,
            Workspace::Kept(w) => w.ptr,
        }
    }
}

/// The byte ranges of the zeroed outputs among `args` (`sig.zero`), with each one's parameter
/// index: what [`before_launch`] zero-fills. Empty arrays have none.
pub(crate) fn zeroed_ranges<'s>(
    sig: &'s Signature,
    args: &'s [Arg<'_>],
) -> impl Iterator<Item = (usize, (u64, u64))> + 's {
    sig.zero.iter().filter_map(move |&z| {
        let range = args
            .get(z)
            .and_then(array)
            .and_then(ArrayDesc::byte_range)?;
        Some((z, range))
    })
}

/// Runs the extras' work before the launch on stream `s`: zero-fills the zeroed outputs (`zero`:
/// [`zeroed_ranges`] of the arguments) and provides and zero-fills the workspaces (the
/// stream's kept workspace unless `captured`); [`after_launch`] releases them.
///
/// # Safety
///
/// `ctx` is bound on this thread; `s` is its live launch stream (or a sentinel); `zero` are
/// the byte ranges of the checked zeroed outputs of `sig` (each writable device memory of
/// `ctx`, dense over its extent); `captured` is the launch stream's capture state as asked of
/// the driver for this launch (a plan made for it: [`Kernel::prepare`](crate::Kernel::prepare)
/// or [`Prepared::replan`](crate::Prepared::replan) — a bound launch replans each time).
pub(crate) unsafe fn before_launch(
    ctx: &Context,
    sig: &Signature,
    zero: impl Iterator<Item = (usize, (u64, u64))>,
    plan: &ScratchPlan,
    s: StreamHandle,
    captured: bool,
) -> Result<Workspace> {
    for (z, (lo, hi)) in zero {
        // SAFETY: the caller's contract: a dense, writable device array of this context.
        unsafe { cu::memset_d8_async(lo, 0, (hi - lo) as usize, s) }
            .map_err(|e| e.with_arg(sig.params[z].name.clone()))?;
    }
    if plan.bytes == 0 {
        return Ok(Workspace::None);
    }
    let pool = ctx.scratch_pool()?;
    let bytes = plan.bytes as usize;
    // The stream's kept workspace, outside capture only: a captured launch must never embed
    // the kept workspace in a graph (a replay could race with this stream's launches, or
    // outlive the workspace when it grows). `captured` was asked for this launch (every plan
    // that reaches here is fresh: a bound launch replans per launch).
    let idle = bytes <= KEPT_MAX_BYTES && !captured;
    let kept = if idle {
        // SAFETY: as above.
        unsafe { cu::stream_id(s) }.and_then(|id| ctx.kept_workspace(id))
    } else {
        None
    };
    if let Some(slot) = kept {
        let mut w = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if w.bytes < bytes {
            // Whatever the workspace held is gone: no kernel's state survives a growth.
            w.owner = 0;
            if w.ptr != 0 {
                // SAFETY: every earlier user of the old allocation was enqueued on `s`: the
                // free is ordered after them.
                unsafe { cu::mem_free_async(w.ptr, s) }?;
                w.ptr = 0;
                w.bytes = 0;
            }
            // SAFETY: the pool belongs to `ctx`'s device; the stream is the caller's.
            w.ptr = unsafe { cu::mem_alloc_from_pool_async(bytes, pool.0, s) }?;
            w.bytes = bytes;
        }
        let fill = kept_fill(&mut w, sig.persist, bytes);
        if fill > 0 {
            // SAFETY: `w.ptr` holds `w.bytes ≥ fill` bytes, used only in `s`'s order (the lock
            // is held until this launch is enqueued).
            if let Err(e) = unsafe { cu::memset_d8_async(w.ptr, 0, fill, s) } {
                w.owner = 0;
                return Err(e);
            }
        }
        return Ok(Workspace::Kept(w));
    }
    // SAFETY: the pool belongs to `ctx`'s device; the stream is the caller's.
    let ptr = unsafe { cu::mem_alloc_from_pool_async(bytes, pool.0, s) }?;
    // SAFETY: `ptr` holds `bytes` bytes, used by nothing else in stream order.
    if let Err(e) = unsafe { cu::memset_d8_async(ptr, 0, bytes, s) } {
        // SAFETY: allocated just above on `s`, not used afterwards.
        let _ = unsafe { cu::mem_free_async(ptr, s) };
        return Err(e);
    }
    Ok(Workspace::Owned(ptr))
}

/// The bytes of a stream's kept workspace `w` (grown to hold the launch's `bytes`) to zero-fill
/// before a launch of a kernel whose persistent identity is `persist`
/// ([`Signature::persist`]), and `w`'s owner and launch count updated for it:
///
/// * the kernel's own state from its last launch on the stream, fewer than
///   [`PERSIST_REFILL`] launches since the fill: nothing (the kernel finds what it left);
/// * a persistent kernel new to the workspace (or at the end of the period): the whole
///   allocation, so that a later launch of the kernel needing more of it (up to `w.bytes`)
///   finds zeros there too; the kernel becomes the owner;
/// * any other kernel: the launch's `bytes`, and no owner (the state is the launch's).
pub(crate) fn kept_fill(
    w: &mut KeptWorkspace,
    persist: Option<std::num::NonZeroU64>,
    bytes: usize,
) -> usize {
    match persist {
        Some(id) if w.owner == id.get() && w.launches < PERSIST_REFILL => {
            w.launches += 1;
            0
        }
        Some(id) => {
            w.owner = id.get();
            w.launches = 1;
            w.bytes
        }
        None => {
            w.owner = 0;
            bytes
        }
    }
}

/// Releases a launch's workspaces once the launch is enqueued (or failed): frees an owned
/// allocation (stream-ordered: after the kernel on `s`), unlocks a kept one.
///
/// # Safety
///
/// `w` comes from [`before_launch`] on `s`, and nothing enqueued on another stream uses an
/// owned allocation.
pub(crate) unsafe fn after_launch(w: Workspace, s: StreamHandle) -> Result<()> {
    match w {
        // SAFETY: the caller's contract.
        Workspace::Owned(ptr) => unsafe { cu::mem_free_async(ptr, s) },
        Workspace::None | Workspace::Kept(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    fn kept(bytes: usize) -> KeptWorkspace {
        KeptWorkspace {
            ptr: 0x1000,
            bytes,
            owner: 0,
            launches: 0,
        }
    }

    #[test]
    fn a_persistent_kernel_skips_the_fill_of_its_own_state() {
        let (a, b) = (NonZeroU64::new(7), NonZeroU64::new(8));
        let mut w = kept(4096);
        // New to the kernel: the whole allocation, not only this launch's bytes.
        assert_eq!(kept_fill(&mut w, a, 1024), 4096);
        // Its own state, smaller and larger launches alike (within the allocation).
        assert_eq!(kept_fill(&mut w, a, 256), 0);
        assert_eq!(kept_fill(&mut w, a, 4096), 0);
        // Another persistent kernel takes the workspace over with a fill, and so does the
        // first one after it.
        assert_eq!(kept_fill(&mut w, b, 512), 4096);
        assert_eq!(kept_fill(&mut w, b, 512), 0);
        assert_eq!(kept_fill(&mut w, a, 512), 4096);
        // An ordinary kernel fills its bytes and leaves no owner: the next persistent launch
        // fills again.
        assert_eq!(kept_fill(&mut w, None, 300), 300);
        assert_eq!(kept_fill(&mut w, None, 300), 300);
        assert_eq!(kept_fill(&mut w, a, 512), 4096);
        assert_eq!(kept_fill(&mut w, a, 512), 0);
    }

    #[test]
    fn a_persistent_workspace_is_refilled_every_period() {
        let a = NonZeroU64::new(3);
        let mut w = kept(64);
        let fills = (0..3 * PERSIST_REFILL as usize + 5)
            .filter(|_| kept_fill(&mut w, a, 64) != 0)
            .count();
        // Launches 1, 1 + P, 1 + 2P, 1 + 3P fill; at most P launches run on one fill.
        assert_eq!(fills, 4);
        assert!(w.launches <= PERSIST_REFILL);
    }
}
