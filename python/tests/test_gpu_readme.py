"""The README's runnable examples run as written (GPU; each block skips without its library):
the Python blocks of the sections named in ``SECTIONS`` (but those that load a crate of one's
own by name, ``ferrocuda.load("my_kernels")``, which test_gpu_torch_ops.py and
test_gpu_own_crate.py exercise with a crate they make)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


#: The sections whose Python blocks are complete programs.
SECTIONS = ["Quickstart", "PyTorch", "Autotuning"]


def section_blocks(name: str) -> list[str]:
    text = README.read_text()
    assert f"\n## {name}\n" in text, f"README.md has no section {name!r}"
    section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def quickstart_blocks() -> list[str]:
    return section_blocks("Quickstart")


def runnable_blocks() -> list[tuple[str, int]]:
    return [
        (name, i)
        for name in SECTIONS
        for i, code in enumerate(section_blocks(name))
        if 'ferrocuda.load("my_kernels")' not in code
    ]


def test_quickstart_has_cupy_and_torch_examples() -> None:
    blocks = quickstart_blocks()
    assert any("import cupy" in b for b in blocks)
    assert any("import torch" in b for b in blocks)


def test_pytorch_section_has_a_runnable_example() -> None:
    runnable = [section_blocks(s)[i] for s, i in runnable_blocks() if s == "PyTorch"]
    assert any("import ferrocuda.torch" in b and "torch.compile" in b for b in runnable)


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
