"""Every CUDA Array Interface validation rule, through pure-Python producer objects.

No GPU is needed: ``ferrocuda.validate_interface`` runs exactly the reading and validation a
launch runs, and kernel launches fail their manifest checks before touching the driver.
Each case checks the exception type and that the message names the argument and the key.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ferrocuda
from conftest import PTR, CAIProducer, SyclProducer, cai
from conftest import cai_array as _arr
from ferrocuda import validate_interface


def _expect(
    obj: Any,
    exc: type[BaseException],
    key: str | None,
    *fragments: str,
    name: str = "arr",
    protocol: str = "__cuda_array_interface__",
) -> str:
    with pytest.raises(exc) as info:
        validate_interface(obj, name)
    msg = str(info.value)
    assert msg.startswith(f"argument `{name}`: "), msg
    if key is not None:
        assert f"{protocol}['{key}']: " in msg, msg
    for f in fragments:
        assert f in msg, (f, msg)
    return msg


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    d = dict(d)
    del d[key]
    return d


# ---- accepted interfaces ----------------------------------------------------------------


def test_valid_v3_description() -> None:
    got = validate_interface(CAIProducer(cai(shape=(2, 3), stream=1)), "a")
    assert got["protocol"] == "__cuda_array_interface__"
    assert got["dtype"] == "float32"
    assert got["typestr"] == "<f4"
    assert got["shape"] == (2, 3)
    assert got["strides"] == (12, 4)
    assert got["size"] == 6
    assert got["ptr"] == PTR
    assert got["readonly"] is False
    assert got["c_contiguous"] is True
    assert got["stream"] == 1
    assert got["byte_range"] == (PTR, PTR + 24)
    assert got["version"] == 3


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_accepted(version: int) -> None:
    d = cai(version=version)
    if version < 3:
        del d["stream"]
    if version == 0:
        del d["descr"]
    got = validate_interface(CAIProducer(d))
    assert got["version"] == version
    assert got["stream"] is None


@pytest.mark.parametrize(
    "typestr,dtype",
    [
        ("|b1", "bool"),
        ("|i1", "int8"),
        ("<i2", "int16"),
        ("<i4", "int32"),
        ("<i8", "int64"),
        ("|u1", "uint8"),
        ("<u2", "uint16"),
        ("<u4", "uint32"),
        ("<u8", "uint64"),
        ("<f2", "float16"),
        ("<f4", "float32"),
        ("<f8", "float64"),
        ("=f8", "float64"),
        ("<c8", "complex64"),
        ("<c16", "complex128"),
        (">i1", "int8"),
        # bfloat16, as ml_dtypes, PyTorch and JAX export it.
        ("<V2", "bfloat16"),
        ("=V2", "bfloat16"),
    ],
)
def test_typestrs(typestr: str, dtype: str) -> None:
    assert validate_interface(CAIProducer(cai(typestr=typestr)))["dtype"] == dtype


def test_numpy_void_is_not_bfloat16() -> None:
    with pytest.raises(TypeError, match=r"opaque element type \"\|V2\" \(NumPy's void\)"):
        validate_interface(CAIProducer(cai(typestr="|V2")))


def test_optional_keys_absent_or_none() -> None:
    d = {"shape": (4,), "typestr": "<f4", "data": (PTR, True), "version": 3}
    got = validate_interface(CAIProducer(d))
    assert got["readonly"] is True and got["stream"] is None
    d.update(strides=None, descr=None, mask=None, stream=None)
    assert validate_interface(CAIProducer(d))["c_contiguous"]


def test_lists_and_numpy_integers_tolerated() -> None:
    d = cai(shape=[np.int64(2), 3], strides=[np.int32(12), 4])
    d["data"] = [np.uint64(PTR), False]
    got = validate_interface(CAIProducer(d))
    assert got["shape"] == (2, 3) and got["strides"] == (12, 4)


def test_dict_subclass_and_extra_keys() -> None:
    class Iface(dict):  # type: ignore[type-arg]
        pass

    d = Iface(cai())
    d["something_new"] = object()
    assert validate_interface(CAIProducer(d))["shape"] == (4,)


def test_strides_negative_zero_and_views() -> None:
    # a reversed float64 axis: data points at the last element, the lowest address is PTR
    got = validate_interface(
        CAIProducer(cai(shape=(4,), typestr="<f8", ptr=PTR + 24, strides=(-8,)))
    )
    assert got["strides"] == (-8,)
    assert got["byte_range"] == (PTR, PTR + 32)
    assert not got["c_contiguous"]
    # a transposed (3, 2) view of a (2, 3) float32 array
    got = validate_interface(CAIProducer(cai(shape=(3, 2), strides=(4, 12))))
    assert not got["c_contiguous"]
    # broadcast axis
    assert validate_interface(CAIProducer(cai(shape=(5, 4), strides=(0, 4))))["byte_range"] == (
        PTR,
        PTR + 16,
    )


def test_zero_size_arrays_take_null_pointers_and_any_strides() -> None:
    got = validate_interface(CAIProducer(cai(shape=(0, 3), ptr=0, strides=(7, -5))))
    assert got["size"] == 0
    assert got["byte_range"] is None


def test_scalar_array() -> None:
    got = validate_interface(CAIProducer(cai(shape=())))
    assert got["size"] == 1 and got["shape"] == ()


@pytest.mark.parametrize("stream", [1, 2, 0x7F12_3456_7890])
def test_stream_values(stream: int) -> None:
    assert validate_interface(CAIProducer(cai(stream=stream)))["stream"] == stream


def test_sycl_usm_interface() -> None:
    d = {
        "shape": (3, 2),
        "typestr": "|f8",  # dpctl writes '|' for every type
        "data": (PTR, False),
        "version": 1,
        "strides": (1, 3),  # elements, not bytes
        "offset": 2,  # elements
        "syclobj": object(),
    }
    got = validate_interface(SyclProducer(d), "s")
    assert got["protocol"] == "__sycl_usm_array_interface__"
    assert got["strides"] == (8, 24)
    assert got["ptr"] == PTR + 16
    assert got["stream"] is None


def test_cai_preferred_over_other_protocols() -> None:
    class Both(CAIProducer):
        @property
        def __sycl_usm_array_interface__(self) -> Any:
            raise AssertionError("not read")

        def __dlpack__(self, **kw: Any) -> Any:
            raise AssertionError("not called")

    assert validate_interface(Both(cai()))["protocol"] == "__cuda_array_interface__"


# ---- refused interfaces: (exception, key, message fragments) ----------------------------

BASE = cai()

CASES = [
    # required keys
    ("shape missing", _without(BASE, "shape"), ValueError, "shape", ["required key is missing"]),
    (
        "typestr missing",
        _without(BASE, "typestr"),
        ValueError,
        "typestr",
        ["required key is missing"],
    ),
    ("data missing", _without(BASE, "data"), ValueError, "data", ["required key is missing"]),
    (
        "version missing",
        _without(BASE, "version"),
        ValueError,
        "version",
        ["required key is missing"],
    ),
    ("version None", cai(version=None), ValueError, "version", ["required key is None"]),
    ("shape None", cai(shape=None), ValueError, "shape", ["required key is None"]),
    ("data None", cai(data=None), ValueError, "data", ["required key is None"]),
    ("typestr None", cai(typestr=None), ValueError, "typestr", ["required key is None"]),
    # version
    ("version 4", cai(version=4), ValueError, "version", ["unsupported version 4"]),
    ("version -1", cai(version=-1), ValueError, "version", ["unsupported version -1"]),
    ("version True", cai(version=True), ValueError, "version", ["expected an int, got bool"]),
    ("version str", cai(version="3"), ValueError, "version", ["expected an int, got str"]),
    ("version float", cai(version=3.0), ValueError, "version", ["expected an int, got float"]),
    # shape
    ("shape str", cai(shape="4"), ValueError, "shape", ["expected a tuple of ints, got str"]),
    ("shape int", cai(shape=4), ValueError, "shape", ["expected a tuple of ints, got int"]),
    ("shape dict", cai(shape={4: 4}), ValueError, "shape", ["got dict"]),
    ("shape bool item", cai(shape=(True,)), ValueError, "shape", ["got bool at index 0"]),
    ("shape float item", cai(shape=(2, 4.0)), ValueError, "shape", ["got float at index 1"]),
    ("shape negative", cai(shape=(-1,)), ValueError, "shape", ["shape[0] = -1 is negative"]),
    ("shape huge", cai(shape=(2**70,)), ValueError, "shape", ["does not fit usize"]),
    (
        "shape beyond i128",
        cai(shape=(2**200,)),
        ValueError,
        "shape",
        ["shape[0] = 16069380442589902755", "out of range"],
    ),
    ("shape 33 axes", cai(shape=(1,) * 33), ValueError, "shape", ["33 axes", "at most 32"]),
    ("element count overflow", cai(shape=(2**40, 2**40)), ValueError, "shape", ["overflow"]),
    ("byte size overflow", cai(shape=(2**62,)), ValueError, None, ["overflow"]),
    # strides
    ("strides str", cai(strides="4"), ValueError, "strides", ["expected a tuple of ints, got str"]),
    ("strides bool item", cai(strides=(True,)), ValueError, "strides", ["got bool at index 0"]),
    ("strides wrong length", cai(strides=(4, 4)), ValueError, "strides", ["2 strides for 1 axes"]),
    ("strides huge", cai(strides=(2**70,)), ValueError, "strides", ["does not fit isize"]),
    (
        "shape x stride overflows",
        cai(shape=(3,), strides=(2**62,)),
        ValueError,
        None,
        ["overflow"],
    ),
    (
        "extent beyond 2**64",
        cai(shape=(2,), typestr="<f8", ptr=2**64 - 8),
        ValueError,
        None,
        ["overflow"],
    ),
    # data
    (
        "data int",
        cai(data=PTR),
        ValueError,
        "data",
        ["expected a (pointer: int, readonly: bool) tuple, got int"],
    ),
    ("data 1 item", cai(data=(PTR,)), ValueError, "data", ["sequence of 1 items"]),
    ("data 3 items", cai(data=(PTR, False, 0)), ValueError, "data", ["sequence of 3 items"]),
    ("data bool pointer", cai(data=(True, False)), ValueError, "data", ["bool as the pointer"]),
    ("data str pointer", cai(data=("0x10", False)), ValueError, "data", ["str as the pointer"]),
    ("data int readonly", cai(data=(PTR, 0)), ValueError, "data", ["int as the readonly flag"]),
    ("data negative pointer", cai(ptr=-4096), ValueError, "data", ["not an address"]),
    ("data pointer beyond u64", cai(ptr=2**64), ValueError, "data", ["not an address"]),
    ("null pointer, non-empty", cai(ptr=0), ValueError, "data", ["null pointer"]),
    ("misaligned pointer", cai(ptr=PTR + 2), ValueError, "data", ["not aligned"]),
    # typestr
    ("typestr int", cai(typestr=4), ValueError, "typestr", ["expected a str, got int"]),
    ("typestr bytes", cai(typestr=b"<f4"), ValueError, "typestr", ["expected a str, got bytes"]),
    (
        "typestr long double",
        cai(typestr="<f16"),
        TypeError,
        "typestr",
        ["unsupported element type"],
    ),
    ("typestr object", cai(typestr="|O8"), TypeError, "typestr", ["unsupported element type"]),
    ("typestr datetime", cai(typestr="<M8"), TypeError, "typestr", ["unsupported element type"]),
    ("typestr unicode", cai(typestr="<U4"), TypeError, "typestr", ["unsupported element type"]),
    ("typestr big-endian", cai(typestr=">f4"), TypeError, "typestr", ["big-endian"]),
    ("typestr '|' on wide type", cai(typestr="|f4"), ValueError, "typestr", ["not applicable"]),
    ("typestr garbage", cai(typestr="float32"), TypeError, "typestr", ["malformed typestr"]),
    ("typestr empty", cai(typestr=""), TypeError, "typestr", ["malformed typestr"]),
    ("typestr non-ascii", cai(typestr="<f\u00e94"), TypeError, "typestr", ["malformed typestr"]),
    # descr
    ("descr str", cai(descr="<f4"), ValueError, "descr", ["got str"]),
    ("descr empty", cai(descr=[]), ValueError, "descr", ["empty list"]),
    ("descr item not a tuple", cai(descr=["<f4"]), ValueError, "descr", ["str at index 0"]),
    ("descr named field", cai(descr=[("x", "<f4")]), NotImplementedError, "descr", ["structured"]),
    (
        "descr two fields",
        cai(descr=[("", "<f4"), ("", "<f4")]),
        NotImplementedError,
        "descr",
        ["2 fields"],
    ),
    (
        "descr sub-array",
        cai(descr=[("", "<f4", (2,))]),
        NotImplementedError,
        "descr",
        ["sub-array"],
    ),
    (
        "descr differs",
        cai(descr=[("", "<i4")]),
        NotImplementedError,
        "descr",
        ["differs from typestr"],
    ),
    (
        "descr nested",
        cai(descr=[("", [("a", "<f4")])]),
        NotImplementedError,
        "descr",
        ["structured"],
    ),
    ("descr non-str name", cai(descr=[(1, "<f4")]), ValueError, "descr", ["non-str field name"]),
    # mask
    (
        "mask present",
        cai(mask=CAIProducer(cai(typestr="|b1"))),
        NotImplementedError,
        "mask",
        ["masked arrays"],
    ),
    # stream
    ("stream 0", cai(stream=0), ValueError, "stream", ["stream 0 is disallowed"]),
    ("stream True", cai(stream=True), ValueError, "stream", ["expected an int, got bool"]),
    ("stream False", cai(stream=False), ValueError, "stream", ["expected an int, got bool"]),
    ("stream negative", cai(stream=-5), ValueError, "stream", ["not a stream handle"]),
    ("stream beyond u64", cai(stream=2**64), ValueError, "stream", ["not a stream handle"]),
    ("stream str", cai(stream="1"), ValueError, "stream", ["expected an int, got str"]),
    # offset: no such key in the CAI
    ("cai offset", cai(offset=4), NotImplementedError, "offset", ["no 'offset' key"]),
]


@pytest.mark.parametrize(
    "iface,exc,key,fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_refused(
    iface: dict[str, Any], exc: type[BaseException], key: str | None, fragments: Any
) -> None:
    _expect(CAIProducer(iface), exc, key, *fragments)


def test_case_table_is_broad() -> None:
    assert len(CASES) >= 60


def test_sycl_refusals_name_their_protocol() -> None:
    d = {"shape": (2,), "typestr": "|f4", "data": (PTR, False), "version": 1, "offset": -1}
    _expect(
        SyclProducer(d), ValueError, "offset", "negative", protocol="__sycl_usm_array_interface__"
    )
    d = {"shape": (2,), "typestr": "|f4", "data": (PTR, False), "version": 3}
    _expect(
        SyclProducer(d),
        ValueError,
        "version",
        "supported version is 1",
        protocol="__sycl_usm_array_interface__",
    )
    d = {"shape": (2,), "typestr": "|f4", "data": (PTR, False), "version": True}
    _expect(SyclProducer(d), ValueError, "version", "bool", protocol="__sycl_usm_array_interface__")


# ---- the interface object itself ----------------------------------------------------------


@pytest.mark.parametrize("bad", [[("shape", (4,))], None, "iface", 42, (1, 2)])
def test_interface_not_a_dict(bad: Any) -> None:
    msg = _expect(CAIProducer(bad), TypeError, None, "must be a dict")
    assert "__cuda_array_interface__" in msg


@pytest.mark.parametrize("obj", [42, "x", object(), [1.0, 2.0], {"shape": (4,)}])
def test_not_an_array(obj: Any) -> None:
    _expect(obj, TypeError, None, "not an array")


def test_property_that_raises_propagates() -> None:
    class Broken:
        @property
        def __cuda_array_interface__(self) -> Any:
            raise RuntimeError("cannot export: tensor requires grad")

    with pytest.raises(RuntimeError, match="requires grad") as info:
        validate_interface(Broken(), "t")
    notes = getattr(info.value, "__notes__", [])
    if notes:  # PEP 678 notes exist on Python >= 3.11
        assert any("argument `t`" in n for n in notes)


def test_property_raising_attribute_error_is_absent() -> None:
    class Hidden:
        @property
        def __cuda_array_interface__(self) -> Any:
            raise AttributeError("no")

    _expect(Hidden(), TypeError, None, "not an array")


def test_int_subclass_index_that_raises() -> None:
    class Evil:
        def __index__(self) -> int:
            raise ZeroDivisionError("boom")

    with pytest.raises(ZeroDivisionError):
        validate_interface(CAIProducer(cai(shape=(Evil(),))))


def test_ferrocuda_arrays_are_read_directly() -> None:
    fa = ferrocuda.from_cuda_array_interface(cai(shape=(2, 2)), owner="me", sync=False)
    got = validate_interface(fa)
    assert got["protocol"] == "ferrocuda" and got["shape"] == (2, 2)
    assert fa.owner == "me"


# ---- the same rules at launch -------------------------------------------------------------


def test_launch_names_argument_and_key() -> None:
    a, b = _arr(ptr=PTR), _arr(ptr=PTR + 4096)
    bad = CAIProducer(cai(ptr=PTR + 8192, stream=0))
    with pytest.raises(ValueError) as info:
        ferrocuda.kernels.add(a, b, bad)
    assert str(info.value).startswith("argument `out`: __cuda_array_interface__['stream']: ")


def test_launch_refuses_readonly_output() -> None:
    a, b = _arr(ptr=PTR), _arr(ptr=PTR + 4096)
    out = _arr(ptr=PTR + 8192, readonly=True)
    with pytest.raises(ValueError) as info:
        ferrocuda.kernels.add(a, b, out)
    msg = str(info.value)
    assert msg.startswith("argument `out`: ") and "['data']" in msg and "read-only" in msg
    # read-only inputs are fine: the launch gets as far as the (missing) driver
    a_ro = _arr(ptr=PTR, readonly=True)
    with pytest.raises((ferrocuda.CudaError, ValueError)) as info2:
        ferrocuda.kernels.add(a_ro, b, _arr(ptr=PTR + 8192))
    if not ferrocuda.driver_available():
        assert isinstance(info2.value, ferrocuda.CudaError)


def test_launch_refuses_mask() -> None:
    a = CAIProducer(cai(mask=object()))
    with pytest.raises(
        NotImplementedError, match=r"argument `a`: __cuda_array_interface__\['mask'\]"
    ):
        ferrocuda.kernels.add(a, _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192))


def test_launch_refuses_non_contiguous_for_slices() -> None:
    strided = _arr(shape=(4,), strides=(8,))
    # `sum` has kernels on slices only.
    with pytest.raises(ValueError, match=r"argument `x`: .*needs a C-contiguous array"):
        ferrocuda.kernels.sum(strided, _arr(shape=(1,), ptr=PTR + 8192))
    with pytest.raises(ValueError, match=r"argument `x`: .*needs a C-contiguous array"):
        ferrocuda.kernels.sum_f32(strided, _arr(shape=(1,), ptr=PTR + 8192))
    # `add` has strided variants: the checks pass, and only the driver is missing here.
    if not ferrocuda.driver_available():
        with pytest.raises(ferrocuda.CudaError):
            ferrocuda.kernels.add(_arr(), strided, _arr(ptr=PTR + 8192))
        with pytest.raises(ferrocuda.CudaError):
            ferrocuda.kernels.add_f32(_arr(), strided, _arr(ptr=PTR + 8192))


def test_launch_refuses_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="must have the same shape"):
        ferrocuda.kernels.add(
            _arr(shape=(4,)), _arr(shape=(5,), ptr=PTR + 4096), _arr(ptr=PTR + 8192)
        )


def test_launch_refuses_wrong_dtype_for_a_kernel() -> None:
    with pytest.raises(TypeError, match=r"argument `a`: expected a float32 array, got float64"):
        ferrocuda.kernels.add_f32(_arr(typestr="<f8"), _arr(ptr=PTR + 4096), _arr(ptr=PTR + 8192))


def test_family_without_matching_variant() -> None:
    with pytest.raises(TypeError) as info:
        ferrocuda.kernels.add(
            _arr(typestr="<u2"),
            _arr(typestr="<u2", ptr=PTR + 4096),
            _arr(typestr="<u2", ptr=PTR + 8192),
        )
    msg = str(info.value)
    assert "family `add` has no variant" in msg and "uint16 1-D array" in msg and "add_f32(" in msg


def test_family_dispatches_on_rank() -> None:
    # add_index has 1-D to 4-D variants; a 5-D array matches none
    with pytest.raises(TypeError, match="no variant"):
        ferrocuda.kernels.add_index(_arr(shape=(1, 1, 1, 1, 2)))


def test_launch_refuses_overlapping_output() -> None:
    a = _arr(shape=(4,))
    out = _arr(shape=(4,), ptr=PTR + 4)  # overlaps `a` shifted by one element
    with pytest.raises(ValueError, match="overlaps argument"):
        ferrocuda.kernels.add(a, _arr(ptr=PTR + 4096), out)


def test_launch_refuses_self_overlapping_output() -> None:
    x = _arr(shape=(3, 4), strides=(0, 4))
    with pytest.raises(ValueError, match="overlapping elements"):
        ferrocuda.kernels.add_index(x)
