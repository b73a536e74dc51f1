"""The bf16 GEMM and the fused GEMM + bias + GELU under sustained load: ferrocuda's
``linear`` and ``linear_bias_gelu`` beside cuBLAS (``F.linear``) and torch's
``F.gelu(x @ w.T + b)``, each timed over many calls back to back (``--calls``, a few seconds
at 8192³) while ``nvidia-smi`` samples the SM clock and the board power every 20 ms.

``bench_gemm.py`` times a few calls at a time, which run at boost clocks; a training loop runs
for minutes, where an H100/H200 GEMM meets the board's power limit and the clock falls. This
prints, per case and round, the time per call and the mean SM clock and power over the loop
(the first 100 ms and the last 40 ms of samples left out).

    python bench/gemm_sustained.py --size 8192 --calls 1500 --rounds 2
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=8192, help="M = N = K")
    ap.add_argument("--calls", type=int, default=1500, help="calls per timed loop")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F

    import ferrocuda

    kern = ferrocuda.kernels
    n = args.size
    torch.manual_seed(0)
    x = torch.rand(n, n, device="cuda", dtype=torch.bfloat16) * 2 - 1
    w = torch.rand(n, n, device="cuda", dtype=torch.bfloat16) * 2 - 1
    b = torch.rand(n, device="cuda", dtype=torch.bfloat16) * 2 - 1
    o = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    cases = [
        ("ferrocuda linear", lambda: kern.linear(x, w, o)),
        ("ferrocuda linear_bias_gelu", lambda: kern.linear_bias_gelu(x, w, b, o)),
        ("cuBLAS F.linear", lambda: F.linear(x, w)),
        ("torch F.gelu(x @ w.T + b)", lambda: F.gelu(x @ w.T + b)),
    ]
    print(f"device: {torch.cuda.get_device_name()}; {n}³ bf16, {args.calls} calls per loop")
    for rnd in range(args.rounds):
        for name, fn in cases:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
            smi = subprocess.Popen(
                [
                    "nvidia-smi",
                    "--query-gpu=clocks.sm,power.draw",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    "20",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(0.3)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.calls):
                fn()
            end.record()
            torch.cuda.synchronize()
            smi.terminate()
            out = smi.communicate()[0]
            rows = [line.split(",") for line in out.strip().splitlines() if line.strip()]
            rows = rows[5:-2]
            clk = [float(r[0]) for r in rows]
            pw = [float(r[1]) for r in rows]
            ms = start.elapsed_time(end) / args.calls
            print(
                f"round {rnd} {name:28s} {ms:.4f} ms  SM clock mean {sum(clk) / len(clk):6.0f} MHz"
                f" (min {min(clk):.0f}, n={len(clk)})  power mean {sum(pw) / len(pw):5.0f} W",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
