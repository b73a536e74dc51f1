"""``ferrocuda.torch`` without a GPU: the operators' schemas, mutated arguments and fake
(meta) implementations against the manifest, ``torch.export`` of a model built from them
(one graph, no breaks), registration of a module of one's own, and the errors. Skipped
without torch; the launches themselves are in ``test_gpu_torch_ops.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ferrocuda

torch = pytest.importorskip("torch")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import ferrocuda.torch as ft  # noqa: E402

MANIFEST = json.loads(ferrocuda.bundled().manifest)
FAMILIES = sorted({k["family"] for k in MANIFEST["kernels"]})


def caller_params(k: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in k["params"] if p["kind"] != "scratch"]


def first_kernel(family: str) -> dict[str, Any]:
    return next(k for k in MANIFEST["kernels"] if k["family"] == family)


def schema_of(op: Any) -> Any:
    assert isinstance(op, torch._ops.OpOverload), op
    return op._schema


def test_ferrocuda_torch_is_the_submodule() -> None:
    assert ferrocuda.torch is ft
    assert ft.bundled_ops() is ft.register(ferrocuda.bundled())
    assert ft.bundled_ops().namespace == "ferrocuda"
    # The module's operators are the OpOverloads torch.ops holds.
    assert ft.gelu is torch.ops.ferrocuda.gelu.default
    assert ft.add_out is torch.ops.ferrocuda.add_out.default
    assert ft.bundled_ops().softmax is ft.softmax


@pytest.mark.parametrize("family", FAMILIES)
def test_out_form_schema_is_the_manifests(family: str) -> None:
    k = first_kernel(family)
    params = caller_params(k)
    op = getattr(ft, f"{family}_out")
    assert op is ft.bundled_ops().out(family)
    sch = schema_of(op)
    assert sch.name == f"ferrocuda::{family}_out"
    assert [a.name for a in sch.arguments] == [p["name"] for p in params]
    for a, p in zip(sch.arguments, params, strict=True):
        is_tensor = str(a.type) == "Tensor"
        assert is_tensor == (p["kind"] != "scalar"), (a, p)
        written = a.alias_info is not None and a.alias_info.is_write
        assert written == (p["kind"] != "scalar" and p["mutable"]), (a, p)
        if not is_tensor:
            want = "float" if p["dtype"].startswith(("float", "bfloat")) else "int"
            assert str(a.type) == want, (a, p)
    assert len(sch.returns) == 0
    # The same operator through torch.ops.
    assert getattr(torch.ops.ferrocuda, f"{family}_out").default._schema == sch


@pytest.mark.parametrize("family", FAMILIES)
def test_functional_form_schema_is_the_manifests(family: str) -> None:
    k = first_kernel(family)
    params = caller_params(k)
    inputs = [p for p in params if not (p["kind"] != "scalar" and p["mutable"])]
    outputs = [p for p in params if p["kind"] != "scalar" and p["mutable"]]
    fn = getattr(ft, family)
    if not isinstance(fn, torch._ops.OpOverload):
        # Not derivable: calling it says why.
        with pytest.raises(NotImplementedError, match=f"`{family}`"):
            fn()
        return
    sch = schema_of(fn)
    assert sch.name == f"ferrocuda::{family}"
    positional = [a for a in sch.arguments if not a.kwarg_only]
    assert [a.name for a in positional] == [p["name"] for p in inputs]
    assert all(a.alias_info is None for a in sch.arguments)
    assert len(sch.returns) == len(outputs)


def fake(*shape: int, dtype: Any = None) -> Any:
    return torch.empty(shape, dtype=dtype or torch.float32, device="cuda")


@pytest.mark.parametrize("shape", [(0,), (1,), (1000,), (3, 5), (2, 0, 4), (2, 3, 4, 5)], ids=str)
@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fake_elementwise_shapes(name: str, shape: Any, dtype: str) -> None:
    dt = getattr(torch, dtype)
    with FakeTensorMode():
        x = fake(*shape, dtype=dt)
        y = getattr(ft, name)(x)
        z = ft.add(x, x)
        assert y.shape == x.shape and y.dtype == dt and y.device == x.device
        assert z.shape == x.shape and z.dtype == dt
        # A transposed view (the strided variants) keeps its shape.
        if len(shape) == 2:
            assert getattr(ft, name)(x.t()).shape == (shape[1], shape[0])


def test_fake_shapes_from_require_rules() -> None:
    with FakeTensorMode():
        x = fake(6, 7)
        assert ft.sum(x.reshape(-1)).shape == (1,)  # len(out) == 1
        assert ft.sum(fake(5, dtype=torch.int32)).dtype == torch.int64  # sum_i32 -> int64
        assert ft.max(fake(5)).shape == (1,)
        assert ft.sum_rows(x).shape == (6,)  # len(out) == x.dim(0)
        assert ft.cumsum(fake(9)).shape == (9,)  # len(out) == len(x)
        assert ft.cumsum(fake(3, 4)).shape == (12,)  # a slice: x's elements in C order
        a, b = fake(4, 6), fake(6, 9)
        assert ft.matmul(a, b, 1.0, 0.0).shape == (4, 9)  # c: (a.dim(0), b.dim(1))
        w = fake(11, 6, dtype=torch.bfloat16)
        xb = fake(4, 6, dtype=torch.bfloat16)
        got = ft.linear(xb, w, out_dtype=torch.float32)
        assert got.shape == (4, 11) and got.dtype == torch.float32
        assert ft.linear(xb, w, out_dtype=torch.bfloat16).dtype == torch.bfloat16
        assert ft.softmax(x).shape == (6, 7) and ft.log_softmax(x).shape == (6, 7)
        assert ft.div_by(fake(10), fake(1)).shape == (10,)
        assert ft.stencil5(x).shape == (6, 7)
        assert ft.normalize(fake(10)).shape == (10,)
        assert ft.saxpy(2.0, fake(3, 3)).shape == (3, 3)


def test_ambiguous_output_dtype_needs_out_dtype() -> None:
    with FakeTensorMode():
        xi = fake(7, dtype=torch.int32)
        with pytest.raises(ValueError, match=r"cumsum.*ambiguous.*int32.*int64.*out_dtype"):
            ft.cumsum(xi)
        assert ft.cumsum(xi, out_dtype=torch.int64).dtype == torch.int64
        assert ft.cumsum(xi, out_dtype=torch.int32).dtype == torch.int32
        with pytest.raises(TypeError, match=r"cumsum.*out_dtype=torch.float16"):
            ft.cumsum(xi, out_dtype=torch.float16)
        # float32 has one variant: no out_dtype needed.
        assert ft.cumsum(fake(7)).dtype == torch.float32


def test_dtype_without_variant_is_a_type_error_listing_variants() -> None:
    with FakeTensorMode():
        with pytest.raises(TypeError, match=r"`gelu` has no variant for \(x: torch.int8") as e:
            ft.gelu(fake(4, dtype=torch.int8))
        assert "gelu_f32(" in str(e.value)
        # A rank no view variant takes (softmax is 2-D only).
        with pytest.raises(TypeError, match="`softmax` has no variant"):
            ft.softmax(fake(2, 3, 4))
        # The out-form's fake picks a variant from every array, outputs included.
        with pytest.raises(TypeError, match="`add` has no variant"):
            ft.add_out(fake(4), fake(4), fake(4, dtype=torch.float64))
        ft.add_out(fake(4), fake(4), fake(4))  # fine


def test_non_derivable_output_says_why_and_how() -> None:
    with pytest.raises(NotImplementedError) as e:
        ft.histogram(torch.zeros(4), 0.0, 1.0)
    msg = str(e.value)
    assert "`histogram`" in msg and "`bins`" in msg and "output_shapes" in msg, msg
    assert "histogram_out" in msg, msg
    # Families that only write (no input to size from) have no functional form either.
    with pytest.raises(NotImplementedError, match="initialize_array_out"):
        ft.initialize_array()


def write_module(directory: Path, stem: str, families: set[str]) -> Path:
    """A module of some of the bundled kernels, as ferrocuda-builder writes one."""
    man = json.loads(ferrocuda.bundled().manifest)
    man["ptx"] = f"{stem}.ptx"
    man["kernels"] = [k for k in man["kernels"] if "arch" not in k and k["family"] in families]
    man.pop("parts", None)
    (directory / f"{stem}.ptx").write_text(ferrocuda._ferrocuda._bundled_ptx())
    path = directory / f"{stem}.json"
    path.write_text(json.dumps(man))
    return path


def test_a_module_of_ones_own(tmp_path: Path) -> None:
    mod = ferrocuda.load(write_module(tmp_path, "my-ops.v2", {"add", "histogram", "sum"}))
    ops = ft.register(
        mod, output_shapes={"histogram": {"bins": lambda inputs: (inputs["x"].shape[0] // 2,)}}
    )
    # The crate name (the PTX file's stem), made an identifier.
    assert ops.namespace == "my_ops"
    assert sorted(ops.families) == ["add", "histogram", "sum"]
    assert schema_of(ops.add_out).name == "my_ops::add_out"
    assert torch.ops.my_ops.add.default._schema == schema_of(ops.add)
    with FakeTensorMode():
        # The hook sizes bins.
        assert ops.histogram(fake(10), 0.0, 1.0).shape == (5,)
        assert ops.sum(fake(10, dtype=torch.int64)).dtype == torch.int64
    assert ft.register(mod) is ops  # the same module again: the same operators
    with pytest.raises(AttributeError, match="no operator 'gelu'"):
        ops.gelu  # noqa: B018
    # Another module under that namespace is refused (torch cannot drop operators).
    other = ferrocuda.load(write_module(tmp_path, "other", {"add"}))
    with pytest.raises(ValueError, match="namespace 'my_ops' already holds"):
        ft.register(other, "my_ops")
    assert ft.register(other).namespace == "other"


def test_bad_namespaces_and_hooks(tmp_path: Path) -> None:
    mod = ferrocuda.load(write_module(tmp_path, "nsx", {"add"}))
    for bad in ["a::b", "1x", "", "x-y"]:
        with pytest.raises(ValueError, match="argument `namespace`"):
            ft.register(mod, bad)
    for reserved in ["aten", "torch", "ferrocuda"]:
        with pytest.raises(ValueError, match="reserved"):
            ft.register(mod, reserved)
    with pytest.raises(ValueError, match=r"output_shapes\['add'\] names \['bins'\]"):
        ft.register(mod, "nsx_hooks", output_shapes={"add": {"bins": lambda i: (1,)}})
    with pytest.raises(ValueError, match=r"output_shapes names \['gelu'\]"):
        ft.register(mod, "nsx_hooks", output_shapes={"gelu": {"out": lambda i: (1,)}})
    # Nothing was registered by the refused calls: the namespace is still free.
    assert ft.register(mod, "nsx_hooks").namespace == "nsx_hooks"


class Model(torch.nn.Module):
    """Several ferrocuda operators in a row."""

    def forward(self, x: Any, w: Any) -> Any:
        y = ft.gelu(x)
        z = ft.add(y, x)
        s = ft.softmax(z)
        t = ft.silu(s)
        out = torch.empty_like(t)
        ft.add_out(t, z, out)
        r = ft.sum_rows(out)
        return ft.matmul(out, w, 1.0, 0.0), r


def test_export_traces_one_graph_of_the_operators() -> None:
    # torch.export traces with fake tensors only (nothing launches): CPU tensors do here.
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    ep = torch.export.export(Model(), (x, w), strict=True)
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    for name in ["gelu", "add", "softmax", "silu", "sum_rows", "matmul"]:
        assert f"ferrocuda.{name}.default" in targets, targets
    # The out-form's mutation, functionalized.
    assert any("add_out" in t for t in targets), targets
    outs = next(n for n in ep.graph.nodes if n.op == "output").args[0]
    specs = [o.meta["val"] for o in outs]
    assert tuple(specs[0].shape) == (8, 4) and tuple(specs[1].shape) == (8,)


def test_dynamo_sees_no_graph_break() -> None:
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    graphs: list[Any] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        graphs.append(gm)

        def run(*args: Any) -> Any:  # nothing launches on the CPU: shapes only
            return [torch.zeros(8, 4), torch.zeros(8)]

        return run

    torch._dynamo.reset()
    compiled = torch.compile(Model(), backend=backend, fullgraph=True)
    compiled(x, w)
    assert len(graphs) == 1
    ops = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert any("ferrocuda.gelu" in o for o in ops), ops


def test_cpu_tensors_are_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match=r"argument `x` of ferrocuda::gelu.*CUDA tensors.*cpu"):
        ft.gelu(torch.zeros(4))
    with pytest.raises(ValueError, match=r"argument `a` of ferrocuda::add_out"):
        ft.add_out(torch.zeros(4), torch.zeros(4), torch.zeros(4))


def python_files(tb: Any) -> list[str]:
    """The source files of a traceback's Python frames."""
    files = []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return files


