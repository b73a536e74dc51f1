//! The Tensor Memory Accelerator (sm_90): bulk tile copies between global and shared memory
//! through a [`TensorMap`] parameter — the descriptor the launcher encoded on the host from
//! the array argument (see `ferrocuda_abi::tensormap`).
//!
//! | CUDA C++ / CUTLASS | here |
//! | --- | --- |
//! | `__grid_constant__ const CUtensorMap map` | a `TensorMap<T, SW, B0, B1>` parameter |
//! | `cute::prefetch_tma_descriptor` (`prefetch.tensormap`) | [`Tma::prefetch`] |
//! | `SM90_TMA_LOAD_2D::copy` (`cp.async.bulk.tensor.2d…mbarrier::complete_tx::bytes`) | [`Tma::load`] |
//! | `SM90_TMA_LOAD_MULTICAST` (`.multicast::cluster`) | [`Tma::load_multicast`] |
//! | `SM90_TMA_STORE_2D` (`cp.async.bulk.tensor.2d.global.shared::cta.bulk_group`) | [`TmaStore::store`] |
//! | `tma_store_arrive()` / `tma_store_wait<N>()` | [`store_commit`] / [`store_wait_read`] |
//!
//! Coordinates are in the array's axis order, **outermost first** (row, column for a
//! matrix), as the box in the type; they are element indices and may be negative or past
//! the end: the box's elements outside the array read as zero (and are not written by a
//! store) — partial tiles need no special code. The **innermost** coordinate must be a
//! multiple of 16 bytes (`coord * size_of::<T>() % 16 == 0`, the rule of the copy engine,
//! which faults with an illegal-instruction error otherwise): the loads and stores here check
//! it and abort the kernel with the location recorded instead. A **store**'s coordinates must
//! also be non-negative (its box may run past the end, not start before the array; the copy
//! engine faults otherwise): [`TmaStore::store`] checks that too.
//!
//! # Thread model
//!
//! One thread issues a copy (any thread; the usual code lets one elected thread of the
//! producer warp do it). A **load** writes the box into shared memory at `dst` (laid out as
//! the box, row-major, with the map's swizzle) asynchronously and signals an **mbarrier** in
//! shared memory when the bytes have landed: the barrier must expect them — the issuing
//! thread (or another) calls `arrive.expect_tx(bytes)` for the phase (`mbarrier` module),
//! and consumers wait on that phase; a completed wait makes the data visible to the waiter
//! (no other fence). A **store** reads shared memory at `src` asynchronously: the threads
//! that wrote the tile first make their writes visible to the async proxy
//! (`wgmma::fence_proxy_async_shared`, then a barrier), one thread issues the store, commits
//! the bulk group, and waits ([`store_wait_read`]) before the shared memory is reused.
//!
//! Alignment: `dst`/`src` 128-byte aligned (1024 for the 128-byte swizzle, so that the
//! swizzle pattern lines up with what `wgmma` descriptors expect); the mbarrier 8-byte aligned.
//!
//! Build kernels that use this module for `sm_90` or newer (`#[kernel(arch = "sm_90a")]` for
//! GEMMs that also use `wgmma`): a `TensorMap` parameter in an older kernel is a compile
//! error.

use ferrocuda_abi::{Element, TensorMap, TensorMapMut};
use ferrocuda_macros::gpu_only;

/// TMA copies through a tensor-map parameter (implemented for [`TensorMap`] and
/// [`TensorMapMut`]).
pub trait Tma {
    /// Number of axes of the map (coordinates per copy).
    const RANK: usize;

    /// Bytes one box copy moves: what the mbarrier of a load must expect per copy.
    const BOX_BYTES: u32;

    /// Bytes of one element.
    const ELEMENT_BYTES: u32;

    /// The descriptor's generic address (parameter space).
    fn map_addr(&self) -> u64;

