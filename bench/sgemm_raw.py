#!/usr/bin/env python3
"""SGEMM kernels launched raw from cubins, beside cuBLAS (``torch.matmul``, TF32 off), in one
process: for A/B tests of ``matmul_f32`` builds and variants without building a wheel.

Usage (on the GPU machine):
    python3 bench/sgemm_raw.py NAME=path.cubin[:kernel][@threads] [...] [--sizes 4096,8192]
        [--layouts nn,nt] [--calls 10] [--trials 7] [--smem BYTES]

A kernel (default ``matmul_f32``) takes ``(a: View<f32, 2>, b: View<f32, 2>, c: ViewMut<f32,
2>, alpha: f32, beta: f32)``; it is launched with blocks of ``threads`` threads (default 256),
one block per 32768 elements of ``c`` (a 128 × 256 tile; 128-thread blocks: per 128 × 128
tile), and ``--smem`` bytes of dynamic shared memory (default: ``matmul_f32``'s 50688; 0 for
builds that declare theirs statically).
Every variant's result is checked against the float64 product on 64 random rows with the
bound ``(K + 2)·2^-24·|a||b|`` before timing; the variants and cuBLAS are timed interleaved,
trial by trial (CUDA events, median of the trials).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys


class View2(ctypes.Structure):
    """`View<f32, 2>` / `ViewMut<f32, 2>`: pointer, shape, element strides."""

    _fields_ = [
        ("ptr", ctypes.c_uint64),
        ("shape", ctypes.c_uint64 * 2),
        ("strides", ctypes.c_int64 * 2),
    ]


def view(t) -> View2:
    v = View2()
    v.ptr = t.data_ptr()
    v.shape[0], v.shape[1] = t.shape
    v.strides[0], v.strides[1] = t.stride()
    return v


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cubins", nargs="+", help="NAME=path.cubin[:kernel]")
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--layouts", default="nn,nt")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--smem", type=int, default=50688)
    a = ap.parse_args()

    import cupy as cp
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")
    drv = cp.cuda.driver
    funcs = {}
    for spec in a.cubins:
        name, rest = spec.split("=", 1)
        rest, _, threads = rest.partition("@")
        path, _, kern = rest.partition(":")
        with open(path, "rb") as f:
            mod = drv.moduleLoadData(f.read())
        func = drv.moduleGetFunction(mod, kern or "matmul_f32")
        if a.smem > 48 * 1024:
            # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            drv.funcSetAttribute(func, 8, a.smem)
        funcs[name] = (mod, func, int(threads or 256))
    stream = torch.cuda.Stream()
    gen = torch.Generator(device="cuda").manual_seed(7)
    for size in (int(s) for s in a.sizes.split(",")):
        m = n = k = size
        for layout in a.layouts.split(","):
            x = torch.randn(m, k, device="cuda", generator=gen)
            if layout == "nn":
                b = torch.randn(k, n, device="cuda", generator=gen)
            else:
                b = torch.randn(n, k, device="cuda", generator=gen).t()
            c = torch.empty(m, n, device="cuda")
            args = (view(x), view(b), view(c), ctypes.c_float(1.0), ctypes.c_float(0.0))
            ptrs = (ctypes.c_void_p * 5)(*[ctypes.addressof(v) for v in args])

            def launch(f, threads, ptrs=ptrs, m=m, n=n):
                grid = -(-m // 128) * -(-n // threads)
                drv.launchKernel(
                    f,
                    grid,
                    1,
                    1,
                    threads,
                    1,
                    1,
                    a.smem,
                    stream.cuda_stream,
                    ctypes.addressof(ptrs),
                    0,
                )

            cases = {nm: (lambda f=f, t=t: launch(f, t)) for nm, (_, f, t) in funcs.items()}

            def cublas(x=x, b=b, c=c):
                torch.matmul(x, b, out=c)

            cases["cuBLAS"] = cublas
            rows = torch.randint(0, m, (64,), device="cuda", generator=gen)
            ra, rb = x[rows].double(), b.double()
            want = ra @ rb
            tol = (k + 2) * 2.0**-24 * (ra.abs() @ rb.abs()) + 1e-30
            with torch.cuda.stream(stream):
                for nm, call in cases.items():
                    c.fill_(float("nan"))
                    call()
                    stream.synchronize()
                    err = (c[rows].double() - want).abs()
                    bad = int((~(err <= tol)).sum())
                    print(f"  check {nm}: {'ok' if bad == 0 else f'{bad} bad elements'}")
                    if bad and nm != "cuBLAS":
                        return 1
                times = {nm: [] for nm in cases}
                for _ in range(a.trials):
                    for nm, call in cases.items():
                        call()
                        s, e = (
                            torch.cuda.Event(enable_timing=True),
                            torch.cuda.Event(enable_timing=True),
                        )
                        s.record(stream)
                        for _ in range(a.calls):
                            call()
                        e.record(stream)
                        e.synchronize()
                        times[nm].append(s.elapsed_time(e) / a.calls)
            base = statistics.median(times["cuBLAS"])
            print(f"{size}^3 {layout}: median (min-max) ms per call, x cuBLAS throughput")
            for nm, ts in times.items():
                med = statistics.median(ts)
                tf = 2 * m * n * k / med / 1e9
                print(
                    f"  {nm:<16} {med:8.3f} ({min(ts):.3f}-{max(ts):.3f})  {tf:6.1f} TFLOPS"
                    f"  {base / med:.3f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
