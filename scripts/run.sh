#!/usr/bin/env bash
# The main job, from a fresh clone: installs the toolchain, builds the kernels to PTX, checks
# the PTX, and runs the examples on the GPU — or says clearly that no GPU/driver is present.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# A switch: 1 or 0, empty or unset the default (README.md, "Environment variables").
case "${FERROCUDA_SKIP_PYTHON:-}" in "" | 0 | 1) ;; *) echo "FERROCUDA_SKIP_PYTHON=$FERROCUDA_SKIP_PYTHON is not understood; use 1 (on) or 0 (off)" >&2; exit 2 ;; esac
bash scripts/setup.sh
echo "==== building kernels (rustc nvptx64 backend) and the quickstart example"
cargo build --release --quiet --example quickstart
echo "==== Rust quickstart"
./target/release/examples/quickstart
if [ "${FERROCUDA_SKIP_PYTHON:-0}" != 1 ] && [ -f python/pyproject.toml ]; then
  echo "==== Python quickstart (builds the extension into .venv)"
  bash scripts/python-env.sh >/dev/null
  .venv/bin/python python/examples/quickstart.py
fi
