"""Where the GPU tests find ``tests/device-kernels`` (the device-primitive test kernels): their
manifest, for ``ferrocuda.load``, and their sources, for line numbers.

Searched in order: ``$FERROCUDA_DEVICE_KERNELS`` (a manifest), the GPU bundle's
``.gpu/device-kernels/`` (``scripts/gpu-bundle.sh`` puts the build there, with the sources
the tests read: ``math.rs``, ``diag.rs``), and a local build under ``target/tmp`` (made by
``cargo test --test device_ptx``).
"""

from __future__ import annotations

from pathlib import Path

from ferrocuda import _config

REPO = Path(__file__).resolve().parents[2]
MANIFEST = "ferrocuda_device_kernels.json"


def _first(candidates: list[Path]) -> Path | None:
    return next((p for p in candidates if p.is_file()), None)


def manifest() -> Path | None:
    """The test kernels' manifest, or ``None`` when they are not built."""
    env = _config.path("FERROCUDA_DEVICE_KERNELS")
    here = Path(__file__).resolve()
    return _first(
        ([Path(env)] if env else [])
        + [
            p / "device-kernels" / MANIFEST
            for p in (here.parents[2], here.parents[1], Path.cwd() / ".gpu")
        ]
        + [REPO / "target" / "tmp" / "device-kernels" / "sm_80" / MANIFEST],
    )


def source(name: str, *fallbacks: Path) -> Path | None:
    """``name`` beside the manifest (the bundle's copy), else the first of ``fallbacks`` that
    exists."""
    m = manifest()
    return _first(([m.parent / name] if m is not None else []) + list(fallbacks))
