//! The PTX rules: what must never reach a GPU, and what costs performance.
//!
//! One rule set, run by [`PtxBuilder`](crate::PtxBuilder) on every crate it builds and by the
//! `ferrocuda-ptx-check` command (which `scripts/check_ptx.py` drives for the repository's
//! test suite):
//!
//! | rule | what | builder | `ferrocuda-ptx-check` |
//! | --- | --- | --- | --- |
//! | [`Rule::Extern`] | an unresolved `.extern` (only `.extern .shared`, dynamic shared memory, and the driver's [`DRIVER_FUNCTIONS`] — `vprintf` — are allowed) | error | error |
//! | [`Rule::Panic`], [`Rule::PanicText`] | panic machinery: a kernel that reaches a panic function of the standard library through its calls ([`panic`](mod@panic)), message strings, source paths (allowed in a module with `ferrocuda_abi::diag`'s trap record, whose checks record their location) | error | error |
//! | [`Rule::Barrier`] | a block barrier under a thread-dependent branch ([`barrier`]) | error (warning when it depends only on loaded data) | error |
//! | [`Rule::Shared`] | a kernel's static shared memory over 48 KiB, or static plus declared dynamic (`shared_bytes`) over its arch's per-block maximum ([`shared_size`]) | error | error |
//! | [`Rule::Arch`] | an instruction the module's `.target` lacks (`wgmma` outside `sm_90a`, TMA or cluster instructions below `sm_90`): the kernel needs `#[kernel(arch = "…")]` | error | error |
//! | [`Rule::MBarrier`] | an mbarrier wait in a kernel that never arrives on an mbarrier ([`waits`]) | error | error |
//! | [`Rule::CpAsync`] | a `cp.async` group wait in a kernel that never commits a group ([`waits`]) | error | error |
//! | [`Rule::Wgmma`] | a `wgmma.mma_async` reached on some path with no `wgmma.fence` before it ([`wgmma`]), or in a kernel that never commits or never waits for a wgmma group ([`waits`]); ptxas serializing a function's MMAs (its advisory: a fence missing, the accumulators touched in between) | error; ptxas's: warning | error |
//! | [`Rule::Local`], [`Rule::Stack`], [`Rule::Spill`] | local memory, stack frames, register spills (ptxas) | warning | error |
//! | [`Rule::Ptxas`] | ptxas rejects the module or does not report an entry | error | error |
//! | [`Rule::Manifest`], [`Rule::Entry`] | manifest and `.entry` list disagree; no entry | (checked while building) | error |
//!
//! [`sass`] reads the SASS a module assembles to (ptxas and nvdisasm): the state space and width
//! of every memory access, for the tests of the generated code.

pub mod barrier;
pub mod cfg;
pub mod panic;
pub mod parse;
pub mod ptxas;
pub mod sass;
pub mod shared_size;
pub mod waits;
pub mod wgmma;

mod rules;

pub(crate) use rules::mentions;
pub use rules::{calls, Finding, Rule, Severity, DRIVER_FUNCTIONS};

use barrier::{divergent_barriers, functions_that_abort, functions_with_barriers, Taint};
use ferrocuda_abi::manifest::Manifest;
use parse::{parse_functions, strip_comments, PtxFunction};

/// The functions of a module and the findings of the text rules.
#[derive(Clone, Debug)]
pub struct TextCheck {
    /// Every `.entry`/`.func`, defined or declared.
    pub functions: Vec<PtxFunction>,
    /// The `.target` (e.g. `sm_80`).
    pub target: Option<String>,
    /// Every finding, in module order.
    pub findings: Vec<Finding>,
}

impl TextCheck {
    /// The names of the defined entries.
    pub fn entries(&self) -> Vec<&str> {
        self.functions
            .iter()
            .filter(|f| f.is_entry() && f.body.is_some())
            .map(|f| f.name.as_str())
            .collect()
    }
}

/// Runs the text rules (externs, panic machinery, local memory, divergent barriers, waits
/// nothing can complete, static shared memory over 48 KiB).
pub fn check_text(ptx: &str) -> TextCheck {
    check_module(ptx, &Default::default())
}

