"""A named corpus of malformed and hostile array interfaces, with the exact exception each gets.

Every entry is a :class:`Case`: an id, a description, a factory building the object passed
as an argument (from ``base``, the address of a region of at least :data:`REGION` bytes: a
made-up address without a GPU, a real ``cudaMalloc`` allocation on one), the exception type it
must raise and a substring its message must contain. ``python/tests/test_hostile_corpus.py``
runs every entry through ``ferrocuda.validate_interface(obj, name="arg")`` and through a kernel
launch, on any machine (argument errors come before "no CUDA driver") and, on a GPU, with real
allocations that are poisoned and checked afterwards: a refused launch writes nothing.

What the entries pin down (read off ``host/src/interop/cai/`` and ``python/src/read/cai.rs``, and
checked against the extension):

* every rule violation of the interface itself is a ``ValueError`` naming the key — also a
  *wrong type* of a key's value (``shape="4"``, ``version=3.0``, ``typestr=b"<f4"``) and
  ``bool`` where an int is expected: ``python/src/read/cai.rs`` reports those as value errors
  of the key, as the existing ``test_interface.py`` does. Integers out of range (``2**64``,
  ``2**200``, ``-2**200``) in an interface are ``ValueError`` too ("does not fit", "out of
  range", "not an address"): ``OverflowError`` is only raised for *scalar kernel arguments*
  out of their parameter's range (``README.md``, "What a launcher accepts");
* ``TypeError``: the interface is not a dict, the object is not an array, an unknown,
  malformed or big-endian ``typestr``, a wrong element type or rank at launch;
* ``NotImplementedError``: ``mask`` (and NumPy masked arrays passed as host arrays),
  structured ``descr``, a CAI ``offset``;
* an exception raised by the producer's own code (a property, ``__index__``, a dict key's
  ``__eq__``) propagates unchanged (``producer=True``), with a PEP 678 note naming the
  argument (``note=True``; checked on Python >= 3.11).

Entries with ``bug=...`` are known ferrocuda bugs: they state the intended behaviour and the
test marks them ``xfail(strict=True)``, so fixing the bug turns them into failures that ask
for the marker to be removed.
"""

from __future__ import annotations

import collections
import dataclasses
import decimal
import fractions
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import ferrocuda
from conftest import PTR, CAIProducer, SyclProducer

CAI = "__cuda_array_interface__"
SYCL = "__sycl_usm_array_interface__"
HOST = "__array_interface__"

#: Bytes of memory every factory may describe from ``base`` (a real allocation on a GPU).
REGION = 1 << 20
#: Offsets inside the region of the well-formed inputs ``a`` and ``b`` used by launches.
OFF_A = 256 << 10
OFF_B = 512 << 10
#: The made-up base address used without a GPU.
FAKE_BASE = PTR

_DROP = object()


def iface(base: int, **kw: Any) -> dict[str, Any]:
    """A valid CAI v3 float32 (4,) dict at ``base``; ``key=_DROP`` removes a key."""
    d: dict[str, Any] = {
        "shape": (4,),
        "typestr": "<f4",
        "data": (base, False),
        "version": 3,
        "strides": None,
        "descr": [("", "<f4")],
        "stream": None,
    }
    return _override(d, kw)


