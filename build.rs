//! Compiles `kernels/` to PTX (rustc's NVPTX backend) and writes its manifest; the library
//! embeds both. See `ferrocuda-builder` for the recipe.
fn main() {
    let out = ferrocuda_builder::PtxBuilder::new("kernels")
        .arch("sm_80")
        .build_script();
    println!(
        "cargo:warning=ferrocuda: {} kernels compiled to PTX in {:.1}s",
        out.manifest.kernels.len(),
        out.seconds
    );
}
