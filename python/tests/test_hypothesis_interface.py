"""Hypothesis: adversarial interface dicts and producer objects against ``validate_interface``.

Each example is an interface (a CUDA Array Interface or SYCL USM dict, mostly well formed, with
wrong types, huge and negative numbers, overflowing shape x stride products, bools for ints,
NumPy scalars, ``__index__`` objects, dict/tuple/list/str/int subclasses that lie) inside a
producer object (a plain property, a class attribute, a property that raises). An independent
Python model of the rules (``host/src/interop/cai/`` and ``python/src/read/cai.rs``) predicts the
outcome, and the test checks that

* an accepted interface is described exactly as the model computes it: dtype, shape, size =
  product of the shape, strides as given (bytes; SYCL: elements x itemsize) or C order,
  pointer (SYCL: plus ``offset`` elements), readonly, stream, contiguity and byte range — and
  only interfaces the model accepts are accepted;
* a refused one raises ``TypeError``, ``ValueError``, ``NotImplementedError`` or
  ``OverflowError`` whose message starts with "argument `arg`: " — never another exception,
  never a crash;
* an exception raised by the producer's own code (``Boom``) propagates unchanged.

Examples per test: ``FERROCUDA_HYPOTHESIS_EXAMPLES`` (default 1000). The example database is
Hypothesis' default ``.hypothesis/`` (git-ignored).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import ferrocuda  # noqa: E402
from ferrocuda import _config, validate_interface  # noqa: E402

EXAMPLES = _config.count("FERROCUDA_HYPOTHESIS_EXAMPLES", 1000)
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CAI = "__cuda_array_interface__"
SYCL = "__sycl_usm_array_interface__"
ALLOWED = (TypeError, ValueError, NotImplementedError, OverflowError)

I128_MAX = 2**127 - 1
I128_MIN = -(2**127)
U64_MAX = 2**64 - 1
ISIZE_MAX = 2**63 - 1
ISIZE_MIN = -(2**63)
MAX_NDIM = 32

ITEMSIZE = {
    ("b", 1): "bool",
    ("i", 1): "int8",
    ("i", 2): "int16",
    ("i", 4): "int32",
    ("i", 8): "int64",
    ("u", 1): "uint8",
    ("u", 2): "uint16",
    ("u", 4): "uint32",
    ("u", 8): "uint64",
    ("f", 2): "float16",
    ("f", 4): "float32",
    ("f", 8): "float64",
    ("c", 8): "complex64",
    ("c", 16): "complex128",
}


#: The typestr ``validate_interface`` reports for each dtype (NumPy's spelling).
CANONICAL = {
    name: (("|" if size == 1 else "<") + kind + str(size))
    for (kind, size), name in ITEMSIZE.items()
}


class Boom(Exception):
    """The producer's own exception."""


# ---- hostile value types ---------------------------------------------------------------------


class Index:
    """An ``__index__`` object (not an int)."""

    def __init__(self, v: int) -> None:
        self.v = v

    def __index__(self) -> int:
        return self.v

    def __repr__(self) -> str:
        return f"Index({self.v})"


class IndexBoom:
    def __index__(self) -> int:
        raise Boom("__index__")

    def __repr__(self) -> str:
        return "IndexBoom()"


class LyingInt(int):
    """Its stored value counts, not what ``__index__``/``__int__`` say."""

    def __index__(self) -> int:
        return 1

    def __int__(self) -> int:
        return 1


class LyingTuple(tuple):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 0

    def __getitem__(self, i: Any) -> Any:
        raise Boom("LyingTuple.__getitem__ must not be called")

    def __iter__(self) -> Any:
        raise Boom("LyingTuple.__iter__ must not be called")


class LyingList(list):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 0

    def __getitem__(self, i: Any) -> Any:
        raise Boom("LyingList.__getitem__ must not be called")


