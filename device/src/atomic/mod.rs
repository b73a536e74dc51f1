//! Atomics with an explicit memory order and scope, on device (global) and shared memory,
//! and memory fences.
//!
//! `core::sync::atomic` compiles for the GPU, but every operation is system-scoped (the
//! slowest scope) and there are no floating-point, packed half or `red` operations. This
//! module says what PTX says: every operation names its [`Order`] and its [`Scope`], and
//! reaches the PTX as written — `r.fetch_add(1, Order::AcqRel, Scope::Device)` on global
//! memory is `atom.acq_rel.gpu.global.add.u32`.
//!
//! # Thread model
//!
//! * **Who may call**: any thread, under any condition; atomics need no convergence (they
//!   are not collective operations). Fences likewise.
//! * **Memory model** (PTX memory consistency model, the model of CUDA's `cuda::atomic_ref`):
//!   an atomic operation is *morally strong* towards another one on the same location when
//!   each is within the other's scope: [`Scope::Block`] covers the threads of one block,
//!   [`Scope::Device`] the whole GPU (every block of every kernel on it), [`Scope::System`]
//!   also the host and peer GPUs. Operations of a narrower scope than the threads that race
//!   on a location are a data race, as non-atomic accesses are. [`Order::Release`] on a
//!   write and [`Order::Acquire`] on a read that observes it make the writer's earlier memory
//!   operations visible to the reader's later ones (within the scope); [`Order::Relaxed`]
//!   orders nothing but the location itself — the right order for counters and histograms.
//!   There is no `SeqCst`: use [`fence_sc`] between operations (as PTX does).
//! * **Spaces**: [`AtomicRef::from_ptr`] takes a generic address (global or shared — the
//!   hardware resolves it); [`AtomicRef::from_global_ptr`] and [`AtomicRef::from_shared_ptr`]
//!   name the state space (`atom.global`, `atom.shared` after `cvta.to.shared`), which skips
//!   the generic-address check. [`AtomicSlice`] (a kernel parameter) uses global memory.
//!   On sm_90, [`AtomicRef::from_cluster_shared_addr`] reaches a peer block's shared memory
//!   (`atom.shared::cluster`, with [`Scope::Cluster`]; see [`cluster`](crate::cluster)).
//!
//! On the host (`cargo check`, clippy, rust-analyzer of a kernel crate) every type, trait and
//! signature here exists, so device code that uses atomics checks without `cfg` gates; the
//! operations and fences are `#[gpu_only]`: host stubs that panic naming themselves.
//!
//! # What each operation compiles to (sm_80)
//!
//! | type | load/store | swap, compare-exchange | add | min/max | and/or/xor |
//! | --- | --- | --- | --- | --- | --- |
//! | `i32`, `u32`, `i64`, `u64` | `ld`/`st` | `atom.exch`, `atom.cas` | `atom.add`/`red.add` | `atom.min`/`red.min` … | `atom.and`/`red.and` … |
//! | `f32`, `f64` | `ld`/`st` | `atom.exch`, `atom.cas` | `atom.add`/`red.add` | CAS loop | — |
//! | [`f16`](crate::half::f16) | `ld.b16`/`st.b16` | CAS loop, `atom.cas.b16` | `atom.add.noftz.f16` | — | — |
//! | [`f16x2`](crate::half::f16x2) | `ld.b32`/`st.b32` | `atom.exch`, `atom.cas` | `atom.add.noftz.f16x2` | — | — |
//! | [`bf16`](crate::half::bf16), [`bf16x2`](crate::half::bf16x2) | as f16/f16x2 | as f16/f16x2 | CAS loop (`atom.add.noftz.bf16[x2]` when built for sm_90) | — | — |
//!
//! `red_*` methods are for results nobody reads: `red` is one instruction without a return
//! trip. PTX's `red` and `st` take only a relaxed or release order, and `ld` only relaxed or
//! acquire; a `red_*` with an acquire order is compiled as the `atom` form (result dropped),
//! and a load with a release order (or a store with an acquire order) aborts the kernel, as
//! `core::sync::atomic` panics for them. Operations built as a CAS loop load relaxed (or
//! acquire, for acquire orders) and write with the order given; when the value would not
//! change they write nothing and return (as a failed compare-exchange, without the release
//! half of the order).
//!
//! # Example
//!
//! ```ignore
//! use ferrocuda_device::atomic::{AtomicSlice, Order, Scope};
//! use ferrocuda_device::{kernel, thread, Slice};
//!
//! /// 256-bin histogram of `x` into `bins`.
//! #[kernel]
//! pub unsafe fn histogram(x: Slice<u8>, bins: AtomicSlice<u32>) {
//!     for i in thread::grid_stride(x.len()) {
//!         let b = x.get(i).unwrap() as usize;
//!         bins.at(b).red_add(1, Order::Relaxed, Scope::Device); // red.relaxed.gpu.global.add.u32
//!     }
//! }
//! ```

