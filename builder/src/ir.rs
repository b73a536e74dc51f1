//! Reading the LLVM text form (`llvm-dis` output) of a kernel module: global variables, the
//! functions it declares, and the use sites of a global.
//!
//! Only what the builder needs is parsed, and only from lines whose shape the LLVM printer
//! fixes: a global variable is one line `@name = <keywords> global|constant <type> [<init>]
//! [, section "…"] [, align N] [, !kind !N]…`; a declaration is one line `declare … @name(…`.
//! Strings (`c"…"`, `"…"`, quoted names `@"…"`) never contain a raw `"` (the printer escapes it
//! as `\22`), so skipping from quote to quote is exact.

/// Characters of an unquoted LLVM identifier (after the `@`/`%` sigil).
fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'$' | b'.' | b'_')
}

/// Length of the name token starting at `s[0]` (the byte after `@`): a quoted `"…"` name
/// (quotes included) or a run of identifier characters. 0 if there is none.
pub(crate) fn name_len(s: &[u8]) -> usize {
    if s.first() == Some(&b'"') {
        let end = string_end(s, 0);
        return if end < s.len() { end + 1 } else { 0 };
    }
    s.iter().take_while(|&&c| is_ident_char(c)).count()
}

/// The printed name's text without quotes and with `\XX` escapes decoded (lossy UTF-8).
pub(crate) fn unquote(printed: &str) -> String {
    let Some(inner) = printed.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return printed.to_string();
    };
    let b = inner.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if let Some(v) = inner
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Splits `s` at top-level occurrences of `sep` (outside strings and `()[]{}<>` nesting).
pub(crate) fn split_top(s: &str, sep: u8) -> Vec<&str> {
    let b = s.as_bytes();
    let (mut depth, mut start, mut i) = (0i32, 0, 0);
    let mut parts = Vec::new();
    while i < b.len() {
        match b[i] {
            b'"' => i = string_end(b, i),
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            c if c == sep && depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&s[start..]);
    parts
}

/// Length of the type at the start of `s` (`i32`, `ptr addrspace(1)`, `[4 x i8]`, `<{ … }>`,
/// `%T`, `%"T"`).
fn type_len(s: &str) -> usize {
    let b = s.as_bytes();
    match b.first() {
        Some(b'[' | b'{' | b'<') => {
            let mut depth = 0;
            for (i, &c) in b.iter().enumerate() {
                match c {
                    b'(' | b'[' | b'{' | b'<' => depth += 1,
                    b')' | b']' | b'}' | b'>' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
            }
            b.len()
        }
        Some(b'%') => 1 + name_len(&b[1..]),
        _ => {
            let word = s.find(' ').unwrap_or(s.len());
            let rest = &s[word..];
            if s.starts_with("ptr") && rest.trim_start().starts_with("addrspace(") {
                let open = s.len() - rest.trim_start().len();
                return s[open..].find(')').map_or(s.len(), |p| open + p + 1);
            }
            word
        }
    }
}

/// One global variable of the module (a definition, or an `external` declaration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GlobalVar<'a> {
    /// The name as printed after `@` (quotes included when quoted).
    pub name: &'a str,
    /// The words between `=` and `global`/`constant` (linkage, `unnamed_addr`, …).
    pub keywords: Vec<&'a str>,
    /// `constant` rather than `global`.
    pub constant: bool,
    /// The value type.
    pub ty: &'a str,
    /// The initialiser; `None` for a declaration.
    pub init: Option<&'a str>,
    /// The section, unquoted.
    pub section: Option<String>,
    /// `align N`.
    pub align: Option<u64>,
    /// Metadata attachments (`!guid !3`), kept by a rewrite.
    pub attachments: Vec<&'a str>,
}

impl GlobalVar<'_> {
    /// The symbol name (unquoted).
    pub fn symbol(&self) -> String {
        unquote(self.name)
    }
}

