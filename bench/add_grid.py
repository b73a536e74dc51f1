#!/usr/bin/env python3
"""``add`` bandwidth at 2^28 float32 by grid shape, against ``torch.add`` (same run, same GPU).

ferrocuda sizes an automatic grid to one resident wave (SMs x blocks per SM) and lets each
thread stride through the array; ``torch.add`` launches one block per chunk of work. This
script measures which grid shape the bundled ``add_f32`` prefers, so the default can be chosen
from data: the automatic grid, multiples of it, and one or two 16-byte chunks per thread.
GPU time by CUDA events over 10 back-to-back calls, median of 9 trials; outputs checked.

Usage: python3 bench/add_grid.py [--log2 28]
"""

from __future__ import annotations

import argparse
import statistics
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2", type=int, default=28)
    args = ap.parse_args()
    import torch

    import ferrocuda

    k = ferrocuda.kernels
    n = 1 << args.log2
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")
    out = torch.empty(n, device="cuda")
    want = a + b
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def gbps(call, reps=10, trials=9):
        call()
        torch.cuda.synchronize()
        ts = []
        for _ in range(trials):
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(reps):
                call()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) / 1e3 / reps)
        return 12 * n / statistics.median(ts) / 1e9

    rows = [("torch.add(out=)", gbps(lambda: torch.add(a, b, out=out)))]
    out.fill_(float("nan"))
    rows.append(("ferrocuda add, automatic grid", gbps(lambda: k.add(a, b, out))))
    assert torch.equal(out, want)
    chunks = n // 4
    for label, grid, block in [
        ("2 x automatic", None, 256),
        ("1 chunk / thread, block 256", chunks // 256, 256),
        ("2 chunks / thread, block 256", chunks // 512, 256),
        ("4 chunks / thread, block 256", chunks // 1024, 256),
        ("1 chunk / thread, block 128", chunks // 128, 128),
        ("1 chunk / thread, block 512", chunks // 512, 512),
        ("SMs x 4, block 256", sms * 4, 256),
        ("SMs x 16, block 256", sms * 16, 256),
        ("SMs x 32, block 256", sms * 32, 256),
        ("SMs x 64, block 256", sms * 64, 256),
    ]:
        if grid is None:
            continue
        out.fill_(float("nan"))
        rows.append(
            (
                f"ferrocuda add, grid {grid}: {label}",
                gbps(lambda g=grid, bl=block: k.add(a, b, out, grid=g, block=bl)),
            )
        )
        assert torch.equal(out, want), label
    t = rows[0][1]
    print("| add 2^%d float32 | GB/s | x torch.add |" % args.log2)
    print("| --- | ---: | ---: |")
    for label, g in rows:
        print(f"| {label} | {g:.0f} | {g / t:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
