//! Launching a kernel on validated arrays: argument checks against the manifest, pointer and
//! extent checks, the stream plan, the launch configuration, and the launch itself.
//!
//! The whole path works on the stack: arguments are borrowed, the parameter buffer is a
//! fixed 4 KiB array, the stream plan has fixed capacity. Per launch it costs one
//! `cuPointerGetAttributes` per array (skippable with [`LaunchOptions::check_pointers`]),
//! `cuCtxGetCurrent`, the plan's syncs/waits (none when every array lives on the launch
//! stream) and `cuLaunchKernel`.

use crate::cai::ArrayDesc;
use crate::driver::{self, check, pointer_info, raw_stream, Context, DriverOps};
use crate::error::{Error, Result};
use crate::module::{Kernel, Signature, MAX_PARAMS, PARAM_BUFFER_SIZE};
use crate::stream::{self, Plan, StreamRef, SyncMode};
use cudarc::driver::sys;
use ferrocuda_abi::{DType, ParamKind};
use std::ffi::c_void;
use std::sync::OnceLock;

/// A scalar kernel argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// `i8`
    I8(i8),
    /// `i16`
    I16(i16),
    /// `i32`
    I32(i32),
    /// `i64`
    I64(i64),
    /// `u8`
    U8(u8),
    /// `u16`
    U16(u16),
    /// `u32`
    U32(u32),
    /// `u64`
    U64(u64),
    /// `f32`
    F32(f32),
    /// `f64`
    F64(f64),
}

impl Scalar {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Scalar::I8(_) => DType::I8,
            Scalar::I16(_) => DType::I16,
            Scalar::I32(_) => DType::I32,
            Scalar::I64(_) => DType::I64,
            Scalar::U8(_) => DType::U8,
            Scalar::U16(_) => DType::U16,
            Scalar::U32(_) => DType::U32,
            Scalar::U64(_) => DType::U64,
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
        }
    }

    fn write(&self, out: &mut [u8]) {
        match *self {
            Scalar::I8(v) => out.copy_from_slice(&v.to_ne_bytes()),
            Scalar::I16(v) => out.copy_from_slice(&v.to_ne_bytes()),
            Scalar::I32(v) => out.copy_from_slice(&v.to_ne_bytes()),
            Scalar::I64(v) => out.copy_from_slice(&v.to_ne_bytes()),
            Scalar::U8(v) => out.copy_from_slice(&v.to_ne_bytes()),
            Scalar::U16(v) => out.copy_from_slice(&v.to_ne_bytes()),
            Scalar::U32(v) => out.copy_from_slice(&v.to_ne_bytes()),
            Scalar::U64(v) => out.copy_from_slice(&v.to_ne_bytes()),
            Scalar::F32(v) => out.copy_from_slice(&v.to_ne_bytes()),
            Scalar::F64(v) => out.copy_from_slice(&v.to_ne_bytes()),
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar { fn from(x: $t) -> Scalar { Scalar::$v(x) } }
    )*};
}
scalar_from!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32,
             u64 => U64, f32 => F32, f64 => F64);

/// One kernel argument.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A device array (from an array interface, or a [`DeviceArray`](crate::DeviceArray)).
    Array(&'a ArrayDesc),
    /// A scalar.
    Scalar(Scalar),
}

impl<'a> From<&'a ArrayDesc> for Arg<'a> {
    fn from(d: &'a ArrayDesc) -> Self {
        Arg::Array(d)
    }
}

/// How to launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchOptions {
    /// Launch stream; `None` = the producers' common stream, else the legacy default stream
    /// (see [`stream::plan`]).
    pub stream: Option<StreamRef>,
    /// Ordering against producer streams; `None` = from `FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC`
    /// (read once per process), which defaults to [`SyncMode::Default`].
    pub sync: Option<SyncMode>,
    /// Ask the driver, per array, whether the pointer is device memory on the launch device
    /// and whether the described extent lies inside its allocation (default `true`).
    pub check_pointers: bool,
    /// Grid size; `None` = enough blocks for the largest array, capped at what the device
    /// holds resident (kernels use grid-stride loops).
    pub grid: Option<[u32; 3]>,
    /// Block size; `None` = 256 threads (or the kernel's maximum if lower).
    pub block: Option<[u32; 3]>,
    /// Dynamic shared memory in bytes.
    pub shared_mem_bytes: u32,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            stream: None,
            sync: None,
            check_pointers: true,
            grid: None,
            block: None,
            shared_mem_bytes: 0,
        }
    }
}

