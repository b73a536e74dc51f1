#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: bash .gpu/run.sh [what...]
# what: rust python sanitizer (= memcheck racecheck synccheck) pysanitizer (same, Python) pyquick examples bench
#       device (the device-primitive GPU tests only, Rust and the Python math accuracy test;
#       `rust` and `python` run them too)
#       device-sanitizer (those under racecheck — shared-memory hazards of the block
#       collectives and shared atomics — and memcheck)
#       benchlaunch (the launch and Numba sections of the benchmarks only)
#       graphbench (bench/graph_replay.py: a graph replay of 100 launches against the 100
#                   launches issued directly, per kernel)
#       profile (stage timing of the Python launch path, from a profiling build)
#       compare (launch overhead against the build in .gpu/wheels-before/)
#       gallery-tests (the gallery kernels' Rust and Python correctness tests)
#       gallery (the gallery benchmarks against CUB/cuBLAS/PyTorch, then ncu-gallery)
#       ncu-gallery (Nsight Compute metrics of the gallery kernels and peers)
#       pipeline (the builder's device-language kernels: shared memory, libdevice, barriers;
#                 plainly, then under compute-sanitizer racecheck and memcheck)
#       launch (launch shape and 16-bit floats only: the Rust tests launch_*, the Python
#               test_gpu_launch.py, then the Rust ones under memcheck and racecheck)
#       graphs (CUDA graph capture only: the Rust tests graph_*, the Python
#               test_gpu_graphs.py, then the Rust ones under memcheck)
#       scale (several GPUs, Dask and MPI: the pickling and device-placement tests, the Dask
#              cases — threads, two workers on one GPU, dask-cuda one worker per GPU — and
#              the MPI cases — two ranks on one GPU, one rank per GPU — with the carried
#              wheels of .gpu/whl-scale in their own directory; then bench/multi_gpu.py --quick)
#       scalebench (bench/multi_gpu.py in full: launch cost and bandwidth on 1 and 2 GPUs,
#                   Dask's cost per task)
#       own (your own kernels: the crate of .gpu/own made by `ferrocuda new` — its Rust host
#            example with typed launchers, then test_gpu_own_crate.py and the crate's own
#            tests, loading it with ferrocuda.load from the build cache, on CuPy, torch and
#            NumPy arrays; `python` runs test_gpu_own_crate.py too)
#       (default: rust python sanitizer examples)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/ferrocuda-out}"; mkdir -p "$OUT"; export OUT
what="${*:-rust python sanitizer examples}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
site=/tmp/ferrocuda-site
if ls .gpu/wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" .gpu/wheels/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
# Numba on that machine needs numpy < 2.5: for the Python tests, a carried numpy 2.4 goes
# into a separate directory put first on PYTHONPATH (the benchmarks use it for Numba only).
if ls .gpu/whl-numba/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/ferrocuda-numpy .gpu/whl-numba/*.whl
fi
# The crate made by `ferrocuda new` on the build machine (scripts/gpu-bundle.sh).
[ -d .gpu/own/my_kernels ] && export FERROCUDA_OWN_CRATE="$PWD/.gpu/own/my_kernels"
# The carried NumPy goes first on PYTHONPATH for the Python tests only.
np_site=""; [ -d /tmp/ferrocuda-numpy ] && np_site="/tmp/ferrocuda-numpy:"
# One focused part: the Rust GPU tests whose names start with $3, the Python test file $4,
# then those Rust tests under each compute-sanitizer tool named after it; logs "$OUT/$1-*".
focused() {
  local name="$1" what="$2" filter="$3" pyfile="$4"; shift 4
  echo "=== $what (Rust)"
  .gpu/bin/gpu --test-threads=1 "$filter" 2>&1 | tee "$OUT/$name-rust.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  echo "=== $what (Python)"
  PYTHONPATH="$np_site$PYTHONPATH" python3 -m pytest -q -rs -p no:cacheprovider \
    ".gpu/python/tests/$pyfile" 2>&1 | tee "$OUT/$name-python.log" | tail -30
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  for tool in "$@"; do
    echo "=== compute-sanitizer --tool $tool: $filter*"
    compute-sanitizer --tool "$tool" --error-exitcode 86 .gpu/bin/gpu --test-threads=1 "$filter" \
      2>&1 | tail -15 | tee "$OUT/$name-sanitizer-$tool.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
}
for w in $what; do
  case "$w" in
    rust)
      # Each binary under a time limit (FERROCUDA_BIN_TIMEOUT_S, default 300): a hung test
      # must not take the rest of the run with it.
      for t in .gpu/bin/*; do
        echo "=== rust: $t"
        timeout "${FERROCUDA_BIN_TIMEOUT_S:-300}" "$t" --test-threads=1 2>&1 | tee "$OUT/rust-$(basename "$t").log"
        rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || { status=1; echo "=== rust: $t exit $rc"; }
      done ;;
    device)
      echo "=== device primitives (atomics, warp, block, half, shared memory, examples, diagnostics)"
      timeout "${FERROCUDA_BIN_TIMEOUT_S:-300}" .gpu/bin/device_gpu --test-threads=1 2>&1 | tee "$OUT/device.log"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      echo "=== device math accuracy (mpmath references; table in \$OUT/device_math_accuracy.json)"
      PYTHONPATH="$np_site$PYTHONPATH" python3 -m pytest -q -rs -s -p no:cacheprovider \
        .gpu/python/tests/test_gpu_device_math.py 2>&1 | tee "$OUT/device-math.log" | tail -60
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    device-sanitizer)
      # The large contention tests (2^20 threads per launch) are left to the plain run, and
      # the diagnostics tests, whose child processes trap on purpose.
      for tool in racecheck synccheck memcheck; do
        echo "=== compute-sanitizer --tool $tool: device primitives"
        compute-sanitizer --tool "$tool" --error-exitcode 86 .gpu/bin/device_gpu --test-threads=1 \
          --skip atomics_int --skip atomics_float --skip diag_ 2>&1 | tail -25 \
          | tee "$OUT/device-sanitizer-$tool.log"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
      done ;;
    own)
      if [ -x .gpu/own/my_kernels-host ]; then
        echo "=== own kernels: the scaffolded crate's Rust host example (typed launchers)"
        .gpu/own/my_kernels-host 2>&1 | tee "$OUT/own-rust.log"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
        echo "=== own kernels: Python (ferrocuda.load of the crate, from the build cache)"
        PYTHONPATH="$np_site$PYTHONPATH" python3 -m pytest -q -rs -p no:cacheprovider \
          .gpu/python/tests/test_gpu_own_crate.py .gpu/own/my_kernels/tests 2>&1 \
          | tee "$OUT/own-python.log" | tail -20
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
      else
        echo "no .gpu/own (scripts/gpu-bundle.sh builds it with the Python environment)"; status=1
      fi ;;
    examples)
      echo "=== examples (the main job's)"
      for e in .gpu/bin-examples/*; do "$e" || status=1; done
      python3 .gpu/python/examples/quickstart.py || status=1 ;;
    python)
      if [ -d .gpu/python/tests ]; then
        echo "=== python tests"
        PYTHONPATH="$np_site$PYTHONPATH" python3 -m pytest -q -rs .gpu/python/tests 2>&1 \
          | tee "$OUT/pytest.log" | grep -v "^SKIPPED" | tail -40
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
      fi ;;
    sanitizer|memcheck|racecheck|synccheck)
      # The Rust GPU suite minus the controls that race on purpose and the fault test (its
      # child process traps); racecheck and synccheck also skip the soak (memcheck covers it;
      # they take many minutes on 10^5 launches).
      tools="memcheck racecheck synccheck"; [ "$w" = sanitizer ] || tools="$w"
      for tool in $tools; do
        extra=""; { [ "$tool" != memcheck ] || [ -n "${FERROCUDA_SKIP_SOAK:-}" ]; } && extra="--skip soak_no_leaks"
        echo "=== compute-sanitizer --tool $tool"
        compute-sanitizer --tool "$tool" --error-exitcode 86 .gpu/bin/gpu --test-threads=1 \
          --skip race_off_observed --skip dropped_input_off_observed --skip fault_names_kernel \
          $extra 2>&1 | tail -25 | tee "$OUT/sanitizer-$tool.log"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
      done ;;
    pipeline)
      if [ -f .gpu/pipeline/fc_device_lang.json ]; then
        check=(python3 .gpu/pipeline/gpu_pipeline_check.py .gpu/pipeline/fc_device_lang.json)
        echo "=== pipeline: device-language kernels"
        "${check[@]}" 2>&1 | tee "$OUT/pipeline.log"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
        for tool in racecheck memcheck; do
          echo "=== pipeline under compute-sanitizer --tool $tool"
          # Judged by scripts/sanitizer-verdict.py (only the allowed reports may appear), not
          # by the tool's error count.
          compute-sanitizer --tool "$tool" --print-limit 1000 "${check[@]}" \
            > "$OUT/pipeline-$tool.log" 2>&1 || status=1
          grep -v "^=========" "$OUT/pipeline-$tool.log" | tail -10
          python3 .gpu/sanitizer-verdict.py "$OUT/pipeline-$tool.log" > "$OUT/pipeline-verdict-$tool.txt"
          v=$?; tail -6 "$OUT/pipeline-verdict-$tool.txt"; [ "$v" = 0 ] || status=1
        done
      else
        echo "no .gpu/pipeline (scripts/gpu-bundle.sh builds it)"; status=1
      fi ;;
    launch)
      focused launch "launch shape and 16-bit floats" launch_ test_gpu_launch.py memcheck racecheck ;;
    graphs)
      # CUDA graph capture only: torch.cuda.graph and CuPy's begin_capture, in each sync mode.
      focused graphs "graph capture" graph_ test_gpu_graphs.py memcheck ;;
    graphbench)
      # Host time per kernel of a CUDA graph replay against the same 100 launches issued
      # directly (torch and CuPy, each sync mode), interleaved rounds.
      timeout 300 python3 .gpu/bench/graph_replay.py 2>&1 | tee "$OUT/graph_replay.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    bench|benchlaunch)
      [ "$w" = benchlaunch ] && export BENCH_SECTIONS=launch,numba
      # Floor (nvcc), Rust and Python benchmarks; tables last, JSON in $OUT/bench.json.
      if [ -f .gpu/bench/run.sh ]; then
        bash .gpu/bench/run.sh 2>&1 | tee "$OUT/bench.log" || status=1
      else
        echo "gpu-run: no .gpu/bench/run.sh (bundle with scripts/gpu-bundle.sh)"; status=1
      fi ;;
  esac
done
echo "gpu-run: exit status $status"
exit $status