class LyingStr(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return "<f4"


class LyingDict(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: Any) -> Any:
        raise AssertionError(f"LyingDict.__getitem__({key!r}) was called")

    def get(self, key: Any, default: Any = None) -> Any:
        raise AssertionError("LyingDict.get was called")

    def __contains__(self, key: Any) -> bool:
        raise AssertionError("LyingDict.__contains__ was called")

    def keys(self) -> Any:  # type: ignore[override]
        raise AssertionError("LyingDict.keys was called")


class PlainProducer:
    def __init__(self, iface: Any, attr: str) -> None:
        self._iface = iface
        self._attr = attr

    def __getattr__(self, name: str) -> Any:
        if name == self._attr:
            return self._iface
        raise AttributeError(name)


class RaisingProducer:
    @property
    def __cuda_array_interface__(self) -> Any:
        raise Boom("property")


# ---- the model -------------------------------------------------------------------------------


class Refused(Exception):
    """The model refuses the interface."""


class Raises(Exception):
    """The producer's code raises while the interface is read."""


def _int(v: Any) -> int:
    """An int the way ``read_int`` reads it; refuses bools, floats and non-ints."""
    if isinstance(v, bool) or isinstance(v, np.bool_):
        raise Refused("bool")
    if isinstance(v, int):
        n = int.__index__(v)  # the stored value of an int subclass
    elif isinstance(v, float) or not hasattr(v, "__index__"):
        raise Refused("not an int")
    else:
        try:
            n = v.__index__()
        except Boom:
            raise Raises() from None
        if not isinstance(n, int):
            raise Raises()  # CPython's TypeError (producer's fault; propagated)
    if n >= I128_MAX or n <= I128_MIN:
        raise Refused("out of range")
    return n


def _raw_str(s: Any) -> str:
    return str.__str__(s)


def _seq(v: Any) -> list[Any]:
    if isinstance(v, (tuple, list)):
        # The C-level items (a subclass' Python-level accessors are not used).
        return list(tuple.__iter__(v)) if isinstance(v, tuple) else list(list.__iter__(v))
    raise Refused("not a sequence")


def _parse_typestr(s: str, sycl: bool) -> tuple[str, int]:
    b = s.encode("utf-8")
    if (
        len(b) < 3
        or b[0:1] not in (b"<", b">", b"=", b"|")
        or not (chr(b[1]).isascii() and chr(b[1]).isalpha())
    ):
        raise Refused("malformed")
    digits = b[2:]
    if not all(48 <= c <= 57 for c in digits):
        raise Refused("malformed")
    size = int(digits) if len(digits) <= 4 else 1 << 70
    kind = chr(b[1])
    if (kind, size) not in ITEMSIZE:
        raise Refused("unsupported")
    order = chr(b[0])
    if order == ">" and size > 1:
        raise Refused("big-endian")
    if order == "|" and size > 1 and not sycl:
        raise Refused("| on a wide type")
    return ITEMSIZE[(kind, size)], size


MISSING = object()


def model(d: dict[Any, Any], sycl: bool) -> dict[str, Any]:
    """The description ``validate_interface`` must return for the real items ``d``, or
    :class:`Refused` / :class:`Raises`."""
    g = lambda k: d.get(k, MISSING)  # noqa: E731

    # ---- reading (python/src/read/cai.rs), in its order ---------------------------------
    def opt_int(v: Any) -> Any:
        return v if v is MISSING or v is None else _int(v)

    version = opt_int(g("version"))
    mask = g("mask")
    typestr = g("typestr")
    if typestr is not MISSING and typestr is not None:
        if not isinstance(typestr, str):
            raise Refused("typestr type")
        typestr = _raw_str(typestr)
        if any(0xD800 <= ord(c) <= 0xDFFF for c in typestr):
            raise AssertionError("surrogates are not generated (known bug)")
    shape = g("shape")
    if shape is not MISSING and shape is not None:
        shape = [_int(x) for x in _seq(shape)]
    strides = g("strides")
    if strides is not MISSING and strides is not None:
        strides = [_int(x) for x in _seq(strides)]
    data = g("data")
    if data is not MISSING and data is not None:
        items = _seq(data)
        if len(items) != 2:
            raise Refused("data length")
        ptr = _int(items[0])
        if not isinstance(items[1], bool):
            raise Refused("readonly type")
        data = (ptr, items[1])
    descr = g("descr")
    if descr is not MISSING and descr is not None:
        fields = []
        for f in _seq(descr):
            fs = _seq(f)
            if len(fs) == 3:
                raise Refused("sub-array")
            if len(fs) != 2:
                raise Refused("entry length")
            if not isinstance(fs[0], str):
                raise Refused("name")
            if not isinstance(fs[1], str):
                raise Refused("structured")
            fields.append((_raw_str(fs[0]), _raw_str(fs[1])))
        descr = fields
    stream = MISSING if sycl else opt_int(g("stream"))
    offset = opt_int(g("offset"))

    # ---- validation (host/src/interop/cai/) --------------------------------------------------
    for v in (version, typestr, shape, data):
        if v is MISSING or v is None:
            raise Refused("required")
    if (sycl and version != 1) or (not sycl and version not in (0, 1, 2, 3)):
        raise Refused("version")
    if mask is not MISSING and mask is not None:
        raise Refused("mask")
    dtype, item = _parse_typestr(typestr, sycl)
    if descr is not MISSING and descr is not None:
        if not descr:
            raise Refused("descr empty")
        if len(descr) != 1 or descr[0][0] != "":
            raise Refused("structured")
        ts = descr[0][1]
        if ts != typestr:
            try:
                same = _parse_typestr(ts, sycl)[0] == dtype
            except Refused:
                same = False
            if not same:
                raise Refused("descr differs")
    if len(shape) > MAX_NDIM:
        raise Refused("rank")
    if any(n < 0 or n > U64_MAX for n in shape):
        raise Refused("extent")
    empty = 0 in shape
    if strides is not MISSING and strides is not None:
        if len(strides) != len(shape):
            raise Refused("strides length")
        if sycl:
            strides = [s * item for s in strides]
        if any(not ISIZE_MIN <= s <= ISIZE_MAX for s in strides):
            raise Refused("stride")
    else:
        strides = None
    ptr, readonly = data
    if not 0 <= ptr <= U64_MAX:
        raise Refused("pointer")
    if ptr == 0 and not empty:
        raise Refused("null")
    if sycl:
        off = 0 if offset is MISSING or offset is None else offset
        if off < 0:
            raise Refused("offset")
        ptr = ptr + off * item
        if ptr > U64_MAX:
            raise Refused("offset overflow")
    elif offset not in (MISSING, None, 0):
        raise Refused("cai offset")
    if stream is MISSING or stream is None:
        stream = None
    elif not 1 <= stream <= U64_MAX:
        raise Refused("stream")
    # build()
    nonzero = 1
    for n in shape:
        nonzero *= max(n, 1)
    if nonzero > U64_MAX:
        raise Refused("count")
    size = 0 if empty else nonzero
    if strides is None:
        acc = item
        c = [0] * len(shape)
        for i in reversed(range(len(shape))):
            if acc > ISIZE_MAX:
                raise Refused("C strides")
            c[i] = acc
            acc *= max(shape[i], 1)
        if acc > ISIZE_MAX:
            raise Refused("C strides")
        strides = c
    byte_range = None
    if size > 0:
        if ptr == 0:
            raise Refused("null")
        if ptr % item:
            raise Refused("aligned")
        lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True))
        hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True))
        if lo < ISIZE_MIN or hi > ISIZE_MAX - item:
            raise Refused("extent")
        start, end = ptr + lo, ptr + hi + item
        if start < 0 or end > U64_MAX:
            raise Refused("address space")
        byte_range = (start, end)
    if size == 0:
        contiguous = True
    else:
        contiguous, expect = True, item
        for n, s in reversed(list(zip(shape, strides, strict=True))):
            if n != 1:
                if s != expect:
                    contiguous = False
                    break
                expect *= n
    return {
        "protocol": SYCL if sycl else CAI,
        "version": version,
        "dtype": dtype,
        "typestr": CANONICAL[dtype],
        "itemsize": item,
        "shape": tuple(shape),
        "strides": tuple(strides),
        "size": size,
        "ptr": ptr,
        "readonly": readonly,
        "c_contiguous": contiguous,
        "stream": stream,
        "byte_range": byte_range,
    }


