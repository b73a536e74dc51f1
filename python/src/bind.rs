//! Bound launches: `ferrocuda.BoundLaunch`, what `launcher.bind(*args, …)` returns — the
//! arguments read, checked and converted once, launched by calling it with no arguments.
//!
//! # At bind
//!
//! Exactly what a call does before it launches ([`read`], [`arguments`], the host crate's
//! [`Kernel::prepare`](ferrocuda_host::Kernel::prepare)): the arguments are classified and
//! described, DLPack-only objects imported for the launch stream, a family's kernel selected,
//! scalars converted, and every check of a call made (manifest, shapes, aliasing, requirements,
//! pointers against their allocations, grid, block and shared memory against the limits) — so a
//! bad argument fails at bind with the error a call would raise. Host (NumPy) arrays are
//! refused: staging them is a copy in and out per launch. With DLPack-only arguments, bind
//! waits (host) for the launch stream's work up to their import, unless the sync mode is off:
//! every later launch then sees their producers' data, whichever stream it goes on.
//!
//! The bound object holds the argument tuple (so no producer can free the memory while it
//! lives), the DLPack capsules, and a `stream=` object.
//!
//! # Per launch
//!
//! Only what can change between launches of the same objects is read again:
//!
//! * torch tensors: the data pointer, dtype, shape and strides in one call of torch's
//!   exchange API ([`fast::same_layout`]: a tensor reallocated or re-laid out in place —
//!   `resize_`, `set_`, `as_strided_`, assigning `.data` — is refused with a `ValueError`
//!   naming the argument, never launched on: its bound storage may be freed), and torch's
//!   current stream on the tensor's device;
//! * CuPy arrays: what CuPy's public API can change on an existing array — the shape (its
//!   in-place `shape` setter; `ndim` for a 1-D array, `shape` otherwise) and the data pointer
//!   (`MemoryPointer +=` moves it in place) — refused the same way when changed; and CuPy's
//!   current stream ([`fast::current_stream`]). The bound object holds each CuPy array's
//!   `MemoryPointer` as bound, so the allocation the launches write outlives them whatever
//!   is done to the array object (strides changed alone through private attributes are not
//!   seen: the launch then writes the bound layout of that checked, held allocation);
//! * any other interface (Numba, torch subclasses, SYCL USM, hand-made objects): the interface
//!   itself, as a call reads it — its stream, and the same refusal if it now describes other
//!   memory or another layout;
//! * ferrocuda arrays and DLPack imports: nothing (their descriptions cannot change).
//!
//! The stream plan is then computed again from those streams ([`Prepared::replan`], the
//! stream policy's one rule, under the streams' capture state now) and the kernel launched on
//! the parameters packed at bind (both in [`Prepared::execute_replanned`]). Not repeated:
//! classification, dispatch, scalar conversion, the manifest checks, the pointer checks (the
//! memory is the bound memory, kept alive by the bound object), the configuration, the
//! parameter packing (the arguments cannot change: what can is refused). The driver work runs
//! with the GIL released, as every launch's does (holding it while `cuLaunchKernel` waits on a
//! full launch queue would stall other threads, and deadlock against a Python host callback
//! queued ahead, e.g. CuPy's `launch_host_func`). Completed DLPack releases of calls are not
//! polled, so in the event and off modes a bound launch makes no host-synchronizing driver
//! call (no stream synchronization, no event query).

use ferrocuda_host::interop::dlpack::ManagedTensor;
use ferrocuda_host::launcher::Target;
use ferrocuda_host::runtime::{CallerContext, Fence};
use ferrocuda_host::{Arg, ArgList, ArrayDesc, Packed, Prepared, StreamRef, SyncMode};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::args::{probe, ArgScratch, Found, Mode};
use crate::arrays::device::stream_owner;
use crate::arrays::{PyDeviceArray, PyForeignArray};
use crate::call::{arguments, read, CallOpts, Classified, Slot};
use crate::errors::IntoPyResult;
use crate::read::fast::{self, CallState, Kind};
use crate::read::streams::sync_name;
use crate::util::type_name;

const MAX_ARRAYS: usize = ferrocuda_host::stream::MAX_PRODUCERS;

/// What a bound launch reads again of one array argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reread {
    /// Nothing: a ferrocuda array, or a DLPack import held by the bound launch.
    Nothing,
    /// Pointer, shape and strides by the fast path of a CuPy array or torch tensor, and the
    /// producer's current stream.
    Fast(Kind),
    /// The interface, as a call reads it.
    Interface,
}

/// One bound array argument: its description at bind and what a launch reads again of it.
#[derive(Debug)]
struct BoundArray {
    /// The argument's index.
    index: usize,
    desc: ArrayDesc,
    reread: Reread,
}

