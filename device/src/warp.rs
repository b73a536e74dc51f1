//! Warp-level primitives: lane id, masks, shuffles, votes, match, `redux.sync` and the warp
//! barrier (device only). The names are CUDA's (`__shfl_down_sync` is [`shfl_down_sync`]).
//!
//! # Thread model
//!
//! A warp is 32 threads of one block with consecutive linear ranks (see
//! [`thread::rank_in_block`](crate::thread::rank_in_block)); lane `l` is rank `% 32`. The
//! last warp of a block whose size is not a multiple of 32 has fewer lanes.
//!
//! Every `*_sync` function takes a **member mask**, as CUDA's: bit `l` names lane `l`. The
//! calling thread must be in the mask, and every thread named in the mask must call the same
//! function with the same mask (its calls are matched up; the threads need not arrive
//! together — sm_70+ schedules threads independently and the instruction waits for the
//! named ones). A mask that names a lane which does not exist, has exited or never calls
//! is a contract violation: PTX leaves the result undefined (a wrong value or a hang).
//! Reading a lane outside the mask (a shuffle's source) gives an unspecified value.
//!
//! The functions are built on the compiler's NVVM intrinsics, which LLVM treats as
//! *convergent*: it will not move a call into or out of a condition, so the threads that
//! reach it are the threads the source says.
//!
//! **Memory model**: shuffles, votes, match and `redux.sync` exchange register values only;
//! they order no memory accesses. [`sync_warp`] (`bar.warp.sync`) does: memory accesses
//! before it by the threads in the mask are visible to those threads after it.

#[cfg(target_arch = "nvptx64")]
use crate::nvvm;
use ferrocuda_macros::gpu_only;

/// Threads per warp (32 on every NVIDIA GPU; CUDA `warpSize`).
pub const WARP_SIZE: u32 = 32;

/// The mask of every lane of a full warp.
pub const FULL_MASK: u32 = u32::MAX;

// SAFETY (the reads below): reading a special register or the active mask has no
// preconditions.

/// This thread's lane in its warp, `0..32` (`%laneid`).
#[inline(always)]
#[gpu_only]
pub fn lane_id() -> u32 {
    // SAFETY: reading a special register or the active mask has no preconditions.
    unsafe { nvvm::laneid() }
}

/// The lanes of this warp executing this call together (`activemask`; CUDA
/// `__activemask()`). It is a snapshot, not a guarantee that those lanes will execute the
/// next collective together: derive member masks from the program's logic where possible.
#[inline(always)]
#[gpu_only]
pub fn active_mask() -> u32 {
    // SAFETY: reading a special register or the active mask has no preconditions.
    unsafe { nvvm::activemask() }
}

/// The lanes below this one (`%lanemask_lt`).
#[inline(always)]
#[gpu_only]
pub fn lane_mask_lt() -> u32 {
    // SAFETY: reading a special register or the active mask has no preconditions.
    unsafe { nvvm::lanemask_lt() }
}

/// The lanes up to and including this one (`%lanemask_le`).
#[inline(always)]
#[gpu_only]
pub fn lane_mask_le() -> u32 {
    // SAFETY: reading a special register or the active mask has no preconditions.
    unsafe { nvvm::lanemask_le() }
}

/// The lanes above this one (`%lanemask_gt`).
#[inline(always)]
#[gpu_only]
pub fn lane_mask_gt() -> u32 {
    // SAFETY: reading a special register or the active mask has no preconditions.
    unsafe { nvvm::lanemask_gt() }
}

/// The lanes from this one up (`%lanemask_ge`).
#[inline(always)]
#[gpu_only]
pub fn lane_mask_ge() -> u32 {
    // SAFETY: reading a special register or the active mask has no preconditions.
    unsafe { nvvm::lanemask_ge() }
}

/// The mask of lanes `0..n` (`n` ≥ 32 gives the full mask).
#[inline(always)]
pub const fn first_lanes(n: u32) -> u32 {
    if n >= 32 {
        FULL_MASK
    } else {
        (1u32 << n) - 1
    }
}

/// Warp barrier (`bar.warp.sync`; CUDA `__syncwarp(mask)`): waits for the threads in `mask`
/// and orders their memory accesses (see the module's memory model).
#[inline(always)]
#[gpu_only]
pub fn sync_warp(mask: u32) {
    // SAFETY: the mask contract is documented at the module level; no memory preconditions.
    unsafe { nvvm::bar_warp_sync(mask) }
}

/// Values a shuffle can move: 16-, 32- and 64-bit integers and floats, [`f16`](crate::half::f16),
/// [`bf16`](crate::half::bf16) and the packed pairs. A 64-bit value takes two `shfl.sync`.
pub trait Shuffle: Copy {
    /// Applies the 32-bit shuffle `f` to each 32-bit word of `self`.
    #[doc(hidden)]
    fn __per_word(self, f: impl FnMut(u32) -> u32) -> Self;
}

