//! Which types support which atomic operations, and the instruction behind each.
//!
//! The traits are sealed: their hidden methods are the implementation of
//! [`AtomicRef`](super::AtomicRef)'s methods, one PTX instruction where the hardware has one
//! (see the table in the [module docs](super)) and a compare-and-swap loop
//! ([`cas_loop`]) where it does not. The traits and their implementations exist on every
//! target, so that bounds such as `T: AtomicAdd` check on the host; the operations themselves
//! (`asm!`, the device's half-precision arithmetic) are `#[gpu_only]`.

use super::{Order, Scope, Space};
use crate::half::{bf16, bf16x2, f16, f16x2};
use ferrocuda_macros::gpu_only;

mod sealed {
    pub trait Sealed {}
}
use sealed::Sealed;

/// The raw 16-, 32- and 64-bit accesses every atomic type is built on.
#[doc(hidden)]
pub trait RawBits: Copy + PartialEq {
    /// Atomic load.
    ///
    /// # Safety
    ///
    /// `p` is valid and aligned for the access, in state space `sp`.
    unsafe fn ld(p: *const Self, o: Order, sc: Scope, sp: Space) -> Self;
    /// Atomic store. # Safety: as [`RawBits::ld`].
    unsafe fn st(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space);
    /// Compare-and-swap; returns the old value. # Safety: as [`RawBits::ld`].
    unsafe fn cas(p: *mut Self, c: Self, n: Self, o: Order, sc: Scope, sp: Space) -> Self;
    /// Exchange; returns the old value. # Safety: as [`RawBits::ld`].
    #[inline(always)]
    unsafe fn exch(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) -> Self {
        // No 16-bit `atom.exch` in PTX: a CAS loop.
        // SAFETY: forwarded contract.
        let mut cur = unsafe { Self::ld(p, o.load_part(), sc, sp) };
        loop {
            // SAFETY: forwarded contract.
            let old = unsafe { Self::cas(p, cur, v, o, sc, sp) };
            if old == cur {
                return old;
            }
            cur = old;
        }
    }
}

macro_rules! raw_bits {
    ($($b:ty, $ty:literal, $reg:ident, exch: $exch:tt;)*) => {$(
        impl RawBits for $b {
            #[inline(always)]
            #[gpu_only]
            unsafe fn ld(p: *const Self, o: Order, sc: Scope, sp: Space) -> Self {
                dispatch!(acquire_side o, sc, sp => ld_asm!($ty, $reg, p))
            }
            #[inline(always)]
            #[gpu_only]
            unsafe fn st(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) {
                dispatch!(release_side o, sc, sp => st_asm!($ty, $reg, p, v))
            }
            #[inline(always)]
            #[gpu_only]
            unsafe fn cas(p: *mut Self, c: Self, n: Self, o: Order, sc: Scope, sp: Space) -> Self {
                dispatch!(all o, sc, sp => cas_asm!($ty, $reg, p, c, n))
            }
            raw_bits!(@exch $exch $ty $reg);
        }
    )*};
    (@exch native $ty:literal $reg:ident) => {
        #[inline(always)]
        #[gpu_only]
        unsafe fn exch(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) -> Self {
            dispatch!(all o, sc, sp => atom_asm!(".exch", $ty, $reg, p, v))
        }
    };
    (@exch loop $ty:literal $reg:ident) => {};
}
raw_bits! {
    u16, ".b16", reg16, exch: loop;
    u32, ".b32", reg32, exch: native;
    u64, ".b64", reg64, exch: native;
}

/// Types that can be accessed atomically: load, store, swap, compare-and-swap,
/// `fetch_update`. Implemented for `i32`, `u32`, `i64`, `u64`, `f32`, `f64`, [`f16`](crate::half::f16),
/// [`bf16`], [`f16x2`] and [`bf16x2`]; sealed.
pub trait Atomic: Copy + Sealed {
    #[doc(hidden)]
    type Bits: RawBits;
    #[doc(hidden)]
    fn __to_bits(self) -> Self::Bits;
    #[doc(hidden)]
    fn __from_bits(b: Self::Bits) -> Self;
}

