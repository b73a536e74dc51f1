#!/usr/bin/env python3
"""Where a Python launch of ``ferrocuda.kernels.add`` (3 float32 arrays of 1024) spends its
host time, stage by stage, for ferrocuda's DeviceArray, CuPy arrays and torch tensors.

Needs a profiling build of the package (``maturin build --release --features launch-timing``;
``scripts/gpu-bundle.sh`` makes one in ``.gpu/wheels-timing``), whose launch path adds each
stage's time-stamp-counter ticks to a total (``ferrocuda_host::timing``); a normal build has no
such code. Method: per producer, warm-up, then rounds (interleaved across producers) of
``--calls`` back-to-back launches and one device synchronization; the table gives ns per
launch for each stage, their sum, and the wall time per call (which also holds what happens
before the launcher's Rust code runs: the Python call itself and pyo3's argument parsing).

Usage: PYTHONPATH=<profiling build> python3 bench/launch_profile.py [--calls 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sync", default="default")
    args = ap.parse_args()
    import cupy as cp
    import numpy as np
    import torch

    import ferrocuda

    timing = getattr(ferrocuda._ferrocuda, "_launch_timing", None)
    if timing is None:
        print("launch_profile: this ferrocuda is not a profiling build (--features launch-timing)")
        return 1
    add = ferrocuda.kernels.add
    n = 1024
    host = np.ones(n, np.float32)
    cases = {
        "DeviceArray": [ferrocuda.DeviceArray.from_numpy(host) for _ in range(3)],
        "CuPy": [cp.ones(n, cp.float32) for _ in range(3)],
        "torch": [torch.ones(n, device="cuda") for _ in range(3)],
    }
    stages: dict = {k: {} for k in cases}
    wall = {k: 0.0 for k in cases}
    calls = {k: 0 for k in cases}
    kw = {} if args.sync == "none" else {"sync": args.sync}
    for arrs in cases.values():
        for _ in range(2000):
            add(*arrs, **kw)
    torch.cuda.synchronize()
    timing()
    for _ in range(args.rounds):
        for name, arrs in cases.items():
            t0 = time.perf_counter_ns()
            for _ in range(args.calls):
                add(*arrs, **kw)
            torch.cuda.synchronize()
            wall[name] += time.perf_counter_ns() - t0
            calls[name] += args.calls
            for stage, ns, marks in timing():
                s = stages[name].setdefault(stage, [0.0, 0])
                s[0] += ns
                s[1] += marks
    names = list(cases)
    print("CuPy current stream read through: %s" % ferrocuda._ferrocuda._cupy_stream_source())
    print(
        "ns per launch (kernels.add, sync=%r), %d launches per producer"
        % (args.sync, calls[names[0]])
    )
    print("| stage | " + " | ".join(names) + " |")
    print("| --- |" + " ---: |" * len(names))
    # The stages as the launch path names them (ferrocuda_host::timing: each caller names
    # its stage), in the order they were first reached; one a producer never reached is 0.
    order = list(dict.fromkeys(s for k in names for s in stages[k]))
    for stage in order:
        print(
            "| %s | %s |"
            % (
                stage,
                " | ".join("%.0f" % (stages[k].get(stage, [0.0])[0] / calls[k]) for k in names),
            )
        )
    print(
        "| **sum of stages** | %s |"
        % " | ".join("%.0f" % (sum(v[0] for v in stages[k].values()) / calls[k]) for k in names)
    )
    print(
        "| **wall per call (incl. sync at the end of each round)** | %s |"
        % " | ".join("%.0f" % (wall[k] / calls[k]) for k in names)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