/// Parses one line as a global variable; `None` for anything else (functions, aliases, …).
pub(crate) fn parse_global(line: &str) -> Option<GlobalVar<'_>> {
    let rest = line.strip_prefix('@')?;
    let n = name_len(rest.as_bytes());
    if n == 0 {
        return None;
    }
    let (name, rest) = rest.split_at(n);
    let rest = rest.strip_prefix(" = ")?;
    let parts = split_top(rest, b',');
    let head = parts[0].trim();
    let mut keywords = Vec::new();
    let mut tail = head;
    let constant = loop {
        let (word, after) = tail.split_once(' ').unwrap_or((tail, ""));
        match word {
            "global" => break false,
            "constant" => break true,
            "alias" | "ifunc" | "" => return None,
            _ => keywords.push(word),
        }
        tail = after.trim_start();
    };
    let body = tail.split_once(' ').map_or("", |(_, b)| b.trim());
    let tl = type_len(body);
    let (ty, init) = body.split_at(tl);
    let init = init.trim();
    let declaration = keywords
        .iter()
        .any(|k| matches!(*k, "external" | "extern_weak"));
    let mut var = GlobalVar {
        name,
        keywords,
        constant,
        ty: ty.trim(),
        init: (!declaration && !init.is_empty()).then_some(init),
        section: None,
        align: None,
        attachments: Vec::new(),
    };
    for part in &parts[1..] {
        let part = part.trim();
        if let Some(s) = part.strip_prefix("section ") {
            var.section = Some(unquote(s.trim()));
        } else if let Some(a) = part.strip_prefix("align ") {
            var.align = a.trim().parse().ok();
        } else if part.starts_with('!') {
            var.attachments.push(part);
        }
    }
    Some(var)
}

/// Every global variable of the module text.
pub(crate) fn globals(module: &str) -> Vec<GlobalVar<'_>> {
    module
        .lines()
        .filter(|l| l.starts_with('@'))
        .filter_map(parse_global)
        .collect()
}

/// Index of the `"` that closes the string opened at `b[open]` (or `b.len()`).
fn string_end(b: &[u8], open: usize) -> usize {
    b[open + 1..]
        .iter()
        .position(|&c| c == b'"')
        .map_or(b.len(), |p| open + 1 + p)
}

/// Every `(offset of '@', printed name)` of a global reference in `line`, outside strings.
pub(crate) fn global_refs(line: &str) -> Vec<(usize, &str)> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => i = string_end(b, i),
            b'@' => {
                let n = name_len(&b[i + 1..]);
                if n > 0 {
                    out.push((i, &line[i + 1..i + 1 + n]));
                }
                i += n;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Names (unquoted) of the functions the module declares but does not define.
pub(crate) fn declared_functions(module: &str) -> Vec<String> {
    module
        .lines()
        .filter(|l| l.starts_with("declare "))
        .filter_map(|line| {
            // The name is the `@name` right before the parameter list's `(`.
            global_refs(line)
                .into_iter()
                .find(|(at, name)| line.as_bytes().get(at + 1 + name.len()) == Some(&b'('))
                .map(|(_, name)| unquote(name))
        })
        .collect()
}

/// Every `(byte offset, name)` of a `ptr @name` operand in `line` whose printed name is in
/// `names` (exact token match; strings are skipped).
pub(crate) fn ptr_uses<'a>(line: &'a str, names: &[&str]) -> Vec<(usize, &'a str)> {
    global_refs(line)
        .into_iter()
        .filter(|&(i, name)| names.contains(&name) && typed_ptr(&line[..i]))
        .collect()
}

/// Parameter attributes that may stand between `ptr` and the value of a call argument
/// (`call void asm "…", "l"(ptr nonnull @S)`, `ptr noundef align 4 @S`).
const PARAM_ATTRIBUTES: [&str; 14] = [
    "nonnull",
    "noundef",
    "noalias",
    "nocapture",
    "readonly",
    "writeonly",
    "readnone",
    "nofree",
    "align",
    "dereferenceable",
    "dereferenceable_or_null",
    "captures",
    "elementtype",
    "initializes",
];

