"""ferrocuda quickstart: run the bundled kernels on whatever GPU arrays are available.

Run: python python/examples/quickstart.py. Without a GPU it says so and exits 0.
"""

import numpy as np

import ferrocuda
from ferrocuda import kernels


def main() -> int:
    print("ferrocuda kernel families:", ", ".join(sorted(ferrocuda.bundled().families)))
    if not ferrocuda.driver_available():
        print("No CUDA driver/GPU present: the kernels were built, nothing to run them on.")
        return 0

    ok = True
    # ferrocuda's own arrays (no other library needed).
    a = ferrocuda.DeviceArray.from_numpy(np.arange(1000, dtype=np.float32))
    b = ferrocuda.DeviceArray.from_numpy(np.full(1000, 2, dtype=np.float32))
    out = ferrocuda.DeviceArray.empty((1000,), "float32")
    kernels.add(a, b, out)
    ok &= bool(np.array_equal(out.to_numpy(), np.arange(1000, dtype=np.float32) + 2))
    print("DeviceArray add:", "ok" if ok else "MISMATCH")

    try:
        import cupy as cp
    except ImportError:
        cp = None
    if cp is not None:
        m = cp.zeros((3, 4), dtype=cp.float64)
        kernels.add_index(m.T)  # a transposed view
        want = np.add.outer(np.arange(3), np.arange(4)).astype(np.float64)
        good = bool(np.array_equal(cp.asnumpy(m), want))
        ok &= good
        print("CuPy add_index on a transposed view:", "ok" if good else "MISMATCH")

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        x = torch.randn(1 << 20, device="cuda")
        y = torch.randn(1 << 20, device="cuda")
        expected = 2.5 * x + y
        kernels.saxpy(2.5, x, y)
        good = bool(torch.allclose(y, expected))
        ok &= good
        print("PyTorch saxpy:", "ok" if good else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
