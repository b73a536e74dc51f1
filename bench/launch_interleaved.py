#!/usr/bin/env python3
"""Launch overhead of ferrocuda ``add`` variants measured *interleaved* (one batch of each
variant in turn, repeated), so that slow drifts of the host (clock, core migration) hit every
variant alike. Used to tell a real per-variant cost from an artefact of measuring the rows of
``python_bench.py`` one after another.

Usage: python3 bench/launch_interleaved.py [--rounds 40] [--calls 1000] [--json]

Bound launches (``add.bind(...)``, called per launch) are among the variants when the installed
ferrocuda has ``bind``.

``--json`` prints one JSON object (variant -> list of µs/call per round) instead of the table,
for ``bench/compare_builds.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import json

    import cupy as cp
    import numpy as np
    import torch

    import ferrocuda

    add = ferrocuda.kernels.add
    n = 1024
    c = [cp.ones(n, cp.float32) for _ in range(3)]
    t = [torch.ones(n, device="cuda") for _ in range(3)]
    d = [ferrocuda.DeviceArray.from_numpy(np.ones(n, np.float32)) for _ in range(3)]
    variants = {
        "DeviceArray {}": lambda: add(*d),
        "cupy {}": lambda: add(*c),
        "cupy sync='default'": lambda: add(*c, sync="default"),
        "cupy sync=None": lambda: add(*c, sync=None),
        "cupy check_pointers=False": lambda: add(*c, check_pointers=False),
        "torch {}": lambda: add(*t),
        "torch sync='default'": lambda: add(*t, sync="default"),
        "torch sync='off'": lambda: add(*t, sync="off"),
        "torch sync=None": lambda: add(*t, sync=None),
        "torch check_pointers=False": lambda: add(*t, check_pointers=False),
        "torch.add(out=)": lambda: torch.add(t[0], t[1], out=t[2]),
        "cupy.add(out=)": lambda: cp.add(c[0], c[1], out=c[2]),
    }
    if hasattr(add, "bind"):  # bound launches (absent from builds before them)
        variants.update(
            {
                "DeviceArray bound": add.bind(*d),
                "cupy bound": add.bind(*c),
                "cupy bound sync='event'": add.bind(*c, sync="event"),
                "torch bound": add.bind(*t),
                "torch bound sync='off'": add.bind(*t, sync="off"),
            }
        )

    def sync():
        torch.cuda.synchronize()

    times = {k: [] for k in variants}
    for f in variants.values():
        for _ in range(200):
            f()
    sync()
    for _ in range(args.rounds):
        for k, f in variants.items():
            t0 = time.perf_counter()
            for _ in range(args.calls):
                f()
            sync()
            times[k].append((time.perf_counter() - t0) / args.calls * 1e6)
    if args.json:
        print(json.dumps(times))
        return 0
    print("| variant (interleaved) | µs/call median | p10-p90 |")
    print("| --- | ---: | ---: |")
    for k, xs in times.items():
        xs.sort()
        print(
            f"| {k} | {statistics.median(xs):.3f} "
            f"| {xs[len(xs) // 10]:.2f}-{xs[9 * len(xs) // 10]:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
