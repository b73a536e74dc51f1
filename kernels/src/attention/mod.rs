//! Scaled dot-product attention, forward, FlashAttention-style on the tensor cores:
//! `out = softmax(scale · q · kᵀ [+ causal mask]) · v` per (batch, head) for `q` (B, H, S_q,
//! D), `k` and `v` (B, H_kv, S_kv, D) of bf16 or f16 (PyTorch's `F.scaled_dot_product_attention`
//! layout), D ≤ 256, f32 accumulation, `out` (B, H, S_q, D) of the inputs' type, never
//! materialising the S_q × S_kv scores. With `causal = 1`, query `i` sees keys `0 ..= i` only
//! (`is_causal=True`: the mask aligned at the top left).
//!
//! Grouped-query attention: `H` may be any multiple of `H_kv` (multi-query attention:
//! `H_kv = 1`); query head `h` attends to key/value head `⌊h / (H / H_kv)⌋`, as
//! `F.scaled_dot_product_attention(…, enable_gqa=True)` does. Heads that share a key/value
//! head are adjacent in the work order, so its `k` and `v` tiles come from L2.
//!
//! | family | kernels (sm_90a; every GPU from sm_80) | outputs |
//! | --- | --- | --- |
//! | `attention` | `attention_{bf16,f16}_d64_sm90`, `attention_{bf16,f16}_sm90`, `attention_{bf16,f16}_wide_sm90`; `attention_{bf16,f16}`, `attention_{bf16,f16}_wide` | `out` |
//! | `attention_lse` | `attention_lse_{bf16,f16}_d64_sm90`, `attention_lse_{bf16,f16}_sm90`, `attention_lse_{bf16,f16}_wide_sm90`; `attention_lse_{bf16,f16}`, `attention_lse_{bf16,f16}_wide` | `out`, and `lse` (B, H, S_q) f32: each row's `ln Σ_j exp(scale · q_i · k_j)` over the keys it sees (−∞ for none) — what a backward pass needs |
//!
//! The `_sm90` kernels ([`sm90`]: TMA, `wgmma`, warp specialisation, ping-pong consumers) need
//! `q`, `k`, `v` whose rows are contiguous and 16-byte aligned (TMA); the portable kernels
//! ([`sm80`]: `mma.sync`, FlashAttention-2's schedule) take views of any strides. The
//! launchers choose by the one selection rule: on an H100 the `_sm90` kernel whenever its
//! tensor maps take the inputs, the portable one otherwise and on every other GPU. Both take
//! D ≤ 128 (`require`) — on an H100 the `_d64_sm90` kernels (three consumers) come first for
//! D ≤ 64, the only sm_90a kernels whose rule asks D ≤ 64; head dimensions up to 256 (Gemma's) go to the wide kernels — on an
//! H100 `_wide_sm90` (the same warp-specialised schedule with tiles of 256 columns and 64
//! keys, two stages), else the portable `_wide` (its schedule with tiles of 256 columns in
//! dynamic shared memory) — which the selection rule chooses because theirs are the only
//! conditions that hold (every kernel states the family's limit, D ≤ 256, first, so that a
//! larger D is told it; for D ≤ 128 the narrow kernels come first among equals).
//!
//! Numerics (both kernels): scores and sums in f32 (the products of 16-bit inputs exact, sums
//! in the tensor cores' order); `P` is rounded to the inputs' type before `P · v` (as
//! FlashAttention does), which bounds the relative error of each output near 2⁻⁸ (bf16) or
//! 2⁻¹¹ (f16); exponentials by `ex2.approx` (2 ulp). A query row with no key (`S_kv = 0`)
//! gives zeros (and an `lse` of −∞). Sequences need no multiple of the tile: rows past the
//! end read as zeros, their keys are masked, their queries not stored.

#[cfg(target_arch = "nvptx64")]
mod common;
pub(crate) mod sm80;
pub(crate) mod sm90;