/// [`check_text`], with the dynamic shared memory the kernels declare (kernel → bytes of
/// `#[kernel(shared_bytes = n)]`, from the manifest): static plus dynamic shared memory over
/// the `.target`'s per-block maximum is refused too.
pub fn check_module(
    ptx: &str,
    dynamic_shared: &std::collections::BTreeMap<String, u32>,
) -> TextCheck {
    let src = strip_comments(ptx);
    let functions = parse_functions(&src);
    let mut findings = extern_findings(&src, &functions);
    let target = ptx_target(&src);
    findings.extend(shared_size::shared_findings(
        &src,
        &functions,
        target.as_deref(),
        dynamic_shared,
    ));
    if let Some(t) = target.as_deref().and_then(ferrocuda_abi::arch::Arch::parse) {
        findings.extend(functions.iter().filter_map(|f| arch_finding(f, &t)));
    }
    findings.extend(panic::panic_findings(&functions));
    let barrier_funcs = functions_with_barriers(&functions);
    let aborting = functions_that_abort(&functions);
    for f in &functions {
        if let Some(used) = local_memory(f) {
            findings.push(Finding::new(
                Some(&f.name),
                Rule::Local,
                Severity::Warning,
                format!("uses .local memory: {used}"),
            ));
            if let Some((_, line)) = local_use(f) {
                let last = findings.len() - 1;
                findings[last].line = Some(line);
            }
        }
        findings.extend(
            divergent_barriers(f, &barrier_funcs, &aborting)
                .into_iter()
                .map(|d| {
                    let severity = if d.taint == Taint::Thread {
                        Severity::Error
                    } else {
                        Severity::Warning
                    };
                    Finding::new(Some(&f.name), Rule::Barrier, severity, barrier_message(&d))
                        .at(d.line)
                }),
        );
    }
    for (kernel, w) in waits::unmatched_waits(&functions) {
        findings.push(
            Finding::new(Some(&kernel), w.rule, Severity::Error, wait_message(&w)).at(w.line),
        );
    }
    for p in wgmma::unfenced(&functions, &aborting) {
        findings.push(
            Finding::new(Some(&p.function), Rule::Wgmma, Severity::Error, p.message).at(p.line),
        );
    }
    // Source paths are expected where ferrocuda's checks record their location for the host
    // (`ferrocuda_abi::diag`): the module then defines the trap record.
    let records_locations = src.contains(ferrocuda_abi::diag::TRAP_RECORD_SYMBOL);
    // The call graph, only once a panic text is found (most modules have none).
    let mut reaching = None;
    for (name, data) in &byte_arrays(&src) {
        if let Some((what, snippet)) = panic_text(data) {
            if records_locations && what == "source path" {
                continue;
            }
            let mut message = format!("byte array {name} holds a {what}: {snippet:?}");
            // The kernel that uses it and the instruction that does (the Rust line, once
            // located); a module-level array nothing reads names no kernel.
            let user = first_reference(&functions, &src, name);
            let reaching = reaching.get_or_insert_with(|| entries_reaching(&functions));
            let kernel = user.as_ref().and_then(|(f, _)| {
                let entry = reaching.get(f)?.iter().next()?.clone();
                if entry != *f {
                    message.push_str(&format!(" (used by `{f}`, which the kernel calls)"));
                }
                Some(entry)
            });
            let finding =
                Finding::new(kernel.as_deref(), Rule::PanicText, Severity::Error, message);
            findings.push(match user {
                Some((_, line)) => finding.at(line),
                None => finding,
            });
        }
    }
    TextCheck {
        target,
        functions,
        findings,
    }
}

/// Instructions (by the start of their mnemonic, or a state space or register they name) and
/// the architecture they need.
const NEWER_INSTRUCTIONS: [(&str, &str); 22] = [
    ("wgmma.", "sm_90a"),
    ("setmaxnreg.", "sm_90a"),
    ("cp.async.bulk", "sm_90"),
    ("cp.reduce.async.bulk", "sm_90"),
    ("mbarrier.try_wait", "sm_90"),
    ("mbarrier.expect_tx", "sm_90"),
    ("mbarrier.arrive.expect_tx", "sm_90"),
    ("mapa.", "sm_90"),
    ("barrier.cluster", "sm_90"),
    ("fence.proxy.async", "sm_90"),
    ("fence.mbarrier_init", "sm_90"),
    ("elect.sync", "sm_90"),
    ("stmatrix.", "sm_90"),
    ("griddepcontrol.", "sm_90"),
    ("%cluster_", "sm_90"),
    ("%clusterid", "sm_90"),
    ("%nclusterid", "sm_90"),
    ("%is_explicit_cluster", "sm_90"),
    ("shared::cluster", "sm_90"),
    // The cluster scope of atomics, loads and stores (`atom.relaxed.cluster.global…`).
    (".cluster.", "sm_90"),
    ("fence.acq_rel.cluster", "sm_90"),
    ("fence.sc.cluster", "sm_90"),
];

