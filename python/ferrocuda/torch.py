"""PyTorch operators for ferrocuda kernels: every family of a module as ``torch.library``
custom operators that ``torch.compile`` traces without graph breaks and CUDA graphs replay.

``import ferrocuda`` never imports torch; importing this module (``ferrocuda.torch``) does
when torch is installed, and registers the bundled kernels' operators, in namespace
``ferrocuda``, as its attributes (each an ``OpOverload``: ``ft.gelu is
torch.ops.ferrocuda.gelu.default``). Without torch it still imports, and its operators raise
``ImportError`` saying what is missing::

    import torch
    import ferrocuda.torch as ft

    x = torch.randn(1 << 20, device="cuda")
    y = ft.gelu(x)                        # functional: allocates its output
    out = torch.empty_like(x)
    ft.add_out(x, y, out)                 # out-form: writes `out`
    torch.ops.ferrocuda.add(x, y)         # the same operators, through torch.ops

and a module of your own kernels gets operators with :func:`register`::

    ops = ft.register(ferrocuda.load("my_kernels"))   # namespace "my_kernels"
    y = ops.scale(2.0, x)

Two operators per kernel family ``f``, both derived from the module's manifest:

* ``f_out`` (``<namespace>::f_out``): every argument of the family's kernels in order — arrays
  as tensors, scalars as ``float``/``int`` — returning nothing; the written (mutable) array
  parameters are declared as mutated in the schema (``Tensor(w2!) out``, what
  ``custom_op``'s ``mutates_args`` declares), so ``torch.compile`` functionalizes them.
  Scratch workspaces are the launcher's and take no argument.
* ``f`` (``<namespace>::f``): the read parameters only (arrays and scalars), returning the
  written arrays (one tensor, or a tuple in parameter order), allocated on the inputs'
  device. Each output's shape comes from the manifest: a ``same_shape`` group with an input,
  else per axis the kernel's ``require`` rules (``len(out) == 1``, ``out.dim(0) == x.dim(0)``,
  ...); its element type and rank from the kernel variant the inputs select. Outputs start as
  zeros (a kernel that reads what it writes, such as ``saxpy``'s ``y``, reads zeros), except
  those the launcher zero-fills itself (``#[kernel(zero(...))]``), which start uninitialized.
  When the inputs select variants whose outputs differ in element type (``cumsum`` of
  ``int32`` to ``int32`` or ``int64``), ``f`` takes ``out_dtype=``. An output whose shape the
  manifest does not determine (``histogram``'s ``bins``: its length is the caller's choice)
  makes ``f`` a plain function that raises ``NotImplementedError`` saying so; give the
  shape with ``register(..., output_shapes=...)`` or use ``f_out``.

The fake (meta) implementation of each operator picks the kernel variant by the inputs'
element types and ranks as the family launcher does (slices take any rank, views and tensor
maps their own) and raises ``TypeError`` naming the family's variants when none matches.

Launches: by the family launcher's ``OpKernel`` (``launcher.op_kernel("<namespace>::f_out")``,
made once per operator), a callable of the extension that launches as
``launcher(*args, sync="off")`` does, with no keyword parsing per call. The out-form
registers it as its kernel — from torch's dispatcher to the launch there is no Python frame —
and the functional form calls its own after allocating the outputs. The launches go on
torch's current CUDA stream of the tensors' device (the stream torch's own operations on
them use: ferrocuda reads it per launch through torch's DLPack exchange API), with
``sync="off"`` — a torch operator's tensors are already ordered on that stream. Under
``torch.cuda.graph`` / ``mode="reduce-overhead"`` the launches are captured. A tensor not on
a CUDA device is refused before anything is launched (``ValueError`` naming the argument
and the operator); a tensor that requires grad is read as its ``detach()`` is, the same
memory (the operators have no autograd formula: gradients do not flow through them).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._manifest import KernelInfo, ParamInfo

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ._ferrocuda import Module, OpKernel

__all__ = [
    "TorchOps",
    "bundled_ops",
    "derive_outputs",
    "register",
]

#: The namespace of the bundled kernels' operators.
_BUNDLED_NS = "ferrocuda"
#: Namespaces a user module may not take (torch's own, and the bundled kernels').
_RESERVED = frozenset({"aten", "prim", "prims", "torch", "inductor", "_", _BUNDLED_NS})
_NS_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

_lock = threading.RLock()
#: namespace -> TorchOps
_registered: dict[str, TorchOps] = {}

_OutputShapes = Mapping[str, Mapping[str, Callable[[dict[str, Any]], Any]]]


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError(
            "ferrocuda.torch needs PyTorch (`pip install torch`); it is not installed"
        ) from e
    return torch


# ---------------------------------------------------------------------------------------
# The manifest's facts, per kernel.


class _Variant(KernelInfo):
    """One kernel of a family: its caller parameters and shape rules, as the operators see
    them."""

    def __init__(self, k: dict[str, Any]) -> None:
        super().__init__(k)
        self.by_index = {p.index: p for p in self.params}
        self.zero = set(k.get("zero", []))

    def signature(self) -> str:
        def one(p: ParamInfo) -> str:
            if not p.is_array:
                return f"{p.name}: {p.dtype}"
            rank = f", {p.rank}-D" if p.fixes_rank else ""
            w = " (written)" if p.mutable else ""
            return f"{p.name}: {p.kind}[{p.dtype}{rank}]{w}"

        return f"{self.name}({', '.join(one(p) for p in self.params)})"


def _torch_dtype(torch: Any, name: str) -> Any:
    return getattr(torch, name, None)


def _takes(torch: Any, p: ParamInfo, t: Any) -> bool:
    """`True` when parameter `p` takes tensor `t` by element type and rank (the family
    launcher's rule, layout aside)."""
    return bool(t.dtype == _torch_dtype(torch, p.dtype) and (not p.fixes_rank or t.dim() == p.rank))


def _known(op: dict[str, Any], v: _Variant) -> bool:
    """`True` when one side of a requirement is known from the inputs: a literal, an input
    array's extent or length, an integer scalar."""
    ((kind, arg),) = op.items()
    if kind == "int":
        return True
    if kind in ("dim", "len"):
        p = v.by_index.get(int(arg[0] if kind == "dim" else arg))
        return p is not None and p.is_array and not p.mutable
    if kind == "scalar":
        p = v.by_index.get(int(arg))
        return p is not None and not p.is_array and _schema_type(p) == "int"
    return False  # "ptr": no shape information


def _axis_of(op: dict[str, Any], out: ParamInfo) -> int | None:
    """The axis of `out` that operand `op` names (`len` of a slice counts as axis 0)."""
    ((kind, arg),) = op.items()
    if kind == "dim" and int(arg[0]) == out.index:
        return int(arg[1])
    if kind == "len" and int(arg) == out.index and (not out.fixes_rank or out.rank == 1):
        return 0
    return None


#: How an output's shape follows from the arguments: ("like", input index) or ("dims", one
#: known operand per axis).
_Recipe = tuple[str, Any]


def _output_recipe(v: _Variant, out: ParamInfo) -> tuple[_Recipe | None, str]:
    """How output `out`'s shape follows from the inputs by the manifest's rules, or `None`
    and why it does not."""
    inputs = {p.index for p in v.inputs if p.is_array}
    for group in v.same_shape:
        if out.index in group:
            for i in group:
                if i in inputs:
                    return ("like", i), ""
    rank = out.rank if out.fixes_rank else 1
    dims: list[Any] = [None] * rank
    for r in v.require:
        if r.get("op") != "==":
            continue
        for this, other in ((r["lhs"], r["rhs"]), (r["rhs"], r["lhs"])):
            axis = _axis_of(this, out)
            if axis is not None and axis < rank and dims[axis] is None and _known(other, v):
                dims[axis] = other
    missing = [i for i, d in enumerate(dims) if d is None]
    if missing:
        return None, (
            f"kernel `{v.name}` declares no same_shape group with an input and no "
            f"`require` rule that fixes axis {missing[0]} of `{out.name}` from the inputs "
            f"(its shape is the caller's choice)"
        )
    return ("dims", dims), ""


def _shape_function(v: _Variant, recipe: _Recipe) -> Callable[[Any], tuple[Any, ...]]:
    """`recipe` as a function of the functional form's arguments (positions resolved once)."""
    pos = {p.index: k for k, p in enumerate(v.inputs)}
    how, what = recipe
    if how == "like":
        k = pos[what]
        return lambda args: tuple(args[k].shape)
    if how == "hook":
        names = [p.name for p in v.inputs]
        return lambda args: tuple(what(dict(zip(names, args, strict=True))))
    getters: list[Callable[[Any], Any]] = []
    for op in what:
        ((kind, arg),) = op.items()
        if kind == "int":
            getters.append(lambda args, c=int(arg): c)
        elif kind == "dim":
            getters.append(lambda args, k=pos[int(arg[0])], a=int(arg[1]): args[k].shape[a])
        elif kind == "len":
            getters.append(lambda args, k=pos[int(arg)]: args[k].numel())
        else:  # an integer scalar
            getters.append(lambda args, k=pos[int(arg)]: args[k])
    return lambda args: tuple([g(args) for g in getters])


def derive_outputs(
    module: Module,
    family: str,
    *args: Any,
    out_dtype: Any = None,
    output_shapes: _OutputShapes | None = None,
) -> list[tuple[str, tuple[int, ...], Any]]:
    """What the functional operator of ``family`` allocates for ``args`` (its read
    parameters, tensors — fake or real — and scalars): ``[(name, shape, torch dtype), ...]``
    per written parameter, from the manifest (see the module documentation).

    Raises ``TypeError`` when no kernel of the family takes the inputs' element types and
    ranks (or ``out_dtype`` is not one the variants write), ``ValueError`` when the variants
    disagree on an output's element type and ``out_dtype`` is not given, and
    ``NotImplementedError`` when an output's shape is not determined by the inputs.
    """
    kernels = json.loads(module.manifest)["kernels"]
    fam = _FamilySpec(kernels, module.source, family, output_shapes)
    return fam.outputs_for(_torch(), args, out_dtype)


class _FamilySpec:
    """A family's kernels as the torch operators see them."""

    def __init__(
        self,
        kernels: list[dict[str, Any]],
        source: str,
        family: str,
        output_shapes: _OutputShapes | None = None,
    ) -> None:
        ks = [k for k in kernels if k["family"] == family]
        if not ks:
            raise ValueError(f"module {source} has no kernel family {family!r}")
        self.name = family
        self.variants = [_Variant(k) for k in ks]
        first = self.variants[0]
        self.params = first.params
        for v in self.variants[1:]:
            if [(p.name, p.is_array, p.mutable) for p in v.params] != [
                (p.name, p.is_array, p.mutable) for p in self.params
            ]:
                raise ValueError(
                    f"kernel family `{family}`: its kernels differ in their parameters' names, "
                    f"kinds or mutability ({first.signature()} vs {v.signature()}), so one "
                    f"torch operator cannot take them all"
                )
        self.inputs = first.inputs
        self.outputs = first.outputs
        #: Positions of the array arguments of the functional form (its plans' key).
        self.array_pos = [i for i, p in enumerate(self.inputs) if p.is_array]
        self.hooks = dict((output_shapes or {}).get(family, {}))
        self._plans: dict[Any, tuple[_Variant, list[Any]]] = {}

        unknown = set(self.hooks) - {p.name for p in self.outputs}
        if unknown:
            raise ValueError(
                f"output_shapes[{family!r}] names {sorted(unknown)}, which are not written "
                f"parameters of `{family}` (those are {[p.name for p in self.outputs]})"
            )
        # The functional form takes out_dtype= when variants that read the same element types
        # write different ones (ranks aside: a slice variant takes every rank).
        seen: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.ambiguous = False
        for v in self.variants:
            key = tuple(p.dtype for p in v.inputs)
            outs = tuple(p.dtype for p in v.outputs)
            if seen.setdefault(key, outs) != outs:
                self.ambiguous = True

    def variants_text(self) -> str:
        return "".join(f"\n    {v.signature()}" for v in self.variants)

    def no_variant(self, torch: Any, args: Any, params: list[ParamInfo]) -> TypeError:
        got = ", ".join(
            f"{p.name}: {t.dtype} {t.dim()}-D" if p.is_array else f"{p.name}: {type(t).__name__}"
            for p, t in zip(params, args, strict=False)
        )
        return TypeError(
            f"kernel family `{self.name}` has no variant for ({got}); variants:"
            f"{self.variants_text()}"
        )

    def select(self, torch: Any, args: Any, params_of: Callable[[_Variant], list[ParamInfo]]):
        """The variants whose parameters (`params_of(v)`) take `args`."""
        return [
            v
            for v in self.variants
            if all(
                not p.is_array or _takes(torch, p, t)
                for p, t in zip(params_of(v), args, strict=True)
            )
        ]

    def check_out_form(self, torch: Any, args: Any) -> None:
        if not self.select(torch, args, lambda v: v.params):
            raise self.no_variant(torch, args, self.params)

    def outputs_for(
        self, torch: Any, args: Any, out_dtype: Any
    ) -> list[tuple[str, tuple[Any, ...], Any]]:
        """Per written parameter: name, shape and torch dtype of the functional form's output
        for `args` (its read arguments)."""
        if len(args) != len(self.inputs):
            raise TypeError(
                f"{self.name} takes {len(self.inputs)} argument(s) "
                f"({', '.join(p.name for p in self.inputs)}), got {len(args)}"
            )
        # The choice depends only on the element types and ranks (and out_dtype): planned
        # once per key, then only the shapes are evaluated.
        key = (tuple([(args[i].dtype, args[i].dim()) for i in self.array_pos]), out_dtype)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(torch, args, out_dtype)
            self._plans[key] = plan
        return [(name, shape_of(args), dtype) for name, shape_of, dtype in plan[1]]

    def _plan(self, torch: Any, args: Any, out_dtype: Any) -> tuple[_Variant, list[Any]]:
        """The variant the functional form follows for inputs like `args`, and per output
        its name, shape recipe and dtype; raises when there is none or it is ambiguous."""
        cands = self.select(torch, args, lambda v: v.inputs)
        if not cands:
            raise self.no_variant(torch, args, self.inputs)
        if out_dtype is not None:
            keep = [
                v
                for v in cands
                if all(_torch_dtype(torch, p.dtype) == out_dtype for p in v.outputs)
            ]
            if not keep:
                have = sorted({p.dtype for v in cands for p in v.outputs})
                raise TypeError(
                    f"kernel family `{self.name}`: no variant for these inputs writes "
                    f"out_dtype={out_dtype} (they write {', '.join(have)}); variants:"
                    f"{self.variants_text()}"
                )
            cands = keep
        dtypes = {tuple(_torch_dtype(torch, p.dtype) for p in v.outputs) for v in cands}
        if len(dtypes) > 1:
            choices = sorted({str(d) for ds in dtypes for d in ds})
            raise ValueError(
                f"kernel family `{self.name}`: the element type of its output is ambiguous "
                f"for these inputs (variants write {', '.join(choices)}): pass "
                f"out_dtype=..., or call `{self.name}_out` with an output of your own"
            )
        v = cands[0]
        outs = []
        for o in v.outputs:
            hook = self.hooks.get(o.name)
            if hook is not None:
                recipe: _Recipe | None = ("hook", hook)
                why = ""
            else:
                recipe, why = _output_recipe(v, o)
            if recipe is None:
                raise NotImplementedError(
                    f"ferrocuda.torch: the functional form of `{self.name}` cannot allocate "
                    f"`{o.name}`: {why}. Give its shape when registering — "
                    f"register(module, output_shapes={{{self.name!r}: {{{o.name!r}: "
                    f"lambda inputs: (...)}}}}), a function of the inputs by name — or "
                    f"call the out-form `{self.name}_out` with a `{o.name}` of your own"
                )
            outs.append((o.name, _shape_function(v, recipe), _torch_dtype(torch, o.dtype)))
        return v, outs

    def derivable(self) -> str | None:
        """Why the functional form can never allocate an output (`None` when every variant
        sizes every output)."""
        for v in self.variants:
            for o in v.outputs:
                if o.name not in self.hooks:
                    recipe, why = _output_recipe(v, o)
                    if recipe is None:
                        return why
        return None


# ---------------------------------------------------------------------------------------
# Registration.


def _schema_type(p: ParamInfo) -> str:
    if p.is_array:
        return "Tensor"
    if p.dtype.startswith(("float", "bfloat", "complex")):
        return "float"
    if p.dtype == "bool":
        return "bool"
    return "int"


def _default_namespace(module: Module) -> str:
    manifest = json.loads(module.manifest)
    stem = Path(str(manifest.get("ptx", "kernels"))).name.split(".", 1)[0]
    ns = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "kernels"
    if ns[0].isdigit():
        ns = "_" + ns
    return ns


class TorchOps:
    """The torch operators of one ferrocuda module (see :func:`register`): per family ``f``,
    ``ops.f`` (functional) and ``ops.f_out`` (out-form), ``torch.library`` custom ops in
    namespace :attr:`namespace` (also ``torch.ops.<namespace>.f``)."""

    def __init__(self, module: Module, namespace: str, output_shapes: _OutputShapes | None) -> None:
        self.namespace = namespace
        self.module = module
        #: family -> (functional op or raising function, out-form op)
        self._ops: dict[str, tuple[Any, Any]] = {}
        self._families: dict[str, _FamilySpec] = {}
        #: family -> the kernels its operators registered (rebound when the module is reloaded)
        self._kernels: dict[str, tuple[OpKernel, ...]] = {}
        torch = _torch()
        # Kept alive with the operators (a dropped Library object deregisters them).
        self._lib = torch.library.Library(namespace, "FRAGMENT")
        kernels = json.loads(module.manifest)["kernels"]
        fams = module.families
        for name in fams:
            if f"{name}_out" in fams:
                raise ValueError(
                    f"module {module.source}: families `{name}` and `{name}_out` would share "
                    f"the operator name `{namespace}::{name}_out`"
                )
        unknown = set(output_shapes or {}) - set(fams)
        if unknown:
            raise ValueError(
                f"output_shapes names {sorted(unknown)}, which are not kernel families of "
                f"module {module.source}"
            )
        # Every family checked before any operator is registered (torch cannot drop one).
        for name in fams:
            self._families[name] = _FamilySpec(kernels, module.source, name, output_shapes)
        for name, fam in fams.items():
            spec = self._families[name]
            # Each operator's kernel: the family's launcher in operator mode, named for errors.
            out_kernel = fam.op_kernel(f"{namespace}::{name}_out")
            fn_kernel = fam.op_kernel(f"{namespace}::{name}")
            self._kernels[name] = (out_kernel, fn_kernel)
            out_op = self._out_op(torch, spec, out_kernel)
            fn_op = self._functional_op(torch, spec, fn_kernel)
            self._ops[name] = (fn_op, out_op)
        # Plain attributes (torch.compile traces plain lookups); a family whose name is one
        # of this class's own stays reachable through functional() and out().
        for name, (fn_op, out_op) in self._ops.items():
            for attr, value in ((name, fn_op), (f"{name}_out", out_op)):
                if not hasattr(type(self), attr) and attr not in self.__dict__:
                    self.__dict__[attr] = value

    # The operators.

    def _out_op(self, torch: Any, spec: _FamilySpec, kernel: OpKernel) -> Any:
        params = spec.params
        # Each written array its own alias set: Tensor(w0!) out.
        args = ", ".join(
            f"{_schema_type(p)}{f'(w{i}!)' if p.is_array and p.mutable else ''} {p.name}"
            for i, p in enumerate(params)
        )
        schema = f"({args}) -> ()"
        mutated = [p.name for p in params if p.is_array and p.mutable]
        qual = kernel.op

        def fake(*args: Any) -> None:
            spec.check_out_form(torch, args)

        doc = (
            f"``{qual}``: launches kernel family ``{spec.name}`` (writes "
            f"{', '.join(mutated) or 'nothing'}). Variants:{spec.variants_text()}"
        )
        # The registered kernel is the launcher's OpKernel itself: the whole body (device
        # check, detaching, the launch with sync="off") runs in the extension, no Python
        # frame between torch's dispatcher and the launch. It serves every family: the
        # out-form's parameters are the launcher's, in order.
        return self._define(torch, f"{spec.name}_out", schema, kernel, fake, bool(mutated), doc)

    def _define(
        self, torch: Any, name: str, schema: str, impl: Any, fake: Any, mutable: bool, doc: str
    ) -> Any:
        """Defines operator ``<namespace>::name`` with `impl` (a function, or an ``OpKernel``)
        for every device (CPU tensors are refused by `impl` itself) and `fake` for tracing;
        returns its ``OpOverload``.

        Defined with ``torch.library.Library`` rather than the ``custom_op`` decorator: the
        same dispatcher entries (schema with the pt2-compliant tag, one kernel for every
        backend, a fake implementation, and for mutating operators the C++ ADInplaceOrView
        fallback that bumps the mutated tensors' versions), without ``custom_op``'s Python
        Autograd and ADInplaceOrView kernels, which cost more per eager call than the
        launch itself (measured in BENCHMARKS.md, "Where Python users work"). Without an
        autograd formula the operators are not differentiable (torch's autograd fallback
        warns when a gradient is asked through them)."""
        lib = self._lib
        lib.define(name + schema, tags=(torch.Tag.pt2_compliant_tag,))
        lib.impl(name, impl, "CompositeExplicitAutograd")
        if mutable:
            lib.m.register_ad_inplace_or_view_fallback(name)
        torch.library.register_fake(f"{self.namespace}::{name}", fake, lib=lib)
        op = getattr(getattr(torch.ops, self.namespace), name).default
        try:
            op.__doc__ = doc
        except (AttributeError, TypeError):  # pragma: no cover - depends on torch's version
            pass
        return op

    def _functional_op(self, torch: Any, spec: _FamilySpec, kernel: OpKernel) -> Any:
        qual = kernel.op
        why = spec.derivable() if spec.outputs else "it writes no array"
        if why is not None:
            name, out_name = spec.name, (spec.outputs[0].name if spec.outputs else "")

            def refuse(*args: Any, **kwargs: Any) -> Any:
                raise NotImplementedError(
                    f"ferrocuda.torch: `{name}` has no functional form: {why}. "
                    + (
                        f"Give `{out_name}`'s shape when registering — register(module, "
                        f"output_shapes={{{name!r}: {{{out_name!r}: lambda inputs: (...)}}}}), "
                        f"a function of the inputs by name — or call `{name}_out` with a "
                        f"`{out_name}` of your own"
                        if spec.outputs
                        else f"call `{name}_out`"
                    )
                )

            refuse.__name__ = spec.name
            refuse.__doc__ = f"Not available: {why}; use ``{spec.name}_out``."
            return refuse
        inputs = spec.inputs
        args = ", ".join(f"{_schema_type(p)} {p.name}" for p in inputs)
        if spec.ambiguous:
            args += (", " if args else "") + "*, ScalarType? out_dtype=None"
        rets = (
            "Tensor" if len(spec.outputs) == 1 else f"({', '.join('Tensor' for _ in spec.outputs)})"
        )
        schema = f"({args}) -> {rets}"
        tensor_at = [i for i, p in enumerate(inputs) if p.is_array]
        names = [p.name for p in inputs]
        order = {p.index: n for n, p in enumerate(spec.params)}
        zero_filled = set.intersection(*(v.zero for v in spec.variants)) if spec.variants else set()
        single = len(spec.outputs) == 1

        in_pos = [order[p.index] for p in inputs]
        out_pos = [order[p.index] for p in spec.outputs]
        # Outputs the launcher zero-fills itself start uninitialized; the others as zeros.
        fills = [torch.empty if p.index in zero_filled else torch.zeros for p in spec.outputs]
        nparams = len(spec.params)
        first_tensor = tensor_at[0] if tensor_at else None

        def impl(*args: Any, out_dtype: Any = None) -> Any:
            device = args[first_tensor].device if first_tensor is not None else "cuda"
            if first_tensor is not None and device.type != "cuda":
                # Refused before anything is allocated on that device (the kernel refuses any
                # other input: the outputs are then on the first one's CUDA device).
                _refuse_non_cuda(args, tensor_at, names, qual)
            full: list[Any] = [None] * nparams
            for i, a in zip(in_pos, args, strict=True):
                full[i] = a
            outs = []
            for (_name, shape, dtype), i, fill in zip(
                spec.outputs_for(torch, args, out_dtype), out_pos, fills, strict=True
            ):
                o = fill(shape, dtype=dtype, device=device)
                full[i] = o
                outs.append(o)
            kernel(*full)  # the launch in operator mode, as the out-form's
            return outs[0] if single else tuple(outs)

        def fake(*args: Any, out_dtype: Any = None) -> Any:
            device = args[first_tensor].device if first_tensor is not None else "cuda"
            outs = [
                torch.empty(shape, dtype=dtype, device=device)
                for _name, shape, dtype in spec.outputs_for(torch, args, out_dtype)
            ]
            return outs[0] if single else tuple(outs)

        doc = (
            f"``{qual}``: kernel family ``{spec.name}`` on new outputs "
            f"({', '.join(p.name for p in spec.outputs)}), returned. Variants:"
            f"{spec.variants_text()}"
        )
        impl.__name__ = spec.name
        return self._define(torch, spec.name, schema, impl, fake, False, doc)

    # Access.

    @property
    def families(self) -> list[str]:
        """The module's family names, in manifest order."""
        return list(self._ops)

    def functional(self, family: str) -> Any:
        """``family``'s functional operator (or, when its outputs cannot be derived, the
        function that raises ``NotImplementedError`` saying why)."""
        return self._op(family)[0]

    def out(self, family: str) -> Any:
        """``family``'s out-form operator."""
        return self._op(family)[1]

    def _op(self, family: str) -> tuple[Any, Any]:
        try:
            return self._ops[family]
        except KeyError:
            raise AttributeError(
                f"ferrocuda.torch: module {self.module.source} has no kernel family "
                f"{family!r} (families: {', '.join(self._ops)})"
            ) from None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        ops = self.__dict__.get("_ops", {})
        if name in ops:
            return ops[name][0]
        if name.endswith("_out") and name[:-4] in ops:
            return ops[name[:-4]][1]
        raise AttributeError(
            f"ferrocuda.torch: namespace {self.namespace!r} has no operator {name!r} "
            f"(families: {', '.join(ops)}; each as `f` and `f_out`)"
        )

    def __dir__(self) -> list[str]:
        names = [n for f in self._ops for n in (f, f"{f}_out")]
        return sorted(set(names) | set(super().__dir__()))

    def __repr__(self) -> str:
        return (
            f"<ferrocuda.torch.TorchOps {self.namespace!r}: {len(self._ops)} families of "
            f"{self.module.source}>"
        )


def _refuse_non_cuda(args: tuple[Any, ...], tensor_at: list[int], names: list[str], qual: str):
    """Raises the operator kernels' ``ValueError`` for the first tensor of `args` not on a
    CUDA device (the text ``OpKernel`` raises)."""
    for i in tensor_at:
        t = args[i]
        if not t.is_cuda:
            raise ValueError(
                f"argument `{names[i]}` of {qual}: ferrocuda kernels run on CUDA tensors, "
                f"got a tensor on {t.device} (move it with .cuda())"
            )


def _manifest_key(module: Module) -> str:
    m = json.loads(module.manifest)
    return json.dumps(
        [
            [
                k["name"],
                k["family"],
                k["params"],
                k.get("same_shape"),
                k.get("require"),
                k.get("zero"),
            ]
            for k in m["kernels"]
        ],
        sort_keys=True,
    )


def register(
    module: Module,
    namespace: str | None = None,
    *,
    output_shapes: _OutputShapes | None = None,
) -> TorchOps:
    """Registers every kernel family of ``module`` (``ferrocuda.load(...)``, or
    ``ferrocuda.bundled()``) as torch custom operators and returns them as a :class:`TorchOps`.

    ``namespace``: the operators' ``torch.ops`` namespace (a Python identifier); by default
    ``"ferrocuda"`` for the bundled kernels and the module's crate name (its PTX file's stem,
    e.g. ``"my_kernels"``) otherwise. ``output_shapes``: for functional forms whose outputs
    the manifest does not size, ``{family: {output: fn}}`` where ``fn(inputs)`` gets the
    functional form's arguments by parameter name (tensors — fake ones while tracing — and
    scalars) and returns the output's shape.

    Registering the same module (or a reload of it with the same kernels) under the same
    namespace again returns the same operators; another module, or a changed one, under a
    namespace already taken raises ``ValueError`` (torch cannot drop operators: restart the
    process, or pick another namespace).
    """
    _torch()
    is_bundled = module.source == "<bundled>"
    if namespace is None:
        namespace = _BUNDLED_NS if is_bundled else _default_namespace(module)
        if not is_bundled and namespace in _RESERVED:
            raise ValueError(
                f"the crate name of module {module.source} gives the namespace {namespace!r}, "
                f"which is reserved: pass namespace=..."
            )
    elif not isinstance(namespace, str) or not _NS_RE.match(namespace):
        raise ValueError(
            f"argument `namespace`: expected a Python identifier (torch.ops.<namespace>), "
            f"got {namespace!r}"
        )
    elif namespace in _RESERVED and not (is_bundled and namespace == _BUNDLED_NS):
        raise ValueError(f"argument `namespace`: {namespace!r} is reserved; pick another")
    with _lock:
        have = _registered.get(namespace)
        if have is not None:
            if have.module is module:
                return have
            if _manifest_key(have.module) == _manifest_key(module):
                # The same kernels reloaded (a rebuilt crate): the operators launch the new ones.
                for name, fam in module.families.items():
                    for kernel in have._kernels[name]:
                        kernel.launcher = fam
                have.module = module
                return have
            raise ValueError(
                f"torch namespace {namespace!r} already holds the operators of module "
                f"{have.module.source}, whose kernels differ from {module.source}'s; torch "
                f"cannot drop operators: pass another namespace=..., or restart the process"
            )
        ops = TorchOps(module, namespace, output_shapes)
        _registered[namespace] = ops
        return ops


def bundled_ops() -> TorchOps:
    """The operators of the bundled kernels (namespace ``ferrocuda``), registered on first
    use; their functional and out-forms are also this module's attributes
    (``ferrocuda.torch.gelu``, ``ferrocuda.torch.add_out``)."""
    from . import bundled

    return register(bundled())


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    ops = bundled_ops()
    value = getattr(ops, name)
    globals()[name] = value  # later lookups (and torch.compile's) find a plain attribute
    return value


def __dir__() -> list[str]:
    try:
        ops = bundled_ops()
    except ImportError:
        return sorted(set(__all__) | set(globals()))
    return sorted(set(__all__) | set(globals()) | set(dir(ops)))


def _populate() -> None:
    """With torch importable, the bundled operators become module attributes at import."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    ops = bundled_ops()
    g = globals()
    for f in ops.families:
        # A family named like one of this module's functions stays reachable through
        # bundled_ops().
        for attr, value in ((f, ops.functional(f)), (f"{f}_out", ops.out(f))):
            g.setdefault(attr, value)


_populate()
