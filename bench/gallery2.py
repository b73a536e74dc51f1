"""Gallery II in one harness run: every goal of the tensor-core gallery (GEMM in bf16, f16 and
TF32, the fused GEMM + bias + GELU, SGEMM, attention at D = 64 and 128, the stretch goals at
D = 256 and with grouped-query attention, cumsum against CUB) measured side by side with its
peers in one process per part, one after another on one GPU, then the goals table and the
pictures (TFLOPS against problem size) drawn from the run's JSON.

    python3 bench/gallery2.py --out DIR                 # measure every part, then report
    python3 bench/gallery2.py --out DIR --parts gemm,attention
    python3 bench/gallery2.py --report DIR              # the table and pictures of a finished run

Each part is one of the benchmark scripts run in a child process (a wrong result or a crash
in one part is reported and the others still run), writing ``DIR/<part>.json``:

* ``gemm``: ``bench_gemm.py``, bf16 with the fused epilogue and f16 / TF32, square sizes
  512…16384 and the odd 4095³, 4097³ (cuBLAS through ``F.linear`` beside each);
* ``sgemm``: ``bench_sgemm.py`` at 4096³ (and 4095³, 4097³), both operand layouts;
* ``attention``: ``bench_attention.py``, bf16, D = 64 and 128, S = 512…16384, causal and not;
* ``wide``: the same at D = 256 (stretch), S = 1k, 4k, 16k;
* ``gqa``: 32 query heads on 8 key/value heads, D = 64 and 128 (stretch);
* ``cumsum``: the harness's gallery section for ``cumsum`` at 2^28 (CUB's DeviceScan beside).

The report (``DIR/goals.md``, ``DIR/goals.json``, ``DIR/gemm.png``, ``DIR/attention.png``)
evaluates each goal of the issue on the rows of the run: a ratio is ours over the peer's
throughput (higher is better), a goal holds where every point of its row reaches it with a
result that passed its check (a wrong result is a missed point, named). Each part's exit
status and seconds are kept in ``DIR/parts.json``; a part that fails leaves no JSON, and its
goals read "not measured". Exit status: 0 when every goal is met, 1 when one is missed (the
stretch goals count), 2 when a part failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

#: The parts in the order they run, each the script and its arguments.
PARTS = {
    "gemm": [
        "bench_gemm.py",
        "--sizes",
        "512,1024,2048,4096,8192,16384,4095,4097",
        "--types",
        "f16,tf32",
        "--epilogue",
        "--no-portable",
    ],
    "sgemm": ["bench_sgemm.py", "--sizes", "4096,4095,4097"],
    "attention": [
        "bench_attention.py",
        "--seqs",
        "512,1024,2048,4096,8192,16384",
        "--dims",
        "64,128",
    ],
    "wide": ["bench_attention.py", "--seqs", "1024,4096,16384", "--dims", "256"],
    "gqa": [
        "bench_attention.py",
        "--seqs",
        "1024,4096,16384",
        "--dims",
        "64,128",
        "--heads",
        "32",
        "--kv-heads",
        "8",
    ],
    "cumsum": ["python_bench.py", "--sections", "gallery"],
}

GOAL_SEQS = (1024, 4096, 16384)


def run_part(name, out_dir):
    """Runs one part in a child process; its JSON goes to ``out_dir/<name>.json`` and its
    output to ``out_dir/<name>.txt``. Returns (exit status, seconds)."""
    script, *args = PARTS[name]
    path = os.path.join(out_dir, name + ".json")
    # A part that fails leaves no JSON of this run: never an earlier run's in its place.
    if os.path.exists(path):
        os.remove(path)
    args += ["--json", path] if name == "cumsum" else ["--out", path]
    env = dict(os.environ, BENCH_GALLERY_OPS="cumsum") if name == "cumsum" else None
    cmd = [sys.executable, os.path.join(HERE, script), *args]
    print(f"=== gallery2 {name}: {' '.join(cmd[1:])}", flush=True)
    start = time.monotonic()
    with open(os.path.join(out_dir, name + ".txt"), "w") as log:
        proc = subprocess.Popen(
            cmd, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
        rc = proc.wait()
    took = time.monotonic() - start
    print(f"=== gallery2 {name}: exit {rc} in {took:.0f} s", flush=True)
    return rc, took


def load(out_dir, name):
    """A part's JSON, or None where the part wrote none (or an unreadable one)."""
    path = os.path.join(out_dir, name + ".json")
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"gallery2: {path}: {e}: the part counts as not measured")
        return None


def point(name, ours, peer, ratio, wrong=False):
    """One measured point of a goal; ``wrong``: our result failed its check (the point then
    misses whatever its ratio)."""
    return {"point": name, "ours": ours, "peer": peer, "ratio": ratio, "wrong": wrong}


def gemm_ratio(rows, size, ours, peer):
    """Our throughput over the peer's at M = N = K = size, with both TFLOPS (None where a
    row is missing)."""
    pick = {r.get("impl"): r for r in rows if r.get("shape") == [size] * 3 and "ms" in r}
    a, b = pick.get(ours), pick.get(peer)
    if a is None or b is None:
        return None
    return point(f"{size}³", a["tflops"], b["tflops"], b["ms"] / a["ms"], a.get("checked") is False)


