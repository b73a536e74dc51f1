//! The launch-shape options of `#[kernel]` — `max_threads = n`, `block = (x, y, z)`,
//! `min_blocks = n`, `dynamic_shared = T`, `grid = "2d"` / `"rows"` — and the launch record they become
//! (see `ferrocuda_abi::launch`).

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::{Ident, LitInt, LitStr, Token, Type};

/// The option names this module parses.
pub const OPTIONS: [&str; 5] = [
    "max_threads",
    "block",
    "min_blocks",
    "dynamic_shared",
    "grid",
];

/// Most threads per block, and the largest block extents, of every supported GPU.
const MAX_THREADS: u32 = 1024;
const MAX_DIMS: [u32; 3] = [1024, 1024, 64];
/// Most resident blocks and threads of one SM of every supported GPU.
const MAX_SM_BLOCKS: u32 = 32;
const MAX_SM_THREADS: u32 = 2048;

/// The launch options of one kernel.
#[derive(Default)]
pub struct LaunchOptions {
    max_threads: Option<(u16, Span)>,
    block: Option<([u16; 3], Span)>,
    dynamic_shared: Option<Type>,
    grid_dims: u8,
    grid_rows: bool,
    min_blocks: Option<(u8, Span)>,
}

impl LaunchOptions {
    /// Parses the value of option `key` (one of [`OPTIONS`]), after the key.
    pub fn parse(&mut self, key: &Ident, input: ParseStream<'_>) -> syn::Result<()> {
        let err = |span: Span, msg: &str| Err(syn::Error::new(span, msg));
        input.parse::<Token![=]>()?;
        if key == "max_threads" {
            let lit: LitInt = input.parse()?;
            match lit.base10_parse::<u32>() {
                Ok(n) if (1..=MAX_THREADS).contains(&n) => {
                    self.max_threads = Some((n as u16, lit.span()))
                }
                _ => return err(lit.span(), "max_threads must be an integer in 1..=1024"),
            }
        } else if key == "block" {
            let span = input.span();
            let dims = block_dims(input)?;
            let threads: u32 = dims.iter().product();
            if dims.iter().zip(MAX_DIMS).any(|(&d, m)| d == 0 || d > m) || threads > MAX_THREADS {
                return err(
                    span,
                    "block extents must be at least 1 and at most (1024, 1024, 64), with at \
                     most 1024 threads in all",
                );
            }
            self.block = Some((dims.map(|d| d as u16), span));
        } else if key == "min_blocks" {
            let lit: LitInt = input.parse()?;
            match lit.base10_parse::<u32>() {
                Ok(n) if (1..=MAX_SM_BLOCKS).contains(&n) => {
                    self.min_blocks = Some((n as u8, lit.span()))
                }
                _ => return err(lit.span(), "min_blocks must be an integer in 1..=32"),
            }
        } else if key == "dynamic_shared" {
            self.dynamic_shared = Some(input.parse()?);
        } else {
            let lit: LitStr = input.parse()?;
            (self.grid_dims, self.grid_rows) = match lit.value().as_str() {
                "1d" => (1, false),
                "2d" => (2, false),
                "3d" => (3, false),
                "rows" => (1, true),
                _ => {
                    return err(
                        lit.span(),
                        "grid must be \"1d\", \"2d\", \"3d\" or \"rows\"",
                    )
                }
            };
        }
        if let (Some(_), Some((_, span))) = (self.block, self.max_threads) {
            return err(
                span,
                "declare either `block` or `max_threads`: a fixed block already bounds the \
                 threads per block",
            );
        }
        Ok(())
    }

    /// The launch record of kernel `name` (nothing when no option was given), and on the host
    /// a compile-time check of the declaration. Refuses `min_blocks` without a bound on the
    /// threads of a block, or with more blocks of the bound than an SM holds.
    pub fn record(&self, name: &Ident) -> syn::Result<TokenStream2> {
        if let Some((n, span)) = self.min_blocks {
            let threads = match (self.block, self.max_threads) {
                (Some((b, _)), _) => b.iter().map(|&d| u32::from(d)).product(),
                (None, Some((t, _))) => u32::from(t),
                (None, None) => {
                    return Err(syn::Error::new(
                        span,
                        "min_blocks needs `max_threads = n` or `block = (…)`: the threads of \
                         the blocks that must fit",
                    ))
                }
            };
            if u32::from(n) * threads > MAX_SM_THREADS {
                return Err(syn::Error::new(
                    span,
                    format!(
                        "{n} blocks of {threads} threads do not fit on one SM (at most 2048 \
                         threads)"
                    ),
                ));
            }
        }
        if self.max_threads.is_none()
            && self.block.is_none()
            && self.dynamic_shared.is_none()
            && self.grid_dims <= 1
            && !self.grid_rows
            && self.min_blocks.is_none()
        {
            return Ok(TokenStream2::new());
        }
        let max_threads = self.max_threads.map_or(0, |(n, _)| n);
        let [bx, by, bz] = self.block.map_or([0; 3], |(b, _)| b);
        let grid_dims = self.grid_dims;
        let grid_rows = self.grid_rows;
        let min_blocks = self.min_blocks.map_or(0, |(n, _)| n);
        let shared = match &self.dynamic_shared {
            Some(ty) => quote! {
                <#ty as ::ferrocuda_device::__private::Element>::DTYPE as u8
            },
            None => quote! { 0 },
        };
        let decl = quote! {
            ::ferrocuda_device::__private::LaunchDecl {
                max_threads: #max_threads,
                block: [#bx, #by, #bz],
                dynamic_shared: #shared,
                grid_dims: #grid_dims,
                min_blocks: #min_blocks,
                grid_rows: #grid_rows,
            }
        };
        let sym = format_ident!("__ferrocuda_launch__{}", name);
        Ok(quote! {
            #[cfg(not(target_arch = "nvptx64"))]
            const _: () = {
                let _ = #decl.encode();
            };

            #[cfg(target_arch = "nvptx64")]
            #[doc(hidden)]
            #[unsafe(no_mangle)]
            #[allow(non_upper_case_globals)]
            pub static #sym: [u8; ::ferrocuda_device::__private::LAUNCH_RECORD_LEN] = #decl.encode();
        })
    }
}

/// `n` or `(x)`, `(x, y)`, `(x, y, z)`: missing extents are 1.
fn block_dims(input: ParseStream<'_>) -> syn::Result<[u32; 3]> {
    let lits: Vec<LitInt> = if input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in input);
        let list: Punctuated<LitInt, Token![,]> =
            content.parse_terminated(|p| p.parse::<LitInt>(), Token![,])?;
        list.into_iter().collect()
    } else {
        vec![input.parse()?]
    };
    if lits.is_empty() || lits.len() > 3 {
        return Err(syn::Error::new(
            input.span(),
            "block takes 1 to 3 extents: `block = 256` or `block = (16, 16)`",
        ));
    }
    let mut dims = [1u32; 3];
    for (d, lit) in dims.iter_mut().zip(&lits) {
        *d = lit.base10_parse::<u32>()?;
    }
    Ok(dims)
}
