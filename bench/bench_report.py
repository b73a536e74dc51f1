"""The report of the benchmark harness (``python_bench.py``): merged results, goals, Markdown
tables.
"""

from __future__ import annotations

import json

from bench_common import ADD_INDEX_VIEWS, quantile


def read_jsonl(path, res, section):
    rows = []
    if not path:
        return rows
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError as e:
        res.note(section, "cannot read %s: %s" % (path, e))
    if not rows:
        res.note(section, "no %s results (%s)" % (section, path))
    return rows


def fmt(x, digits=2):
    if x is None:
        return "—"
    return ("%." + str(digits) + "f") % x


def ratio(x, y):
    if x is None or y is None or y == 0:
        return None
    return x / y


def paired(x_row, y_row):
    """Median, p10 and p90 over rounds of x's time / y's time in the same round (rows timed
    interleaved, `per_round_us`), or None. Unlike the ratio of the two medians, a drift from
    round to round cancels in each quotient."""
    xs = x_row and x_row.get("per_round_us")
    ys = y_row and y_row.get("per_round_us")
    if not xs or not ys or len(xs) != len(ys):
        return None
    q = sorted(x / y for x, y in zip(xs, ys, strict=True) if y)
    if not q:
        return None
    return quantile(q, 0.5), quantile(q, 0.1), quantile(q, 0.9)


def by_key(rows, key_field="key"):
    d = {}
    for r in rows:
        k = r.get(key_field)
        if k is not None and r.get("us_per_call") is not None:
            d[k] = r
    return d


def us(row):
    return None if row is None else row.get("us_per_call")


def bw_lookup(rows, impl, log2n):
    for r in rows:
        if r.get("impl") == impl and r.get("log2n") == log2n and r.get("gbps") is not None:
            return r
    return None


def floor_of(data):
    """(µs, what) of the floor the ratios use: the in-process, interleaved one when measured,
    else the floor process's `launch_add_f32`."""
    inproc = us(by_key(data["launch"]).get("floor_inproc_add_f32"))
    if inproc is not None:
        return (
            inproc,
            "C `cuLaunchKernel` of the same add_f32 in this process, interleaved "
            "with the other rows (`floor_inproc_add_f32`)",
        )
    floor = {r.get("name"): r for r in data["floor"]}
    return us(
        floor.get("launch_add_f32")
    ), "C `cuLaunchKernel` of the same add_f32 (floor process, `launch_add_f32`)"