#[cfg(target_arch = "nvptx64")]
#[macro_use]
mod asm;
mod ops;
mod order;
mod slice;

pub use ops::{Atomic, AtomicAdd, AtomicBitwise, AtomicMinMax};
pub use order::{Order, Scope, Space};
pub use slice::AtomicSlice;

use core::marker::PhantomData;
use ferrocuda_macros::gpu_only;
// Used by the operations' bodies, which are compiled for the device only (`#[gpu_only]`).
#[cfg(target_arch = "nvptx64")]
use ops::{cas_loop, BitOp, RawBits};

/// A load with a release order or a store with an acquire order.
#[cfg(target_arch = "nvptx64")]
#[cold]
#[inline(never)]
fn invalid_order() -> ! {
    panic!("ferrocuda: invalid memory order for this atomic operation")
}

/// A reference to a value that threads access atomically (CUDA's `cuda::atomic_ref`).
///
/// Made from a raw pointer by one of the `unsafe` constructors (or safely by
/// [`AtomicSlice::at`]); every method is then safe. Methods are `#[inline(always)]` and
/// compile to one instruction (or one CAS loop) when the order and scope are constants.
#[derive(Clone, Copy, Debug)]
pub struct AtomicRef<'a, T> {
    ptr: *mut T,
    // Read by the operations, which are compiled for the device only (`#[gpu_only]`).
    #[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
    space: Space,
    _life: PhantomData<&'a T>,
}

impl<'a, T: Atomic> AtomicRef<'a, T> {
    /// An atomic reference to `*ptr`, a generic address (global or shared memory).
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads and writes of a `T` and aligned to `size_of::<T>()`
    /// for `'a`, and every concurrent access to `*ptr` during `'a` must be atomic (through
    /// this module) or otherwise race-free.
    #[inline(always)]
    pub unsafe fn from_ptr(ptr: *mut T) -> Self {
        AtomicRef {
            ptr,
            space: Space::Generic,
            _life: PhantomData,
        }
    }

    /// As [`from_ptr`](Self::from_ptr), for a generic address that points to global
    /// (device) memory; the instructions name `.global`.
    ///
    /// # Safety
    ///
    /// As [`from_ptr`](Self::from_ptr), and `ptr` points to global memory.
    #[inline(always)]
    pub unsafe fn from_global_ptr(ptr: *mut T) -> Self {
        AtomicRef {
            ptr,
            space: Space::Global,
            _life: PhantomData,
        }
    }

    /// As [`from_ptr`](Self::from_ptr), for a generic address that points to this block's
    /// shared memory; the address is converted with `cvta.to.shared` and the instructions
    /// name `.shared`.
    ///
    /// # Safety
    ///
    /// As [`from_ptr`](Self::from_ptr), and `ptr` points to shared memory.
    #[inline(always)]
    pub unsafe fn from_shared_ptr(ptr: *mut T) -> Self {
        AtomicRef {
            ptr,
            space: Space::Shared,
            _life: PhantomData,
        }
    }

