"""ferrocuda.autotune without a GPU: the candidates, configurations and keys it accepts and
refuses, the key of a call's arguments, and that tuning reaches the driver (GPU behaviour:
test_gpu_tuning.py)."""

from __future__ import annotations

from typing import Any

import pytest

import ferrocuda
from conftest import NO_DRIVER, PTR
from conftest import cai_array as _arr

K = ferrocuda.kernels


def test_candidates_are_launchers_times_configs() -> None:
    t = ferrocuda.autotune([K.add, K.add_f32], configs=[{"block": 128}, {}, {"grid": 2}])
    assert [c.describe() for c in t.candidates] == [
        "add(block=128)",
        "add()",
        "add(grid=2)",
        "add_f32(block=128)",
        "add_f32()",
        "add_f32(grid=2)",
    ]
    assert ferrocuda.autotune(K.sum).candidates[0].options == {}
    assert "3 candidates" not in repr(t) and "6 candidates" in repr(t)


@pytest.mark.parametrize(
    "launchers,configs,kw,exc,match",
    [
        (K.add, [{"threads": 4}], {}, ValueError, r"unknown configuration key\(s\) threads"),
        (K.add, [], {}, ValueError, r"configs is empty"),
        (K.add, [(1, 2)], {}, TypeError, r"a configuration is a dict, got tuple"),
        ([K.add, K.saxpy], None, {}, ValueError, r"candidates take different parameters"),
        ([K.add, len], None, {}, TypeError, r"is not a ferrocuda launcher"),
        (K.saxpy, None, {"key": ["beta"]}, ValueError, r"key names 'beta', which is not a"),
        (K.saxpy, None, {"key": "alpha"}, TypeError, r"sequence of parameter names, not a str"),
        (K.add, None, {"rounds": 0}, ValueError, r"rounds >= 1"),
        (K.add, None, {"min_time": 0.0}, ValueError, r"min_time > 0"),
    ],
)
def test_refused(launchers: Any, configs: Any, kw: Any, exc: Any, match: str) -> None:
    with pytest.raises(exc, match=match):
        ferrocuda.autotune(launchers, configs, **kw)


def test_key_describes_shapes_dtypes_strides_and_named_values() -> None:
    t = ferrocuda.autotune(K.saxpy, key=["alpha"])
    x, y = _arr((8,)), _arr((8,), ptr=PTR + 4096)
    k1 = t.key(2.0, x, y)
    assert k1 == t.key(2.0, _arr((8,), ptr=PTR + 8192), _arr((8,), ptr=PTR + 12288))
    assert k1 != t.key(3.0, x, y)  # alpha is in the key
    assert k1 != t.key(2.0, _arr((9,)), y)  # shape
    assert k1 != t.key(2.0, _arr((8,), typestr="<f8"), y)  # dtype
    assert k1 != t.key(2.0, _arr((8,), strides=(8,)), y)  # strides
    # Without key=, a scalar enters by its type only.
    u = ferrocuda.autotune(K.saxpy)
    assert u.key(2.0, x, y) == u.key(3.0, x, y) != u.key(2, x, y)
    # A key function adds its value.
    v = ferrocuda.autotune(K.saxpy, key=lambda alpha, x, y: alpha > 0)
    assert v.key(2.0, x, y) == v.key(3.0, x, y) != v.key(-1.0, x, y)


def test_call_options_that_belong_to_candidates_are_refused() -> None:
    t = ferrocuda.autotune(K.add, [{"block": 64}])
    with pytest.raises(TypeError, match=r"block belong to the candidates' configurations"):
        t(_arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192), block=32)
    with pytest.raises(TypeError, match=r"missing argument `out`"):
        t(_arr(), b=_arr(ptr=PTR + 4096))


@NO_DRIVER
def test_tuning_reaches_the_driver() -> None:
    t = ferrocuda.autotune(K.add, [{"block": 64}, {}], cache=False)
    with pytest.raises(ferrocuda.CudaError):
        t(_arr(), _arr(ptr=PTR + 4096), out=_arr(ptr=PTR + 8192))
    assert t.timings == {}


def test_cache_directory_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from ferrocuda import tuning

    monkeypatch.setenv("FERROCUDA_AUTOTUNE_CACHE", str(tmp_path / "a"))
    assert tuning._cache_dir() == tmp_path / "a"
    monkeypatch.delenv("FERROCUDA_AUTOTUNE_CACHE")
    monkeypatch.setenv("FERROCUDA_HOME", str(tmp_path / "h"))
    assert tuning._cache_dir() == tmp_path / "h" / "autotune"
    # The file is named by the tuner and its candidates: other candidates, another file.
    a = ferrocuda.autotune(K.add, [{"block": 64}])
    b = ferrocuda.autotune(K.add, [{"block": 128}])
    assert a._file is not None and b._file is not None
    assert a._file.parent == b._file.parent == tmp_path / "h" / "autotune"
    assert a._file != b._file and a._file.name.startswith("add-")
