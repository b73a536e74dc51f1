#!/usr/bin/env bash
# Gathers everything a GPU run needs into .gpu/ (git-ignored), built here on x86-64:
#   .gpu/bin/       compiled Rust test binaries (release, stripped)
#   .gpu/wheels/    the abi3 wheel of the Python package (if the Python env exists)
#   .gpu/python/    the Python tests and benchmark scripts
#   .gpu/run.sh     the one command to run there: installs the wheel into a --target dir and
#                   runs everything, writing logs under $OUT
# Usage: scripts/gpu-bundle.sh   (then carry .gpu to the GPU machine and run `bash .gpu/run.sh`)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
rm -rf .gpu && mkdir -p .gpu/bin .gpu/wheels .gpu/python

# Rust test binaries that need a GPU (and the host lib tests, cheap to include).
cargo test --release --no-run --message-format=json -p ferrocuda --test gpu 2>/dev/null \
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

# The Python wheel, if the Python environment is set up.
if [ -x .venv/bin/maturin ]; then
  (cd python && ../.venv/bin/maturin build --release --quiet -o ../.gpu/wheels >/dev/null)
  echo "bundled $(ls .gpu/wheels)"
fi
[ -d python/tests ] && cp -r python/tests .gpu/python/
[ -d bench ] && cp -r bench .gpu/bench
cp scripts/gpu-run.sh .gpu/run.sh
du -sh .gpu