def _override(d: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    """`d` with the keys of `kw` set, or removed where the value is ``_DROP``."""
    for k, v in kw.items():
        if v is _DROP:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def obj(base: int, **kw: Any) -> CAIProducer:
    """A :class:`CAIProducer` around :func:`iface`."""
    return CAIProducer(iface(base, **kw))


def sycl_iface(base: int, **kw: Any) -> dict[str, Any]:
    """A valid SYCL USM v1 float32 (4,) dict (dpctl's spelling ``|f4``)."""
    d: dict[str, Any] = {
        "shape": (4,),
        "typestr": "|f4",
        "data": (base, False),
        "version": 1,
        "strides": None,
        "offset": 0,
        "syclobj": object(),
    }
    return _override(d, kw)


def sobj(base: int, **kw: Any) -> SyclProducer:
    return SyclProducer(sycl_iface(base, **kw))


def f32(p: int, shape: tuple[int, ...] = (4,), **kw: Any) -> CAIProducer:
    """A well-formed float32 argument at ``p``."""
    return obj(p, shape=shape, **kw)


# ---- launches -------------------------------------------------------------------------------

Launcher = Callable[[Any, int], None]


def k() -> Any:
    return ferrocuda.kernels


def add_out(x: Any, base: int) -> None:
    """``add(a, b, out=x)`` with well-formed ``a`` and ``b``."""
    k().add(f32(base + OFF_A), f32(base + OFF_B), x)


def add_f32_out(x: Any, base: int) -> None:
    k().add_f32(f32(base + OFF_A), f32(base + OFF_B), x)


def add_b(x: Any, base: int) -> None:
    """``add(a, b=x, out)``: ``x`` as an input."""
    k().add(f32(base + OFF_A), x, f32(base))


def add_index(x: Any, base: int) -> None:
    k().add_index(x)


def sum_x(x: Any, base: int) -> None:
    """``sum(x, out)``: a family whose kernels take C-contiguous inputs only."""
    k().sum(x, f32(base + OFF_B, shape=(1,)))


def add_index_f32_2d(x: Any, base: int) -> None:
    k().add_index_f32_2d(x)


def initialize_array(x: Any, base: int) -> None:
    k().initialize_array(x)


def fill_value(x: Any, base: int) -> None:
    """``fill_slow(out, value=x, iters=1)``."""
    k().fill_slow(f32(base), x, 1)


def fill_iters(x: Any, base: int) -> None:
    k().fill_slow(f32(base), 1.0, x)


def saxpy_alpha(x: Any, base: int) -> None:
    k().saxpy(x, f32(base + OFF_A), f32(base))


def saxpy_f64_alpha(x: Any, base: int) -> None:
    k().saxpy_f64(
        x, f32(base + OFF_A, typestr="<f8", descr=None), f32(base, typestr="<f8", descr=None)
    )


def saxpy_f32_alpha(x: Any, base: int) -> None:
    k().saxpy_f32(x, f32(base + OFF_A), f32(base))


#: Launchers and the parameter name their ``x`` is passed as.
ARG_OF: dict[Launcher, str] = {
    add_out: "out",
    add_f32_out: "out",
    add_b: "b",
    add_index: "x",
    sum_x: "x",
    add_index_f32_2d: "x",
    initialize_array: "x",
    fill_value: "value",
    fill_iters: "iters",
    saxpy_alpha: "alpha",
    saxpy_f64_alpha: "alpha",
    saxpy_f32_alpha: "alpha",
}


@dataclass(frozen=True)
class Case:
    """One hostile input and what ferrocuda must do with it.

    ``validate``: ``"refuse"`` — ``validate_interface`` raises ``exc``/``match`` and so does the
    launch (``launch``, default ``add(a, b, out=x)``); ``"accept"`` — the interface is well
    formed and only the launch refuses it; ``"skip"`` — not an array at all (a scalar
    argument), only the launch is checked.
    """

    id: str
    description: str
    factory: Callable[[int], Any]
    exc: type[BaseException]
    match: str
    key: str | None = None
    protocol: str = CAI
    validate: str = "refuse"
    launch: Launcher | None = add_out
    #: The launch's message starts with "argument `<param>`: " (False for family-level
    #: "no variant" errors, which name the family instead).
    launch_named: bool = True
    #: The exception is the producer's own (or NumPy's), propagated unchanged.
    producer: bool = False
    #: A PEP 678 note names the argument (exceptions raised reading the interface attribute).
    note: bool = False
    #: The launch check needs a CUDA driver and real allocations.
    gpu: bool = False
    #: A known ferrocuda bug; the entry states the intended behaviour (the test is xfail).
    bug: str | None = None

    @property
    def launch_arg(self) -> str | None:
        return ARG_OF.get(self.launch) if self.launch is not None else None


def C(
    id: str,
    description: str,
    factory: Callable[[int], Any],
    exc: type[BaseException],
    match: str,
    key: str | None = None,
    **kw: Any,
) -> Case:
    return Case(id, description, factory, exc, match, key, **kw)


# One letter each, as the columns of the case table below (O: OverflowError).
V, T, N, O = ValueError, TypeError, NotImplementedError, OverflowError  # noqa: E741


# ---- hostile producer objects -----------------------------------------------------------------


class Boom(Exception):
    """A producer's own exception type."""


class BoomBase(BaseException):
    """A producer exception outside ``Exception`` (like ``KeyboardInterrupt``)."""


def raising_property(exc_type: type[BaseException], message: str) -> Any:
    """A producer whose interface property raises a fresh ``exc_type(message)``."""

    class RaisingProperty:
        @property
        def __cuda_array_interface__(self) -> Any:
            raise exc_type(message)

    return RaisingProperty()


class GetattrRaises:
    """Every attribute lookup raises (``__getattr__`` runs for the missing interface)."""

    def __getattr__(self, name: str) -> Any:
        raise Boom(f"__getattr__({name!r})")


class SyclRaises:
    """No CAI (its property raises AttributeError: absent), a SYCL property that raises."""

    @property
    def __cuda_array_interface__(self) -> Any:
        raise AttributeError("absent")

    @property
    def __sycl_usm_array_interface__(self) -> Any:
        raise Boom("sycl export failed")


class LyingDict(dict):  # type: ignore[type-arg]
    """A dict subclass whose Python-level accessors lie: ferrocuda must read the real items."""

    def __getitem__(self, key: Any) -> Any:
        raise AssertionError(f"__getitem__({key!r}) was called")

    def get(self, key: Any, default: Any = None) -> Any:
        raise AssertionError("get() was called")

    def __contains__(self, key: Any) -> bool:
        raise AssertionError("__contains__ was called")

    def keys(self) -> Any:  # type: ignore[override]
        raise AssertionError("keys() was called")

    def __iter__(self) -> Any:
        raise AssertionError("__iter__ was called")

    def __len__(self) -> int:
        raise AssertionError("__len__ was called")


def lying_dict_without_shape(base: int) -> CAIProducer:
    """The real items lack ``shape``; ``__getitem__`` would have returned a good one."""
    d = LyingDict(iface(base, shape=_DROP))
    return CAIProducer(d)


def lying_dict_stream0(base: int) -> CAIProducer:
    return CAIProducer(LyingDict(iface(base, stream=0)))


class LyingList(list):  # type: ignore[type-arg]
    """Claims one item of 1; really holds 33."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: Any) -> Any:
        return 1

    def __iter__(self) -> Any:
        return iter([1])


class LyingTuple(tuple):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: Any) -> Any:
        return 4


class LyingStr(str):
    """Compares equal to everything; its real content is what counts."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class LyingInt(int):
    """``int`` subclass whose ``__index__``/``__int__`` lie: the stored value counts."""

    def __index__(self) -> int:
        return 4

    def __int__(self) -> int:
        return 4


class IndexRaises:
    def __index__(self) -> int:
        raise Boom("__index__ failed")


class IndexReturnsStr:
    def __index__(self) -> Any:
        return "4"


class IndexHuge:
    def __index__(self) -> int:
        return 2**200


class IndexNegative:
    def __index__(self) -> int:
        return -3


class ClearsListOnIndex:
    """``__index__`` empties the list it sits in, then answers 4."""

    def __init__(self, seq: list[Any]) -> None:
        self.seq = seq

    def __index__(self) -> int:
        self.seq.clear()
        return 4


def shape_list_mutated(base: int) -> CAIProducer:
    seq: list[Any] = [0, 4, 4]
    seq[0] = ClearsListOnIndex(seq)
    return obj(base, shape=seq)


class KeyEqRaises(str):
    """A key hashing like ``"shape"`` whose ``__eq__`` raises (dict lookups compare keys)."""

    def __hash__(self) -> int:
        return hash("shape")

    def __eq__(self, other: object) -> bool:
        raise Boom("key __eq__")


def hostile_key(base: int) -> CAIProducer:
    d = iface(base, shape=_DROP)
    d[KeyEqRaises("not-shape")] = (4,)  # type: ignore[index]
    return CAIProducer(d)


class ClassAttrNone:
    __cuda_array_interface__ = None


class DLPackOnly:
    """A DLPack-only producer (a CUDA device unless told otherwise) returning ``ret``."""

    def __init__(self, ret: Any, device: tuple[int, int] = (2, 0)) -> None:
        self.ret = ret
        self.device = device

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    def __dlpack__(self, **kw: Any) -> Any:
        return self.ret


class DLPackRaises(DLPackOnly):
    def __dlpack__(self, **kw: Any) -> Any:
        raise Boom("__dlpack__ failed")


def foreign_capsule() -> Any:
    """A capsule that is not a DLPack tensor (the name is wrong)."""
    import ctypes

    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(_CAPSULE_TARGET), b"not_dltensor", None)


