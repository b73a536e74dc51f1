"""ferrocuda's environment variables for the pure-Python package.

The table (name, kind, who reads it, values, default) is the ``ferrocuda-config`` crate's, read
through the extension; values are parsed by its rules, so Python spells every variable as Rust
does (README.md, "Environment variables"): a switch is ``1`` or ``0``, an empty value counts as
unset, and a value a variable does not take is a ``ValueError`` naming it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from ._ferrocuda import _env_value, _env_vars

__all__ = ["Var", "count", "flag", "get", "path", "variables"]


class Var(NamedTuple):
    """One environment variable of the table."""

    name: str
    #: ``switch``, ``choice``, ``path``, ``list``, ``words``, ``count`` or ``text``.
    kind: str
    #: ``library`` (what a user's program reads) or ``tools`` (tests, benchmarks, scripts).
    scope: str
    read_by: str
    values: str
    default: str


def variables() -> list[Var]:
    """Every ``FERROCUDA_*`` variable, in the README's order."""
    return [Var(*row) for row in _env_vars()]


def get(name: str) -> bool | str | os.PathLike[str] | list[str] | int | None:
    """The value of ``name`` parsed by its kind; ``None`` when unset (a switch: its default).

    ``KeyError`` for a name not in the table, ``ValueError`` for a value it does not take."""
    return _env_value(name)


def flag(name: str) -> bool:
    """A switch's value (``1``/``0``; its default when unset)."""
    v = _env_value(name)
    if not isinstance(v, bool):
        raise TypeError(f"{name} is not a switch")
    return v


def count(name: str, default: int) -> int:
    """A count's value, ``default`` when unset or empty."""
    v = _env_value(name)
    if v is None:
        return default
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"{name} is not a count")
    return v


def path(name: str) -> Path | None:
    """A path variable's value, ``None`` when unset or empty."""
    v = _env_value(name)
    if v is None:
        return None
    if isinstance(v, (bool, int, list)):
        raise TypeError(f"{name} is not a path")
    return Path(v)