# ---- strategies ------------------------------------------------------------------------------

BOUNDARY_INTS = [
    0,
    1,
    -1,
    2,
    3,
    4,
    7,
    8,
    16,
    255,
    256,
    2**31 - 1,
    2**31,
    2**32,
    2**32 + 1,
    2**62,
    2**63 - 1,
    2**63,
    2**64 - 8,
    2**64 - 1,
    2**64,
    2**127 - 2,
    2**127 - 1,
    2**127,
    -(2**63),
    -(2**63) - 1,
    -(2**127),
    -(2**127) + 1,
    2**200,
    -(2**200),
]
TYPESTRS = [
    "<f4",
    "<f8",
    "<f2",
    "<i4",
    "<i8",
    "<i2",
    "|i1",
    "|u1",
    "<u2",
    "<u4",
    "<u8",
    "|b1",
    "<c8",
    "<c16",
    "=f4",
    "=i8",
    ">i1",
    ">u1",
    "<b1",
    "|f4",
    "|f8",
    ">f4",
    ">f8",
    "<f16",
    "|V8",
    "|O8",
    "<M8",
    "<U4",
    "<i3",
    "",
    "float32",
    "<f",
    "?f4",
    "<f4x",
    "<f\u00e94",
    "<f04",
    "x" * 40,
]
TYPESTR_SIZES = {"<f4": 4, "<f8": 8, "<i4": 4, "|u1": 1, "<c16": 16, "<f2": 2, "|b1": 1}

