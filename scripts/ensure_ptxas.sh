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

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd -- "${script_dir}/.." && pwd -P)"
target="${repo_root}/.tools/nvcc"
ptxas="${target}/nvidia/cuda_nvcc/bin/ptxas"
stamp="${target}/nvidia_cuda_nvcc_cu12-${NVCC_WHEEL_VERSION}.dist-info"
python="${PYTHON:-python3}"

if [[ ! -x "${ptxas}" || ! -d "${stamp}" ]]; then
    # Fresh or different version: start clean so no files of another version linger
    # (pip --target does not uninstall what it replaces).
    rm -rf -- "${target}"
    mkdir -p -- "${target}"
    # shellcheck disable=SC2086  # PIP_EXTRA_ARGS is meant to word-split
    if ! PIP_ROOT_USER_ACTION=ignore "${python}" -m pip install --quiet --disable-pip-version-check --no-deps \
            --target "${target}" ${PIP_EXTRA_ARGS:-} \
            "nvidia-cuda-nvcc-cu12==${NVCC_WHEEL_VERSION}" >&2; then
        echo "ensure_ptxas.sh: pip install of nvidia-cuda-nvcc-cu12==${NVCC_WHEEL_VERSION} failed" >&2
        rm -rf -- "${target}"
        exit 1
    fi
    if [[ ! -f "${ptxas}" ]]; then
        echo "ensure_ptxas.sh: the wheel has no ptxas at ${ptxas}" >&2
        exit 1
    fi
    chmod +x -- "${ptxas}"
fi

printf '%s\n' "${ptxas}"
