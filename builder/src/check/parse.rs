//! A PTX reader for the checks: comments, functions with their parameters and bodies, and
//! the statements (labels and instructions) of a body, each with its line number.

/// PTX without `//` and `/* */` comments (newlines kept, so line numbers survive).
pub fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('/') {
        let (before, from) = rest.split_at(i);
        out.push_str(before);
        if from.starts_with("//") {
            let end = from.find('\n').unwrap_or(from.len());
            out.extend(std::iter::repeat_n(' ', end));
            rest = &from[end..];
        } else if let Some(inner) = from.strip_prefix("/*") {
            let end = inner.find("*/").map_or(from.len(), |e| e + 4);
            out.extend(
                from[..end]
                    .chars()
                    .map(|c| if c == '\n' { '\n' } else { ' ' }),
            );
            rest = &from[end..];
        } else {
            out.push('/');
            rest = &from[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The identifier at the start of `s` (`[A-Za-z_$%][\w$%]*`).
pub fn ident(s: &str) -> &str {
    let end = s
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '%'))
                || (i == 0 && c.is_ascii_digit())
        })
        .map_or(s.len(), |(i, _)| i);
    &s[..end]
}

/// `.entry` or `.func`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FnKind {
    /// A kernel entry point.
    Entry,
    /// A device function.
    Func,
}

/// One `.entry` or `.func` of a (comment-free) PTX module, defined or only declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxFunction {
    /// Its name.
    pub name: String,
    /// Entry or function.
    pub kind: FnKind,
    /// Linkage directives before it (`visible`, `extern`, `weak`, …).
    pub linkage: Vec<String>,
    /// Each `.param` declaration of its parameter list (`.param .align 8 .b8 k_param_0[16]`).
    pub params: Vec<String>,
    /// The text between its outer braces; `None` for a declaration.
    pub body: Option<String>,
    /// 1-based line of the header.
    pub line: usize,
    /// 1-based line of the body's opening brace.
    pub body_line: usize,
}

impl PtxFunction {
    /// Whether this is a kernel entry point.
    pub fn is_entry(&self) -> bool {
        self.kind == FnKind::Entry
    }

    /// Whether this is only a declaration of an external symbol.
    pub fn is_extern(&self) -> bool {
        self.linkage.iter().any(|l| l == "extern")
    }

    /// The parameter names.
    pub fn param_names(&self) -> Vec<&str> {
        self.params
            .iter()
            .filter_map(|p| {
                let p = p.split('[').next()?.trim_end();
                p.rsplit(|c: char| c.is_whitespace()).next()
            })
            .collect()
    }
}

/// Index of the bracket closing the one at `text[start]` (or `text.len()` if unbalanced).
fn matching(text: &str, start: usize, open: u8, close: u8) -> usize {
    let mut depth = 0;
    for (i, &c) in text.as_bytes()[start..].iter().enumerate() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return start + i;
            }
        }
    }
    text.len()
}

/// The next `.entry`/`.func` keyword at or after `from`: (offset, kind).
fn next_header(ptx: &str, mut from: usize) -> Option<(usize, FnKind)> {
    loop {
        let i = from + ptx[from..].find(['.'])?;
        let before_ok = i == 0 || ptx[..i].ends_with(|c: char| c.is_whitespace());
        let word = ident(&ptx[i + 1..]);
        let after = ptx[i + 1 + word.len()..].chars().next();
        let after_ok = matches!(after, Some(c) if c.is_whitespace() || c == '(');
        if before_ok && after_ok {
            match word {
                "entry" => return Some((i, FnKind::Entry)),
                "func" => return Some((i, FnKind::Func)),
                _ => {}
            }
        }
        from = i + 1;
    }
}

