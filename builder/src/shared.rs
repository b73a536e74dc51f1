//! What a kernel module asks of the pipeline — shared memory, libdevice, state-space markers
//! ([`crate::space`]) — and the rewrite that puts shared statics into the PTX `.shared` state
//! space.
//!
//! rustc gives every `static` address space 0 (generic), which the NVPTX backend emits as
//! `.global`. The rewrite works on the `llvm-dis` text of the LTO'd module:
//!
//! * `@S = … global T undef, section ".ferrocuda.shared", align A` becomes
//!   `@S = internal addrspace(3) global T undef, align A`;
//! * `@__ferrocuda_dynamic_shared = external … global T` becomes
//!   `@… = external addrspace(3) global [0 x i8], align 16`;
//! * every operand `ptr @S` becomes `ptr addrspacecast (ptr addrspace(3) @S to ptr)`, so the
//!   code keeps its generic pointers, and `opt`/`llc`'s InferAddressSpaces turns the accesses
//!   into `ld.shared`/`st.shared`;
//! * use-list-order directives that name a rewritten global are dropped (its uses changed),
//!   and so is the module summary (`^N = …`; nothing downstream reads it).
//!
//! Robustness: globals are parsed only from the one-line form the LLVM printer gives them
//! ([`crate::ir`]), uses are matched as whole typed operands outside strings, and every
//! rewritten module is parsed and verified by the next LLVM tool: a use the rewrite missed
//! would have the wrong type and fail that verification instead of compiling silently.

use crate::ir::{self, GlobalVar};
use crate::space;
use ferrocuda_abi::{DYNAMIC_SHARED_SYMBOL, SHARED_SECTION};

/// Prefix of the libdevice functions (`__nv_expf`, `__nv_sin`, …).
pub(crate) const LIBDEVICE_PREFIX: &str = "__nv_";

/// The PTX alignment of dynamic shared memory.
pub(crate) const DYNAMIC_SHARED_ALIGN: u32 = 16;

/// What a module needs from the pipeline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Needs {
    /// Printed names of the statics to move to shared memory.
    pub shared: Vec<String>,
    /// The module declares dynamic shared memory.
    pub dynamic_shared: bool,
    /// libdevice functions the module calls (sorted).
    pub libdevice: Vec<String>,
    /// The module calls a state-space marker (see [`crate::space`]).
    pub markers: bool,
}

impl Needs {
    /// Whether shared memory must be rewritten.
    pub fn shared_rewrite(&self) -> bool {
        !self.shared.is_empty() || self.dynamic_shared
    }

    /// Whether the module text must be rewritten (shared memory or markers).
    pub fn rewrite(&self) -> bool {
        self.shared_rewrite() || self.markers
    }
}

/// Reads what `module` needs; fails with every misuse of shared memory found, each naming
/// the static and the fix.
pub(crate) fn needs(module: &str) -> Result<Needs, String> {
    let mut needs = Needs::default();
    let mut errors = Vec::new();
    for g in ir::globals(module) {
        let what = ir::display_symbol(&g.symbol());
        if g.symbol() == DYNAMIC_SHARED_SYMBOL {
            if g.init.is_some() {
                errors.push(format!(
                    "static {what} defines dynamic shared memory: declare it in an `extern` \
                     block instead (`static mut …: [u8; 0];` with \
                     `#[link_name = ferrocuda_abi::dynamic_shared_symbol!()]`); its size is \
                     given at launch time"
                ));
            } else {
                needs.dynamic_shared = true;
            }
            continue;
        }
        match g.section.as_deref() {
            Some(SHARED_SECTION) => match shared_error(&g) {
                Some(e) => errors.push(format!("static {what} {e}")),
                None => needs.shared.push(g.name.to_string()),
            },
            Some(s) if s.to_ascii_lowercase().contains("shared") => errors.push(format!(
                "static {what} is in link section `{s}`, which the NVPTX backend ignores: it \
                 would be one `.global` array for the whole grid, not per-block shared \
                 memory. Use `#[link_section = ferrocuda_abi::shared_section!()]` \
                 (\"{SHARED_SECTION}\") with a `MaybeUninit::uninit()` value."
            )),
            _ => {}
        }
    }
    let declared = ir::declared_functions(module);
    needs.markers = declared.iter().any(|f| space::is_marker(f));
    needs.libdevice = declared
        .into_iter()
        .filter(|f| f.starts_with(LIBDEVICE_PREFIX))
        .collect();
    needs.libdevice.sort();
    needs.libdevice.dedup();
    if errors.is_empty() {
        Ok(needs)
    } else {
        Err(errors.join("\n\n"))
    }
}

