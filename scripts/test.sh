#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what it needs, then
#   1. Python and shell lint (scripts/lint.sh: ruff format --check and ruff check on every
#      Python file, shellcheck on every shell script; ruff and shellcheck pinned, installed
#      into .tools/ from PyPI wheels)
#   2. Rust formatting and lints (cargo fmt --check, clippy -D warnings, for the host and, for
#      ferrocuda-device and the kernel crates, the device target), the API docs (cargo doc
#      with warnings denied, for the host and, for ferrocuda-device, the device target)
#   3. every Rust test (the PTX is built by build.rs; GPU tests report "ignored" without a GPU;
#      the SASS checks assemble the kernels with ptxas and list them with nvdisasm, installed
#      into .tools/ by scripts/ensure_nvdisasm.sh)
#   4. the PTX checks (the rules of ferrocuda-builder, strictly: no .extern but dynamic shared
#      memory, no panics, no barrier under a thread-dependent branch; ptxas for sm_80 and
#      sm_90: no spills, no stack)
#   5. the Python package's tests (GPU tests skip with a reason without a GPU) and stubtest —
#      started in the background right after the toolchain, beside stages 2–4 (its own cargo
#      target directory, target/python, so that neither waits for the other's cargo lock; the
#      kernels' child builds shared through FERROCUDA_PTX_TARGET_DIR), its log printed at the end
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Each stage's heading says how long the command has run so far (README, "What takes the time").
start=$SECONDS
step() { printf '\n==== %s  [%d s]\n' "$*" "$((SECONDS - start))"; }

# ptxas's results kept by PTX contents for the whole run (the build scripts of both profiles,
# the PTX checks and the SASS tests assemble the same bundled kernels): README,
# "Environment variables".
export FERROCUDA_PTXAS_CACHE="${FERROCUDA_PTXAS_CACHE:-$root/target/ptxas-cache}"
# One target directory for every child build of the kernels (the build scripts of both cargo
# target directories, below), so that each kernel crate is built once per set of flags; two
# builds of one crate take turns (README, "Environment variables").
export FERROCUDA_PTX_TARGET_DIR="${FERROCUDA_PTX_TARGET_DIR:-$root/target/ferrocuda-ptx}"

step "Python and shell lint"
bash scripts/lint.sh

step "toolchain"
bash scripts/setup.sh
rustc --version

# The Python package's stage, in the background from here (see the header); its output goes to
# a log that the last stage prints.
mkdir -p target
py_log="$root/target/python-stage.log"
set -m # the stage gets a process group of its own, so that it can be stopped whole
(
  set -euo pipefail
  t0=$SECONDS
  CARGO_TARGET_DIR="$root/target/python" bash scripts/python-env.sh
  echo "python stage: extension built [$((SECONDS - t0)) s]"
  .venv/bin/python -m pytest -q -rs python/tests
  (cd python && ../.venv/bin/python -m mypy.stubtest ferrocuda)
  echo "python stage: done in $((SECONDS - t0)) s"
) >"$py_log" 2>&1 &
py_pid=$!
set +m
# A failing stage below ends the script: the Python stage with it.
trap 'kill -- "-$py_pid" 2>/dev/null || true' EXIT

step "cargo fmt --check"
cargo fmt --all --check
cargo fmt --manifest-path kernels/Cargo.toml --check
cargo fmt --manifest-path builder/tests/fixtures/device-lang/Cargo.toml --check

step "cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The kernel crate on the host: only its parameter checks are compiled there.
cargo clippy --manifest-path kernels/Cargo.toml --quiet -- -D warnings
# The device crate and the kernel crates as built for the GPU (their device-only code), each
# kernel crate's sm_90/sm_90a parts too.
bash scripts/device-clippy.sh

step "API docs (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# ferrocuda-device as built for the device, with its device-only modules.
bash scripts/device-docs.sh

step "cargo test (Rust)"
# nvdisasm for the SASS checks of tests/device_ptx.rs (state spaces and widths of accesses).
bash scripts/ensure_nvdisasm.sh >/dev/null
cargo test --workspace --quiet 2>&1

step "PTX checks"
ptxas="$(bash scripts/ensure_ptxas.sh)"
# The build script's output directory, from the test stage's own build (`cargo build` would
# resolve the dependencies' features without the dev-dependencies and rebuild much of the
# workspace for nothing).
outdir="$(cargo test --workspace --no-run --quiet --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "build-script-executed":
        continue
    # "path+file:///…/dir#name@version", or "…/ferrocuda#version" when the directory has
    # the package name (cargo then leaves the name out).
    url, _, frag = m["package_id"].partition("#")
    name = frag.split("@")[0] if "@" in frag else url.rstrip("/").rsplit("/", 1)[-1]
    if name == "ferrocuda":
        print(m["out_dir"])
' | tail -1)"
python3 scripts/check_ptx.py "$outdir/ferrocuda_kernels.ptx" --manifest "$outdir/ferrocuda_kernels.json" \
  --ptxas "$ptxas" --arch sm_80 --arch sm_90
# The parts built for newer architectures (`ferrocuda_kernels.sm_90a.ptx`: the Hopper GEMM),
# each for its own architecture.
for part in "$outdir"/ferrocuda_kernels.sm_*.ptx; do
  [ -f "$part" ] || continue
  arch="${part##*/ferrocuda_kernels.}"; arch="${arch%.ptx}"
  python3 scripts/check_ptx.py "$part" --ptxas "$ptxas" --arch "$arch"
done
python3 -m unittest -q scripts/test_check_ptx.py 2>&1 | tail -3

step "Python package (started after the toolchain; its log: target/python-stage.log)"
if ! wait "$py_pid"; then
  cat "$py_log"
  echo "the Python stage failed (its log is above)" >&2
  exit 1
fi
trap - EXIT
cat "$py_log"
echo
echo "all test stages passed in $((SECONDS - start)) s"
