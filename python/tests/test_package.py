"""The package without a GPU: import, the generated kernel namespace, argument handling
(streams, sync modes, scalars, launch configurations), the DLPack consumer (with capsules made
by ctypes), host arrays, the errors of a machine without a driver, and the type stubs."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ferrocuda
from conftest import NO_DRIVER, PTR, cai, write_bundled_parts
from conftest import cai_array as _arr
from ferrocuda import validate_interface

# ---- import and namespace ---------------------------------------------------------------


def test_import_without_driver_in_a_fresh_process() -> None:
    code = (
        "import ferrocuda, ferrocuda.kernels as k; "
        "print(ferrocuda.driver_available(), sorted(k.families))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "add" in out.stdout


def test_public_api() -> None:
    for name in ferrocuda.__all__:
        assert hasattr(ferrocuda, name), name
    assert issubclass(ferrocuda.CudaError, RuntimeError)
    assert issubclass(ferrocuda.PerformanceWarning, UserWarning)
    assert ferrocuda.MAX_NDIM == 32
    assert ferrocuda.SYNC_ENV_VAR == "FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC"
    assert [m.value for m in ferrocuda.SyncMode] == ["default", "event", "off"]
    for obj in [
        ferrocuda,
        ferrocuda.DeviceArray,
        ferrocuda.ForeignArray,
        ferrocuda.Module,
        ferrocuda.Kernel,
        ferrocuda.Family,
        ferrocuda.as_cuda_array,
        ferrocuda.load,
        ferrocuda.from_cuda_array_interface,
        ferrocuda.validate_interface,
        ferrocuda.DeviceArray.empty,
        ferrocuda.DeviceArray.__dlpack__,
    ]:
        assert obj.__doc__, obj


def test_kernels_namespace_is_generated_from_the_manifest() -> None:
    manifest = json.loads(ferrocuda.bundled().manifest)
    kernels = {k["name"]: k for k in manifest["kernels"]}
    families = {k["family"] for k in manifest["kernels"]}
    ns = ferrocuda.kernels
    assert set(ns.families) == families
    assert {"add", "add_index", "initialize_array", "saxpy"} <= families
    for fam in families:
        f = getattr(ns, fam)
        assert isinstance(f, ferrocuda.Family)
        variants = [k for k in kernels.values() if k["family"] == fam]
        assert sorted(k.name for k in f.kernels) == sorted(k["name"] for k in variants)
        for v in variants:
            assert v["name"] + "(" in f.__doc__  # the docstring lists every variant
    for name, k in kernels.items():
        obj = getattr(ns, name)
        if name in families:
            continue  # the family of the same name wins
        assert isinstance(obj, ferrocuda.Kernel)
        assert obj.name == name and obj.family == k["family"]
        # The caller's parameters: launcher-provided workspaces (kind "scratch") are not.
        args = [p["name"] for p in k["params"] if p["kind"] != "scratch"]
        assert [p[0] for p in obj.params] == args
        assert obj.signature.startswith(name + "(") and obj.__doc__
    import ferrocuda.kernels as again

    assert again is ns
    assert ferrocuda.bundled() is ferrocuda.bundled()


def test_module_attributes_and_repr() -> None:
    m = ferrocuda.bundled()
    assert m.arch.startswith("sm_") and m.source == "<bundled>"
    assert isinstance(m.add, ferrocuda.Family)
    assert isinstance(m.add_f32, ferrocuda.Kernel)
    assert "add" in dir(m) and "add_f32" in dir(m)
    with pytest.raises(AttributeError, match=r"no kernel or family named .nope."):
        m.nope  # noqa: B018
    assert "ferrocuda.Module" in repr(m) and "add_f32" in repr(m.add)
    p = m.add_f32.params
    assert p[0] == ("a", "slice", "float32", 1, False) and p[2][4] is True


def test_load_missing_file() -> None:
    with pytest.raises(ValueError, match="cannot read"):
        ferrocuda.load("/nonexistent/kernels.json")


def test_load_a_builder_manifest(tmp_path: Path) -> None:
    # A module as ferrocuda-builder writes it: <name>.json naming <name>.ptx beside it.
    m = ferrocuda.bundled()
    man = json.loads(m.manifest)
    (tmp_path / "mine.ptx").write_text(ferrocuda._ferrocuda._bundled_ptx())
    write_bundled_parts(tmp_path, man)
    man["ptx"] = "mine.ptx"
    (tmp_path / "mine.json").write_text(json.dumps(man))
    mine = ferrocuda.load(str(tmp_path / "mine.json"))
    assert set(mine.kernels) == set(m.kernels)
    assert isinstance(mine.saxpy, ferrocuda.Family)
    again = ferrocuda.Module.load(tmp_path / "mine.json")
    assert set(again.families) == set(m.families)


# ---- streams and sync modes -----------------------------------------------------------------


class TorchLikeStream:
    def __init__(self, h: int) -> None:
        self.cuda_stream = h


class CupyLikeStream:
    def __init__(self, h: int) -> None:
        self.ptr = h


class NumbaLikeStream:
    def __init__(self, h: int | None) -> None:
        self.handle = ctypes.c_void_p(h)


class CudaStreamProtocol:
    def __init__(self, h: int) -> None:
        self.h = h

    def __cuda_stream__(self) -> Any:
        return (0, self.h)


@pytest.mark.parametrize(
    "stream,expected",
    [
        (None, None),
        (1, 1),
        (2, 2),
        (0x7F00_1234, 0x7F00_1234),
        (np.uint64(0x5000), 0x5000),
        (TorchLikeStream(0), 1),  # the null stream is the legacy default stream
        (TorchLikeStream(0x5000), 0x5000),
        (CupyLikeStream(0), 1),
        (CupyLikeStream(0x6000), 0x6000),
        (NumbaLikeStream(None), 1),
        (NumbaLikeStream(0x7000), 0x7000),
        (CudaStreamProtocol(0x8000), 0x8000),
        (CudaStreamProtocol(2), 2),
    ],
)
def test_normalize_stream(stream: Any, expected: int | None) -> None:
    assert ferrocuda.normalize_stream(stream) == expected


@pytest.mark.parametrize(
    "stream,exc,fragment",
    [
        (0, ValueError, "stream 0 is ambiguous"),
        (-1, ValueError, "not a stream handle"),
        (2**64, ValueError, "not a stream handle"),
        (True, TypeError, "got bool"),
        ("1", TypeError, "got str"),
        (1.0, TypeError, "got float"),
        (object(), TypeError, "stream object"),
    ],
)
def test_normalize_stream_refuses(stream: Any, exc: Any, fragment: str) -> None:
    with pytest.raises(exc, match=fragment):
        ferrocuda.normalize_stream(stream)


def test_stream_argument_checked_at_launch() -> None:
    with pytest.raises(ValueError, match="argument `stream`: stream 0"):
        ferrocuda.kernels.add(_arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192), stream=0)


@pytest.mark.parametrize(
    "sync,expected",
    [
        (True, "default"),
        (False, "off"),
        ("default", "default"),
        ("event", "event"),
        ("off", "off"),
        (ferrocuda.SyncMode.EVENT, "event"),
        (ferrocuda.SyncMode.OFF, "off"),
    ],
)
def test_normalize_sync(sync: Any, expected: str) -> None:
    assert ferrocuda.normalize_sync(sync) == expected


def test_normalize_sync_refuses() -> None:
    with pytest.raises(ValueError, match="not a sync mode"):
        ferrocuda.normalize_sync("sometimes")
    with pytest.raises(TypeError, match="argument `sync`"):
        ferrocuda.normalize_sync(1)


@pytest.mark.parametrize(
    "value,expected",
    [(None, "default"), ("", "default"), ("1", "default"), ("0", "off"), ("event", "event")],
)
def test_sync_environment_variable(value: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC"}
    if value is not None:
        env["FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC"] = value
    code = "import ferrocuda; print(ferrocuda.normalize_sync())"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == expected


def test_sync_environment_variable_typo_is_an_error() -> None:
    env = dict(os.environ, FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC="yes")
    code = "import ferrocuda; ferrocuda.normalize_sync()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode != 0
    assert "ValueError" in out.stderr and "FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC" in out.stderr


# ---- scalars ---------------------------------------------------------------------------------


def _saxpy_args(alpha: Any) -> list[Any]:
    return [alpha, _arr(), _arr(ptr=PTR + 4096)]


@pytest.mark.parametrize(
    "alpha,exc,fragment",
    [
        (True, TypeError, "argument `alpha`: expected a float32 scalar, got bool"),
        ("2", TypeError, "argument `alpha`: expected a real number"),
        (None, TypeError, "argument `alpha`"),
        (1e39, OverflowError, re.escape("argument `alpha`: 1e+39 is out of range for float32")),
        (np.float64(-1e300), OverflowError, "out of range for float32"),
    ],
)
def test_float_scalars_refused(alpha: Any, exc: Any, fragment: str) -> None:
    with pytest.raises(exc, match=fragment):
        ferrocuda.kernels.saxpy_f32(*_saxpy_args(alpha))


@pytest.mark.parametrize(
    "iters,exc,fragment",
    [
        (-1, OverflowError, r"argument `iters`: -1 is out of range for uint32 \(0..=4294967295\)"),
        (2**32, OverflowError, "out of range for uint32"),
        (2**100, OverflowError, "out of range for uint32"),
        (1.5, TypeError, "expected an integer for the uint32 parameter, got float"),
        (False, TypeError, "got bool"),
        (np.float32(3), TypeError, "expected an integer"),
    ],
)
def test_int_scalars_refused(iters: Any, exc: Any, fragment: str) -> None:
    with pytest.raises(exc, match=fragment):
        ferrocuda.kernels.fill_slow(_arr(), 1.0, iters)


@NO_DRIVER
@pytest.mark.parametrize("alpha", [2, 2.5, np.float32(2), np.int64(3), float("nan"), float("inf")])
def test_scalars_accepted_reach_the_driver(alpha: Any) -> None:
    with pytest.raises(ferrocuda.CudaError, match="no CUDA driver"):
        ferrocuda.kernels.saxpy(*_saxpy_args(alpha))
    with pytest.raises(ferrocuda.CudaError):
        ferrocuda.kernels.fill_slow(
            _arr(), alpha if not isinstance(alpha, float) or alpha == alpha else 0.0, np.uint32(7)
        )


def test_array_where_scalar_expected_and_vice_versa() -> None:
    with pytest.raises(TypeError, match="argument `alpha`"):
        ferrocuda.kernels.saxpy_f32(_arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192))
    with pytest.raises(TypeError, match="argument `x`: not an array"):
        ferrocuda.kernels.saxpy_f32(1.0, 2.0, _arr())


def test_arity() -> None:
    with pytest.raises(
        TypeError, match=r"kernel family `add` takes 3 argument\(s\) \(a, b, out\), got 2"
    ):
        ferrocuda.kernels.add(_arr(), _arr())
    with pytest.raises(TypeError, match=r"kernel `add_f32` takes 3"):
        ferrocuda.kernels.add_f32(_arr(), _arr(), _arr(), _arr())


def test_keyword_arguments_fill_their_parameters() -> None:
    # Each keyword lands in its parameter's slot: the read-only array is refused as `out`
    # whichever way it is passed, and the float64 array as `b` when passed as b.
    ro = _arr(ptr=PTR + 8192, readonly=True)
    calls: list[Any] = [
        lambda: ferrocuda.kernels.add(_arr(), _arr(ptr=PTR + 4096), out=ro),
        lambda: ferrocuda.kernels.add(_arr(), out=ro, b=_arr(ptr=PTR + 4096)),
        lambda: ferrocuda.kernels.add(out=ro, b=_arr(ptr=PTR + 4096), a=_arr()),
        lambda: ferrocuda.kernels.add_f32.bind(_arr(), _arr(ptr=PTR + 4096), out=ro),
        lambda: ferrocuda.kernels.add[1, 32](_arr(), b=_arr(ptr=PTR + 4096), out=ro),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"argument `out`: .*read-only"):
            call()
    f8 = _arr(ptr=PTR + 4096, typestr="<f8")
    with pytest.raises(TypeError, match=r"argument `b`: expected a float32 array, got float64"):
        ferrocuda.kernels.add_f32(_arr(), out=_arr(ptr=PTR + 8192), b=f8)
    # Scalars by keyword are converted by their parameter's type.
    with pytest.raises(TypeError, match=r"argument `alpha`"):
        ferrocuda.kernels.saxpy_f32(alpha=True, x=_arr(), y=_arr(ptr=PTR + 4096))


def test_keyword_argument_errors() -> None:
    a, b, out = _arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192)
    with pytest.raises(TypeError, match=r"kernel family `add` has no parameter `c` \(its "):
        ferrocuda.kernels.add(a, b, c=out)
    with pytest.raises(TypeError, match=r"kernel `add_f32`: argument `b` given by position"):
        ferrocuda.kernels.add_f32(a, b, out, b=b)
    with pytest.raises(TypeError, match=r"family `add` is missing argument\(s\) `b` \(a, b, "):
        ferrocuda.kernels.add(a, out=out)
    with pytest.raises(TypeError, match=r"family `add` is missing argument\(s\) `out`"):
        ferrocuda.kernels.add(a, b=b)
    # The launch options keep their meaning: a stream keyword is not a parameter.
    with pytest.raises(TypeError, match=r"kernel family `add` takes 3 argument"):
        ferrocuda.kernels.add(a, b, stream=2)


@NO_DRIVER
def test_keyword_call_reaches_the_driver() -> None:
    with pytest.raises(ferrocuda.CudaError):
        ferrocuda.kernels.add(_arr(), b=_arr(ptr=PTR + 4096), out=_arr(ptr=PTR + 8192))


# ---- launch configuration ----------------------------------------------------------------------


@NO_DRIVER
@pytest.mark.parametrize(
    "cfg", [(1, 256), ((2, 1), (128, 2)), (1, 64, 1), (1, 64, 2, 0), [1, (32, 2, 2)]]
)
def test_numba_style_configuration(cfg: Any) -> None:
    launcher = ferrocuda.kernels.add[tuple(cfg)]
    assert isinstance(launcher, ferrocuda.ConfiguredLauncher)
    with pytest.raises(ferrocuda.CudaError):
        launcher(_arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192))


@pytest.mark.parametrize(
    "cfg,exc",
    [
        ((0, 256), ValueError),
        ((1, (1, 2, 3, 4)), ValueError),
        ((1, -5), ValueError),
        ((1.5, 32), ValueError),
        ((1, 32, 0), ValueError),  # stream 0
        ((1, 32, 1, -1), ValueError),
        ((1,), TypeError),
        ((1, 2, 3, 4, 5), TypeError),
    ],
)
def test_bad_configuration(cfg: Any, exc: Any) -> None:
    with pytest.raises(exc):
        ferrocuda.kernels.add_f32[cfg]
    if cfg[0] == 0:
        with pytest.raises(ValueError, match="argument `grid`"):
            ferrocuda.kernels.add(_arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192), grid=0)


def test_bad_configuration_single_item() -> None:
    with pytest.raises(TypeError):
        ferrocuda.kernels.add_f32[1]


# ---- no driver: the first GPU use raises CudaError -----------------------------------------------


@NO_DRIVER
def test_first_gpu_use_raises_cuda_error() -> None:
    for f in [
        lambda: ferrocuda.DeviceArray.empty((4,), "float32"),
        lambda: ferrocuda.DeviceArray.from_numpy(np.zeros(3)),
        lambda: ferrocuda.kernels.add(_arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192)),
        lambda: ferrocuda.kernels.add(
            _arr(), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192), check_pointers=False
        ),
        lambda: ferrocuda.kernels.initialize_array(_arr(typestr="<i4"), sync="event", stream=2),
        lambda: ferrocuda.device_count(),
        lambda: ferrocuda.synchronize(),
        lambda: ferrocuda.as_cuda_array(_arr(stream=1)),
    ]:
        with pytest.raises(ferrocuda.CudaError) as info:
            f()
        assert "no CUDA driver" in str(info.value)
        assert info.value.code is None
    assert ferrocuda.driver_available() is False


def test_import_without_sync_needs_no_driver() -> None:
    fa = ferrocuda.as_cuda_array(_arr(stream=1), sync=False)
    assert fa.stream is None  # sync=False drops the producer's stream (launches do no ordering)
    fa = ferrocuda.as_cuda_array(_arr())  # no stream: nothing to synchronize
    assert fa.shape == (4,) and fa.dtype == np.float32 and fa.readonly is False
    d = fa.__cuda_array_interface__
    assert d["version"] == 3 and d["data"] == (PTR, False) and d["strides"] is None
    assert d["typestr"] == "<f4" and d["descr"] == [("", "<f4")] and d["stream"] is None


def test_from_cuda_array_interface_keeps_owner_and_reexports_strides() -> None:
    owner = object()
    fa = ferrocuda.from_cuda_array_interface(
        cai(shape=(3, 2), strides=(4, 12)), owner=owner, sync=False
    )
    assert fa.owner is owner
    assert fa.__cuda_array_interface__["strides"] == (4, 12)
    assert fa.strides == (4, 12) and fa.size == 6 and fa.ndim == 2 and fa.ptr == PTR
    with pytest.raises(ValueError, match=r"argument `desc`: __cuda_array_interface__\['shape'\]"):
        ferrocuda.from_cuda_array_interface(cai(shape=(-1,)), sync=False)
    with pytest.raises(TypeError, match="must be a dict"):
        ferrocuda.from_cuda_array_interface([1, 2], sync=False)  # type: ignore[arg-type]


def test_as_cuda_array_refuses_host_arrays() -> None:
    with pytest.raises(TypeError, match="host array"):
        ferrocuda.as_cuda_array(np.zeros(3))


# ---- host (NumPy) arrays ------------------------------------------------------------------------


def test_numpy_arrays_are_read_as_host_arrays() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = validate_interface(a.T, "h")
    assert got["protocol"] == "__array_interface__"
    assert got["shape"] == (3, 2) and got["c_contiguous"]  # a contiguous copy is what travels


@NO_DRIVER
def test_host_arrays_warn_then_need_the_driver() -> None:
    a = np.ones(8, np.float32)
    out = np.zeros(8, np.float32)
    with pytest.warns(ferrocuda.PerformanceWarning, match="copied to the device"):
        with pytest.raises(ferrocuda.CudaError):
            ferrocuda.kernels.add(a, a, out)


def test_host_output_must_be_writable() -> None:
    a = np.ones(8, np.float32)
    out = np.zeros(8, np.float32)
    out.flags.writeable = False
    with pytest.raises(
        ValueError, match=r"argument `out`: __array_interface__\['data'\]: array is read-only"
    ):
        ferrocuda.kernels.add(a, a, out)
    with pytest.raises(TypeError, match="argument `out`: not an array: list"):
        ferrocuda.kernels.add(a, a, [0.0] * 8)

    class CpuTensorLike:
        """A host array known only through DLPack and __array__ (as torch CPU tensors)."""

        def __init__(self, x: Any) -> None:
            self.x = x

        def __dlpack__(self, **kw: Any) -> Any:
            return self.x.__dlpack__(**kw)

        def __dlpack_device__(self) -> Any:
            return (1, 0)

        def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
            return self.x

    # as an input it is a host array; as an output it cannot be written back
    assert validate_interface(CpuTensorLike(a))["protocol"] == "__array_interface__"
    with pytest.raises(ValueError, match="writable NumPy array"):
        ferrocuda.kernels.add(a, a, CpuTensorLike(np.zeros(8, np.float32)))


def test_host_arrays_dispatch_by_dtype() -> None:
    with pytest.raises(TypeError, match="no variant"):
        ferrocuda.kernels.add(np.ones(3, np.uint16), np.ones(3, np.uint16), np.ones(3, np.uint16))


# ---- DLPack consumer, with capsules made by ctypes -----------------------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER),
]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER_V),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_NAMES = {False: b"dltensor", True: b"dltensor_versioned"}  # kept alive: capsules point at them


class FakeDLPack:
    """A DLPack producer over a fake CUDA pointer; records calls and deleter invocations."""

    def __init__(
        self,
        shape: Any = (2, 3),
        strides: Any | None = None,
        code: int = 2,
        bits: int = 32,
        lanes: int = 1,
        device_type: int = 2,
        data: int = PTR,
        byte_offset: int = 0,
        versioned: bool = False,
        major: int = 1,
        flags: int = 0,
        old_producer: bool = False,
    ) -> None:
        self.calls: list[dict[str, Any]] = []
        self.deleted = 0
        self.versioned = versioned
        self.old_producer = old_producer
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(strides))(*strides) if strides is not None else None
        t = DLTensor(
            data=data,
            device=DLDevice(device_type, 0),
            ndim=len(shape),
            dtype=DLDataType(code, bits, lanes),
            shape=ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)),
            strides=ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
            if self._strides is not None
            else None,
            byte_offset=byte_offset,
        )
        if versioned:
            self._deleter = DELETER_V(self._delete)
            self.managed: Any = DLManagedTensorVersioned(
                DLPackVersion(major, 0), None, self._deleter, flags, t
            )
        else:
            self._deleter = DELETER(self._delete)
            self.managed = DLManagedTensor(t, None, self._deleter)
        self.capsule: Any = None

    def _delete(self, _ptr: Any) -> None:
        self.deleted += 1

    def __dlpack__(self, **kw: Any) -> Any:
        self.calls.append(kw)
        if self.old_producer and "max_version" in kw:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.capsule = _capsule_new(ctypes.addressof(self.managed), _NAMES[self.versioned], None)
        return self.capsule

    def __dlpack_device__(self) -> Any:
        return (self.managed.dl_tensor.device.device_type, 0)


def test_dlpack_import_unversioned() -> None:
    p = FakeDLPack(shape=(2, 3), byte_offset=16)
    got = validate_interface(p, "j")
    assert got["protocol"] == "__dlpack__"
    assert got["shape"] == (2, 3) and got["strides"] == (12, 4) and got["c_contiguous"]
    assert got["ptr"] == PTR + 16 and got["stream"] is None and got["readonly"] is False
    assert p.calls == [{"stream": None, "max_version": (1, 0)}]
    assert _capsule_name(p.capsule) == b"used_dltensor"
    assert p.deleted == 1  # released with the validation's owner


def test_dlpack_import_versioned_readonly_and_strides() -> None:
    p = FakeDLPack(shape=(3, 2), strides=(1, 3), bits=64, versioned=True, flags=1)
    got = validate_interface(p)
    assert got["dtype"] == "float64" and got["strides"] == (8, 24) and not got["c_contiguous"]
    assert got["readonly"] is True
    assert _capsule_name(p.capsule) == b"used_dltensor_versioned"
    assert p.deleted == 1


def test_dlpack_bfloat16() -> None:
    p = FakeDLPack(shape=(4,), code=4, bits=16)
    got = validate_interface(p)
    assert got["dtype"] == "bfloat16" and got["typestr"] == "<V2" and got["strides"] == (2,)
    assert p.deleted == 1


def test_dlpack_old_producer_fallback() -> None:
    p = FakeDLPack(old_producer=True)
    validate_interface(p)
    assert p.calls == [{"stream": None, "max_version": (1, 0)}, {"stream": None}]
    assert p.deleted == 1


@pytest.mark.parametrize(
    "kw,exc,key,fragment",
    [
        ({"device_type": 3}, ValueError, "device", "device type 3 (CUDA host), not a CUDA device"),
        ({"device_type": 10}, ValueError, "device", "device type 10, not a CUDA device"),
        ({"lanes": 4}, TypeError, "dtype", "lanes = 4"),
        (
            {"code": 4, "bits": 32},
            TypeError,
            "dtype",
            "unsupported DLPack element type (code 4, 32 bits)",
        ),
        ({"code": 2, "bits": 128}, TypeError, "dtype", "unsupported DLPack element type"),
        ({"shape": (2, -3)}, ValueError, "shape", "shape[1] = -3 is negative"),
        ({"data": PTR + 2}, ValueError, "data", "not aligned"),
        ({"data": 0}, ValueError, "data", "null pointer"),
        ({"strides": (2**62, 1)}, ValueError, "strides", "overflows"),
        ({"versioned": True, "major": 2}, ValueError, "version", "DLPack version 2.0"),
    ],
)
def test_dlpack_refusals_release_the_tensor(
    kw: dict[str, Any], exc: Any, key: str, fragment: str
) -> None:
    p = FakeDLPack(**kw)
    with pytest.raises(exc) as info:
        validate_interface(p, "j")
    msg = str(info.value)
    assert msg.startswith(f"argument `j`: __dlpack__['{key}']: "), msg
    assert fragment in msg, msg
    assert p.deleted == 1


def test_cpu_dlpack_producers_are_host_arrays() -> None:
    x = np.arange(6, dtype=np.float64).reshape(2, 3)

    class CpuOnly:
        def __dlpack__(self, **kw: Any) -> Any:
            return x.__dlpack__(**{k: v for k, v in kw.items() if k in ("stream", "max_version")})

        def __dlpack_device__(self) -> Any:
            return (1, 0)

    got = validate_interface(CpuOnly(), "c")
    assert got["protocol"] == "__array_interface__" and got["shape"] == (2, 3)


def test_dlpack_not_a_capsule_or_used_capsule() -> None:
    class NotCapsule:
        def __dlpack__(self, **kw: Any) -> Any:
            return 42

    with pytest.raises(TypeError, match="returned int, not a capsule"):
        validate_interface(NotCapsule(), "j")

    p = FakeDLPack()
    validate_interface(p)

    class Replay:
        def __dlpack__(self, **kw: Any) -> Any:
            return p.capsule  # renamed "used_dltensor"

    with pytest.raises(TypeError, match="consumed already"):
        validate_interface(Replay(), "j")
    assert p.deleted == 1


def test_dlpack_producer_error_propagates() -> None:
    class Refuses:
        def __dlpack__(self, **kw: Any) -> Any:
            raise BufferError("cannot export")

    with pytest.raises(BufferError, match="cannot export"):
        validate_interface(Refuses(), "j")


@NO_DRIVER
def test_dlpack_launch_passes_the_launch_stream() -> None:
    ps = [FakeDLPack(shape=(4,), data=PTR + i * 4096) for i in range(3)]
    with pytest.raises(ferrocuda.CudaError):
        ferrocuda.kernels.add(*ps)
    assert [p.calls[0]["stream"] for p in ps] == [1, 1, 1]  # the legacy default stream
    assert [p.deleted for p in ps] == [1, 1, 1]
    ps = [FakeDLPack(shape=(4,), data=PTR + i * 4096) for i in range(3)]
    with pytest.raises(ferrocuda.CudaError):
        ferrocuda.kernels.add(*ps, stream=0x5000)
    assert [p.calls[0]["stream"] for p in ps] == [0x5000] * 3
    # A CAI producer's stream becomes the launch stream when no stream is given.
    p = FakeDLPack(shape=(4,))
    with pytest.raises(ferrocuda.CudaError):
        ferrocuda.kernels.add(_arr(ptr=PTR + 8192, stream=2), p, _arr(ptr=PTR + 16384, stream=2))
    assert p.calls[0]["stream"] == 2


def test_dlpack_readonly_output_refused() -> None:
    out = FakeDLPack(shape=(4,), versioned=True, flags=1, data=PTR + 8192)
    with pytest.raises(ValueError, match=r"argument `out`: .*read-only"):
        ferrocuda.kernels.add(_arr(), _arr(ptr=PTR + 4096), out)
    assert out.deleted == 1


# ---- the stubs -----------------------------------------------------------------------------------


def test_stubtest() -> None:
    pytest.importorskip("mypy")
    pkg_dir = Path(ferrocuda.__file__).resolve().parent.parent
    allow = pkg_dir / "stubtest-allowlist.txt"
    cmd = [sys.executable, "-m", "mypy.stubtest", "ferrocuda"]
    if allow.exists():
        cmd += ["--allowlist", str(allow)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=pkg_dir)
    assert out.returncode == 0, out.stdout + out.stderr


def test_kernels_stub_is_generated_from_the_manifest() -> None:
    # kernels.pyi is ferrocuda._stubs' rendering of the bundled manifest; regenerate it with
    # `python -m ferrocuda._stubs > python/ferrocuda/kernels.pyi` after changing the kernels.
    from ferrocuda import _stubs

    shipped = (Path(ferrocuda.__file__).parent / "kernels.pyi").read_text()
    assert shipped == _stubs.bundled_stub()
    # Every family and kernel has its entry, with its parameters' names in order.
    for name, fam in ferrocuda.kernels.families.items():
        assert f"\n{name}: _Family" in shipped, name
        for k in fam.kernels:
            assert f"\n{k.name}: _Kernel" in shipped or f"\n{k.name}: _Family" in shipped
    k = ferrocuda.kernels.saxpy_f32
    names = [p[0] for p in k.params]
    assert f"taking ({', '.join(names)})" in shipped


def test_kernels_stub_types_calls(tmp_path: Path) -> None:
    # A type checker sees each launcher's parameters: a wrong keyword or a missing argument is
    # an error, a right call is not.
    pytest.importorskip("mypy")
    good = "import ferrocuda.kernels as k\nk.add(1, 2, out=3)\nk.saxpy_f32(x=1, y=2, alpha=2.0)\n"
    bad = "import ferrocuda.kernels as k\nk.add(1, 2, c=3)\nk.saxpy_f32(1, 2)\n"
    pkg_dir = Path(ferrocuda.__file__).resolve().parent.parent
    for text, ok in [(good, True), (bad, False)]:
        f = tmp_path / ("good.py" if ok else "bad.py")
        f.write_text(text)
        out = subprocess.run(
            [sys.executable, "-m", "mypy", "--no-incremental", str(f)],
            capture_output=True,
            text=True,
            cwd=pkg_dir,
        )
        assert (out.returncode == 0) == ok, out.stdout + out.stderr
        if not ok:
            assert 'Unexpected keyword argument "c"' in out.stdout, out.stdout
            assert "Missing positional argument" in out.stdout, out.stdout


# ---- cubins ---------------------------------------------------------------------------------


def test_bundled_module_reports_its_cubins() -> None:
    # The build assembles the PTX for sm_80 and sm_90 (ptxas is part of the toolchain the
    # tests install; FERROCUDA_CUBIN_ARCHS=sm_90 at build time keeps only that one): the
    # module carries them, and says so.
    m = ferrocuda.bundled()
    assert "sm_90" in m.cubins and set(m.cubins) <= {"sm_80", "sm_90"}
    assert json.loads(m.manifest)["cubins"] == {
        arch: f"ferrocuda_kernels.{arch}.cubin" for arch in m.cubins
    }
    assert "sm_90 cubin" in repr(m)
    for arch in m.cubins:
        image = ferrocuda._ferrocuda._bundled_cubin(arch)
        assert image is not None and image[:4] == b"\x7fELF", arch
    assert ferrocuda._ferrocuda._bundled_cubin("sm_75") is None


def test_load_finds_the_cubins_the_manifest_names(tmp_path: Path) -> None:
    m = ferrocuda.bundled()
    man = json.loads(m.manifest)
    (tmp_path / "mine.ptx").write_text(ferrocuda._ferrocuda._bundled_ptx())
    write_bundled_parts(tmp_path, man)
    man["ptx"] = "mine.ptx"
    man["cubins"] = {"sm_90": "mine.sm_90.cubin", "sm_80": "mine.sm_80.cubin"}
    sm90 = ferrocuda._ferrocuda._bundled_cubin("sm_90")
    assert sm90 is not None
    (tmp_path / "mine.sm_90.cubin").write_bytes(sm90)
    # A cubin file that is not there (or not a cubin) is left out: the PTX serves sm_8x.
    (tmp_path / "mine.json").write_text(json.dumps(man))
    mine = ferrocuda.load(str(tmp_path / "mine.json"))
    assert mine.cubins == ["sm_90"]
    (tmp_path / "other.sm_80.cubin").write_text("not a cubin")
    man["cubins"]["sm_80"] = "other.sm_80.cubin"
    (tmp_path / "other.json").write_text(json.dumps(man))
    assert ferrocuda.load(str(tmp_path / "other.json")).cubins == ["sm_90"]