/// The value of a typed operand `ptr [attributes] value` (`ptr noundef align 4 %3` → `%3`);
/// `None` when the operand is not of type `ptr` (or has no value).
pub(crate) fn ptr_operand_value(operand: &str) -> Option<&str> {
    let mut rest = operand.trim().strip_prefix("ptr ")?.trim_start();
    loop {
        let word = rest.split(' ').next().unwrap_or(rest);
        let base = word.split('(').next().unwrap_or(word);
        if !PARAM_ATTRIBUTES.contains(&base) {
            break;
        }
        // `align N` takes the next word; `dereferenceable(N)` and the like are one word.
        let skip = if base == "align" && !word.contains('(') {
            2
        } else {
            1
        };
        let mut words = rest.splitn(skip + 1, ' ');
        for _ in 0..skip {
            words.next();
        }
        rest = words.next()?.trim_start();
    }
    (!rest.is_empty()).then_some(rest.trim_end())
}

/// Whether `prefix` (the text before an `@name`) ends with the type `ptr` and a space, maybe
/// followed by parameter attributes.
fn typed_ptr(prefix: &str) -> bool {
    let Some(mut rest) = prefix.strip_suffix(' ') else {
        return false;
    };
    loop {
        let (head, word) = rest.rsplit_once(' ').unwrap_or(("", rest));
        let base = word.split('(').next().unwrap_or(word);
        let number = !word.is_empty() && word.bytes().all(|c| c.is_ascii_digit());
        if PARAM_ATTRIBUTES.contains(&base) || (number && head.ends_with(" align")) {
            rest = head;
            continue;
        }
        let b = rest.as_bytes();
        return rest.ends_with("ptr") && (b.len() == 3 || !is_ident_char(b[b.len() - 4]));
    }
}

/// Whether `line` mentions `@name` for one of `names` anywhere (strings skipped).
pub(crate) fn mentions(line: &str, names: &[&str]) -> bool {
    global_refs(line).iter().any(|(_, n)| names.contains(n))
}

/// Whether an initialiser is entirely `undef`/`poison` (also inside aggregates such as
/// `[2 x i32] [i32 undef, i32 poison]` or `<{ [4 x i8] }> <{ [4 x i8] undef }>`).
pub(crate) fn is_uninit(init: &str) -> bool {
    let words: Vec<&str> = init
        .split(|c: char| c.is_whitespace() || "[]{}<>(),".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    let mut leaves = 0;
    for (i, w) in words.iter().enumerate() {
        let is_type = *w == "x"
            || *w == "ptr"
            || w.starts_with('%')
            || w.starts_with("addrspace")
            || matches!(
                *w,
                "half" | "bfloat" | "float" | "double" | "fp128" | "x86_fp80"
            )
            || (w.starts_with('i') && w.len() > 1 && w[1..].bytes().all(|c| c.is_ascii_digit()))
            || (w.bytes().all(|c| c.is_ascii_digit()) && words.get(i + 1) == Some(&"x"));
        if is_type {
            continue;
        }
        if !matches!(*w, "undef" | "poison") {
            return false;
        }
        leaves += 1;
    }
    leaves > 0
}

/// A readable form of a Rust symbol for messages: `crate::path::NAME` for the v0 and legacy
/// manglings of plain paths, else the symbol itself.
pub(crate) fn display_symbol(symbol: &str) -> String {
    match demangle(symbol) {
        Some(path) if path != symbol => format!("`{path}` (symbol `{symbol}`)"),
        _ => format!("`{symbol}`"),
    }
}

/// `crate::path::name` of a symbol in backquotes, or the symbol itself when it is not a plain
/// Rust path.
pub(crate) fn display_path(symbol: &str) -> String {
    format!(
        "`{}`",
        demangle(symbol).unwrap_or_else(|| symbol.to_string())
    )
}

/// The path of a v0 or legacy Rust symbol made of plain names.
fn demangle(symbol: &str) -> Option<String> {
    symbol
        .strip_prefix("_R")
        .and_then(|s| {
            let mut p = V0 {
                s: s.as_bytes(),
                at: 0,
            };
            p.path()
        })
        .or_else(|| legacy(symbol))
}

/// Legacy mangling `_ZN<len><seg>…17h<hash>E`.
fn legacy(symbol: &str) -> Option<String> {
    let mut s = symbol.strip_prefix("_ZN")?.strip_suffix('E')?;
    let mut segs = Vec::new();
    while !s.is_empty() {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let n: usize = s[..digits].parse().ok()?;
        let seg = s.get(digits..digits + n)?;
        s = &s[digits + n..];
        let hash = seg.len() == 17
            && seg.starts_with('h')
            && seg[1..].bytes().all(|c| c.is_ascii_hexdigit());
        if !(s.is_empty() && hash) {
            segs.push(seg);
        }
    }
    (!segs.is_empty()).then(|| segs.join("::"))
}

/// A reader of v0 paths made of crate roots and nested plain names (`C`, `N<ns>`).
struct V0<'a> {
    s: &'a [u8],
    at: usize,
}