    /// `prefetch.tensormap`: brings the descriptor into the cache ahead of the first copy
    /// (one thread, early in the kernel).
    #[inline(always)]
    #[gpu_only]
    fn prefetch(&self) {
        // SAFETY: a prefetch of the kernel's own parameter; no effect on memory.
        unsafe {
            core::arch::asm!("prefetch.tensormap [{m}];", m = in(reg64) self.map_addr(), options(nostack))
        };
    }

    /// Copies the box at `coords` (outermost first) into shared memory at `dst` and counts its
    /// [`BOX_BYTES`](Self::BOX_BYTES) as transactions on the mbarrier at `mbar`
    /// (`cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes`).
    ///
    /// # Safety
    ///
    /// 1. `dst` is the 32-bit shared address of [`BOX_BYTES`](Self::BOX_BYTES) bytes of this
    ///    block's shared memory, 128-byte aligned (1024 with the 128-byte swizzle), that no
    ///    thread accesses until the barrier's phase completes.
    /// 2. `mbar` is the 32-bit shared address of an initialised mbarrier of this block whose
    ///    current phase expects these bytes (`arrive.expect_tx` by this or another thread, or
    ///    `expect_tx` before the copy completes).
    /// 3. `coords` has [`RANK`](Self::RANK) entries.
    #[inline(always)]
    #[track_caller]
    #[gpu_only]
    unsafe fn load(&self, dst: u32, mbar: u32, coords: &[i32]) {
        check_inner::<Self>(coords);
        // SAFETY: the caller's contract.
        unsafe { load_raw(self.map_addr(), dst, mbar, coords, None) }
    }

    /// [`load`](Self::load) to the same shared offset in every block of the cluster named in
    /// `cta_mask` (bit `r`: the block of cluster rank `r`), each signalling its own mbarrier
    /// at the same offset (`.multicast::cluster`): one global read feeds several blocks.
    ///
    /// # Safety
    ///
    /// As [`load`](Self::load), for every block in `cta_mask` (each expects the bytes on its
    /// own barrier); the kernel is launched with clusters containing those ranks.
    #[inline(always)]
    #[track_caller]
    #[gpu_only]
    unsafe fn load_multicast(&self, dst: u32, mbar: u32, coords: &[i32], cta_mask: u16) {
        check_inner::<Self>(coords);
        // SAFETY: the caller's contract.
        unsafe { load_raw(self.map_addr(), dst, mbar, coords, Some(cta_mask)) }
    }
}

