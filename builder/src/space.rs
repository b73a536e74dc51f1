//! The state-space rewrite: calls to the markers of `ferrocuda_abi::space` become
//! address-space casts, and loads through read-only markers become invariant loads.
//!
//! On the `llvm-dis` text of the LTO'd module:
//!
//! * `%q = … call … ptr @__ferrocuda_global(ptr … %p)` becomes
//!   `%"q.global" = addrspacecast ptr %p to ptr addrspace(1)` and
//!   `%q = addrspacecast ptr addrspace(1) %"q.global" to ptr`: the same address, known to be
//!   global, which LLVM's InferAddressSpaces propagates to every access (`ld.global`);
//! * `@__ferrocuda_global_nc` is rewritten the same way, and every plain (not volatile, not
//!   atomic) `load` whose address derives from its result only — the result itself, a
//!   `getelementptr` of such an address, a `phi` or `select` of such addresses, through loops
//!   too — gets `!invariant.load`, which NVPTX emits as `ld.global.nc`;
//! * the markers' declarations and use-list orders are removed. Any other mention of a marker
//!   (its address stored, an `invoke`) is an error: the rewrite handles direct calls only.
//!
//! The casts must reach InferAddressSpaces before InstCombine, which folds a cast pair back to
//! the generic pointer: the pipeline runs `infer-address-spaces` first (see `llvm.rs`).

use crate::ir::{self, ptr_operand_value, split_top};
use ferrocuda_abi::space::{GLOBAL_NC_SYMBOL, GLOBAL_SYMBOL};
use std::collections::HashSet;

/// Whether a function the module declares is a marker.
pub(crate) fn is_marker(function: &str) -> bool {
    function == GLOBAL_SYMBOL || function == GLOBAL_NC_SYMBOL
}

