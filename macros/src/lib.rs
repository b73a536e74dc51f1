//! The `#[kernel]` attribute of ferrocuda.
//!
//! Use it through `ferrocuda_device::kernel`; see that crate for the full picture.
//!
//! # Layers
//!
//! Each module uses only the modules listed above it (checked by the workspace's
//! `tests/layers`); this file parses the attribute and generates the kernel with them:
//!
//! 1. `extras` — the `zero(…)`, `scratch(…)` and `require(…)` options and their manifest
//!    constant.
//! 2. `instances` — generic kernels, one entry per listed element type.
//! 3. `launch` — the launch options and the launch record they become.

mod extras;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{parse_macro_input, FnArg, Ident, ItemFn, LitStr, Pat, ReturnType, Token, Type};

mod instances;
mod launch;

/// A function that exists on the GPU only (cuda_std's `#[gpu_only]`): compiled as written on
/// `nvptx64`; on any other target its signature stays (so that a kernel crate, and the device
/// crate's own modules, type-check on the host — `cargo check`, clippy, rust-analyzer —
/// without `cfg` gates) and its body becomes a panic naming it. It is never reached on the
/// host: kernels run on the GPU, and the host build of a kernel crate is for checking only.
///
/// Takes no arguments; on a free function or a method.
#[proc_macro_attribute]
pub fn gpu_only(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        let e = syn::Error::new(Span::call_site(), "`#[gpu_only]` takes no arguments");
        return e.to_compile_error().into();
    }
    let func = parse_macro_input!(item as ItemFn);
    let ItemFn {
        attrs, vis, sig, ..
    } = &func;
    let name = sig.ident.to_string();
    let message = format!("`{name}` runs only on the GPU (nvptx64): this is its host stub");
    quote! {
        #[cfg(target_arch = "nvptx64")]
        #func
        #[cfg(not(target_arch = "nvptx64"))]
        #(#attrs)*
        #[allow(unused_variables, unused_mut, dead_code, clippy::needless_pass_by_value)]
        #vis #sig {
            ::core::panic!(#message)
        }
    }
    .into()
}

