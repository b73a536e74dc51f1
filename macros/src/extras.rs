//! The `zero(…)`, `scratch(…)`, `persist(…)` and `require(…)` options of `#[kernel]`:
//! parsing, resolution of parameter names to indices, compile-time kind checks, and the
//! `Extras` constant that goes into the manifest record (see `ferrocuda_abi::extras`).

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{BinOp, Expr, ExprLit, Ident, Lit, LitStr, Token, Type, UnOp};

/// The extras options as written.
#[derive(Default)]
pub struct ExtrasOpts {
    zero: Vec<Ident>,
    scratch: Vec<(Ident, Expr)>,
    persist: Vec<Ident>,
    require: Vec<(Expr, Option<LitStr>)>,
}

impl ExtrasOpts {
    /// Parses the option `key(…)` if `key` is one of ours; `Ok(false)` otherwise.
    pub fn parse_option(&mut self, key: &Ident, input: ParseStream<'_>) -> syn::Result<bool> {
        if key == "zero" {
            self.zero
                .extend(names(key, input, "zero(…) names no parameter")?);
        } else if key == "persist" {
            self.persist
                .extend(names(key, input, "persist(…) names no workspace")?);
        } else if key == "scratch" {
            let content;
            syn::parenthesized!(content in input);
            let items: Punctuated<(Ident, Expr), Token![,]> =
                content.parse_terminated(parse_assignment, Token![,])?;
            if items.is_empty() {
                return Err(syn::Error::new(key.span(), "scratch(…) declares no length"));
            }
            self.scratch.extend(items);
        } else if key == "require" {
            let content;
            syn::parenthesized!(content in input);
            let cond: Expr = content.parse()?;
            let message = if content.is_empty() {
                None
            } else {
                content.parse::<Token![,]>()?;
                let m: LitStr = content.parse()?;
                if m.value().len() > 255 {
                    return Err(syn::Error::new(m.span(), "message longer than 255 bytes"));
                }
                Some(m)
            };
            if !content.is_empty() {
                return Err(content
                    .error("expected `require(condition)` or `require(condition, \"message\")`"));
            }
            self.require.push((cond, message));
        } else {
            return Ok(false);
        }
        Ok(true)
    }
}

/// The parameter names of `key(a, b, …)`, at least one (`empty`: the error otherwise).
fn names(
    key: &Ident,
    input: ParseStream<'_>,
    empty: &str,
) -> syn::Result<Punctuated<Ident, Token![,]>> {
    let content;
    syn::parenthesized!(content in input);
    let names = content.parse_terminated(Ident::parse, Token![,])?;
    if names.is_empty() {
        return Err(syn::Error::new(key.span(), empty));
    }
    Ok(names)
}

fn parse_assignment(input: ParseStream<'_>) -> syn::Result<(Ident, Expr)> {
    let name: Ident = input.parse()?;
    input.parse::<Token![=]>()?;
    let e: Expr = input.parse()?;
    Ok((name, e))
}

/// The extras resolved against the kernel's parameters: the `Extras` constant's tokens and
/// the compile-time checks of the parameters' kinds.
pub struct Resolved {
    /// `::ferrocuda_device::__private::Extras { … }`.
    pub value: TokenStream2,
    /// `const` assertions on the parameter types (host build).
    pub checks: Vec<TokenStream2>,
    /// Checks compiled in every build (host and device).
    pub always: Vec<TokenStream2>,
}

struct Ctx<'a> {
    names: &'a [Ident],
    types: &'a [Type],
    checks: Vec<TokenStream2>,
    always: Vec<TokenStream2>,
}

impl Ctx<'_> {
    fn index(&self, id: &Ident, what: &str) -> syn::Result<u8> {
        match self.names.iter().position(|a| a == id) {
            Some(i) => Ok(i as u8),
            None => Err(syn::Error::new(
                id.span(),
                format!("{what} names no parameter of this kernel"),
            )),
        }
    }

    /// A compile-time assertion about parameter `i`'s description.
    fn assert(&mut self, i: u8, span: Span, cond: TokenStream2, msg: String) {
        let ty = &self.types[i as usize];
        // `d` resolves where the conditions' `d` (written with `quote!`) does, at the call
        // site, whatever expansion the spanned parameter name came from: a rule written in
        // one `macro_rules!` arm and put on a `#[kernel]` in another carries that arm's
        // hygiene, and a `d` bound there would not be the one the condition names.
        let d = Ident::new("d", Span::call_site().located_at(span));
        self.checks.push(quote_spanned! {span=>
            const _: () = {
                let #d = <#ty as ::ferrocuda_device::__private::KernelParam>::DESC;
                let _ = &#d;
                assert!(#cond, #msg);
            };
        });
    }
}

const SCALAR: u8 = 1;
const SLICE: u8 = 2;
const SCRATCH: u8 = 4;

