"""Dask arrays of CuPy chunks through ferrocuda kernels: one GPU, or one worker per GPU.

The engine schedules, ferrocuda launches. Every task launches its kernel in the process and
on the GPU that hold its chunk, on the CuPy stream current in the thread that runs it (the
stream the chunk's CUDA Array Interface names), with nothing pinned to device 0: under
dask-cuda each worker sees its own GPU, and a launch runs on the device of its arrays.
Launchers travel inside the task graph as task arguments: they pickle by name, so a worker
unpickles ``ferrocuda.kernels.add`` as its own process's ``add``, whose code loads into the
worker's GPU at the first launch there.

What it computes, each checked against NumPy:

* elementwise, through ``map_blocks``: ``s = a + b`` (``kernels.add``) and
  ``y = alpha * x + s`` (``kernels.saxpy``, which updates its last argument: it runs on a
  copy of the block, since Dask blocks may be shared between tasks);
* a whole-array sum through ``da.reduction`` (a tree reduction): one launch of the gallery's
  ``kernels.sum(x, out)`` (``out`` of shape ``(1,)``) per chunk, then per group of partial
  sums, then once more for the total. Without a ``sum`` family in the installed ferrocuda it is
  skipped, and the reason printed;
* where the tasks ran: process, device and PCI bus id of each chunk's launch.

Run (with dask, and dask-cuda for the last form):

    python dask_kernels.py                  # threaded scheduler, this process's GPU
    python dask_kernels.py --processes 2    # distributed.LocalCluster: 2 worker processes
                                            # (they share the GPUs this process sees)
    python dask_kernels.py --cuda-cluster   # dask_cuda.LocalCUDACluster: one worker per GPU

Options: ``--n`` elements, ``--chunk`` elements per chunk, ``--dtype`` (float32, float64),
``--timeout`` seconds for every wait on the cluster. Exit status 0 when every check passed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

import ferrocuda
from ferrocuda import kernels

#: Seconds any wait on a cluster may take (startup, connection, results) before it fails.
DEFAULT_TIMEOUT_S = 120.0


class MissingKernel(RuntimeError):
    """The installed ferrocuda lacks a kernel family this example needs; the message says
    which, and what is skipped."""


# ---- block functions: what each task runs ---------------------------------------------------


def kernel_into_new(launcher: Any, *args: Any) -> Any:
    """``launcher(*args, out)`` into a new block shaped like the first array argument;
    returns ``out``. For kernels whose last parameter is their output (``add(a, b, out)``)."""
    import cupy as cp

    first = next(a for a in args if hasattr(a, "__cuda_array_interface__"))
    out = cp.empty_like(first)
    launcher(*args, out)
    return out


def kernel_on_copy(launcher: Any, *args: Any) -> Any:
    """``launcher(*args)`` for a kernel that updates its last argument in place
    (``saxpy(alpha, x, y)``: ``y = alpha * x + y``), run on a copy of the last block, which is
    returned: the input block itself may be shared with other tasks."""
    *head, last = args
    out = last.copy()
    launcher(*head, out)
    return out


def block_sum(
    launcher: Any,
    acc: Any,
    x: Any,
    axis: Any = None,
    keepdims: bool = False,
    computing_meta: bool = False,
    **_: Any,
) -> Any:
    """The sum of every element of block `x` in one launch of ``launcher(x, out)`` (a ``sum``
    family: ``out`` has one element, of `acc`), shaped as ``da.reduction`` wants it: ``(1,) *
    x.ndim`` with `keepdims`, else 0-d. Used for the chunks, the combined partial sums and the
    final aggregate alike (int32 chunks sum into int64, whose partials sum as int64)."""
    import cupy as cp

    shape = (1,) * x.ndim if keepdims else ()
    if computing_meta:
        return cp.empty((0,) * len(shape), acc)
    out = cp.empty(1, acc)
    launcher(cp.ascontiguousarray(x), out)
    return out.reshape(shape)


def where_it_ran(launcher: Any, a: Any, b: Any) -> dict[str, Any]:
    """Runs ``launcher(a, b, out)`` (an ``add``) on one chunk and says where it ran: process,
    the device as that process numbers it, its PCI bus id, the CUDA device current in the
    task's thread before and after the launch, and whether ``out == a + b``."""
    import cupy as cp

    before = cp.cuda.runtime.getDevice()
    out = cp.empty_like(a)
    launcher(a, b, out)
    after = cp.cuda.runtime.getDevice()
    dev = out.device.id
    return {
        "pid": os.getpid(),
        "device": dev,
        "pci_bus_id": cp.cuda.Device(dev).pci_bus_id,
        "current_before": before,
        "current_after": after,
        "right": bool(cp.array_equal(out, a + b)),
        "chunk": int(a.size),
    }


