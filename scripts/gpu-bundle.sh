#!/usr/bin/env bash
# Gathers everything a GPU run needs into .gpu/ (git-ignored), built here on x86-64:
#   .gpu/bin/       compiled Rust test binaries (release, stripped)
#   .gpu/device-kernels/ PTX + manifest of tests/device-kernels (the device-primitive tests, Rust
#                   and Python), device/src/math.rs (the math accuracy bounds) and the kernels' diag.rs
#   .gpu/wheels/    the abi3 wheel of the Python package (if the Python env exists)
#   .gpu/python/    the Python tests and benchmark scripts
#   .gpu/bin-bench/ the Rust launch benchmark binary (criterion; run by .gpu/bench/run.sh)
#   .gpu/bench/     bench/ (floor.cu, python_bench.py, run.sh) + the bundled PTX and manifest
#   .gpu/whl-numba/ a NumPy < 2.5 wheel from .whl/, if there is one (for the Numba benchmarks)
#   .gpu/pipeline/  the builder's device-language check: builder/tests/fixtures/device-lang
#                   built to PTX here, and scripts/gpu_pipeline_check.py (`run.sh pipeline`)
#   .gpu/own/       your own kernels: a crate made by `ferrocuda new` and built by `ferrocuda
#                   build` here, with the Python package's command (so that `ferrocuda.load`
#                   finds it current in the build cache there, where there is no cargo), and
#                   its Rust host example (`run.sh own`)
#   .gpu/inline-cache/ the inline kernels of the GPU tests (python/tests/inline_kernels.py)
#                   compiled by `ferrocuda.inline` here: there they are cache hits, no cargo
#   .gpu/whl-scale/ Dask, distributed, dask-cuda, their missing dependencies and an MPI
#                   runtime (scripts/scale-wheels.sh), for `run.sh scale`; .gpu/wheel_data.py
#   .gpu/run.sh     the one command to run there: installs the wheel into a --target dir and
#                   runs everything, writing logs under $OUT (`bash .gpu/run.sh bench`: benchmarks)
# Usage: scripts/gpu-bundle.sh   (then carry .gpu to the GPU machine and run `bash .gpu/run.sh`)
# Parts that only some runs need can stay behind: FERROCUDA_BUNDLE_SCALE=0 (the Dask/MPI
# wheels), FERROCUDA_BUNDLE_PROFILING=0 (the profiling build), FERROCUDA_BUNDLE_BEFORE=0 (the
# earlier build for `run.sh compare`). One part is opt-in: FERROCUDA_BUNDLE_PERF=1 (Linux perf
# and its libraries, for `run.sh perf`). FERROCUDA_BUNDLE_ONLY=python: the Python part alone.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Switches take 1 or 0, empty or unset the default (README.md, "Environment variables").
for v in FERROCUDA_BUNDLE_SCALE FERROCUDA_BUNDLE_PROFILING FERROCUDA_BUNDLE_BEFORE FERROCUDA_BUNDLE_PERF; do
  case "${!v:-}" in "" | 0 | 1) ;; *) echo "$v=${!v} is not understood; use 1 (on) or 0 (off)" >&2; exit 2 ;; esac
done
case "${FERROCUDA_BUNDLE_ONLY:-}" in "" | python) ;; *) echo "FERROCUDA_BUNDLE_ONLY=$FERROCUDA_BUNDLE_ONLY is not understood; use python" >&2; exit 2 ;; esac
rm -rf .gpu && mkdir -p .gpu/bin .gpu/bin-bench .gpu/wheels .gpu/python
# The GPU machines are H100/H200 (sm_90): their builds embed that cubin alone (each more
# costs every binary ~2.3 MB of the 64 MiB that travel). FERROCUDA_CUBIN_ARCHS=... overrides.
export FERROCUDA_CUBIN_ARCHS="${FERROCUDA_CUBIN_ARCHS:-sm_90}"

