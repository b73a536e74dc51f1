//! Compiles `kernels/` to PTX (rustc's NVPTX backend) and cubins (ptxas), writes its manifest, and generates a
//! typed launcher per kernel from that manifest with `ferrocuda_builder::Launchers` — the
//! generator a user's host crate calls (so no signature is restated by hand; the Rust
//! parameter types come from the abi's element-type and parameter-kind tables).

fn main() {
    // The nvcc wheel that scripts/setup.sh installs into .tools/, when it ran: libdevice (and
    // ptxas). Without it, and without a CUDA toolkit or the wheel in a Python environment, the
    // builder downloads the wheel into its cache once and says so (see
    // ferrocuda_builder::cuda): a plain `cargo build` of a fresh clone needs no script.
    let out = ferrocuda_builder::PtxBuilder::new("kernels")
        .arch("sm_80")
        .cuda_fallback(".tools/nvcc/nvidia/cuda_nvcc")
        .build_script();
    // The cubins (one per arch ptxas assembled), embedded beside the PTX by src/lib.rs, and
    // the files of the module's further parts (kernels built for another architecture: their
    // PTX and cubins), by the names the manifest gives them.
    let mut cubins = String::from("&[\n");
    for (arch, file) in &out.cubins {
        cubins.push_str(&format!(
            "    ({arch:?}, include_bytes!({:?})),\n",
            file.display()
        ));
    }
    cubins.push(']');
    let mut parts = String::from("&[\n");
    for part in out.parts.values() {
        for file in std::iter::once(&part.ptx).chain(part.cubins.values()) {
            let name = file.file_name().expect("a file").to_string_lossy();
            parts.push_str(&format!(
                "    ({name:?}, include_bytes!({:?})),\n",
                file.display()
            ));
        }
    }
    parts.push(']');
    let out_dir = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    for (name, text) in [("cubins.rs", &cubins), ("parts.rs", &parts)] {
        let path = out_dir.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, text).expect("write the embedded file list");
        }
    }
    let launchers =
        ferrocuda_builder::Launchers::with_module_fn(&out.manifest, "crate::bundled::module")
            .origin("ferrocuda's bundled kernels");
    // SAFETY: the bundled kernels are memory-safe for any arguments that pass the checks
    // (each writes only the elements of its own thread, within the checked extents; the
    // GPU tests run them under compute-sanitizer).
    let launchers = unsafe { launchers.assume_sound() };
    if let Err(e) = launchers.write_to_out_dir("launchers.rs") {
        eprintln!("error: generating the bundled kernels' launchers failed: {e}");
        std::process::exit(1);
    }
}
