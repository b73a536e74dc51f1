"""``require`` rules on the axes of C-contiguous arrays that a kernel sees flat (GPU; skipped
without one).

``tests/device-kernels``' ``flat_row_sums(x: Slice<f32>, out: SliceMut<f32>, cols: u32)``
declares ``require(x.shape[1] == cols)`` and ``require(out.len() == x.shape[0])``: the kernel
sees ``x`` as one run of elements, the launcher checks the rules against the shape of the
array passed. Sums are exact (integer values, every partial sum representable) and compared
with NumPy's; ``out`` is poisoned, and a refused call leaves it untouched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import device_kernels
import ferrocuda

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def mod(gpu: None) -> Any:
    path: Path | None = device_kernels.manifest()
    if path is None:
        pytest.skip(
            "the device test kernels are not built (bundle them with scripts/gpu-bundle.sh)"
        )
    return ferrocuda.load(path)


def _device(backend: str, a: np.ndarray, request: pytest.FixtureRequest) -> Any:
    if backend == "cupy":
        return request.getfixturevalue("cupy").asarray(a)
    return ferrocuda.DeviceArray.from_numpy(a)


def _host(backend: str, a: Any) -> np.ndarray:
    return a.get() if backend == "cupy" else a.to_numpy()


@pytest.mark.parametrize("backend", ["DeviceArray", "cupy"])
@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (100, 4), (3, 1000), (1000, 5)])
def test_row_sums_of_a_2d_array_seen_flat(
    mod: Any,
    rng: np.random.Generator,
    request: pytest.FixtureRequest,
    backend: str,
    shape: tuple[int, int],
) -> None:
    rows, cols = shape
    x = rng.integers(-1000, 1001, size=shape).astype(np.float32)
    dx = _device(backend, x, request)
    out = _device(backend, np.full(rows, np.nan, np.float32), request)
    mod.flat_row_sums(dx, out, cols)
    np.testing.assert_array_equal(_host(backend, out), x.sum(axis=1, dtype=np.float64))

    poisoned = np.full(rows, -7.0, np.float32)
    out = _device(backend, poisoned, request)
    # cols is not the row length: refused, naming x and the rule, before any launch.
    for bad in (cols + 1, cols * rows + 1):
        with pytest.raises(ValueError, match=r"argument `x`.*requires x\.shape\[1\] == cols"):
            mod.flat_row_sums(dx, out, bad)
    # The same elements as a 1-D array: x has no axis 1.
    flat = _device(backend, x.reshape(-1), request)
    with pytest.raises(ValueError, match=r"argument `x`.*reads axis 1 of `x`"):
        mod.flat_row_sums(flat, out, cols)
    # out of another length.
    longer = _device(backend, np.zeros(rows + 1, np.float32), request)
    with pytest.raises(ValueError, match=r"argument `out`.*one sum per row of x"):
        mod.flat_row_sums(dx, longer, cols)
    np.testing.assert_array_equal(_host(backend, out), poisoned)


def test_rows_of_a_3d_array(mod: Any, rng: np.random.Generator) -> None:
    """Axis 1 of a 3-D array is its second extent; the kernel sums runs of ``cols``."""
    x = rng.integers(-1000, 1001, size=(4, 6, 5)).astype(np.float32)
    out = ferrocuda.DeviceArray.from_numpy(np.full(4, np.nan, np.float32))
    with pytest.raises(ValueError, match=r"requires x\.shape\[1\] == cols"):
        mod.flat_row_sums(ferrocuda.DeviceArray.from_numpy(x), out, 30)
    # With cols = 6 and out of 4: rows of 6 elements, the first 4 of the 20 runs.
    mod.flat_row_sums(ferrocuda.DeviceArray.from_numpy(x), out, 6)
    runs = x.reshape(-1, 6)[:4].sum(axis=1, dtype=np.float64)
    np.testing.assert_array_equal(out.to_numpy(), runs)
