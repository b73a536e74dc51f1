"""ferrocuda: GPU kernels written in Rust, launched on the arrays you already have.

Kernels are compiled from Rust to PTX at build time; launchers take any object that exports
the CUDA Array Interface (CuPy, PyTorch, Numba, ...), DLPack (JAX), the SYCL USM array
interface, a :class:`DeviceArray`, or a NumPy host array, validate it against the kernel's
manifest, order the launch after the producers' pending work (honouring their streams as
Numba's consumer does) and launch.

Quick start (on a machine with an NVIDIA GPU)::

    import cupy as cp
    import ferrocuda

    a = cp.arange(1 << 20, dtype=cp.float32)
    b = cp.ones_like(a)
    out = cp.empty_like(a)
    ferrocuda.kernels.add(a, b, out)          # dispatches to add_f32

Main entry points:

* :data:`kernels` -- the bundled kernels (``add``, ``initialize_array``, ``add_index``,
  ``saxpy``), one launcher per family (dispatching on element type and rank) and per kernel;
* :func:`load` -- a module of your own kernels: ``load("my_kernels")`` builds the kernel crate
  when a source changed (``ferrocuda new my_kernels`` makes one) and loads it; :func:`build`
  builds only, and the ``ferrocuda`` command (``python -m ferrocuda``) does both from a shell;
* :class:`DeviceArray` -- device memory owned by ferrocuda (CAI v3 and DLPack export);
* ``launcher.bind(*args, ...)`` -- a :class:`BoundLaunch` for loops: the arguments read,
  checked and converted once, then ``launch()`` per iteration (see its documentation);
* :func:`as_cuda_array`, :func:`from_cuda_array_interface`, :func:`is_cuda_array` -- Numba's
  consumer API;
* :mod:`ferrocuda.jax` -- the same kernels inside ``jax.jit`` (XLA FFI handlers on XLA's
  stream; imported on first use: importing ferrocuda never imports JAX);
* :class:`CudaError` -- driver failures (also: no driver); validation errors are
  ``TypeError``/``ValueError``/``NotImplementedError`` naming the argument and the key.

Host (NumPy) arrays are accepted by every launcher as Numba accepts them: copied to the device
before the launch and back afterwards when the kernel writes them, with a
:class:`PerformanceWarning`. That costs an allocation, two copies and a synchronization per
array and call: keep data on the device in loops.

Synchronization: ``sync=`` per call, or ``FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC`` for the process
(``1``/unset: host-synchronize foreign producer streams as Numba does; ``event``: order them
with CUDA events, never blocking the host; ``0``: no ordering). See :class:`SyncMode`.

CUDA graphs: a launch on a stream that is capturing (``torch.cuda.graph``, CuPy's
``Stream.begin_capture``) is captured in every sync mode; producer streams in the same capture
are ordered by captured event edges, and what a graph cannot record (a producer stream outside
the capture in the ``default`` and ``event`` modes, host arrays) raises ``NotImplementedError``
and leaves the capture valid. See the package README, "CUDA graphs".

Importing ferrocuda needs no GPU: the first operation that does raises :class:`CudaError`.
"""

from __future__ import annotations

import enum
import importlib
import sys
import types
from typing import Any

# The extension module stays reachable as ferrocuda._ferrocuda (its private helpers, used by
# the tests): the redundant alias marks the re-export.
from . import _ferrocuda as _ferrocuda
from ._ferrocuda import (
    MAX_NDIM,
    SYNC_ENV_VAR,
    BoundLaunch,
    BuildError,
    ConfiguredLauncher,
    CudaError,
    DeviceArray,
    Family,
    ForeignArray,
    Kernel,
    Launcher,
    Module,
    PerformanceWarning,
    __version__,
    as_cuda_array,
    build,
    bundled,
    device_count,
    driver_available,
    from_cuda_array_interface,
    is_cuda_array,
    load,
    new_crate,
    normalize_stream,
    normalize_sync,
    synchronize,
    validate_interface,
)

__all__ = [
    "MAX_NDIM",
    "SYNC_ENV_VAR",
    "BoundLaunch",
    "BuildError",
    "ConfiguredLauncher",
    "CudaError",
    "DeviceArray",
    "Family",
    "ForeignArray",
    "Kernel",
    "Launcher",
    "Module",
    "PerformanceWarning",
    "SyncMode",
    "__version__",
    "as_cuda_array",
    "build",
    "bundled",
    "device_count",
    "driver_available",
    "from_cuda_array_interface",
    "is_cuda_array",
    "kernels",
    "load",
    "new_crate",
    "normalize_stream",
    "normalize_sync",
    "synchronize",
    "validate_interface",
]


class SyncMode(enum.Enum):
    """How a launch is ordered against the streams of its arrays' producers.

    Pass a member (or its string value) as ``sync=``; ``None`` selects the process default,
    ``FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC`` (``1``/unset = DEFAULT, ``event`` = EVENT,
    ``0`` = OFF).
    """

    #: Host-synchronize each producer stream other than the launch stream (Numba's
    #: semantics, minus the sync on the launch stream itself); afterwards those streams wait
    #: for the kernel. ``sync=True`` means the same. Under graph capture the synchronization
    #: becomes an event edge, as in EVENT.
    DEFAULT = "default"
    #: Never block the host: the launch stream waits on an event recorded on each foreign
    #: producer stream; afterwards those streams wait for the kernel.
    EVENT = "event"
    #: No ordering at all; the caller guarantees the data is ready. ``sync=False`` too.
    OFF = "off"


def _make_kernels(module: Module, name: str) -> types.ModuleType:
    """A module object exposing `module`'s families and kernels as attributes."""
    ns = types.ModuleType(name)
    fams: dict[str, Family] = module.families
    ks: dict[str, Kernel] = module.kernels
    lines = [
        "The kernels bundled with ferrocuda, generated from their manifest at import.",
        "",
        "Each family launcher dispatches on the arrays' element types and ranks; each kernel",
        "is also reachable by its own name. Families:",
        "",
    ]
    for fname, fam in fams.items():
        variants = ", ".join(k.name for k in fam.kernels)
        lines.append(f"* ``{fname}`` -- {variants}")
    ns.__doc__ = "\n".join(lines) + "\n"
    entries: dict[str, Family | Kernel] = {}
    entries.update(ks)
    entries.update(fams)  # a family wins over a kernel of the same name
    for attr, obj in entries.items():
        setattr(ns, attr, obj)
    ns.families = fams  # type: ignore[attr-defined]
    ns.module = module  # type: ignore[attr-defined]
    return ns


#: The bundled kernels: ``kernels.add(a, b, out)``, ``kernels.initialize_array(x)``,
#: ``kernels.add_index(x)``, ``kernels.saxpy(alpha, x, y)``, and each variant by name
#: (``kernels.add_f32``). Also importable as ``ferrocuda.kernels``.
kernels = _make_kernels(bundled(), __name__ + ".kernels")
sys.modules[kernels.__name__] = kernels


def __getattr__(name: str) -> Any:
    """Imports :mod:`ferrocuda.jax` on first use (``ferrocuda.jax.add``): importing ferrocuda
    must not import JAX."""
    if name == "jax":
        return importlib.import_module(__name__ + ".jax")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
