"""ferrocuda kernels inside ``jax.jit``, through XLA's FFI.

Every family and kernel of a :class:`ferrocuda.Module` -- the bundled kernels, or a module of
your own from :func:`ferrocuda.load` -- becomes a JAX function: its read-only array
parameters and scalars are the arguments, its writable array parameters the results::

    import jax, jax.numpy as jnp
    import ferrocuda.jax as fj

    @jax.jit
    def f(a, b):
        return jnp.tanh(fj.add(a, b))        # runs add_f32 on XLA's stream

    mine = fj.functions(ferrocuda.load("my_kernels"))   # a module of your own
    y = mine.scale(2.0, x)

How a call works:

* The kernel is chosen at trace time among the family's variants by the arrays' element
  types and ranks and the variants' ``require`` rules (the first variant, in manifest order,
  that takes them and whose rules hold for their shapes; ``out_dtypes=``
  picks among variants that differ only in an output's type, e.g. ``linear``'s bfloat16 or
  float32 result). A dtype no variant takes is a ``TypeError`` that lists the variants. At
  run time the handler runs that kernel's layout and architecture variant for the device (the
  contiguous one, since XLA's buffers are dense row-major; ``linear``'s sm_90a kernel on an
  H100/H200), exactly as an eager call would.
* Results are declared from the manifest (``json.loads(module.manifest)["kernels"]``): the
  shape of each writable parameter comes from its ``same_shape`` group or from the kernel's
  ``require`` rules (``out.shape[0] == x.shape[0]``, ``out.len() == 1``); its dtype is the
  parameter's. A result whose shape no rule fixes (``histogram``'s bin count) is given with
  ``out_shapes={"bins": (64,)}``; otherwise the call is a ``ValueError`` that says so. The
  kernel's other ``require`` rules are checked at trace time too.
* Scalars are attributes of the call: static Python numbers (or NumPy scalars), baked into
  the compiled program; a traced value is a ``TypeError`` (mark it static, e.g. with
  ``functools.partial`` or ``static_argnums``). They are range-checked against the
  parameter's type as in an eager call.
* Writable parameters are fresh results by default: their initial contents are undefined
  (like ``jnp.empty``), except outputs the kernel declares zeroed (``histogram``'s bins),
  which the launcher clears. A kernel that reads a writable parameter (``saxpy``'s ``y``,
  an in-out value) must be given it: pass *every* non-scratch parameter, in order
  (``fj.saxpy(2.0, x, y)``), and the result is the updated value. Such operands are declared
  with ``input_output_aliases``, so XLA updates them in place when it can (a donated buffer
  of the jitted function) and copies them first otherwise.
* The launch goes on XLA's CUDA stream with no host synchronization. Kernels without scratch
  workspaces are marked compatible with XLA's command buffers (CUDA graphs); kernels with
  scratch (``sum``, ``max``, ``cumsum``, ``normalize``...) are not, because a captured launch
  would allocate its workspace as graph memory nodes.

Limits: ``jax.vmap`` of a ferrocuda function runs the kernel once per batch element
(``vmap_method="sequential"``); there are no derivatives (``jax.grad`` raises); scalars
cannot be traced; buffer donation works through ``jax.jit(..., donate_argnums=...)`` for the
in-out forms only. JAX preallocates most of the GPU's memory by default; set
``XLA_PYTHON_CLIENT_PREALLOCATE=false`` when kernels with scratch workspaces, CuPy or torch
share the process with JAX.

Neither importing :mod:`ferrocuda` nor importing this module imports JAX: the first call
does (``jax`` must be installed, with CUDA support for the calls to run).
"""

from __future__ import annotations

import json
import math
import operator
import threading
import types
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import _ferrocuda
from ._ferrocuda import Module, bundled
from ._manifest import KernelInfo, ParamInfo, RuleError, check_rules, derive_shapes

__all__ = [
    "GRAPH_TARGET",
    "TARGET",
    "Functions",
    "JaxFunction",
    "functions",
    "register_targets",
]

#: The FFI target of kernels with scratch workspaces (not command-buffer compatible).
TARGET = "ferrocuda_xla"
#: The FFI target marked compatible with XLA's command buffers (CUDA graphs).
GRAPH_TARGET = "ferrocuda_xla_graph"

