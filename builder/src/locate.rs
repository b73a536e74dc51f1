//! Rust source locations of check findings.
//!
//! A build whose PTX breaks a rule (or draws a warning about a kernel) builds the crate once more with line tables (rustc's
//! `debug = "line-tables-only"`, written by `llc` as `.loc` directives only, with the call
//! sites of inlined functions) into a module that is only read, never shipped: the shipped
//! PTX and cubins stay exactly as without. Both modules are the same code — the located one
//! with `.loc`/`.file` lines and a few labels more — so each finding's PTX line has its
//! counterpart in the located module, and the `.loc` in effect there, followed out through
//! its `inlined_at` call sites, gives the innermost line of the kernel crate's own sources
//! (a barrier in `ferrocuda_device::thread::sync_threads`, inlined into a kernel, is the
//! kernel's line that calls it). A finding without a PTX line, or a module that differs,
//! gets its kernel's line (the `#[kernel]` function's first location).

use crate::check::Finding;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `(file, line, column)` of a `.loc` directive.
type Pos = (u32, u32, u32);

/// One `.loc`: where, and the call site it is inlined at.
#[derive(Clone, Copy, Debug)]
struct Loc {
    pos: Pos,
    inlined_at: Option<Pos>,
}

fn parse_pos(words: &[&str]) -> Option<Pos> {
    let n = |i: usize| words.get(i)?.trim_end_matches(',').parse().ok();
    Some((n(0)?, n(1)?, n(2).unwrap_or(0)))
}

/// `.loc 1 17 5` or `.loc 2 87 10, function_name $L__info_string3, inlined_at 1 17 5`.
fn parse_loc(line: &str) -> Option<Loc> {
    let rest = line.trim().strip_prefix(".loc")?;
    let mut parts = rest.split(',');
    let head: Vec<&str> = parts.next()?.split_whitespace().collect();
    let pos = parse_pos(&head)?;
    let inlined_at = parts.find_map(|p| {
        let words: Vec<&str> = p.split_whitespace().collect();
        (words.first() == Some(&"inlined_at"))
            .then(|| parse_pos(&words[1..]))
            .flatten()
    });
    Some(Loc { pos, inlined_at })
}

/// `.file 1 "/path/src/lib.rs"` (optionally with a timestamp and size after the name).
fn parse_file(line: &str) -> Option<(u32, PathBuf)> {
    let rest = line.trim().strip_prefix(".file")?.trim_start();
    let (num, rest) = rest.split_once(char::is_whitespace)?;
    let name = rest.trim().strip_prefix('"')?.split('"').next()?;
    Some((num.parse().ok()?, PathBuf::from(name)))
}

/// Lines of the located module that the plain module does not have.
fn is_debug_line(t: &str) -> bool {
    let label = |p: &str| {
        t.strip_prefix(p)
            .and_then(|r| r.strip_suffix(':'))
            .is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()))
    };
    t.starts_with(".loc")
        || t.starts_with(".file")
        || label("$L__tmp")
        || label("$L__func_begin")
        || label("$L__func_end")
}

/// The code lines of a module (0-based index, text): everything but the debug directives and
/// labels, the header's `.version`/`.target`, comments, blank lines and the debug sections,
/// with Rust symbols made anonymous (their crate hashes differ between the two builds).
fn code_lines(ptx: &str) -> Vec<(usize, String)> {
    ptx.lines()
        .enumerate()
        .map(|(n, l)| (n, l.trim()))
        .take_while(|(_, t)| !t.starts_with(".section"))
        .filter(|(_, t)| {
            !t.is_empty()
                && !t.starts_with("//")
                && !is_debug_line(t)
                && !t.starts_with(".version")
                && !t.starts_with(".target")
        })
        .map(|(n, t)| (n, anonymous_symbols(t)))
        .collect()
}