/// TMA stores through a writable tensor map ([`TensorMapMut`]).
pub trait TmaStore: Tma {
    /// Copies the box at `coords` from shared memory at `src` to the array
    /// (`cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group`); elements of the box outside
    /// the array are not written. Commit with [`store_commit`], wait with [`store_wait_read`].
    ///
    /// # Safety
    ///
    /// 1. `src` is the 32-bit shared address of [`BOX_BYTES`](Tma::BOX_BYTES) bytes of this
    ///    block's shared memory, aligned as for loads, written before a
    ///    `fence.proxy.async.shared::cta` of each writer and a barrier, and not written again
    ///    until a [`store_wait_read`] covers the store.
    /// 2. No other thread of the launch writes the array elements the box covers, and nothing
    ///    reads them before the kernel ends (or a `store_wait` of the writes).
    /// 3. `coords` has [`RANK`](Tma::RANK) entries, none negative (checked: the kernel aborts).
    #[inline(always)]
    #[track_caller]
    #[gpu_only]
    unsafe fn store(&self, src: u32, coords: &[i32]) {
        check_inner::<Self>(coords);
        let mut i = 0;
        while i < coords.len() {
            if coords[i] < 0 {
                crate::diag::fail();
            }
            i += 1;
        }
        let m = self.map_addr();
        let c = inner_first(coords);
        // SAFETY: the caller's contract.
        unsafe {
            match coords.len() {
                1 => core::arch::asm!(
                    "cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [{m}, {{{c0}}}], [{s}];",
                    m = in(reg64) m, s = in(reg32) src, c0 = in(reg32) c[0], options(nostack)),
                2 => core::arch::asm!(
                    "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [{m}, {{{c0}, {c1}}}], [{s}];",
                    m = in(reg64) m, s = in(reg32) src, c0 = in(reg32) c[0], c1 = in(reg32) c[1],
                    options(nostack)),
                3 => core::arch::asm!(
                    "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [{m}, {{{c0}, {c1}, {c2}}}], [{s}];",
                    m = in(reg64) m, s = in(reg32) src, c0 = in(reg32) c[0], c1 = in(reg32) c[1],
                    c2 = in(reg32) c[2], options(nostack)),
                4 => core::arch::asm!(
                    "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [{m}, {{{c0}, {c1}, {c2}, {c3}}}], [{s}];",
                    m = in(reg64) m, s = in(reg32) src, c0 = in(reg32) c[0], c1 = in(reg32) c[1],
                    c2 = in(reg32) c[2], c3 = in(reg32) c[3], options(nostack)),
                _ => core::arch::asm!(
                    "cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [{m}, {{{c0}, {c1}, {c2}, {c3}, {c4}}}], [{s}];",
                    m = in(reg64) m, s = in(reg32) src, c0 = in(reg32) c[0], c1 = in(reg32) c[1],
                    c2 = in(reg32) c[2], c3 = in(reg32) c[3], c4 = in(reg32) c[4], options(nostack)),
            }
        }
    }
}

macro_rules! impl_tma {
    ($($ty:ident),*) => {$(
        impl<T: Element, const SW: u32, const B0: u32, const B1: u32, const B2: u32,
             const B3: u32, const B4: u32> Tma for $ty<T, SW, B0, B1, B2, B3, B4>
        {
            const RANK: usize = $ty::<T, SW, B0, B1, B2, B3, B4>::TILE.rank as usize;
            const BOX_BYTES: u32 = ($ty::<T, SW, B0, B1, B2, B3, B4>::TILE.box_elements()
                * core::mem::size_of::<T>()) as u32;
            const ELEMENT_BYTES: u32 = core::mem::size_of::<T>() as u32;

            #[inline(always)]
            fn map_addr(&self) -> u64 {
                self.addr()
            }
        }
    )*};
}
impl_tma!(TensorMap, TensorMapMut);

impl<
        T: Element,
        const SW: u32,
        const B0: u32,
        const B1: u32,
        const B2: u32,
        const B3: u32,
        const B4: u32,
    > TmaStore for TensorMapMut<T, SW, B0, B1, B2, B3, B4>
{
}

/// Aborts the kernel (location recorded) unless `coords` has the map's rank and its innermost
/// coordinate is a multiple of 16 bytes.
// Its callers are the device's copy bodies (`#[gpu_only]`).
#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
#[inline(always)]
#[track_caller]
fn check_inner<M: Tma + ?Sized>(coords: &[i32]) {
    let Some(&inner) = coords.last() else {
        crate::diag::fail();
    };
    if coords.len() != M::RANK || (inner as i64 * M::ELEMENT_BYTES as i64) % 16 != 0 {
        crate::diag::fail();
    }
}

/// `coords` (outermost first) in the instruction's order (innermost first), padded with 0.
#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
#[inline(always)]
fn inner_first(coords: &[i32]) -> [i32; 5] {
    let mut c = [0i32; 5];
    let n = coords.len().min(5);
    let mut i = 0;
    while i < n {
        c[i] = coords[n - 1 - i];
        i += 1;
    }
    c
}

