//! Thread-block clusters (sm_90 and newer): the cluster's shape and this block's place in it,
//! the cluster barrier, and distributed shared memory — loads, stores and atomics on the
//! shared memory of the other blocks of the cluster.
//!
//! A kernel declared `#[kernel(arch = "sm_90", cluster = (x, y, z))]` is launched in clusters
//! of `x·y·z` blocks (at most 8; 16 with `non_portable_cluster`): the blocks of a cluster are
//! scheduled together, at once, on one GPU processing cluster, and each may address the shared
//! memory of the others. Everything here compiles to sm_90 instructions (PTX ISA 8.0), so it
//! may only be used in kernels built for `arch = "sm_90"` or newer — the builder refuses a
//! module whose `.target` lacks them.
//!
//! ```ignore
//! use ferrocuda_device::{cluster, kernel, shared_array, thread, SliceMut};
//!
//! /// Each block publishes its rank in its shared memory; after a cluster barrier every
//! /// block reads its right neighbour's.
//! #[kernel(arch = "sm_90", cluster = (2, 1, 1))]
//! pub unsafe fn neighbour(out: SliceMut<u32>) {
//!     let mine = shared_array!(u32, 1);
//!     if thread::rank_in_block() == 0 {
//!         unsafe { mine.write(0, cluster::rank()) };
//!     }
//!     cluster::sync(); // every block has written (and has started)
//!     let peer = (cluster::rank() + 1) % cluster::size();
//!     let theirs = unsafe { cluster::map_shared_rank(mine.as_ptr(), peer).read() };
//!     /* … write `theirs` out … */
//!     cluster::sync(); // no block exits while a peer may still read its shared memory
//! }
//! ```
//!
//! # Thread model
//!
//! * **Reading the registers** ([`rank`], [`size`], [`block_idx`], [`dim`], [`cluster_idx`],
//!   [`grid_dim`]): any thread, any time. Without a cluster launch every block is a cluster of
//!   one.
//! * **The cluster barrier** ([`sync`], or [`arrive`] then [`wait`]) is collective over the
//!   **cluster**: every thread of every block of the cluster must arrive, then wait, the same
//!   number of times. [`arrive`] has release semantics and [`wait`] acquire semantics at
//!   cluster scope (PTX's defaults for `barrier.cluster.arrive` and `barrier.cluster.wait`):
//!   after `wait` returns, a thread sees every write — to global memory, and to any block's
//!   shared memory in the cluster — that any thread of the cluster made before its `arrive`.
//!   The split form lets a block do independent work between the two.
//! * **Who may access a peer block's shared memory, and when.** Any thread of the cluster, on
//!   two conditions the caller keeps (the `unsafe` of [`DsmemPtr`]'s accessors):
//!   1. *the peer has started*: a block's shared memory exists once the block runs, and the
//!      blocks of a cluster may start at slightly different times — a cluster barrier after
//!      the kernel's start (or any later one) guarantees that every block of the cluster is
//!      running;
//!   2. *the peer has not exited*: a block's shared memory is released when it exits, so every
//!      access to it must complete before then — a kernel that reads or writes peers' shared
//!      memory ends with a cluster barrier ([`sync`]) after its last such access, which no
//!      block passes before every block has made its accesses.
//!
//!   Concurrent accesses follow the rules of shared memory within a block, extended to the
//!   cluster: plain reads and writes of one element by threads of different blocks must be
//!   ordered by a cluster barrier (or by a release/acquire pair at
//!   [`Scope::Cluster`](crate::atomic::Scope::Cluster)), and atomics ([`DsmemPtr::atomic`])
//!   may race, with `Scope::Cluster` or a wider scope.
//!
//! # Instructions
//!
//! | here | PTX |
//! | --- | --- |
//! | [`rank`], [`size`] | `%cluster_ctarank`, `%cluster_nctarank` |
//! | [`block_idx`], [`dim`] | `%cluster_ctaid`, `%cluster_nctaid` |
//! | [`cluster_idx`], [`grid_dim`] | `%clusterid`, `%nclusterid` |
//! | [`sync`] | `barrier.cluster.arrive` (release) + `barrier.cluster.wait` (acquire) |
//! | [`arrive_relaxed`] | `barrier.cluster.arrive.relaxed` |
//! | [`map_shared_rank`] | `cvta.to.shared` + `mapa.shared::cluster` |
//! | [`DsmemPtr::read`], [`DsmemPtr::write`] | `ld.shared::cluster`, `st.shared::cluster` |
//! | [`DsmemPtr::atomic`] | `atom`/`red`/`ld`/`st` `.<order>.<scope>.shared::cluster` |
//!
//! The barrier and the registers go through the NVVM intrinsics (LLVM knows the barrier as
//! convergent: it never moves it into or out of a branch); the address mapping and the
//! accesses through `asm!`, as the `.shared::cluster` state space has no pointer type in Rust.

