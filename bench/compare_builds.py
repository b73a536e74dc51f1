#!/usr/bin/env python3
"""Launch overhead of two or more builds of ferrocuda in one run: ``bench/launch_interleaved.py``
runs in child processes that take the installations in turn (for two: A B, B A, A B, …; for
more, each round of children rotated by one), so that drifts of the host hit every build alike.
Prints, per variant, the median µs/call of each build over all its rounds and its ratio to the
first build; then the same paired within each process (below).

Usage: python3 bench/compare_builds.py SITE_A SITE_B [SITE_C …] [--labels before,after,…]
           [--pairs 3] [--rounds 15] [--calls 1000] [--warmup 1] [--cpu N]

``--warmup`` children of each build run first and are not counted: a fresh host's first
processes run measurably slower (clocks, caches, the driver's first loads), which would
otherwise weigh on the build that happens to go first.

Every child runs on one CPU (``--cpu``; by default the first CPU local to GPU 0, from
``/sys/bus/pci/devices/<its bus id>/local_cpulist``): on a host with several NUMA nodes a
process scheduled far from the GPU launches measurably slower, peers and ferrocuda alike,
and which child lands where is chance. ``--cpu -1`` leaves placement to the scheduler. Each
child's median of each peer is printed too, so that a child that ran slow shows.

A host may put a whole process in a slower state (seen on H200 hosts: ``torch.add`` at 6.2 or
at 8.7–9.4 µs per call, by child, pinned or not, whichever build): the second table divides
each variant by its peer *in the same process* (CuPy variants by ``cupy.add``, the others by
``torch.add``) before comparing the builds, which takes that state out.

Each SITE is a directory holding an installed ``ferrocuda`` (``pip install --target``); it
goes first on its children's PYTHONPATH. ``--label-a``/``--label-b`` name two builds too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PEERS = ("torch.add(out=)", "cupy.add(out=)")


def gpu_local_cpu() -> int:
    """The first CPU local to GPU 0 (its PCI device's ``local_cpulist``), else -1."""
    try:
        bus = subprocess.run(
            ["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        # nvidia-smi writes an 8-digit domain (00000000:19:00.0); sysfs a 4-digit one.
        dom, rest = bus.split(":", 1)
        path = f"/sys/bus/pci/devices/{dom[-4:]}:{rest}".lower() + "/local_cpulist"
        with open(path) as f:
            first = f.read().strip().split(",")[0].split("-")[0]
        return int(first)
    except (OSError, ValueError, subprocess.CalledProcessError):
        return -1


def run_once(site: str, rounds: int, calls: int, cpu: int) -> dict[str, list[float]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_interleaved.py")
    out = subprocess.run(
        [sys.executable, script, "--json", "--rounds", str(rounds), "--calls", str(calls)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if cpu >= 0 else None,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def peer_of(variant: str) -> str:
    """The peer a variant is divided by: CuPy's add for CuPy arrays, torch's otherwise."""
    return "cupy.add(out=)" if variant.startswith("cupy") else "torch.add(out=)"


def orders(n: int, pairs: int) -> list[list[int]]:
    """The builds' order in each round of children: A B, B A, … for two; rotations for more."""
    if n == 2:
        return [[0, 1] if k % 2 == 0 else [1, 0] for k in range(pairs)]
    return [[(i + k) % n for i in range(n)] for k in range(pairs)]


def table(title: str, labels: list[str], values: list[dict[str, list[float]]], skip=()) -> None:
    print(title)
    print()
    head = " | ".join(labels)
    ratios = " | ".join(f"{b}/{labels[0]}" for b in labels[1:])
    print(f"| variant | {head} | {ratios} |")
    print("| --- |" + " ---: |" * (2 * len(labels) - 1))
    for variant in values[0]:
        if variant in skip:
            continue
        meds = [statistics.median(v.get(variant, [float("nan")])) for v in values]
        cells = " | ".join(f"{m:.3f}" for m in meds)
        rel = " | ".join(f"{m / meds[0]:.3f}" for m in meds[1:])
        print(f"| {variant} | {cells} | {rel} |")
    print()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sites", nargs="+")
    ap.add_argument("--labels", default=None)
    ap.add_argument("--label-a", default="before")
    ap.add_argument("--label-b", default="after")
    ap.add_argument("--pairs", type=int, default=3, help="rounds of one child per build")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--cpu", type=int, default=None)
    args = ap.parse_args()
    sites = args.sites
    if len(sites) < 2:
        ap.error("give at least two sites")
    if args.labels:
        labels = args.labels.split(",")
    elif len(sites) == 2:
        labels = [args.label_a, args.label_b]
    else:
        labels = [f"build{i}" for i in range(len(sites))]
    if len(labels) != len(sites):
        ap.error("one label per site")
    cpu = gpu_local_cpu() if args.cpu is None else args.cpu
    print(f"children on CPU {cpu}" if cpu >= 0 else "children placed by the scheduler")
    raw: list[dict[str, list[float]]] = [{} for _ in sites]
    # Per child: each variant's median over its own peer's median in the same process.
    norm: list[dict[str, list[float]]] = [{} for _ in sites]
    for _ in range(args.warmup):
        for site in sites:
            run_once(site, 2, args.calls, cpu)
    for k, order in enumerate(orders(len(sites), args.pairs)):
        for i in order:
            got = run_once(sites[i], args.rounds, args.calls, cpu)
            for variant, xs in got.items():
                raw[i].setdefault(variant, []).extend(xs)
                peer = got.get(peer_of(variant))
                if peer:
                    ratio = statistics.median(xs) / statistics.median(peer)
                    norm[i].setdefault(variant, []).append(ratio)
            seen = ", ".join(f"{p} {statistics.median(got[p]):.3f}" for p in PEERS if p in got)
            print(f"child {k} {labels[i]}: peers' medians (µs/call): {seen}")
    print()
    table("Medians over all rounds of each build (µs/call):", labels, raw)
    table(
        "Paired within each process: a variant's median over its peer's median in the same "
        "child, the median of those over the children of each build:",
        labels,
        norm,
        skip=PEERS,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