/// Every `.entry` / `.func` of the (comment-free) PTX, in order.
pub fn parse_functions(ptx: &str) -> Vec<PtxFunction> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some((at, kind)) = next_header(ptx, pos) {
        let stmt_start = ptx[..at].rfind([';', '}', '{']).map_or(0, |i| i + 1);
        let linkage: Vec<String> = ptx[stmt_start..at]
            .split_whitespace()
            .filter_map(|w| w.strip_prefix('.'))
            .map(str::to_string)
            .collect();
        let mut i = at + if kind == FnKind::Entry { 6 } else { 5 };
        i += ptx[i..].len() - ptx[i..].trim_start().len();
        if ptx[i..].starts_with('(') {
            i = matching(ptx, i, b'(', b')') + 1; // return value of a .func
            i += ptx[i..].len() - ptx[i..].trim_start().len();
        }
        let name = ident(&ptx[i..]).to_string();
        i += name.len();
        i += ptx[i..].len() - ptx[i..].trim_start().len();
        let mut params = Vec::new();
        if ptx[i..].starts_with('(') {
            let close = matching(ptx, i, b'(', b')');
            params = ptx[i + 1..close.min(ptx.len())]
                .split(',')
                .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|p| !p.is_empty())
                .collect();
            i = (close + 1).min(ptx.len());
        }
        // Performance directives (.noreturn, .maxntid 256, 1, 1, …), then `;` or `{`.
        let j = ptx[i..].find([';', '{']).map_or(ptx.len(), |j| i + j);
        let (body, end) = if ptx[j..].starts_with('{') {
            let close = matching(ptx, j, b'{', b'}');
            (
                Some(ptx[j + 1..close.min(ptx.len())].to_string()),
                close + 1,
            )
        } else {
            (None, j + 1)
        };
        out.push(PtxFunction {
            name,
            kind,
            linkage,
            params,
            body,
            line: line_of(ptx, at),
            body_line: line_of(ptx, j),
        });
        pos = end.min(ptx.len());
    }
    out
}

/// 1-based line number of byte offset `at`.
pub fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// One statement of a function body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Statement {
    /// `name:`.
    Label(String),
    /// An instruction (or a directive such as `.reg`), whitespace-normalised, without `;`.
    Instr(Instr),
}

/// One instruction of a body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instr {
    /// 1-based line in the module.
    pub line: usize,
    /// The guard predicate (`%p1`, without the `@`/`@!`), if any.
    pub guard: Option<String>,
    /// The opcode with its modifiers (`bar.sync`, `ld.global.nc.b32`).
    pub opcode: String,
    /// The operands, split at top-level commas.
    pub operands: Vec<String>,
    /// The statement as written (normalised whitespace).
    pub text: String,
}

impl Instr {
    /// The opcode's first component (`ld` for `ld.global.b32`).
    pub fn base(&self) -> &str {
        self.opcode.split('.').next().unwrap_or("")
    }
}

/// The statements of a function body; `first_line` is the line of the body's `{`.
pub fn statements(body: &str, first_line: usize) -> Vec<Statement> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut lines = LineCursor {
        at: 0,
        line: first_line,
    };
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            // A brace opening a statement is a scope (`{ // callseq`, inline asm); inside a
            // statement it is a vector operand (`{%r1, %r2}`).
            b'{' | b'}' if body[start..i].trim().is_empty() => start = i + 1,
            b';' => {
                push_statement(&mut out, body, start, i, &mut lines);
                start = i + 1;
            }
            b':' => {
                // A label ends at `:` when what precedes is one identifier.
                let text = body[start..i].trim();
                if !text.is_empty() && ident(text) == text && !text.starts_with('%') {
                    out.push(Statement::Label(text.to_string()));
                    start = i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    push_statement(&mut out, body, start, body.len(), &mut lines);
    out
}

/// Where line counting has reached in a body: a byte offset and the line it lies on. Each
/// statement's line is counted on from the previous one's (statements come in order), so a
/// body's lines are counted once, not once per statement.
struct LineCursor {
    at: usize,
    line: usize,
}

impl LineCursor {
    /// The line of byte `pos` (at or after the last one asked for).
    fn line_of(&mut self, body: &str, pos: usize) -> usize {
        self.line += body[self.at..pos].matches('\n').count();
        self.at = pos;
        self.line
    }
}

fn push_statement(
    out: &mut Vec<Statement>,
    body: &str,
    start: usize,
    end: usize,
    lines: &mut LineCursor,
) {
    let raw = &body[start..end];
    let text = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        return;
    }
    let lead = raw.len() - raw.trim_start().len();
    let line = lines.line_of(body, start + lead);
    let (guard, rest) = match text.strip_prefix('@') {
        Some(g) => {
            let (pred, rest) = g.split_once(' ').unwrap_or((g, ""));
            (
                Some(pred.trim_start_matches('!').to_string()),
                rest.to_string(),
            )
        }
        None => (None, text.clone()),
    };
    let (opcode, ops) = rest.split_once(' ').unwrap_or((rest.as_str(), ""));
    out.push(Statement::Instr(Instr {
        line,
        guard,
        opcode: opcode.to_string(),
        operands: split_operands(ops),
        text,
    }));
}

