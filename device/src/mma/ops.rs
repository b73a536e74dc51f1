//! `mma.sync.aligned` for each operand combination (device only).

use super::frag::{
    Acc16x8F16, Acc16x8F32, Acc16x8I32, Acc8x8F64, FragA16x16, FragA16x32, FragA16x8Tf32,
    FragA8x4F64, FragB16x8, FragB32x8, FragB4x8F64, FragB8x8Tf32, Half16, Int8,
};
use crate::half::f16;
use crate::nvvm;
use core::arch::nvptx::f16x2;

/// An accumulator that `mma.sync` can update with operands `A` and `B`: `D = A·B + self`.
///
/// | A | B | accumulator | instruction |
/// | --- | --- | --- | --- |
/// | [`FragA16x16<bf16>`] | [`FragB16x8<bf16>`] | [`Acc16x8F32`] | `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` |
/// | [`FragA16x16<f16>`] | [`FragB16x8<f16>`] | [`Acc16x8F32`] | `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` |
/// | [`FragA16x16<f16>`] | [`FragB16x8<f16>`] | [`Acc16x8F16`] | `mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16` |
/// | [`FragA16x8Tf32`] | [`FragB8x8Tf32`] | [`Acc16x8F32`] | `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` |
/// | [`FragA16x32<i8/u8>`](FragA16x32) | [`FragB32x8<i8/u8>`](FragB32x8) | [`Acc16x8I32`] | `mma.sync.aligned.m16n8k32.row.col.s32.{s8,u8}.{s8,u8}.s32` |
/// | [`FragA8x4F64`] | [`FragB4x8F64`] | [`Acc8x8F64`] | `mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64` |
///
/// [`FragA16x16<bf16>`]: FragA16x16
/// [`FragA16x16<f16>`]: FragA16x16
/// [`FragB16x8<bf16>`]: FragB16x8
/// [`FragB16x8<f16>`]: FragB16x8
///
/// Every lane of the warp must call it together (see [the thread model](super)).
pub trait Mma<A, B>: Sized {
    /// `A·B + self` (`mma.sync.aligned`).
    fn mma(self, a: A, b: B) -> Self;
}

/// `D = A·B + C` on the tensor cores (`mma.sync.aligned`; the operand types choose the
/// instruction: see [`Mma`]). Every lane of the warp must call it together, with its own
/// fragments (see [the thread model](super)).
#[inline(always)]
pub fn mma<A, B, C: Mma<A, B>>(a: A, b: B, c: C) -> C {
    c.mma(a, b)
}

#[inline(always)]
fn h2(x: u32) -> f16x2 {
    // SAFETY: `f16x2` is two `f16` in 4 bytes, every bit pattern a value.
    unsafe { core::mem::transmute::<u32, f16x2>(x) }
}

#[inline(always)]
fn bits(x: f16x2) -> u32 {
    // SAFETY: as in `h2`.
    unsafe { core::mem::transmute::<f16x2, u32>(x) }
}

// The intrinsic calls below: `mma.sync` reads and writes registers only; the convergence
// contract (the whole warp executes the call) is documented at the module level, as for the
// warp collectives, and breaking it gives undefined values, not undefined memory accesses.

impl<T: Half16> Mma<FragA16x16<T>, FragB16x8<T>> for Acc16x8F32 {
    #[inline(always)]
    fn mma(self, a: FragA16x16<T>, b: FragB16x8<T>) -> Self {
        let ([a0, a1, a2, a3], [b0, b1], [c0, c1, c2, c3]) = (a.regs, b.regs, self.regs);
        let d = if T::BF16 {
            // SAFETY: registers only (see above).
            unsafe { nvvm::mma_m16n8k16_bf16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3) }
        } else {
            // SAFETY: registers only (see above).
            unsafe {
                nvvm::mma_m16n8k16_f16_f32(
                    h2(a0),
                    h2(a1),
                    h2(a2),
                    h2(a3),
                    h2(b0),
                    h2(b1),
                    c0,
                    c1,
                    c2,
                    c3,
                )
            }
        };
        Acc16x8F32 {
            regs: [d.0, d.1, d.2, d.3],
        }
    }
}

impl Mma<FragA16x16<f16>, FragB16x8<f16>> for Acc16x8F16 {
    #[inline(always)]
    fn mma(self, a: FragA16x16<f16>, b: FragB16x8<f16>) -> Self {
        let ([a0, a1, a2, a3], [b0, b1], [c0, c1]) = (a.regs, b.regs, self.regs);
        // SAFETY: registers only (see above).
        let d = unsafe {
            nvvm::mma_m16n8k16_f16_f16(
                h2(a0),
                h2(a1),
                h2(a2),
                h2(a3),
                h2(b0),
                h2(b1),
                h2(c0),
                h2(c1),
            )
        };
        Acc16x8F16 {
            regs: [bits(d.0), bits(d.1)],
        }
    }
}

impl Mma<FragA16x8Tf32, FragB8x8Tf32> for Acc16x8F32 {
    #[inline(always)]
    fn mma(self, a: FragA16x8Tf32, b: FragB8x8Tf32) -> Self {
        let ([a0, a1, a2, a3], [b0, b1], [c0, c1, c2, c3]) = (a.regs, b.regs, self.regs);
        // SAFETY: registers only (see above).
        let d = unsafe { nvvm::mma_m16n8k8_tf32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3) };
        Acc16x8F32 {
            regs: [d.0, d.1, d.2, d.3],
        }
    }
}

impl<TA: Int8, TB: Int8> Mma<FragA16x32<TA>, FragB32x8<TB>> for Acc16x8I32 {
    #[inline(always)]
    fn mma(self, a: FragA16x32<TA>, b: FragB32x8<TB>) -> Self {
        let ([a0, a1, a2, a3], [b0, b1], [c0, c1, c2, c3]) = (a.regs, b.regs, self.regs);
        // SAFETY: registers only (see above).
        let d = unsafe {
            match (TA::SIGNED, TB::SIGNED) {
                (true, true) => nvvm::mma_m16n8k32_s8(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3),
                (false, false) => nvvm::mma_m16n8k32_u8(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3),
                (true, false) => nvvm::mma_m16n8k32_s8_u8(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3),
                (false, true) => nvvm::mma_m16n8k32_u8_s8(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3),
            }
        };
        Acc16x8I32 {
            regs: [d.0, d.1, d.2, d.3],
        }
    }
}

impl Mma<FragA8x4F64, FragB4x8F64> for Acc8x8F64 {
    #[inline(always)]
    fn mma(self, a: FragA8x4F64, b: FragB4x8F64) -> Self {
        let [c0, c1] = self.regs;
        // SAFETY: registers only (see above).
        let d = unsafe { nvvm::mma_m8n8k4_f64(a.regs[0], b.regs[0], c0, c1) };
        Acc8x8F64 { regs: [d.0, d.1] }
    }
}