/// Turns a Rust function into a PTX kernel entry point and records its signature in the
/// kernel manifest.
///
/// ```ignore
/// #[kernel]                                   // family = the function's name
/// pub unsafe fn initialize_array(x: SliceMut<i32>) { /* … */ }
///
/// #[kernel(family = "add", same_shape(a, b, out))]
/// pub unsafe fn add_f32(a: Slice<f32>, b: Slice<f32>, out: SliceMut<f32>) { /* … */ }
/// ```
///
/// Options:
/// * `family = "name"` — launchers dispatch among the kernels of one family by element type
///   and rank (default: the function's own name);
/// * `same_shape(p, q, …)` — the host refuses a launch unless these array parameters have
///   equal shapes (may be given several times);
/// * `items_per_thread = k` (1..=65535) — the kernel handles about `k` elements of its
///   largest array per thread and pass (e.g. one 16-byte vector of four `f32`): the automatic
///   grid then has one thread per `k` elements, so each thread does one pass. Without it the
///   automatic grid is one resident wave of blocks and the kernel's grid-stride loop covers
///   the rest — better for kernels with per-thread setup. Either way the kernel must be
///   correct for any grid (the caller may pass one).
/// * `zero(p, …)` — the launcher fills these outputs (written arrays: `SliceMut`, `ViewMut`,
///   `AtomicSlice`) with zeros on the launch stream right before the launch
///   (`cuMemsetD8Async` of the array's extent, which must be contiguous): accumulators,
///   histograms, atomics-based reductions;
/// * `scratch(ws = len, …)` — the length of each `Scratch<T>` parameter: a sum of an integer,
///   `blocks` or `k * blocks` (blocks of the launch's grid) and `x.len()`, `k * x.len()` or
///   `k * x.len().div_ceil(d)` (an array argument's element count). The launcher provides
///   every workspace zero-filled on the launch stream right before each launch (the one it
///   keeps for that stream; under graph capture an allocation from a stream-ordered pool,
///   freed after the launch); callers never pass scratch parameters;
/// * `persist(ws, …)` — these workspaces (each declared by `scratch(…)`, or a `GridBarrier`
///   parameter, whose counter every barrier leaves as it found it) keep their contents
///   between the kernel's launches on a stream: the launcher zero-fills one only when it is new
///   to the kernel (its first launch on the stream, a workspace grown or freshly allocated —
///   every captured launch —, another kernel's launch on the stream in between) and at least
///   every `PERSIST_REFILL` (2^20) launches; otherwise the kernel finds what its previous
///   launch on the stream left there. For kernels that tag their workspace's words with a
///   launch count (the scans' tile statuses) and so need no fill before every launch;
/// * `require(cond)` / `require(cond, "message")` — a condition the launcher checks before the
///   launch, refusing the arguments with an error that names the first parameter `cond`
///   reads: `a <op> b` with `<op>` one of `== != < <= > >=` over integer literals, scalar
///   parameters, `x.len()`, `x.shape[k]`, `x.ptr()` (a condition on the address of an empty
///   array holds); `finite(scalar)`; or `divides(a, b)` (`b` an integer multiple of `a`:
///   `b % a == 0`, and `b == 0` when `a == 0`). E.g.
///   `require(a.shape[1] == b.shape[0], "inner dimensions must agree")`, `require(lo < hi)`,
///   `require(divides(k.shape[1], q.shape[1]))`.
///
/// Launch shape (recorded in the manifest's `launch` field; see `ferrocuda_abi::launch`):
/// * `max_threads = n` (1..=1024) — the kernel is compiled for blocks of at most `n` threads
///   (PTX `.maxntid n, 1, 1`: ptxas may then give each thread more registers); the host
///   refuses larger blocks and the automatic block respects it;
/// * `block = (x, y, z)` (or `block = n`, `(x, y)`) — the kernel needs exactly this block
///   (PTX `.reqntid`): the host launches with it and refuses any other block a caller
///   passes. Excludes `max_threads`;
/// * `min_blocks = n` (1..=32, with `max_threads` or `block`) — ptxas keeps each thread's
///   registers low enough for `n` such blocks on one SM (PTX `.minnctapersm n`): an occupancy
///   target that replaces its own heuristic, which can otherwise pick a tighter one and spill;
/// * `dynamic_shared = T` — the kernel's dynamic shared memory holds `T`s: the host refuses a
///   dynamic shared size that is not a multiple of `size_of::<T>()`;
/// * `shared_bytes = n` (a constant expression, at most 227 KiB) — the dynamic shared memory
///   the kernel needs: a launch that names none gets `n` bytes (raising the kernel's limit
///   above 48 KiB as needed), one that names fewer is refused;
/// * `grid = "2d"` / `"3d"` — the automatic grid covers the largest array argument in 2 (3)
///   dimensions, one thread per element: x along its last axis, y along the one before (in
///   `"2d"`: all the others), z along the rest; blocks are 32 threads wide along x. The grid is
///   capped at the device's limits, so the kernel still strides (`"1d"`, the default: one
///   dimension, as described above);
/// * `grid = "rows"` — for kernels that give each row of their largest array (its last axis;
///   the other axes count the rows) one warp or one block and walk the rows grid-stride
///   (softmax, layer norms, row reductions): the automatic 1-D grid has a warp per row when a
///   row holds at most `32 × items_per_thread` elements, else a block per row (a block per
///   row without `items_per_thread`), so that every row has its worker however few elements
///   the array holds;
/// * `cooperative` — the kernel is launched cooperatively (`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`):
///   every block of its grid is resident at once, so blocks may wait for one another. Needed
///   by a `GridBarrier` parameter (`ferrocuda_device::grid`: a grid-wide barrier; the launcher
///   provides it, callers never pass it — a kernel with one and without `cooperative` is a
///   compile-time error). The launcher refuses a grid of more blocks than one resident wave
///   (`cuOccupancyMaxActiveBlocksPerMultiprocessor` for the block and dynamic shared memory,
///   times the SMs), and the automatic grid is exactly one wave. Excludes `cluster` and
///   `grid = "2d"` / `"3d"` / `"rows"`;
/// * `cluster = (x, y, z)` (or `cluster = n`, `(x, y)`) — the kernel is launched in
///   thread-block clusters of this shape (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`), whose
///   blocks share their shared memory (`ferrocuda_device::cluster`). Needs `arch = "sm_90"` or
///   newer on the same kernel. At most 8 blocks (portable); `non_portable_cluster` allows up
///   to 16 where the GPU runs them. The launcher rounds the automatic grid up to whole
///   clusters and refuses a grid that is not a multiple of the cluster, or a cluster the
///   kernel cannot run with (`cuOccupancyMaxActiveClusters`).
///
/// Generic kernels:
/// * `instances(t, …)` — on a function with one type parameter (`fn scale<T: …>(alpha: T,
///   x: Slice<T>, y: SliceMut<T>)`): one kernel per listed element type (`i8` … `u64`,
///   `f16`, `bf16`, `f32`, `f64`), named `<function>_<type>` (`scale_f32`), all in the family
///   of the function's name (or `family = "…"`). The other options apply to every instance,
///   with the type parameter replaced by its type: `items_per_thread = 16 / size_of::<T>()`
///   (an expression is evaluated per instance at compile time), `dynamic_shared = T`.
///   A type that is not an element type, or one listed twice, is an error at its span.
///
/// Rejected at compile time: generic parameters (without `instances`), `self`, return values,
/// `async`/`const` functions, variadics, pattern parameters, references, and any parameter
/// type that is not a `KernelParam` (non-`Copy` and owning types included; the error names
/// the kernel, the parameter and the allowed types).
///
/// On `nvptx64` the function becomes `#[no_mangle] extern "ptx-kernel"`, which needs
/// `#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]` in the kernel crate; it passes
/// every array parameter's data pointer through `ferrocuda_abi::space::global` before calling
/// the body, so that accesses through it compile to `ld.global`/`st.global`. On other
/// targets only the parameter types are checked and no code is emitted.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let expand_tokens = |attr: TokenStream2, func: ItemFn| expand(syn::parse2(attr)?, func);
    if let Some(generic) =
        instances::expand(attr.clone().into(), item.clone().into(), expand_tokens)
    {
        return generic.unwrap_or_else(|e| e.to_compile_error()).into();
    }
    let opts = parse_macro_input!(attr as Options);
    let func = parse_macro_input!(item as ItemFn);
    match expand(opts, func) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

