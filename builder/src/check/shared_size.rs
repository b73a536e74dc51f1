//! Shared memory over the device's limits, from the PTX's `.shared` declarations alone (no
//! ptxas needed): a kernel whose static shared memory exceeds 48 KiB makes the whole module
//! fail to load, and one whose static plus declared dynamic shared memory
//! (`#[kernel(shared_bytes = n)]`) exceeds its architecture's opt-in maximum can never launch.

use super::parse::PtxFunction;
use super::rules::{calls, Finding, Rule, Severity};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Static shared memory a kernel may declare (every architecture): 48 KiB.
pub const MAX_STATIC_SHARED: u64 = 48 * 1024;

/// The most shared memory one block may have (static and dynamic, after opting in) on an
/// architecture (`sm_80`: 163 KiB, `sm_86`/`sm_89`/`sm_120`: 99 KiB, `sm_90`/`sm_100`: 227
/// KiB — the CUDA C++ Programming Guide's table of compute capabilities); `None` for one not
/// in the table.
pub fn max_shared_per_block(arch: &str) -> Option<u64> {
    let number: u32 = arch
        .strip_prefix("sm_")?
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .ok()?;
    let kib = match number {
        80 | 87 => 163,
        86 | 89 | 120 | 121 => 99,
        90 | 100 | 101 | 103 | 110 => 227,
        _ => return None,
    };
    Some(kib * 1024)
}

/// One `.shared` array: its name and bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedDecl {
    /// The PTX symbol.
    pub name: String,
    /// Its size in bytes (0 for a dynamic, `.extern`, array).
    pub bytes: u64,
}

/// The bytes of one element of a PTX type (`.b8` 1, `.f32` 4, `.f16x2` 4, `.b128` 16).
fn type_bytes(ty: &str) -> Option<u64> {
    let t = ty.strip_prefix('.')?;
    let (t, lanes) = match t.split_once('x') {
        Some((t, n)) => (t, n.parse::<u64>().ok()?),
        None => (t, 1),
    };
    let bits: u64 = t
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .ok()?;
    Some(bits / 8 * lanes)
}

/// The `.shared` declaration in one statement, if it is one.
fn parse_decl(stmt: &str) -> Option<SharedDecl> {
    let words: Vec<&str> = stmt.split_whitespace().collect();
    let at = words.iter().position(|w| *w == ".shared")?;
    if words[..at].contains(&".extern") {
        return Some(SharedDecl {
            name: words.last()?.split('[').next()?.to_string(),
            bytes: 0,
        });
    }
    let mut elem = 1u64;
    let mut name = None;
    for w in &words[at + 1..] {
        if let Some(v) = w.strip_prefix(".v") {
            elem *= v.parse::<u64>().ok()?;
        } else if *w == ".align" {
        } else if w.starts_with('.') {
            elem *= type_bytes(w)?;
        } else if w.parse::<u64>().is_err() {
            name = Some(*w);
        }
    }
    let name = name?;
    let mut parts = name.split('[');
    let base = parts.next()?.to_string();
    let mut count = 1u64;
    for dim in parts {
        count = count.saturating_mul(dim.trim_end_matches(']').trim().parse().ok()?);
    }
    Some(SharedDecl {
        name: base,
        bytes: elem.saturating_mul(count),
    })
}

/// The static shared arrays every kernel of the module reaches — declared in it or in a
/// function it calls, or declared at module level and named in one of those — with their
/// sizes; kernel → arrays.
pub fn kernel_shared(src: &str, functions: &[PtxFunction]) -> BTreeMap<String, Vec<SharedDecl>> {
    // Module-level declarations: the statements outside every function body.
    let mut module: Vec<SharedDecl> = Vec::new();
    let mut depth = 0i32;
    let mut stmt = String::new();
    for c in src.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ';' if depth == 0 => {
                module.extend(parse_decl(&stmt).filter(|d| d.bytes > 0));
                stmt.clear();
            }
            _ if depth == 0 => stmt.push(c),
            _ => {}
        }
        if c == '}' && depth == 0 {
            stmt.clear();
        }
    }
    let bodies: HashMap<&str, &PtxFunction> = functions
        .iter()
        .filter(|f| f.body.is_some())
        .map(|f| (f.name.as_str(), f))
        .collect();
    let mut out = BTreeMap::new();
    for entry in functions
        .iter()
        .filter(|f| f.is_entry() && f.body.is_some())
    {
        let mut seen: HashSet<&str> = HashSet::from([entry.name.as_str()]);
        let mut work = vec![entry];
        let mut arrays: Vec<SharedDecl> = Vec::new();
        while let Some(f) = work.pop() {
            let body = f.body.as_deref().unwrap_or("");
            let declares = body.contains(".shared");
            for s in body.split(';').filter(|_| declares) {
                if let Some(d) = parse_decl(s.trim()).filter(|d| d.bytes > 0) {
                    if !arrays.contains(&d) {
                        arrays.push(d);
                    }
                }
            }
            for d in module
                .iter()
                .filter(|d| super::rules::mentions(body, &d.name))
            {
                if !arrays.contains(d) {
                    arrays.push(d.clone());
                }
            }
            for callee in calls(f) {
                if let Some(g) = bodies.get(callee.as_str()) {
                    if seen.insert(g.name.as_str()) {
                        work.push(g);
                    }
                }
            }
        }
        out.insert(entry.name.clone(), arrays);
    }
    out
}