/// The load instruction for `coords.len()` axes, optionally multicast.
///
/// # Safety
///
/// [`Tma::load`]'s contract (and [`Tma::load_multicast`]'s with a mask).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn load_raw(m: u64, dst: u32, mbar: u32, coords: &[i32], mask: Option<u16>) {
    let c = inner_first(coords);
    macro_rules! load {
        ($dims:literal, $list:literal, $($cn:ident = $ci:literal),*) => {
            match mask {
                None => core::arch::asm!(
                    concat!("cp.async.bulk.tensor.", $dims,
                        ".shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{m}, {{",
                        $list, "}}], [{b}];"),
                    d = in(reg32) dst, m = in(reg64) m, b = in(reg32) mbar,
                    $($cn = in(reg32) c[$ci],)* options(nostack)),
                Some(mask) => core::arch::asm!(
                    concat!("cp.async.bulk.tensor.", $dims,
                        ".shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster \
                         [{d}], [{m}, {{", $list, "}}], [{b}], {k};"),
                    d = in(reg32) dst, m = in(reg64) m, b = in(reg32) mbar, k = in(reg16) mask,
                    $($cn = in(reg32) c[$ci],)* options(nostack)),
            }
        };
    }
    // SAFETY: the caller's contract.
    unsafe {
        match coords.len() {
            1 => load!("1d", "{c0}", c0 = 0),
            2 => load!("2d", "{c0}, {c1}", c0 = 0, c1 = 1),
            3 => load!("3d", "{c0}, {c1}, {c2}", c0 = 0, c1 = 1, c2 = 2),
            4 => load!(
                "4d",
                "{c0}, {c1}, {c2}, {c3}",
                c0 = 0,
                c1 = 1,
                c2 = 2,
                c3 = 3
            ),
            _ => load!(
                "5d",
                "{c0}, {c1}, {c2}, {c3}, {c4}",
                c0 = 0,
                c1 = 1,
                c2 = 2,
                c3 = 3,
                c4 = 4
            ),
        }
    }
}

/// `cp.async.bulk.commit_group`: closes this thread's group of TMA stores issued since the
/// last commit.
#[inline(always)]
#[gpu_only]
pub fn store_commit() {
    // SAFETY: no operands; orders nothing by itself.
    unsafe { core::arch::asm!("cp.async.bulk.commit_group;", options(nostack)) };
}

/// `cp.async.bulk.wait_group.read N`: waits until at most `N` of this thread's committed store
/// groups still read their shared memory (which may then be reused).
#[inline(always)]
#[gpu_only]
pub fn store_wait_read<const N: u32>() {
    // SAFETY: waits only.
    unsafe {
        core::arch::asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack))
    };
}

/// `cp.async.bulk.wait_group N`: waits until at most `N` of this thread's committed store
/// groups are incomplete (their writes to global memory done).
#[inline(always)]
#[gpu_only]
pub fn store_wait<const N: u32>() {
    // SAFETY: waits only.
    unsafe { core::arch::asm!("cp.async.bulk.wait_group {n};", n = const N, options(nostack)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    type M = TensorMap<u16, 128, 128, 64>;

    #[test]
    fn coordinates_go_innermost_first() {
        assert_eq!(inner_first(&[7, 3]), [3, 7, 0, 0, 0]);
        assert_eq!(inner_first(&[1, 2, 3]), [3, 2, 1, 0, 0]);
        assert_eq!(<M as Tma>::RANK, 2);
        assert_eq!(<M as Tma>::BOX_BYTES, 128 * 64 * 2);
    }

    #[test]
    fn inner_coordinates_on_16_bytes_pass() {
        check_inner::<M>(&[3, 8]);
        check_inner::<M>(&[-5, -16]);
    }

    #[test]
    #[should_panic(expected = "device assertion failed")]
    fn an_inner_coordinate_off_16_bytes_aborts() {
        check_inner::<M>(&[0, 4]);
    }

    #[test]
    #[should_panic(expected = "device assertion failed")]
    fn coordinates_of_another_rank_abort() {
        check_inner::<M>(&[0, 0, 8]);
    }
}
