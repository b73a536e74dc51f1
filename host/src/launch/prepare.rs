//! Phase 1 of a launch: [`Kernel::prepare`] computes, once, everything a launch decides —
//! checked arguments, producers, device, stream plan, context and configuration.

use super::extras::ScratchPlan;
use super::{check_args, default_sync_mode, shape, Arg, LaunchOptions};
use crate::driver::{self, result as cu, Context, LaunchAttrs, PointerInfo};
use crate::error::{Error, Key, Result};
use crate::interop::cai::ArrayDesc;
use crate::module::{Function, Kernel, Param, MAX_PARAMS};
use crate::stream::{self, Plan, StreamRef};

/// A launch with everything decided: what [`Kernel::prepare`] returns and
/// [`execute`](Prepared::execute) runs.
#[derive(Clone, Copy, Debug)]
pub struct Prepared<'m> {
    pub(super) kernel: Kernel<'m>,
    pub(super) plan: Plan,
    /// The caller's launch stream (`LaunchOptions::stream`), kept for [`replan`](Self::replan).
    pub(super) caller: Option<StreamRef>,
    pub(super) ctx: &'static Context,
    /// The function, grid and block; `None` when there is nothing to launch (every array is
    /// empty and no grid was given).
    pub(super) launch: Option<(Function, [u32; 3], [u32; 3])>,
    /// The launch attributes: cooperative, clusters, or none (a plain launch).
    pub(super) attrs: LaunchAttrs,
    pub(super) shared_mem_bytes: u32,
    /// The launch's scratch workspaces (none for most kernels).
    pub(super) scratch: ScratchPlan,
    /// Bit `i` set: argument `i` was given as [`Arg::Host`].
    pub(super) staged: u64,
    pub(super) nargs: usize,
}

impl<'m> Prepared<'m> {
    /// The device the kernel runs on.
    pub fn device(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The stream the kernel is launched on (host arrays are staged on it).
    pub fn launch_stream(&self) -> StreamRef {
        self.plan.launch_stream()
    }

    /// The stream plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The kernel's parameter `index` (for naming staged arguments).
    pub fn param(&self, index: usize) -> Option<&Param> {
        self.kernel.signature().params.get(index)
    }

    /// The kernel.
    pub fn kernel(&self) -> Kernel<'m> {
        self.kernel
    }

    /// The grid and block of the launch; `None` when there is nothing to launch (every array
    /// is empty and no grid was given).
    pub fn config(&self) -> Option<([u32; 3], [u32; 3])> {
        self.launch.map(|(_, grid, block)| (grid, block))
    }

    /// The launch attributes: [`LaunchAttrs::Cooperative`] for a `#[kernel(cooperative)]`
    /// kernel, [`LaunchAttrs::Cluster`] for a `#[kernel(cluster = …)]` one, else
    /// [`LaunchAttrs::Plain`].
    pub fn attributes(&self) -> LaunchAttrs {
        self.attrs
    }

    /// Recomputes the stream plan for the producers' streams as they are *now* — for a launch
    /// prepared once and executed again after a producer moved to another stream (a bound
    /// launch: torch's or CuPy's current stream changed). The rule is [`stream::plan`]'s,
    /// with the caller's stream and the sync mode given to [`Kernel::prepare`].
    ///
    /// `producers` are the array arguments' streams in argument order, as `prepare` reads
    /// them from the descriptions. Everything else prepared stands: the arrays must still be
    /// the prepared ones (pointers, shapes, strides).
    ///
    /// The new plan is put under the capture rules as `prepare`'s is (the launch stream and
    /// the ordered producer streams asked for their capture state): a bound launch replayed
    /// inside a CUDA graph capture gets captured event edges instead of host
    /// synchronizations, or a refusal naming the argument.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Value`](crate::ErrorKind::Value) beyond
    /// [`MAX_PRODUCERS`](stream::MAX_PRODUCERS) producers; a plan refused under capture
    /// ([`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)).
    pub fn replan(&mut self, producers: &[Option<StreamRef>]) -> Result<()> {
        let _caller = driver::CallerContext::save();
        self.ctx.bind()?;
        self.plan = self.plan_for(producers)?;
        Ok(())
    }

