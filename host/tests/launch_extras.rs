//! Kernel extras on the host, without a GPU: scratch parameters left out of the caller's
//! signature, requirements checked before any driver call (errors naming the argument),
//! zero-filled outputs refused when not dense, and the per-launch workspace plan.

use ferrocuda_abi::manifest::Manifest;
use ferrocuda_abi::DType;
use ferrocuda_host::extras::ScratchPlan;
use ferrocuda_host::interop::cai::ArrayDesc;
use ferrocuda_host::launch::check_args;
use ferrocuda_host::{Arg, ErrorKind, LaunchOptions, Module, Scalar};

/// `hist(x: Slice<f32>, ws: Scratch<u32>, bins: AtomicSlice<i64>, lo: f64, hi: f64, t:
/// Scratch<u64>)` with `zero(bins)`, `scratch(ws = 2 * blocks + 1, t = 3 *
/// x.len().div_ceil(4096) + 1)`, `require(bins.len() > 0, "at least one bin")`,
/// `require(lo < hi)`, `require(finite(hi))`; and `mm(a: View<f32, 2>, b: View<f32, 2>, c:
/// ViewMut<f32, 2>)` with `require(a.shape[1] == b.shape[0])`, `require(c.ptr() != a.ptr())`.
fn module() -> Module {
    let json = r#"{
      "format": 1, "arch": "sm_80", "ptx": "k.ptx",
      "kernels": [
        {"name": "hist", "family": "hist", "params": [
          {"name": "x", "kind": "slice", "dtype": "float32", "rank": 1, "mutable": false, "size": 16, "align": 8},
          {"name": "ws", "kind": "scratch", "dtype": "uint32", "rank": 1, "mutable": true, "size": 16, "align": 8},
          {"name": "bins", "kind": "slice", "dtype": "int64", "rank": 1, "mutable": true, "size": 16, "align": 8},
          {"name": "lo", "kind": "scalar", "dtype": "float64", "rank": 0, "mutable": false, "size": 8, "align": 8},
          {"name": "hi", "kind": "scalar", "dtype": "float64", "rank": 0, "mutable": false, "size": 8, "align": 8},
          {"name": "t", "kind": "scratch", "dtype": "uint64", "rank": 1, "mutable": true, "size": 16, "align": 8}],
         "zero": [2],
         "scratch": [{"param": 1, "per_block": 2, "constant": 1},
                     {"param": 5, "constant": 1, "of": 0, "mult": 3, "div": 4096}],
         "require": [
           {"lhs": {"len": 2}, "op": ">", "rhs": {"int": 0}, "message": "at least one bin"},
           {"lhs": {"scalar": 3}, "op": "<", "rhs": {"scalar": 4}},
           {"lhs": {"scalar": 4}, "op": "finite", "rhs": {"int": 0}}]},
        {"name": "mm", "family": "mm", "params": [
          {"name": "a", "kind": "view", "dtype": "float32", "rank": 2, "mutable": false, "size": 40, "align": 8},
          {"name": "b", "kind": "view", "dtype": "float32", "rank": 2, "mutable": false, "size": 40, "align": 8},
          {"name": "c", "kind": "view", "dtype": "float32", "rank": 2, "mutable": true, "size": 40, "align": 8}],
         "require": [
           {"lhs": {"dim": [0, 1]}, "op": "==", "rhs": {"dim": [1, 0]}, "message": "inner dimensions"},
           {"lhs": {"ptr": 2}, "op": "!=", "rhs": {"ptr": 0}}]}
      ]}"#;
    Module::new(".version 7.0\n", Manifest::from_json(json).unwrap()).unwrap()
}

fn arr(dtype: DType, shape: &[usize], strides: Option<&[isize]>, ptr: u64) -> ArrayDesc {
    ArrayDesc::from_parts(dtype, shape, strides, ptr, false, None).unwrap()
}

