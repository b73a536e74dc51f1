"""Two builds of the attention kernels side by side in one process: the installed wheel's
(``ferrocuda.kernels``) and another build's module loaded from its manifest (``--module``,
the ``ferrocuda_kernels.json`` of a ``cargo build``'s output directory beside its PTX and
cubins), each by the kernel's name, with torch SDPA's own pick beside them. Rounds alternate
the three (each a batch of calls timed by CUDA events), so that a drift of the clocks falls on
all alike; every result of the other build is checked against torch's flash backend first.

    python bench/attention_ab.py --module new/ferrocuda_kernels.json --kernel attention_bf16_sm90 \
        --dims 64,128 --seqs 1024,4096
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
    ap.add_argument("--module", required=True, help="the other build's manifest")
    ap.add_argument("--kernel", default="attention_bf16_sm90")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqs", default="1024,4096,16384")
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

    other = ferrocuda.load(args.module)
    old, new = getattr(ferrocuda.kernels, args.kernel), getattr(other, args.kernel)
    dtype = torch.float16 if "f16" in args.kernel.replace("bf16", "") else torch.bfloat16
    print(f"device: {torch.cuda.get_device_name()}; {args.kernel}: installed against {args.module}")
    rows = []
    for d in (int(x) for x in args.dims.split(",")):
        for s in (int(x) for x in args.seqs.split(",")):
            b, h = max(1, args.tokens // s), args.heads
            hkv = args.kv_heads or h
            q, k, v = (torch.randn(b, n, s, d, device="cuda", dtype=dtype) for n in (h, hkv, hkv))
            out = torch.empty_like(q)
            gqa = {"enable_gqa": True} if hkv != h else {}
            for causal in (False, True):
                scale = 1 / math.sqrt(d)
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
                for name, fn in (("installed", old), ("other", new)):
                    out.fill_(float("nan"))
                    fn(q, k, v, out, scale, int(causal))
                    torch.cuda.synchronize()
                    err = (out.float() - want.float()).abs().max().item()
                    if not err < 0.02:
                        sys.exit(f"{name} D={d} S={s} causal={causal}: max |out - flash| {err}")
                c = int(causal)
                calls = {
                    "installed": functools.partial(old, q, k, v, out, scale, c),
                    "other": functools.partial(new, q, k, v, out, scale, c),
                    "sdpa_best": functools.partial(
                        F.scaled_dot_product_attention, q, k, v, is_causal=causal, **gqa
                    ),
                }
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
                # Per round: the other build's time over the installed one's (below 1: faster).
                pair = sorted(
                    o / i for o, i in zip(times["other"], times["installed"], strict=True)
                )
                row["other_over_installed"] = statistics.median(pair)
                rows.append(row)
                print(
                    f"D={d:3d} S={s:6d} causal={causal!s:5}  installed "
                    f"{row['installed_tflops']:6.1f}  other {row['other_tflops']:6.1f}  "
                    f"sdpa {row['sdpa_best_tflops']:6.1f} TFLOPS  other/installed time "
                    f"{row['other_over_installed']:.3f}  vs sdpa: installed "
                    f"{med['sdpa_best'] / med['installed']:.3f}, other "
                    f"{med['sdpa_best'] / med['other']:.3f}",
                    flush=True,
                )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
