//! GPU integration tests of the Rust API.
//!
//! Every test here needs a CUDA device. Without one (no driver, or no device), each test is
//! reported as *ignored* and the reason is printed once at the start — the suite neither
//! fails nor passes vacuously. Run on a GPU machine with `cargo test --test gpu`; under
//! `compute-sanitizer` with the compiled test binary.
//!
//! Method: fresh random inputs per test (the seed is printed and can be fixed with
//! `FERROCUDA_TEST_SEED`), outputs poisoned before every launch, every element compared
//! with a host (ndarray) reference.

#![allow(clippy::needless_range_loop, clippy::type_complexity)]

use ferrocuda::host::array::{ForeignArray, HostArg};
use ferrocuda::host::driver::{self, Stream};
use ferrocuda::{bundled, kernels, ArrayDesc, DeviceArray, ErrorKind, LaunchOptions, StreamRef};
use libtest_mimic::{Arguments, Failed, Trial};
use ndarray::{Array, ArrayD, ArrayViewMutD, Axis, IxDyn, Slice};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};

#[path = "common/failed.rs"]
mod failed;
use failed::{ensure, err, TestResult};

/// Launch shape (limits, dynamic shared memory, N-D grids) and the 16-bit float types.
#[path = "gpu/launch.rs"]
mod launch;

/// Launches captured in CUDA graphs.
#[path = "gpu/graphs.rs"]
mod graphs;

/// Bound launches: bound once, launched many times.
#[path = "gpu/bind.rs"]
mod bind;

/// Producer and consumer streams racing: the stream plan's ordering, both halves.
#[path = "gpu/race.rs"]
mod race;

use race::{RACE_DEFAULT, RACE_EVENT, RACE_OFF_OBSERVED};

/// Strided launches through the typed launchers (their layout variants).
#[path = "gpu/layouts.rs"]
mod layouts;

/// Lifetimes of arrays in flight, and the soak (no leaks over 10^5 launches).
#[path = "gpu/lifetime.rs"]
mod lifetime;

/// The cubin each device loads, and the first launch of a fresh process.
#[path = "gpu/cubins.rs"]
mod cubins;

static SEED: AtomicU64 = AtomicU64::new(0);