/// What a launch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launched {
    /// The stream plan that was executed.
    pub plan: Plan,
    /// Device ordinal.
    pub device: usize,
    /// Grid and block used; `None` when nothing was launched because every array is empty.
    pub config: Option<([u32; 3], [u32; 3])>,
}

static ENV_MODE: OnceLock<std::result::Result<SyncMode, Error>> = OnceLock::new();

/// The process-wide default sync mode (`FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC`, read once).
pub fn default_sync_mode() -> Result<SyncMode> {
    ENV_MODE
        .get_or_init(SyncMode::from_env)
        .as_ref()
        .copied()
        .map_err(Clone::clone)
}

#[repr(C, align(16))]
struct ParamBuffer([u8; PARAM_BUFFER_SIZE]);

/// Checks `args` against the kernel's signature (count, kinds, dtypes, ranks, mutability,
/// read-only arrays, shapes, self-overlap and aliasing). Pure: no driver call.
pub fn check_args(sig: &Signature, args: &[Arg<'_>]) -> Result<()> {
    if args.len() != sig.params.len() {
        return Err(Error::type_error(format!(
            "kernel `{}` takes {} argument(s) ({}), got {}",
            sig.name,
            sig.params.len(),
            sig.param_list(),
            args.len()
        )));
    }
    for (p, a) in sig.params.iter().zip(args) {
        let named = |e: Error| e.with_arg(p.name.clone());
        match (p.kind, a) {
            (ParamKind::Scalar, Arg::Scalar(s)) => {
                if s.dtype() != p.dtype {
                    return Err(named(Error::type_error(format!(
                        "expected a {} scalar, got {}",
                        p.dtype.name(),
                        s.dtype().name()
                    ))));
                }
            }
            (ParamKind::Scalar, Arg::Array(_)) => {
                return Err(named(Error::type_error(format!(
                    "expected a {} scalar, got an array",
                    p.dtype.name()
                ))))
            }
            (_, Arg::Scalar(_)) => {
                return Err(named(Error::type_error(format!(
                    "expected a {} array, got a scalar",
                    p.dtype.name()
                ))))
            }
            (kind, Arg::Array(d)) => {
                if d.dtype() != p.dtype {
                    return Err(named(Error::type_error(format!(
                        "expected a {} array, got {}",
                        p.dtype.name(),
                        d.dtype().name()
                    ))));
                }
                if kind == ParamKind::Slice && !d.is_c_contiguous() {
                    return Err(named(Error::value(format!(
                        "kernel `{}` needs a C-contiguous array here (strides {:?} bytes, \
                         shape {:?}); pass a contiguous copy",
                        sig.name,
                        d.byte_strides(),
                        d.shape()
                    ))));
                }
                if kind == ParamKind::View {
                    if d.ndim() != p.rank {
                        return Err(named(Error::type_error(format!(
                            "expected a {}-D array, got {}-D (shape {:?})",
                            p.rank,
                            d.ndim(),
                            d.shape()
                        ))));
                    }
                    for (&s, &n) in d.byte_strides().iter().zip(d.shape()) {
                        if n > 1 && s % d.itemsize() as isize != 0 {
                            return Err(named(
                                Error::value(format!(
                                    "stride {s} bytes is not a multiple of the item size {}",
                                    d.itemsize()
                                ))
                                .with_key("strides")
                                .with_protocol(d.protocol().key()),
                            ));
                        }
                    }
                }
                if p.mutable {
                    if d.readonly() {
                        return Err(named(
                            Error::value(format!(
                                "array is read-only, but kernel `{}` writes to `{}`",
                                sig.name, p.name
                            ))
                            .with_key("data")
                            .with_protocol(d.protocol().key()),
                        ));
                    }
                    if may_self_overlap(d) {
                        return Err(named(Error::value(format!(
                            "output array has overlapping elements (shape {:?}, strides {:?} \
                             bytes): parallel writes to it would race",
                            d.shape(),
                            d.byte_strides()
                        ))));
                    }
                }
            }
        }
    }
    for group in &sig.same_shape {
        let first = group[0];
        let Arg::Array(d0) = args[first] else {
            continue;
        };
        for &i in &group[1..] {
            let Arg::Array(d) = args[i] else { continue };
            if d.shape() != d0.shape() {
                return Err(Error::value(format!(
                    "arguments `{}` (shape {:?}) and `{}` (shape {:?}) must have the same shape",
                    sig.params[first].name,
                    d0.shape(),
                    sig.params[i].name,
                    d.shape()
                ))
                .with_arg(sig.params[i].name.clone()));
            }
        }
    }
    // A written array must not partially overlap any other array argument: which value a
    // thread reads would depend on the order threads run in. Identical views are fine (each
    // thread reads and writes its own element).
    for (i, p) in sig.params.iter().enumerate() {
        let (true, Arg::Array(w)) = (p.mutable, args[i]) else {
            continue;
        };
        let Some(wr) = w.byte_range() else { continue };
        for (j, q) in sig.params.iter().enumerate() {
            if i == j {
                continue;
            }
            let Arg::Array(o) = args[j] else { continue };
            let Some(or) = o.byte_range() else { continue };
            let overlap = wr.0 < or.1 && or.0 < wr.1;
            let same_view = w.ptr() == o.ptr()
                && w.shape() == o.shape()
                && w.byte_strides() == o.byte_strides()
                && w.itemsize() == o.itemsize();
            if overlap && !same_view && !(q.mutable && j < i) {
                return Err(Error::value(format!(
                    "output `{}` overlaps argument `{}` without being the same view; \
                     the result would depend on thread order",
                    p.name, q.name
                ))
                .with_arg(p.name.clone()));
            }
        }
    }
    Ok(())
}

/// Conservative self-overlap test for a written array: `true` unless the axes, sorted by
/// stride, each step past everything the inner axes span (which proves distinct
/// multi-indices have distinct addresses).
fn may_self_overlap(d: &ArrayDesc) -> bool {
    if d.size() <= 1 {
        return false;
    }
    let mut axes = [(0usize, 0usize); crate::cai::MAX_NDIM];
    let mut n = 0;
    for (&s, &len) in d.byte_strides().iter().zip(d.shape()) {
        if len > 1 {
            axes[n] = (s.unsigned_abs(), len);
            n += 1;
        }
    }
    let axes = &mut axes[..n];
    axes.sort_unstable();
    let mut span = d.itemsize(); // bytes covered by the inner axes
    for &(stride, len) in axes.iter() {
        if stride < span {
            return true;
        }
        span = match stride
            .checked_mul(len - 1)
            .and_then(|x| x.checked_add(span))
        {
            Some(v) => v,
            None => return true,
        };
    }
    false
}

impl Kernel<'_> {
    /// Checks the arguments and launches the kernel.
    ///
    /// The call returns once the launch is enqueued (and, in [`SyncMode::Default`], after the
    /// host synchronization of foreign producer streams). It does not wait for the kernel.
    ///
    /// # Safety
    ///
    /// Everything the manifest can express is checked: argument count, kinds, element types,
    /// ranks, read-only arrays, equal shapes where the kernel demands them, overlap of
    /// outputs with other arguments, and (with `check_pointers`) that every array is device
    /// memory of one device whose described extent lies inside its allocation. What remains
    /// for the caller:
    ///
    /// * the kernel itself must be memory-safe for any arguments that pass these checks (the
    ///   bundled kernels are; the typed launchers of the `ferrocuda` crate are safe);
    /// * every array must stay allocated, and its producer must not free or reuse it, until
    ///   the kernel has completed — the stream plan orders the producer streams behind the
    ///   kernel, but the memory's owner must be kept alive by the caller;
    /// * with `check_pointers: false`, the caller vouches for the pointers and extents.
    pub unsafe fn launch(&self, args: &[Arg<'_>], opts: &LaunchOptions) -> Result<Launched> {
        let sig = self.signature();
        check_args(sig, args)?;
        crate::mark!(4);
        driver::init()?;
        let mode = match opts.sync {
            Some(m) => m,
            None => default_sync_mode()?,
        };
        crate::mark!(5);

        // Producer streams, device, and the largest array.
        let mut producers: [Option<StreamRef>; stream::MAX_PRODUCERS] =
            [None; stream::MAX_PRODUCERS];
        let mut nproducers = 0;
        let mut device: Option<(usize, &str)> = None;
        let mut work = 0usize;
        for (p, a) in sig.params.iter().zip(args) {
            let Arg::Array(d) = a else { continue };
            if nproducers == stream::MAX_PRODUCERS {
                return Err(Error::value(format!(
                    "kernel `{}` has more than {} array arguments",
                    sig.name,
                    stream::MAX_PRODUCERS
                )));
            }
            producers[nproducers] = d.stream();
            nproducers += 1;
            work = work.max(d.size());
            let Some((lo, hi)) = d.byte_range() else {
                continue;
            };
            if !opts.check_pointers {
                continue;
            }
            let info = pointer_info(d.ptr()).map_err(|e| e.with_arg(p.name.clone()))?;
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
                .with_key("data")
                .with_protocol(d.protocol().key())
                .with_arg(p.name.clone()));
            }
            let (start, end) = (
                info.range_start,
                info.range_start.saturating_add(info.range_size),
            );
            if info.range_size > 0 && (lo < start || hi > end) {
                return Err(Error::value(format!(
                    "the interface describes bytes [{lo:#x}, {hi:#x}) but the allocation that \
                     holds its pointer is [{start:#x}, {end:#x}): shape/strides claim memory \
                     outside the allocation"
                ))
                .with_key("shape")
                .with_protocol(d.protocol().key())
                .with_arg(p.name.clone()));
            }
            let dev = info.device.max(0) as usize;
            match device {
                None => device = Some((dev, &p.name)),
                Some((d0, n0)) if d0 != dev => {
                    return Err(Error::value(format!(
                        "array is on device {dev} but `{n0}` is on device {d0}: all arrays of \
                         a launch must be on one device"
                    ))
                    .with_arg(p.name.clone()))
                }
                _ => {}
            }
        }
        crate::mark!(6);
        let plan = stream::plan(&producers[..nproducers], opts.stream, mode)?;
        crate::mark!(7);
        let ordinal = match device {
            Some((d, _)) => d,
            None => driver::current_ordinal().unwrap_or(0),
        };
        let ctx = Context::get(ordinal)?;
        ctx.bind()?;
        crate::mark!(8);
        if work == 0 && opts.grid.is_none() {
            // Nothing to compute; no ordering needed either.
            return Ok(Launched {
                plan,
                device: ordinal,
                config: None,
            });
        }
        let loaded = self.module.loaded(ctx)?;
        let f = loaded.functions[self.index];

        let block = opts.block.unwrap_or([f.block, 1, 1]);
        let threads = block[0] as u64 * block[1] as u64 * block[2] as u64;
        if threads == 0 || threads > f.max_threads as u64 {
            return Err(Error::value(format!(
                "block {block:?} has {threads} threads; kernel `{}` allows 1..={}",
                sig.name, f.max_threads
            )));
        }
        let grid = match opts.grid {
            Some(g) => {
                if g.contains(&0) {
                    return Err(Error::value(format!("grid {g:?} has a zero dimension")));
                }
                g
            }
            None => [
                auto_grid(work, threads as usize, sig.items_per_thread, || {
                    ctx.sm_count() as usize * f.blocks_per_sm as usize
                }),
                1,
                1,
            ],
        };

        crate::mark!(9);
        // Pack parameters.
        let mut buf = ParamBuffer([0u8; PARAM_BUFFER_SIZE]);
        let mut ptrs: [*mut c_void; MAX_PARAMS] = [std::ptr::null_mut(); MAX_PARAMS];
        let base = buf.0.as_mut_ptr();
        for (i, (p, a)) in sig.params.iter().zip(args).enumerate() {
            let slot = &mut buf.0[p.offset..p.offset + p.size];
            match (p.kind, a) {
                (ParamKind::Scalar, Arg::Scalar(s)) => s.write(slot),
                (ParamKind::Slice, Arg::Array(d)) => {
                    slot[..8].copy_from_slice(&d.ptr().to_ne_bytes());
                    slot[8..16].copy_from_slice(&(d.size() as u64).to_ne_bytes());
                }
                (ParamKind::View, Arg::Array(d)) => {
                    slot[..8].copy_from_slice(&d.ptr().to_ne_bytes());
                    let n = p.rank;
                    let item = d.itemsize() as isize;
                    for k in 0..n {
                        let at = 8 + 8 * k;
                        slot[at..at + 8].copy_from_slice(&(d.shape()[k] as u64).to_ne_bytes());
                        // Element strides; axes of extent <= 1 may carry any byte stride.
                        let s = if d.shape()[k] > 1 {
                            d.byte_strides()[k] / item
                        } else {
                            0
                        };
                        let at = 8 + 8 * n + 8 * k;
                        slot[at..at + 8].copy_from_slice(&(s as i64).to_ne_bytes());
                    }
                }
                _ => unreachable!("check_args matched kinds"),
            }
            // SAFETY: offset + size <= buffer_size <= PARAM_BUFFER_SIZE (Signature invariant).
            ptrs[i] = unsafe { base.add(p.offset) }.cast();
        }

        crate::mark!(10);
        let mut ops = DriverOps { ctx };
        plan.before_launch(&mut ops)?;
        crate::mark!(11);
        // SAFETY: `f` belongs to the module loaded in the bound context; `ptrs` points at one
        // correctly sized and aligned value per kernel parameter (layouts checked against the
        // manifest, which the builder checked against the PTX); the arrays were validated
        // above and the caller upholds the rest (see # Safety).
        let res = unsafe {
            sys::cuLaunchKernel(
                f.raw,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                opts.shared_mem_bytes,
                raw_stream(plan.launch_stream()),
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(res, "cuLaunchKernel")
            .map_err(|e| Error::new(e.kind(), format!("kernel `{}`: {e}", sig.name)))?;
        driver::set_last_kernel(ordinal, sig.static_name);
        crate::mark!(12);
        plan.after_launch(&mut ops)?;
        crate::mark!(13);
        Ok(Launched {
            plan,
            device: ordinal,
            config: Some((grid, block)),
        })
    }
}

/// The automatic grid (x only) for `work` elements in blocks of `threads`: one thread per
/// `items_per_thread` elements when the kernel declares it, else at most one resident wave
/// (`resident()` blocks; the kernel's grid-stride loop covers the rest). At least one block,
/// at most the driver's 2^31 − 1.
fn auto_grid(
    work: usize,
    threads: usize,
    items_per_thread: Option<u16>,
    resident: impl FnOnce() -> usize,
) -> u32 {
    let grid = match items_per_thread {
        Some(k) => work.div_ceil(usize::from(k.max(1))).div_ceil(threads),
        None => work.div_ceil(threads).min(resident()),
    };
    grid.clamp(1, i32::MAX as usize) as u32
}

/// Blocks until all work on `s` is done, in device `ordinal`'s primary context.
pub fn synchronize(ordinal: usize, s: StreamRef) -> Result<()> {
    Context::get(ordinal)?.bind()?;
    driver::synchronize(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cai::ArrayDesc;

    fn arr(shape: &[usize], strides: Option<&[isize]>) -> ArrayDesc {
        ArrayDesc::from_parts(DType::F32, shape, strides, 0x10000, false, None).unwrap()
    }

    #[test]
    fn automatic_grid() {
        // One resident wave without a hint.
        assert_eq!(auto_grid(1 << 28, 256, None, || 1056), 1056);
        assert_eq!(auto_grid(1000, 256, None, || 1056), 4);
        // One thread per declared number of elements, no wave cap.
        assert_eq!(auto_grid(1 << 28, 256, Some(4), || 1056), 1 << 18);
        assert_eq!(auto_grid(1 << 28, 256, Some(2), || unreachable!()), 1 << 19);
        assert_eq!(auto_grid(1025, 256, Some(4), || 0), 2);
        // Never zero blocks, never beyond the driver's limit.
        assert_eq!(auto_grid(0, 256, Some(4), || 0), 1);
        assert_eq!(auto_grid(usize::MAX, 1, Some(1), || 0), i32::MAX as u32);
    }

    #[test]
    fn self_overlap() {
        assert!(!may_self_overlap(&arr(&[3, 4], None)));
        assert!(!may_self_overlap(&arr(&[3, 4], Some(&[4, 12]))));
        assert!(!may_self_overlap(&arr(&[3, 4], Some(&[-16, 4]))));
        assert!(may_self_overlap(&arr(&[3, 4], Some(&[0, 4]))));
        assert!(may_self_overlap(&arr(&[3, 4], Some(&[8, 4]))));
        assert!(!may_self_overlap(&arr(&[1, 4], Some(&[0, 4]))));
        assert!(!may_self_overlap(&arr(&[0, 4], Some(&[0, 0]))));
    }
}
