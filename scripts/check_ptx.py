#!/usr/bin/env python3
"""Check a ferrocuda PTX module for what must never reach a GPU. No GPU needed.

Usage:
    scripts/check_ptx.py KERNELS.ptx [--manifest KERNELS.json] [--ptxas PATH]
                         [--arch sm_80 --arch sm_90] [--static-only]

The rules live in one place: the Rust crate ferrocuda-builder (builder/src/check/). The
builder runs them on every kernel crate it builds (failing the build on unresolved externs,
panic machinery, barriers under thread-dependent branches and waits nothing in the kernel can
complete; warning about local memory,
stack frames and spills); its command `ferrocuda-ptx-check` runs all of them strictly on a
file, every finding a failure -- the policy for the repository's own kernels. This script
builds that command (cargo, once) and runs it:

  * no `.extern` declaration but `.extern .shared` (dynamic shared memory);
  * no kernel that reaches panic machinery (the standard library's panic and formatting
    functions) through its calls; no panic message strings or source paths;
  * no `.local` memory used (LLVM's stack-frame prologue alone is none);
  * no kernel with more than 48 KiB of static shared memory;
  * no block barrier (`bar.sync`, `barrier.sync`, `bar.arrive`, `bar.red`, or a call to a
    function that executes one) that only some threads of a block may reach: under a branch
    whose predicate derives from %tid/%laneid/... or from a loaded value (branches on
    %ctaid, %ntid, kernel parameters, `bra.uni`, and values every thread reads from one
    shared-memory location after a barrier with no write before the next are uniform);
  * no mbarrier wait (`mbarrier.test_wait`/`try_wait`) in a kernel that never arrives on an
    mbarrier, no `cp.async.wait_group` in a kernel that never commits a group;
  * no `wgmma.mma_async` reached with no `wgmma.fence` on some path, or in a kernel that never
    commits or waits for its groups; ptxas serializes no function's wgmma instructions;
  * with --manifest: its kernels are the `.entry` set and its arch the `.target`;
  * for each --arch (default sm_80 and sm_90): ptxas succeeds, reports every entry, and no
    function has a stack frame or spills.

Exit status: 0 all checks passed, 1 a check failed, 2 usage or environment error. ptxas:
--ptxas, else $PTXAS, else <repo>/.tools/nvcc/nvidia/cuda_nvcc/bin/ptxas (scripts/ensure_ptxas.sh),
else the command's own search ($FERROCUDA_PTXAS, $CUDA_HOME, $CUDA_PATH, PATH, ...).
$FERROCUDA_PTX_CHECK names a prebuilt `ferrocuda-ptx-check` (no cargo build).

Python 3.9+, standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
REPO_PTXAS = REPO_ROOT / ".tools" / "nvcc" / "nvidia" / "cuda_nvcc" / "bin" / "ptxas"
BIN = "ferrocuda-ptx-check"


def find_checker() -> str:
    """The `ferrocuda-ptx-check` executable: $FERROCUDA_PTX_CHECK, else built with cargo."""
    prebuilt = os.environ.get("FERROCUDA_PTX_CHECK")
    if prebuilt:
        return prebuilt
    cmd = [
        "cargo",
        "build",
        "--quiet",
        "-p",
        "ferrocuda-builder",
        "--bin",
        BIN,
        "--message-format=json",
    ]
    r = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed:\n{r.stderr}")
    for line in r.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == BIN:
            return msg["executable"]
    raise RuntimeError(f"cargo built no {BIN}")


def checker_args(argv: Sequence[str]) -> list[str]:
    """argv for the command: the repository's ptxas unless one is named or ptxas is off."""
    args = list(argv)
    if "--ptxas" not in args and "--static-only" not in args:
        ptxas = os.environ.get("PTXAS") or (str(REPO_PTXAS) if REPO_PTXAS.is_file() else None)
        if ptxas:
            args += ["--ptxas", ptxas]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = checker_args(sys.argv[1:] if argv is None else argv)
    try:
        exe = find_checker()
    except (OSError, RuntimeError) as e:
        print(f"check_ptx: cannot build {BIN}: {e}", file=sys.stderr)
        return 2
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
