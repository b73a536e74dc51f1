"""The launch section of the benchmark harness (``python_bench.py``): host time per call of
``out = a + b`` on every path, timed interleaved, with the raw ``cuLaunchKernel`` floor in the
same process.
"""

from __future__ import annotations

from functools import partial

from bench_common import (
    BOUND_VARIANTS,
    FC_VARIANTS,
    LAUNCH_N,
    RAW_ADD_SRC,
    bound_launch_rows,
    interleaved,
    launch_row,
    make_check,
)


def fc_launch_rows(
    res, reps, np, fk, producer, tag, a, b, out, sync, poison, read, expected, side_stream=None
):
    """ferrocuda.kernels.add in each sync mode on one producer's arrays."""
    for label, key, kw in FC_VARIANTS:
        call = partial(fk.add, a, b, out, **kw)
        launch_row(
            res,
            reps,
            producer,
            "ferrocuda add, " + label,
            "fc_%s_%s" % (tag, key),
            call,
            sync,
            make_check(np, poison, call, sync, read, expected),
        )
    # Bound once, launched per call: the rows next to the per-call ones above.
    bound_launch_rows(
        res,
        reps,
        producer,
        tag,
        fk.add,
        (a, b, out),
        sync,
        lambda call: make_check(np, poison, call, sync, read, expected),
    )
    direct = getattr(fk, "add_f32", None)
    if direct is not None:  # the kernel itself, without the family's dtype/rank dispatch
        call = partial(direct, a, b, out, sync="default")
        launch_row(
            res,
            reps,
            producer,
            "ferrocuda kernels.add_f32 (no dispatch), sync='default'",
            "fc_%s_kernel_default" % tag,
            call,
            sync,
            make_check(np, poison, call, sync, read, expected),
        )
    if side_stream is None:
        return
    # On a side stream the producer's stream is foreign: the sync modes now differ.
    stream_arg, last = None, None
    cands = [side_stream] + [
        getattr(side_stream, attr)
        for attr in ("ptr", "cuda_stream", "handle")
        if isinstance(getattr(side_stream, attr, None), int)
    ]
    for cand in cands:
        try:
            fk.add(a, b, out, stream=cand)
            sync()
            stream_arg = cand
            break
        except Exception as e:  # noqa: BLE001
            last = e
    if stream_arg is None:
        res.note(
            "launch",
            "ferrocuda add(stream=<side stream>) not accepted (%s); side-stream "
            "rows skipped" % (last,),
        )
        return
    for label, key, kw in FC_VARIANTS[1:]:
        call = partial(fk.add, a, b, out, stream=stream_arg, **kw)
        launch_row(
            res,
            reps,
            producer,
            "ferrocuda add, side stream, " + label,
            "fc_%s_side_%s" % (tag, key),
            call,
            sync,
            make_check(np, poison, call, sync, read, expected),
        )
    bound_launch_rows(
        res,
        reps,
        producer,
        tag,
        fk.add,
        (a, b, out),
        sync,
        lambda call: make_check(np, poison, call, sync, read, expected),
        variants=BOUND_VARIANTS[1:],
        stream=stream_arg,
    )


def section_launch(res, reps, mods):
    with interleaved(res, reps):
        floor_rows(res, reps, mods.get("floor_lib"), mods.get("ptx"))
        declare_launch_rows(res, reps, mods)


def floor_rows(res, reps, lib_path, ptx):
    """The raw cuLaunchKernel floor in this process (bench/floor.cu built with -DFLOOR_LIB)."""
    if not lib_path or not ptx:
        res.note(
            "launch",
            "no --floor-lib/--ptx: no in-process floor (the goals use the floor process's figure)",
        )
        return
    import ctypes

    try:
        lib = ctypes.CDLL(lib_path)
        for f in ("floor_open", "floor_launch", "floor_synchronize", "floor_check"):
            getattr(lib, f).restype = ctypes.c_int
        r = lib.floor_open(ptx.encode())
        if r != 0:
            raise RuntimeError("floor_open(%s) returned %d" % (ptx, r))
    except Exception as e:  # noqa: BLE001
        res.note("launch", "in-process floor unavailable: %s: %s" % (type(e).__name__, e))
        return

    def ok(r, what):
        if r != 0:
            raise RuntimeError("%s returned %d" % (what, r))

    def sync():
        ok(lib.floor_synchronize(), "floor_synchronize")

    def check():
        r = lib.floor_check()
        return r == 0, "" if r == 0 else "floor_check returned %d" % r

    for which, key, path in (
        (0, "floor_inproc_add_f32", "cuLaunchKernel add_f32 (C, this process, legacy stream)"),
        (1, "floor_inproc_empty", "cuLaunchKernel empty kernel (C, this process, legacy stream)"),
    ):
        launch_row(
            res,
            reps,
            "C driver",
            path,
            key,
            None,
            sync,
            check if which == 0 else None,
            batch_fn=partial(lambda w, n: ok(lib.floor_launch(n, w), "floor_launch"), which),
        )


