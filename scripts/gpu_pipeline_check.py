#!/usr/bin/env python3
"""GPU check of the builder's device-language pipeline: launches the kernels of
builder/tests/fixtures/device-lang (built by scripts/gpu-bundle.sh into .gpu/pipeline/) and
compares every result with NumPy.

Usage: python3 gpu_pipeline_check.py MANIFEST.json      (the ferrocuda wheel and a GPU)

  * block_reverse: each block of 256 elements reversed through a static shared array -- wrong
    if the array were one grid-wide global (the blocks would overwrite each other) or the
    barrier did not order the block's stores before its loads;
  * dynamic_reverse: the same through 1 KiB of dynamic shared memory given at launch;
  * math_f32: libdevice expf and sinf (huge arguments too: the slow reduction path) within
    2 ulp of float64 NumPy, sqrtf bit-exact (correctly rounded: __CUDA_PREC_SQRT=1);
  * math_f64: exp and log1p within 2 ulp;
  * staged_copy: an exact copy with a barrier between two `if i < n` regions, the last block
    partly out of range (divergent).

Exit status 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

import ferrocuda

BLOCK = 256


def ulps(got: np.ndarray, exact: np.ndarray) -> float:
    """Largest error of `got` in units of the last place of the correctly rounded result."""
    ref = exact.astype(got.dtype)
    spacing = np.spacing(np.abs(ref))
    return float(np.max(np.abs(got.astype(np.float64) - exact) / spacing.astype(np.float64)))


def main(manifest: str) -> int:
    warnings.simplefilter("ignore", ferrocuda.PerformanceWarning)  # host arrays, on purpose
    m = ferrocuda.load(manifest)
    k = m.kernels
    rng = np.random.default_rng(7)
    failures = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
        if not ok:
            failures.append(name)

    n = BLOCK * 2000
    x = rng.standard_normal(n).astype(np.float32)
    expected = x.reshape(-1, BLOCK)[:, ::-1].reshape(-1)
    y = np.zeros_like(x)
    k["block_reverse"][n // BLOCK, BLOCK](x, y)
    check("block_reverse (static shared memory)", np.array_equal(y, expected))
    y = np.zeros_like(x)
    k["dynamic_reverse"][n // BLOCK, BLOCK, None, BLOCK * 4](x, y)
    check("dynamic_reverse (dynamic shared memory)", np.array_equal(y, expected))

    x = np.concatenate([rng.uniform(-10, 10, 1 << 20), rng.uniform(-1e6, 1e6, 1 << 16)]).astype(
        np.float32
    )
    e, s, q = (np.zeros_like(x) for _ in range(3))
    k["math_f32"](x, e, s, q)
    small = np.abs(x) <= 10
    x64 = x.astype(np.float64)
    err_e = ulps(e[small], np.exp(x64[small]))
    err_s = ulps(s, np.sin(x64))
    check("math_f32 expf", err_e <= 2, f"(max {err_e:.2f} ulp)")
    check("math_f32 sinf", err_s <= 2, f"(max {err_s:.2f} ulp, |x| up to 1e6)")
    check("math_f32 sqrtf", np.array_equal(q, np.sqrt(np.abs(x))), "(bit-exact)")

    x = rng.uniform(-50, 50, 1 << 20)
    e, lg = np.zeros_like(x), np.zeros_like(x)
    k["math_f64"](x, e, lg)
    # float64 references: NumPy's own results (correctly rounded or within 1 ulp).
    err_e = float(np.max(np.abs(e - np.exp(x)) / np.spacing(np.abs(np.exp(x)))))
    err_l = float(np.max(np.abs(lg - np.log1p(np.abs(x))) / np.spacing(np.log1p(np.abs(x)))))
    check("math_f64 exp", err_e <= 2, f"(max {err_e:.2f} ulp)")
    check("math_f64 log1p", err_l <= 2, f"(max {err_l:.2f} ulp)")

    n = BLOCK * 1000 + 77
    x = rng.standard_normal(n).astype(np.float32)
    y = np.zeros_like(x)
    k["staged_copy"][(n + BLOCK - 1) // BLOCK, BLOCK](x, y)
    check("staged_copy (barrier between divergent regions)", np.array_equal(x, y))

    print(
        "gpu_pipeline_check:", "FAILED " + ", ".join(failures) if failures else "all checks passed"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
