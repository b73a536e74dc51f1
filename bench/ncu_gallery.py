#!/usr/bin/env python3
"""Launches each gallery kernel and its main peer once at the benchmark sizes, for Nsight
Compute (run under ``ncu`` by ``bench/ncu_gallery.sh``). A marker line precedes each launch so
the profile reads in order; every launch is independent (a failure is printed, the rest run).
"""

from __future__ import annotations

import os
import sys
import traceback


def main():
    import cupy as cp

    import ferrocuda

    try:
        import torch
    except Exception:  # noqa: BLE001
        torch = None
    K = ferrocuda.kernels
    n = 1 << 28
    steps = []
    x = cp.random.standard_normal(n, dtype=cp.float32)
    out1 = cp.empty(1, cp.float32)
    outn = cp.empty_like(x)
    steps += [
        ("ferrocuda sum 2^28", lambda: K.sum(x, out1)),
        ("cupy.sum 2^28", lambda: cp.sum(x, out=out1[0])),
    ]
    b = cp.random.randint(0, 256, n, dtype=cp.uint8)
    bins = cp.empty(256, cp.int64)
    steps += [
        ("ferrocuda histogram u8 2^28", lambda: K.histogram(b, bins, 0.0, 256.0)),
        ("cupy.bincount u8 2^28", lambda: cp.bincount(b, minlength=256)),
    ]
    s1 = cp.random.standard_normal((4096, 4096), dtype=cp.float32)
    s2 = cp.random.standard_normal((32768, 1024), dtype=cp.float32)
    o1, o2 = cp.empty_like(s1), cp.empty_like(s2)
    steps += [
        ("ferrocuda softmax 4096x4096", lambda: K.softmax(s1, o1)),
        ("ferrocuda softmax 32768x1024", lambda: K.softmax(s2, o2)),
    ]
    a = cp.random.standard_normal((4096, 4096), dtype=cp.float32)
    c = cp.empty_like(a)
    steps += [
        ("ferrocuda matmul 4096^3", lambda: K.matmul(a, a, c, 1.0, 0.0)),
        ("cupy.matmul 4096^3", lambda: cp.matmul(a, a, out=c)),
    ]
    g = cp.random.standard_normal((8192, 8192), dtype=cp.float32)
    go = cp.empty_like(g)
    steps += [("ferrocuda stencil5 8192^2", lambda: K.stencil5(g, go))]
    steps += [
        ("ferrocuda cumsum 2^28", lambda: K.cumsum(x, outn)),
        ("cupy.cumsum 2^28", lambda: cp.cumsum(x, out=outn)),
    ]
    from bench_gallery import _cub_scan  # the harness's CUB peer: DeviceScan, in place

    cub = _cub_scan(cp)
    if cub is not None:
        steps += [("CUB DeviceScan 2^28 (in place)", lambda: cub(outn))]
    steps += [("ferrocuda gelu f32 2^28", lambda: K.gelu(x, outn))]
    if torch is not None:
        tx, t1 = torch.as_tensor(x, device="cuda"), torch.as_tensor(s1, device="cuda")
        steps += [
            ("torch.softmax 4096x4096", lambda: torch.softmax(t1, dim=-1)),
            ("torch.cumsum 2^28", lambda: torch.cumsum(tx, 0)),
            ("torch gelu f32 2^28", lambda: torch.nn.functional.gelu(tx)),
        ]
    h = cp.random.standard_normal(n, dtype=cp.float32).astype(cp.float16)
    ho = cp.empty_like(h)
    steps += [
        ("ferrocuda gelu f16 2^28", lambda: K.gelu(h, ho)),
        ("ferrocuda softmax 32768x1024 (again, next to torch)", lambda: K.softmax(s2, o2)),
    ]
    if torch is not None:
        th, t2 = torch.as_tensor(h, device="cuda"), torch.as_tensor(s2, device="cuda")
        steps += [
            ("torch gelu f16 2^28", lambda: torch.nn.functional.gelu(th)),
            ("torch.softmax 32768x1024", lambda: torch.softmax(t2, dim=-1)),
            ("torch.sum 2^28", lambda: torch.sum(tx)),
        ]
    # NCU_GALLERY_ONLY=sum,gelu: only the steps whose names contain one of these words.
    only = [w for w in os.environ.get("NCU_GALLERY_ONLY", "").split(",") if w]
    if only:
        steps = [(name, fn) for name, fn in steps if any(w in name for w in only)]
    status = 0
    for name, fn in steps:
        print("ncu: %s" % name, flush=True)
        try:
            fn()
            cp.cuda.Device().synchronize()
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
