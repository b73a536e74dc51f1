//! Generic kernels: `#[kernel(instances(f32, f64, …))]` on a function with one type parameter.
//!
//! Each listed element type becomes one kernel entry, named `<function>_<type>` (`scale` with
//! `instances(f32, f16)` gives `scale_f32` and `scale_f16`), all in one family (the function's
//! name unless `family = "…"` says otherwise), so a family launcher picks the instance by the
//! arrays' element type. Every other option applies to each instance, with the type parameter
//! replaced by the instance's type (`items_per_thread = 16 / size_of::<T>()`,
//! `dynamic_shared = T`).
//!
//! The expansion keeps the generic function, renamed and device-only, and hands each instance
//! to the ordinary `#[kernel]` expansion as a plain function that calls it:
//!
//! ```ignore
//! fn __ferrocuda_generic_scale<T: /* … */>(alpha: T, x: Slice<T>, y: SliceMut<T>) { body }
//! #[kernel(family = "scale" /* , … */)]
//! pub unsafe fn scale_f32(alpha: f32, x: Slice<f32>, y: SliceMut<f32>) {
//!     unsafe { __ferrocuda_generic_scale::<f32>(alpha, x, y) }
//! }
//! ```

use proc_macro2::{Delimiter, Group, Ident, Span, TokenStream as TokenStream2, TokenTree};
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{FnArg, GenericParam, ItemFn, Pat};

/// The option's name.
const KEY: &str = "instances";

/// The element types kernels can take, by their Rust names (`i8` … `u64`, `f16`, `bf16`,
/// `f32`, `f64`), from the abi's element-type table.
fn element_names() -> Vec<&'static str> {
    ferrocuda_abi::DType::ALL
        .iter()
        .filter_map(|d| d.rust_name())
        .collect()
}

