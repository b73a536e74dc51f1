//! The fragment types: one per operand and accumulator shape of `mma`, each with its
//! element-to-lane mapping ([`Fragment::coords`]) and its register packing (the formulas of
//! the PTX ISA, with `g = lane / 4` and `t = lane % 4`; see [`frag`](super)).

use super::{byte_of, group, half_of, set_byte, set_half, Fragment, Half16, Int8};
use crate::half::f16;
use core::fmt;
use core::marker::PhantomData;

/// Clone, Copy and Debug for a fragment type with a `regs` field (derive would put bounds on
/// the element marker).
macro_rules! fragment_common {
    ($name:ident $(<$t:ident>)?) => {
        impl$(<$t>)? Clone for $name$(<$t>)? {
            #[inline(always)]
            fn clone(&self) -> Self {
                *self
            }
        }
        impl$(<$t>)? Copy for $name$(<$t>)? {}
        impl$(<$t>)? fmt::Debug for $name$(<$t>)? {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name)).field("regs", &self.regs).finish()
            }
        }
    };
}

/// Operand A of `mma.m16n8k16` (bf16 or f16): a 16×16 matrix, row-major semantics
/// (`.row`); 8 elements per lane in 4 registers of 2.
///
/// Lane `4g + t` holds `a0, a1 = (g, 2t), (g, 2t+1)` in `regs[0]`, `a2, a3 = (g+8, 2t..)`
/// in `regs[1]`, `a4, a5 = (g, 2t+8..)` in `regs[2]`, `a6, a7 = (g+8, 2t+8..)` in `regs[3]`.
/// [`ldmatrix`](FragA16x16::ldmatrix) (`.x4`) of a row-major 16×16 shared tile gives exactly
/// this fragment.
pub struct FragA16x16<T> {
    /// The packed pairs, as `mma` takes them.
    pub regs: [u32; 4],
    _elem: PhantomData<T>,
}

/// Operand B of `mma.m16n8k16` (bf16 or f16): a 16×8 (K×N) matrix, column-major semantics
/// (`.col`); 4 elements per lane in 2 registers of 2.
///
/// Lane `4g + t` holds `b0, b1 = (2t, g), (2t+1, g)` in `regs[0]` and `b2, b3 = (2t+8, g),
/// (2t+9, g)` in `regs[1]`. [`ldmatrix_trans`](FragB16x8::ldmatrix_trans) (`.x2.trans`) of a
/// row-major K×N tile and [`ldmatrix`](FragB16x8::ldmatrix) (`.x2`) of a row-major N×K tile
/// give exactly this fragment.
pub struct FragB16x8<T> {
    /// The packed pairs, as `mma` takes them.
    pub regs: [u32; 2],
    _elem: PhantomData<T>,
}

/// Operand A of `mma.m16n8k8` with TF32 inputs: a 16×8 matrix of `f32` bit patterns (the
/// tensor core reads the sign, the exponent and the upper 10 significand bits); 4 elements
/// per lane, one per register.
///
/// Lane `4g + t` holds `a0 = (g, t)`, `a1 = (g+8, t)`, `a2 = (g, t+4)`, `a3 = (g+8, t+4)`.
#[derive(Clone, Copy, Debug)]
pub struct FragA16x8Tf32 {
    /// The `f32` bits, as `mma` takes them.
    pub regs: [u32; 4],
}

/// Operand B of `mma.m16n8k8` with TF32 inputs: an 8×8 (K×N) matrix; 2 elements per lane.
///
/// Lane `4g + t` holds `b0 = (t, g)` and `b1 = (t+4, g)`.
#[derive(Clone, Copy, Debug)]
pub struct FragB8x8Tf32 {
    /// The `f32` bits, as `mma` takes them.
    pub regs: [u32; 2],
}