#[derive(Default)]
struct Options {
    family: Option<LitStr>,
    same_shape: Vec<Vec<Ident>>,
    items_per_thread: Option<u16>,
    /// `items_per_thread = <const expression>` (generic kernels: `16 / size_of::<T>()`).
    items_per_thread_expr: Option<syn::Expr>,
    extras: extras::ExtrasOpts,
    launch: launch::LaunchOptions,
    /// `arch = "sm_90a"`: the architecture the kernel is built for (see
    /// `ferrocuda_abi::arch`).
    arch: Option<LitStr>,
}

impl Parse for Options {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut opts = Options::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            if key == "family" {
                input.parse::<Token![=]>()?;
                let lit: LitStr = input.parse()?;
                if !is_identifier(&lit.value()) {
                    return Err(syn::Error::new(lit.span(), "family must be an identifier"));
                }
                opts.family = Some(lit);
            } else if key == "same_shape" {
                let content;
                syn::parenthesized!(content in input);
                let names: Punctuated<Ident, Token![,]> =
                    content.parse_terminated(Ident::parse, Token![,])?;
                if names.len() < 2 {
                    return Err(syn::Error::new(
                        key.span(),
                        "same_shape needs at least two parameters",
                    ));
                }
                opts.same_shape.push(names.into_iter().collect());
            } else if key == "items_per_thread" {
                input.parse::<Token![=]>()?;
                let fork = input.fork();
                let literal = fork.parse::<syn::LitInt>().is_ok()
                    && (fork.is_empty() || fork.peek(Token![,]));
                if !literal {
                    opts.items_per_thread_expr = Some(input.parse()?);
                    if !input.is_empty() {
                        input.parse::<Token![,]>()?;
                    }
                    continue;
                }
                let lit: syn::LitInt = input.parse()?;
                match lit.base10_parse::<u16>() {
                    Ok(k) if k >= 1 => opts.items_per_thread = Some(k),
                    _ => {
                        return Err(syn::Error::new(
                            lit.span(),
                            "items_per_thread must be an integer in 1..=65535",
                        ))
                    }
                }
            } else if key == "arch" {
                input.parse::<Token![=]>()?;
                let lit: LitStr = input.parse()?;
                check_arch(&lit)?;
                opts.arch = Some(lit);
            } else if launch::OPTIONS.contains(&key.to_string().as_str()) {
                opts.launch.parse(&key, input)?;
            } else if !opts.extras.parse_option(&key, input)? {
                return Err(syn::Error::new(
                    key.span(),
                    "unknown #[kernel] option: expected `family = \"…\"`, `same_shape(…)`, \
                     `items_per_thread = k`, `max_threads = n`, `block = (x, y, z)`, \
                     `min_blocks = n`, `dynamic_shared = T`, `shared_bytes = n`, \
                     `grid = \"2d\"` / `\"rows\"`, \
                     `cooperative`, `cluster = (x, y, z)`, `non_portable_cluster`, \
                     `arch = \"sm_90a\"`, `instances(…)`, `zero(…)`, `scratch(…)`, \
                     `persist(…)` or `require(…)`",
                ));
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(opts)
    }
}

