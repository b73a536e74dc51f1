"""Attention forward on the tensor cores: ferrocuda's ``attention`` (bf16 or f16 q, k, v of shape
(B, H, S, D), f32 accumulation, out of their type; the sm_90a kernel, and the portable ``mma.sync``
kernel ``attention_bf16`` that every GPU from sm_80 runs) beside PyTorch's
``F.scaled_dot_product_attention`` with its FlashAttention backend (FlashAttention-2) and
with the backend torch picks by itself (on an H100 with torch 2.11 usually cuDNN's), in one
process, GPU time by CUDA events.

Method: inputs standard normal in bf16, scale 1/sqrt(D); every ferrocuda result checked once
against the flash backend's (max abs difference below 0.02: both round P to bf16); warm-up,
then the median of ``--trials`` batches of ``--reps`` calls (time per call = batch / reps).
TFLOPS = 4 B H S_q S_kv D / time (two matmuls), halved for the causal mask. Writes the rows
as JSON (``--out``) and prints a table. ``--kv-heads N`` runs grouped-query attention (``k``
and ``v`` with N heads; torch with ``enable_gqa=True``).

    python bench/bench_attention.py --seqs 1024,4096,16384 --dims 64,128 --out attn.json
    python bench/bench_attention.py --seqs 4096 --dims 128 --heads 32 --kv-heads 8
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile

from bench_common import gpu_ms

#: The element types by name, and the names by torch's spelling.
DTYPES = {"bf16": lambda torch: torch.bfloat16, "f16": lambda torch: torch.float16}
NAMES = {"torch.bfloat16": "bf16", "torch.float16": "f16"}


def runners(ferrocuda, portable_kernels, F, sdpa_kernel, SDPBackend, q, k, v, out, causal):
    """The four calls on one set of inputs: ours (into ``out``; the family, then the portable
    kernel by name — ``_wide`` for D > 128), torch's flash backend, and torch's own choice."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    gqa = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
    # Head dimensions above 128: the wide kernel (the family's only member that takes them).
    wide = "_wide" if q.shape[-1] > 128 else ""
    portable_kernel = getattr(portable_kernels, f"attention_{NAMES[str(q.dtype)]}{wide}")

    def ours():
        ferrocuda.kernels.attention(q, k, v, out, scale, int(causal))

    def portable():
        portable_kernel(q, k, v, out, scale, int(causal))

    def flash():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)

    def best():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)

    return ours, portable, flash, best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seqs", default="1024,4096,16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--dtypes", default="bf16", help="bf16 and/or f16")
    ap.add_argument("--tokens", type=int, default=16384, help="B * S per run (B = tokens / S)")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, help="heads of k and v (default: --heads)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import ferrocuda

    dev = torch.cuda.get_device_name()
    # The portable kernel by name would run its sm_90a variant on an H100: load the bundled
    # module without its parts.
    tmp = tempfile.TemporaryDirectory()
    portable_kernels = ferrocuda._bundled_without_parts(tmp.name)
    rows = []
    points = [
        (dt, d, s)
        for dt in args.dtypes.split(",")
        for d in [int(x) for x in args.dims.split(",")]
        for s in [int(x) for x in args.seqs.split(",")]
    ]
    for dt, d, s in points:
        b = max(1, args.tokens // s)
        h, hkv = args.heads, args.kv_heads or args.heads
        q, k, v = (
            torch.randn(b, heads, s, d, device="cuda", dtype=DTYPES[dt](torch))
            for heads in (h, hkv, hkv)
        )
        out = torch.empty_like(q)
        for causal in (False, True):
            ours, portable, flash, best = runners(
                ferrocuda, portable_kernels, F, sdpa_kernel, SDPBackend, q, k, v, out, causal
            )
            peer = flash()
            err = 0.0
            for fn in (ours, portable):
                out.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                err = max(err, (out.float() - peer.float()).abs().max().item())
            if not err < 0.02:
                sys.exit(f"B={b} H={h} S={s} D={d} causal={causal}: max |ours - flash| {err}")
            flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
            row = {
                "B": b,
                "H": h,
                "H_kv": hkv,
                "S": s,
                "D": d,
                "dtype": dt,
                "causal": causal,
                "max_abs_diff_vs_flash": err,
                "device": dev,
            }
            for name, fn in (
                ("ferrocuda", ours),
                ("ferrocuda_portable", portable),
                ("sdpa_flash", flash),
                ("sdpa_best", best),
            ):
                ms = gpu_ms(torch, fn, args.reps, args.trials)[0]
                row[f"{name}_ms"] = ms
                row[f"{name}_tflops"] = flops / ms / 1e9
            row["vs_flash"] = row["sdpa_flash_ms"] / row["ferrocuda_ms"]
            row["vs_best"] = row["sdpa_best_ms"] / row["ferrocuda_ms"]
            row["portable_vs_flash"] = row["sdpa_flash_ms"] / row["ferrocuda_portable_ms"]
            rows.append(row)
            print(
                f"{dt} B={b:3d} H={h}/{hkv} S={s:6d} D={d:3d} causal={causal!s:5}  "
                f"ours {row['ferrocuda_tflops']:6.1f}  "
                f"portable {row['ferrocuda_portable_tflops']:6.1f}  "
                f"flash {row['sdpa_flash_tflops']:6.1f}  "
                f"best {row['sdpa_best_tflops']:6.1f} TFLOPS  "
                f"x{row['vs_flash']:.2f} flash  x{row['vs_best']:.2f} best",
                flush=True,
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
