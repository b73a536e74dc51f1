//! `matmul_f32`'s operands as its schedules see them: `A` and `B` by their outer and `k`
//! axes ([`Operand`]), and `C` with `α`, `β` and its stores ([`Out`]).

use crate::prelude::*;
use ferrocuda_device::{View, ViewMut};

/// An operand as the tile loader sees it: `outer` is `m` for `A` and `n` for `B`.
#[derive(Clone, Copy)]
pub(super) struct Operand {
    pub(super) ptr: *const f32,
    /// Element strides along the outer axis and along `k`.
    pub(super) so: isize,
    pub(super) sk: isize,
    /// Extents.
    pub(super) outer: usize,
    pub(super) k: usize,
}

impl Operand {
    /// `A` (M×K) and `B` (K×N) as operands: `A`'s rows and `B`'s columns are their outer
    /// axes, `K` is `A`'s.
    #[inline(always)]
    pub(super) fn of(a: &View<f32, 2>, b: &View<f32, 2>) -> (Operand, Operand) {
        let [m, kk] = a.shape();
        let n = b.shape()[1];
        let ([sa0, sa1], [sb0, sb1]) = (a.indexer().strides, b.indexer().strides);
        let opa = Operand {
            ptr: a.as_ptr(),
            so: sa0,
            sk: sa1,
            outer: m,
            k: kk,
        };
        let opb = Operand {
            ptr: b.as_ptr(),
            so: sb1,
            sk: sb0,
            outer: n,
            k: kk,
        };
        (opa, opb)
    }
}

/// `C` as the tiled schedule writes it: the view, its element strides, `α` and `β`.
pub(super) struct Out {
    pub(super) c: ViewMut<f32, 2>,
    pub(super) s: [isize; 2],
    pub(super) alpha: f32,
    pub(super) beta: f32,
}

impl Out {
    #[inline(always)]
    pub(super) fn new(c: ViewMut<f32, 2>, alpha: f32, beta: f32) -> Out {
        let s = c.indexer().strides;
        Out { c, s, alpha, beta }
    }

    /// Whether `C`'s rows take 16-byte stores: contiguous, a pitch of a multiple of 4, a
    /// 16-byte-aligned base (computed once, before the tiles).
    #[inline(always)]
    pub(super) fn vec(&self) -> bool {
        let [s0, s1] = self.s;
        s1 == 1 && s0 % 4 == 0 && (self.c.as_mut_ptr() as usize).is_multiple_of(16)
    }

    /// `C[row, col + j] = α·v[j] + β·C[row, col + j]` for the `j < 4` with `col + j < n`.
    ///
    /// # Safety
    ///
    /// `row` is a row of `C`; this thread alone owns these elements.
    #[inline(always)]
    pub(super) unsafe fn store_quad(
        &self,
        row: usize,
        col: usize,
        n: usize,
        vec: bool,
        v: [f32; 4],
    ) {
        let ([s0, s1], alpha, beta) = (self.s, self.alpha, self.beta);
        let base = row as isize * s0 + col as isize * s1;
        if vec && col + 4 <= n {
            // SAFETY: 4 in-bounds, contiguous, 16-byte aligned elements (`vec`).
            unsafe {
                let p = self.c.as_mut_ptr().offset(base) as *mut Chunk<f32, 4>;
                let mut out = Chunk(v);
                if beta == 0.0 {
                    // Lane j of the vector from lane j of `v` (and of `old`), as the scalar
                    // path.
                    #[allow(clippy::needless_range_loop)]
                    for j in 0..4 {
                        out.0[j] = alpha * v[j];
                    }
                } else {
                    let old = p.read();
                    #[allow(clippy::needless_range_loop)]
                    for j in 0..4 {
                        out.0[j] = fma(alpha, v[j], beta * old.0[j]);
                    }
                }
                p.write(out);
            }
        } else {
            for (j, &vj) in v.iter().enumerate() {
                if col + j < n {
                    // SAFETY: (row, col + j) is in bounds; this thread alone owns it.
                    unsafe { blend(&self.c, base + j as isize * s1, vj, alpha, beta) };
                }
            }
        }
    }
}

/// `c[off] = α·v + β·c[off]`; `β = 0` does not read `c[off]` (BLAS semantics).
///
/// # Safety
///
/// `off` is the offset of an element of `c` that this thread alone accesses.
#[inline(always)]
unsafe fn blend(c: &ViewMut<f32, 2>, off: isize, v: f32, alpha: f32, beta: f32) {
    // SAFETY: the caller's contract.
    unsafe {
        let y = if beta == 0.0 {
            alpha * v
        } else {
            fma(alpha, v, beta * c.read_at(off))
        };
        c.write_at(off, y);
    }
}
