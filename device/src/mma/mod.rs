//! Warp-level tensor-core matrix multiply-accumulate (`mma.sync.aligned`, sm_80+), its
//! fragments, and the shared-memory matrix moves that feed it (`ldmatrix`; `stmatrix` on
//! sm_90). CUDA C++ spells these `mma.sync` in inline PTX (or `nvcuda::wmma`, whose fragment
//! layout is opaque); here every fragment's layout is explicit and checkable on the host.
//!
//! ```ignore
//! use ferrocuda_device::mma::{self, Acc16x8F32, FragA16x16, FragB16x8, Fragment};
//! let a = FragA16x16::<bf16>::ldmatrix(a_tile, 16 * wm, kk);     // ldmatrix .x4
//! let b = FragB16x8::<bf16>::ldmatrix_trans(b_tile, kk, 8 * wn); // ldmatrix .x2.trans
//! acc = mma::mma(a, b, acc);                                      // mma.sync m16n8k16 bf16
//! unsafe { acc.store_slice(c, row0, col0, n) };
//! ```
//!
//! (The whole kernel, a tiled GEMM: `docs/writing-kernels.md`, "Tensor cores".)
//!
//! # The operations
//!
//! | shape | A × B | accumulator | fragments | instruction |
//! | --- | --- | --- | --- | --- |
//! | m16n8k16 | bf16 × bf16 | f32 | [`FragA16x16<bf16>`](FragA16x16), [`FragB16x8<bf16>`](FragB16x8), [`Acc16x8F32`] | `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` |
//! | m16n8k16 | f16 × f16 | f32 | [`FragA16x16<f16>`](FragA16x16), [`FragB16x8<f16>`](FragB16x8), [`Acc16x8F32`] | `….f32.f16.f16.f32` |
//! | m16n8k16 | f16 × f16 | f16 | as above, [`Acc16x8F16`] | `….f16.f16.f16.f16` |
//! | m16n8k8 | tf32 × tf32 | f32 | [`FragA16x8Tf32`], [`FragB8x8Tf32`], [`Acc16x8F32`] | `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` |
//! | m16n8k32 | {i8, u8} × {i8, u8} | i32 | [`FragA16x32<T>`](FragA16x32), [`FragB32x8<T>`](FragB32x8), [`Acc16x8I32`] | `mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32` (`.u8`, mixed) |
//! | m8n8k4 | f64 × f64 | f64 | [`FragA8x4F64`], [`FragB4x8F64`], [`Acc8x8F64`] | `mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64` |
//!
//! [`mma(a, b, c)`](mma()) (or `c.mma(a, b)`, trait [`Mma`]) computes `D = A·B + C` for one
//! warp: A is M×K (row-major semantics, `.row`), B is K×N (`.col`), C and D are M×N. The
//! integer forms wrap on overflow (no `.satfinite`). sm_80 and newer; every shape here runs on
//! the A100 and the H100 (the H100's fastest path, `wgmma`, is not in this module).
//!
//! **Numerics.** bf16, f16 and tf32 products are exact in `f32`; the `f32` accumulation is "at
//! least single precision" (PTX ISA) in an unspecified order — bound a K-term dot product by
//! `K · 2⁻²³ · Σ|aᵢbᵢ|` (truncating alignment inside the unit, not only round-to-nearest).
//! TF32 operands are `f32` bit patterns of which the tensor core reads the sign, the
//! exponent and the top 10 significand bits: round them first with [`to_tf32`]
//! (`cvt.rna.tf32.f32`, to nearest, ties away from zero), as the `load_*` methods of the TF32
//! fragments do. `f64` is IEEE arithmetic. i8/u8 sums are exact (modulo 2³²).
//!
//! # Fragments: who holds which element
//!
//! A fragment is one lane's registers of a matrix spread over the warp. With `g = lane / 4`
//! (PTX's `groupID`) and `t = lane % 4` (`threadID_in_group`), element `i` of lane `lane` is
//! matrix element [`coords(lane, i)`](Fragment::coords) — the PTX ISA's "Matrix fragments
//! for mma.m16n8k16 / m16n8k8 / m16n8k32 / m8n8k4" tables:
//!
//! | fragment | matrix | per lane | lane `4g + t` holds, element `i` → (row, col) |
//! | --- | --- | --- | --- |
//! | [`FragA16x16`] (16-bit) | 16×16 | 8 in 4 regs | `(g + 8·(i/2 % 2), 2t + i%2 + 8·(i/4))` |
//! | [`FragB16x8`] (16-bit) | 16×8 | 4 in 2 regs | `(2t + i%2 + 8·(i/2), g)` |
//! | [`FragA16x8Tf32`] | 16×8 | 4 | `(g + 8·(i%2), t + 4·(i/2))` |
//! | [`FragB8x8Tf32`] | 8×8 | 2 | `(t + 4i, g)` |
//! | [`FragA16x32`] (8-bit) | 16×32 | 16 in 4 regs | `(g + 8·(i/4 % 2), 4t + i%4 + 16·(i/8))` |
//! | [`FragB32x8`] (8-bit) | 32×8 | 8 in 2 regs | `(4t + i%4 + 16·(i/4), g)` |
//! | [`FragA8x4F64`] | 8×4 | 1 | `(g, t)` |
//! | [`FragB4x8F64`] | 4×8 | 1 | `(t, g)` |
//! | [`Acc16x8F32`], [`Acc16x8F16`], [`Acc16x8I32`] | 16×8 | 4 | `(g + 8·(i/2), 2t + i%2)` |
//! | [`Acc8x8F64`] | 8×8 | 2 | `(g, 2t + i)` |
//!
//! Packed elements are low to high: element `i` of a 16-bit fragment is bits `16·(i%2)..` of
//! `regs[i/2]`, of an 8-bit one bits `8·(i%4)..` of `regs[i/4]`. [`Fragment`] gives
//! `coords`, `get`/`set`, [`from_fn`](Fragment::from_fn) (build this lane's fragment from a
//! function of `(row, col)`) and [`for_each`](Fragment::for_each), on the host too (the unit
//! tests check that each mapping is a bijection and is the PTX ISA's formula), and on the
//! device loads and stores through the mapping: `load_shared`, `load_slice`, `load_view`,
//! `store_shared`, `store_slice`, `store_view`.
//!
//! # `ldmatrix`: fragments straight from shared memory
//!
//! `ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16` ([`ldmatrix_x4`] …) loads one,
//! two or four 8×8 matrices of 16-bit elements: lane `8j + r` gives the address of row `r`
//! of matrix `j` (16 contiguous bytes, 16-byte aligned), and lane `l` receives in register
//! `j` row `l / 4`, columns `2(l%4), 2(l%4)+1` of matrix `j` (with `.trans`: column `l / 4`,
//! rows `2(l%4), 2(l%4)+1`). That is the mma layouts' building block, so:
//!
//! * `.x4` of a row-major 16×16 tile of bf16/f16, lane `l` addressing row `l % 16`, column
//!   `8·(l/16)`, gives exactly [`FragA16x16`] ([`FragA16x16::ldmatrix`]); the same addresses
//!   over 32 bytes per row give [`FragA16x32`] (8-bit, [`FragA16x32::ldmatrix`]) and
//!   [`FragA16x8Tf32`] ([`FragA16x8Tf32::ldmatrix`]);
//! * `.x2.trans` of a row-major K×N (16×8) tile gives [`FragB16x8`]
//!   ([`FragB16x8::ldmatrix_trans`]); `.x2` of a row-major N×K tile (B column-major) gives it
//!   too ([`FragB16x8::ldmatrix`]), and likewise [`FragB32x8`] and [`FragB8x8Tf32`] from N×K
//!   tiles (bytes and 32-bit words cannot be transposed by a 16-bit `.trans`);
//! * [`stmatrix_x4`] … (sm_90) store the same layouts back: [`FragA16x16::stmatrix`],
//!   [`FragB16x8::stmatrix_trans`], [`Acc16x8F16::stmatrix`].
//!
//! The fragment-level forms check that the tile lies in the array and that each row address
//! is 16-byte aligned (else the kernel aborts with the location recorded); declare tiles
//! with `shared_array!(T, [R, C], align = 16)` and rows of a multiple of 16 bytes (pad with
//! 8 bf16 to spread banks: `[64, 24]` for a 64×16 tile). The raw forms take a 32-bit shared
//! address ([`SharedArray2::shared_addr`](crate::shared::SharedArray2::shared_addr),
//! [`shared_addr_of`](crate::shared::shared_addr_of)) and are `unsafe`.
//!
//! # Thread model
//!
//! **Who participates.** `mma.sync.aligned`, `ldmatrix` and `stmatrix` are warp-collective
//! and `.aligned`: all 32 lanes of the warp execute the same instruction together, each with
//! its own fragment (or row address). Never call them under a condition that differs between
//! lanes of a warp, after some lanes returned, or in the partial last warp of a block whose
//! size is not a multiple of 32; conditions that are the same for the whole warp (a warp
//! index, a loop counter, a kernel parameter) are fine. A violation is undefined in PTX: wrong
//! values or a hang. The warp's lanes need not be converged before the call; the instruction
//! converges them (`.sync`). The fragment-level functions are safe, as the crate's other warp
//! collectives ([`shfl_sync`](crate::warp::shfl_sync), …) are: breaking the convergence
//! contract gives undefined values, never a write to memory; the stores (`stmatrix`, the
//! `store_*` methods) and the raw `ldmatrix` forms are `unsafe` for their memory contracts. A
//! `Warp` token would not help: every lane would hold one, and holding it says nothing
//! about which lanes arrive together.
//!
//! **Ordering.** `mma` reads and writes registers only and orders no memory access.
//! `ldmatrix` reads shared memory and `stmatrix` writes it, as a load or store by each lane
//! would: a [`sync_threads`](crate::thread::sync_threads) (or [`sync_warp`](crate::warp::sync_warp)
//! when the writer and the reader are lanes of one warp) must separate a thread's writes of a
//! tile from another thread's `ldmatrix` of it, and the `ldmatrix` from the next overwrite.
//!
//! **What the compiler knows.** The mma functions are LLVM's NVVM intrinsics
//! (`llvm.nvvm.mma.*`): LLVM declares them `memory(none)`, neither `willreturn` (an unused
//! one is kept) nor `speculatable` (none is executed on a path that would not execute it),
//! and — unlike the shuffles — not `convergent`.
//! `ldmatrix`/`stmatrix` are `asm!` (their intrinsics take address-space-3 pointers, which
//! Rust cannot name), volatile (not `pure`: never removed, merged or reordered with other
//! side effects), and not convergent
//! either: rustc marks GPU functions convergent but not calls of `asm!` or of non-convergent
//! intrinsics. What LLVM may still do to a non-convergent instruction is *duplicate* it into
//! the arms of a branch (jump threading, tail duplication, loop unswitching on a condition),
//! which is harmless when the condition is the same for the whole warp and wrong when it is
//! lane-dependent. Keep lane-dependent branches out of the loops and blocks that contain
//! these calls (compute masked values with `if`-expressions that LLVM turns into selects; a
//! loop that contains a [`sync_threads`](crate::thread::sync_threads), a convergent call, is
//! never unswitched); check the PTX of a new kernel (`mma.sync` and `ldmatrix` outside
//! thread-dependent branches, as many as in the source). The PTX tests count each test
//! kernel's `mma.sync` and `ldmatrix` against its source.

