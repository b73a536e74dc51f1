"""Stub of ``ferrocuda.kernels``, the namespace generated at import from the bundled
manifest: one :class:`~ferrocuda.Family` per kernel family and one
:class:`~ferrocuda.Kernel` per kernel (a family wins when both share a name)."""

from ._ferrocuda import Family, Kernel, Module

families: dict[str, Family]
module: Module

def __getattr__(name: str) -> Family | Kernel: ...