use crate::diag::fail;
use crate::shared::SharedElement;
use crate::thread::Dim3;
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;
use core::marker::PhantomData;
use ferrocuda_macros::gpu_only;

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    #[link_name = "llvm.nvvm.read.ptx.sreg.cluster.ctarank"]
    fn cluster_ctarank() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.cluster.nctarank"]
    fn cluster_nctarank() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.cluster.ctaid.x"]
    fn cluster_ctaid_x() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.cluster.ctaid.y"]
    fn cluster_ctaid_y() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.cluster.ctaid.z"]
    fn cluster_ctaid_z() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.cluster.nctaid.x"]
    fn cluster_nctaid_x() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.cluster.nctaid.y"]
    fn cluster_nctaid_y() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.cluster.nctaid.z"]
    fn cluster_nctaid_z() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.clusterid.x"]
    fn clusterid_x() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.clusterid.y"]
    fn clusterid_y() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.clusterid.z"]
    fn clusterid_z() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.nclusterid.x"]
    fn nclusterid_x() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.nclusterid.y"]
    fn nclusterid_y() -> u32;
    #[link_name = "llvm.nvvm.read.ptx.sreg.nclusterid.z"]
    fn nclusterid_z() -> u32;
    #[link_name = "llvm.nvvm.barrier.cluster.arrive"]
    fn barrier_cluster_arrive();
    #[link_name = "llvm.nvvm.barrier.cluster.arrive.relaxed"]
    fn barrier_cluster_arrive_relaxed();
    #[link_name = "llvm.nvvm.barrier.cluster.wait"]
    fn barrier_cluster_wait();
}

// SAFETY (all register reads below): reading a PTX special register has no preconditions.

/// This block's rank in its cluster, `0..size()` (`%cluster_ctarank`; cooperative groups'
/// `cluster.block_rank()`): the rank [`map_shared_rank`] takes.
#[inline(always)]
#[gpu_only]
pub fn rank() -> u32 {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe { cluster_ctarank() }
}

/// Blocks in this cluster (`%cluster_nctarank`; 1 without a cluster launch).
#[inline(always)]
#[gpu_only]
pub fn size() -> u32 {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe { cluster_nctarank() }
}

/// This block's index within its cluster (`%cluster_ctaid`).
#[inline(always)]
#[gpu_only]
pub fn block_idx() -> Dim3 {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe {
        Dim3 {
            x: cluster_ctaid_x(),
            y: cluster_ctaid_y(),
            z: cluster_ctaid_z(),
        }
    }
}

/// The cluster's shape in blocks (`%cluster_nctaid`: the kernel's `cluster = (x, y, z)`).
#[inline(always)]
#[gpu_only]
pub fn dim() -> Dim3 {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe {
        Dim3 {
            x: cluster_nctaid_x(),
            y: cluster_nctaid_y(),
            z: cluster_nctaid_z(),
        }
    }
}

