//! The launch's argument checks and its first phase, through the public API and without a
//! GPU: a module made from a manifest (no driver needed until a kernel loads), arguments
//! checked against it — host arrays ([`Arg::Host`]) as well — and `prepare` reporting argument
//! errors before it needs the driver.

use ferrocuda_abi::manifest::Manifest;
use ferrocuda_abi::DType;
use ferrocuda_host::interop::cai::ArrayDesc;
use ferrocuda_host::launch::check_args;
use ferrocuda_host::{Arg, ArgList, ErrorKind, LaunchOptions, Module, Scalar};

/// `add(a: Slice<f32>, b: Slice<f32>, out: SliceMut<f32>)` (same shapes) and
/// `scale(alpha: f32, v: ViewMut<f32, 2>)`, as the builder writes them.
fn module() -> Module {
    let json = r#"{
      "format": 1, "arch": "sm_80", "ptx": "k.ptx",
      "kernels": [
        {"name": "add", "family": "add", "same_shape": [[0, 1, 2]], "params": [
          {"name": "a", "kind": "slice", "dtype": "float32", "rank": 1, "mutable": false, "size": 16, "align": 8},
          {"name": "b", "kind": "slice", "dtype": "float32", "rank": 1, "mutable": false, "size": 16, "align": 8},
          {"name": "out", "kind": "slice", "dtype": "float32", "rank": 1, "mutable": true, "size": 16, "align": 8}]},
        {"name": "scale", "family": "scale", "params": [
          {"name": "alpha", "kind": "scalar", "dtype": "float32", "rank": 0, "mutable": false, "size": 4, "align": 4},
          {"name": "v", "kind": "view", "dtype": "float32", "rank": 2, "mutable": true, "size": 40, "align": 8}]}
      ]}"#;
    Module::new(".version 7.0\n", Manifest::from_json(json).unwrap()).unwrap()
}

fn f32s(n: usize, ptr: u64) -> ArrayDesc {
    ArrayDesc::from_parts(DType::F32, &[n], None, ptr, false, None).unwrap()
}

#[test]
fn host_arrays_are_checked_except_for_aliasing() {
    let m = module();
    let add = m.kernel("add").unwrap();
    let sig = add.signature();
    let a = f32s(8, 0x10000);
    // The same host memory as input and output: staged as separate copies, so no aliasing
    // error; as device arrays the partial overlap is refused.
    let shifted = f32s(8, 0x10004);
    check_args(sig, &[Arg::Host(&a), Arg::Host(&a), Arg::Host(&shifted)]).unwrap();
    let e = check_args(sig, &[Arg::Array(&a), Arg::Array(&a), Arg::Array(&shifted)]).unwrap_err();
    assert!(e.to_string().contains("overlaps"), "{e}");
    // Element types, shapes and read-only outputs are checked for host arrays too.
    let ints = ArrayDesc::from_parts(DType::I32, &[8], None, 0x20000, false, None).unwrap();
    let e = check_args(sig, &[Arg::Host(&ints), Arg::Host(&a), Arg::Host(&a)]).unwrap_err();
    assert_eq!((e.kind(), e.arg()), (ErrorKind::Type, Some("a")), "{e}");
    let short = f32s(7, 0x30000);
    let e = check_args(sig, &[Arg::Host(&a), Arg::Host(&a), Arg::Host(&short)]).unwrap_err();
    assert!(e.to_string().contains("same shape"), "{e}");
    let ro = ArrayDesc::from_parts(DType::F32, &[8], None, 0x40000, true, None).unwrap();
    let e = check_args(sig, &[Arg::Host(&a), Arg::Host(&a), Arg::Host(&ro)]).unwrap_err();
    assert_eq!(e.key(), Some("data"), "{e}");
}

