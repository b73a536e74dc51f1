//! Selection among a family's kernels whose requirements differ (`launch::select`), without a
//! GPU: a kernel whose `require` conditions fail on the arrays gives way to one whose hold
//! (a narrow and a wide kernel of one layout; a contiguous kernel with a size limit beside a
//! strided one without), the layout and order rules still decide among those that hold, and
//! when none holds the choice is the one made without requirements, so that the launch's
//! check names the condition; a launcher's memory of its choices (`Target`) keys them by the
//! requirements' verdicts too, so that two launches of the same types and layouts but other
//! shapes choose apart.

use ferrocuda_abi::manifest::Manifest;
use ferrocuda_abi::DType;
use ferrocuda_host::interop::cai::ArrayDesc;
use ferrocuda_host::launch::{check_args, select, Operand};
use ferrocuda_host::launcher::Target;
use ferrocuda_host::{Arg, Module, Scalar};

#[path = "common/param.rs"]
mod manifest_records;
use manifest_records::param;

/// A kernel `name` of `family` taking `(x, out, s)` — `x` and `out` of `kind` (rank 2 for
/// views), `s` a float32 scalar — with the requirements `require` (JSON records).
fn kernel(name: &str, family: &str, kind: &str, require: &[&str]) -> String {
    let rank = if kind == "view" { 2 } else { 1 };
    format!(
        r#"{{"name": "{name}", "family": "{family}", "same_shape": [[0, 1]], "params": [{}, {}, {}], "require": [{}]}}"#,
        param("x", kind, "float32", rank, false),
        param("out", kind, "float32", rank, true),
        param("s", "scalar", "float32", 0, false),
        require.join(", ")
    )
}

/// `x.shape[1] <= n`, with the message that names the limit.
fn cols_at_most(n: usize) -> String {
    format!(
        r#"{{"lhs": {{"dim": [0, 1]}}, "op": "<=", "rhs": {{"int": {n}}}, "message": "x must have at most {n} columns"}}"#
    )
}

/// `s < 8` (a scalar's condition: not known when the kernel is chosen).
const SMALL_S: &str =
    r#"{"lhs": {"scalar": 2}, "op": "<", "rhs": {"int": 8}, "message": "s must be below 8"}"#;

/// Families:
/// * `rows`: `narrow` (at most 128 columns) then `wide` (at most 256), both on views, both
///   under the family's own limit of 256 columns first (so that a launch no kernel takes is
///   told the family's limit);
/// * `sized`: `dense` on slices with at most 1000 elements, `any` on views without a limit;
/// * `scaled`: `small_s` (a scalar's condition) then `plain`, both on views.
fn module() -> Module {
    let (c128, c256) = (cols_at_most(128), cols_at_most(256));
    let len_at_most = r#"{"lhs": {"len": 0}, "op": "<=", "rhs": {"int": 1000}, "message": "x must have at most 1000 elements"}"#;
    let kernels = [
        kernel("narrow", "rows", "view", &[&c256, &c128]),
        kernel("wide", "rows", "view", &[&c256]),
        kernel("dense", "sized", "slice", &[len_at_most]),
        kernel("any", "sized", "view", &[]),
        kernel("small_s", "scaled", "view", &[SMALL_S]),
        kernel("plain", "scaled", "view", &[]),
    ];
    let json = format!(
        r#"{{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": [{}]}}"#,
        kernels.join(",\n")
    );
    Module::new(".version 7.0\n", Manifest::from_json(&json).unwrap()).unwrap()
}

const P: u64 = 0x7f00_0010_0000;

/// A C-order float32 array of `shape` at `ptr`.
fn f32s(shape: &[usize], ptr: u64) -> ArrayDesc {
    ArrayDesc::from_parts(DType::F32, shape, None, ptr, false, None).unwrap()
}

/// `(x, out, s)` of `shape`.
fn arrays(shape: &[usize]) -> (ArrayDesc, ArrayDesc) {
    (f32s(shape, P), f32s(shape, P + 0x100_0000))
}