pub use sm80::ATTENTION_WIDE_SMEM;
pub use sm90::{HeadsMap, HeadsMap192, KeysMap64};
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_arch = "sm_90a"))]
pub use sm90::{ATTENTION_D64_SMEM, ATTENTION_SMEM, ATTENTION_WIDE_SM90_SMEM};

use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::{kernel, View, ViewMut};

/// One attention kernel: its `#[kernel]` attribute (the family, the architecture's launch
/// settings, the shape rules every member shares, and with `lse` the output's) on `$item`.
macro_rules! attention_kernel {
    ($family:literal, [$($launch:tt)*], plain, [$($dim:tt)*], $item:item) => {
        attention_kernel!(@rules $family, [$($launch)*], [$($dim)*], [], $item);
    };
    ($family:literal, [$($launch:tt)*], lse, [$($dim:tt)*], $item:item) => {
        attention_kernel!(@rules $family, [$($launch)*], [$($dim)*],
            [require(lse.shape[0] == q.shape[0], "lse must have shape (B, H, S_q) of q"),
             require(lse.shape[1] == q.shape[1], "lse must have shape (B, H, S_q) of q"),
             require(lse.shape[2] == q.shape[2], "lse must have shape (B, H, S_q) of q"),
             require(q.shape[3] >= 1, "the head dimension (q.shape[3]) must be at least 1 with lse"),],
            $item);
    };
    (@rules $family:literal, [$($launch:tt)*], [$($dim:tt)*], [$($lse_rules:tt)*], $item:item) => {
        // The family's limit first in every kernel (a launch that no kernel takes is told it),
        // then the kernel's own: the launchers choose a kernel whose conditions hold.
        #[kernel(family = $family, $($launch)*,
                 require(q.shape[3] <= 256, "the head dimension (q.shape[3]) must be at most 256"),
                 $($dim)*
                 require(k.shape[3] == q.shape[3], "k must have q's head dimension (shape[3])"),
                 require(v.shape[3] == q.shape[3], "v must have q's head dimension (shape[3])"),
                 require(k.shape[0] == q.shape[0], "k must have q's batch size (shape[0])"),
                 require(v.shape[0] == q.shape[0], "v must have q's batch size (shape[0])"),
                 require(divides(k.shape[1], q.shape[1]),
                         "q's number of heads (shape[1]) must be a multiple of k's (grouped-query attention)"),
                 require(v.shape[1] == k.shape[1], "v must have k's number of heads (shape[1])"),
                 require(v.shape[2] == k.shape[2], "v must have k's sequence length (shape[2])"),
                 require(out.shape[0] == q.shape[0], "out must have q's shape"),
                 require(out.shape[1] == q.shape[1], "out must have q's shape"),
                 require(out.shape[2] == q.shape[2], "out must have q's shape"),
                 require(out.shape[3] == q.shape[3], "out must have q's shape"),
                 $($lse_rules)*
                 require(q.shape[2] < 2147483648, "q must have fewer than 2^31 rows per head"),
                 require(k.shape[2] < 2147483648, "k must have fewer than 2^31 rows per head"),
                 require(causal <= 1, "causal must be 0 or 1"))]
        $item
    };
}

