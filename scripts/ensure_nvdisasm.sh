#!/usr/bin/env bash
# Install nvdisasm (from the PyPI wheel nvidia-cuda-nvdisasm) into <repo>/.tools/nvdisasm,
# once, and print the absolute path of the nvdisasm binary on stdout.
#
# No GPU and no CUDA toolkit are needed: the SASS checks of tests/device_ptx.rs (through
# ferrocuda_builder::check::sass) assemble the kernels with ptxas (scripts/ensure_ptxas.sh)
# and list the machine code with nvdisasm, to check the state space and width of every memory
# access. On cubins of ptxas 12.x it prints a harmless warning ("Disassembling Std Elf to Old
# format ...").
# Idempotent: when the pinned version is already there it prints the path and nothing else.
# Works from any working directory (the repo root is found from this script's location).
#
# Environment: PYTHON, PIP_EXTRA_ARGS (see scripts/pip_tool.sh).
set -euo pipefail

# Pinned: bump deliberately (the SASS checks name opcodes as this version prints them).
NVDISASM_WHEEL_VERSION="13.5.37"

# shellcheck source=scripts/pip_tool.sh
source "$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)/pip_tool.sh"
ensure_pip_tool nvidia-cuda-nvdisasm "${NVDISASM_WHEEL_VERSION}" nvdisasm nvidia/cu13/bin/nvdisasm
