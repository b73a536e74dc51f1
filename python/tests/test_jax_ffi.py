"""The XLA FFI handlers of ``ferrocuda.jax`` without a GPU: the C structs' layouts (against the
header compiled by a C compiler when jaxlib's header is present, and against an independent
ctypes declaration always), the handlers driven through hand-made call frames with a stand-in
XLA API table (metadata query, struct-size and argument checks, errors as XLA errors), and
the output shapes derived from the bundled manifest."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ferrocuda
from ferrocuda import _ferrocuda as ext
from ferrocuda._manifest import KernelInfo, RuleError, check_rules, derive_shapes

c_size_t, c_void_p, c_int, c_int64 = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64


# ---- the C API, declared independently with ctypes (from xla/ffi/api/c_api.h) -----------


class ExtBase(ctypes.Structure):
    pass


ExtBase._fields_ = [("struct_size", c_size_t), ("type", c_int), ("next", ctypes.POINTER(ExtBase))]


class ApiVersion(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("extension_start", c_void_p),
        ("major_version", c_int),
        ("minor_version", c_int),
    ]


class ErrorCreateArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("extension_start", c_void_p),
        ("message", ctypes.c_char_p),
        ("errc", c_int),
    ]


class Buffer(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("extension_start", c_void_p),
        ("dtype", c_int),
        ("data", c_void_p),
        ("rank", c_int64),
        ("dims", ctypes.POINTER(c_int64)),
    ]


class Args(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("extension_start", c_void_p),
        ("size", c_int64),
        ("types", ctypes.POINTER(c_int)),
        ("args", ctypes.POINTER(c_void_p)),
    ]


class Rets(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("extension_start", c_void_p),
        ("size", c_int64),
        ("types", ctypes.POINTER(c_int)),
        ("rets", ctypes.POINTER(c_void_p)),
    ]


class ByteSpan(ctypes.Structure):
    _fields_ = [("ptr", c_void_p), ("len", c_size_t)]


class Scalar(ctypes.Structure):
    _fields_ = [("dtype", c_int), ("value", c_void_p)]


class Attrs(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("extension_start", c_void_p),
        ("size", c_int64),
        ("types", ctypes.POINTER(c_int)),
        ("names", ctypes.POINTER(ctypes.POINTER(ByteSpan))),
        ("attrs", ctypes.POINTER(c_void_p)),
    ]


class CallFrame(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("extension_start", ctypes.POINTER(ExtBase)),
        ("api", c_void_p),
        ("ctx", c_void_p),
        ("stage", c_int),
        ("args", Args),
        ("rets", Rets),
        ("attrs", Attrs),
        ("future", c_void_p),
    ]


class StreamGetArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("extension_start", c_void_p),
        ("ctx", c_void_p),
        ("stream", c_void_p),
    ]


class Metadata(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("api_version", ApiVersion), ("traits", ctypes.c_uint32)]


class MetadataExtension(ctypes.Structure):
    _fields_ = [("extension_base", ExtBase), ("metadata", ctypes.POINTER(Metadata))]


ErrorCreate = ctypes.CFUNCTYPE(c_void_p, ctypes.POINTER(ErrorCreateArgs))
StreamGet = ctypes.CFUNCTYPE(c_void_p, ctypes.POINTER(StreamGetArgs))


class Api(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("extension_start", c_void_p),
        ("api_version", ApiVersion),
        ("internal_api", c_void_p),
        ("XLA_FFI_Error_Create", ErrorCreate),
        ("error_get_details", c_void_p),
        ("error_destroy", c_void_p),
        ("handler_register", c_void_p),
        ("XLA_FFI_Stream_Get", StreamGet),
    ]


def size_to(t: Any, last: str) -> int:
    """The header's XLA_FFI_STRUCT_SIZE(t, last)."""
    f = getattr(t, last)
    return int(f.offset + f.size)


