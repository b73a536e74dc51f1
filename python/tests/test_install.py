"""Installs that work from a clone: the sdist carries every crate the build needs and the
license texts, the package metadata is complete, and ``ferrocuda doctor`` reports what
building one's own kernels needs.

The whole install of the sdist into a fresh virtual environment (a release build of the
extension and the kernels: minutes) runs only with ``FERROCUDA_TEST_INSTALL=1``.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import venv
from pathlib import Path
from typing import Any

import pytest

import ferrocuda
from ferrocuda import _config

REPO = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"


def _maturin() -> str | None:
    beside = Path(sys.executable).parent / "maturin"
    return str(beside) if beside.is_file() else shutil.which("maturin")


def _is_checkout() -> bool:
    return (REPO / ".git").exists() and shutil.which("git") is not None


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sdist `maturin sdist` makes of python/: its path, member names (without the
    top directory) and PKG-INFO."""
    maturin = _maturin()
    if maturin is None or shutil.which("cargo") is None:
        pytest.skip("maturin and cargo are needed to build the sdist (scripts/python-env.sh)")
    out = tmp_path_factory.mktemp("sdist")
    run = subprocess.run(
        [maturin, "sdist", "--out", str(out)],
        cwd=PYTHON_DIR,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    (archive,) = out.glob("ferrocuda-*.tar.gz")
    with tarfile.open(archive) as tar:
        members = tar.getnames()
        top = members[0].split("/")[0]
        names = {m.split("/", 1)[1] for m in members if "/" in m}
        info = tar.extractfile(f"{top}/PKG-INFO")
        assert info is not None
        pkg_info = info.read().decode()
        licenses = {}
        for name in ("LICENSE-MIT", "LICENSE-APACHE"):
            f = tar.extractfile(f"{top}/{name}")
            licenses[name] = f.read().decode() if f else ""
    return {"path": archive, "names": names, "pkg_info": pkg_info, "licenses": licenses}


def _local_crate_dirs() -> set[str]:
    """The directories (relative to the repository) of every local crate the extension's
    build compiles: the path dependencies of python/ (cargo metadata, all kinds and
    targets), and the kernel crate the root build.rs compiles with its own path
    dependencies."""

    def local(manifest: Path) -> set[str]:
        meta = json.loads(
            subprocess.run(
                [
                    "cargo",
                    "metadata",
                    "--format-version",
                    "1",
                    "--offline",
                    "--manifest-path",
                    str(manifest),
                ],
                capture_output=True,
                text=True,
                check=True,
                timeout=300,
            ).stdout
        )
        return {
            Path(p["manifest_path"]).parent.relative_to(REPO).as_posix()
            for p in meta["packages"]
            if p["source"] is None
        }

    dirs = local(PYTHON_DIR / "Cargo.toml")
    build_rs = (REPO / "build.rs").read_text()
    (kernel_crate,) = re.findall(r'PtxBuilder::new\("([^"]+)"\)', build_rs)
    dirs |= local(REPO / kernel_crate / "Cargo.toml")
    return {"" if d == "." else d for d in dirs}


def test_sdist_carries_every_crate_the_build_needs(sdist: dict[str, Any]) -> None:
    if not _is_checkout():
        pytest.skip("not a git checkout: the list of tracked sources is unknown")
    names: set[str] = sdist["names"]
    dirs = _local_crate_dirs()
    # The crates the issue named are among them (the derivation did not silently shrink).
    assert {"", "abi", "builder", "device", "host", "kernels", "macros", "python"} <= dirs
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    missing = []
    for d in sorted(dirs):
        prefix = f"{d}/" if d else ""
        wanted = [f"{prefix}Cargo.toml"] + [
            f for f in tracked if f.startswith(f"{prefix}src/") and f.endswith(".rs")
        ]
        if (REPO / prefix / "build.rs").is_file():
            wanted.append(f"{prefix}build.rs")
        missing += [f for f in wanted if f not in names]
    # What the builds read besides the crates: the lock files, the pinned toolchain (rustup
    # installs it from the sdist), the license texts, and the Python package.
    for f in [
        "Cargo.lock",
        "kernels/Cargo.lock",
        "rust-toolchain.toml",
        "LICENSE-MIT",
        "LICENSE-APACHE",
        "pyproject.toml",
        "ferrocuda/__init__.py",
        "ferrocuda/__main__.py",
        "ferrocuda/py.typed",
        "ferrocuda/_ferrocuda.pyi",
        "ferrocuda/kernels.pyi",
    ]:
        if f not in names:
            missing.append(f)
    assert not missing, f"the sdist lacks {missing}"
    junk = sorted(n for n in names if re.match(r"(.*/)?(target|\.tools|\.venv)/", n))
    assert not junk, f"build outputs in the sdist: {junk[:10]}"


def test_package_metadata_is_complete(sdist: dict[str, Any]) -> None:
    meta = email.parser.Parser().parsestr(sdist["pkg_info"])
    cargo = tomllib.loads((REPO / "Cargo.toml").read_text())
    # The license the crates declare is the package's, and both texts ship.
    assert meta["License-Expression"] == cargo["workspace"]["package"]["license"]
    assert sorted(meta.get_all("License-File")) == ["LICENSE-APACHE", "LICENSE-MIT"]
    assert "Permission is hereby granted, free of charge" in sdist["licenses"]["LICENSE-MIT"]
    assert "Apache License" in sdist["licenses"]["LICENSE-APACHE"]
    assert "Version 2.0" in sdist["licenses"]["LICENSE-APACHE"]
    for name in ("LICENSE-MIT", "LICENSE-APACHE"):
        assert (REPO / name).read_text() == sdist["licenses"][name]
    classifiers = meta.get_all("Classifier")
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert any(c.startswith("Operating System :: ") for c in classifiers)
    assert "License ::" not in " ".join(classifiers), "PEP 639: the expression says it"
    # Python versions: from the floor of requires-python up, none below it.
    floor = re.fullmatch(r">=\s*3\.(\d+)", meta["Requires-Python"])
    assert floor, meta["Requires-Python"]
    minors = sorted(
        int(m.group(1))
        for c in classifiers
        if (m := re.fullmatch(r"Programming Language :: Python :: 3\.(\d+)", c))
    )
    assert minors and minors[0] == int(floor.group(1)), minors
    assert minors == list(range(minors[0], minors[-1] + 1)), minors
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Repository", "Documentation", "Issues"} <= set(urls)
    assert urls["Repository"] == cargo["workspace"]["package"]["repository"]
    assert meta["Summary"] and meta["Keywords"]


# ---- ferrocuda doctor ---------------------------------------------------------------------

CHECKS = ["rustup", "toolchain", "rust-src", "llvm-tools", "libdevice", "ptxas", "driver"]


def _doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ferrocuda", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FERROCUDA_OFFLINE": "1", **env},
    )


