//! From rustc's bitcode to PTX with the toolchain's LLVM tools:
//! `llvm-dis` → (shared-memory and state-space rewrites) → `llvm-link` (+ libdevice) → `opt` →
//! `llc`.
//!
//! The flags are rustc's own for the NVPTX target, so a module that needs neither a rewrite
//! nor libdevice gives the PTX rustc's `--emit=asm` would: `-O3`, `-mcpu=<arch>` (and with it
//! LLVM's PTX ISA version for that CPU, raised for sm_80 and sm_90 by [`ptx_isa`]), no debug
//! info (none is in the bitcode), traps for
//! `unreachable` except right after a `noreturn` call (rustc's `TrapUnreachable` /
//! `NoTrapAfterNoreturn`), and use-list orders carried through every file. `opt` runs only
//! when the module was changed after rustc had optimised it: address-space inference always,
//! the `-O3` pipeline only for shared memory and libdevice.

use crate::cuda::Search;
use crate::ir::display_symbol;
use crate::shared::{self, Needs};
use crate::space;
use crate::toolchain::Toolchain;
use crate::{fail, BuildError, BuildErrorKind};
use ferrocuda_abi::manifest::FpContract;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The values libdevice's `__nvvm_reflect` queries get: IEEE single precision — denormals
/// kept (`__CUDA_FTZ=0`) and a correctly rounded `sqrt` (`__CUDA_PREC_SQRT=1`). LLVM 23's
/// NVVMReflect answers `__CUDA_ARCH` from `-mcpu`, reads `__CUDA_FTZ` from the module flag
/// `nvvm-reflect-ftz` when present, and answers 0 for any other name without
/// `-nvvm-reflect-add` — which would make `__nv_sqrtf` approximate. So every value is set
/// explicitly. (`__CUDA_PREC_DIV` is not queried by `libdevice.10.bc`; set for completeness.)
pub(crate) const REFLECT: [&str; 3] = ["__CUDA_FTZ=0", "__CUDA_PREC_SQRT=1", "__CUDA_PREC_DIV=1"];

/// The PTX ISA version `llc` is asked for (`-mattr=+ptxNN`) where LLVM's own choice for the
/// arch — the oldest ISA that has the arch — lacks instructions `ferrocuda-device` emits
/// through `asm!`, which LLVM cannot see:
///
/// * `sm_80`: LLVM picks 7.0; the phase-parity waits of `ferrocuda_device::mbarrier`
///   (`mbarrier.test_wait.parity`) need **7.1** (CUDA 11.1 drivers and newer load it).
/// * `sm_90`: LLVM picks 7.8; the memory order and scope spelled in the mbarrier instructions
///   (`mbarrier.arrive.release.cta…`, `…test_wait.parity.acquire.cta…`),
///   `mbarrier.expect_tx`, `fence.proxy.async` and `fence.mbarrier_init` need **8.0** (CUDA 12.0
///   drivers and newer), as `wgmma` does.
///
/// Every other arch keeps LLVM's version: it is already at least these (sm_86: 7.1, sm_89: 7.8,
/// sm_90a: 8.0, sm_100: 8.6), or the arch predates these instructions. A newer ISA only widens
/// what ptxas accepts; the code LLVM generates does not change.
pub(crate) fn ptx_isa(arch: &str) -> Option<&'static str> {
    match arch {
        "sm_80" => Some("+ptx71"),
        "sm_90" => Some("+ptx80"),
        _ => None,
    }
}

/// One run of the pipeline.
pub(crate) struct Pipeline<'a> {
    /// Progress and cancellation of the build.
    pub control: &'a crate::Control,
    /// Where the LLVM tools are.
    pub toolchain: &'a Toolchain,
    /// `sm_XY`.
    pub arch: &'a str,
    /// Floating-point contraction for `llc`.
    pub fp_contract: FpContract,
    /// Path prefix of the intermediate files (`<stem>.ll`, `<stem>.ptx`, …).
    pub stem: &'a Path,
    /// Finds libdevice (called only when the module calls a libdevice function).
    pub find_libdevice: &'a dyn Fn() -> Search,
    /// The bitcode has line tables (a build that locates its findings in the Rust sources):
    /// `llc` writes them as `.loc` directives only (LLVM's `DebugDirectivesOnly`), with the
    /// call sites of inlined functions (PTX ISA 7.2 and newer). Never a shipped module.
    pub line_tables: bool,
}

/// What the pipeline produced.
#[derive(Debug)]
pub(crate) struct Generated {
    /// The PTX text.
    pub ptx: String,
    /// The libdevice file linked, if any.
    pub libdevice: Option<PathBuf>,
}

