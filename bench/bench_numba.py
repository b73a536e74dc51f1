"""The Numba part of the benchmark harness (``python_bench.py``), run in a child process with its
own NumPy.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from functools import partial

from bench_common import (
    BOUND_VARIANTS,
    CHILD_TAG,
    FC_VARIANTS,
    FULL_CHECK_MAX,
    LAUNCH_N,
    Budget,
    Reps,
    Results,
    bound_launch_rows,
    bw_row,
    compare,
    interleaved,
    launch_row,
    log,
    make_check,
    n_sets,
    reps_for,
    sample_index,
    sizes_from,
)
from bench_gpu_time import NumbaClock


def numba_child(args):
    """Runs in a subprocess with NumPy < 2.5 first on sys.path; prints one JSON line."""
    res = Results()
    out = {"versions": {}}
    reps = Reps(args.quick)
    try:
        import numpy as np

        out["versions"]["numpy"] = np.__version__
        import numba
        from numba import cuda

        out["versions"]["numba"] = numba.__version__
        try:
            import numba_cuda

            out["versions"]["numba_cuda"] = getattr(numba_cuda, "__version__", "?")
        except Exception:  # noqa: BLE001
            pass
        if not cuda.is_available():
            raise RuntimeError("numba.cuda.is_available() is False")
    except Exception as e:  # noqa: BLE001
        res.note("numba", "Numba unusable in the child: %s: %s" % (type(e).__name__, e))
        out.update(res.data)
        print(CHILD_TAG + json.dumps(out), flush=True)
        return 0

    @cuda.jit
    def nb_add(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] + b[i]

    def nb_launch(a, b, o, n):
        nb_add[(n + 255) // 256, 256](a, b, o)

    rng = np.random.default_rng(1)
    ha = rng.standard_normal(LAUNCH_N).astype(np.float32)
    hb = rng.standard_normal(LAUNCH_N).astype(np.float32)
    expected = ha + hb
    sync = cuda.synchronize
    da, db = cuda.to_device(ha), cuda.to_device(hb)
    dout = cuda.device_array(LAUNCH_N, np.float32)
    nan = np.full(LAUNCH_N, np.nan, np.float32)
    poison = partial(dout.copy_to_device, nan)
    read = dout.copy_to_host

    def launch(a, b, o):
        return lambda: nb_add[4, 256](a, b, o)

    with interleaved(res, reps, "numba"):
        call = launch(da, db, dout)
        launch_row(
            res,
            reps,
            "numba",
            "Numba @cuda.jit add, Numba device arrays",
            "numba_numba",
            call,
            sync,
            make_check(np, poison, call, sync, read, expected),
        )
        try:
            import ferrocuda

            fk = ferrocuda.kernels
            for label, key, kw in (FC_VARIANTS[0], FC_VARIANTS[3], FC_VARIANTS[4]):
                call = partial(fk.add, da, db, dout, **kw)
                launch_row(
                    res,
                    reps,
                    "numba",
                    "ferrocuda add, " + label,
                    "fc_numba_" + key,
                    call,
                    sync,
                    make_check(np, poison, call, sync, read, expected),
                )
            # Numba arrays have no fast path: a bound launch reads their interface per launch.
            bound_launch_rows(
                res,
                reps,
                "numba",
                "numba",
                fk.add,
                (da, db, dout),
                sync,
                lambda call: make_check(np, poison, call, sync, read, expected),
                variants=[BOUND_VARIANTS[0], BOUND_VARIANTS[3]],
            )
        except Exception as e:  # noqa: BLE001
            res.note("numba", "ferrocuda on Numba arrays skipped: %s: %s" % (type(e).__name__, e))
        fewer = reps
        try:
            import cupy as cp

            ca, cb, cout = cp.asarray(ha), cp.asarray(hb), cp.empty(LAUNCH_N, cp.float32)
            call = launch(ca, cb, cout)
            launch_row(
                res,
                fewer,
                "cupy",
                "Numba @cuda.jit add, CuPy arrays",
                "numba_cupy",
                call,
                sync,
                make_check(
                    np,
                    partial(cout.fill, float("nan")),
                    call,
                    sync,
                    partial(cp.asnumpy, cout),
                    expected,
                ),
            )
        except Exception as e:  # noqa: BLE001
            res.note("numba", "Numba on CuPy arrays skipped: %s: %s" % (type(e).__name__, e))
        try:
            import torch

            ta, tb = torch.from_numpy(ha).cuda(), torch.from_numpy(hb).cuda()
            tout = torch.empty(LAUNCH_N, dtype=torch.float32, device="cuda")
            call = launch(ta, tb, tout)
            launch_row(
                res,
                fewer,
                "torch",
                "Numba @cuda.jit add, torch tensors",
                "numba_torch",
                call,
                sync,
                make_check(
                    np,
                    partial(tout.fill_, float("nan")),
                    call,
                    sync,
                    lambda: tout.cpu().numpy(),
                    expected,
                ),
            )
        except Exception as e:  # noqa: BLE001
            res.note("numba", "Numba on torch tensors skipped: %s: %s" % (type(e).__name__, e))

    # Bandwidth: the Numba add kernel on Numba device arrays.
    if "bandwidth" in args.sections:
        try:
            clock = NumbaClock(cuda, np)
            budget = Budget(args.budget_s)
            for n in sizes_from(args):
                if budget.left() < 10:
                    res.note(
                        "bandwidth", "Numba: time budget exhausted at 2^%d" % int(math.log2(n))
                    )
                    break
                nbytes = 12 * n
                k = n_sets(nbytes, args.l2_bytes)
                hsa = np.random.default_rng(7).random(n, dtype=np.float32)
                hsb = np.random.default_rng(8).random(n, dtype=np.float32)
                ones = np.ones(n, np.float32) if k > 1 else None
                sets = [
                    (
                        cuda.to_device(hsa if i == 0 else ones),
                        cuda.to_device(hsb if i == 0 else ones),
                        cuda.device_array(n, np.float32),
                    )
                    for i in range(k)
                ]
                sets[0][2].copy_to_device(np.full(n, np.nan, np.float32))

                def nb_call(i, n=n, k=k, sets=sets):
                    a, b, o = sets[i % k]
                    nb_launch(a, b, o, n)

                def nb_check(n=n, sets=sets, hsa=hsa, hsb=hsb):
                    sync()
                    got = sets[0][2].copy_to_host()
                    if n <= FULL_CHECK_MAX:
                        return compare(np, got, hsa + hsb)
                    idx = sample_index(np, n)
                    return compare(np, got[idx], hsa[idx] + hsb[idx])

                nb_call(0)
                bw_row(
                    res,
                    "bandwidth",
                    "numba_add",
                    "Numba add kernel (Numba arrays)",
                    n,
                    nbytes,
                    clock,
                    nb_call,
                    reps_for(nbytes),
                    reps.trials,
                    nb_check,
                    {"sets": k},
                )
                sets = None  # release the buffers
        except Exception as e:  # noqa: BLE001
            res.note("bandwidth", "Numba bandwidth failed: %s: %s" % (type(e).__name__, e))
    out.update(res.data)
    print(CHILD_TAG + json.dumps(out), flush=True)
    return 0


def run_numba_child(res, args, budget):
    site = os.environ.get("FERROCUDA_NUMBA_SITE", "")
    if not site:
        res.note(
            "numba",
            "FERROCUDA_NUMBA_SITE is not set: Numba rows skipped (Numba needs "
            "NumPy < 2.5 first on PYTHONPATH)",
        )
        return
    if not os.path.isdir(site):
        res.note("numba", "FERROCUDA_NUMBA_SITE=%s is not a directory: Numba rows skipped" % site)
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("NUMBA_DISABLE_PERFORMANCE_WARNINGS", "1")
    timeout = max(30.0, min(args.numba_timeout, budget.left() - 5))
    harness = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_bench.py")
    cmd = [
        sys.executable,
        harness,
        "--numba-child",
        "--min-log2",
        str(args.min_log2),
        "--max-log2",
        str(args.max_log2),
        "--sections",
        ",".join(args.sections),
        "--l2-bytes",
        str(args.l2_bytes),
        "--budget-s",
        str(max(10.0, timeout - 20)),
    ]
    if args.quick:
        cmd.append("--quick")
    log("numba child: PYTHONPATH starts with %s (timeout %.0f s)" % (site, timeout))
    try:
        p = subprocess.run(
            cmd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        res.note("numba", "Numba child timed out after %.0f s" % timeout)
        return
    for line in p.stderr.splitlines():
        print("  [numba child] " + line, file=sys.stderr)
    payload = None
    for line in p.stdout.splitlines():
        if line.startswith(CHILD_TAG):
            payload = json.loads(line[len(CHILD_TAG) :])
        else:
            print("  [numba child] " + line, file=sys.stderr)
    if payload is None:
        res.note(
            "numba",
            "Numba child exited %d without results: %s"
            % (p.returncode, " | ".join(p.stderr.strip().splitlines()[-3:])),
        )
        return
    res.data["machine"]["numba_child_versions"] = payload.get("versions", {})
    for section in ("launch", "bandwidth"):
        res.data[section].extend(payload.get(section, []))
    res.data["notes"].extend(payload.get("notes", []))