/// Operand A of `mma.m16n8k32` (`i8` or `u8`): a 16×32 matrix; 16 elements per lane in 4
/// registers of 4 bytes.
///
/// Lane `4g + t` holds `(g, 4t..4t+4)` in `regs[0]`, `(g+8, 4t..)` in `regs[1]`,
/// `(g, 4t+16..)` in `regs[2]`, `(g+8, 4t+16..)` in `regs[3]`. [`ldmatrix`](FragA16x32::ldmatrix)
/// (`.x4`) of a row-major 16×32 shared tile gives exactly this fragment.
pub struct FragA16x32<T> {
    /// The packed bytes, as `mma` takes them.
    pub regs: [u32; 4],
    _elem: PhantomData<T>,
}

/// Operand B of `mma.m16n8k32` (`i8` or `u8`): a 32×8 (K×N) matrix; 8 elements per lane in
/// 2 registers of 4 bytes.
///
/// Lane `4g + t` holds `(4t..4t+4, g)` in `regs[0]` and `(4t+16.., g)` in `regs[1]`.
/// [`ldmatrix`](FragB32x8::ldmatrix) (`.x2`) of a row-major N×K (8×32) tile gives exactly
/// this fragment.
pub struct FragB32x8<T> {
    /// The packed bytes, as `mma` takes them.
    pub regs: [u32; 2],
    _elem: PhantomData<T>,
}

/// Operand A of `mma.m8n8k4` with `f64` inputs: an 8×4 matrix; one element per lane.
///
/// Lane `4g + t` holds `(g, t)`.
#[derive(Clone, Copy, Debug)]
pub struct FragA8x4F64 {
    /// The element.
    pub regs: [f64; 1],
}

/// Operand B of `mma.m8n8k4` with `f64` inputs: a 4×8 (K×N) matrix; one element per lane.
///
/// Lane `4g + t` holds `(t, g)`.
#[derive(Clone, Copy, Debug)]
pub struct FragB4x8F64 {
    /// The element.
    pub regs: [f64; 1],
}

/// A 16×8 `f32` accumulator (C and D of `mma.m16n8k16` and `mma.m16n8k8`); 4 elements per
/// lane.
///
/// Lane `4g + t` holds `c0, c1 = (g, 2t), (g, 2t+1)` and `c2, c3 = (g+8, 2t), (g+8, 2t+1)`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Acc16x8F32 {
    /// The elements, as `mma` takes them.
    pub regs: [f32; 4],
}

/// A 16×8 `f16` accumulator (C and D of `mma.m16n8k16.f16.f16.f16.f16`); 4 elements per
/// lane in 2 registers of 2.
///
/// The mapping of [`Acc16x8F32`]: `c0, c1` in `regs[0]`, `c2, c3` in `regs[1]`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Acc16x8F16 {
    /// The packed pairs, as `mma` takes them.
    pub regs: [u32; 2],
}

/// A 16×8 `i32` accumulator (C and D of `mma.m16n8k32`); the mapping of [`Acc16x8F32`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Acc16x8I32 {
    /// The elements, as `mma` takes them.
    pub regs: [i32; 4],
}

/// An 8×8 `f64` accumulator (C and D of `mma.m8n8k4`); 2 elements per lane.
///
/// Lane `4g + t` holds `c0, c1 = (g, 2t), (g, 2t+1)`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Acc8x8F64 {
    /// The elements, as `mma` takes them.
    pub regs: [f64; 2],
}

fragment_common!(FragA16x16<T>);
fragment_common!(FragB16x8<T>);
fragment_common!(FragA16x32<T>);
fragment_common!(FragB32x8<T>);

/// `from_regs` for the types with an element marker.
macro_rules! from_regs {
    ($($name:ident: $n:literal;)*) => {$(
        impl<T> $name<T> {
            /// The fragment with these registers.
            #[inline(always)]
            pub const fn from_regs(regs: [u32; $n]) -> Self {
                $name { regs, _elem: PhantomData }
            }
        }
    )*};
}
from_regs! {
    FragA16x16: 4;
    FragB16x8: 2;
    FragA16x32: 4;
    FragB32x8: 2;
}