impl Pipeline<'_> {
    /// `<stem>.<ext>`.
    pub fn file(&self, ext: &str) -> PathBuf {
        let mut s = OsString::from(self.stem.as_os_str());
        s.push(".");
        s.push(ext);
        s.into()
    }

    /// Runs the pipeline on rustc's bitcode.
    pub fn run(&self, bitcode: &Path) -> Result<Generated, BuildError> {
        let text_path = self.file("ll");
        self.tool(
            "llvm-dis",
            &[
                "--preserve-ll-uselistorder".into(),
                bitcode.into(),
                "-o".into(),
                text_path.clone().into(),
            ],
        )?;
        let text = read(&text_path)?;
        let needs = shared::needs(&text).or_else(|m| fail(BuildErrorKind::Compile, m))?;
        let mut input = bitcode.to_path_buf();
        if needs.rewrite() || self.line_tables {
            input = self.file("rewritten.ll");
            let mut rewritten = text;
            if self.line_tables {
                rewritten = rewritten.replace(
                    "emissionKind: LineTablesOnly",
                    "emissionKind: DebugDirectivesOnly",
                );
            }
            if needs.shared_rewrite() {
                rewritten = shared::rewrite(&rewritten, &needs)
                    .or_else(|m| fail(BuildErrorKind::Compile, m))?;
            }
            if needs.markers {
                rewritten =
                    space::rewrite(&rewritten).or_else(|m| fail(BuildErrorKind::Compile, m))?;
            }
            std::fs::write(&input, rewritten).or_else(|e| {
                fail(
                    BuildErrorKind::Io,
                    format!("cannot write {}: {e}", input.display()),
                )
            })?;
        }
        let mut libdevice = None;
        if !needs.libdevice.is_empty() {
            let path = self.libdevice(&needs)?;
            let linked = self.file("linked.bc");
            self.tool(
                "llvm-link",
                &[
                    input.into(),
                    "--only-needed".into(),
                    "--internalize".into(),
                    path.clone().into(),
                    "--suppress-warnings".into(),
                    "--preserve-bc-uselistorder".into(),
                    "-o".into(),
                    linked.clone().into(),
                ],
            )?;
            input = linked;
            libdevice = Some(path);
        }
        if needs.rewrite() || libdevice.is_some() {
            let full = needs.shared_rewrite() || libdevice.is_some();
            input = self.opt(&input, full)?;
        }
        let ptx = self.llc(&input)?;
        Ok(Generated { ptx, libdevice })
    }

    fn libdevice(&self, needs: &Needs) -> Result<PathBuf, BuildError> {
        let search = (self.find_libdevice)();
        search.found.clone().ok_or_else(|| BuildError {
            kind: BuildErrorKind::Toolchain,
            message: format!(
                "the kernels call libdevice functions ({}), but NVIDIA's libdevice.10.bc was \
                 not found. Looked at:\n{}\n\n{}",
                needs
                    .libdevice
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                search.tried_list(),
                match &search.download_error {
                    Some(e) => format!(
                        "The builder's copy of NVIDIA's nvcc wheel: {e}\n\
                         Or set FERROCUDA_LIBDEVICE to the file (every CUDA toolkit has it as \
                         nvvm/libdevice/libdevice.10.bc), or CUDA_HOME to a CUDA toolkit."
                    ),
                    None => format!(
                        "Install it with:\n\n    {}\n\nor set FERROCUDA_LIBDEVICE to the file \
                         (every CUDA toolkit has it as nvvm/libdevice/libdevice.10.bc), or \
                         CUDA_HOME to a CUDA toolkit.",
                        crate::cuda::install_command()
                    ),
                }
            ),
        })
    }

    /// `opt`: address-space inference first — before InstCombine can fold the markers' cast
    /// pairs back into generic pointers — then, when `full`, the `-O3` pipeline (for shared
    /// memory and libdevice; rustc has optimised the rest already).
    fn opt(&self, input: &Path, full: bool) -> Result<PathBuf, BuildError> {
        let out = self.file("opt.bc");
        let passes = if full {
            "function(infer-address-spaces),default<O3>"
        } else {
            "function(infer-address-spaces)"
        };
        let mut args: Vec<OsString> = vec![
            format!("-passes={passes}").into(),
            format!("-mcpu={}", self.arch).into(),
        ];
        args.extend(
            REFLECT
                .iter()
                .map(|r| format!("-nvvm-reflect-add={r}").into()),
        );
        args.extend([
            "--preserve-bc-uselistorder".into(),
            input.into(),
            "-o".into(),
            out.clone().into(),
        ]);
        self.tool("opt", &args)?;
        Ok(out)
    }

    fn llc(&self, input: &Path) -> Result<String, BuildError> {
        let out = self.file("ptx");
        let contract = match self.fp_contract {
            // LLVM's default and rustc's: fuse only what the IR marks as fusable
            // (`llvm.fmuladd`, `contract` flags), never a separate multiply and add.
            FpContract::Off => "on",
            FpContract::Fast => "fast",
        };
        let mut args: Vec<OsString> = vec!["-O3".into(), format!("-mcpu={}", self.arch).into()];
        let isa = match ptx_isa(self.arch) {
            // `.loc … inlined_at` needs PTX ISA 7.2 (LLVM's own choice for sm_80 and sm_86
            // is older).
            _ if self.line_tables && matches!(self.arch, "sm_80" | "sm_86") => Some("+ptx72"),
            isa => isa,
        };
        if let Some(isa) = isa {
            args.push(format!("-mattr={isa}").into());
        }
        args.extend([
            format!("-fp-contract={contract}").into(),
            "-trap-unreachable".into(),
            "-no-trap-after-noreturn".into(),
            "-asm-verbose=false".into(),
            input.into(),
            "-o".into(),
            out.clone().into(),
        ]);
        self.tool("llc", &args)?;
        read(&out)
    }

    fn tool(&self, name: &str, args: &[OsString]) -> Result<(), BuildError> {
        let path = self.toolchain.tool(name);
        let output = self
            .control
            .output(Command::new(&path).args(args), &mut |_, _| false)
            .or_else(|e| {
                if crate::control::is_cancel(&e) {
                    return Err(crate::control::cancelled());
                }
                fail(
                    BuildErrorKind::Toolchain,
                    format!("could not run {}: {e}", path.display()),
                )
            })?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        if let Some(explained) = explain_llvm_error(&stderr) {
            return fail(BuildErrorKind::Compile, explained);
        }
        let cmdline: Vec<String> = args.iter().map(|a| a.to_string_lossy().into()).collect();
        fail(
            BuildErrorKind::Compile,
            format!(
                "`{name} {}` failed ({}):\n{}",
                cmdline.join(" "),
                output.status,
                stderr.trim_end()
            ),
        )
    }
}

