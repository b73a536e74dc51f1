//! What the `linear` kernels do to each pair of f32 sums between the tensor cores and the
//! store: nothing ([`Plain`]), or add a bias and apply an activation ([`BiasAct`]) — the
//! fused epilogues of `linear_bias*`, so that `gelu(x · wᵀ + b)` is one kernel and one pass
//! over `out`.
//!
//! # Thread model
//!
//! Each thread applies the epilogue to the accumulators it owns, after its last `mma` and
//! before its store, in registers: no thread reads another's values, no barrier, no shared
//! memory. The bias is read-only global memory for the whole launch (read through the
//! non-coherent path); each thread reads the bias of the columns it stores.

use crate::num::act;
use core::marker::PhantomData;
use ferrocuda_device::half::{bf16, bf16x2, f16, f16x2};
use ferrocuda_device::{Slice, ViewMut};

/// Applied to the sums of columns `col` and `col + 1` of one row before they are stored.
pub trait Epilogue: Copy {
    /// What a column pair needs (loaded once per pair, shared by the rows a thread holds).
    type Col: Copy;
    /// Loads what columns `col` and `col + 1` need; `n` is `out`'s column count (`col` may be
    /// past it: then nothing is read).
    fn col(&self, col: u32, n: u32) -> Self::Col;
    /// The values to store for the sums `v0` (column `col`) and `v1` (`col + 1`).
    fn apply(&self, c: Self::Col, v0: f32, v1: f32) -> (f32, f32);
    /// What [`col`](Self::col) gives for the 32 column pairs `col0 + q + 8 i`, `i` in
    /// `0 .. 32`, that one thread holds of the 256-column slice from column `col0` in the
    /// wgmma accumulator layout (`q = 2 (t % 4)`), loaded together: the sm_90a `linear`
    /// issues these loads before it waits for a tile's last MMAs, so that they arrive under
    /// them, not after them. (Read by the sm_90a part only.)
    type Cols: Copy;
    /// Loads [`Cols`](Self::Cols) of the slice from column `col0` (a multiple of 8) for the
    /// thread whose pairs start at `q` (0, 2, 4 or 6); `n` is `out`'s column count (columns
    /// past it read nothing).
    #[cfg_attr(not(ferrocuda_arch = "sm_90a"), allow(dead_code))]
    fn cols(&self, col0: u32, q: u32, n: u32) -> Self::Cols;
    /// Entry `i` of `cols`, as [`col`](Self::col) gives it.
    #[cfg_attr(not(ferrocuda_arch = "sm_90a"), allow(dead_code))]
    fn col_at(cols: &Self::Cols, i: u32) -> Self::Col;
}

/// The sums as they are: `out = x · wᵀ`.
#[derive(Clone, Copy)]
pub struct Plain;

impl Epilogue for Plain {
    type Col = ();
    type Cols = ();
    #[inline(always)]
    fn col(&self, _: u32, _: u32) {}
    #[inline(always)]
    fn cols(&self, _: u32, _: u32, _: u32) {}
    #[inline(always)]
    fn col_at(_: &(), _: u32) {}
    #[inline(always)]
    fn apply(&self, _: (), v0: f32, v1: f32) -> (f32, f32) {
        (v0, v1)
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
/// GELU, exact form, through a short normal tail ([`act::gelu_fast`]: within `5·10⁻⁷ |x|`,
/// far below the bf16 output's rounding).
#[derive(Clone, Copy)]
pub struct Gelu;
/// GELU, tanh approximation ([`act::gelu_tanh_fast`]: `x · σ(2u)`, no `tanhf`).
#[derive(Clone, Copy)]
pub struct GeluTanh;
/// SiLU ([`act::silu_fast`]: no IEEE division).
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
        act::gelu_fast(v)
    }
}
impl Activation for GeluTanh {
    #[inline(always)]
    fn f(v: f32) -> f32 {
        act::gelu_tanh_fast(v)
    }
}
impl Activation for Silu {
    #[inline(always)]
    fn f(v: f32) -> f32 {
        act::silu_fast(v)
    }
}

/// `out = A(x · wᵀ + b)`: the bf16 bias `b` (one element per column of `out`) added in f32
/// (exact: a bf16 is an f32), then the activation `A`, then the rounding to `out`'s type.
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

    /// The bits of the bias at column `i`, 0 past `n` (the bias's length: required).
    #[inline(always)]
    fn bits(&self, i: u32, n: u32) -> u32 {
        if i < n {
            // SAFETY: `i` is below `n`, the bias's length; the bias is not written during the
            // launch (`out` is not the bias: required where the types agree).
            unsafe { self.bias.get_nc_unchecked(i as usize) }.to_bits() as u32
        } else {
            0
        }
    }
}

/// The two f32 values of a bf16 pair's bits (`lo` the lower address).
#[inline(always)]
fn unpack(b: u32) -> (f32, f32) {
    (f32::from_bits(b << 16), f32::from_bits(b & 0xffff_0000))
}

