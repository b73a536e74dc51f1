//! Where the test kernels of `ferrocuda-device` (`tests/device-kernels/`) come from: built
//! here with `ferrocuda_builder::PtxBuilder` (once per test binary and arch), or — on a GPU
//! machine without a toolchain — the PTX and manifest shipped in the GPU bundle.

use std::path::PathBuf;

/// The kernel crate's directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/device-kernels")
}

/// Builds the test kernels for `arch` into the test target's temporary directory (the child
/// build in the build script's target directory) and returns the build output (PTX and
/// manifest paths).
pub fn build(arch: &str) -> Result<ferrocuda_builder::BuildOutput, String> {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let base = tmp.join("device-kernels");
    // The child target directory of the build script (`<target>/ferrocuda-ptx`): the NVPTX
    // `core`, device crate and abi it compiled are reused here.
    let target = ferrocuda_builder::child_target_dir(tmp.parent().unwrap_or(&tmp));
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    ferrocuda_builder::PtxBuilder::new(crate_dir())
        .arch(arch)
        // scripts/ensure_ptxas.sh's ptxas and libdevice, when no CUDA is installed.
        .cuda_fallback(repo.join(".tools/nvcc/nvidia/cuda_nvcc"))
        .out_dir(base.join(arch))
        .target_dir(target)
        .build()
        .map_err(|e| e.to_string())
}

/// The manifest to run: `$FERROCUDA_DEVICE_KERNELS`, else the bundled
/// `.gpu/device-kernels/ferrocuda_device_kernels.json` (relative to the working directory),
/// else a fresh sm_80 build.
#[allow(dead_code)] // used by the GPU tests only
pub fn manifest_path() -> Result<PathBuf, String> {
    if let Some(p) = ferrocuda_config::DEVICE_KERNELS.path() {
        return Ok(p);
    }
    let bundled = PathBuf::from(".gpu/device-kernels/ferrocuda_device_kernels.json");
    if bundled.exists() {
        return Ok(bundled);
    }
    build("sm_80").map(|out| out.manifest_path)
}
