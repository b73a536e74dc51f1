#!/usr/bin/env bash
# Nsight Compute: ferrocuda's attention (sm_90a kernel) beside torch SDPA's flash backend and
# its own pick (cuDNN on an H100), bf16, B=4 H=16 S=${NCU_ATTN_SEQ:-4096} D=${NCU_ATTN_DIM:-128},
# not causal: duration, tensor pipe, warp stalls, occupancy; one launch each after warm-up
# (run on the GPU machine with the wheel importable). Usage: bash bench/ncu_attention.sh [OUT_DIR]
set -uo pipefail
out="${1:-${OUT:-/tmp}}"; mkdir -p "$out"
seq="${NCU_ATTN_SEQ:-4096}"; dim="${NCU_ATTN_DIM:-128}"
prog="
import math, torch, ferrocuda
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
q, k, v = (torch.randn(4, 16, $seq, $dim, device='cuda', dtype=torch.bfloat16) for _ in range(3))
o = torch.empty_like(q)
for _ in range(2):
    ferrocuda.kernels.attention(q, k, v, o, 1 / math.sqrt($dim), 0)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, k, v)
    F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
"
ncu --target-processes all -k 'regex:attention|flash|sdpa|fmha' --launch-skip 3 --launch-count 3 \
  --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,smsp__inst_executed.sum \
  python3 -c "$prog" > "$out/ncu_attention.txt" 2>&1
rc=$?
grep -E "attention|flash|sdpa|fmha|Duration|gmma|hmma|Compute \(SM\) Throughput|Stall|Registers Per|Warp Cycles Per Issued|Achieved Occupancy|inst_executed" "$out/ncu_attention.txt" | head -120
exit $rc