/// Operands split at commas outside `()[]{}`.
fn split_operands(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in s.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Every register-like token (`%r1`, `%tid.x`, `%p2`) in an operand.
pub fn registers(operand: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = operand;
    while let Some(i) = rest.find('%') {
        let s = &rest[i..];
        let end = s[1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.'))
            .map_or(s.len(), |e| e + 1);
        out.push(&s[..end]);
        rest = &s[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_comments_keeping_lines() {
        let src = "a // b\n/* c\n d */ e\nx/y\n";
        let out = strip_comments(src);
        assert_eq!(out.matches('\n').count(), src.matches('\n').count());
        assert!(!out.contains('b') && !out.contains('c') && !out.contains('d'));
        assert!(out.contains('e') && out.contains("x/y"));
    }

    #[test]
    fn parses_functions_and_statements() {
        let ptx = "\
.extern .func  (.param .b32 func_retval0) helper
(
\t.param .b32 helper_param_0
)
;
.visible .entry k(
\t.param .align 8 .b8 k_param_0[16],
\t.param .f32 k_param_1
)
.maxntid 256, 1, 1
{
\t.reg .pred %p<2>;
\tmov.u32 %r1, %tid.x;
\t@!%p1 bra $L__BB0_2;
$L__BB0_2:
\t{ // callseq
\tcall.uni (retval0), helper, (param0);
\t}
\tret;
}
";
        let fs = parse_functions(&strip_comments(ptx));
        assert_eq!(fs.len(), 2);
        assert_eq!(
            (fs[0].name.as_str(), fs[0].kind, fs[0].is_extern()),
            ("helper", FnKind::Func, true)
        );
        assert_eq!(fs[0].body, None);
        assert_eq!(fs[1].linkage, ["visible"]);
        assert_eq!(
            fs[1].params,
            [".param .align 8 .b8 k_param_0[16]", ".param .f32 k_param_1"]
        );
        assert_eq!(fs[1].param_names(), ["k_param_0", "k_param_1"]);
        assert_eq!((fs[1].line, fs[1].body_line), (6, 11));
        let st = statements(fs[1].body.as_deref().unwrap(), fs[1].body_line);
        let instrs: Vec<(usize, &str)> = st
            .iter()
            .filter_map(|s| match s {
                Statement::Instr(i) => Some((i.line, i.opcode.as_str())),
                Statement::Label(_) => None,
            })
            .collect();
        assert_eq!(
            instrs,
            [
                (12, ".reg"),
                (13, "mov.u32"),
                (14, "bra"),
                (17, "call.uni"),
                (19, "ret")
            ]
        );
        assert!(st.contains(&Statement::Label("$L__BB0_2".into())));
        let Statement::Instr(bra) = &st[2] else {
            panic!()
        };
        assert_eq!(bra.guard.as_deref(), Some("%p1"));
        assert_eq!(bra.operands, ["$L__BB0_2"]);
        let Statement::Instr(call) = &st[4] else {
            panic!()
        };
        assert_eq!(call.operands, ["(retval0)", "helper", "(param0)"]);
    }

    #[test]
    fn finds_registers() {
        assert_eq!(registers("[%rd1+4]"), ["%rd1"]);
        assert_eq!(registers("{%r1, %r2}"), ["%r1", "%r2"]);
        assert_eq!(registers("%tid.x"), ["%tid.x"]);
        assert_eq!(registers("%r1|%p2"), ["%r1", "%p2"]);
        assert!(registers("0f3F800000").is_empty());
    }
}