macro_rules! atomic_types {
    ($($t:ty => $b:ty, |$x:ident| $to:expr, |$y:ident| $from:expr;)*) => {$(
        impl Sealed for $t {}
        impl Atomic for $t {
            type Bits = $b;
            #[inline(always)]
            fn __to_bits(self) -> $b { let $x = self; $to }
            #[inline(always)]
            fn __from_bits($y: $b) -> Self { $from }
        }
    )*};
}
atomic_types! {
    u32 => u32, |x| x, |y| y;
    i32 => u32, |x| x as u32, |y| y as i32;
    u64 => u64, |x| x, |y| y;
    i64 => u64, |x| x as u64, |y| y as i64;
    f32 => u32, |x| x.to_bits(), |y| f32::from_bits(y);
    f64 => u64, |x| x.to_bits(), |y| f64::from_bits(y);
    f16 => u16, |x| x.to_bits(), |y| f16::from_bits(y);
    bf16 => u16, |x| x.to_bits(), |y| bf16::from_bits(y);
    f16x2 => u32, |x| x.to_bits(), |y| f16x2::from_bits(y);
    bf16x2 => u32, |x| x.to_bits(), |y| bf16x2::from_bits(y);
}

/// The generic read-modify-write: load, then compare-and-swap `f(current)` until no other
/// thread intervened. `Err(current)` when `f` returns `None` (nothing is written).
///
/// # Safety
///
/// `p` is valid and aligned for the access, in state space `sp`.
// Its callers are the device's operation bodies (`#[gpu_only]`).
#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
#[inline(always)]
pub(super) unsafe fn cas_loop<T: Atomic>(
    p: *mut T,
    o: Order,
    sc: Scope,
    sp: Space,
    mut f: impl FnMut(T) -> Option<T>,
) -> Result<T, T> {
    let p = p.cast::<T::Bits>();
    // SAFETY: forwarded contract.
    let mut cur = unsafe { T::Bits::ld(p, o.load_part(), sc, sp) };
    loop {
        let Some(new) = f(T::__from_bits(cur)) else {
            return Err(T::__from_bits(cur));
        };
        // SAFETY: forwarded contract.
        let old = unsafe { T::Bits::cas(p, cur, new.__to_bits(), o, sc, sp) };
        if old == cur {
            return Ok(T::__from_bits(old));
        }
        cur = old;
    }
}

/// Types with atomic addition (and subtraction, as addition of the negation).
pub trait AtomicAdd: Atomic {
    #[doc(hidden)]
    unsafe fn __fetch_add(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) -> Self;
    /// Only called with a relaxed or release order.
    #[doc(hidden)]
    unsafe fn __red_add(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space);
    #[doc(hidden)]
    fn __neg(self) -> Self;
}

/// Types with atomic minimum and maximum.
pub trait AtomicMinMax: Atomic {
    #[doc(hidden)]
    unsafe fn __fetch_min(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) -> Self;
    #[doc(hidden)]
    unsafe fn __fetch_max(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) -> Self;
    /// Only called with a relaxed or release order.
    #[doc(hidden)]
    unsafe fn __red_min(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space);
    /// Only called with a relaxed or release order.
    #[doc(hidden)]
    unsafe fn __red_max(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space);
}

/// Integer types with atomic bitwise and, or, xor.
pub trait AtomicBitwise: Atomic {
    #[doc(hidden)]
    unsafe fn __fetch_bit(op: BitOp, p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space)
        -> Self;
    /// Only called with a relaxed or release order.
    #[doc(hidden)]
    unsafe fn __red_bit(op: BitOp, p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space);
}

/// A bitwise operation.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
}

/// `fetch`/`red` methods that are one `atom`/`red` instruction.
macro_rules! native_rmw {
    ($fetch:ident, $red:ident, $op:literal, $ty:literal, $reg:ident) => {
        #[inline(always)]
        #[gpu_only]
        unsafe fn $fetch(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) -> Self {
            Self::__from_bits(dispatch!(all o, sc, sp => atom_asm!($op, $ty, $reg, p, v.__to_bits())))
        }
        #[inline(always)]
        #[gpu_only]
        unsafe fn $red(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) {
            dispatch!(release_side o, sc, sp => red_asm!($op, $ty, $reg, p, v.__to_bits()))
        }
    };
}

/// `fetch`/`red` methods as a CAS loop over `|cur| new`.
macro_rules! loop_rmw {
    ($fetch:ident, $red:ident, |$cur:ident, $v:ident| $new:expr) => {
        #[inline(always)]
        #[gpu_only]
        unsafe fn $fetch(p: *mut Self, $v: Self, o: Order, sc: Scope, sp: Space) -> Self {
            // SAFETY: forwarded contract.
            let r = unsafe {
                cas_loop(p, o, sc, sp, |$cur: Self| {
                    let new: Self = $new;
                    // Nothing to write when the value would not change (a failed CAS).
                    (new.__to_bits() != $cur.__to_bits()).then_some(new)
                })
            };
            match r {
                Ok(old) | Err(old) => old,
            }
        }
        #[inline(always)]
        #[gpu_only]
        unsafe fn $red(p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) {
            // SAFETY: forwarded contract.
            let _ = unsafe { Self::$fetch(p, v, o, sc, sp) };
        }
    };
}

