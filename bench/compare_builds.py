#!/usr/bin/env python3
"""Launch overhead of two builds of ferrocuda in one run: ``bench/launch_interleaved.py``
runs in child processes that alternate between the two installations (A B, B A, A B, …), so
that drifts of the host hit both builds alike. Prints, per variant, the median µs/call of each build
over all its rounds and the ratio B/A.

Usage: python3 bench/compare_builds.py SITE_A SITE_B [--label-a before] [--label-b after]
           [--pairs 3] [--rounds 15] [--calls 1000] [--warmup 1]

``--warmup`` children of each build run first and are not counted: a fresh host's first
processes run measurably slower (clocks, caches, the driver's first loads), which would
otherwise weigh on the build that happens to go first.

SITE_A/SITE_B are directories holding an installed ``ferrocuda`` (``pip install --target``);
each goes first on the child's PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys


def run_once(site: str, rounds: int, calls: int) -> dict[str, list[float]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_interleaved.py")
    out = subprocess.run(
        [sys.executable, script, "--json", "--rounds", str(rounds), "--calls", str(calls)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("site_a")
    ap.add_argument("site_b")
    ap.add_argument("--label-a", default="before")
    ap.add_argument("--label-b", default="after")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()
    acc: dict[str, dict[str, list[float]]] = {"a": {}, "b": {}}
    order = (("a", args.site_a), ("b", args.site_b))
    for _ in range(args.warmup):
        for _, site in order:
            run_once(site, 2, args.calls)
    for k in range(args.pairs):
        # A B, B A, A B, …: a drift within a pair (the host warming up) favours neither build.
        for key, site in order if k % 2 == 0 else order[::-1]:
            for variant, xs in run_once(site, args.rounds, args.calls).items():
                acc[key].setdefault(variant, []).extend(xs)
    print(
        f"| variant | {args.label_a} µs/call | {args.label_b} µs/call "
        f"| {args.label_b}/{args.label_a} |"
    )
    print("| --- | ---: | ---: | ---: |")
    for variant in acc["a"]:
        a = statistics.median(acc["a"][variant])
        b = statistics.median(acc["b"].get(variant, [float("nan")]))
        print(f"| {variant} | {a:.3f} | {b:.3f} | {b / a:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
