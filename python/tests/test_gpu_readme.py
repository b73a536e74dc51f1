"""The README's runnable examples run as written (GPU; each block skips without its library):
the Python blocks of the sections named in ``SECTIONS``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


#: The sections whose Python blocks are complete programs.
SECTIONS = ["Quickstart", "Autotuning"]


def section_blocks(name: str) -> list[str]:
    text = README.read_text()
    assert f"\n## {name}\n" in text, f"README.md has no section {name!r}"
    section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def quickstart_blocks() -> list[str]:
    return section_blocks("Quickstart")


def runnable_blocks() -> list[tuple[str, int]]:
    return [(name, i) for name in SECTIONS for i in range(len(section_blocks(name)))]


def test_quickstart_has_cupy_and_torch_examples() -> None:
    blocks = quickstart_blocks()
    assert any("import cupy" in b for b in blocks)
    assert any("import torch" in b for b in blocks)


@pytest.mark.gpu
@pytest.mark.parametrize("section,index", runnable_blocks())
def test_readme_block_runs(gpu: None, section: str, index: int) -> None:
    code = section_blocks(section)[index]
    lib = "cupy" if "import cupy" in code else "torch" if "import torch" in code else None
    if lib:
        mod = pytest.importorskip(lib)
        if lib == "torch" and not mod.cuda.is_available():
            pytest.skip("torch.cuda is not available")
    exec(compile(code, f"README.md {section} block {index}", "exec"), {})