/// Findings for every kernel whose static shared memory exceeds [`MAX_STATIC_SHARED`], or
/// whose static plus declared dynamic shared memory (`dynamic`: kernel → bytes of
/// `#[kernel(shared_bytes = n)]`) exceeds [`max_shared_per_block`] of `target`.
pub fn shared_findings(
    src: &str,
    functions: &[PtxFunction],
    target: Option<&str>,
    dynamic: &BTreeMap<String, u32>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for (kernel, arrays) in kernel_shared(src, functions) {
        let total: u64 = arrays.iter().map(|a| a.bytes).sum();
        let mut list: Vec<String> = arrays
            .iter()
            .map(|a| format!("{} {} bytes", crate::ir::display_path(&a.name), a.bytes))
            .collect();
        list.sort();
        let list = list.join(", ");
        if total > MAX_STATIC_SHARED {
            out.push(Finding::new(
                Some(&kernel),
                Rule::Shared,
                Severity::Error,
                format!(
                    "{total} bytes of static shared memory ({list}): a kernel may declare at \
                     most {MAX_STATIC_SHARED} bytes (48 KiB) statically, and the driver refuses \
                     to load the module — every kernel of it — with more. Use dynamic shared \
                     memory (`dynamic_shared()`, sized by the launch or by \
                     `#[kernel(shared_bytes = n)]`) for more"
                ),
            ));
            continue;
        }
        let wanted = dynamic.get(&kernel).copied().unwrap_or(0);
        let (Some(arch), true) = (target, wanted > 0) else {
            continue;
        };
        let Some(limit) = max_shared_per_block(arch) else {
            continue;
        };
        if total + u64::from(wanted) > limit {
            out.push(Finding::new(
                Some(&kernel),
                Rule::Shared,
                Severity::Error,
                format!(
                    "{} bytes of shared memory ({total} static{}{}, and {wanted} dynamic from \
                     `#[kernel(shared_bytes = {wanted})]`): an {arch} block may have at most \
                     {limit} bytes ({} KiB), so no launch of this kernel can succeed",
                    total + u64::from(wanted),
                    if list.is_empty() { "" } else { ": " },
                    list,
                    limit / 1024
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_and_sizes() {
        let d = |s: &str| parse_decl(s).map(|d| (d.name, d.bytes));
        assert_eq!(d(".shared .align 4 .b8 T[1024]"), Some(("T".into(), 1024)));
        assert_eq!(d(".shared .align 4 .u32 S"), Some(("S".into(), 4)));
        assert_eq!(
            d(".shared .align 16 .f32 M[64][72]"),
            Some(("M".into(), 18432))
        );
        assert_eq!(
            d(".shared .align 16 .v4 .f32 V[8]"),
            Some(("V".into(), 128))
        );
        assert_eq!(d(".shared .align 4 .f16x2 H[2]"), Some(("H".into(), 8)));
        assert_eq!(
            d(".extern .shared .align 16 .b8 dyn[]"),
            Some(("dyn".into(), 0))
        );
        assert_eq!(d(".global .align 4 .b8 G[4]"), None);
        assert_eq!(max_shared_per_block("sm_90a"), Some(227 * 1024));
        assert_eq!(max_shared_per_block("sm_80"), Some(163 * 1024));
        assert_eq!(max_shared_per_block("sm_86"), Some(99 * 1024));
        assert_eq!(max_shared_per_block("sm_75"), None);
    }

    #[test]
    fn over_the_limits_is_refused_per_kernel() {
        use crate::check::{check_module, check_text, Rule, Severity};
        // `big` reaches a 40 KiB and a 12 KiB array, one through a call (52 KiB in all);
        // `small` reaches the 40 KiB one (within the limit); `own` declares 49153 bytes itself.
        let ptx = ".version 7.1\n.target sm_80\n.address_size 64\n\
                   .shared .align 4 .b8 A[40960];\n.shared .align 4 .f32 B[3072];\n\
                   .extern .shared .align 16 .b8 __ferrocuda_dynamic_shared[];\n\
                   .func helper()\n{\n\tst.shared.u32 [B], 1;\n\tret;\n}\n\
                   .visible .entry big()\n{\n\tst.shared.u32 [A], 1;\n\tcall.uni helper, ();\n\tret;\n}\n\
                   .visible .entry small()\n{\n\tst.shared.u32 [A+4], 1;\n\tret;\n}\n\
                   .visible .entry own()\n{\n\t.shared .align 1 .b8 L[49153];\n\tst.shared.u8 [L], 1;\n\tret;\n}\n";
        let shared: Vec<_> = check_text(ptx)
            .findings
            .into_iter()
            .filter(|f| f.rule == Rule::Shared)
            .collect();
        let who: Vec<&str> = shared
            .iter()
            .filter_map(|f| f.function.as_deref())
            .collect();
        assert_eq!(who, ["big", "own"], "{shared:#?}");
        assert!(shared.iter().all(|f| f.severity == Severity::Error));
        assert!(
            shared[0].message.starts_with(
                "53248 bytes of static shared memory (`A` 40960 bytes, `B` 12288 bytes)"
            ),
            "{}",
            shared[0]
        );
        // 40 KiB static + 124 KiB dynamic is over sm_80's 163 KiB; 120 KiB dynamic is not.
        for (bytes, refused) in [(124 * 1024, true), (120 * 1024, false)] {
            let dynamic = BTreeMap::from([("small".to_string(), bytes)]);
            let found: Vec<_> = check_module(ptx, &dynamic)
                .findings
                .into_iter()
                .filter(|f| f.function.as_deref() == Some("small"))
                .collect();
            assert_eq!(found.len(), usize::from(refused), "{bytes}: {found:#?}");
            if refused {
                assert!(
                    found[0]
                        .message
                        .contains("sm_80 block may have at most 166912 bytes"),
                    "{}",
                    found[0]
                );
            }
        }
    }
}
