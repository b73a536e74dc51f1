#!/usr/bin/env python3
"""What reading an array's fields costs from Python, per access (ns), on the GPU machine.

The launch-overhead goals of issue 5 leave a budget of a few hundred nanoseconds per array for
describing it, so the fast paths in ``python/src/read/fast/`` are designed from these
numbers: the cost of each attribute or method a fast path could read on a CuPy array or a torch
tensor, against the producer's own ``__cuda_array_interface__`` getter and against ferrocuda's
``validate_interface`` (probe + describe). Every figure is the median of 15 timeit runs of
20,000 accesses each, from Python; reading the same field from Rust through the C API costs
about the same or less (no bytecode dispatch).

Usage: python3 bench/field_costs.py [--json OUT.json]   (prints a table; needs a GPU)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import timeit

N = 20_000
RUNS = 15


def cost(stmt, glb):
    ts = timeit.repeat(stmt, globals=glb, number=N, repeat=RUNS)
    return statistics.median(ts) / N * 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    base = cost("x", {"x": 1})
    rows.append(("-", "empty statement (subtracted from nothing)", base))

    try:
        import cupy as cp
        import cupy._util as cu_util

        a = cp.zeros(1024, dtype=cp.float32)
        glb = {"a": a, "cp": cp, "cu_util": cu_util}
        try:
            import ferrocuda

            glb["fc"] = ferrocuda
        except ImportError:
            pass
        for stmt in [
            "a.__cuda_array_interface__",
            "a.shape",
            "a.strides",
            "a.dtype",
            "a.data",
            "a.data.ptr",
            "a.size",
            "len(a)",
            "a.ndim",
            "a._c_contiguous",
            "cp.cuda.get_current_stream()",
            "cp.cuda.get_current_stream().ptr",
            "cu_util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION",
            "type(a) is cp.ndarray",
            "fc.validate_interface(a)",
        ]:
            if stmt.startswith("fc.") and "fc" not in glb:
                continue
            rows.append(("cupy", stmt, cost(stmt, glb)))
    except Exception as e:  # noqa: BLE001 - report and go on
        rows.append(("cupy", f"unavailable: {e!r}", float("nan")))

    try:
        import torch

        t = torch.zeros(1024, dtype=torch.float32, device="cuda")
        glb = {"t": t, "torch": torch}
        try:
            import ferrocuda

            glb["fc"] = ferrocuda
        except ImportError:
            pass
        for stmt in [
            "t.__cuda_array_interface__",
            "t.is_cuda",
            "t.requires_grad",
            "t.is_sparse",
            "t.layout",
            "t.dtype",
            "t.shape",
            "t.stride()",
            "t.data_ptr()",
            "t.get_device()",
            "t.device",
            "t.is_conj()",
            "t.is_neg()",
            "torch.cuda.current_stream()",
            "torch._C._cuda_getCurrentRawStream(0)",
            "fc.validate_interface(t)",
        ]:
            if stmt.startswith("fc.") and "fc" not in glb:
                continue
            rows.append(("torch", stmt, cost(stmt, glb)))
    except Exception as e:  # noqa: BLE001
        rows.append(("torch", f"unavailable: {e!r}", float("nan")))

    print("| producer | access | ns |")
    print("| --- | --- | ---: |")
    for who, what, ns in rows:
        print(f"| {who} | `{what}` | {ns:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"producer": w, "access": s, "ns": n} for w, s, n in rows], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