_lock = threading.Lock()
_registered = False


def _jax() -> Any:
    """JAX, imported at the first call (importing this module does not import it)."""
    try:
        import jax
        import jax.numpy
    except ImportError as e:
        raise ImportError(
            "ferrocuda.jax needs JAX: pip install 'jax[cuda12]' (or jax[cuda13])"
        ) from e
    return jax


def register_targets() -> None:
    """Registers ferrocuda's two XLA FFI handlers with JAX for platform CUDA (once per
    process; every call of a ferrocuda JAX function does it first)."""
    global _registered
    jax = _jax()
    with _lock:
        if _registered:
            return
        for name, graph in ((TARGET, False), (GRAPH_TARGET, True)):
            # The handler's capsule as jax.ffi.pycapsule makes it (made by the extension:
            # jax.ffi.pycapsule changes ctypes.pythonapi.PyCapsule_New's argument types for
            # the whole process).
            jax.ffi.register_ffi_target(name, _ferrocuda._xla_capsule(graph), platform="CUDA")
        _registered = True


# ---------------------------------------------------------------------------------------
# The manifest, read once per module.


class _ModuleInfo:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.kernels = {k["name"]: KernelInfo(k) for k in json.loads(module.manifest)["kernels"]}
        self.families: dict[str, list[KernelInfo]] = {}
        for k in self.kernels.values():
            self.families.setdefault(k.family, []).append(k)
        self.id: int | None = None

    def module_id(self) -> int:
        if self.id is None:
            self.id = _ferrocuda._xla_register(self.module)
        return self.id


# ---------------------------------------------------------------------------------------
# Calls.


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, np.generic)


def _scalar_value(v: Any, p: ParamInfo, where: str) -> Any:
    """A scalar argument as an XLA attribute value (``np.int64`` or ``np.float64``)."""
    jax = _jax()
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{where}: argument `{p.name}`: expected a {p.dtype} scalar, got bool")
    if isinstance(v, jax.core.Tracer) or (_is_array(v) and not isinstance(v, np.ndarray)):
        raise TypeError(
            f"{where}: argument `{p.name}`: scalars are attributes of the compiled call and "
            "must be static Python numbers, not traced or device values (mark the argument "
            "static, e.g. with functools.partial or jax.jit(static_argnums=...))"
        )
    is_int = np.issubdtype(np.dtype(p.dtype), np.integer)
    if is_int:
        if isinstance(v, (float, np.floating)):
            raise TypeError(
                f"{where}: argument `{p.name}`: expected an integer for the {p.dtype} "
                f"parameter, got {type(v).__name__}"
            )
        try:
            iv = operator.index(v)
        except TypeError:
            raise TypeError(
                f"{where}: argument `{p.name}`: expected an integer for the {p.dtype} "
                f"parameter, got {type(v).__name__}"
            ) from None
        info = np.iinfo(np.dtype(p.dtype))
        if not info.min <= iv <= info.max:
            raise OverflowError(
                f"{where}: argument `{p.name}`: {iv} is out of range for {p.dtype} "
                f"({info.min}..={info.max})"
            )
        if iv > np.iinfo(np.int64).max:
            raise OverflowError(
                f"{where}: argument `{p.name}`: {iv} does not fit an XLA int64 attribute"
            )
        return np.int64(iv)
    try:
        fv = float(v)
    except (TypeError, ValueError):
        raise TypeError(
            f"{where}: argument `{p.name}`: expected a real number for the {p.dtype} "
            f"parameter, got {type(v).__name__}"
        ) from None
    if math.isfinite(fv) and abs(fv) > float(jax.numpy.finfo(p.dtype).max):
        raise OverflowError(f"{where}: argument `{p.name}`: {v!r} is out of range for {p.dtype}")
    return np.float64(fv)


def _takes(k: KernelInfo, args: Sequence[Any], inout: bool, out_dtypes: Mapping[str, Any]) -> bool:
    params = k.params if inout else k.inputs
    for p, a in zip(params, args, strict=True):
        if not p.is_array:
            continue
        if not _is_array(a) or str(a.dtype) != p.dtype:
            return False
        if p.kind != "slice" and len(a.shape) != p.rank:
            return False
    for p in k.outputs:
        if (
            p.name in out_dtypes
            and str(np.dtype(_jax().numpy.dtype(out_dtypes[p.name]))) != p.dtype
        ):
            return False
    return True


