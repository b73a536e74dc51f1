#!/usr/bin/env bash
# Nsight Compute profiles of the gallery kernels and their main peers (run on the GPU machine,
# with the wheel importable): per kernel, registers per thread, achieved occupancy, DRAM and
# SM throughput as a percentage of peak, and duration — the evidence behind any missed goal.
# Usage: bash bench/ncu_gallery.sh [OUT_DIR]   (writes ncu-gallery.txt and .csv there)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-${OUT:-/tmp}}"; mkdir -p "$out"
if ! command -v ncu >/dev/null 2>&1; then
  echo "ncu-gallery: ncu not found (Nsight Compute): skipped"; exit 1
fi
metrics=launch__registers_per_thread,launch__block_size,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
timeout 500 ncu --target-processes all --metrics "$metrics" --csv \
  python3 "$here/ncu_gallery.py" > "$out/ncu-gallery.csv" 2> "$out/ncu-gallery.err"
rc=$?
python3 - "$out/ncu-gallery.csv" > "$out/ncu-gallery.txt" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if not rows:
    print("no ncu rows (see ncu-gallery.err)"); sys.exit(0)
head, body = rows[0], rows[1:]
ix = {h: i for i, h in enumerate(head)}
kern = {}
for r in body:
    k = (r[ix["ID"]], r[ix["Kernel Name"]][:60])
    kern.setdefault(k, {})[r[ix["Metric Name"]]] = r[ix["Metric Value"]]
cols = ["launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__time_duration.sum", "launch__grid_size", "launch__block_size"]
print("| id | kernel | regs | achieved occupancy % | DRAM % of peak | SM % of peak | duration | grid | block |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for (i, name), m in kern.items():
    print("| %s | %s | %s |" % (i, name, " | ".join(m.get(c, "") for c in cols)))
PY
cat "$out/ncu-gallery.txt"
grep "^ncu:" "$out/ncu-gallery.err" "$out/ncu-gallery.csv" 2>/dev/null | head -20
exit $rc