# ---- graphs ---------------------------------------------------------------------------------


def _meta(dtype: Any, ndim: int) -> Any:
    import cupy as cp

    return cp.empty((0,) * ndim, dtype=dtype)


def elementwise(launcher: Any, *args: Any, in_place_last: bool = False) -> Any:
    """A Dask array: `launcher` over the blocks of the Dask arrays among `args` (scalars are
    passed to every block). The output is a new block like the first array argument
    (``kernel_into_new``), or, with `in_place_last`, an updated copy of the last one
    (``kernel_on_copy``)."""
    import dask.array as da

    arrays = [a for a in args if isinstance(a, da.Array)]
    like = arrays[-1] if in_place_last else arrays[0]
    fn = kernel_on_copy if in_place_last else kernel_into_new
    return da.map_blocks(fn, launcher, *args, dtype=like.dtype, meta=_meta(like.dtype, like.ndim))


def sum_launcher() -> Any:
    """The gallery's ``sum`` family (``kernels.sum(x, out)``, ``out`` of shape ``(1,)``), or
    :class:`MissingKernel` saying that the reduction is skipped."""
    fam = getattr(kernels, "sum", None)
    if not isinstance(fam, ferrocuda.Family):
        raise MissingKernel(
            f"ferrocuda {ferrocuda.__version__} has no `sum` kernel family (the one-launch "
            "reduction kernels.sum(x, out), out of shape (1,)): the reduction is skipped"
        )
    return fam


def accumulator_dtype(family: Any, dtype: Any) -> np.dtype:
    """The element type `family` writes for input `dtype`, read from its manifest: the first
    writable array parameter of the variant whose first array parameter has `dtype`
    (``sum_i32`` writes int64, as ``numpy.sum`` does)."""
    want = np.dtype(dtype)
    for k in family.kernels:
        arrays = [p for p in k.params if p[1] in ("slice", "view")]
        try:
            if not arrays or np.dtype(arrays[0][2]) != want:
                continue
        except TypeError:  # an element type NumPy does not name (bfloat16)
            continue
        for _, _, dt, _, mutable in arrays[1:]:
            if mutable:
                return np.dtype(dt)
    variants = ", ".join(k.name for k in family.kernels)
    raise TypeError(f"`{family.name}` has no variant for {want} (variants: {variants})")


def dask_sum(x: Any, split_every: int | None = None) -> Any:
    """The sum of Dask array `x` (CuPy chunks) as a 0-d Dask array: ``da.reduction`` with
    one ``sum`` launch per chunk, per group of `split_every` partial sums, and for the total.
    Raises :class:`MissingKernel` without a ``sum`` family."""
    import dask.array as da

    fam = sum_launcher()
    acc = accumulator_dtype(fam, x.dtype)
    step = partial(block_sum, fam, acc)
    return da.reduction(
        x,
        step,
        step,
        combine=step,
        axis=None,
        keepdims=False,
        dtype=acc,
        split_every=split_every,
        concatenate=True,
        meta=_meta(acc, 0),
    )


def placements(a: Any, b: Any) -> list[Any]:
    """One delayed :func:`where_it_ran` per pair of chunks of `a` and `b`."""
    import dask

    return [
        dask.delayed(where_it_ran)(kernels.add, x, y)
        for x, y in zip(a.to_delayed().ravel(), b.to_delayed().ravel(), strict=True)
    ]


# ---- the checks -----------------------------------------------------------------------------


Compute = Callable[..., Sequence[Any]]


def to_dask(host: np.ndarray, chunk: int) -> Any:
    """A Dask array of CuPy chunks of `chunk` elements holding `host`."""
    import cupy as cp
    import dask.array as da

    return da.from_array(host, chunks=chunk, asarray=False).map_blocks(
        cp.asarray, dtype=host.dtype, meta=_meta(host.dtype, host.ndim)
    )