# The Python package's part: its wheel, tests and benchmarks (and a NumPy for Numba).
python_part() {
  # The Python wheel, if the Python environment is set up: built as wheels ship (the `dist`
  # profile that python/pyproject.toml names, whole-program LTO), so that the launch
  # benchmarks measure what users install.
  if [ -x .venv/bin/maturin ]; then
    (cd python && ../.venv/bin/maturin build --profile dist --quiet -o ../.gpu/wheels >/dev/null)
    echo "bundled $(ls .gpu/wheels)"
    # A profiling build (stage timing of the launch path) for bench/launch_profile.py.
    if [ "${FERROCUDA_BUNDLE_PROFILING:-1}" = 1 ]; then
      (cd python && ../.venv/bin/maturin build --release --quiet --features launch-timing \
         -o ../.gpu/wheels-timing >/dev/null)
      echo "bundled profiling build $(ls .gpu/wheels-timing)"
    fi
  fi
  [ -d python/tests ] && cp -r python/tests python/examples python/README.md python/pyproject.toml .gpu/python/
  # Benchmarks: bench/ plus the bundled PTX and manifest of this build (the newest) for floor.cu.
  if [ -d bench ]; then
    mkdir -p .gpu/bench && cp -r bench/. .gpu/bench/
    # shellcheck disable=SC2012  # ls -t: the newest build's; cargo's paths have no odd characters
    ptx="$(ls -t "${CARGO_TARGET_DIR:-target}"/release/build/ferrocuda-*/out/ferrocuda_kernels.ptx 2>/dev/null | head -1 || true)"
    if [ -n "$ptx" ]; then
      cp "$ptx" "${ptx%.ptx}.json" .gpu/bench/ && echo "bundled .gpu/bench/ferrocuda_kernels.{ptx,json} from $ptx"
    else
      echo "warning: no built PTX under target/release/build/ferrocuda-*/out" >&2
    fi
  fi
  if ls .whl/numpy-*.whl >/dev/null 2>&1; then
    mkdir -p .gpu/whl-numba && cp .whl/numpy-*.whl .gpu/whl-numba/ && echo "bundled $(ls .gpu/whl-numba)"
  fi
}
# Your own kernels and the inline kernels of the GPU tests (needs the wheel just built).
own_part() {
  # Your own kernels: a scaffolded crate, built here (only its build outputs travel), and its
  # Rust host example, which builds the crate again from its build.rs with typed launchers.
  if [ -x .venv/bin/python ]; then
    own=.gpu/own
    mkdir -p "$own"
    # The command of the wheel just bundled (not whatever the source tree's package was last
    # built as).
    pkg="$(mktemp -d)"
    .venv/bin/python -m pip install --quiet --no-deps --target "$pkg" .gpu/wheels/*.whl
    PYTHONPATH="$pkg" .venv/bin/python -m ferrocuda new "$own/my_kernels" >/dev/null
    # With tensor-core kernels of a user's own (mma.sync, cp.async; TMA, mbarrier, wgmma).
    cp builder/tests/fixtures/own-tensor-cores.rs "$own/my_kernels/src/tensor_cores.rs"
    printf '\npub mod tensor_cores;\n' >> "$own/my_kernels/src/lib.rs"
    # With the nvcc wheel's ptxas, as a user with a CUDA toolkit has it: the crate gets cubins.
    FERROCUDA_PTXAS="$(bash scripts/ensure_ptxas.sh)" PYTHONPATH="$pkg" \
      .venv/bin/python -m ferrocuda build "$own/my_kernels" >/dev/null
    # The inline kernels of the GPU tests, compiled with the same wheel into a cache kept under
    # target/ (its shared cargo target directory holds the GPU's core between bundles); only
    # the finished entries travel. Cubins for the default architectures (sm_80, sm_90), as a
    # user gets them: FERROCUDA_CUBIN_ARCHS is part of the cache key.
    env -u FERROCUDA_CUBIN_ARCHS FERROCUDA_INLINE_CACHE="$root/target/gpu-inline-cache" \
      FERROCUDA_PTXAS="$(bash scripts/ensure_ptxas.sh)" PYTHONPATH="$pkg:python/tests" \
      .venv/bin/python python/tests/inline_kernels.py >/dev/null
    mkdir -p .gpu/inline-cache && cp -r target/gpu-inline-cache/entries .gpu/inline-cache/
    echo "bundled .gpu/inline-cache ($(find .gpu/inline-cache/entries -mindepth 1 -maxdepth 1 | wc -l) kernels)"
    rm -rf "$pkg"
    (cd "$own/my_kernels/host" && cargo build --release --quiet)
    cp "$own/my_kernels/host/target/release/my_kernels-host" "$own/" && strip "$own/my_kernels-host"
    find "$own/my_kernels/target" -mindepth 1 -maxdepth 1 ! -name ferrocuda -exec rm -rf {} +
    rm -rf "$own/my_kernels/host/target"
    echo "bundled $own (my_kernels, built: $(ls "$own/my_kernels/target/ferrocuda/sm_80"); my_kernels-host)"
  fi
}
# What every bundle ends with: the run script, and the executables compressed.
finish() {
  cp scripts/gpu-run.sh .gpu/run.sh && cp scripts/sanitizer-verdict.py .gpu/
  # The executables travel compressed (each embeds the bundled PTX and cubin); .gpu/run.sh and
  # .gpu/bench/run.sh unpack them in place first.
  for f in .gpu/bin/* .gpu/bin-bench/* .gpu/bin-examples/* .gpu/own/my_kernels-host; do
    if [ -f "$f" ] && [ "${f%.gz}" = "$f" ]; then gzip -9 -f "$f"; fi
  done
  du -sh .gpu
  # What travels to the GPU machine is limited (64 MiB there): say which parts can stay behind.
  if [ "$(du -sm .gpu | cut -f1)" -gt 60 ]; then
    echo "warning: .gpu is over 60 MiB; for a run that needs them not, leave out the Dask/MPI wheels" \
      "(FERROCUDA_BUNDLE_SCALE=0, 16 MiB), the profiling build (FERROCUDA_BUNDLE_PROFILING=0) or" \
      "the earlier build (FERROCUDA_BUNDLE_BEFORE=0)" >&2
  fi
}
if [ "${FERROCUDA_BUNDLE_ONLY:-}" = python ]; then
  # The Python part alone (no Rust test binaries, examples or benchmarks): for runs of
  # Python test files (`bash .gpu/run.sh pyfiles`, `torch`), built in a fraction of the time;
  # with the crate of one's own and the inline kernels the Python tests load.
  FERROCUDA_BUNDLE_PROFILING=0 python_part
  own_part
  finish
  exit 0
fi
# Rust test binaries that need a GPU (and the host lib tests, cheap to include).
cargo test --release --no-run --message-format=json -p ferrocuda --test gpu --test device_gpu --test gallery_gpu 2>/dev/null \
  | python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        dst = os.path.join(".gpu/bin", m["target"]["name"])
        shutil.copy(m["executable"], dst)
        print("bundled", dst)
'
strip .gpu/bin/* 2>/dev/null || true

# The device-primitive test kernels: built (and their PTX checked) by tests/device_ptx.rs into
# target/tmp/device-kernels/sm_80; .gpu/bin/device_gpu finds them in .gpu/device-kernels —
# every file of the build: the base PTX, the manifest, the parts built for sm_90 and sm_90a
# (`#[kernel(arch = …)]`) and the cubins.
cargo test --release --quiet --test device_ptx >/dev/null
mkdir -p .gpu/device-kernels
cp "${CARGO_TARGET_DIR:-target}"/tmp/device-kernels/sm_80/ferrocuda_device_kernels.* .gpu/device-kernels/
# The math accuracy bounds (ACCURACY_BOUNDS) for python/tests/test_gpu_device_math.py, and the
# failed checks' source (their lines) for python/tests/test_gpu_traps.py.
cp device/src/math.rs .gpu/device-kernels/math.rs
cp tests/device-kernels/src/diag.rs .gpu/device-kernels/diag.rs
echo "bundled .gpu/device-kernels (the test kernels' PTX, parts, cubins and manifest; math.rs, diag.rs)"

# The examples of the main job (scripts/run.sh), to run them on the GPU.
cargo build --release --quiet --example quickstart
mkdir -p .gpu/bin-examples && cp "${CARGO_TARGET_DIR:-target}"/release/examples/quickstart .gpu/bin-examples/ && strip .gpu/bin-examples/*

# The Rust launch benchmark (a criterion binary; not a test, so not in .gpu/bin).
cargo bench --no-run --message-format=json -p ferrocuda --bench launch 2>/dev/null \
  | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["bench"]:
        shutil.copy(m["executable"], ".gpu/bin-bench/" + m["target"]["name"])
        print("bundled .gpu/bin-bench/" + m["target"]["name"])
'
strip .gpu/bin-bench/* 2>/dev/null || true
[ -x .gpu/bin-bench/launch ] || echo "warning: the launch benchmark did not build (cargo bench --no-run --bench launch)" >&2

python_part
# The device-language check (static/dynamic shared memory, libdevice, barriers).
mkdir -p .gpu/pipeline
cargo run --quiet -p ferrocuda-builder --example build_kernel_crate -- \
  builder/tests/fixtures/device-lang target/device-lang >/dev/null
cp target/device-lang/fc_device_lang.ptx target/device-lang/fc_device_lang.json \
  scripts/gpu_pipeline_check.py .gpu/pipeline/ && echo "bundled .gpu/pipeline"
own_part
# Linux perf for `run.sh perf` (FERROCUDA_BUNDLE_PERF=1; ≈28 MB): this machine's perf and the
# shared libraries it needs beyond the C and C++ runtimes, which the GPU machine has.
if [ "${FERROCUDA_BUNDLE_PERF:-0}" = 1 ]; then
  if command -v perf >/dev/null; then
    mkdir -p .gpu/perf/lib && cp "$(command -v perf)" .gpu/perf/
    for l in $(ldd "$(command -v perf)" | awk '/=>/{print $3}'); do
      case "$l" in */libc.so.*|*/libm.so.*|*/ld-linux*|*/libstdc++*|*/libgcc_s*) ;; *) cp -L "$l" .gpu/perf/lib/ ;; esac
    done
    echo "bundled .gpu/perf ($(du -sh .gpu/perf | cut -f1))"
  else
    echo "warning: FERROCUDA_BUNDLE_PERF=1 but no perf on this machine" >&2
  fi
fi
# An earlier build's wheel (.whl-before/, kept by hand) for `run.sh compare`.
if [ "${FERROCUDA_BUNDLE_BEFORE:-1}" = 1 ] && ls .whl-before/*.whl >/dev/null 2>&1; then
  mkdir -p .gpu/wheels-before && cp .whl-before/*.whl .gpu/wheels-before/ && echo "bundled $(ls .gpu/wheels-before) as the earlier build"
fi
# The wheels of the `scale` part (downloaded once into .whl-scale/).
if [ "${FERROCUDA_BUNDLE_SCALE:-1}" != 1 ]; then
  echo "FERROCUDA_BUNDLE_SCALE=0: no .gpu/whl-scale (\`run.sh scale\` will skip the Dask and MPI cases)"
elif bash scripts/scale-wheels.sh; then
  mkdir -p .gpu/whl-scale && cp .whl-scale/*.whl .gpu/whl-scale/ && cp scripts/wheel_data.py .gpu/
  echo "bundled .gpu/whl-scale ($(find .gpu/whl-scale -maxdepth 1 -name '*.whl' | wc -l) wheels)"
else
  echo "warning: scripts/scale-wheels.sh failed: \`run.sh scale\` will skip the Dask and MPI cases" >&2
fi
finish
