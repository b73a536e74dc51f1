use super::*;
use crate::kinds::KernelParam;
use crate::params::{Slice, SliceMut, View};
use std::collections::BTreeMap;
use std::format;
use std::vec::Vec;

#[test]
fn fp_contract_is_recorded_and_defaults_to_off() {
    let m = Manifest {
        format: FORMAT,
        arch: "sm_80".into(),
        ptx: "k.ptx".into(),
        fp_contract: FpContract::Fast,
        kernels: Vec::new(),
        cubins: BTreeMap::new(),
        parts: BTreeMap::new(),
    };
    let json = m.to_json();
    assert!(json.contains("\"fp_contract\": \"fast\""), "{json}");
    assert_eq!(Manifest::from_json(&json).unwrap(), m);
    // A manifest written before the field existed reads as `off`.
    let old = r#"{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": []}"#;
    assert_eq!(
        Manifest::from_json(old).unwrap().fp_contract,
        FpContract::Off
    );
    let bad =
        r#"{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "fp_contract": "on", "kernels": []}"#;
    assert!(Manifest::from_json(bad).is_err());
    assert_eq!(FpContract::Fast.name(), "fast");
    assert_eq!(FpContract::default().name(), "off");
}

#[test]
fn cubins_are_optional_and_round_trip() {
    let old = r#"{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": []}"#;
    let mut m = Manifest::from_json(old).unwrap();
    assert!(m.cubins.is_empty());
    assert!(!m.to_json().contains("cubins"));
    m.cubins.insert("sm_90".into(), "k.sm_90.cubin".into());
    let json = m.to_json();
    assert!(json.contains("\"sm_90\": \"k.sm_90.cubin\""), "{json}");
    assert_eq!(Manifest::from_json(&json).unwrap(), m);
}

#[test]
fn launch_declarations_round_trip_through_json() {
    let kernel = |launch: LaunchSpec| KernelSig {
        name: "k".into(),
        family: "k".into(),
        params: Vec::new(),
        same_shape: Vec::new(),
        items_per_thread: None,
        launch,
        zero: Vec::new(),
        scratch: Vec::new(),
        require: Vec::new(),
        arch: None,
    };
    let declared = LaunchSpec {
        block: Some([16, 16, 1]),
        dynamic_shared: Some("float32".into()),
        grid_dims: Some(2),
        ..LaunchSpec::default()
    };
    let m = Manifest {
        format: FORMAT,
        arch: "sm_80".into(),
        ptx: "k.ptx".into(),
        fp_contract: FpContract::Off,
        kernels: std::vec![kernel(declared.clone()), kernel(LaunchSpec::default())],
        cubins: BTreeMap::new(),
        parts: BTreeMap::new(),
    };
    let json = m.to_json();
    assert_eq!(json.matches("\"launch\"").count(), 1, "{json}");
    assert!(json.contains("\"block\": [\n"), "{json}");
    let back = Manifest::from_json(&json).unwrap();
    assert_eq!(back, m);
    assert_eq!(
        back.kernels[0].launch.decl().unwrap().fixed_block(),
        Some([16, 16, 1])
    );
    // A manifest written before the field existed reads as "nothing declared"; an
    // invalid declaration is refused with the kernel's name.
    let old = r#"{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": [
        {"name": "k", "family": "k", "params": []}]}"#;
    assert!(Manifest::from_json(old).unwrap().kernels[0]
        .launch
        .is_empty());
    let bad = old.replace(
        "\"params\": []",
        "\"params\": [], \"launch\": {\"max_threads\": 4096}",
    );
    let e = Manifest::from_json(&bad).unwrap_err();
    assert!(e.contains("launch declaration of `k`"), "{e}");
}

