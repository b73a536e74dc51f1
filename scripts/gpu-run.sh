#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: bash .gpu/run.sh [what...]
# what: rust python sanitizer (= memcheck racecheck synccheck) pysanitizer (same, Python) pyquick examples bench
#       pyfiles (the Python test files in $FERROCUDA_PYFILES, relative to .gpu/python/tests)
#       device (the device-primitive GPU tests only, Rust and the Python math accuracy test;
#       `rust` and `python` run them too)
#       device-sanitizer (those under racecheck — shared-memory hazards of the block
#       collectives and shared atomics — and memcheck)
#       benchlaunch (the launch and Numba sections of the benchmarks only)
#       graphbench (bench/graph_replay.py: a graph replay of 100 launches against the 100
#                   launches issued directly, per kernel)
#       profile (stage timing of the Python launch path, from a profiling build)
#       compare (launch overhead against the build in .gpu/wheels-before/)
#       perf (Linux perf profiles of the per-call launch loop, bench/perf_launch.sh; needs
#             a bundle made with FERROCUDA_BUNDLE_PERF=1)
#       gallery-tests (the gallery kernels' Rust and Python correctness tests)
#       gallery-sanitizer (the gallery kernels' Rust tests under memcheck, racecheck and
#                          synccheck; FERROCUDA_GALLERY_FILTER selects tests by name)
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
#       torch (ferrocuda.torch: the operator tests — opcheck and torch references for every
#              bundled family, torch.compile without graph breaks, CUDA-graph replay, a crate
#              of one's own — the README's PyTorch example, then bench/bench_torch_ops.py)
#       own (your own kernels: the crate of .gpu/own made by `ferrocuda new` — its Rust host
#            example with typed launchers, then test_gpu_own_crate.py and the crate's own
#            tests, loading it with ferrocuda.load from the build cache, on CuPy, torch and
#            NumPy arrays; `python` runs test_gpu_own_crate.py too)
#       (default: rust python sanitizer examples)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# Switches take 1 or 0, empty or unset the default (README.md, "Environment variables").
for v in FERROCUDA_SKIP_SOAK FERROCUDA_SYSTEM_MPI FERROCUDA_SANITIZER; do
  case "${!v:-}" in "" | 0 | 1) ;; *) echo "$v=${!v} is not understood; use 1 (on) or 0 (off)" >&2; exit 2 ;; esac
