#!/usr/bin/env bash
# Nsight Compute metrics of `normalize` (one cooperative launch: partial sums, a grid-wide
# barrier, the division) beside its two-launch counterpart (`sum`, then `div_by`) at
# n = 2^${NCU_NORMALIZE_LOG2:-28} float32, one launch each after warm-up: duration, DRAM and
# L2 bytes, SM and memory throughput, grid, registers, active warps.
# Run on the GPU machine with the wheel importable.
# Usage: bash bench/ncu_normalize.sh [OUT_DIR]   (writes ncu_normalize.txt there)
set -uo pipefail
out="${1:-${OUT:-/tmp}}"; mkdir -p "$out"
log2="${NCU_NORMALIZE_LOG2:-28}"
prog="
import cupy as cp
import ferrocuda.kernels as K
n = 1 << $log2
x = cp.random.random(n, dtype=cp.float32) + cp.float32(0.5)
out, s = cp.empty_like(x), cp.empty(1, cp.float32)
for _ in range(3):
    K.normalize(x, out); K.sum(x, s); K.div_by(x, s, out)
cp.cuda.runtime.deviceSynchronize()
K.normalize(x, out); K.sum(x, s); K.div_by(x, s, out)
cp.cuda.runtime.deviceSynchronize()
"
ncu -k 'regex:normalize|sum_f32|div_by' --launch-skip 9 --launch-count 3 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
  python3 -c "$prog" > "$out/ncu_normalize.txt" 2>&1
rc=$?
grep -vE "^==PROF==" "$out/ncu_normalize.txt" | tail -60
exit $rc
