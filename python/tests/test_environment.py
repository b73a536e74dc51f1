"""The README's list of environment variables and the code agree: every ``FERROCUDA_*``
variable the sources read is in the list, in the table of the part that reads it, and every
variable in the list is read somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if not (ROOT / "host" / "src").is_dir():
    pytest.skip(
        "not in a source checkout (the GPU bundle carries the tests alone)", allow_module_level=True
    )
VAR = re.compile(r"(?<![A-Za-z0-9_])FERROCUDA_[A-Z0-9_]*[A-Z0-9]")

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
            found.update(VAR.findall(f.read_text(errors="replace")))
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


def test_every_variable_the_library_reads_is_listed() -> None:
    lib, _ = readme_tables()
    missing = read_vars(LIBRARY) - lib
    assert not missing, f"read by the library, missing from README.md's first table: {missing}"


def test_every_variable_the_tools_read_is_listed() -> None:
    lib, tools = readme_tables()
    missing = read_vars(TOOLS) - lib - tools
    assert not missing, f"read by tests/scripts, missing from README.md's tables: {missing}"


def test_every_listed_variable_is_read() -> None:
    lib, tools = readme_tables()
    assert not lib - read_vars(LIBRARY), "listed as the library's but not read by it"
    assert not tools - read_vars(TOOLS + LIBRARY), "listed but read nowhere"
