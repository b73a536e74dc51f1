"""Autotuning: pick the fastest of several kernels and launch configurations, per key.

``ferrocuda.autotune(launchers, configs)`` returns an :class:`Autotuned` launcher. Called like
the launchers it wraps, it computes a *key* from the arguments — each array's shape, element
type and strides, each scalar's type, the values of the parameters named in ``key=``, and the
device — and, the first time it sees a key, times every candidate (each launcher with each
configuration) on the caller's arguments, keeps the fastest in memory and on disk, and launches
it; later calls with the same key launch the winner directly::

    sum_rows = ferrocuda.autotune(
        [kernels.sum_rows],
        configs=[{"block": 128}, {"block": 256}, {"block": 512}, {}],  # {} = automatic
    )
    sum_rows(x, out)                     # times 4 candidates once for x's shape, then launches

Candidates may be different kernels too — the instances of a generic kernel with other tile
constants, or another algorithm for the same result — as long as they take the same arguments.

What tuning costs, per new key: for each candidate a bind of the arguments (every check a call
makes), ``warmup`` launches, one timed launch to size the measurement, then ``rounds`` rounds
of enough launches to fill ``min_time`` seconds (default 3 × 10 ms), each round ended by a
synchronization of the launch stream; the median round wins. With the defaults, about
``len(candidates) × 40 ms`` for short kernels, and a few launches each for long ones.

Arguments are not changed by tuning: the candidates write the arrays the kernels declare
mutable, so those are copied first and copied back afterwards (by the producer's library:
torch's ``clone``/``copy_``, else CuPy, which views any CUDA Array Interface object); the one
launch of the winner then runs on the original data. ``restore=False`` skips the copies for
kernels whose outputs do not depend on their previous contents (``add(a, b, out)``), and an
argument neither library can copy is a ``TypeError`` that says so.

Results on disk: ``$FERROCUDA_AUTOTUNE_CACHE``, else ``$FERROCUDA_HOME/autotune`` (see
:func:`ferrocuda.load` for ``FERROCUDA_HOME``), one JSON file per tuner — its name and its
candidates hashed, so a changed list of candidates starts afresh — holding per key (with the
device's compute capability, multiprocessor count and memory) the winner and every
candidate's time. ``cache=False`` keeps results in memory only.

Limits: the key describes the arguments, not their values (data-dependent kernels such as a
histogram are tuned on the first data they see, unless ``key=`` names what matters). Tuning
synchronizes, so it cannot happen during CUDA graph capture: a new key under torch's capture
raises ``RuntimeError``, under another library's the synchronization's
``NotImplementedError``; run one call before capturing (a key found on disk needs no tuning).
Launch options given per call (``stream``, ``sync``, ``check_pointers``) are passed through;
``grid``, ``block`` and ``shared_mem`` belong to the candidates.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import _config
from ._ferrocuda import (
    Family,
    Kernel,
    Launcher,
    _home_dir,
    device_properties,
    synchronize,
)

__all__ = ["Autotuned", "Candidate", "autotune"]

#: The launch options a configuration may set.
CONFIG_KEYS = frozenset({"grid", "block", "shared_mem"})


class Candidate:
    """One launcher with one launch configuration."""

    __slots__ = ("launcher", "options")

    def __init__(self, launcher: Launcher, options: Mapping[str, Any]) -> None:
        self.launcher = launcher
        self.options = dict(options)

    def describe(self) -> str:
        """``name`` and the options, as text: what the disk cache records."""
        opts = ", ".join(f"{k}={self.options[k]!r}" for k in sorted(self.options))
        return f"{self.launcher.name}({opts})"

    def __repr__(self) -> str:
        return f"<Candidate {self.describe()}>"


def _params(launcher: Launcher) -> tuple[tuple[str, str, str, int, bool], ...]:
    if isinstance(launcher, Kernel):
        return launcher.params
    if isinstance(launcher, Family):
        return launcher.kernels[0].params
    raise TypeError(f"autotune: {launcher!r} is not a ferrocuda Kernel or Family")


def _array_key(obj: Any) -> Hashable:
    """Shape, element type and strides of an array argument (what selects a kernel variant and
    decides its speed), read without copying; the type's name for anything else."""
    mod = type(obj).__module__
    if mod.startswith("torch"):
        return ("torch", tuple(obj.shape), str(obj.dtype), tuple(obj.stride()))
    if mod.startswith("cupy"):
        return ("cupy", obj.shape, obj.dtype.str, obj.strides)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        return ("cai", tuple(cai["shape"]), cai["typestr"], cai.get("strides"))
    shape, dtype = getattr(obj, "shape", None), getattr(obj, "dtype", None)
    if shape is not None and dtype is not None:
        return (type(obj).__name__, tuple(shape), str(dtype), getattr(obj, "strides", None))
    return (type(obj).__name__,)


