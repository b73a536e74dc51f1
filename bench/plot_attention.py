"""TFLOPS against sequence length for ``attention`` and torch SDPA's two backends, drawn
from the JSON files ``bench/bench_attention.py --out`` writes: one panel per head dimension
and mask, a line per implementation. Needs matplotlib.

    python bench/plot_attention.py bench/results/2026-11-28-attention.json \
        bench/results/2026-11-28-attention-16k.json --out bench/results/2026-11-28-attention.png
    python bench/plot_attention.py bench/results/2026-11-28-attention-run2.json \
        --dtype bf16 --out bench/results/2026-11-28-attention-run2.png
"""

from __future__ import annotations

import argparse

from bench_common import load_rows, pyplot, save_figure

LINES = [
    ("ferrocuda", "ferrocuda attention (sm_90a)", "-o"),
    ("sdpa_flash", "torch SDPA, flash backend (FA2)", "--s"),
    ("sdpa_best", "torch SDPA, its pick (cuDNN)", ":^"),
]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="JSON files of bench_attention.py")
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument(
        "--dtype", default="bf16", help="the element type drawn (rows without one are bf16)"
    )
    args = ap.parse_args(argv)

    plt = pyplot()
    rows, device = load_rows(args.runs, lambda r: r.get("dtype", "bf16") == args.dtype)
    dims = sorted({r["D"] for r in rows})
    fig, axes = plt.subplots(len(dims), 2, figsize=(11, 4 * len(dims)), squeeze=False)
    for i, d in enumerate(dims):
        for j, causal in enumerate((False, True)):
            ax = axes[i][j]
            sel = sorted(
                (r for r in rows if r["D"] == d and r["causal"] == causal), key=lambda r: r["S"]
            )
            seqs = [r["S"] for r in sel]
            for key, label, style in LINES:
                ax.plot(seqs, [r[f"{key}_tflops"] for r in sel], style, label=label)
            ax.set_xscale("log", base=2)
            ax.set_xticks(seqs, [str(s) for s in seqs])
            ax.set_xlabel("sequence length S (B·S = 16384 tokens, H = 16)")
            ax.set_ylabel("TFLOPS")
            ax.set_ylim(bottom=0)
            ax.set_title(f"{args.dtype}, D = {d}, {'causal' if causal else 'not causal'}")
            ax.grid(True, alpha=0.3)
            ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, f"Attention forward on {device}", args.out)


if __name__ == "__main__":
    main()