def _describe_args(args: Sequence[Any]) -> str:
    out = []
    for a in args:
        if _is_array(a):
            out.append(f"{a.dtype}{list(a.shape)}")
        else:
            out.append(type(a).__name__)
    return "(" + ", ".join(out) + ")"


class JaxFunction:
    """A kernel or a family of a module as a JAX function (see :mod:`ferrocuda.jax`).

    Call it with the kernel's read-only array parameters and scalars, in manifest order
    (``f(a, b)`` for ``add(a, b, out)``), or with every non-scratch parameter to pass in-out
    values (``saxpy(alpha, x, y)``). Returns the writable array parameters: one array, or a
    tuple of them. Keyword options: ``out_shapes={name: shape}`` for an output whose shape
    the manifest does not fix, ``out_dtypes={name: dtype}`` to choose among variants that
    differ in an output's type.
    """

    def __init__(self, info: _ModuleInfo, name: str, kernels: list[KernelInfo]) -> None:
        self._info = info
        self._name = name
        # Portable kernels first: architecture variants are the launch's choice.
        self._kernels = sorted(kernels, key=lambda k: k.arch is not None)
        self.__name__ = name
        self.__qualname__ = name
        lines = [
            f"``{name}`` of {info.module.source} as a JAX function (ferrocuda.jax).",
            "",
            "Variants (the first that takes the arguments' element types and ranks and whose",
            "rules hold for their shapes runs):",
            "",
        ]
        lines += [f"* ``{k.signature()}``" for k in self._kernels]
        self.__doc__ = "\n".join(lines) + "\n\n" + (JaxFunction.__doc__ or "")

    @property
    def name(self) -> str:
        """The family's or kernel's name."""
        return self._name

    @property
    def kernels(self) -> tuple[str, ...]:
        """The names of the kernels this function may run, in the order they are tried."""
        return tuple(k.name for k in self._kernels)

    def __repr__(self) -> str:
        return f"<ferrocuda.jax function {self._name} [{', '.join(self.kernels)}]>"

    def __call__(
        self,
        *args: Any,
        out_shapes: Mapping[str, Sequence[int]] | None = None,
        out_dtypes: Mapping[str, Any] | None = None,
    ) -> Any:
        jax = _jax()
        where = f"ferrocuda.jax.{self._name}"
        out_shapes = dict(out_shapes or {})
        out_dtypes = dict(out_dtypes or {})
        args = tuple(
            a
            if _is_array(a) or isinstance(a, (int, float, np.generic, jax.core.Tracer))
            else jax.numpy.asarray(a)
            for a in args
        )
        arities = sorted(
            {len(k.inputs) for k in self._kernels} | {len(k.params) for k in self._kernels}
        )
        # The variants that take the arguments' types and ranks, in order: the first whose
        # rules hold for their shapes runs (a family may hold kernels for different head
        # dimensions, say); when none holds, the first one's refusal is raised.
        candidates: list[tuple[KernelInfo, bool]] = []
        for k in self._kernels:
            # The read-only parameters only; or every parameter (in-out values), when the
            # kernel has writable ones.
            for mode in (False, True) if k.outputs else (False,):
                n = len(k.params) if mode else len(k.inputs)
                if len(args) == n and _takes(k, args, mode, out_dtypes):
                    candidates.append((k, mode))
                    break
        if not candidates:
            if len(args) not in arities:
                raise TypeError(
                    f"{where}: takes {' or '.join(map(str, arities))} positional arguments "
                    f"(the read-only parameters, or every parameter), got {len(args)}"
                )
            # Per read-only array parameter, the element types some variant takes.
            takes: dict[str, list[str]] = {}
            for k in self._kernels:
                for p in k.inputs:
                    if p.is_array and p.dtype not in takes.setdefault(p.name, []):
                        takes[p.name].append(p.dtype)
            summary = "; ".join(f"`{n}` takes {', '.join(ts)}" for n, ts in takes.items())
            variants = "\n".join(f"    {k.signature()}" for k in self._kernels)
            raise TypeError(
                f"{where}: no variant takes the arguments {_describe_args(args)}"
                + (f" with out_dtypes={out_dtypes}" if out_dtypes else "")
                + (f" ({summary})" if summary else "")
                + f"; the variants are:\n{variants}"
            )
        refusal: RuleError | None = None
        for k, inout in candidates:
            try:
                return self._call(k, args, inout, out_shapes, where)
            except RuleError as e:
                refusal = refusal or e
        assert refusal is not None
        raise refusal

    def _call(
        self,
        k: KernelInfo,
        args: tuple[Any, ...],
        inout: bool,
        out_shapes: Mapping[str, Sequence[int]],
        where: str,
    ) -> Any:
        register_targets()
        jax = _jax()
        params = k.params if inout else k.inputs
        shapes: dict[int, tuple[int, ...]] = {}
        scalars: dict[int, Any] = {}
        attrs: dict[str, Any] = {}
        operands: list[Any] = []
        inouts: list[Any] = []
        for p, a in zip(params, args, strict=True):
            if not p.is_array:
                v = _scalar_value(a, p, where)
                scalars[p.index] = v
                attrs[p.name] = v
            else:
                shapes[p.index] = tuple(a.shape)
                (inouts if p.mutable else operands).append(a)
        unknown = set(out_shapes) - {p.name for p in k.outputs}
        if unknown:
            raise TypeError(f"{where}: out_shapes names no output of {k.name}: {sorted(unknown)}")
        if not inout:
            derive_shapes(k, shapes, scalars, out_shapes)
        check_rules(k, shapes, scalars)
        for reserved in ("ferrocuda_module", "ferrocuda_kernel"):
            if reserved in attrs:
                raise TypeError(f"{where}: a parameter named `{reserved}` cannot be passed")
        attrs["ferrocuda_module"] = np.int64(self._info.module_id())
        attrs["ferrocuda_kernel"] = k.name
        results = [
            jax.ShapeDtypeStruct(shapes[p.index], jax.numpy.dtype(p.dtype)) for p in k.outputs
        ]
        aliases = {len(operands) + j: j for j in range(len(inouts))}
        call = jax.ffi.ffi_call(
            TARGET if k.has_scratch else GRAPH_TARGET,
            results,
            vmap_method="sequential",
            input_output_aliases=aliases or None,
        )
        out = call(*operands, *inouts, **attrs)
        if len(results) == 1:
            return out[0]
        return tuple(out)


