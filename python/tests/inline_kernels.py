"""The inline kernels the tests compile (``test_inline.py`` without a GPU, ``test_gpu_inline.py``
with one), in one place so that ``scripts/gpu-bundle.sh`` can build them into the cache that
travels to the GPU machine (``python inline_kernels.py``: there a cache hit needs no cargo).
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"

#: ``out = a * x`` (f32), bounds-checked reads and writes.
SCALE = r"""
#[kernel]
pub unsafe fn scale(x: Slice<f32>, out: SliceMut<f32>, a: f32) {
    for i in thread::grid_stride(out.len()) {
        if let Some(v) = x.get(i) {
            unsafe { out.write(i, a * v) };
        }
    }
}
"""

#: ``out = a * x + b * y``, a generic kernel: ``axpby_f32`` and ``axpby_f64`` in the family
#: ``axpby``; the host refuses arrays of different shapes (``same_shape``).
AXPBY = r"""
/// out = a * x + b * y, element by element (two products and a sum, each rounded).
#[kernel(instances(f32, f64), same_shape(x, y, out))]
pub unsafe fn axpby<T: Element + core::ops::Mul<Output = T> + core::ops::Add<Output = T>>(
    a: T,
    x: Slice<T>,
    b: T,
    y: Slice<T>,
    out: SliceMut<T>,
) {
    for i in thread::grid_stride(out.len()) {
        // SAFETY: i < out.len() == x.len() == y.len() (same_shape), one thread per index.
        unsafe { out.write_unchecked(i, a * x.get_unchecked(i) + b * y.get_unchecked(i)) };
    }
}
"""

#: Fails a check on purpose: thread ``who`` runs ``device_assert!`` on a false condition (a
#: trap that records this string's line), every other thread writes ``out[i] = 1``. Run in a
#: child process: the trap ends the CUDA context.
TRAP = r"""
#[kernel]
pub unsafe fn trap_on_purpose(out: SliceMut<u32>, who: u32) {
    let i = thread::index_1d();
    device_assert!(i != who as usize);
    if i < out.len() {
        unsafe { out.write(i, 1) };
    }
}
"""

ALL = (SCALE, AXPBY, TRAP)


def readme_blocks() -> list[str]:
    """The Python blocks of the README's "Inline kernels" section: the first compiles its
    kernels (no GPU needed), the second runs them on CuPy arrays."""
    section = README.read_text().split("## Inline kernels", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


if __name__ == "__main__":
    import ferrocuda

    for src in ALL:
        print(ferrocuda.inline(src, progress=False))
    # The README's kernels too (its first block compiles them).
    exec(compile(readme_blocks()[0], "README.md inline block 0", "exec"), {})
