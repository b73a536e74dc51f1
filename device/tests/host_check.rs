//! A kernel crate checks on the host as written: the device modules (`thread`, `warp`,
//! `block`, `atomic`, `shared`, `grid`, `cluster`, `cp_async`, `mbarrier`, `tma`) are there on
//! every target — on the host their functions are `#[gpu_only]` stubs with the device
//! signatures, and `shared_array!` a stub that names itself — so that `cargo check`, clippy and
//! rust-analyzer of a kernel crate need no `cfg` gates around device code.

use ferrocuda_device::atomic::{self, AtomicSlice, Order, Scope};
use ferrocuda_device::block::{self, Sum};
use ferrocuda_device::grid;
use ferrocuda_device::prelude::*;
use ferrocuda_device::shared::{self, SharedArray, SharedArray2};
use ferrocuda_device::tma::{self, Tma, TmaStore};
use ferrocuda_device::{cluster, warp, TensorMap, TensorMapMut};

/// Device code as a kernel crate writes it, with no `cfg`: it type-checks on the host.
#[allow(dead_code)]
fn device_code(y: SliceMut<f32>) -> (u32, f32) {
    let t = thread::index_1d();
    thread::sync_threads();
    let lane = warp::lane_id();
    let votes = warp::ballot_sync(u32::MAX, t < y.len());
    let s = block::warp_reduce(1.0f32, Sum);
    let v = warp::shfl_down_sync(u32::MAX, s, 1);
    cp_async::commit_group();
    cp_async::wait_all();
    cluster::sync();
    (lane ^ votes ^ cluster::rank(), v)
}

/// A histogram with block-shared bins, atomics of an explicit order and scope, fences, a grid
/// barrier and a TMA round trip: device code with no `cfg`, which type-checks on the host.
#[allow(dead_code)]
fn more_device_code(
    x: Slice<u32>,
    bins: AtomicSlice<u32>,
    total: AtomicSlice<f32>,
    bar: GridBarrier,
    src: TensorMap<f32, 0, 16, 32>,
    dst: TensorMapMut<f32, 0, 16, 32>,
) -> u32 {
    let local: SharedArray<u32, 256> = shared_array!(u32, 256);
    let tile: SharedArray2<f32, 16, 32> = shared_array!(f32, [16, 32], align = 128);
    let dynamic = shared::dynamic_shared::<f32>();
    for i in thread::grid_stride(x.len()) {
        let b = x.get(i).unwrap_or(0) as usize % local.len();
        local.atomic(b).red_add(1, Order::Relaxed, Scope::Block);
    }
    thread::sync_threads();
    let mine = thread::rank_in_block() as usize;
    if mine < local.len() {
        bins.at(mine)
            .fetch_add(local.get(mine), Order::Relaxed, Scope::Device);
    }
    let _ = total.atomic_add(0, 1.0);
    atomic::fence(Order::Release, Scope::Device);
    atomic::fence_sc(Scope::System);
    grid::sync(&bar);
    bar.sync();
    let old = bins.at(0).load(Order::Acquire, Scope::Device);
    // SAFETY: as on the device (never run here).
    let swapped =
        unsafe { atomic::shared::fetch_max(local.as_mut_ptr(), old, Order::AcqRel, Scope::Block) };
    // SAFETY: as on the device: the tile and the mbarrier are this block's, the box's bytes
    // expected (never run here).
    unsafe {
        src.prefetch();
        src.load(tile.shared_addr(0, 0), dynamic.shared_addr(0), &[0, 0]);
        dst.store(tile.shared_addr(0, 0), &[0, 0]);
    }
    tma::store_commit();
    tma::store_wait_read::<0>();
    old ^ swapped ^ <TensorMap<f32, 0, 16, 32> as Tma>::BOX_BYTES ^ grid::block_rank() as u32
}

/// The message of a panic.
fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let e = std::panic::catch_unwind(f).expect_err("a host stub must panic");
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Calling one on the host panics, naming it (it is never reached: kernels run on the GPU).
#[test]
fn device_functions_on_the_host_are_stubs_that_name_themselves() {
    let m = panic_message(|| {
        thread::index_1d();
    });
    assert!(m.contains("`index_1d` runs only on the GPU"), "{m}");
    let m = panic_message(|| {
        warp::ballot_sync(u32::MAX, true);
    });
    assert!(m.contains("`ballot_sync` runs only on the GPU"), "{m}");
    // Pure functions keep their body on the host.
    assert_eq!(warp::first_lanes(5), 0b11111);
}

/// The same for the atomics, shared memory, the grid and TMA; what needs no device works.
#[test]
fn atomics_shared_memory_grid_and_tma_on_the_host() {
    let mut words = [0u32; 4];
    // SAFETY: four `u32`s used only through this slice, here.
    let bins = unsafe { AtomicSlice::from_raw_parts(words.as_mut_ptr(), words.len()) };
    // The handle, its bounds check and the atomic reference are target-independent …
    let r = bins.at(2);
    assert_eq!(r.as_ptr(), words.as_mut_ptr().wrapping_add(2));
    // … the operations are stubs.
    let m = panic_message(|| {
        r.fetch_add(1, Order::Relaxed, Scope::Device);
    });
    assert!(m.contains("`fetch_add` runs only on the GPU"), "{m}");
    let m = panic_message(|| atomic::fence(Order::AcqRel, Scope::Block));
    assert!(m.contains("`fence` runs only on the GPU"), "{m}");
    let m = panic_message(|| {
        shared_array!(f32, [16, 17]);
    });
    assert!(m.contains("`shared_array!` runs only on the GPU"), "{m}");
    let m = panic_message(|| {
        shared_array![u32; 256];
    });
    assert!(m.contains("`shared_array!` runs only on the GPU"), "{m}");
    let m = panic_message(|| {
        shared_mbarrier!(2);
    });
    assert!(m.contains("`shared_mbarrier!` runs only on the GPU"), "{m}");
    let m = panic_message(|| {
        shared::dynamic_shared::<f32>();
    });
    assert!(m.contains("`dynamic_shared` runs only on the GPU"), "{m}");
    let m = panic_message(|| {
        grid::thread_rank();
    });
    assert!(m.contains("`thread_rank` runs only on the GPU"), "{m}");
    let m = panic_message(tma::store_commit);
    assert!(m.contains("`store_commit` runs only on the GPU"), "{m}");
}
