#!/usr/bin/env bash
# Nsight Compute profiles of the kernels behind the bandwidth goals (run on the GPU machine,
# with the wheel importable): speed of light, launch statistics, occupancy and DRAM bytes of
# ferrocuda add vs torch.add at 2^28 float32, and add_index on contiguous vs [:, :, ::2] views.
# Usage: bash bench/ncu.sh [OUT_DIR]   (writes ncu.txt there; default $OUT or /tmp)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-${OUT:-/tmp}}"; mkdir -p "$out"
ncu --target-processes all -k 'regex:add_f32|add_index|vectorized_elementwise_kernel' \
  --section SpeedOfLight --section LaunchStats --section Occupancy \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,smsp__inst_executed_op_global_ld.sum,smsp__sass_inst_executed_op_global_ld.sum \
  python3 "$here/ncu_kernels.py" > "$out/ncu.txt" 2>&1
rc=$?
grep -E "ncu:|add_f32|add_index|vectorized|Duration|DRAM Throughput|dram__|Grid Size|Block Size|Registers|Achieved Occupancy|Memory Throughput|global_ld" "$out/ncu.txt" | head -150
exit $rc
