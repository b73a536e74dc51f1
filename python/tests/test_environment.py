"""The table of environment variables (the ``ferrocuda-config`` crate, read through
``ferrocuda._config``), the README and the code agree: every ``FERROCUDA_*`` variable the
sources name is in the table, with the scope of the part that reads it; every variable in the
table is read somewhere; the README lists exactly the table's variables (the crate's own test,
``config/tests/readme.rs``, checks the section's text). Then the Python readers' parsing: the
rules of the table's kinds, good and bad spellings.

Rule for what counts as "read": a variable's name in a source file, or its constant
(``ferrocuda_config::NAME``) in Rust; the table's own crate (``config/``) is not scanned. The
test suites' and scripts' variables are in the table too (scope ``tools``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ferrocuda import _config

ROOT = Path(__file__).resolve().parents[2]
if not (ROOT / "host" / "src").is_dir():
    pytest.skip(
        "not in a source checkout (the GPU bundle carries the tests alone)", allow_module_level=True
    )
VAR = re.compile(r"(?<![A-Za-z0-9_])FERROCUDA_[A-Z0-9_]*[A-Z0-9]")
#: A Rust reader's use of a variable's constant.
CONST = re.compile(r"ferrocuda_config::([A-Z][A-Z0-9_]*[A-Z0-9])\b")

#: The library and the builder: what a user's program reads.
LIBRARY = [
    "abi/src",
    "host/src",
    "device/src",
    "macros/src",
    "builder/src",
    "src",
    "python/src",
    "python/ferrocuda",
    "build.rs",
    "python/build.rs",
]
#: Tests, benchmarks and scripts.
TOOLS = ["tests", "host/tests", "builder/tests", "python/tests", "bench", "scripts"]
SUFFIXES = {".rs", ".py", ".sh", ".pyi"}


def read_vars(paths: list[str]) -> set[str]:
    found: set[str] = set()
    for p in paths:
        root = ROOT / p
        files = [root] if root.is_file() else [f for f in root.rglob("*") if f.is_file()]
        for f in files:
            if f.suffix not in SUFFIXES or "fixtures" in f.parts or f.name == Path(__file__).name:
                continue
            text = f.read_text(errors="replace")
            found.update(VAR.findall(text))
            # (The crate's other items, VARS and RULES, are no variables.)
            found.update(
                "FERROCUDA_" + c for c in CONST.findall(text) if c not in {"VARS", "RULES"}
            )
    # The #[kernel] macro's generated item names (`__FERROCUDA_PARAM_…`) are no variables.
    return {
        v
        for v in found
        if v not in {"FERROCUDA_PARAM", "FERROCUDA_EXTRAS", "FERROCUDA_MANIFEST_LEN"}
    }


def readme_tables() -> tuple[set[str], set[str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    library, tools = section.split("What the tests, benchmarks and scripts read", 1)
    return set(VAR.findall(library)), set(VAR.findall(tools))


def table() -> tuple[set[str], set[str]]:
    rows = _config.variables()
    return {v.name for v in rows if v.scope == "library"}, {
        v.name for v in rows if v.scope == "tools"
    }


def test_every_variable_the_library_reads_is_in_the_table_as_the_librarys() -> None:
    lib, _ = table()
    missing = read_vars(LIBRARY) - lib
    assert not missing, f"read by the library, not in config/src/lib.rs as Library: {missing}"


def test_every_variable_the_tools_read_is_in_the_table() -> None:
    lib, tools = table()
    missing = read_vars(TOOLS) - lib - tools
    assert not missing, f"read by tests/scripts, missing from config/src/lib.rs: {missing}"


def test_every_variable_in_the_table_is_read() -> None:
    lib, tools = table()
    assert not lib - read_vars(LIBRARY), "in the table as the library's but not read by it"
    assert not tools - read_vars(TOOLS + LIBRARY), "in the table but read nowhere"


def test_the_readme_lists_exactly_the_table() -> None:
    assert readme_tables() == table()


def test_the_table_rows_are_complete() -> None:
    rows = _config.variables()
    assert len({v.name for v in rows}) == len(rows)
    kinds = {"switch", "choice", "path", "list", "words", "count", "text"}
    for v in rows:
        assert v.kind in kinds and v.scope in {"library", "tools"}, v
        assert v.read_by and v.values and v.default, v


# ---- parsing, by the table's rules ----------------------------------------------------------


def _kind(kind: str) -> list[str]:
    return [v.name for v in _config.variables() if v.kind == kind]


@pytest.mark.parametrize("name", _kind("switch"))
def test_switches_take_1_and_0(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, "1")
    assert _config.flag(name) is True
    monkeypatch.setenv(name, "0")
    assert _config.flag(name) is False
    monkeypatch.delenv(name)
    default = _config.flag(name)
    monkeypatch.setenv(name, "")
    assert _config.flag(name) is default
    for bad in ["true", "off", "yes", "TRUE", " 1", "2"]:
        monkeypatch.setenv(name, bad)
        want = re.escape(f'{name}="{bad}" is not understood; use 1 (on) or 0 (off)')
        with pytest.raises(ValueError, match=f"^{want}$"):
            _config.flag(name)


def test_counts_lists_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERROCUDA_FUZZ_CASES", "123")
    assert _config.get("FERROCUDA_FUZZ_CASES") == 123
    for bad in ["-1", "1e3", "ten", "0x10"]:
        monkeypatch.setenv("FERROCUDA_FUZZ_CASES", bad)
        with pytest.raises(ValueError, match=r"FERROCUDA_FUZZ_CASES.*decimal integer"):
            _config.get("FERROCUDA_FUZZ_CASES")
    monkeypatch.setenv("FERROCUDA_CUBIN_ARCHS", " sm_90, ,sm_100a")
    assert _config.get("FERROCUDA_CUBIN_ARCHS") == ["sm_90", "sm_100a"]
    monkeypatch.setenv("FERROCUDA_CUBIN_ARCHS", "")
    assert _config.get("FERROCUDA_CUBIN_ARCHS") == []
    monkeypatch.delenv("FERROCUDA_CUBIN_ARCHS")
    assert _config.get("FERROCUDA_CUBIN_ARCHS") is None
    monkeypatch.setenv("FERROCUDA_AUTOTUNE_CACHE", "")
    assert _config.path("FERROCUDA_AUTOTUNE_CACHE") is None
    monkeypatch.setenv("FERROCUDA_AUTOTUNE_CACHE", "/x y/z")
    assert _config.path("FERROCUDA_AUTOTUNE_CACHE") == Path("/x y/z")
    monkeypatch.setenv("FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC", "event")
    assert _config.get("FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC") == "event"
    monkeypatch.setenv("FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC", "Event")
    with pytest.raises(ValueError, match=r"use 1 .*, 0 .* or event"):
        _config.get("FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC")
    with pytest.raises(KeyError, match="FERROCUDA_NOPE"):
        _config.get("FERROCUDA_NOPE")
    with pytest.raises(TypeError, match="not a switch"):
        _config.flag("FERROCUDA_HOME")


def test_the_fast_paths_switch_refuses_a_value_it_does_not_take() -> None:
    """The extension reads FERROCUDA_FAST_PATHS once, at the first launch (or status query);
    a value it does not take is a ValueError there. (FERROCUDA_TORCH_EXCHANGE goes through
    the same reader at the first torch launch.)"""
    code = (
        "import ferrocuda._ferrocuda as f\n"
        "try:\n    print(f._fast_paths())\nexcept ValueError as e:\n    print('ValueError', e)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERROCUDA_")}

    def run(value: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**env, "FERROCUDA_FAST_PATHS": value},
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert run("off") == (
        'ValueError FERROCUDA_FAST_PATHS="off" is not understood; use 1 (on) or 0 (off)'
    )
    assert run("0") == "(False, False)"
    assert run("1") == "(True, True)"
    assert run("") == "(True, True)"