    /// An atomic reference to the value at `addr` in the cluster's shared memory window (an
    /// address made by `mapa.shared::cluster`: [`cluster::DsmemPtr`](crate::cluster::DsmemPtr)),
    /// in this block's or a peer block's shared memory; the instructions name
    /// `.shared::cluster` (sm_90). [`as_ptr`](Self::as_ptr) returns that address, which is not
    /// a generic one.
    ///
    /// # Safety
    ///
    /// 1. `addr` is a `.shared::cluster` address of a `T`, aligned to `size_of::<T>()`, in
    ///    the shared memory of a block of this thread's cluster that has started (a cluster
    ///    barrier since its start) and does not exit during `'a`;
    /// 2. every concurrent access to it during `'a` is atomic, with a scope that covers the
    ///    threads involved ([`Scope::Cluster`] or wider).
    #[inline(always)]
    pub unsafe fn from_cluster_shared_addr(addr: u64) -> Self {
        AtomicRef {
            ptr: addr as *mut T,
            space: Space::SharedCluster,
            _life: PhantomData,
        }
    }

    /// The address (generic).
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T {
        self.ptr
    }

    /// Atomic load (`ld.<order>.<scope>`); `order` must be relaxed or acquire.
    #[inline(always)]
    #[gpu_only]
    pub fn load(&self, order: Order, scope: Scope) -> T {
        // SAFETY: the constructor's contract.
        T::__from_bits(unsafe { T::Bits::ld(self.ptr.cast(), order, scope, self.space) })
    }

    /// Atomic store (`st.<order>.<scope>`); `order` must be relaxed or release.
    #[inline(always)]
    #[gpu_only]
    pub fn store(&self, value: T, order: Order, scope: Scope) {
        // SAFETY: the constructor's contract.
        unsafe { T::Bits::st(self.ptr.cast(), value.__to_bits(), order, scope, self.space) }
    }

    /// Stores `value`, returns the previous value (`atom.exch`; CUDA `atomicExch`).
    #[inline(always)]
    #[gpu_only]
    pub fn swap(&self, value: T, order: Order, scope: Scope) -> T {
        // SAFETY: the constructor's contract.
        T::__from_bits(unsafe {
            T::Bits::exch(self.ptr.cast(), value.__to_bits(), order, scope, self.space)
        })
    }

    /// Stores `new` if the value is bitwise equal to `current` (`atom.cas`; CUDA
    /// `atomicCAS`). `Ok(previous)` if it was stored, else `Err(actual)`.
    #[inline(always)]
    #[gpu_only]
    pub fn compare_exchange(&self, current: T, new: T, order: Order, scope: Scope) -> Result<T, T> {
        let c = current.__to_bits();
        // SAFETY: the constructor's contract.
        let old = unsafe {
            T::Bits::cas(
                self.ptr.cast(),
                c,
                new.__to_bits(),
                order,
                scope,
                self.space,
            )
        };
        if old == c {
            Ok(T::__from_bits(old))
        } else {
            Err(T::__from_bits(old))
        }
    }

    /// Applies `f` atomically (a compare-and-swap loop): `Ok(previous)` once `f`'s value is
    /// stored, `Err(current)` if `f` returns `None`. `f` may run several times.
    #[inline(always)]
    #[gpu_only]
    pub fn fetch_update(
        &self,
        order: Order,
        scope: Scope,
        f: impl FnMut(T) -> Option<T>,
    ) -> Result<T, T> {
        // SAFETY: the constructor's contract.
        unsafe { cas_loop(self.ptr, order, scope, self.space, f) }
    }
}

impl<'a, T: AtomicAdd> AtomicRef<'a, T> {
    /// Adds `value`, returns the previous value (`atom.add`; CUDA `atomicAdd`).
    #[inline(always)]
    #[gpu_only]
    pub fn fetch_add(&self, value: T, order: Order, scope: Scope) -> T {
        // SAFETY: the constructor's contract.
        unsafe { T::__fetch_add(self.ptr, value, order, scope, self.space) }
    }

    /// Subtracts `value` (adds its negation; integers wrap), returns the previous value.
    #[inline(always)]
    #[gpu_only]
    pub fn fetch_sub(&self, value: T, order: Order, scope: Scope) -> T {
        self.fetch_add(value.__neg(), order, scope)
    }

    /// Adds `value`, returns nothing (`red.add`: no return trip).
    #[inline(always)]
    #[gpu_only]
    pub fn red_add(&self, value: T, order: Order, scope: Scope) {
        if order.is_release_side() {
            // SAFETY: the constructor's contract; the order is one `red` admits.
            unsafe { T::__red_add(self.ptr, value, order, scope, self.space) }
        } else {
            self.fetch_add(value, order, scope);
        }
    }

