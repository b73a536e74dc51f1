"""SGEMM in f32 on the CUDA cores (no tensor cores, TF32 off): ferrocuda's ``matmul``
(``c = α·a@b + β·c``, the ``matmul_f32`` kernel) beside cuBLAS through PyTorch
(``torch.matmul(a, b, out=c)`` with ``torch.backends.cuda.matmul.allow_tf32 = False``), in one
process, GPU time by CUDA events.

Two operand layouts per size: ``nn`` (``a`` M×K and ``b`` K×N, both row-major) and ``nt``
(``b`` the transpose of a row-major N×K ``w``: ``x @ w.T``, column-major for the kernel).
Sizes are square (``4096``) or ``MxNxK``.

Method: inputs standard normal f32; every ferrocuda result checked once, on 64 rows drawn
at random (every column), against a float64 product with the bound of K + 2 roundings of
fused multiply-adds, ``(K + 2)·2^-24·|a||b|``; warm-up, then the median of ``--trials`` batches
of ``--reps`` launches (per-launch time = batch time / reps). TFLOPS = 2·M·N·K / time.
Writes the rows as JSON (``--out``) and prints a table with each size's ratio (ours over
cuBLAS's throughput).

    python bench/bench_sgemm.py --sizes 1024,2048,4096,8192,4095,4097 --out sgemm.json
"""

from __future__ import annotations

import argparse
import functools
import json

from bench_common import gpu_ms


def parse_sizes(text):
    """``4096`` or ``MxNxK`` entries, comma-separated, as (m, n, k) triples."""
    out = []
    for part in text.split(","):
        dims = [int(v) for v in part.lower().split("x")]
        out.append(tuple(dims * 3) if len(dims) == 1 else tuple(dims))
    return out


def check(torch, a, b, c, rows):
    """`None` when `c`'s `rows` lie within (K + 2)·2^-24·|a||b| of the float64 product, else
    a description of the worst element."""
    k = a.shape[1]
    ra, rb = a[rows].double(), b.double()
    want = ra @ rb
    tol = (k + 2) * 2.0**-24 * (ra.abs() @ rb.abs()) + 1e-30
    err = (c[rows].double() - want).abs()
    bad = err > tol
    if not bool(bad.any()):
        return None
    i = int(bad.flatten().nonzero()[0])
    r, j = divmod(i, c.shape[1])
    return (
        f"row {int(rows[r])} col {j}: error {float(err[r, j]):.3g} > bound {float(tol[r, j]):.3g}"
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="4096", help="square sizes, or MxNxK entries")
    ap.add_argument("--layouts", default="nn,nt", help="nn (a @ b) and/or nt (x @ w.T)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument(
        "--kernels",
        default="",
        help="also time these bundled kernels by name (same signature as matmul_f32)",
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import torch

    import ferrocuda

    dev = torch.cuda.get_device_name()
    print(
        f"device: {dev}; torch {torch.__version__}; ferrocuda {ferrocuda.__version__}", flush=True
    )
    torch.backends.cuda.matmul.allow_tf32 = False
    K = ferrocuda.kernels
    ours = [("ferrocuda matmul", K.matmul)]
    ours += [(f"ferrocuda {n}", getattr(K, n)) for n in args.kernels.split(",") if n]
    gen = torch.Generator(device="cuda").manual_seed(7)
    rows = []
    failed = 0
    for m, n, k in parse_sizes(args.sizes):
        flops = 2.0 * m * n * k
        reps = max(1, min(args.reps, int(4e12 / flops) or 1))
        for layout in args.layouts.split(","):
            a = torch.randn(m, k, device="cuda", generator=gen)
            if layout == "nn":
                b = torch.randn(k, n, device="cuda", generator=gen)
            elif layout == "nt":
                b = torch.randn(n, k, device="cuda", generator=gen).T
            else:
                raise SystemExit(f"--layouts: {layout!r} is not nn or nt")
            c = torch.empty(m, n, device="cuda")
            pick = torch.randperm(m, device="cuda", generator=gen)[:64]
            ms = {}
            impls = [(name, functools.partial(f, a, b, c, 1.0, 0.0), True) for name, f in ours]
            impls.append(
                ("cuBLAS torch.matmul", functools.partial(torch.matmul, a, b, out=c), False)
            )
            for impl, fn, mine in impls:
                verdict = None
                if mine:
                    c.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    verdict = check(torch, a, b, c, pick)
                    if verdict is not None:
                        failed += 1
                        print(f"  {m}x{n}x{k} {layout} {impl}: WRONG OUTPUT, {verdict}", flush=True)
                med, lo, hi = gpu_ms(torch, fn, reps, args.trials)
                ms[impl] = med
                row = {
                    "shape": [m, n, k],
                    "layout": layout,
                    "impl": impl,
                    "ms": med,
                    "ms_min": lo,
                    "ms_max": hi,
                    "tflops": flops / med / 1e9,
                    "checked": (verdict is None) if mine else None,
                }
                rows.append(row)
                print(
                    f"  {m:>6}x{n:>6}x{k:>6} {layout}  {impl:<32} {med:9.4f} ms  "
                    f"{row['tflops']:6.1f} TFLOPS",
                    flush=True,
                )
            peer = ms["cuBLAS torch.matmul"]
            for impl, _, mine in impls:
                if mine:
                    print(f"    {impl} / cuBLAS throughput: {peer / ms[impl]:.3f}", flush=True)
            del a, b, c
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": dev, "rows": rows}, f, indent=1)
    if failed:
        raise SystemExit(f"{failed} wrong results")


if __name__ == "__main__":
    main()
