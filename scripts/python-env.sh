#!/usr/bin/env bash
# Sets up the Python environment of the repository, idempotently:
#   1. .venv/ (python3 -m venv; git-ignored) with pinned build and test tools;
#   2. the `ferrocuda` package (python/) built in release mode and installed into it
#      (`maturin develop --release`: the extension lands in python/ferrocuda/, the venv
#      imports the package from there).
# Needs: python3 with venv, the Rust toolchain (rust-toolchain.toml), PyPI. No GPU.
# Afterwards:  .venv/bin/python -m pytest -q python/tests
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

venv="$root/.venv"
py="$venv/bin/python"
# Pinned tools (maturin < 2 as pyproject.toml requires; numpy < 2.5 keeps Numba usable;
# cloudpickle, Dask's serializer, for the pickling tests).
reqs=(
  "maturin==1.16.0"
  "numpy==2.4.6"
  "pytest==9.2.0"
  "hypothesis==6.170.15"
  "mypy==2.4.1"
  "cloudpickle==3.1.2"
)

if [ ! -x "$py" ]; then
  echo "python-env: creating $venv"
  python3 -m venv "$venv"
fi

stamp="$venv/.ferrocuda-reqs"
want="$(printf '%s\n' "${reqs[@]}")"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "python-env: installing ${reqs[*]}"
  "$py" -m pip install --quiet --disable-pip-version-check "${reqs[@]}"
  printf '%s' "$want" >"$stamp"
fi

echo "python-env: building the ferrocuda extension (release)"
log="$(mktemp)"
if ! (cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
      "$venv/bin/maturin" develop --release --quiet >"$log" 2>&1); then
  cat "$log" >&2
  rm -f "$log"
  echo "python-env: maturin develop failed" >&2
  exit 1
fi
rm -f "$log"
"$py" -c 'import ferrocuda, sys; print("python-env: ferrocuda", ferrocuda.__version__, "on Python", sys.version.split()[0], "- driver available:", ferrocuda.driver_available())'
