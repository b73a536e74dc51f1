"""Launch configuration from Python, without a GPU: the forms ``grid``/``block``/``shared_mem``
take (ints, tuples of 1 to 3 ints, NumPy integers) as keywords and Numba-style
``launcher[grid, block, stream, shared_mem]``, and the refusal of every bad one before anything
else happens. Limits that depend on the kernel and the device are checked at launch (see
``test_gpu_launch.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ferrocuda

add = ferrocuda.kernels.add


@pytest.mark.parametrize(
    "config,grid,block,shared",
    [
        ((4, 256), "[4, 1, 1]", "[256, 1, 1]", 0),
        (((4,), (256,)), "[4, 1, 1]", "[256, 1, 1]", 0),
        (((2, 3), (32, 8)), "[2, 3, 1]", "[32, 8, 1]", 0),
        (((2, 3, 4), [8, 4, 2]), "[2, 3, 4]", "[8, 4, 2]", 0),
        ((np.int64(5), np.uint16(64)), "[5, 1, 1]", "[64, 1, 1]", 0),
        ((1, 32, None, 65536), "[1, 1, 1]", "[32, 1, 1]", 65536),
        ((1, 32, 1, np.int32(1024)), "[1, 1, 1]", "[32, 1, 1]", 1024),
        ((2**31 - 1, 1024, None, None), "[2147483647, 1, 1]", "[1024, 1, 1]", 0),
    ],
)
def test_configuration_forms(config: Any, grid: str, block: str, shared: int) -> None:
    r = repr(add[config])
    assert f"grid=Some({grid})" in r and f"block=Some({block})" in r, r
    assert f"shared_mem={shared}" in r, r


@pytest.mark.parametrize(
    "config,exc,fragment",
    [
        ((0, 256), ValueError, "argument `grid`"),
        ((1, (32, 0)), ValueError, "argument `block`"),
        (((1, 2, 3, 4), 32), ValueError, "argument `grid`"),
        (((), 32), ValueError, "argument `grid`"),
        ((True, 32), ValueError, "argument `grid`"),
        ((1, (32, False)), ValueError, "argument `block`"),
        ((1.5, 32), ValueError, "argument `grid`"),
        (("4", 32), ValueError, "argument `grid`"),
        ((2**32, 32), ValueError, "argument `grid`"),
        ((-1, 32), ValueError, "argument `grid`"),
        ((1, 32, None, -1), ValueError, "argument `shared_mem`"),
        ((1, 32, None, 2**32), ValueError, "argument `shared_mem`"),
        ((1, 32, None, True), ValueError, "argument `shared_mem`"),
        ((1, 32, None, 4.0), ValueError, "argument `shared_mem`"),
        ((1, 32, 0), ValueError, "stream"),
        ((1,), TypeError, "2 to 4 items"),
        ((1, 2, 3, 4, 5), TypeError, "2 to 4 items"),
    ],
)
def test_bad_configurations_are_refused(config: Any, exc: Any, fragment: str) -> None:
    with pytest.raises(exc, match=fragment):
        add[config]


def test_single_item_configuration_is_refused() -> None:
    with pytest.raises(TypeError, match="launch configuration must be"):
        add[256]


@pytest.mark.parametrize(
    "kw,fragment",
    [
        ({"grid": 0}, "argument `grid`"),
        ({"grid": (1, 0)}, "argument `grid`"),
        ({"block": (1, 2, 3, 4)}, "argument `block`"),
        ({"block": "256"}, "argument `block`"),
        ({"shared_mem": -4}, "argument `shared_mem`"),
        ({"shared_mem": 1.0}, "argument `shared_mem`"),
        ({"shared_mem": False}, "argument `shared_mem`"),
    ],
)
def test_bad_keywords_are_refused_before_the_arguments(kw: Any, fragment: str) -> None:
    # The arguments are not even arrays: the options are read first.
    with pytest.raises(ValueError, match=fragment):
        add(1, 2, 3, **kw)


def test_shared_mem_keyword_reaches_the_launch() -> None:
    # A valid shared_mem keyword is accepted; the call then fails on its arguments, not on it.
    with pytest.raises(TypeError, match="argument `a`"):
        add(1, 2, 3, shared_mem=65536, grid=(1, 1), block=(32, 1, 1))


def test_launch_declarations_in_docs() -> None:
    k = ferrocuda.kernels
    assert "exactly (32, 8, 1)" in k.index_grid_2d.__doc__
    assert "2-D over the largest array" in k.index_grid_2d.__doc__
    assert "at most 128 threads" in k.index_grid_3d.__doc__
    assert "holds float32 (4 bytes each)" in k.shared_reverse_f32.__doc__
    assert "shared_mem=None" in add.__doc__


def test_half_kernels_are_in_the_add_and_saxpy_families() -> None:
    names = {kk.name for kk in ferrocuda.kernels.add.kernels}
    assert {"add_f16", "add_bf16"} <= names
    params = {kk.name: kk.params for kk in ferrocuda.kernels.saxpy.kernels}
    assert params["saxpy_bf16"][0] == ("alpha", "scalar", "bfloat16", 0, False)
    assert params["saxpy_f16"][1] == ("x", "slice", "float16", 1, False)


def test_elementwise_families_have_strided_variants() -> None:
    """Each element-wise family holds its contiguous kernels and their 1-D to 4-D strided
    variants (views of any strides); the docstrings say how the launcher chooses."""
    k = ferrocuda.kernels
    for fam, contiguous in (
        ("add", "add_f32"),
        ("saxpy", "saxpy_f64"),
        ("gelu", "gelu_f16"),
        ("gelu_tanh", "gelu_tanh_bf16"),
        ("silu", "silu_f32"),
        ("axpy", "axpy_f16"),
    ):
        names = {kk.name for kk in getattr(k, fam).kernels}
        variants = [f"{contiguous}_{n}d" for n in range(1, 5)]
        assert {contiguous, *variants} <= names, fam
        assert "ranks and layouts" in getattr(k, fam).__doc__
        assert ", ".join(f"``{v}``" for v in variants) in getattr(k, contiguous).__doc__
        params = getattr(k, variants[1]).params
        assert params[-1][1:] == ("view", params[-1][2], 2, True), params
    assert "layout variants" not in k.sum_f32.__doc__
