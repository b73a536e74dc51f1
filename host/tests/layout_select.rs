//! The selection rule (`launch::select`) on array descriptions, without a GPU: which kernel of
//! a family with a contiguous and strided variants runs for contiguous, stepped, reversed,
//! transposed, broadcast and misaligned arrays; how a kernel's typed launcher finds its
//! layout variant; a launcher's [`Target`] (the one call that counts the arguments, chooses
//! and names the variants when none fits); and that what the selection lets through is still
//! checked (outputs whose elements overlap, partial overlaps, strides that split elements).

use ferrocuda_abi::manifest::Manifest;
use ferrocuda_abi::DType;
use ferrocuda_host::interop::cai::ArrayDesc;
use ferrocuda_host::launch::{check_args, select, Operand, SelectionKey, SelectionMemo};
use ferrocuda_host::launcher::Target;
use ferrocuda_host::{Arg, ErrorKind, Kernel, Module, Scalar};

#[path = "common/param.rs"]
mod manifest_records;
use manifest_records::param;

/// `add_<t>` on slices and `add_<t>_<n>d` on views for float32 and float64, `saxpy_f32`
/// (slices) and `saxpy_f32_2d` (views) — the bundled families' shapes — and `scale`, whose
/// strided kernel comes *before* its contiguous one in the manifest.
fn module() -> Module {
    let mut kernels = Vec::new();
    let add = |name: String, kind: &str, dtype: &str, rank: usize| {
        format!(
            r#"{{"name": "{name}", "family": "add", "same_shape": [[0, 1, 2]], "params": [{}, {}, {}]}}"#,
            param("a", kind, dtype, rank, false),
            param("b", kind, dtype, rank, false),
            param("out", kind, dtype, rank, true)
        )
    };
    for (t, dtype) in [("f32", "float32"), ("f64", "float64")] {
        kernels.push(add(format!("add_{t}"), "slice", dtype, 1));
        for n in 1..=4 {
            kernels.push(add(format!("add_{t}_{n}d"), "view", dtype, n));
        }
    }
    let axpy = |name: &str, family: &str, kind: &str, rank: usize| {
        format!(
            r#"{{"name": "{name}", "family": "{family}", "same_shape": [[1, 2]], "params": [{}, {}, {}]}}"#,
            param("alpha", "scalar", "float32", 0, false),
            param("x", kind, "float32", rank, false),
            param("y", kind, "float32", rank, true)
        )
    };
    kernels.push(axpy("saxpy_f32", "saxpy", "slice", 1));
    kernels.push(axpy("saxpy_f32_2d", "saxpy", "view", 2));
    kernels.push(axpy("scale_a_strided", "scale", "view", 1));
    kernels.push(axpy("scale_b_contiguous", "scale", "slice", 1));
    let json = format!(
        r#"{{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": [{}]}}"#,
        kernels.join(",\n")
    );
    Module::new(".version 7.0\n", Manifest::from_json(&json).unwrap()).unwrap()
}

const P: u64 = 0x7f00_0010_0000;

/// A float32 array of `shape` with byte strides `strides` (`None`: C order) at `ptr`.
fn f32s(shape: &[usize], strides: Option<&[isize]>, ptr: u64) -> ArrayDesc {
    ArrayDesc::from_parts(DType::F32, shape, strides, ptr, false, None).unwrap()
}

/// The kernel of `family` for arrays `a`, `b` and `out`.
fn chosen<'m>(m: &'m Module, a: &ArrayDesc, b: &ArrayDesc, out: &ArrayDesc) -> Kernel<'m> {
    let args = [Arg::Array(a), Arg::Array(b), Arg::Array(out)];
    let k = m.select("add", &args).unwrap();
    // Module::select and the rule on operands agree.
    let ops: Vec<Operand<'_>> = args.iter().map(Operand::from).collect();
    assert_eq!(select(m.family("add"), &ops).unwrap().name(), k.name());
    k
}