fn rng(salt: u64) -> StdRng {
    StdRng::seed_from_u64(SEED.load(Ordering::Relaxed) ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// One GPU test: its name, what it needs of the machine — declared with the test, next to its
/// function — and its body. Without what it needs, the test is reported as ignored, and the
/// reason is printed.
#[derive(Clone, Copy)]
struct GpuTest {
    name: &'static str,
    /// CUDA devices the test needs.
    devices: usize,
    run: fn() -> TestResult,
}

impl GpuTest {
    /// A test that needs one CUDA device.
    const fn new(name: &'static str, run: fn() -> TestResult) -> GpuTest {
        GpuTest {
            name,
            devices: 1,
            run,
        }
    }

    /// The same test, needing `n` CUDA devices.
    const fn devices(self, n: usize) -> GpuTest {
        GpuTest { devices: n, ..self }
    }

    /// The libtest trial on a machine with `present` devices.
    fn trial(&self, present: usize) -> Trial {
        let missing = present < self.devices;
        if missing && present > 0 {
            eprintln!(
                "{} SKIPPED (reported as ignored): needs {} CUDA devices, found {present}",
                self.name, self.devices
            );
        }
        Trial::test(self.name, self.run).with_ignored_flag(missing)
    }
}

const SIZES: &[usize] = &[
    0,
    1,
    2,
    3,
    4,
    5,
    7,
    255,
    256,
    257,
    1000,
    4099,
    (1 << 20) + 3,
    (1 << 23) + 5,
];
const DEV: usize = 0;
const L: StreamRef = StreamRef::Legacy;

fn opts() -> LaunchOptions {
    LaunchOptions::default()
}

fn upload<T: ferrocuda::abi::Element>(v: &[T]) -> Result<DeviceArray<T>, Failed> {
    DeviceArray::from_ndarray(&Array::from_vec(v.to_vec()), DEV, L).map_err(err)
}

/// A view of `base`'s memory, `offset_elems` in, with the given shape and element strides.
fn view_of<T: ferrocuda::abi::Element>(
    base: &DeviceArray<T>,
    offset_elems: isize,
    shape: &[usize],
    strides: &[isize],
    readonly: bool,
) -> Result<ForeignArray<()>, Failed> {
    let size = std::mem::size_of::<T>() as isize;
    let byte_strides: Vec<isize> = strides.iter().map(|s| s * size).collect();
    let ptr = (base.device_ptr() as i64 + (offset_elems * size) as i64) as u64;
    let desc = ArrayDesc::from_parts(
        T::DTYPE,
        shape,
        Some(&byte_strides),
        ptr,
        readonly,
        Some(base.stream()),
    )
    .map_err(err)?;
    ForeignArray::new(desc, (), true).map_err(err)
}

/// An element type of the `add` (and `saxpy`) kernels, with what their tests need of it.
trait Sample: ferrocuda::abi::Element + PartialEq + std::fmt::Debug {
    /// A value no correct output takes here: outputs are filled with it before a launch
    /// (NaN would compare unequal to everything, so floats use a finite sentinel).
    const POISON: Self;
    /// A random input.
    fn random(r: &mut StdRng) -> Self;
    /// The host reference of `add`.
    fn add(a: Self, b: Self) -> Self;
    /// The typed launcher of `add` for this type.
    fn launch_add(
        a: &dyn ferrocuda::AsArg,
        b: &dyn ferrocuda::AsArg,
        out: &dyn ferrocuda::AsArg,
    ) -> ferrocuda::Result<ferrocuda::Launched>;
}

macro_rules! sample {
    ($t:ty, $poison:expr, $random:expr, $add:expr, $launch:path) => {
        impl Sample for $t {
            const POISON: $t = $poison;
            fn random(r: &mut StdRng) -> $t {
                $random(r)
            }
            fn add(a: $t, b: $t) -> $t {
                $add(a, b)
            }
            fn launch_add(
                a: &dyn ferrocuda::AsArg,
                b: &dyn ferrocuda::AsArg,
                out: &dyn ferrocuda::AsArg,
            ) -> ferrocuda::Result<ferrocuda::Launched> {
                $launch(a, b, out, &opts())
            }
        }
    };
}
sample!(
    f32,
    -7.25e30,
    |r: &mut StdRng| r.random_range(-1e3f32..1e3),
    |x, y| x + y,
    kernels::add_f32
);
sample!(
    f64,
    -7.25e300,
    |r: &mut StdRng| r.random_range(-1e6f64..1e6),
    |x, y| x + y,
    kernels::add_f64
);
sample!(
    i32,
    i32::MIN + 17,
    |r: &mut StdRng| r.random::<i32>(),
    i32::wrapping_add,
    kernels::add_i32
);
sample!(
    i64,
    i64::MIN + 17,
    |r: &mut StdRng| r.random::<i64>(),
    i64::wrapping_add,
    kernels::add_i64
);

/// `add` of element type `T` on every size of [`SIZES`], at offsets 0..4 elements (the
/// aligned, scalar-head and mismatched paths), every element of the output buffer checked
/// (outside the view it must keep its poison).
fn test_add<T: Sample>() -> TestResult {
    let mut r = rng(T::DTYPE as u64);
    for &n in SIZES {
        for (oa, ob, oo) in [(0, 0, 0), (1, 1, 1), (3, 3, 3), (1, 0, 2)] {
            let a: Vec<T> = (0..n + 4).map(|_| T::random(&mut r)).collect();
            let b: Vec<T> = (0..n + 4).map(|_| T::random(&mut r)).collect();
            let da = upload(&a)?;
            let db = upload(&b)?;
            let dout = upload(&vec![T::POISON; n + 4])?;
            let va = view_of(&da, oa, &[n], &[1], true)?;
            let vb = view_of(&db, ob, &[n], &[1], true)?;
            let vo = view_of(&dout, oo, &[n], &[1], false)?;
            T::launch_add(&va, &vb, &vo).map_err(err)?;
            let got = dout.to_ndarray().map_err(err)?;
            let got = got.as_slice().unwrap();
            for i in 0..n + 4 {
                let want = if i >= oo as usize && i < oo as usize + n {
                    let j = i - oo as usize;
                    T::add(a[j + oa as usize], b[j + ob as usize])
                } else {
                    T::POISON
                };
                ensure(got[i] == want, || {
                    format!(
                        "n={n} offsets=({oa},{ob},{oo}) element {i}: got {:?}, want {want:?}",
                        got[i]
                    )
                })?;
            }
        }
    }
    Ok(())
}

const ADD_F32: GpuTest = GpuTest::new("add_f32", test_add::<f32>);
const ADD_F64: GpuTest = GpuTest::new("add_f64", test_add::<f64>);
const ADD_I32: GpuTest = GpuTest::new("add_i32", test_add::<i32>);
const ADD_I64: GpuTest = GpuTest::new("add_i64", test_add::<i64>);

fn test_initialize_array() -> TestResult {
    for &n in SIZES {
        for off in [0isize, 1, 2, 3] {
            let d = upload(&vec![-5i32; n + 4])?;
            let v = view_of(&d, off, &[n], &[1], false)?;
            kernels::initialize_array(&v, &opts()).map_err(err)?;
            let got = d.to_ndarray().map_err(err)?;
            for (i, &g) in got.iter().enumerate() {
                let want = if i >= off as usize && i < off as usize + n {
                    (i - off as usize) as i32
                } else {
                    -5
                };
                ensure(g == want, || {
                    format!("n={n} off={off} element {i}: got {g}, want {want}")
                })?;
            }
        }
    }
    Ok(())
}

const INITIALIZE_ARRAY: GpuTest = GpuTest::new("initialize_array", test_initialize_array);

/// A float element type of the `saxpy` kernels.
trait Real: Sample + std::ops::Mul<Output = Self> + std::ops::Add<Output = Self> {
    /// A random `alpha`.
    fn random_alpha(r: &mut StdRng) -> Self;
    /// The typed launcher of `saxpy` for this type.
    fn launch_saxpy(
        alpha: Self,
        x: &DeviceArray<Self>,
        y: &DeviceArray<Self>,
    ) -> ferrocuda::Result<ferrocuda::Launched>;
}

macro_rules! real {
    ($t:ty, $launch:path) => {
        impl Real for $t {
            fn random_alpha(r: &mut StdRng) -> $t {
                r.random_range(-4.0..4.0)
            }
            fn launch_saxpy(
                alpha: $t,
                x: &DeviceArray<$t>,
                y: &DeviceArray<$t>,
            ) -> ferrocuda::Result<ferrocuda::Launched> {
                $launch(alpha, x, y, &opts())
            }
        }
    };
}
real!(f32, kernels::saxpy_f32);
real!(f64, kernels::saxpy_f64);

/// `y = alpha * x + y` of element type `T` on every size of [`SIZES`].
fn saxpy_case<T: Real>(r: &mut StdRng) -> TestResult {
    for &n in SIZES {
        let alpha = T::random_alpha(r);
        let x: Vec<T> = (0..n).map(|_| T::random(r)).collect();
        let y: Vec<T> = (0..n).map(|_| T::random(r)).collect();
        let dx = upload(&x)?;
        let dy = upload(&y)?;
        T::launch_saxpy(alpha, &dx, &dy).map_err(err)?;
        let got = dy.to_ndarray().map_err(err)?;
        for (i, &g) in got.iter().enumerate() {
            // Rust never contracts `alpha * x + y` into an FMA, and the PTX uses `.rn`
            // arithmetic, which ptxas does not fuse: the result is exactly the host's.
            let want = alpha * x[i] + y[i];
            ensure(g == want, || {
                format!(
                    "{} n={n} element {i}: got {g:?}, want {want:?}",
                    T::DTYPE.name()
                )
            })?;
        }
    }
    Ok(())
}

fn test_saxpy() -> TestResult {
    let mut r = rng(5);
    saxpy_case::<f32>(&mut r)?;
    saxpy_case::<f64>(&mut r)
}

const SAXPY: GpuTest = GpuTest::new("saxpy", test_saxpy);

/// add_index on strided views of a random base array, against the same operation applied
/// to the same view of a host copy; every element of the base is compared (elements outside
/// the view must be untouched).
fn test_add_index_views() -> TestResult {
    let mut r = rng(6);
    let base_shape = [6usize, 7, 8, 5];
    let total: usize = base_shape.iter().product();
    for case in 0..40 {
        let host: Vec<f32> = (0..total)
            .map(|_| r.random_range(-100.0..100.0f32))
            .collect();
        let mut href = ArrayD::from_shape_vec(IxDyn(&base_shape), host.clone()).unwrap();
        let dev = upload(&host)?;
        let base_ptr = href.as_ptr();
        // A random view: per axis a start and a step (possibly negative), then a random
        // permutation, then indexing away axes down to a random rank 1..=4.
        let mut view: ArrayViewMutD<f32> = href.view_mut();
        for ax in 0..4 {
            let n = view.shape()[ax] as isize;
            let step = [1isize, 2, 3, -1, -2][r.random_range(0..5)];
            let start = r.random_range(0..n.max(1) as i64) as isize;
            view.slice_axis_inplace(Axis(ax), Slice::new(start, None, step));
        }
        let mut perm: Vec<usize> = (0..4).collect();
        for i in (1..4).rev() {
            perm.swap(i, r.random_range(0..=i));
        }
        let mut view = view.permuted_axes(IxDyn(&perm));
        let rank = 1 + case % 4;
        while view.ndim() > rank {
            let ax = view.ndim() - 1;
            if view.shape()[ax] == 0 {
                break;
            }
            let idx = r.random_range(0..view.shape()[ax]);
            view = view.index_axis_move(Axis(ax), idx);
        }
        let offset = if view.is_empty() {
            0
        } else {
            // SAFETY: both pointers are into (or one past) `href`'s allocation.
            unsafe { view.as_ptr().offset_from(base_ptr) }
        };
        let shape = view.shape().to_vec();
        let strides = view.strides().to_vec();
        let dview = view_of(&dev, offset, &shape, &strides, false)?;
        // Reference on the host view.
        for (idx, x) in view.indexed_iter_mut() {
            use ndarray::Dimension as _;
            let s: usize = (0..idx.ndim()).map(|k| idx[k]).sum();
            *x += s as f32;
        }
        let fam = [
            "",
            "add_index_f32_1d",
            "add_index_f32_2d",
            "add_index_f32_3d",
            "add_index_f32_4d",
        ][shape.len()];
        let k = bundled::module().map_err(err)?.kernel(fam).map_err(err)?;
        // SAFETY: bundled kernel, view inside the allocation (checked by the launch).
        unsafe { k.launch(&[dview.arg()], &opts()) }.map_err(err)?;
        let got = dev.to_ndarray().map_err(err)?;
        for (i, (g, w)) in got.iter().zip(href.iter()).enumerate() {
            ensure(g == w, || {
                format!("case {case} shape {shape:?} strides {strides:?}: element {i}: got {g}, want {w}")
            })?;
        }
    }
    Ok(())
}

const ADD_INDEX_VIEWS: GpuTest = GpuTest::new("add_index_views", test_add_index_views);

/// Host (ndarray) arguments: uploaded, launched, mutable ones copied back.
fn test_host_arrays() -> TestResult {
    let mut r = rng(7);
    for &n in &[0usize, 1, 33, 1000] {
        let a: Vec<f32> = (0..n).map(|_| r.random_range(-1e3..1e3f32)).collect();
        let b: Vec<f32> = (0..n).map(|_| r.random_range(-1e3..1e3f32)).collect();
        let ha = ArrayD::from_shape_vec(IxDyn(&[n]), a.clone()).unwrap();
        let hb = ArrayD::from_shape_vec(IxDyn(&[n]), b.clone()).unwrap();
        let mut hout = ArrayD::from_elem(IxDyn(&[n]), -7.25e30f32);
        let k = bundled::module()
            .map_err(err)?
            .kernel("add_f32")
            .map_err(err)?;
        let (va, vb) = (ha.view(), hb.view());
        let mut vo = hout.view_mut();
        let mut args = [HostArg::In(&va), HostArg::In(&vb), HostArg::InOut(&mut vo)];
        // SAFETY: bundled kernel.
        unsafe { k.launch_host(&mut args, DEV, &opts()) }.map_err(err)?;
        for i in 0..n {
            ensure(hout[i] == a[i] + b[i], || {
                format!("n={n} element {i}: got {}, want {}", hout[i], a[i] + b[i])
            })?;
        }
    }
    // A transposed host view as an N-D input/output of add_index.
    let host: Vec<f64> = (0..60).map(|_| r.random_range(-10.0..10.0f64)).collect();
    let mut arr = ArrayD::from_shape_vec(IxDyn(&[3, 4, 5]), host).unwrap();
    let mut want = arr.clone();
    for (idx, x) in want.indexed_iter_mut() {
        *x += (idx[0] + idx[1] + idx[2]) as f64;
    }
    let mut t = arr.view_mut().reversed_axes();
    let k = bundled::module()
        .map_err(err)?
        .kernel("add_index_f64_3d")
        .map_err(err)?;
    let mut args = [HostArg::InOut(&mut t)];
    // SAFETY: bundled kernel.
    unsafe { k.launch_host(&mut args, DEV, &opts()) }.map_err(err)?;
    // add_index adds the *view's* index sum; reversing axes keeps the sum of indices.
    ensure(arr == want, || {
        format!("host add_index mismatch:\n{arr:?}\nvs\n{want:?}")
    })
}

const HOST_ARRAYS: GpuTest = GpuTest::new("host_arrays", test_host_arrays);

/// Launches from 8 threads at once, on distinct and on shared input arrays.
/// Checks the output of thread `t` of the thread tests: `out[i] == i + t` for every element.
fn check_thread_out(out: &DeviceArray<f32>, t: usize) -> TestResult {
    let got = out.to_ndarray().map_err(err)?;
    for (i, &g) in got.iter().enumerate() {
        ensure(g == i as f32 + t as f32, || {
            format!("thread {t} element {i}: {g}")
        })?;
    }
    Ok(())
}

fn test_threads() -> TestResult {
    let n = 4096;
    let shared = upload(&(0..n).map(|i| i as f32).collect::<Vec<_>>())?;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let shared = &shared;
                scope.spawn(move || -> TestResult {
                    let s = Stream::new(DEV, true).map_err(err)?;
                    let mine = DeviceArray::<f32>::empty(&[n], DEV, s.as_ref()).map_err(err)?;
                    mine.copy_from_host(&vec![t as f32; n]).map_err(err)?;
                    let out = DeviceArray::<f32>::empty(&[n], DEV, s.as_ref()).map_err(err)?;
                    for _ in 0..200 {
                        kernels::add_f32(
                            shared,
                            &mine,
                            &out,
                            &LaunchOptions {
                                stream: Some(s.as_ref()),
                                ..opts()
                            },
                        )
                        .map_err(err)?;
                    }
                    check_thread_out(&out, t)
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().unwrap())
    })
}

const THREADS: GpuTest = GpuTest::new("threads", test_threads);

/// Interfaces that lie about their memory are refused, not launched.
fn test_pointer_checks() -> TestResult {
    let d = upload(&vec![1.0f32; 100])?;
    let out = upload(&vec![0.0f32; 101])?;
    // One element past the allocation (allocations are rounded up, so go well past).
    let ints = upload(&vec![3i32; 100])?;
    let past = view_of(&ints, 0, &[1 << 20], &[1], false)?;
    let e = kernels::initialize_array(&past, &opts()).unwrap_err();
    ensure(
        e.kind() == ErrorKind::Value && e.to_string().contains("allocation"),
        || format!("past the end: {e}"),
    )?;
    let got = ints.to_ndarray().map_err(err)?;
    ensure(got.iter().all(|&x| x == 3), || {
        "refused launch wrote".into()
    })?;
    // Host memory.
    let host = [0.0f32; 16];
    let desc = ArrayDesc::from_parts(
        ferrocuda::abi::DType::F32,
        &[16],
        None,
        host.as_ptr() as u64,
        false,
        None,
    )
    .map_err(err)?;
    let h = ForeignArray::new(desc, (), false).map_err(err)?;
    let small = view_of(&d, 0, &[16], &[1], true)?;
    let e = kernels::add_f32(&small, &small, &h, &opts()).unwrap_err();
    ensure(
        e.kind() == ErrorKind::Value && e.to_string().contains("not CUDA device memory"),
        || format!("host pointer: {e}"),
    )?;
    ensure(e.arg() == Some("out"), || {
        format!("error names {:?}", e.arg())
    })?;
    // A read-only output.
    let ro = view_of(&out, 0, &[16], &[1], true)?;
    let e = kernels::add_f32(&small, &small, &ro, &opts()).unwrap_err();
    ensure(
        e.kind() == ErrorKind::Value && e.to_string().contains("read-only"),
        || format!("read-only: {e}"),
    )?;
    // Shapes that differ.
    let o15 = view_of(&out, 0, &[15], &[1], false)?;
    let e = kernels::add_f32(&small, &small, &o15, &opts()).unwrap_err();
    ensure(
        e.kind() == ErrorKind::Value && e.to_string().contains("same shape"),
        || format!("shape: {e}"),
    )?;
    // Partial overlap of output and input.
    let shifted = view_of(&d, 1, &[16], &[1], false)?;
    let e = kernels::add_f32(&small, &small, &shifted, &opts()).unwrap_err();
    ensure(
        e.kind() == ErrorKind::Value && e.to_string().contains("overlaps"),
        || format!("overlap: {e}"),
    )?;
    // The memory was never written.
    let got = d.to_ndarray().map_err(err)?;
    ensure(got.iter().all(|&x| x == 1.0), || {
        "refused launches must not write".into()
    })
}

const POINTER_CHECKS: GpuTest = GpuTest::new("pointer_checks", test_pointer_checks);

/// DeviceArray: round trip, CAI export, empty arrays.
fn test_device_array() -> TestResult {
    let mut r = rng(8);
    let v: Vec<i64> = (0..1234).map(|_| r.random()).collect();
    let host = ArrayD::from_shape_vec(IxDyn(&[2, 617]), v).unwrap();
    let s = Stream::new(DEV, false).map_err(err)?;
    let d = DeviceArray::from_ndarray(&host, DEV, s.as_ref()).map_err(err)?;
    ensure(d.to_ndarray().map_err(err)? == host, || "round trip".into())?;
    let desc = d.desc();
    ensure(
        desc.version() == 3 && desc.stream() == Some(s.as_ref()) && desc.shape() == [2, 617],
        || format!("{desc:?}"),
    )?;
    let e = DeviceArray::<f32>::empty(&[0, 5], DEV, L).map_err(err)?;
    ensure(
        e.device_ptr() == 0 && e.to_ndarray().map_err(err)?.shape() == [0, 5],
        || "empty".into(),
    )?;
    // Zero-size launches do nothing and succeed.
    let launched = kernels::add_f32(&e, &e, &e, &opts()).map_err(err)?;
    ensure(launched.config.is_none(), || "nothing should launch".into())
}

const DEVICE_ARRAY: GpuTest = GpuTest::new("device_array", test_device_array);

/// Two devices: arrays on device 1 launch there and give the right result; mixing devices is
/// a `Value` error naming the argument, and nothing runs. Needs 2 CUDA devices (ignored
/// otherwise, with the reason printed at the start).
fn test_two_devices() -> TestResult {
    let mut r = rng(12);
    let n = 4099;
    let ha: Vec<f32> = (0..n).map(|_| r.random_range(-1e3f32..1e3)).collect();
    let hb: Vec<f32> = (0..n).map(|_| r.random_range(-1e3f32..1e3)).collect();
    let on = |v: &[f32], dev: usize| {
        DeviceArray::from_ndarray(&Array::from_vec(v.to_vec()), dev, L).map_err(err)
    };
    let (a1, b1, out1) = (on(&ha, 1)?, on(&hb, 1)?, on(&vec![f32::NAN; n], 1)?);
    ensure(a1.device() == 1, || {
        format!("a1 is on device {}", a1.device())
    })?;
    let launched = kernels::add_f32(&a1, &b1, &out1, &opts()).map_err(err)?;
    ensure(launched.device == 1, || {
        format!("launched on device {}", launched.device)
    })?;
    let got = out1.to_ndarray().map_err(err)?;
    for i in 0..n {
        ensure(got[[i]] == ha[i] + hb[i], || {
            format!("out[{i}] = {} but a + b = {}", got[[i]], ha[i] + hb[i])
        })?;
    }
    // Mixed devices: refused before anything runs; `out` keeps its poison.
    let out1 = on(&vec![f32::NAN; n], 1)?;
    let a0 = on(&ha, 0)?;
    let e = match kernels::add_f32(&a0, &b1, &out1, &opts()) {
        Ok(_) => return Err("a launch on arrays of two devices was accepted".into()),
        Err(e) => e,
    };
    let msg = e.to_string();
    ensure(
        e.kind() == ErrorKind::Value && msg.contains("must be on one device"),
        || format!("{:?}: {msg}", e.kind()),
    )?;
    let got = out1.to_ndarray().map_err(err)?;
    ensure(got.iter().all(|x| x.is_nan()), || {
        "out changed although the launch was refused".into()
    })
}

const TWO_DEVICES: GpuTest = GpuTest::new("two_devices", test_two_devices).devices(2);

/// A kernel that traps surfaces as a CUDA error naming the kernel. The fault makes the
/// context unusable, so it runs in a child process (this binary, re-executed).
fn test_fault_names_kernel() -> TestResult {
    let exe = std::env::current_exe().map_err(err)?;
    let out = std::process::Command::new(exe)
        .env(ferrocuda_config::FAULT_CHILD.name, "1")
        .output()
        .map_err(err)?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    ensure(out.status.code() == Some(3), || {
        format!("child exit {:?}: {text}", out.status)
    })?;
    ensure(
        text.contains("`checked_write`") && text.contains("sticky"),
        || format!("fault report: {text}"),
    )
}

const FAULT_NAMES_KERNEL: GpuTest = GpuTest::new("fault_names_kernel", test_fault_names_kernel);

/// The child side of `test_fault_names_kernel`: an in-bounds write works, an out-of-bounds
/// one traps; exits 3 after printing the error of the synchronization that reports it.
fn fault_child() -> ! {
    let run = || -> Result<String, String> {
        let x = DeviceArray::<i32>::empty(&[8], DEV, L).map_err(|e| e.to_string())?;
        kernels::checked_write(&x, 7, 42, &opts()).map_err(|e| e.to_string())?;
        let got = x.to_ndarray().map_err(|e| e.to_string())?;
        if got[7] != 42 {
            return Err("in-bounds write lost".into());
        }
        kernels::checked_write(&x, 8, 1, &opts()).map_err(|e| e.to_string())?;
        match x.synchronize() {
            Ok(()) => Err("the out-of-bounds write did not fault".into()),
            Err(e) => Ok(e.to_string()),
        }
    };
    match run() {
        Ok(report) => {
            println!("{report}");
            std::process::exit(3)
        }
        Err(e) => {
            println!("unexpected: {e}");
            std::process::exit(1)
        }
    }
}

fn main() {
    let child = |v: &ferrocuda_config::Var| v.switch().unwrap_or_else(|e| panic!("{e}"));
    if child(&ferrocuda_config::FAULT_CHILD) {
        fault_child();
    }
    if child(&ferrocuda_config::FIRST_LAUNCH_CHILD) {
        cubins::first_launch_child();
    }
    let args = Arguments::from_args();
    let seed = ferrocuda_config::TEST_SEED
        .count()
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    SEED.store(seed, Ordering::Relaxed);
    let devices = match driver::device_count() {
        Ok(n) if n > 0 => {
            eprintln!(
                "GPU tests: {n} CUDA device(s); seed {seed} (set FERROCUDA_TEST_SEED to repeat)"
            );
            n
        }
        Ok(_) => {
            eprintln!("GPU tests SKIPPED (reported as ignored): the CUDA driver reports no device");
            0
        }
        Err(e) => {
            eprintln!("GPU tests SKIPPED (reported as ignored): {e}");
            0
        }
    };
    let tests = [
        ADD_F32,
        ADD_F64,
        ADD_I32,
        ADD_I64,
        INITIALIZE_ARRAY,
        SAXPY,
        ADD_INDEX_VIEWS,
        HOST_ARRAYS,
        RACE_DEFAULT,
        RACE_EVENT,
        RACE_OFF_OBSERVED,
        THREADS,
        POINTER_CHECKS,
        DEVICE_ARRAY,
        FAULT_NAMES_KERNEL,
        lifetime::DROPPED_INPUT_IN_FLIGHT,
        lifetime::DROPPED_INPUT_OFF_OBSERVED,
        lifetime::SOAK_NO_LEAKS,
        TWO_DEVICES,
    ];
    let trials = tests
        .iter()
        .chain(&launch::TESTS)
        .chain(&graphs::TESTS)
        .chain(&bind::TESTS)
        .chain(&layouts::TESTS)
        .chain(&cubins::TESTS)
        .map(|t| t.trial(devices))
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