_CAPSULE_TARGET = __import__("ctypes").create_string_buffer(64)


def readonly_numpy(base: int) -> np.ndarray:
    a = np.zeros(4, np.float32)
    a.flags.writeable = False
    return a


#: A host buffer whose address GPU cases disguise as device memory (kept alive here).
HOST_BUFFER = np.zeros(1024, np.float32)


def host_pointer(base: int) -> CAIProducer:
    return obj(HOST_BUFFER.ctypes.data)


# ---- the corpus ---------------------------------------------------------------------------

REQUIRED = ("shape", "typestr", "data", "version")

CORPUS: list[Case] = []
add = CORPUS.append

# required keys: missing, None
for key in REQUIRED:
    add(
        C(
            f"missing_{key}",
            f"required key {key!r} absent",
            lambda b, k=key: obj(b, **{k: _DROP}),
            V,
            "required key is missing",
            key,
        )
    )
    add(
        C(
            f"none_{key}",
            f"required key {key!r} is None",
            lambda b, k=key: obj(b, **{k: None}),
            V,
            "required key is None",
            key,
        )
    )

# version
for id_, val, exc, msg in [
    ("version_4", 4, V, "unsupported version 4"),
    ("version_neg1", -1, V, "unsupported version -1"),
    ("version_str", "3", V, "expected an int, got str"),
    ("version_bytes", b"3", V, "expected an int, got bytes"),
    ("version_float", 3.0, V, "expected an int, got float"),
    ("version_np_float64", np.float64(3.0), V, "expected an int, got float64"),
    ("version_decimal", decimal.Decimal(3), V, "expected an int, got Decimal"),
    ("version_fraction", fractions.Fraction(3), V, "expected an int, got Fraction"),
    ("version_complex", 3j, V, "expected an int, got complex"),
    ("version_list", [3], V, "expected an int, got list"),
    ("version_true", True, V, "expected an int, got bool"),
    ("version_false", False, V, "expected an int, got bool"),
    ("version_np_bool", np.True_, V, "expected an int, got bool"),
    ("version_2pow64", 2**64, V, "unsupported version 18446744073709551616"),
    ("version_2pow200", 2**200, V, "out of range"),
    ("version_neg_2pow200", -(2**200), V, "out of range"),
    ("version_index_huge", IndexHuge(), V, "out of range"),
]:
    add(C(id_, f"version = {val!r}", lambda b, v=val: obj(b, version=v), exc, msg, "version"))

# shape: wrong containers and item types
for id_, val, msg in [
    ("shape_str", "4", "expected a tuple of ints, got str"),
    ("shape_int", 4, "expected a tuple of ints, got int"),
    ("shape_bytes", b"\x04", "expected a tuple of ints, got bytes"),
    ("shape_dict", {0: 4}, "got dict"),
    ("shape_set", {4}, "got set"),
    ("shape_range", range(4), "got range"),
    ("shape_ndarray", np.array([4]), "got ndarray"),
    ("shape_nested_tuple", ((4,),), "got tuple at index 0"),
    ("shape_float_item", (2, 4.0), "got float at index 1"),
    ("shape_str_item", ("4",), "got str at index 0"),
    ("shape_none_item", (None,), "got NoneType at index 0"),
    ("shape_bool_item", (True,), "got bool at index 0"),
    ("shape_false_item", (4, False), "got bool at index 1"),
    ("shape_np_bool_item", (np.True_,), "got bool at index 0"),
    ("shape_negative", (-1,), "shape[0] = -1 is negative"),
    ("shape_np_negative", (np.int64(-2),), "shape[0] = -2 is negative"),
    ("shape_index_negative", (IndexNegative(),), "shape[0] = -3 is negative"),
    ("shape_lying_int", (LyingInt(-1),), "shape[0] = -1 is negative"),
    ("shape_2pow64", (2**64,), "does not fit usize"),
    ("shape_2pow200", (2**200,), "out of range"),
    ("shape_neg_2pow200", (-(2**200),), "out of range"),
    ("shape_2pow63", (2**63,), "extent overflows"),
    ("shape_u64_max", (np.uint64(2**64 - 1),), "extent overflows"),
    ("shape_33_axes", (1,) * 33, "33 axes; at most 32"),
    ("shape_64_axes_list", [1] * 64, "64 axes; at most 32"),
    ("shape_100000_axes", (1,) * 100_000, "100000 axes"),
    ("shape_lying_list", LyingList([1] * 33), "33 axes"),
    ("shape_lying_tuple", LyingTuple((-1,)), "shape[0] = -1 is negative"),
    ("shape_count_overflow", (2**40, 2**40), "overflows usize"),
    ("shape_count_overflow_with_zero", (0, 2**32, 2**32), "overflows usize"),
    ("shape_bytes_overflow", (2**62,), "extent overflows"),
    ("shape_32_axes_of_4", (4,) * 32, "overflows usize"),
]:
    add(C(id_, f"shape = {val!r:.60}", lambda b, v=val: obj(b, shape=v), V, msg, "shape"))