#[test]
fn contiguous_arrays_run_the_contiguous_kernel() {
    let m = module();
    let (a, b, out) = (
        f32s(&[1000], None, P),
        f32s(&[1000], None, P + 0x10000),
        f32s(&[1000], None, P + 0x20000),
    );
    assert_eq!(chosen(&m, &a, &b, &out).name(), "add_f32");
    // Any rank: slices take C-contiguous arrays of every rank (5-D too).
    let c = |ptr| f32s(&[2, 3, 4, 5, 6], None, ptr);
    assert_eq!(
        chosen(&m, &c(P), &c(P + 0x10000), &c(P + 0x20000)).name(),
        "add_f32"
    );
    // float64 arrays: the float64 kernel.
    let k = select_add(&m, DType::F64).unwrap();
    assert_eq!(k.name(), "add_f64");
    // Misaligned for 16-byte vectors (one element in), still contiguous: the contiguous
    // kernel, which splits off a scalar head.
    let (a1, o1) = (f32s(&[999], None, P + 4), f32s(&[999], None, P + 0x20008));
    assert_eq!(chosen(&m, &a1, &b_of(999), &o1).name(), "add_f32");
    // Extent-1 axes may have any stride and stay contiguous.
    let col = f32s(&[7, 1], Some(&[4, 1234]), P);
    let k = chosen(
        &m,
        &col,
        &f32s(&[7, 1], None, P + 0x10000),
        &f32s(&[7, 1], None, P + 0x20000),
    );
    assert_eq!(k.name(), "add_f32");
}

/// The launch's argument check of kernel `k` on arrays `a`, `b`, `out`.
fn check3(
    k: &Kernel<'_>,
    a: &ArrayDesc,
    b: &ArrayDesc,
    out: &ArrayDesc,
) -> ferrocuda_host::Result<()> {
    check_args(
        k.signature(),
        &[Arg::Array(a), Arg::Array(b), Arg::Array(out)],
    )
}

/// The kernel of `add` for three contiguous 1-D arrays of `dtype`.
fn select_add(m: &Module, dtype: DType) -> ferrocuda_host::Result<Kernel<'_>> {
    let d = |ptr| ArrayDesc::from_parts(dtype, &[8], None, ptr, false, None).unwrap();
    let (a, b, out) = (d(P), d(P + 64), d(P + 128));
    m.select("add", &[Arg::Array(&a), Arg::Array(&b), Arg::Array(&out)])
}

fn b_of(n: usize) -> ArrayDesc {
    f32s(&[n], None, P + 0x10000)
}

#[test]
fn stepped_reversed_and_transposed_arrays_run_a_strided_kernel() {
    let m = module();
    let out = f32s(&[500], None, P + 0x20000);
    // a[::2]
    let stepped = f32s(&[500], Some(&[8]), P);
    assert_eq!(chosen(&m, &stepped, &b_of(500), &out).name(), "add_f32_1d");
    // b[::-1]: the pointer is the last element's.
    let reversed = f32s(&[500], Some(&[-4]), P + 0x10000 + 499 * 4);
    assert_eq!(
        chosen(&m, &f32s(&[500], None, P), &reversed, &out).name(),
        "add_f32_1d"
    );
    // out[::3]: a stepped output is fine (its elements are distinct).
    let wide = f32s(&[500], Some(&[12]), P + 0x20000);
    let k = chosen(&m, &f32s(&[500], None, P), &b_of(500), &wide);
    assert_eq!(k.name(), "add_f32_1d");
    check3(&k, &stepped, &reversed, &wide).unwrap();
    // A transposed 3-D input.
    let t = f32s(&[4, 3, 2], Some(&[4, 16, 48]), P);
    let c = |ptr| f32s(&[4, 3, 2], None, ptr);
    assert_eq!(
        chosen(&m, &t, &c(P + 0x10000), &c(P + 0x20000)).name(),
        "add_f32_3d"
    );
    // One non-contiguous array is enough: every argument goes to the strided kernel.
    assert_eq!(chosen(&m, &c(P), &c(P + 0x10000), &t).name(), "add_f32_3d");
}

#[test]
fn broadcast_inputs_run_a_strided_kernel_and_broadcast_outputs_are_refused() {
    let m = module();
    // cupy.broadcast_to(row, (6, 5)): the full shape, stride 0 on the first axis.
    let row = f32s(&[6, 5], Some(&[0, 4]), P);
    let c = |ptr| f32s(&[6, 5], None, ptr);
    let k = chosen(&m, &row, &c(P + 0x10000), &c(P + 0x20000));
    assert_eq!(k.name(), "add_f32_2d");
    check3(&k, &row, &c(P + 0x10000), &c(P + 0x20000)).unwrap();
    // A scalar broadcast to 1-D.
    let one = f32s(&[64], Some(&[0]), P);
    assert_eq!(
        chosen(&m, &one, &b_of(64), &f32s(&[64], None, P + 0x20000)).name(),
        "add_f32_1d"
    );
    // The same layout as an output: the strided kernel is chosen, and its argument check
    // refuses the output whose elements share addresses.
    let k = chosen(&m, &c(P + 0x10000), &c(P + 0x20000), &row);
    assert_eq!(k.name(), "add_f32_2d");
    let e = check3(&k, &c(P + 0x10000), &c(P + 0x20000), &row).unwrap_err();
    assert_eq!((e.kind(), e.arg()), (ErrorKind::Value, Some("out")), "{e}");
    assert!(e.to_string().contains("overlapping elements"), "{e}");
    // A broadcast input overlapping the output is refused too.
    let over = f32s(&[6, 5], Some(&[0, 4]), P + 0x20000);
    let e = check3(&k, &over, &c(P + 0x10000), &c(P + 0x20000)).unwrap_err();
    assert!(e.to_string().contains("overlaps argument `a`"), "{e}");
}