ints_plain = st.one_of(
    st.sampled_from(BOUNDARY_INTS),
    st.integers(-(2**70), 2**70),
    st.integers(-8, 64),
)

#: Ints, and the many things that are or pretend to be ints.
INT_LIKE = st.one_of(
    ints_plain,
    ints_plain,
    ints_plain,
    st.builds(Index, ints_plain),
    st.builds(LyingInt, ints_plain),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.integers(0, 2**64 - 1).map(np.uint64),
    st.booleans(),
    st.sampled_from([np.True_, np.False_]),
    st.floats(allow_nan=True),
    st.sampled_from([None, "3", b"3", 1j, [1], (1,), IndexBoom(), np.float64(2.0)]),
)


def seq_of(items: st.SearchStrategy[Any], max_size: int = 5) -> st.SearchStrategy[Any]:
    """Tuples (mostly), lists, and tuple/list subclasses whose Python accessors lie."""
    lists = st.lists(items, max_size=max_size)
    return st.one_of(
        lists.map(tuple),
        lists.map(tuple),
        lists,
        lists.map(LyingTuple),
        lists.map(LyingList),
    )


small_extent = st.integers(0, 6)
small_stride = st.integers(-64, 64)

SHAPES = st.one_of(
    seq_of(small_extent, 4),
    seq_of(small_extent, 4),
    seq_of(INT_LIKE, 4),
    st.lists(st.just(1), min_size=30, max_size=40).map(tuple),
    st.lists(st.sampled_from([2**16, 2**20, 2**32, 2**40]), min_size=1, max_size=5).map(tuple),
    st.sampled_from(["4", 4, None, {0: 4}, b"\x04", range(3), np.array([2, 2])]),
)

