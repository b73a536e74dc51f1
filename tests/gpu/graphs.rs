//! GPU tests of launches captured in CUDA graphs (a module of `tests/gpu.rs`): ferrocuda
//! `Stream`s captured with the driver's own `cuStreamBeginCapture` (global mode, through
//! cudarc), the graph instantiated and launched several times with new input data.
//!
//! * `graph_replays_in_every_mode`: a chain of `add` launches on arrays of the capturing
//!   stream, in each sync mode: nothing runs during the capture (the outputs stay poisoned),
//!   every replay computes the chain on the new inputs;
//! * `graph_producer_stream_joined`: a producer stream forked into the capture writes the input
//!   behind a slow kernel; the launch on the origin stream waits for it at every replay in the
//!   `default` and `event` modes (the captured event edge), and the producer stream waits for
//!   the launch before it is joined back;
//! * `graph_scratch_and_zero`: `sum_f32` (a scratch workspace: memory nodes) and
//!   `histogram_f32` (a zeroed output: a memset node) replayed on new data;
//! * `graph_bound_before_capture`: launches bound (`Kernel::bind`) outside any capture and
//!   launched inside one, in each sync mode: `sum_f32`'s workspace is the graph's own (an
//!   allocation node, never the stream's kept workspace) and every replay sums the new data;
//!   a bound `add` whose producer stream is outside the capture is refused naming the
//!   argument in the ordering modes (its plan is made again per launch), launched unordered
//!   with sync off, and the capture survives;
//! * `graph_refusals_keep_the_capture`: a producer outside the capture (the legacy default
//!   stream), a host array and a `DeviceArray` allocation on the capturing stream are refused
//!   with `Unsupported` errors, and the capture still ends with a graph that replays the
//!   launches around them.

use super::{ensure, err, rng, GpuTest, TestResult, DEV};
use cudarc::driver::{result as cu, sys};
use ferrocuda::host::array::HostArg;
use ferrocuda::host::driver::{Context, Stream};
use ferrocuda::{kernels, AsArg, DeviceArray, ErrorKind, LaunchOptions, StreamRef, SyncMode};
use libtest_mimic::Failed;
use ndarray::{Array, ArrayD, IxDyn};
use rand::RngExt;

pub const TESTS: [GpuTest; 5] = [
    GpuTest::new("graph_replays_in_every_mode", test_replays),
    GpuTest::new("graph_producer_stream_joined", test_producer_joined),
    GpuTest::new("graph_scratch_and_zero", test_scratch_and_zero),
    GpuTest::new("graph_bound_before_capture", test_bound_before_capture),
    GpuTest::new("graph_refusals_keep_the_capture", test_refusals),
];

const MODES: [SyncMode; 3] = [SyncMode::Default, SyncMode::Event, SyncMode::Off];
const N: usize = 1 << 14;

fn raw(s: StreamRef) -> sys::CUstream {
    s.as_raw() as usize as sys::CUstream
}

/// An instantiated graph, destroyed on drop.
struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl Graph {
    /// Captures (global mode) what `body` enqueues on `s`; the capture is ended even when
    /// `body` fails, and its error comes first.
    fn capture(s: StreamRef, body: impl FnOnce() -> TestResult) -> Result<Graph, Failed> {
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL;
        // SAFETY: a live stream of the current context.
        unsafe { cu::stream::begin_capture(raw(s), mode) }.map_err(err)?;
        let body = body();
        // SAFETY: the capture was begun on `s` by this thread.
        let graph = unsafe { cu::stream::end_capture(raw(s)) };
        body?;
        let graph = graph.map_err(|e| err(format!("the capture failed to end: {e}")))?;
        let flags = sys::CUgraphInstantiate_flags(0);
        // SAFETY: a graph just returned by the driver.
        match unsafe { cu::graph::instantiate(graph, flags) } {
            Ok(exec) => Ok(Graph { graph, exec }),
            Err(e) => {
                // SAFETY: as above, not used afterwards.
                let _ = unsafe { cu::graph::destroy(graph) };
                Err(err(e))
            }
        }
    }

    fn launch(&self, s: StreamRef) -> TestResult {
        // SAFETY: an instantiated graph and a live stream of the current context.
        unsafe { cu::graph::launch(self.exec, raw(s)) }.map_err(err)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: created by `capture`, launched work synchronized by the tests before the
        // drop, not used afterwards.
        unsafe {
            let _ = cu::graph::exec_destroy(self.exec);
            let _ = cu::graph::destroy(self.graph);
        }
    }
}

