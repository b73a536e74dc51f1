//! ptxas: assembling the PTX for a GPU architecture and reading its resource report
//! (`ptxas -v`): registers, stack frame, spills, shared memory, barriers per function.

use super::rules::{Finding, Rule, Severity};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// ptxas's resource report for one function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// The function (entry or non-inlined `.func`).
    pub name: String,
    /// The architecture assembled for (`sm_80`).
    pub arch: String,
    /// A kernel entry (else a non-inlined function).
    pub entry: bool,
    /// Registers per thread (entries only).
    pub registers: Option<u32>,
    /// Bytes of stack frame (`None`: not reported).
    pub stack: Option<u32>,
    /// Bytes of spill stores.
    pub spill_stores: Option<u32>,
    /// Bytes of spill loads.
    pub spill_loads: Option<u32>,
    /// Named barriers used (entries only).
    pub barriers: Option<u32>,
    /// Bytes of static shared memory (entries only; `None` when ptxas reports none).
    pub shared: Option<u32>,
    /// Other remarks (e.g. a stack size that cannot be statically determined).
    pub notes: Vec<String>,
}

/// The number before `suffix` in `line` (`"Used 18 registers"` → 18 for `" registers"`).
fn number_before(line: &str, suffix: &str) -> Option<u32> {
    let at = line.find(suffix)?;
    let digits = line[..at].rsplit(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// The text between the first pair of single quotes after `marker`.
fn quoted_after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let open = rest.find('\'')?;
    let close = rest[open + 1..].find('\'')?;
    Some(&rest[open + 1..open + 1 + close])
}

/// Per-function resources from `ptxas -v` output.
pub fn parse_report(text: &str, arch: &str) -> BTreeMap<String, Resources> {
    let mut props: BTreeMap<String, Resources> = BTreeMap::new();
    let mut current: Option<String> = None; // the entry being compiled
    let mut pending: Option<String> = None; // the function of the last "Function properties"
    let get = |name: &str, props: &mut BTreeMap<String, Resources>| {
        props.entry(name.to_string()).or_insert_with(|| Resources {
            name: name.to_string(),
            arch: arch.to_string(),
            ..Resources::default()
        });
    };
    for line in text.lines() {
        if let Some(name) = quoted_after(line, "Compiling entry function") {
            get(name, &mut props);
            if let Some(p) = props.get_mut(name) {
                p.entry = true;
            }
            current = Some(name.to_string());
            pending = None;
        } else if let Some(name) = line.split("Function properties for ").nth(1) {
            let name = name.trim();
            get(name, &mut props);
            pending = Some(name.to_string());
        } else if let (Some(name), Some(stack)) =
            (&pending, number_before(line, " bytes stack frame"))
        {
            let p = props.get_mut(name).expect("inserted above");
            p.stack = Some(stack);
            p.spill_stores = number_before(line, " bytes spill stores");
            p.spill_loads = number_before(line, " bytes spill loads");
            pending = None;
        } else if let Some(name) = quoted_after(line, "Stack size for ") {
            get(name, &mut props);
            let p = props.get_mut(name).expect("inserted above");
            p.notes
                .push("stack size cannot be statically determined".into());
        } else if let (Some(name), Some(regs)) = (&current, number_before(line, " registers")) {
            let p = props.get_mut(name).expect("inserted above");
            p.registers = Some(regs);
            p.barriers = number_before(line, " barriers").or(p.barriers);
            p.shared = number_before(line, " bytes smem").or(p.shared);
        } else if line.contains("Compile time") || line.contains("bytes gmem") {
            pending = None;
        }
    }
    props
}

/// Every entry reported, each function with a 0-byte stack frame and no spills.
pub fn check_report(
    props: &BTreeMap<String, Resources>,
    entries: &[&str],
    arch: &str,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |name: &str, rule: Rule, severity: Severity, message: String| {
        out.push(Finding {
            function: Some(name.to_string()),
            rule,
            severity,
            message,
            arch: Some(arch.to_string()),
            line: None,
            source: None,
        });
    };
    for &name in entries {
        if !props.get(name).is_some_and(|p| p.entry) {
            add(
                name,
                Rule::Ptxas,
                Severity::Error,
                "no ptxas report for this entry".into(),
            );
        }
    }
    for (name, p) in props {
        let kind = if p.entry { "entry" } else { "function" };
        for note in &p.notes {
            add(
                name,
                Rule::Stack,
                Severity::Warning,
                format!("{kind}: {note}"),
            );
        }
        let Some(stack) = p.stack else {
            if p.entry {
                add(
                    name,
                    Rule::Stack,
                    Severity::Warning,
                    format!("{kind}: ptxas reported no stack frame size"),
                );
            }
            continue;
        };
        if stack > 0 {
            add(
                name,
                Rule::Stack,
                Severity::Warning,
                format!("{kind} has a {stack}-byte stack frame"),
            );
        }
        let (st, ld) = (p.spill_stores.unwrap_or(0), p.spill_loads.unwrap_or(0));
        if st > 0 || ld > 0 {
            add(
                name,
                Rule::Spill,
                Severity::Warning,
                format!("{kind} spills registers: {st} bytes stores, {ld} bytes loads"),
            );
        }
    }
    out
}

/// ptxas's word that it serialized a function's `wgmma.mma_async` instructions (a missing
/// fence, their registers touched in between, too few registers), as warnings of
/// [`Rule::Wgmma`]: the code stays correct, the MMAs no longer overlap.
pub fn wgmma_findings(report: &str, arch: &str) -> Vec<Finding> {
    super::wgmma::serialized(report)
        .into_iter()
        .map(|(function, said)| Finding {
            function: (!function.is_empty()).then_some(function),
            rule: Rule::Wgmma,
            severity: Severity::Warning,
            message: format!(
                "ptxas: {said} — the tensor cores wait for each MMA. Usually a missing \
                 `wgmma::fence()`, or the accumulators touched between the fence and the MMAs \
                 (ferrocuda_device::wgmma's thread model)"
            ),
            arch: Some(arch.to_string()),
            line: None,
            source: None,
        })
        .collect()
}

/// The ptxas to run: `$FERROCUDA_PTXAS` (when set, the answer), `$CUDA_HOME/bin/ptxas`,
/// `$CUDA_PATH/bin/ptxas`, `PATH`, `/usr/local/cuda/bin/ptxas`, the `nvidia-cuda-nvcc-cu12`
/// wheel of `python3`, then `<fallback_root>/bin/ptxas`.
pub fn find(fallback_root: Option<&Path>) -> Option<std::path::PathBuf> {
    crate::cuda::find_ptxas(fallback_root).found
}

/// Runs `ptxas -arch=<arch> -v` on `ptx` (output to a temporary cubin): `Ok(report)` when it
/// succeeds, `Err(output)` when it fails.
pub fn run(ptxas: &Path, arch: &str, ptx: &Path) -> Result<String, String> {
    let cubin = std::env::temp_dir().join(format!(
        "ferrocuda-ptxas-{}-{:?}.cubin",
        std::process::id(),
        std::thread::current().id()
    ));
    let out = assemble(ptxas, arch, ptx, &cubin);
    let _ = std::fs::remove_file(&cubin);
    out
}

/// Runs `ptxas -arch=<arch> -v -o <cubin>` on `ptx`: the cubin is written to `cubin`, and the
/// result is `Ok(report)` when it succeeds, `Err(output)` when it fails.
pub fn assemble(ptxas: &Path, arch: &str, ptx: &Path, cubin: &Path) -> Result<String, String> {
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg("-o")
        .arg(cubin)
        .arg(ptx)
        .output()
        .map_err(|e| format!("could not run {}: {e}", ptxas.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "ptxas -arch={arch} failed ({}):\n{}",
            out.status,
            text.trim_end()
        ))
    }
}