STRIDES = st.one_of(
    st.none(),
    st.none(),
    seq_of(small_stride.map(lambda s: s * 4), 4),
    seq_of(small_stride, 4),
    seq_of(INT_LIKE, 4),
    st.lists(
        st.sampled_from([2**30, 2**40, 2**62, -(2**62), 2**63 - 1, -(2**63)]),
        min_size=1,
        max_size=4,
    ).map(tuple),
    st.sampled_from(["4", 4, {0: 4}]),
)

_aligned = st.integers(1, 2**44).map(lambda p: p * 16)
POINTERS = st.one_of(_aligned, _aligned, INT_LIKE, st.integers(0, 2**64 - 1), st.just(2**64 - 16))

_readonly = st.one_of(
    st.booleans(), st.booleans(), st.sampled_from([0, 1, None, "False", np.True_])
)
_pair = st.tuples(POINTERS, _readonly)
DATA = st.one_of(
    _pair,
    _pair,
    _pair.map(list),
    st.tuples(POINTERS),
    st.tuples(POINTERS, _readonly, st.integers()),
    st.sampled_from([0x1000, None, "0x1000", {0x1000: False}]),
)

TYPESTR_VALUES = st.one_of(
    st.sampled_from(TYPESTRS),
    st.sampled_from(TYPESTRS),
    st.text(max_size=6),
    st.sampled_from(["<f4", "<V8"]).map(LyingStr),
    st.sampled_from([4, b"<f4", ["<f4"], None, np.dtype("f4")]),
)

_DESCR_OTHERS = st.sampled_from(
    [
        [],
        [("x", "<f4")],
        [("", "<i4")],
        [("", "=f4")],
        [("", "<f4", (2,))],
        [("",)],
        [(1, "<f4")],
        [("", [("a", "<f4")])],
        [("a", "<f4"), ("b", "<f4")],
        "<f4",
        [None],
        [("", b"<f4")],
    ]
)
MASKS = st.sampled_from([None, False, object()])
STREAMS = st.one_of(st.none(), INT_LIKE, st.integers(1, 2**64 - 1))
VERSIONS = {
    False: st.one_of(st.just(3), st.integers(0, 3), INT_LIKE),
    True: st.one_of(st.just(1), st.integers(0, 3), INT_LIKE),
}
OFFSETS = st.one_of(st.integers(0, 8), INT_LIKE)


def descrs(typestr: Any) -> st.SearchStrategy[Any]:
    same = [("", typestr)] if isinstance(typestr, str) else [("", "<f4")]
    return st.one_of(st.just(same), st.just(tuple(same)), _DESCR_OTHERS)


#: A hostile value for each key (the "one mutation" of a mostly valid interface).
MUTATIONS = {
    "version": INT_LIKE,
    "shape": SHAPES,
    "strides": STRIDES,
    "data": DATA,
    "typestr": TYPESTR_VALUES,
    "stream": INT_LIKE,
    "offset": INT_LIKE,
    "mask": MASKS,
}


