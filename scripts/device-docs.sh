#!/usr/bin/env bash
# The API docs of ferrocuda-device as a kernel writer reads them: built for the device target
# (nvptx64-nvidia-cuda), where the device-only modules — `thread`, `block`, `warp` — and the
# device-only methods exist (a host `cargo doc` lacks them). Warnings are errors: every link
# must resolve. Run by scripts/test.sh; afterwards open the printed index.html.
#
# Like the kernel build, this needs `-Zbuild-std=core` (no prebuilt `core` for the target),
# enabled with RUSTC_BOOTSTRAP=1 for this one cargo invocation, and rust-src (scripts/setup.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target=nvptx64-nvidia-cuda
dir=target/device-doc
RUSTC_BOOTSTRAP=1 RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" \
  cargo doc --quiet -p ferrocuda-device --no-deps --target "$target" -Zbuild-std=core \
  --target-dir "$dir"
echo "device docs: $dir/$target/doc/ferrocuda_device/index.html"
