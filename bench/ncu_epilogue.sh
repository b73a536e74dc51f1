#!/usr/bin/env bash
# Nsight Compute: ferrocuda's linear (bf16 out) beside linear_bias and linear_bias_gelu (the
# fused epilogues, sm_90a kernels) and torch's F.gelu(x @ w.T + b) (cuBLAS's GEMM, then the
# bias add and the GELU kernels) at M = N = K = ${NCU_GEMM_SIZE:-4096}: duration, tensor pipe,
# warp stalls, memory traffic; every kernel of one call each after a warm-up call (the range
# between torch.cuda.profiler.start and stop). Nsight Compute locks the clocks to base, near
# the clock a GEMM keeps at the power limit. Run on the GPU machine with the wheel importable.
# Usage: bash bench/ncu_epilogue.sh [OUT_DIR]   (writes ncu_epilogue${NCU_EPI_TAG}.txt there)
set -uo pipefail
out="${1:-${OUT:-/tmp}}"; mkdir -p "$out"
size="${NCU_GEMM_SIZE:-4096}"
log="$out/ncu_epilogue${NCU_EPI_TAG:-}.txt"
prog="
import torch, torch.nn.functional as F, ferrocuda
K = ferrocuda.kernels
n = $size
x = torch.rand(n, n, device='cuda', dtype=torch.bfloat16)
w = torch.rand(n, n, device='cuda', dtype=torch.bfloat16)
b = torch.rand(n, device='cuda', dtype=torch.bfloat16)
o = torch.empty(n, n, device='cuda', dtype=torch.bfloat16)
for i in range(2):
    torch.cuda.synchronize()
    if i:
        torch.cuda.profiler.start()
    K.linear(x, w, o); K.linear_bias(x, w, b, o); K.linear_bias_gelu(x, w, b, o)
    F.gelu(x @ w.T + b)
    torch.cuda.synchronize()
torch.cuda.profiler.stop()
"
ncu --target-processes all --profile-from-start off \
  --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
  --section MemoryWorkloadAnalysis_Tables \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum \
  python3 -c "$prog" > "$log" 2>&1
rc=$?
grep -E "linear_|nvjet|gemm|elementwise|gelu|Duration|gmma|hmma|Compute \(SM\) Throughput|DRAM Throughput|Stall|lts__t_bytes|dram__bytes|inst_executed|requests|Registers Per|Warp Cycles Per Issued|Achieved Occupancy" "$log" | head -120
exit $rc