#[test]
fn view_strides_follow_the_layout_rule() {
    let m = module();
    let sig = m.kernel("scale").unwrap().signature();
    let alpha = Arg::Scalar(Scalar::F32(2.0));
    // A transposed (3, 2) view: element strides, any order.
    let t =
        ArrayDesc::from_parts(DType::F32, &[3, 2], Some(&[4, 12]), 0x1000, false, None).unwrap();
    check_args(sig, &[alpha, Arg::Array(&t)]).unwrap();
    // A byte stride that moves but is not a whole element.
    let odd =
        ArrayDesc::from_parts(DType::F32, &[3, 2], Some(&[6, 24]), 0x1000, false, None).unwrap();
    let e = check_args(sig, &[alpha, Arg::Array(&odd)]).unwrap_err();
    assert_eq!(
        (e.kind(), e.key(), e.arg()),
        (ErrorKind::Value, Some("strides"), Some("v"))
    );
    assert!(
        e.to_string().contains("not a multiple of the item size"),
        "{e}"
    );
    // ... which an empty array may carry (nothing is ever addressed).
    let empty = ArrayDesc::from_parts(DType::F32, &[0, 2], Some(&[6, 24]), 0, false, None).unwrap();
    check_args(sig, &[alpha, Arg::Array(&empty)]).unwrap();
    // Wrong rank, scalar type.
    let e = check_args(sig, &[alpha, Arg::Array(&f32s(6, 0x1000))]).unwrap_err();
    assert_eq!((e.kind(), e.arg()), (ErrorKind::Type, Some("v")), "{e}");
    let e = check_args(sig, &[Arg::Scalar(Scalar::F64(2.0)), Arg::Array(&t)]).unwrap_err();
    assert_eq!((e.kind(), e.arg()), (ErrorKind::Type, Some("alpha")), "{e}");
}

#[test]
fn prepare_reports_argument_errors_before_needing_a_driver() {
    let m = module();
    let add = m.kernel("add").unwrap();
    let a = f32s(8, 0x10000);
    let ints = ArrayDesc::from_parts(DType::I32, &[8], None, 0x20000, false, None).unwrap();
    let e = add
        .prepare(
            &[Arg::Array(&ints), Arg::Array(&a), Arg::Array(&a)],
            &LaunchOptions::default(),
        )
        .unwrap_err();
    assert_eq!((e.kind(), e.arg()), (ErrorKind::Type, Some("a")), "{e}");
    let e = add
        .prepare(&[Arg::Array(&a)], &LaunchOptions::default())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type, "{e}");
    // Valid arguments: what remains is the driver (absent on machines without a GPU).
    let r = add.prepare(
        &[Arg::Array(&a), Arg::Array(&a), Arg::Array(&a)],
        &LaunchOptions::default(),
    );
    if !ferrocuda_host::driver::is_available() {
        assert_eq!(r.unwrap_err().kind(), ErrorKind::NoDriver);
    }
}

#[test]
fn arg_lists_hold_at_most_max_params() {
    let mut l = ArgList::new();
    for _ in 0..ferrocuda_host::module::MAX_PARAMS {
        l.push(Arg::Scalar(Scalar::U8(1))).unwrap();
    }
    assert_eq!(l.len(), ferrocuda_host::module::MAX_PARAMS);
    let e = l.push(Arg::Scalar(Scalar::U8(1))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
}

#[test]
fn bind_refuses_host_arrays_and_reports_argument_errors_before_needing_a_driver() {
    let m = module();
    let add = m.kernel("add").unwrap();
    let opts = LaunchOptions::default();
    let a = f32s(8, 0x10000);
    let e = add
        .bind(&[Arg::Array(&a), Arg::Host(&a), Arg::Array(&a)], &opts)
        .unwrap_err();
    assert_eq!((e.kind(), e.arg()), (ErrorKind::Type, Some("b")), "{e}");
    assert!(e.to_string().contains("cannot be bound"), "{e}");
    // The checks are prepare's: the same error for the same arguments.
    let ints = ArrayDesc::from_parts(DType::I32, &[8], None, 0x20000, false, None).unwrap();
    let args = [Arg::Array(&ints), Arg::Array(&a), Arg::Array(&a)];
    let bound = add.bind(&args, &opts).unwrap_err();
    let prepared = add.prepare(&args, &opts).unwrap_err();
    assert_eq!(bound.to_string(), prepared.to_string());
    assert_eq!((bound.kind(), bound.arg()), (ErrorKind::Type, Some("a")));
    let r = add.bind(&[Arg::Array(&a), Arg::Array(&a), Arg::Array(&a)], &opts);
    if !ferrocuda_host::driver::is_available() {
        assert_eq!(r.unwrap_err().kind(), ErrorKind::NoDriver);
    }
}
