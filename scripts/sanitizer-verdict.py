#!/usr/bin/env python3
"""Reads a compute-sanitizer log and says whether it reports anything against ferrocuda.

Usage: sanitizer-verdict.py LOG   (exit 0: nothing but the allowed reports below; 1 otherwise)

It prints every report kind with its count and where it came from (the first host frame
naming a shared object, or the first Python frame), then the verdict. Allowed, with reason:

* ``Program hit CUDA_ERROR_INVALID_VALUE ... on CUDA API call to cuGetProcAddress_v2``
  raised inside NVIDIA's cuda-python bindings (``cydriver``), which Numba and CuPy use:
  they probe the driver for entry points it may not have. ferrocuda loads its driver
  functions by symbol and never calls cuGetProcAddress.
* ``Program hit CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ... on CUDA API call to
  cuStreamGetCaptureInfo_v3`` from ferrocuda itself: its one capture query per launch
  (``host/src/driver/result/stream.rs`` ``stream_capture``), asked about the legacy default stream
  while a blocking stream captures. That answer is the designed probe -- it means "a launch
  here would join the capture implicitly" (``Capture::Implicit``), which ferrocuda refuses
  with a clear error -- and the driver does not invalidate the capture for a query. The
  Python tests of that refusal (``test_gpu_graphs.py``) assert both the error and that the
  capture still replays.

Anything else -- a memory access error, a leak, a race or hazard, or any other failing API
call -- fails the verdict.
"""

from __future__ import annotations

import collections
import re
import sys

ALLOWED = [
    (
        re.compile(r"Program hit CUDA_ERROR_INVALID_VALUE .* cuGetProcAddress_v2"),
        "cydriver",
        "cuda-python probing for driver entry points",
    ),
    (
        re.compile(r"Program hit CUDA_ERROR_STREAM_CAPTURE_IMPLICIT .* cuStreamGetCaptureInfo_v3"),
        "_ferrocuda",
        "ferrocuda's capture query on the legacy stream during a capture",
    ),
]
SUMMARY = re.compile(
    r"^(ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|COMPUTE-SANITIZER|"
    r"Target application returned|This can happen|Saved host backtrace)"
)


def reports(lines):
    """(message, frames) of each report: a `========= ` line that is not indented further."""
    cur = None
    for line in lines:
        if not line.startswith("========= "):
            continue
        body = line[len("========= ") :]
        if not body.strip():  # a separator
            continue
        if body.startswith(" "):
            if cur is not None:
                cur[1].append(body.strip())
            continue
        if cur is not None:
            yield cur
        cur = None if SUMMARY.match(body) else (body.strip(), [])
    if cur is not None:
        yield cur


def origin(frames):
    for f in frames:
        m = re.search(r"in ([\w.+-]+\.so[\w.]*)", f)
        if m and not m.group(1).startswith(("libcuda", "libc.")):
            return m.group(1)
    for f in frames:
        if ".py:" in f:
            return f.replace("Host Frame: ", "")
    return "?"


def main(path):
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    # A report's text may follow progress dots on the same line (pytest's output).
    lines = [re.sub(r"^[.sEFx]+(?=========)", "", line) for line in lines]
    lines = [line + " " if line == "=========" else line for line in lines]
    counts = collections.Counter()
    bad = 0
    for msg, frames in reports(lines):
        where = origin(frames)
        why = next((r for pat, so, r in ALLOWED if pat.search(msg) and so in where), None)
        counts[(msg, where, why)] += 1
        bad += why is None
    summary = [line for line in lines if "SUMMARY" in line]
    for (msg, where, why), n in counts.most_common():
        print("%5d  %s  [from %s]%s" % (n, msg, where, "  (allowed: %s)" % why if why else ""))
    for line in summary:
        print(line.strip())
    if not summary:
        print("sanitizer-verdict: no summary line: the run did not finish")
        return 1
    if any("were not printed" in line for line in summary):
        print("sanitizer-verdict: FAIL: some reports were not printed (raise --print-limit)")
        return 1
    # One summary per process (children are followed): their sum is every report.
    total, claimed = sum(counts.values()), 0
    for line in summary:
        m = re.search(r"ERROR SUMMARY: (\d+) error", line)
        claimed += int(m.group(1)) if m else 0
    if any("ERROR SUMMARY" in line for line in summary) and claimed != total:
        print(
            "sanitizer-verdict: FAIL: the summaries count %d, the log shows %d" % (claimed, total)
        )
        return 1
    for line in summary:
        m = re.search(r"RACECHECK SUMMARY: .*\((\d+) errors?, (\d+) warnings?\)", line)
        if m and int(m.group(1)) + int(m.group(2)) > 0:
            print("sanitizer-verdict: FAIL: racecheck reports hazards")
            return 1
    print("sanitizer-verdict: %s (%d report(s) not allowed)" % ("FAIL" if bad else "clean", bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
