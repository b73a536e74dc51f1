#!/usr/bin/env python3
"""Launches each kernel the bandwidth goals compare, once, for Nsight Compute (``ncu``).

Run under ``ncu`` (see ``bench/ncu.sh``): ferrocuda ``add`` and ``torch.add`` on 2^28 float32
tensors, and ferrocuda ``add_index`` on the contiguous and the ``[:, :, ::2]`` 3-D views of the
``add_index`` benchmark. Each launch is preceded by a marker print so the profile can be read in
order; the ``add`` output is checked against torch.
"""

from __future__ import annotations

import sys


def main():
    import torch

    import ferrocuda

    k = ferrocuda.kernels
    n = 1 << 28
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    print("ncu: ferrocuda add 2^28", flush=True)
    k.add(a, b, out)
    torch.cuda.synchronize()
    assert torch.equal(out, a + b), "ferrocuda add is wrong"
    print("ncu: torch.add 2^28", flush=True)
    torch.add(a, b, out=out)
    torch.cuda.synchronize()
    del a, b, out

    shape = (256, 512, 1024)
    x = torch.rand(shape, device="cuda")
    print("ncu: add_index contiguous", flush=True)
    k.add_index(x)
    torch.cuda.synchronize()
    base = torch.rand((256, 512, 2048), device="cuda")
    v = base[:, :, ::2]
    print("ncu: add_index [:, :, ::2]", flush=True)
    k.add_index(v)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
