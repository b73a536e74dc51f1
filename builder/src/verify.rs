//! The checks every build runs on its PTX: the text rules of [`crate::check`], then, when a
//! ptxas is found, assembly for the crate's arch and the per-kernel resource report.

use crate::check::ptxas::{self, Resources};
use crate::check::{check_text, Finding, Rule, Severity};
use crate::{fail, BuildError};
use std::path::{Path, PathBuf};

/// What the checks found, when nothing fails the build.
#[derive(Debug, Default)]
pub(crate) struct Verified {
    /// ptxas's report, one entry per function (empty without ptxas).
    pub resources: Vec<Resources>,
    /// The ptxas that made it.
    pub ptxas: Option<PathBuf>,
    /// Findings that do not fail the build.
    pub warnings: Vec<Finding>,
}

/// Checks `ptx` (the text, manifest records removed) and, with ptxas, `ptx_file` (the
/// same module as generated) for `arch`.
pub(crate) fn verify(
    ptx: &str,
    ptx_file: &Path,
    arch: &str,
    ptxas_root: Option<&Path>,
    run_ptxas: bool,
) -> Result<Verified, BuildError> {
    let text = check_text(ptx);
    let entries = text.entries();
    let (mut errors, mut warnings): (Vec<Finding>, Vec<Finding>) = text
        .findings
        .iter()
        .cloned()
        .partition(|f| f.severity == Severity::Error);
    let mut out = Verified::default();
    if let Some(tool) = ptxas::find(ptxas_root).filter(|_| run_ptxas) {
        match ptxas::run(&tool, arch, ptx_file) {
            Ok(report) => {
                let props = ptxas::parse_report(&report, arch);
                let (e, w): (Vec<Finding>, Vec<Finding>) =
                    ptxas::check_report(&props, &entries, arch)
                        .into_iter()
                        .partition(|f| f.severity == Severity::Error);
                errors.extend(e);
                warnings.extend(w);
                out.resources = props.into_values().collect();
            }
            // An older ptxas than the PTX needs says nothing about the PTX.
            Err(e) if e.contains("Unsupported .version") || e.contains("Unsupported .target") => {
                warnings.push(Finding {
                    function: None,
                    rule: Rule::Ptxas,
                    severity: Severity::Warning,
                    message: format!(
                        "{} is too old for this PTX, no resource report: {e}",
                        tool.display()
                    ),
                    arch: Some(arch.into()),
                });
            }
            Err(e) => errors.push(Finding {
                function: None,
                rule: Rule::Ptxas,
                severity: Severity::Error,
                message: format!("ptxas ({}) rejects the PTX: {e}", tool.display()),
                arch: Some(arch.into()),
            }),
        }
        out.ptxas = Some(tool);
    }
    if !errors.is_empty() {
        let list: Vec<String> = errors.iter().map(|f| format!("  - {f}")).collect();
        return fail(format!(
            "the generated PTX breaks {} rule{}:\n{}",
            errors.len(),
            if errors.len() == 1 { "" } else { "s" },
            list.join("\n")
        ));
    }
    out.warnings = warnings;
    Ok(out)
}
