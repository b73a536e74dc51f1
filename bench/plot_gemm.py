"""TFLOPS against problem size for the tensor-core GEMMs, drawn from the JSON files
``bench/bench_gemm.py --out`` writes: one panel per input type (bf16, and f16 / TF32 where the
run timed them with ``--types``), a line per implementation, square problems M = N = K only.
Sizes that are not multiples of 16 are crosses off the lines; rows whose result failed its
check are ringed and counted in the legend. Needs matplotlib.

    python bench/bench_gemm.py --sizes 512,1024,2048,4096,8192,16384 --types f16,tf32 \
        --out gemm-sizes.json
    python bench/plot_gemm.py gemm-sizes.json --out gemm-sizes.png
"""

from __future__ import annotations

import argparse

from bench_common import load_rows, pyplot, save_figure


def panel_of(impl: str) -> str:
    """The input type of an implementation's row, from its name in bench_gemm.py."""
    if "tf32" in impl:
        return "TF32 (f32 in)"
    if "f16" in impl and "bf16" not in impl:
        return "f16"
    return "bf16"


def style_of(impl: str) -> str:
    """cuBLAS dashed, ferrocuda's portable mma.sync kernels dotted, the rest solid."""
    if impl.startswith("cuBLAS"):
        return "--s"
    if "portable" in impl:
        return ":^"
    return "-o"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="JSON files of bench_gemm.py")
    ap.add_argument("--out", required=True, help="the PNG to write")
    args = ap.parse_args(argv)

    plt = pyplot()
    # Refused shapes (no kernel of the family takes them) have no time: not drawn.
    rows, device = load_rows(args.runs, lambda r: len(set(r["shape"])) == 1 and "tflops" in r)
    if not rows:
        raise SystemExit("no square problems (M = N = K) in the runs given")
    panels = sorted({panel_of(r["impl"]) for r in rows}, key=["bf16", "f16", "TF32 (f32 in)"].index)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.6), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        sel = [r for r in rows if panel_of(r["impl"]) == panel]
        impls = sorted({r["impl"] for r in sel}, key=lambda i: (i.startswith("cuBLAS"), i))
        sizes: set[int] = set()
        for impl in impls:
            pts = sorted(
                (r["shape"][0], r["tflops"], r["checked"]) for r in sel if r["impl"] == impl
            )
            sizes.update(p[0] for p in pts)
            bad = [p for p in pts if p[2] is False]
            label = impl + (f" ({len(bad)} WRONG)" if bad else "")
            # Sizes that are multiples of 16 on the line; the others (4095, 4097: rows no
            # tensor map takes, the fallback kernels' ground) as unjoined crosses.
            even = [p for p in pts if p[0] % 16 == 0]
            odd = [p for p in pts if p[0] % 16]
            (line,) = ax.plot(
                [p[0] for p in even], [p[1] for p in even], style_of(impl), label=label
            )
            if odd:
                ax.plot([p[0] for p in odd], [p[1] for p in odd], "x", ms=9, color=line.get_color())
            if bad:
                ax.plot(
                    [p[0] for p in bad],
                    [p[1] for p in bad],
                    "o",
                    mfc="none",
                    ms=12,
                    color=line.get_color(),
                )
        ticks = sorted(v for v in sizes if v % 16 == 0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(s) for s in ticks], rotation=45 if len(ticks) > 6 else 0)
        ax.set_xlabel("M = N = K (crosses: 4095 and 4097, not multiples of 16)")
        ax.set_ylabel("TFLOPS (2·M·N·K / GPU time)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{panel} inputs, f32 accumulation")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=7)
    save_figure(fig, f"GEMM out = x @ w.T on {device}", args.out)


if __name__ == "__main__":
    main()