/// The kernel of `family` for `x`, `out` of `shape` and `s`, by `Module::select`, by the rule
/// on operands (which must agree) — and its argument check's verdict.
fn chosen(m: &Module, family: &str, shape: &[usize], s: f32) -> (String, Result<(), String>) {
    let (x, out) = arrays(shape);
    let args = [
        Arg::Array(&x),
        Arg::Array(&out),
        Arg::Scalar(Scalar::F32(s)),
    ];
    let k = m.select(family, &args).unwrap();
    let ops: Vec<Operand<'_>> = args.iter().map(Operand::from).collect();
    assert_eq!(select(m.family(family), &ops).unwrap().name(), k.name());
    let checked = check_args(k.signature(), &args).map_err(|e| e.to_string());
    (k.name().to_owned(), checked)
}

#[test]
fn a_kernel_whose_requirements_fail_gives_way() {
    let m = module();
    // Both hold: the first of equals.
    assert_eq!(
        chosen(&m, "rows", &[4, 100], 0.0),
        ("narrow".into(), Ok(()))
    );
    assert_eq!(
        chosen(&m, "rows", &[4, 128], 0.0),
        ("narrow".into(), Ok(()))
    );
    // The narrow kernel's limit fails: the wide one, whose hold.
    assert_eq!(chosen(&m, "rows", &[4, 129], 0.0), ("wide".into(), Ok(())));
    assert_eq!(chosen(&m, "rows", &[1, 256], 0.0), ("wide".into(), Ok(())));
}

#[test]
fn when_none_holds_the_check_names_the_first_failing_condition() {
    let m = module();
    // Neither holds: the choice without requirements (the first of equals), and its check
    // names the family's limit, the first condition that fails.
    let (name, checked) = chosen(&m, "rows", &[4, 300], 0.0);
    assert_eq!(name, "narrow");
    let e = checked.unwrap_err();
    assert!(e.contains("at most 256 columns"), "{e}");
    assert!(e.contains("x.shape[1] = 300"), "{e}");
}

#[test]
fn requirements_come_before_layouts() {
    let m = module();
    // Contiguous and within the limit: the contiguous kernel (it demands more of the layout).
    assert_eq!(
        chosen(&m, "sized", &[10, 100], 0.0),
        ("dense".into(), Ok(()))
    );
    // Contiguous but beyond it: the strided kernel, which takes contiguous arrays too.
    assert_eq!(chosen(&m, "sized", &[10, 101], 0.0), ("any".into(), Ok(())));
}

#[test]
fn a_scalar_condition_does_not_choose() {
    let m = module();
    // Scalars are not known when the kernel is chosen: `small_s` stays the choice, and the
    // launch's check refuses the scalar.
    assert_eq!(
        chosen(&m, "scaled", &[4, 4], 1.0),
        ("small_s".into(), Ok(()))
    );
    let (name, checked) = chosen(&m, "scaled", &[4, 4], 9.0);
    assert_eq!(name, "small_s");
    assert!(checked.unwrap_err().contains("s must be below 8"));
}

#[test]
fn a_launcher_remembers_its_choices_by_the_requirements_too() {
    let m = module();
    let rows = Target::family("rows".into(), m.family("rows").collect()).unwrap();
    // Alternating shapes of the same types and layouts (one key without the requirements'
    // verdicts), several rounds: each launch chooses by its own shape.
    for _ in 0..3 {
        for (cols, want) in [
            (100, "narrow"),
            (200, "wide"),
            (64, "narrow"),
            (256, "wide"),
        ] {
            let (x, out) = arrays(&[2, cols]);
            let ops = [Operand::Array(&x), Operand::Array(&out), Operand::Scalar];
            assert_eq!(rows.choose(&ops).unwrap().name(), want, "{cols} columns");
        }
    }
    // Kernels that differ only in a scalar's condition: the verdicts (a scalar's is not
    // known) agree, and the launcher of `scaled` chooses the first of equals.
    let scaled = Target::family("scaled".into(), m.family("scaled").collect()).unwrap();
    let (x, out) = arrays(&[3, 3]);
    let ops = [Operand::Array(&x), Operand::Array(&out), Operand::Scalar];
    assert_eq!(scaled.choose(&ops).unwrap().name(), "small_s");
}
