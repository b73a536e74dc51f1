//! Compiles the sources of the crates a kernel crate depends on (`ferrocuda-abi`, `-device`,
//! `-macros`, with a workspace root made from the project's, its toolchain file and the
//! bundled kernels' lock file) into the extension, as `crate_sources.rs`: a list of (path,
//! contents) that `src/project.rs` writes out when a kernel crate is first built.
use ferrocuda_builder::project::sources::{embed_list, fingerprint_of, Embedded};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("python/ has a parent");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let files = embed_list(root).unwrap_or_else(|e| panic!("ferrocuda crate sources: {e}"));
    let mut code = String::from(
        "/// The ferrocuda crate sources a kernel crate builds against: (relative path, text).\n\
         pub static FILES: &[(&str, &str)] = &[\n",
    );
    let mut texts: Vec<(String, String)> = Vec::new();
    for (rel, file) in &files {
        let path = match file {
            Embedded::File(p) => p.clone(),
            Embedded::Text(text) => {
                let p = out.join(rel.replace('/', "__"));
                if std::fs::read_to_string(&p).ok().as_deref() != Some(text.as_str()) {
                    std::fs::write(&p, text).expect("write an embedded file");
                }
                p
            }
        };
        let _ = writeln!(
            code,
            "    ({rel:?}, include_str!({:?})),",
            path.display().to_string()
        );
        let text = std::fs::read_to_string(&path).expect("read an embedded file");
        texts.push((rel.clone(), text));
    }
    code.push_str("];\n");
    // Their fingerprint, computed here: the extension does not hash them at run time.
    let fp = fingerprint_of(texts.iter().map(|(p, t)| (p.as_str(), t.as_str())));
    let _ = writeln!(
        code,
        "/// `fingerprint_of(FILES)`.\npub const FINGERPRINT: u64 = {fp:#018x};"
    );
    std::fs::write(out.join("crate_sources.rs"), code).expect("write crate_sources.rs");
    for dir in ["abi", "device", "macros"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    for file in ["Cargo.toml", "rust-toolchain.toml", "kernels/Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
}