/// The first instruction of `f` that `target` lacks, as an error naming what the kernel needs.
fn arch_finding(f: &PtxFunction, target: &ferrocuda_abi::arch::Arch) -> Option<Finding> {
    use ferrocuda_abi::arch::Arch;
    let body = f.body.as_deref()?;
    for (n, line) in body.lines().enumerate() {
        let line = line.trim();
        for (what, needs) in NEWER_INSTRUCTIONS {
            let needed = Arch::parse(needs).expect("a valid arch in the table");
            if !line.contains(what) || target.includes(&needed) {
                continue;
            }
            let instruction: String = line.chars().take(60).collect();
            return Some(
                Finding::new(
                    Some(&f.name),
                    Rule::Arch,
                    Severity::Error,
                    format!(
                        "`{instruction}` (line {}) needs {needs}, but this module is built for \
                     {target}: declare the kernel `#[kernel(arch = \"{needs}\")]` (it is then \
                     built for {needs} and launched only where that runs; keep a portable \
                     kernel of the same family for other GPUs)",
                        f.body_line + n,
                    ),
                )
                .at(f.body_line + n),
            );
        }
    }
    None
}

fn barrier_message(d: &barrier::DivergentBarrier) -> String {
    let mut m = format!(
        "`{}` (line {}) is reached only by the threads that take one side of the \
         thread-dependent branch `{}` (line {}; {}): every thread of a block must reach the \
         same barrier, or the block hangs or computes wrong results",
        d.barrier, d.line, d.branch, d.branch_line, d.reason
    );
    if d.duplicated {
        m.push_str(
            ". The same barrier is on both sides of the branch: if the source has one barrier \
             after the `if`, the compiler duplicated it (rust-lang/rust#137086; fixed in \
             rustc 1.97, avoided on older ones with -Zmir-enable-passes=-JumpThreading)",
        );
    }
    if d.taint == Taint::Data {
        m.push_str(". (The branch depends on loaded data: fine only if every thread of the block sees the same value.)");
    }
    m
}

fn wait_message(w: &waits::UnmatchedWait) -> String {
    let place = match &w.callee {
        Some(f) => format!("line {}, in the called function `{f}`", w.line),
        None => format!("line {}", w.line),
    };
    if w.rule == Rule::Wgmma {
        let why = if w.missing == "wgmma.commit_group" {
            "its MMAs belong to no group, so no `wgmma.wait_group` waits for them and the \
             accumulators are read while the tensor cores may still write them. Call \
             `wgmma::commit_group()` after the MMAs"
        } else {
            "nothing waits for the committed MMAs, so the accumulators are read (or the \
             kernel ends) while the tensor cores may still write them. Call \
             `wgmma::wait_group::<0>()` before reading them"
        };
        // An MMA's text lists up to 128 accumulator registers: its opcode is what names it.
        let mma: String = w.wait.chars().take(72).collect();
        format!(
            "`{mma}` ({place}): this kernel never executes a `{}`: {why}",
            w.missing
        )
    } else if w.rule == Rule::MBarrier {
        format!(
            "`{}` ({place}) waits for an mbarrier phase, but nothing in this kernel performs \
             {}: the phase can never complete and the block hangs. An arrive is missing \
             (`MBarrier::arrive` in ferrocuda_device::mbarrier), or it is in a function this \
             kernel does not call",
            w.wait, w.missing
        )
    } else {
        let fix = if w.missing.contains("bulk") {
            "Commit the bulk copies with `cp.async.bulk.commit_group`"
        } else {
            "Commit after the copies (`cp_async::commit_group` in ferrocuda_device), or wait \
             with `cp.async.wait_all`, which commits them"
        };
        format!(
            "`{}` ({place}) waits for committed asynchronous-copy groups, but this kernel never \
             performs {}: its copies belong to no group, so the wait does not wait for them \
             and the memory they write is read while they may still be landing. {fix}",
            w.wait, w.missing
        )
    }
}