CTYPES = {
    "XLA_FFI_Extension_Base": (ExtBase, "next"),
    "XLA_FFI_Api_Version": (ApiVersion, "minor_version"),
    "XLA_FFI_Error_Create_Args": (ErrorCreateArgs, "errc"),
    "XLA_FFI_Buffer": (Buffer, "dims"),
    "XLA_FFI_Args": (Args, "args"),
    "XLA_FFI_Rets": (Rets, "rets"),
    "XLA_FFI_Attrs": (Attrs, "attrs"),
    "XLA_FFI_CallFrame": (CallFrame, "attrs"),
    "XLA_FFI_Stream_Get_Args": (StreamGetArgs, "stream"),
    "XLA_FFI_Metadata": (Metadata, "traits"),
    "XLA_FFI_Metadata_Extension": (MetadataExtension, "metadata"),
    "XLA_FFI_ByteSpan": (ByteSpan, None),
    "XLA_FFI_Scalar": (Scalar, None),
    "XLA_FFI_Api": (Api, "XLA_FFI_Stream_Get"),
}


def test_layout_matches_an_independent_ctypes_declaration() -> None:
    layout = ext._xla_layout()
    assert {name for name, _, _ in layout} == set(CTYPES)
    for name, size, fields in layout:
        t, last = CTYPES[name]
        want = ctypes.sizeof(t) if last is None else size_to(t, last)
        assert size == want, name
        for field, offset in fields:
            assert offset == getattr(t, field).offset, (name, field)


def _header() -> Path | None:
    try:
        import jax.ffi
    except Exception:  # noqa: BLE001 - no (usable) JAX: nothing to compare with
        return None
    h = Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h"
    return h if h.is_file() else None


def test_layout_matches_the_header_compiled(tmp_path: Path) -> None:
    """Each size and offset as a C compiler lays out jaxlib's own c_api.h."""
    header = _header()
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if header is None or cc is None:
        pytest.skip("needs jaxlib's XLA FFI header (pip install jax) and a C compiler")
    layout = ext._xla_layout()
    lines = [
        "#include <stdio.h>",
        "#include <stddef.h>",
        f'#include "{header}"',
        "int main(void) {",
    ]
    # The extension base's typedef name changed (XLA_FFI_Extension_Base, then
    # XLA_FFI_InternalExtension): it is reached through the metadata extension.
    base = "__typeof__(((XLA_FFI_Metadata_Extension*)0)->extension_base)"
    for name, _size, fields in layout:
        t = base if name == "XLA_FFI_Extension_Base" else name
        if name == "XLA_FFI_Api":
            expr = "offsetof(XLA_FFI_Api, XLA_FFI_Stream_Get) + sizeof(void*)"
        elif name in ("XLA_FFI_ByteSpan", "XLA_FFI_Scalar"):
            expr = f"sizeof({t})"
        elif name == "XLA_FFI_Extension_Base":
            expr = f"offsetof({t}, next) + sizeof(void*)"
        else:
            expr = f"{name}_STRUCT_SIZE"
        lines.append(f'printf("{name} %zu\\n", (size_t)({expr}));')
        for field, _ in fields:
            lines.append(f'printf("{name}.{field} %zu\\n", (size_t)offsetof({t}, {field}));')
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=gnu11", "-o", str(exe), str(src)], check=True)
    got = dict(line.split() for line in subprocess.check_output([str(exe)], text=True).splitlines())
    for name, size, fields in layout:
        assert int(got[name]) == size, name
        for field, offset in fields:
            assert int(got[f"{name}.{field}"]) == offset, (name, field)
    # The version the handlers report is one the header's XLA accepts (0.1 up to its own).
    text = header.read_text()
    minor = int(text.split("#define XLA_FFI_API_MINOR")[1].split()[0])
    assert ext._xla_api_version() == (0, 1) and minor >= 1


# ---- the handlers, called through hand-made call frames --------------------------------


class FakeXla:
    """A stand-in XLA: an API table whose Error_Create records each error and returns a
    distinct non-null handle, whose Stream_Get returns ``stream``."""

    def __init__(self, stream: int = 0x5000) -> None:
        self.errors: list[tuple[int, str]] = []
        self.stream = stream
        self.stream_calls = 0

        def create(args: Any) -> int:
            a = args.contents
            assert a.struct_size >= size_to(ErrorCreateArgs, "errc")
            self.errors.append((a.errc, a.message.decode()))
            return 0x1000 + len(self.errors)

        def get_stream(args: Any) -> int | None:
            a = args.contents
            assert a.struct_size >= size_to(StreamGetArgs, "stream")
            assert a.ctx == 0xC7
            self.stream_calls += 1
            a.stream = self.stream
            return None

        self._create = ErrorCreate(create)
        self._stream = StreamGet(get_stream)
        self.api = Api(
            struct_size=size_to(Api, "XLA_FFI_Stream_Get"),
            XLA_FFI_Error_Create=self._create,
            XLA_FFI_Stream_Get=self._stream,
        )