fn on(s: StreamRef, mode: SyncMode) -> LaunchOptions {
    LaunchOptions {
        stream: Some(s),
        sync: Some(mode),
        ..LaunchOptions::default()
    }
}

fn ints(r: &mut rand::rngs::StdRng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| r.random_range(-1000i32..1000) as f32)
        .collect()
}

fn array(v: &[f32], s: StreamRef) -> Result<DeviceArray<f32>, Failed> {
    DeviceArray::from_ndarray(&Array::from_vec(v.to_vec()), DEV, s).map_err(err)
}

fn all_nan(a: &DeviceArray<f32>) -> Result<bool, Failed> {
    Ok(a.to_ndarray().map_err(err)?.iter().all(|v| v.is_nan()))
}

fn test_replays() -> TestResult {
    let _ctx = Context::get(DEV).and_then(|c| c.enter()).map_err(err)?;
    let stream = Stream::new(DEV, true).map_err(err)?;
    let s = stream.as_ref();
    let mut r = rng(0x6a);
    let nan = vec![f32::NAN; N];
    let (a, b) = (array(&ints(&mut r, N), s)?, array(&ints(&mut r, N), s)?);
    let bufs: Vec<DeviceArray<f32>> = (0..20).map(|_| array(&nan, s)).collect::<Result<_, _>>()?;
    for mode in MODES {
        let o = on(s, mode);
        kernels::add_f32(&a, &b, &bufs[0], &o).map_err(err)?; // warm-up
        stream.synchronize().map_err(err)?;
        // Every buffer poisoned again: the previous mode's replays filled them.
        for x in &bufs {
            x.copy_from_host(&nan).map_err(err)?;
        }
        let graph = Graph::capture(s, || {
            kernels::add_f32(&a, &b, &bufs[0], &o).map_err(err)?;
            for i in 1..bufs.len() {
                kernels::add_f32(&bufs[i - 1], &b, &bufs[i], &o).map_err(err)?;
            }
            Ok(())
        })?;
        stream.synchronize().map_err(err)?;
        for x in &bufs {
            ensure(all_nan(x)?, || {
                format!("{mode:?}: a launch ran during the capture")
            })?;
        }
        for _ in 0..3 {
            let (na, nb) = (ints(&mut r, N), ints(&mut r, N));
            a.copy_from_host(&na).map_err(err)?;
            b.copy_from_host(&nb).map_err(err)?;
            for x in &bufs {
                x.copy_from_host(&nan).map_err(err)?;
            }
            graph.launch(s)?;
            stream.synchronize().map_err(err)?;
            let k = bufs.len() as f32;
            let got = bufs[bufs.len() - 1].to_ndarray().map_err(err)?;
            for i in 0..N {
                let want = na[i] + k * nb[i];
                ensure(got[i] == want, || {
                    format!("{mode:?}: [{i}] {} != {want}", got[i])
                })?;
            }
        }
    }
    Ok(())
}

/// Forks `side` into the capture of `origin` (an event recorded on `origin`, waited on by
/// `side`), or joins it back (the reverse), through the driver.
fn edge(from: StreamRef, to: StreamRef) -> TestResult {
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;
    let e = cu::event::create(flags).map_err(err)?;
    let wait = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
    // SAFETY: a fresh event of the current context; live streams of it.
    let r = unsafe { cu::event::record(e, raw(from)) }
        // SAFETY: as above.
        .and_then(|()| unsafe { cu::stream::wait_event(raw(to), e, wait) });
    // SAFETY: the wait was enqueued (it captured the record); not used afterwards.
    let _ = unsafe { cu::event::destroy(e) };
    r.map_err(err)
}

