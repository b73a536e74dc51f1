//! The SASS a PTX module assembles to, for checks of the generated code that PTX cannot
//! answer: which state space each memory access ends up in (`LDG`/`STG` global, `LDS`/`STS`
//! shared, `LDL`/`STL` local, generic `LD`/`ST`), the width of vector accesses (`.128`), and
//! loads through the read-only data cache (`.CONSTANT`). ptxas assembles the module for an
//! arch and nvdisasm lists the instructions; no GPU is needed.
//!
//! ```no_run
//! use ferrocuda_builder::check::sass;
//! # fn main() -> Result<(), String> {
//! let (ptxas, nvdisasm) = (sass::ptxas().unwrap(), sass::find(None).unwrap());
//! for f in sass::disassemble(&ptxas, &nvdisasm, "sm_90", "kernels.ptx".as_ref())? {
//!     assert!(f.generic_accesses().is_empty(), "{}: {:?}", f.name, f.generic_accesses());
//! }
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

/// The state space a SASS memory instruction addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// `LDG`, `STG`, `ATOMG`, `REDG`: global memory.
    Global,
    /// `LDS`, `STS`, `ATOMS`, `LDSM`: shared memory.
    Shared,
    /// `LDL`, `STL`: local memory.
    Local,
    /// `LD`, `ST`, `ATOM`, `RED`: a generic address, whose window the hardware decides at run
    /// time.
    Generic,
}

/// The state space of the memory instruction `opcode` (`LDG.E.128.CONSTANT`, `ST.E.64`,
/// …), or `None` for an instruction that accesses no data memory (`LDC`, the constant bank,
/// included).
pub fn space(opcode: &str) -> Option<Space> {
    match opcode.split('.').next().unwrap_or(opcode) {
        "LDG" | "STG" | "ATOMG" | "REDG" => Some(Space::Global),
        "LDS" | "STS" | "ATOMS" | "LDSM" | "STSM" => Some(Space::Shared),
        "LDL" | "STL" => Some(Space::Local),
        "LD" | "ST" | "ATOM" | "RED" => Some(Space::Generic),
        _ => None,
    }
}

/// One function of the disassembly: its name and its instructions' opcodes, with their
/// modifiers (`LDG.E.128.CONSTANT`), in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SassFunction {
    /// The function's name (a kernel's entry name).
    pub name: String,
    /// The opcodes, predicates and operands left out.
    pub opcodes: Vec<String>,
    /// Each opcode's operands as written (`gsb0, 0x1`; empty for none), in the same order.
    pub operands: Vec<String>,
}

impl SassFunction {
    /// The opcodes of the memory instructions in `space`.
    pub fn accesses(&self, space: Space) -> Vec<&str> {
        self.opcodes
            .iter()
            .map(String::as_str)
            .filter(|o| self::space(o) == Some(space))
            .collect()
    }

    /// The generic memory instructions.
    pub fn generic_accesses(&self) -> Vec<&str> {
        self.accesses(Space::Generic)
    }