    /// The plan [`replan`](Self::replan) makes, the prepared context being current.
    pub(super) fn plan_for(&self, producers: &[Option<StreamRef>]) -> Result<Plan> {
        let plan = stream::plan(producers, self.caller, self.plan.mode())?;
        driver::capture_plan(plan).map_err(|r| refusal(&self.kernel, producers, r))
    }
}

/// What the array arguments say: their streams, their device, the largest element count.
struct Arrays {
    producers: [Option<StreamRef>; stream::MAX_PRODUCERS],
    count: usize,
    /// The device of the first checked pointer, with the parameter that named it.
    device: Option<(usize, usize)>,
    work: usize,
    /// The argument with the most elements (the first of them), if any array is given.
    largest: Option<usize>,
    staged: u64,
}

impl<'m> Kernel<'m> {
    /// Phase 1 of a launch: checks the arguments against the manifest, loads the driver, and
    /// computes the producers' streams, the device (checking every pointer against its
    /// allocation, unless `opts.check_pointers` is off), the stream plan — under the capture
    /// state of the launch stream and of the producer streams it orders (one
    /// `cuStreamGetCaptureInfo` each; see [`stream::capture`]) — the context and the
    /// launch configuration — checked against the kernel's and the device's limits (block,
    /// grid, dynamic shared memory; see [`super::shape`]). Makes no change on the
    /// device, except raising the kernel's dynamic shared memory limit when the launch asks
    /// for more than 48 KiB (`cuFuncSetAttribute`, once per kernel and size).
    ///
    /// `args` may hold host arrays ([`Arg::Host`]), to be staged on
    /// [`device`](Prepared::device) and [`launch_stream`](Prepared::launch_stream) before
    /// [`execute`](Prepared::execute).
    ///
    /// Leaves the launch device's context current on the calling thread; a caller that must
    /// keep its own keeps a [`CallerContext`](crate::driver::CallerContext) across both
    /// phases, as [`launch`](Kernel::launch) does.
    pub fn prepare(&self, args: &[Arg<'_>], opts: &LaunchOptions) -> Result<Prepared<'m>> {
        let sig = self.signature();
        check_args(sig, args)?;
        crate::mark!("rs: check_args");
        driver::init()?;
        let mode = match opts.sync {
            Some(m) => m,
            None => default_sync_mode()?,
        };
        crate::mark!("rs: driver init, sync mode");
        let arrays = scan_arrays(self, args, opts.check_pointers)?;
        crate::mark!("rs: producers, pointer checks");
        let plan = stream::plan(&arrays.producers[..arrays.count], opts.stream, mode)?;
        crate::mark!("rs: stream plan");
        let ordinal = match (arrays.device, opts.device) {
            (Some((d, _)), _) | (None, Some(d)) => d,
            (None, None) => cu::current_ordinal().unwrap_or(0),
        };
        let ctx = Context::get(ordinal)?;
        self.check_arch(ctx)?;
        ctx.bind()?;
        let plan = driver::capture_plan(plan)
            .map_err(|r| refusal(self, &arrays.producers[..arrays.count], r))?;
        crate::mark!("rs: context, capture state");
        let (launch, attrs) = if arrays.work == 0 && opts.grid.is_none() {
            (None, LaunchAttrs::Plain)
        } else {
            let largest = match arrays.largest.map(|i| &args[i]) {
                Some(Arg::Array(d) | Arg::Host(d)) => d.shape(),
                _ => &[],
            };
            let (f, grid, block, attrs) = self.configure(ctx, opts, arrays.work, largest)?;
            (Some((f, grid, block)), attrs)
        };
        let scratch = match launch {
            Some((_, grid, _)) if !sig.scratch.is_empty() => {
                ctx.scratch_pool()?;
                let blocks = grid.iter().map(|&g| u64::from(g)).product();
                ScratchPlan::new(sig, args, blocks)?
            }
            _ => ScratchPlan::EMPTY,
        };
        crate::mark!("rs: module, block, grid");
        Ok(Prepared {
            kernel: *self,
            plan,
            caller: opts.stream,
            ctx,
            launch,
            attrs,
            shared_mem_bytes: shape::dynamic_shared(sig, opts.shared_mem_bytes)?,
            scratch,
            staged: arrays.staged,
            nargs: args.len(),
        })
    }

    /// The loaded function, grid, block and launch attributes of a launch whose largest array
    /// (`work` elements) has shape `largest`: the caller's grid and block, else the automatic
    /// ones (see [`shape`]); every shape checked against the kernel's and the device's
    /// limits, and the function's dynamic shared memory limit raised when the launch needs
    /// more (once per function and size).
    ///
    /// The one place where a launch's attributes are decided, for every launch path (Rust,
    /// Python, typed launchers, bound launches): a `#[kernel(cooperative)]` kernel launches
    /// cooperatively, its grid at most one resident wave ([`shape::check_cooperative`]; the
    /// automatic grid exactly one, [`shape::cooperative_grid`]); a `#[kernel(cluster = …)]`
    /// kernel in clusters, its grid a whole number of them ([`shape::cluster_grid`],
    /// [`shape::check_cluster`]) that the device can schedule
    /// ([`shape::check_cluster_occupancy`]). The occupancy answers these need are asked of the
    /// driver once per function and shape.
    fn configure(
        &self,
        ctx: &'static Context,
        opts: &LaunchOptions,
        work: usize,
        largest: &[usize],
    ) -> Result<(Function, [u32; 3], [u32; 3], LaunchAttrs)> {
        let sig = self.signature();
        let decl = &sig.launch;
        let loaded = self.module.loaded(ctx)?;
        let Some(f) = loaded.functions[self.index] else {
            // Not loaded: an image the device cannot run.
            return Err(self.check_arch(ctx).err().unwrap_or_else(|| {
                Error::unsupported(format!("kernel `{}` is not loaded", sig.name))
            }));
        };
        let device = ctx.limits();
        let block = opts
            .block
            .unwrap_or_else(|| shape::auto_block(decl, f.block, f.potential_block));
        shape::check_block(&sig.name, decl, &f.limits, device, block)?;
        let cluster = decl.cluster_dims();
        // `resident_grid`: the automatic grid of a grid-stride kernel, as many blocks as are
        // resident at once (for a cluster kernel, capped below by the clusters the device
        // holds at once).
        let (mut grid, resident_grid) = match opts.grid {
            Some(g) => (g, false),
            // Set below, once the occupancy for the launch's shared memory is known.
            None if decl.cooperative => ([1, 1, 1], false),
            None if decl.grid_dims >= 2 => (
                shape::nd_grid(largest, decl.grid_dims, block, device.max_grid),
                false,
            ),
            None if decl.grid_rows => {
                let threads = block.iter().map(|&b| b as usize).product();
                (
                    [
                        shape::rows_grid(largest, threads, sig.items_per_thread),
                        1,
                        1,
                    ],
                    false,
                )
            }
            None => {
                let threads = block.iter().map(|&b| b as usize).product();
                let resident = || ctx.sm_count() as usize * f.blocks_per_sm as usize;
                let x = shape::auto_grid(work, threads, sig.items_per_thread, resident);
                // `auto_grid` holds the resident blocks only without `items_per_thread`.
                ([x, 1, 1], sig.items_per_thread.is_none())
            }
        };
        if let (Some(c), None) = (cluster, opts.grid) {
            grid = shape::cluster_grid(grid, c, device.max_grid);
        }
        shape::check_grid(&sig.name, device, grid)?;
        let shared = shape::dynamic_shared(sig, opts.shared_mem_bytes)?;
        if let Some(bytes) = shape::check_shared(&sig.name, decl, &f.limits, device, shared)? {
            loaded.allow_dynamic_shared(self.index, bytes)?;
        }
        let key = crate::module::OccupancyKey {
            index: self.index,
            block,
            shared,
            cluster: cluster.unwrap_or([0; 3]),
        };
        let attrs = if decl.cooperative {
            if !ctx.cooperative_launch() {
                return Err(Error::unsupported(format!(
                    "kernel `{}` is cooperative, but device {} does not run cooperative \
                     launches (CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0)",
                    sig.name,
                    ctx.ordinal()
                )));
            }
            let threads = block.iter().product::<u32>();
            let per_sm = loaded.occupancy(key, || {
                // SAFETY: the function belongs to the module loaded in `ctx`, which is bound
                // (prepare binds it before configuring).
                unsafe { cu::blocks_per_multiprocessor(f.raw, threads, shared) }
            })?;
            if opts.grid.is_none() {
                grid = shape::cooperative_grid(per_sm, ctx.sm_count());
                shape::check_grid(&sig.name, device, grid)?;
            }
            shape::check_cooperative(&sig.name, grid, block, shared, per_sm, ctx.sm_count())?;
            LaunchAttrs::Cooperative
        } else if let Some(c) = cluster {
            shape::check_cluster(&sig.name, decl, grid, c)?;
            if !ctx.cluster_launch() {
                return Err(Error::unsupported(format!(
                    "kernel `{}` runs in thread-block clusters, but device {} does not \
                     (CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH is 0; sm_90 and newer GPUs do)",
                    sig.name,
                    ctx.ordinal()
                )));
            }
            let active = loaded
                .occupancy(key, || {
                    // SAFETY: as above. The grid does not change the answer (the driver
                    // counts clusters that fit on the device at once), so the key leaves it
                    // out.
                    unsafe { cu::max_active_clusters(f.raw, grid, block, shared, c) }
                })
                .map_err(|e| Error::new(e.kind(), format!("kernel `{}`: {e}", sig.name)))?;
            shape::check_cluster_occupancy(&sig.name, c, block, shared, active)?;
            if resident_grid {
                grid = shape::resident_cluster_grid(grid, c, active);
            }
            LaunchAttrs::Cluster(c)
        } else {
            LaunchAttrs::Plain
        };
        Ok((f, grid, block, attrs))
    }
}

/// The error of a plan refused under capture, naming the first array argument whose producer
/// stream it concerns (`producers`: the array arguments' streams in argument order; for the
/// launch stream the arguments are not at fault).
fn refusal(kernel: &Kernel<'_>, producers: &[Option<StreamRef>], r: stream::Refused) -> Error {
    let Some(s) = r.stream else {
        return r.error;
    };
    let arrays = kernel
        .signature()
        .params
        .iter()
        .filter(|p| p.kind.is_array());
    match arrays.zip(producers).find(|(_, &q)| q == Some(s)) {
        Some((p, _)) => r.error.with_arg(p.name.clone()),
        None => r.error,
    }
}

/// The array arguments' streams, device and sizes, each pointer checked (with `check`)
/// against the driver's view of its allocation.
fn scan_arrays(kernel: &Kernel<'_>, args: &[Arg<'_>], check: bool) -> Result<Arrays> {
    let sig = kernel.signature();
    let mut arrays = Arrays {
        producers: [None; stream::MAX_PRODUCERS],
        count: 0,
        device: None,
        work: 0,
        largest: None,
        staged: 0,
    };
    debug_assert!(args.len() <= MAX_PARAMS);
    let mut checked = Allocations::default();
    for (i, (p, a)) in sig.params.iter().zip(args).enumerate() {
        let (d, stream) = match a {
            Arg::Scalar(_) => continue,
            Arg::Array(d) => (*d, d.stream()),
            // Staged on the launch stream: nothing to order.
            Arg::Host(d) => {
                arrays.staged |= 1 << i;
                (*d, None)
            }
        };
        if arrays.count == stream::MAX_PRODUCERS {
            return Err(Error::value(format!(
                "kernel `{}` has more than {} array arguments",
                sig.name,
                stream::MAX_PRODUCERS
            )));
        }
        arrays.producers[arrays.count] = stream;
        arrays.count += 1;
        if arrays.largest.is_none() || d.size() > arrays.work {
            arrays.largest = Some(i);
        }
        arrays.work = arrays.work.max(d.size());
        if check && matches!(a, Arg::Array(_)) {
            if let Some(dev) =
                check_pointer(d, &mut checked).map_err(|e| e.with_arg(p.name.clone()))?
            {
                agree_on_device(&mut arrays.device, dev, i, sig.params.as_slice())?;
            }
        }
    }
    Ok(arrays)
}

/// The device-accessible allocations one launch's pointer checks found so far (start, end,
/// device): an array whose bytes lie inside one of them is in that allocation, so the driver
/// would answer for it what it answered for the first — the arrays of a launch are often views
/// of one buffer, or carved from one segment by a caching allocator (PyTorch's, CuPy's pool).
/// Never kept beyond the launch: the arrays' owners keep these allocations alive only for it.
#[derive(Default)]
struct Allocations {
    found: [(u64, u64, usize); stream::MAX_PRODUCERS],
    count: usize,
}

impl Allocations {
    /// The device of the allocation found earlier that holds all of `[lo, hi)`.
    fn holding(&self, lo: u64, hi: u64) -> Option<usize> {
        self.found[..self.count]
            .iter()
            .find(|&&(start, end, _)| start <= lo && hi <= end)
            .map(|&(_, _, device)| device)
    }