fn test_producer_joined() -> TestResult {
    let _ctx = Context::get(DEV).and_then(|c| c.enter()).map_err(err)?;
    let (origin, side) = (Stream::new(DEV, true), Stream::new(DEV, true));
    let (origin, side) = (origin.map_err(err)?, side.map_err(err)?);
    let (s, p) = (origin.as_ref(), side.as_ref());
    let mut r = rng(0x6b);
    let nan = vec![f32::NAN; N];
    let src = array(&ints(&mut r, N), s)?;
    let y = array(&ints(&mut r, N), s)?;
    let x = array(&nan, p)?; // produced on the side stream
    let zeros = array(&vec![0.0; N], p)?;
    let out = array(&nan, s)?;
    for mode in [SyncMode::Default, SyncMode::Event] {
        kernels::add_f32(&x, &y, &out, &on(s, mode)).map_err(err)?; // warm-up
        let slow = on(p, SyncMode::Off);
        kernels::fill_slow(&x, 0.0, 2_000_000, &slow).map_err(err)?;
        driver_sync(&[&origin, &side])?;
        let graph = Graph::capture(s, || {
            edge(s, p)?; // fork: the side stream joins the capture
            kernels::fill_slow(&x, 0.0, 2_000_000, &slow).map_err(err)?;
            kernels::add_f32(&src, &zeros, &x, &slow).map_err(err)?; // x = src, late
            kernels::add_f32(&x, &y, &out, &on(s, mode)).map_err(err)?;
            edge(p, s) // join
        })?;
        for _ in 0..3 {
            let (ns, ny) = (ints(&mut r, N), ints(&mut r, N));
            src.copy_from_host(&ns).map_err(err)?;
            y.copy_from_host(&ny).map_err(err)?;
            x.copy_from_host(&nan).map_err(err)?;
            out.copy_from_host(&nan).map_err(err)?;
            graph.launch(s)?;
            driver_sync(&[&origin, &side])?;
            let got = out.to_ndarray().map_err(err)?;
            for i in 0..N {
                let want = ns[i] + ny[i];
                ensure(got[i] == want, || {
                    format!(
                        "{mode:?}: [{i}] {} != {want}: the kernel overtook the producer",
                        got[i]
                    )
                })?;
            }
        }
    }
    Ok(())
}

fn driver_sync(streams: &[&Stream]) -> TestResult {
    for s in streams {
        s.synchronize().map_err(err)?;
    }
    Ok(())
}

/// `total` holds the sum of `x` (non-negative values), to a float sum's rounding.
fn check_sum(mode: SyncMode, total: &DeviceArray<f32>, x: &[f32]) -> TestResult {
    let want: f64 = x.iter().map(|&v| f64::from(v)).sum();
    let got = f64::from(total.to_ndarray().map_err(err)?[[0]]);
    ensure((got - want).abs() <= 1e-4 * want, || {
        format!("{mode:?}: sum {got} != {want}")
    })
}

fn test_scratch_and_zero() -> TestResult {
    let _ctx = Context::get(DEV).and_then(|c| c.enter()).map_err(err)?;
    let stream = Stream::new(DEV, true).map_err(err)?;
    let s = stream.as_ref();
    let mut r = rng(0x6c);
    let nbins = 32usize;
    let x = array(&vec![0.0; N], s)?;
    let total = array(&[f32::NAN], s)?;
    let bins = DeviceArray::<i64>::from_ndarray(&Array::from_vec(vec![-1i64; nbins]), DEV, s)
        .map_err(err)?;
    for mode in MODES {
        let o = on(s, mode);
        kernels::sum_f32(&x, &total, &o).map_err(err)?;
        kernels::histogram_f32(&x, &bins, 0.0, 1.0, &o).map_err(err)?;
        stream.synchronize().map_err(err)?;
        let graph = Graph::capture(s, || {
            kernels::sum_f32(&x, &total, &o).map_err(err)?;
            kernels::histogram_f32(&x, &bins, 0.0, 1.0, &o).map_err(err)?;
            Ok(())
        })?;
        for _ in 0..3 {
            let nx: Vec<f32> = (0..N).map(|_| r.random_range(0.0f32..1.0)).collect();
            x.copy_from_host(&nx).map_err(err)?;
            total.copy_from_host(&[f32::NAN]).map_err(err)?;
            bins.copy_from_host(&vec![-1; nbins]).map_err(err)?;
            graph.launch(s)?;
            stream.synchronize().map_err(err)?;
            check_sum(mode, &total, &nx)?;
            let mut counts = vec![0i64; nbins];
            for &v in &nx {
                counts[((v * nbins as f32) as usize).min(nbins - 1)] += 1;
            }
            let got = bins.to_ndarray().map_err(err)?;
            let got: Vec<i64> = got.iter().copied().collect();
            ensure(got == counts, || {
                format!("{mode:?}: bins {got:?} != {counts:?}")
            })?;
        }
    }
    Ok(())
}