impl V0<'_> {
    fn path(&mut self) -> Option<String> {
        let tag = *self.s.get(self.at)?;
        self.at += 1;
        match tag {
            b'C' => {
                self.disambiguator();
                self.ident()
            }
            b'N' => {
                self.at += 1; // namespace letter
                let parent = self.path()?;
                self.disambiguator();
                let name = self.ident()?;
                Some(if name.is_empty() {
                    parent
                } else {
                    format!("{parent}::{name}")
                })
            }
            _ => None,
        }
    }

    fn disambiguator(&mut self) {
        if self.s.get(self.at) == Some(&b's') {
            let end = self.s[self.at..].iter().position(|&c| c == b'_');
            self.at = end.map_or(self.s.len(), |e| self.at + e + 1);
        }
    }

    fn ident(&mut self) -> Option<String> {
        if self.s.get(self.at) == Some(&b'u') {
            return None; // punycode: leave the symbol as it is
        }
        let digits = self.s[self.at..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let n: usize = std::str::from_utf8(&self.s[self.at..self.at + digits])
            .ok()?
            .parse()
            .ok()?;
        self.at += digits;
        if self.s.get(self.at) == Some(&b'_') {
            self.at += 1;
        }
        let name = self.s.get(self.at..self.at + n)?;
        self.at += n;
        String::from_utf8(name.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_global_definitions() {
        let g = parse_global(r#"@_RNvCs1_2pk4TILE = internal unnamed_addr global [1024 x i8] undef, section ".ferrocuda.shared", align 4, !guid !1"#,
        )
        .unwrap();
        assert_eq!(g.name, "_RNvCs1_2pk4TILE");
        assert_eq!(g.keywords, ["internal", "unnamed_addr"]);
        assert!(!g.constant);
        assert_eq!(g.ty, "[1024 x i8]");
        assert_eq!(g.init, Some("undef"));
        assert_eq!(g.section.as_deref(), Some(".ferrocuda.shared"));
        assert_eq!(g.align, Some(4));
        assert_eq!(g.attachments, ["!guid !1"]);

        let d = parse_global(
            "@__ferrocuda_dynamic_shared = external local_unnamed_addr global [0 x i8]",
        )
        .unwrap();
        assert_eq!(d.init, None);
        assert_eq!(d.ty, "[0 x i8]");

        // Commas and section-like text inside an initialiser's string do not confuse it.
        let s = parse_global(r#"@"a b" = private constant <{ [9 x i8], ptr }> <{ [9 x i8] c"x, align\22", ptr @y }>, align 8"#,
        )
        .unwrap();
        assert_eq!(s.name, "\"a b\"");
        assert_eq!(s.symbol(), "a b");
        assert!(s.constant);
        assert_eq!(s.ty, "<{ [9 x i8], ptr }>");
        assert_eq!(s.section, None);
        assert_eq!(s.align, Some(8));

        let p = parse_global("@p = global ptr addrspace(1) null, align 8").unwrap();
        assert_eq!((p.ty, p.init), ("ptr addrspace(1)", Some("null")));
        assert!(parse_global("@a = alias i32, ptr @b").is_none());
        assert!(parse_global("define void @f() {").is_none());
    }

    #[test]
    fn finds_declared_functions() {
        let m = "declare noundef float @__nv_expf(float noundef) unnamed_addr #0\n\
                 declare void @\"odd name\"(ptr)\n\
                 define void @f() {\n  call void @g()\n}\n";
        assert_eq!(declared_functions(m), ["__nv_expf", "odd name"]);
    }

    #[test]
    fn reads_pointer_operands() {
        assert_eq!(ptr_operand_value("ptr %3"), Some("%3"));
        assert_eq!(
            ptr_operand_value(" ptr noundef align 16 %\"a b\" "),
            Some("%\"a b\"")
        );
        assert_eq!(
            ptr_operand_value("ptr nonnull dereferenceable(16) null"),
            Some("null")
        );
        assert_eq!(
            ptr_operand_value("ptr inttoptr (i64 16 to ptr)"),
            Some("inttoptr (i64 16 to ptr)")
        );
        assert_eq!(ptr_operand_value("i64 %3"), None);
        assert_eq!(ptr_operand_value("ptr noundef"), None);
    }

    #[test]
    fn finds_typed_uses_exactly() {
        let names = ["X", "\"q x\""];
        let line = r#"  %a = getelementptr inbounds nuw [4 x i8], ptr @X, i64 %t ; ptr @XY ptr @X.1 c"ptr @X" ptr @"q x""#;
        let uses: Vec<&str> = ptr_uses(line, &names).into_iter().map(|(_, n)| n).collect();
        assert_eq!(uses, ["X", "\"q x\""]);
        assert!(ptr_uses("@X = internal global i32 undef", &names).is_empty());
        assert!(ptr_uses("  store i32 0, ptr @XY", &names).is_empty());
        // Call arguments with parameter attributes (an asm operand, an aligned argument).
        let call = r#"  %4 = call { ptr, i32 } asm sideeffect "", "=&l,0"(ptr nonnull @X, ptr noundef align 4 dereferenceable(32) @X)"#;
        assert_eq!(ptr_uses(call, &names).len(), 2);
        assert!(ptr_uses("  call void @f(i32 nonnull @X)", &names).is_empty());
        assert!(ptr_uses("  call void @f(myptr nonnull @X)", &names).is_empty());
        assert!(mentions("uselistorder ptr @X, { 1, 0 }", &names));
        assert!(!mentions("uselistorder ptr @X2, { 1, 0 }", &names));
        assert!(!mentions(r#"@s = constant [3 x i8] c"@X\00""#, &names));
    }

    #[test]
    fn recognises_uninitialised_values() {
        assert!(is_uninit("undef"));
        assert!(is_uninit("poison"));
        assert!(is_uninit("[2 x i32] [i32 undef, i32 poison]"));
        assert!(is_uninit("<{ [4 x i8] }> <{ [4 x i8] undef }>"));
        assert!(!is_uninit("zeroinitializer"));
        assert!(!is_uninit("[2 x i32] [i32 undef, i32 0]"));
        assert!(!is_uninit(r#"c"abcd""#));
        assert!(!is_uninit(""));
    }

    #[test]
    fn demangles_plain_paths() {
        assert_eq!(
            display_symbol("_RNvCsbtWUZOonFjp_2pk4TILE"),
            "`pk::TILE` (symbol `_RNvCsbtWUZOonFjp_2pk4TILE`)"
        );
        assert_eq!(
            display_symbol("_RNvNtCs1_7kernels6shared4TILE"),
            "`kernels::shared::TILE` (symbol `_RNvNtCs1_7kernels6shared4TILE`)"
        );
        assert_eq!(
            display_symbol("_ZN2pk4TILE17h0123456789abcdefE"),
            "`pk::TILE` (symbol `_ZN2pk4TILE17h0123456789abcdefE`)"
        );
        assert_eq!(display_symbol("TILE"), "`TILE`");
        assert_eq!(display_symbol("_RINvC1a1bE"), "`_RINvC1a1bE`");
    }
}