/// Functions of the C math library that kernels may call by mistake (`f` suffixes too).
const LIBM: [&str; 52] = [
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cbrt",
    "ceil",
    "copysign",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "exp",
    "exp10",
    "exp2",
    "expm1",
    "fabs",
    "fdim",
    "floor",
    "fma",
    "fmax",
    "fmin",
    "fmod",
    "frexp",
    "hypot",
    "ilogb",
    "ldexp",
    "lgamma",
    "log",
    "log10",
    "log1p",
    "log2",
    "logb",
    "modf",
    "nearbyint",
    "nextafter",
    "pow",
    "remainder",
    "rint",
    "round",
    "scalbn",
    "sin",
    "sincos",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "tgamma",
    "trunc",
    "remquo",
];

/// What to say about an unresolved function `name`.
pub fn unresolved_function_hint(name: &str) -> String {
    let base = name
        .strip_suffix('f')
        .filter(|b| LIBM.contains(b))
        .unwrap_or(name);
    if LIBM.contains(&base) {
        format!(
            "`{name}` is a C math library function, which the GPU does not have: use \
             `ferrocuda_device::math` (NVIDIA's libdevice, `__nv_{name}`)"
        )
    } else if name.starts_with(crate::shared::LIBDEVICE_PREFIX) {
        format!("`{name}` is not a libdevice function (libdevice.10.bc does not define it)")
    } else {
        format!(
            "`{name}` is declared but defined nowhere: every function a kernel calls must be \
             defined in the kernel crate or its dependencies"
        )
    }
}

fn extern_findings(src: &str, functions: &[PtxFunction]) -> Vec<Finding> {
    let mut out = Vec::new();
    let unresolved =
        |f: &&PtxFunction| f.is_extern() && !DRIVER_FUNCTIONS.contains(&f.name.as_str());
    for f in functions.iter().filter(unresolved) {
        out.push(Finding::new(
            Some(&f.name),
            Rule::Extern,
            Severity::Error,
            format!(
                "unresolved `.extern .func` (line {}; the module would not load): {}",
                f.line,
                unresolved_function_hint(&f.name)
            ),
        ));
    }
    for (n, line) in src.lines().enumerate() {
        let s = line.trim();
        let words: Vec<&str> = s.split_whitespace().collect();
        let Some(pos) = words.iter().position(|w| *w == ".extern") else {
            continue;
        };
        let leading = words[..pos]
            .iter()
            .all(|w| matches!(*w, ".visible" | ".weak"));
        let next = words.get(pos + 1).copied().unwrap_or("");
        if !leading || next == ".func" || next == ".shared" {
            continue;
        }
        out.push(Finding::new(
            None,
            Rule::Extern,
            Severity::Error,
            format!(
                "unresolved `.extern` declaration at line {}: {}",
                n + 1,
                truncate(s, 120)
            ),
        ));
    }
    let externs: Vec<&str> = functions
        .iter()
        .filter(unresolved)
        .map(|f| f.name.as_str())
        .collect();
    for f in functions {
        for target in calls(f) {
            if externs.contains(&target.as_str()) {
                out.push(Finding::new(
                    Some(&f.name),
                    Rule::Extern,
                    Severity::Error,
                    format!("calls the unresolved function `{target}`"),
                ));
            }
        }
    }
    out
}

