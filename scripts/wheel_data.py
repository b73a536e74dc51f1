#!/usr/bin/env python3
"""Unpacks the data tree of a wheel (``<name>.data/data/``: ``bin/``, ``lib/``, …) into a
prefix directory, keeping each file's mode (executables stay executable).

For runtime wheels such as PyPI's ``mpich``, whose ``mpiexec`` and ``libmpi.so`` live in the
data tree: ``pip install --target`` does not place that tree, and ``--prefix`` places it by
the interpreter's installation scheme; this puts it exactly at ``PREFIX/bin``,
``PREFIX/lib``.

Usage: python3 wheel_data.py WHEEL PREFIX
"""

from __future__ import annotations

import os
import sys
import zipfile


def unpack(wheel: str, prefix: str) -> int:
    """Extracts the data tree of `wheel` under `prefix`; returns the number of files."""
    count = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if len(parts) < 3 or not parts[0].endswith(".data") or parts[1] != "data":
                continue
            rel = os.path.join(*parts[2:]) if parts[2:] and parts[-1] else ""
            if not rel or info.is_dir():
                continue
            dest = os.path.join(prefix, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            mode = (info.external_attr >> 16) & 0o7777
            if (info.external_attr >> 16) & 0o170000 == 0o120000:  # a symbolic link
                target = z.read(info).decode()
                if os.path.lexists(dest):
                    os.remove(dest)
                os.symlink(target, dest)
            else:
                with z.open(info) as src, open(dest, "wb") as out:
                    out.write(src.read())
                os.chmod(dest, mode or 0o644)
            count += 1
    return count


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    n = unpack(sys.argv[1], sys.argv[2])
    print(f"wheel_data: {n} files of {os.path.basename(sys.argv[1])} under {sys.argv[2]}")