impl<T: Half16> Fragment for FragA16x16<T> {
    type Elem = T;
    const ROWS: usize = 16;
    const COLS: usize = 16;
    const LEN: usize = 8;
    #[inline(always)]
    fn coords(lane: u32, i: usize) -> (usize, usize) {
        let ((g, t), i) = (group(lane), i % 8);
        (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2))
    }
    #[inline(always)]
    fn get(&self, i: usize) -> T {
        T::__from_bits(half_of(&self.regs, i))
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: T) {
        set_half(&mut self.regs, i, value.__to_bits())
    }
    #[inline(always)]
    fn zeroed() -> Self {
        Self::from_regs([0; 4])
    }
}

impl<T: Half16> Fragment for FragB16x8<T> {
    type Elem = T;
    const ROWS: usize = 16;
    const COLS: usize = 8;
    const LEN: usize = 4;
    #[inline(always)]
    fn coords(lane: u32, i: usize) -> (usize, usize) {
        let ((g, t), i) = (group(lane), i % 4);
        (2 * t + (i & 1) + 8 * (i >> 1), g)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> T {
        T::__from_bits(half_of(&self.regs, i))
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: T) {
        set_half(&mut self.regs, i, value.__to_bits())
    }
    #[inline(always)]
    fn zeroed() -> Self {
        Self::from_regs([0; 2])
    }
}

impl Fragment for FragA16x8Tf32 {
    type Elem = f32;
    const ROWS: usize = 16;
    const COLS: usize = 8;
    const LEN: usize = 4;
    #[inline(always)]
    fn coords(lane: u32, i: usize) -> (usize, usize) {
        let ((g, t), i) = (group(lane), i % 4);
        (g + 8 * (i & 1), t + 4 * (i >> 1))
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f32 {
        f32::from_bits(self.regs[i])
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: f32) {
        self.regs[i] = value.to_bits()
    }
    #[inline(always)]
    fn zeroed() -> Self {
        FragA16x8Tf32 { regs: [0; 4] }
    }
    #[inline(always)]
    fn __from_memory(x: f32) -> f32 {
        crate::mma::to_tf32(x)
    }
}

impl Fragment for FragB8x8Tf32 {
    type Elem = f32;
    const ROWS: usize = 8;
    const COLS: usize = 8;
    const LEN: usize = 2;
    #[inline(always)]
    fn coords(lane: u32, i: usize) -> (usize, usize) {
        let ((g, t), i) = (group(lane), i % 2);
        (t + 4 * i, g)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f32 {
        f32::from_bits(self.regs[i])
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: f32) {
        self.regs[i] = value.to_bits()
    }
    #[inline(always)]
    fn zeroed() -> Self {
        FragB8x8Tf32 { regs: [0; 2] }
    }
    #[inline(always)]
    fn __from_memory(x: f32) -> f32 {
        crate::mma::to_tf32(x)
    }
}

impl<T: Int8> Fragment for FragA16x32<T> {
    type Elem = T;
    const ROWS: usize = 16;
    const COLS: usize = 32;
    const LEN: usize = 16;
    #[inline(always)]
    fn coords(lane: u32, i: usize) -> (usize, usize) {
        let ((g, t), i) = (group(lane), i % 16);
        (g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3))
    }
    #[inline(always)]
    fn get(&self, i: usize) -> T {
        T::__from_bits(byte_of(&self.regs, i))
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: T) {
        set_byte(&mut self.regs, i, value.__to_bits())
    }
    #[inline(always)]
    fn zeroed() -> Self {
        Self::from_regs([0; 4])
    }
}

impl<T: Int8> Fragment for FragB32x8<T> {
    type Elem = T;
    const ROWS: usize = 32;
    const COLS: usize = 8;
    const LEN: usize = 8;
    #[inline(always)]
    fn coords(lane: u32, i: usize) -> (usize, usize) {
        let ((g, t), i) = (group(lane), i % 8);
        (4 * t + (i & 3) + 16 * (i >> 2), g)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> T {
        T::__from_bits(byte_of(&self.regs, i))
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: T) {
        set_byte(&mut self.regs, i, value.__to_bits())
    }
    #[inline(always)]
    fn zeroed() -> Self {
        Self::from_regs([0; 2])
    }
}

impl Fragment for FragA8x4F64 {
    type Elem = f64;
    const ROWS: usize = 8;
    const COLS: usize = 4;
    const LEN: usize = 1;
    #[inline(always)]
    fn coords(lane: u32, _i: usize) -> (usize, usize) {
        group(lane)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f64 {
        self.regs[i]
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: f64) {
        self.regs[i] = value
    }
    #[inline(always)]
    fn zeroed() -> Self {
        FragA8x4F64 { regs: [0.0] }
    }
}

impl Fragment for FragB4x8F64 {
    type Elem = f64;
    const ROWS: usize = 4;
    const COLS: usize = 8;
    const LEN: usize = 1;
    #[inline(always)]
    fn coords(lane: u32, _i: usize) -> (usize, usize) {
        let (g, t) = group(lane);
        (t, g)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f64 {
        self.regs[i]
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: f64) {
        self.regs[i] = value
    }
    #[inline(always)]
    fn zeroed() -> Self {
        FragB4x8F64 { regs: [0.0] }
    }
}

/// The accumulator mapping of `m16n8k*`: `c0, c1 = (g, 2t..)`, `c2, c3 = (g+8, 2t..)`.
#[inline(always)]
const fn acc16x8_coords(lane: u32, i: usize) -> (usize, usize) {
    let ((g, t), i) = (group(lane), i % 4);
    (g + 8 * (i >> 1), 2 * t + (i & 1))
}

impl Fragment for Acc16x8F32 {
    type Elem = f32;
    const ROWS: usize = 16;
    const COLS: usize = 8;
    const LEN: usize = 4;
    #[inline(always)]
    fn coords(lane: u32, i: usize) -> (usize, usize) {
        acc16x8_coords(lane, i)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f32 {
        self.regs[i]
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: f32) {
        self.regs[i] = value
    }
    #[inline(always)]
    fn zeroed() -> Self {
        Acc16x8F32 { regs: [0.0; 4] }
    }
}

impl Fragment for Acc16x8F16 {
    type Elem = f16;
    const ROWS: usize = 16;
    const COLS: usize = 8;
    const LEN: usize = 4;
    #[inline(always)]
    fn coords(lane: u32, i: usize) -> (usize, usize) {
        acc16x8_coords(lane, i)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f16 {
        f16::from_bits(half_of(&self.regs, i))
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: f16) {
        set_half(&mut self.regs, i, value.to_bits())
    }
    #[inline(always)]
    fn zeroed() -> Self {
        Acc16x8F16 { regs: [0; 2] }
    }
}

impl Fragment for Acc16x8I32 {
    type Elem = i32;
    const ROWS: usize = 16;
    const COLS: usize = 8;
    const LEN: usize = 4;
    #[inline(always)]
    fn coords(lane: u32, i: usize) -> (usize, usize) {
        acc16x8_coords(lane, i)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> i32 {
        self.regs[i]
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: i32) {
        self.regs[i] = value
    }
    #[inline(always)]
    fn zeroed() -> Self {
        Acc16x8I32 { regs: [0; 4] }
    }
}

impl Fragment for Acc8x8F64 {
    type Elem = f64;
    const ROWS: usize = 8;
    const COLS: usize = 8;
    const LEN: usize = 2;
    #[inline(always)]
    fn coords(lane: u32, i: usize) -> (usize, usize) {
        let (g, t) = group(lane);
        (g, 2 * t + (i % 2))
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f64 {
        self.regs[i]
    }
    #[inline(always)]
    fn set(&mut self, i: usize, value: f64) {
        self.regs[i] = value
    }
    #[inline(always)]
    fn zeroed() -> Self {
        Acc8x8F64 { regs: [0.0; 2] }
    }
}
