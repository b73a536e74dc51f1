#!/usr/bin/env python3
"""ferrocuda benchmark harness: the Python paths, side by side with CuPy, PyTorch and Numba.

What it measures (one H100, one run; see BENCHMARKS.md for the method and the goals):

* **launch** -- host wall time per call of `out = a + b` on 3 float32 arrays of 1024 elements:
  ferrocuda in each sync mode (arrays from CuPy, PyTorch, ferrocuda's own DeviceArray; and,
  in the Numba child process, Numba device arrays), CuPy ``RawKernel`` (same add, CUDA C
  compiled by CuPy), ``cupy.add(out=)``, ``torch.add(out=)``, a Numba ``@cuda.jit`` kernel on
  Numba / CuPy / torch arrays, the cost of just reading the array interfaces, and the raw
  ``cuLaunchKernel`` floor in this same process (``bench/floor.cu`` built as a library,
  ``--floor-lib``). Method: every path's output is checked first; then warm-up, then rounds:
  in each round every path runs one batch of many back-to-back calls followed by one device
  synchronization (interleaved, so that a drift of the host -- clocks, core migration -- hits
  every path alike; the order shuffled afresh each round, seeded); per-call time = batch time /
  calls; median over rounds. Beside the goals the report gives paired ratios: the median over
  rounds of two paths' times in the same round.
* **bandwidth** -- GPU time (CUDA events) of ferrocuda ``add`` at 2^20 .. 2^28 float32 against
  ``cupy.add``, a CuPy ``RawKernel`` add, ``torch.add``, device-to-device copies (CuPy memcpy,
  ``torch.Tensor.copy_``) and Numba (child process); ``initialize_array`` against
  ``cudaMemsetAsync`` (and CuPy ``fill``); ``add_index`` on a contiguous 3-D array against
  transposed and step-sliced views with the same element count (and CuPy ``view += 1`` on the
  same views as a peer). Bytes are counted as reads + writes of the elements the operation
  uses. Every measured batch is queued behind a GPU spin kernel, so the GPU runs the batch back
  to back and host launch overhead cannot leak into the GPU time (a batch whose start event had
  already completed when the host finished queueing is redone with a longer spin). Buffer sets
  are rotated until one pass touches >= 4x the L2 cache.
* **layouts** -- the element-wise families' strided variants (``add``, ``saxpy``, ``gelu`` on
  ``[::2]``, ``[::-1]``, transposed and broadcast views at 2^26 float32 elements) against their
  contiguous kernels and ``cupy.add`` on the same views (see ``bench_layouts.py``).
* **gallery** -- the gallery kernels against their peers at the issue's sizes (``sum``,
  ``histogram``, ``softmax``, ``matmul``, ``stencil5``, ``cumsum``, ``gelu``: CUB through
  CuPy, cuBLAS, PyTorch, D2D copies), GPU time by the same event method, and per-call wall
  time at 2^10..2^16 (see ``bench_gallery.py``); ``BENCH_GALLERY_OPS`` picks ops.
* every measured path's output is checked once against NumPy (fully for small arrays, on a
  random sample of 65,536 elements for large ones).

Output: the full results as JSON (``--json``, default ``$OUT/bench.json``) and, printed last,
Markdown tables with the ratios (vs the raw-driver floor of ``bench/floor.cu``, vs CuPy
``RawKernel`` and vs ``torch.add``) and the goals of issue 5. The floor and Rust results come in
as JSON-lines files (``--floor``, ``--rust``) and are merged into the same JSON and tables.

The Numba part runs in a subprocess whose ``PYTHONPATH`` starts with the directory named by
``FERROCUDA_NUMBA_SITE`` (a NumPy < 2.5 that Numba needs); it is skipped, with a note, when the
variable is unset or the child fails. Every peer section skips gracefully (with a note in the
table) when its library is missing or fails.

Usage: python3 bench/python_bench.py [--floor F.jsonl] [--rust R.jsonl] [--json OUT.json]
                                     [--quick]
                                     [--sections launch,bandwidth,init,add_index,layouts,numba]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import traceback

from bench_common import ADD_INDEX_SHAPE, Budget, Reps, Results, log, sizes_from
from bench_gallery import render_gallery, section_gallery
from bench_gpu_time import (
    CupyClock,
    TorchClock,
    section_add_index,
    section_bandwidth,
    section_init,
)
from bench_launch import section_launch
from bench_layouts import render_layouts, section_layouts
from bench_numba import numba_child, run_numba_child
from bench_report import compute_goals, read_jsonl, render


def try_import(name, res):
    try:
        return __import__(name)
    except Exception as e:  # noqa: BLE001
        res.note("setup", "import %s failed: %s: %s" % (name, type(e).__name__, e))
        return None


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    out_dir = os.environ.get("OUT")
    ap.add_argument(
        "--json", default=os.path.join(out_dir, "bench.json") if out_dir else "bench.json"
    )
    ap.add_argument("--floor", default=None, help="JSON lines of bench/floor.cu")
    ap.add_argument("--rust", default=None, help="JSON lines of the Rust launch bench")
    ap.add_argument(
        "--floor-lib",
        default=None,
        help="bench/floor.cu built with -DFLOOR_LIB (the floor in this process)",
    )
    ap.add_argument("--ptx", default=None, help="the bundled PTX, for --floor-lib")
    ap.add_argument("--gpu-info", default=None, help="nvidia-smi CSV line (name, driver, memory)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, sizes up to 2^24")
    ap.add_argument("--min-log2", type=int, default=20)
    ap.add_argument("--max-log2", type=int, default=None)
    ap.add_argument("--sections", default="launch,bandwidth,init,add_index,layouts,numba,gallery")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=330.0,
        help="wall-clock budget for the measurements (later sizes are skipped)",
    )
    ap.add_argument("--numba-timeout", type=float, default=150.0)
    ap.add_argument(
        "--gallery-budget-s",
        type=float,
        default=float(os.environ.get("BENCH_GALLERY_BUDGET_S", "240")),
        help="wall-clock budget of the gallery section (default: $BENCH_GALLERY_BUDGET_S or 240)",
    )
    ap.add_argument("--l2-bytes", type=int, default=0, help="L2 size (default: from the device)")
    ap.add_argument(
        "--table-only",
        action="store_true",
        help="measure nothing: merge --floor/--rust and print the tables",
    )
    ap.add_argument("--numba-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.max_log2 is None:
        args.max_log2 = 24 if args.quick else 28
    args.sections = [s for s in args.sections.split(",") if s]
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.numba_child:
        if not args.l2_bytes:
            args.l2_bytes = 50 << 20
        return numba_child(args)
    res = Results()
    budget = Budget(args.budget_s)
    m = res.data["machine"]
    m.update(
        {
            "python": platform.python_version(),
            "host": platform.node(),
            "args": vars(args).copy(),
            "sync_env": os.environ.get("FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC"),
        }
    )
    if args.gpu_info and os.path.exists(args.gpu_info):
        with open(args.gpu_info) as f:
            parts = [x.strip() for x in f.read().strip().split(",")]
        if parts and parts[0]:
            m["gpu"] = parts[0]
            if len(parts) > 1:
                m["driver"] = parts[1]
            if len(parts) > 2:
                m["memory"] = parts[2]
    res.data["floor"] = read_jsonl(args.floor, res, "floor") if args.floor else []
    res.data["rust"] = (
        [r for r in read_jsonl(args.rust, res, "rust") if r.get("bench") == "rust_launch"]
        if args.rust
        else []
    )
    for r in res.data["floor"]:
        if r.get("name") == "device":
            m.setdefault("gpu", r.get("device"))
            m.setdefault("driver", r.get("driver_version"))
            m["sm_count"] = r.get("sm_count")

    if not args.table_only:
        mods = {}
        mods["numpy"] = try_import("numpy", res)
        if mods["numpy"] is None:
            res.note("setup", "NumPy is required for the Python sections; none measured")
        else:
            mods["cupy"] = try_import("cupy", res)
            mods["torch"] = try_import("torch", res)
            if mods["torch"] is not None and not mods["torch"].cuda.is_available():
                res.note("setup", "torch.cuda.is_available() is False: torch rows skipped")
                mods["torch"] = None
            mods["floor_lib"], mods["ptx"] = args.floor_lib, args.ptx
            mods["ferrocuda"] = try_import("ferrocuda", res)
            if mods["ferrocuda"] is not None and not hasattr(mods["ferrocuda"], "kernels"):
                res.note("setup", "ferrocuda has no `kernels` module: ferrocuda rows skipped")
                mods["ferrocuda"] = None
            for k in ("numpy", "cupy", "torch", "ferrocuda"):
                if mods.get(k) is not None:
                    m[k] = getattr(mods[k], "__version__", "?")
            if mods.get("ferrocuda") is not None and mods.get("cupy") is not None:
                src = getattr(
                    getattr(mods["ferrocuda"], "_ferrocuda", None), "_cupy_stream_source", None
                )
                if src is not None:
                    m["cupy_stream_source"] = src()
            cp = mods["cupy"]
            if cp is not None:
                try:
                    props = cp.cuda.runtime.getDeviceProperties(0)
                    name = props.get("name", b"")
                    m["gpu_cupy"] = name.decode() if isinstance(name, bytes) else str(name)
                    m.setdefault("gpu", m["gpu_cupy"])
                    if not args.l2_bytes and props.get("l2CacheSize"):
                        args.l2_bytes = int(props["l2CacheSize"])
                    m["cuda_runtime"] = "CUDA runtime %d" % cp.cuda.runtime.runtimeGetVersion()
                except Exception as e:  # noqa: BLE001
                    res.note("setup", "device properties: %s" % e)
            if not args.l2_bytes:
                args.l2_bytes = 50 << 20  # H100
            m["l2_bytes"] = args.l2_bytes
            reps = Reps(args.quick)
            steps = [
                ("launch", lambda: section_launch(res, reps, mods)),
            ]
            clock = None
            if any(
                s in args.sections for s in ("bandwidth", "init", "add_index", "layouts", "gallery")
            ):
                try:
                    if cp is not None:
                        clock = CupyClock(cp, mods["numpy"])
                    elif mods["torch"] is not None:
                        clock = TorchClock(mods["torch"])
                    else:
                        res.note(
                            "setup",
                            "neither CuPy nor torch: no GPU timer, GPU-time sections skipped",
                        )
                    if clock is not None:
                        m["spin_units_per_us"] = clock.cycles_per_us
                except Exception as e:  # noqa: BLE001
                    res.note("setup", "GPU timer failed: %s: %s" % (type(e).__name__, e))
            if clock is not None:
                sizes = sizes_from(args)
                steps += [
                    (
                        "bandwidth",
                        lambda: section_bandwidth(
                            res, reps, mods, sizes, args.l2_bytes, budget, clock
                        ),
                    ),
                    (
                        "init",
                        lambda: section_init(res, reps, mods, sizes, args.l2_bytes, budget, clock),
                    ),
                    (
                        "add_index",
                        lambda: section_add_index(
                            res,
                            reps,
                            mods,
                            budget,
                            clock,
                            (64, 128, 256) if args.quick else ADD_INDEX_SHAPE,
                        ),
                    ),
                    (
                        "layouts",
                        lambda: section_layouts(
                            res, reps, mods, budget, clock, (1 << 22) if args.quick else 1 << 26
                        ),
                    ),
                    # Its own budget share: the gallery never starves the sections after it,
                    # and they never starve it.
                    (
                        "gallery",
                        lambda: section_gallery(
                            res,
                            reps,
                            mods,
                            Budget(min(budget.left(), args.gallery_budget_s)),
                            clock,
                            args.l2_bytes,
                            args.quick,
                        ),
                    ),
                ]
            steps.append(("numba", lambda: run_numba_child(res, args, budget)))
            for name, fn in steps:
                if name not in args.sections:
                    continue
                log("=== section %s (%.0f s of budget left)" % (name, budget.left()))
                try:
                    fn()
                except Exception as e:  # noqa: BLE001
                    res.note(
                        name,
                        "section crashed: %s: %s\n%s"
                        % (type(e).__name__, e, traceback.format_exc(limit=3)),
                    )
    res.data["goals"] = compute_goals(res.data)
    try:
        d = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(d):
            os.makedirs(d)
        with open(args.json, "w") as f:
            json.dump(res.data, f, indent=1, default=str)
        log("wrote %s" % args.json)
    except OSError as e:
        res.note("output", "cannot write %s: %s" % (args.json, e))
    sys.stderr.flush()
    print(render(res.data) + render_layouts(res.data) + render_gallery(res.data), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
