"""ferrocuda kernels under MPI: one GPU per rank, results allreduced through mpi4py.

Each rank takes the GPU of its rank on its node (``local_rank % device_count``, made current
with CuPy's ``Device(n).use()``), runs ferrocuda kernels on its own data — CuPy arrays and
ferrocuda ``DeviceArray``s, both on that GPU — and sums the results over all ranks with
``MPI.Allreduce``. mpi4py takes CUDA Array Interface objects as buffers: where the MPI
library is CUDA-aware the GPU buffers go to MPI directly; otherwise they are staged through
host memory. Which path runs is detected (``MPIX_Query_cuda_support`` of the loaded MPI
library) and said, with the MPI library in use.

Run:

    mpiexec -n 2 python mpi_allreduce.py [--n N] [--path auto|direct|host]

``--path direct`` passes GPU buffers to MPI whatever the detection says (only for a library
known to be CUDA-aware: a library that is not may crash on them); ``host`` always stages.
Every rank prints one JSON line (rank, device, PCI bus id, MPI library, CUDA-awareness, path,
results checked against NumPy); the exit status is 0 when every check on every rank passed.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import ferrocuda
from ferrocuda import kernels


def loaded_mpi_library() -> str | None:
    """The path of the MPI library mapped into this process (``/proc/self/maps``), if any."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libmpi" in line and "/" in line}
    except OSError:
        return None
    # The MPI library itself, not a helper such as libmpi_cxx or libmpifort.
    for p in sorted(paths):
        base = os.path.basename(p)
        if base.startswith(("libmpi.so", "libmpi_abi.so", "libmpich.so")):
            return p
    return min(paths) if paths else None


def cuda_awareness(library: str | None) -> tuple[bool | None, str]:
    """Whether the MPI library takes GPU buffers: ``(True/False, how it was learned)``, or
    ``(None, why not)``. Asks ``MPIX_Query_cuda_support()`` (Open MPI and MPICH provide it;
    it says whether the library was built with CUDA support and has it enabled)."""
    if library is None:
        return None, "no MPI library found among the loaded files"
    try:
        lib = ctypes.CDLL(library)
        query = lib.MPIX_Query_cuda_support
    except (OSError, AttributeError):
        return None, f"{os.path.basename(library)} has no MPIX_Query_cuda_support"
    query.restype = ctypes.c_int
    query.argtypes = []
    value = int(query())
    return value == 1, f"MPIX_Query_cuda_support() = {value}"


def allreduce_sum(comm: Any, array: Any, direct: bool) -> None:
    """Sums `array` (a GPU array exporting the CUDA Array Interface: CuPy, ``DeviceArray``)
    over all ranks, in place: the GPU buffer itself goes to MPI when `direct`, else a host
    copy does and the sum is copied back."""
    import cupy as cp
    from mpi4py import MPI

    view = cp.asarray(array)  # zero-copy over the CUDA Array Interface
    # MPI reads the buffer outside any stream: the work that produced it (on any stream of
    # the array's device, the current one) must be done.
    cp.cuda.runtime.deviceSynchronize()
    if direct:
        comm.Allreduce(MPI.IN_PLACE, array, op=MPI.SUM)
    else:
        host = cp.asnumpy(view)
        comm.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM)
        view.set(host)


def rank_data(rank: int, n: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """The inputs of `rank`: every rank can rebuild every other rank's, for the reference."""
    rng = np.random.default_rng(1000 + rank)
    return rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)


