//! The module-dependency checker behind `tests/layers`: it parses the source files of a crate,
//! builds the file-level dependency graph from the paths they name, and reports import circles
//! and uses against the layer order a module's documentation states.
//!
//! # What counts as a dependency
//!
//! File A depends on file B when code in A names an item defined in B: through a `use` item
//! (`use crate::x::Y`, `use super::Y`, `use self::m::Y`, `use m::Y` for a child module `m`), or
//! through a path in code (`crate::x::y()`, `super::Y`, `m::Y` where `m` is a module in scope;
//! also such paths inside macro invocations). A path is followed through the re-exports on its
//! way (`use` items of the modules it passes), to the file that defines the item: a child that
//! names `super::Foo`, which its parent re-exports from a sibling, depends on the sibling, not
//! on the parent. A `pub use` is an edge of its own file only when that file's code also uses
//! the name (otherwise it is routing, not use). A module named whole (`use super::result;`) is
//! no edge; the paths through it are. `#[cfg(test)]` items are left out: a test may use any
//! module. Names that resolve to nothing known (macro-generated items) count as their module.
//!
//! # Layers
//!
//! A module file whose inner documentation has a `# Layers` section (a crate's `lib.rs`, or a
//! `mod.rs`) states the order of its child modules: a numbered list, each item naming the
//! modules of one layer before its first ` — ` (as `` [`name`] ``, `` [`name`](mod@name) `` or
//! `` `name` ``). Every child module is listed exactly once, and code under a child uses only
//! children of earlier layers. The documenting file itself (the crate root, a `mod.rs`) is a
//! façade and is not checked as a user; a child that uses an item defined in it is checked
//! against that file's own uses by the circle check.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module path from the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// One source file of the crate.
#[derive(Debug)]
pub struct File {
    /// Its name, relative to the crate's `src` (e.g. `driver/mod.rs`), or the in-memory name.
    pub name: String,
    /// The module it defines (its inline submodules are modules of the same file).
    pub module: ModPath,
    /// The inner documentation (`//!`) of the file.
    doc: String,
}

#[derive(Debug, Default)]
struct Module {
    file: usize,
    children: BTreeSet<String>,
    /// Items defined here (any namespace).
    items: BTreeSet<String>,
    /// `use` bindings: name → (absolute target path, whether it is `pub`).
    imports: HashMap<String, ModPath>,
    /// `use x::*` targets (absolute).
    globs: Vec<ModPath>,
}

/// A dependency of one file on another, with where it was seen.
#[derive(Clone, Debug)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    /// The path as written, and its line (0 where unknown).
    pub path: String,
    pub line: usize,
}

/// A crate's files, modules and the dependencies between its files.
#[derive(Debug)]
pub struct Crate {
    pub files: Vec<File>,
    modules: BTreeMap<ModPath, Module>,
    pub edges: Vec<Edge>,
    /// Paths into other crates: file, line, the path as written — with a `use` alias of an
    /// outside path (`use ferrocuda_host as h;`, `use ferrocuda_host::driver;`) expanded.
    outside: Vec<(usize, usize, Vec<String>)>,
}

/// A path reference found in a file, before resolution.
struct Ref {
    module: ModPath,
    segments: Vec<String>,
    line: usize,
    /// From a `use` item (a module named whole is then no edge); `Some(name)` if `pub use`
    /// binding `name` (an edge only when the file uses the name elsewhere).
    from_use: Option<Option<String>>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && match &a.meta {
                syn::Meta::List(l) => {
                    let t = l.tokens.to_string();
                    t == "test" || t.starts_with("all (test") || t.starts_with("all(test")
                }
                _ => false,
            }
    })
}

fn inner_doc(attrs: &[syn::Attribute]) -> String {
    let mut doc = String::new();
    for a in attrs {
        if !matches!(a.style, syn::AttrStyle::Inner(_)) || !a.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &a.meta {
            if let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
            {
                doc.push_str(&s.value());
                doc.push('\n');
            }
        }
    }
    doc
}