def test_each_operator_has_the_launchers_op_kernel() -> None:
    ops = ft.bundled_ops()
    families = ferrocuda.bundled().families
    for family in FAMILIES:
        out_kernel, fn_kernel = ops._kernels[family]
        assert isinstance(out_kernel, ferrocuda.OpKernel)
        assert out_kernel.op == f"ferrocuda::{family}_out"
        assert fn_kernel.op == f"ferrocuda::{family}"
        assert out_kernel.launcher is families[family] and fn_kernel.launcher is families[family]
        want = f"<ferrocuda.OpKernel ferrocuda::{family}_out launching {family}>"
        assert repr(out_kernel) == want


@pytest.mark.parametrize("family", FAMILIES)
def test_the_out_forms_kernel_is_the_extensions(family: str) -> None:
    # CPU tensors reach the registered kernel (no fake mode here), which refuses the first
    # one: no Python frame of ferrocuda.torch runs between the dispatcher and the refusal.
    params = caller_params(first_kernel(family))
    args = [
        torch.zeros(4, dtype=getattr(torch, p["dtype"]))
        if p["kind"] != "scalar"
        else (1.0 if p["dtype"].startswith(("float", "bfloat")) else 1)
        for p in params
    ]
    name = next(p["name"] for p in params if p["kind"] != "scalar")
    with pytest.raises(ValueError, match=rf"^argument `{name}` of ferrocuda::{family}_out:") as e:
        getattr(ft, f"{family}_out")(*args)
    here = str(Path(ft.__file__))
    assert here not in python_files(e.value.__traceback__)