/// The type an instance name stands for in the expansion: the 16-bit floats through the
/// device crate (so that no import is needed), the primitives as themselves.
fn instance_type(name: &Ident) -> TokenStream2 {
    match name.to_string().as_str() {
        "f16" | "bf16" => quote! { ::ferrocuda_device::half::#name },
        _ => quote! { #name },
    }
}

/// `instances(...)` split off the attribute: its group and the attribute's other tokens
/// (`None` when the attribute has no `instances` option).
fn split_instances(attr: TokenStream2) -> Option<(Ident, Group, TokenStream2)> {
    let tokens: Vec<TokenTree> = attr.into_iter().collect();
    let at = tokens.windows(2).position(|w| {
        matches!((&w[0], &w[1]), (TokenTree::Ident(i), TokenTree::Group(g))
            if i == KEY && g.delimiter() == Delimiter::Parenthesis)
    })?;
    // A top-level `instances` is an option only where an option may start.
    if at > 0 && !matches!(&tokens[at - 1], TokenTree::Punct(p) if p.as_char() == ',') {
        return None;
    }
    let (TokenTree::Ident(key), TokenTree::Group(group)) = (&tokens[at], &tokens[at + 1]) else {
        return None;
    };
    let (key, group) = (key.clone(), group.clone());
    let mut rest: Vec<TokenTree> = tokens[..at].to_vec();
    let mut after = at + 2;
    // Drop the comma that separated it from the next option.
    if matches!(tokens.get(after), Some(TokenTree::Punct(p)) if p.as_char() == ',') {
        after += 1;
    }
    rest.extend_from_slice(&tokens[after..]);
    // A trailing comma left by removing the last option is harmless to the option parser.
    Some((key, group, rest.into_iter().collect()))
}

/// Whether the attribute names option `name` (`name = …` at the top level).
fn has_option(attr: &TokenStream2, name: &str) -> bool {
    let tokens: Vec<TokenTree> = attr.clone().into_iter().collect();
    tokens.windows(2).any(|w| {
        matches!((&w[0], &w[1]), (TokenTree::Ident(i), TokenTree::Punct(p))
            if i == name && p.as_char() == '=')
    })
}

/// `tokens` with every identifier `param` (not after `::` or `.`) replaced by `with`.
fn substitute(tokens: TokenStream2, param: &Ident, with: &TokenStream2) -> TokenStream2 {
    let mut out = Vec::new();
    let mut prev: Option<char> = None;
    for tt in tokens {
        let punct = match &tt {
            TokenTree::Punct(p) => Some(p.as_char()),
            _ => None,
        };
        match tt {
            TokenTree::Ident(ref i) if i == param && !matches!(prev, Some(':') | Some('.')) => {
                out.extend(with.clone())
            }
            TokenTree::Group(g) => {
                let mut ng = Group::new(g.delimiter(), substitute(g.stream(), param, with));
                ng.set_span(g.span());
                out.push(TokenTree::Group(ng));
            }
            other => out.push(other),
        }
        prev = punct;
    }
    out.into_iter().collect()
}

/// Expands a `#[kernel(…, instances(…), …)]` attribute; `None` when the attribute has no
/// `instances` option (the ordinary expansion applies). `expand` is the ordinary expansion,
/// given the options' tokens and a non-generic function.
pub fn expand(
    attr: TokenStream2,
    item: TokenStream2,
    expand: impl Fn(TokenStream2, ItemFn) -> syn::Result<TokenStream2>,
) -> Option<syn::Result<TokenStream2>> {
    let (key, group, rest) = split_instances(attr)?;
    Some(syn::parse2::<ItemFn>(item).and_then(|func| instances(key, group, rest, func, expand)))
}

fn instances(
    key: Ident,
    group: Group,
    rest: TokenStream2,
    func: ItemFn,
    expand: impl Fn(TokenStream2, ItemFn) -> syn::Result<TokenStream2>,
) -> syn::Result<TokenStream2> {
    let err = |span: Span, msg: String| Err(syn::Error::new(span, msg));
    let names = element_names();
    let sig = &func.sig;
    let name = &sig.ident;

    // The one type parameter.
    let mut type_param = None;
    for p in &sig.generics.params {
        match p {
            GenericParam::Type(t) if type_param.is_none() => type_param = Some(t.ident.clone()),
            GenericParam::Type(t) => {
                return err(
                    t.span(),
                    "a kernel with instances(…) has exactly one type parameter (the element \
                     type)"
                        .into(),
                )
            }
            GenericParam::Const(c) => {
                return err(
                    c.span(),
                    "instances(…) instantiates a type parameter; a kernel cannot have const \
                     parameters (write one #[kernel] per value)"
                        .into(),
                )
            }
            GenericParam::Lifetime(l) => {
                return err(l.span(), "a kernel cannot have lifetime parameters".into())
            }
        }
    }
    let Some(type_param) = type_param else {
        return err(
            key.span(),
            format!(
                "instances(…) lists the element types of a generic kernel, but `{name}` has no \
                 type parameter: write `fn {name}<T: …>(…)`"
            ),
        );
    };

    // The instance list: element type names, each once.
    let list: syn::punctuated::Punctuated<Ident, syn::Token![,]> = syn::parse::Parser::parse2(
        syn::punctuated::Punctuated::parse_terminated,
        group.stream(),
    )
    .map_err(|e| {
        syn::Error::new(
            e.span(),
            format!(
                "instances(…) lists element type names, e.g. instances(f32, f64): {e}; \
                     element types are {}",
                names.join(", ")
            ),
        )
    })?;
    if list.is_empty() {
        return err(
            group.span(),
            "instances(…) needs at least one element type, e.g. instances(f32, f64)".into(),
        );
    }
    let mut seen: Vec<&Ident> = Vec::new();
    for ty in &list {
        if !names.contains(&ty.to_string().as_str()) {
            return err(
                ty.span(),
                format!(
                    "`{ty}` is not an element type: instances(…) takes element types ({})",
                    names.join(", ")
                ),
            );
        }
        if seen.contains(&ty) {
            return err(ty.span(), format!("`{ty}` is listed twice in instances(…)"));
        }
        seen.push(ty);
    }

    // The parameters, passed through by name.
    let mut idents = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Typed(pt) => match &*pt.pat {
                Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                    idents.push((pi.ident.clone(), (*pt.ty).clone()))
                }
                other => return err(other.span(), "kernel parameters must be plain names".into()),
            },
            FnArg::Receiver(r) => return err(r.span(), "a kernel cannot take `self`".into()),
        }
    }

    // The generic function, kept for the device under a private name.
    let generic = format_ident!("__ferrocuda_generic_{}", name);
    let mut body_fn = func.clone();
    body_fn.sig.ident = generic.clone();
    body_fn.vis = syn::Visibility::Inherited;
    let mut out = quote! {
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        #body_fn
    };

    let family = if has_option(&rest, "family") {
        TokenStream2::new()
    } else {
        let fam = name.to_string();
        quote! { family = #fam, }
    };
    let vis = &func.vis;
    let unsafety = &sig.unsafety;
    for ty in &list {
        let concrete = instance_type(ty);
        let inst = format_ident!("{}_{}", name, ty, span = name.span());
        let params = idents.iter().map(|(id, t)| {
            let t = substitute(quote! { #t }, &type_param, &concrete);
            quote! { #id: #t }
        });
        let args = idents.iter().map(|(id, _)| id);
        let call = quote! { #generic::<#concrete>(#(#args),*) };
        let call = if unsafety.is_some() {
            quote! {
                // SAFETY: the instance's contract is the generic kernel's.
                unsafe { #call }
            }
        } else {
            call
        };
        let doc = format!("The `{ty}` instance of the generic kernel `{name}`.");
        let item: ItemFn = syn::parse2(quote! {
            #[doc = #doc]
            #vis #unsafety fn #inst(#(#params),*) { #call }
        })?;
        let opts = substitute(quote! { #family #rest }, &type_param, &concrete);
        out.extend(expand(opts, item)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_option_and_keeps_the_others() {
        let attr: TokenStream2 = "same_shape(x, y), instances(f32, f64), items_per_thread = 4"
            .parse()
            .unwrap();
        let (key, group, rest) = split_instances(attr).unwrap();
        assert_eq!(key.to_string(), "instances");
        assert_eq!(group.stream().to_string(), "f32 , f64");
        assert_eq!(
            rest.to_string(),
            "same_shape (x , y) , items_per_thread = 4"
        );
        let none: TokenStream2 = "family = \"instances\"".parse().unwrap();
        assert!(split_instances(none).is_none());
    }

    #[test]
    fn substitutes_the_type_parameter() {
        let t = format_ident!("T");
        let with = quote! { f32 };
        let ts: TokenStream2 = "SliceMut<T>, 16 / size_of::<T>(), x.T, a::T"
            .parse()
            .unwrap();
        let got = substitute(ts, &t, &with).to_string().replace(' ', "");
        assert_eq!(got, "SliceMut<f32>,16/size_of::<f32>(),x.T,a::T");
        assert!(has_option(&"family = \"x\"".parse().unwrap(), "family"));
        assert!(!has_option(
            &"same_shape(family)".parse().unwrap(),
            "family"
        ));
    }

    #[test]
    fn element_names_come_from_the_table() {
        let names = element_names();
        for n in ["i8", "u64", "f16", "bf16", "f32", "f64"] {
            assert!(names.contains(&n), "{n}");
        }
        assert!(!names.contains(&"bool") && !names.contains(&"usize"));
    }
}