def to_host(v: Any) -> np.ndarray:
    """A computed value (CuPy or NumPy array, or scalar) as a NumPy array."""
    import cupy as cp

    return cp.asnumpy(v) if isinstance(v, cp.ndarray) else np.asarray(v)


def check_sum(
    compute: Compute, host: np.ndarray, chunk: int, log: Callable[[str], None] = print
) -> Any:
    """Sums `host` through :func:`dask_sum` over chunks of `chunk` elements, computed with
    `compute`, and checks the total against NumPy: exactly for integers, within
    ``64 eps * sum|x|`` for floats (each launch's bound is a few ``eps * sum|x|``, and the
    tree has few levels). Returns the total; raises :class:`MissingKernel` without a ``sum``
    family, ``AssertionError`` on a wrong total."""
    x = to_dask(host, chunk)
    (total,) = compute(dask_sum(x, split_every=4))
    total = to_host(total)
    if host.dtype.kind == "f":
        exact = float(host.astype(np.float64).sum())
        tol = 64 * float(np.finfo(host.dtype).eps) * float(np.abs(host.astype(np.float64)).sum())
        assert abs(float(total) - exact) <= tol, f"sum {total} vs {exact} (tolerance {tol})"
    else:
        exact = int(host.astype(np.int64).sum())
        assert int(total) == exact, f"sum {total} vs {exact}"
    log(
        f"sum of {host.size} {host.dtype} over {x.npartitions} chunks through da.reduction "
        f"(a tree of kernels.sum launches): {total.item()!r}, NumPy {exact!r}"
    )
    return total.item()


def run_checks(
    compute: Compute,
    n: int = 1 << 22,
    chunk: int = 1 << 18,
    dtype: str = "float32",
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Builds the graphs, computes them with `compute` (Dask arrays and delayed objects in,
    their values out, in order) and checks every result against NumPy (`dtype` is a float
    type: saxpy has float variants only). Returns a report: ``placements`` (one
    :func:`where_it_ran` record per chunk), ``sum`` (the value, or ``None``) and
    ``sum_skipped`` (the reason, when there is no ``sum`` family). Raises ``AssertionError``
    on a wrong result."""
    rng = np.random.default_rng(7)
    h = {k: rng.standard_normal(n).astype(dtype) for k in "abx"}
    d = {k: to_dask(v, chunk) for k, v in h.items()}
    alpha = 2.5
    s = elementwise(kernels.add, d["a"], d["b"])
    y = elementwise(kernels.saxpy, alpha, d["x"], s, in_place_last=True)
    where = placements(d["a"], d["b"])
    values = compute(s, y, *where)
    got_s, got_y = to_host(values[0]), to_host(values[1])
    want_s = h["a"] + h["b"]
    assert np.array_equal(got_s, want_s), "a + b differs from NumPy"
    log(f"add over {d['a'].npartitions} chunks of {chunk}: equal to NumPy")
    ax = np.float64(alpha) * h["x"].astype(np.float64)
    want_y = ax + want_s.astype(np.float64)
    # One rounding (fma) or two: within 2 eps of the terms' magnitudes.
    tol = 2 * float(np.finfo(dtype).eps) * (np.abs(ax) + np.abs(want_s)) + float(
        np.finfo(dtype).tiny
    )
    bad = np.flatnonzero(np.abs(got_y.astype(np.float64) - want_y) > tol)
    assert bad.size == 0, f"saxpy differs at {bad.size} elements, first {bad[:5].tolist()}"
    log(f"saxpy over {d['x'].npartitions} chunks: matches NumPy")
    report: dict[str, Any] = {"sum": None, "sum_skipped": None, "placements": list(values[2:])}
    try:
        report["sum"] = check_sum(compute, h["x"], chunk, log)
    except MissingKernel as e:
        report["sum_skipped"] = str(e)
        log(f"reduction skipped: {e}")
    rest = report["placements"]
    wrong = [p for p in rest if not p["right"]]
    assert not wrong, f"wrong results in chunks: {wrong[:3]}"
    moved = [p for p in rest if p["current_before"] != p["current_after"]]
    assert not moved, f"a launch changed its thread's current device: {moved[:3]}"
    gpus = sorted({p["pci_bus_id"] for p in rest})
    pids = sorted({p["pid"] for p in rest})
    log(
        f"{len(rest)} chunks ran in {len(pids)} process(es) on {len(gpus)} GPU(s): "
        f"{', '.join(gpus)}"
    )
    return report


# ---- schedulers -----------------------------------------------------------------------------


def threaded(num_workers: int = 4) -> Compute:
    """Dask's threaded scheduler in this process (its GPUs; CuPy's current device)."""
    import dask

    return lambda *graphs: dask.compute(*graphs, scheduler="threads", num_workers=num_workers)


def on_client(client: Any, timeout: float = DEFAULT_TIMEOUT_S) -> Compute:
    """A distributed client's workers, every wait bounded by `timeout` seconds."""
    import distributed

    def compute(*graphs: Any) -> Sequence[Any]:
        futures = client.compute(list(graphs))
        distributed.wait(futures, timeout=timeout)
        return client.gather(futures)

    return compute