@pytest.mark.parametrize("grad", [False, True], ids=["plain", "requires_grad"])
def test_a_cpu_tensor_is_refused_by_the_kernel_and_nothing_written(grad: bool) -> None:
    a, b = torch.ones(4, device="cpu", requires_grad=grad), torch.ones(4)
    out = torch.full((4,), -1.0)
    msg = (
        "argument `a` of ferrocuda::add_out: ferrocuda kernels run on CUDA tensors, got a "
        "tensor on cpu (move it with .cuda())"
    )
    with pytest.raises(ValueError) as e:
        ft.add_out(a, b, out)
    assert str(e.value) == msg
    assert torch.equal(out, torch.full((4,), -1.0))
    # An output that requires grad is refused the same way (as detach() would read it).
    out.requires_grad_()
    with pytest.raises(ValueError, match=r"^argument `a` of ferrocuda::add_out"):
        ft.add_out(a, b, out)
    assert torch.equal(out.detach(), torch.full((4,), -1.0))
    # The functional form names its own operator.
    with pytest.raises(ValueError, match=r"^argument `a` of ferrocuda::add: .*tensor on cpu"):
        ft.add(a, b)


def test_op_kernel_called_directly() -> None:
    import warnings

    import numpy as np

    k = ferrocuda.kernels.add.op_kernel("test::add_out")
    assert k.op == "test::add_out" and k.launcher is ferrocuda.kernels.add
    # Positional arguments only, the launcher's arity.
    with pytest.raises(TypeError, match="keyword"):
        k(torch.zeros(4), torch.zeros(4), out=torch.zeros(4))
    with pytest.raises(TypeError, match=r"takes 3 argument\(s\) \(a, b, out\), got 1"):
        k(torch.zeros(4))
    # Host arrays are refused, not staged (no PerformanceWarning, nothing copied).
    h = np.zeros(4, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"^argument `a` of test::add_out: .*host array"):
            k(h, h, h)
    with pytest.raises(ValueError, match="argument `op`"):
        ferrocuda.kernels.add.op_kernel("")
    # Rebinding: only a launcher with the same name and parameters.
    with pytest.raises(ValueError, match=r"launcher `gelu` \(x, out\) cannot replace `add`"):
        k.launcher = ferrocuda.kernels.gelu
    k.launcher = ferrocuda.bundled().families["add"]
    assert k.launcher is ferrocuda.bundled().families["add"]
    with pytest.raises(TypeError):
        k.launcher = "add"  # type: ignore[assignment]