# strides
for id_, shape, val, msg in [
    ("strides_str", (4,), "4", "expected a tuple of ints, got str"),
    ("strides_int", (4,), 4, "expected a tuple of ints, got int"),
    ("strides_dict", (4,), {0: 4}, "got dict"),
    ("strides_float_item", (4,), (4.0,), "got float at index 0"),
    ("strides_bool_item", (4,), (True,), "got bool at index 0"),
    ("strides_none_item", (4,), (None,), "got NoneType at index 0"),
    ("strides_too_many", (4,), (4, 4), "2 strides for 1 axes"),
    ("strides_too_few", (2, 2), (4,), "1 strides for 2 axes"),
    ("strides_empty", (4,), (), "0 strides for 1 axes"),
    ("strides_2pow63", (4,), (2**63,), "does not fit isize"),
    ("strides_below_isize", (4,), (-(2**63) - 1,), "does not fit isize"),
    ("strides_2pow200", (4,), (2**200,), "out of range"),
    ("strides_times_shape_overflow", (3,), (2**62,), "extent overflows"),
    ("strides_two_axes_sum_overflow", (2, 2), (2**62, 2**62), "extent overflows"),
    ("strides_isize_min", (4,), (-(2**63),), "extent overflows"),
]:
    add(
        C(
            id_,
            f"shape {shape} with strides {val!r}",
            lambda b, s=shape, v=val: obj(b, shape=s, strides=v),
            V,
            msg,
            "strides",
        )
    )

add(
    C(
        "strides_negative_below_zero",
        "negative stride reaching below address 0",
        lambda b: obj(0x1000, shape=(1000,), typestr="<f8", descr=None, strides=(-8,)),
        V,
        "extent overflows",
        "data",
    )
)
add(
    C(
        "extent_beyond_2pow64",
        "pointer near 2**64: the end leaves the address space",
        lambda b: obj(2**64 - 8, shape=(2,), typestr="<f8", descr=None),
        V,
        "extent overflows",
        "data",
    )
)
add(
    C(
        "extent_u1_at_u64_max",
        "one byte at pointer 2**64-1: its end is 2**64",
        lambda b: obj(2**64 - 1, shape=(1,), typestr="|u1", descr=None),
        V,
        "extent overflows",
        "data",
    )
)

# typestr
for id_, val, exc, msg in [
    ("typestr_int", 4, V, "expected a str, got int"),
    ("typestr_bytes", b"<f4", V, "expected a str, got bytes"),
    ("typestr_list", ["<f4"], V, "expected a str, got list"),
    ("typestr_np_dtype", np.dtype("f4"), V, "expected a str, got"),
    ("typestr_big_endian_f4", ">f4", T, "big-endian"),
    ("typestr_big_endian_f8", ">f8", T, "big-endian"),
    ("typestr_pipe_f4", "|f4", V, "not applicable"),
    ("typestr_pipe_c16", "|c16", V, "not applicable"),
    ("typestr_long_double", "<f16", T, 'unsupported element type "<f16"'),
    ("typestr_void", "<V8", T, 'unsupported element type "<V8"'),
    ("typestr_void_pipe", "|V8", T, 'unsupported element type "|V8"'),
    ("typestr_object", "|O8", T, 'unsupported element type "|O8"'),
    ("typestr_datetime", "<M8", T, "unsupported element type"),
    ("typestr_timedelta", "<m8", T, "unsupported element type"),
    ("typestr_bytes_kind", "|S5", T, "unsupported element type"),
    ("typestr_unicode", "<U4", T, "unsupported element type"),
    ("typestr_odd_size", "<i3", T, 'unsupported element type "<i3"'),
    ("typestr_upper_kind", "<B1", T, "unsupported element type"),
    ("typestr_huge_size", "<f99999999999999999999", T, "unsupported element type"),
    ("typestr_empty", "", T, 'malformed typestr ""'),
    ("typestr_word", "float32", T, "malformed typestr"),
    ("typestr_no_size", "<f", T, "malformed typestr"),
    ("typestr_trailing_space", "<f4 ", T, "malformed typestr"),
    ("typestr_nul", "<f4\x00", T, "malformed typestr"),
    ("typestr_unknown_order", "?f4", T, "malformed typestr"),
    ("typestr_non_ascii", "<f\u00e94", T, "malformed typestr"),
    ("typestr_non_ascii_order", "\u2264f4", T, "malformed typestr"),
    ("typestr_long", "x" * 100, T, "malformed typestr"),
    ("typestr_lying_str", LyingStr("<V8"), T, 'unsupported element type "<V8"'),
]:
    add(
        C(
            id_,
            f"typestr = {val!r:.40}",
            lambda b, v=val: obj(b, typestr=v, descr=None),
            exc,
            msg,
            "typestr",
        )
    )

add(
    C(
        "typestr_surrogate",
        "typestr with a lone surrogate (not encodable as UTF-8)",
        lambda b: obj(b, typestr="<f\ud800", descr=None),
        T,
        "malformed typestr",
        "typestr",
    )
)

# descr
for id_, val, exc, msg in [
    ("descr_str", "<f4", V, "got str"),
    ("descr_dict", {"": "<f4"}, V, "got dict"),
    ("descr_empty", [], V, "empty list"),
    ("descr_item_str", ["<f4"], V, "got str at index 0"),
    ("descr_item_none", [None], V, "got NoneType at index 0"),
    ("descr_entry_1_item", [("",)], V, "an entry of 1 items"),
    ("descr_entry_4_items", [("", "<f4", (2,), 0)], V, "an entry of 4 items"),
    ("descr_non_str_name", [(1, "<f4")], V, "non-str field name"),
    ("descr_named_field", [("x", "<f4")], N, 'named field "x"'),
    ("descr_two_fields", [("", "<f4"), ("", "<f4")], N, "2 fields"),
    ("descr_structured_pair", [("x", "<f4"), ("y", "<i4")], N, "2 fields"),
    ("descr_subarray_3_tuple", [("", "<f4", (2,))], N, "sub-array"),
    ("descr_mismatched", [("", "<i4")], N, "differs from typestr"),
    ("descr_garbage_type", [("", "zzz")], N, "differs from typestr"),
    ("descr_nested", [("", [("a", "<f4")])], N, "structured element types"),
    ("descr_bytes_type", [("", b"<f4")], N, "structured element types"),
]:
    add(C(id_, f"descr = {val!r}", lambda b, v=val: obj(b, descr=v), exc, msg, "descr"))

add(
    C(
        "descr_surrogate_name",
        "descr field name with a lone surrogate",
        lambda b: obj(b, descr=[("\udcff", "<f4")]),
        N,
        "structured",
        "descr",
    )
)

