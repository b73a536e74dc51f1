"""Your own kernels from Python, without a GPU: ``ferrocuda new`` / ``ferrocuda build`` (the
console script and ``python -m ferrocuda``), ``ferrocuda.load(crate_dir)`` (builds when
stale, then loads; an unchanged crate comes from the cache without cargo), the signatures in
``help()``, and the errors: a crate that does not compile (the user's file, line and column;
nothing loaded), a parameter type that cannot be a kernel parameter, a manifest of another
format version, a missing or damaged PTX or manifest, and kernel names defined twice.

The builds need cargo and rustup (with the toolchain of ``rust-toolchain.toml``): skipped
where there is none (the GPU machine). They share one target directory under the repository's
``target/`` and one ``FERROCUDA_HOME``, so ``core`` for the GPU is compiled once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import ferrocuda

REPO = Path(__file__).resolve().parents[2]
NEEDS_CARGO = pytest.mark.skipif(
    shutil.which("cargo") is None or not (REPO / "rust-toolchain.toml").is_file(),
    reason="no cargo (or not in the ferrocuda repository): kernel crates cannot be built here",
)
BODY = "unsafe { y.write_unchecked(i, alpha * x.get_unchecked(i)) };"


@pytest.fixture(scope="module")
def env(tmp_path_factory: Any) -> dict[str, str]:
    """The environment of the command: a shared FERROCUDA_HOME and child target directory."""
    base = REPO / "target" / "python-own-crate"
    base.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "FERROCUDA_HOME": str(base / "home")}


def target_dir() -> str:
    # The build script's child target directory (the builder's `child_target_dir` of the
    # cargo target directory): the NVPTX `core` and device crate the Rust stages compiled
    # are reused.
    return str(REPO / "target" / "ferrocuda-ptx")


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m ferrocuda ARGS``."""
    return subprocess.run(
        [sys.executable, "-m", "ferrocuda", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def new(tmp: Path, name: str, env: dict[str, str]) -> Path:
    r = run(["new", name], tmp, env)
    assert r.returncode == 0, r.stderr
    return tmp / name


def build(crate: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run(["build", str(crate), "--target-dir", target_dir()], crate.parent, env)


@pytest.fixture(scope="module")
def built(tmp_path_factory: Any, env: dict[str, str]) -> Path:
    """A scaffolded crate, built once."""
    if shutil.which("cargo") is None:
        pytest.skip("no cargo")
    crate = new(tmp_path_factory.mktemp("own"), "my_kernels", env)
    r = build(crate, env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(crate / "target" / "ferrocuda" / "sm_80" / "my_kernels.json")
    return crate


def test_command_usage() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "ferrocuda", "--help"], capture_output=True, text=True, check=True
    )
    assert "ferrocuda new NAME" in r.stdout and "ferrocuda build [PATH]" in r.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "ferrocuda", "frob"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "unknown command `frob`" in bad.stderr
    # The console script of pyproject.toml, where the package is installed with it.
    script = Path(sys.executable).with_name("ferrocuda")
    if script.exists():
        out = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == f"ferrocuda {ferrocuda.__version__}"


def test_new_writes_a_crate(tmp_path: Path, env: dict[str, str]) -> None:
    crate = new(tmp_path, "fresh", env)
    toml = (crate / "Cargo.toml").read_text()
    assert "[workspace]" in toml and 'ferrocuda-device = "0.1.0"' in toml
    config = (crate / ".cargo" / "config.toml").read_text()
    home = Path(env["FERROCUDA_HOME"])
    # ferrocuda-device patched to the sources compiled into this extension, written out once.
    assert f'ferrocuda-device = {{ path = "{home / "crates"}' in config
    device = Path(config.split('path = "')[1].split('"')[0])
    assert (device / "src" / "lib.rs").is_file() and (device.parent / "Cargo.toml").is_file()
    assert (crate / "tests" / "test_fresh.py").is_file() and (crate / "host" / "build.rs").is_file()
    again = run(["new", "fresh"], tmp_path, env)
    assert again.returncode == 1 and "already exists" in again.stderr
    with pytest.raises(ValueError, match="cannot name a kernel crate"):
        ferrocuda.new_crate(tmp_path / "1bad")


@NEEDS_CARGO
def test_load_a_crate(built: Path, env: dict[str, str], monkeypatch: Any) -> None:
    monkeypatch.setenv("FERROCUDA_HOME", env["FERROCUDA_HOME"])
    mod = ferrocuda.load(built)
    assert mod is ferrocuda.load(built / "Cargo.toml") is ferrocuda.Module.load(str(built))
    assert mod.source == str(built / "target" / "ferrocuda" / "sm_80" / "my_kernels.json")
    assert sorted(mod.kernels) == ["scale_f32", "scale_f64"]
    assert list(mod.families) == ["scale"]
    assert isinstance(mod.scale, ferrocuda.Family) and isinstance(mod.scale_f64, ferrocuda.Kernel)
    assert mod.scale_f32.signature == (
        "scale_f32(alpha: float32, x: float32[:] (C-contiguous), "
        "y: float32[:] (C-contiguous, written))"
    )
    # help() shows every kernel's signature.
    doc = mod.scale.__doc__
    assert "scale_f32(alpha: float32" in doc and "scale_f64(alpha: float64" in doc
    assert "Arguments x, y must have the same shape." in doc
    import pydoc

    assert "scale_f64(alpha: float64" in pydoc.render_doc(mod.scale_f64)
    # The manifest path loads the same module.
    assert ferrocuda.load(mod.source) is mod
    assert ferrocuda.build(built, target_dir=target_dir()) == mod.source


@NEEDS_CARGO
def test_unchanged_crate_loads_from_the_cache_without_cargo(
    built: Path, env: dict[str, str]
) -> None:
    code = (
        "import sys, time, ferrocuda; t = time.perf_counter(); "
        "m = ferrocuda.load(sys.argv[1]); print(sorted(m.kernels), time.perf_counter() - t)"
    )
    nothing = built.parent / "no-tools"
    nothing.mkdir(exist_ok=True)
    # No cargo, rustc or rustup to run: a build would fail.
    cached_env = {**env, "PATH": str(nothing), "FERROCUDA_CARGO": "/nonexistent/cargo"}
    r = subprocess.run(
        [sys.executable, "-c", code, str(built)], env=cached_env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "['scale_f32', 'scale_f64']" in r.stdout and "building" not in r.stderr
    assert float(r.stdout.split()[-1]) < 1.0, r.stdout


@NEEDS_CARGO
def test_an_edit_rebuilds(tmp_path: Path, env: dict[str, str], monkeypatch: Any) -> None:
    monkeypatch.setenv("FERROCUDA_HOME", env["FERROCUDA_HOME"])
    crate = new(tmp_path, "edited", env)
    first = ferrocuda.build(crate, target_dir=target_dir())
    before = Path(first).with_suffix(".ptx").read_text()
    lib = crate / "src" / "lib.rs"
    src = lib.read_text()
    assert BODY in src
    lib.write_text(src.replace(BODY, BODY.replace("alpha * x", "alpha * alpha * x")))
    t = time.perf_counter()
    again = ferrocuda.build(crate, target_dir=target_dir())
    elapsed = time.perf_counter() - t
    after = Path(again).with_suffix(".ptx").read_text()
    assert again == first and after != before
    assert after.count("mul.rn.f32") == 2 * before.count("mul.rn.f32")
    print(f"rebuild after a one-line edit: {elapsed:.2f} s")
    mod = ferrocuda.load(crate)
    assert sorted(mod.kernels) == ["scale_f32", "scale_f64"]


@NEEDS_CARGO
def test_compile_errors_name_the_users_file(
    tmp_path: Path, env: dict[str, str], monkeypatch: Any
) -> None:
    monkeypatch.setenv("FERROCUDA_HOME", env["FERROCUDA_HOME"])
    crate = new(tmp_path, "broken", env)
    lib = crate / "src" / "lib.rs"
    wrong = "let v: u32 = alpha;"
    lib.write_text(lib.read_text().replace(BODY, wrong))
    line = next(i for i, text in enumerate(lib.read_text().splitlines(), 1) if wrong in text)
    with pytest.raises(ferrocuda.BuildError) as info:
        ferrocuda.load(crate)
    msg = str(info.value)
    assert "error[E0308]: mismatched types" in msg
    assert f"--> {lib}:{line}:" in msg, msg
    # Nothing was built, so there is nothing to load by the manifest's path either.
    assert not (crate / "target" / "ferrocuda" / "sm_80" / "broken.json").exists()
    r = build(crate, env)
    assert r.returncode == 1 and r.stdout == "" and f"{lib}:{line}:" in r.stderr

    # A parameter type that cannot be a kernel parameter: named, with the allowed types.
    lib.write_text(
        lib.read_text()
        .replace(wrong, "")
        .replace("alpha: T, x: Slice<T>", "alpha: T, count: usize, x: Slice<T>")
    )
    with pytest.raises(ferrocuda.BuildError) as info:
        ferrocuda.load(crate)
    msg = str(info.value)
    assert "kernel parameter `scale_f32::count`: `usize` cannot be a kernel parameter" in msg, msg
    assert "scalars (i8..i64, u8..u64, f16, bf16, f32, f64) and arrays of them" in msg


def test_not_a_crate(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a kernel crate"):
        ferrocuda.load(tmp_path)
    with pytest.raises(ValueError, match="cannot read"):
        ferrocuda.load(tmp_path / "nothing.json")


def write_module(directory: Path, name: str, edit: Any | None = None) -> Path:
    """The bundled manifest and PTX as ferrocuda-builder writes them, the manifest edited: the
    base module only (its parts, the kernels built for other architectures, left out)."""
    man = json.loads(ferrocuda.bundled().manifest)
    man["ptx"] = f"{name}.ptx"
    man["kernels"] = [k for k in man["kernels"] if "arch" not in k]
    man.pop("parts", None)
    if edit:
        edit(man)
    (directory / f"{name}.ptx").write_text(ferrocuda._ferrocuda._bundled_ptx())
    path = directory / f"{name}.json"
    path.write_text(json.dumps(man))
    return path


def test_manifest_of_another_format(tmp_path: Path) -> None:
    path = write_module(tmp_path, "future", lambda m: m.update(format=99))
    with pytest.raises(ValueError) as info:
        ferrocuda.load(path)
    msg = str(info.value)
    assert "future.json" in msg and "format 99" in msg and "ferrocuda" in msg, msg


def test_missing_or_damaged_files(tmp_path: Path) -> None:
    path = write_module(tmp_path, "mine")
    (tmp_path / "mine.ptx").unlink()
    with pytest.raises(ValueError, match=r"cannot read .*mine.ptx"):
        ferrocuda.load(path)
    (tmp_path / "mine.ptx").write_text(ferrocuda._ferrocuda._bundled_ptx()[:2000])
    with pytest.raises(ValueError, match=r"does not define kernel .* the PTX is damaged"):
        ferrocuda.load(path)
    path.write_text('{"format": 1, "arch": "sm_80", "kernels": [')
    with pytest.raises(ValueError, match="invalid kernel manifest"):
        ferrocuda.load(path)


def test_kernel_names_defined_twice(tmp_path: Path) -> None:
    # Two modules may define kernels of the same names: each module has its own.
    a = ferrocuda.load(write_module(tmp_path, "a"))
    b = ferrocuda.load(write_module(tmp_path, "b"))
    assert a is not b and a.add_f32 is not b.add_f32 and a.add_f32.name == b.add_f32.name
    # One manifest naming a kernel twice is refused.
    path = write_module(tmp_path, "twice", lambda m: m["kernels"].append(m["kernels"][0]))
    with pytest.raises(ValueError, match="kernel `add_bf16` is defined twice"):
        ferrocuda.load(path)