HANDLER = ctypes.CFUNCTYPE(c_void_p, ctypes.POINTER(CallFrame))


def handler(graph: bool) -> Any:
    return HANDLER(ext._xla_handler(graph))


class Frame:
    """A call frame: buffers (dtype code, shape, address), results, attributes."""

    def __init__(
        self,
        xla: FakeXla | None,
        args: list[tuple[int, tuple[int, ...], int]] = (),  # type: ignore[assignment]
        rets: list[tuple[int, tuple[int, ...], int]] = (),  # type: ignore[assignment]
        attrs: dict[str, Any] | None = None,
        stage: int = 3,
    ) -> None:
        self.keep: list[Any] = []
        self.frame = CallFrame()
        self.frame.struct_size = size_to(CallFrame, "attrs")
        self.frame.api = ctypes.cast(ctypes.pointer(xla.api), c_void_p).value if xla else None
        self.frame.ctx = 0xC7
        self.frame.stage = stage
        self.frame.args = Args(size_to(Args, "args"), None, *self._buffers(args))
        self.frame.rets = Rets(size_to(Rets, "rets"), None, *self._buffers(rets))
        self.frame.attrs = self._attrs(attrs or {})

    def _buffers(self, bufs: Any) -> tuple[int, Any, Any]:
        n = len(bufs)
        types = (c_int * max(n, 1))(*([1] * n))
        ptrs = (c_void_p * max(n, 1))()
        for i, (code, shape, addr) in enumerate(bufs):
            dims = (c_int64 * max(len(shape), 1))(*shape)
            b = Buffer(size_to(Buffer, "dims"), None, code, addr, len(shape), dims)
            self.keep += [dims, b]
            ptrs[i] = ctypes.addressof(b)
        self.keep += [types, ptrs]
        return n, types, ptrs

    def _attrs(self, attrs: dict[str, Any]) -> Attrs:
        items = sorted(attrs.items())
        n = len(items)
        types = (c_int * max(n, 1))()
        names = (ctypes.POINTER(ByteSpan) * max(n, 1))()
        vals = (c_void_p * max(n, 1))()
        for i, (name, v) in enumerate(items):
            raw = name.encode()
            nb = ctypes.create_string_buffer(raw)
            span = ByteSpan(ctypes.addressof(nb), len(raw))
            names[i] = ctypes.pointer(span)
            if isinstance(v, str):
                sb = ctypes.create_string_buffer(v.encode())
                val: Any = ByteSpan(ctypes.addressof(sb), len(v.encode()))
                types[i] = 4
                self.keep.append(sb)
            else:
                cell: Any = c_int64(v) if isinstance(v, int) else ctypes.c_double(v)
                val = Scalar(5 if isinstance(v, int) else 12, ctypes.addressof(cell))
                types[i] = 3
                self.keep.append(cell)
            vals[i] = ctypes.addressof(val)
            self.keep += [nb, span, val]
        self.keep += [types, names, vals]
        return Attrs(size_to(Attrs, "attrs"), None, n, types, names, vals)

    def call(self, graph: bool = True) -> int | None:
        return handler(graph)(ctypes.byref(self.frame))  # type: ignore[no-any-return]


F32, S32 = 11, 4
A, B, OUT = 0x7F00_0000_0000, 0x7F00_0001_0000, 0x7F00_0002_0000


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("with_api", [False, True])
def test_metadata_query_reports_version_and_traits(graph: bool, with_api: bool) -> None:
    xla = FakeXla()
    md = Metadata(size_to(Metadata, "traits"), ApiVersion(), 0xFFFF)
    ext_ = MetadataExtension(
        ExtBase(size_to(MetadataExtension, "metadata"), 1, None), ctypes.pointer(md)
    )
    f = Frame(xla if with_api else None)
    f.frame.extension_start = ctypes.cast(ctypes.pointer(ext_), ctypes.POINTER(ExtBase))
    assert f.call(graph) is None
    assert (md.api_version.major_version, md.api_version.minor_version) == (0, 1)
    assert md.api_version.struct_size == size_to(ApiVersion, "minor_version")
    assert md.traits == (1 if graph else 0)
    assert xla.errors == [] and xla.stream_calls == 0