def run(comm: Any, n: int, path: str) -> dict[str, Any]:
    """One rank's part; returns its report (``ok`` when every check passed)."""
    import cupy as cp
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    local_rank = local.Get_rank()
    device = local_rank % cp.cuda.runtime.getDeviceCount()
    cp.cuda.Device(device).use()
    library = loaded_mpi_library()
    aware, how = cuda_awareness(library)
    direct = path == "direct" or (path == "auto" and aware is True)
    report: dict[str, Any] = {
        "rank": rank,
        "size": size,
        "local_rank": local_rank,
        "device": device,
        "pci_bus_id": cp.cuda.Device(device).pci_bus_id,
        "mpi_library": library,
        "mpi_version": MPI.Get_library_version().splitlines()[0].strip(),
        "cuda_aware": aware,
        "cuda_aware_how": how,
        "path": "direct (GPU buffers to MPI)" if direct else "staged through host memory",
        "checks": {},
    }
    alpha = 1.5
    hx, hy = rank_data(rank, n, np.float32)

    # CuPy arrays: y = alpha * x + y (saxpy, in place), then the sum over ranks.
    x, y = cp.asarray(hx), cp.asarray(hy)
    kernels.saxpy(alpha, x, y)
    allreduce_sum(comm, y, direct)
    parts = [rank_data(r, n, np.float32) for r in range(size)]
    want = sum(np.float64(alpha) * px.astype(np.float64) + py for px, py in parts)
    scale = sum(np.abs(np.float64(alpha) * px) + np.abs(py) for px, py in parts)
    err = np.abs(cp.asnumpy(y).astype(np.float64) - want)
    report["checks"]["cupy saxpy + Allreduce"] = bool(np.all(err <= 4 * size * 2.0**-23 * scale))

    # ferrocuda's own arrays on the same device: out = a + b (add), then the sum over ranks.
    a = ferrocuda.DeviceArray.from_numpy(hx.astype(np.float64), device=device)
    b = ferrocuda.DeviceArray.from_numpy(hy.astype(np.float64), device=device)
    out = ferrocuda.DeviceArray.empty((n,), "float64", device=device)
    kernels.add(a, b, out)
    allreduce_sum(comm, out, direct)
    want64 = sum(px.astype(np.float64) + py.astype(np.float64) for px, py in parts)
    scale64 = sum(np.abs(px.astype(np.float64)) + np.abs(py) for px, py in parts)
    err64 = np.abs(out.to_numpy() - want64)
    report["checks"]["DeviceArray add + Allreduce"] = bool(
        np.all(err64 <= 2 * size * 2.0**-52 * scale64)
    )

    # The launches ran on this rank's device and left it current.
    report["checks"]["current device kept"] = cp.cuda.runtime.getDevice() == device
    report["checks"]["arrays on the rank's device"] = out.device == device and y.device.id == device

    # A whole-array sum (the gallery's one-launch reduction), summed over ranks.
    fam = getattr(kernels, "sum", None)
    if isinstance(fam, ferrocuda.Family):
        total = cp.zeros(1, np.float64)
        fam(cp.asarray(hx.astype(np.float64)), total)
        allreduce_sum(comm, total, direct)
        exact = sum(float(px.astype(np.float64).sum()) for px, _ in parts)
        bound = 64 * 2.0**-52 * sum(float(np.abs(px.astype(np.float64)).sum()) for px, _ in parts)
        report["checks"]["sum + Allreduce"] = abs(float(total.get()[0]) - exact) <= bound
    else:
        report["sum_skipped"] = "this ferrocuda has no `sum` kernel family: skipped"
    report["ok"] = all(report["checks"].values())
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--path", choices=["auto", "direct", "host"], default="auto")
    args = p.parse_args(argv)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    try:
        report = run(comm, args.n, args.path)
    # Whatever it raised, a failing rank must not leave the others waiting forever.
    except Exception as e:  # noqa: BLE001
        print(
            json.dumps({"rank": comm.Get_rank(), "ok": False, "error": f"{type(e).__name__}: {e}"}),
            flush=True,
        )
        comm.Abort(1)
        return 1
    print(json.dumps(report), flush=True)
    oks = comm.allgather(report["ok"])
    return 0 if all(oks) else 1


if __name__ == "__main__":
    sys.exit(main())