def attention_points(rows, dims, what):
    """The goal points (bf16; S = 1k, 4k, 16k; causal and not) of an attention run: ours over
    the peer's throughput (``what``: ``flash`` or ``best``). The script stops at a wrong
    result, so every row it wrote was checked."""
    keys = ("D", "S", "causal", "ferrocuda_tflops", f"sdpa_{what}_tflops", f"vs_{what}")
    keep = [
        r
        for r in rows
        if all(k in r for k in keys) and r.get("dtype", "bf16") == "bf16" and r["D"] in dims
    ]
    return [
        point(
            f"D={r['D']} S={r['S']}{' causal' if r['causal'] else ''}",
            r["ferrocuda_tflops"],
            r[f"sdpa_{what}_tflops"],
            r[f"vs_{what}"],
        )
        for r in sorted(keep, key=lambda r: (-r["D"], r["S"], r["causal"]))
        if r["S"] in GOAL_SEQS
    ]


def attention_goals(name, rows, dims):
    """An attention goal's two rows: at least torch's flash backend, and 0.85× torch's pick."""
    return [
        (name, "SDPA flash backend (FA2)", 1.0, "TFLOPS", attention_points(rows, dims, "flash")),
        (name, "SDPA, torch's pick", 0.85, "TFLOPS", attention_points(rows, dims, "best")),
    ]


def cumsum_point(data):
    """The scan goal's point at 2^28 from the harness's gallery rows (GB/s)."""
    rows = [
        r
        for r in (data or {}).get("gallery", [])
        if r.get("op") == "cumsum" and r.get("shape") == "2^28" and "us" in r
    ]
    pick = {r["impl"]: r for r in rows}
    a, b = pick.get("ferrocuda cumsum"), pick.get("CUB DeviceScan (cupy.cuda.cub, in place)")
    if a is None or b is None:
        return []
    return [point("2^28", a["gbps"], b["gbps"], b["us"] / a["us"], a.get("checked") is False)]


def goals(data):
    """The issue's goals, each with its points from the run's parts (``data``: each part's
    JSON by name, None where it wrote none; a goal has no points where its part did not
    run), its threshold and unit."""

    def rows(name):
        return (data[name] or {}).get("rows", [])

    gemm, sgemm = rows("gemm"), rows("sgemm")

    def sizes(ours, peer, sz):
        return [p for p in (gemm_ratio(gemm, s, ours, peer) for s in sz) if p]

    sg = []
    for layout in ("nn", "nt"):
        of_layout = [r for r in sgemm if r.get("layout") == layout]
        p = gemm_ratio(of_layout, 4096, "ferrocuda matmul", "cuBLAS torch.matmul")
        if p:
            sg.append(dict(p, point=f"4096³ {layout}"))
    bf16 = sizes("ferrocuda linear (bf16 out)", "cuBLAS F.linear (bf16 out)", (4096, 8192))
    return [
        ("bf16 GEMM 4096³, 8192³", "cuBLAS F.linear", 0.90, "TFLOPS", bf16),
        ("bf16 GEMM (stretch)", "cuBLAS F.linear", 1.0, "TFLOPS", bf16),
        (
            "f16 GEMM 4096³, 8192³",
            "cuBLAS F.linear (f16)",
            0.90,
            "TFLOPS",
            sizes("ferrocuda linear f16", "cuBLAS F.linear (f16)", (4096, 8192)),
        ),
        (
            "TF32 GEMM 8192³",
            "cuBLAS F.linear, TF32 allowed",
            0.90,
            "TFLOPS",
            sizes("ferrocuda linear_tf32", "cuBLAS F.linear (tf32)", (8192,)),
        ),
        ("SGEMM f32 4096³", "cuBLAS torch.matmul, TF32 off", 0.90, "TFLOPS", sg),
        (
            "GEMM + bias + GELU, bf16, 8192³",
            "torch F.gelu(x @ w.T + b)",
            1.2,
            "TFLOPS",
            sizes("ferrocuda linear_bias_gelu (bf16 out)", "torch F.gelu(x @ w.T + b)", (8192,)),
        ),
        *attention_goals("attention bf16 D = 128, 64", rows("attention"), (128, 64)),
        *attention_goals("attention D = 256 (stretch)", rows("wide"), (256,)),
        *attention_goals("GQA 32/8 heads, D = 128, 64 (stretch)", rows("gqa"), (128, 64)),
        ("cumsum f32 2^28", "CUB DeviceScan", 1.0, "GB/s", cumsum_point(data["cumsum"])),
    ]


def span(points, key, fmt):
    """The range of ``key`` over ``points`` (one value where there is one)."""
    xs = [p[key] for p in points]
    return f"{fmt % min(xs)}–{fmt % max(xs)}" if len(xs) > 1 else fmt % xs[0]


def reaches(p, goal):
    return not p["wrong"] and p["ratio"] >= goal


