"""Attention kernels of several builds side by side in one process: each candidate is a kernel
by name, of the installed wheel (``ferrocuda.kernels``) or of another build's module loaded
from its manifest (``--module NAME=PATH``: the ``ferrocuda_kernels.json`` of a ``cargo
build``'s output directory beside its PTX and cubins), with torch SDPA's own pick beside them.
Rounds alternate the candidates (each a batch of calls timed by CUDA events), so that a drift
of the clocks falls on all alike; every candidate's result is checked against torch's flash
backend first. Ratios are per round against the first candidate (time over its time).

    python bench/attention_ab.py --module new=new/ferrocuda_kernels.json \\
        --kernels attention_bf16_sm90,new:attention_bf16_sm90,new:attention_bf16_d64_sm90 \\
        --dims 64 --seqs 1024,4096
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--module",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="another build's manifest, named for --kernels (repeatable)",
    )
    ap.add_argument(
        "--kernels",
        default="attention_bf16_sm90",
        help="comma-separated [module:]kernel (no module: the installed wheel's)",
    )
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqs", default="1024,4096,16384")
    ap.add_argument("--causal", default="0,1", help="which masks: 0, 1 or 0,1")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--tokens", type=int, default=16384, help="B * S")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import ferrocuda

    modules = {"installed": ferrocuda.kernels}
    for spec in args.module:
        name, sep, path = spec.partition("=")
        if not sep or not name or name in modules:
            sys.exit(f"--module {spec!r}: expected a new NAME=PATH")
        modules[name] = ferrocuda.load(path)
    cands = {}
    for spec in args.kernels.split(","):
        mod, sep, kernel = spec.rpartition(":")
        mod = mod if sep else "installed"
        if mod not in modules:
            sys.exit(f"--kernels {spec!r}: no module {mod!r} (--module NAME=PATH)")
        cands[spec] = getattr(modules[mod], kernel)
    names = list(cands)
    first = names[0]
    dtype = torch.float16 if "f16" in names[0].replace("bf16", "") else torch.bfloat16
    print(f"device: {torch.cuda.get_device_name()}; candidates: {', '.join(names)}")
    print("modules: " + ", ".join(args.module or ["(the wheel's only)"]))
    rows = []
    for d in (int(x) for x in args.dims.split(",")):
        for s in (int(x) for x in args.seqs.split(",")):
            b, h = max(1, args.tokens // s), args.heads
            hkv = args.kv_heads or h
            q, k, v = (torch.randn(b, n, s, d, device="cuda", dtype=dtype) for n in (h, hkv, hkv))
            out = torch.empty_like(q)
            gqa = {"enable_gqa": True} if hkv != h else {}
            for causal in (bool(int(c)) for c in args.causal.split(",")):
                scale = 1 / math.sqrt(d)
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
                for name, fn in cands.items():
                    out.fill_(float("nan"))
                    fn(q, k, v, out, scale, int(causal))
                    torch.cuda.synchronize()
                    err = (out.float() - want.float()).abs().max().item()
                    if not err < 0.02:
                        sys.exit(f"{name} D={d} S={s} causal={causal}: max |out - flash| {err}")
                c = int(causal)
                calls = {n: functools.partial(f, q, k, v, out, scale, c) for n, f in cands.items()}
                calls["sdpa_best"] = functools.partial(
                    F.scaled_dot_product_attention, q, k, v, is_causal=causal, **gqa
                )
                times = {n: [] for n in calls}
                for fn in calls.values():
                    fn()
                for _ in range(args.rounds):
                    for n, fn in calls.items():
                        e0, e1 = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                        e0.record()
                        for _ in range(args.reps):
                            fn()
                        e1.record()
                        e1.synchronize()
                        times[n].append(e0.elapsed_time(e1) / args.reps)
                flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
                med = {n: statistics.median(t) for n, t in times.items()}
                row = {"D": d, "S": s, "B": b, "H": h, "H_kv": hkv, "causal": causal}
                row.update({f"{n}_ms": m for n, m in med.items()})
                row.update({f"{n}_tflops": flops / m / 1e9 for n, m in med.items()})
                # Per round: each candidate's time over the first's (below 1: faster).
                for n in names[1:]:
                    row[f"{n}_over_first"] = statistics.median(
                        o / i for o, i in zip(times[n], times[first], strict=True)
                    )
                rows.append(row)
                cols = "  ".join(f"{n} {row[f'{n}_tflops']:6.1f}" for n in names)
                ratios = "  ".join(f"{n} {med['sdpa_best'] / med[n]:.3f}" for n in names)
                print(
                    f"D={d:3d} S={s:6d} causal={causal!s:5}  {cols}  sdpa "
                    f"{row['sdpa_best_tflops']:6.1f} TFLOPS | vs sdpa: {ratios}",
                    flush=True,
                )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {"device": torch.cuda.get_device_name(), "candidates": names, "rows": rows},
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
