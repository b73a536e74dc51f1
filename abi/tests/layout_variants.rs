//! Layout variants in the manifest (`KernelSig::is_layout_variant_of`): which kernels of a
//! family differ only in the kinds of their arrays, the relation the host's selection rule
//! and the launcher generator read.
#![cfg(feature = "std")]

use ferrocuda_abi::launch::LaunchSpec;
use ferrocuda_abi::manifest::{KernelSig, ParamSig};

#[test]
fn layout_variants_differ_only_in_array_kinds_and_ranks() {
    let param = |name: &str, kind: &str, dtype: &str, rank: u8, mutable: bool| ParamSig {
        name: name.into(),
        kind: kind.into(),
        dtype: dtype.into(),
        rank,
        mutable,
        size: 16,
        align: 8,
        tile: None,
    };
    let kernel = |name: &str, family: &str, kind: &str, rank: u8, dtype: &str| KernelSig {
        name: name.into(),
        family: family.into(),
        params: vec![
            param("alpha", "scalar", dtype, 0, false),
            param("x", kind, dtype, rank, false),
            param("y", kind, dtype, rank, true),
        ],
        same_shape: Vec::new(),
        items_per_thread: None,
        launch: LaunchSpec::default(),
        zero: Vec::new(),
        scratch: Vec::new(),
        require: Vec::new(),
        arch: None,
    };
    let slice = kernel("axpy_f32", "axpy", "slice", 1, "float32");
    let view = kernel("axpy_f32_2d", "axpy", "view", 2, "float32");
    assert!(view.is_layout_variant_of(&slice) && slice.is_layout_variant_of(&view));
    assert!(!slice.is_layout_variant_of(&slice));
    // Another rank of the same kinds is not another layout.
    let three = kernel("axpy_f32_3d", "axpy", "view", 3, "float32");
    assert!(three.is_layout_variant_of(&slice) && !three.is_layout_variant_of(&view));
    assert!(!kernel("axpy_f64_2d", "axpy", "view", 2, "float64").is_layout_variant_of(&slice));
    assert!(!kernel("scale_f32", "scale", "view", 2, "float32").is_layout_variant_of(&slice));
    let mut renamed = view.clone();
    renamed.params[2].name = "out".into();
    assert!(!renamed.is_layout_variant_of(&slice));
    let mut read_only = view.clone();
    read_only.params[2].mutable = false;
    assert!(!read_only.is_layout_variant_of(&slice));
    let mut scalar = view.clone();
    scalar.params[1] = param("x", "scalar", "float32", 0, false);
    assert!(!scalar.is_layout_variant_of(&slice));
    // Workspaces are not the caller's: they do not count.
    let mut with_scratch = view;
    with_scratch
        .params
        .push(param("ws", "scratch", "float32", 1, true));
    assert_eq!(with_scratch.caller_params().count(), 3);
    assert!(with_scratch.is_layout_variant_of(&slice));
}