@st.composite
def interfaces(draw: Any, sycl: bool = False, valid_bias: bool = False) -> dict[Any, Any]:
    """A dict of the protocol's keys, each present, absent, None, or hostile."""
    typestr = draw(st.sampled_from(list(TYPESTR_SIZES)) if valid_bias else TYPESTR_VALUES)
    d: dict[Any, Any] = {}

    def maybe(key: str, strat: st.SearchStrategy[Any]) -> None:
        choice = draw(st.integers(0, 19))
        if choice == 0:
            return  # absent
        if choice == 1:
            d[key] = None
            return
        d[key] = draw(strat)

    if valid_bias:
        item = TYPESTR_SIZES[typestr]
        ndim = draw(st.integers(0, 4))
        shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
        d["version"] = 1 if sycl else draw(st.integers(0, 3))
        d["typestr"] = typestr
        d["shape"] = shape
        if draw(st.booleans()):
            unit = 1 if sycl else item
            d["strides"] = tuple(
                draw(
                    st.lists(
                        st.integers(-6, 6).map(lambda s: s * unit), min_size=ndim, max_size=ndim
                    )
                )
            )
        d["data"] = (
            draw(st.integers(1, 2**40)) * 16 + draw(st.sampled_from([0, 0, 0, 1, 8])),
            draw(st.booleans()),
        )
        if draw(st.booleans()):
            d["descr"] = [("", typestr)]
        if sycl:
            if draw(st.booleans()):
                d["offset"] = draw(st.integers(0, 100))
        elif draw(st.booleans()):
            d["stream"] = draw(
                st.one_of(st.none(), st.integers(1, 2**64 - 1), st.sampled_from([0, 1, 2]))
            )
        # one hostile mutation, sometimes
        if draw(st.integers(0, 2)) == 0:
            key = draw(
                st.sampled_from(
                    [
                        "version",
                        "shape",
                        "strides",
                        "data",
                        "typestr",
                        "descr",
                        "stream",
                        "offset",
                        "mask",
                    ]
                )
            )
            d[key] = draw(descrs(typestr) if key == "descr" else MUTATIONS[key])
        return d

    maybe("version", VERSIONS[sycl])
    maybe("typestr", st.just(typestr))
    maybe("shape", SHAPES)
    maybe("strides", STRIDES)
    maybe("data", DATA)
    maybe("descr", descrs(typestr))
    if draw(st.integers(0, 9)) == 0:
        d["mask"] = draw(MASKS)
    if not sycl and draw(st.booleans()):
        d["stream"] = draw(STREAMS)
    if draw(st.integers(0, 3)) == 0 or sycl:
        maybe("offset", OFFSETS)
    return d


def wrap(draw: Any, d: dict[Any, Any], sycl: bool) -> tuple[Any, dict[Any, Any]]:
    """A producer around ``d`` (maybe as a dict subclass that lies)."""
    container = draw(st.sampled_from(["dict", "dict", "lying", "ordered"]))
    real = dict(d)
    if container == "lying":
        iface: Any = LyingDict(real)
    elif container == "ordered":
        import collections

        iface = collections.OrderedDict(real)
    else:
        iface = real
    attr = SYCL if sycl else CAI
    return PlainProducer(iface, attr), real


# ---- the oracle check ------------------------------------------------------------------------


def check(producer: Any, real: dict[Any, Any], sycl: bool) -> None:
    try:
        want: Any = model(real, sycl)
    except Refused:
        want = Refused
    except Raises:
        want = Raises
    try:
        got = validate_interface(producer, "arg")
    except Boom:
        event("outcome: the producer's exception")
        assert want is Raises, f"Boom propagated but the model predicted {want!r}"
        return
    except ALLOWED as e:
        if want is Raises and not str(e).startswith("argument `arg`: "):
            # ``__index__`` returning a non-int: CPython's TypeError, propagated unchanged.
            assert type(e) is TypeError and "__index__ returned non-int" in str(e), repr(e)
            return
        assert type(e) in ALLOWED, f"{type(e).__name__} (a subclass) raised: {e!r}"
        assert str(e).startswith("argument `arg`: "), repr(e)
        assert want is Refused, f"refused ({e}) but the model accepts: {want!r}"
        event(f"outcome: {type(e).__name__}")
        return
    # Anything else (AssertionError from a lying dict, IndexError, SystemError, ...) escapes
    # and fails the test with its traceback.
    assert want is not Refused, f"accepted {got!r} but the model refuses"
    assert want is not Raises, f"accepted {got!r} but the producer's __index__ raises"
    assert dict(got) == want, f"\n got {dict(got)!r}\nwant {want!r}"
    event("outcome: accepted")
    # the invariants of the brief, spelled out
    assert got["size"] == int(np.prod(got["shape"], dtype=object))
    assert len(got["strides"]) == len(got["shape"])
    assert isinstance(got["readonly"], bool)


