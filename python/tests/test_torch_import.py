"""``import ferrocuda`` never imports torch, and ``ferrocuda.torch`` imports without it,
saying what is missing when an operator is used (no torch or GPU needed: run in CI)."""

from __future__ import annotations

import subprocess
import sys


def test_importing_ferrocuda_does_not_import_torch() -> None:
    code = "import sys, ferrocuda; assert 'torch' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_without_torch_the_module_imports_and_says_what_is_missing() -> None:
    # torch made unimportable in a fresh interpreter.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import ferrocuda.torch as ft\n"
        "try:\n    ft.gelu\nexcept ImportError as e:\n    print('ImportError:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ImportError:" in out.stdout and "needs PyTorch" in out.stdout, out.stdout
