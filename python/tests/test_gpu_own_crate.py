"""A kernel crate made by ``ferrocuda new``, loaded with ``ferrocuda.load(crate_dir)`` and run
on CuPy arrays, torch tensors and NumPy host arrays (GPU; skipped without one).

The crate comes from ``$FERROCUDA_OWN_CRATE`` — ``scripts/gpu-bundle.sh`` scaffolds and builds
it on the build machine, so on the GPU machine ``load`` finds it current in the build cache
and runs no cargo — or, without that variable, is scaffolded and built here (needs cargo).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ferrocuda
from conftest import run_child

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def crate(own_crate: Path) -> Path:
    return own_crate


@pytest.fixture(scope="module")
def mod(crate: Path, gpu: None) -> Any:
    return ferrocuda.load(crate)


def test_the_family_picks_the_instance_by_dtype(mod: Any, cupy: Any) -> None:
    cp = cupy
    for dtype in (cp.float32, cp.float64):
        x = cp.arange(1 << 20, dtype=dtype)
        y = cp.full_like(x, -1)
        mod.scale(2.5, x, y)
        cp.testing.assert_array_equal(y, 2.5 * x)
    # A kernel by name, with a grid and block of the caller's.
    x = cp.arange(1000, dtype=cp.float64)
    y = cp.empty_like(x)
    mod.scale_f64[7, 64](0.5, x, y)
    cp.testing.assert_array_equal(y, 0.5 * x)
    with pytest.raises(TypeError, match="y"):
        mod.scale_f32(1.0, cp.ones(4, cp.float32), cp.ones(4, cp.float64))
    with pytest.raises(ValueError, match="shape"):
        mod.scale(1.0, cp.ones(4, cp.float32), cp.ones(5, cp.float32))


def test_on_torch_tensors(mod: Any, torch: Any) -> None:
    x = torch.randn(1 << 16, device="cuda", dtype=torch.float64)
    y = torch.empty_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        mod.scale(3.0, x, y)  # on torch's current stream, s
    s.synchronize()
    assert torch.equal(y, 3.0 * x)


def test_on_host_arrays(mod: Any) -> None:
    x = np.arange(100, dtype=np.float32)
    y = np.zeros_like(x)
    with pytest.warns(ferrocuda.PerformanceWarning):
        mod.scale(4.0, x, y)
    np.testing.assert_array_equal(y, 4.0 * x)


#: argv: the crate. tc_linear_bf16_sm90 on bf16 rows of 12 elements (K = 12), then torch's
#: synchronization; prints what it raised and ferrocuda's trap record.
MISALIGNED_CHILD = r"""
import json, os, sys
import torch
import ferrocuda
mod = ferrocuda.load(sys.argv[1])
x = torch.ones(16, 12, device="cuda", dtype=torch.bfloat16)
c = torch.empty(16, 16, device="cuda")
r = {"raised": None}
try:
    mod.tc_linear_bf16_sm90(x, x.clone(), c, 12)
    torch.cuda.synchronize()
except Exception as e:  # torch's error: the fault shows at its synchronization
    r.update(raised=type(e).__name__, message=str(e))
t = ferrocuda.last_trap()
if t is not None:
    r.update(kernel=t.kernel, file=t.file, line=t.line)
print("REPORT " + json.dumps(r), flush=True)
os._exit(0)
"""


def test_tensor_cores_of_ones_own(mod: Any, torch: Any, crate: Path) -> None:
    """The crate's tensor-core family ``tc_linear`` (``builder/tests/fixtures/own-tensor-cores.rs``:
    ``mma.sync`` + ``cp.async`` everywhere, TMA + ``wgmma`` on sm_90a, written without inline
    assembly), both members by name and the family's choice, against torch's product in f64 on
    shapes that are and are not multiples of the tiles (K a multiple of 8: the copies' rule)."""
    if not hasattr(mod, "tc_linear"):
        pytest.skip("this crate has no tensor_cores module")
    hopper = torch.cuda.get_device_capability() >= (9, 0)
    g = torch.Generator(device="cuda").manual_seed(7)
    for m, n, k in [
        (64, 64, 64),
        (128, 192, 256),
        (100, 72, 40),
        (1, 1, 8),
        (17, 300, 136),
        (65, 9, 0),
    ]:
        x = (torch.rand(m, k, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
        w = (torch.rand(n, k, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
        ref = (x.double() @ w.double().T).float()
        # f32 accumulation of k exact products of values below 1: |error| ≤ k · 2⁻²³ · k.
        bound = max(k, 1) ** 2 * 2.0**-23 + 1e-7
        launchers = [("tc_linear", mod.tc_linear), ("tc_linear_bf16", mod.tc_linear_bf16)]
        if hopper and k > 0:
            launchers.append(("tc_linear_bf16_sm90", mod.tc_linear_bf16_sm90))
        for name, launch in launchers:
            c = torch.full((m, n), float("nan"), device="cuda")
            launch(x, w, c, k)
            torch.cuda.synchronize()
            err = (c - ref).abs().max().item() if c.numel() else 0.0
            assert err <= bound, f"{name} {m}x{n}x{k}: max error {err} > {bound}"
    # The copies' alignment rule, K a multiple of 8, in a child process (a trap ends its
    # context): rows of 24 bytes are no tensor map's, so even the sm_90a member called by name
    # runs its layout variant, the portable kernel, whose device check traps and is reported
    # with the crate's file and line.
    rep = run_child(MISALIGNED_CHILD, str(crate), timeout=300)
    assert rep["raised"] is not None, rep
    assert rep["kernel"] == "tc_linear_bf16", rep
    assert rep["file"].endswith("src/tensor_cores.rs") and rep["line"] > 0, rep
    # Shapes that disagree are refused before any launch, naming the rule.
    x = torch.ones(16, 16, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(8, 16, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="c must have a column per row of w"):
        mod.tc_linear(x, w, torch.empty(16, 16, device="cuda"), 16)
    with pytest.raises(ValueError, match="k columns"):
        mod.tc_linear(x, w, torch.empty(16, 8, device="cuda"), 8)