/// How many nodes of type `ty` the captured graph holds.
fn nodes_of(graph: &Graph, ty: sys::CUgraphNodeType) -> Result<usize, Failed> {
    let mut n = 0usize;
    // SAFETY: a live graph; a null array asks for the count only.
    let r = unsafe { sys::cuGraphGetNodes(graph.graph, std::ptr::null_mut(), &mut n) };
    r.result().map_err(err)?;
    let mut nodes = vec![std::ptr::null_mut(); n];
    // SAFETY: room for `n` nodes.
    let r = unsafe { sys::cuGraphGetNodes(graph.graph, nodes.as_mut_ptr(), &mut n) };
    r.result().map_err(err)?;
    let mut count = 0;
    for &node in &nodes[..n] {
        let mut t = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
        // SAFETY: a node of the live graph.
        unsafe { sys::cuGraphNodeGetType(node, &mut t) }
            .result()
            .map_err(err)?;
        count += usize::from(t == ty);
    }
    Ok(count)
}

fn test_bound_before_capture() -> TestResult {
    let _ctx = Context::get(DEV).and_then(|c| c.enter()).map_err(err)?;
    let stream = Stream::new(DEV, true).map_err(err)?;
    let side = Stream::new(DEV, true).map_err(err)?;
    let s = stream.as_ref();
    let mut r = rng(0x6e);
    let module = ferrocuda::bundled::module().map_err(err)?;
    let (sum, add) = (
        module.kernel("sum_f32").map_err(err)?,
        module.kernel("add_f32").map_err(err)?,
    );
    let x = array(&vec![0.0; N], s)?;
    let total = array(&[f32::NAN], s)?;
    let ny = ints(&mut r, N);
    // Produced on `side`, a stream the capture never joins.
    let y = array(&ny, side.as_ref())?;
    let out = array(&vec![f32::NAN; N], s)?;
    side.synchronize().map_err(err)?;
    for mode in MODES {
        let o = on(s, mode);
        let bsum = sum.bind(&[x.as_arg(), total.as_arg()], &o).map_err(err)?;
        let badd = add
            .bind(&[x.as_arg(), y.as_arg(), out.as_arg()], &o)
            .map_err(err)?;
        // Outside capture first: the stream's kept workspace.
        // SAFETY: bundled kernels (memory-safe for checked arguments); the arrays outlive the
        // bound launches (borrowed by them).
        unsafe { bsum.launch() }.map_err(err)?;
        stream.synchronize().map_err(err)?;
        ensure(!bsum.prepared().plan().is_captured(), || {
            "bind-time plan".into()
        })?;
        let graph = Graph::capture(s, || {
            // SAFETY: as above.
            let launched = unsafe { bsum.launch() }.map_err(err)?;
            ensure(launched.plan.is_captured(), || {
                format!("{mode:?}: the bound sum was not planned as captured")
            })?;
            // SAFETY: as above.
            let added = unsafe { badd.launch() };
            if mode == SyncMode::Off {
                added.map_err(err)?;
            } else {
                let arg = added
                    .as_ref()
                    .err()
                    .and_then(|e| e.arg())
                    .map(str::to_owned);
                unsupported(
                    "bound add, producer outside",
                    added,
                    "not part of that capture",
                )?;
                ensure(arg.as_deref() == Some("b"), || {
                    format!("{mode:?}: named {arg:?}")
                })?;
            }
            Ok(())
        })?;
        let allocs = nodes_of(&graph, sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEM_ALLOC)?;
        ensure(allocs == 1, || {
            format!("{mode:?}: {allocs} allocation nodes; the graph must own its workspace")
        })?;
        for _ in 0..3 {
            let nx: Vec<f32> = (0..N).map(|_| r.random_range(0.0f32..1.0)).collect();
            x.copy_from_host(&nx).map_err(err)?;
            total.copy_from_host(&[f32::NAN]).map_err(err)?;
            out.copy_from_host(&vec![f32::NAN; N]).map_err(err)?;
            graph.launch(s)?;
            stream.synchronize().map_err(err)?;
            check_sum(mode, &total, &nx)?;
            let got = out.to_ndarray().map_err(err)?;
            for i in 0..N {
                // With sync off the add was captured (unordered: `y` was ready before);
                // refused otherwise, so its output stays poisoned.
                let ok = match mode {
                    SyncMode::Off => got[i] == nx[i] + ny[i],
                    _ => got[i].is_nan(),
                };
                ensure(ok, || format!("{mode:?}: out[{i}] = {}", got[i]))?;
            }
        }
    }
    Ok(())
}