def compute_goals(data):
    goals = []
    floor_us, _ = floor_of(data)
    launch = by_key(data["launch"])
    # "Default mode" = sync='default' named explicitly (sync=None follows the environment).
    cupy_row = launch.get("fc_cupy_default") or launch.get("fc_cupy_none")
    raw_row = launch.get("rawkernel_cupy")
    torch_row = launch.get("fc_torch_default") or launch.get("fc_torch_none")
    tadd_row = launch.get("torch_add")
    pyfloor_row = launch.get("pyfloor_cupy")
    fc_cupy, raw, fc_torch, tadd = us(cupy_row), us(raw_row), us(torch_row), us(tadd_row)
    # Bound launches (issue 16): the per-launch cost of ``launch = add.bind(a, b, out)``.
    bound = [
        (who, launch.get("fc_%s_bound_default" % tag) or launch.get("fc_%s_bound_none" % tag))
        for who, tag in (("ferrocuda DeviceArray", "fcarray"), ("CuPy", "cupy"), ("torch", "torch"))
    ]

    def goal(name, value, target, ok, unit=""):
        status = "n/a" if ok is None else ("PASS" if ok else "MISS")
        goals.append(
            {"goal": name, "measured": value, "target": target, "status": status, "unit": unit}
        )

    r1 = ratio(fc_cupy, floor_us)
    goal(
        "Python, 3 CuPy arrays, default mode: ≤ 1.7× raw cuLaunchKernel floor (add_f32)",
        r1,
        "≤ 1.70×",
        None if r1 is None else r1 <= 1.7,
        "×",
    )
    goal(
        "Python, 3 CuPy arrays, default mode: below CuPy RawKernel",
        ratio(fc_cupy, raw),
        "< 1.00×",
        None if fc_cupy is None or raw is None else fc_cupy < raw,
        "×",
    )
    goal(
        "Python, 3 torch tensors, default mode: no slower than torch.add(out=)",
        ratio(fc_torch, tadd),
        "≤ 1.00×",
        None if fc_torch is None or tadd is None else fc_torch <= tadd,
        "×",
    )
    for who, row in bound:
        rb = ratio(us(row), floor_us)
        goal(
            "Python, bound launch `add.bind(a, b, out)()`, 3 %s arrays, default mode: "
            "≤ 1.15× raw cuLaunchKernel floor (add_f32)" % who,
            rb,
            "≤ 1.15×",
            None if rb is None else rb <= 1.15,
            "×",
        )
    # The same comparisons paired by round (context: the goals above are judged on the ratio of
    # medians; this says how much of a margin survives round-to-round drift).
    floor_row = launch.get("floor_inproc_add_f32")
    pairs = [
        ("3 CuPy arrays, default mode, × CuPy RawKernel", cupy_row, raw_row),
        ("3 torch tensors, default mode, × torch.add(out=)", torch_row, tadd_row),
    ]
    for who, row in bound:
        pairs.append(
            ("bound launch, 3 %s arrays, × raw cuLaunchKernel floor" % who, row, floor_row)
        )
        pairs.append(("bound launch, 3 %s arrays, × the Python floor" % who, row, pyfloor_row))
    for what, x_row, y_row in pairs:
        pr = paired(x_row, y_row)
        goals.append(
            {
                "goal": "(paired by round) %s: median [p10–p90]" % what,
                "measured": None if pr is None else pr[0],
                "target": "—" if pr is None else "[%.3f–%.3f]" % (pr[1], pr[2]),
                "status": "n/a",
                "unit": "×",
            }
        )
    # What any launch from a Python loop costs at least (no goal of its own: the measure of how
    # much of the floor goal is left to ferrocuda at all).
    pyfloor = us(pyfloor_row)
    rp = ratio(pyfloor, floor_us)
    goal(
        "(context) Python floor: cupy.cuda.driver.launchKernel from a Python loop, "
        "× raw cuLaunchKernel floor",
        rp,
        "—",
        None,
        "×",
    )
    for who, row in bound:
        goal(
            "(context) bound launch, 3 %s arrays, × the Python floor" % who,
            ratio(us(row), pyfloor),
            "—",
            None,
            "×",
        )
    fc_bw = bw_lookup(data["bandwidth"], "fc_add_cupy", 28)
    t_bw = bw_lookup(data["bandwidth"], "torch_add", 28)
    rb = ratio(fc_bw and fc_bw["gbps"], t_bw and t_bw["gbps"])
    goal(
        "add at 2^28 float32: ≥ 1.0× torch.add bandwidth",
        rb,
        "≥ 1.00×",
        None if rb is None else rb >= 1.0,
        "×",
    )
    ai = {
        r.get("view"): r
        for r in data["add_index"]
        if r.get("impl") == "fc_add_index" and r.get("gbps") is not None
    }
    cont = ai.get("contiguous")
    for key, label, _, _ in ADD_INDEX_VIEWS[1:]:
        rv = ratio(ai[key]["gbps"] if key in ai else None, cont["gbps"] if cont else None)
        why = (
            " (inner-axis step 2: half of every 32-byte sector is unused, so ~0.5× is "
            "the hardware bound)"
            if key == "step_inner"
            else ""
        )
        goal(
            "add_index 3-D %s: ≥ 0.8× contiguous%s" % (label, why),
            rv,
            "≥ 0.80×",
            None if rv is None else rv >= 0.8,
            "×",
        )
    return goals


