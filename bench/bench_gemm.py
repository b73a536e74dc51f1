"""GEMM on the tensor cores: ferrocuda's ``linear`` (``out = x @ w.T``, bf16 in, f32 out,
the sm_90a kernel on an H100/H200) beside cuBLAS through PyTorch (``F.linear``, bf16 out, and
``torch.matmul(x, w.T)``), in one process, GPU time by CUDA events.

Method: inputs random bf16 in [-1, 1); every ferrocuda result checked once against the
cuBLAS product in f32 (max abs error against a bound of K * 2^-8 * max|x w| — the peer's own
bf16 output rounding dominates); warm-up, then the median of ``--trials`` batches of
``--reps`` launches each (per-launch time = batch time / reps). TFLOPS = 2 M N K / time.
Writes the rows as JSON (``--out``) and prints a table.

    python bench/bench_gemm.py --sizes 4096,8192 --out gemm.json
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys


def gpu_ms(torch, fn, reps, trials):
    """Median over ``trials`` batches of ``reps`` calls of ``fn``: milliseconds per call."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times), min(times), max(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="4096,8192", help="square sizes, or MxNxK entries")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F

    import ferrocuda

    dev = torch.cuda.get_device_name()
    cc = torch.cuda.get_device_capability()
    print(f"device: {dev}, compute capability {cc}; torch {torch.__version__}", flush=True)
    rows = []
    fam = ferrocuda.kernels.linear
    for spec in args.sizes.split(","):
        m, n, k = (int(v) for v in spec.split("x")) if "x" in spec else (int(spec),) * 3
        flops = 2.0 * m * n * k
        x = torch.rand(m, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
        w = torch.rand(n, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
        out = torch.empty(m, n, device="cuda", dtype=torch.float32)
        out16 = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        fam(x, w, out)
        fam(x, w, out16)
        ref = x.float() @ w.float().T
        err = (out - ref).abs().max().item()
        bound = k * 2.0**-20 * ref.abs().max().item() + 1e-6
        err16 = (out16.float() - ref).abs().max().item()
        checked = err <= bound and err16 <= bound + 2.0**-8 * ref.abs().max().item()
        if not checked:
            print(f"  {m}x{n}x{k}: WRONG OUTPUT, max error {err} > {bound}", flush=True)
        del ref
        reps = max(1, min(args.reps, int(2e12 / flops) or 1))
        for impl, fn in [
            ("ferrocuda linear (f32 out)", functools.partial(fam, x, w, out)),
            ("ferrocuda linear (bf16 out)", functools.partial(fam, x, w, out16)),
            ("cuBLAS F.linear (bf16 out)", functools.partial(F.linear, x, w)),
            ("cuBLAS matmul x @ w.T (bf16 out)", functools.partial(torch.matmul, x, w.T)),
        ]:
            med, lo, hi = gpu_ms(torch, fn, reps, args.trials)
            row = {
                "shape": [m, n, k],
                "impl": impl,
                "ms": med,
                "ms_min": lo,
                "ms_max": hi,
                "tflops": flops / med / 1e9,
                "checked": checked if impl.startswith("ferrocuda") else None,
            }
            rows.append(row)
            print(
                f"  {m:>6}x{n:>6}x{k:>6}  {impl:<36} {med:9.4f} ms  {row['tflops']:7.1f} TFLOPS",
                flush=True,
            )
        cublas = rows[-2]["ms"]
        print(
            f"    throughput / cuBLAS: f32 out {cublas / rows[-4]['ms']:.3f}, "
            f"bf16 out {cublas / rows[-3]['ms']:.3f}",
            flush=True,
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": dev, "cc": list(cc), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