#[test]
fn kernels_with_launch_attributes_need_format_3() {
    let kernel = |launch: LaunchSpec| KernelSig {
        name: "k".into(),
        family: "k".into(),
        params: Vec::new(),
        same_shape: Vec::new(),
        items_per_thread: None,
        launch,
        zero: Vec::new(),
        scratch: Vec::new(),
        require: Vec::new(),
        arch: None,
    };
    let plain = [kernel(LaunchSpec {
        max_threads: Some(128),
        ..LaunchSpec::default()
    })];
    assert_eq!(format_for(&plain, false), FORMAT_NO_PARTS);
    assert_eq!(format_for(&plain, true), FORMAT_PARTS);
    let coop = kernel(LaunchSpec {
        cooperative: Some(true),
        ..LaunchSpec::default()
    });
    let cluster = kernel(LaunchSpec {
        cluster: Some([2, 1, 1]),
        ..LaunchSpec::default()
    });
    assert_eq!(format_for(core::slice::from_ref(&coop), false), FORMAT);
    assert_eq!(format_for(&[cluster], true), FORMAT);
    // Every format up to this version's reads; a newer one is refused.
    for f in 1..=3 {
        let text = format!(r#"{{"format": {f}, "arch": "sm_80", "ptx": "k.ptx", "kernels": []}}"#);
        assert_eq!(Manifest::from_json(&text).unwrap().format, f);
    }
    let newer = r#"{"format": 4, "arch": "sm_80", "ptx": "k.ptx", "kernels": []}"#;
    assert!(Manifest::from_json(newer).unwrap_err().contains("format 4"));
    // The declaration survives the JSON form.
    let m = Manifest {
        format: FORMAT,
        arch: "sm_80".into(),
        ptx: "k.ptx".into(),
        fp_contract: FpContract::Off,
        kernels: std::vec![coop],
        cubins: BTreeMap::new(),
        parts: BTreeMap::new(),
    };
    let json = m.to_json();
    assert!(json.contains("\"cooperative\": true"), "{json}");
    assert_eq!(Manifest::from_json(&json).unwrap(), m);
}

#[test]
fn record_round_trips() {
    let params = [
        ("a", <Slice<f32> as KernelParam>::DESC),
        ("out", <SliceMut<f32> as KernelParam>::DESC),
        ("v", <View<f64, 3> as KernelParam>::DESC),
        ("alpha", <f32 as KernelParam>::DESC),
    ];
    const L: usize = 4 + 1 + 3 + 1 + 3 + 1 + (2 + 8) + (4 + 8) + (2 + 8) + (6 + 8) + 1 + 3 + 2;
    let groups: &[&[u8]] = &[&[0, 1]];
    assert_eq!(encoded_len("k_1", "fam", &params, groups, 300), L);
    let bytes: [u8; L] = encode("k_1", "fam", &params, groups, 300);
    let sig = decode(&bytes).unwrap();
    assert_eq!(sig.name, "k_1");
    assert_eq!(sig.family, "fam");
    assert_eq!(sig.params.len(), 4);
    assert_eq!(sig.params[1].kind, "slice");
    assert!(sig.params[1].mutable);
    assert_eq!(sig.params[2].rank, 3);
    assert_eq!(sig.params[2].size, 8 + 3 * 16);
    assert_eq!(sig.params[3].dtype, "float32");
    assert_eq!(sig.params[3].size, 4);
    assert_eq!(sig.same_shape, std::vec![std::vec![0u8, 1]]);
    assert_eq!(sig.items_per_thread, Some(300));
    let unset: [u8; L] = encode("k_1", "fam", &params, groups, 0);
    assert_eq!(decode(&unset).unwrap().items_per_thread, None);
    // Any truncation is an error, never a panic.
    for cut in 0..L {
        assert!(decode(&bytes[..cut]).is_err());
    }
}

#[test]
fn extras_round_trip() {
    use crate::extras::{Cmp, Extras, Operand, Require, ScratchLen, NONE};
    use crate::params::Scratch;
    let params = [
        ("x", <Slice<f32> as KernelParam>::DESC),
        ("out", <SliceMut<f32> as KernelParam>::DESC),
        ("lo", <f64 as KernelParam>::DESC),
        ("ws", <Scratch<u32> as KernelParam>::DESC),
        ("v", <View<f64, 2> as KernelParam>::DESC),
    ];
    let scratch = [ScratchLen {
        param: 3,
        per_block: 2,
        constant: 1,
        of: 0,
        mult: 3,
        div: 4096,
        persist: true,
    }];
    let require = [
        Require {
            lhs: Operand::Len(1),
            cmp: Cmp::Eq,
            rhs: Operand::Dim(4, 1),
            message: "one per row",
        },
        Require {
            lhs: Operand::Scalar(2),
            cmp: Cmp::Finite,
            rhs: Operand::Int(-7),
            message: "",
        },
        Require {
            lhs: Operand::Ptr(0),
            cmp: Cmp::Ne,
            rhs: Operand::Ptr(1),
            message: "",
        },
    ];
    let extras = Extras {
        zero: &[1],
        scratch: &scratch,
        require: &require,
        tiles: &[],
    };
    const L: usize = 66 + 5 + 22 + 5 + 87;
    assert_eq!(encoded_len_ext("k", "k", &params, &[], 0, &extras), L);
    let bytes: [u8; L] = encode_ext("k", "k", &params, &[], 0, &extras);
    let sig = decode(&bytes).unwrap();
    assert_eq!(sig.zero, [1]);
    assert_eq!(sig.scratch.len(), 1);
    assert_eq!(sig.scratch[0].len(), scratch[0]);
    assert!(sig.scratch[0].persist);
    assert_eq!(sig.require.len(), 3);
    assert_eq!(sig.require[0].lhs, OperandSig::Len(1));
    assert_eq!(sig.require[0].rhs, OperandSig::Dim(4, 1));
    assert_eq!(sig.require[0].message, "one per row");
    assert_eq!(sig.require[1].cmp(), Some(Cmp::Finite));
    assert_eq!(sig.require[1].rhs, OperandSig::Int(-7));
    assert_eq!(sig.require[2].op, "!=");
    // The JSON form round-trips, and leaves the fields out when empty.
    let json = serde_json::to_string(&sig).unwrap();
    assert_eq!(serde_json::from_str::<KernelSig>(&json).unwrap(), sig);
    assert!(json.contains(r#""dim":[4,1]"#), "{json}");
    assert!(json.contains(r#""persist":true"#), "{json}");
    // Cut after the scratch section, the workspace is an ordinary one (zero-filled for
    // every launch).
    assert!(!decode(&bytes[..93]).unwrap().scratch[0].persist);
    // A persist section naming no scratch workspace is refused.
    let mut stray = bytes;
    stray[97] = 0;
    assert!(decode(&stray).unwrap_err().contains("persist(0)"));
    // Truncations are errors — except at a section boundary with complete
    // declarations (the record format's sections are optional; the builder reads
    // records of known length, so truncation does not happen there).
    for cut in 0..L {
        assert_eq!(
            decode(&bytes[..cut]).is_err(),
            cut != 93 && cut != 98,
            "cut {cut}"
        );
    }
    // A record without extras decodes as before, and has none.
    let plain: [u8; 45] = encode("k", "k", &params[..3], &[], 0);
    let p = decode(&plain).unwrap();
    assert!(p.zero.is_empty() && p.scratch.is_empty() && p.require.is_empty());
    // ... but a scratch parameter without a length declaration is refused.
    let undeclared: [u8; 66] = encode("k", "k", &params, &[], 0);
    assert!(decode(&undeclared).unwrap_err().contains("`ws`"));
    assert_eq!(sig.scratch[0].len().of, 0);
    let mut no_of = sig.clone();
    no_of.scratch[0].of = None;
    assert_eq!(no_of.scratch[0].len().of, NONE);
    // Extras must name parameters of the right kinds.
    let mut bad = sig.clone();
    bad.zero = std::vec![0];
    assert!(bad.check_extras().unwrap_err().contains("zero(x)"));
    let mut bad = sig.clone();
    bad.require[0].rhs = OperandSig::Dim(4, 2);
    assert!(bad.check_extras().is_err());
    let mut bad = sig.clone();
    bad.require[0].lhs = OperandSig::Len(3);
    assert!(bad.check_extras().is_err());
    let mut unknown = bytes.to_vec();
    unknown[66] = 9;
    assert!(decode(&unknown).unwrap_err().contains("section 9"));
}

#[test]
fn tensor_map_declarations_round_trip() {
    use crate::extras::{Extras, TileDecl};
    use crate::manifest::{decode, encode_ext, encoded_len_ext};
    use crate::{KernelParam, ParamDesc, Slice, TensorMap, TileDesc};
    type A = TensorMap<f32, 128, 64, 32>;
    let params: [(&str, ParamDesc); 2] = [
        ("a", <A as KernelParam>::DESC),
        ("x", <Slice<f32> as KernelParam>::DESC),
    ];
    assert_eq!(
        (params[0].1.size, params[0].1.align, params[0].1.rank),
        (176, 64, 2)
    );
    let tiles = [
        TileDecl {
            param: 0,
            tile: <A as KernelParam>::TILE,
        },
        TileDecl {
            param: 1,
            tile: TileDesc::NONE,
        },
    ];
    let extras = Extras {
        tiles: &tiles,
        ..Extras::NONE
    };
    const L: usize = 4 + 2 + 2 + 1 + (2 + 8) * 2 + 1 + 2 + (4 + 13);
    assert_eq!(encoded_len_ext("k", "k", &params, &[], 0, &extras), L);
    let bytes: [u8; L] = encode_ext("k", "k", &params, &[], 0, &extras);
    let sig = decode(&bytes).unwrap();
    let tile = sig.params[0].tile.as_ref().unwrap();
    assert_eq!(
        (tile.box_dims.as_slice(), tile.swizzle),
        (&[64, 32][..], 128)
    );
    assert_eq!(sig.params[0].kind, "tensormap");
    assert!(sig.params[1].tile.is_none());
    assert_eq!(A::BOX_BYTES, 64 * 32 * 4);
}
