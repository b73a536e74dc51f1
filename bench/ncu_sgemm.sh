#!/usr/bin/env bash
# Nsight Compute profile of the SGEMM goal (run on the GPU machine, with the wheel importable):
# ferrocuda's matmul (matmul_f32, and each kernel named in $NCU_SGEMM_KERNELS) beside cuBLAS's
# SGEMM (torch.matmul, TF32 off) at M = N = K = ${NCU_SGEMM_SIZE:-4096}: duration, FMA-pipe and
# SM throughput, issue-slot use, warp stall reasons (per issued instruction), shared-memory bank conflicts, registers
# and occupancy, one launch each after warm-up.
# Usage: bash bench/ncu_sgemm.sh [OUT_DIR]   (writes ncu_sgemm.txt there; default $OUT or /tmp)
set -uo pipefail
out="${1:-${OUT:-/tmp}}"; mkdir -p "$out"
size="${NCU_SGEMM_SIZE:-4096}"
prog="
import torch, ferrocuda
torch.backends.cuda.matmul.allow_tf32 = False
n = $size
a = torch.randn(n, n, device='cuda')
b = torch.randn(n, n, device='cuda')
c = torch.empty(n, n, device='cuda')
K = ferrocuda.kernels
ours = [K.matmul] + [getattr(K, k) for k in '${NCU_SGEMM_KERNELS:-}'.split(',') if k]
for _ in range(3):
    for f in ours:
        f(a, b, c, 1.0, 0.0)
    torch.matmul(a, b, out=c)
torch.cuda.synchronize()
for f in ours:
    f(a, b, c, 1.0, 0.0)
torch.matmul(a, b, out=c)
torch.cuda.synchronize()
"
nk=$(( $(echo "${NCU_SGEMM_KERNELS:-}" | tr ',' '\n' | grep -c .) + 2 ))
ncu --target-processes all -k 'regex:matmul|gemm|nvjet|cutlass|xmma' --launch-skip $((3 * nk)) --launch-count "$nk" \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section LaunchStats --section Occupancy --section SchedulerStats \
  --metrics sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.sum,sm__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__cycles_active.avg,sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
  python3 -c "$prog" > "$out/ncu_sgemm.txt" 2>&1
rc=$?
grep -E "matmul|gemm|nvjet|cutlass|xmma|Duration|pipe_fma|inst_executed|Compute \(SM\) Throughput|Issue Slots|Stall|Warp Cycles|bank_conflicts|Registers Per|Achieved Occupancy|Block Size|Grid Size|per_second|No Eligible|Eligible Warps|stalled" "$out/ncu_sgemm.txt" | head -220
exit $rc
