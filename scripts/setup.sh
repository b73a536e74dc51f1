#!/usr/bin/env bash
# Installs what the build needs, idempotently: the pinned Rust toolchain with rust-src
# (from rust-toolchain.toml). Sourced/called by scripts/run.sh and scripts/test.sh.
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