# data
for id_, val, msg in [
    ("data_int", 0x1000, "got int"),
    ("data_dict", {"ptr": 0x1000}, "got dict"),
    ("data_set", {0x1000}, "got set"),
    ("data_empty", (), "a sequence of 0 items"),
    ("data_1_item", (0x1000,), "a sequence of 1 items"),
    ("data_3_items", (0x1000, False, 0), "a sequence of 3 items"),
    ("data_bool_pointer", (True, False), "bool as the pointer"),
    ("data_str_pointer", ("0x1000", False), "str as the pointer"),
    ("data_float_pointer", (4096.0, False), "float as the pointer"),
    ("data_none_pointer", (None, False), "NoneType as the pointer"),
    ("data_int_readonly", (0x1000, 0), "int as the readonly flag"),
    ("data_one_readonly", (0x1000, 1), "int as the readonly flag"),
    ("data_none_readonly", (0x1000, None), "NoneType as the readonly flag"),
    ("data_str_readonly", (0x1000, "False"), "str as the readonly flag"),
    ("data_np_bool_readonly", (0x1000, np.False_), "as the readonly flag"),
    ("data_negative_pointer", (-4096, False), "is not an address"),
    ("data_pointer_2pow64", (2**64, False), "is not an address"),
    ("data_pointer_2pow200", (2**200, False), "is not an address"),
    ("data_pointer_neg_2pow200", (-(2**200), False), "is not an address"),
]:
    add(C(id_, f"data = {val!r:.50}", lambda b, v=val: obj(b, data=v), V, msg, "data"))

add(
    C(
        "data_null_nonempty",
        "pointer 0 for a non-empty array",
        lambda b: obj(0),
        V,
        "null pointer",
        "data",
    )
)
add(
    C(
        "data_misaligned_f4",
        "float32 pointer 2 bytes off",
        lambda b: obj(b + 2),
        V,
        "not aligned",
        "data",
    )
)
add(
    C(
        "data_misaligned_f8",
        "float64 pointer 4 bytes off",
        lambda b: obj(b + 4, typestr="<f8", descr=None),
        V,
        "not aligned",
        "data",
    )
)
add(
    C(
        "data_misaligned_c16",
        "complex128 pointer at 8 mod 16",
        lambda b: obj(b + 8, typestr="<c16", descr=None),
        V,
        "not aligned",
        "data",
    )
)

# a NumPy masked array passed as a host array: converting it would drop the mask
add(
    C(
        "numpy_masked_array",
        "a NumPy masked array (host): its mask would be silently dropped",
        lambda b: np.ma.masked_array(np.zeros(4, np.float32), mask=[False, True, False, False]),
        N,
        "masked arrays are not supported",
    )
)
# mask
for id_, val in [
    ("mask_object", object()),
    ("mask_array", CAIProducer(iface(PTR, typestr="|b1", descr=None))),
    ("mask_false", False),
    ("mask_zero", 0),
]:
    add(
        C(
            id_,
            f"mask present ({type(val).__name__})",
            lambda b, v=val: obj(b, mask=v),
            N,
            "masked arrays are not supported",
            "mask",
        )
    )

# stream
for id_, val, msg in [
    ("stream_0", 0, "stream 0 is disallowed"),
    ("stream_neg1", -1, "stream -1 is not a stream handle"),
    ("stream_2pow64", 2**64, "is not a stream handle"),
    ("stream_neg_2pow64", -(2**64), "is not a stream handle"),
    ("stream_2pow200", 2**200, "out of range"),
    ("stream_true", True, "expected an int, got bool"),
    ("stream_false", False, "expected an int, got bool"),
    ("stream_float", 1.0, "expected an int, got float"),
    ("stream_np_float64", np.float64(1.0), "expected an int, got float64"),
    ("stream_str", "1", "expected an int, got str"),
    ("stream_list", [1], "expected an int, got list"),
]:
    add(C(id_, f"stream = {val!r}", lambda b, v=val: obj(b, stream=v), V, msg, "stream"))

# offset under the CAI (no such key)
add(C("cai_offset_4", "CAI offset 4", lambda b: obj(b, offset=4), N, "no 'offset' key", "offset"))
add(
    C(
        "cai_offset_neg",
        "CAI offset -1",
        lambda b: obj(b, offset=-1),
        N,
        "no 'offset' key",
        "offset",
    )
)
add(
    C(
        "cai_offset_true",
        "CAI offset True",
        lambda b: obj(b, offset=True),
        V,
        "expected an int, got bool",
        "offset",
    )
)
add(
    C(
        "cai_offset_str",
        "CAI offset '4'",
        lambda b: obj(b, offset="4"),
        V,
        "expected an int, got str",
        "offset",
    )
)

# the interface object itself
for id_, val, tname in [
    ("iface_list", [("shape", (4,))], "list"),
    ("iface_none", None, "NoneType"),
    ("iface_str", "iface", "str"),
    ("iface_tuple", (1, 2), "tuple"),
    ("iface_int", 42, "int"),
    ("iface_userdict", collections.UserDict(iface(PTR)), "UserDict"),
    ("iface_mappingproxy", types.MappingProxyType(iface(PTR)), "mappingproxy"),
]:
    add(
        C(
            id_,
            f"__cuda_array_interface__ is a {tname}",
            lambda b, v=val: CAIProducer(v),
            T,
            f"must be a dict, got {tname}",
        )
    )
add(
    C(
        "iface_class_attr_none",
        "class attribute __cuda_array_interface__ = None",
        lambda b: ClassAttrNone(),
        T,
        "must be a dict, got NoneType",
    )
)
add(
    C(
        "iface_class_itself",
        "the producer class, not an instance: the attribute is a property object",
        lambda b: CAIProducer,
        T,
        "must be a dict, got property",
    )
)
add(
    C(
        "lying_dict_missing_shape",
        "dict subclass: real items lack shape; __getitem__ etc. must not be called",
        lying_dict_without_shape,
        V,
        "required key is missing",
        "shape",
    )
)
add(
    C(
        "lying_dict_stream_0",
        "dict subclass with lying accessors and stream 0",
        lying_dict_stream0,
        V,
        "stream 0 is disallowed",
        "stream",
    )
)