macro_rules! shuffle_words {
    ($(|$x:ident: $t:ty, $f:ident| $body:expr;)*) => {$(
        impl Shuffle for $t {
            #[inline(always)]
            #[allow(unused_mut)] // forwarding impls do not call `f` themselves
            fn __per_word(self, mut $f: impl FnMut(u32) -> u32) -> Self {
                let $x = self;
                $body
            }
        }
    )*};
}
shuffle_words! {
    |x: u32, f| f(x);
    |x: i32, f| f(x as u32) as i32;
    |x: f32, f| f32::from_bits(f(x.to_bits()));
    |x: u64, f| f(x as u32) as u64 | (f((x >> 32) as u32) as u64) << 32;
    |x: i64, f| (x as u64).__per_word(f) as i64;
    |x: f64, f| f64::from_bits(x.to_bits().__per_word(f));
    |x: u16, f| f(x as u32) as u16;
    |x: i16, f| f(x as u16 as u32) as i16;
    |x: crate::half::f16, f| crate::half::f16::from_bits(f(x.to_bits() as u32) as u16);
    |x: crate::half::bf16, f| crate::half::bf16::from_bits(f(x.to_bits() as u32) as u16);
    |x: crate::half::f16x2, f| crate::half::f16x2::from_bits(f(x.to_bits()));
    |x: crate::half::bf16x2, f| crate::half::bf16x2::from_bits(f(x.to_bits()));
}

/// `value` of lane `src_lane` (`shfl.sync.idx`; CUDA `__shfl_sync`). `src_lane` is taken
/// modulo 32.
#[inline(always)]
#[gpu_only]
pub fn shfl_sync<T: Shuffle>(mask: u32, value: T, src_lane: u32) -> T {
    // SAFETY: a register exchange; the mask contract is documented at the module level.
    value.__per_word(|w| unsafe { nvvm::shfl_sync_idx_i32(mask, w, src_lane, 0x1f) })
}

/// `value` of lane `lane - delta`; lanes below `delta` get their own `value`
/// (`shfl.sync.up`; CUDA `__shfl_up_sync`).
#[inline(always)]
#[gpu_only]
pub fn shfl_up_sync<T: Shuffle>(mask: u32, value: T, delta: u32) -> T {
    // SAFETY: as in `shfl_sync`.
    value.__per_word(|w| unsafe { nvvm::shfl_sync_up_i32(mask, w, delta, 0) })
}

/// `value` of lane `lane + delta`; lanes whose source is above 31 get their own `value`
/// (`shfl.sync.down`; CUDA `__shfl_down_sync`).
#[inline(always)]
#[gpu_only]
pub fn shfl_down_sync<T: Shuffle>(mask: u32, value: T, delta: u32) -> T {
    // SAFETY: as in `shfl_sync`.
    value.__per_word(|w| unsafe { nvvm::shfl_sync_down_i32(mask, w, delta, 0x1f) })
}

/// `value` of lane `lane ^ lane_mask` (`shfl.sync.bfly`; CUDA `__shfl_xor_sync`).
#[inline(always)]
#[gpu_only]
pub fn shfl_xor_sync<T: Shuffle>(mask: u32, value: T, lane_mask: u32) -> T {
    // SAFETY: as in `shfl_sync`.
    value.__per_word(|w| unsafe { nvvm::shfl_sync_bfly_i32(mask, w, lane_mask, 0x1f) })
}

/// `true` if `pred` holds in every lane of `mask` (`vote.sync.all`; CUDA `__all_sync`).
#[inline(always)]
#[gpu_only]
pub fn all_sync(mask: u32, pred: bool) -> bool {
    // SAFETY: as in `shfl_sync`.
    unsafe { nvvm::vote_all_sync(mask, pred) }
}

/// `true` if `pred` holds in any lane of `mask` (`vote.sync.any`; CUDA `__any_sync`).
#[inline(always)]
#[gpu_only]
pub fn any_sync(mask: u32, pred: bool) -> bool {
    // SAFETY: as in `shfl_sync`.
    unsafe { nvvm::vote_any_sync(mask, pred) }
}

/// The lanes of `mask` where `pred` holds (`vote.sync.ballot`; CUDA `__ballot_sync`).
#[inline(always)]
#[gpu_only]
pub fn ballot_sync(mask: u32, pred: bool) -> u32 {
    // SAFETY: as in `shfl_sync`.
    unsafe { nvvm::vote_ballot_sync(mask, pred) }
}

