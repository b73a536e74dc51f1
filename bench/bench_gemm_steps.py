"""The tensor-core GEMM of "Writing kernels" (§13, §17), step by step: bf16 inputs, f32
accumulation and output, ``c = x · wᵀ`` for x (M × K) and w (N × K), each step a kernel that
ships or is tested in this repository, timed in one process beside cuBLAS:

1. ``mma_gemm_bf16`` (tests/device-kernels/src/mma.rs): the naive ``mma.sync`` loop, 64 × 64
   block tiles, 16 of K per step, operands staged in shared memory by element loads and
   stores, two block barriers per step, ``ldmatrix`` + ``mma.sync m16n8k16`` (it takes
   ``b = wᵀ`` row-major, K × N);
2. ``linear_bf16_f32``, portable (kernels/src/linear_sm80.rs): 128 × 128 × 32 tiles, 8 warps
   of 64 × 32, a 4-stage ``cp.async`` pipeline with one barrier per step, B pairs by one
   ``ldmatrix.x4`` — run by name from the bundled module without its sm_90a part, so that
   no TMA kernel can take the call;
3. ``linear`` on sm_90a (kernels/src/linear.rs): TMA loads into a multi-stage mbarrier ring,
   a producer warpgroup and two ``wgmma`` consumer warpgroups, persistent blocks;
4. cuBLAS: ``torch.matmul(x, w.T, out_dtype=torch.float32)`` where this torch has it,
   otherwise ``F.linear`` (bf16 out; said in the table).

Every result is checked against the cuBLAS product (max abs error below K · 2⁻²⁰ · max|x||w|
summed over K, the f32 accumulation bound for inputs in [-1, 1)). GPU time by CUDA events:
median of ``--trials`` batches of ``--reps`` calls. TFLOPS = 2 M N K / time.

    python bench/bench_gemm_steps.py --sizes 4096,8192 --out steps.json
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
from pathlib import Path

from bench_common import gpu_ms


def device_kernels(ferrocuda):
    """The test kernels (tests/device-kernels) as the GPU bundle or a local build has them."""
    here = Path(__file__).resolve()
    candidates = [
        here.parent.parent / "device-kernels" / "ferrocuda_device_kernels.json",
        Path.cwd() / ".gpu" / "device-kernels" / "ferrocuda_device_kernels.json",
        here.parent.parent
        / "target"
        / "tmp"
        / "device-kernels"
        / "sm_80"
        / "ferrocuda_device_kernels.json",
    ]
    for c in candidates:
        if c.exists():
            return ferrocuda.load(str(c))
    sys.exit("the test kernels are not built (scripts/gpu-bundle.sh ships them)")


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

    torch.backends.cuda.matmul.allow_tf32 = False  # the f32 reference in f32
    dev = torch.cuda.get_device_name()
    cc = torch.cuda.get_device_capability()
    print(f"device: {dev}, compute capability {cc}; torch {torch.__version__}", flush=True)
    tests = device_kernels(ferrocuda)
    tmp = tempfile.TemporaryDirectory()
    portable = ferrocuda._bundled_without_parts(tmp.name)
    rows = []
    for spec in args.sizes.split(","):
        m, n, k = (int(v) for v in spec.split("x")) if "x" in spec else (int(spec),) * 3
        flops = 2.0 * m * n * k
        torch.manual_seed(0)
        x = torch.rand(m, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
        w = torch.rand(n, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
        wt = w.t().contiguous()
        ref = x.float() @ w.float().t()
        bound = k * 2.0**-20 * 1.0 + 1e-6
        cublas = functools.partial(torch.matmul, x, w.t(), out_dtype=torch.float32)
        cublas_name = "cuBLAS torch.matmul(out_dtype=float32)"
        try:
            cublas()
        except TypeError:
            cublas = functools.partial(F.linear, x, w)
            cublas_name = "cuBLAS F.linear (bf16 out)"
        out = torch.empty(m, n, device="cuda", dtype=torch.float32)
        grid = ((n + 63) // 64, (m + 63) // 64, 1)
        naive = functools.partial(tests.mma_gemm_bf16, grid=grid, block=(128, 1, 1))
        steps = [
            ("1 naive mma.sync (mma_gemm_bf16)", functools.partial(naive, x, wt, out, m, n, k)),
            (
                "2 cp.async pipeline (linear_bf16_f32, portable)",
                functools.partial(portable.linear_bf16_f32, x, w, out),
            ),
            (
                "3 TMA + wgmma, warp-specialised (linear)",
                functools.partial(ferrocuda.kernels.linear, x, w, out),
            ),
        ]
        if cc < (9, 0):
            steps.pop()
        for name, fn in steps:
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = (out - ref).abs().max().item()
            if not err <= bound:
                sys.exit(f"{name} {m}x{n}x{k}: max abs error {err} over the bound {bound}")
            med, lo, hi = gpu_ms(torch, fn, args.reps, args.trials)
            rows.append(
                {
                    "step": name,
                    "m": m,
                    "n": n,
                    "k": k,
                    "ms": med,
                    "ms_min": lo,
                    "ms_max": hi,
                    "tflops": flops / med / 1e9,
                    "max_abs_err": err,
                }
            )
        med, lo, hi = gpu_ms(torch, cublas, args.reps, args.trials)
        rows.append(
            {
                "step": cublas_name,
                "m": m,
                "n": n,
                "k": k,
                "ms": med,
                "ms_min": lo,
                "ms_max": hi,
                "tflops": flops / med / 1e9,
            }
        )
        peer = rows[-1]["tflops"]
        print(f"\n{m} x {n} x {k}")
        print(f"{'step':52} {'ms':>9} {'TFLOPS':>8} {'x cuBLAS':>9}")
        for r in rows:
            if (r["m"], r["n"], r["k"]) == (m, n, k):
                print(f"{r['step']:52} {r['ms']:9.3f} {r['tflops']:8.1f} {r['tflops'] / peer:9.3f}")
    if args.out:
        meta = {"device": dev, "compute_capability": cc, "torch": torch.__version__}
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