    fn remember(&mut self, start: u64, end: u64, device: usize) {
        if self.count < self.found.len() {
            self.found[self.count] = (start, end, device);
            self.count += 1;
        }
    }
}

/// The device of a non-empty array whose pointer is device memory and whose described extent
/// lies inside the allocation that holds it; `None` for an empty array. An array inside an
/// allocation `known` holds is answered from it (no driver call); a newly queried one is added.
fn check_pointer(d: &ArrayDesc, known: &mut Allocations) -> Result<Option<usize>> {
    let Some((lo, hi)) = d.byte_range() else {
        return Ok(None);
    };
    // The pointer is inside [lo, hi) (the first element's bytes), so inside that allocation.
    if let Some(device) = known.holding(lo, hi) {
        return Ok(Some(device));
    }
    // The driver is loaded (prepare's first step).
    let info: PointerInfo = cu::pointer_attributes(d.ptr())?;
    if !info.is_device_accessible() {
        return Err(Error::value(format!(
            "pointer {:#x} is not CUDA device memory (memory type {}: {})",
            d.ptr(),
            info.memory_type,
            match info.memory_type {
                0 => "unknown to the driver, e.g. ordinary host memory",
                1 => "page-locked host memory",
                3 => "a CUDA array",
                _ => "not addressable by kernels",
            }
        ))
        .with_key(Key::Data)
        .with_protocol(d.protocol()));
    }
    let (start, end) = (
        info.range_start,
        info.range_start.saturating_add(info.range_size),
    );
    if info.range_size > 0 && (lo < start || hi > end) {
        return Err(Error::value(format!(
            "the interface describes bytes [{lo:#x}, {hi:#x}) but the allocation that holds its \
             pointer is [{start:#x}, {end:#x}): shape/strides claim memory outside the \
             allocation"
        ))
        .with_key(Key::Shape)
        .with_protocol(d.protocol()));
    }
    let device = info.device.max(0) as usize;
    if info.range_size > 0 {
        known.remember(start, end, device);
    }
    Ok(Some(device))
}

/// Records the device of argument `i`, or refuses it when an earlier array is on another.
fn agree_on_device(
    device: &mut Option<(usize, usize)>,
    dev: usize,
    i: usize,
    params: &[Param],
) -> Result<()> {
    match *device {
        None => *device = Some((dev, i)),
        Some((d0, first)) if d0 != dev => {
            return Err(Error::value(format!(
                "array is on device {dev} but `{}` is on device {d0}: all arrays of a launch \
                 must be on one device",
                params[first].name
            ))
            .with_arg(params[i].name.clone()))
        }
        Some(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Allocations;

    #[test]
    fn an_array_is_answered_only_by_an_allocation_that_holds_all_of_it() {
        let mut known = Allocations::default();
        assert_eq!(known.holding(0x1000, 0x1004), None);
        known.remember(0x1000, 0x3000, 0);
        known.remember(0x8000, 0x9000, 1);
        // Inside, at either edge.
        assert_eq!(known.holding(0x1000, 0x1004), Some(0));
        assert_eq!(known.holding(0x2ffc, 0x3000), Some(0));
        assert_eq!(known.holding(0x8000, 0x9000), Some(1));
        // Starting inside, ending past the end; starting below the start; between two.
        assert_eq!(known.holding(0x2ffc, 0x3004), None);
        assert_eq!(known.holding(0x0ffc, 0x1004), None);
        assert_eq!(known.holding(0x3000, 0x3004), None);
        assert_eq!(known.holding(0x2000, 0x8800), None);
        // Full: nothing more remembered, nothing forgotten.
        for k in 0..40u64 {
            known.remember(0x10_0000 + k * 0x1000, 0x10_0800 + k * 0x1000, 2);
        }
        assert_eq!(known.count, known.found.len());
        assert_eq!(known.holding(0x1000, 0x1004), Some(0));
    }
}