def declare_launch_rows(res, reps, mods):
    np, cp, torch, ferrocuda = mods["numpy"], mods["cupy"], mods["torch"], mods["ferrocuda"]
    fk = getattr(ferrocuda, "kernels", None) if ferrocuda is not None else None
    rng = np.random.default_rng(1)
    ha = rng.standard_normal(LAUNCH_N).astype(np.float32)
    hb = rng.standard_normal(LAUNCH_N).astype(np.float32)
    expected = ha + hb

    def noop():
        return None

    launch_row(
        res, reps, "-", "harness: Python loop + a no-op call", "harness_noop", noop, noop, info=True
    )

    # --- CuPy producer
    if cp is None:
        res.note("launch", "CuPy unavailable: CuPy rows skipped")
    else:
        try:
            a, b, out = cp.asarray(ha), cp.asarray(hb), cp.empty(LAUNCH_N, cp.float32)
            sync = cp.cuda.runtime.deviceSynchronize
            poison = partial(out.fill, float("nan"))
            read = partial(cp.asnumpy, out)
            if fk is not None:
                side = cp.cuda.Stream(non_blocking=True)
                fc_launch_rows(
                    res,
                    reps,
                    np,
                    fk,
                    "cupy",
                    "cupy",
                    a,
                    b,
                    out,
                    sync,
                    poison,
                    read,
                    expected,
                    side_stream=side,
                )
            raw = cp.RawKernel(RAW_ADD_SRC, "add_f32")
            call = partial(raw, (LAUNCH_N // 256,), (256,), (a, b, out, np.int64(LAUNCH_N)))
            launch_row(
                res,
                reps,
                "cupy",
                "CuPy RawKernel add (CUDA C)",
                "rawkernel_cupy",
                call,
                sync,
                make_check(np, poison, call, sync, read, expected),
            )
            python_floor_row(res, reps, np, cp, raw, a, b, out, sync, poison, read, expected)
            call = partial(cp.add, a, b, out=out)
            launch_row(
                res,
                reps,
                "cupy",
                "cupy.add(a, b, out=out)",
                "cupy_add",
                call,
                sync,
                make_check(np, poison, call, sync, read, expected),
            )

            def cai3():
                return (
                    a.__cuda_array_interface__,
                    b.__cuda_array_interface__,
                    out.__cuda_array_interface__,
                )

            launch_row(
                res,
                reps,
                "cupy",
                "read 3 __cuda_array_interface__ dicts",
                "cai_cupy",
                cai3,
                sync,
                info=True,
            )
        except Exception as e:  # noqa: BLE001
            res.note("launch", "CuPy section failed: %s: %s" % (type(e).__name__, e))

    # --- PyTorch producer
    if torch is None:
        res.note("launch", "PyTorch unavailable: torch rows skipped")
    else:
        try:
            ta = torch.from_numpy(ha).cuda()
            tb = torch.from_numpy(hb).cuda()
            tout = torch.empty(LAUNCH_N, dtype=torch.float32, device="cuda")
            sync = torch.cuda.synchronize
            poison = partial(tout.fill_, float("nan"))

            def read():
                return tout.cpu().numpy()

            if fk is not None:
                # A tensor's producer stream is torch's current stream (the default one here),
                # which is also the launch stream: every sync mode has nothing to order, so no
                # side-stream rows here.
                fc_launch_rows(
                    res, reps, np, fk, "torch", "torch", ta, tb, tout, sync, poison, read, expected
                )
            call = partial(torch.add, ta, tb, out=tout)
            launch_row(
                res,
                reps,
                "torch",
                "torch.add(a, b, out=out)",
                "torch_add",
                call,
                sync,
                make_check(np, poison, call, sync, read, expected),
            )

            def cai3t():
                return (
                    ta.__cuda_array_interface__,
                    tb.__cuda_array_interface__,
                    tout.__cuda_array_interface__,
                )

            launch_row(
                res,
                reps,
                "torch",
                "read 3 __cuda_array_interface__ dicts",
                "cai_torch",
                cai3t,
                sync,
                info=True,
            )
        except Exception as e:  # noqa: BLE001
            res.note("launch", "torch section failed: %s: %s" % (type(e).__name__, e))

    # --- ferrocuda's own DeviceArray
    if fk is not None:
        try:
            arrs = [to_fc_device_array(ferrocuda, x) for x in (ha, hb, np.zeros_like(ha))]
            if cp is not None:
                sync = cp.cuda.runtime.deviceSynchronize
            elif torch is not None:
                sync = torch.cuda.synchronize
            else:
                raise RuntimeError("no library to synchronize/read back with (need CuPy or torch)")
            read, poison = fc_reader(ferrocuda, np, cp, torch, arrs[2])
            call = partial(fk.add, *arrs)
            launch_row(
                res,
                reps,
                "ferrocuda",
                "ferrocuda add, DeviceArray, sync=None",
                "fc_fcarray_none",
                call,
                sync,
                make_check(np, poison, call, sync, read, expected),
            )
            call = partial(fk.add, *arrs, check_pointers=False)
            launch_row(
                res,
                reps,
                "ferrocuda",
                "ferrocuda add, DeviceArray, check_pointers=False",
                "fc_fcarray_nocheck",
                call,
                sync,
                make_check(np, poison, call, sync, read, expected),
            )
            bound_launch_rows(
                res,
                reps,
                "ferrocuda",
                "fcarray",
                fk.add,
                tuple(arrs),
                sync,
                lambda call: make_check(np, poison, call, sync, read, expected),
                variants=BOUND_VARIANTS[:2],
            )
        except Exception as e:  # noqa: BLE001
            res.note("launch", "ferrocuda.DeviceArray rows skipped: %s: %s" % (type(e).__name__, e))


def python_floor_row(res, reps, np, cp, raw, a, b, out, sync, poison, read, expected):
    """The Python floor: the least a launch issued from a Python loop costs — one call of
    CuPy's Cython wrapper of ``cuLaunchKernel`` (``cupy.cuda.driver.launchKernel``: its eleven
    arguments converted, the GIL released around the driver call, the status checked) on the
    RawKernel's function with a parameter array built once; nothing read, checked or planned.
    Every launch from Python pays at least this; the C floor pays none of it."""
    import ctypes

    try:
        launch = cp.cuda.driver.launchKernel
        f = raw.kernel.ptr
        vals = (
            ctypes.c_uint64(a.data.ptr),
            ctypes.c_uint64(b.data.ptr),
            ctypes.c_uint64(out.data.ptr),
            ctypes.c_int64(out.size),
        )
        params = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        kp, s, grid = ctypes.addressof(params), cp.cuda.get_current_stream().ptr, out.size // 256
    except Exception as e:  # noqa: BLE001
        res.note("launch", "Python floor unavailable: %s: %s" % (type(e).__name__, e))
        return

    def call():
        launch(f, grid, 1, 1, 256, 1, 1, 0, s, kp, 0)

    def batch(n):
        keep = (raw, vals, params)  # noqa: F841 - the module and parameters outlive the launches
        for _ in range(n):
            launch(f, grid, 1, 1, 256, 1, 1, 0, s, kp, 0)

    launch_row(
        res,
        reps,
        "cupy",
        "Python floor: cupy.cuda.driver.launchKernel from a Python "
        "loop (Cython call, GIL released; no reads or checks)",
        "pyfloor_cupy",
        None,
        sync,
        make_check(np, poison, call, sync, read, expected),
        batch_fn=batch,
    )


def to_fc_device_array(ferrocuda, host):
    """A ferrocuda.DeviceArray holding `host`, through whichever constructor the package has."""
    DA = getattr(ferrocuda, "DeviceArray", None)
    attempts = []
    if DA is not None:
        for name in ("from_numpy", "from_host", "from_array", "upload"):
            if hasattr(DA, name):
                attempts.append(partial(getattr(DA, name), host))
        attempts.append(partial(DA, host))
    for name in ("to_device", "asarray", "array"):
        if hasattr(ferrocuda, name):
            attempts.append(partial(getattr(ferrocuda, name), host))
    errors = []
    for f in attempts:
        try:
            x = f()
            cai = getattr(x, "__cuda_array_interface__", None)
            if cai is not None and tuple(cai["shape"]) == tuple(host.shape):
                return x
            errors.append("%r gave %r" % (f, type(x).__name__))
        except Exception as e:  # noqa: BLE001
            errors.append("%s: %s" % (type(e).__name__, e))
    raise RuntimeError(
        "no way found to build a ferrocuda.DeviceArray from a NumPy array (%s)"
        % "; ".join(errors[-3:])
    )


def fc_reader(ferrocuda, np, cp, torch, x):
    """(read, poison) for a ferrocuda DeviceArray, through CuPy's CAI import if possible."""
    if cp is not None:
        view = cp.asarray(x)  # zero-copy through __cuda_array_interface__
        return partial(cp.asnumpy, view), partial(view.fill, float("nan"))
    view = torch.as_tensor(x, device="cuda")
    return (lambda: view.cpu().numpy()), partial(view.fill_, float("nan"))