fn unsupported(what: &str, r: ferrocuda::Result<impl std::fmt::Debug>, text: &str) -> TestResult {
    match r {
        Ok(v) => Err(Failed::from(format!("{what}: not refused ({v:?})"))),
        Err(e) => ensure(
            e.kind() == ErrorKind::Unsupported && e.message().contains(text),
            || format!("{what}: {e:?}"),
        ),
    }
}

fn test_refusals() -> TestResult {
    let _ctx = Context::get(DEV).and_then(|c| c.enter()).map_err(err)?;
    let stream = Stream::new(DEV, true).map_err(err)?;
    let s = stream.as_ref();
    let mut r = rng(0x6d);
    let (na, nb) = (ints(&mut r, N), ints(&mut r, N));
    let (a, b) = (array(&na, s)?, array(&nb, s)?);
    let legacy = array(&nb, StreamRef::Legacy)?;
    let nan = vec![f32::NAN; N];
    let (o1, o2) = (array(&nan, s)?, array(&nan, s)?);
    let host: ArrayD<f32> = Array::from_shape_vec(IxDyn(&[N]), nb.clone()).map_err(err)?;
    kernels::add_f32(&a, &b, &o1, &on(s, SyncMode::Default)).map_err(err)?;
    o1.copy_from_host(&nan).map_err(err)?;
    let add = ferrocuda::bundled::module()
        .and_then(|m| m.kernel("add_f32"))
        .map_err(err)?;
    let graph = Graph::capture(s, || {
        kernels::add_f32(&a, &b, &o1, &on(s, SyncMode::Default)).map_err(err)?;
        for mode in [SyncMode::Default, SyncMode::Event] {
            let launched = kernels::add_f32(&a, &legacy, &o2, &on(s, mode));
            unsupported("legacy producer", launched, "not part of that capture")?;
        }
        let mut args = [
            HostArg::Device(a.arg()),
            HostArg::In(&host),
            HostArg::Device(o2.arg()),
        ];
        // SAFETY: a bundled kernel (memory-safe for checked arguments); the arrays outlive it.
        let staged = unsafe { add.launch_host(&mut args, DEV, &on(s, SyncMode::Default)) };
        unsupported("host array", staged, "CUDA graph")?;
        let alloc = DeviceArray::<f32>::empty(&[16], DEV, s);
        unsupported("allocation", alloc, "allocate a DeviceArray")?;
        kernels::add_f32(&o1, &b, &o2, &on(s, SyncMode::Off)).map_err(err)?;
        Ok(())
    })?;
    graph.launch(s)?;
    stream.synchronize().map_err(err)?;
    let got = o2.to_ndarray().map_err(err)?;
    for i in 0..N {
        let want = na[i] + 2.0 * nb[i];
        ensure(got[i] == want, || format!("[{i}] {} != {want}", got[i]))?;
    }
    Ok(())
}