    /// Subtracts `value`, returns nothing (`red.add` of the negation).
    #[inline(always)]
    #[gpu_only]
    pub fn red_sub(&self, value: T, order: Order, scope: Scope) {
        self.red_add(value.__neg(), order, scope)
    }
}

impl<'a, T: AtomicMinMax> AtomicRef<'a, T> {
    /// Stores the minimum of the value and `value`, returns the previous value (`atom.min`;
    /// CUDA `atomicMin`). Floats: a CAS loop; a NaN `value` is ignored.
    #[inline(always)]
    #[gpu_only]
    pub fn fetch_min(&self, value: T, order: Order, scope: Scope) -> T {
        // SAFETY: the constructor's contract.
        unsafe { T::__fetch_min(self.ptr, value, order, scope, self.space) }
    }

    /// Stores the maximum, returns the previous value (`atom.max`; CUDA `atomicMax`).
    #[inline(always)]
    #[gpu_only]
    pub fn fetch_max(&self, value: T, order: Order, scope: Scope) -> T {
        // SAFETY: the constructor's contract.
        unsafe { T::__fetch_max(self.ptr, value, order, scope, self.space) }
    }

    /// [`fetch_min`](Self::fetch_min) without a result (`red.min` for integers).
    #[inline(always)]
    #[gpu_only]
    pub fn red_min(&self, value: T, order: Order, scope: Scope) {
        if order.is_release_side() {
            // SAFETY: the constructor's contract; the order is one `red` admits.
            unsafe { T::__red_min(self.ptr, value, order, scope, self.space) }
        } else {
            self.fetch_min(value, order, scope);
        }
    }

    /// [`fetch_max`](Self::fetch_max) without a result (`red.max` for integers).
    #[inline(always)]
    #[gpu_only]
    pub fn red_max(&self, value: T, order: Order, scope: Scope) {
        if order.is_release_side() {
            // SAFETY: the constructor's contract; the order is one `red` admits.
            unsafe { T::__red_max(self.ptr, value, order, scope, self.space) }
        } else {
            self.fetch_max(value, order, scope);
        }
    }
}

macro_rules! bitwise_methods {
    ($($fetch:ident, $red:ident, $op:ident, $cuda:literal;)*) => {
        impl<'a, T: AtomicBitwise> AtomicRef<'a, T> {$(
            #[doc = concat!("Bitwise ", stringify!($op), " with `value`, returns the previous value (`atom.",
                            $cuda, "`).")]
            #[inline(always)]
            #[gpu_only]
            pub fn $fetch(&self, value: T, order: Order, scope: Scope) -> T {
                // SAFETY: the constructor's contract.
                unsafe { T::__fetch_bit(BitOp::$op, self.ptr, value, order, scope, self.space) }
            }

            #[doc = concat!("Bitwise ", stringify!($op), " with `value`, no result (`red.", $cuda, "`).")]
            #[inline(always)]
            #[gpu_only]
            pub fn $red(&self, value: T, order: Order, scope: Scope) {
                if order.is_release_side() {
                    // SAFETY: the constructor's contract; the order is one `red` admits.
                    unsafe { T::__red_bit(BitOp::$op, self.ptr, value, order, scope, self.space) }
                } else {
                    self.$fetch(value, order, scope);
                }
            }
        )*}
    };
}
bitwise_methods! {
    fetch_and, red_and, And, "and";
    fetch_or, red_or, Or, "or";
    fetch_xor, red_xor, Xor, "xor";
}

