#!/usr/bin/env bash
# Nsight Compute: ferrocuda's attention (sm_90a kernel) beside torch SDPA's flash backend and
# its own pick (cuDNN on an H100), bf16, B=${NCU_ATTN_BATCH:-4} H=${NCU_ATTN_HEADS:-16} (k and v:
# ${NCU_ATTN_KV_HEADS:-H} heads) S=${NCU_ATTN_SEQ:-4096} D=${NCU_ATTN_DIM:-128}, causal if
# NCU_ATTN_CAUSAL=1: duration, tensor pipe, warp stalls, occupancy, L2 and DRAM traffic; one
# launch each after warm-up (run on the GPU machine with the wheel importable).
# Usage: bash bench/ncu_attention.sh [OUT_DIR]   (writes ncu_attention${NCU_ATTN_TAG}.txt there)
set -uo pipefail
out="${1:-${OUT:-/tmp}}"; mkdir -p "$out"
log="$out/ncu_attention${NCU_ATTN_TAG:-}.txt"
# The shape from the environment, read (as integers) by the profiled program itself.
prog="
import math, os, torch, ferrocuda
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
env = lambda name, default: int(os.environ.get(name) or default)
batch, heads, seq, dim = (env('NCU_ATTN_BATCH', 4), env('NCU_ATTN_HEADS', 16),
                          env('NCU_ATTN_SEQ', 4096), env('NCU_ATTN_DIM', 128))
kvh, causal = env('NCU_ATTN_KV_HEADS', heads), env('NCU_ATTN_CAUSAL', 0)
q, k, v = (torch.randn(batch, h, seq, dim, device='cuda', dtype=torch.bfloat16)
           for h in (heads, kvh, kvh))
o = torch.empty_like(q)
kw = dict(is_causal=bool(causal), enable_gqa=kvh != heads)
for _ in range(2):
    ferrocuda.kernels.attention(q, k, v, o, 1 / math.sqrt(dim), causal)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, k, v, **kw)
    F.scaled_dot_product_attention(q, k, v, **kw)
torch.cuda.synchronize()
"
ncu --target-processes all -k 'regex:attention|flash|sdpa|fmha' --launch-skip 3 --launch-count 3 \
  --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,smsp__inst_executed.sum,lts__t_bytes.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct \
  python3 -c "$prog" > "$log" 2>&1
rc=$?
grep -E "attention|flash|sdpa|fmha|Duration|gmma|hmma|Compute \(SM\) Throughput|Stall|Registers Per|Warp Cycles Per Issued|Achieved Occupancy|inst_executed|lts__t|dram__bytes" "$log" | head -120
exit $rc
