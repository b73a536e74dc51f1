"""Inline kernels on the GPU: kernels written in Python strings (``inline_kernels.py``), compiled
with ``ferrocuda.inline`` / ``ferrocuda.inline_kernel`` and run on CuPy arrays, checked element
by element against NumPy (GPU; skipped without one).

On the GPU machine the kernels come from the inline cache that ``scripts/gpu-bundle.sh`` builds
(``$FERROCUDA_INLINE_CACHE``, set by ``run.sh``): a cache hit needs no cargo. Without that cache
and without cargo the tests skip, saying so.
"""

from __future__ import annotations

import shutil
import textwrap
from typing import Any

import numpy as np
import pytest

import ferrocuda
from inline_kernels import AXPBY, SCALE, readme_blocks

pytestmark = pytest.mark.gpu


def compile_or_skip(source: str) -> Any:
    try:
        return ferrocuda.inline(source, progress=False)
    except ferrocuda.BuildError as e:
        if shutil.which("cargo") is None:
            pytest.skip(f"the inline cache lacks this kernel and there is no cargo: {e}")
        raise


@pytest.fixture(scope="module")
def scale(gpu: None) -> Any:
    return compile_or_skip(SCALE)


@pytest.fixture(scope="module")
def axpby(gpu: None) -> Any:
    return compile_or_skip(AXPBY)


@pytest.mark.parametrize("n", [1, 1000, 1 << 20, (1 << 20) + 3])
def test_scale_matches_numpy(scale: Any, cupy: Any, n: int) -> None:
    cp = cupy
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.uniform(-4, 4))
    dx = cp.asarray(x)
    out = cp.full(n, cp.nan, dtype=cp.float32)  # poisoned: every element must be written
    scale.scale(dx, out, float(a))
    np.testing.assert_array_equal(cp.asnumpy(out), a * x)


def test_scale_with_a_launch_configuration_and_a_shorter_input(scale: Any, cupy: Any) -> None:
    cp = cupy
    rng = np.random.default_rng(7)
    x = rng.standard_normal(500).astype(np.float32)
    out = cp.full(1000, -7.0, dtype=cp.float32)
    # `x.get(i)` is None past x's end: those elements keep their value.
    scale.scale[3, 64](cp.asarray(x), out, 0.5)
    got = cp.asnumpy(out)
    np.testing.assert_array_equal(got[:500], np.float32(0.5) * x)
    np.testing.assert_array_equal(got[500:], np.full(500, -7.0, np.float32))


def test_scale_checks_its_arguments(scale: Any, cupy: Any) -> None:
    cp = cupy
    with pytest.raises(TypeError, match="out"):
        scale.scale(cp.ones(4, cp.float32), cp.ones(4, cp.float64), 1.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_generic_axpby_matches_numpy(axpby: Any, cupy: Any, dtype: Any) -> None:
    cp = cupy
    rng = np.random.default_rng(11)
    n = 123_457
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    a, b = dtype(1.75), dtype(-0.3)
    out = cp.full(n, cp.nan, dtype=dtype)
    axpby.axpby(float(a), cp.asarray(x), float(b), cp.asarray(y), out)
    # Two products and a sum, each rounded (fp_contract off): NumPy's order of operations.
    np.testing.assert_array_equal(cp.asnumpy(out), a * x + b * y)
    with pytest.raises(ValueError, match="shape"):
        axpby.axpby(1.0, cp.ones(4, dtype), 1.0, cp.ones(5, dtype), cp.ones(4, dtype))


def test_the_decorator_runs_the_same_kernel(axpby: Any, cupy: Any) -> None:
    cp = cupy
    doc = textwrap.indent(AXPBY, "    ")

    def axpby_fn() -> None: ...

    axpby_fn.__name__ = "axpby"
    axpby_fn.__doc__ = doc
    try:
        fam = ferrocuda.inline_kernel(progress=False)(axpby_fn)
    except ferrocuda.BuildError as e:
        if shutil.which("cargo") is None:
            pytest.skip(f"the inline cache lacks this kernel and there is no cargo: {e}")
        raise
    x = cp.arange(1000, dtype=cp.float64)
    out = cp.empty_like(x)
    fam(2.0, x, 3.0, x, out)
    np.testing.assert_array_equal(cp.asnumpy(out), 5.0 * np.arange(1000, dtype=np.float64))


def test_the_readme_example_runs(gpu: None, cupy: Any) -> None:
    blocks = readme_blocks()
    ns: dict[str, Any] = {}
    try:
        exec(compile(blocks[0], "README.md inline block 0", "exec"), ns)
    except ferrocuda.BuildError as e:
        if shutil.which("cargo") is None:
            pytest.skip(f"the inline cache lacks the README's kernels and there is no cargo: {e}")
        raise
    exec(compile(blocks[1], "README.md inline block 1", "exec"), ns)