/// A kernel launch whose arguments were read, checked and converted once (by
/// :meth:`Launcher.bind`); call it, with no arguments, to launch.
///
/// Each call re-reads only what can change between launches of the same objects: the current
/// stream of CuPy arrays and torch tensors (and their data pointer and layout: a tensor
/// ``resize_``-d or ``set_`` since bind, a CuPy array given another ``shape`` or whose
/// ``data`` pointer was moved, raises ``ValueError``), the interface of other producers;
/// ferrocuda arrays and DLPack imports are fixed. The stream plan is made again
/// from those streams, then the kernel is launched. The bound object keeps the argument
/// objects (and DLPack capsules, and a ``stream=`` object) alive.
#[pyclass(name = "BoundLaunch", module = "ferrocuda", frozen)]
pub struct PyBound {
    prepared: Prepared<'static>,
    /// The parameters, packed at bind (the arguments never change: what can is refused).
    packed: Packed,
    /// The array arguments, in argument order.
    arrays: Box<[BoundArray]>,
    /// The argument objects, kept alive for the bound launch's lifetime.
    args: Py<PyTuple>,
    /// The `MemoryPointer` (`data`) of each CuPy array as bound: it holds the allocation the
    /// launches write, even if the array object is later given other memory.
    _memory: Vec<Py<PyAny>>,
    _dlpack: Vec<ManagedTensor>,
    /// A `stream=` object: the stream must outlive the launches on it.
    _stream: Option<Py<PyAny>>,
}