done
OUT="${OUT:-/tmp/ferrocuda-out}"; mkdir -p "$OUT"; export OUT
what="${*:-rust python sanitizer examples}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
# The executables travel compressed (scripts/gpu-bundle.sh): unpack them in place.
for f in .gpu/bin/*.gz .gpu/bin-bench/*.gz .gpu/bin-examples/*.gz .gpu/own/*.gz; do
  [ -f "$f" ] && gunzip -f "$f" && chmod +x "${f%.gz}"
done
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
# The inline kernels compiled there (test_gpu_inline.py finds them in this cache: no cargo).
[ -d .gpu/inline-cache ] && export FERROCUDA_INLINE_CACHE="$PWD/.gpu/inline-cache"
# The carried NumPy goes first on PYTHONPATH for the Python tests only.
np_site=""; [ -d /tmp/ferrocuda-numpy ] && np_site="/tmp/ferrocuda-numpy:"
# A Rust test binary and its arguments under compute-sanitizer tool $1, any error failing the
# run: the last $3 lines of its output shown and kept in "$OUT/$2".
sanitized() {
  local tool="$1" log="$2" lines="$3"; shift 3
  compute-sanitizer --tool "$tool" --error-exitcode 86 "$@" 2>&1 | tail -"$lines" | tee "$OUT/$log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
}
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
    sanitized "$tool" "$name-sanitizer-$tool.log" 15 .gpu/bin/gpu --test-threads=1 "$filter"
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
      echo "=== device primitives (atomics, warp, block, half, tensor cores, shared memory, examples, diagnostics)"
      timeout "${FERROCUDA_BIN_TIMEOUT_S:-300}" .gpu/bin/device_gpu --test-threads=1 2>&1 | tee "$OUT/device.log"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      echo "=== device math accuracy (mpmath references; table in \$OUT/device_math_accuracy.json)"
      PYTHONPATH="$np_site$PYTHONPATH" python3 -m pytest -q -rs -s -p no:cacheprovider \
        .gpu/python/tests/test_gpu_device_math.py 2>&1 | tee "$OUT/device-math.log" | tail -60
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    device-sanitizer)
      # The large contention tests (2^20 threads per launch) are left to the plain run, and
      # the diagnostics tests, whose child processes trap on purpose. synccheck also skips
      # mbarrier_cp_async_counted: it reports "Barrier error detected. Missing wait." on the
      # counted `cp.async.mbarrier.arrive` (a thread's own arrival and its copies' arrival in
      # one phase, which the PTX ISA allows; the `.noinc` form of the same protocol is clean)
      # and kills the kernel, which poisons the context for every later test. It runs alone
      # after, its verdict printed and not counted (RELIABILITY.md, "Limits of the evidence").
      for tool in racecheck synccheck memcheck; do
        echo "=== compute-sanitizer --tool $tool: device primitives"
        skip=(--skip atomics_int --skip atomics_float --skip diag_)
        [ "$tool" = synccheck ] && skip+=(--skip mbarrier_cp_async_counted)
        sanitized "$tool" "device-sanitizer-$tool.log" 25 .gpu/bin/device_gpu --test-threads=1 \
          "${skip[@]}"
      done
      echo "=== compute-sanitizer --tool synccheck: mbarrier_cp_async_counted alone (known report, not counted)"
      compute-sanitizer --tool synccheck .gpu/bin/device_gpu mbarrier_cp_async_counted 2>&1 \
        | grep -E "^test |Barrier error|SUMMARY" | sort | uniq -c | tee "$OUT/device-sanitizer-synccheck-counted.log" ;;
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
        extra=(); { [ "$tool" != memcheck ] || [ "${FERROCUDA_SKIP_SOAK:-0}" = 1 ]; } && extra=(--skip soak_no_leaks)
        echo "=== compute-sanitizer --tool $tool"
        sanitized "$tool" "sanitizer-$tool.log" 25 .gpu/bin/gpu --test-threads=1 \
          --skip race_off_observed --skip dropped_input_off_observed --skip fault_names_kernel \
          "${extra[@]}"
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
    torch)
      echo "=== torch operators (ferrocuda.torch)"
      PYTHONPATH="$np_site$PYTHONPATH" python3 -m pytest -q -rs -p no:cacheprovider \
        .gpu/python/tests/test_torch_import.py .gpu/python/tests/test_torch_ops.py \
        .gpu/python/tests/test_gpu_torch_ops.py .gpu/python/tests/test_gpu_readme.py 2>&1 \
        | tee "$OUT/torch.log" | grep -v "^SKIPPED" | tail -40
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      echo "=== bench/bench_torch_ops.py"
      timeout 420 python3 .gpu/bench/bench_torch_ops.py --json "$OUT/bench_torch_ops.json" 2>&1 \
        | tee "$OUT/bench_torch_ops.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    graphbench)
      # Host time per kernel of a CUDA graph replay against the same 100 launches issued
      # directly (torch and CuPy, each sync mode), interleaved rounds.
      timeout 300 python3 .gpu/bench/graph_replay.py 2>&1 | tee "$OUT/graph_replay.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    scale|scalebench)
      # Dask, distributed and dask-cuda (.gpu/whl-scale) go into a directory of their own,
      # used by this part only; the MPICH wheel's data tree (mpiexec, libmpi.so.12) into
      # another, for mpi4py (MPI4PY_LIBMPI) and the MPI tests (FERROCUDA_MPIEXEC). NumPy 2.4
      # comes first, as for the Python tests: distributed deserializes CuPy arrays through
      # Numba. Each step runs under a time limit (defaults: 420 s for the tests, 150 s for the
      # quick bench: the part fits one 10-minute command).
      scale_site=/tmp/ferrocuda-scale-site; mpi_prefix=/tmp/ferrocuda-mpi
      if ls .gpu/whl-scale/*.whl >/dev/null 2>&1; then
        scale_wheels=()
        for whl in .gpu/whl-scale/*.whl; do
          [[ "$whl" == */mpich-* ]] || scale_wheels+=("$whl")
        done
        python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$scale_site" \
          "${scale_wheels[@]}"
        for mpi_wheel in .gpu/whl-scale/mpich-*.whl; do
          [ -f "$mpi_wheel" ] && python3 .gpu/wheel_data.py "$mpi_wheel" "$mpi_prefix"
        done
      else
        echo "gpu-run: no .gpu/whl-scale: the Dask and MPI cases will skip"
      fi
      scale_env=(PYTHONPATH="$np_site$scale_site:$PYTHONPATH" XLA_PYTHON_CLIENT_PREALLOCATE=false)
      if [ -x "$mpi_prefix/bin/mpiexec" ] && [ "${FERROCUDA_SYSTEM_MPI:-0}" != 1 ]; then
        scale_env+=(FERROCUDA_MPIEXEC="$mpi_prefix/bin/mpiexec" MPI4PY_LIBMPI="$mpi_prefix/lib/libmpi.so.12")
      fi
      if [ "$w" = scale ]; then
        echo "=== scale: pickling, device placement, Dask, MPI"
        tmo=(); python3 -c "import pytest_timeout" 2>/dev/null && tmo=(--timeout 300)
        env "${scale_env[@]}" timeout "${FERROCUDA_SCALE_TIMEOUT_S:-420}" python3 -m pytest -q -rs -s \
          -p no:cacheprovider "${tmo[@]}" .gpu/python/tests/test_pickle.py \
          .gpu/python/tests/test_gpu_devices.py .gpu/python/tests/test_gpu_scale_dask.py \
          .gpu/python/tests/test_gpu_scale_mpi.py 2>&1 | tee "$OUT/scale.log" | grep -v "^\s*$" | tail -60
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
      fi
      echo "=== scale: bench/multi_gpu.py"
      quick=(--quick --budget 120); limit="${FERROCUDA_SCALE_BENCH_S:-150}"
      [ "$w" = scalebench ] && quick=(--budget 480) && limit="${FERROCUDA_SCALE_BENCH_S:-560}"
      env "${scale_env[@]}" timeout "$limit" python3 .gpu/bench/multi_gpu.py \
        "${quick[@]}" --json "$OUT/multi_gpu.json" 2>&1 | tee "$OUT/multi_gpu.log" | tail -40
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    pyfiles)
      # The Python test files named in FERROCUDA_PYFILES (paths under .gpu/python/tests, or
      # pytest node ids), e.g. after a bundle made with FERROCUDA_BUNDLE_ONLY=python.
      read -r -a files <<<"${FERROCUDA_PYFILES:-}"
      PYTHONPATH="$np_site$PYTHONPATH" python3 -m pytest -q -rs -p no:cacheprovider \
        "${files[@]/#/.gpu/python/tests/}" 2>&1 | tee "$OUT/pyfiles.log" | grep -v "^SKIPPED" | tail -60
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    pyquick)
      # The fast-path and lifetime tests only (a quick check after changing either).
      PYTHONPATH="$np_site$PYTHONPATH" python3 -m pytest -q -rs -p no:cacheprovider \
        .gpu/python/tests/test_gpu_fast_paths.py .gpu/python/tests/test_gpu_lifetimes.py \
        .gpu/python/tests/test_gpu_interop.py 2>&1 | tee "$OUT/pyquick.log" | tail -15
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    pysanitizer)
      # The whole Python GPU suite (-m gpu) under compute-sanitizer, memcheck and racecheck at
      # once (two processes on the GPU), child processes followed, repetitions scaled down
      # (FERROCUDA_SANITIZER=1: tests/scale.py), minus only the negative controls (they race
      # on purpose and assert that the race shows, which the sanitizer's timing may hide) and,
      # for racecheck, the soak (below). No -x: every test runs under the sanitizer.
      # Budget: FERROCUDA_SANITIZER_S per tool (default 540). Tools: FERROCUDA_PYSAN_TOOLS
      # (default "memcheck racecheck synccheck", all at once). FERROCUDA_PYSAN_PATHS: test files
      # or directories (default .gpu/python/tests), to split the suite over several commands.
      pytools="${FERROCUDA_PYSAN_TOOLS:-memcheck racecheck synccheck}"
      read -ra pysan_paths <<< "${FERROCUDA_PYSAN_PATHS:-.gpu/python/tests}"
      if [ -d .gpu/python/tests ]; then
        pids=()
        for tool in $pytools; do
          # racecheck loses track of kernel launches when 8 threads launch at once ("Internal
          # Sanitizer Error: Detected a failure to track a kernel launch") and skips the soak,
          # as the Rust suite's racecheck does; memcheck runs it.
          sel="not control and not off_observed"
          [ "$tool" != memcheck ] && sel="$sel and not soak"
          echo "=== compute-sanitizer --tool $tool: python GPU tests (in the background)"
          # JAX must not preallocate 75% of the GPU: two tools share it here.
          ( FERROCUDA_SANITIZER=1 XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH="$np_site$PYTHONPATH" timeout "${FERROCUDA_SANITIZER_S:-540}" \
              compute-sanitizer --tool "$tool" --target-processes all --print-limit 100000 \
              python3 -m pytest -q -p no:cacheprovider -rs --durations=15 \
              "${pysan_paths[@]}" -m gpu -k "$sel" \
              > "$OUT/pysanitizer-$tool.log" 2>&1
            echo "compute-sanitizer $tool exit: $?" >> "$OUT/pysanitizer-$tool.log" ) &
          pids+=($!)
        done
        wait "${pids[@]}"
        # The tests must pass (the exit status is pytest's), and the sanitizer must report
        # nothing but the allowed reports of scripts/sanitizer-verdict.py.
        for tool in $pytools; do
          echo "=== pysanitizer $tool"
          grep -v "^SKIPPED\|^=========" "$OUT/pysanitizer-$tool.log" | tail -25
          tail -1 "$OUT/pysanitizer-$tool.log" | grep -q "exit: 0$" || status=1
          python3 .gpu/sanitizer-verdict.py "$OUT/pysanitizer-$tool.log" > "$OUT/verdict-$tool.txt"
          v=$?; tail -8 "$OUT/verdict-$tool.txt"; [ "$v" = 0 ] || status=1
        done
      fi ;;
    profile)
      # Stage timing of the Python launch path (a profiling build, in its own directory).
      if ls .gpu/wheels-timing/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --upgrade \
          --target /tmp/ferrocuda-timing-site .gpu/wheels-timing/*.whl
        PYTHONPATH="/tmp/ferrocuda-timing-site${PYTHONPATH:+:$PYTHONPATH}" \
          python3 .gpu/bench/launch_profile.py 2>&1 | tee "$OUT/profile.txt" || status=1
      else
        echo "gpu-run: no profiling build in .gpu/wheels-timing"; status=1
      fi ;;
    perf)
      # Sampling profiles of the launch loop alone (bench/perf_launch.sh), with the carried perf.
      if [ -x .gpu/perf/perf ]; then
        PERF="$PWD/.gpu/perf/perf" PERF_LIBS="$PWD/.gpu/perf/lib" \
          bash .gpu/bench/perf_launch.sh "$OUT/perf" 2>&1 | tee "$OUT/perf.log" || status=1
      else
        echo "gpu-run: no .gpu/perf (bundle with FERROCUDA_BUNDLE_PERF=1)"; status=1
      fi ;;
    compare)
      # Launch overhead of this build against an earlier one (.gpu/wheels-before/, bundled from
      # .whl-before/), child processes alternating between the two (bench/compare_builds.py).
      if ls .gpu/wheels-before/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --upgrade \
          --target /tmp/ferrocuda-before .gpu/wheels-before/*.whl
        python3 .gpu/bench/compare_builds.py /tmp/ferrocuda-before "$site" --pairs "${COMPARE_PAIRS:-4}" --rounds 10 2>&1 \
          | tee "$OUT/compare.txt" || status=1
      else
        echo "gpu-run: no earlier build in .gpu/wheels-before"; status=1
      fi ;;
    gallery-tests)
      # The gallery's correctness tests only: Rust typed launchers, then Python on every
      # array library (GPU tests of test_gpu_gallery.py and the CPU ones of test_gallery.py).
      echo "=== gallery tests (Rust)"
      .gpu/bin/gallery_gpu --test-threads=1 2>&1 | tee "$OUT/gallery-rust.log"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      echo "=== gallery tests (Python)"
      PYTHONPATH="$np_site$PYTHONPATH" python3 -m pytest -q -rs -p no:cacheprovider \
        .gpu/python/tests/test_gpu_gallery.py .gpu/python/tests/test_gallery.py 2>&1 \
        | tee "$OUT/gallery-pytest.log" | grep -v "^SKIPPED" | tail -40
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    gallery-sanitizer)
      # The gallery kernels' Rust tests (matmul, linear, normalize, scan, attention, …) under
      # each compute-sanitizer tool: the kernels' own barriers, shared memory and bounds, in
      # one process without the Python stack (far quicker than pysanitizer for the same
      # kernels). FERROCUDA_GALLERY_FILTER: a test-name filter (default: every test).
      for tool in memcheck racecheck synccheck; do
        echo "=== compute-sanitizer --tool $tool: gallery kernels ${FERROCUDA_GALLERY_FILTER:-}"
        sanitized "$tool" "gallery-sanitizer-$tool.log" 20 .gpu/bin/gallery_gpu --test-threads=1 \
          ${FERROCUDA_GALLERY_FILTER:+"$FERROCUDA_GALLERY_FILTER"}
      done ;;
    ncu-gallery)
      # Nsight Compute on the gallery kernels and their peers: registers, achieved
      # occupancy, DRAM and SM throughput (for any goal the benchmarks miss).
      bash .gpu/bench/ncu_gallery.sh "$OUT" || status=1 ;;
    gallery)
      # The gallery benchmarks alone (tables last, JSON in $OUT/bench.json), then ncu.
      if [ -f .gpu/bench/run.sh ]; then
        BENCH_SECTIONS=gallery bash .gpu/bench/run.sh 2>&1 | tee "$OUT/bench-gallery.log" || status=1
      else
        echo "gpu-run: no .gpu/bench/run.sh (bundle with scripts/gpu-bundle.sh)"; status=1
      fi
      bash .gpu/bench/ncu_gallery.sh "$OUT" || status=1 ;;
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