/// `t` with every Rust symbol (`_R…`, `_ZN…`) replaced by `_R`.
fn anonymous_symbols(t: &str) -> String {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let mut out = String::with_capacity(t.len());
    let mut rest = t;
    while let Some(at) = rest.find('_') {
        let starts = rest[..at].chars().next_back().is_none_or(|c| !ident(c));
        let tail = &rest[at..];
        if starts && (tail.starts_with("_R") || tail.starts_with("_ZN")) {
            out.push_str(&rest[..at]);
            out.push_str("_R");
            let end = tail.find(|c: char| !ident(c)).unwrap_or(tail.len());
            rest = &tail[end..];
        } else {
            out.push_str(&rest[..at + 1]);
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// The located module, read.
pub(crate) struct Located {
    files: HashMap<u32, PathBuf>,
    /// Per line of the located module (0-based): the `.loc` in effect, if any.
    current: Vec<Option<Loc>>,
    /// Per line: the call sites `.loc`s of its function gave so far, position → inlined at.
    /// (Kept per function: the index of the function's first line.)
    function_of: Vec<usize>,
    sites: HashMap<usize, HashMap<Pos, Option<Pos>>>,
    /// Plain module line (0-based) → located module line, when the modules match.
    map: Option<Vec<usize>>,
    /// Function name → its first `.loc`.
    first_loc: HashMap<String, Loc>,
    crate_dir: PathBuf,
}

impl Located {
    /// Reads `located` (the module with line tables) against `plain` (the module checked),
    /// for a crate at `crate_dir`.
    pub(crate) fn new(plain: &str, located: &str, crate_dir: &Path) -> Located {
        let mut files = HashMap::new();
        let mut current = Vec::new();
        let mut function_of = Vec::new();
        let mut sites: HashMap<usize, HashMap<Pos, Option<Pos>>> = HashMap::new();
        let mut first_loc = HashMap::new();
        let (mut now, mut func, mut name): (Option<Loc>, usize, Option<String>) = (None, 0, None);
        for (n, line) in located.lines().enumerate() {
            let t = line.trim();
            if let Some((k, path)) = parse_file(t) {
                files.insert(k, path);
            }
            let words: Vec<&str> = t.split_whitespace().collect();
            if let Some(at) = words.iter().position(|w| *w == ".entry" || *w == ".func") {
                // A new function: no location carries over.
                now = None;
                func = n;
                name = words
                    .get(at + 1)
                    .map(|w| w.split('(').next().unwrap_or(w).to_string())
                    .filter(|w| !w.is_empty() && !w.starts_with('('));
                if name.is_none() {
                    // `.func (.param …) name(`: the name follows the return parameters.
                    name = words
                        .iter()
                        .skip(at + 1)
                        .find(|w| !w.starts_with('(') && !w.starts_with('.') && w.contains('('))
                        .map(|w| w.split('(').next().unwrap_or(w).to_string());
                }
            }
            if let Some(loc) = parse_loc(t) {
                now = Some(loc);
                sites
                    .entry(func)
                    .or_default()
                    .insert(loc.pos, loc.inlined_at);
                if let Some(f) = &name {
                    first_loc.entry(f.clone()).or_insert(loc);
                }
            }
            current.push(now);
            function_of.push(func);
        }
        let (p, l) = (code_lines(plain), code_lines(located));
        let same = p.len() == l.len() && p.iter().zip(&l).all(|(a, b)| a.1 == b.1);
        let map = same.then(|| {
            let mut m = vec![usize::MAX; plain.lines().count()];
            for (a, b) in p.iter().zip(&l) {
                m[a.0] = b.0;
            }
            m
        });
        let crate_dir = crate_dir
            .canonicalize()
            .unwrap_or_else(|_| crate_dir.to_path_buf());
        Located {
            files,
            current,
            function_of,
            sites,
            map,
            first_loc,
            crate_dir,
        }
    }

    /// Whether the two modules matched line for line (else only kernels are located).
    #[cfg(test)]
    fn matched(&self) -> bool {
        self.map.is_some()
    }

    /// `src/lib.rs:17` for a file of the crate (not its `target/`).
    fn in_crate(&self, pos: Pos) -> Option<String> {
        let path = self.files.get(&pos.0)?;
        let rel = path.strip_prefix(&self.crate_dir).ok()?;
        if rel.starts_with("target") || pos.1 == 0 {
            return None;
        }
        Some(format!("{}:{}", rel.display(), pos.1))
    }

    /// The innermost position of the crate's own sources on the way out from `loc` through
    /// its call sites.
    fn resolve(&self, loc: Loc, func: usize) -> Option<String> {
        let sites = self.sites.get(&func);
        let mut pos = Some(loc.pos);
        let mut next = loc.inlined_at;
        for _ in 0..64 {
            let p = pos?;
            if let Some(s) = self.in_crate(p) {
                return Some(s);
            }
            pos = next;
            next = pos.and_then(|q| sites.and_then(|s| s.get(&q).copied().flatten()));
        }
        None
    }

    /// The source line of the plain module's line `line` (1-based).
    fn at_line(&self, line: usize) -> Option<String> {
        let located = *self.map.as_ref()?.get(line.checked_sub(1)?)?;
        let loc = (*self.current.get(located)?)?;
        self.resolve(loc, self.function_of[located])
    }

    /// The source line of a function (its first location).
    fn of_function(&self, name: &str) -> Option<String> {
        let loc = *self.first_loc.get(name)?;
        // The function's own first line: its line index is where its first `.loc` lives.
        let func = self
            .function_of
            .iter()
            .zip(&self.current)
            .find(|(_, c)| c.is_some_and(|c| c.pos == loc.pos))
            .map(|(f, _)| *f)
            .unwrap_or(0);
        self.resolve(loc, func)
    }

    /// Sets `source` of every finding that can be located: its instruction's line, else its
    /// function's.
    pub(crate) fn locate(&self, findings: &mut [Finding]) {
        for f in findings.iter_mut() {
            let by_line = f.line.and_then(|l| self.at_line(l));
            let by_function = || f.function.as_deref().and_then(|n| self.of_function(n));
            f.source = by_line.or_else(by_function);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Rule, Severity};

    const PLAIN: &str = ".version 7.1\n.target sm_80\n.address_size 64\n\n\
        .visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\
        \tmov.u32 %r1, %tid.x;\n\tbar.sync 0;\n\tret;\n}\n";

    fn located(dir: &str) -> String {
        format!(
            ".version 7.2\n.target sm_80\n.address_size 64\n\n\
             .visible .entry k(\n\t.param .u64 k_param_0\n)\n{{\n\
             $L__func_begin0:\n\t.loc 1 7 0\n$L__tmp0:\n\
             \t.loc 1 9 13, function_name $L__info_string0, inlined_at 1 7 1\n\
             \t.loc 2 84 5, function_name $L__info_string1, inlined_at 1 9 13\n\
             \tmov.u32 %r1, %tid.x;\n\
             \t.loc 1 12 9, function_name $L__info_string2, inlined_at 1 7 1\n\
             \t.loc 3 131 14, function_name $L__info_string3, inlined_at 1 12 9\n\
             \t.loc 2 57 5, function_name $L__info_string4, inlined_at 3 131 14\n\
             \tbar.sync 0;\n\t.loc 1 14 2\n\tret;\n$L__func_end0:\n}}\n\
             \t.file 1 \"{dir}/src/lib.rs\"\n\t.file 2 \"/rust/library/core/src/nvptx.rs\"\n\
             \t.file 3 \"/ferrocuda/device/src/thread.rs\"\n\
             \t.section .debug_str\n\t{{\n\t}}\n"
        )
    }

    #[test]
    fn findings_get_the_crate_line_their_instruction_comes_from() {
        let dir = std::env::temp_dir().join(format!("fc-locate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let l = Located::new(PLAIN, &located(&dir.display().to_string()), &dir);
        assert!(l.matched());
        assert_eq!(
            anonymous_symbols("mov.b64 %rd1, _RNvCs1_1a1b; ld [_ZN1a1bE+4], x_R;"),
            "mov.b64 %rd1, _R; ld [_R+4], x_R;"
        );
        let mut findings = vec![
            // The barrier (PTX line 10): inlined from thread.rs and core, called at line 12.
            Finding::new(Some("k"), Rule::Barrier, Severity::Error, "b".into()).at(10),
            // The `%tid.x` read: core's intrinsic, called at line 9.
            Finding::new(Some("k"), Rule::Barrier, Severity::Error, "t".into()).at(9),
            // No line: the kernel's.
            Finding::new(Some("k"), Rule::Shared, Severity::Error, "s".into()),
            Finding::new(None, Rule::PanicText, Severity::Error, "m".into()),
        ];
        l.locate(&mut findings);
        let got: Vec<Option<&str>> = findings.iter().map(|f| f.source.as_deref()).collect();
        assert_eq!(
            got,
            [
                Some("src/lib.rs:12"),
                Some("src/lib.rs:9"),
                Some("src/lib.rs:7"),
                None
            ]
        );
        assert_eq!(findings[0].to_string(), "k: barrier: src/lib.rs:12: b");
        // Another module (different code): only the kernel's line.
        let other = PLAIN.replace("bar.sync 0", "bar.sync 1");
        let l = Located::new(&other, &located(&dir.display().to_string()), &dir);
        assert!(!l.matched());
        l.locate(&mut findings[..1]);
        assert_eq!(findings[0].source.as_deref(), Some("src/lib.rs:7"));
        // A crate elsewhere: nothing of its own in the module.
        let l = Located::new(PLAIN, &located("/elsewhere"), &dir);
        l.locate(&mut findings[..1]);
        assert_eq!(findings[0].source, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