#[test]
fn in_place_strided_launches_pass_and_partial_overlaps_do_not() {
    let m = module();
    let x = f32s(&[100], Some(&[-8]), P + 99 * 8);
    let k = chosen(&m, &x, &b_of(100), &x);
    assert_eq!(k.name(), "add_f32_1d");
    check3(&k, &x, &b_of(100), &x).unwrap();
    // The other half of the same buffer's elements: x[1::2] against x[::2].
    let odd = f32s(&[100], Some(&[-8]), P + 99 * 8 + 4);
    let e = check3(&k, &odd, &b_of(100), &x).unwrap_err();
    assert!(e.to_string().contains("overlaps argument `a`"), "{e}");
}

#[test]
fn layouts_no_variant_takes_are_named_by_the_argument_check() {
    let m = module();
    // A stride that splits float32 elements: no kernel takes it; the strided variant is
    // chosen so that its check names the stride.
    let split = f32s(&[10], Some(&[6]), P);
    let k = chosen(&m, &split, &b_of(10), &f32s(&[10], None, P + 0x20000));
    assert_eq!(k.name(), "add_f32_1d");
    let e = check3(&k, &split, &b_of(10), &f32s(&[10], None, P + 0x20000)).unwrap_err();
    assert_eq!((e.key(), e.arg()), (Some("strides"), Some("a")), "{e}");
    // A non-contiguous 5-D array: no 5-D view kernel; the slice kernel's check says that a
    // contiguous copy would do.
    let shape = [2, 2, 2, 2, 2];
    let five = f32s(&shape, Some(&[128, 64, 32, 16, 8]), P);
    let c = |ptr| f32s(&shape, None, ptr);
    let k = chosen(&m, &five, &c(P + 0x10000), &c(P + 0x20000));
    assert_eq!(k.name(), "add_f32");
    let e = check3(&k, &five, &c(P + 0x10000), &c(P + 0x20000)).unwrap_err();
    assert!(e.to_string().contains("needs a C-contiguous array"), "{e}");
    // No element type matches: an error listing the variants.
    let e = select_add(&m, DType::U16).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("no variant for (uint16 1-D array, uint16 1-D array"),
        "{text}"
    );
    assert!(
        text.contains(
            "\n    add_f32_4d(a: float32 4-D array (any strides), b: float32 4-D array (any \
             strides), out: float32 4-D array (any strides, written))"
        ),
        "{text}"
    );
    let e = m.select("nope", &[]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value, "{e}");
}

#[test]
fn the_rule_does_not_depend_on_manifest_order_and_takes_any_scalar() {
    let m = module();
    let alpha = Arg::Scalar(Scalar::F64(2.0));
    let (x, y) = (f32s(&[9], None, P), f32s(&[9], None, P + 0x10000));
    // `scale`'s strided kernel is listed first; contiguous arrays still get the other one.
    let k = m
        .select("scale", &[alpha, Arg::Array(&x), Arg::Array(&y)])
        .unwrap();
    assert_eq!(k.name(), "scale_b_contiguous");
    let rev = f32s(&[9], Some(&[-4]), P + 32);
    let k = m
        .select("scale", &[alpha, Arg::Array(&rev), Arg::Array(&y)])
        .unwrap();
    assert_eq!(k.name(), "scale_a_strided");
    // A 2-D transposed saxpy: the 2-D view kernel; the scalar is converted later.
    let t = f32s(&[3, 3], Some(&[4, 12]), P);
    let y2 = f32s(&[3, 3], None, P + 0x10000);
    let k = m
        .select("saxpy", &[alpha, Arg::Array(&t), Arg::Array(&y2)])
        .unwrap();
    assert_eq!(k.name(), "saxpy_f32_2d");
    // An array where the scalar goes: no variant.
    assert!(m
        .select("saxpy", &[Arg::Array(&x), Arg::Array(&x), Arg::Array(&y)])
        .is_err());
}

