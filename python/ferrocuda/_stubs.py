"""Type stubs of a module's launchers, generated from its manifest.

``python -m ferrocuda._stubs`` prints the stub of the bundled kernels (``kernels.pyi``, which
the package ships and a test compares with this output); ``stub_text(module, name)`` renders
one for a module of your own kernels (``ferrocuda.load(...)``), to save as a ``.pyi`` beside
the code that imports it.

Each launcher gets a protocol with its exact call signature: the parameters by name, in
order (positional or keyword), arrays typed ``_ArrayLike`` (anything a launcher takes: CAI,
DLPack, ferrocuda and NumPy arrays), scalars ``int`` or ``float`` by their element type, and
the launch options as keywords. Launchers with the same signature share one protocol.
"""

from __future__ import annotations

import json
import keyword
import sys
from typing import Any

#: Scalar element types whose parameters take Python ``int`` (the rest take ``float``).
_INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})

_OPTIONS = (
    "stream: _StreamLike = None",
    "sync: _SyncLike = None",
    "grid: _Dim3 | None = None",
    "block: _Dim3 | None = None",
    "shared_mem: int | None = None",
    "check_pointers: bool = True",
)


def _caller_params(kernel: dict[str, Any]) -> list[dict[str, Any]]:
    """The parameters a caller passes (scratch workspaces are the launcher's)."""
    return [p for p in kernel["params"] if p["kind"] != "scratch"]


def _py_type(params: list[dict[str, Any]]) -> str:
    """The Python type of one parameter position across a family's variants."""
    if any(p["kind"] != "scalar" for p in params):
        return "_ArrayLike"
    if all(p["dtype"] in _INT_DTYPES for p in params):
        return "int"
    # A float parameter takes int too (and a type checker's float accepts int).
    return "float"


def _signature(kernels: list[dict[str, Any]]) -> tuple[tuple[str, str], ...] | None:
    """``(name, type)`` per parameter, or None when the kernels do not agree on the names
    (then only positional calls are possible and the stub stays generic)."""
    first = [p["name"] for p in _caller_params(kernels[0])]
    cols = [_caller_params(k) for k in kernels]
    if any([p["name"] for p in c] != first for c in cols):
        return None
    if any(keyword.iskeyword(n) or not n.isidentifier() for n in first):
        return None
    return tuple((n, _py_type([c[i] for c in cols])) for i, n in enumerate(first))


def _def(name: str, sig: tuple[tuple[str, str], ...], returns: str) -> list[str]:
    """A method of the protocol, laid out as the formatter lays out a long signature."""
    args = ["self", *(f"{n}: {t}" for n, t in sig), "*", *_OPTIONS]
    return [
        f"    def {name}(",
        *(f"        {a}," for a in args),
        f"    ) -> {returns}: ...",
    ]


def _protocol(cls: str, sig: tuple[tuple[str, str], ...], family: bool) -> list[str]:
    kind = "family" if family else "kernel"
    names = ", ".join(n for n, _ in sig)
    lines = [
        "@type_check_only",
        f"class {cls}(Protocol):",
        f'    """A {kind} launcher taking ({names})."""',
        "",
        *_def("__call__", sig, "None"),
        *_def("bind", sig, "BoundLaunch"),
        "    def __getitem__(self, config: tuple[Any, ...], /) -> ConfiguredLauncher: ...",
        "    @property",
        "    def name(self) -> str: ...",
    ]
    if family:
        lines += ["    @property", "    def kernels(self) -> tuple[Kernel, ...]: ..."]
    else:
        lines += [
            "    @property",
            "    def family(self) -> str: ...",
            "    @property",
            "    def params(self) -> tuple[tuple[str, str, str, int, bool], ...]: ...",
            "    @property",
            "    def signature(self) -> str: ...",
        ]
    return lines


def stub_text(manifest: str, doc: str) -> str:
    """The ``.pyi`` text of a namespace holding a module's families and kernels (a family
    wins when both share a name, as in ``ferrocuda.kernels``), from the module's manifest
    (``Module.manifest``). ``doc`` is the stub's docstring."""
    kernels: list[dict[str, Any]] = json.loads(manifest)["kernels"]
    families: dict[str, list[dict[str, Any]]] = {}
    for k in kernels:
        families.setdefault(k["family"], []).append(k)
    entries: dict[str, tuple[list[dict[str, Any]], bool]] = {
        k["name"]: ([k], False) for k in kernels
    }
    entries.update({f: (ks, True) for f, ks in families.items()})

    protocols: dict[tuple[Any, ...], str] = {}
    body: list[str] = []
    attrs: list[str] = []
    for name in sorted(entries):
        ks, family = entries[name]
        sig = _signature(ks)
        if sig is None:
            attrs.append(f"{name}: {'Family' if family else 'Kernel'}")
            continue
        key = (sig, family)
        if key not in protocols:
            cls = f"_{'Family' if family else 'Kernel'}{len(protocols)}"
            protocols[key] = cls
            body += [*_protocol(cls, sig, family), ""]
        attrs.append(f"{name}: {protocols[key]}")

    head = [
        f'"""{doc}"""',
        "",
        "# Generated by ferrocuda._stubs from the module's manifest: do not edit by hand.",
        "",
        "from typing import Any, Protocol, TypeAlias, type_check_only",
        "",
        "from ._ferrocuda import (",
        "    BoundLaunch,",
        "    ConfiguredLauncher,",
        "    Family,",
        "    Kernel,",
        "    Module,",
        "    _Dim3,",
        "    _StreamLike,",
        "    _SyncLike,",
        ")",
        "",
        "#: An array argument: anything a launcher takes (CUDA Array Interface, DLPack,",
        "#: ferrocuda and NumPy arrays).",
        "_ArrayLike: TypeAlias = Any",
        "",
        "families: dict[str, Family]",
        "module: Module",
        "",
    ]
    return "\n".join(head + body + attrs) + "\n"


def bundled_stub() -> str:
    """The stub of ``ferrocuda.kernels`` (the package's ``kernels.pyi``)."""
    from . import bundled

    doc = (
        "Stub of ``ferrocuda.kernels``, the namespace generated at import from the bundled\n"
        "manifest: one :class:`~ferrocuda.Family` per kernel family and one\n"
        ":class:`~ferrocuda.Kernel` per kernel (a family wins when both share a name)."
    )
    return stub_text(bundled().manifest, doc)


if __name__ == "__main__":
    sys.stdout.write(bundled_stub())