def test_metadata_too_small_is_an_error() -> None:
    xla = FakeXla()
    md = Metadata(8, ApiVersion(), 0xFFFF)
    ext_ = MetadataExtension(
        ExtBase(size_to(MetadataExtension, "metadata"), 1, None), ctypes.pointer(md)
    )
    f = Frame(xla)
    f.frame.extension_start = ctypes.cast(ctypes.pointer(ext_), ctypes.POINTER(ExtBase))
    assert f.call() == 0x1001
    assert md.traits == 0xFFFF  # untouched
    assert xla.errors[0][0] == 3 and "XLA_FFI_Metadata of 8 bytes" in xla.errors[0][1]


def bundled_id() -> int:
    return ext._xla_register(ferrocuda.bundled())


def add_frame(xla: FakeXla, **over: Any) -> Frame:
    attrs = {"ferrocuda_module": bundled_id(), "ferrocuda_kernel": "add_f32"}
    attrs.update(over.pop("attrs", {}))
    args = over.pop("args", [(F32, (100,), A), (F32, (100,), B)])
    rets = over.pop("rets", [(F32, (100,), OUT)])
    return Frame(xla, args, rets, attrs, **over)


def one_error(xla: FakeXla, result: Any, code: int, *parts: str) -> None:
    assert result == 0x1001 and len(xla.errors) == 1, xla.errors
    errc, msg = xla.errors[0]
    assert errc == code, msg
    assert msg.startswith("ferrocuda: ")
    for p in parts:
        assert p in msg, (p, msg)


def test_small_call_frame_is_refused() -> None:
    xla = FakeXla()
    f = add_frame(xla)
    f.frame.struct_size = size_to(CallFrame, "attrs") - 8
    one_error(xla, f.call(), 3, "XLA_FFI_CallFrame of", "expected at least")
    assert xla.stream_calls == 0


def test_wrong_stage_is_refused() -> None:
    xla = FakeXla()
    one_error(xla, add_frame(xla, stage=1).call(), 3, "execution stage 1")


@pytest.mark.parametrize(
    ("attrs", "code", "parts"),
    [
        ({"ferrocuda_module": None}, 3, ["`ferrocuda_module`", "missing"]),
        ({"ferrocuda_module": 5}, 9, ["module 5 is not registered"]),
        ({"ferrocuda_kernel": None}, 3, ["`ferrocuda_kernel`", "missing"]),
        ({"ferrocuda_kernel": "add_f99"}, 3, ["no kernel named `add_f99`"]),
        ({"ferrocuda_kernel": 7}, 3, ["`ferrocuda_kernel` must be a string"]),
    ],
)
def test_attribute_errors(attrs: dict[str, Any], code: int, parts: list[str]) -> None:
    xla = FakeXla()
    full = {"ferrocuda_module": bundled_id(), "ferrocuda_kernel": "add_f32"}
    full.update(attrs)
    f = Frame(
        xla,
        [(F32, (4,), A), (F32, (4,), B)],
        [(F32, (4,), OUT)],
        {k: v for k, v in full.items() if v is not None},
    )
    one_error(xla, f.call(), code, *parts)


def test_element_type_mismatch_names_the_argument() -> None:
    xla = FakeXla()
    f = add_frame(xla, args=[(F32, (100,), A), (S32, (100,), B)])
    one_error(xla, f.call(), 3, "kernel `add_f32`", "`b`", "int32", "float32")


def test_unknown_xla_type_and_bad_rank() -> None:
    xla = FakeXla()
    one_error(
        xla,
        add_frame(xla, args=[(F32, (4,), A), (23, (4,), B)]).call(),
        3,
        "`b`",
        "XLA element type 23",
    )
    xla = FakeXla()
    deep = tuple([1] * 40)
    one_error(
        xla, add_frame(xla, args=[(F32, deep, A), (F32, (4,), B)]).call(), 3, "`a`", "rank 40"
    )


def test_operand_counts() -> None:
    xla = FakeXla()
    f = add_frame(xla, args=[(F32, (4,), A)])
    one_error(xla, f.call(), 3, "takes 2 read-only array(s)", "passed 1 operand(s) and 1 result(s)")


def test_small_buffer_struct_is_refused() -> None:
    xla = FakeXla()
    f = add_frame(xla)
    b = ctypes.cast(f.frame.rets.rets[0], ctypes.POINTER(Buffer)).contents
    b.struct_size = 16
    one_error(xla, f.call(), 3, "`out`", "XLA_FFI_Buffer of 16 bytes")


