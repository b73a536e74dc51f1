"""Shared fixtures of the ferrocuda Python tests.

GPU tests take the ``gpu`` fixture (or are marked ``@pytest.mark.gpu``): without a CUDA
driver and device they are skipped with the reason. Library fixtures (``cupy``, ``torch``,
``numba_cuda``, ``jax``) skip when the library is missing or cannot reach the GPU.

Random inputs come from ``rng``, seeded from ``FERROCUDA_TEST_SEED`` or a fresh random seed;
the seed is printed, so a failing test's captured output shows how to reproduce it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ferrocuda
from ferrocuda import _config

# JAX (when a test uses it) must not take most of the GPU's memory from the CuPy and torch
# tests, and from the workspaces of ferrocuda's own kernels, in the same process.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

_NO_GPU_REASON = "no CUDA driver/device (ferrocuda.driver_available() is False): GPU test skipped"


def pytest_collection_modifyitems(config: Any, items: Any) -> None:
    """Skips tests marked ``gpu`` on machines without a CUDA driver, with the reason."""
    if ferrocuda.driver_available():
        return
    skip = pytest.mark.skip(reason=_NO_GPU_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config: Any) -> str:
    return (
        f"ferrocuda {ferrocuda.__version__}; CUDA driver available: {ferrocuda.driver_available()}"
    )


@pytest.fixture(scope="session")
def gpu() -> None:
    """Skips the test without a CUDA driver and device."""
    if not ferrocuda.driver_available():
        pytest.skip(_NO_GPU_REASON)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh random generator; its seed is printed (shown when the test fails)."""
    given = _config.get("FERROCUDA_TEST_SEED")
    seed = given if isinstance(given, int) else secrets.randbits(32)
    print(f"random seed: {seed} (rerun with FERROCUDA_TEST_SEED={seed})")
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def cupy(gpu: None) -> Any:
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("cupy sees no CUDA device")
    except Exception as e:  # noqa: BLE001  # pragma: no cover - depends on the machine
        pytest.skip(f"cupy cannot use the GPU: {e}")
    return cp


@pytest.fixture(scope="session")
def torch(gpu: None) -> Any:
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():
        pytest.skip("torch.cuda is not available")
    return t


@pytest.fixture(scope="session")
def numba_cuda(gpu: None) -> Any:
    try:
        from numba import cuda
    except Exception as e:  # noqa: BLE001 - ImportError, or numba refusing this NumPy version
        pytest.skip(f"numba.cuda cannot be imported: {e}")
    try:
        if not cuda.is_available():
            pytest.skip("numba.cuda is not available")
        # Numba releases lag NumPy's: a round trip shows whether this pair works.
        cuda.to_device(np.arange(3.0)).copy_to_host()
    except Exception as e:  # noqa: BLE001  # pragma: no cover - depends on the machine
        pytest.skip(f"numba.cuda cannot use the GPU with NumPy {np.__version__}: {e!r}")
    return cuda


@pytest.fixture(scope="session")
def jax(gpu: None) -> Any:
    j = pytest.importorskip("jax")
    try:
        j.config.update("jax_enable_x64", True)
        if not j.devices("gpu"):
            pytest.skip("jax sees no GPU")
    except Exception as e:  # noqa: BLE001 - whatever JAX raises, it cannot use the GPU
        pytest.skip(f"jax cannot use the GPU: {e}")
    return j


# ---- pure-Python producers (no GPU needed) --------------------------------------------

#: A plausible device address (aligned to 256 bytes).
PTR = 0x7F00_0000_1000


class CAIProducer:
    """An object exporting a hand-made ``__cuda_array_interface__``."""

    def __init__(self, iface: Any) -> None:
        self._iface = iface

    @property
    def __cuda_array_interface__(self) -> Any:
        return self._iface


class SyclProducer:
    """An object exporting a hand-made ``__sycl_usm_array_interface__``."""

    def __init__(self, iface: Any) -> None:
        self._iface = iface

    @property
    def __sycl_usm_array_interface__(self) -> Any:
        return self._iface


