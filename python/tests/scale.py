"""Repetition counts of the GPU tests, scaled down under ``compute-sanitizer``.

The GPU run script sets ``FERROCUDA_SANITIZER=1`` when it runs this suite under
``compute-sanitizer`` (memcheck, racecheck), where kernels run one to two orders of magnitude
slower. Every test still runs each of its code paths; only repetitions shrink (trials, soak
launches, spin-kernel lengths), and the kernel tests parametrized over every array library
run for CuPy, torch and ferrocuda's arrays (:func:`libraries`). The figures that RELIABILITY.md
quotes (100 of 100 trials, 10^5 soak launches) come from runs without the sanitizer.
"""

from __future__ import annotations

from ferrocuda import _config

#: True when the suite runs under compute-sanitizer (set by the GPU run script).
UNDER_SANITIZER = _config.flag("FERROCUDA_SANITIZER")


#: The array libraries whose parametrizations run under compute-sanitizer. The others hand the
#: same kernels the same layouts (the device code and its memory accesses do not depend on
#: the producer), and the whole parametrization runs without the sanitizer; the host-side
#: paths of each library (streams, DLPack, read-only arrays) are covered under the sanitizer
#: by the interop, stream and lifetime tests, which are not narrowed.
SANITIZER_LIBRARIES = ("cupy", "torch", "ferrocuda")


def libraries(names: list[str] | tuple[str, ...]) -> list[str]:
    """``names``, narrowed to :data:`SANITIZER_LIBRARIES` under compute-sanitizer."""
    if not UNDER_SANITIZER:
        return list(names)
    return [n for n in names if n in SANITIZER_LIBRARIES]


def reps(full: int, sanitized: int) -> int:
    """``full`` normally, ``sanitized`` under compute-sanitizer."""
    return sanitized if UNDER_SANITIZER else full
