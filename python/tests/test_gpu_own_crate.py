"""A kernel crate made by ``ferrocuda new``, loaded with ``ferrocuda.load(crate_dir)`` and run
on CuPy arrays, torch tensors and NumPy host arrays (GPU; skipped without one).

The crate comes from ``$FERROCUDA_OWN_CRATE`` — ``scripts/gpu-bundle.sh`` scaffolds and builds
it on the build machine, so on the GPU machine ``load`` finds it current in the build cache
and runs no cargo — or, without that variable, is scaffolded and built here (needs cargo).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ferrocuda

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def crate(own_crate: Path) -> Path:
    return own_crate


@pytest.fixture(scope="module")
def mod(crate: Path, gpu: None) -> Any:
    return ferrocuda.load(crate)


def test_the_family_picks_the_instance_by_dtype(mod: Any, cupy: Any) -> None:
    cp = cupy
    for dtype in (cp.float32, cp.float64):
        x = cp.arange(1 << 20, dtype=dtype)
        y = cp.full_like(x, -1)
        mod.scale(2.5, x, y)
        cp.testing.assert_array_equal(y, 2.5 * x)
    # A kernel by name, with a grid and block of the caller's.
    x = cp.arange(1000, dtype=cp.float64)
    y = cp.empty_like(x)
    mod.scale_f64[7, 64](0.5, x, y)
    cp.testing.assert_array_equal(y, 0.5 * x)
    with pytest.raises(TypeError, match="y"):
        mod.scale_f32(1.0, cp.ones(4, cp.float32), cp.ones(4, cp.float64))
    with pytest.raises(ValueError, match="shape"):
        mod.scale(1.0, cp.ones(4, cp.float32), cp.ones(5, cp.float32))


def test_on_torch_tensors(mod: Any, torch: Any) -> None:
    x = torch.randn(1 << 16, device="cuda", dtype=torch.float64)
    y = torch.empty_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        mod.scale(3.0, x, y)  # on torch's current stream, s
    s.synchronize()
    assert torch.equal(y, 3.0 * x)


def test_on_host_arrays(mod: Any) -> None:
    x = np.arange(100, dtype=np.float32)
    y = np.zeros_like(x)
    with pytest.warns(ferrocuda.PerformanceWarning):
        mod.scale(4.0, x, y)
    np.testing.assert_array_equal(y, 4.0 * x)
