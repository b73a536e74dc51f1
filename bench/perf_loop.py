#!/usr/bin/env python3
"""A launch loop for sampling profilers: ``python3 bench/perf_loop.py WHO [bound] [N]``.

WHO is ``cupy``, ``torch``, ``dev`` (ferrocuda DeviceArrays) — ``kernels.add`` on three
float32[1024] arrays, or its bound launch with ``bound`` — ``torchadd`` (``torch.add(out=)``,
the peer) or ``pyfloor`` (the Python floor: CuPy's Cython ``cupy.cuda.driver.launchKernel``
on a RawKernel's function with a parameter array built once, nothing read or checked). After
1000 warm-up launches it writes its process id to the file named by ``READY`` (if set), so that
a profiler can attach to the loop alone (imports and first launches excluded), then launches N
times (default 200000), synchronizing every 512 launches, and prints µs per launch.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import ferrocuda


def main() -> None:
    who = sys.argv[1]
    bound = "bound" in sys.argv[2:]
    n_calls = int(sys.argv[-1]) if sys.argv[-1].isdigit() else 200_000
    n = 1024
    if who in ("cupy", "pyfloor"):
        import cupy as cp

        a, b, o = (cp.ones(n, dtype=cp.float32) for _ in range(3))
        sync = cp.cuda.runtime.deviceSynchronize
    elif who in ("torch", "torchadd"):
        import torch

        a, b, o = (torch.ones(n, device="cuda") for _ in range(3))
        sync = torch.cuda.synchronize
    elif who == "dev":
        a, b, o = (ferrocuda.DeviceArray.from_numpy(np.ones(n, np.float32)) for _ in range(3))
        sync = ferrocuda.synchronize
    else:
        raise SystemExit(f"unknown producer {who!r}")
    if who == "pyfloor":
        import ctypes

        import cupy as cp

        src = (
            'extern "C" __global__ void add_f32(const float* a, const float* b, float* o, '
            "long long n) { long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; "
            "if (i < n) o[i] = a[i] + b[i]; }"
        )
        raw = cp.RawKernel(src, "add_f32")  # kept: its module holds the function
        func = raw.kernel.ptr
        vals = (
            ctypes.c_uint64(a.data.ptr),
            ctypes.c_uint64(b.data.ptr),
            ctypes.c_uint64(o.data.ptr),
            ctypes.c_int64(n),
        )
        params = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in vals])
        kp, s, launch = (
            ctypes.addressof(params),
            cp.cuda.get_current_stream().ptr,
            cp.cuda.driver.launchKernel,
        )

        keep = (raw, vals, params)  # noqa: F841 - alive while main() runs the loop

        def step() -> None:
            launch(func, n // 256, 1, 1, 256, 1, 1, 0, s, kp, 0)
    elif who == "torchadd":
        import torch

        def step() -> None:
            torch.add(a, b, out=o)
    elif bound:
        step = ferrocuda.kernels.add.bind(a, b, o)
    else:
        add = ferrocuda.kernels.add

        def step() -> None:
            add(a, b, o)

    for _ in range(1000):
        step()
    sync()
    ready = os.environ.get("READY")
    if ready:
        with open(ready, "w") as f:
            f.write(str(os.getpid()))
    t = time.perf_counter()
    for i in range(n_calls):
        step()
        if i % 512 == 0:
            sync()
    sync()
    print(who, "bound" if bound else "", f"{(time.perf_counter() - t) / n_calls * 1e6:.3f} us/call")


if __name__ == "__main__":
    main()
