"""The README's Python quickstart runs as written (GPU; each block skips without its library)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def quickstart_blocks() -> list[str]:
    text = README.read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_quickstart_has_cupy_and_torch_examples() -> None:
    blocks = quickstart_blocks()
    assert any("import cupy" in b for b in blocks)
    assert any("import torch" in b for b in blocks)


@pytest.mark.gpu
@pytest.mark.parametrize("index", range(len(quickstart_blocks())))
def test_quickstart_block_runs(gpu: None, index: int) -> None:
    code = quickstart_blocks()[index]
    lib = "cupy" if "import cupy" in code else "torch" if "import torch" in code else None
    if lib:
        mod = pytest.importorskip(lib)
        if lib == "torch" and not mod.cuda.is_available():
            pytest.skip("torch.cuda is not available")
    exec(compile(code, f"README.md quickstart block {index}", "exec"), {})
