#!/usr/bin/env bash
# Installs what the build needs, idempotently: the pinned Rust toolchain with rust-src and
# llvm-tools (from rust-toolchain.toml), and NVIDIA's nvcc wheel in .tools/ (libdevice for the
# kernels' math functions, ptxas for the PTX checks) — before any `cargo build` of the project.
# Sourced/called by scripts/run.sh and scripts/test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if ! command -v rustup >/dev/null 2>&1; then
  echo "error: rustup is required (https://rustup.rs); ferrocuda pins its toolchain in rust-toolchain.toml" >&2
  exit 1
fi
# Installs the toolchain named in rust-toolchain.toml with its components (rust-src among
# them) if missing; a no-op otherwise. Uses the normal rustup home.
rustup toolchain install >/dev/null 2>&1 || rustup toolchain install
sysroot="$(rustc --print sysroot)"
if [ ! -f "$sysroot/lib/rustlib/src/rust/library/core/Cargo.toml" ]; then
  rustup component add rust-src
fi
for tool in llvm-link opt llc llvm-dis; do
  if [ ! -x "$sysroot/lib/rustlib/$(rustc --print host-tuple)/bin/$tool" ]; then
    rustup component add llvm-tools
    break
  fi
done
# libdevice.10.bc and ptxas (the root build.rs links libdevice from .tools/ when a kernel
# calls a libdevice function).
bash scripts/ensure_ptxas.sh >/dev/null