/// This cluster's index in the grid of clusters (`%clusterid`).
#[inline(always)]
#[gpu_only]
pub fn cluster_idx() -> Dim3 {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe {
        Dim3 {
            x: clusterid_x(),
            y: clusterid_y(),
            z: clusterid_z(),
        }
    }
}

/// Clusters in the grid along x, y, z (`%nclusterid`: the grid divided by the cluster
/// shape).
#[inline(always)]
#[gpu_only]
pub fn grid_dim() -> Dim3 {
    // SAFETY: reading a PTX special register has no preconditions.
    unsafe {
        Dim3 {
            x: nclusterid_x(),
            y: nclusterid_y(),
            z: nclusterid_z(),
        }
    }
}

/// Cluster-wide barrier: [`arrive`] then [`wait`] (`barrier.cluster.arrive` with release
/// semantics, `barrier.cluster.wait` with acquire semantics). Every thread of every block of
/// the cluster must reach the same call; afterwards every block of the cluster is running and
/// the cluster's writes before the barrier are visible (see the [module documentation](self)).
#[inline(always)]
#[gpu_only]
pub fn sync() {
    // SAFETY: an arrival followed by its wait, in this thread.
    unsafe {
        barrier_cluster_arrive();
        barrier_cluster_wait();
    }
}

/// The first half of a split cluster barrier: this thread arrives (`barrier.cluster.arrive`,
/// release semantics at cluster scope: its earlier writes are visible to the threads that
/// [`wait`] for this phase) and goes on without waiting.
///
/// # Safety
///
/// 1. This thread has no arrival pending: since its previous `arrive` (if any) it has called
///    [`wait`] (PTX leaves a second arrival before the wait undefined);
/// 2. every thread of every block of the cluster arrives for this phase (then waits), in
///    uniform control flow, as for [`sync`].
#[inline(always)]
#[gpu_only]
pub unsafe fn arrive() {
    // SAFETY: the caller's contract.
    unsafe { barrier_cluster_arrive() }
}

/// [`arrive`] without the release semantics (`barrier.cluster.arrive.relaxed`): for phases
/// that only need the blocks to be running (or to stay running), not to see each other's
/// writes.
///
/// # Safety
///
/// As [`arrive`].
#[inline(always)]
#[gpu_only]
pub unsafe fn arrive_relaxed() {
    // SAFETY: the caller's contract.
    unsafe { barrier_cluster_arrive_relaxed() }
}

/// The second half of a split cluster barrier: waits until every thread of the cluster has
/// arrived for this phase (`barrier.cluster.wait`, acquire semantics at cluster scope).
///
/// # Safety
///
/// 1. This thread has arrived for this phase ([`arrive`] or [`arrive_relaxed`]) and has not
///    waited since;
/// 2. every thread of the cluster keeps [`arrive`]'s contract.
#[inline(always)]
#[gpu_only]
pub unsafe fn wait() {
    // SAFETY: the caller's contract.
    unsafe { barrier_cluster_wait() }
}

/// An address in the cluster's shared-memory window (`.shared::cluster`): an element in the
/// shared memory of one block of the cluster, this one's or a peer's, made by
/// [`map_shared_rank`]. `Copy`; its accessors are `unsafe` (see the [module
/// documentation](self): the block must have started and must not exit during the access).
#[derive(Debug)]
pub struct DsmemPtr<T> {
    addr: u64,
    _elem: PhantomData<*mut T>,
}

impl<T> Clone for DsmemPtr<T> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DsmemPtr<T> {}

/// The block of rank `rank` in this cluster's copy of the shared-memory location `ptr` (a
/// generic pointer into this block's shared memory — a [`shared_array!`](crate::shared_array)
/// element, dynamic shared memory): `cvta.to.shared` then `mapa.shared::cluster`. A `rank` of
/// [`size()`] or more aborts the kernel (location recorded).
///
/// Mapping computes an address only; accessing it is `unsafe` ([`DsmemPtr::read`]). The
/// address of a pointer that is not into shared memory is meaningless.
#[inline(always)]
#[track_caller]
// `ptr` is only converted to an address, never dereferenced here.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn map_shared_rank<T>(ptr: *const T, rank: u32) -> DsmemPtr<T> {
    if rank >= size() {
        fail();
    }
    // SAFETY: `rank` names a block of the cluster (checked just above).
    unsafe { map_shared_rank_unchecked(ptr, rank) }
}

