//! The `ferrocuda` command: `ferrocuda new NAME`, `ferrocuda build [PATH]`, `ferrocuda doctor`.
//!
//! The same code runs as this crate's binary (`cargo run -p ferrocuda-builder --bin ferrocuda
//! -- build PATH`, with a ferrocuda checkout as the crate sources) and inside the Python
//! package (`ferrocuda …` and `python -m ferrocuda …`, with the sources compiled into the
//! extension). Progress and errors go to stderr; `build` prints the manifest's path on stdout
//! (for scripts: `ferrocuda.load` takes it, or the crate directory itself).

use crate::doctor::{self, DriverProbe, State};
use crate::project::{build_crate, new_crate, BuildRequest, CrateSources};
use crate::{BuildError, BuildErrorKind, Control, FpContract};
use std::io::Write as _;
use std::path::PathBuf;

/// The usage text.
pub const USAGE: &str = "\
ferrocuda — GPU kernels in Rust

usage:
  ferrocuda new NAME              make a kernel crate in ./NAME (or at the path NAME): one
                                  example kernel, a README, a test, a Rust host example
  ferrocuda build [PATH]          build the kernel crate at PATH (default: .) to PTX and a
                                  manifest in PATH/target/ferrocuda/<arch>/, unless the cache
                                  says they are current; prints the manifest's path
    --arch sm_XY                  the GPU architecture (default sm_80: A100 and newer)
    --fp-contract fast|off        fuse a * b + c into fma (default off: Rust's rounding)
    --target-dir DIR              cargo's target directory (default PATH/target)
    --force                       build even when the cache says current
  ferrocuda doctor [--install]    what building your own kernels needs here (rustup, the
                                  pinned Rust toolchain, rust-src, llvm-tools, NVIDIA's
                                  libdevice and ptxas) and a CUDA driver to run them; with
                                  --install, installs what is missing (rustup's toolchain and
                                  components; libdevice and ptxas from NVIDIA's
                                  nvidia-cuda-nvcc-cu12 wheel, into ferrocuda's cache)
  ferrocuda --version | --help

Load the result with ferrocuda.load(PATH) in Python (which builds when needed), or from a
Rust build.rs with ferrocuda_builder::PtxBuilder and typed launchers (see the crate's host/).
";

/// Runs the command with `args` (without the program name); returns the exit status (0: done,
/// 1: the build or scaffold failed, 2: bad usage). `sources` gives the ferrocuda crate sources
/// (called only by commands that need them); `cuda_fallback` is a CUDA root searched for
/// libdevice and ptxas; `driver` reports the CUDA driver for `doctor` (`None`: not checked).
pub fn run(
    args: &[String],
    sources: &dyn Fn() -> Result<CrateSources, BuildError>,
    cuda_fallback: Option<PathBuf>,
    driver: DriverProbe<'_>,
) -> i32 {
    // The children stay in this process's group: a terminal's Ctrl-C ends them with it.
    let control = Control::in_caller_group(|m| eprintln!("ferrocuda: {m}"));
    run_with(args, sources, cuda_fallback, driver, &control)
}

/// [`run`] with a build's progress reports and cancellation in `control` (a cancelled build
/// exits with status 130, as a shell reports a command ended by SIGINT).
pub fn run_with(
    args: &[String],
    sources: &dyn Fn() -> Result<CrateSources, BuildError>,
    cuda_fallback: Option<PathBuf>,
    driver: DriverProbe<'_>,
    control: &Control,
) -> i32 {
    let usage = |msg: &str| {
        eprintln!("ferrocuda: {msg}\n\n{USAGE}");
        2
    };
    let failed = |e: BuildError| {
        if e.kind() == BuildErrorKind::Cancelled {
            // The caller that cancelled says so.
            return 130;
        }
        eprintln!("ferrocuda: error: {e}");
        1
    };
    let mut report = |m: &str| eprintln!("ferrocuda: {m}");
    // `ferrocuda new --help`, `ferrocuda build PATH -h`, …: the usage, whatever else is given.
    if args.len() > 1 && args[1..].iter().any(|a| a == "-h" || a == "--help") {
        print!("{USAGE}");
        return 0;
    }
    match args.first().map(String::as_str) {
        None => usage("no command"),
        Some("-h" | "--help" | "help") => {
            print!("{USAGE}");
            0
        }
        Some("-V" | "--version") => {
            println!("ferrocuda {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("new") => {
            let [path] = &args[1..] else {
                return usage("`new` takes one argument, the crate's name or path");
            };
            let sources = match sources() {
                Ok(s) => s,
                Err(e) => return failed(e),
            };
            match new_crate(path.as_ref(), &sources) {
                Ok(name) => {
                    println!(
                        "created kernel crate `{name}` in {path} (kernels scale_f32, scale_f64)\n\
                         next:\n  ferrocuda build {path}\n  python -c \"import ferrocuda; \
                         help(ferrocuda.load('{path}').scale)\"\n  see {path}/README.md"
                    );
                    0
                }
                Err(e) => failed(e),
            }
        }
        Some("build") => {
            let mut req = BuildRequest::new(".");
            req.cuda_fallback = cuda_fallback;
            req.control = control.clone();
            let mut path_given = false;
            let mut it = args[1..].iter();
            while let Some(a) = it.next() {
                let mut value = |flag: &str| {
                    it.next()
                        .cloned()
                        .ok_or_else(|| format!("{flag} needs a value"))
                };
                let parsed = match a.as_str() {
                    "--arch" => value("--arch").map(|v| req.arch = v),
                    "--target-dir" => {
                        value("--target-dir").map(|v| req.target_dir = Some(v.into()))
                    }
                    "--fp-contract" => value("--fp-contract").and_then(|v| {
                        req.fp_contract = match v.as_str() {
                            "fast" => FpContract::Fast,
                            "off" => FpContract::Off,
                            _ => return Err(format!("--fp-contract takes fast or off, not {v}")),
                        };
                        Ok(())
                    }),
                    "--force" => {
                        req.force = true;
                        Ok(())
                    }
                    flag if flag.starts_with('-') => Err(format!("unknown option {flag}")),
                    path if !path_given => {
                        path_given = true;
                        req.path = path.into();
                        Ok(())
                    }
                    extra => Err(format!("`build` takes one path, and {extra} is a second")),
                };
                if let Err(m) = parsed {
                    return usage(&m);
                }
            }
            let sources = match sources() {
                Ok(s) => s,
                Err(e) => return failed(e),
            };
            match build_crate(&req, &sources, &mut report) {
                Ok(b) => {
                    for w in &b.warnings {
                        report(&format!("warning: {w}"));
                    }
                    report(&if b.cached {
                        format!("{} is up to date ({} kernels)", b.name, b.kernels)
                    } else {
                        format!(
                            "built {} for {} in {:.1} s ({} kernels)",
                            b.name, req.arch, b.seconds, b.kernels
                        )
                    });
                    println!("{}", b.manifest_path.display());
                    let _ = std::io::stdout().flush();
                    0
                }
                Err(e) => failed(e),
            }
        }
        Some("doctor") => {
            let install = match &args[1..] {
                [] => false,
                [flag] if flag == "--install" => true,
                _ => return usage("`doctor` takes one option, --install"),
            };
            // The toolchain file of the crate sources kernel crates build against.
            let dir = match sources().and_then(|s| s.materialize()) {
                Ok(d) => d,
                Err(e) => return failed(e),
            };
            let fallback = cuda_fallback.as_deref();
            let mut errors = Vec::new();
            if install {
                errors = doctor::install(&dir, fallback, &mut report);
            }
            let checks = doctor::checks(&dir, fallback, driver);
            println!(
                "ferrocuda {} — building your own kernels needs:\n{}",
                env!("CARGO_PKG_VERSION"),
                doctor::render(&checks)
            );
            for e in &errors {
                report(&format!("error: {e}"));
            }
            let missing = checks.iter().any(|c| c.state == State::Missing);
            if missing && !install {
                println!("`ferrocuda doctor --install` installs what is missing.");
            }
            let _ = std::io::stdout().flush();
            i32::from(missing || !errors.is_empty())
        }
        Some(other) => usage(&format!("unknown command `{other}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn help_after_a_command_prints_the_usage_and_builds_nothing() {
        let asked = Cell::new(0);
        let sources = || -> Result<CrateSources, BuildError> {
            asked.set(asked.get() + 1);
            Err(crate::control::cancelled())
        };
        let control = Control::none();
        for argv in [
            &["build", "--help"][..],
            &["build", "some/crate", "-h"],
            &["new", "--help"],
            &["doctor", "--help"],
            &["build", "--arch", "sm_90", "--help"],
        ] {
            let args: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            assert_eq!(
                run_with(&args, &sources, None, None, &control),
                0,
                "{argv:?}"
            );
        }
        assert_eq!(asked.get(), 0, "no command ran");
        // An unknown option is still refused (status 2), and `--help` alone is the usage.
        let args = vec!["build".to_string(), "--hepl".to_string()];
        assert_eq!(run_with(&args, &sources, None, None, &control), 2);
        assert_eq!(
            run_with(&["--help".to_string()], &sources, None, None, &control),
            0
        );
    }
}