def cai(
    shape: Any = (4,),
    typestr: Any = "<f4",
    ptr: Any = PTR,
    readonly: Any = False,
    **extra: Any,
) -> dict[str, Any]:
    """A valid CAI v3 dict, with keys overridable through ``extra``."""
    d: dict[str, Any] = {
        "shape": shape,
        "typestr": typestr,
        "data": (ptr, readonly),
        "version": 3,
        "strides": None,
        "descr": [("", typestr)] if isinstance(typestr, str) else None,
        "stream": None,
    }
    d.update(extra)
    return d


def write_bundled_parts(directory: Any, manifest: dict[str, Any]) -> None:
    """Writes the files of the bundled module's parts (the kernels built for other
    architectures: each part's PTX and cubins) that ``manifest`` names into ``directory``,
    as ``ferrocuda-builder`` writes them beside the manifest."""
    from pathlib import Path

    for part in manifest.get("parts", {}).values():
        for name in [part["ptx"], *part.get("cubins", {}).values()]:
            data = ferrocuda._ferrocuda._bundled_part_file(name)
            assert data is not None, name
            (Path(directory) / name).write_bytes(data)


def run_child(
    script: str, *args: str, stdin: str | None = None, timeout: float = 600
) -> dict[str, Any]:
    """Runs ``script`` in a fresh Python (a test whose kernel traps on purpose: a trap ends
    the process's CUDA context) and returns the JSON object of its ``REPORT {...}`` line, with
    its whole ``stdout`` added; fails with the child's output when there is no such line."""
    r = subprocess.run(
        [sys.executable, "-c", script, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    line = next((x for x in r.stdout.splitlines() if x.startswith("REPORT ")), None)
    assert line is not None, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    out: dict[str, Any] = json.loads(line[len("REPORT ") :])
    out["stdout"] = r.stdout
    return out


def assert_elements(ok: Any, got: Any, want: Any, tol: Any, what: str) -> None:
    """Fails unless every element of the boolean tensor ``ok`` is true, saying how many are
    not and the first one: its index, ``got``, ``want`` ± ``tol`` there."""
    if not bool(ok.all()):
        at = tuple((~ok).nonzero()[0].tolist())
        raise AssertionError(
            f"{what}: {int((~ok).sum())} of {ok.numel()} wrong; first at {at}: "
            f"got {got[at].item()}, want {want[at].item()} ± {tol[at].item()}"
        )


def bundled_without_parts(directory: Any) -> Any:
    """The bundled module without its parts (the kernels built for sm_90a), loaded from
    ``directory``: each family keeps only its portable kernels, so a call runs exactly them,
    on any device (the way to test an H100's fallback kernels on an H100)."""
    return ferrocuda._bundled_without_parts(directory)


#: Marks tests of the behaviour without a CUDA driver (skipped where one is present).
NO_DRIVER = pytest.mark.skipif(
    ferrocuda.driver_available(),
    reason="a CUDA driver is present: no-driver behaviour not testable",
)


def cai_array(shape: Any = (4,), typestr: str = "<f4", ptr: int = PTR, **kw: Any) -> CAIProducer:
    """A CAI v3 producer of a made-up device array (the pointer is never dereferenced here)."""
    return CAIProducer(cai(shape=shape, typestr=typestr, ptr=ptr, **kw))


@pytest.fixture(scope="session")
def own_crate(tmp_path_factory: Any) -> Path:
    """A kernel crate of one's own: ``$FERROCUDA_OWN_CRATE`` (the GPU bundle scaffolds and
    builds one), else one made by ``ferrocuda new`` here (skipped without cargo); both with
    the tensor-core kernels of ``builder/tests/fixtures/own-tensor-cores.rs`` added as its
    module ``tensor_cores``."""
    given = _config.path("FERROCUDA_OWN_CRATE")
    if given:
        return given
    if shutil.which("cargo") is None:
        pytest.skip("no FERROCUDA_OWN_CRATE and no cargo to build a crate with")
    tmp = tmp_path_factory.mktemp("own")
    subprocess.run([sys.executable, "-m", "ferrocuda", "new", "my_kernels"], cwd=tmp, check=True)
    crate = tmp / "my_kernels"
    fixture = Path(__file__).resolve().parents[2] / "builder/tests/fixtures/own-tensor-cores.rs"
    if fixture.exists():
        shutil.copy(fixture, crate / "src" / "tensor_cores.rs")
        with open(crate / "src" / "lib.rs", "a") as f:
            f.write("\npub mod tensor_cores;\n")
    return crate