def ship_by_value() -> None:
    """Lets the worker processes of a cluster started after this call run this file's
    functions when it was imported as a module (run as a script, ``__main__``, cloudpickle
    ships them by value anyway).

    Registering the module with cloudpickle is not enough: the scheduler re-pickles the tasks
    for the workers with plain ``pickle``, by reference (``dask_kernels.kernel_into_new``), so
    the workers must import this module. Worker processes started by this process
    (``LocalCluster``, ``LocalCUDACluster``: multiprocessing ``spawn``) begin with this
    process's ``sys.path`` -- not with ``PYTHONPATH`` -- so this file's directory goes on it.
    Workers started elsewhere (``dask worker`` on another machine) need the module installed.
    The launchers the functions use go by name (``ferrocuda.kernels``) either way."""
    import cloudpickle

    module = sys.modules[__name__]
    if module.__name__ != "__main__":
        here = os.path.dirname(os.path.abspath(__file__))
        if here not in sys.path:
            sys.path.append(here)
        cloudpickle.register_pickle_by_value(module)


def local_cluster(processes: int, timeout: float = DEFAULT_TIMEOUT_S) -> Any:
    """A ``distributed.LocalCluster`` of `processes` single-threaded worker processes, which
    share the GPUs this process sees (without CUDA_VISIBLE_DEVICES, all of them on GPU 0)."""
    import dask
    import distributed

    ship_by_value()
    with dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s"}):
        return distributed.LocalCluster(
            n_workers=processes, threads_per_worker=1, processes=True, dashboard_address=None
        )


def cuda_cluster(visible: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> Any:
    """A ``dask_cuda.LocalCUDACluster``: one single-threaded worker per GPU of `visible`
    (a CUDA_VISIBLE_DEVICES list; default: every GPU), each seeing its own GPU as device 0."""
    import dask
    from dask_cuda import LocalCUDACluster

    ship_by_value()
    with dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s"}):
        return LocalCUDACluster(
            CUDA_VISIBLE_DEVICES=visible, threads_per_worker=1, dashboard_address=None
        )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    how = p.add_mutually_exclusive_group()
    how.add_argument(
        "--processes",
        type=int,
        default=0,
        help="distributed.LocalCluster with this many worker processes",
    )
    how.add_argument(
        "--cuda-cluster", action="store_true", help="dask_cuda.LocalCUDACluster, one worker per GPU"
    )
    p.add_argument("--n", type=int, default=1 << 22)
    p.add_argument("--chunk", type=int, default=1 << 18)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    args = p.parse_args(argv)
    if not ferrocuda.driver_available():
        print("No CUDA driver/GPU present: nothing to run the kernels on.")
        return 0
    run = partial(run_checks, n=args.n, chunk=args.chunk, dtype=args.dtype)
    if not (args.processes or args.cuda_cluster):
        print("scheduler: threads (this process)")
        run(threaded())
        return 0
    import distributed

    cluster = (
        cuda_cluster(timeout=args.timeout)
        if args.cuda_cluster
        else local_cluster(args.processes, args.timeout)
    )
    with cluster, distributed.Client(cluster, timeout=args.timeout) as client:
        print(
            f"scheduler: {type(cluster).__name__} "
            f"with {len(client.scheduler_info()['workers'])} workers"
        )
        run(on_client(client, args.timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
