"""Bound launches and ``is_cuda_array`` without a GPU.

``launcher.bind(...)`` runs a call's checks, so every argument error a call raises before it
needs the driver, bind raises too — the same exception with the same message (hand-made
``__cuda_array_interface__`` producers stand in for device arrays; nothing is launched).
Host arrays are refused at bind. With valid arguments, what remains is the driver: on a machine
without one, bind raises ``CudaError``, and DLPack capsules taken for it are released. The
bound launches themselves are tested on the GPU (``test_gpu_bind.py``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ferrocuda
from conftest import NO_DRIVER, PTR, CAIProducer, SyclProducer, cai
from conftest import cai_array as _arr
from test_package import FakeDLPack

K = ferrocuda.kernels


def _sycl(ptr: int, readonly: bool = False) -> dict[str, Any]:
    return {
        "shape": (4,),
        "typestr": "|f4",
        "data": (ptr, readonly),
        "version": 1,
        "strides": None,
        "offset": 0,
        "syclobj": object(),
    }


def _three(**kw: Any) -> list[CAIProducer]:
    return [_arr(ptr=PTR + i * 4096, **kw) for i in range(3)]


def _raised(f: Callable[[], Any]) -> BaseException:
    with pytest.raises(Exception) as info:
        f()
    return info.value


CASES: dict[str, Callable[[], Any]] = {
    # launcher, args, keywords
    "dtype": lambda: (
        K.add_f32,
        [_arr(typestr="<i4"), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192)],
        {},
    ),
    "no variant": lambda: (
        K.add,
        [_arr(typestr="<f4"), _arr(typestr="<i4", ptr=PTR + 4096), _arr(ptr=PTR + 8192)],
        {},
    ),
    "rank": lambda: (K.add_index_f32_3d, [_arr(shape=(4, 4))], {}),
    "shapes": lambda: (
        K.add_f32,
        [_arr(), _arr(ptr=PTR + 4096), _arr(shape=(5,), ptr=PTR + 8192)],
        {},
    ),
    "read-only output": lambda: (
        K.add,
        [_arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192, readonly=True)],
        {},
    ),
    "overlap": lambda: (K.add_f32, [_arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 4)], {}),
    "arity": lambda: (K.add, [_arr(), _arr(ptr=PTR + 4096)], {}),
    "arity kernel": lambda: (K.add_f32, [*_three(), _arr(ptr=PTR + 12288)], {}),
    "scalar type": lambda: (K.saxpy_f32, [True, _arr(), _arr(ptr=PTR + 4096)], {}),
    "scalar range": lambda: (K.saxpy_f32, [1e39, _arr(), _arr(ptr=PTR + 4096)], {}),
    "int scalar": lambda: (K.fill_slow, [_arr(), 1.0, -1], {}),
    "array for scalar": lambda: (K.saxpy_f32, _three(), {}),
    "not an array": lambda: (K.add, [_arr(), 2.0, _arr(ptr=PTR + 8192)], {}),
    "interface": lambda: (
        K.add,
        [_arr(), _arr(ptr=PTR + 4096, shape="x"), _arr(ptr=PTR + 8192)],
        {},
    ),
    "stream 0": lambda: (K.add, _three(), {"stream": 0}),
    "sync": lambda: (K.add, _three(), {"sync": "sometimes"}),
    "grid": lambda: (K.add, _three(), {"grid": 0}),
    "block": lambda: (K.add, _three(), {"block": (1, 2, 3, 4)}),
    "shared_mem": lambda: (K.add, _three(), {"shared_mem": -1}),
    "sycl read-only output": lambda: (
        K.add_f32,
        [_arr(), _arr(ptr=PTR + 4096), SyclProducer(_sycl(PTR + 8192, readonly=True))],
        {},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bind_raises_what_a_call_raises(case: str) -> None:
    launcher, args, kw = CASES[case]()
    bound = _raised(lambda: launcher.bind(*args, **kw))
    called = _raised(lambda: launcher(*args, **kw))
    assert not isinstance(called, ferrocuda.CudaError), called  # an argument error, not the driver
    assert type(bound) is type(called)
    assert str(bound) == str(called)


def test_bind_names_the_argument() -> None:
    e = _raised(
        lambda: K.add_f32.bind(_arr(), _arr(typestr="<f8", ptr=PTR + 4096), _arr(ptr=PTR + 8192))
    )
    assert isinstance(e, TypeError) and "argument `b`" in str(e), e
    e = _raised(
        lambda: K.add.bind(_arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192, readonly=True))
    )
    assert isinstance(e, ValueError) and "argument `out`" in str(e), e


@pytest.mark.parametrize("host", [np.zeros(4, np.float32), np.zeros(8, np.float32)[::2]])
def test_bind_refuses_host_arrays(host: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no PerformanceWarning: nothing is staged
        with pytest.raises(
            TypeError, match=r"argument `b`: a host array \(ndarray\) cannot be bound"
        ):
            K.add.bind(_arr(), host, _arr(ptr=PTR + 8192))
        with pytest.raises(TypeError, match=r"argument `out`: .*copy it to the device once"):
            K.add_f32.bind(_arr(), _arr(ptr=PTR + 4096), host)


@NO_DRIVER
def test_valid_arguments_reach_the_driver() -> None:
    for bind in [
        lambda: K.add.bind(*_three()),
        lambda: K.add.bind(*_three(), stream=2, sync="event", grid=1, block=128),
        lambda: K.saxpy.bind(np.float32(2), _arr(), _arr(ptr=PTR + 4096), sync=False),
        lambda: K.add_f32.bind(*_three(), check_pointers=False),
    ]:
        with pytest.raises(ferrocuda.CudaError, match="no CUDA driver"):
            bind()


@NO_DRIVER
def test_dlpack_capsules_of_a_failed_bind_are_released() -> None:
    ps = [FakeDLPack(shape=(4,), data=PTR + i * 4096) for i in range(3)]
    with pytest.raises(ferrocuda.CudaError):
        K.add.bind(*ps, stream=0x5000)
    assert [p.calls[0]["stream"] for p in ps] == [0x5000] * 3  # asked for the launch stream
    assert [p.deleted for p in ps] == [1, 1, 1]


def test_bound_launch_class() -> None:
    assert ferrocuda.BoundLaunch.__doc__ and "bind" in ferrocuda.BoundLaunch.__doc__
    assert ferrocuda.Launcher.bind.__doc__
    with pytest.raises(TypeError):
        ferrocuda.BoundLaunch()  # type: ignore[call-arg]
    assert "BoundLaunch" in ferrocuda.__all__ and "is_cuda_array" in ferrocuda.__all__


# ---- is_cuda_array ------------------------------------------------------------------------------


class _Raises:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    @property
    def __cuda_array_interface__(self) -> Any:
        raise self.exc


class _ClassAttribute:
    __cuda_array_interface__ = cai()


class _GetAttr:
    def __getattr__(self, name: str) -> Any:
        if name == "__cuda_array_interface__":
            return cai()
        raise AttributeError(name)


@pytest.mark.parametrize(
    "obj,expected",
    [
        (_arr(), True),
        (CAIProducer("not even a dict"), True),  # the predicate does not validate
        (_ClassAttribute(), True),
        (_GetAttr(), True),
        (ferrocuda.as_cuda_array(_arr(), sync=False), True),
        (_Raises(AttributeError("not on the GPU")), False),  # torch's CPU tensors
        (FakeDLPack(shape=(4,)), False),  # DLPack only: not a CUDA array, as in Numba
        (SyclProducer(_sycl(PTR)), False),
        (np.zeros(3), False),
        (3.0, False),
        (None, False),
        (ferrocuda.kernels.add, False),
    ],
    ids=lambda v: type(v).__name__,
)
def test_is_cuda_array(obj: Any, expected: bool) -> None:
    assert ferrocuda.is_cuda_array(obj) is expected
    assert ferrocuda.is_cuda_array(obj) is hasattr(obj, "__cuda_array_interface__")


def test_is_cuda_array_propagates_other_errors_like_hasattr() -> None:
    # torch raises RuntimeError for a CUDA tensor that requires grad; hasattr (and Numba's
    # is_cuda_array) let it through.
    with pytest.raises(RuntimeError, match=re.escape("requires grad")):
        ferrocuda.is_cuda_array(_Raises(RuntimeError("requires grad")))
    with pytest.raises(TypeError):
        ferrocuda.is_cuda_array()  # type: ignore[call-arg]