def render(data):
    out = []
    p = out.append
    m = data["machine"]
    p("")
    p("# ferrocuda benchmarks")
    p("")
    p(
        "Machine: %s | driver %s | %s | Python %s | NumPy %s | CuPy %s | torch %s | ferrocuda %s"
        % (
            m.get("gpu", "?"),
            m.get("driver", "?"),
            m.get("cuda_runtime", ""),
            m.get("python", "?"),
            m.get("numpy", "—"),
            m.get("cupy", "—"),
            m.get("torch", "—"),
            m.get("ferrocuda", "—"),
        )
    )
    nv = m.get("numba_child_versions")
    if nv:
        p("Numba child: %s" % ", ".join("%s %s" % kv for kv in sorted(nv.items())))
    floor_us, floor_what = floor_of(data)
    launch = by_key(data["launch"])
    raw = us(launch.get("rawkernel_cupy"))
    tadd = us(launch.get("torch_add"))

    p("")
    p("## Launch overhead: 3 × float32[1024], host µs per call (median of rounds)")
    p("")
    p(
        "Ratios: × floor = vs %s; × RawKernel = vs CuPy RawKernel; × torch.add = vs "
        "`torch.add(out=)`. The Python rows of one process are timed interleaved (one batch of "
        "each per round); the `C driver` rows without `this process` and the Rust rows come from "
        "their own processes, run before." % floor_what
    )
    p("")
    p("| who | path | µs/call | p10–p90 | × floor | × RawKernel | × torch.add | checked |")
    p("| --- | --- | ---: | ---: | ---: | ---: | ---: | :---: |")
    for r in data["floor"]:
        if r.get("name") == "device" or r.get("us_per_call") is None:
            continue
        u = r["us_per_call"]
        p(
            "| C driver | %s | %s | %s–%s | %s | %s | %s | %s |"
            % (
                r["name"],
                fmt(u, 3),
                fmt(r.get("p10_us"), 3),
                fmt(r.get("p90_us"), 3),
                fmt(ratio(u, floor_us)),
                fmt(ratio(u, raw)),
                fmt(ratio(u, tadd)),
                "ok" if "add" in r["name"] else "",
            )
        )
    for r in data["rust"]:
        u = r.get("us_per_launch")
        if u is None:
            continue
        p(
            "| Rust | add_f32 %s | %s | %s–%s | %s | %s | %s | %s |"
            % (
                r.get("name"),
                fmt(u, 3),
                fmt(r.get("p10_us"), 3),
                fmt(r.get("p90_us"), 3),
                fmt(ratio(u, floor_us)),
                fmt(ratio(u, raw)),
                fmt(ratio(u, tadd)),
                "ok" if r.get("checked") else "—",
            )
        )
    for r in data["launch"]:
        u = r.get("us_per_call")
        chk = {True: "ok", False: "**WRONG**"}.get(r.get("checked"), "—")
        if u is None:
            p(
                "| %s | %s | %s | | | | | |"
                % (r.get("producer"), r.get("path"), "failed: " + r.get("error", "?")[:60])
            )
            continue
        p(
            "| %s | %s | %s | %s–%s | %s | %s | %s | %s |"
            % (
                r.get("producer"),
                r.get("path") + (" (info)" if r.get("info_only") else ""),
                fmt(u, 3),
                fmt(r.get("p10_us"), 3),
                fmt(r.get("p90_us"), 3),
                fmt(ratio(u, floor_us)),
                fmt(ratio(u, raw)),
                fmt(ratio(u, tadd)),
                chk,
            )
        )

    def bw_table(title, rows, note):
        if not rows:
            return
        sizes = sorted({r["log2n"] for r in rows if r.get("log2n") is not None})
        impls = []
        for r in rows:
            if r["impl"] not in [i for i, _ in impls]:
                impls.append((r["impl"], r["label"]))
        p("")
        p("## " + title)
        p("")
        if note:
            p(note)
            p("")
        p("| impl | " + " | ".join("2^%d" % s for s in sizes) + " | checked |")
        p("| --- | " + " | ".join("---:" for _ in sizes) + " | :---: |")
        for impl, label in impls:
            cells, checked = [], set()
            for s in sizes:
                r = next((x for x in rows if x["impl"] == impl and x["log2n"] == s), None)
                if r is not None:
                    checked.add(r.get("checked"))
                cells.append(fmt(r.get("gbps"), 0) if r and r.get("gbps") else "—")
            chk = "**WRONG**" if False in checked else ("ok" if True in checked else "—")
            p("| %s | %s | %s |" % (label, " | ".join(cells), chk))

    bw_table(
        "Bandwidth: out = a + b, float32, GB/s (2 reads + 1 write; copy: 1 read + 1 write)",
        data["bandwidth"],
        "GPU time by CUDA events over a batch queued behind a spin "
        "kernel; median of trials; buffers rotated to ≥ 4× L2.",
    )
    fa = bw_lookup(data["bandwidth"], "fc_add_cupy", 28)
    ta = bw_lookup(data["bandwidth"], "torch_add", 28)
    if fa and ta:
        p("")
        p("ferrocuda add / torch.add at 2^28: **%.3f×**" % (fa["gbps"] / ta["gbps"]))
    bw_table("initialize_array vs memset, int32, GB/s (1 write)", data["init"], "")

    ai = [r for r in data["add_index"] if r.get("gbps") is not None]
    if data["add_index"]:
        p("")
        p("## add_index on 3-D float32 views, GB/s (1 read + 1 write per element)")
        p("")
        p(
            "| view | shape | strides (elements) | ferrocuda GB/s | × contiguous | CuPy `+= 1` GB/s"
            " | × contiguous | checked |"
        )
        p("| --- | --- | --- | ---: | ---: | ---: | ---: | :---: |")
        fc = {r["view"]: r for r in ai if r["impl"] == "fc_add_index"}
        cu = {r["view"]: r for r in ai if r["impl"] == "cupy_inplace_add"}
        for key, label, _, _ in ADD_INDEX_VIEWS:
            f, c = fc.get(key), cu.get(key)
            any_r = f or c
            if any_r is None:
                continue
            chk = {True: "ok", False: "**WRONG**"}.get(f.get("checked") if f else None, "—")
            p(
                "| %s | %s | %s | %s | %s | %s | %s | %s |"
                % (
                    label,
                    tuple(any_r.get("shape", [])),
                    tuple(any_r.get("strides_elems", [])),
                    fmt(f and f["gbps"], 0),
                    fmt(ratio(f and f["gbps"], fc.get("contiguous", {}).get("gbps"))),
                    fmt(c and c["gbps"], 0),
                    fmt(ratio(c and c["gbps"], cu.get("contiguous", {}).get("gbps"))),
                    chk,
                )
            )

    p("")
    p("## Goals (issue 5)")
    p("")
    p("| goal | measured | target | status |")
    p("| --- | ---: | ---: | :---: |")
    for g in data["goals"]:
        p(
            "| %s | %s | %s | %s |"
            % (
                g["goal"],
                fmt(g["measured"], 3) + (g["unit"] if g["measured"] is not None else ""),
                g["target"],
                g["status"],
            )
        )
    if data["notes"]:
        p("")
        p("## Notes")
        p("")
        for n in data["notes"]:
            p("- [%s] %s" % (n["section"], n["note"]))
    p("")
    return "\n".join(out)