def _device_hint(args: Sequence[Any]) -> int | None:
    """The device of the first array whose library says it cheaply (torch, CuPy, ferrocuda);
    None when none does (the launch's own device is recorded when tuning)."""
    for a in args:
        mod = type(a).__module__
        if mod.startswith("torch") and hasattr(a, "device"):
            return a.device.index
        if mod.startswith("cupy") and hasattr(a, "device"):
            return int(a.device.id)
        dev = getattr(a, "device", None)
        if mod.startswith("ferrocuda") and isinstance(dev, int):
            return dev
    return None


def _cache_dir() -> Path:
    return _config.path("FERROCUDA_AUTOTUNE_CACHE") or Path(_home_dir()) / "autotune"


def _optional(name: str) -> Any:
    """An array library the arguments come from, imported when needed (None if absent)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


class _Copier:
    """Copies of the mutable arguments, made before tuning and written back after it."""

    def __init__(self, args: Sequence[Any], indices: Iterable[int], names: Sequence[str]) -> None:
        self.saved: list[tuple[Any, Any, Any]] = []  # (original, copy, library sync)
        for i in indices:
            a = args[i]
            if type(a).__module__.startswith("torch"):
                torch = _optional("torch")
                self.saved.append((a, a.detach().clone(), torch.cuda.synchronize))
                continue
            cupy = _optional("cupy")
            if cupy is None or not hasattr(a, "__cuda_array_interface__"):
                raise TypeError(
                    f"autotune: argument `{names[i]}` ({type(a).__name__}) is written by the "
                    "candidates and must be copied before tuning and restored after it, which "
                    "needs torch (for tensors) or CuPy (for any CUDA Array Interface object); "
                    "pass restore=False if the kernel's results do not depend on what the "
                    "array held"
                )
            view = cupy.asarray(a)
            self.saved.append((view, view.copy(), cupy.cuda.Device().synchronize))
        self.sync()

    def sync(self) -> None:
        for fn in {id(s[2]): s[2] for s in self.saved}.values():
            fn()

    def restore(self) -> None:
        for orig, copy, _ in self.saved:
            if hasattr(orig, "copy_"):
                orig.copy_(copy)
            else:
                _optional("cupy").copyto(orig, copy)
        self.sync()


class Autotuned:
    """A launcher that runs the fastest of its candidates for each key (see the module
    documentation of :mod:`ferrocuda.tuning`)."""

    def __init__(
        self,
        candidates: Sequence[Candidate],
        *,
        key: Sequence[str] | Callable[..., Hashable] | None,
        restore: bool,
        warmup: int,
        rounds: int,
        min_time: float,
        cache: bool,
        name: str | None,
    ) -> None:
        if not candidates:
            raise ValueError("autotune: no candidates")
        self.candidates = tuple(candidates)
        first = _params(self.candidates[0].launcher)
        self._names = [p[0] for p in first]
        for c in self.candidates[1:]:
            names = [p[0] for p in _params(c.launcher)]
            if names != self._names:
                raise ValueError(
                    f"autotune: candidates take different parameters: {c.launcher.name} takes "
                    f"({', '.join(names)}), {self.candidates[0].launcher.name} takes "
                    f"({', '.join(self._names)})"
                )
        self._mutable = [i for i, p in enumerate(first) if p[4]] if restore else []
        if callable(key) or key is None:
            self._key_fn = key
            self._key_idx: list[int] = []
        else:
            if isinstance(key, str):
                raise TypeError("autotune: key= takes a sequence of parameter names, not a str")
            unknown = [k for k in key if k not in self._names]
            if unknown:
                raise ValueError(
                    f"autotune: key names {', '.join(map(repr, unknown))}, which "
                    f"{'is' if len(unknown) == 1 else 'are'} not a parameter "
                    f"({', '.join(self._names)})"
                )
            self._key_fn = None
            self._key_idx = [self._names.index(k) for k in key]
        if warmup < 0 or rounds < 1 or not min_time > 0:
            raise ValueError("autotune: warmup >= 0, rounds >= 1 and min_time > 0 are required")
        self.warmup, self.rounds, self.min_time = warmup, rounds, min_time
        described = [c.describe() for c in self.candidates]
        digest = hashlib.sha256(json.dumps(described).encode()).hexdigest()[:16]
        self.name = name or self.candidates[0].launcher.name
        self._file = (_cache_dir() / f"{self.name}-{digest}.json") if cache else None
        self._described = described
        self._best: dict[Hashable, int] = {}
        #: Per key tuned in this process: ``{candidate description: seconds per launch}``
        #: (``inf`` for a candidate that could not launch these arguments).
        self.timings: dict[Hashable, dict[str, float]] = {}
        self._disk: dict[str, Any] | None = None

    # ---- keys ----------------------------------------------------------------------------

    def _args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The arguments in parameter order (keywords for parameters placed)."""
        if not any(k in kwargs for k in self._names):
            return args
        full = list(args)
        for n in self._names[len(args) :]:
            if n not in kwargs:
                raise TypeError(f"autotune `{self.name}`: missing argument `{n}`")
            full.append(kwargs.pop(n))
        return tuple(full)

    def key(self, *args: Any) -> Hashable:
        """The key of these arguments (in parameter order)."""
        parts: list[Hashable] = [_device_hint(args)]
        for a in args:
            if isinstance(a, bool | int | float):
                parts.append(type(a).__name__)
            else:
                parts.append(_array_key(a))
        parts.extend(("=", i, args[i]) for i in self._key_idx)
        if self._key_fn is not None:
            parts.append(("fn", self._key_fn(*args)))
        return tuple(parts)

    # ---- calls -----------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Launches the fastest candidate for these arguments (tuning first for a new key);
        takes what the candidates take, and ``stream``, ``sync``, ``check_pointers``."""
        bad = CONFIG_KEYS & kwargs.keys()
        if bad:
            raise TypeError(
                f"autotune `{self.name}`: {', '.join(sorted(bad))} belong to the candidates' "
                "configurations, not to a call"
            )
        full = self._args(args, kwargs)
        k = self.key(*full)
        best = self._best.get(k)
        if best is None:
            best = self._tune(k, full, kwargs)
        c = self.candidates[best]
        c.launcher(*full, **c.options, **kwargs)

    def best(self, *args: Any, **kwargs: Any) -> Candidate:
        """The candidate the call with these arguments launches (tuning first for a new key,
        which runs the candidates on the arguments and restores them)."""
        full = self._args(args, kwargs)
        k = self.key(*full)
        if k not in self._best:
            self._tune(k, full, kwargs)
        return self.candidates[self._best[k]]

    # ---- tuning ----------------------------------------------------------------------------

    def _disk_entries(self) -> dict[str, Any]:
        if self._disk is None:
            self._disk = {}
            if self._file is not None and self._file.exists():
                try:
                    data = json.loads(self._file.read_text())
                except (OSError, ValueError) as e:
                    warnings.warn(
                        f"autotune `{self.name}`: ignoring the unreadable cache {self._file}: {e}",
                        stacklevel=3,
                    )
                    data = {}
                if data.get("candidates") == self._described:
                    self._disk = dict(data.get("entries", {}))
        return self._disk

    def _save(self, disk_key: str, entry: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._disk_entries()[disk_key] = entry
        self._file.parent.mkdir(parents=True, exist_ok=True)
        data = {"name": self.name, "candidates": self._described, "entries": self._disk}
        # Another process may write the same file: each writes whole files, by rename.
        fd, tmp = tempfile.mkstemp(dir=self._file.parent, prefix=self._file.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, self._file)

    def _time(self, bound: Any) -> float:
        """Seconds per launch of a bound candidate (median of the rounds)."""
        stream, device = bound.stream, bound.device
        for _ in range(self.warmup):
            bound()
        synchronize(stream, device)
        t0 = time.perf_counter()
        bound()
        synchronize(stream, device)
        once = max(time.perf_counter() - t0, 1e-7)
        n = max(1, min(10_000, math.ceil(self.min_time / once)))
        rounds = []
        for _ in range(self.rounds):
            t0 = time.perf_counter()
            for _ in range(n):
                bound()
            synchronize(stream, device)
            rounds.append((time.perf_counter() - t0) / n)
        return statistics.median(rounds)

    def _check_not_capturing(self, args: tuple[Any, ...]) -> None:
        """Tuning synchronizes, which a CUDA graph capture forbids: refuse it up front."""
        for a in args:
            if type(a).__module__.startswith("torch") and getattr(a, "is_cuda", False):
                torch = _optional("torch")
                if torch.cuda.is_current_stream_capturing():
                    raise RuntimeError(
                        f"autotune `{self.name}`: a new key while a CUDA graph is being "
                        "captured; tuning synchronizes, which would invalidate the capture. "
                        "Call once with these shapes before capturing."
                    )
                return

    def _tune(self, k: Hashable, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        device = None
        # The device of the launch, for the disk key: bind the first candidate that binds.
        errors: list[str] = []
        for c in self.candidates:
            try:
                device = c.launcher.bind(*args, **c.options, **kwargs).device
                break
            except (TypeError, ValueError, NotImplementedError) as e:
                errors.append(f"{c.describe()}: {e}")
        if device is None:
            raise ValueError(
                f"autotune `{self.name}`: no candidate takes these arguments:\n  "
                + "\n  ".join(errors)
            )
        props = device_properties(device)
        disk_key = json.dumps([repr(k), props["compute_capability"], props["multiprocessors"]])
        hit = self._disk_entries().get(disk_key)
        if hit is not None and hit.get("best") in self._described:
            best = self._described.index(hit["best"])
            self._best[k] = best
            self.timings[k] = dict(hit.get("seconds", {}))
            return best
        self._check_not_capturing(args)
        copier = _Copier(args, self._mutable, self._names) if self._mutable else None
        times: dict[str, float] = {}
        try:
            for c, d in zip(self.candidates, self._described, strict=True):
                try:
                    bound = c.launcher.bind(*args, **c.options, **kwargs)
                except (TypeError, ValueError, NotImplementedError) as e:
                    # A candidate that cannot launch these arguments (a block beyond the
                    # kernel's limit, a variant for other element types) is not a winner.
                    times[d] = math.inf
                    errors.append(f"{d}: {e}")
                    continue
                times[d] = self._time(bound)
        finally:
            if copier is not None:
                copier.restore()
        best = min(range(len(self.candidates)), key=lambda i: times[self._described[i]])
        if math.isinf(times[self._described[best]]):
            raise ValueError(
                f"autotune `{self.name}`: no candidate launches these arguments:\n  "
                + "\n  ".join(errors)
            )
        self._best[k] = best
        self.timings[k] = times
        self._save(
            disk_key,
            {"best": self._described[best], "seconds": times, "device": props},
        )
        return best

    def __repr__(self) -> str:
        return f"<ferrocuda.Autotuned {self.name}: {len(self.candidates)} candidates>"


def autotune(
    launchers: Launcher | Sequence[Launcher],
    configs: Sequence[Mapping[str, Any]] | None = None,
    *,
    key: Sequence[str] | Callable[..., Hashable] | None = None,
    restore: bool = True,
    warmup: int = 2,
    rounds: int = 3,
    min_time: float = 0.01,
    cache: bool = True,
    name: str | None = None,
) -> Autotuned:
    """A launcher that times every ``launcher × config`` candidate on the first call per key
    and launches the fastest (see :mod:`ferrocuda.tuning`).

    ``launchers``: one kernel or family launcher, or several taking the same parameters.
    ``configs``: launch configurations, dicts of ``grid``, ``block`` and ``shared_mem``
    (``{}``: the kernel's automatic configuration; default ``[{}]``). ``key``: parameter names
    whose *values* enter the key (scalars such as a size), or a function of the arguments
    returning a hashable added to it. ``restore``: copy the arrays the kernels write before
    tuning and back after it. ``warmup``, ``rounds``, ``min_time``: the measurement. ``cache``:
    keep results on disk. ``name``: the tuner's name on disk (default: the first launcher's).
    """
    ls: list[Launcher] = [launchers] if isinstance(launchers, Launcher) else list(launchers)
    cfgs = [{}] if configs is None else list(configs)
    if not cfgs:
        raise ValueError("autotune: configs is empty (use [{}] for the automatic configuration)")
    for cfg in cfgs:
        if not isinstance(cfg, Mapping):
            raise TypeError(f"autotune: a configuration is a dict, got {type(cfg).__name__}")
        bad = set(cfg) - CONFIG_KEYS
        if bad:
            raise ValueError(
                f"autotune: unknown configuration key(s) {', '.join(sorted(bad))} "
                f"(a configuration sets {', '.join(sorted(CONFIG_KEYS))})"
            )
    for launcher in ls:
        if not isinstance(launcher, Launcher):
            raise TypeError(
                f"autotune: {launcher!r} is not a ferrocuda launcher (a Kernel or Family)"
            )
    candidates = [Candidate(launcher, cfg) for launcher in ls for cfg in cfgs]
    return Autotuned(
        candidates,
        key=key,
        restore=restore,
        warmup=warmup,
        rounds=rounds,
        min_time=min_time,
        cache=cache,
        name=name,
    )