/// Values `match.sync` compares (bitwise): 32- and 64-bit integers and floats.
pub trait Match: Copy {
    #[doc(hidden)]
    fn __match_any(self, mask: u32) -> u32;
    #[doc(hidden)]
    fn __match_all(self, mask: u32) -> (u32, bool);
}

macro_rules! match_words {
    ($($t:ty => $w:ty, $any:ident, $all:ident, |$x:ident| $bits:expr;)*) => {$(
        impl Match for $t {
            #[inline(always)]
            #[gpu_only]
            fn __match_any(self, mask: u32) -> u32 {
                let $x = self;
                // SAFETY: as in `shfl_sync`.
                unsafe { nvvm::$any(mask, $bits as $w) }
            }
            #[inline(always)]
            #[gpu_only]
            fn __match_all(self, mask: u32) -> (u32, bool) {
                let $x = self;
                // SAFETY: as in `shfl_sync`.
                unsafe { nvvm::$all(mask, $bits as $w) }
            }
        }
    )*};
}
match_words! {
    u32 => u32, match_any_sync_i32, match_all_sync_i32p, |x| x;
    i32 => u32, match_any_sync_i32, match_all_sync_i32p, |x| x;
    f32 => u32, match_any_sync_i32, match_all_sync_i32p, |x| x.to_bits();
    u64 => u64, match_any_sync_i64, match_all_sync_i64p, |x| x;
    i64 => u64, match_any_sync_i64, match_all_sync_i64p, |x| x;
    f64 => u64, match_any_sync_i64, match_all_sync_i64p, |x| x.to_bits();
}

/// The lanes of `mask` whose `value` is bitwise equal to this lane's (`match.any.sync`;
/// CUDA `__match_any_sync`).
#[inline(always)]
pub fn match_any_sync<T: Match>(mask: u32, value: T) -> u32 {
    value.__match_any(mask)
}

/// `Some(mask)` if every lane of `mask` holds the same `value` (bitwise), else `None`
/// (`match.all.sync`; CUDA `__match_all_sync`).
#[inline(always)]
pub fn match_all_sync<T: Match>(mask: u32, value: T) -> Option<u32> {
    let (m, all) = value.__match_all(mask);
    all.then_some(m)
}

/// Integers `redux.sync` reduces (sm_80): `u32` and `i32` (signed min/max for `i32`).
pub trait Redux: Copy {
    #[doc(hidden)]
    fn __redux(self, op: ReduxOp, mask: u32) -> Self;
}

/// A `redux.sync` operation.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduxOp {
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
}

impl Redux for u32 {
    #[inline(always)]
    #[gpu_only]
    fn __redux(self, op: ReduxOp, mask: u32) -> u32 {
        // SAFETY: as in `shfl_sync`.
        unsafe {
            match op {
                ReduxOp::Add => nvvm::redux_sync_add(self, mask),
                ReduxOp::Min => nvvm::redux_sync_umin(self, mask),
                ReduxOp::Max => nvvm::redux_sync_umax(self, mask),
                ReduxOp::And => nvvm::redux_sync_and(self, mask),
                ReduxOp::Or => nvvm::redux_sync_or(self, mask),
                ReduxOp::Xor => nvvm::redux_sync_xor(self, mask),
            }
        }
    }
}

impl Redux for i32 {
    #[inline(always)]
    #[gpu_only]
    fn __redux(self, op: ReduxOp, mask: u32) -> i32 {
        match op {
            // SAFETY: as in `shfl_sync`.
            ReduxOp::Min => unsafe { nvvm::redux_sync_min(self, mask) },
            // SAFETY: as in `shfl_sync`.
            ReduxOp::Max => unsafe { nvvm::redux_sync_max(self, mask) },
            // Add and the bitwise operations are the same on the two's complement bits.
            _ => (self as u32).__redux(op, mask) as i32,
        }
    }
}

macro_rules! redux_fns {
    ($($name:ident, $op:ident, $cuda:literal, $what:literal;)*) => {$(
        #[doc = concat!("The ", $what, " of `value` over the lanes of `mask`, in every lane of `mask` \
                         (`redux.sync`, sm_80; CUDA `", $cuda, "`). Sums wrap.")]
        #[inline(always)]
        pub fn $name<T: Redux>(mask: u32, value: T) -> T {
            value.__redux(ReduxOp::$op, mask)
        }
    )*};
}
redux_fns! {
    reduce_add_sync, Add, "__reduce_add_sync", "sum";
    reduce_min_sync, Min, "__reduce_min_sync", "minimum";
    reduce_max_sync, Max, "__reduce_max_sync", "maximum";
    reduce_and_sync, And, "__reduce_and_sync", "bitwise and";
    reduce_or_sync, Or, "__reduce_or_sync", "bitwise or";
    reduce_xor_sync, Xor, "__reduce_xor_sync", "bitwise xor";
}