impl<A: Activation> Epilogue for BiasAct<A> {
    type Col = (f32, f32);
    /// The bias pairs as bf16 bits (32 registers, not 64).
    type Cols = [u32; 32];
    #[inline(always)]
    fn col(&self, col: u32, n: u32) -> (f32, f32) {
        unpack(self.bits(col, n) | self.bits(col + 1, n) << 16)
    }
    #[inline(always)]
    fn apply(&self, (b0, b1): (f32, f32), v0: f32, v1: f32) -> (f32, f32) {
        (A::f(v0 + b0), A::f(v1 + b1))
    }
    #[inline(always)]
    // `unroll!` writes I out as each literal, 0 included.
    #[allow(clippy::erasing_op, clippy::identity_op)]
    fn cols(&self, col0: u32, q: u32, n: u32) -> [u32; 32] {
        let mut c = [0u32; 32];
        let p = self.bias.as_ptr();
        let first = col0 + q;
        // The same branch for every thread of the warpgroup (the slice's columns, not the
        // thread's): it ends before a `.sync.aligned` wait.
        if (p as usize).is_multiple_of(4) && n.saturating_sub(col0) >= 256 {
            ferrocuda_device::unroll!(I in 0..32 {
                // SAFETY: columns `first + 8 I` and the next lie inside the bias (the whole
                // slice does: checked); 4-byte aligned (an aligned base, an even column);
                // read-only for the launch (as `bits`).
                c[I] = unsafe {
                    ferrocuda_device::space::global_nc(p.add((first + 8 * I) as usize).cast::<u32>())
                        .read()
                };
            });
        } else {
            ferrocuda_device::unroll!(I in 0..32 {
                c[I] = self.bits(first + 8 * I, n) | self.bits(first + 8 * I + 1, n) << 16;
            });
        }
        c
    }
    #[inline(always)]
    fn col_at(cols: &[u32; 32], i: u32) -> (f32, f32) {
        unpack(cols[i as usize])
    }
}

/// Whether every even column of `out` starts an aligned pair that one store may write
/// ([`store_pair`]): unit column stride, an even row stride, the first element aligned to two.
#[inline(always)]
pub(crate) fn pair_stores<T: OutElem>(out: &ViewMut<T, 2>) -> bool {
    let [s0, s1] = out.indexer().strides;
    s1 == 1
        && s0 % 2 == 0
        && (out.as_mut_ptr() as usize).is_multiple_of(2 * core::mem::size_of::<T>())
}

/// Stores `v0`, `v1` at `out[row, col]`, `out[row, col + 1]`, the part inside `out` (`m` ×
/// `n`): one store where `pairs` ([`pair_stores`] of `out`) and both columns exist, else
/// element by element at any strides.
///
/// # Safety
///
/// This thread alone accesses those elements; `col` is even; `m`, `n` are `out`'s extents.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn store_pair<T: OutElem>(
    out: ViewMut<T, 2>,
    (m, n): (u32, u32),
    pairs: bool,
    row: u32,
    col: u32,
    v0: f32,
    v1: f32,
) {
    if row >= m || col >= n {
        return;
    }
    let [s0, s1] = out.indexer().strides;
    let at = row as isize * s0 + col as isize * s1;
    // SAFETY: (row, col) and, where written, (row, col + 1) are inside `out`; alignment from
    // `pairs` (an even column); exclusivity is the caller's.
    unsafe {
        if pairs && col + 1 < n {
            T::write_pair(out.as_mut_ptr().offset(at), v0, v1);
        } else {
            out.write_at(at, T::from_acc(v0));
            if col + 1 < n {
                out.write_at(at + s1, T::from_acc(v1));
            }
        }
    }
}

/// What `out` holds: `f32`, or `bf16`/`f16` rounded from the f32 sums (to nearest, ties to
/// even), and how a pair of adjacent columns is written in one store.
pub trait OutElem: Copy + ferrocuda_device::Element {
    /// `v` as stored.
    fn from_acc(v: f32) -> Self;
    /// Writes `v0`, `v1` at `p`, `p + 1` in one store.
    ///
    /// # Safety
    ///
    /// `p` and `p + 1` are elements of `out` that this thread alone accesses, `p` aligned
    /// to two elements.
    unsafe fn write_pair(p: *mut Self, v0: f32, v1: f32);
}

/// Two `f32`, 8-byte aligned (one `st.global.v2.f32`).
#[repr(C, align(8))]
struct F32x2([f32; 2]);

impl OutElem for f32 {
    #[inline(always)]
    fn from_acc(v: f32) -> f32 {
        v
    }
    #[inline(always)]
    unsafe fn write_pair(p: *mut f32, v0: f32, v1: f32) {
        // SAFETY: the caller's contract.
        unsafe { p.cast::<F32x2>().write(F32x2([v0, v1])) }
    }
}

impl OutElem for bf16 {
    #[inline(always)]
    fn from_acc(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
    #[inline(always)]
    unsafe fn write_pair(p: *mut bf16, v0: f32, v1: f32) {
        // SAFETY: the caller's contract (4 aligned bytes).
        unsafe { p.cast::<u32>().write(bf16x2::from_f32s(v0, v1).to_bits()) }
    }
}

impl OutElem for f16 {
    #[inline(always)]
    fn from_acc(v: f32) -> f16 {
        v as f16
    }
    #[inline(always)]
    unsafe fn write_pair(p: *mut f16, v0: f32, v1: f32) {
        // SAFETY: the caller's contract (4 aligned bytes).
        unsafe { p.cast::<u32>().write(f16x2::from_f32s(v0, v1).to_bits()) }
    }
}
