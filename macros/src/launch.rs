//! The launch options of `#[kernel]` — `max_threads = n`, `block = (x, y, z)`,
//! `min_blocks = n`, `dynamic_shared = T`, `grid = "2d"` / `"rows"`, `cooperative`,
//! `cluster = (x, y, z)`, `non_portable_cluster` — and the launch record they become (see
//! `ferrocuda_abi::launch`).

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::{Ident, LitInt, LitStr, Token, Type};

/// The option names this module parses.
pub const OPTIONS: [&str; 9] = [
    "shared_bytes",
    "max_threads",
    "block",
    "min_blocks",
    "dynamic_shared",
    "grid",
    "cooperative",
    "cluster",
    "non_portable_cluster",
];

/// The options among [`OPTIONS`] that are flags (no `= value`).
const FLAGS: [&str; 2] = ["cooperative", "non_portable_cluster"];

/// Most blocks of a portable cluster, and of any cluster (sm_90: 16 with the non-portable
/// attribute).
const MAX_CLUSTER_PORTABLE: u32 = 8;
const MAX_CLUSTER: u32 = 16;

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
    cooperative: Option<Span>,
    cluster: Option<([u8; 3], Span)>,
    non_portable_cluster: Option<Span>,
    /// Span of the `grid = "…"` value, for errors about it.
    grid_span: Option<Span>,
    /// `shared_bytes = <const expression>`: the dynamic shared memory the kernel needs.
    shared_bytes: Option<syn::Expr>,
}

impl LaunchOptions {
    /// Parses the value of option `key` (one of [`OPTIONS`]), after the key.
    pub fn parse(&mut self, key: &Ident, input: ParseStream<'_>) -> syn::Result<()> {
        let err = |span: Span, msg: &str| Err(syn::Error::new(span, msg));
        if FLAGS.contains(&key.to_string().as_str()) {
            if input.peek(Token![=]) {
                return err(
                    input.span(),
                    &format!("`{key}` takes no value: write `#[kernel({key})]`"),
                );
            }
            if key == "cooperative" {
                self.cooperative = Some(key.span());
            } else {
                self.non_portable_cluster = Some(key.span());
            }
            return Ok(());
        }
        input.parse::<Token![=]>()?;
        if key == "cluster" {
            let span = input.span();
            let dims = block_dims(input)?;
            if dims.iter().any(|&d| d == 0 || d > MAX_CLUSTER) {
                return err(
                    span,
                    "cluster extents must be at least 1, with at most 16 blocks in all (8 for \
                     a portable cluster)",
                );
            }
            self.cluster = Some((dims.map(|d| d as u8), span));
            return Ok(());
        }
        if key == "shared_bytes" {
            self.shared_bytes = Some(input.parse()?);
        } else if key == "max_threads" {
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
            self.grid_span = Some(lit.span());
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

    /// Whether `cooperative` was given.
    pub fn cooperative(&self) -> bool {
        self.cooperative.is_some()
    }

    /// Checks the cooperative and cluster options against each other, the automatic grid
    /// and the kernel's `arch` (a cluster needs `arch = "sm_90"` or newer: thread-block
    /// clusters and distributed shared memory are sm_90 features).
    pub fn check_attributes(&self, arch: Option<&LitStr>) -> syn::Result<()> {
        let err = |span: Span, msg: String| Err(syn::Error::new(span, msg));
        if let Some((dims, span)) = self.cluster {
            let blocks: u32 = dims.iter().map(|&d| u32::from(d)).product();
            if blocks > MAX_CLUSTER {
                return err(
                    span,
                    format!("a cluster of {blocks} blocks: a cluster holds at most 16 blocks"),
                );
            }
            if blocks > MAX_CLUSTER_PORTABLE && self.non_portable_cluster.is_none() {
                return err(
                    span,
                    format!(
                        "a cluster of {blocks} blocks is not portable (at most 8 are): add \
                         `non_portable_cluster` to allow up to 16 on GPUs that run them (H100)"
                    ),
                );
            }
            use ferrocuda_abi::arch::Arch;
            let needs = "thread-block clusters need an sm_90 GPU or newer: give the kernel \
                         `arch = \"sm_90\"` (or a newer arch) beside `cluster`, so that it is \
                         built into the crate's sm_90 part";
            match arch {
                None => return err(span, needs.to_string()),
                Some(lit) => {
                    let sm90 = Arch::new(9, 0, ferrocuda_abi::arch::Variant::Portable);
                    let ok = Arch::parse(&lit.value()).is_some_and(|a| a.number() >= sm90.number());
                    if !ok {
                        return err(lit.span(), needs.to_string());
                    }
                }
            }
        } else if let Some(span) = self.non_portable_cluster {
            return err(
                span,
                "`non_portable_cluster` needs `cluster = (x, y, z)`".to_string(),
            );
        }
        if let Some(span) = self.cooperative {
            if let Some((_, c)) = self.cluster {
                return err(
                    c,
                    "a kernel is either `cooperative` or launched in clusters, not both"
                        .to_string(),
                );
            }
            if self.grid_dims > 1 || self.grid_rows {
                return err(
                    self.grid_span.unwrap_or(span),
                    "the automatic grid of a `cooperative` kernel is one resident wave of \
                     blocks (1-D): leave out `grid = \"2d\"`, `\"3d\"` and `\"rows\"`"
                        .to_string(),
                );
            }
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
            && self.cooperative.is_none()
            && self.cluster.is_none()
            && self.non_portable_cluster.is_none()
            && self.shared_bytes.is_none()
        {
            return Ok(TokenStream2::new());
        }
        let max_threads = self.max_threads.map_or(0, |(n, _)| n);
        let [bx, by, bz] = self.block.map_or([0; 3], |(b, _)| b);
        let grid_dims = self.grid_dims;
        let grid_rows = self.grid_rows;
        let min_blocks = self.min_blocks.map_or(0, |(n, _)| n);
        let cooperative = self.cooperative.is_some();
        let [cx, cy, cz] = self.cluster.map_or([0; 3], |(c, _)| c);
        let non_portable = self.non_portable_cluster.is_some();
        let shared = match &self.dynamic_shared {
            Some(ty) => quote! {
                <#ty as ::ferrocuda_device::__private::Element>::DTYPE as u8
            },
            None => quote! { 0 },
        };
        let shared_bytes = match &self.shared_bytes {
            Some(e) => quote! { ::ferrocuda_device::__private::shared_bytes(#e) },
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
                cooperative: #cooperative,
                cluster: [#cx, #cy, #cz],
                non_portable_cluster: #non_portable,
                shared_bytes: #shared_bytes,
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
