"""Stub of ``ferrocuda.torch``: the PyTorch operators of ferrocuda modules. The bundled
kernels' operators (``gelu``, ``add_out``, ...) are generated from the manifest at import
(with torch installed): module attributes typed by ``__getattr__``."""

from collections.abc import Callable, Mapping
from typing import Any

from ._ferrocuda import Module

__all__ = ["TorchOps", "bundled_ops", "derive_outputs", "register"]

_OutputShapes = Mapping[str, Mapping[str, Callable[[dict[str, Any]], Any]]]

class TorchOps:
    """The torch operators of one ferrocuda module: ``ops.f`` and ``ops.f_out`` per family."""

    namespace: str
    module: Module
    def __init__(
        self, module: Module, namespace: str, output_shapes: _OutputShapes | None
    ) -> None: ...
    @property
    def families(self) -> list[str]: ...
    def functional(self, family: str) -> Any: ...
    def out(self, family: str) -> Any: ...
    def __getattr__(self, name: str) -> Any: ...

def register(
    module: Module,
    namespace: str | None = None,
    *,
    output_shapes: _OutputShapes | None = None,
) -> TorchOps: ...
def bundled_ops() -> TorchOps: ...
def derive_outputs(
    module: Module,
    family: str,
    *args: Any,
    out_dtype: Any = None,
    output_shapes: _OutputShapes | None = None,
) -> list[tuple[str, tuple[int, ...], Any]]: ...
def __getattr__(name: str) -> Any: ...
