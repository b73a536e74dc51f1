//! Helpers shared by the builder's integration tests.
#![allow(dead_code)]

use ferrocuda_abi::manifest::{Manifest, ParamSig};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// Serializes the builds of a test binary's tests (they share one target directory).
pub static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// The workspace root (`builder/..`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("builder/ has a parent")
        .to_path_buf()
}

/// The child-build target directory shared by the builder's integration tests: the one the
/// workspace's build scripts use (`<target>/ferrocuda-ptx`, beside `CARGO_TARGET_TMPDIR`), so
/// that `core`, `ferrocuda-device` and `ferrocuda-abi` for the NVPTX target are compiled once
/// per flag set for the whole test command, not once per directory.
pub fn shared_target_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    ferrocuda_builder::child_target_dir(tmp.parent().unwrap_or(tmp))
}

/// A directory under the system temp dir, unique to this process and test, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("ferrocuda-{tag}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Writes a kernel crate named `package` to `dir`: `src/lib.rs` is `lib_rs`, the
/// dependencies are this repository's device crate (and `ferrocuda-abi`), the lock file is the
/// bundled crate's (no registry access), the toolchain file is the repository's (the child
/// cargo resolves the toolchain from the crate's directory).
pub fn write_kernel_crate(dir: &Path, package: &str, lib_rs: &str) {
    let root = repo_root();
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{package}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
             publish = false\n\n[workspace]\n\n[dependencies]\n\
             ferrocuda-device = {{ path = {:?} }}\nferrocuda-abi = {{ path = {:?} }}\n",
            root.join("device").to_str().unwrap(),
            root.join("abi").to_str().unwrap()
        ),
    )
    .unwrap();
    let lock = fs::read_to_string(root.join("kernels").join("Cargo.lock")).unwrap();
    let lock = lock.replace(
        "name = \"ferrocuda-kernels\"",
        &format!("name = \"{package}\""),
    );
    fs::write(dir.join("Cargo.lock"), lock).unwrap();
    fs::copy(
        root.join("rust-toolchain.toml"),
        dir.join("rust-toolchain.toml"),
    )
    .unwrap();
    fs::write(dir.join("src").join("lib.rs"), lib_rs).unwrap();
}

/// The manifest's kernel names, in its order (sorted by name).
pub fn kernel_names(manifest: &Manifest) -> Vec<&str> {
    manifest.kernels.iter().map(|k| k.name.as_str()).collect()
}

/// The names of the kernels in the base PTX (those without an `arch` of their own), in
/// manifest order.
#[allow(dead_code)]
pub fn base_kernel_names(manifest: &Manifest) -> Vec<&str> {
    manifest.kernels_of(None).map(|k| k.name.as_str()).collect()
}

/// A manifest parameter, for comparisons.
pub fn param(
    name: &str,
    kind: &str,
    dtype: &str,
    rank: u8,
    mutable: bool,
    size: u16,
    align: u16,
) -> ParamSig {
    ParamSig {
        name: name.into(),
        kind: kind.into(),
        dtype: dtype.into(),
        rank,
        mutable,
        size,
        align,
        tile: None,
    }
}