fn truncate(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

/// Function → the kernels (`.entry`) that execute it: itself for an entry, the entries that
/// reach it through calls for a `.func`.
pub fn entries_reaching(
    functions: &[PtxFunction],
) -> std::collections::HashMap<String, std::collections::BTreeSet<String>> {
    let graph: std::collections::HashMap<&str, Vec<String>> = functions
        .iter()
        .filter(|f| f.body.is_some())
        .map(|f| (f.name.as_str(), calls(f)))
        .collect();
    let mut out: std::collections::HashMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for e in functions
        .iter()
        .filter(|f| f.is_entry() && f.body.is_some())
    {
        let mut work = vec![e.name.clone()];
        while let Some(f) = work.pop() {
            if out.entry(f.clone()).or_default().insert(e.name.clone()) {
                work.extend(graph.get(f.as_str()).into_iter().flatten().cloned());
            }
        }
    }
    out
}

/// The first function whose instructions name `array` (an operand `array` or `array+8`), with
/// the line of that instruction; through one level of indirection too — a panic's location
/// record (`.global` bytes holding `generic(array)`) that an instruction names — as rustc
/// emits them.
fn first_reference(functions: &[PtxFunction], src: &str, array: &str) -> Option<(String, usize)> {
    let direct = |what: &str| {
        functions.iter().find_map(|f| {
            let body = f.body.as_deref()?;
            if !body.contains(what) {
                return None;
            }
            parse::statements(body, f.body_line)
                .into_iter()
                .find_map(|s| match s {
                    parse::Statement::Instr(i) if i.operands.iter().any(|o| mentions(o, what)) => {
                        Some((f.name.clone(), i.line))
                    }
                    _ => None,
                })
        })
    };
    direct(array).or_else(|| {
        let needle = format!("generic({array})");
        src.split(';')
            .map(str::trim)
            .filter(|s| s.contains(&needle) && (s.contains(".global") || s.contains(".const")))
            .filter_map(|s| Some(declared_name(&s[..s.find('=')?])))
            .find_map(direct)
    })
}

/// The name a variable declaration (the text before its `=`) declares: its last word without
/// the array extent (`.global .align 1 .b8 anon_0[12]` → `anon_0`).
fn declared_name(decl: &str) -> &str {
    let decl = decl.trim_end().trim_end_matches('=').trim_end();
    decl.split_whitespace()
        .last()
        .unwrap_or("")
        .split('[')
        .next()
        .unwrap_or("")
}

/// What in a function uses the `.local` state space, if anything: a `.local` array (LLVM's
/// `__local_depot`, the stack frame) that an instruction reads, writes or takes the address
/// of, or a `.local` access. LLVM's prologue alone (`mov.u64 %SPL, __local_depot0;
/// cvta.local.u64 %SP, %SPL;` with neither register used again) is no stack: ptxas removes
/// it and reports 0 bytes.
pub fn local_memory(f: &PtxFunction) -> Option<String> {
    local_use(f).map(|(what, _)| what)
}

/// [`local_memory`], with the PTX line of the first use.
fn local_use(f: &PtxFunction) -> Option<(String, usize)> {
    let body = f.body.as_deref()?;
    if !body.contains(".local") && !body.contains("%SP") {
        return None;
    }
    let decls: Vec<&str> = body
        .split(';')
        .map(str::trim)
        .filter(|s| s.starts_with(".local"))
        .filter_map(|s| s.split_whitespace().last())
        .map(|n| n.split('[').next().unwrap_or(n))
        .collect();
    let instrs: Vec<parse::Instr> = parse::statements(body, f.body_line)
        .into_iter()
        .filter_map(|s| match s {
            parse::Statement::Instr(i) if !i.opcode.starts_with('.') => Some(i),
            _ => None,
        })
        .collect();
    // The prologue: `mov %SPL, <depot>` and `cvta.local %SP, %SPL`.
    let prologue = |i: &parse::Instr| {
        let dest = i.operands.first().map(String::as_str);
        (i.base() == "mov" && dest == Some("%SPL"))
            || (i.opcode.starts_with("cvta.local") && dest == Some("%SP"))
    };
    // What is used, each with its first use.
    let mut used: Vec<(String, String, usize)> = Vec::new();
    for i in instrs.iter().filter(|i| !prologue(i)) {
        let names_depot = decls
            .iter()
            .find(|d| i.operands.iter().any(|o| mentions(o, d)));
        let stack_reg = i
            .operands
            .iter()
            .flat_map(|o| parse::registers(o))
            .find(|r| *r == "%SP" || *r == "%SPL");
        let what = if let Some(d) = names_depot {
            format!(".local {d}")
        } else if let Some(r) = stack_reg {
            format!("the stack pointer {r}")
        } else if i.opcode.contains(".local") {
            "a .local access".to_string()
        } else {
            continue;
        };
        if used.iter().all(|(w, _, _)| *w != what) {
            let at = format!("line {}: `{}`", i.line, truncate(&i.text, 60));
            used.push((what, at, i.line));
        }
    }
    let list: Vec<String> = used
        .iter()
        .map(|(w, at, _)| format!("{w} ({at})"))
        .collect();
    let first = used.first()?.2;
    let what = match decls.as_slice() {
        [] => list.join(", "),
        d => format!(".local {}, used through {}", d.join(", "), list.join(", ")),
    };
    Some((what, first))
}

/// The first target of the `.target` directive (e.g. `sm_80`).
pub fn ptx_target(ptx: &str) -> Option<String> {
    ptx.lines().find_map(|l| {
        let rest = l.trim().strip_prefix(".target")?;
        Some(rest.split(',').next()?.trim().to_string()).filter(|t| !t.is_empty())
    })
}

/// `(name, bytes)` of every initialised `.global`/`.const` byte array.
pub fn byte_arrays(ptx: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for stmt in ptx.split(';') {
        let s = stmt.trim();
        let words: Vec<&str> = s.split_whitespace().collect();
        let space = words.iter().any(|w| *w == ".global" || *w == ".const");
        let bytes = words.iter().any(|w| matches!(*w, ".b8" | ".u8" | ".s8"));
        let (Some(open), Some(close)) = (s.find('{'), s.rfind('}')) else {
            continue;
        };
        if !space || !bytes || !s[..open].contains('=') {
            continue;
        }
        let name = declared_name(&s[..open]);
        let data = s[open + 1..close]
            .split(',')
            .map(|t| {
                let t = t.trim();
                let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    Some(h) => u64::from_str_radix(h, 16).ok(),
                    None => t.parse::<u64>().ok(),
                };
                // Anything else (e.g. `0xFF(generic(sym))`) is an address byte, not text.
                v.map_or(0, |v| v as u8)
            })
            .collect();
        out.push((name.to_string(), data));
    }
    out
}

