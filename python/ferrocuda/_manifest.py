"""The kernels' manifest read in Python: parameters, and the output shapes its ``same_shape``
groups and ``require`` rules imply (for the JAX functions' result declarations, and for any
front end that must declare a kernel's outputs before it runs). The torch operators
(``ferrocuda.torch``) and the generated stubs (``ferrocuda._stubs``) read kernels through
:class:`KernelInfo` too.

Indices in ``same_shape``, ``require`` and ``zero`` are positions in a kernel's full
parameter list (``json.loads(module.manifest)["kernels"][i]["params"]``, scratch parameters
included); rule operands are ``{"int": v}``, ``{"scalar": i}``, ``{"len": i}`` (element
count), ``{"dim": [i, axis]}`` and ``{"ptr": i}``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["KernelInfo", "ParamInfo", "check_rules", "derive_shapes"]


class ParamInfo:
    __slots__ = ("dtype", "index", "kind", "mutable", "name", "rank")

    def __init__(self, index: int, p: Mapping[str, Any]) -> None:
        self.index = index
        self.name: str = p["name"]
        self.kind: str = p["kind"]
        self.dtype: str = p["dtype"]
        self.rank: int = p["rank"]
        self.mutable: bool = p["mutable"]

    @property
    def is_array(self) -> bool:
        return self.kind not in ("scalar", "scratch")

    @property
    def fixes_rank(self) -> bool:
        """Views and tensor maps have a rank; a slice takes any rank (its elements in C
        order)."""
        return self.kind in ("view", "tensormap")

    def describe(self) -> str:
        if self.kind == "scalar":
            return f"{self.name}: {self.dtype}"
        if self.kind == "slice":
            dims = "[...]"
        else:
            dims = "[" + ", ".join([":"] * self.rank) + "]"
        return f"{self.name}: {'mut ' if self.mutable else ''}{self.dtype}{dims}"


class KernelInfo:
    """One kernel's manifest entry: its visible parameters and shape rules."""

    def __init__(self, k: Mapping[str, Any]) -> None:
        self.name: str = k["name"]
        self.family: str = k["family"]
        self.arch: str | None = k.get("arch")
        self.all = [ParamInfo(i, p) for i, p in enumerate(k["params"])]
        self.params = [p for p in self.all if p.kind != "scratch"]
        self.has_scratch = len(self.params) != len(self.all)
        self.inputs = [p for p in self.params if not p.mutable or not p.is_array]
        self.outputs = [p for p in self.params if p.mutable and p.is_array]
        self.same_shape: list[list[int]] = [list(g) for g in k.get("same_shape", [])]
        self.require: list[dict[str, Any]] = list(k.get("require", []))

    def signature(self) -> str:
        return f"{self.name}({', '.join(p.describe() for p in self.params)})"


def _operand(
    op: Mapping[str, Any],
    k: KernelInfo,
    shapes: Mapping[int, tuple[int, ...]],
    scalars: Mapping[int, Any],
) -> Any:
    """The value of a rule operand, or ``None`` when it is not known at trace time."""
    if "int" in op:
        return op["int"]
    if "len" in op:
        s = shapes.get(op["len"])
        return None if s is None else math.prod(s)
    if "dim" in op:
        i, d = op["dim"]
        s = shapes.get(i)
        return None if s is None or d >= len(s) else s[d]
    if "scalar" in op:
        return scalars.get(op["scalar"])
    return None  # "ptr": the addresses are XLA's, checked at run time


def derive_shapes(
    k: KernelInfo,
    shapes: dict[int, tuple[int, ...]],
    scalars: Mapping[int, Any],
    given: Mapping[str, Sequence[int]],
) -> None:
    """Fills ``shapes`` for each output of ``k`` from ``given``, ``same_shape`` and the
    ``==`` rules of ``require`` (indices are manifest parameter positions)."""
    for p in k.outputs:
        if p.name in given:
            shapes[p.index] = tuple(int(operator.index(d)) for d in given[p.name])
    partial: dict[int, list[int | None]] = {}
    changed = True
    while changed:
        changed = False
        for group in k.same_shape:
            known = next((shapes[i] for i in group if i in shapes), None)
            if known is not None:
                for i in group:
                    if i not in shapes:
                        shapes[i] = known
                        changed = True
        for rule in k.require:
            if rule.get("op") != "==":
                continue
            for a, b in ((rule["lhs"], rule["rhs"]), (rule["rhs"], rule["lhs"])):
                target = a.get("dim") or ([a["len"], None] if "len" in a else None)
                if target is None:
                    continue
                i, d = target
                if i in shapes or not k.all[i].is_array or not k.all[i].mutable:
                    continue
                v = _operand(b, k, shapes, scalars)
                if v is None:
                    continue
                p = k.all[i]
                if d is None:  # the element count: a 1-D slice, or a rank-1 view
                    if p.kind == "slice" or p.rank == 1:
                        shapes[i] = (int(v),)
                        changed = True
                    continue
                rank = p.rank if p.kind != "slice" else 1
                dims = partial.setdefault(i, [None] * rank)
                if d < rank and dims[d] is None:
                    dims[d] = int(v)
                    if all(x is not None for x in dims):
                        shapes[i] = tuple(int(x) for x in dims if x is not None)
                    changed = True
    missing = [p.name for p in k.outputs if p.index not in shapes]
    if missing:
        raise ValueError(
            f"{k.name}: the shape of output(s) {', '.join(f'`{m}`' for m in missing)} "
            "follows from no same_shape group or require rule of the manifest; give it: "
            f"out_shapes={{{', '.join(f'{m!r}: (...)' for m in missing)}}}"
        )


def _param_of(op: Mapping[str, Any]) -> int | None:
    """The parameter a rule operand reads (``None`` for a literal)."""
    for key in ("dim", "len", "scalar", "ptr"):
        if key in op:
            v = op[key]
            return int(v[0]) if isinstance(v, list) else int(v)
    return None


_CMP = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class RuleError(ValueError):
    """A kernel's ``require`` rule that does not hold for the arguments (:func:`check_rules`):
    a family tries its next variant whose types fit before raising it."""


def check_rules(
    k: KernelInfo, shapes: Mapping[int, tuple[int, ...]], scalars: Mapping[int, Any]
) -> None:
    """Checks every ``require`` rule that can be evaluated at trace time; the first that fails
    is a :class:`RuleError` naming the argument."""
    for rule in k.require:
        op = rule.get("op")
        lhs = _operand(rule["lhs"], k, shapes, scalars)
        if lhs is None:
            continue
        if op == "finite":
            ok = math.isfinite(float(lhs))
        elif op == "divides":
            rhs = _operand(rule["rhs"], k, shapes, scalars)
            if rhs is None:
                continue
            ints = isinstance(lhs, int) and isinstance(rhs, int)
            ok = ints and (rhs % lhs == 0 if lhs else rhs == 0)
        else:
            rhs = _operand(rule["rhs"], k, shapes, scalars)
            if rhs is None or op not in _CMP:
                continue
            ok = _CMP[op](lhs, rhs)
        if not ok:
            idx = _param_of(rule["lhs"])
            if idx is None:
                idx = _param_of(rule["rhs"])
            arg = k.all[idx].name if idx is not None and idx < len(k.all) else "?"
            msg = rule.get("message") or "a requirement of the kernel does not hold"
            raise RuleError(f"{k.name}: argument `{arg}`: {msg}")
