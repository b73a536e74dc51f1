#!/usr/bin/env python3
"""Graph replay against direct launches: host wall time per kernel of a chain of ferrocuda
``add`` launches (1024 float32 elements each) issued directly, and of one replay of a CUDA
graph that captured the same chain, with torch (``torch.cuda.graph``) and with CuPy
(``Stream.begin_capture``), in each sync mode (the graph's content does not depend on the mode
when every array lives on the capturing stream; the direct launches' cost does).

Method, as ``launch_interleaved.py``: every variant's result is checked once (the chain gives
``1 + launches`` everywhere); warm-up; then rounds, each running one batch of every variant in
turn, so that drifts of the host hit all variants alike. A batch is ``--repeats`` runs of the
variant (``--launches`` direct launches, or one replay) followed by one synchronization of the
stream; per-kernel time = batch wall time / (repeats x launches). The median and p10-p90 over
rounds are printed; ``--json`` prints the per-round values instead.

Usage: python3 bench/graph_replay.py [--rounds 30] [--repeats 20] [--launches 100] [--json]
                                     [--libs torch,cupy] [--modes default,event,off]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def chain(add, a, b, bufs, mode):
    """``bufs[i] = a + (i + 1) * b``: one launch per element of ``bufs``."""

    def run():
        add(a, b, bufs[0], sync=mode)
        for i in range(1, len(bufs)):
            add(bufs[i - 1], b, bufs[i], sync=mode)

    return run


def torch_variants(torch, add, n, launches, modes):
    t = torch
    a, b = t.ones(n, device="cuda"), t.ones(n, device="cuda")
    bufs = [t.zeros(n, device="cuda") for _ in range(launches)]
    out = {}
    for mode in modes:
        direct = chain(add, a, b, bufs, mode)
        direct()
        t.cuda.synchronize()
        g = t.cuda.CUDAGraph()
        with t.cuda.graph(g):
            direct()
        out["torch direct, sync=%s" % mode] = direct
        out["torch graph replay, sync=%s" % mode] = g.replay

    def poison():
        for x in bufs:
            x.fill_(float("nan"))

    def last():
        return bufs[-1].cpu().numpy()

    return out, t.cuda.synchronize, poison, last


def cupy_variants(cp, add, n, launches, modes):
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        a, b = cp.ones(n, cp.float32), cp.ones(n, cp.float32)
        bufs = [cp.zeros(n, cp.float32) for _ in range(launches)]
    out = {}
    for mode in modes:
        run = chain(add, a, b, bufs, mode)

        def direct(run=run):
            with s:  # CuPy's interface names its current stream: the launches go on `s`
                run()

        direct()
        s.synchronize()
        with s:
            s.begin_capture()
            try:
                run()
            finally:
                graph = s.end_capture()
        out["cupy direct, sync=%s" % mode] = direct
        out["cupy graph launch, sync=%s" % mode] = lambda graph=graph: graph.launch(stream=s)

    def poison():
        with s:
            for x in bufs:
                x.fill(float("nan"))

    def last():
        return cp.asnumpy(bufs[-1], stream=s)

    return out, s.synchronize, poison, last


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--launches", type=int, default=100)
    ap.add_argument("--libs", default="torch,cupy")
    ap.add_argument("--modes", default="default,event,off")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import numpy as np

    import ferrocuda

    add, n = ferrocuda.kernels.add, 1024
    modes = [m for m in args.modes.split(",") if m]
    groups = []
    for lib in [x for x in args.libs.split(",") if x]:
        try:
            mod = __import__(lib)
        except Exception as e:  # noqa: BLE001 - a missing peer is a note, not a failure
            print("graph_replay: %s skipped: %s: %s" % (lib, type(e).__name__, e), file=sys.stderr)
            continue
        make = torch_variants if lib == "torch" else cupy_variants
        groups.append(make(mod, add, n, args.launches, modes))
    want = np.float32(1 + args.launches)
    for variants, sync, poison, last in groups:
        for name, f in variants.items():
            poison()
            sync()
            f()
            sync()
            got = last()
            if not (got == want).all():
                raise SystemExit("graph_replay: %s computed %r, not %r" % (name, got[:4], want))
    times = {name: [] for variants, *_ in groups for name in variants}
    for _ in range(args.rounds):
        for variants, sync, _poison, _last in groups:
            for name, f in variants.items():
                t0 = time.perf_counter()
                for _ in range(args.repeats):
                    f()
                sync()
                dt = time.perf_counter() - t0
                times[name].append(dt / (args.repeats * args.launches) * 1e6)
    if args.json:
        print(
            json.dumps({"launches": args.launches, "repeats": args.repeats, "us_per_kernel": times})
        )
        return 0
    print("| variant (%d launches, interleaved) | µs/kernel median | p10-p90 |" % args.launches)
    print("| --- | ---: | ---: |")
    for name, xs in times.items():
        xs = sorted(xs)
        if not xs:
            continue
        p10, p90 = xs[len(xs) // 10], xs[(9 * len(xs)) // 10]
        print("| %s | %.3f | %.2f-%.2f |" % (name, statistics.median(xs), p10, p90))
    return 0


if __name__ == "__main__":
    sys.exit(main())
