"""GEMM on the tensor cores: ferrocuda's ``linear`` (``out = x @ w.T``, bf16 in, f32 out,
the sm_90a kernel on an H100/H200) and its portable ``mma.sync`` kernels (``linear_bf16_f32``,
f32 out, and ``linear_bf16``, bf16 out: what an A100 runs, and an H100 for arrays TMA cannot
read) beside cuBLAS through PyTorch (``F.linear``, bf16 out, and ``torch.matmul(x, w.T)``), in
one process, GPU time by CUDA events.

The portable kernels are run by name from the bundled module loaded without its sm_90a part
(the bundled PTX, cubins and manifest written to a temporary directory, the part's kernels
left out): there ``linear_bf16_f32`` has no TMA variant to hand the arrays to, so each call
runs exactly the ``mma.sync`` kernel, whatever the device (``--no-portable`` skips them).

Method: inputs random bf16 in [-1, 1); every ferrocuda result checked once against the
cuBLAS product in f32 (max abs error against a bound of K * 2^-20 * max|x w|, plus 2^-8 of
the largest value for a bf16 output); warm-up, then the median of ``--trials`` batches of
``--reps`` launches each (per-launch time = batch time / reps). TFLOPS = 2 M N K / time.
Writes the rows as JSON (``--out``) and prints a table.

    python bench/bench_gemm.py --sizes 4096,8192 --out gemm.json
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile

from bench_common import gpu_ms


def portable_module(ferrocuda, directory):
    """The bundled kernels without their parts (the sm_90a kernels), loaded from ``directory``:
    its ``linear_bf16_f32`` and ``linear_bf16`` are the portable ``mma.sync`` kernels, with
    no architecture or TMA variant a launch could choose instead."""
    return ferrocuda._bundled_without_parts(directory)


def max_error(out, ref):
    """The largest absolute difference between ``out`` and the f32 reference."""
    return (out.float() - ref).abs().max().item()


def other_type(torch, F, ferrocuda, t, m, n, k, args):
    """The rows of input type ``t`` (``f16`` or ``tf32``) at (m, n, k): ferrocuda's kernel and
    cuBLAS's through torch, each result checked against the f32 cuBLAS product."""
    flops = 2.0 * m * n * k
    if t == "f16":
        dtype, ours = torch.float16, ferrocuda.kernels.linear
        out = torch.empty(m, n, device="cuda", dtype=torch.float16)
    elif t == "tf32":
        dtype, ours = torch.float32, ferrocuda.kernels.linear_tf32
        out = torch.empty(m, n, device="cuda", dtype=torch.float32)
    else:
        raise SystemExit(f"--types: {t!r} is not f16 or tf32")
    x = (torch.rand(m, k, device="cuda") * 2 - 1).to(dtype)
    w = (torch.rand(n, k, device="cuda") * 2 - 1).to(dtype)
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = x.float() @ w.float().T
    top = ref.abs().max().item()
    mine = functools.partial(ours, x, w, out)
    try:
        mine()
    except ValueError as e:
        # A shape no kernel of the family takes (TF32's tensor maps need rows of a multiple
        # of 16 bytes; it has no portable member): recorded as refused, cuBLAS still timed.
        print(f"  {m}x{n}x{k} {t}: refused: {e}", flush=True)
        mine = None
    err = max_error(out, ref) if mine is not None else 0.0
    # f32 sums of K terms; TF32 operands keep 10 mantissa bits; an f16 output rounds once.
    bound = k * 2.0**-20 * top + 1e-6
    bound += k * 2.0**-9 if t == "tf32" else 2.0**-10 * top
    ok = err <= bound
    if not ok:
        print(f"  {m}x{n}x{k} {t}: WRONG OUTPUT, max error {err} > {bound}", flush=True)
    del ref
    torch.backends.cuda.matmul.allow_tf32 = t == "tf32"
    reps = max(1, min(args.reps, int(2e12 / flops) or 1))
    rows, ms = [], {}
    impls = [
        (f"ferrocuda {'linear_tf32' if t == 'tf32' else 'linear f16'}", mine, ok),
        (f"cuBLAS F.linear ({t})", functools.partial(F.linear, x, w), None),
    ]
    for impl, fn, checked in impls:
        if fn is None:
            rows.append({"shape": [m, n, k], "impl": impl, "refused": True, "checked": None})
            continue
        med, lo, hi = gpu_ms(torch, fn, reps, args.trials)
        ms[impl] = med
        row = {
            "shape": [m, n, k],
            "impl": impl,
            "ms": med,
            "ms_min": lo,
            "ms_max": hi,
            "tflops": flops / med / 1e9,
            "checked": checked,
        }
        rows.append(row)
        print(
            f"  {m:>6}x{n:>6}x{k:>6}  {impl:<40} {med:9.4f} ms  {row['tflops']:7.1f} TFLOPS",
            flush=True,
        )
    torch.backends.cuda.matmul.allow_tf32 = False
    (a, _, _), (b, _, _) = impls
    if a in ms:
        print(f"    {a} / cuBLAS throughput: {ms[b] / ms[a]:.3f}", flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="4096,8192", help="square sizes, or MxNxK entries")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--epilogue",
        action="store_true",
        help="also time the fused bias + GELU kernel (linear_bias_gelu, bf16 out) against "
        "torch's F.gelu(x @ w.T + b) and F.gelu(F.linear(x, w, b))",
    )
    ap.add_argument(
        "--types",
        default="",
        help="also time these input types against cuBLAS: f16 (linear, f16 out, against "
        "F.linear in f16) and tf32 (linear_tf32, f32 in and out, against F.linear with TF32 "
        "allowed), comma-separated; 'only' before them skips the bf16 rows",
    )
    ap.add_argument(
        "--no-portable",
        dest="portable",
        action="store_false",
        help="skip the portable mma.sync kernels",
    )
    args = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F

    import ferrocuda

    dev = torch.cuda.get_device_name()
    cc = torch.cuda.get_device_capability()
    print(f"device: {dev}, compute capability {cc}; torch {torch.__version__}", flush=True)
    rows = []
    fam = ferrocuda.kernels.linear
    tmp = tempfile.TemporaryDirectory()
    portable = portable_module(ferrocuda, tmp.name) if args.portable else None
    types = [t for t in args.types.split(",") if t]
    only = "only" in types
    for spec in args.sizes.split(","):
        m, n, k = (int(v) for v in spec.split("x")) if "x" in spec else (int(spec),) * 3
        flops = 2.0 * m * n * k
        for t in types:
            if t != "only":
                rows += other_type(torch, F, ferrocuda, t, m, n, k, args)
        if only:
            continue
        x = torch.rand(m, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
        w = torch.rand(n, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
        out = torch.empty(m, n, device="cuda", dtype=torch.float32)
        out16 = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        impls = [
            ("ferrocuda linear (f32 out)", functools.partial(fam, x, w, out), out),
            ("ferrocuda linear (bf16 out)", functools.partial(fam, x, w, out16), out16),
        ]
        if portable is not None:
            out_p = torch.empty(m, n, device="cuda", dtype=torch.float32)
            out_h = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            impls += [
                (
                    "ferrocuda portable mma.sync (f32 out)",
                    functools.partial(portable.linear_bf16_f32, x, w, out_p),
                    out_p,
                ),
                (
                    "ferrocuda portable mma.sync (bf16 out)",
                    functools.partial(portable.linear_bf16, x, w, out_h),
                    out_h,
                ),
            ]
        ref = x.float() @ w.float().T
        top = ref.abs().max().item()
        checked = {}
        for impl, fn, dst in impls:
            fn()
            err = max_error(dst, ref)
            bound = k * 2.0**-20 * top + 1e-6
            if dst.dtype == torch.bfloat16:
                bound += 2.0**-8 * top
            checked[impl] = err <= bound
            if not checked[impl]:
                print(f"  {m}x{n}x{k} {impl}: WRONG OUTPUT, max error {err} > {bound}", flush=True)
        del ref
        reps = max(1, min(args.reps, int(2e12 / flops) or 1))
        timed = [(impl, fn) for impl, fn, _ in impls] + [
            ("cuBLAS F.linear (bf16 out)", functools.partial(F.linear, x, w)),
            ("cuBLAS matmul x @ w.T (bf16 out)", functools.partial(torch.matmul, x, w.T)),
        ]
        if args.epilogue:
            b = torch.rand(n, device="cuda", dtype=torch.bfloat16) * 2 - 1
            outg = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            fused = functools.partial(ferrocuda.kernels.linear_bias_gelu, x, w, b, outg)
            fused()
            s = x.float() @ w.float().T + b.float()
            want = F.gelu(s)
            err = (outg.float() - want).abs().max().item()
            bnd = 1.13 * (k * 2.0**-20 * top + 2.0**-22 * s.abs().max().item()) + 2.0**-8 * (
                want.abs().max().item()
            )
            del s, want
            checked["ferrocuda linear_bias_gelu (bf16 out)"] = err <= bnd
            if err > bnd:
                print(f"  {m}x{n}x{k} linear_bias_gelu: WRONG OUTPUT, {err} > {bnd}", flush=True)
            timed += [
                ("ferrocuda linear_bias_gelu (bf16 out)", fused),
                ("torch F.gelu(x @ w.T + b)", lambda x=x, w=w, b=b: F.gelu(x @ w.T + b)),
                (
                    "torch F.gelu(F.linear(x, w, b))",
                    lambda x=x, w=w, b=b: F.gelu(F.linear(x, w, b)),
                ),
            ]
        ms = {}
        for impl, fn in timed:
            med, lo, hi = gpu_ms(torch, fn, reps, args.trials)
            ms[impl] = med
            row = {
                "shape": [m, n, k],
                "impl": impl,
                "ms": med,
                "ms_min": lo,
                "ms_max": hi,
                "tflops": flops / med / 1e9,
                "checked": checked.get(impl),
            }
            rows.append(row)
            print(
                f"  {m:>6}x{n:>6}x{k:>6}  {impl:<40} {med:9.4f} ms  {row['tflops']:7.1f} TFLOPS",
                flush=True,
            )
        base = ms["cuBLAS F.linear (bf16 out)"]
        for impl, _, _ in impls:
            print(f"    {impl} / cuBLAS throughput: {base / ms[impl]:.3f}", flush=True)
        if args.epilogue:
            ours = ms["ferrocuda linear_bias_gelu (bf16 out)"]
            for peer in ("torch F.gelu(x @ w.T + b)", "torch F.gelu(F.linear(x, w, b))"):
                print(f"    linear_bias_gelu speedup over {peer}: {ms[peer] / ours:.3f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": dev, "cc": list(cc), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
