"""The CuPy and PyTorch fast paths against the producers' own interfaces (GPU).

ferrocuda reads exact ``cupy.ndarray`` / ``torch.Tensor`` fields directly instead of calling
their ``__cuda_array_interface__`` getters (see ``python/src/read/fast/``). These tests check
that what the fast path reads equals what the getter describes (read through the generic path,
``_describe_generic``) for every dtype and layout, under every stream CuPy or torch can make
current, with CuPy's export version 2 and with per-thread default streams; that torch's
current stream is the producer stream of a torch tensor (a launch inside
``with torch.cuda.stream(s)`` runs on ``s`` and sees ``s``'s pending work), with a control
showing the race the rule prevents; and that ``FERROCUDA_FAST_PATHS=0`` switches both off.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

import ferrocuda
from scale import reps

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels
generic = ferrocuda._ferrocuda._describe_generic
N = 1 << 20

CUPY_DTYPES = [
    "bool",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]


def cupy_views(cp: Any, rng: np.random.Generator) -> list[Any]:
    out = []
    for dt in CUPY_DTYPES:
        base = cp.asarray(rng.integers(0, 5, size=(4, 6, 8))).astype(dt)
        out += [
            base,
            base.T,
            base.transpose(0, 2, 1),
            base[::2],
            base[:, :, ::2],
            base[::-1, 1:, ::-3],
            base[1],
            base[:0],
            base[1, 2, 3],  # 0-d
            cp.asfortranarray(base),
            cp.broadcast_to(base[:1], (3, 6, 8)),
        ]
    return out


def same(fast: dict, slow: dict) -> None:
    assert fast == slow, (fast, slow)


def test_cupy_fast_path_is_on(cupy: Any) -> None:
    a = cupy.arange(4, dtype=cupy.float32)
    ferrocuda.validate_interface(a)
    assert ferrocuda._ferrocuda._fast_paths()[0], "the CuPy fast path switched itself off"


def test_cupy_fast_path_matches_the_getter(cupy: Any, rng: np.random.Generator) -> None:
    cp = cupy
    views = cupy_views(cp, rng)
    side = cp.cuda.Stream(non_blocking=True)
    ext = (
        cp.cuda.Stream.from_external(side)
        if hasattr(cp.cuda.Stream, "from_external")
        else cp.cuda.ExternalStream(side.ptr)
    )
    for ctx in [None, side, cp.cuda.Stream.null, cp.cuda.Stream.ptds, ext]:
        for v in views:
            if ctx is None:
                same(ferrocuda.validate_interface(v), generic(v))
            else:
                with ctx:
                    d = ferrocuda.validate_interface(v)
                    same(d, generic(v))
                    want = ctx.ptr or 1  # the null stream is exported as the legacy stream
                    assert d["stream"] == want
    assert ferrocuda._ferrocuda._fast_paths()[0]


def test_cupy_fast_path_export_version_2(cupy: Any) -> None:
    import cupy._util as util

    a = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)[:, ::2]
    old = util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION
    try:
        util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 2
        d = ferrocuda.validate_interface(a)
        same(d, generic(a))
        assert d["stream"] is None and d["version"] == 2
        util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 5  # the getter raises; so must we
        with pytest.raises(ValueError, match="EXPORT_VERSION"):
            ferrocuda.validate_interface(a)
    finally:
        util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = old
    assert ferrocuda.validate_interface(a)["stream"] == 1


def test_cupy_fast_path_per_thread_current_streams(cupy: Any) -> None:
    cp = cupy
    errors: list[BaseException] = []

    def work() -> None:
        try:
            s = cp.cuda.Stream(non_blocking=True)
            a = cp.arange(64, dtype=cp.float32)
            with s:
                for _ in range(200):
                    d = ferrocuda.validate_interface(a)
                    assert d["stream"] == s.ptr
            assert ferrocuda.validate_interface(a)["stream"] == 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def _child(code: str, **env: str) -> str:
    e = dict(os.environ)
    e.update(env)
    r = subprocess.run(
        [sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_cupy_fast_path_per_thread_default_stream(cupy: Any) -> None:
    # CuPy configured for the per-thread default stream: its default and null streams must
    # be exported as the getter exports them, and the fast path must stay on.
    out = _child(
        "import cupy as cp, ferrocuda\n"
        "g = ferrocuda._ferrocuda._describe_generic\n"
        "a = cp.arange(8, dtype=cp.float32)\n"
        "with cp.cuda.Stream.null:\n"
        "    e = ferrocuda.validate_interface(a); assert e == g(a), (e, g(a))\n"
        "d = ferrocuda.validate_interface(a); assert d == g(a), (d, g(a))\n"
        "print(cp.cuda.get_current_stream().ptr, d['stream'], e['stream'],\n"
        "      *ferrocuda._ferrocuda._fast_paths())\n",
        CUPY_CUDA_PER_THREAD_DEFAULT_STREAM="1",
    )
    cur, d, e, on_cupy, on_torch = out.split()
    assert d == (cur if cur != "0" else e), out
    assert on_cupy == on_torch == "True", out


def test_fast_paths_can_be_switched_off(cupy: Any) -> None:
    out = _child(
        "import cupy as cp, ferrocuda\n"
        "a = cp.arange(8, dtype=cp.float32); o = cp.empty_like(a)\n"
        "ferrocuda.kernels.add(a, a, o); assert bool((o == 2 * a).all())\n"
        "print(ferrocuda._ferrocuda._fast_paths())\n",
        FERROCUDA_FAST_PATHS="0",
    )
    assert out.strip() == "(False, False)", out


TORCH_DTYPES = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]


def torch_views(torch: Any) -> list[Any]:
    out = []
    for name in TORCH_DTYPES:
        dt = getattr(torch, name)
        base = torch.arange(4 * 6 * 8, device="cuda").reshape(4, 6, 8).to(dt)
        out += [
            base,
            base.transpose(0, 2),
            base[::2, 1:, ::3],
            base[1],
            base[:0],
            base[1, 2, 3],
            base[:1].expand(3, 6, 8),
        ]
    return out


def test_torch_fast_path_matches_the_getter(torch: Any) -> None:
    side = torch.cuda.Stream()
    for v in torch_views(torch):
        same(ferrocuda.validate_interface(v), generic(v))
        assert ferrocuda.validate_interface(v)["stream"] == 1
        with torch.cuda.stream(side):
            d = ferrocuda.validate_interface(v)
            same(d, generic(v))
            assert d["stream"] == side.cuda_stream
    assert ferrocuda._ferrocuda._fast_paths()[1]


def test_torch_fast_path_survives_an_empty_tensor_first(torch: Any) -> None:
    # The first tensor a process launches on is compared with its interface; an empty one's
    # strides are the producer's choice (torch: 0, its interface: 4) and must not switch the
    # fast path off (with a warning) for the rest of the process.
    code = (
        "import torch, ferrocuda\n"
        "e = torch.empty(0, device='cuda')\n"
        "ferrocuda.kernels.add(e, e, e)\n"
        "x = torch.arange(8, dtype=torch.float32, device='cuda')\n"
        "ferrocuda.kernels.add(x, x, x)\n"
        "assert ferrocuda._ferrocuda._fast_paths()[1], 'torch fast path switched off'\n"
        "assert torch.equal(x, 2 * torch.arange(8, dtype=torch.float32, device='cuda'))\n"
    )
    r = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", code], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr


def test_torch_subclass_takes_the_current_stream(torch: Any) -> None:
    side = torch.cuda.Stream()
    p = torch.nn.Parameter(torch.ones(3, device="cuda"), requires_grad=False)
    with torch.cuda.stream(side):
        assert ferrocuda.validate_interface(p)["stream"] == side.cuda_stream


def _torch_race(torch: Any, launch: Any) -> bool:
    """A torch producer fills x on a side stream behind a long sleep; ``launch`` runs the
    add. True when the result is right."""
    side = torch.cuda.Stream()
    x = torch.zeros(N, device="cuda")
    y = torch.arange(N, dtype=torch.float32, device="cuda")
    out = torch.full((N,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)
        x.fill_(7.0)
        launch(x, y, out, side)
    torch.cuda.synchronize()
    return bool(torch.equal(out, y + 7))


def test_torch_launch_runs_on_the_current_stream(torch: Any) -> None:
    for _ in range(reps(20, 3)):
        assert _torch_race(torch, lambda x, y, o, s: K.add(x, y, o)), (
            "the launch did not follow torch's current stream"
        )


def test_torch_launch_race_control(torch: Any) -> None:
    # The same situation launched on another stream without ordering: the race is real, so
    # the test above can fail.
    other = torch.cuda.Stream()
    wrong = sum(
        not _torch_race(torch, lambda x, y, o, s: K.add(x, y, o, stream=other, sync="off"))
        for _ in range(5)
    )
    assert wrong >= 1, "no race observed: the control cannot tell ordering from luck"


def test_torch_negative_and_conjugate_bits_are_refused(torch: Any) -> None:
    # `z.conj().imag` is a float32 tensor with the negative bit: its values are the negated
    # memory. torch's getter exports the memory as it is, so a kernel would read the wrong
    # sign; ferrocuda refuses it on the fast path and on the generic one (a subclass).
    z = torch.randn(64, dtype=torch.complex64, device="cuda")
    neg = z.conj().imag
    assert neg.is_neg() and neg.dtype == torch.float32
    good = neg.resolve_neg()
    out = torch.full((64,), float("nan"), device="cuda")

    class Sub(torch.Tensor):
        pass

    for x in (neg, neg.as_subclass(Sub)):
        with pytest.raises(ValueError, match="argument `b`: tensor has an unresolved negative"):
            K.add(good, x, out)
    torch.cuda.synchronize()
    assert bool(torch.isnan(out).all()), "a refused launch wrote its output"
    with pytest.raises(ValueError, match="argument `x`: tensor has an unresolved"):
        ferrocuda.validate_interface(z.conj())
    # Resolved, the same values launch and come out right.
    K.add(good, neg.resolve_neg(), out)
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * neg)


def odd_tensors(torch: Any) -> list[Any]:
    """Tensors a fast path must hand to the getter, refuse, or read like the getter."""
    z = torch.randn(8, dtype=torch.complex64, device="cuda")
    x = torch.arange(12, dtype=torch.float32, device="cuda")
    return [
        torch.ones(4, device="cuda", requires_grad=True),  # getter refuses
        z.conj().imag,  # negative bit
        z.conj(),  # conjugate bit
        torch._neg_view(x),  # negative bit, real
        x.to_sparse(),  # no strided storage
        torch.ones(4, device="cuda", dtype=torch.uint16),  # dtype the getter does not export
        torch.ones(4, device="cuda").to(torch.float8_e4m3fn),
        torch.ones(4, device="cuda", dtype=torch.bfloat16),
        x[5:5],  # empty view with an address
        x.view(3, 4)[:, 1:2],  # extent-1 axis with a stride
        x.view(12, 1),
        x.flip(0),  # a copy: contiguous
        torch.nn.Parameter(x.clone(), requires_grad=False),
        torch.ones(4, device="meta"),
        torch.ones(4),  # CPU: a host array
    ]


def outcome(f: Any, v: Any) -> str:
    try:
        d = f(v)
    except Exception as e:  # noqa: BLE001 - the same error either way, type and message
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return repr(sorted(d.items()))


def _same_outcomes(torch: Any) -> None:
    class Sub(torch.Tensor):
        pass

    side = torch.cuda.Stream()
    for s in (None, side):
        with torch.cuda.stream(s):
            for v in torch_views(torch) + odd_tensors(torch):
                got, want = outcome(ferrocuda.validate_interface, v), outcome(generic, v)
                if want.startswith("TypeError: argument `x`: Tensor has no __cuda_array_"):
                    # No interface (CPU, sparse): the protocols after it decide — a host
                    # array, DLPack's own refusal — as for a subclass, which no fast path
                    # reads (a sparse tensor cannot be made one).
                    if v.layout != torch.strided:
                        assert got.startswith("BufferError") and "layout" in got, got
                        continue
                    want = outcome(ferrocuda.validate_interface, v.as_subclass(Sub))
                    if v.device.type == "cpu":
                        assert ferrocuda.validate_interface(v)["ptr"] == v.data_ptr(), got
                assert got == want, (v.dtype, v.shape, v.layout, got, want)


def test_torch_read_source(torch: Any) -> None:
    src = ferrocuda._ferrocuda._torch_read_source()
    print("torch tensors read through:", src)
    want = "exchange" if hasattr(torch.Tensor, "__dlpack_c_exchange_api__") else "attributes"
    assert src == want


def test_torch_odd_tensors_read_as_the_getter_reads_them(torch: Any) -> None:
    # Whatever the fast path reads (through the exchange API where torch has it), each
    # tensor's outcome — its description, or the error and its message — is the getter's.
    _same_outcomes(torch)


def test_torch_attribute_reads_still_agree(torch: Any) -> None:
    # The attribute-read path (older torch, or FERROCUDA_TORCH_EXCHANGE=0) in a child: same
    # outcomes, and launches on it are right.
    here = os.path.dirname(os.path.abspath(__file__))
    out = _child(
        f"import sys; sys.path.insert(0, {here!r})\n"
        "import torch, ferrocuda, test_gpu_fast_paths as t\n"
        "t._same_outcomes(torch)\n"
        "a = torch.randn(1000, device='cuda'); b = torch.randn(1000, device='cuda')[::2]\n"
        "o = torch.full((500,), float('nan'), device='cuda')\n"
        "ferrocuda.kernels.add(a[:500], b, o); torch.cuda.synchronize()\n"
        "assert torch.equal(o, a[:500] + b)\n"
        "print(ferrocuda._ferrocuda._torch_read_source())\n",
        FERROCUDA_TORCH_EXCHANGE="0",
    )
    assert out.strip() == "attributes", out


def test_cupy_current_stream_source(cupy: Any) -> None:
    # The CuPy fast path reads CuPy's current stream through the C function CuPy's own getter
    # calls when its signature is known ("capi"), else through the Python API; either way it
    # must export what the getter exports.
    cp = cupy
    src = ferrocuda._ferrocuda._cupy_stream_source()
    print("CuPy current stream read through:", src)
    assert src in ("capi", "python")
    a = cp.arange(8, dtype=cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        got = ferrocuda.validate_interface(a)["stream"]
        assert got == s.ptr == a.__cuda_array_interface__["stream"]
    with cp.cuda.Stream.null:
        assert ferrocuda.validate_interface(a)["stream"] == a.__cuda_array_interface__["stream"]