/// Resolves the options against the parameters `names` of types `types`, of which those at
/// `grid_barriers` are `GridBarrier`s: scratch workspaces whose length the device crate
/// fixes (`GRID_BARRIER_WORDS`), declared here rather than by the kernel.
pub fn resolve(
    opts: &ExtrasOpts,
    names: &[Ident],
    types: &[Type],
    grid_barriers: &[u8],
) -> syn::Result<Resolved> {
    let mut cx = Ctx {
        names,
        types,
        checks: Vec::new(),
        always: Vec::new(),
    };
    let mut zero = Vec::new();
    for id in &opts.zero {
        let i = cx.index(id, "zero(…)")?;
        if zero.contains(&i) {
            return Err(syn::Error::new(
                id.span(),
                "parameter named twice in zero(…)",
            ));
        }
        zero.push(i);
        cx.assert(
            i,
            id.span(),
            quote! { d.mutable && (d.kind as u8 == 2 || d.kind as u8 == 3) },
            format!("zero({id}): `{id}` must be a written array (SliceMut, ViewMut, AtomicSlice)"),
        );
    }
    let mut scratch = Vec::new();
    let mut declared = Vec::new();
    for &i in grid_barriers {
        let ty = &types[i as usize];
        // The type named `GridBarrier` must be the device crate's (host and device builds).
        cx.always.push(quote_spanned! {ty.span()=>
            const _: () = {
                const fn grid_barrier<T: ::ferrocuda_device::__private::GridBarrierParam>() {}
                grid_barrier::<#ty>();
            };
        });
        declared.push(i);
        // Its counter's low 31 bits are zero again after every barrier: it may persist.
        let persist = opts.persist.iter().any(|p| *p == names[i as usize]);
        scratch.push(quote! {
            ::ferrocuda_device::__private::ScratchLen {
                param: #i, per_block: 0,
                constant: ::ferrocuda_device::__private::GRID_BARRIER_WORDS,
                of: u8::MAX, mult: 0, div: 1, persist: #persist,
            }
        });
    }
    for (id, e) in &opts.scratch {
        let i = cx.index(id, "scratch(…)")?;
        if grid_barriers.contains(&i) {
            return Err(syn::Error::new(
                id.span(),
                "a GridBarrier's workspace is sized by the launcher: no scratch(…) length",
            ));
        }
        if declared.contains(&i) {
            return Err(syn::Error::new(id.span(), "scratch length declared twice"));
        }
        declared.push(i);
        cx.assert(
            i,
            id.span(),
            quote! { d.kind as u8 == #SCRATCH },
            format!("scratch({id} = …): `{id}` must be a Scratch<T> parameter"),
        );
        let persist = opts.persist.iter().any(|p| p == id);
        scratch.push(scratch_len(&mut cx, i, e, persist)?);
    }
    for (k, id) in opts.persist.iter().enumerate() {
        if opts.persist[..k].contains(id) {
            return Err(syn::Error::new(
                id.span(),
                "workspace named twice in persist(…)",
            ));
        }
        let barrier = grid_barriers
            .iter()
            .copied()
            .find(|&i| names[i as usize] == *id);
        if barrier.is_none() && !opts.scratch.iter().any(|(s, _)| s == id) {
            return Err(syn::Error::new(
                id.span(),
                "persist(…) names a workspace declared by scratch(… = …) (a Scratch<T> \
                 parameter) or a GridBarrier parameter",
            ));
        }
        // The launcher lays the workspaces out in parameter order: a persistent barrier's word
        // must not move when the lengths of the workspaces before it do.
        if let Some(b) = barrier {
            for (other, _) in &opts.scratch {
                if cx.index(other, "scratch(…)")? < b {
                    return Err(syn::Error::new(
                        id.span(),
                        format!(
                            "a persistent GridBarrier must be declared before every workspace \
                             parameter (here before `{other}`), so that its word stays at \
                             offset 0 whatever their lengths"
                        ),
                    ));
                }
            }
        }
    }
    for (i, id) in names.iter().enumerate() {
        if !declared.contains(&(i as u8)) {
            cx.assert(
                i as u8,
                id.span(),
                quote! { d.kind as u8 != #SCRATCH },
                format!(
                    "`{id}` is a Scratch workspace: declare its length with \
                     #[kernel(scratch({id} = …))] (a constant, `blocks`, `x.len()`, …)"
                ),
            );
        }
    }
    let mut require = Vec::new();
    for (cond, msg) in &opts.require {
        let (lhs, cmp, rhs) = condition(&mut cx, cond)?;
        let message = msg.as_ref().map(LitStr::value).unwrap_or_default();
        require.push(quote! {
            ::ferrocuda_device::__private::Require {
                lhs: #lhs, cmp: ::ferrocuda_device::__private::Cmp::#cmp, rhs: #rhs,
                message: #message,
            }
        });
    }
    let value = quote! {
        ::ferrocuda_device::__private::Extras {
            zero: &[#(#zero),*],
            scratch: &[#(#scratch),*],
            require: &[#(#require),*],
            tiles: &[],
        }
    };
    Ok(Resolved {
        value,
        checks: cx.checks,
        always: cx.always,
    })
}

/// `per_block · blocks + mult · x.len().div_ceil(div) + constant`, each term optional.
fn scratch_len(cx: &mut Ctx<'_>, param: u8, e: &Expr, persist: bool) -> syn::Result<TokenStream2> {
    let mut terms = Vec::new();
    flatten_sum(e, &mut terms);
    let (mut per_block, mut constant, mut of, mut mult, mut div) = (0u32, 0u32, None, 0u32, 1u32);
    let bad = |span: Span| {
        syn::Error::new(
            span,
            "a scratch length is a sum of: an integer, `blocks` or `k * blocks` (the launch \
             grid's blocks), and `x.len()`, `k * x.len()` or `k * x.len().div_ceil(d)` (an \
             array argument's length)",
        )
    };
    for t in terms {
        let (k, rest) = match t {
            Expr::Binary(b) if matches!(b.op, BinOp::Mul(_)) => {
                (Some(int(&b.left)?), peel(&b.right))
            }
            other => (None, other),
        };
        if let Some(v) = int_opt(rest) {
            if k.is_some() {
                return Err(bad(t.span()));
            }
            constant = constant.checked_add(v).ok_or_else(|| bad(t.span()))?;
            continue;
        }
        if let Expr::Path(p) = rest {
            if p.path.is_ident("blocks") && per_block == 0 {
                per_block = k.unwrap_or(1);
                continue;
            }
            return Err(bad(t.span()));
        }
        let (array, d) = len_term(rest).ok_or_else(|| bad(t.span()))?;
        if of.is_some() {
            return Err(bad(t.span()));
        }
        let i = cx.index(&array, "scratch length")?;
        cx.assert(
            i,
            array.span(),
            quote! { d.kind as u8 == 2 || d.kind as u8 == 3 || d.kind as u8 == 5 },
            format!("scratch length: `{array}` must be an array argument"),
        );
        of = Some(i);
        mult = k.unwrap_or(1);
        div = d;
    }
    let of = of.unwrap_or(u8::MAX);
    Ok(quote! {
        ::ferrocuda_device::__private::ScratchLen {
            param: #param, per_block: #per_block, constant: #constant, of: #of, mult: #mult,
            div: #div, persist: #persist,
        }
    })
}

fn flatten_sum<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match peel(e) {
        Expr::Binary(b) if matches!(b.op, BinOp::Add(_)) => {
            flatten_sum(&b.left, out);
            flatten_sum(&b.right, out);
        }
        other => out.push(other),
    }
}

/// `x.len()` → `(x, 1)`; `x.len().div_ceil(d)` → `(x, d)`.
fn len_term(e: &Expr) -> Option<(Ident, u32)> {
    let Expr::MethodCall(m) = peel(e) else {
        return None;
    };
    if m.method == "div_ceil" && m.args.len() == 1 {
        let d = int_opt(&m.args[0]).filter(|&d| d >= 1)?;
        let (x, one) = len_term(&m.receiver)?;
        return (one == 1).then_some((x, d));
    }
    if m.method != "len" || !m.args.is_empty() {
        return None;
    }
    match peel(&m.receiver) {
        Expr::Path(p) => p.path.get_ident().map(|i| (i.clone(), 1)),
        _ => None,
    }
}

/// `e` without invisible groups (a `macro_rules!` fragment arrives wrapped in one) and
/// parentheses.
fn peel(e: &Expr) -> &Expr {
    match e {
        Expr::Group(g) => peel(&g.expr),
        Expr::Paren(p) => peel(&p.expr),
        other => other,
    }
}

fn int_opt(e: &Expr) -> Option<u32> {
    match peel(e) {
        Expr::Lit(ExprLit {
            lit: Lit::Int(l), ..
        }) => l.base10_parse::<u32>().ok(),
        _ => None,
    }
}

fn int(e: &Expr) -> syn::Result<u32> {
    int_opt(e).ok_or_else(|| syn::Error::new(e.span(), "expected an integer in 0..=4294967295"))
}

/// `a <op> b`, `finite(a)` or `divides(a, b)`.
fn condition(
    cx: &mut Ctx<'_>,
    e: &Expr,
) -> syn::Result<(TokenStream2, TokenStream2, TokenStream2)> {
    if let Expr::Call(c) = e {
        if matches!(&*c.func, Expr::Path(p) if p.path.is_ident("finite")) && c.args.len() == 1 {
            let lhs = operand(cx, &c.args[0])?;
            return Ok((
                lhs,
                quote!(Finite),
                quote!(::ferrocuda_device::__private::Operand::Int(0)),
            ));
        }
        if matches!(&*c.func, Expr::Path(p) if p.path.is_ident("divides")) && c.args.len() == 2 {
            let lhs = operand(cx, &c.args[0])?;
            let rhs = operand(cx, &c.args[1])?;
            return Ok((lhs, quote!(Divides), rhs));
        }
    }
    let Expr::Binary(b) = e else {
        return Err(syn::Error::new(
            e.span(),
            "expected a comparison (`a.shape[1] == b.shape[0]`, `lo < hi`, `x.len() > 0`, \
             `out.ptr() != x.ptr()`), `finite(scalar)` or `divides(k.shape[1], q.shape[1])`",
        ));
    };
    let cmp = match b.op {
        BinOp::Eq(_) => quote!(Eq),
        BinOp::Ne(_) => quote!(Ne),
        BinOp::Lt(_) => quote!(Lt),
        BinOp::Le(_) => quote!(Le),
        BinOp::Gt(_) => quote!(Gt),
        BinOp::Ge(_) => quote!(Ge),
        _ => {
            return Err(syn::Error::new(
                b.op.span(),
                "expected one of ==, !=, <, <=, >, >=",
            ))
        }
    };
    Ok((operand(cx, &b.left)?, cmp, operand(cx, &b.right)?))
}

/// An integer literal, `scalar`, `x.len()`, `x.shape[k]` or `x.ptr()`.
fn operand(cx: &mut Ctx<'_>, e: &Expr) -> syn::Result<TokenStream2> {
    let op = quote!(::ferrocuda_device::__private::Operand);
    let bad = || {
        syn::Error::new(
            e.span(),
            "an operand is an integer literal, a scalar parameter, `x.len()`, `x.shape[k]` or \
             `x.ptr()`",
        )
    };
    match peel(e) {
        Expr::Lit(ExprLit {
            lit: Lit::Int(l), ..
        }) => {
            let v: i64 = l.base10_parse()?;
            Ok(quote!(#op::Int(#v)))
        }
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => match &*u.expr {
            Expr::Lit(ExprLit {
                lit: Lit::Int(l), ..
            }) => {
                let v: i64 = format!("-{}", l.base10_digits())
                    .parse()
                    .map_err(|_| bad())?;
                Ok(quote!(#op::Int(#v)))
            }
            _ => Err(bad()),
        },
        Expr::Path(p) => {
            let id = p.path.get_ident().ok_or_else(bad)?;
            let i = cx.index(id, "require(…)")?;
            cx.assert(
                i,
                id.span(),
                quote! { d.kind as u8 == #SCALAR },
                format!(
                    "require(…): `{id}` alone must be a scalar parameter \
                     (arrays: `{id}.len()`, `{id}.shape[k]`, `{id}.ptr()`)"
                ),
            );
            Ok(quote!(#op::Scalar(#i)))
        }
        Expr::MethodCall(m) if m.args.is_empty() && (m.method == "len" || m.method == "ptr") => {
            let Expr::Path(p) = &*m.receiver else {
                return Err(bad());
            };
            let id = p.path.get_ident().ok_or_else(bad)?;
            let i = cx.index(id, "require(…)")?;
            array_check(cx, i, id);
            Ok(if m.method == "len" {
                quote!(#op::Len(#i))
            } else {
                quote!(#op::Ptr(#i))
            })
        }
        Expr::Index(ix) => {
            let Expr::Field(f) = &*ix.expr else {
                return Err(bad());
            };
            let (Expr::Path(p), syn::Member::Named(field)) = (&*f.base, &f.member) else {
                return Err(bad());
            };
            if field != "shape" {
                return Err(bad());
            }
            let id = p.path.get_ident().ok_or_else(bad)?;
            let k = int_opt(&ix.index).filter(|&k| k < 32).ok_or_else(bad)? as u8;
            let i = cx.index(id, "require(…)")?;
            array_check(cx, i, id);
            // A view's rank is fixed; a slice takes C-contiguous arrays of any rank, so the
            // host checks that the array passed has the axis.
            cx.assert(
                i,
                ix.index.span(),
                quote! { d.kind as u8 == #SLICE || (d.rank as usize) > #k as usize },
                format!("require(…): `{id}.shape[{k}]`: `{id}` has fewer axes"),
            );
            Ok(quote!(#op::Dim(#i, #k)))
        }
        _ => Err(bad()),
    }
}

fn array_check(cx: &mut Ctx<'_>, i: u8, id: &Ident) {
    cx.assert(
        i,
        id.span(),
        quote! { d.kind as u8 == 2 || d.kind as u8 == 3 || d.kind as u8 == 5 },
        format!("require(…): `{id}` must be an array argument here"),
    );
}