# exceptions raised by the producer
for id_, etype, text in [
    ("property_raises_runtime", RuntimeError, "cannot export: tensor requires grad"),
    ("property_raises_type", TypeError, "producer TypeError"),
    ("property_raises_value", ValueError, "producer ValueError"),
    ("property_raises_overflow", OverflowError, "producer OverflowError"),
    ("property_raises_key", KeyError, "producer KeyError"),
    ("property_raises_custom", Boom, "producer Boom"),
    ("property_raises_base_exception", BoomBase, "producer BoomBase"),
]:
    add(
        C(
            id_,
            f"__cuda_array_interface__ property raises {etype.__name__}",
            lambda b, e=etype, t=text: raising_property(e, t),
            etype,
            text,
            producer=True,
            note=True,
        )
    )
add(
    C(
        "property_raises_attribute",
        "property raising AttributeError: the interface is absent",
        lambda b: raising_property(AttributeError, "no"),
        T,
        "not an array",
    )
)
add(
    C(
        "getattr_raises",
        "__getattr__ raising for every name",
        lambda b: GetattrRaises(),
        Boom,
        "__getattr__('__cuda_array_interface__')",
        producer=True,
        note=True,
    )
)
add(
    C(
        "sycl_property_raises",
        "no CAI; the SYCL USM property raises",
        lambda b: SyclRaises(),
        Boom,
        "sycl export failed",
        producer=True,
        note=True,
    )
)
add(
    C(
        "index_raises",
        "a shape item whose __index__ raises",
        lambda b: obj(b, shape=(IndexRaises(),)),
        Boom,
        "__index__ failed",
        producer=True,
        note=True,
    )
)
add(
    C(
        "index_returns_str",
        "a shape item whose __index__ returns a str (CPython's TypeError propagates)",
        lambda b: obj(b, shape=(IndexReturnsStr(),)),
        T,
        "__index__ returned non-int",
        producer=True,
        note=True,
    )
)
add(
    C(
        "pointer_index_raises",
        "a data pointer whose __index__ raises",
        lambda b: obj(b, data=(IndexRaises(), False)),
        Boom,
        "__index__ failed",
        producer=True,
        note=True,
    )
)
add(
    C(
        "dict_key_eq_raises",
        "a dict key hashing like 'shape' whose __eq__ raises",
        hostile_key,
        Boom,
        "key __eq__",
        producer=True,
        note=True,
    )
)
add(
    C(
        "shape_list_mutated_during_read",
        "a shape list emptied by one of its items' __index__",
        shape_list_mutated,
        V,
        "shape",
        "shape",
    )
)

# objects with no interface at all
for id_, val, tname in [
    ("no_interface_int", 42, "int"),
    ("no_interface_none", None, "NoneType"),
    ("no_interface_str", "x", "str"),
    ("no_interface_object", object(), "object"),
    ("no_interface_list", [1.0, 2.0], "list"),
    ("no_interface_plain_dict", iface(PTR), "dict"),
    ("no_interface_bytes", b"\x00" * 16, "bytes"),
]:
    add(
        C(id_, f"a {tname} is not an array", lambda b, v=val: v, T, f"not an array: {tname} has no")
    )

# DLPack-only producers returning garbage
add(
    C(
        "dlpack_returns_int",
        "__dlpack__() returns an int",
        lambda b: DLPackOnly(5),
        T,
        "returned int, not a capsule",
    )
)
add(
    C(
        "dlpack_returns_none",
        "__dlpack__() returns None",
        lambda b: DLPackOnly(None),
        T,
        "returned NoneType, not a capsule",
    )
)
add(
    C(
        "dlpack_foreign_capsule",
        "__dlpack__() returns a capsule of another name",
        lambda b: DLPackOnly(foreign_capsule()),
        T,
        "not an unused 'dltensor'",
    )
)
add(
    C(
        "dlpack_raises",
        "__dlpack__() raises",
        lambda b: DLPackRaises(None),
        Boom,
        "__dlpack__ failed",
        producer=True,
        note=True,
    )
)
add(
    C(
        "dlpack_cpu_returns_int",
        "a CPU DLPack producer returning an int (NumPy's from_dlpack reads it)",
        lambda b: DLPackOnly(5, device=(1, 0)),
        V,
        "PyCapsule",
        producer=True,
    )
)

# host (NumPy) arrays ferrocuda cannot take
add(
    C(
        "host_object_array",
        "NumPy object array",
        lambda b: np.array([object()]),
        T,
        "malformed typestr",
        "typestr",
        protocol=HOST,
    )
)
add(
    C(
        "host_big_endian",
        "NumPy big-endian float32",
        lambda b: np.arange(3, dtype=">f4"),
        T,
        "big-endian",
        "typestr",
        protocol=HOST,
    )
)
add(
    C(
        "host_structured",
        "NumPy structured array",
        lambda b: np.zeros(3, dtype=[("x", "<f4"), ("y", "<i4")]),
        T,
        '"|V8"',
        "typestr",
        protocol=HOST,
    )
)
add(
    C(
        "host_long_double",
        "NumPy long double",
        lambda b: np.zeros(2, dtype=np.longdouble),
        T,
        "unsupported element type",
        "typestr",
        protocol=HOST,
    )
)
add(
    C(
        "host_datetime",
        "NumPy datetime64",
        lambda b: np.zeros(2, dtype="M8[s]"),
        T,
        "malformed typestr",
        "typestr",
        protocol=HOST,
    )
)