#[test]
fn typed_launchers_find_the_layout_variant() {
    let m = module();
    let add = m.kernel("add_f32").unwrap();
    let names = |k: Kernel<'_>| {
        k.layout_variants()
            .map(|v| v.name().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(add),
        ["add_f32_1d", "add_f32_2d", "add_f32_3d", "add_f32_4d"]
    );
    // Views of another rank take the same layouts: not variants of each other.
    assert_eq!(names(m.kernel("add_f64_2d").unwrap()), ["add_f64"]);
    assert_eq!(names(m.kernel("saxpy_f32").unwrap()), ["saxpy_f32_2d"]);
    let c = |ptr| f32s(&[4, 3], None, ptr);
    let t = f32s(&[4, 3], Some(&[4, 16]), P);
    let contiguous = [
        Arg::Array(&c(P)),
        Arg::Array(&c(P + 0x10000)),
        Arg::Array(&c(P + 0x20000)),
    ];
    let strided = [
        Arg::Array(&t),
        Arg::Array(&c(P + 0x10000)),
        Arg::Array(&c(P + 0x20000)),
    ];
    assert_eq!(add.variant_for(&contiguous).name(), "add_f32");
    assert_eq!(add.variant_for(&strided).name(), "add_f32_2d");
    // A strided kernel's launcher on contiguous arrays runs the contiguous kernel too.
    let view = m.kernel("add_f32_2d").unwrap();
    assert_eq!(view.variant_for(&contiguous).name(), "add_f32");
    // Never a kernel of another element type: float32 arrays given to add_f64 stay with
    // add_f64 (whose check refuses them).
    assert_eq!(
        m.kernel("add_f64").unwrap().variant_for(&strided).name(),
        "add_f64"
    );
    // Wrong argument counts, too.
    assert_eq!(add.variant_for(&strided[..2]).name(), "add_f32");
}

/// A launcher may remember its selection by [`SelectionKey`]: random operand lists (element
/// types, ranks 1–3, extents 0–3, C-order, stepped, reversed, broadcast and element-splitting
/// strides, scalars among arrays) with equal keys select the same kernel in every family, and
/// lists the rule tells apart by layout have different keys.
#[test]
fn equal_selection_keys_select_the_same_kernel() {
    let m = module();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut seen: std::collections::HashMap<(String, SelectionKey), Option<String>> =
        std::collections::HashMap::new();
    let mut layouts = std::collections::HashSet::new();
    let mut descs: Vec<ArrayDesc> = Vec::new();
    for round in 0..20_000 {
        let family = ["add", "saxpy", "scale"][(round % 3) as usize];
        let arity = 3;
        descs.clear();
        let mut kinds = Vec::new();
        for _ in 0..arity {
            if next(6) == 0 {
                kinds.push(false);
                continue;
            }
            kinds.push(true);
            let dtype = [DType::F32, DType::F64, DType::I32][next(3) as usize];
            let item = dtype.itemsize() as isize;
            let rank = 1 + next(3) as usize;
            let shape: Vec<usize> = (0..rank).map(|_| next(4) as usize).collect();
            let strides: Option<Vec<isize>> = match next(3) {
                0 => None,
                _ => Some(
                    (0..rank)
                        .map(|_| match next(6) {
                            0 => 0,
                            1 => item,
                            2 => -item,
                            3 => 2 * item,
                            4 => item / 2,
                            _ => 4 * item * 3,
                        })
                        .collect(),
                ),
            };
            let d = ArrayDesc::from_parts(dtype, &shape, strides.as_deref(), P, false, None);
            descs.push(d.unwrap());
        }
        let mut it = descs.iter();
        let ops: Vec<Operand<'_>> = kinds
            .iter()
            .map(|&a| {
                if a {
                    Operand::Array(it.next().unwrap())
                } else {
                    Operand::Scalar
                }
            })
            .collect();
        let key = SelectionKey::of(&ops).expect("three operands have a key");
        let k = select(m.family(family), &ops).map(|k| k.name().to_owned());
        if let Some(k) = &k {
            layouts.insert((family, k.clone()));
        }
        match seen.entry((family.to_owned(), key)) {
            std::collections::hash_map::Entry::Occupied(e) => {
                assert_eq!(
                    e.get(),
                    &k,
                    "{family}: same key {key:?}, different selections"
                )
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(k);
            }
        }
    }
    // The draw reached both layouts of `add` (contiguous and strided kernels), so the check
    // above compared keys that matter.
    assert!(layouts.contains(&("add", "add_f32".to_owned())));
    assert!(layouts.contains(&("add", "add_f32_2d".to_owned())));
    assert!(seen.len() > 200, "only {} distinct keys drawn", seen.len());

    // The memo gives back what it was given, by key, and forgets the oldest beyond its size.
    let memo: SelectionMemo<usize> = SelectionMemo::default();
    let keys: Vec<SelectionKey> = seen
        .keys()
        .map(|(_, k)| *k)
        .collect::<std::collections::HashSet<_>>()
        .into_iter()
        .take(SelectionMemo::<usize>::ENTRIES + 1)
        .collect();
    for (i, k) in keys.iter().enumerate() {
        memo.insert(*k, i);
    }
    assert_eq!(memo.get(&keys[0]), None, "the oldest entry is replaced");
    for (i, k) in keys.iter().enumerate().skip(1) {
        assert_eq!(memo.get(k), Some(i));
    }
}