def status(points, goal):
    """``met`` where every point reaches the goal with a correct result."""
    if not points:
        return "not measured"
    wrong = sum(p["wrong"] for p in points)
    if wrong:
        return f"wrong result at {wrong} of {len(points)} points"
    met = sum(reaches(p, goal) for p in points)
    return "met" if met == len(points) else f"missed ({met} of {len(points)} points met)"


def report(out_dir, parts=None):
    """Writes goals.md and goals.json into ``out_dir`` (with ``parts``: each part's exit
    status and seconds, kept from the run in ``parts.json``) and draws the pictures; prints
    the table. Returns the number of goals not met (those not measured included)."""
    parts_path = os.path.join(out_dir, "parts.json")
    if parts is None and os.path.exists(parts_path):
        with open(parts_path) as f:
            parts = json.load(f)
    # Each part's JSON read once (an unreadable one reported once).
    data = {n: load(out_dir, n) for n in PARTS}
    device = next((d["device"] for d in data.values() if d and "device" in d), "?")
    lines = [
        f"# Gallery II goals, one run ({device})",
        "",
        "| goal | peer | ≥ | ours (range) | peer (range) | ratio min–max | status |",
        "| --- | --- | ---: | --- | --- | --- | --- |",
    ]
    table, missed = [], 0
    for name, peer, goal, unit, points in goals(data):
        st = status(points, goal)
        missed += st != "met"
        table.append(
            {
                "goal": name,
                "peer": peer,
                "threshold": goal,
                "unit": unit,
                "points": points,
                "status": st,
            }
        )
        if points:
            cells = (
                f"{span(points, 'ours', '%.1f')} {unit}",
                f"{span(points, 'peer', '%.1f')} {unit}",
                span(points, "ratio", "%.3f×"),
            )
        else:
            cells = ("—", "—", "—")
        lines.append(f"| {name} | {peer} | {goal}× | {' | '.join(cells)} | {st} |")
    lines += ["", "Points below the goal:", ""]
    for row in table:
        for p in row["points"]:
            if not reaches(p, row["threshold"]):
                lines.append(
                    f"* {row['goal']} against {row['peer']}: {p['point']} "
                    f"{p['ratio']:.3f}× ({p['ours']:.1f} against {p['peer']:.1f} {row['unit']})"
                    + (" — WRONG RESULT" if p["wrong"] else "")
                )
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "goals.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out_dir, "goals.json"), "w") as f:
        json.dump({"device": device, "parts": parts, "goals": table}, f, indent=1)
    print(text, flush=True)
    pictures(out_dir)
    return missed


def pictures(out_dir):
    """TFLOPS against size (GEMM) and sequence length (attention) from the run's JSON."""
    sys.path.insert(0, HERE)
    try:
        import plot_attention
        import plot_gemm
    except ImportError as e:
        print(f"no pictures: {e}")
        return
    for name, draw in (
        ("gemm", lambda p: plot_gemm.main([p, "--out", os.path.join(out_dir, "gemm.png")])),
        (
            "attention",
            lambda p: plot_attention.main([p, "--out", os.path.join(out_dir, "attention.png")]),
        ),
    ):
        path = os.path.join(out_dir, name + ".json")
        if os.path.exists(path):
            try:
                draw(path)
            except (Exception, SystemExit) as e:  # noqa: BLE001 — a picture never ends the report
                print(f"no {name} picture: {type(e).__name__}: {e}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="the run's directory (measure, then report)")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ",".join(PARTS))
    ap.add_argument("--report", metavar="DIR", help="only report on a finished run's directory")
    args = ap.parse_args(argv)
    if args.report and args.out:
        ap.error("--out DIR measures and reports, --report DIR only reports: not both")
    if args.report:
        if not os.path.isdir(args.report):
            ap.error(f"--report: {args.report} is not a directory")
        return 1 if report(os.path.abspath(args.report)) else 0
    if not args.out:
        ap.error("--out DIR or --report DIR")
    names = list(dict.fromkeys(n for n in args.parts.split(",") if n))
    unknown = [n for n in names if n not in PARTS]
    if unknown:
        ap.error(f"--parts: {', '.join(unknown)} not among {', '.join(PARTS)}")
    # The children run in this directory (bench/): the run's directory as an absolute path.
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    parts = {}
    for name in names:
        rc, took = run_part(name, out)
        # The harness's gallery section returns 0 when a row fails (a note): the scan part
        # succeeded only where its goal's rows came back.
        if name == "cumsum" and rc == 0 and not cumsum_point(load(out, name)):
            rc = 1
        parts[name] = {"exit": rc, "seconds": round(took, 1)}
    with open(os.path.join(out, "parts.json"), "w") as f:
        json.dump(parts, f, indent=1)
    missed = report(out, parts)
    failed = [n for n, p in parts.items() if p["exit"]]
    if failed:
        print(f"gallery2: parts that failed: {', '.join(failed)}")
    return 2 if failed else (1 if missed else 0)


if __name__ == "__main__":
    sys.exit(main())
