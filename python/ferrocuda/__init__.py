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
* :func:`inline` -- a kernel written in a Python string, compiled once (cached on disk, also
  across processes) and loaded as a :class:`Module`; :func:`inline_kernel`, the same as a
  decorator of a function whose docstring holds the Rust source;
* :class:`DeviceArray` -- device memory owned by ferrocuda (CAI v3 and DLPack export);
* ``launcher.bind(*args, ...)`` -- a :class:`BoundLaunch` for loops: the arguments read,
  checked and converted once, then ``launch()`` per iteration (see its documentation);
* :func:`autotune` -- a launcher that times several kernels and launch configurations on the
  first call per key (shapes, dtypes, device) and launches the fastest (:mod:`ferrocuda.tuning`);
* :func:`as_cuda_array`, :func:`from_cuda_array_interface`, :func:`is_cuda_array` -- Numba's
  consumer API;
* ``ferrocuda.torch`` -- every family as ``torch.library`` custom operators (functional and
  out-forms) for eager calls, ``torch.compile`` and CUDA graphs; imported on first access
  (importing ferrocuda never imports torch);
* :mod:`ferrocuda.jax` -- the same kernels inside ``jax.jit`` (XLA FFI handlers on XLA's
  stream; imported on first use: importing ferrocuda never imports JAX);
* :class:`CudaError` -- driver failures (also: no driver); validation errors are
  ``TypeError``/``ValueError``/``NotImplementedError`` naming the argument and the key;
* :func:`last_trap` -- where a ferrocuda kernel failed a device check (``device_assert!``, a
  checked access out of bounds): file, line, thread and kernel, as a :class:`Trap` (also
  ``CudaError.trap``), readable after another library (``torch.cuda.synchronize()``) reported
  the fault.

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
import inspect
import sys
import textwrap
import types
from collections.abc import Callable
from typing import Any

# The extension module stays reachable as ferrocuda._ferrocuda (its private helpers, used by
# the tests): the redundant alias marks the re-export.
from . import _ferrocuda as _ferrocuda
from ._ferrocuda import (
    MAX_NDIM,
    SYNC_ENV_VAR,
    BoundLaunch,
    BuildError,
    CompileError,
    ConfiguredLauncher,
    CudaError,
    DeviceArray,
    Family,
    ForeignArray,
    Kernel,
    Launcher,
    Module,
    OpKernel,
    PerformanceWarning,
    Trap,
    __version__,
    as_cuda_array,
    build,
    bundled,
    device_count,
    device_properties,
    driver_available,
    from_cuda_array_interface,
    inline,
    is_cuda_array,
    last_trap,
    load,
    new_crate,
    normalize_stream,
    normalize_sync,
    synchronize,
    validate_interface,
)
from .tuning import Autotuned, autotune

__all__ = [
    "MAX_NDIM",
    "SYNC_ENV_VAR",
    "Autotuned",
    "BoundLaunch",
    "BuildError",
    "CompileError",
    "ConfiguredLauncher",
    "CudaError",
    "DeviceArray",
    "Family",
    "ForeignArray",
    "Kernel",
    "Launcher",
    "Module",
    "OpKernel",
    "PerformanceWarning",
    "SyncMode",
    "Trap",
    "__version__",
    "as_cuda_array",
    "autotune",
    "build",
    "bundled",
    "device_count",
    "device_properties",
    "driver_available",
    "from_cuda_array_interface",
    "inline",
    "inline_kernel",
    "is_cuda_array",
    "kernels",
    "last_trap",
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


def inline_kernel(
    func: Callable[..., object] | None = None,
    *,
    arch: str = "sm_80",
    fp_contract: str = "off",
    progress: bool | Callable[[str], object] | None = None,
) -> Any:
    """Decorator: a function whose docstring is Rust kernel source becomes that kernel's
    launcher, compiled with :func:`inline` (same cache, options and errors).

    ::

        @ferrocuda.inline_kernel
        def scale(x, out, a):
            r\"\"\"
            #[kernel]
            pub unsafe fn scale(x: Slice<f32>, out: SliceMut<f32>, a: f32) {
                for i in thread::grid_stride(out.len()) {
                    if let Some(v) = x.get(i) {
                        unsafe { out.write(i, a * v) };
                    }
                }
            }
            \"\"\"

        scale(x, out, 2.0)        # the family (or kernel) named like the function

    The function's body is never called. The docstring is dedented (its lines kept), so a
    :class:`CompileError`'s ``<inline>`` line 1 is the docstring's first line; a note on the
    exception gives the file and line it is. Usable bare (``@inline_kernel``) or with options
    (``@inline_kernel(arch="sm_90")``).
    """

    def wrap(f: Callable[..., object]) -> Any:
        name = getattr(f, "__name__", None)
        doc = getattr(f, "__doc__", None)
        if not isinstance(doc, str) or not doc.strip():
            raise ValueError(
                f"inline_kernel: {name!r} has no docstring; its docstring must hold the Rust "
                "source of the kernel (a #[kernel] function of the same name)"
            )
        try:
            module = inline(
                textwrap.dedent(doc), arch=arch, fp_contract=fp_contract, progress=progress
            )
        except CompileError as e:
            where = _docstring_line(f)
            if where is not None:
                e.add_note(f"<inline> line 1 is line {where[1]} of {where[0]} ({name}'s docstring)")
            raise
        families: dict[str, Family] = module.families
        kernels_: dict[str, Kernel] = module.kernels
        launcher = families.get(str(name)) or kernels_.get(str(name))
        if launcher is None:
            raise ValueError(
                f"inline_kernel: the docstring of {name!r} defines no kernel or family named "
                f"{name!r} (it has {sorted({*families, *kernels_})}); name the function like "
                "its #[kernel]"
            )
        return launcher

    if func is None:
        return wrap
    if not callable(func):
        raise TypeError(
            f"inline_kernel decorates a function, not {type(func).__name__} "
            "(for a string, use ferrocuda.inline)"
        )
    return wrap(func)


def _docstring_line(f: Callable[..., object]) -> tuple[str, int] | None:
    """(file, line) of the first line of ``f``'s docstring, when its source can be read."""
    try:
        lines, start = inspect.getsourcelines(f)
        path = inspect.getsourcefile(f)
    except (OSError, TypeError):
        return None
    for i, line in enumerate(lines):
        if '"""' in line or "'''" in line:
            return (path or "?", start + i)
    return None


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


def _bundled_without_parts(directory: Any) -> Module:
    """The bundled module without its parts (the kernels built for sm_90a), written to and
    loaded from ``directory``: each family keeps only its portable kernels, and a kernel
    called by name has no architecture variant a launch could pick instead. How the tests and
    benchmarks run an H100's fallback kernels on an H100."""
    import json
    from pathlib import Path

    man = json.loads(bundled().manifest)
    man["kernels"] = [k for k in man["kernels"] if not k.get("arch")]
    man["parts"] = {}
    d = Path(directory)
    (d / man["ptx"]).write_text(_ferrocuda._bundled_ptx())
    for arch, name in man.get("cubins", {}).items():
        image = _ferrocuda._bundled_cubin(arch)
        if image is not None:
            (d / name).write_bytes(image)
    (d / "portable.json").write_text(json.dumps(man))
    return load(d / "portable.json")


#: Submodules imported on first access (``ferrocuda.torch.add``, ``ferrocuda.jax.add``):
#: importing ferrocuda never imports torch or JAX.
_LAZY = ("torch", "jax")


def __getattr__(name: str) -> types.ModuleType:
    """Imports :mod:`ferrocuda.torch` or :mod:`ferrocuda.jax` on first access."""
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
