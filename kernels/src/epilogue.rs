//! What the `linear` kernels' sums start from and what is done to them before the store:
//! nothing ([`Plain`]: sums from 0, stored as they are), or a bias and an activation
//! ([`BiasAct`]: sums from the bias, the activation applied) — the fused epilogues of
//! `linear_bias*`, so that `gelu(x · wᵀ + b)` is one kernel and one pass over `out`.
//!
//! The bias is the accumulators' initial value rather than an addition before the store:
//! its loads come at the start of a tile, all together, where in the epilogue each would wait
//! behind the stores before it (the compiler cannot move a load of `bias` above a store to
//! `out`, which it cannot prove distinct): measured on an H200, the bias added at the store
//! cost 14 % of an 8192³ GEMM.
//!
//! # Thread model
//!
//! Each thread starts and finishes the accumulators it owns, in registers: no thread reads
//! another's values, no barrier, no shared memory. The bias is read-only global memory for
//! the whole launch (read through the non-coherent path); each thread reads the bias of the
//! columns it holds.

use crate::num::act;
use core::marker::PhantomData;
use ferrocuda_device::half::bf16;
use ferrocuda_device::Slice;

/// What a `linear` kernel's sums start from, and what is done to each before it is stored.
pub trait Epilogue: Copy {
    /// Whether the sums start from [`start`](Self::start) (else from 0).
    const STARTS: bool;
    /// The value the sum of column `col` starts from; `n` is `out`'s column count (`col` may
    /// be past it: then nothing is read).
    fn start(&self, col: u32, n: u32) -> f32;
    /// The value stored for the sum `v`.
    fn finish(&self, v: f32) -> f32;
}

/// The sums as they are: `out = x · wᵀ`.
#[derive(Clone, Copy)]
pub struct Plain;

impl Epilogue for Plain {
    const STARTS: bool = false;
    #[inline(always)]
    fn start(&self, _: u32, _: u32) -> f32 {
        0.0
    }
    #[inline(always)]
    fn finish(&self, v: f32) -> f32 {
        v
    }
}

/// An activation applied in f32.
pub trait Activation: Copy {
    /// `f(v)`.
    fn f(v: f32) -> f32;
}

/// No activation: `out = x · wᵀ + b`.
#[derive(Clone, Copy)]
pub struct Identity;
/// `max(v, 0)` (NaN stays NaN, as PyTorch's `relu`).
#[derive(Clone, Copy)]
pub struct Relu;
/// GELU, exact form ([`act::gelu`]).
#[derive(Clone, Copy)]
pub struct Gelu;
/// GELU, tanh approximation ([`act::gelu_tanh`]).
#[derive(Clone, Copy)]
pub struct GeluTanh;
/// SiLU ([`act::silu`]).
#[derive(Clone, Copy)]
pub struct Silu;

impl Activation for Identity {
    #[inline(always)]
    fn f(v: f32) -> f32 {
        v
    }
}
impl Activation for Relu {
    #[inline(always)]
    fn f(v: f32) -> f32 {
        if v < 0.0 {
            0.0
        } else {
            v
        }
    }
}
impl Activation for Gelu {
    #[inline(always)]
    fn f(v: f32) -> f32 {
        act::gelu(v)
    }
}
impl Activation for GeluTanh {
    #[inline(always)]
    fn f(v: f32) -> f32 {
        act::gelu_tanh(v)
    }
}
impl Activation for Silu {
    #[inline(always)]
    fn f(v: f32) -> f32 {
        act::silu(v)
    }
}

/// `out = A(b + x · wᵀ)`: each sum starts from the bias `b` (bf16, one element per column of
/// `out`: exact in f32), the tensor cores add the products to it, then the activation `A`
/// and the rounding to `out`'s type.
#[derive(Clone, Copy)]
pub struct BiasAct<A: Activation> {
    bias: Slice<bf16>,
    act: PhantomData<A>,
}

impl<A: Activation> BiasAct<A> {
    /// The epilogue of `bias`, whose length is `out`'s column count (the kernels require it).
    #[inline(always)]
    pub fn new(bias: Slice<bf16>) -> Self {
        BiasAct {
            bias,
            act: PhantomData,
        }
    }
}

impl<A: Activation> Epilogue for BiasAct<A> {
    const STARTS: bool = true;
    #[inline(always)]
    fn start(&self, col: u32, n: u32) -> f32 {
        if col < n {
            // SAFETY: `col` is below `n`, the bias's length (required); the bias is not
            // written during the launch (`out` is not the bias: required).
            unsafe { self.bias.get_nc_unchecked(col as usize) }.to_f32()
        } else {
            0.0
        }
    }
    #[inline(always)]
    fn finish(&self, v: f32) -> f32 {
        A::f(v)
    }
}
