"""ferrocuda kernels under Dask: CuPy chunks through ``map_blocks`` and ``da.reduction``, on
the threaded scheduler, on two worker processes sharing one GPU, and on dask-cuda clusters of
one worker per GPU. The checks themselves are the example's (``examples/dask_kernels.py``),
so the example is what is tested.

Needs dask (and distributed, dask-cuda for the cluster cases); the GPU run's ``scale`` part
carries them. Every wait on a cluster is bounded (``TIMEOUT_S``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ferrocuda

pytestmark = pytest.mark.gpu

TIMEOUT_S = 120.0
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def ex(cupy: Any) -> Iterator[Any]:
    """The example module (dask and dask.array importable). Its directory stays on
    ``sys.path`` while this module's tests run, as it would for a user's own module: the
    worker processes the cluster fixtures spawn start with this ``sys.path`` and import the
    example's functions by name (``ship_by_value`` in the example)."""
    pytest.importorskip("dask.array", reason="dask is not installed: Dask cases skipped")
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield importlib.import_module("dask_kernels")
    finally:
        sys.path.remove(str(EXAMPLES))


def distributed_client(cluster: Any) -> Iterator[Any]:
    import distributed

    with cluster, distributed.Client(cluster, timeout=TIMEOUT_S) as client:
        yield client


@pytest.fixture(scope="module")
def two_workers(ex: Any) -> Iterator[Any]:
    """A ``distributed.LocalCluster`` of two worker processes on this machine's GPU 0."""
    pytest.importorskip("distributed", reason="distributed is not installed")
    yield from distributed_client(ex.local_cluster(2, TIMEOUT_S))


def cuda_cluster(ex: Any, gpus: int) -> Iterator[Any]:
    pytest.importorskip("dask_cuda", reason="dask-cuda is not installed")
    count = ferrocuda.device_count()
    if count < gpus:
        pytest.skip(
            f"one GPU only: the {gpus}-GPU case (one worker per GPU) skipped"
            if count == 1
            else f"{count} GPUs: the {gpus}-GPU case skipped"
        )
    visible = ",".join(str(i) for i in range(gpus))
    yield from distributed_client(ex.cuda_cluster(visible, TIMEOUT_S))


@pytest.fixture(scope="module")
def cuda_one(ex: Any) -> Iterator[Any]:
    """dask-cuda's ``LocalCUDACluster`` on GPU 0: one worker."""
    yield from cuda_cluster(ex, 1)


@pytest.fixture(scope="module")
def cuda_two(ex: Any) -> Iterator[Any]:
    """dask-cuda's ``LocalCUDACluster`` on GPUs 0 and 1: one worker per GPU."""
    yield from cuda_cluster(ex, 2)


SCHEDULERS = ["threads", "two_workers", "cuda_one", "cuda_two"]


@pytest.fixture(params=SCHEDULERS)
def compute(request: Any, ex: Any) -> Any:
    """How the graphs are computed: ``(compute, client or None)``."""
    if request.param == "threads":
        return ex.threaded(4), None
    client = request.getfixturevalue(request.param)
    return ex.on_client(client, TIMEOUT_S), client


def test_elementwise_and_placement(ex: Any, compute: Any) -> None:
    run, client = compute
    report = ex.run_checks(run, n=1 << 21, chunk=1 << 17, log=print)
    where = report["placements"]
    assert len(where) == 16 and all(p["right"] for p in where)
    if client is not None:
        workers = client.scheduler_info()["workers"]
        pids = {p["pid"] for p in where}
        gpus = {p["pci_bus_id"] for p in where}
        # Dask spreads the 16 independent chunks over every worker; with dask-cuda each
        # worker holds one GPU, so every GPU ran kernels.
        assert len(pids) == len(workers), (pids, len(workers))
        visible = client.run(lambda: __import__("cupy").cuda.Device(0).pci_bus_id)
        assert gpus == set(visible.values()), (gpus, visible)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_tree_reduction(ex: Any, compute: Any, dtype: str) -> None:
    run, _ = compute
    try:
        fam = ex.sum_launcher()
    except ex.MissingKernel as e:
        pytest.skip(str(e))
    rng = np.random.default_rng(11)
    n = 3 * (1 << 16) + 5  # chunks of unequal length, the last one short
    host = (
        (rng.standard_normal(n) * 100).astype(dtype)
        if dtype[0] == "f"
        else rng.integers(-(1 << 30), 1 << 30, n).astype(dtype)
    )
    # int32 sums into int64 (as numpy.sum does), so 2^30-sized values cannot overflow.
    assert ex.accumulator_dtype(fam, dtype) == np.sum(host[:1]).dtype
    ex.check_sum(run, host, chunk=1 << 13, log=print)
