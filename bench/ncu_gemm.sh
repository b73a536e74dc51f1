#!/usr/bin/env bash
# Nsight Compute profile of the GEMM goal (run on the GPU machine, with the wheel importable):
# ferrocuda's linear (bf16 in, bf16 out, the sm_90a kernel) beside cuBLAS's (F.linear) at
# M = N = K = ${NCU_GEMM_SIZE:-4096}: duration, tensor-pipe and SM throughput, issue-slot use,
# warp stall reasons, L2/DRAM traffic and shared-memory bank conflicts, one launch each after
# warm-up.
# Usage: bash bench/ncu_gemm.sh [OUT_DIR]   (writes ncu_gemm.txt there; default $OUT or /tmp)
set -uo pipefail
out="${1:-${OUT:-/tmp}}"; mkdir -p "$out"
size="${NCU_GEMM_SIZE:-4096}"
prog="
import torch, torch.nn.functional as F, ferrocuda
n = $size
x = torch.rand(n, n, device='cuda', dtype=torch.bfloat16)
w = torch.rand(n, n, device='cuda', dtype=torch.bfloat16)
o = torch.empty(n, n, device='cuda', dtype=torch.bfloat16)
for _ in range(3):
    ferrocuda.kernels.linear(x, w, o); F.linear(x, w)
torch.cuda.synchronize()
ferrocuda.kernels.linear(x, w, o); F.linear(x, w)
torch.cuda.synchronize()
"
ncu --target-processes all -k 'regex:linear|gemm|xmma|cutlass|sm90' --launch-skip 6 --launch-count 2 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section Occupancy \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,lts__t_bytes.sum,dram__bytes_read.sum,gpu__time_duration.sum \
  python3 -c "$prog" > "$out/ncu_gemm.txt" 2>&1
rc=$?
grep -E "linear|gemm|xmma|cutlass|Duration|gmma|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Issue Slots|Stall|bank_conflicts|lts__t_bytes|dram__bytes|Registers Per|Shared Memory Config|Achieved Occupancy|Block Size|Grid Size" "$out/ncu_gemm.txt" | head -120
exit $rc
