"""Failed device checks seen from Python (GPU; skipped without one).

A kernel that fails a check (``device_assert!``, a checked write out of bounds, a shared-array
index out of bounds, a misaligned 16-byte shared-array access) records its file, line and
thread in host-mapped memory and traps. The trap ends the CUDA context for the whole process,
so each case runs in a child process (``sys.executable`` running a small script) that prints
what it saw as JSON; the parent checks it:

* the ``ferrocuda.CudaError`` that ferrocuda raises names the file, line, thread and kernel
  in its message and carries them as ``.trap`` (a :class:`ferrocuda.Trap`);
* when another library's synchronization reports the fault first (``torch.cuda.synchronize()``,
  CuPy's ``Device.synchronize()``, which say only "an illegal instruction was encountered"),
  ``ferrocuda.last_trap()`` still names them.

The kernels: ``tests/device-kernels``' ``fail_on_purpose`` (loaded with ``ferrocuda.load`` from
the GPU bundle's ``.gpu/device-kernels/`` or a local build; its source ``diag.rs`` gives the
lines) and an inline kernel (``inline_kernels.TRAP``, from the bundle's inline cache or built
with cargo).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import device_kernels
import ferrocuda
from conftest import run_child
from inline_kernels import TRAP

pytestmark = pytest.mark.gpu

#: `fail_on_purpose`'s failing thread: global index 517 = block 2, thread 5 of 256.
WHO = 517
BLOCK, THREAD = [2, 0, 0], [5, 0, 0]

#: The source line of each mode's failed check in tests/device-kernels/src/diag.rs.
MARKERS = {
    0: "0 => device_assert!",
    1: "1 => unsafe { out.write",
    2: "let _ = tile.get(4 + i)",
    3: "quads.get_vector(2)",
}

#: Shared by the child scripts: a Trap as a dict, and the report line.
PRELUDE = r"""
import json, os, sys
import numpy as np
import ferrocuda


def as_dict(t):
    if t is None:
        return None
    return {"device": t.device, "kernel": t.kernel, "file": t.file, "line": t.line,
            "column": t.column, "block": list(t.block), "thread": list(t.thread),
            "truncated": t.truncated, "text": str(t)}


def report(r):
    r["last_trap"] = as_dict(ferrocuda.last_trap())
    r["last_trap_0"] = as_dict(ferrocuda.last_trap(0))
    print("REPORT " + json.dumps(r), flush=True)
    # Past a trap the context is dead: skip the libraries' teardown.
    os._exit(0)
"""

#: argv: manifest path, mode. ferrocuda alone: its own synchronization reports the fault.
ALONE_CHILD = (
    PRELUDE
    + r"""
mod = ferrocuda.load(sys.argv[1])
out = ferrocuda.DeviceArray.from_numpy(np.zeros(1000, np.uint32))
r = {"raised": None}
try:
    mod.fail_on_purpose[4, 256](out, 517, int(sys.argv[2]))
    out.synchronize()
except ferrocuda.CudaError as e:
    r.update(raised=type(e).__name__, message=str(e), code=e.code, trap=as_dict(e.trap))
report(r)
"""
)

#: argv: manifest path, library (torch or cupy). The library's synchronization comes first.
OTHER_CHILD = (
    PRELUDE
    + r"""
lib = sys.argv[2]
mod = ferrocuda.load(sys.argv[1])
if lib == "torch":
    import torch
    torch.zeros(1, device="cuda")  # the library's context, as in a real program
    out = ferrocuda.DeviceArray.from_numpy(np.zeros(1000, np.uint32))
    sync = torch.cuda.synchronize
else:
    import cupy as cp
    out = cp.zeros(1000, dtype=cp.uint32)
    sync = cp.cuda.Device().synchronize
r = {"launch_error": None, "other_error": None}
try:
    mod.fail_on_purpose[4, 256](out, 517, 0)
except ferrocuda.CudaError as e:  # the fault may already show at the launch's own calls
    r["launch_error"] = str(e)
try:
    sync()
except Exception as e:
    r["other_error"] = f"{type(e).__module__}.{type(e).__qualname__}: {e}"
report(r)
"""
)

#: argv: none; stdin: the inline source. `who` = 517 again.
INLINE_CHILD = (
    PRELUDE
    + r"""
mod = ferrocuda.inline(sys.stdin.read(), progress=False)
out = ferrocuda.DeviceArray.from_numpy(np.zeros(1000, np.uint32))
r = {"raised": None}
try:
    mod.trap_on_purpose[4, 256](out, 517)
    out.synchronize()
except ferrocuda.CudaError as e:
    r.update(raised=type(e).__name__, message=str(e), code=e.code, trap=as_dict(e.trap))
report(r)
"""
)


#: argv: manifest path; stdin: the README's block (python/README.md, "Errors"), run after
#: the trap in place of the program's own synchronization.
README_CHILD = (
    PRELUDE
    + r"""
