//! The checks every build runs on its PTX: the text rules of [`crate::check`], then, when a
//! ptxas is found, assembly for the crate's arch and the per-kernel resource report, and the
//! cubins (one ptxas run per arch, in parallel: the crate arch's run makes both its report and
//! its cubin).

use crate::check::ptxas::{self, Resources};
use crate::check::{check_module, Finding, Rule, Severity};
use crate::BuildError;
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
    /// Findings that fail it (the build reports them with [`failure`]).
    pub errors: Vec<Finding>,
    /// The cubins assembled: (arch, file), in the order asked for.
    pub cubins: Vec<(String, PathBuf)>,
    /// A one-line note for the build's user (no ptxas: PTX only).
    pub note: Option<String>,
}

/// Whether a ptxas failure says only that the ptxas is older than the PTX.
fn too_old(e: &str) -> bool {
    e.contains("Unsupported .version") || e.contains("Unsupported .target")
}

/// Checks `ptx` (the text, manifest records removed; `dynamic_shared`: kernel → the dynamic
/// shared memory it declares) and, with ptxas, `ptx_file` (the same module as generated) for
/// `arch`, and assembles `ptx_file` into each of `cubins` (arch, output file).
#[allow(clippy::too_many_arguments)]
pub(crate) fn verify(
    ptx: &str,
    dynamic_shared: &std::collections::BTreeMap<String, u32>,
    ptx_file: &Path,
    arch: &str,
    ptxas_root: Option<&Path>,
    run_ptxas: bool,
    download: bool,
    cubins: &[(String, PathBuf)],
) -> Result<Verified, BuildError> {
    let text = check_module(ptx, dynamic_shared);
    let entries = text.entries();
    let (mut errors, mut warnings): (Vec<Finding>, Vec<Finding>) = text
        .findings
        .iter()
        .cloned()
        .partition(|f| f.severity == Severity::Error);
    let mut out = Verified::default();
    // ptxas is wanted for the cubins; without one, the builder may download NVIDIA's wheel.
    let search = match (run_ptxas, cubins.is_empty()) {
        (false, _) => None,
        (true, true) => Some(crate::cuda::find_ptxas(ptxas_root)),
        (true, false) => Some(crate::cuda::or_download(
            || crate::cuda::find_ptxas(ptxas_root),
            download,
        )),
    };
    let tool = search.as_ref().and_then(|s| s.found.clone());
    if let Some(tool) = tool {
        // The crate arch's run writes its cubin when one is asked for, a temporary file else.
        let own = cubins.iter().find(|(a, _)| a == arch).map(|(_, f)| f);
        let others: Vec<&(String, PathBuf)> = cubins.iter().filter(|(a, _)| a != arch).collect();
        let (report, assembled) = std::thread::scope(|s| {
            let runs: Vec<_> = others
                .iter()
                .map(|(a, f)| s.spawn(|| ptxas::assemble(&tool, a, ptx_file, f)))
                .collect();
            let report = match own {
                Some(f) => ptxas::assemble(&tool, arch, ptx_file, f),
                None => ptxas::run(&tool, arch, ptx_file),
            };
            let assembled: Vec<Result<String, String>> = runs
                .into_iter()
                .map(|r| {
                    r.join()
                        .unwrap_or_else(|_| Err("the ptxas thread panicked".into()))
                })
                .collect();
            (report, assembled)
        });
        let too_old_warning = |a: &str, e: &str| Finding {
            function: None,
            rule: Rule::Ptxas,
            severity: Severity::Warning,
            message: format!(
                "{} is too old for this PTX, no resource report or cubin: {e}",
                tool.display()
            ),
            arch: Some(a.into()),
            line: None,
            source: None,
        };
        let rejects = |a: &str, e: &str| Finding {
            function: None,
            rule: Rule::Ptxas,
            severity: Severity::Error,
            message: format!("ptxas ({}) rejects the PTX: {e}", tool.display()),
            arch: Some(a.into()),
            line: None,
            source: None,
        };
        let mut made: Vec<&str> = Vec::new();
        match report {
            Ok(report) => {
                let props = ptxas::parse_report(&report, arch);
                // ptxas knows the stack: no `.local` warning for a function that no kernel
                // with a stack frame executes (a `.func`'s frame is its callers' once ptxas
                // inlines it).
                let callers = crate::check::entries_reaching(&text.functions);
                warnings.retain(|w| {
                    let Some(f) = w.function.as_deref().filter(|_| w.rule == Rule::Local) else {
                        return true;
                    };
                    let no_stack = |k: &String| props.get(k).is_some_and(|r| r.stack == Some(0));
                    callers.get(f).is_none_or(|ks| !ks.iter().all(no_stack))
                });
                let (e, w): (Vec<Finding>, Vec<Finding>) =
                    ptxas::check_report(&props, &entries, arch)
                        .into_iter()
                        .partition(|f| f.severity == Severity::Error);
                errors.extend(e);
                warnings.extend(w);
                warnings.extend(ptxas::wgmma_findings(&report, arch));
                out.resources = props.into_values().collect();
                made.push(arch);
            }
            // An older ptxas than the PTX needs says nothing about the PTX.
            Err(e) if too_old(&e) => warnings.push(too_old_warning(arch, &e)),
            Err(e) => errors.push(rejects(arch, &e)),
        }
        for ((a, _), result) in others.iter().zip(assembled) {
            match result {
                Ok(_) => made.push(a),
                Err(e) if too_old(&e) => warnings.push(too_old_warning(a, &e)),
                Err(e) => errors.push(rejects(a, &e)),
            }
        }
        out.cubins = cubins
            .iter()
            .filter(|(a, _)| made.contains(&a.as_str()))
            .cloned()
            .collect();
        out.ptxas = Some(tool);
    } else if run_ptxas && !cubins.is_empty() {
        let why = search
            .and_then(|s| s.download_error)
            .map(|e| format!(" — {}", e.replace('\n', " ").trim()))
            .unwrap_or_default();
        out.note = Some(format!(
            "no ptxas found: PTX only, no cubins (the driver compiles the PTX when the module \
             first loads; set FERROCUDA_PTXAS or CUDA_HOME, or put ptxas on PATH, and the next \
             build makes cubins){why}"
        ));
    }
    out.warnings = warnings;
    out.errors = errors;
    Ok(out)
}