/// [`map_shared_rank`] without the rank check.
///
/// # Safety
///
/// 1. `rank < size()`.
#[inline(always)]
#[gpu_only]
pub unsafe fn map_shared_rank_unchecked<T>(ptr: *const T, rank: u32) -> DsmemPtr<T> {
    let addr: u64;
    #[allow(clippy::pointers_in_nomem_asm_block)] // the pointer is converted, not read
    // SAFETY: address arithmetic only (no memory access); the rank is in range by the
    // caller's contract.
    unsafe {
        asm!(
            "cvta.to.shared.u64 {a}, {p};",
            "mapa.shared::cluster.u64 {a}, {a}, {r};",
            p = in(reg64) ptr,
            r = in(reg32) rank,
            a = out(reg64) addr,
            options(pure, nomem, nostack),
        )
    };
    DsmemPtr {
        addr,
        _elem: PhantomData,
    }
}

/// `ld.shared::cluster.<ty>` of one register: an `asm!`, used inside the `unsafe` block of
/// [`DsmemPtr::read`] (whose contract makes the address a mapped, aligned address of a live
/// block's shared memory).
#[cfg(target_arch = "nvptx64")]
macro_rules! ld_cluster {
    ($ty:literal, $reg:ident, $bits:ty, $addr:expr) => {{
        let v: $bits;
        asm!(
            concat!("ld.shared::cluster.", $ty, " {v}, [{a}];"),
            a = in(reg64) $addr,
            v = out($reg) v,
            options(nostack),
        );
        v
    }};
}

/// `st.shared::cluster.<ty>` of one register: an `asm!`, used inside the `unsafe` block of
/// [`DsmemPtr::write`] (as `ld_cluster!`).
#[cfg(target_arch = "nvptx64")]
macro_rules! st_cluster {
    ($ty:literal, $reg:ident, $addr:expr, $v:expr) => {
        asm!(
            concat!("st.shared::cluster.", $ty, " [{a}], {v};"),
            a = in(reg64) $addr,
            v = in($reg) $v,
            options(nostack),
        )
    };
}

impl<T> DsmemPtr<T> {
    /// The `.shared::cluster` address (not a generic one).
    #[inline(always)]
    pub fn addr(self) -> u64 {
        self.addr
    }

    /// The address `count` elements further (`add` on the window address: the same block's
    /// shared memory, as long as the result stays inside the array mapped from).
    #[inline(always)]
    #[allow(clippy::should_implement_trait)] // named as `pointer::add`, which it mirrors
    pub fn add(self, count: usize) -> Self {
        DsmemPtr {
            addr: self
                .addr
                .wrapping_add((count * core::mem::size_of::<T>()) as u64),
            _elem: PhantomData,
        }
    }
}

