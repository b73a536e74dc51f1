//! Builds a kernel crate to PTX and prints what the build found:
//!
//! ```text
//! cargo run -p ferrocuda-builder --example build_kernel_crate -- CRATE_DIR OUT_DIR [sm_XY]
//! ```
//!
//! The child target directory is `OUT_DIR/target`; libdevice and ptxas are also looked for in
//! the repository's `.tools/` (scripts/ensure_ptxas.sh). Prints the PTX and manifest paths,
//! ptxas's per-kernel report and the warnings; exits 1 with the reason when the build fails.
//! `scripts/gpu-bundle.sh` uses it to build `builder/tests/fixtures/device-lang` for the GPU
//! check.

use ferrocuda_builder::PtxBuilder;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(crate_dir), Some(out_dir)) = (args.first(), args.get(1)) else {
        eprintln!("usage: build_kernel_crate CRATE_DIR OUT_DIR [sm_XY]");
        return ExitCode::from(2);
    };
    // Relative to the working directory (`cargo run` sets CARGO_MANIFEST_DIR, which
    // PtxBuilder would resolve relative paths against).
    let (Ok(crate_dir), Ok(out_dir)) =
        (std::path::absolute(crate_dir), std::path::absolute(out_dir))
    else {
        eprintln!("error: cannot resolve the paths");
        return ExitCode::from(2);
    };
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/nvcc/nvidia/cuda_nvcc");
    let result = PtxBuilder::new(crate_dir)
        .arch(args.get(2).map_or("sm_80", String::as_str))
        .out_dir(&out_dir)
        .target_dir(out_dir.join("target"))
        .cuda_fallback(tools)
        .build();
    let out = match result {
        Ok(out) => out,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    println!("{}\n{}", out.ptx.display(), out.manifest_path.display());
    for r in out.resources.iter().filter(|r| r.entry) {
        println!(
            "{:<20} {} registers {:>3}  stack {:>4}  spills {}/{}  smem {}",
            r.name,
            r.arch,
            r.registers.unwrap_or(0),
            r.stack.unwrap_or(0),
            r.spill_stores.unwrap_or(0),
            r.spill_loads.unwrap_or(0),
            r.shared.unwrap_or(0)
        );
    }
    for w in &out.warnings {
        println!("warning: {w}");
    }
    println!("built in {:.2} s", out.seconds);
    ExitCode::SUCCESS
}
