"""The ``layouts`` section of the benchmark harness (``python_bench.py``): bandwidth of the
element-wise families' strided variants against their contiguous kernels.

Each family launcher runs its contiguous, vectorised kernel when every array is C-contiguous
and its strided variant (``<kernel>_<rank>d``, views of any strides) otherwise. At 2^26 float32
elements per array this section times, with the GPU-time method of the other sections (CUDA
events around a batch queued behind a spin kernel, median of trials):

* ``add``, ``saxpy`` (in place on ``y``) and ``gelu`` on contiguous arrays (the contiguous
  kernel), on ``[::2]`` views of arrays twice as long (every array), on ``[::-1]`` views
  (every array), on transposed square 2-D views (every array), and with every input
  broadcast from one row of 4096 elements (``cupy.broadcast_to``, stride 0 on the first axis
  of a 16384 x 4096 array; the output contiguous);
* ``cupy.add(out=)`` on the same views, as the peer.

Bytes are the reads and writes of the elements the operation uses (``add`` and ``saxpy`` 12 B
per element, ``gelu`` 8 B), whatever the layout: a ``[::2]`` view moves twice the bytes it uses
through DRAM (half of every 32-byte sector), and a broadcast input is read from cache after
its first pass, so neither the step nor the broadcast rows measure DRAM alone. Every
ferrocuda row's output is checked once, in full, on the GPU: ``add`` and ``saxpy`` exactly
against CuPy's arithmetic on the same views, ``gelu`` bit for bit against its contiguous
kernel on a contiguous copy.

Rows go to ``res.data["layouts"]``; ``render_layouts`` prints the table with each row's ratio
to the same family's contiguous row.
"""

from __future__ import annotations

import math
import traceback

from bench_common import bw_row, log, reps_for

LAYOUT_N = 1 << 26  # a power of 4: the transposed views are square
ROW = 1 << 12  # broadcast rows of this length, n // ROW of them

#: family -> (read-only inputs, the written array is read too, bytes per element)
FAMILIES = {
    "add": (2, False, 12),
    "saxpy": (1, True, 12),
    "gelu": (1, False, 8),
}

ALPHA = 0.75


def _inputs(cp, key, n, k):
    """``k`` read-only float32 inputs of ``n`` elements in layout ``key``."""
    rng = cp.random.default_rng(11)
    if key == "contiguous":
        return [rng.standard_normal(n, dtype=cp.float32) for _ in range(k)]
    if key == "step2":
        return [rng.standard_normal(2 * n, dtype=cp.float32)[::2] for _ in range(k)]
    if key == "negative":
        return [rng.standard_normal(n, dtype=cp.float32)[::-1] for _ in range(k)]
    if key == "transposed":
        side = math.isqrt(n)
        return [rng.standard_normal((side, side), dtype=cp.float32).T for _ in range(k)]
    if key == "broadcast":
        rows = n // ROW
        return [
            cp.broadcast_to(rng.standard_normal((1, ROW), dtype=cp.float32), (rows, ROW))
            for _ in range(k)
        ]
    raise AssertionError(key)