/// Free functions over raw pointers, one per [`AtomicRef`] method, for one kind of address.
macro_rules! pointer_functions {
    ($ctor:ident, $what:literal) => {
        pointer_functions!(@ $ctor, $what;
            Atomic: load(order: Order, scope: Scope) -> T;
            Atomic: store(value: T, order: Order, scope: Scope) -> ();
            Atomic: swap(value: T, order: Order, scope: Scope) -> T;
            Atomic: compare_exchange(current: T, new: T, order: Order, scope: Scope) -> Result<T, T>;
            AtomicAdd: fetch_add(value: T, order: Order, scope: Scope) -> T;
            AtomicAdd: fetch_sub(value: T, order: Order, scope: Scope) -> T;
            AtomicAdd: red_add(value: T, order: Order, scope: Scope) -> ();
            AtomicAdd: red_sub(value: T, order: Order, scope: Scope) -> ();
            AtomicMinMax: fetch_min(value: T, order: Order, scope: Scope) -> T;
            AtomicMinMax: fetch_max(value: T, order: Order, scope: Scope) -> T;
            AtomicMinMax: red_min(value: T, order: Order, scope: Scope) -> ();
            AtomicMinMax: red_max(value: T, order: Order, scope: Scope) -> ();
            AtomicBitwise: fetch_and(value: T, order: Order, scope: Scope) -> T;
            AtomicBitwise: fetch_or(value: T, order: Order, scope: Scope) -> T;
            AtomicBitwise: fetch_xor(value: T, order: Order, scope: Scope) -> T;
            AtomicBitwise: red_and(value: T, order: Order, scope: Scope) -> ();
            AtomicBitwise: red_or(value: T, order: Order, scope: Scope) -> ();
            AtomicBitwise: red_xor(value: T, order: Order, scope: Scope) -> ();
        );
    };
    (@ $ctor:ident, $what:literal; $($bound:ident: $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        #[doc = concat!("[`AtomicRef::", stringify!($name), "`] on `*ptr`, ", $what, ".")]
        ///
        /// # Safety
        ///
        #[doc = concat!("As [`AtomicRef::", stringify!($ctor), "`].")]
        #[inline(always)]
        pub unsafe fn $name<T: $bound>(ptr: *mut T, $($arg: $ty),*) -> $ret {
            // SAFETY: the caller upholds the constructor's contract.
            unsafe { AtomicRef::$ctor(ptr) }.$name($($arg),*)
        }
    )*};
}
pointer_functions!(from_ptr, "a generic address");

/// The atomic functions for pointers to shared memory (`atom.shared`, `red.shared`, …).
///
/// Same thread model as the [parent module](super); the pointer must point into this
/// block's shared memory (a generic address, converted with `cvta.to.shared`).
pub mod shared {
    use super::{Atomic, AtomicAdd, AtomicBitwise, AtomicMinMax, AtomicRef, Order, Scope};
    pointer_functions!(from_shared_ptr, "a pointer to shared memory");
}

/// Memory fence (`fence.acq_rel.<scope>`); [`Order::Relaxed`] emits nothing (as C++'s
/// relaxed fence). Acquire, release and acq_rel all compile to `fence.acq_rel`, the weakest
/// fence PTX 7.0 has that provides either.
#[inline(always)]
#[gpu_only]
pub fn fence(order: Order, scope: Scope) {
    if order == Order::Relaxed {
        return;
    }
    // SAFETY: a fence has no operands and no preconditions.
    unsafe {
        match scope {
            Scope::Block => core::arch::asm!("fence.acq_rel.cta;", options(nostack)),
            Scope::Device => core::arch::asm!("fence.acq_rel.gpu;", options(nostack)),
            Scope::System => core::arch::asm!("fence.acq_rel.sys;", options(nostack)),
            Scope::Cluster => core::arch::asm!("fence.acq_rel.cluster;", options(nostack)),
        }
    }
}

/// Sequentially consistent fence (`fence.sc.<scope>`): CUDA's `__threadfence_block()`,
/// `__threadfence()` and `__threadfence_system()` for block, device and system scope.
#[inline(always)]
#[gpu_only]
pub fn fence_sc(scope: Scope) {
    // SAFETY: a fence has no operands and no preconditions.
    unsafe {
        match scope {
            Scope::Block => core::arch::asm!("fence.sc.cta;", options(nostack)),
            Scope::Device => core::arch::asm!("fence.sc.gpu;", options(nostack)),
            Scope::System => core::arch::asm!("fence.sc.sys;", options(nostack)),
            Scope::Cluster => core::arch::asm!("fence.sc.cluster;", options(nostack)),
        }
    }
}