#[test]
fn scratch_parameters_are_not_arguments() {
    let m = module();
    let sig = m.kernel("hist").unwrap().signature();
    let names: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["x", "bins", "lo", "hi"]);
    assert_eq!(sig.entry_params, 6);
    let entries: Vec<usize> = sig.params.iter().map(|p| p.entry).collect();
    assert_eq!(entries, [0, 2, 3, 4]);
    let ws: Vec<(&str, usize)> = sig
        .scratch
        .iter()
        .map(|s| (s.name.as_str(), s.entry))
        .collect();
    assert_eq!(ws, [("ws", 1), ("t", 5)]);
    // The scratch formula's `of` is remapped to the caller's parameter `x` (index 0).
    assert_eq!(sig.scratch[1].len.of, 0);
    assert_eq!(sig.zero, [1]);
    assert!(sig.has_extras());
    assert!(!m.kernel("mm").unwrap().signature().has_extras());
    let texts: Vec<&str> = sig.require.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(texts, ["bins.len() > 0", "lo < hi", "finite(hi)"]);
}

#[test]
fn requirements_are_checked_before_the_driver() {
    let m = module();
    let hist = m.kernel("hist").unwrap();
    let sig = hist.signature();
    let x = arr(DType::F32, &[100], None, 0x10000);
    let bins = arr(DType::I64, &[10], None, 0x20000);
    let none = arr(DType::I64, &[0], None, 0);
    let f = |v: f64| Arg::Scalar(Scalar::F64(v));
    check_args(sig, &[Arg::Array(&x), Arg::Array(&bins), f(0.0), f(1.0)]).unwrap();
    let e = check_args(sig, &[Arg::Array(&x), Arg::Array(&none), f(0.0), f(1.0)]).unwrap_err();
    assert_eq!((e.kind(), e.arg()), (ErrorKind::Value, Some("bins")), "{e}");
    assert!(
        e.to_string()
            .contains("requires bins.len() > 0 (at least one bin); got bins.len() = 0"),
        "{e}"
    );
    for (lo, hi) in [(1.0, 1.0), (2.0, 1.0), (f64::NAN, 1.0)] {
        let e = check_args(sig, &[Arg::Array(&x), Arg::Array(&bins), f(lo), f(hi)]).unwrap_err();
        assert_eq!(e.arg(), Some("lo"), "{e}");
        assert!(e.to_string().contains("requires lo < hi"), "{e}");
    }
    let e = check_args(
        sig,
        &[Arg::Array(&x), Arg::Array(&bins), f(0.0), f(f64::INFINITY)],
    )
    .unwrap_err();
    assert_eq!(e.arg(), Some("hi"), "{e}");
    assert!(e.to_string().contains("finite(hi); got hi = inf"), "{e}");
    // prepare refuses them too, before it would need a driver.
    let e = hist
        .prepare(
            &[Arg::Array(&x), Arg::Array(&none), f(0.0), f(1.0)],
            &LaunchOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.arg(), Some("bins"), "{e}");
    // Scratch parameters cannot be passed: the caller's arity excludes them.
    let e = check_args(
        sig,
        &[
            Arg::Array(&x),
            Arg::Array(&bins),
            Arg::Array(&bins),
            f(0.0),
            f(1.0),
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("takes 4 argument(s)"), "{e}");

    let mm = m.kernel("mm").unwrap().signature();
    let a = arr(DType::F32, &[4, 3], None, 0x1000);
    let b = arr(DType::F32, &[5, 6], None, 0x2000);
    let c = arr(DType::F32, &[4, 6], None, 0x3000);
    let e = check_args(mm, &[Arg::Array(&a), Arg::Array(&b), Arg::Array(&c)]).unwrap_err();
    assert_eq!(e.arg(), Some("a"), "{e}");
    assert!(
        e.to_string()
            .contains("requires a.shape[1] == b.shape[0] (inner dimensions); got a.shape[1] = 3, b.shape[0] = 5"),
        "{e}"
    );
    let b = arr(DType::F32, &[3, 6], None, 0x2000);
    check_args(mm, &[Arg::Array(&a), Arg::Array(&b), Arg::Array(&c)]).unwrap();
    // c is a itself (the same view passes the aliasing rule): refused by the requirement.
    let sq = arr(DType::F32, &[3, 3], None, 0x1000);
    let e = check_args(mm, &[Arg::Array(&sq), Arg::Array(&sq), Arg::Array(&sq)]).unwrap_err();
    assert_eq!(e.arg(), Some("c"), "{e}");
}

#[test]
fn zeroed_outputs_must_be_dense() {
    let m = module();
    let sig = m.kernel("hist").unwrap().signature();
    let x = arr(DType::F32, &[100], None, 0x10000);
    let f = |v: f64| Arg::Scalar(Scalar::F64(v));
    // A contiguous 2-D array is fine (a slice parameter takes any rank in C order) ...
    let dense = arr(DType::I64, &[2, 5], None, 0x20000);
    check_args(sig, &[Arg::Array(&x), Arg::Array(&dense), f(0.0), f(1.0)]).unwrap();
    // ... and a strided one is refused (as every slice is, for not being C-contiguous).
    let strided = arr(DType::I64, &[5], Some(&[16]), 0x20000);
    let e = check_args(sig, &[Arg::Array(&x), Arg::Array(&strided), f(0.0), f(1.0)]).unwrap_err();
    assert_eq!(e.arg(), Some("bins"), "{e}");
}

#[test]
fn workspace_plan() {
    let m = module();
    let sig = m.kernel("hist").unwrap().signature();
    let x = arr(DType::F32, &[4097], None, 0x10000);
    let bins = arr(DType::I64, &[10], None, 0x20000);
    let f = |v: f64| Arg::Scalar(Scalar::F64(v));
    let args = [Arg::Array(&x), Arg::Array(&bins), f(0.0), f(1.0)];
    let plan = ScratchPlan::new(sig, &args, 100).unwrap();
    // ws: 2 * 100 + 1 = 201 u32 at 0; t: 3 * ceil(4097 / 4096) + 1 = 7 u64 at 1024 (256-byte
    // aligned after 804 bytes).
    assert_eq!(plan.parts(), [(0, 201), (1024, 7)]);
    assert_eq!(plan.bytes(), 1024 + 56);
    let empty = arr(DType::F32, &[0], None, 0);
    let args = [Arg::Array(&empty), Arg::Array(&bins), f(0.0), f(1.0)];
    let plan = ScratchPlan::new(sig, &args, 1).unwrap();
    assert_eq!(plan.parts(), [(0, 3), (256, 1)]);
    assert_eq!(ScratchPlan::EMPTY.bytes(), 0);
}

#[test]
fn manifests_with_bad_extras_are_refused() {
    // zero() of a read-only array; a scratch parameter without a length; a requirement on a
    // missing axis: each refused when the manifest is read.
    let base = |extra: &str, params: &str| {
        format!(
            r#"{{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": [
              {{"name": "k", "family": "k", "params": [{params}] {extra}}}]}}"#
        )
    };
    let slice = r#"{"name": "x", "kind": "slice", "dtype": "float32", "rank": 1, "mutable": false, "size": 16, "align": 8}"#;
    let scratch = r#"{"name": "w", "kind": "scratch", "dtype": "uint32", "rank": 1, "mutable": true, "size": 16, "align": 8}"#;
    let e = Manifest::from_json(&base(r#", "zero": [0]"#, slice)).unwrap_err();
    assert!(e.contains("zero(x)"), "{e}");
    let e = Manifest::from_json(&base("", &format!("{slice}, {scratch}"))).unwrap_err();
    assert!(e.contains("`w`"), "{e}");
    // A view's rank is fixed: axis 1 of a rank-1 view does not exist. (A slice takes arrays
    // of any rank: the same rule on a slice is checked per launch, below.)
    let view = r#"{"name": "x", "kind": "view", "dtype": "float32", "rank": 1, "mutable": false, "size": 24, "align": 8}"#;
    let dim1 = r#", "require": [{"lhs": {"dim": [0, 1]}, "op": "==", "rhs": {"int": 1}}]"#;
    let e = Manifest::from_json(&base(dim1, view)).unwrap_err();
    assert!(e.contains("requirement"), "{e}");
    Manifest::from_json(&base(dim1, slice)).unwrap();
}

/// `rows(x: Slice<f32>, out: SliceMut<f32>, cols: u32)` with `require(x.shape[1] == cols)`
/// and `require(out.shape[0] == x.shape[0])`: rules on the axes of C-contiguous arrays that
/// the kernel sees flat, checked against the arrays passed.
#[test]
fn requirements_read_the_axes_of_slice_arguments() {
    let json = r#"{
      "format": 1, "arch": "sm_80", "ptx": "k.ptx",
      "kernels": [
        {"name": "rows", "family": "rows", "params": [
          {"name": "x", "kind": "slice", "dtype": "float32", "rank": 1, "mutable": false, "size": 16, "align": 8},
          {"name": "out", "kind": "slice", "dtype": "float32", "rank": 1, "mutable": true, "size": 16, "align": 8},
          {"name": "cols", "kind": "scalar", "dtype": "uint32", "rank": 0, "mutable": false, "size": 4, "align": 4}],
         "require": [
           {"lhs": {"dim": [0, 1]}, "op": "==", "rhs": {"scalar": 2}, "message": "cols is the row length"},
           {"lhs": {"dim": [1, 0]}, "op": "==", "rhs": {"dim": [0, 0]}}]}
      ]}"#;
    let m = Module::new(".version 7.0\n", Manifest::from_json(json).unwrap()).unwrap();
    let sig = m.kernel("rows").unwrap().signature();
    let cols = |v: u32| Arg::Scalar(Scalar::U32(v));
    let x = arr(DType::F32, &[7, 33], None, 0x1000);
    let out = arr(DType::F32, &[7], None, 0x9000);
    check_args(sig, &[Arg::Array(&x), Arg::Array(&out), cols(33)]).unwrap();
    // A 3-D x: axis 1 is still its second extent.
    let x3 = arr(DType::F32, &[7, 33, 2], None, 0x1000);
    check_args(sig, &[Arg::Array(&x3), Arg::Array(&out), cols(33)]).unwrap();
    for bad in [32, 34, 7 * 33, 0] {
        let e = check_args(sig, &[Arg::Array(&x), Arg::Array(&out), cols(bad)]).unwrap_err();
        assert_eq!((e.kind(), e.arg()), (ErrorKind::Value, Some("x")), "{e}");
        let want = format!(
            "requires x.shape[1] == cols (cols is the row length); got x.shape[1] = 33, cols = {bad}"
        );
        assert!(e.to_string().contains(&want), "{e}");
    }
    // The same elements as one flat run: x has no axis 1, which the error says (rather than
    // comparing a made-up extent).
    let flat = arr(DType::F32, &[7 * 33], None, 0x1000);
    let e = check_args(sig, &[Arg::Array(&flat), Arg::Array(&out), cols(33)]).unwrap_err();
    assert_eq!((e.kind(), e.arg()), (ErrorKind::Value, Some("x")), "{e}");
    assert!(
        e.to_string().contains("reads axis 1 of `x`; got an array of shape [231] (1 axis): pass `x` with at least 2 axes"),
        "{e}"
    );
    // The second rule: out's first extent against x's, with out named.
    let short = arr(DType::F32, &[6], None, 0x9000);
    let e = check_args(sig, &[Arg::Array(&x), Arg::Array(&short), cols(33)]).unwrap_err();
    assert_eq!(e.arg(), Some("out"), "{e}");
    assert!(
        e.to_string()
            .contains("got out.shape[0] = 6, x.shape[0] = 7"),
        "{e}"
    );
    // A 0-d array has no axis 0.
    let scalar_out = arr(DType::F32, &[], None, 0x9000);
    let e = check_args(sig, &[Arg::Array(&x), Arg::Array(&scalar_out), cols(33)]).unwrap_err();
    assert_eq!(e.arg(), Some("out"), "{e}");
    assert!(e.to_string().contains("reads axis 0 of `out`"), "{e}");
}