def _output(cp, key, n):
    """The written float32 array of ``n`` elements in layout ``key`` (contiguous for the
    broadcast layout: only inputs may be broadcast)."""
    rng = cp.random.default_rng(12)
    if key == "step2":
        return rng.standard_normal(2 * n, dtype=cp.float32)[::2]
    if key == "negative":
        return rng.standard_normal(n, dtype=cp.float32)[::-1]
    if key == "transposed":
        return rng.standard_normal((math.isqrt(n), math.isqrt(n)), dtype=cp.float32).T
    if key == "broadcast":
        return rng.standard_normal((n // ROW, ROW), dtype=cp.float32)
    return rng.standard_normal(n, dtype=cp.float32)


#: key, label
LAYOUTS = [
    ("contiguous", "contiguous (the contiguous kernel)"),
    ("step2", "[::2] of 2n, every array"),
    ("negative", "[::-1], every array"),
    ("transposed", "transposed square 2-D, every array"),
    ("broadcast", "inputs broadcast from 1x4096 (stride 0)"),
]


def _check(cp, fc, family, ins, out):
    """Runs ``family`` once on the arrays and checks the whole output on the GPU."""
    K = fc.kernels
    if family == "add":
        want = ins[0] + ins[1]
        out.fill(float("nan"))
        K.add(ins[0], ins[1], out)
    elif family == "saxpy":
        y0 = out.copy()
        want = cp.float32(ALPHA) * ins[0] + y0
        K.saxpy(ALPHA, ins[0], out)
    else:
        want = cp.full(out.shape, float("nan"), cp.float32)
        K.gelu(cp.ascontiguousarray(ins[0]), want)  # the contiguous kernel
        out.fill(float("nan"))
        K.gelu(ins[0], out)
    cp.cuda.runtime.deviceSynchronize()
    bad = int((out.view(cp.uint32) != want.view(cp.uint32)).sum())
    if bad:
        return False, "%d of %d elements differ" % (bad, out.size)
    return True, ""


def _call(fc, family, ins, out):
    K = fc.kernels
    if family == "add":
        return lambda i: K.add(ins[0], ins[1], out)
    if family == "saxpy":
        return lambda i: K.saxpy(ALPHA, ins[0], out)
    return lambda i: K.gelu(ins[0], out)


def section_layouts(res, reps, mods, budget, clock, n=LAYOUT_N):
    cp, fc = mods.get("cupy"), mods.get("ferrocuda")
    res.data.setdefault("layouts", [])
    if cp is None or fc is None:
        res.note(
            "layouts",
            "CuPy or ferrocuda unavailable: layouts section skipped (it builds views with CuPy)",
        )
        return
    if math.isqrt(n) ** 2 != n or n % ROW:
        res.note("layouts", "%d elements: not a square multiple of %d; section skipped" % (n, ROW))
        return
    for family, (k, _, per_elem) in FAMILIES.items():
        nbytes = per_elem * n
        r = reps_for(nbytes)
        for key, label in LAYOUTS:
            if budget.left() < 10:
                res.note(
                    "layouts",
                    "time budget exhausted: %s %s and later rows skipped" % (family, label),
                )
                return
            try:
                ins, out = _inputs(cp, key, n, k), _output(cp, key, n)
                extra = {"family": family, "layout": key, "strides_bytes": list(out.strides)}
                bw_row(
                    res,
                    "layouts",
                    "fc_" + family,
                    "ferrocuda %s %s" % (family, label),
                    n,
                    nbytes,
                    clock,
                    _call(fc, family, ins, out),
                    r,
                    reps.trials,
                    lambda: _check(cp, fc, family, ins, out),
                    extra,
                )
                if family == "add":
                    bw_row(
                        res,
                        "layouts",
                        "cupy_add",
                        "cupy.add(out=) %s" % label,
                        n,
                        nbytes,
                        clock,
                        lambda i: cp.add(ins[0], ins[1], out=out),
                        r,
                        reps.trials,
                        None,
                        extra,
                    )
            except Exception as e:  # noqa: BLE001
                res.note(
                    "layouts",
                    "%s %s failed: %s: %s\n%s"
                    % (family, label, type(e).__name__, e, traceback.format_exc(limit=3)),
                )
            ins = out = None  # release the buffers
            cp.get_default_memory_pool().free_all_blocks()
    log("layouts: %d rows" % len(res.data["layouts"]))


def render_layouts(data):
    rows = [r for r in data.get("layouts", []) if r.get("gbps") is not None]
    if not rows:
        return ""
    base = {(r["impl"], r["family"]): r["gbps"] for r in rows if r.get("layout") == "contiguous"}
    n = rows[0]["n"]
    out = [
        "",
        "## Element-wise families on strided layouts, float32, 2^%d elements, GB/s"
        % (n.bit_length() - 1),
        "",
        "Bytes: reads + writes of the elements used (add, saxpy 12 B/element, gelu 8 B). "
        "× contiguous: against the same implementation on contiguous arrays.",
        "",
        "| family | implementation | layout | GB/s | × contiguous | checked |",
        "| --- | --- | --- | ---: | ---: | :---: |",
    ]
    for r in rows:
        b = base.get((r["impl"], r["family"]))
        ratio = "%.2f" % (r["gbps"] / b) if b else "—"
        checked = {True: "ok", False: "WRONG", None: "—"}[r.get("checked")]
        who = "ferrocuda" if r["impl"].startswith("fc_") else "cupy.add(out=)"
        out.append(
            "| %s | %s | %s | %.0f | %s | %s |"
            % (r["family"], who, r["layout"], r["gbps"], ratio, checked)
        )
    return "\n".join(out) + "\n"