# SYCL USM
for id_, kw, exc, msg, key in [
    ("sycl_version_3", dict(version=3), V, "the supported version is 1", "version"),
    ("sycl_version_true", dict(version=True), V, "expected an int, got bool", "version"),
    ("sycl_version_missing", dict(version=_DROP), V, "required key is missing", "version"),
    ("sycl_data_none", dict(data=None), V, "required key is None", "data"),
    ("sycl_offset_negative", dict(offset=-1), V, "offset -1 is negative", "offset"),
    ("sycl_offset_str", dict(offset="1"), V, "expected an int, got str", "offset"),
    ("sycl_offset_true", dict(offset=True), V, "expected an int, got bool", "offset"),
    ("sycl_offset_2pow200", dict(offset=2**200), V, "out of range", "offset"),
    (
        "sycl_offset_overflows_address",
        dict(offset=2**62),
        V,
        "overflows a 64-bit address",
        "offset",
    ),
    ("sycl_null_data_with_offset", dict(data=(0, False), offset=4), V, "null pointer", "data"),
    (
        "sycl_element_stride_too_big",
        dict(strides=(2**62,)),
        V,
        "elements of 4 bytes does not fit isize",
        "strides",
    ),
    ("sycl_misaligned", dict(data=(PTR + 1, False)), V, "not aligned", "data"),
    ("sycl_big_endian", dict(typestr=">f8"), T, "big-endian", "typestr"),
    ("sycl_mask", dict(mask=object()), N, "masked arrays", "mask"),
]:
    add(
        C(id_, f"SYCL USM {kw!r:.60}", lambda b, kw=kw: sobj(b, **kw), exc, msg, key, protocol=SYCL)
    )
add(
    C(
        "sycl_not_a_dict",
        "__sycl_usm_array_interface__ is None",
        lambda b: SyclProducer(None),
        T,
        f"{SYCL} must be a dict, got NoneType",
    )
)

# ---- well-formed interfaces a launch must refuse (validate_interface accepts them) ----------

for c in [
    C(
        "readonly_out",
        "read-only output of add",
        lambda b: obj(b, data=(b, True)),
        V,
        "array is read-only, but kernel `add_f32` writes to `out`",
        "data",
        launch=add_out,
    ),
    C(
        "readonly_out_kernel",
        "read-only output of add_f32",
        lambda b: obj(b, data=(b, True)),
        V,
        "read-only",
        "data",
        launch=add_f32_out,
    ),
    C(
        "readonly_view_out",
        "read-only output of a view kernel",
        lambda b: obj(b, data=(b, True)),
        V,
        "writes to `x`",
        "data",
        launch=add_index,
    ),
    C(
        "readonly_out_initialize",
        "read-only int32 output",
        lambda b: obj(b, typestr="<i4", descr=None, data=(b, True)),
        V,
        "initialize_array",
        "data",
        launch=initialize_array,
    ),
    C(
        "readonly_out_sycl",
        "read-only SYCL USM output",
        lambda b: sobj(b, data=(b, True)),
        V,
        "read-only",
        "data",
        protocol=SYCL,
        launch=add_out,
    ),
    C(
        "readonly_out_numpy",
        "read-only NumPy output (host path)",
        readonly_numpy,
        V,
        "array is read-only",
        "data",
        protocol=HOST,
        launch=add_out,
    ),
    C(
        "zero_stride_out_strided_variant",
        "broadcast (zero-stride) output of add: its strided variant refuses it",
        lambda b: obj(b, strides=(0,)),
        V,
        "overlapping elements",
        launch=add_out,
    ),
    C(
        "zero_stride_out_kernel",
        "broadcast output given to the add_f32 kernel (its layout variant refuses it)",
        lambda b: obj(b, strides=(0,)),
        V,
        "overlapping elements",
        launch=add_f32_out,
    ),
    C(
        "zero_stride_out_view",
        "broadcast (zero-stride) output of a view kernel",
        lambda b: obj(b, strides=(0,)),
        V,
        "overlapping elements",
        launch=add_index,
    ),
    C(
        "zero_stride_out_view_2d",
        "2-D output broadcast along axis 0",
        lambda b: obj(b, shape=(2, 4), strides=(0, 4)),
        V,
        "overlapping elements",
        launch=add_index,
    ),
    C(
        "self_overlapping_out",
        "rows overlapping each other",
        lambda b: obj(b, shape=(3, 4), strides=(4, 4)),
        V,
        "overlapping elements",
        launch=add_index,
    ),
    C(
        "negative_stride_out_slice",
        "reversed output of a kernel without a strided variant",
        lambda b: obj(b + 12, typestr="<i4", descr=None, strides=(-4,)),
        V,
        "needs a C-contiguous array",
        launch=initialize_array,
    ),
    C(
        "strided_input_slice",
        "strided input of a family without a strided variant",
        lambda b: obj(b, strides=(8,)),
        V,
        "needs a C-contiguous array",
        launch=sum_x,
    ),
    C(
        "stride_not_multiple_strided_variant",
        "stride of 6 bytes for float32 (add's strided variant names it)",
        lambda b: obj(b + OFF_B, shape=(4,), strides=(6,)),
        V,
        "not a multiple of the item size",
        "strides",
        launch=add_b,
    ),
    C(
        "partial_overlap_strided_out",
        "reversed out over input a, shifted by one element",
        lambda b: obj(b + OFF_A + 16, strides=(-4,)),
        V,
        "overlaps argument `a`",
        launch=add_out,
    ),
    C(
        "stride_not_multiple",
        "stride of 6 bytes for float32 (view kernel)",
        lambda b: obj(b, shape=(3,), strides=(6,)),
        V,
        "not a multiple of the item size",
        "strides",
        launch=add_index,
    ),
    C(
        "stride_not_multiple_2d",
        "2-D stride of 10 bytes for float32",
        lambda b: obj(b, shape=(2, 2), strides=(10, 4)),
        V,
        "not a multiple of the item size",
        "strides",
        launch=add_index,
    ),
    C(
        "shape_mismatch_out",
        "out (5,) for inputs (4,)",
        lambda b: obj(b, shape=(5,)),
        V,
        "must have the same shape",
        launch=add_out,
    ),
    C(
        "shape_mismatch_input",
        "b (3,) for a (4,)",
        lambda b: obj(b + OFF_B, shape=(3,)),
        V,
        "must have the same shape",
        launch=add_b,
    ),
    C(
        "overlapping_out",
        "out overlaps input a shifted by one element",
        lambda b: obj(b + OFF_A + 4),
        V,
        "overlaps argument `a`",
        launch=add_out,
    ),
    C(
        "wrong_dtype_family",
        "float64 out for float32 inputs: no variant",
        lambda b: obj(b, typestr="<f8", descr=None),
        T,
        "kernel family `add` has no variant",
        launch=add_out,
        launch_named=False,
    ),
    C(
        "wrong_dtype_kernel",
        "float64 out for add_f32",
        lambda b: obj(b, typestr="<f8", descr=None),
        T,
        "expected a float32 array, got float64",
        launch=add_f32_out,
    ),
    C(
        "wrong_dtype_initialize",
        "float32 for initialize_array (int32)",
        lambda b: obj(b),
        T,
        "expected a int32 array, got float32",
        launch=initialize_array,
    ),
    C(
        "unsupported_dtype_family",
        "uint16 arrays: no variant of add",
        lambda b: obj(b, typestr="<u2", descr=None),
        T,
        "no variant",
        launch=add_out,
        launch_named=False,
    ),
    C(
        "wrong_rank_family",
        "5-D array for add_index (1-D to 4-D)",
        lambda b: obj(b, shape=(1, 1, 1, 1, 2)),
        T,
        "no variant",
        launch=add_index,
        launch_named=False,
    ),
    C(
        "wrong_rank_scalar",
        "0-D array for add_index",
        lambda b: obj(b, shape=()),
        T,
        "no variant",
        launch=add_index,
        launch_named=False,
    ),
    C(
        "wrong_rank_kernel",
        "1-D array for add_index_f32_2d",
        lambda b: obj(b),
        T,
        "expected a 2-D array, got 1-D",
        launch=add_index_f32_2d,
    ),
    C(
        "array_as_scalar",
        "an array for saxpy_f32's alpha",
        lambda b: obj(b + OFF_B),
        T,
        "expected a real number for the float32 parameter",
        launch=saxpy_f32_alpha,
    ),
]:
    CORPUS.append(dataclasses.replace(c, validate="accept"))