def test_in_out_operand_must_alias_its_result() -> None:
    xla = FakeXla()
    f = Frame(
        xla,
        [(F32, (8,), A), (F32, (8,), B)],
        [(F32, (8,), OUT)],
        {"ferrocuda_module": bundled_id(), "ferrocuda_kernel": "saxpy_f32", "alpha": 2.0},
    )
    one_error(xla, f.call(), 3, "`y`", "not aliased")


def test_scalar_attribute_checks() -> None:
    base = {"ferrocuda_module": bundled_id(), "ferrocuda_kernel": "saxpy_f32"}
    xla = FakeXla()
    f = Frame(xla, [(F32, (8,), A)], [(F32, (8,), OUT)], base)
    one_error(xla, f.call(), 3, "`alpha`", "missing")
    xla = FakeXla()
    f = Frame(xla, [(11, (8,), A)], [(11, (8,), OUT)], {**base, "alpha": 1e300})
    one_error(xla, f.call(), 3, "`alpha`", "out of range for float32")
    xla = FakeXla()
    f = Frame(
        xla,
        [],
        [(S32, (8,), OUT)],
        {
            "ferrocuda_module": bundled_id(),
            "ferrocuda_kernel": "checked_write",
            "index": 3,
            "value": 2.5,
        },
    )
    # checked_write(x: mut int32, index: u64, value: i32): a float for an integer parameter.
    one_error(xla, f.call(), 3, "`value`", "expected an integer")


def test_a_valid_call_without_a_driver_is_an_error_not_a_crash() -> None:
    if ferrocuda.driver_available():
        pytest.skip("with a driver, the fake addresses would reach it")
    xla = FakeXla()
    f = add_frame(xla)
    result = f.call()
    assert result == 0x1001 and xla.stream_calls == 1
    errc, msg = xla.errors[0]
    assert errc == 13 and "kernel `add_f32`" in msg, msg


def test_module_ids_are_stable_and_distinct(tmp_path: Path) -> None:
    b = ferrocuda.bundled()
    assert ext._xla_register(b) == ext._xla_register(b) >= 0
    man = json.loads(b.manifest)
    (tmp_path / "user.ptx").write_text(ext._bundled_ptx())
    man["ptx"] = "user.ptx"
    man["cubins"] = {}
    from conftest import write_bundled_parts

    write_bundled_parts(tmp_path, man)
    (tmp_path / "user.json").write_text(json.dumps(man))
    m = ferrocuda.load(tmp_path / "user.json")
    assert ext._xla_register(m) != ext._xla_register(b)
    # The same files give the same id in another process (a compiled executable's attribute
    # names the same module there).
    code = (
        "import ferrocuda, sys; from ferrocuda import _ferrocuda as e; "
        "print(e._xla_register(ferrocuda.load(sys.argv[1])), e._xla_register(ferrocuda.bundled()))"
    )
    out = subprocess.check_output(
        [sys.executable, "-c", code, str(tmp_path / "user.json")], text=True
    )
    assert out.split() == [str(ext._xla_register(m)), str(ext._xla_register(b))]


# ---- output shapes from the manifest ---------------------------------------------------


def kernel(name: str) -> KernelInfo:
    for k in json.loads(ferrocuda.bundled().manifest)["kernels"]:
        if k["name"] == name:
            return KernelInfo(k)
    raise KeyError(name)


def shapes_of(
    name: str,
    inputs: dict[str, tuple[int, ...]],
    scalars: dict[str, Any] | None = None,
    given: Any = None,
) -> dict[str, tuple[int, ...]]:
    k = kernel(name)
    by = {p.name: p.index for p in k.all}
    shapes = {by[n]: s for n, s in inputs.items()}
    sc = {by[n]: v for n, v in (scalars or {}).items()}
    derive_shapes(k, shapes, sc, given or {})
    check_rules(k, shapes, sc)
    return {p.name: shapes[p.index] for p in k.outputs}