import torch
mod = ferrocuda.load(sys.argv[1])
torch.zeros(1, device="cuda")
out = ferrocuda.DeviceArray.from_numpy(np.zeros(1000, np.uint32))
try:
    mod.fail_on_purpose[4, 256](out, 517, 0)
except ferrocuda.CudaError:
    pass
r = {"reraised": None}
try:
    block = compile(sys.stdin.read(), "README.md Errors block", "exec")
    exec(block, {"torch": torch, "ferrocuda": ferrocuda})
except RuntimeError as e:
    r["reraised"] = type(e).__qualname__
report(r)
"""
)


def readme_trap_block() -> str:
    readme = Path(__file__).resolve().parent.parent / "README.md"
    text = readme.read_text().split("\n### Errors\n", 1)[1].split("\n## ", 1)[0]
    return next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "last_trap" in b)


@pytest.fixture(scope="module")
def manifest(gpu: None) -> Path:
    path = device_kernels.manifest()
    if path is None:
        pytest.skip(
            "the device test kernels are not built (bundle them with scripts/gpu-bundle.sh)"
        )
    return path


@pytest.fixture(scope="module")
def diag_source(manifest: Path) -> list[str]:
    path = device_kernels.source(
        "diag.rs", device_kernels.REPO / "tests" / "device-kernels" / "src" / "diag.rs"
    )
    if path is None:
        pytest.skip("tests/device-kernels/src/diag.rs (the kernels' source) not found")
    return path.read_text().splitlines()


def line_of(lines: list[str], marker: str) -> int:
    return next(i for i, text in enumerate(lines) if marker in text) + 1


def check_trap(
    t: dict[str, Any] | None, file_end: str, line: int, kernel: str, whole_path: bool = True
) -> None:
    assert t is not None, "no trap record"
    assert t["file"].endswith(file_end), t
    assert t["line"] == line, t
    assert t["column"] >= 1, t
    assert (t["block"], t["thread"]) == (BLOCK, THREAD), t
    assert t["kernel"] == kernel, t
    assert t["device"] == 0 and (not whole_path or not t["truncated"]), t
    assert f"`{kernel}` at " in t["text"] and f"{file_end}:{line}:" in t["text"], t


@pytest.mark.parametrize("mode", sorted(MARKERS))
def test_ferrocuda_error_names_the_failed_check(
    manifest: Path, diag_source: list[str], mode: int
) -> None:
    line = line_of(diag_source, MARKERS[mode])
    r = run_child(ALONE_CHILD, str(manifest), str(mode))
    assert r["raised"] == "CudaError", r
    msg = r["message"]
    assert f"src/diag.rs:{line}:" in msg, msg
    assert "block (2, 0, 0), thread (5, 0, 0)" in msg, msg
    assert "fail_on_purpose" in msg, msg
    check_trap(r["trap"], "src/diag.rs", line, "fail_on_purpose")
    # The same record from last_trap, with and without the device.
    assert r["last_trap"] == r["trap"] == r["last_trap_0"], r


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_last_trap_after_another_librarys_synchronize(
    manifest: Path, diag_source: list[str], lib: str
) -> None:
    pytest.importorskip(lib)
    line = line_of(diag_source, MARKERS[0])
    r = run_child(OTHER_CHILD, str(manifest), lib)
    # The library reports the dead context (without saying where) ...
    assert r["other_error"] is not None, r
    # ... and ferrocuda's record says where.
    check_trap(r["last_trap"], "src/diag.rs", line, "fail_on_purpose")
    assert r["last_trap_0"] == r["last_trap"], r
    if r["launch_error"] is not None:
        assert f"src/diag.rs:{line}:" in r["launch_error"], r


def test_inline_kernel_error_names_its_line() -> None:
    try:
        ferrocuda.inline(TRAP, progress=False)
    except ferrocuda.BuildError as e:
        if shutil.which("cargo") is None:
            pytest.skip(f"the inline cache lacks the kernel and there is no cargo: {e}")
        raise
    lines = TRAP.splitlines()
    line = line_of(lines, "device_assert!")
    r = run_child(INLINE_CHILD, stdin=TRAP)
    assert r["raised"] == "CudaError", r
    assert "trap_on_purpose" in r["message"] and "block (2, 0, 0), thread (5, 0, 0)" in r["message"]
    # The string is the generated crate's src/kernel.rs, its lines the string's.
    # (The path is the generated crate's, as the compiler recorded it: kept whole when short.)
    check_trap(r["trap"], "kernel.rs", line, "trap_on_purpose", whole_path=False)
    assert f"kernel.rs:{line}:" in r["message"], r
    assert r["last_trap"] == r["trap"], r


def test_readme_block_names_the_check_after_torch_raises(
    manifest: Path, diag_source: list[str]
) -> None:
    pytest.importorskip("torch")
    line = line_of(diag_source, MARKERS[0])
    r = run_child(README_CHILD, str(manifest), stdin=readme_trap_block())
    # The block re-raises torch's error after printing where the kernel stopped.
    assert r["reraised"] is not None, r
    assert f"src/diag.rs {line} (5, 0, 0) fail_on_purpose" in r["stdout"], r["stdout"]