/// A portable kernel and its `lse` form (FlashAttention-2's schedule: [`sm80`]): `$launch`
/// their launch settings, `$dim` their own head-dimension rules, `$wide` their tiles
/// (`sm80::forward`), `$doc` the plain kernel's documentation.
macro_rules! portable_kernels {
    ($t:ident, [$($launch:tt)*], [$($dim:tt)*], $wide:literal, $plain:ident, $lse:ident,
     $doc:expr) => {
        attention_kernel!("attention", [$($launch)*], plain, [$($dim)*],
            #[doc = $doc]
            pub unsafe fn $plain(
                q: View<$t, 4>,
                k: View<$t, 4>,
                v: View<$t, 4>,
                out: ViewMut<$t, 4>,
                scale: f32,
                causal: u32,
            ) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: launched with 128 threads per block (`.reqntid`) and the shared
                // memory it declares, over host-validated views whose shapes agree.
                unsafe {
                    sm80::forward::<_, $wide>(q, k, v, out, None, scale, causal != 0)
                }
            }
        );

        attention_kernel!("attention_lse", [$($launch)*], lse, [$($dim)*],
            #[doc = concat!("[`", stringify!($plain), "`], and each query row's log-sum-exp of ",
                            "its scaled scores into `lse` (B, H, S_q) f32, any strides.")]
            pub unsafe fn $lse(
                q: View<$t, 4>,
                k: View<$t, 4>,
                v: View<$t, 4>,
                out: ViewMut<$t, 4>,
                lse: ViewMut<f32, 3>,
                scale: f32,
                causal: u32,
            ) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: as in the kernel without `lse`; `lse`'s shape is required.
                unsafe {
                    sm80::forward::<_, $wide>(q, k, v, out, Some(lse), scale, causal != 0)
                }
            }
        );
    };
}

/// The sm_90a pair (`attention`, `attention_lse`) of one element type and geometry: `$qm`
/// and `$km` the map types of `q` and of `k` and `v`, `$block` the threads of a block,
/// `$qb, $bn, $pmax, $stages, $nc` [`sm90::forward`]'s geometry, `$smem` its shared memory.
macro_rules! sm90_kernels {
    ($t:ident, $qm:ident, $km:ident, $block:literal, [$($dim:tt)*],
     ($qb:literal, $bn:literal, $pmax:literal, $stages:literal, $nc:literal), $smem:ident,
     $plain:ident, $lse:ident, $doc:expr) => {
        attention_kernel!("attention",
            [arch = "sm_90a", block = $block, min_blocks = 1, dynamic_shared = u8,
             shared_bytes = $smem], plain,
            [$($dim)*],
            #[doc = $doc]
            pub unsafe fn $plain(
                q: $qm<$t>,
                k: $km<$t>,
                v: $km<$t>,
                out: ViewMut<$t, 4>,
                scale: f32,
                causal: u32,
            ) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the launch's configuration (`128 · (NC + 1)` threads, the shared
                // memory) and rules (shapes agree; TMA took the arrays).
                unsafe {
                    sm90::forward::<_, $qb, $bn, $pmax, $stages, $nc>(
                        q, k, v, out, None, scale, causal != 0,
                    )
                }
            }
        );

        attention_kernel!("attention_lse",
            [arch = "sm_90a", block = $block, min_blocks = 1, dynamic_shared = u8,
             shared_bytes = $smem],
            lse,
            [$($dim)*],
            #[doc = concat!("[`", stringify!($plain), "`], and each query row's log-sum-exp of ",
                            "its scaled scores into `lse` (B, H, S_q) f32, any strides.")]
            pub unsafe fn $lse(
                q: $qm<$t>,
                k: $km<$t>,
                v: $km<$t>,
                out: ViewMut<$t, 4>,
                lse: ViewMut<f32, 3>,
                scale: f32,
                causal: u32,
            ) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: as in the kernel without `lse`; `lse`'s shape is required.
                unsafe {
                    sm90::forward::<_, $qb, $bn, $pmax, $stages, $nc>(
                        q, k, v, out, Some(lse), scale, causal != 0,
                    )
                }
            }
        );
    };
}

