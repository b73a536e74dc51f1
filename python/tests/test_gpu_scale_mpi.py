"""ferrocuda kernels under MPI: ``examples/mpi_allreduce.py`` under ``mpiexec -n 2``, two
ranks on one GPU and, with two GPUs, one rank per GPU; the results allreduced through mpi4py,
GPU buffers passed directly where the MPI library is CUDA-aware, staged through the host
otherwise. Each case says which MPI library ran and which path it took.

The MPI launcher is ``$FERROCUDA_MPIEXEC``, else ``mpiexec`` on ``PATH``; mpi4py must find an
MPI library (``MPI4PY_LIBMPI`` may name it: the GPU run's ``scale`` part points it at the
MPICH wheel it carries). Without either the cases skip, saying why. Every run is bounded
(``TIMEOUT_S``; the process group is killed past it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ferrocuda
from ferrocuda import _config

pytestmark = pytest.mark.gpu

TIMEOUT_S = 180
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mpi_allreduce.py"


def run_bounded(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Runs `cmd` in its own process group; past `timeout` seconds the whole group is killed
    and the test fails saying so."""
    p = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(
            f"{' '.join(cmd)} ran past {timeout} s and was killed\nstdout:\n"
            f"{out.decode(errors='replace')[-3000:]}\nstderr:\n{err.decode(errors='replace')[-3000:]}"
        )
    return subprocess.CompletedProcess(
        cmd, p.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    )


@pytest.fixture(scope="module")
def mpi(gpu: None) -> dict[str, Any]:
    """The MPI launcher (``cmd``: mpiexec and its flags), the environment, and the MPI library
    mpi4py loads (``library``); skips with the reason when any is missing."""
    pytest.importorskip("cupy", reason="the MPI example uses CuPy")
    given = _config.path("FERROCUDA_MPIEXEC")
    exe = str(given) if given else shutil.which("mpiexec")
    if not exe:
        pytest.skip("no MPI launcher: neither $FERROCUDA_MPIEXEC nor mpiexec on PATH")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), MPIEXEC_TIMEOUT=str(TIMEOUT_S))
    if os.geteuid() == 0:
        # Open MPI refuses to start as root (even `mpiexec --version`) unless told twice; the
        # GPU machines run tests as root. MPICH ignores these variables.
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    probe = run_bounded(
        [
            sys.executable,
            "-c",
            "from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])",
        ],
        env,
        60,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"mpi4py cannot load an MPI library: {last}")
    version = run_bounded([exe, "--version"], env, 30)
    text = version.stdout + version.stderr
    flags: list[str] = []
    if "HYDRA" in text:  # MPICH's launcher: local ranks by fork, no ssh
        flags = ["-launcher", "fork"]
    elif "Open MPI" in text or "OMPI_" in text or "prte" in text.lower():
        flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return {"cmd": [exe, *flags], "env": env, "library": probe.stdout.strip()}


def run_ranks(
    mpi: dict[str, Any], ranks: int, path: str, visible: str | None
) -> list[dict[str, Any]]:
    env = dict(mpi["env"])
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    cmd = [
        *mpi["cmd"],
        "-n",
        str(ranks),
        sys.executable,
        str(EXAMPLE),
        "--n",
        str(1 << 20),
        "--path",
        path,
    ]
    r = run_bounded(cmd, env, TIMEOUT_S)
    reports = []
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            reports.append(json.loads(line))
    assert r.returncode == 0 and len(reports) == ranks, (
        f"{' '.join(cmd)}: exit {r.returncode}\n"
        f"stdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-4000:]}"
    )
    for rep in sorted(reports, key=lambda x: x["rank"]):
        print(
            f"rank {rep['rank']}/{rep['size']}: device {rep['device']} ({rep['pci_bus_id']}), "
            f"MPI {rep['mpi_version']!r} from {rep['mpi_library']}, CUDA-aware: "
            f"{rep['cuda_aware']} ({rep['cuda_aware_how']}); {rep['path']}; checks {rep['checks']}"
            + (f"; {rep['sum_skipped']}" if "sum_skipped" in rep else "")
        )
        assert rep["ok"], rep
        assert rep["size"] == ranks, (
            f"the ranks ran as {rep['size']}-rank jobs: {mpi['cmd'][0]} does not match the MPI "
            f"library mpi4py loads ({mpi['library']})"
        )
    return reports


@pytest.mark.parametrize("path", ["auto", "host"])
def test_two_ranks_on_one_gpu(mpi: dict[str, Any], path: str) -> None:
    """Two ranks share GPU 0. ``auto`` passes GPU buffers to MPI when the library says it is
    CUDA-aware, and stages otherwise; ``host`` always stages."""
    reports = run_ranks(mpi, 2, path, visible="0")
    assert {r["device"] for r in reports} == {0}
    assert len({r["pci_bus_id"] for r in reports}) == 1
    for r in reports:
        staged = r["path"].startswith("staged")
        assert staged == (path == "host" or r["cuda_aware"] is not True), r


def test_one_rank_per_gpu(mpi: dict[str, Any]) -> None:
    """Two ranks on two GPUs: rank i takes GPU i (its local rank) and its kernels run there."""
    count = ferrocuda.device_count()
    if count < 2:
        pytest.skip("one GPU only: the two-GPU case (one rank per GPU) skipped")
    reports = run_ranks(mpi, 2, "auto", visible=None)
    assert sorted(r["device"] for r in reports) == [0, 1]
    assert len({r["pci_bus_id"] for r in reports}) == 2