/// Why a static of the shared section cannot become shared memory, if it cannot.
fn shared_error(g: &GlobalVar<'_>) -> Option<String> {
    if g.keywords.iter().any(|k| k.starts_with("addrspace(")) {
        return Some("already has an address space".into());
    }
    if g.keywords.iter().any(|k| k.starts_with("thread_local")) {
        return Some("is thread-local; shared memory is per block".into());
    }
    let Some(init) = g.init else {
        return Some("is declared but not defined in the kernel crate".into());
    };
    if g.constant {
        return Some(
            "is immutable (or never written, so the compiler made it a constant), but shared \
             memory is written by the block: make it a `static mut` (or give it a type with \
             interior mutability) and write it before reading it"
                .into(),
        );
    }
    if !ir::is_uninit(init) {
        return Some(format!(
            "has an initial value (`{}`), but shared memory cannot be initialised: it starts \
             with indeterminate contents in every block. Declare it as \
             `MaybeUninit::uninit()` and write it in the kernel, before a barrier.",
            shorten(init)
        ));
    }
    None
}

fn shorten(s: &str) -> String {
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The module with its shared statics and dynamic shared memory in address space 3.
pub(crate) fn rewrite(module: &str, needs: &Needs) -> Result<String, String> {
    let mut names: Vec<&str> = needs.shared.iter().map(String::as_str).collect();
    if needs.dynamic_shared {
        names.push(DYNAMIC_SHARED_SYMBOL);
    }
    let mut out = String::with_capacity(module.len() + 64 * names.len());
    let mut errors = Vec::new();
    for line in module.lines() {
        if line.starts_with('^') {
            continue;
        }
        if line.trim_start().starts_with("uselistorder") && ir::mentions(line, &names) {
            continue;
        }
        // llvm-dis writes the use-list order of inline asm values in a form its parser
        // refuses ("invalid type for inline asm constraint string"); the order is cosmetic.
        if line.trim_start().starts_with("uselistorder ptr asm ") {
            continue;
        }
        if line.starts_with('@') {
            if let Some(g) = ir::parse_global(line).filter(|g| names.contains(&g.name)) {
                out.push_str(&shared_definition(&g));
                out.push('\n');
                continue;
            }
        }
        let uses = ir::ptr_uses(line, &names);
        if uses.is_empty() {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if line.starts_with('@') && !line.starts_with("@llvm.") {
            let holder = ir::parse_global(line).map_or(line.to_string(), |g| g.symbol());
            for (_, name) in &uses {
                errors.push(format!(
                    "static {} holds the address of shared memory {}: a shared address exists \
                     only while a block runs; take it inside the kernel",
                    ir::display_symbol(&holder),
                    ir::display_symbol(&ir::unquote(name))
                ));
            }
        }
        let mut at = 0;
        for (pos, name) in uses {
            out.push_str(&line[at..pos]);
            out.push_str(&format!("addrspacecast (ptr addrspace(3) @{name} to ptr)"));
            at = pos + 1 + name.len();
        }
        out.push_str(&line[at..]);
        out.push('\n');
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors.join("\n\n"))
    }
}

/// The address-space-3 definition (or, for dynamic shared memory, declaration) of `g`.
fn shared_definition(g: &GlobalVar<'_>) -> String {
    let mut def = if g.init.is_none() {
        format!(
            "@{} = external addrspace(3) global [0 x i8], align {DYNAMIC_SHARED_ALIGN}",
            g.name
        )
    } else {
        let mut d = format!("@{} = internal addrspace(3) global {} undef", g.name, g.ty);
        if let Some(a) = g.align {
            d.push_str(&format!(", align {a}"));
        }
        d
    };
    for a in &g.attachments {
        def.push_str(", ");
        def.push_str(a);
    }
    def
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = r#"; ModuleID = 'k.bc'
target triple = "nvptx64-nvidia-cuda"

@__ferrocuda_dynamic_shared = external local_unnamed_addr global [0 x i8]
@_RNvCs1_2pk4TILE = internal unnamed_addr global [1024 x i8] undef, section ".ferrocuda.shared", align 4, !guid !1
@_RNvCs1_2pk5TILE2 = internal unnamed_addr global [16 x i8] undef, section ".ferrocuda.shared", align 16
@_RNvCs1_2pk6OTHER = internal global [4 x i8] zeroinitializer, align 4
@str = private constant [25 x i8] c"ptr @_RNvCs1_2pk4TILE, x\00"

define ptx_kernel void @k(i64 %t) {
  %a = getelementptr inbounds nuw [4 x i8], ptr @_RNvCs1_2pk4TILE, i64 %t
  %b = getelementptr inbounds nuw [4 x i8], ptr @_RNvCs1_2pk5TILE2, i64 %t
  %c = getelementptr inbounds nuw [4 x i8], ptr @__ferrocuda_dynamic_shared, i64 %t
  store float 1.0, ptr getelementptr inbounds nuw (i8, ptr @_RNvCs1_2pk4TILE, i64 8), align 4
  store float 2.0, ptr @_RNvCs1_2pk6OTHER, align 4
  ret void
}

declare noundef float @__nv_expf(float noundef) unnamed_addr #0
declare noundef float @__nv_sinf(float noundef) unnamed_addr #0
declare noundef float @cbrtf(float noundef) unnamed_addr #0

uselistorder ptr @_RNvCs1_2pk4TILE, { 1, 0 }
uselistorder ptr @_RNvCs1_2pk6OTHER, { 1, 0 }
uselistorder ptr asm sideeffect "exit;", "", { 1, 0 }

^0 = module: (path: "k.bc", hash: (0, 0, 0, 0, 0))
"#;

    #[test]
    fn reads_what_the_module_needs() {
        let n = needs(MODULE).unwrap();
        assert_eq!(n.shared, ["_RNvCs1_2pk4TILE", "_RNvCs1_2pk5TILE2"]);
        assert!(n.dynamic_shared);
        assert!(n.rewrite());
        assert_eq!(n.libdevice, ["__nv_expf", "__nv_sinf"]);
        assert!(!n.markers);
        let marked = needs("declare ptr @__ferrocuda_global(ptr)\n").unwrap();
        assert!(marked.markers && marked.rewrite() && !marked.shared_rewrite());
        let plain = needs("define void @f() {\n  ret void\n}\n").unwrap();
        assert_eq!(plain, Needs::default());
        assert!(!plain.rewrite());
    }

    #[test]
    fn rewrites_definitions_and_uses() {
        let out = rewrite(MODULE, &needs(MODULE).unwrap()).unwrap();
        assert!(out.contains(
            "@_RNvCs1_2pk4TILE = internal addrspace(3) global [1024 x i8] undef, align 4, !guid !1\n"
        ));
        assert!(out.contains(
            "@_RNvCs1_2pk5TILE2 = internal addrspace(3) global [16 x i8] undef, align 16\n"
        ));
        assert!(out.contains(
            "@__ferrocuda_dynamic_shared = external addrspace(3) global [0 x i8], align 16\n"
        ));
        assert!(out.contains(
            "[4 x i8], ptr addrspacecast (ptr addrspace(3) @_RNvCs1_2pk4TILE to ptr), i64 %t"
        ));
        assert!(out.contains(
            "(i8, ptr addrspacecast (ptr addrspace(3) @_RNvCs1_2pk4TILE to ptr), i64 8)"
        ));
        assert!(
            out.contains("ptr addrspacecast (ptr addrspace(3) @__ferrocuda_dynamic_shared to ptr)")
        );
        // Untouched: other globals, strings, their use-list orders; the shared one's is gone.
        assert!(out.contains("store float 2.0, ptr @_RNvCs1_2pk6OTHER, align 4"));
        assert!(out.contains(r#"c"ptr @_RNvCs1_2pk4TILE, x\00""#));
        assert!(out.contains("uselistorder ptr @_RNvCs1_2pk6OTHER"));
        assert!(!out.contains("uselistorder ptr @_RNvCs1_2pk4TILE"));
        assert!(!out.contains("uselistorder ptr asm"));
        assert!(!out.contains("^0 = module"));
        assert!(!out.contains(".ferrocuda.shared"));
    }

    #[test]
    fn refuses_misuse_with_the_static_named() {
        let lookalike =
            r#"@_RNvCs1_2pk4TILE = internal global [4 x i8] undef, section ".nv.shared", align 4"#;
        let e = needs(lookalike).unwrap_err();
        assert!(
            e.contains("`pk::TILE`")
                && e.contains("`.nv.shared`")
                && e.contains("shared_section!()"),
            "{e}"
        );
        let e = needs(&lookalike.replace(".nv.shared", ".shared")).unwrap_err();
        assert!(e.contains("`.shared`"), "{e}");

        let zeroed = r#"@_RNvCs1_2pk4TILE = internal global [4 x i8] zeroinitializer, section ".ferrocuda.shared", align 4"#;
        let e = needs(zeroed).unwrap_err();
        assert!(
            e.contains("`pk::TILE`")
                && e.contains("cannot be initialised")
                && e.contains("MaybeUninit"),
            "{e}"
        );

        let constant = r#"@_RNvCs1_2pk4TILE = internal constant [4 x i8] undef, section ".ferrocuda.shared", align 4"#;
        assert!(needs(constant).unwrap_err().contains("static mut"));

        let defined = "@__ferrocuda_dynamic_shared = global [0 x i8] zeroinitializer, align 4";
        assert!(needs(defined).unwrap_err().contains("`extern` block"));

        // Two problems: both reported.
        let both = format!("{zeroed}\n{}", lookalike.replace("TILE", "TAIL"));
        let e = needs(&both).unwrap_err();
        assert!(e.contains("pk::TILE") && e.contains("pk::TAIL"), "{e}");
    }

    #[test]
    fn refuses_a_static_holding_a_shared_address() {
        let m = r#"@_RNvCs1_2pk4TILE = internal global [4 x i8] undef, section ".ferrocuda.shared", align 4
@_RNvCs1_2pk3PTR = internal global ptr @_RNvCs1_2pk4TILE, align 8
@llvm.compiler.used = appending global [1 x ptr] [ptr @_RNvCs1_2pk4TILE], section "llvm.metadata"
"#;
        let e = rewrite(m, &needs(m).unwrap()).unwrap_err();
        assert!(e.contains("`pk::PTR`") && e.contains("`pk::TILE`"), "{e}");
        assert!(!e.contains("llvm.compiler.used"), "{e}");
    }
}