/// A launcher's target chooses as `Module::select` and the typed launchers do, remembers its
/// choice, counts the arguments, and refuses a family with no variant for them with the
/// message `Module::select` gives.
#[test]
fn a_launcher_target_chooses_counts_and_names_the_variants() {
    let m = module();
    let add = Target::family("add".into(), m.family("add").collect()).unwrap();
    assert!(add.is_family());
    assert_eq!((add.name(), add.what()), ("add", "kernel family"));
    assert_eq!(add.first().name(), "add_f32");
    // Every variant takes three arrays, with the same names.
    assert_eq!(
        (add.is_array(0), add.is_array(2), add.is_array(3)),
        (Some(true), Some(true), None)
    );
    assert!(add.renamed().is_none());
    assert_eq!(add.param_name(2), "out");
    let c = |ptr| f32s(&[4, 3], None, ptr);
    let t = f32s(&[4, 3], Some(&[4, 16]), P);
    for (a, b, out) in [(c(P), c(P + 64), c(P + 128)), (t, c(P + 64), c(P + 128))] {
        let args = [Arg::Array(&a), Arg::Array(&b), Arg::Array(&out)];
        let ops: Vec<Operand<'_>> = args.iter().map(Operand::from).collect();
        let want = m.select("add", &args).unwrap().name();
        assert_eq!(add.choose(&ops).unwrap().name(), want);
        // Remembered by the operands' key: the same answer again.
        assert_eq!(add.choose(&ops).unwrap().name(), want);
        // A kernel's target runs the kernel's own layout variant, as its typed launcher does.
        let k = m.kernel("add_f32").unwrap();
        let kernel = Target::kernel(k);
        assert!(!kernel.is_family());
        assert_eq!(
            kernel.choose(&ops).unwrap().name(),
            k.variant_for(&args).name()
        );
        // Too few arguments.
        let e = add.choose(&ops[..2]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Type);
        assert_eq!(
            e.to_string(),
            "kernel family `add` takes 3 argument(s) (a, b, out), got 2"
        );
        assert_eq!(
            kernel.check_arity(4).unwrap_err().to_string(),
            "kernel `add_f32` takes 3 argument(s) (a, b, out), got 4"
        );
    }
    // No variant takes uint16 arrays: the message of Module::select.
    let u = |ptr| ArrayDesc::from_parts(DType::U16, &[8], None, ptr, false, None).unwrap();
    let (a, b, out) = (u(P), u(P + 64), u(P + 128));
    let args = [Arg::Array(&a), Arg::Array(&b), Arg::Array(&out)];
    let ops: Vec<Operand<'_>> = args.iter().map(Operand::from).collect();
    let e = add.choose(&ops).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type);
    assert_eq!(e, m.select("add", &args).unwrap_err());
    assert!(
        e.to_string().starts_with(
            "kernel family `add` has no variant for (uint16 1-D array, uint16 1-D array, \
             uint16 1-D array); variants:\n    add_f32(a: float32[:] (C-contiguous), b: \
             float32[:] (C-contiguous), out: float32[:] (C-contiguous, written))\n"
        ),
        "{e}"
    );
    // A family has kernels.
    let e = Target::family("none".into(), Vec::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
}
