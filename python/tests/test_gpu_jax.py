"""ferrocuda kernels inside ``jax.jit`` (``ferrocuda.jax``, XLA FFI handlers) on the GPU.

Every result is checked element by element against the eager ferrocuda call on the same
inputs (the same kernel: equal bits) and against a NumPy/JAX reference. Inputs are random
(``rng``; the seed is printed). JAX must not preallocate the GPU's memory here (conftest sets
``XLA_PYTHON_CLIENT_PREALLOCATE=false`` before JAX starts).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import ferrocuda

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels


@pytest.fixture(scope="module")
def fj(jax: Any) -> Any:
    import ferrocuda.jax as fj

    return fj


def host(rng: np.random.Generator, shape: Any, dtype: Any, scale: float = 4.0) -> np.ndarray:
    """Random host values of ``dtype`` (integers in a range whose sums do not overflow;
    ``"bfloat16"`` is ml_dtypes', which JAX imports)."""
    import ml_dtypes

    if dtype == "bfloat16":
        return (rng.standard_normal(shape) * scale).astype(ml_dtypes.bfloat16)
    if np.issubdtype(np.dtype(dtype), np.integer):
        info = np.iinfo(dtype)
        lo, hi = max(info.min // 4, -(1 << 40)), min(info.max // 4, 1 << 40)
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
    return (rng.standard_normal(shape) * scale).astype(dtype)


def eager(jax: Any, family: Any, *args: Any, out_shape: Any, out_dtype: Any) -> np.ndarray:
    """The eager ferrocuda call of ``family`` on JAX arrays, into a fresh poisoned
    DeviceArray; its result on the host."""
    out = ferrocuda.DeviceArray.from_numpy(np.full(out_shape, 123, dtype=out_dtype))
    for a in args:
        if hasattr(a, "block_until_ready"):
            a.block_until_ready()
    family(*args, out)
    ferrocuda.synchronize()
    return out.to_numpy()


def same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape)
    g = got.view(np.uint8).reshape(-1)
    w = want.view(np.uint8).reshape(-1)
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, f"{what}: {bad.size} bytes differ, first at byte {bad[0]}"


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(1,), (1000,), (4099,), (33, 65), (2, 3, 129), (0,)])
def test_add_matches_eager_and_jnp(
    jax: Any, fj: Any, rng: np.random.Generator, dtype: str, shape: Any
) -> None:
    jnp = jax.numpy
    ah, bh = host(rng, shape, dtype), host(rng, shape, dtype)
    a, b = jnp.asarray(ah), jnp.asarray(bh)
    got = np.asarray(jax.jit(fj.add)(a, b))
    assert got.shape == shape and got.dtype == np.dtype(dtype)
    same_bits(got, np.asarray(a + b), f"add {dtype}{shape} vs jnp")
    same_bits(got, eager(jax, K.add, a, b, out_shape=shape, out_dtype=dtype), "vs eager")
    # Eagerly too (outside jit, JAX runs the custom call on its own).
    same_bits(np.asarray(fj.add(a, b)), got, "op-by-op")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_saxpy_in_out(jax: Any, fj: Any, rng: np.random.Generator, dtype: str) -> None:
    jnp = jax.numpy
    for n in (1, 1000, 70001):
        alpha = float(rng.standard_normal())
        xh, yh = host(rng, n, dtype), host(rng, n, dtype)
        x, y = jnp.asarray(xh), jnp.asarray(yh)
        got = np.asarray(jax.jit(lambda x, y, a=alpha: fj.saxpy(a, x, y))(x, y))
        # The operand is not donated: XLA copies it, and the caller's y is unchanged.
        same_bits(np.asarray(y), yh, "y unchanged")
        # Eager saxpy updates y in place: start from y's values.
        yd = ferrocuda.DeviceArray.from_numpy(yh)
        K.saxpy(alpha, x, yd)
        ferrocuda.synchronize()
        want = yd.to_numpy()
        same_bits(got, want, f"saxpy {dtype} n={n} vs eager")
        ref = alpha * xh.astype(np.float64) + yh.astype(np.float64)
        tol = 4 * np.finfo(dtype).eps * (abs(alpha * xh.astype(np.float64)) + abs(yh))
        assert np.all(np.abs(got - ref) <= tol), f"saxpy {dtype} n={n} vs float64"


def test_axpy_with_donation(jax: Any, fj: Any, rng: np.random.Generator) -> None:
    jnp = jax.numpy
    xh, yh = host(rng, 5000, "float16", 1.0), host(rng, 5000, "float16", 1.0)
    f = jax.jit(lambda x, y: fj.axpy(1.5, x, y), donate_argnums=1)
    got = np.asarray(f(jnp.asarray(xh), jnp.asarray(yh)))
    yd = ferrocuda.DeviceArray.from_numpy(yh)
    K.axpy(1.5, jnp.asarray(xh), yd)
    ferrocuda.synchronize()
    same_bits(got, yd.to_numpy(), "axpy donated vs eager")