    /// Whether an opcode starts with `prefix` and continues with a modifier or ends
    /// (`has("LDG.E.128")` matches `LDG.E.128` and `LDG.E.128.CONSTANT`, not `LDG.E.1280`).
    pub fn has(&self, prefix: &str) -> bool {
        self.opcodes.iter().any(|o| {
            o.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
    }

    /// The number of opcodes containing every modifier of `modifiers` after the base opcode
    /// `base` (`count("LDG", &["128", "CONSTANT"])`).
    pub fn count(&self, base: &str, modifiers: &[&str]) -> usize {
        self.opcodes
            .iter()
            .filter(|o| {
                let mut parts = o.split('.');
                parts.next() == Some(base) && {
                    let mods: Vec<&str> = parts.collect();
                    modifiers.iter().all(|m| mods.contains(m))
                }
            })
            .count()
    }
}

/// Parses `nvdisasm -c` output into its functions (`.text.<name>:` sections).
pub fn parse(text: &str) -> Vec<SassFunction> {
    let mut out: Vec<SassFunction> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix(".text.").and_then(|n| n.strip_suffix(':')) {
            out.push(SassFunction {
                name: name.to_string(),
                ..SassFunction::default()
            });
            continue;
        }
        // `/*0040*/   @!P0 LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;`
        let Some(rest) = t.strip_prefix("/*").and_then(|r| r.split_once("*/")) else {
            continue;
        };
        let mut words = rest.1.split_whitespace();
        let Some(mut op) = words.next() else { continue };
        if op.starts_with('@') {
            let Some(next) = words.next() else { continue };
            op = next;
        }
        let op = op.trim_end_matches(';');
        let Some(f) = out.last_mut() else { continue };
        if op.starts_with(|c: char| c.is_ascii_uppercase()) {
            f.opcodes.push(op.to_string());
            let operands = words.collect::<Vec<_>>().join(" ");
            f.operands
                .push(operands.trim_end_matches(';').trim_end().to_string());
        }
    }
    out
}

/// The nvdisasm to run: `$FERROCUDA_NVDISASM` (when set, the answer), `$CUDA_HOME/bin`,
/// `$CUDA_PATH/bin`, `PATH`, `/usr/local/cuda/bin`, then `<fallback_root>/bin/nvdisasm` (e.g.
/// the `nvidia/cu13` directory of the `nvidia-cuda-nvdisasm` wheel, which
/// `scripts/ensure_nvdisasm.sh` installs into `.tools/`).
pub fn find(fallback_root: Option<&Path>) -> Option<PathBuf> {
    crate::cuda::find_nvdisasm(fallback_root).found
}

/// The ptxas of [`super::ptxas::find`] without a fallback root.
pub fn ptxas() -> Option<PathBuf> {
    super::ptxas::find(None)
}

/// Assembles `ptx` for `arch` with `ptxas` and disassembles the result with `nvdisasm`.
pub fn disassemble(
    ptxas: &Path,
    nvdisasm: &Path,
    arch: &str,
    ptx: &Path,
) -> Result<Vec<SassFunction>, String> {
    let cubin = std::env::temp_dir().join(format!(
        "ferrocuda-sass-{}-{:?}-{arch}.cubin",
        std::process::id(),
        std::thread::current().id()
    ));
    // Through `ptxas::assemble` (and its cache: the SASS tests assemble the bundled kernels
    // the build script assembled already).
    let assembled = super::ptxas::assemble(ptxas, arch, ptx, &cubin);
    let listed = assembled.and_then(|_| run(Command::new(nvdisasm).arg("-c").arg(&cubin)));
    let _ = std::fs::remove_file(&cubin);
    let functions = parse(&listed?);
    if functions.is_empty() {
        return Err(format!(
            "{} listed no function of {}",
            nvdisasm.display(),
            ptx.display()
        ));
    }
    Ok(functions)
}

/// Runs `cmd`: its stdout when it succeeds (nvdisasm's warnings on stderr are dropped).
fn run(cmd: &mut Command) -> Result<String, String> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .map_err(|e| format!("could not run {shown}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{shown} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "\t.headerflags\t@\"EF_CUDA_SM90\"
//--------------------- .text.add_f32 --------------------------
\t.section\t.text.add_f32,\"ax\",@progbits
.text.add_f32:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P0 LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0020*/                   STG.E.128 desc[UR4][R6.64], R8 ;
        /*0030*/                   LD.E R0, desc[UR4][R2.64] ;
        /*0040*/                   ATOMS.ADD RZ, [R3], R4 ;
        /*0050*/                   EXIT ;
.L_x_0:
        /*0060*/                   BRA `(.L_x_0);
//--------------------- .text.other --------------------------
.text.other:
        /*0000*/                   STL [R1], R2 ;
";

    #[test]
    fn parses_functions_and_opcodes() {
        let f = parse(LISTING);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].name, "add_f32");
        assert_eq!(
            f[0].opcodes,
            [
                "LDC",
                "LDG.E.128.CONSTANT",
                "STG.E.128",
                "LD.E",
                "ATOMS.ADD",
                "EXIT",
                "BRA"
            ]
        );
        assert_eq!(f[0].generic_accesses(), ["LD.E"]);
        assert_eq!(f[0].accesses(Space::Shared), ["ATOMS.ADD"]);
        assert_eq!(f[0].accesses(Space::Global).len(), 2);
        assert!(f[0].has("LDG.E.128") && f[0].has("STG") && !f[0].has("STG.E.12"));
        assert_eq!(f[0].count("LDG", &["128", "CONSTANT"]), 1);
        assert_eq!(f[0].count("LDG", &["64"]), 0);
        assert_eq!(f[1].accesses(Space::Local), ["STL"]);
        assert_eq!(f[0].operands.len(), f[0].opcodes.len());
        assert_eq!(f[1].operands, ["[R1], R2"]);
        assert_eq!(f[0].operands[6], "`(.L_x_0)");
    }

    #[test]
    fn classifies_state_spaces() {
        for (op, s) in [
            ("LDG.E.64.STRONG.SYS", Some(Space::Global)),
            ("REDG.E.ADD.STRONG.GPU", Some(Space::Global)),
            ("ATOMG.E.CAS.STRONG.SYS", Some(Space::Global)),
            ("STS.128", Some(Space::Shared)),
            ("ATOMS.CAST.SPIN.64", Some(Space::Shared)),
            ("LDL.64", Some(Space::Local)),
            ("ST.E.U8.STRONG.SYS", Some(Space::Generic)),
            ("ATOM.E.ADD.F16", Some(Space::Generic)),
            ("RED.E.ADD", Some(Space::Generic)),
            ("REDUX.SUM", None),
            ("LDC.64", None),
            ("ULDC", None),
        ] {
            assert_eq!(space(op), s, "{op}");
        }
    }
}
