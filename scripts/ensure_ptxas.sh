#!/usr/bin/env bash
# Install ptxas (from the PyPI wheel nvidia-cuda-nvcc-cu12) into <repo>/.tools/nvcc, once,
# and print the absolute path of the ptxas binary on stdout.
#
# No GPU and no CUDA toolkit are needed: the wheel ships a self-contained ptxas, which
# scripts/check_ptx.py uses to validate the device PTX and read its register/spill report, and
# nvvm/libdevice/libdevice.10.bc, which the builder links when a kernel calls a math function.
# Idempotent: when the pinned version is already there it prints the path and nothing else.
# Works from any working directory (the repo root is found from this script's location).
#
# Environment:
#   PYTHON          interpreter whose pip installs the wheel (default: python3)
#   PIP_EXTRA_ARGS  extra arguments for `pip install` (e.g. an index URL), optional
set -euo pipefail

# Pinned: bump deliberately (ptxas version decides which PTX ISA and sm_XX it accepts;
# 12.9 accepts PTX ISA <= 8.8 and sm_50 .. sm_121).
NVCC_WHEEL_VERSION="12.9.86"

# shellcheck source=scripts/pip_tool.sh
source "$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)/pip_tool.sh"
ensure_pip_tool nvidia-cuda-nvcc-cu12 "${NVCC_WHEEL_VERSION}" nvcc nvidia/cuda_nvcc/bin/ptxas