def test_derive_outputs_names_shapes_and_dtypes() -> None:
    with FakeTensorMode():
        got = ft.derive_outputs(ferrocuda.bundled(), "sum_rows", fake(6, 7))
        assert [(n, tuple(s), d) for n, s, d in got] == [("out", (6,), torch.float32)]
        got = ft.derive_outputs(
            ferrocuda.bundled(), "cumsum", fake(5, dtype=torch.int32), out_dtype=torch.int64
        )
        assert [(n, tuple(s), d) for n, s, d in got] == [("out", (5,), torch.int64)]
        # Same element type and rank, other extents: the plan is reused, the shape is new.
        for n in (3, 11, 0):
            ((_, shape, _),) = ft.derive_outputs(ferrocuda.bundled(), "gelu", fake(n, 2))
            assert tuple(shape) == (n, 2)


def test_a_rebuilt_module_with_the_same_kernels_takes_over_the_namespace(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = ferrocuda.load(write_module(tmp_path / "a", "rebuilt", {"add", "gelu"}))
    ops = ft.register(first)
    second = ferrocuda.load(write_module(tmp_path / "b", "rebuilt", {"add", "gelu"}))
    assert second is not first
    again = ft.register(second)
    # The same operators, now launching the second module's kernels: their kernels rebound.
    assert again is ops and ops.module is second
    for kernel in ops._kernels["add"]:
        assert kernel.launcher is second.families["add"]


def test_a_family_whose_kernels_disagree_is_refused(tmp_path: Path) -> None:
    man = json.loads(ferrocuda.bundled().manifest)
    man["ptx"] = "odd.ptx"
    man["kernels"] = [k for k in man["kernels"] if k["family"] == "add" and "arch" not in k]
    man.pop("parts", None)
    man["kernels"][1]["params"][2]["name"] = "result"  # one variant names its output otherwise
    (tmp_path / "odd.ptx").write_text(ferrocuda._ferrocuda._bundled_ptx())
    (tmp_path / "odd.json").write_text(json.dumps(man))
    mod = ferrocuda.load(tmp_path / "odd.json")
    with pytest.raises(ValueError, match=r"family `add`: its kernels differ"):
        ft.register(mod)
    # Nothing registered: torch has no operator in that namespace.
    assert not hasattr(torch.ops.odd, "add_out")