mod frag;
#[cfg(target_arch = "nvptx64")]
mod ldmatrix;
#[cfg(target_arch = "nvptx64")]
mod ops;

pub use frag::{
    Acc16x8F16, Acc16x8F32, Acc16x8I32, Acc8x8F64, FragA16x16, FragA16x32, FragA16x8Tf32,
    FragA8x4F64, FragB16x8, FragB32x8, FragB4x8F64, FragB8x8Tf32, Fragment, Half16, Int8,
};
#[cfg(target_arch = "nvptx64")]
pub use ldmatrix::{
    ldmatrix_x1, ldmatrix_x1_trans, ldmatrix_x2, ldmatrix_x2_trans, ldmatrix_x4, ldmatrix_x4_trans,
};
#[cfg(target_arch = "nvptx64")]
pub use ldmatrix::{
    stmatrix_x1, stmatrix_x1_trans, stmatrix_x2, stmatrix_x2_trans, stmatrix_x4, stmatrix_x4_trans,
};
#[cfg(target_arch = "nvptx64")]
pub use ops::{mma, Mma};

/// `x` rounded to TF32 — 10 significand bits — to nearest, ties away from zero, as an `f32`
/// whose low 13 significand bits are zero (`cvt.rna.tf32.f32` on the device; the same
/// rounding in software on the host, for references). A finite value past the largest TF32
/// value becomes infinity; infinities stay; for a NaN the result is unspecified (the host
/// returns it unchanged).
#[inline(always)]
pub fn to_tf32(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: a register-only conversion of sm_80.
        f32::from_bits(unsafe { crate::nvvm::f2tf32_rna(x) })
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        if x.is_nan() {
            return x;
        }
        let bits = x.to_bits();
        // Adding half an ulp of TF32 to the magnitude rounds it half away from zero; the
        // carry may run into the exponent (and up to infinity), which is the right result.
        let round = if x.is_finite() { 0x1000 } else { 0 };
        f32::from_bits((bits + round) & !0x1FFF)
    }
}

