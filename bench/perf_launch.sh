#!/usr/bin/env bash
# Sampling profiles (Linux perf) of the per-call launch loop alone: bash bench/perf_launch.sh OUT
# For each producer of bench/perf_loop.py, perf attaches after the warm-up (user space only, as
# an unprivileged process may) and writes, under OUT:
#   flat-WHO.txt      self time by library and symbol (20 kHz, 3 s of the loop)
#   dso-WHO.txt       self time by library
#   children-WHO.txt  inclusive time by symbol (DWARF call graphs, 1.5 kHz, 2 s)
# PERF_FLAT and PERF_DWARF choose the loops (default: every loop flat — cupy, torch, torchadd,
# dev, the three bound launches and the Python floor, pyfloor — and cupy, torch, the
# DeviceArray bound launch and pyfloor with call graphs).
# PERF: the perf binary (default: perf on PATH); PERF_LIBS: a directory of libraries for it
# alone (the GPU bundle carries perf and its libraries in .gpu/perf). OpenBLAS's thread pool
# (NumPy's) is kept to one thread: its idle threads spin and would fill the profile.
set -uo pipefail
out="${1:?usage: perf_launch.sh OUTDIR}"; mkdir -p "$out"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
perf="${PERF:-perf}"
run_perf() { LD_LIBRARY_PATH="${PERF_LIBS:-${LD_LIBRARY_PATH:-}}" "$perf" "$@"; }
export OPENBLAS_NUM_THREADS=1
prof() {  # tag, mode (flat|dwarf), perf_loop.py arguments...
  local tag=$1 mode=$2; shift 2
  local ready; ready="$(mktemp)"; rm -f "$ready"
  READY="$ready" python3 "$here/perf_loop.py" "$@" 3000000 > "$out/loop-$tag-$mode.txt" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do [ -s "$ready" ] && break; sleep 0.1; done
  sleep 0.5
  local data; data="$(mktemp)"
  if [ "$mode" = flat ]; then
    run_perf record -F 20000 -p "$pid" -o "$data" -- sleep 3 >/dev/null 2>&1
    kill "$pid" 2>/dev/null
    run_perf report -i "$data" --stdio --sort dso,sym --percent-limit 0.25 2>/dev/null \
      | grep -v "^#" | grep -v "^$" | head -150 > "$out/flat-$tag.txt"
    run_perf report -i "$data" --stdio --sort dso --percent-limit 0.2 2>/dev/null \
      | grep -v "^#" | grep -v "^$" | head -20 > "$out/dso-$tag.txt"
  else
    run_perf record -F 1500 --call-graph dwarf,8192 -p "$pid" -o "$data" -- sleep 2 >/dev/null 2>&1
    kill "$pid" 2>/dev/null
    run_perf report -i "$data" --stdio --children --sort sym --percent-limit 1 2>/dev/null \
      | grep -E "^ +[0-9]" | grep -v "\] 0x" | head -80 > "$out/children-$tag.txt"
  fi
  wait "$pid" 2>/dev/null
  rm -f "$data" "$ready"
}
# PERF_FLAT / PERF_DWARF: the loops to profile (comma-separated, e.g. "pyfloor,dev bound").
IFS=, read -ra flat <<< "${PERF_FLAT:-cupy,torch,torchadd,dev,dev bound,cupy bound,torch bound,pyfloor}"
IFS=, read -ra dwarf <<< "${PERF_DWARF:-cupy,torch,dev bound,pyfloor}"
# A loop is perf_loop.py's arguments: "dev bound" is WHO and `bound`.
for w in "${flat[@]}"; do
  echo "perf: $w"
  read -ra args <<< "$w"
  prof "$(echo "$w" | tr ' ' _)" flat "${args[@]}"
done
for w in "${dwarf[@]}"; do
  echo "perf (call graphs): $w"
  read -ra args <<< "$w"
  prof "$(echo "$w" | tr ' ' _)" dwarf "${args[@]}"
done
echo "perf: profiles in $out"
