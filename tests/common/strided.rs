//! The bundled kernels' strided variants, read from the manifest (shared by the SASS checks
//! of `tests/device_ptx.rs` and the manifest checks of `tests/layout_variants.rs`).

use ferrocuda::abi::manifest::{KernelSig, Manifest};

/// The element-wise families whose every contiguous kernel has strided variants.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub const ELEMENTWISE: [&str; 6] = ["add", "saxpy", "gelu", "gelu_tanh", "silu", "axpy"];

/// The bundled manifest.
pub fn manifest() -> Manifest {
    Manifest::from_json(ferrocuda::bundled::MANIFEST_JSON).unwrap()
}

/// `true` when the kernel has a view parameter.
pub fn has_views(k: &KernelSig) -> bool {
    k.params.iter().any(|p| p.kind == "view")
}

/// The bundled kernels that are strided variants: kernels with view parameters that are
/// layout variants of a kernel without any.
pub fn variants() -> Vec<String> {
    let m = manifest();
    let of_slices = |k: &KernelSig| {
        m.kernels
            .iter()
            .any(|o| !has_views(o) && o.is_layout_variant_of(k))
    };
    m.kernels
        .iter()
        .filter(|k| has_views(k) && of_slices(k))
        .map(|k| k.name.clone())
        .collect()
}