/// Flattens a `use` tree into (binding name or `*`, path segments).
fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(String, Vec<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                if let Some(last) = prefix.last() {
                    out.push((last.clone(), prefix.clone()));
                }
            } else {
                let mut p = prefix.clone();
                p.push(name.clone());
                out.push((name, p));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut p = prefix.clone();
            let name = r.ident.to_string();
            if name != "self" {
                p.push(name);
            }
            out.push((r.rename.to_string(), p));
        }
        syn::UseTree::Glob(_) => out.push(("*".into(), prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// Collects the paths of one module's code (not its nested modules', which are walked on
/// their own).
struct PathCollector<'a> {
    module: &'a ModPath,
    refs: &'a mut Vec<Ref>,
    /// Every identifier in code outside `use` items (for the `pub use` rule).
    idents: &'a mut BTreeSet<String>,
    uses: &'a mut Vec<Use>,
}

/// One `use` item: its module, whether it is `pub`, its line, its bindings (name or `*`, path).
struct Use {
    module: ModPath,
    is_pub: bool,
    line: usize,
    flat: Vec<(String, Vec<String>)>,
}

impl PathCollector<'_> {
    fn push(&mut self, segments: Vec<String>, line: usize) {
        if segments.len() >= 2
            || matches!(
                segments.first().map(String::as_str),
                Some("crate" | "super" | "self")
            )
        {
            self.refs.push(Ref {
                module: self.module.clone(),
                segments,
                line,
                from_use: None,
            });
        }
    }

    /// `crate :: a :: b`, `super :: …`, `m :: x` sequences in a macro's tokens.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tts.len() {
            match &tts[i] {
                TokenTree::Group(g) => {
                    self.scan_tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(id) => {
                    self.idents.insert(id.to_string());
                    let prev_is_colon =
                        i >= 1 && matches!(&tts[i - 1], TokenTree::Punct(p) if p.as_char() == ':');
                    let prev_is_dollar =
                        i >= 1 && matches!(&tts[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                    let mut segs = vec![id.to_string()];
                    let line = id.span().start().line;
                    let mut j = i + 1;
                    while j + 2 < tts.len() && is_colon2(&tts, j) {
                        if let TokenTree::Ident(next) = &tts[j + 2] {
                            self.idents.insert(next.to_string());
                            segs.push(next.to_string());
                            j += 3;
                        } else {
                            break;
                        }
                    }
                    if !prev_is_colon && !prev_is_dollar && segs.len() >= 2 {
                        self.push(segs, line);
                    }
                    i = j.max(i + 1);
                }
                _ => i += 1,
            }
        }
    }
}

fn is_colon2(tts: &[TokenTree], j: usize) -> bool {
    matches!((&tts.get(j), &tts.get(j + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && b.as_char() == ':' && a.spacing() == proc_macro2::Spacing::Joint)
}

impl<'ast> Visit<'ast> for PathCollector<'_> {
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // Walked as a module of its own.
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if !is_cfg_test(&u.attrs) {
            let mut flat = Vec::new();
            flatten_use(&u.tree, &mut Vec::new(), &mut flat);
            self.uses.push(Use {
                module: self.module.clone(),
                is_pub: !matches!(u.vis, syn::Visibility::Inherited),
                line: u.use_token.span.start().line,
                flat,
            });
        }
    }
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs = match i {
            syn::Item::Fn(x) => &x.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Const(x) => &x.attrs,
            syn::Item::Static(x) => &x.attrs,
            syn::Item::Struct(x) => &x.attrs,
            syn::Item::Enum(x) => &x.attrs,
            syn::Item::Trait(x) => &x.attrs,
            syn::Item::Macro(x) => &x.attrs,
            _ => return syn::visit::visit_item(self, i),
        };
        if !is_cfg_test(attrs) {
            syn::visit::visit_item(self, i);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        for s in &segs {
            self.idents.insert(s.clone());
        }
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        if p.leading_colon.is_none() {
            self.push(segs, line);
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {
        // `pub(in crate::x)` names where an item is visible, not something it uses.
    }
    fn visit_ident(&mut self, i: &'ast proc_macro2::Ident) {
        self.idents.insert(i.to_string());
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.scan_tokens(m.tokens.clone());
    }
}

/// Per-file raw material: its uses and code paths, and the identifiers its code names.
#[derive(Default)]
struct FileRaw {
    refs: Vec<Ref>,
    idents: BTreeSet<String>,
    uses: Vec<Use>,
}

/// Where a path leads.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Target {
    /// A module named whole.
    Module(usize),
    /// An item of the module of this file.
    Item(usize),
}

impl Crate {
    /// Reads the crate whose root is `lib` (a `src/lib.rs`), following `mod x;` to `x.rs` or
    /// `x/mod.rs`.
    pub fn read(lib: &Path) -> Result<Crate, String> {
        let root = lib.parent().expect("lib.rs has a directory").to_path_buf();
        let mut sources = Vec::new();
        let mut queue: Vec<(PathBuf, ModPath)> = vec![(lib.to_path_buf(), vec![])];
        while let Some((path, module)) = queue.pop() {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let ast = syn::parse_file(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            // Directory of this file's children: `x/` for `x.rs`, the same for `mod.rs`/`lib.rs`.
            let dir = match path.file_name().and_then(|n| n.to_str()) {
                Some("lib.rs" | "mod.rs" | "main.rs") => path.parent().unwrap().to_path_buf(),
                _ => path.with_extension(""),
            };
            let mut out_of_line = Vec::new();
            collect_mod_decls(&ast.items, &dir, &module, &mut out_of_line);
            for (name_dir, m) in out_of_line {
                let a = name_dir.with_extension("rs");
                let b = name_dir.join("mod.rs");
                let p = if a.exists() { a } else { b };
                queue.push((p, m));
            }
            let name = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .display()
                .to_string();
            sources.push((name, module, ast));
        }
        sources.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Crate::from_files(sources))
    }

    /// Builds the graph of in-memory files: (name, module path, source).
    pub fn from_sources(sources: &[(&str, &[&str], &str)]) -> Result<Crate, String> {
        let mut parsed = Vec::new();
        for (name, module, text) in sources {
            let ast = syn::parse_file(text).map_err(|e| format!("{name}: {e}"))?;
            parsed.push((
                name.to_string(),
                module.iter().map(|s| s.to_string()).collect(),
                ast,
            ));
        }
        Ok(Crate::from_files(parsed))
    }

    fn from_files(sources: Vec<(String, ModPath, syn::File)>) -> Crate {
        let mut files = Vec::new();
        let mut modules: BTreeMap<ModPath, Module> = BTreeMap::new();
        let mut raws = Vec::new();
        for (idx, (name, module, ast)) in sources.into_iter().enumerate() {
            files.push(File {
                name,
                module: module.clone(),
                doc: inner_doc(&ast.attrs),
            });
            let mut raw = FileRaw::default();
            walk_module(idx, &module, &ast.items, &mut modules, &mut raw);
            raws.push(raw);
        }
        // Every module's children (out-of-line ones are registered by their own files).
        let paths: Vec<ModPath> = modules.keys().cloned().collect();
        for p in &paths {
            if let Some((last, parent)) = p.split_last() {
                if let Some(m) = modules.get_mut(parent) {
                    m.children.insert(last.clone());
                }
            }
        }
        // Imports, made absolute.
        for raw in &raws {
            for u in &raw.uses {
                for (name, segs) in &u.flat {
                    let Some(abs) = absolute(&modules, &u.module, segs) else {
                        continue;
                    };
                    let m = modules.get_mut(&u.module).expect("module walked");
                    if name == "*" {
                        m.globs.push(abs);
                    } else {
                        m.imports.insert(name.clone(), abs);
                    }
                }
            }
        }
        let mut krate = Crate {
            files,
            modules,
            edges: Vec::new(),
            outside: Vec::new(),
        };
        // Aliases of outside paths, by module and name.
        let mut aliases: HashMap<(ModPath, String), Vec<String>> = HashMap::new();
        for raw in &raws {
            for u in &raw.uses {
                for (name, segs) in &u.flat {
                    let first = segs.first().map(String::as_str);
                    if name != "*"
                        && !matches!(first, Some("crate" | "self" | "super"))
                        && absolute(&krate.modules, &u.module, segs).is_none()
                    {
                        aliases.insert((u.module.clone(), name.clone()), segs.clone());
                    }
                }
            }
        }
        let mut outside = Vec::new();
        // Edges.
        let mut edges = Vec::new();
        for (idx, raw) in raws.iter_mut().enumerate() {
            for u in &raw.uses {
                for (name, segs) in &u.flat {
                    raw.refs.push(Ref {
                        module: u.module.clone(),
                        segments: segs.clone(),
                        line: u.line,
                        from_use: Some(if u.is_pub && name != "*" {
                            Some(name.clone())
                        } else {
                            None
                        }),
                    });
                }
            }
            for r in &raw.refs {
                if let Some(Some(name)) = &r.from_use {
                    if !raw.idents.contains(name) {
                        continue;
                    }
                }
                let Some(abs) = absolute(&krate.modules, &r.module, &r.segments) else {
                    let first = r.segments.first().map(String::as_str);
                    if !matches!(first, Some("crate" | "self" | "super")) {
                        let mut path = r.segments.clone();
                        if r.from_use.is_none() {
                            let key = (r.module.clone(), path[0].clone());
                            if let Some(target) = aliases.get(&key) {
                                path.splice(..1, target.iter().cloned());
                            }
                        }
                        outside.push((idx, r.line, path));
                    }
                    continue;
                };
                let target = if r.segments.last().map(String::as_str) == Some("*") {
                    krate
                        .modules
                        .get(&abs[..abs.len() - 1])
                        .map(|m| Target::Item(m.file))
                } else {
                    krate.resolve(&abs, 0)
                };
                let to = match target {
                    Some(Target::Item(f)) => f,
                    Some(Target::Module(f)) if r.from_use.is_none() => f,
                    _ => continue,
                };
                if to != idx {
                    edges.push(Edge {
                        from: idx,
                        to,
                        path: r.segments.join("::"),
                        line: r.line,
                    });
                }
            }
        }
        krate.edges = edges;
        krate.outside = outside;
        krate
    }

    /// Where the absolute path `abs` (from the crate root) leads, following re-exports.
    fn resolve(&self, abs: &[String], depth: usize) -> Option<Target> {
        if depth > 16 {
            return None;
        }
        let mut cur: ModPath = vec![];
        for (i, s) in abs.iter().enumerate() {
            let m = self.modules.get(&cur)?;
            if m.children.contains(s) {
                cur.push(s.clone());
                continue;
            }
            let rest = &abs[i + 1..];
            if let Some(target) = m.imports.get(s) {
                let mut p = target.clone();
                p.extend_from_slice(rest);
                return self.resolve(&p, depth + 1);
            }
            if m.items.contains(s) {
                return Some(Target::Item(m.file));
            }
            for g in &m.globs {
                let mut p = g.clone();
                p.extend_from_slice(&abs[i..]);
                if let Some(t) = self.resolve(&p, depth + 1) {
                    if self.defines(&p, depth + 1) {
                        return Some(t);
                    }
                }
            }
            return Some(Target::Item(m.file));
        }
        self.modules.get(&cur).map(|m| Target::Module(m.file))
    }

    /// Whether the first name of `abs` after its module part is known where it leads.
    fn defines(&self, abs: &[String], depth: usize) -> bool {
        if depth > 16 {
            return false;
        }
        let mut cur: ModPath = vec![];
        for s in abs {
            let Some(m) = self.modules.get(&cur) else {
                return false;
            };
            if m.children.contains(s) {
                cur.push(s.clone());
                continue;
            }
            return m.items.contains(s) || m.imports.contains_key(s);
        }
        true
    }

    /// The file-level circles: each strongly connected set of files, with one cycle through it
    /// shown edge by edge (`a.rs:12 crate::b::X -> b.rs`).
    pub fn circles(&self) -> Vec<String> {
        let n = self.files.len();
        let mut adj = vec![Vec::new(); n];
        for (k, e) in self.edges.iter().enumerate() {
            adj[e.from].push((e.to, k));
        }
        let sccs = tarjan(n, &adj);
        let mut out = Vec::new();
        for scc in sccs.into_iter().filter(|c| c.len() > 1) {
            let set: BTreeSet<usize> = scc.iter().copied().collect();
            let start = *set.iter().next().unwrap();
            // Shortest cycle through `start` inside the set (breadth-first).
            let mut prev: HashMap<usize, usize> = HashMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut seen = BTreeSet::from([start]);
            let mut closing = None;
            'bfs: while let Some(u) = queue.pop_front() {
                for &(v, k) in &adj[u] {
                    if !set.contains(&v) {
                        continue;
                    }
                    if v == start {
                        closing = Some(k);
                        break 'bfs;
                    }
                    if seen.insert(v) {
                        prev.insert(v, k);
                        queue.push_back(v);
                    }
                }
            }
            let mut chain = vec![closing.expect("a cycle through an SCC member")];
            let mut at = self.edges[chain[0]].from;
            while at != start {
                let k = prev[&at];
                chain.push(k);
                at = self.edges[k].from;
            }
            chain.reverse();
            let names: Vec<&str> = scc.iter().map(|&f| self.files[f].name.as_str()).collect();
            let mut s = format!("circle among {{{}}}:", names.join(", "));
            for k in chain {
                let e = &self.edges[k];
                let _ = write!(
                    s,
                    "\n    {}:{} uses {} -> {}",
                    self.files[e.from].name, e.line, e.path, self.files[e.to].name
                );
            }
            out.push(s);
        }
        out
    }

    /// The layer orders stated in `# Layers` sections, checked; one message per violation.
    pub fn layer_violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in &self.files {
            let Some(layers) = parse_layers(&f.doc) else {
                continue;
            };
            let module = &f.module;
            let children = &self.modules[module].children;
            let mut layer_of: BTreeMap<&str, usize> = BTreeMap::new();
            for (i, names) in layers.iter().enumerate() {
                for n in names {
                    if layer_of.insert(n.as_str(), i).is_some() {
                        out.push(format!("{}: `{n}` is listed twice in # Layers", f.name));
                    }
                    if !children.contains(n) {
                        out.push(format!(
                            "{}: # Layers lists `{n}`, which is no module here",
                            f.name
                        ));
                    }
                }
            }
            for c in children {
                if !layer_of.contains_key(c.as_str()) {
                    out.push(format!("{}: module `{c}` is missing from # Layers", f.name));
                }
            }
            // Which child of `module` a file belongs to.
            let child_of = |file: usize| -> Option<&str> {
                let m = &self.files[file].module;
                (m.len() > module.len() && m.starts_with(module)).then(|| m[module.len()].as_str())
            };
            for e in &self.edges {
                let (Some(a), Some(b)) = (child_of(e.from), child_of(e.to)) else {
                    continue;
                };
                if a == b {
                    continue;
                }
                let (Some(&la), Some(&lb)) = (layer_of.get(a), layer_of.get(b)) else {
                    continue;
                };
                if lb >= la {
                    out.push(format!(
                        "{}: `{a}` (layer {}) uses `{b}` (layer {}), not above it: {}:{} uses {}",
                        f.name,
                        la + 1,
                        lb + 1,
                        self.files[e.from].name,
                        e.line,
                        e.path
                    ));
                }
            }
        }
        out
    }

    /// The paths into other crates that start with `prefix` (`["ferrocuda_host", "driver"]`),
    /// in `use` items or code (macro arguments included, `#[cfg(test)]` items not), as
    /// `file:line uses path`.
    pub fn outside_uses(&self, prefix: &[&str]) -> Vec<String> {
        let mut found: Vec<(&str, usize, String)> = self
            .outside
            .iter()
            .filter(|(_, _, p)| {
                p.len() >= prefix.len() && p.iter().zip(prefix).all(|(a, b)| a == b)
            })
            .map(|(f, line, p)| (self.files[*f].name.as_str(), *line, p.join("::")))
            .collect();
        found.sort();
        found.dedup();
        found
            .into_iter()
            .map(|(f, line, p)| format!("{f}:{line} uses {p}"))
            .collect()
    }

    /// The names of the files with a `# Layers` section.
    pub fn layered_files(&self) -> Vec<&str> {
        self.files
            .iter()
            .filter(|f| parse_layers(&f.doc).is_some())
            .map(|f| f.name.as_str())
            .collect()
    }
}

