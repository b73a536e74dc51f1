#!/usr/bin/env bash
# The one benchmark command on the GPU machine, from the repository root:
#
#     bash .gpu/bench/run.sh [--quick]        (or: bash .gpu/run.sh bench)
#
# after `scripts/gpu-bundle.sh` here has put into .gpu/: bench/ (this script, floor.cu,
# python_bench.py), the bundled PTX + manifest (.gpu/bench/ferrocuda_kernels.{ptx,json}), the
# Rust launch bench binary (.gpu/bin-bench/launch), the ferrocuda wheel (.gpu/wheels/) and,
# for the Numba part, a NumPy < 2.5 wheel (.gpu/whl-numba/ or .whl/).
#
#   1. compiles floor.cu with nvcc and runs it on the bundled PTX  -> $OUT/bench-parts/floor.jsonl
#      (and builds it as /tmp/libfloor.so, which python_bench.py times in its own rounds)
#   2. runs the Rust launch bench (criterion + JSON lines)          -> $OUT/bench-parts/rust.jsonl
#   3. runs python_bench.py (Numba part in a child process), which merges everything into
#      $OUT/bench.json and prints the combined tables LAST.
#
# Environment: OUT (default /tmp/ferrocuda-out); BENCH_SECTIONS (python_bench.py's --sections,
# default all: launch,bandwidth,init,add_index,numba); BENCH_BUDGET_S (default 540: whole-run
# wall-clock budget; later sizes are skipped rather than overrunning); FERROCUDA_NUMBA_SITE (a
# directory with NumPy < 2.5; default: installed here from a numpy-*.whl if one is bundled).
# Exit status: non-zero when a stage failed (the tables are still printed, with notes).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ "$(basename "$(dirname "$here")")" = ".gpu" ]; then
  root="$(dirname "$(dirname "$here")")"
else
  root="$(dirname "$here")"
fi
cd "$root" || exit 1
OUT="${OUT:-/tmp/ferrocuda-out}"
export OUT
parts="$OUT/bench-parts"
mkdir -p "$parts"
quick=()
floor_lib=()
sections=()
[ -n "${BENCH_SECTIONS:-}" ] && sections=(--sections "$BENCH_SECTIONS")
[ "${1:-}" = "--quick" ] && quick=(--quick)
start=$SECONDS
budget="${BENCH_BUDGET_S:-540}"
left() { echo $(( budget - (SECONDS - start) )); }
status=0
export PYTHONUNBUFFERED=1

echo "=== bench: $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  | head -1 | tee "$parts/gpu.txt"

# ---- the bundled PTX (for floor.cu)
ptx="$here/ferrocuda_kernels.ptx"
if [ ! -f "$ptx" ]; then
  # shellcheck disable=SC2012  # ls -t: the newest build's; cargo's paths have no odd characters
  ptx="$(ls -t target/release/build/ferrocuda-*/out/ferrocuda_kernels.ptx 2>/dev/null | head -1)"
fi

# The floor and the Rust launch bench feed the launch tables only: skipped when the sections
# asked for (BENCH_SECTIONS) do not include `launch` (e.g. BENCH_SECTIONS=gallery).
launch_parts=1
if [ -n "${BENCH_SECTIONS:-}" ] && [[ ",$BENCH_SECTIONS," != *,launch,* ]]; then
  launch_parts=0
  echo "bench: BENCH_SECTIONS=$BENCH_SECTIONS: floor and Rust launch bench skipped"
fi

