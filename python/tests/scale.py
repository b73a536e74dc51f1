"""Repetition counts of the GPU tests, scaled down under ``compute-sanitizer``.

The GPU run script sets ``FERROCUDA_SANITIZER=1`` when it runs this suite under
``compute-sanitizer`` (memcheck, racecheck), where kernels run one to two orders of magnitude
slower. Every test still runs each of its code paths; only repetitions shrink (trials, soak
launches, spin-kernel lengths). The figures that RELIABILITY.md quotes (100 of 100 trials,
10^5 soak launches) come from runs without the sanitizer.
"""

from __future__ import annotations

import os

#: True when the suite runs under compute-sanitizer (set by the GPU run script).
UNDER_SANITIZER = os.environ.get("FERROCUDA_SANITIZER") == "1"


def reps(full: int, sanitized: int) -> int:
    """``full`` normally, ``sanitized`` under compute-sanitizer."""
    return sanitized if UNDER_SANITIZER else full
