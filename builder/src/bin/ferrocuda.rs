//! The `ferrocuda` command for Rust users, from a ferrocuda checkout:
//!
//! ```text
//! cargo run -p ferrocuda-builder --bin ferrocuda -- new my_kernels
//! cargo run -p ferrocuda-builder --bin ferrocuda -- build my_kernels
//! ```
//!
//! (or `cargo install --path builder` once). New crates depend on this checkout's crates; the
//! Python package's `ferrocuda` command is the same program with the crate sources inside it.
//! See `ferrocuda_builder::cli`.

use ferrocuda_builder::project::CrateSources;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("builder/ has a parent")
        .to_path_buf();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sources = || CrateSources::checkout(&checkout);
    // The nvcc wheel of the checkout's scripts/ensure_ptxas.sh, when it ran: libdevice and
    // ptxas (else the builder's own search and download, see ferrocuda_builder::cuda).
    let cuda = checkout.join(".tools/nvcc/nvidia/cuda_nvcc");
    // This binary does not load the CUDA driver: `doctor` reports no driver line (the Python
    // package's `ferrocuda doctor` does).
    let status = ferrocuda_builder::cli::run(&args, &sources, Some(cuda), None);
    ExitCode::from(u8::try_from(status).unwrap_or(1))
}
