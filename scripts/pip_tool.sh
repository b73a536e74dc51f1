#!/usr/bin/env bash
# Sourced by scripts/ensure_ptxas.sh, scripts/ensure_nvdisasm.sh and scripts/lint.sh: installs
# one pinned PyPI wheel that ships a command-line tool (NVIDIA's ptxas and nvdisasm, ruff and
# the shellcheck binary) into <repo>/.tools/<dir>, once, and prints the tool's absolute path
# on stdout.
#
#   ensure_pip_tool PACKAGE VERSION DIR TOOL_PATH
#
# PACKAGE==VERSION is installed with `pip install --target <repo>/.tools/DIR --no-deps`;
# TOOL_PATH is the tool's path inside that directory. Idempotent: when the pinned version is
# there (its dist-info directory and an executable tool), it only prints the path. A fresh or
# different version starts from an empty directory (pip --target does not uninstall).
#
# Environment:
#   PYTHON          interpreter whose pip installs the wheel (default: python3)
#   PIP_EXTRA_ARGS  extra arguments for `pip install` (e.g. an index URL), optional

ensure_pip_tool() {
    local package="$1" version="$2" dir="$3" tool_path="$4"
    local script_dir repo_root target tool stamp python
    script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
    repo_root="$(cd -- "${script_dir}/.." && pwd -P)"
    target="${repo_root}/.tools/${dir}"
    tool="${target}/${tool_path}"
    stamp="${target}/${package//-/_}-${version}.dist-info"
    python="${PYTHON:-python3}"
    if [[ ! -x "${tool}" || ! -d "${stamp}" ]]; then
        rm -rf -- "${target}"
        mkdir -p -- "${target}"
        # shellcheck disable=SC2086  # PIP_EXTRA_ARGS is meant to word-split
        if ! PIP_ROOT_USER_ACTION=ignore "${python}" -m pip install --quiet --disable-pip-version-check --no-deps \
                --target "${target}" ${PIP_EXTRA_ARGS:-} "${package}==${version}" >&2; then
            echo "pip install of ${package}==${version} failed" >&2
            rm -rf -- "${target}"
            return 1
        fi
        if [[ ! -f "${tool}" ]]; then
            echo "the wheel ${package}==${version} has no ${tool_path}" >&2
            return 1
        fi
        chmod +x -- "${tool}"
    fi
    printf '%s\n' "${tool}"
}
