"""Stub of ``ferrocuda.jax``: ferrocuda kernels inside ``jax.jit`` (XLA FFI handlers)."""

import types
from collections.abc import Mapping, Sequence
from typing import Any

from ._ferrocuda import Module

__all__ = ["GRAPH_TARGET", "TARGET", "Functions", "JaxFunction", "functions", "register_targets"]

TARGET: str
GRAPH_TARGET: str

def register_targets() -> None: ...

class JaxFunction:
    """A kernel or a family of a module as a JAX function."""

    def __init__(self, info: Any, name: str, kernels: list[Any]) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def kernels(self) -> tuple[str, ...]: ...
    def __call__(
        self,
        *args: Any,
        out_shapes: Mapping[str, Sequence[int]] | None = None,
        out_dtypes: Mapping[str, Any] | None = None,
    ) -> Any: ...

class Functions(types.SimpleNamespace):
    """The JAX functions of one module, as attributes."""

    def __getattr__(self, name: str) -> JaxFunction: ...

def functions(module: Module | None = None) -> Functions: ...
def __getattr__(name: str) -> JaxFunction: ...