def test_derived_shapes() -> None:
    assert shapes_of("add_f32", {"a": (3, 5), "b": (3, 5)}) == {"out": (3, 5)}
    assert shapes_of("gelu_f32", {"x": (7,)}) == {"out": (7,)}
    assert shapes_of("sum_f32", {"x": (1000,)}) == {"out": (1,)}
    assert shapes_of("cumsum_f32", {"x": (9,)}) == {"out": (9,)}
    assert shapes_of("sum_rows_f32", {"x": (4, 6)}) == {"out": (4,)}
    assert shapes_of("softmax_f32", {"x": (4, 6)}) == {"out": (4, 6)}
    assert shapes_of("linear_bf16", {"x": (8, 16), "w": (32, 16)}) == {"out": (8, 32)}
    assert shapes_of("matmul_f32", {"a": (3, 4), "b": (4, 5)}, {"alpha": 1.0, "beta": 0.0}) == {
        "c": (3, 5)
    }
    assert shapes_of("histogram_f32", {"x": (100,)}, {"lo": 0.0, "hi": 1.0}, {"bins": (10,)}) == {
        "bins": (10,)
    }
    gqa = {"q": (2, 8, 100, 64), "k": (2, 2, 50, 64), "v": (2, 2, 50, 64)}
    assert shapes_of("attention_bf16", gqa, {"scale": 0.125, "causal": 0}) == {
        "out": (2, 8, 100, 64)
    }


def test_underived_and_violated_shapes() -> None:
    with pytest.raises(ValueError, match=r"`bins`.*out_shapes=\{'bins'"):
        shapes_of("histogram_f32", {"x": (100,)}, {"lo": 0.0, "hi": 1.0})
    with pytest.raises(ValueError, match="argument `lo`: the range must satisfy lo < hi"):
        shapes_of("histogram_f32", {"x": (100,)}, {"lo": 2.0, "hi": 1.0}, {"bins": (10,)})
    with pytest.raises(ValueError, match="argument `bins`: the bin count must be at least 1"):
        shapes_of("histogram_f32", {"x": (100,)}, {"lo": 0.0, "hi": 1.0}, {"bins": (0,)})
    with pytest.raises(
        ValueError, match="argument `a`: the inner dimensions of a and b must agree"
    ):
        shapes_of("matmul_f32", {"a": (3, 4), "b": (5, 5)}, {"alpha": 1.0, "beta": 0.0})
    with pytest.raises(ValueError, match=r"argument `k`: q's number of heads .* multiple of k's"):
        qkv = {"q": (2, 8, 100, 64), "k": (2, 3, 50, 64), "v": (2, 3, 50, 64)}
        shapes_of("attention_bf16", qkv, {"scale": 0.125, "causal": 0})
    with pytest.raises(ValueError, match="argument `out`: out holds the one result"):
        shapes_of("sum_f32", {"x": (10,)}, given={"out": (2,)})
    # Head dimensions: the narrow kernels refuse D > 128 with a RuleError (a family then tries
    # its next variant: the wide kernel), every kernel D > 256.
    d256 = {"q": (1, 2, 8, 256), "k": (1, 2, 8, 256), "v": (1, 2, 8, 256)}
    sc = {"scale": 0.0625, "causal": 0}
    assert shapes_of("attention_bf16_wide", d256, sc) == {"out": (1, 2, 8, 256)}
    with pytest.raises(RuleError, match=r"at most 128 for this kernel \(the `_wide` kernels"):
        shapes_of("attention_bf16", d256, sc)
    d264 = {"q": (1, 2, 8, 264), "k": (1, 2, 8, 264), "v": (1, 2, 8, 264)}
    with pytest.raises(RuleError, match=r"argument `q`: the head dimension .* at most 256"):
        shapes_of("attention_bf16_wide", d264, sc)


def test_every_bundled_kernel_declares_its_outputs() -> None:
    """Each bundled kernel's outputs follow from its inputs (a 2-D input of 6x8 for views,
    length 48 for slices), except the ones a caller must size (histogram's bins) and those of
    kernels with no read-only array (in-place kernels, called with every parameter)."""
    needs_size = {"histogram"}
    checked = 0
    for k in json.loads(ferrocuda.bundled().manifest)["kernels"]:
        info = KernelInfo(k)
        reads = [p for p in info.params if p.is_array and not p.mutable]
        if info.family in needs_size or not info.outputs or not reads:
            continue
        checked += 1
        shapes: dict[int, tuple[int, ...]] = {}
        for p in info.params:
            if p.is_array and not p.mutable:
                shapes[p.index] = (48,) if p.kind == "slice" else tuple([6, 8, 6, 8][: p.rank])
        if info.family in ("linear", "matmul"):
            a, b = [p.index for p in info.params if p.is_array and not p.mutable]
            shapes[a], shapes[b] = (6, 8), ((8, 8) if info.family == "linear" else (8, 6))
        derive_shapes(info, shapes, {}, {})
        for p in info.outputs:
            assert p.index in shapes, (info.name, p.name)
            assert p.kind == "slice" or len(shapes[p.index]) == p.rank, (info.name, p.name)
    assert checked > 100