impl<T: SharedElement> DsmemPtr<T> {
    /// Reads the element (`ld.shared::cluster`; 1, 2, 4, 8 or 16 bytes — another size does
    /// not compile).
    ///
    /// # Safety
    ///
    /// 1. The address was mapped from a pointer to a `T` in shared memory, aligned to
    ///    `size_of::<T>()`, inside the array it was mapped from;
    /// 2. the block that owns it has started (a cluster barrier since the kernel's start) and
    ///    does not exit before the read completes (a cluster barrier after it, before that
    ///    block's exit);
    /// 3. no other thread writes the element concurrently (a cluster barrier, or a
    ///    release/acquire pair at cluster scope, orders a write before this read).
    #[inline(always)]
    #[gpu_only]
    pub unsafe fn read(self) -> T {
        const {
            assert!(
                matches!(core::mem::size_of::<T>(), 1 | 2 | 4 | 8 | 16),
                "distributed shared memory accesses are 1, 2, 4, 8 or 16 bytes"
            )
        };
        let a = self.addr;
        // SAFETY: (each arm) the caller's contract; the bits read have the size of `T`, of
        // which every bit pattern is a value (`SharedElement`).
        unsafe {
            match core::mem::size_of::<T>() {
                1 => {
                    let v = ld_cluster!("u8", reg16, u16, a) as u8;
                    core::mem::transmute_copy(&v)
                }
                2 => core::mem::transmute_copy(&ld_cluster!("b16", reg16, u16, a)),
                4 => core::mem::transmute_copy(&ld_cluster!("b32", reg32, u32, a)),
                8 => core::mem::transmute_copy(&ld_cluster!("b64", reg64, u64, a)),
                _ => {
                    let (lo, hi): (u64, u64);
                    asm!(
                        "ld.shared::cluster.v2.b64 {{{lo}, {hi}}}, [{a}];",
                        a = in(reg64) a,
                        lo = out(reg64) lo,
                        hi = out(reg64) hi,
                        options(nostack),
                    );
                    core::mem::transmute_copy(&[lo, hi])
                }
            }
        }
    }

    /// Writes the element (`st.shared::cluster`; 1, 2, 4, 8 or 16 bytes).
    ///
    /// # Safety
    ///
    /// 1. and 2. as [`read`](Self::read);
    /// 3. no other thread reads or writes the element concurrently (a cluster barrier, or a
    ///    release/acquire pair at cluster scope, orders this write before their accesses).
    #[inline(always)]
    #[gpu_only]
    pub unsafe fn write(self, value: T) {
        const {
            assert!(
                matches!(core::mem::size_of::<T>(), 1 | 2 | 4 | 8 | 16),
                "distributed shared memory accesses are 1, 2, 4, 8 or 16 bytes"
            )
        };
        let a = self.addr;
        // SAFETY: (each arm) the caller's contract; the bits written are `value`'s.
        unsafe {
            match core::mem::size_of::<T>() {
                1 => {
                    let v: u8 = core::mem::transmute_copy(&value);
                    st_cluster!("u8", reg16, a, v as u16)
                }
                2 => st_cluster!("b16", reg16, a, core::mem::transmute_copy::<T, u16>(&value)),
                4 => st_cluster!("b32", reg32, a, core::mem::transmute_copy::<T, u32>(&value)),
                8 => st_cluster!("b64", reg64, a, core::mem::transmute_copy::<T, u64>(&value)),
                _ => {
                    let [lo, hi]: [u64; 2] = core::mem::transmute_copy(&value);
                    asm!(
                        "st.shared::cluster.v2.b64 [{a}], {{{lo}, {hi}}};",
                        a = in(reg64) a,
                        lo = in(reg64) lo,
                        hi = in(reg64) hi,
                        options(nostack),
                    );
                }
            }
        }
    }
}

impl<T: SharedElement + crate::atomic::Atomic> DsmemPtr<T> {
    /// The element as an atomic reference in the cluster's shared memory
    /// (`atom.<order>.<scope>.shared::cluster…`, `red…`, `ld…`, `st…`): use
    /// [`Scope::Cluster`](crate::atomic::Scope::Cluster) for atomics that threads of several
    /// blocks of the cluster race on.
    ///
    /// # Safety
    ///
    /// 1. and 2. as [`read`](Self::read), for as long as the reference is used;
    /// 3. every concurrent access to the element is atomic, with a scope that covers the
    ///    threads involved.
    #[inline(always)]
    #[gpu_only]
    pub unsafe fn atomic<'a>(self) -> crate::atomic::AtomicRef<'a, T> {
        // SAFETY: the caller's contract is the constructor's.
        unsafe { crate::atomic::AtomicRef::from_cluster_shared_addr(self.addr) }
    }
}
