"""The gallery kernels without a GPU: their signatures (launcher-provided workspaces are not
arguments), their argument checks (refused before any driver call, naming the argument), and
the histogram's binning rule — the kernel's arithmetic mirrored in NumPy — against
``numpy.histogram`` on adversarial data.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

import ferrocuda

K = ferrocuda.kernels


def test_workspaces_are_not_arguments() -> None:
    names = [p[0] for p in K.cumsum_f32.params]
    assert names == ["x", "out"]
    assert [p[0] for p in K.sum_f32.params] == ["x", "out"]
    manifest = json.loads(K.module.manifest)
    by_name = {k["name"]: k for k in manifest["kernels"]}
    assert [p["kind"] for p in by_name["sum_f32"]["params"]] == [
        "slice",
        "slice",
        "scratch",
        "scratch",
    ]
    assert by_name["histogram_u8"]["zero"] == [1]
    assert "workspace ``status``" in K.cumsum.__doc__
    # The scans' statuses persist between launches (tagged by launch: no zero-fill before
    # each), and so do the reductions' ticket (set back to zero by each launch's last block)
    # and partials (written before they are read), the ticket first; so do the cooperative
    # normalize's grid barrier (each barrier leaves its counter's low bits as it found them)
    # and partials, the barrier first: the launcher lays the workspaces out in parameter
    # order, the first at offset 0 whatever the grid.
    for name in ("cumsum_f32", "cumsum_i32_i64", "cumsum_exclusive_f64"):
        assert [w.get("persist") for w in by_name[name]["scratch"]] == [True], name
    for name in ("sum_f32", "sum_i32", "min_f64", "max_i64"):
        assert [w.get("persist") for w in by_name[name]["scratch"]] == [True, True], name
        params = by_name[name]["params"]
        # The launcher lays the workspaces out in this order: the ticket at offset 0 whatever
        # the grid.
        assert [params[w["param"]]["name"] for w in by_name[name]["scratch"]] == [
            "ticket",
            "partials",
        ], name
    for name in ("normalize_f32", "normalize_f64"):
        assert [w.get("persist") for w in by_name[name]["scratch"]] == [True, True], name
        names = [p["name"] for p in by_name[name]["params"]]
        assert names.index("bar") < names.index("partials"), names
    assert "kept between the kernel's launches on a stream" in K.cumsum_f32.__doc__
    assert "kept between the kernel's launches on a stream" in K.sum_f32.__doc__
    assert "kept between the kernel's launches on a stream" in K.normalize_f32.__doc__
    assert "kept between" not in K.div_by_f32.__doc__
    assert "``bins`` is zero-filled" in K.histogram.__doc__
    assert "Requires ``a.shape[1] == b.shape[0]``" in K.matmul.__doc__


def test_launch_declarations() -> None:
    by_name = {k["name"]: k for k in json.loads(K.module.manifest)["kernels"]}
    # The scans run blocks of exactly 128 threads (32-bit sums) or 256 (64-bit sums); matmul
    # at most 256 (128: one group of 128×128 tiles; others smaller: a simple loop), with the
    # dynamic shared memory of two such groups' rings; `min_blocks = 1` for ptxas's schedule
    # of the loop (kernels/src/matmul/mod.rs).
    for name in ("cumsum_f32", "cumsum_i32", "cumsum_exclusive_f32", "cumsum_exclusive_i32"):
        assert by_name[name]["launch"] == {"block": [128, 1, 1], "min_blocks": 6}, name
    for name in ("cumsum_i32_i64", "cumsum_exclusive_i64"):
        assert by_name[name]["launch"] == {"block": [256, 1, 1]}, name
    for name in ("cumsum_f64", "cumsum_exclusive_f64"):
        assert by_name[name]["launch"] == {"block": [256, 1, 1], "min_blocks": 5}, name
    assert by_name["matmul_f32"]["launch"] == {
        "max_threads": 256,
        "min_blocks": 1,
        "dynamic_shared": "uint8",
        "shared_bytes": 2 * 3 * 8 * 2 * (128 + 4) * 4,
    }
    assert "exactly (128, 1, 1)" in K.cumsum_f32.__doc__
    assert "exactly (256, 1, 1)" in K.cumsum_i64.__doc__
    assert "at least 5 resident blocks" in K.cumsum_f64.__doc__
    assert "at least 6 resident blocks" in K.cumsum_f32.__doc__
    assert "at most 256 threads" in K.matmul_f32.__doc__
    # The softmaxes give each row a warp (up to 1024 elements) or a block: their automatic grid
    # follows the rows.
    for name in (
        "softmax_f32",
        "softmax_f64",
        "softmax_f16",
        "softmax_bf16",
        "log_softmax_f32",
        "log_softmax_f64",
        "log_softmax_f16",
        "log_softmax_bf16",
    ):
        assert by_name[name]["launch"] == {"grid_rows": True}, name
        assert by_name[name]["items_per_thread"] == 32, name
    assert "a warp for rows of at most 1024 elements" in K.softmax_f32.__doc__
    # The activations: a vector per thread for float32 (memory-bound), four for the half types
    # (instruction-bound: the thread's setup is amortized over 32 elements).
    for fam in ("gelu", "gelu_tanh", "silu"):
        assert by_name[f"{fam}_f32"]["items_per_thread"] == 4, fam
        assert by_name[f"{fam}_f16"]["items_per_thread"] == 32, fam
        assert by_name[f"{fam}_bf16"]["items_per_thread"] == 32, fam
    # normalize is cooperative (one resident wave: its blocks wait for each other at a grid
    # barrier); its partial sums and its barrier are workspaces, not arguments.
    for name in ("normalize_f32", "normalize_f64"):
        assert by_name[name]["launch"] == {"cooperative": True}, name
        assert [p["kind"] for p in by_name[name]["params"]] == [
            "slice",
            "slice",
            "scratch",
            "scratch",
        ], name
    assert [p[0] for p in K.normalize_f32.params] == ["x", "out"]
    assert "Launched cooperatively" in K.normalize_f32.__doc__
    assert "workspace ``bar``" in K.normalize_f32.__doc__
    assert [p[0] for p in K.div_by_f32.params] == ["x", "d", "out"]
    assert "launch" not in by_name["div_by_f32"]
    # A manifest with a cooperative kernel is format 3 (older readers refuse it).
    assert json.loads(K.module.manifest)["format"] == 3
    # Kernels whose schedules work for any block declare nothing.
    for name in ("sum_f32", "histogram_u8", "stencil5_f32", "gelu_bf16"):
        assert "launch" not in by_name[name], name


def test_gallery_families() -> None:
    want = {
        "sum",
        "min",
        "max",
        "sum_rows",
        "histogram",
        "softmax",
        "log_softmax",
        "matmul",
        "stencil5",
        "cumsum",
        "cumsum_exclusive",
        "gelu",
        "gelu_tanh",
        "silu",
        "axpy",
        "normalize",
        "div_by",
    }
    assert want <= set(K.families)


def host(shape: Any, dtype: Any, fill: float = 0) -> np.ndarray:
    return np.full(shape, fill, dtype=dtype)


def heads(hk: int, hv: int) -> None:
    """``attention_f16`` of a ``q`` of 6 heads with ``k`` of ``hk`` and ``v`` of ``hv``."""
    q, out = host((1, 6, 4, 8), np.float16), host((1, 6, 4, 8), np.float16)
    K.attention_f16(
        q, host((1, hk, 5, 8), np.float16), host((1, hv, 5, 8), np.float16), out, 1.0, 0
    )


@pytest.mark.parametrize(
    "call, arg, text",
    [
        (lambda: K.histogram(host(5, np.uint8), host(0, np.int64), 0.0, 1.0), "bins", "bin count"),
        (lambda: K.histogram(host(5, np.uint8), host(4, np.int64), 1.0, 1.0), "lo", "lo < hi"),
        (lambda: K.histogram(host(5, np.float32), host(4, np.int64), 2.0, 1.0), "lo", "lo < hi"),
        (lambda: K.histogram(host(5, np.int32), host(4, np.int64), math.nan, 1.0), "lo", "lo < hi"),
        (lambda: K.histogram(host(5, np.int32), host(4, np.int64), 0.0, math.inf), "hi", "finite"),
        (
            lambda: K.matmul(
                host((4, 3), np.float32),
                host((5, 6), np.float32),
                host((4, 6), np.float32),
                1.0,
                0.0,
            ),
            "a",
            "inner dimensions",
        ),
        (
            lambda: K.matmul(
                host((4, 3), np.float32),
                host((3, 6), np.float32),
                host((4, 5), np.float32),
                1.0,
                0.0,
            ),
            "c",
            "column count",
        ),
        (lambda: K.sum(host(5, np.float32), host(2, np.float32)), "out", "one result"),
        (lambda: K.min(host(0, np.float32), host(1, np.float32)), "x", "empty"),
        (
            lambda: K.sum_rows(host((3, 4), np.float32), host(4, np.float32)),
            "out",
            "one sum per row",
        ),
        (lambda: K.cumsum(host(5, np.int32), host(4, np.int32)), "out", "one sum per element"),
        # Grouped-query attention: k's heads must divide q's 6, v's be k's.
        (lambda: heads(4, 4), "k", "must be a multiple of k's"),
        (lambda: heads(3, 2), "v", "v must have k's number of heads"),
    ],
)
def test_bad_arguments_are_refused_before_the_driver(call: Any, arg: str, text: str) -> None:
    with pytest.warns(ferrocuda.PerformanceWarning), pytest.raises(ValueError) as e:
        call()
    assert f"argument `{arg}`" in str(e.value) and text in str(e.value), str(e.value)


# ---- the histogram's rule, mirrored ---------------------------------------------------------


def kernel_rule(x: np.ndarray, nbins: int, lo: float, hi: float) -> np.ndarray:
    """The bins the kernel computes (``Binner`` in kernels/src/histogram.rs), in NumPy: the
    same types, the same operations in the same order, the same estimate shortcut."""
    f32 = x.dtype == np.float32
    denom = hi - lo
    nbf = float(nbins)
    step, scale = denom / nbf, nbf / denom

    def edge(k: np.ndarray) -> np.ndarray:
        e = np.where(k >= nbins, hi, k.astype(np.float64) * step + lo)
        return e.astype(np.float32) if f32 else e

    if f32:
        lo32, hi32 = np.float32(lo), np.float32(hi)
        keep = (x >= lo32) & (x <= hi32)
        v = x[keep]
        d = (v - lo32).astype(np.float64)
    else:
        v = x.astype(np.float64)
        keep = (v >= lo) & (v <= hi)
        v = v[keep]
        d = v - lo
    est = d * scale
    floor = np.floor(est)
    margin = (est + 1.0) * 1e-14
    safe = (est - floor > margin) & (floor + 1.0 - est > margin)
    i = np.where(safe, floor, d / denom * nbf).astype(np.int64)
    i = np.minimum(i, nbins - 1)
    dec = (i > 0) & (v < edge(i))
    i = i - dec
    inc = (i + 1 < nbins) & (v >= edge(i + 1))
    i = i + inc
    return np.bincount(i, minlength=nbins).astype(np.int64)


RULE_CASES = [
    (np.float32, 256, 0.1, 0.7),
    (np.float32, 997, -1.3, 2.9),
    (np.float32, 3, -1e-3, 1e-3),
    (np.float32, 1000, 1e6, 1e6 + 100.0),  # bins of 1.6 float32 spacings
    (np.float64, 33, -3.0, 3.0),
    (np.float64, 7, 0.1, 0.3),
    (np.int32, 1000, -1000.5, 999.7),
    (np.int32, 9, -5.0, 5.0),
    (np.uint8, 256, 0.0, 256.0),
    (np.uint8, 255, 0.0, 255.0),
    (np.uint8, 10, 3.5, 200.25),
]


@pytest.mark.parametrize("dtype, nbins, lo, hi", RULE_CASES)
def test_histogram_rule_matches_numpy(dtype: Any, nbins: int, lo: float, hi: float) -> None:
    rng = np.random.default_rng(7)
    span = hi - lo
    if np.dtype(dtype).kind == "f":
        x = (lo - 0.1 * span + rng.random(200_000) * 1.2 * span).astype(dtype)
        edges = np.linspace(lo, hi, nbins + 1)
        near = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf)])
        x = np.concatenate(
            [x, near.astype(dtype), np.array([np.nan, np.inf, -np.inf, lo, hi], dtype)]
        )
    else:
        info = np.iinfo(dtype)
        x = rng.integers(
            max(info.min, math.floor(lo) - 20), min(info.max, math.ceil(hi) + 20) + 1, 100_000
        ).astype(dtype)
    got = kernel_rule(x, nbins, lo, hi)
    want = np.histogram(x, bins=nbins, range=(lo, hi))[0]
    assert (got == want).all(), np.argwhere(got != want)[:10]