def test_importing_ferrocuda_does_not_import_jax() -> None:
    code = (
        "import sys, ferrocuda; ferrocuda.kernels; assert 'jax' not in sys.modules; "
        "import ferrocuda.jax as fj; fj.add; fj.functions(); assert 'jax' not in sys.modules; "
        "print('ok')"
    )
    assert subprocess.check_output([sys.executable, "-c", code], text=True).strip() == "ok"


def test_jax_function_traces_on_cpu() -> None:
    """With JAX installed (any backend), calls trace: results declared, the custom call's
    target, attributes and aliases in the lowered program."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    import ferrocuda.jax as fj

    a = jax.ShapeDtypeStruct((3, 5), jnp.float32)
    assert jax.eval_shape(fj.add, a, a) == jax.ShapeDtypeStruct((3, 5), jnp.float32)
    x = jax.ShapeDtypeStruct((8, 16), jnp.bfloat16)
    w = jax.ShapeDtypeStruct((4, 16), jnp.bfloat16)
    assert jax.eval_shape(fj.linear, x, w).shape == (8, 4)
    f32 = jax.eval_shape(lambda x, w: fj.linear(x, w, out_dtypes={"out": "float32"}), x, w)
    assert f32.dtype == jnp.float32
    text = jax.jit(lambda x, y: fj.saxpy(2.5, x, y)).lower(a, a).as_text()
    assert "@ferrocuda_xla_graph" in text and 'ferrocuda_kernel = "saxpy_f32"' in text
    assert "alpha = 2.500000e+00 : f64" in text and "output_operand_alias" in text
    assert (
        "@ferrocuda_xla("
        in jax.jit(fj.sum).lower(jax.ShapeDtypeStruct((10,), jnp.float32)).as_text()
    )
    with pytest.raises(TypeError, match=r"\(int8\[4\]\) \(`x` takes bfloat16, float16, float32\)"):
        fj.gelu(jax.ShapeDtypeStruct((4,), jnp.int8))
    with pytest.raises(TypeError, match="static"):
        jax.jit(lambda s, x: fj.saxpy(s, x, x))(1.0, jnp.ones(3, jnp.float32))
    with pytest.raises(OverflowError, match="`index`"):
        fj.checked_write(jnp.ones(3, jnp.int32), -1, 2)
    # A family's variants whose rules differ: the first whose rules hold (the wide attention
    # kernel for D = 256), the first one's refusal when none holds.
    for d, want in [(128, "attention_bf16"), (256, "attention_bf16_wide")]:
        q = jax.ShapeDtypeStruct((1, 2, 8, d), jnp.bfloat16)
        text = jax.jit(lambda q: fj.attention(q, q, q, 0.0625, 0)).lower(q).as_text()
        assert f'ferrocuda_kernel = "{want}"' in text, d
    with pytest.raises(ValueError, match=r"argument `q`: the head dimension .* at most 256"):
        fj.attention(*[jax.ShapeDtypeStruct((1, 2, 8, 264), jnp.bfloat16)] * 3, 0.0625, 0)


def test_capsules_hold_the_handlers() -> None:
    get = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi)
    )
    for graph in (False, True):
        assert get(ext._xla_capsule(graph), None) == ext._xla_handler(graph)
    assert ext._xla_handler(True) != ext._xla_handler(False)


def test_registration_leaves_ctypes_alone() -> None:
    """Registering the targets (first in a fresh process) changes no process-wide ctypes
    state (``jax.ffi.pycapsule`` would set ``ctypes.pythonapi.PyCapsule_New``'s argument
    types, breaking other users of it)."""
    pytest.importorskip("jax")
    code = (
        "import ctypes, ferrocuda.jax as fj; f = ctypes.pythonapi.PyCapsule_New; "
        "before = (f.argtypes, f.restype); fj.register_targets(); "
        "assert (f.argtypes, f.restype) == before, (f.argtypes, f.restype); print('ok')"
    )
    assert subprocess.check_output([sys.executable, "-c", code], text=True).strip() == "ok"