/// The `mod x;` declarations of `items` (not `#[cfg(test)]` ones), with inline modules walked.
fn collect_mod_decls(
    items: &[syn::Item],
    dir: &Path,
    module: &ModPath,
    out: &mut Vec<(PathBuf, ModPath)>,
) {
    for item in items {
        if let syn::Item::Mod(m) = item {
            if is_cfg_test(&m.attrs) {
                continue;
            }
            let name = m.ident.to_string();
            let mut sub = module.clone();
            sub.push(name.clone());
            match &m.content {
                None => out.push((dir.join(&name), sub)),
                Some((_, inner)) => collect_mod_decls(inner, &dir.join(&name), &sub, out),
            }
        }
    }
}

/// Registers the module `module` of file `file` (and its inline submodules): its items, its
/// `use` items and code paths.
fn walk_module(
    file: usize,
    module: &ModPath,
    items: &[syn::Item],
    modules: &mut BTreeMap<ModPath, Module>,
    raw: &mut FileRaw,
) {
    let m = modules.entry(module.clone()).or_default();
    m.file = file;
    for item in items {
        let name = match item {
            syn::Item::Const(x) => Some(&x.ident),
            syn::Item::Enum(x) => Some(&x.ident),
            syn::Item::Fn(x) => Some(&x.sig.ident),
            syn::Item::Static(x) => Some(&x.ident),
            syn::Item::Struct(x) => Some(&x.ident),
            syn::Item::Trait(x) => Some(&x.ident),
            syn::Item::TraitAlias(x) => Some(&x.ident),
            syn::Item::Type(x) => Some(&x.ident),
            syn::Item::Union(x) => Some(&x.ident),
            syn::Item::Macro(x) => x.ident.as_ref(),
            _ => None,
        };
        if let Some(n) = name {
            modules.get_mut(module).unwrap().items.insert(n.to_string());
        }
    }
    let mut collector = PathCollector {
        module,
        refs: &mut raw.refs,
        idents: &mut raw.idents,
        uses: &mut raw.uses,
    };
    for item in items {
        collector.visit_item(item);
    }
    for item in items {
        if let syn::Item::Mod(md) = item {
            if is_cfg_test(&md.attrs) {
                continue;
            }
            if let Some((_, inner)) = &md.content {
                let mut sub = module.clone();
                sub.push(md.ident.to_string());
                walk_module(file, &sub, inner, modules, raw);
            }
        }
    }
}