/// The module with every marker call rewritten (see the module docs).
pub(crate) fn rewrite(module: &str) -> Result<String, String> {
    let markers = [GLOBAL_SYMBOL, GLOBAL_NC_SYMBOL];
    let mut out = String::with_capacity(module.len() + module.len() / 16);
    let mut errors = Vec::new();
    let mut function: Option<Function> = None;
    let mut tagged = 0;
    let invariant = next_metadata_id(module);
    for line in module.lines() {
        if line.starts_with('^') {
            continue;
        }
        let trimmed = line.trim_start();
        // llvm-dis writes the use-list order of inline asm values in a form its parser refuses;
        // those of a marker name uses that are gone.
        if trimmed.starts_with("uselistorder ptr asm ")
            || (trimmed.starts_with("uselistorder") && ir::mentions(line, &markers))
        {
            continue;
        }
        if let Some(f) = function.as_mut() {
            if line == "}" {
                let f = function.take().unwrap_or_default();
                tagged += f.finish(&mut out, invariant);
                out.push_str("}\n");
                continue;
            }
            if ir::mentions(line, &markers) {
                match parse_call(line) {
                    Some(call) => f.marker(call),
                    None => errors.push(format!(
                        "in {}: `{}` is used other than by a direct call: {}",
                        ir::display_symbol(&f.name),
                        marker_named(line),
                        line.trim()
                    )),
                }
                continue;
            }
            f.lines.push(line.to_string());
            continue;
        }
        if line.starts_with("define ") {
            let name = ir::global_refs(line)
                .into_iter()
                .find(|(at, n)| line.as_bytes().get(at + 1 + n.len()) == Some(&b'('))
                .map_or_else(String::new, |(_, n)| ir::unquote(n));
            function = Some(Function {
                name,
                ..Function::default()
            });
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if ir::mentions(line, &markers) {
            if !line.starts_with("declare ") {
                errors.push(format!(
                    "`{}` is referred to outside a function body (only direct calls in kernels \
                     are rewritten): {}",
                    marker_named(line),
                    line.trim()
                ));
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if tagged > 0 {
        out.push_str(&format!("!{invariant} = !{{}}\n"));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "the global-memory markers of `ferrocuda_abi::space` can only be called:\n{}",
            errors.join("\n")
        ))
    }
}

/// Which marker `line` names.
fn marker_named(line: &str) -> &'static str {
    if ir::mentions(line, &[GLOBAL_NC_SYMBOL]) {
        GLOBAL_NC_SYMBOL
    } else {
        GLOBAL_SYMBOL
    }
}

/// The first metadata number the module does not use.
fn next_metadata_id(module: &str) -> u64 {
    module
        .lines()
        .filter_map(|l| {
            let digits = l.strip_prefix('!')?;
            let n = digits.bytes().take_while(u8::is_ascii_digit).count();
            digits[..n].parse::<u64>().ok()
        })
        .max()
        .map_or(0, |m| m + 1)
}

/// One marker call: `%result = call ptr @marker(ptr operand)`.
#[derive(Debug, PartialEq, Eq)]
struct MarkerCall {
    /// The printed result name (`%_10`, `%"a b"`), if the result is used.
    result: Option<String>,
    /// The read-only marker.
    nc: bool,
    /// The pointer operand's value (`%3`, `null`, a constant expression).
    operand: String,
}

/// Parses a direct call of a marker; `None` for any other use.
fn parse_call(line: &str) -> Option<MarkerCall> {
    let mut rest = line.trim();
    let mut result = None;
    if let Some(after) = rest.strip_prefix('%') {
        let n = ir::name_len(after.as_bytes());
        result = Some(format!("%{}", &after[..n]));
        rest = after[n..].strip_prefix(" = ")?;
    }
    let rest = ["tail ", "notail ", "musttail "]
        .iter()
        .find_map(|p| rest.strip_prefix(p))
        .unwrap_or(rest);
    let rest = rest.strip_prefix("call ")?;
    let (at, name) = ir::global_refs(rest)
        .into_iter()
        .find(|(_, n)| is_marker(&ir::unquote(n)))?;
    // The callee is the first global named, returning `ptr`, and called right there.
    if !ir::global_refs(&rest[..at]).is_empty() || !rest[..at].ends_with("ptr ") {
        return None;
    }
    let args = rest[at + 1 + name.len()..].strip_prefix('(')?;
    let close = closing_paren(args)?;
    let arg_list = split_top(&args[..close], b',');
    if arg_list.len() != 1 {
        return None;
    }
    let operand = ptr_operand_value(arg_list[0])?.to_string();
    Some(MarkerCall {
        result,
        nc: ir::unquote(name) == GLOBAL_NC_SYMBOL,
        operand,
    })
}

/// Index of the `)` that closes the parenthesis open before `s` (strings and nesting skipped).
fn closing_paren(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let (mut depth, mut i) = (0usize, 0);
    while i < b.len() {
        match b[i] {
            b'"' => i += b[i + 1..].iter().position(|&c| c == b'"')? + 1,
            b'(' => depth += 1,
            b')' if depth == 0 => return Some(i),
            b')' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// One function body being rewritten.
#[derive(Default)]
struct Function {
    /// Its symbol (for messages).
    name: String,
    /// Its lines, marker calls already replaced.
    lines: Vec<String>,
    /// Results of read-only marker calls.
    nc_roots: HashSet<String>,
    /// Casts made so far (for unique names).
    casts: usize,
}

impl Function {
    /// Replaces a marker call by the cast pair.
    fn marker(&mut self, call: MarkerCall) {
        let Some(result) = call.result else {
            return; // unused: nothing to mark
        };
        self.casts += 1;
        let base = ir::unquote(result.trim_start_matches('%'));
        let global = format!("%\"{}.global{}\"", base.replace('"', ""), self.casts);
        self.lines.push(format!(
            "  {global} = addrspacecast ptr {} to ptr addrspace(1)",
            call.operand
        ));
        self.lines.push(format!(
            "  {result} = addrspacecast ptr addrspace(1) {global} to ptr"
        ));
        if call.nc {
            self.nc_roots.insert(result);
        }
    }

    /// Tags the loads through read-only addresses with `!invariant.load !<invariant>`, writes
    /// the body to `out`, and returns the number of loads tagged.
    fn finish(self, out: &mut String, invariant: u64) -> usize {
        let readonly = self.readonly_addresses();
        let mut tagged = 0;
        for line in &self.lines {
            out.push_str(line);
            if let Some(address) = plain_load_address(line) {
                if readonly.contains(address) && !line.contains("!invariant.load") {
                    out.push_str(&format!(", !invariant.load !{invariant}"));
                    tagged += 1;
                }
            }
            out.push('\n');
        }
        tagged
    }

    /// The values that address only read-only memory: the greatest set containing the
    /// read-only marker results and every `getelementptr`/`phi`/`select` whose pointer
    /// operands are all in the set (so loop-carried addresses stay in it).
    fn readonly_addresses(&self) -> HashSet<String> {
        if self.nc_roots.is_empty() {
            return HashSet::new();
        }
        let derived: Vec<(String, Vec<String>)> = self
            .lines
            .iter()
            .filter_map(|l| derived_address(l))
            .collect();
        let mut set: HashSet<String> = self.nc_roots.clone();
        set.extend(derived.iter().map(|(r, _)| r.clone()));
        loop {
            let before = set.len();
            for (result, operands) in &derived {
                if set.contains(result) && !operands.iter().all(|o| set.contains(o)) {
                    set.remove(result);
                }
            }
            if set.len() == before {
                return set;
            }
        }
    }
}

/// `%r = getelementptr …, ptr %base, …`, `%r = phi ptr [ %a, %bb ], …` or
/// `%r = select i1 %c, ptr %a, ptr %b`: the result and its pointer operands.
fn derived_address(line: &str) -> Option<(String, Vec<String>)> {
    let rest = line.trim().strip_prefix('%')?;
    let n = ir::name_len(rest.as_bytes());
    let result = format!("%{}", &rest[..n]);
    let rhs = rest[n..].strip_prefix(" = ")?;
    let value = |operand: &str| ptr_operand_value(operand).map(str::to_string);
    let operands = if let Some(gep) = rhs.strip_prefix("getelementptr ") {
        vec![value(split_top(gep, b',').get(1)?)?]
    } else if let Some(phi) = rhs.strip_prefix("phi ptr ") {
        split_top(phi, b',')
            .iter()
            .map(|incoming| {
                let inner = incoming.trim().strip_prefix('[')?.strip_suffix(']')?;
                Some(split_top(inner, b',').first()?.trim().to_string())
            })
            .collect::<Option<Vec<_>>>()?
    } else {
        let parts = split_top(rhs.strip_prefix("select ")?, b',');
        vec![value(parts.get(1)?)?, value(parts.get(2)?)?]
    };
    Some((result, operands))
}

/// The address operand of a plain `load` (not volatile, not atomic).
fn plain_load_address(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix('%')?;
    let n = ir::name_len(rest.as_bytes());
    let load = rest[n..].strip_prefix(" = load ")?;
    if load.starts_with("volatile ") || load.starts_with("atomic ") {
        return None;
    }
    ptr_operand_value(split_top(load, b',').get(1)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = r#"target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @k([2 x i64] %0, [2 x i64] %1, i64 %n) unnamed_addr #1 {
start:
  %.fca.0.extract = extractvalue [2 x i64] %0, 0
  %2 = inttoptr i64 %.fca.0.extract to ptr
  %_10 = tail call noundef ptr @__ferrocuda_global(ptr noundef %2) #10
  %v = load float, ptr %_10, align 4
  %q = tail call noundef ptr @__ferrocuda_global_nc(ptr noundef %2) #10
  %a = load <4 x float>, ptr %q, align 16
  %g = getelementptr inbounds nuw i8, ptr %q, i64 16
  %b = load float, ptr %g, align 4, !noalias !3
  %c = load volatile float, ptr %g, align 4
  br label %loop
loop:
  %p = phi ptr [ %g, %start ], [ %p.next, %loop ]
  %mixed = phi ptr [ %g, %start ], [ %_10, %loop ]
  %x = load float, ptr %p, align 4
  %y = load float, ptr %mixed, align 4
  %p.next = getelementptr inbounds float, ptr %p, i64 1
  %s = select i1 true, ptr %p, ptr %q
  %z = load float, ptr %s, align 4
  tail call noundef ptr @__ferrocuda_global(ptr noundef %2) #10
  br label %loop
}

declare noundef ptr @__ferrocuda_global(ptr noundef) unnamed_addr #7
declare noundef ptr @__ferrocuda_global_nc(ptr noundef) unnamed_addr #7

uselistorder ptr @__ferrocuda_global, { 1, 0 }

!3 = !{}
!7 = !{!3}
"#;

    #[test]
    fn rewrites_marker_calls_into_casts() {
        let out = rewrite(MODULE).unwrap();
        assert!(out.contains(
            "  %\"_10.global1\" = addrspacecast ptr %2 to ptr addrspace(1)\n  \
             %_10 = addrspacecast ptr addrspace(1) %\"_10.global1\" to ptr\n"
        ));
        assert!(out.contains("%q = addrspacecast ptr addrspace(1) %\"q.global2\" to ptr"));
        assert!(!out.contains("__ferrocuda_global"), "{out}");
        // The unused call is gone; so are the declarations and use-list orders.
        assert_eq!(out.matches("addrspacecast").count(), 4);
    }

    #[test]
    fn loads_through_readonly_addresses_are_invariant() {
        let out = rewrite(MODULE).unwrap();
        let tagged = |v: &str| {
            out.lines()
                .find(|l| l.trim_start().starts_with(&format!("{v} = load")))
                .unwrap()
                .ends_with(", !invariant.load !8")
        };
        for v in ["%a", "%b", "%x", "%z"] {
            assert!(tagged(v), "{v} not tagged:\n{out}");
        }
        // Through the plain global marker, a phi that mixes in a writable address, a volatile
        // load: untouched.
        for v in ["%v", "%y", "%c"] {
            assert!(!tagged(v), "{v} tagged:\n{out}");
        }
        assert!(out.ends_with("!8 = !{}\n"), "{out}");
    }

    #[test]
    fn modules_without_nc_loads_get_no_metadata() {
        let m = "define void @f(ptr %p) {\n  %q = call ptr @__ferrocuda_global(ptr %p)\n  \
                 store i32 0, ptr %q, align 4\n  ret void\n}\n";
        let out = rewrite(m).unwrap();
        assert!(out.contains("%q = addrspacecast ptr addrspace(1) %\"q.global1\" to ptr"));
        assert!(!out.contains("invariant"), "{out}");
    }

    #[test]
    fn other_uses_of_a_marker_are_errors() {
        let m = "@fp = global ptr @__ferrocuda_global\n\
                 define void @_RNvCs1_2pk4kern(ptr %p) {\n  \
                 call void @g(ptr @__ferrocuda_global_nc)\n  ret void\n}\n";
        let e = rewrite(m).unwrap_err();
        assert!(e.contains("outside a function body"), "{e}");
        assert!(
            e.contains("`pk::kern`") && e.contains("`__ferrocuda_global_nc` is used other"),
            "{e}"
        );
    }

    #[test]
    fn parses_calls() {
        let c = parse_call("  %r = notail call noundef nonnull ptr @__ferrocuda_global_nc(ptr noundef nonnull align 4 %\"x y\") #3, !srcloc !2").unwrap();
        assert_eq!(c.result.as_deref(), Some("%r"));
        assert!(c.nc);
        assert_eq!(c.operand, "%\"x y\"");
        let c = parse_call("  call ptr @__ferrocuda_global(ptr null)").unwrap();
        assert_eq!((c.result, c.operand.as_str(), c.nc), (None, "null", false));
        assert!(parse_call("  %r = call ptr @f(ptr @__ferrocuda_global)").is_none());
        assert!(parse_call("  %r = call ptr @__ferrocuda_global(ptr %a, ptr %b)").is_none());
        assert!(parse_call("  %r = invoke ptr @__ferrocuda_global(ptr %a)").is_none());
    }
}
