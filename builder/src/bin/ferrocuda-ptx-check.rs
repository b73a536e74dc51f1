//! `ferrocuda-ptx-check`: the PTX rules of `ferrocuda_builder::check`, strictly, on a file.
//!
//! ```text
//! ferrocuda-ptx-check KERNELS.ptx [--manifest KERNELS.json] [--ptxas PATH]
//!                     [--arch sm_80 --arch sm_90] [--static-only]
//! ```
//!
//! Every finding fails (the builder only warns about local memory, stacks and spills; the
//! repository's own kernels must have none). Text rules: no `.extern` but `.extern .shared`,
//! no panic machinery, no `.local` memory, no barrier under a thread- or data-dependent
//! branch, no mbarrier wait without an arrive and no `cp.async` group wait without a commit in
//! its kernel, no `wgmma.mma_async` without a fence before it on every path or without a
//! commit and a wait in its kernel; with `--manifest`, its kernels are the `.entry` set and its arch the `.target`.
//! ptxas rules, for each `--arch` (default sm_80 and sm_90): ptxas succeeds, reports every
//! entry, every function has a 0-byte stack frame and no spills, and ptxas serializes no
//! function's `wgmma.mma_async`.
//!
//! ptxas: `--ptxas`, else `$FERROCUDA_PTXAS`, `$CUDA_HOME`, `$CUDA_PATH`, `PATH`,
//! `/usr/local/cuda`, python3's nvcc wheel. Exit status: 0 passed, 1 a check failed, 2 usage
//! or environment error (file missing, ptxas not found).

use ferrocuda_abi::manifest::Manifest;
use ferrocuda_builder::check::ptxas::{self, Resources};
use ferrocuda_builder::check::{check_manifest, check_text, Finding, Rule, Severity};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: ferrocuda-ptx-check KERNELS.ptx [--manifest KERNELS.json] \
                     [--ptxas PATH] [--arch sm_XY]... [--static-only]";

/// A table row: kernel, arch, its resources (`None`: ptxas failed or did not run).
type Row = (String, String, Option<Resources>);

#[derive(Default)]
struct Args {
    ptx: PathBuf,
    manifest: Option<PathBuf>,
    ptxas: Option<PathBuf>,
    archs: Vec<String>,
    static_only: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args::default();
    let mut ptx = None;
    let mut it = std::env::args_os().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.to_str() {
            Some("--manifest") => args.manifest = Some(value("--manifest")?.into()),
            Some("--ptxas") => args.ptxas = Some(value("--ptxas")?.into()),
            Some("--arch") => args
                .archs
                .push(value("--arch")?.to_string_lossy().into_owned()),
            Some("--static-only") => args.static_only = true,
            Some("-h" | "--help") => return Err(String::new()),
            Some(s) if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ if ptx.is_none() => ptx = Some(PathBuf::from(a)),
            _ => return Err("one PTX file only".into()),
        }
    }
    args.ptx = ptx.ok_or("no PTX file given")?;
    if args.archs.is_empty() {
        args.archs = vec!["sm_80".into(), "sm_90".into()];
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "{}{USAGE}",
                if e.is_empty() {
                    String::new()
                } else {
                    format!("ferrocuda-ptx-check: {e}\n")
                }
            );
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ferrocuda-ptx-check: {e}");
            ExitCode::from(2)
        }
    }
}