# ---- 1. the raw-driver floor
: > "$parts/floor.jsonl"
nvcc_bin="$(command -v nvcc || true)"
[ -z "$nvcc_bin" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc_bin=/usr/local/cuda/bin/nvcc
if [ "$launch_parts" = 0 ]; then
  :
elif [ -z "$nvcc_bin" ]; then
  echo "bench: nvcc not found: floor skipped"; status=1
elif [ -z "$ptx" ] || [ ! -f "$ptx" ]; then
  echo "bench: no bundled PTX (run scripts/gpu-bundle.sh): floor skipped"; status=1
else
  echo "=== floor: nvcc -O2 -o /tmp/floor $here/floor.cu -lcuda ($nvcc_bin)"
  if "$nvcc_bin" -O2 -o /tmp/floor "$here/floor.cu" -lcuda; then
    echo "=== floor: /tmp/floor $ptx"
    timeout 120 /tmp/floor "$ptx" | tee "$parts/floor.jsonl" || { echo "bench: floor failed"; status=1; }
  else
    echo "bench: nvcc failed: floor skipped"; status=1
  fi
  # The same floor as a library, measured inside python_bench.py interleaved with its rows.
  echo "=== floor library: nvcc -O2 -DFLOOR_LIB -shared -Xcompiler -fPIC -o /tmp/libfloor.so"
  if "$nvcc_bin" -O2 -DFLOOR_LIB -shared -Xcompiler -fPIC -o /tmp/libfloor.so "$here/floor.cu" -lcuda; then
    floor_lib=(--floor-lib /tmp/libfloor.so --ptx "$ptx")
  else
    echo "bench: nvcc failed for the floor library: no in-process floor"; status=1
  fi
fi

# ---- 2. Rust launch overhead
: > "$parts/rust.jsonl"
bin="$root/.gpu/bin-bench/launch"
# Carried compressed by scripts/gpu-bundle.sh.
[ -f "$bin.gz" ] && gunzip -f "$bin.gz" && chmod +x "$bin"
if [ ! -x "$bin" ]; then
  # shellcheck disable=SC2010  # ls -t: the newest build's, less its .d file; cargo's names
  bin="$(ls -t target/release/deps/launch-* 2>/dev/null | grep -v '\.d$' | head -1)"
fi
if [ "$launch_parts" = 0 ]; then
  :
elif [ -n "$bin" ] && [ -x "$bin" ]; then
  echo "=== rust: CRITERION_HOME=$OUT/criterion $bin --bench --noplot"
  CRITERION_HOME="$OUT/criterion" timeout 200 "$bin" --bench --noplot 2>&1 | tee "$parts/rust.log"
  rc=${PIPESTATUS[0]}
  grep '^{"bench"' "$parts/rust.log" > "$parts/rust.jsonl" || true
  if [ "$rc" != 0 ]; then echo "bench: Rust launch bench exited $rc"; status=1; fi
else
  echo "bench: no Rust bench binary (.gpu/bin-bench/launch): Rust rows skipped"; status=1
fi

# ---- 3. Python (ferrocuda, CuPy, torch; Numba in a child)
site=/tmp/ferrocuda-site
if ! python3 -c 'import ferrocuda' >/dev/null 2>&1 && ls "$root"/.gpu/wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" "$root"/.gpu/wheels/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
if [ -z "${FERROCUDA_NUMBA_SITE:-}" ]; then
  whl=""
  for f in "$root"/.gpu/whl-numba/numpy-*.whl "$root"/.whl/numpy-*.whl; do
    if [ -f "$f" ]; then whl="$f"; break; fi
  done
  if [ -n "$whl" ]; then
    nsite=/tmp/ferrocuda-numba-site
    if python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$nsite" "$whl"; then
      export FERROCUDA_NUMBA_SITE="$nsite"
    else
      echo "bench: installing $whl failed: Numba rows will be skipped"
    fi
  fi
fi
py_left=$(( $(left) - 10 ))
[ "$py_left" -lt 60 ] && py_left=60
echo "=== python: python_bench.py (budget ${py_left}s; FERROCUDA_NUMBA_SITE=${FERROCUDA_NUMBA_SITE:-unset}); full results: $OUT/bench.json"
if ! timeout "$py_left" python3 "$here/python_bench.py" "${quick[@]}" "${floor_lib[@]}" "${sections[@]}" \
      --floor "$parts/floor.jsonl" --rust "$parts/rust.jsonl" --gpu-info "$parts/gpu.txt" \
      --json "$OUT/bench.json" --budget-s $(( py_left - 45 )) \
      --numba-timeout $(( py_left / 3 > 60 ? py_left / 3 : 60 )); then
  status=1
  echo "bench: python_bench.py failed or timed out; tables from the floor and Rust parts only:"
  python3 "$here/python_bench.py" --table-only --floor "$parts/floor.jsonl" \
    --rust "$parts/rust.jsonl" --gpu-info "$parts/gpu.txt" --json "$OUT/bench.json"
fi
exit $status