def test_gelu_and_silu(jax: Any, fj: Any, rng: np.random.Generator) -> None:
    jnp = jax.numpy
    for n in (7, 1000, (1 << 16) + 3):
        xh = host(rng, n, "float32")
        x = jnp.asarray(xh)
        for name, ref in (
            ("gelu", lambda v: jax.nn.gelu(v, approximate=False)),
            ("silu", jax.nn.silu),
        ):
            got = np.asarray(jax.jit(getattr(fj, name))(x))
            want = eager(jax, getattr(K, name), x, out_shape=n, out_dtype="float32")
            same_bits(got, want, f"{name} n={n} vs eager")
            np.testing.assert_allclose(got, np.asarray(ref(x)), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_sum(jax: Any, fj: Any, rng: np.random.Generator, dtype: str) -> None:
    jnp = jax.numpy
    for n in (1, 1000, 1 << 20):
        xh = host(rng, n, dtype, scale=1.0)
        x = jnp.asarray(xh)
        got = np.asarray(jax.jit(fj.sum)(x))
        assert got.shape == (1,) and got.dtype == np.dtype(dtype)
        same_bits(got, eager(jax, K.sum, x, out_shape=1, out_dtype=dtype), f"sum n={n}")
        if np.issubdtype(np.dtype(dtype), np.integer):
            assert int(got[0]) == int(xh.astype(object).sum())
        else:
            want = xh.astype(np.float64).sum()
            tol = n * np.finfo(dtype).eps * np.abs(xh).astype(np.float64).sum()
            assert abs(float(got[0]) - want) <= tol


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_rows(jax: Any, fj: Any, rng: np.random.Generator, dtype: str) -> None:
    jnp = jax.numpy
    for shape in ((1, 1), (5, 7), (33, 1024), (3, 5000)):
        xh = host(rng, shape, dtype)
        x = jnp.asarray(xh)
        got = np.asarray(jax.jit(fj.softmax)(x))
        same_bits(got, eager(jax, K.softmax, x, out_shape=shape, out_dtype=dtype), "eager")
        np.testing.assert_allclose(
            got, np.asarray(jax.nn.softmax(x, axis=1)), rtol=64 * np.finfo(dtype).eps, atol=0
        )


def test_histogram_zeroed_output(jax: Any, fj: Any, rng: np.random.Generator) -> None:
    jnp = jax.numpy
    xh = rng.uniform(-1.5, 1.5, 100_000).astype(np.float32)
    f = jax.jit(lambda x: fj.histogram(x, -1.0, 1.0, out_shapes={"bins": (64,)}))
    for _ in range(3):  # the zeroed output is cleared on every run (graph replays too)
        got = np.asarray(f(jnp.asarray(xh)))
        want, _edges = np.histogram(xh, bins=64, range=(-1.0, 1.0))
        inside = (xh >= -1.0) & (xh < 1.0)
        assert got.dtype == np.int64 and got.sum() == inside.sum()
        # Bin edges may differ from NumPy's by one rounding: counts match within the values
        # that sit on an edge.
        assert np.abs(got - want).sum() <= 2 * np.sum(np.isclose(xh, np.round(xh * 32) / 32))


def test_linear_sm90(jax: Any, fj: Any, rng: np.random.Generator) -> None:
    if _cc() < (9, 0):
        pytest.skip("the sm_90a GEMM needs compute capability 9.0")
    jnp = jax.numpy
    for m, n, k in ((128, 256, 64), (300, 200, 136), (1, 8, 8)):
        xh = host(rng, (m, k), "float32", 1.0).astype(jnp.bfloat16)
        wh = host(rng, (n, k), "float32", 1.0).astype(jnp.bfloat16)
        x, w = jnp.asarray(xh), jnp.asarray(wh)
        for out_dtype in ("bfloat16", "float32"):
            f = jax.jit(lambda x, w, d=out_dtype: fj.linear(x, w, out_dtypes={"out": d}))
            got = np.asarray(f(x, w))
            assert got.shape == (m, n) and str(got.dtype) == out_dtype
            want = eager(jax, K.linear, x, w, out_shape=(m, n), out_dtype=jnp.dtype(out_dtype))
            same_bits(got, want, f"linear {m}x{n}x{k} -> {out_dtype} vs eager")
            ref = xh.astype(np.float64) @ wh.astype(np.float64).T
            tol = (k * 2.0**-23 + (2.0**-8 if out_dtype == "bfloat16" else 0)) * (
                np.abs(xh.astype(np.float64)) @ np.abs(wh.astype(np.float64)).T
            ) + 1e-30
            assert np.all(np.abs(got.astype(np.float64) - ref) <= tol), "linear vs float64"


def _cc() -> tuple[int, int]:
    import jax

    d = jax.devices("gpu")[0]
    cc = getattr(d, "compute_capability", "0.0")
    major, minor = str(cc).split(".")
    return int(major), int(minor)


def test_chain_with_jnp_ops(jax: Any, fj: Any, rng: np.random.Generator) -> None:
    jnp = jax.numpy

    @jax.jit
    def f(a: Any, b: Any) -> Any:
        s = fj.add(a, b)
        g = fj.gelu(jnp.tanh(s) * 3.0)
        y = fj.saxpy(0.5, g, s)  # y = 0.5 * g + s
        return fj.softmax(y.reshape(50, -1)), fj.sum(y)

    for _ in range(3):  # new inputs each time: replays (command buffers) see new buffers
        ah, bh = host(rng, 5000, "float32"), host(rng, 5000, "float32")
        soft, total = f(jnp.asarray(ah), jnp.asarray(bh))
        s = ah + bh
        t = np.tanh(s.astype(np.float64)) * 3.0
        g = np.asarray(jax.nn.gelu(jnp.asarray(t.astype(np.float32)), approximate=False))
        y = 0.5 * g.astype(np.float64) + s
        np.testing.assert_allclose(np.asarray(total)[0], y.sum(), rtol=1e-4)
        e = np.exp(y.reshape(50, -1) - y.reshape(50, -1).max(axis=1, keepdims=True))
        np.testing.assert_allclose(np.asarray(soft), e / e.sum(1, keepdims=True), rtol=1e-4)


def test_user_module(jax: Any, fj: Any, tmp_path: Any, rng: np.random.Generator) -> None:
    from conftest import write_bundled_parts

    jnp = jax.numpy
    man = json.loads(ferrocuda.bundled().manifest)
    (tmp_path / "user.ptx").write_text(ferrocuda._ferrocuda._bundled_ptx())
    man["ptx"] = "user.ptx"
    man["cubins"] = {}
    write_bundled_parts(tmp_path, man)
    (tmp_path / "user.json").write_text(json.dumps(man))
    m = ferrocuda.load(tmp_path / "user.json")
    mine = fj.functions(m)
    assert fj.functions(m) is mine
    ah, bh = host(rng, 777, "int64"), host(rng, 777, "int64")
    got = np.asarray(jax.jit(mine.add)(jnp.asarray(ah), jnp.asarray(bh)))
    same_bits(got, ah + bh, "user module add")
    got = np.asarray(jax.jit(mine.add_i64)(jnp.asarray(ah), jnp.asarray(bh)))
    same_bits(got, ah + bh, "user module kernel")


def test_errors(jax: Any, fj: Any) -> None:
    jnp = jax.numpy
    a = jnp.ones(10, jnp.float32)
    with pytest.raises(TypeError, match=r"no variant takes the arguments \(float32\[10\], int8"):
        jax.jit(fj.add)(a, jnp.ones(10, jnp.int8))
    with pytest.raises(TypeError, match="complex64"):
        fj.gelu(jnp.ones(4, jnp.complex64))
    with pytest.raises(ValueError, match="out_shapes"):
        fj.histogram(a, 0.0, 1.0)
    with pytest.raises(ValueError, match="lo < hi"):
        fj.histogram(a, 1.0, 0.0, out_shapes={"bins": (4,)})
    with pytest.raises(TypeError, match="static"):
        jax.jit(lambda s, x, y: fj.saxpy(s, x, y))(2.0, a, a)
    with pytest.raises(ValueError, match="same number of columns"):
        fj.linear(jnp.ones((4, 8), jnp.bfloat16), jnp.ones((4, 9), jnp.bfloat16))


def test_handler_errors_at_run_time(jax: Any, fj: Any) -> None:
    """What the handler itself refuses (a call not made through ferrocuda.jax) comes back as
    an XLA error naming the argument, never a crash."""
    jnp = jax.numpy
    fj.register_targets()
    mid = np.int64(ferrocuda._ferrocuda._xla_register(ferrocuda.bundled()))
    a = jnp.ones(16, jnp.int32)
    out = jax.ShapeDtypeStruct((16,), jnp.int32)
    call = jax.ffi.ffi_call(fj.GRAPH_TARGET, [out])
    # The buffers are int32, the kernel takes float32.
    with pytest.raises(Exception, match=r"argument `a`.*float32"):
        jax.block_until_ready(call(a, a, ferrocuda_module=mid, ferrocuda_kernel="add_f32"))
    with pytest.raises(Exception, match="no kernel named"):
        jax.block_until_ready(call(a, a, ferrocuda_module=mid, ferrocuda_kernel="nope"))
    with pytest.raises(Exception, match="not registered"):
        jax.block_until_ready(call(a, a, ferrocuda_module=np.int64(5), ferrocuda_kernel="add_i32"))
    with pytest.raises(Exception, match="ferrocuda_kernel"):
        jax.block_until_ready(call(a, a, ferrocuda_module=mid))
    # The process still works afterwards.
    same_bits(np.asarray(jax.jit(fj.add)(a, a)), np.full(16, 2, np.int32), "after errors")


CHAIN = """
import sys
import numpy as np
import jax, jax.numpy as jnp
import ferrocuda.jax as fj

@jax.jit
def f(a, b):
    s = fj.add(a, b)
    g = fj.gelu(jnp.tanh(s) * 3.0)
    y = fj.saxpy(0.5, g, s)
    return fj.softmax(y.reshape(50, -1)) * 2.0, fj.sum(y)

rng = np.random.default_rng(int(sys.argv[1]))
for i in range(4):
    ah = rng.standard_normal(5000).astype(np.float32)
    bh = rng.standard_normal(5000).astype(np.float32)
    soft, tot = f(jnp.asarray(ah), jnp.asarray(bh))
    s = ah + bh
    g = np.asarray(jax.nn.gelu(jnp.tanh(jnp.asarray(s)) * 3.0, approximate=False))
    y = 0.5 * g.astype(np.float64) + s
    e = np.exp(y.reshape(50, -1) - y.reshape(50, -1).max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(soft), 2 * e / e.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(float(np.asarray(tot)[0]), y.sum(), rtol=1e-4)
print("ok")
"""


def test_command_buffers(jax: Any, fj: Any, tmp_path: Any, rng: np.random.Generator) -> None:
    """With XLA told to put custom calls in command buffers (CUDA graphs) from the first
    one, the graph-compatible ferrocuda calls are traced into them and replay with new
    buffers each run (in a fresh process: XLA reads its flags once)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    dump = tmp_path / "dump"
    script = tmp_path / "chain.py"
    script.write_text(CHAIN)
    pkg = str(Path(ferrocuda.__file__).resolve().parent.parent)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([pkg, os.environ.get("PYTHONPATH", "")]),
        XLA_PYTHON_CLIENT_PREALLOCATE="false",
        XLA_FLAGS="--xla_gpu_graph_min_graph_size=1 "
        "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL "
        f"--xla_dump_to={dump}",
    )
    seed = str(int(rng.integers(1 << 31)))
    out = subprocess.run(
        [sys.executable, str(script), seed], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-4000:]
    seqs = sorted(dump.glob("*jit_f*thunk_sequence_after_thunk_passes.txt"))
    assert seqs, sorted(p.name for p in dump.iterdir())
    text = seqs[0].read_text()
    print(text[:6000])
    # Thunks inside a command buffer are indented under it: add, gelu, saxpy and softmax are
    # there; sum (scratch workspaces: not graph-compatible) runs between the two buffers.
    calls = [line for line in text.splitlines() if "kCustomCall" in line]
    inside = [line for line in calls if line.startswith(" ")]
    assert text.count("kCommandBuffer") >= 1 and (len(inside), len(calls)) == (4, 5), text


def readme_jax_blocks() -> list[str]:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text.split("\n## JAX\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_jax_section_runs(jax: Any, fj: Any) -> None:
    blocks = readme_jax_blocks()
    assert blocks and any("jax.jit" in b for b in blocks)
    for i, code in enumerate(blocks):
        exec(compile(code, f"README.md JAX block {i}", "exec"), {})


def test_vmap_runs_per_element_and_grad_is_refused(
    jax: Any, fj: Any, rng: np.random.Generator
) -> None:
    jnp = jax.numpy
    ah, bh = host(rng, (5, 300), "float32"), host(rng, (5, 300), "float32")
    got = np.asarray(jax.jit(jax.vmap(fj.add))(jnp.asarray(ah), jnp.asarray(bh)))
    same_bits(got, ah + bh, "vmap(add)")
    sums = np.asarray(jax.vmap(fj.sum)(jnp.asarray(ah)))
    assert sums.shape == (5, 1)
    np.testing.assert_allclose(sums[:, 0], ah.astype(np.float64).sum(axis=1), rtol=1e-5)
    with pytest.raises(Exception, match=r"(?i)differentiat|jvp|transpose"):
        jax.grad(lambda x: fj.sum(x)[0])(jnp.asarray(ah[0]))