/// The message of a build that breaks the rules of `errors`.
pub(crate) fn failure(errors: &[Finding]) -> String {
    let list: Vec<String> = errors.iter().map(|f| format!("  - {f}")).collect();
    format!(
        "the generated PTX breaks {} rule{}:\n{}",
        errors.len(),
        if errors.len() == 1 { "" } else { "s" },
        list.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.local` store ptxas removes (nothing reads it): the text rule reports it without
    /// ptxas; ptxas's 0-byte frame clears it.
    const DEAD_LOCAL: &str = ".version 7.1\n.target sm_80\n.address_size 64\n\
        .visible .entry dead(\n\t.param .u32 dead_param_0\n)\n{\n\
        \t.local .align 4 .b8 __local_depot0[16];\n\t.reg .b32 %r<3>;\n\t.reg .b64 %SP;\n\
        \t.reg .b64 %SPL;\n\tmov.u64 %SPL, __local_depot0;\n\tcvta.local.u64 %SP, %SPL;\n\
        \tld.param.u32 %r1, [dead_param_0];\n\tst.local.u32 [__local_depot0], %r1;\n\tret;\n}\n";

    #[test]
    fn local_memory_ptxas_gives_no_frame_is_not_reported() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/nvcc/nvidia/cuda_nvcc");
        assert!(
            root.join("bin/ptxas").is_file(),
            "no nvcc wheel at {}: run scripts/ensure_ptxas.sh",
            root.display()
        );
        let dir = std::env::temp_dir().join(format!("ferrocuda-verify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("dead.ptx");
        std::fs::write(&file, DEAD_LOCAL).unwrap();
        let none = Default::default();
        let run = |ptxas: bool| {
            verify(
                DEAD_LOCAL,
                &none,
                &file,
                "sm_80",
                Some(&root),
                ptxas,
                false,
                &[],
            )
        };
        let without = run(false).unwrap();
        let rules: Vec<Rule> = without.warnings.iter().map(|w| w.rule).collect();
        assert_eq!(rules, [Rule::Local], "{:#?}", without.warnings);
        let with = run(true).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(with.resources.len(), 1, "{:#?}", with.resources);
        assert_eq!(with.resources[0].stack, Some(0));
        assert!(with.warnings.is_empty(), "{:#?}", with.warnings);
    }
}