/// The ten kernels of one element type; `$d64` and `$narrow` the rules of the kernels for
/// D ≤ 64 and D ≤ 128. For D ≤ 64 the kernels with three consumers come first among their
/// equals (the selection rule's order).
macro_rules! attention_kernels {
    ($d64:tt; $narrow:tt; $($t:ident, $tn:literal: $d64sm90:ident, $d64sm90_lse:ident, $sm90:ident,
      $sm90_lse:ident, $wsm90:ident, $wsm90_lse:ident,
      $port:ident, $port_lse:ident, $wide:ident, $wide_lse:ident;)*) => {$(
        sm90_kernels!($t, HeadsMap192, HeadsMap, 512, $d64, (192, 128, 1, 4, 3),
            ATTENTION_D64_SMEM, $d64sm90, $d64sm90_lse,
            concat!("[`", stringify!($sm90), "`] for head dimensions up to 64: three ",
                    "consumer warpgroups (512 threads), 192 query rows an item, so that each ",
                    "`k` and `v` tile serves half as many rows again and the softmax of two ",
                    "consumers runs under the third's MMAs; under the causal mask two of them, ",
                    "128 rows an item. Built for sm_90a (H100/H200); the family launcher runs ",
                    "it for D ≤ 64 where TMA takes `q`, `k` and `v`."));
        sm90_kernels!($t, HeadsMap, HeadsMap, 384, $narrow, (128, 128, 2, 3, 2), ATTENTION_SMEM,
            $sm90, $sm90_lse,
            concat!("`out = softmax(scale · q · kᵀ [causal]) · v` for ", $tn, " `q` (B, H, ",
                    "S_q, D), `k` and `v` (B, H_kv, S_kv, D) (H_kv dividing H) whose rows are ",
                    "contiguous and 16-byte aligned (TMA), D ≤ 128; `out` (B, H, S_q, D) any ",
                    "strides. Built for sm_90a (H100/H200): see the module documentation."));
        sm90_kernels!($t, HeadsMap, KeysMap64, 384, [], (128, 64, 4, 2, 2), ATTENTION_WIDE_SM90_SMEM,
            $wsm90, $wsm90_lse,
            concat!("[`", stringify!($sm90), "`] for head dimensions up to 256 (Gemma's 256 ",
                    "among them): tiles of 256 columns, 64 keys a tile, two stages of `k` and ",
                    "`v`. Built for sm_90a (H100/H200); the family launcher runs it for ",
                    "D > 128 where TMA takes `q`, `k` and `v`."));
        portable_kernels!($t, [block = 128], $narrow, false, $port, $port_lse,
            concat!("`out = softmax(scale · q · kᵀ [causal]) · v` for ", $tn, " `q` (B, H, ",
                    "S_q, D), `k` and `v` (B, H_kv, S_kv, D) (H_kv dividing H) and `out` (B, H, ",
                    "S_q, D) of any strides, D ≤ 128, on every GPU from sm_80. The family ",
                    "launcher runs it where `", stringify!($sm90), "` cannot."));
        portable_kernels!($t,
            [block = 128, dynamic_shared = u8, shared_bytes = ATTENTION_WIDE_SMEM], [], true,
            $wide, $wide_lse,
            concat!("[`", stringify!($port), "`] for head dimensions up to 256 (Gemma's 256 ",
                    "among them), any strides, on every GPU from sm_80: the same schedule with ",
                    "tiles of 256 columns in dynamic shared memory. The family launcher runs it ",
                    "where no other kernel takes the head dimension."));
    )*};
}

attention_kernels! {
    [require(q.shape[3] <= 64,
             "the head dimension (q.shape[3]) must be at most 64 for this kernel (the `attention` family takes up to 256)"),];
    [require(q.shape[3] <= 128,
             "the head dimension (q.shape[3]) must be at most 128 for this kernel (the `_wide` kernels take up to 256)"),];
    bf16, "bf16": attention_bf16_d64_sm90, attention_lse_bf16_d64_sm90,
        attention_bf16_sm90, attention_lse_bf16_sm90, attention_bf16_wide_sm90,
        attention_lse_bf16_wide_sm90, attention_bf16, attention_lse_bf16,
        attention_bf16_wide, attention_lse_bf16_wide;
    f16, "f16": attention_f16_d64_sm90, attention_lse_f16_d64_sm90,
        attention_f16_sm90, attention_lse_f16_sm90, attention_f16_wide_sm90,
        attention_lse_f16_wide_sm90, attention_f16, attention_lse_f16,
        attention_f16_wide, attention_lse_f16_wide;
}
