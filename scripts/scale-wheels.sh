#!/usr/bin/env bash
# Downloads (once) into .whl-scale/ (git-ignored) the wheels the GPU run's `scale` part needs
# and the GPU machine lacks: Dask, distributed and dask-cuda with their missing pure-Python
# dependencies, and an MPI runtime for mpi4py (MPICH: libmpi.so.12 and its mpiexec), all for
# Python 3.12 on x86-64 Linux. The GPU machine has the rest (cupy, numpy, click, cloudpickle,
# fsspec, jinja2, msgpack, packaging, psutil, pyyaml, sortedcontainers, toolz, pandas,
# cuda-core, nvidia-ml-py, mpi4py).
# Usage: scripts/scale-wheels.sh   (scripts/gpu-bundle.sh calls it)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.whl-scale"
# Pinned to versions that work together: dask-cuda 26.10 is made for dask/distributed
# 2026.7.1 (its rapids-dask-dependency pin); distributed 2026.7.1 needs tblib != 3.2.0/3.2.1.
wheels=(
  "dask==2026.7.1"
  "distributed==2026.7.1"
  "dask-cuda==26.10.0"
  "partd==1.4.2"
  "locket==1.0.0"
  "tblib==3.2.2"
  "zict==3.0.0"
  "tornado==6.6.1"
  "mpich==5.0.2"
)
mkdir -p "$dest"
for spec in "${wheels[@]}"; do
  name="${spec%%==*}"; ver="${spec##*==}"
  file_prefix="$(echo "$name" | tr '-' '_')-$ver-"
  if ls "$dest/$file_prefix"*.whl >/dev/null 2>&1; then
    continue
  fi
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$dest" "$spec"
done
echo "scale-wheels: $(find "$dest" -maxdepth 1 -name '*.whl' | wc -l) wheels in .whl-scale ($(du -sh "$dest" | cut -f1))"