/// Checks `arch = "…"`: an architecture name newer than the base every kernel may assume.
fn check_arch(lit: &LitStr) -> syn::Result<()> {
    use ferrocuda_abi::arch::{Arch, Variant};
    let Some(arch) = Arch::parse(&lit.value()) else {
        return Err(syn::Error::new(
            lit.span(),
            "arch must name a GPU architecture as PTX's `.target` does: `sm_90`, `sm_90a`, \
             `sm_100a`, …",
        ));
    };
    if arch.variant == Variant::Portable && arch.number() <= Arch::SM_80.number() {
        return Err(syn::Error::new(
            lit.span(),
            "every kernel is built for sm_80 or the crate's arch already: give `arch` only to \
             kernels that need a newer GPU (`sm_90`, `sm_90a`, …)",
        ));
    }
    Ok(())
}

/// Whether `ty` names `GridBarrier` (by its last path segment: `GridBarrier`,
/// `grid::GridBarrier`, `ferrocuda_device::grid::GridBarrier`). A type of that name that is not
/// the device crate's is refused at compile time (`GridBarrierParam`), and the device crate's
/// under another name (an alias) is a scratch parameter without a declared length, refused
/// too: the macro can only provide what it recognizes.
fn is_grid_barrier(ty: &Type) -> bool {
    match ty {
        Type::Path(p) if p.qself.is_none() => p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "GridBarrier" && s.arguments.is_empty()),
        Type::Group(g) => is_grid_barrier(&g.elem),
        Type::Paren(p) => is_grid_barrier(&p.elem),
        _ => false,
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn expand(opts: Options, func: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &func.sig;
    let err = |span: Span, msg: &str| Err(syn::Error::new(span, msg));
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return err(
            sig.generics.span(),
            "a kernel cannot be generic without instances: list its element types with \
             #[kernel(instances(f32, f64))], or write one #[kernel] per type",
        );
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        return err(
            ty.span(),
            "a kernel cannot return a value: write results to a SliceMut/ViewMut parameter",
        );
    }
    if let Some(a) = &sig.asyncness {
        return err(a.span(), "a kernel cannot be async");
    }
    if let Some(c) = &sig.constness {
        return err(c.span(), "a kernel cannot be const");
    }
    if let Some(v) = &sig.variadic {
        return err(v.span(), "a kernel cannot be variadic");
    }
    if let Some(abi) = &sig.abi {
        return err(abi.span(), "do not give a kernel an ABI: #[kernel] sets it");
    }
    let name = &sig.ident;
    let name_str = name.to_string();
    if name_str.len() > 200 || name_str.starts_with("__") {
        return err(
            name.span(),
            "kernel names must not start with `__` and must be < 200 bytes",
        );
    }

    let mut arg_names: Vec<Ident> = Vec::new();
    let mut arg_pats: Vec<Pat> = Vec::new();
    let mut arg_types: Vec<Type> = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(r) => return err(r.span(), "a kernel cannot take `self`"),
            FnArg::Typed(pt) => {
                let ident = match &*pt.pat {
                    Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                        pi.ident.clone()
                    }
                    other => return err(other.span(), "kernel parameters must be plain names"),
                };
                if let Type::Reference(r) = &*pt.ty {
                    return err(
                        r.span(),
                        "kernel parameters are passed by value: use Slice<T>/SliceMut<T> or \
                         View<T, N>/ViewMut<T, N> instead of a reference",
                    );
                }
                if let Type::Ptr(p) = &*pt.ty {
                    return err(
                        p.span(),
                        "raw pointers carry no length: use Slice<T>/SliceMut<T> or View/ViewMut",
                    );
                }
                arg_names.push(ident);
                // The body keeps the written binding (`mut x` stays mutable there).
                arg_pats.push((*pt.pat).clone());
                arg_types.push((*pt.ty).clone());
            }
        }
    }
    if arg_names.len() > 255 {
        return err(sig.inputs.span(), "too many kernel parameters");
    }

    let mut groups: Vec<Vec<u8>> = Vec::new();
    for group in &opts.same_shape {
        let mut g = Vec::new();
        for id in group {
            match arg_names.iter().position(|a| a == id) {
                Some(i) => {
                    if g.contains(&(i as u8)) {
                        return err(id.span(), "parameter named twice in same_shape");
                    }
                    g.push(i as u8)
                }
                None => return err(id.span(), "same_shape names no parameter of this kernel"),
            }
        }
        groups.push(g);
    }
    let family = opts
        .family
        .as_ref()
        .map(|l| l.value())
        .unwrap_or_else(|| name_str.clone());

    opts.launch.check_attributes(opts.arch.as_ref())?;
    // `GridBarrier` parameters: the launcher provides each (a scratch workspace of the
    // barrier's length), and only a cooperative launch keeps every block resident, without
    // which a grid-wide barrier may never complete.
    let grid_barriers: Vec<u8> = arg_types
        .iter()
        .enumerate()
        .filter(|(_, t)| is_grid_barrier(t))
        .map(|(i, _)| i as u8)
        .collect();
    if let Some(&i) = grid_barriers.first() {
        if !opts.launch.cooperative() {
            return err(
                arg_types[i as usize].span(),
                "a `GridBarrier` parameter waits for every block of the grid, which only a \
                 cooperative launch keeps resident at once: declare the kernel \
                 `#[kernel(cooperative)]` (its launcher then refuses grids larger than one \
                 resident wave)",
            );
        }
    }
    let extras = extras::resolve(&opts.extras, &arg_names, &arg_types, &grid_barriers)?;
    let ipt = match (&opts.items_per_thread_expr, opts.items_per_thread) {
        (Some(e), _) => quote! { ::ferrocuda_device::__private::items_per_thread(#e) },
        (None, k) => {
            let k = k.unwrap_or(0);
            quote! { #k }
        }
    };
    let sm90 = opts.arch.as_ref().is_some_and(|a| {
        ferrocuda_abi::arch::Arch::parse(&a.value()).is_some_and(|a| a.number() >= 90)
    });
    let kernel = expand_final(
        &func, &arg_names, &arg_pats, &arg_types, &groups, &family, ipt, &extras, sm90,
    );
    let launch_record = opts.launch.record(name)?;
    Ok(in_part(
        opts.arch.as_ref(),
        name,
        quote! { #kernel #launch_record },
    ))
}

/// `items` (a kernel's expansion), with its device items compiled only in the build of the
/// kernel's part of the crate.
///
/// A kernel crate is built once for its base architecture and once more for each
/// architecture a kernel declares (`arch = "sm_90a"`), by `ferrocuda-builder`, which sets
/// `--cfg ferrocuda_arch="<arch>"` in those further builds. A kernel without `arch` is
/// compiled in the base build only (no `ferrocuda_arch`), a kernel with one only in the build
/// of its arch. In the base build such a kernel leaves a record of the arch it needs
/// (`__ferrocuda_arch__<kernel>`, its bytes the arch's name), from which the builder learns
/// which further builds to run.
///
/// Every device item of the expansion carries `#[cfg(target_arch = "nvptx64")]` (host items
/// the opposite), so it is enough to put the part's condition on a block around the whole
/// expansion that only the device build configures: the host build never evaluates
/// `ferrocuda_arch`, which the builder declares (`--check-cfg`) for the device builds only.
fn in_part(arch: Option<&LitStr>, name: &Ident, items: TokenStream2) -> TokenStream2 {
    let (host, device): (Vec<_>, Vec<_>) = split_by_target(items);
    let record = format_ident!("__ferrocuda_arch__{}", name);
    let (cond, needs) = match arch {
        None => (quote! { not(ferrocuda_arch) }, TokenStream2::new()),
        Some(lit) => {
            let value = lit.value();
            let len = value.len();
            let bytes = syn::LitByteStr::new(value.as_bytes(), lit.span());
            (
                quote! { ferrocuda_arch = #lit },
                quote! {
                    #[cfg(not(ferrocuda_arch))]
                    #[doc(hidden)]
                    #[unsafe(no_mangle)]
                    #[allow(non_upper_case_globals)]
                    pub static #record: [u8; #len] = *#bytes;
                },
            )
        }
    };
    quote! {
        #(#host)*
        #[cfg(target_arch = "nvptx64")]
        #[allow(unexpected_cfgs)]
        const _: () = {
            #[cfg(#cond)]
            const _: () = {
                #(#device)*
            };
            #needs
        };
    }
}

/// The items of `items` that are compiled on the host (every item not marked
/// `#[cfg(target_arch = "nvptx64")]`), and those that are compiled on the device only.
fn split_by_target(items: TokenStream2) -> (Vec<syn::Item>, Vec<syn::Item>) {
    let file: syn::File = syn::parse2(items).expect("#[kernel] expands to items");
    let device_only = |attrs: &[syn::Attribute]| {
        attrs.iter().any(|a| {
            a.path().is_ident("cfg")
                && a.meta.require_list().is_ok_and(|l| {
                    l.tokens.to_string().replace(' ', "") == "target_arch=\"nvptx64\""
                })
        })
    };
    file.items.into_iter().partition(|item| {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            _ => &[],
        };
        !device_only(attrs)
    })
}

/// Emits the entry point, its body and its manifest record.
#[allow(clippy::too_many_arguments)]
fn expand_final(
    func: &ItemFn,
    arg_names: &[Ident],
    arg_pats: &[Pat],
    arg_types: &[Type],
    groups: &[Vec<u8>],
    family: &str,
    items_per_thread: TokenStream2,
    extras: &extras::Resolved,
    sm90: bool,
) -> TokenStream2 {
    let sig = &func.sig;
    let name = &sig.ident;
    let name_str = name.to_string();
    let vis = &func.vis;
    let attrs = &func.attrs;
    let body = &func.block;
    let unsafety = &sig.unsafety;
    let inner = format_ident!("__ferrocuda_kernel_body_{}", name);
    let len_const = format_ident!("__FERROCUDA_MANIFEST_LEN_{}", name_str.to_uppercase());
    let manifest_sym = format_ident!("__ferrocuda_manifest__{}", name);
    let arg_name_strs: Vec<String> = arg_names.iter().map(|i| i.to_string()).collect();
    let groups_a: Vec<TokenStream2> = groups.iter().map(|g| quote! { &[#(#g),*] }).collect();
    let groups_b = groups_a.clone();
    // Each parameter's description, as a constant: the one place where its type is checked
    // (as a `ParamCheck` under the parameter's name — a type named after it in a module named
    // after the kernel, which the error message prints as `kernel::n` — so a bad type is one
    // error, on host and device alike).
    let descs: Vec<Ident> = (0..arg_names.len())
        .map(|i| format_ident!("__FERROCUDA_PARAM_{}_{i}", name_str.to_uppercase()))
        .collect();
    let checks = arg_names
        .iter()
        .zip(arg_types)
        .zip(&descs)
        .map(|((param, ty), desc)| {
            let marker = quote_spanned! {ty.span()=> #name::#param };
            quote_spanned! {ty.span()=>
                #[doc(hidden)]
                #[allow(non_upper_case_globals)]
                const #desc: ::ferrocuda_device::__private::ParamDesc =
                    <#ty as ::ferrocuda_device::__private::ParamCheck<#marker>>::DESC;
            }
        });
    // Array parameters reach the body with their data pointer marked as global memory (see
    // `ferrocuda_abi::space`), so that their accesses compile to `ld.global`/`st.global`.
    // A tensor map's body value carries the parameter's own address (`mov` of the PTX
    // parameter symbol, which LLVM names `<kernel>_param_<index>`).
    let routed = arg_names.iter().zip(arg_types).zip(&descs).enumerate().map(
        |(i, ((name, ty), desc))| {
            let symbol = format!("{name_str}_param_{i}");
            quote! {
                    ::ferrocuda_device::__private::route::<#ty, { #desc.kind as u8 }>(#name, || {
                    ::ferrocuda_device::__param_address!(#symbol)
                })
            }
        },
    );
    let tiles = (0..arg_names.len()).map(|i| {
        let ty = &arg_types[i];
        let param = &arg_names[i];
        let marker = quote_spanned! {ty.span()=> #name::#param };
        let i = i as u8;
        quote! {
            ::ferrocuda_device::__private::TileDecl {
                param: #i,
                tile: <#ty as ::ferrocuda_device::__private::ParamCheck<#marker>>::TILE,
            }
        }
    });
    let tma_checks = descs.iter().map(|desc| {
        quote! {
            const _: () = assert!(
                ::ferrocuda_device::__private::tensor_map_needs_sm90(#desc.kind, #sm90),
                concat!("kernel `", #name_str, "`: a TensorMap parameter needs \
                         #[kernel(arch = \"sm_90\")] or newer (TMA does not exist before sm_90)")
            );
        }
    });
    let call = if unsafety.is_some() {
        quote! { unsafe { #inner(#(#routed),*) } }
    } else {
        quote! { #inner(#(#routed),*) }
    };
    let params_a = quote! {
        &[#( (#arg_name_strs, #descs) ),*]
    };
    let params_b = params_a.clone();
    let extras_value = &extras.value;
    let extras_checks = &extras.checks;
    let extras_always = &extras.always;
    let extras_const = format_ident!("__FERROCUDA_EXTRAS_{}", name_str.to_uppercase());
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        const _: () = { #(#extras_checks)* };
        #(#extras_always)*

        #[cfg(target_arch = "nvptx64")]
        #[doc(hidden)]
        #[allow(non_upper_case_globals)]
        const #extras_const: ::ferrocuda_device::__private::Extras<'static> =
            ::ferrocuda_device::__private::Extras {
                tiles: &[#(#tiles),*],
                ..#extras_value
            };

        #(#tma_checks)*

        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code)]
        mod #name {
            #(pub(super) enum #arg_names {})*
            // Each name twice in the crate, so that the message always prints the path
            // `kernel::parameter` (a name unique in the crate would print alone).
            mod __ferrocuda_names {
                #(enum #arg_names {})*
            }
        }
        #(#checks)*

        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        #(#attrs)*
        #unsafety fn #inner(#(#arg_pats: #arg_types),*) #body

        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        #[doc = concat!("PTX entry point of the `", #name_str, "` kernel.")]
        #vis unsafe extern "ptx-kernel" fn #name(#(#arg_names: #arg_types),*) {
            #call
        }

        #[cfg(target_arch = "nvptx64")]
        #[doc(hidden)]
        #[allow(non_upper_case_globals)]
        const #len_const: usize = ::ferrocuda_device::__private::encoded_len_ext(
            #name_str, #family, #params_a, &[#(#groups_a),*], #items_per_thread,
            &#extras_const);

        #[cfg(target_arch = "nvptx64")]
        #[doc(hidden)]
        #[unsafe(no_mangle)]
        #[allow(non_upper_case_globals)]
        pub static #manifest_sym: [u8; #len_const] =
            ::ferrocuda_device::__private::encode_ext::<#len_const>(
                #name_str, #family, #params_b, &[#(#groups_b),*], #items_per_thread,
                &#extras_const);
    }
}