/// The absolute form of `segs` as written in `module`, or `None` for an outside path (another
/// crate, `std`, a local variable's field).
fn absolute(
    modules: &BTreeMap<ModPath, Module>,
    module: &ModPath,
    segs: &[String],
) -> Option<ModPath> {
    let first = segs.first()?;
    let mut base: ModPath;
    let mut rest = segs;
    match first.as_str() {
        "crate" => {
            base = vec![];
            rest = &segs[1..];
        }
        "self" => {
            base = module.clone();
            rest = &segs[1..];
        }
        "super" => {
            base = module.clone();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
            if rest.first().map(String::as_str) == Some("self") {
                rest = &rest[1..];
            }
        }
        name => {
            let m = modules.get(module)?;
            if m.children.contains(name) || m.imports.contains_key(name) {
                base = module.clone();
            } else {
                return None;
            }
        }
    }
    if rest.is_empty() {
        return None;
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The layers of a `# Layers` section: each numbered item's module names (before its first
/// ` — `, which may come on a continuation line of the item).
fn parse_layers(doc: &str) -> Option<Vec<Vec<String>>> {
    let mut lines = doc.lines().map(str::trim_start);
    lines.find(|l| l.trim_end() == "# Layers")?;
    let mut layers: Vec<Vec<String>> = Vec::new();
    // Whether the last item's names go on (no ` — ` seen yet).
    let mut open = false;
    for l in lines {
        if l.starts_with('#') {
            break;
        }
        let item = l
            .split_once(". ")
            .filter(|(num, _)| !num.is_empty() && num.chars().all(|c| c.is_ascii_digit()));
        let text = match item {
            Some((_, rest)) => {
                layers.push(Vec::new());
                rest
            }
            None if open && !l.trim().is_empty() => l,
            None => {
                open = false;
                continue;
            }
        };
        open = !text.contains(" — ");
        let mut s = text.split(" — ").next().unwrap_or("");
        let names = layers.last_mut().expect("an item was pushed");
        while let Some(start) = s.find('`') {
            let after = &s[start + 1..];
            let Some(end) = after.find('`') else { break };
            names.push(after[..end].to_string());
            s = &after[end + 1..];
        }
    }
    Some(layers)
}

/// Tarjan's strongly connected components.
fn tarjan(n: usize, adj: &[Vec<(usize, usize)>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        adj: &'a [Vec<(usize, usize)>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn strong(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &(w, _) in s.adj[v].clone().iter() {
            match s.index[w] {
                None => {
                    strong(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut c = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on[w] = false;
                c.push(w);
                if w == v {
                    break;
                }
            }
            c.sort();
            s.out.push(c);
        }
    }
    let mut s = State {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            strong(&mut s, v);
        }
    }
    s.out
}

#[cfg(test)]
mod tests {
    use super::Crate;

    fn krate(files: &[(&str, &[&str], &str)]) -> Crate {
        Crate::from_sources(files).expect("parses")
    }

    const LIB: &str =
        "//! # Layers\n//!\n//! 1. [`a`] — first.\n//! 2. [`b`] — second.\nmod a;\nmod b;\n";

    #[test]
    fn an_injected_circle_is_found_and_named() {
        let clean: &[(&str, &[&str], &str)] = &[
            ("lib.rs", &[], LIB),
            ("a.rs", &["a"], "pub struct A;"),
            ("b.rs", &["b"], "use crate::a::A;\npub fn f() -> A { A }"),
        ];
        assert_eq!(krate(clean).circles(), Vec::<String>::new());
        assert_eq!(krate(clean).layer_violations(), Vec::<String>::new());
        // `a` now names `b` in code (a path, no `use`): a circle, reported with both edges.
        let circular: &[(&str, &[&str], &str)] = &[
            ("lib.rs", &[], LIB),
            ("a.rs", &["a"], "pub struct A;\nfn g() { crate::b::f(); }"),
            ("b.rs", &["b"], "use crate::a::A;\npub fn f() -> A { A }"),
        ];
        let c = krate(circular).circles();
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].starts_with("circle among {a.rs, b.rs}"), "{}", c[0]);
        assert!(c[0].contains("a.rs:2 uses crate::b::f -> b.rs"), "{}", c[0]);
        assert!(c[0].contains("b.rs:1 uses crate::a::A -> a.rs"), "{}", c[0]);
        // And `a` uses a module of a later layer.
        let v = krate(circular).layer_violations();
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].contains("`a` (layer 1) uses `b` (layer 2)"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn paths_in_macros_and_in_function_bodies_count_tests_do_not() {
        let files: &[(&str, &[&str], &str)] = &[
            ("lib.rs", &[], "mod a;\nmod b;"),
            (
                "a.rs",
                &["a"],
                "pub fn f() {}\nfn g() { let _ = format!(\"{:?}\", super::b::h()); }",
            ),
            (
                "b.rs",
                &["b"],
                "pub fn h() {}\nfn k() { use crate::a; a::f(); }",
            ),
        ];
        assert_eq!(krate(files).circles().len(), 1);
        let tests_only: &[(&str, &[&str], &str)] = &[
            ("lib.rs", &[], "mod a;\nmod b;"),
            (
                "a.rs",
                &["a"],
                "pub fn f() {}\n#[cfg(test)]\nmod tests { use crate::b::h; }",
            ),
            ("b.rs", &["b"], "pub fn h() {}\nfn k() { crate::a::f(); }"),
        ];
        assert_eq!(krate(tests_only).circles(), Vec::<String>::new());
        // A visibility path (`pub(in crate::b)`) is no use of `b`.
        let visibility: &[(&str, &[&str], &str)] = &[
            ("lib.rs", &[], "mod a;\nmod b;"),
            ("a.rs", &["a"], "pub struct A(pub(in crate::b) u8);"),
            ("b.rs", &["b"], "pub fn h() -> crate::a::A { todo!() }"),
        ];
        assert_eq!(krate(visibility).circles(), Vec::<String>::new());
    }

    #[test]
    fn re_exports_are_followed_to_the_defining_file() {
        // `y` names `super::X`, which the parent re-exports from `x`: `y` depends on `x`, and
        // the parent (which uses `y`) is no part of a circle.
        let files: &[(&str, &[&str], &str)] = &[
            ("lib.rs", &[], "mod p;"),
            (
                "p/mod.rs",
                &["p"],
                "mod x;\nmod y;\npub use x::X;\npub fn run() { y::go(); }",
            ),
            ("p/x.rs", &["p", "x"], "pub struct X;"),
            (
                "p/y.rs",
                &["p", "y"],
                "use super::X;\npub fn go() { let _ = X; }",
            ),
        ];
        let k = krate(files);
        assert_eq!(k.circles(), Vec::<String>::new());
        let names: Vec<(&str, &str)> = k
            .edges
            .iter()
            .map(|e| (k.files[e.from].name.as_str(), k.files[e.to].name.as_str()))
            .collect();
        assert!(names.contains(&("p/y.rs", "p/x.rs")), "{names:?}");
        assert!(names.contains(&("p/mod.rs", "p/y.rs")), "{names:?}");
        assert!(!names.contains(&("p/y.rs", "p/mod.rs")), "{names:?}");
        // An item the parent defines itself closes the circle.
        let files: &[(&str, &[&str], &str)] = &[
            ("lib.rs", &[], "mod p;"),
            (
                "p/mod.rs",
                &["p"],
                "mod y;\npub struct X;\npub fn run() { y::go(); }",
            ),
            (
                "p/y.rs",
                &["p", "y"],
                "use super::X;\npub fn go() { let _ = X; }",
            ),
        ];
        let c = krate(files).circles();
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(
            c[0].starts_with("circle among {p/mod.rs, p/y.rs}"),
            "{}",
            c[0]
        );
    }

    #[test]
    fn paths_into_another_crate_are_found_however_they_are_written() {
        let files: &[(&str, &[&str], &str)] = &[
            ("lib.rs", &[], "mod a;\nmod b;"),
            (
                "a.rs",
                &["a"],
                "use other::{driver::Fence, runtime};\nfn f() { other::driver::sync(); }",
            ),
            (
                "b.rs",
                &["b"],
                "use other as o;\nuse other::driver;\nfn g() { let _ = format!(\"{:?}\", o::driver::X); driver::y(); runtime::z(); }",
            ),
        ];
        let got = krate(files).outside_uses(&["other", "driver"]);
        assert_eq!(
            got,
            [
                "a.rs:1 uses other::driver::Fence",
                "a.rs:2 uses other::driver::sync",
                "b.rs:2 uses other::driver",
                "b.rs:3 uses other::driver::X",
                "b.rs:3 uses other::driver::y",
            ],
            "{got:?}"
        );
        assert!(krate(files).outside_uses(&["another"]).is_empty());
    }

    #[test]
    fn the_layer_list_must_name_every_module_once() {
        let files: &[(&str, &[&str], &str)] = &[
            ("lib.rs", &[], "//! # Layers\n//!\n//! 1. [`a`] — first.\n//! 2. `a`, `z` — again.\nmod a;\nmod b;"),
            ("a.rs", &["a"], ""),
            ("b.rs", &["b"], ""),
        ];
        let mut v = krate(files).layer_violations();
        v.sort();
        assert_eq!(
            v,
            [
                "lib.rs: # Layers lists `z`, which is no module here",
                "lib.rs: `a` is listed twice in # Layers",
                "lib.rs: module `b` is missing from # Layers",
            ]
        );
    }

    #[test]
    fn an_item_s_names_may_go_on_over_lines_until_its_dash() {
        let doc = "# Layers\n\n1. `a`, `b`,\n   `c` — first, using `x`.\n   `y` in the text.\n\
                   2. `d` — second\n   `z` in the text.\n\n3. `e`\n\nA paragraph with `w`.";
        assert_eq!(
            super::parse_layers(doc),
            Some(vec![
                vec!["a".to_string(), "b".into(), "c".into()],
                vec!["d".into()],
                vec!["e".into()],
            ])
        );
    }
}
