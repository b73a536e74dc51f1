#!/usr/bin/env bash
# clippy on the crates that are compiled for the GPU, as they are compiled for it
# (nvptx64-nvidia-cuda): the device-only modules and the kernels' bodies exist only there, so
# a host `cargo clippy` never sees them. Warnings are errors. Run by scripts/test.sh.
#
#   ferrocuda-device                       the device language
#   kernels/                               the bundled kernels
#   tests/device-kernels/                  the test kernels of ferrocuda-device
#   builder/tests/fixtures/device-lang/    the builder's GPU-check fixture
#
# A kernel crate is built once for its base architecture and once per further architecture
# its kernels declare (`#[kernel(arch = "sm_90a")]`), with `--cfg ferrocuda_arch="sm_90a"`
# (ferrocuda-builder's child build): each such part is linted too. In a part's run only
# that part's kernels exist, so the rest of the crate is unused there by design: dead code
# and unused imports are allowed in those runs (the base run checks them).
#
# Like scripts/device-docs.sh (whose target directory this shares, so that `core` is built
# once): -Zbuild-std=core, enabled with RUSTC_BOOTSTRAP=1 for these cargo invocations.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target=nvptx64-nvidia-cuda
dir=target/device-doc
clippy() {
    RUSTC_BOOTSTRAP=1 cargo clippy --quiet --target "$target" -Zbuild-std=core \
        --target-dir "$dir" "$@"
}

clippy -p ferrocuda-device -- -D warnings
for crate in kernels tests/device-kernels builder/tests/fixtures/device-lang; do
    clippy --manifest-path "$crate/Cargo.toml" -- -D warnings
    # The parts: the architectures the crate's kernels declare.
    mapfile -t archs < <(grep -rhoE 'arch = "sm_[0-9]+a?"' "$crate/src" | cut -d'"' -f2 | sort -u)
    for arch in "${archs[@]}"; do
        clippy --manifest-path "$crate/Cargo.toml" -- -D warnings -A dead_code -A unused_imports \
            --cfg ferrocuda_arch --cfg "ferrocuda_arch=\"$arch\""
    done
done
