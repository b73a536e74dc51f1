//! The bundled element-wise families' strided variants, from the manifest (no GPU): every
//! contiguous kernel of `add`, `saxpy`, `gelu`, `gelu_tanh`, `silu` and `axpy` has layout
//! variants on 1-D to 4-D views, so that its family launcher (and its typed launcher) takes any
//! layout of those ranks; no other family has strided variants.

#[path = "common/strided.rs"]
mod strided;

#[test]
fn elementwise_families_have_strided_variants_of_every_rank() {
    let m = strided::manifest();
    let variants = strided::variants();
    for family in strided::ELEMENTWISE {
        let contiguous: Vec<_> = m
            .kernels
            .iter()
            .filter(|k| k.family == family && !strided::has_views(k))
            .collect();
        assert!(!contiguous.is_empty(), "family {family}");
        for k in contiguous {
            let mut ranks: Vec<u8> = m
                .kernels
                .iter()
                .filter(|o| o.is_layout_variant_of(k))
                .map(|o| {
                    let rank = o.params.iter().map(|p| p.rank).max().unwrap();
                    assert_eq!(o.name, format!("{}_{rank}d", k.name));
                    assert!(variants.contains(&o.name), "{}", o.name);
                    rank
                })
                .collect();
            ranks.sort_unstable();
            assert_eq!(ranks, [1, 2, 3, 4], "{}", k.name);
        }
    }
    for name in &variants {
        let k = m.kernel(name).unwrap();
        assert!(strided::ELEMENTWISE.contains(&k.family.as_str()), "{name}");
    }
}

/// The typed launchers of a contiguous kernel and of its strided variants name each other.
#[test]
fn typed_launchers_know_their_layout_variants() {
    let module = ferrocuda::bundled::module().unwrap();
    let add = module.kernel("add_f32").unwrap();
    let names: Vec<&str> = add.layout_variants().map(|k| k.name()).collect();
    assert_eq!(
        names,
        ["add_f32_1d", "add_f32_2d", "add_f32_3d", "add_f32_4d"]
    );
    let gelu = module.kernel("gelu_f16_3d").unwrap();
    let names: Vec<&str> = gelu.layout_variants().map(|k| k.name()).collect();
    assert_eq!(names, ["gelu_f16"]);
    assert_eq!(
        module.kernel("sum_f32").unwrap().layout_variants().count(),
        0
    );
    assert_eq!(
        module
            .kernel("add_index_f32_2d")
            .unwrap()
            .layout_variants()
            .count(),
        0
    );
}