def _lines(out: str) -> dict[str, tuple[str, str]]:
    rows = {}
    for line in out.splitlines():
        m = re.match(r"  (\S+)\s+(ok|MISSING|--)\s+(.*)", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def test_doctor_reports_each_requirement() -> None:
    run = _doctor()
    rows = _lines(run.stdout)
    assert [r for r in rows if r in CHECKS] == CHECKS, run.stdout
    # The exit status says whether something needed is missing.
    missing = [name for name, (state, _) in rows.items() if state == "MISSING"]
    assert run.returncode == (1 if missing else 0), (run.stdout, run.stderr)
    if missing:
        assert "ferrocuda doctor --install" in run.stdout
    # The driver line agrees with the package's own view of the driver.
    assert (rows["driver"][0] == "ok") == ferrocuda.driver_available()
    for name in ("libdevice", "ptxas"):
        state, detail = rows[name]
        if state == "ok":
            path = Path(detail.split(" (")[0])
            assert path.is_file(), detail
    assert rows["downloads"][0] == "--" and "FERROCUDA_OFFLINE=1" in rows["downloads"][1]


def test_doctor_names_a_missing_libdevice_and_how_to_install_it(tmp_path: Path) -> None:
    gone = tmp_path / "no" / "libdevice.10.bc"
    run = _doctor(FERROCUDA_LIBDEVICE=str(gone))
    state, detail = _lines(run.stdout)["libdevice"]
    assert state == "MISSING", run.stdout
    assert "ferrocuda doctor --install" in detail
    assert "pip install --no-deps --target" in detail and "nvidia-cuda-nvcc-cu12==" in detail
    assert run.returncode == 1


def test_doctor_refuses_unknown_options() -> None:
    run = _doctor("--frobnicate")
    assert run.returncode == 2
    assert "--install" in run.stderr


# ---- the whole install (opt-in) -----------------------------------------------------------


@pytest.mark.skipif(
    not _config.flag("FERROCUDA_TEST_INSTALL"),
    reason="FERROCUDA_TEST_INSTALL=1 runs the full install of the sdist (a release build: "
    "minutes; downloads NVIDIA's nvcc wheel when no libdevice is found)",
)
def test_pip_install_of_the_sdist_in_a_fresh_venv(sdist: dict[str, Any], tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    run = subprocess.run(
        [str(py), "-m", "pip", "install", "--disable-pip-version-check", str(sdist["path"])],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=3600,
        env=env,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    mine = json.loads(ferrocuda.bundled().manifest)
    code = (
        "import ferrocuda, json, importlib.metadata as md; m = ferrocuda.bundled(); "
        "files = [str(f) for f in md.distribution('ferrocuda').files]; "
        "print(json.dumps({'cubins': m.cubins, 'kernels': sorted(k['name'] for k in "
        "json.loads(m.manifest)['kernels']), 'files': files}))"
    )
    out = subprocess.run(
        [str(py), "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["kernels"] == sorted(k["name"] for k in mine["kernels"])
    # The builder found (or fetched) ptxas: the wheel carries the cubins.
    assert got["cubins"] == ["sm_80", "sm_90"], got["cubins"]
    licenses = sorted(Path(f).name for f in got["files"] if "LICENSE" in f)
    assert licenses == ["LICENSE-APACHE", "LICENSE-MIT"], got["files"]