fn read(path: &Path) -> Result<String, BuildError> {
    std::fs::read_to_string(path).or_else(|e| {
        fail(
            BuildErrorKind::Io,
            format!("cannot read {}: {e}", path.display()),
        )
    })
}

/// A readable explanation of LLVM's location-less failure to generate code for a
/// floating-point operation the NVPTX backend cannot lower (`sin`, `exp`, `log`, `pow`, …),
/// pointing to `ferrocuda_device::math`. `None` for any other output.
pub(crate) fn explain_llvm_error(stderr: &str) -> Option<String> {
    let node = stderr.lines().find_map(|l| {
        if let Some(rest) = l.split("no libcall available for ").nth(1) {
            return Some(rest.split_whitespace().next()?.to_string());
        }
        let sel = l.split("Cannot select: ").nth(1)?;
        let op = sel.split(" = ").nth(1)?.split_whitespace().next()?;
        Some(op.to_string())
    })?;
    let op = node.strip_prefix('f').filter(|op| {
        !op.is_empty()
            && op
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    })?;
    let rust = match op {
        "log" => "ln",
        "pow" => "powf",
        other => other,
    };
    let function = stderr
        .split("on function '@")
        .nth(1)
        .and_then(|r| r.split('\'').next())
        .map(|f| format!(" in {}", display_symbol(f.trim_matches('"'))))
        .unwrap_or_default();
    let said = stderr
        .lines()
        .find(|l| l.contains("LLVM ERROR") || l.contains("error:"))
        .unwrap_or_default()
        .trim();
    Some(format!(
        "the floating-point operation `{rust}` (LLVM's `llvm.{op}.*`, e.g. from \
         `f32::{rust}`/`core::intrinsics::{op}f32`){function} has no NVPTX instruction or \
         library call, so LLVM cannot generate PTX for it. Use the math functions of \
         `ferrocuda_device::math` instead (NVIDIA's libdevice, e.g. `__nv_{op}f` for f32 and \
         `__nv_{op}` for f64), which the builder links into the kernels.\n\n(LLVM said: {said})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explains_math_crashes() {
        let sel = "LLVM ERROR: Cannot select: 0x55da72680ab0: f32 = fsin 0x55da72680a40\n\
                   Stack dump:\n1.\tRunning pass 'NVPTX DAG->DAG Pattern Instruction Selection' \
                   on function '@_RNvCs1_2pk4kern'\n";
        let e = explain_llvm_error(sel).unwrap();
        assert!(
            e.contains("`sin`") && e.contains("ferrocuda_device::math"),
            "{e}"
        );
        assert!(e.contains("`pk::kern`") && e.contains("__nv_sinf"), "{e}");
        let libcall = "error: no libcall available for flog\nLLVM ERROR: Cannot select: \
                       0x1: ch = NVPTXISD::CALL 0x2";
        let e = explain_llvm_error(libcall).unwrap();
        assert!(
            e.contains("`ln`") && e.contains("llvm.log.") && e.contains("__nv_logf"),
            "{e}"
        );
        assert!(explain_llvm_error("LLVM ERROR: Cannot select: 0x1: i32 = NVPTXISD::X").is_none());
        assert!(explain_llvm_error("error[E0308]: mismatched types").is_none());
    }

    #[test]
    fn ptx_isa_is_raised_only_where_llvm_picks_an_older_one() {
        assert_eq!(ptx_isa("sm_80"), Some("+ptx71"));
        assert_eq!(ptx_isa("sm_90"), Some("+ptx80"));
        // LLVM refuses a version older than an arch's minimum (sm_89 needs 7.8, sm_100 8.6).
        for arch in [
            "sm_70", "sm_75", "sm_86", "sm_89", "sm_90a", "sm_100", "sm_120",
        ] {
            assert_eq!(ptx_isa(arch), None, "{arch}");
        }
    }
}