# GPU only: real allocations decide (base is a cudaMalloc of REGION bytes there)
for c in [
    C(
        "out_past_allocation_end",
        "out's last element lies past the allocation",
        lambda b: obj(b + REGION - 8),
        V,
        "outside the allocation",
        "shape",
        launch=add_out,
        gpu=True,
    ),
    C(
        "out_reversed_below_allocation",
        "negative stride from the allocation's start",
        lambda b: obj(b + 4, strides=(-4,)),
        V,
        "outside the allocation",
        "shape",
        launch=add_index,
        gpu=True,
    ),
    C(
        "out_strided_past_allocation",
        "stride jumping over the allocation's end",
        lambda b: obj(b, shape=(2,), strides=(REGION,)),
        V,
        "outside the allocation",
        "shape",
        launch=add_index,
        gpu=True,
    ),
    C(
        "out_host_pointer",
        "a NumPy host buffer's address as CAI data",
        host_pointer,
        V,
        "not CUDA device memory",
        "data",
        launch=add_out,
        gpu=True,
    ),
    C(
        "input_host_pointer",
        "a host address as input b",
        host_pointer,
        V,
        "not CUDA device memory",
        "data",
        launch=add_b,
        gpu=True,
    ),
]:
    CORPUS.append(dataclasses.replace(c, validate="accept"))

# ---- scalar arguments: OverflowError is for these -----------------------------------------

for c in [
    C(
        "scalar_iters_negative",
        "uint32 parameter given -1",
        lambda b: -1,
        O,
        "-1 is out of range for uint32",
        launch=fill_iters,
    ),
    C(
        "scalar_iters_2pow32",
        "uint32 parameter given 2**32",
        lambda b: 2**32,
        O,
        "out of range for uint32",
        launch=fill_iters,
    ),
    C(
        "scalar_iters_2pow200",
        "uint32 parameter given 2**200",
        lambda b: 2**200,
        O,
        "out of range for uint32",
        launch=fill_iters,
    ),
    C(
        "scalar_iters_np_uint64",
        "uint32 parameter given numpy.uint64(2**40)",
        lambda b: np.uint64(2**40),
        O,
        "out of range for uint32",
        launch=fill_iters,
    ),
    C(
        "scalar_iters_bool",
        "uint32 parameter given True",
        lambda b: True,
        T,
        "expected a uint32 scalar, got bool",
        launch=fill_iters,
    ),
    C(
        "scalar_iters_float",
        "uint32 parameter given 1.0",
        lambda b: 1.0,
        T,
        "expected an integer for the uint32 parameter, got float",
        launch=fill_iters,
    ),
    C(
        "scalar_value_bool",
        "float32 parameter given True",
        lambda b: True,
        T,
        "expected a float32 scalar, got bool",
        launch=fill_value,
    ),
    C(
        "scalar_value_1e39",
        "float32 parameter given 1e39",
        lambda b: 1e39,
        O,
        "out of range for float32",
        launch=fill_value,
    ),
    C(
        "scalar_value_np_1e39",
        "float32 parameter given numpy.float64(1e39)",
        lambda b: np.float64(1e39),
        O,
        "out of range for float32",
        launch=fill_value,
    ),
    C(
        "scalar_value_str",
        "float32 parameter given '1'",
        lambda b: "1",
        T,
        "expected a real number",
        launch=fill_value,
    ),
    C(
        "scalar_value_none",
        "float32 parameter given None",
        lambda b: None,
        T,
        "expected a real number",
        launch=fill_value,
    ),
    C(
        "scalar_value_complex",
        "float32 parameter given 1j",
        lambda b: 1j,
        T,
        "expected a real number",
        launch=fill_value,
    ),
    C(
        "scalar_alpha_bool_family",
        "saxpy family alpha True",
        lambda b: True,
        T,
        "got bool",
        launch=saxpy_alpha,
    ),
    C(
        "scalar_value_2pow128",
        "float32 parameter given the int 2**128 (beyond float32's range)",
        lambda b: 2**128,
        O,
        "out of range for float32",
        launch=fill_value,
    ),
    C(
        "scalar_value_neg_2pow200",
        "float32 parameter given the int -2**200",
        lambda b: -(2**200),
        O,
        "out of range for float32",
        launch=fill_value,
    ),
    C(
        "scalar_f64_2pow2000",
        "float64 parameter given the int 2**2000 (float(2**2000) overflows)",
        lambda b: 2**2000,
        O,
        "float64",
        launch=saxpy_f64_alpha,
    ),
]:
    CORPUS.append(dataclasses.replace(c, validate="skip"))


def by_id() -> dict[str, Case]:
    return {c.id: c for c in CORPUS}