/// Binds `args` to `t` with `opts` (see the module documentation); `stream` is the `stream=`
/// object, kept alive.
pub fn bind(
    py: Python<'_>,
    t: &Target<'static>,
    args: &Bound<'_, PyTuple>,
    opts: CallOpts,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyBound> {
    let mut c = Classified::new(args.len().min(ferrocuda_host::module::MAX_PARAMS));
    let (hosts, owners, kernel) = read(t, args, &mut c, opts.stream, Mode::Launcher)?;
    let sig = kernel.signature();
    if let Some((i, view)) = hosts.first() {
        return Err(PyTypeError::new_err(format!(
            "argument `{}`: a host array ({}) cannot be bound: it would be copied to the \
             device and back on every launch; copy it to the device once \
             (ferrocuda.DeviceArray.from_numpy, cupy.asarray, torch.as_tensor(..., \
             device='cuda')) and bind that",
            sig.params[*i].name,
            type_name(&view.array)
        )));
    }
    let mut argv = ArgList::new();
    arguments(sig, args, &c, &mut argv)?;
    let lo = opts.launch_options();
    let prepared = py
        .detach(|| {
            let _caller = CallerContext::save();
            kernel.prepare(&argv, &lo)
        })
        .py_err(py)?;
    if !owners.is_empty() && prepared.plan().mode() != SyncMode::Off {
        // The producers ordered their work before the launch stream; wait for it here, once,
        // so that launches on any stream see their data.
        let (device, s) = (prepared.device(), prepared.launch_stream());
        py.detach(|| {
            let _caller = CallerContext::save();
            Fence::record(device, s)?.synchronize()
        })
        .py_err(py)?;
    }
    let packed = prepared.pack(&argv).py_err(py)?;
    let mut arrays = Vec::with_capacity(argv.len());
    let mut memory = Vec::new();
    for (i, (a, slot)) in argv.iter().zip(c.slots()).enumerate() {
        let reread = match (a, slot) {
            (Arg::Array(d), Slot::Array(_)) => {
                let obj = args.get_item(i)?;
                let reread = reread_of(&obj, d)?;
                if reread == Reread::Fast(Kind::Cupy) {
                    // The bound allocation, whatever is later done to the array object.
                    memory.push(obj.getattr(intern!(py, "data"))?.unbind());
                }
                reread
            }
            (Arg::Array(_), _) => Reread::Nothing,
            (Arg::Scalar(_), _) => continue,
            (Arg::Host(_), _) => unreachable!("host arrays are refused above"),
        };
        if let Arg::Array(d) = a {
            arrays.push(BoundArray {
                index: i,
                desc: **d,
                reread,
            });
        }
    }
    Ok(PyBound {
        prepared,
        packed,
        arrays: arrays.into_boxed_slice(),
        args: args.clone().unbind(),
        _memory: memory,
        _dlpack: owners,
        _stream: stream_owner(stream),
    })
}

/// What to read again of array argument `obj`, described at bind as `desc`.
fn reread_of(obj: &Bound<'_, PyAny>, desc: &ArrayDesc) -> PyResult<Reread> {
    if obj.is_instance_of::<PyDeviceArray>() || obj.is_instance_of::<PyForeignArray>() {
        return Ok(Reread::Nothing);
    }
    let kind = fast::kind_of(obj);
    if matches!(kind, Kind::Cupy | Kind::Torch) && fast::describes(obj, kind, desc)? == Some(true) {
        return Ok(Reread::Fast(kind));
    }
    Ok(Reread::Interface)
}

fn changed(name: &str, obj: &Bound<'_, PyAny>) -> PyErr {
    PyValueError::new_err(format!(
        "argument `{name}`: the {} changed since it was bound: its data pointer, shape or \
         strides are no longer the bound ones (its producer reallocated or re-laid out the same \
         object, e.g. torch's resize_ or set_); bind again",
        type_name(obj)
    ))
}

impl PyBound {
    /// The producer stream of array argument `i` as a launch reads it now, after checking
    /// that it is still the bound memory and layout.
    fn reread(
        &self,
        args: &Bound<'_, PyTuple>,
        i: usize,
        desc: &ArrayDesc,
        how: Reread,
        state: &mut CallState,
    ) -> PyResult<Option<StreamRef>> {
        let name = || self.prepared.param(i).map_or("?", |p| p.name.as_str());
        if how == Reread::Nothing {
            return Ok(desc.stream());
        }
        let obj = args.get_item(i)?;
        if let Reread::Fast(kind) = how {
            match fast::same_layout(&obj, kind, desc, state)? {
                Some(false) => return Err(changed(name(), &obj)),
                Some(true) => {
                    if let Some(s) = fast::current_stream(&obj, kind, state)? {
                        return Ok(s);
                    }
                }
                None => {}
            }
        }
        let mut scratch = ArgScratch::new();
        scratch.call = *state;
        let found = probe(&obj, name(), &mut scratch)?;
        *state = scratch.call;
        match found {
            Found::Desc(d) if d.with_stream(desc.stream()) == *desc => Ok(d.stream()),
            _ => Err(changed(name(), &obj)),
        }
    }

    /// One launch (see the module documentation).
    fn launch(&self, py: Python<'_>) -> PyResult<()> {
        let args = self.args.bind(py);
        let mut state = CallState::default();
        let mut read = [None; MAX_ARRAYS];
        for (slot, a) in read.iter_mut().zip(self.arrays.iter()) {
            // (Nothing is read of a ferrocuda array or DLPack import: its bound stream.)
            *slot = self.reread(args, a.index, &a.desc, a.reread, &mut state)?;
        }
        let producers = &read[..self.arrays.len()];
        let (prepared, packed) = (&self.prepared, &self.packed);
        py.detach(|| {
            // SAFETY: the parameters packed at bind from the prepared arguments (the bound
            // descriptions, each checked above to be the memory and layout it was at bind),
            // none a host array; kernels from ferrocuda's builder are memory-safe for
            // arguments that pass the checks (the manifest contract); the bound object holds
            // every argument's owner (and the DLPack capsules), and the plan orders the
            // producers' streams around the kernel (made again for them, in the prepared
            // context, the caller's restored).
            unsafe { prepared.execute_replanned(producers, packed) }
        })
        .map(|_| ())
        .py_err(py)
    }
}

#[pymethods]
impl PyBound {
    /// Launches the kernel on the bound arguments. Takes no arguments.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let given = args.len() + kwargs.map_or(0, |k| k.len());
        if given > 0 {
            return Err(PyTypeError::new_err(format!(
                "a bound launch takes no arguments (got {given}): its arguments were bound by \
                 bind(); bind again to launch on other arguments"
            )));
        }
        self.launch(py)
    }

    /// The kernel's name (for a family, the variant selected at bind).
    #[getter]
    fn name(&self) -> &'static str {
        self.prepared.kernel().name()
    }

    /// The bound arguments (the objects given to ``bind``, kept alive).
    #[getter]
    fn args(&self, py: Python<'_>) -> Py<PyTuple> {
        self.args.clone_ref(py)
    }

    /// The sync mode of every launch: ``'default'``, ``'event'`` or ``'off'``.
    #[getter]
    fn sync(&self) -> &'static str {
        sync_name(self.prepared.plan().mode())
    }

    /// The device the kernel runs on.
    /// The stream the launch goes on, as a CAI stream integer (1 is the legacy default
    /// stream, 2 the per-thread default stream, else a handle) — as planned at bind; a
    /// launch plans again from the producers' current streams.
    #[getter]
    fn stream(&self) -> u64 {
        self.prepared.launch_stream().as_raw()
    }

    #[getter]
    fn device(&self) -> usize {
        self.prepared.device()
    }

    /// The grid, ``(x, y, z)``; ``None`` when there is nothing to launch (every array empty).
    #[getter]
    fn grid(&self) -> Option<(u32, u32, u32)> {
        self.prepared.config().map(|(g, _)| (g[0], g[1], g[2]))
    }

    /// The block, ``(x, y, z)``; ``None`` when there is nothing to launch.
    #[getter]
    fn block(&self) -> Option<(u32, u32, u32)> {
        self.prepared.config().map(|(_, b)| (b[0], b[1], b[2]))
    }

    fn __repr__(&self) -> String {
        format!(
            "<ferrocuda.BoundLaunch {} grid={:?} block={:?} sync={}>",
            self.name(),
            self.grid(),
            self.block(),
            self.sync()
        )
    }
}