class Functions(types.SimpleNamespace):
    """The JAX functions of one module: an attribute per family and per kernel (a family
    wins over a kernel of the same name)."""

    def __getattr__(self, name: str) -> JaxFunction:
        """Only called for a name the module lacks."""
        raise AttributeError(f"the module has no kernel or family named {name!r}")


_cache: dict[int, Functions] = {}


def functions(module: Module | None = None) -> Functions:
    """The JAX functions of ``module`` (default: the bundled kernels), one per family and
    per kernel, as attributes: ``functions(ferrocuda.load("my_kernels")).scale(2.0, x)``.
    The same object for the same module."""
    m = bundled() if module is None else module
    if not isinstance(m, Module):
        raise TypeError(f"functions(): expected a ferrocuda.Module, got {type(m).__name__}")
    with _lock:
        found = _cache.get(id(m))
        if found is not None and found._module is m:  # type: ignore[attr-defined]
            return found
    info = _ModuleInfo(m)
    entries: dict[str, JaxFunction] = {}
    for name, k in info.kernels.items():
        entries[name] = JaxFunction(info, name, [k])
    for fam, ks in info.families.items():
        entries[fam] = JaxFunction(info, fam, ks)
    ns = Functions(**entries)
    ns._module = m  # type: ignore[attr-defined]
    with _lock:
        _cache[id(m)] = ns
    return ns


def __getattr__(name: str) -> JaxFunction:
    """``ferrocuda.jax.<name>``: the bundled kernels' family or kernel ``name``."""
    if name.startswith("__"):
        raise AttributeError(name)
    fs = functions()
    try:
        return getattr(fs, name)  # type: ignore[no-any-return]
    except AttributeError:
        raise AttributeError(
            f"module 'ferrocuda.jax' has no attribute {name!r} (the bundled kernels have no "
            "family or kernel of that name)"
        ) from None
