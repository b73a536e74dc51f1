//! A kernel crate checks on the host as written: the device modules (`thread`, `warp`,
//! `block`, `cluster`, `cp_async`, `mbarrier`) are there on every target — on the host their
//! functions are `#[gpu_only]` stubs with the device signatures — so that `cargo check`,
//! clippy and rust-analyzer of a kernel crate need no `cfg` gates around device code.

use ferrocuda_device::block::{self, Sum};
use ferrocuda_device::prelude::*;
use ferrocuda_device::{cluster, warp};

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

/// Calling one on the host panics, naming it (it is never reached: kernels run on the GPU).
#[test]
fn device_functions_on_the_host_are_stubs_that_name_themselves() {
    let stub = |f: fn()| {
        let e = std::panic::catch_unwind(f).expect_err("a host stub must panic");
        e.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| e.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    };
    let m = stub(|| {
        thread::index_1d();
    });
    assert!(m.contains("`index_1d` runs only on the GPU"), "{m}");
    let m = stub(|| {
        warp::ballot_sync(u32::MAX, true);
    });
    assert!(m.contains("`ballot_sync` runs only on the GPU"), "{m}");
    // Pure functions keep their body on the host.
    assert_eq!(warp::first_lanes(5), 0b11111);
}