/// `Ok(passed)`, or `Err` for a usage/environment error.
fn run(args: &Args) -> Result<bool, String> {
    let ptx = std::fs::read_to_string(&args.ptx)
        .map_err(|e| format!("cannot read {}: {e}", args.ptx.display()))?;
    let manifest = match &args.manifest {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read manifest {}: {e}", p.display()))?;
            Some(Manifest::from_json(&text).map_err(|e| format!("manifest {}: {e}", p.display()))?)
        }
        None => None,
    };
    let ptxas = match (&args.ptxas, args.static_only) {
        (_, true) => None,
        (Some(p), _) if p.is_file() => Some(p.clone()),
        (Some(p), _) => return Err(format!("--ptxas {} does not exist", p.display())),
        (None, _) => Some(ptxas::find(None).ok_or(
            "ptxas not found (give --ptxas, set FERROCUDA_PTXAS, or run scripts/ensure_ptxas.sh); \
             --static-only skips the ptxas checks",
        )?),
    };

    let text = check_text(&ptx);
    let entries = text.entries();
    let mut findings = text.findings.clone();
    if entries.is_empty() {
        findings.push(finding(
            Rule::Entry,
            "the PTX defines no .entry".into(),
            None,
        ));
    }
    if let Some(m) = &manifest {
        findings.extend(check_manifest(m, &entries, text.target.as_deref()));
    }
    let rows = match &ptxas {
        Some(tool) => assemble(tool, args, &entries, &mut findings),
        None => entries
            .iter()
            .map(|e| (e.to_string(), "-".to_string(), None))
            .collect(),
    };

    let tool = ptxas.as_ref().map_or("static checks only".into(), |p| {
        format!("ptxas {}", p.display())
    });
    println!(
        "{}: {} entries, .target {}, {tool}",
        args.ptx.display(),
        entries.len(),
        text.target.as_deref().unwrap_or("?")
    );
    if !rows.is_empty() {
        println!("{}", table(&rows, &findings));
    }
    if findings.is_empty() {
        println!("ferrocuda-ptx-check: all checks passed");
        return Ok(true);
    }
    println!();
    for f in &findings {
        println!("FAIL {f}");
    }
    let n = findings.len();
    println!(
        "\nferrocuda-ptx-check: FAILED ({n} problem{})",
        if n == 1 { "" } else { "s" }
    );
    Ok(false)
}

/// Runs ptxas for every arch: one table row per entry and arch; findings added.
fn assemble(tool: &Path, args: &Args, entries: &[&str], findings: &mut Vec<Finding>) -> Vec<Row> {
    let mut rows = Vec::new();
    for arch in &args.archs {
        match ptxas::run(tool, arch, &args.ptx) {
            Ok(report) => {
                for line in report
                    .lines()
                    .filter(|l| l.to_ascii_lowercase().contains("warning"))
                {
                    eprintln!("[{arch}] {}", line.trim());
                }
                let props = ptxas::parse_report(&report, arch);
                findings.extend(ptxas::check_report(&props, entries, arch));
                findings.extend(ptxas::wgmma_findings(&report, arch));
                rows.extend(
                    entries
                        .iter()
                        .map(|e| (e.to_string(), arch.clone(), props.get(*e).cloned())),
                );
            }
            Err(out) => {
                findings.push(finding(Rule::Ptxas, tail(&out, 15), Some(arch)));
                rows.extend(entries.iter().map(|e| (e.to_string(), arch.clone(), None)));
            }
        }
    }
    rows
}

fn finding(rule: Rule, message: String, arch: Option<&str>) -> Finding {
    Finding {
        function: None,
        rule,
        severity: Severity::Error,
        message,
        arch: arch.map(str::to_string),
        line: None,
        source: None,
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let first = all.first().copied().unwrap_or("");
    let rest = &all[all.len().saturating_sub(lines).max(1).min(all.len())..];
    std::iter::once(first.to_string())
        .chain(rest.iter().map(|l| format!("    {l}")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The per-kernel table: registers, stack, spills, shared memory, status.
fn table(rows: &[Row], findings: &[Finding]) -> String {
    let num = |v: Option<u32>| v.map_or("?".to_string(), |v| v.to_string());
    let header = [
        "kernel",
        "arch",
        "registers",
        "stack",
        "spill st/ld",
        "smem",
        "status",
    ]
    .map(String::from);
    let body: Vec<[String; 7]> = rows
        .iter()
        .map(|(kernel, arch, p)| {
            let failed = findings.iter().any(|f| {
                (f.function.as_deref() == Some(kernel) || f.function.is_none())
                    && f.arch.as_deref().is_none_or(|a| a == arch)
            });
            let cells = match p {
                Some(p) => [
                    num(p.registers),
                    num(p.stack),
                    format!("{}/{}", num(p.spill_stores), num(p.spill_loads)),
                    p.shared.unwrap_or(0).to_string(),
                ],
                None => ["-", "-", "-", "-"].map(String::from),
            };
            let [r, s, sp, sm] = cells;
            [
                kernel.clone(),
                arch.clone(),
                r,
                s,
                sp,
                sm,
                if failed { "FAIL" } else { "ok" }.into(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..7)
        .map(|i| {
            body.iter()
                .chain([&header])
                .map(|r| r[i].len())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let fmt_row = |r: &[String; 7]| {
        r.iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    std::iter::once(fmt_row(&header))
        .chain([rule.join("  ")])
        .chain(body.iter().map(fmt_row))
        .collect::<Vec<_>>()
        .join("\n")
}
