"""Array libraries behind one small interface, so that one conformance suite runs on each
(CuPy, PyTorch, Numba, ferrocuda's DeviceArray, JAX, and DLPack-only wrappers of PyTorch and
JAX arrays)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ferrocuda


class DLPackOnly:
    """Hides every protocol of ``x`` but DLPack, as a DLPack-only producer (JAX-style)."""

    def __init__(self, x: Any) -> None:
        self.x = x

    def __dlpack__(self, **kw: Any) -> Any:
        return self.x.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.x.__dlpack_device__()


class WithStream:
    """Exports ``x``'s CUDA Array Interface with ``stream`` set (as CuPy does for the stream
    current when the interface is read)."""

    def __init__(self, x: Any, stream: int | None) -> None:
        self.x = x
        self.stream = stream

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        d = dict(self.x.__cuda_array_interface__)
        d["version"] = 3
        d["stream"] = self.stream
        return d


def poison_value(dtype: Any) -> Any:
    dt = np.dtype(dtype)
    return np.nan if dt.kind == "f" else np.iinfo(dt).min + 7


class Backend:
    """One array library."""

    name = "?"
    writable = True
    negative_strides = True
    views = True

    def asarray(self, x: np.ndarray) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_numpy(self, a: Any) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def poisoned(self, shape: Any, dtype: Any) -> Any:
        return self.asarray(np.full(shape, poison_value(dtype), dtype=dtype))

    def arg(self, a: Any) -> Any:
        """What is passed to the launcher (the array itself, or a wrapper)."""
        return a

    def synchronize(self) -> None:
        ferrocuda.synchronize()


class CupyBackend(Backend):
    name = "cupy"

    def __init__(self, cp: Any) -> None:
        self.cp = cp

    def asarray(self, x: np.ndarray) -> Any:
        return self.cp.asarray(x)

    def to_numpy(self, a: Any) -> np.ndarray:
        return self.cp.asnumpy(a)

    def synchronize(self) -> None:
        self.cp.cuda.Device().synchronize()


class TorchBackend(Backend):
    name = "torch"
    negative_strides = False  # torch has no negative strides

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def asarray(self, x: np.ndarray) -> Any:
        return self.torch.as_tensor(np.ascontiguousarray(x), device="cuda")

    def to_numpy(self, a: Any) -> np.ndarray:
        return a.cpu().numpy()

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()


class TorchDLPackBackend(TorchBackend):
    name = "torch-dlpack"

    def arg(self, a: Any) -> Any:
        return DLPackOnly(a)


class NumbaBackend(Backend):
    name = "numba"

    def __init__(self, cuda: Any) -> None:
        self.cuda = cuda

    def asarray(self, x: np.ndarray) -> Any:
        return self.cuda.to_device(np.ascontiguousarray(x))

    def to_numpy(self, a: Any) -> np.ndarray:
        return a.copy_to_host()

    def synchronize(self) -> None:
        self.cuda.synchronize()


class FerrocudaBackend(Backend):
    name = "ferrocuda"
    views = False  # DeviceArray has no slicing
    negative_strides = False

    def asarray(self, x: np.ndarray) -> Any:
        return ferrocuda.DeviceArray.from_numpy(x)

    def to_numpy(self, a: Any) -> np.ndarray:
        return a.to_numpy()


class JaxBackend(Backend):
    """JAX arrays are immutable: read-only inputs only (exported through the CAI, v2)."""

    name = "jax"
    writable = False
    views = False
    negative_strides = False

    def __init__(self, jax: Any) -> None:
        self.jax = jax
        self.jnp = jax.numpy

    def asarray(self, x: np.ndarray) -> Any:
        a = self.jnp.asarray(x)
        a.block_until_ready()
        return a

    def to_numpy(self, a: Any) -> np.ndarray:
        return np.asarray(a)


class JaxDLPackBackend(JaxBackend):
    """JAX arrays seen through DLPack only (``__dlpack__(stream=...)``)."""

    name = "jax-dlpack"

    def arg(self, a: Any) -> Any:
        return DLPackOnly(a)


#: name -> (fixture the backend needs, factory)
BACKENDS: dict[str, Any] = {
    "cupy": ("cupy", CupyBackend),
    "torch": ("torch", TorchBackend),
    "torch-dlpack": ("torch", TorchDLPackBackend),
    "numba": ("numba_cuda", NumbaBackend),
    "ferrocuda": ("gpu", lambda _: FerrocudaBackend()),
    "jax": ("jax", JaxBackend),
    "jax-dlpack": ("jax", JaxDLPackBackend),
}


def make_backend(request: Any, name: str) -> Backend:
    fixture, factory = BACKENDS[name]
    lib = request.getfixturevalue(fixture)
    b: Backend = factory(lib)
    return b


def require(cond: bool, why: str) -> None:
    if not cond:
        pytest.skip(why)


Check = Callable[[np.ndarray, np.ndarray], None]