/// Text that only panic messages carry.
const PANIC_TEXTS: [&str; 18] = [
    "panicked",
    "index out of bounds",
    "attempt to add",
    "attempt to subtract",
    "attempt to multiply",
    "attempt to divide",
    "attempt to calculate",
    "attempt to negate",
    "attempt to shift",
    "called `Option::",
    "called `Result::",
    "range start index ",
    "range end index ",
    "slice index starts at ",
    "assertion failed",
    "assertion `left == right` failed",
    "explicit panic",
    "capacity overflow",
];

/// `(what, snippet)` when the bytes read like a panic message or a panic location's source
/// path (`src/lib.rs`, `…/library/core/src/num/mod.rs`).
pub fn panic_text(data: &[u8]) -> Option<(&'static str, String)> {
    let text: String = data.iter().map(|&b| b as char).collect();
    let hit = PANIC_TEXTS
        .iter()
        .find_map(|p| text.find(p).map(|at| ("panic message", at, p.len())))
        .or_else(|| source_path(&text).map(|at| ("source path", at, 3)))?;
    let (what, at, len) = hit;
    let lo = text[..at]
        .char_indices()
        .rev()
        .nth(19)
        .map_or(0, |(i, _)| i);
    let snippet: String = text[lo..]
        .chars()
        .take(at - lo + len + 20)
        .map(|c| if (' '..='~').contains(&c) { c } else { '.' })
        .collect();
    Some((what, snippet))
}

/// Offset of a `.rs` that ends a path (`x.rs` not followed by a word character).
fn source_path(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    text.match_indices(".rs").map(|(i, _)| i).find(|&i| {
        let before = i > 0
            && (b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'_' | b'-' | b'/' | b'\\'));
        let after = b
            .get(i + 3)
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'));
        before && after
    })
}

/// The manifest's kernels are the module's entries, and its arch the module's `.target` — for
/// the base PTX, the kernels without an `arch`; for a part's PTX (its `.target` a key of the
/// manifest's `parts`), the kernels of that arch.
pub fn check_manifest(manifest: &Manifest, entries: &[&str], target: Option<&str>) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |who: Option<&str>, message: String| {
        out.push(Finding::new(who, Rule::Manifest, Severity::Error, message));
    };
    let part = target.filter(|t| *t != manifest.arch && manifest.parts.contains_key(*t));
    let names: Vec<&str> = manifest.kernels_of(part).map(|k| k.name.as_str()).collect();
    let mut seen = std::collections::BTreeSet::new();
    for n in &names {
        if !seen.insert(n) {
            add(Some(n), "listed more than once in the manifest".into());
        }
    }
    for n in names.iter().filter(|n| !entries.contains(n)) {
        add(
            Some(n),
            "in the manifest but not an .entry of the PTX".into(),
        );
    }
    for e in entries.iter().filter(|e| !names.contains(e)) {
        add(Some(e), ".entry of the PTX but not in the manifest".into());
    }
    if let Some(t) = target.filter(|t| *t != manifest.arch && part.is_none()) {
        add(
            None,
            format!(
                "manifest arch \"{}\" but the PTX .target is {t}",
                manifest.arch
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests;