@SETTINGS
@given(st.data())
def test_cai_dicts(data: Any) -> None:
    d = data.draw(interfaces(sycl=False))
    producer, real = wrap(data.draw, d, sycl=False)
    check(producer, real, sycl=False)


@SETTINGS
@given(st.data())
def test_cai_mostly_valid(data: Any) -> None:
    d = data.draw(interfaces(sycl=False, valid_bias=True))
    producer, real = wrap(data.draw, d, sycl=False)
    check(producer, real, sycl=False)


@SETTINGS
@given(st.data())
def test_sycl_dicts(data: Any) -> None:
    valid = data.draw(st.booleans())
    d = data.draw(interfaces(sycl=True, valid_bias=valid))
    producer, real = wrap(data.draw, d, sycl=True)
    check(producer, real, sycl=True)


@SETTINGS
@given(st.data())
def test_producer_objects(data: Any) -> None:
    """Objects around interfaces: class attributes, raising properties, non-dicts, no
    interface at all."""
    kind = data.draw(
        st.sampled_from(["raises", "not_a_dict", "no_interface", "class_attr", "valid"])
    )
    if kind == "raises":
        with pytest.raises(Boom) as info:
            validate_interface(RaisingProducer(), "arg")
        assert any("argument `arg`" in n for n in getattr(info.value, "__notes__", []))
        return
    if kind == "not_a_dict":
        value = data.draw(
            st.one_of(
                st.none(),
                st.integers(),
                st.text(max_size=4),
                st.lists(st.integers(), max_size=3),
                st.tuples(st.integers()),
            )
        )
        with pytest.raises(
            TypeError, match=r"^argument `arg`: __cuda_array_interface__ must be a dict"
        ):
            validate_interface(PlainProducer(value, CAI), "arg")
        return
    if kind == "no_interface":
        value = data.draw(
            st.one_of(
                st.none(),
                st.integers(),
                st.floats(),
                st.text(max_size=4),
                st.binary(max_size=4),
                st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
            )
        )
        with pytest.raises(TypeError, match=r"^argument `arg`: not an array"):
            validate_interface(value, "arg")
        return
    d = data.draw(interfaces(sycl=False, valid_bias=True))
    if kind == "class_attr":
        producer: Any = type("ClassAttr", (), {CAI: d})()
    else:
        producer = PlainProducer(d, CAI)
    check(producer, dict(d), sycl=False)


def test_model_agrees_on_known_examples() -> None:
    """The model itself, on a few interfaces with known outcomes."""
    ok = model({"version": 3, "typestr": "<f4", "shape": (2, 3), "data": (4096, True)}, False)
    assert ok["strides"] == (12, 4) and ok["size"] == 6 and ok["readonly"] is True
    assert ok["byte_range"] == (4096, 4096 + 24)
    for bad in [
        {"version": 3, "typestr": "<f4", "shape": (2,), "data": (4098, False)},
        {"version": True, "typestr": "<f4", "shape": (2,), "data": (4096, False)},
        {"version": 3, "typestr": "<f4", "shape": (2**62,), "data": (4096, False)},
        {"version": 3, "typestr": "<f4", "shape": (2,), "data": (4096, False), "stream": 0},
    ]:
        with pytest.raises(Refused):
            model(bad, False)
    s = model(
        {
            "version": 1,
            "typestr": "|f8",
            "shape": (3,),
            "strides": (2,),
            "data": (4096, False),
            "offset": 1,
        },
        True,
    )
    assert s["strides"] == (16,) and s["ptr"] == 4096 + 8
    assert (
        ferrocuda.validate_interface(
            PlainProducer(
                {"version": 3, "typestr": "<f4", "shape": (2, 3), "data": (4096, True)}, CAI
            ),
            "arg",
        )
        == ok
    )
