"""Launchers and modules pickle by name, not by pointer (no GPU needed).

Distributed engines ship task functions and their arguments to worker processes with pickle
(Dask through cloudpickle): a pickled ``ferrocuda.kernels.add`` must come back as the
launcher of the same name in the worker's own process, whose kernels load into the worker's
devices at their first launch there.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import ferrocuda
from conftest import write_bundled_parts
from ferrocuda import kernels

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


def write_module(directory: Path, name: str = "mine") -> Path:
    """A module as ferrocuda-builder writes it (a copy of the bundled manifest and PTX)."""
    man = json.loads(ferrocuda.bundled().manifest)
    (directory / f"{name}.ptx").write_text(ferrocuda._ferrocuda._bundled_ptx())
    write_bundled_parts(directory, man)
    man["ptx"] = f"{name}.ptx"
    path = directory / f"{name}.json"
    path.write_text(json.dumps(man))
    return path


def in_fresh_process(code: str, data: bytes) -> str:
    """Runs `code` in a new interpreter with `data` on its stdin; returns its stdout."""
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        input=data,
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", ["add", "saxpy", "add_f32", "saxpy_f64", "add_index_f32_3d"])
def test_bundled_launchers_round_trip_to_themselves(name: str, protocol: int) -> None:
    launcher = getattr(kernels, name)
    again = pickle.loads(pickle.dumps(launcher, protocol=protocol))
    assert again is launcher
    assert copy.copy(launcher) is launcher and copy.deepcopy(launcher) is launcher


def test_family_and_kernel_of_one_name_stay_apart() -> None:
    # A family and a kernel may share a name; the pickle says which one it is.
    fam = kernels.add
    member = fam.kernels[0]
    assert isinstance(fam, ferrocuda.Family) and isinstance(member, ferrocuda.Kernel)
    assert fam.__reduce__()[1] == (None, "add", True)
    assert member.__reduce__()[1] == (None, member.name, False)
    assert pickle.loads(pickle.dumps(member)) is member


def test_bundled_module_round_trips() -> None:
    m = ferrocuda.bundled()
    assert pickle.loads(pickle.dumps(m)) is m
    assert pickle.loads(pickle.dumps(kernels.module)) is m


def test_loaded_module_pickles_its_manifest_path(tmp_path: Path, monkeypatch: Any) -> None:
    path = write_module(tmp_path)
    mine = ferrocuda.load(path)
    assert ferrocuda.load(str(path)) is mine, "the same unchanged files give the same module"
    assert mine.source == str(path.resolve())
    assert mine.saxpy.__reduce__()[1] == (str(path.resolve()), "saxpy", True)
    for obj in (mine, mine.saxpy, mine.kernels["add_f32"]):
        assert pickle.loads(pickle.dumps(obj)) is obj
    # A relative spelling of the path pickles as the canonical one.
    monkeypatch.chdir(tmp_path)
    rel = ferrocuda.load("mine.json")
    assert rel is mine and pickle.loads(pickle.dumps(rel.add)) is mine.add


def test_changed_manifest_loads_anew(tmp_path: Path) -> None:
    path = write_module(tmp_path)
    first = ferrocuda.load(path)
    man = json.loads(path.read_text())
    path.write_text(json.dumps(man, indent=1))  # other size: another version of the files
    second = ferrocuda.load(path)
    assert second is not first and set(second.kernels) == set(first.kernels)
    assert pickle.loads(pickle.dumps(first.add)) is second.add


def test_unpickled_in_a_fresh_process(tmp_path: Path) -> None:
    """The worker's side: nothing imported yet; unpickling imports ferrocuda and finds the
    launchers by name (bundled ones, and those of a manifest at the same path)."""
    mine = ferrocuda.load(write_module(tmp_path))
    data = pickle.dumps((kernels.add, kernels.saxpy_f32, mine.add_index, mine, ferrocuda.bundled()))
    out = in_fresh_process(
        """
        import pickle, sys
        add, saxpy_f32, add_index, mine, bundled = pickle.loads(sys.stdin.buffer.read())
        import ferrocuda
        assert add is ferrocuda.kernels.add, add
        assert saxpy_f32 is ferrocuda.kernels.saxpy_f32, saxpy_f32
        assert bundled is ferrocuda.bundled()
        assert add_index is mine.add_index and isinstance(add_index, ferrocuda.Family)
        print(add.name, saxpy_f32.name, add_index.name, mine.source)
        """,
        data,
    )
    assert out.split() == ["add", "saxpy_f32", "add_index", mine.source]


def test_cloudpickle_ships_launchers_inside_functions() -> None:
    """Dask's serializer: a lambda closing over a launcher (pickled by value, as functions of
    a script's ``__main__`` are) carries the launcher by name."""
    cloudpickle = pytest.importorskip("cloudpickle", reason="cloudpickle is not installed")
    launcher = kernels.saxpy
    data = cloudpickle.dumps(lambda a, x, y: launcher(a, x, y))
    out = in_fresh_process(
        """
        import pickle, sys
        f = pickle.loads(sys.stdin.buffer.read())
        import ferrocuda
        (cell,) = f.__closure__
        assert cell.cell_contents is ferrocuda.kernels.saxpy
        print("ok")
        """,
        data,
    )
    assert out.strip() == "ok"


def test_unpickling_a_name_the_kernels_lack_says_so() -> None:
    with pytest.raises(LookupError) as info:
        ferrocuda._ferrocuda._launcher(None, "no_such_family", True)
    msg = str(info.value)
    assert "cannot unpickle launcher `no_such_family`" in msg and "<bundled>" in msg, msg
    assert "no family named" in msg and ferrocuda.__version__ in msg, msg
    with pytest.raises(LookupError, match='no kernel named "add"'):
        ferrocuda._ferrocuda._launcher(None, "add", False)  # `add` is a family only


def test_unpickling_a_missing_manifest_says_so(tmp_path: Path) -> None:
    mine = ferrocuda.load(write_module(tmp_path, "gone"))
    data = pickle.dumps(mine.add)
    for f in tmp_path.iterdir():
        f.unlink()
    # In this process the module stays cached only while its files are unchanged: a
    # deleted manifest cannot be found again.
    with pytest.raises(ValueError, match=r"cannot read .*gone.json"):
        pickle.loads(data)


def test_configured_launchers_are_not_pickled() -> None:
    """``launcher[grid, block, stream]`` may hold a stream of this process: refused."""
    configured: Any = kernels.add[4, 256]
    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(configured)
