//! Panic machinery, decided by the call graph: a kernel is refused when it reaches one of the
//! standard library's panic functions (`core::panicking::*`, `rust_begin_unwind`, the
//! `unwrap_failed`/`slice_*_fail` family) or its formatter machinery (`core::fmt::*`) through
//! its calls — never because of the name of the kernel itself.

use super::parse::PtxFunction;
use super::rules::{calls, Finding, Rule, Severity};
use std::collections::{HashMap, HashSet, VecDeque};

/// Functions of `core`/`alloc`/`std` whose last path segment makes them panic machinery
/// wherever they live (`core::result::unwrap_failed`, `core::slice::index::slice_index_fail`, …).
const PANIC_LEAVES: [&str; 13] = [
    "unwrap_failed",
    "expect_failed",
    "assert_failed",
    "assert_failed_inner",
    "slice_index_fail",
    "slice_start_index_len_fail",
    "slice_end_index_len_fail",
    "slice_index_order_fail",
    "slice_error_fail",
    "slice_error_fail_rt",
    "str_index_overflow_fail",
    "len_mismatch_fail",
    "index_overflow_fail",
];

/// Modules of `core`/`alloc`/`std` that are panic or formatting machinery as a whole.
const PANIC_MODULES: [&str; 3] = ["panicking", "panic", "fmt"];

/// Unmangled symbols of the panic runtime.
const PANIC_SYMBOLS: [&str; 4] = [
    "rust_begin_unwind",
    "rust_panic",
    "__rust_start_panic",
    "__rust_panic_cleanup",
];

/// The identifiers of a mangled Rust symbol (legacy `_ZN…E` and v0 `_R…` manglings both write
/// path segments as `<length><identifier>`), in order.
fn segments(symbol: &str) -> Vec<&str> {
    let b = symbol.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let v0 = symbol.starts_with("_R");
    while i < b.len() {
        // A v0 disambiguator (`s<base-62>_` before an identifier's length) is no identifier.
        if v0 && b[i] == b's' {
            let run = b[i + 1..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric())
                .count();
            let end = i + 1 + run;
            if b.get(end) == Some(&b'_') && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
                i = end + 1;
                continue;
            }
        }
        let prev_digit = i > 0 && b[i - 1].is_ascii_digit();
        if !b[i].is_ascii_digit() || prev_digit || b[i] == b'0' {
            i += 1;
            continue;
        }
        let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        let start = i + digits;
        let len: usize = symbol[i..start].parse().unwrap_or(0);
        // v0 separates an identifier that starts with a digit or `_` by one `_`.
        let start = start + usize::from(b.get(start) == Some(&b'_'));
        let ident = symbol.get(start..start + len).filter(|s| {
            len > 0
                && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
                && !s.as_bytes()[0].is_ascii_digit()
        });
        match ident {
            Some(s) => {
                out.push(s);
                i = start + len;
            }
            None => i = start,
        }
    }
    out
}

/// Whether `symbol` is one of the standard library's panic functions or its formatter
/// machinery (by its mangled path: `core::panicking::panic_fmt`, `core::fmt::write`,
/// `core::result::unwrap_failed`, …; or the panic runtime's `rust_begin_unwind`). A function
/// of another crate is never panic machinery, whatever its name.
pub fn is_panic_machinery(symbol: &str) -> bool {
    if PANIC_SYMBOLS.contains(&symbol) {
        return true;
    }
    let segs = segments(symbol);
    let std_crate = segs.iter().any(|s| matches!(*s, "core" | "alloc" | "std"));
    std_crate
        && segs
            .iter()
            .any(|s| PANIC_MODULES.contains(s) || PANIC_LEAVES.contains(s))
}

/// Findings for every kernel (`.entry`) that reaches panic machinery through its calls, with
/// the chain of calls that gets there.
pub(super) fn panic_findings(functions: &[PtxFunction]) -> Vec<Finding> {
    let graph: HashMap<&str, Vec<String>> = functions
        .iter()
        .filter(|f| f.body.is_some())
        .map(|f| (f.name.as_str(), calls(f)))
        .collect();
    let mut out = Vec::new();
    for entry in functions
        .iter()
        .filter(|f| f.is_entry() && f.body.is_some())
    {
        // Breadth first: the shortest chain of calls to the machinery.
        let mut parent: HashMap<String, String> = HashMap::new();
        let mut seen: HashSet<String> = HashSet::from([entry.name.clone()]);
        let mut queue = VecDeque::from([entry.name.clone()]);
        let mut hit = None;
        'search: while let Some(f) = queue.pop_front() {
            for callee in graph.get(f.as_str()).into_iter().flatten() {
                if !seen.insert(callee.clone()) {
                    continue;
                }
                parent.insert(callee.clone(), f.clone());
                if is_panic_machinery(callee) {
                    hit = Some(callee.clone());
                    break 'search;
                }
                queue.push_back(callee.clone());
            }
        }
        let Some(target) = hit else { continue };
        let mut chain = vec![target.clone()];
        while let Some(p) = parent.get(chain.last().expect("not empty")) {
            chain.push(p.clone());
        }
        chain.reverse();
        let shown: Vec<String> = chain.iter().map(|s| crate::ir::display_path(s)).collect();
        // The kernel's own call on the way there.
        let call_line = entry.body.as_deref().and_then(|body| {
            super::parse::statements(body, entry.body_line)
                .into_iter()
                .find_map(|s| match s {
                    super::parse::Statement::Instr(i)
                        if super::cfg::call_target(&i) == chain.get(1).map(String::as_str) =>
                    {
                        Some(i.line)
                    }
                    _ => None,
                })
        });
        let mut finding = Finding::new(
            Some(&entry.name),
            Rule::Panic,
            Severity::Error,
            format!(
                "reaches the panic machinery {} through its calls ({}): the GPU has no panic \
                 runtime. Find the call that can panic (indexing, `unwrap`, `expect`, \
                 arithmetic overflow, formatting) and use a checked form (`get`, a `match`) or \
                 `ferrocuda_device::diag`'s checks",
                crate::ir::display_path(&target),
                shown.join(" → ")
            ),
        );
        finding.line = call_line;
        out.push(finding);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machinery_is_decided_by_the_path_not_a_word() {
        for yes in [
            "_RNvNtCsgJ6ytTPJmYV_4core9panicking18panic_bounds_check",
            "_ZN4core9panicking5panic17h0123456789abcdefE",
            "_ZN4core6result13unwrap_failed17h0123456789abcdefE",
            "_ZN4core3fmt5write17h0123456789abcdefE",
            "_RNvNtNtCs1_4core5slice5index16slice_index_fail",
            "rust_begin_unwind",
            "_RNvNtCsXa9b_4core9panicking5panic",
        ] {
            assert!(is_panic_machinery(yes), "{yes}");
        }
        for no in [
            "panic_free_sum",
            "no_panic_here",
            "_RNvCs1_7mycrate5panic",
            "_ZN7mycrate14unwrap_failed17h0123456789abcdefE",
            "_ZN4core3num7checked17h0123456789abcdefE",
            // A crate disambiguator whose digits would swallow the next segments.
            "_RNvCsXa9b_7mycrate4core",
        ] {
            assert!(!is_panic_machinery(no), "{no}");
        }
    }
}