#[cfg(test)]
mod tests {
    use super::to_tf32;

    #[test]
    fn tf32_rounds_to_nearest_ties_away() {
        let ulp = 2f32.powi(-10);
        assert_eq!(to_tf32(1.0), 1.0);
        assert_eq!(to_tf32(1.0 + ulp / 2.0), 1.0 + ulp); // tie: away from zero
        assert_eq!(to_tf32(-(1.0 + ulp / 2.0)), -(1.0 + ulp));
        assert_eq!(to_tf32(1.0 + ulp / 2.0 - f32::EPSILON), 1.0);
        assert_eq!(to_tf32(1.0 + ulp * 0.75), 1.0 + ulp);
        assert_eq!(to_tf32(f32::MAX), f32::INFINITY);
        assert_eq!(to_tf32(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert_eq!(to_tf32(-0.0).to_bits(), (-0.0f32).to_bits());
        // A subnormal: the same 13 bits go.
        assert_eq!(to_tf32(f32::from_bits(0x0000_1FFF)).to_bits(), 0x0000_2000);
        assert!(to_tf32(f32::NAN).is_nan());
        for bits in (0..u32::MAX).step_by(997) {
            let x = f32::from_bits(bits);
            if x.is_finite() {
                let r = to_tf32(x);
                assert_eq!(r.to_bits() & 0x1FFF, 0);
                // Nearest: no TF32 value is closer.
                let d = (r as f64 - x as f64).abs();
                let spacing = f64::from(f32::from_bits((bits & !0x1FFF) + 0x2000))
                    - f64::from(f32::from_bits(bits & !0x1FFF));
                assert!(
                    r.is_infinite() || d <= spacing.abs() / 2.0,
                    "{x:e} -> {r:e}"
                );
            }
        }
    }
}