macro_rules! int_ops {
    ($($t:ty: add $add:literal, minmax $mm:literal, bits $bits:literal, $reg:ident;)*) => {$(
        impl AtomicAdd for $t {
            native_rmw!(__fetch_add, __red_add, ".add", $add, $reg);
            #[inline(always)]
            fn __neg(self) -> Self { self.wrapping_neg() }
        }
        impl AtomicMinMax for $t {
            native_rmw!(__fetch_min, __red_min, ".min", $mm, $reg);
            native_rmw!(__fetch_max, __red_max, ".max", $mm, $reg);
        }
        impl AtomicBitwise for $t {
            #[inline(always)]
            #[gpu_only]
            unsafe fn __fetch_bit(op: BitOp, p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) -> Self {
                let v = v.__to_bits();
                Self::__from_bits(match op {
                    BitOp::And => dispatch!(all o, sc, sp => atom_asm!(".and", $bits, $reg, p, v)),
                    BitOp::Or => dispatch!(all o, sc, sp => atom_asm!(".or", $bits, $reg, p, v)),
                    BitOp::Xor => dispatch!(all o, sc, sp => atom_asm!(".xor", $bits, $reg, p, v)),
                })
            }
            #[inline(always)]
            #[gpu_only]
            unsafe fn __red_bit(op: BitOp, p: *mut Self, v: Self, o: Order, sc: Scope, sp: Space) {
                let v = v.__to_bits();
                match op {
                    BitOp::And => dispatch!(release_side o, sc, sp => red_asm!(".and", $bits, $reg, p, v)),
                    BitOp::Or => dispatch!(release_side o, sc, sp => red_asm!(".or", $bits, $reg, p, v)),
                    BitOp::Xor => dispatch!(release_side o, sc, sp => red_asm!(".xor", $bits, $reg, p, v)),
                }
            }
        }
    )*};
}
int_ops! {
    u32: add ".u32", minmax ".u32", bits ".b32", reg32;
    i32: add ".s32", minmax ".s32", bits ".b32", reg32;
    u64: add ".u64", minmax ".u64", bits ".b64", reg64;
    // No `atom.add.s64`: two's complement addition is the same instruction.
    i64: add ".u64", minmax ".s64", bits ".b64", reg64;
}

macro_rules! float_ops {
    ($($t:ty: $ty:literal, $reg:ident;)*) => {$(
        impl AtomicAdd for $t {
            native_rmw!(__fetch_add, __red_add, ".add", $ty, $reg);
            #[inline(always)]
            fn __neg(self) -> Self { -self }
        }
        // sm_80 has no floating-point `atom.min`/`atom.max` (sm_90 with PTX 8.1 has them for
        // f32 only): a CAS loop. A NaN argument is ignored; a NaN in memory is replaced; of
        // two zeros the stored one stays.
        impl AtomicMinMax for $t {
            loop_rmw!(__fetch_min, __red_min, |cur, v| if v < cur || cur.is_nan() { v } else { cur });
            loop_rmw!(__fetch_max, __red_max, |cur, v| if v > cur || cur.is_nan() { v } else { cur });
        }
    )*};
}
float_ops! {
    f32: ".f32", reg32;
    f64: ".f64", reg64;
}

impl AtomicAdd for f16 {
    native_rmw!(__fetch_add, __red_add, ".add.noftz", ".f16", reg16);
    #[inline(always)]
    #[gpu_only]
    fn __neg(self) -> Self {
        -self
    }
}

impl AtomicAdd for f16x2 {
    native_rmw!(__fetch_add, __red_add, ".add.noftz", ".f16x2", reg32);
    #[inline(always)]
    #[gpu_only]
    fn __neg(self) -> Self {
        -self
    }
}

/// bf16 atomic addition is an sm_90 instruction (PTX 7.8): built for sm_90 or newer
/// (`PtxBuilder::arch("sm_90")`), it is used; for sm_80 a CAS loop over `fma.rn.bf16`.
macro_rules! bf16_add {
    ($($t:ty: $ty:literal, $reg:ident;)*) => {$(
        impl AtomicAdd for $t {
            #[cfg(target_feature = "sm_90")]
            native_rmw!(__fetch_add, __red_add, ".add.noftz", $ty, $reg);
            #[cfg(not(target_feature = "sm_90"))]
            loop_rmw!(__fetch_add, __red_add, |cur, v| cur + v);
            #[inline(always)]
            #[gpu_only]
            fn __neg(self) -> Self { -self }
        }
    )*};
}
bf16_add! {
    bf16: ".bf16", reg16;
    bf16x2: ".bf16x2", reg32;
}
