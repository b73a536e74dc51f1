//! Hopper warpgroup matrix multiply-accumulate (`wgmma.mma_async`, sm_90a): shared-memory
//! matrix descriptors with their swizzle modes, the accumulator fragment's element-to-thread
//! mapping, and the fence / commit / wait protocol.
//!
//! | CUDA C++ / CUTLASS | here |
//! | --- | --- |
//! | `GmmaDescriptor` (`cute::GMMA::make_gmma_desc`) | [`MatrixDesc::new`] (checked), [`MatrixDesc::advance`] |
//! | `cute::GMMA::Layout_K_SW128_Atom<T>` … | [`Swizzle`], [`Swizzle::offset`] (where element (row, byte) of a tile lives) |
//! | `warpgroup_arrive()` (`wgmma.fence`) | [`fence`] |
//! | `wgmma.mma_async…m64n128k16.f32.bf16.bf16` | [`mma_bf16::<128>`](mma_bf16) (`N` = 8 … 256 in steps of 8) |
//! | the same with A from registers, B N-major (`imm-trans-b` 1) | [`mma_bf16_rs_nb`], descriptor [`MatrixDesc::n_major`] |
//! | `warpgroup_commit_batch()` / `warpgroup_wait<N>()` | [`commit_group`] / [`wait_group`] |
//! | `warpgroup_fence_operand(acc)` | [`fence_operand`] |
//! | `cutlass::arch::warpgroup_reg_alloc<N>()` / `_dealloc` | [`setmaxnreg_inc`] / [`setmaxnreg_dec`] |
//! | `fence.proxy.async.shared::cta` | [`fence_proxy_async_shared`] |
//!
//! Build kernels that use this module for `sm_90a`: `#[kernel(arch = "sm_90a")]` (the
//! builder refuses `wgmma` in a module of any other target, naming the kernel).
//!
//! # Thread model
//!
//! A **warpgroup** is four consecutive warps of a block whose first warp's index is a multiple
//! of four (threads `128 g .. 128 g + 127`). Every `wgmma` instruction here is `.sync.aligned`:
//! **all 128 threads of the warpgroup execute it**, with the same operands where the operand
//! is uniform (descriptors, `scale_d`), in convergent control flow — never in a branch that
//! only some of them take. The safe-looking wrappers are `unsafe` for this reason (and for
//! the shared-memory contents a descriptor points at, which nothing here can check).
//!
//! `mma_async` is **asynchronous**: it reads the shared-memory operands and reads/writes the
//! accumulator registers after the instruction issues. The protocol, as in CUTLASS:
//!
//! 1. Shared memory written by ordinary stores (`st.shared`, the *generic proxy*) must be made
//!    visible to the *async proxy* that wgmma reads with: [`fence_proxy_async_shared`] after
//!    the stores (and a block barrier, so other threads' stores are included). Data a TMA
//!    copy wrote (the async proxy itself) needs no proxy fence: its mbarrier wait suffices.
//! 2. [`fence`] before the first `mma_async` of a batch (and whenever the accumulator
//!    registers were touched by other instructions since the last wait): it orders prior
//!    register accesses before the asynchronous ones.
//! 3. Any number of `mma_async` into the same accumulator (each `scale_d = true` accumulates;
//!    `false` overwrites — the first k-step of a tile).
//! 4. [`commit_group`] closes the batch; [`wait_group::<N>`](wait_group) blocks until at most
//!    `N` batches are pending. Only after a wait that covers a batch may the accumulators be
//!    read, or the shared memory it reads be overwritten.
//!
//! Between (3) and (4) the accumulator registers belong to the hardware: the code generator
//! must not move or copy them. [`fence_operand`] (an empty `asm!` that claims to read and write
//! every accumulator) pins them before the fence and after the wait, which is how CUTLASS
//! keeps the compiler from scheduling accumulator accesses into the asynchronous window.
//!
//! What the builder checks of this protocol in the PTX (rule `wgmma`): an `mma_async` that
//! some path reaches with no [`fence`] before it, and a kernel that never commits or never
//! waits, fail the build; ptxas's report that it serialized the MMAs (a fence missing, the
//! accumulators touched inside the window) is a build warning.
//!
//! # The accumulator fragment (m64nNk16, f32)
//!
//! Thread `t` of the warpgroup (warp `w = t / 32`, lane `l = t % 32`) holds `N / 2` floats.
//! Register `4 i + j` (`i` in `0 .. N / 8`, `j` in `0 .. 4`) holds element
//! `(row, col)` = `(16 w + l / 4 + 8 (j / 2), 8 i + 2 (l % 4) + j % 2)` of the 64 × N tile
//! ([`acc_coords`]): each warp owns 16 rows, each quad of lanes one row pair, each lane two
//! adjacent columns of every 8-column block.
//!
//! # Shared-memory operands
//!
//! Both operands here are **K-major**: A is an M × K tile stored row by row (K contiguous), B
//! an N × K tile stored row by row (K contiguous) — the `T N` layout of BLAS (`x @ w.T` for a
//! PyTorch `Linear` weight `w` of shape (N, K)). A tile is a stack of *rows* of
//! `row_bytes` bytes; [`Swizzle`] names how the 16-byte chunks of each row are permuted:
//!
//! | mode | row bytes | atom (rows × bytes) | base alignment | SBO (bytes between 8-row groups) |
//! | --- | --- | --- | --- | --- |
//! | [`Swizzle::B128`] | 128 | 8 × 128 | 1024 | 1024 |
//! | [`Swizzle::B64`] | 64 | 8 × 64 | 512 | 512 |
//! | [`Swizzle::B32`] | 32 | 8 × 32 | 256 | 256 |
//! | [`Swizzle::None`] | 16 (one *core matrix* row: 8 × 16 B, contiguous) | 8 × 16 | 16 | set by the layout |
//!
//! With a swizzle, chunk `c` (bytes `16 c .. 16 c + 15`) of row `r` is stored at chunk
//! `c ^ s`, with `s` the address bits 7.. of the row's start masked to the row's chunk count
//! (`r % 8` for 128-byte rows, `(r / 2) % 4` for 64, `(r / 4) % 2` for 32) —
//! [`Swizzle::offset`] gives the byte offset of any (row, byte) — which is the layout TMA
//! writes with the same swizzle. One `k16` step
//! of bf16 reads 32 bytes of each row: the descriptor of step `s` within a 128-byte row is the
//! tile's descriptor [`advanced`](MatrixDesc::advance) by `32 s` bytes.

pub use desc::{block_offset, DescError, MatrixDesc, Swizzle};

mod desc;

/// The (row, column) of the 64 × N f32 accumulator tile held in register `reg` (`0 .. N / 2`)
/// of thread `t` (`0 .. 128`) of the warpgroup (see the module documentation). Usable on the
/// host, to check and document the mapping.
pub const fn acc_coords(t: u32, reg: u32) -> (u32, u32) {
    let (w, l) = (t / 32, t % 32);
    let (i, j) = (reg / 4, reg % 4);
    (16 * w + l / 4 + 8 * (j / 2), 8 * i + 2 * (l % 4) + j % 2)
}

/// The (row, k) of the 64 × 16 A tile (bf16/f16) held in half `h` (`0 .. 8`) of thread `t`'s
/// four A registers, for [`mma_bf16_rs`] (A from registers): register `h / 2`, low half for
/// even `h`. The layout of the accumulator's rows, with k in the place of the columns:
/// `(16 w + l / 4 + 8 (h / 2 % 2), 2 (l % 4) + h % 2 + 8 (h / 4))`.
pub const fn a_coords(t: u32, h: u32) -> (u32, u32) {
    let (w, l) = (t / 32, t % 32);
    (
        16 * w + l / 4 + 8 * (h / 2 % 2),
        2 * (l % 4) + h % 2 + 8 * (h / 4),
    )
}

/// An accumulator array of one wgmma shape (`[f32; N / 2]` for N = 16 … 256), walked without
/// runtime indexing: [`each_pair`](Accumulator::each_pair) calls `f` once per register pair,
/// written out at compile time, so the array stays in registers.
pub trait Accumulator {
    /// Calls `f(reg, acc[reg], acc[reg + 1])` for every even `reg`: the two values of one row
    /// at adjacent columns ([`acc_coords`] of `reg` and `reg + 1`).
    fn each_pair(&self, f: impl FnMut(u32, f32, f32));

    /// Replaces every value `v` by `f(reg, v)`, unrolled.
    fn map_each(&mut self, f: impl FnMut(u32, f32) -> f32);

    /// Replaces the pair of every even `reg` (as [`each_pair`](Accumulator::each_pair) walks
    /// them) by `f(reg, acc[reg], acc[reg + 1])`, unrolled.
    fn map_pairs(&mut self, f: impl FnMut(u32, f32, f32) -> (f32, f32));
}

macro_rules! accumulators {
    ($($r:literal)*) => {$(
        impl Accumulator for [f32; $r] {
            #[inline(always)]
            fn each_pair(&self, mut f: impl FnMut(u32, f32, f32)) {
                seq_macro::seq!(P in 0..$r {
                    if P % 2 == 0 {
                        f(P, self[P], self[(P + 1) % $r]);
                    }
                });
            }

            #[inline(always)]
            fn map_each(&mut self, mut f: impl FnMut(u32, f32) -> f32) {
                seq_macro::seq!(P in 0..$r {
                    self[P] = f(P, self[P]);
                });
            }

            #[inline(always)]
            fn map_pairs(&mut self, mut f: impl FnMut(u32, f32, f32) -> (f32, f32)) {
                seq_macro::seq!(P in 0..$r {
                    if P % 2 == 0 {
                        (self[P], self[(P + 1) % $r]) = f(P, self[P], self[(P + 1) % $r]);
                    }
                });
            }
        }
    )*};
}
accumulators!(8 16 32 64 128);

#[cfg(target_arch = "nvptx64")]
pub use device::*;

#[cfg(target_arch = "nvptx64")]
mod device {
    use super::MatrixDesc;
    use core::arch::asm;

    /// `wgmma.fence.sync.aligned`: orders this warpgroup's earlier register accesses (the
    /// accumulators' included) before the `mma_async`s that follow.
    ///
    /// # Safety
    ///
    /// 1. Executed by all 128 threads of the warpgroup, in convergent control flow.
    #[inline(always)]
    pub unsafe fn fence() {
        // SAFETY: the caller's contract.
        unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) };
    }

    /// `wgmma.commit_group.sync.aligned`: closes the batch of `mma_async`s issued since the
    /// last commit.
    ///
    /// # Safety
    ///
    /// 1. Executed by all 128 threads of the warpgroup, in convergent control flow.
    #[inline(always)]
    pub unsafe fn commit_group() {
        // SAFETY: the caller's contract.
        unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) };
    }

    /// `wgmma.wait_group.sync.aligned N`: waits until at most `N` committed batches are
    /// pending. After `wait_group::<0>()` every accumulator is final and the shared memory the
    /// batches read may be overwritten.
    ///
    /// # Safety
    ///
    /// 1. Executed by all 128 threads of the warpgroup, in convergent control flow.
    #[inline(always)]
    pub unsafe fn wait_group<const N: u32>() {
        // SAFETY: the caller's contract.
        unsafe { asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack)) };
    }

    /// Pins the accumulator registers: an empty `asm!` that reads and writes each, so the code
    /// generator keeps every other access to them on its side (before [`fence`], after
    /// [`wait_group`]) — CUTLASS's `warpgroup_fence_operand`.
    #[inline(always)]
    pub fn fence_operand<A: super::Accumulator>(acc: &mut A) {
        acc.map_each(|_, mut v| {
            // SAFETY: an empty instruction string; the operand is only claimed.
            unsafe { asm!("/* {0} */", inout(reg32) v, options(nomem, nostack, preserves_flags)) };
            v
        });
    }

    /// `fence.proxy.async.shared::cta`: makes this thread's earlier ordinary shared-memory
    /// stores visible to the async proxy (`wgmma` operands, TMA stores). Follow it with a
    /// block barrier before another thread's `mma_async` reads the data.
    #[inline(always)]
    pub fn fence_proxy_async_shared() {
        // SAFETY: a fence; no operands.
        unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) };
    }

    /// `setmaxnreg.inc.sync.aligned.u32 N`: raises the registers per thread of this warp to
    /// `N` (a multiple of 8 in 24..=256), waiting until the block's pool has them — the
    /// consumer warpgroups of a warp-specialised kernel.
    ///
    /// # Safety
    ///
    /// 1. Executed by all threads of the warpgroup (`.sync.aligned`), convergently.
    /// 2. The kernel declares its launch bound (`max_threads`/`block`), and the registers the
    ///    producer warps release ([`setmaxnreg_dec`]) cover the increase for every resident
    ///    block: otherwise the warps wait for registers forever.
    #[inline(always)]
    pub unsafe fn setmaxnreg_inc<const N: u32>() {
        const {
            assert!(
                N.is_multiple_of(8) && N >= 24 && N <= 256,
                "setmaxnreg: 24..=256, multiple of 8"
            )
        };
        // SAFETY: the caller's contract.
        unsafe { asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack)) };
    }

    /// `setmaxnreg.dec.sync.aligned.u32 N`: lowers the registers per thread of this warp to
    /// `N` (a multiple of 8 in 24..=256), returning the rest to the block's pool — the
    /// producer warpgroup of a warp-specialised kernel.
    ///
    /// # Safety
    ///
    /// 1. Executed by all threads of the warpgroup (`.sync.aligned`), convergently.
    /// 2. The warp's live values fit in `N` registers from here on (ptxas is told nothing of
    ///    the decrease; a kernel that keeps more live spills or misbehaves).
    #[inline(always)]
    pub unsafe fn setmaxnreg_dec<const N: u32>() {
        const {
            assert!(
                N.is_multiple_of(8) && N >= 24 && N <= 256,
                "setmaxnreg: 24..=256, multiple of 8"
            )
        };
        // SAFETY: the caller's contract.
        unsafe { asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack)) };
    }

    /// The `mma_async` of one shape and type: `$n` columns, `$regs` accumulators, the
    /// instruction's type suffix (`bf16.bf16`), its k, and the accumulator indices written out
    /// (all but the last, then the last: the template's register list has no trailing comma).
    macro_rules! mma_ss {
        ($n:literal, $regs:literal, [$($i:literal)*], $last:literal) => {
            impl Shape<$n> {
                #[inline(always)]
                unsafe fn ss(acc: &mut [f32; $regs], a: MatrixDesc, b: MatrixDesc, scale_d: bool, ty: Ty) {
                    // tf32 has no transpose operands (K-major only).
                    match ty {
                        Ty::Bf16 => mma_ss!(@asm $n, "bf16.bf16", "k16", ", 0, 0", acc, a, b, scale_d, [$($i)*], $last),
                        Ty::F16 => mma_ss!(@asm $n, "f16.f16", "k16", ", 0, 0", acc, a, b, scale_d, [$($i)*], $last),
                        Ty::Tf32 => mma_ss!(@asm $n, "tf32.tf32", "k8", "", acc, a, b, scale_d, [$($i)*], $last),
                    }
                }

                #[inline(always)]
                unsafe fn rs(acc: &mut [f32; $regs], a: [u32; 4], b: MatrixDesc, scale_d: bool, ty: Ty) {
                    match ty {
                        Ty::Bf16 => mma_ss!(@asm_rs $n, "bf16.bf16", "0", acc, a, b, scale_d, [$($i)*], $last),
                        _ => mma_ss!(@asm_rs $n, "f16.f16", "0", acc, a, b, scale_d, [$($i)*], $last),
                    }
                }

                /// `rs` with B N-major (`imm-trans-b` = 1).
                #[inline(always)]
                unsafe fn rs_nb(acc: &mut [f32; $regs], a: [u32; 4], b: MatrixDesc, scale_d: bool, ty: Ty) {
                    match ty {
                        Ty::Bf16 => mma_ss!(@asm_rs $n, "bf16.bf16", "1", acc, a, b, scale_d, [$($i)*], $last),
                        _ => mma_ss!(@asm_rs $n, "f16.f16", "1", acc, a, b, scale_d, [$($i)*], $last),
                    }
                }
            }
        };
        (@asm $n:literal, $ty:literal, $k:literal, $trans:literal, $acc:ident, $a:ident, $b:ident, $sd:ident, [$($i:literal)*], $last:literal) => {
            // SAFETY: the public function's contract (whole warpgroup, descriptors of
            // initialised shared memory, the fence/commit/wait protocol).
            unsafe {
                asm!(
                    concat!(
                        "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; ",
                        "wgmma.mma_async.sync.aligned.m64n", $n, $k, ".f32.", $ty, " {{",
                        $("{", $i, "}, ",)* "{", $last, "}",
                        "}}, {a}, {b}, p, 1, 1", $trans, "; }}"
                    ),
                    $(inout(reg32) $acc[$i],)*
                    inout(reg32) $acc[$last],
                    a = in(reg64) $a.0,
                    b = in(reg64) $b.0,
                    sd = in(reg32) $sd as u32,
                    options(nostack),
                )
            }
        };
        (@asm_rs $n:literal, $ty:literal, $tb:literal, $acc:ident, $a:ident, $b:ident, $sd:ident, [$($i:literal)*], $last:literal) => {
            // SAFETY: as above.
            unsafe {
                asm!(
                    concat!(
                        "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; ",
                        "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, " {{",
                        $("{", $i, "}, ",)* "{", $last, "}",
                        "}}, {{{a0}, {a1}, {a2}, {a3}}}, {b}, p, 1, 1, ", $tb, "; }}"
                    ),
                    $(inout(reg32) $acc[$i],)*
                    inout(reg32) $acc[$last],
                    a0 = in(reg32) $a[0],
                    a1 = in(reg32) $a[1],
                    a2 = in(reg32) $a[2],
                    a3 = in(reg32) $a[3],
                    b = in(reg64) $b.0,
                    sd = in(reg32) $sd as u32,
                    options(nostack),
                )
            }
        };
    }

    /// The input types of [`Shape`]'s instructions.
    #[derive(Clone, Copy)]
    enum Ty {
        Bf16,
        F16,
        Tf32,
    }

    /// The instructions of N (columns) = `N`.
    struct Shape<const N: usize>;

    mma_ss!(16, 8, [0 1 2 3 4 5 6], 7);
    mma_ss!(32, 16, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14], 15);
    mma_ss!(64, 32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25
        26 27 28 29 30], 31);
    mma_ss!(128, 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25
        26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54
        55 56 57 58 59 60 61 62], 63);
    mma_ss!(256, 128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25
        26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54
        55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83
        84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109
        110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126], 127);

    /// The shapes this module provides: `N` ∈ {16, 32, 64, 128, 256}; `R` = `N / 2`
    /// accumulator registers per thread.
    pub trait WgmmaN<const R: usize> {
        #[doc(hidden)]
        unsafe fn ss(acc: &mut [f32; R], a: MatrixDesc, b: MatrixDesc, scale_d: bool, ty: u8);
        #[doc(hidden)]
        unsafe fn rs(acc: &mut [f32; R], a: [u32; 4], b: MatrixDesc, scale_d: bool, ty: u8);
        #[doc(hidden)]
        unsafe fn rs_nb(acc: &mut [f32; R], a: [u32; 4], b: MatrixDesc, scale_d: bool, ty: u8);
    }

    /// `N` columns as a type (`Cols<128>`), for [`WgmmaN`].
    pub struct Cols<const N: usize>;

    macro_rules! shapes {
        ($($n:literal => $r:literal),*) => {$(
            impl WgmmaN<$r> for Cols<$n> {
                #[inline(always)]
                unsafe fn ss(acc: &mut [f32; $r], a: MatrixDesc, b: MatrixDesc, scale_d: bool, ty: u8) {
                    // SAFETY: the caller's contract.
                    unsafe { Shape::<$n>::ss(acc, a, b, scale_d, ty_of(ty)) }
                }
                #[inline(always)]
                unsafe fn rs(acc: &mut [f32; $r], a: [u32; 4], b: MatrixDesc, scale_d: bool, ty: u8) {
                    // SAFETY: the caller's contract.
                    unsafe { Shape::<$n>::rs(acc, a, b, scale_d, ty_of(ty)) }
                }
                #[inline(always)]
                unsafe fn rs_nb(acc: &mut [f32; $r], a: [u32; 4], b: MatrixDesc, scale_d: bool, ty: u8) {
                    // SAFETY: the caller's contract.
                    unsafe { Shape::<$n>::rs_nb(acc, a, b, scale_d, ty_of(ty)) }
                }
            }
        )*};
    }
    shapes!(16 => 8, 32 => 16, 64 => 32, 128 => 64, 256 => 128);

    #[inline(always)]
    const fn ty_of(t: u8) -> Ty {
        match t {
            0 => Ty::Bf16,
            1 => Ty::F16,
            _ => Ty::Tf32,
        }
    }

    /// `acc (+)= A · Bᵀ` for a 64 × 16 bf16 A tile and an N × 16 bf16 B tile, both K-major in
    /// shared memory (`wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16`); `scale_d =
    /// false` overwrites `acc` with the product (a tile's first k-step). `R` = `N / 2`
    /// accumulators per thread, laid out as [`acc_coords`](super::acc_coords) says.
    ///
    /// # Safety
    ///
    /// 1. Executed by all 128 threads of the warpgroup, convergently, with the same `a`, `b`
    ///    and `scale_d`.
    /// 2. `a` and `b` describe shared memory of this block holding the tiles in the
    ///    descriptors' layouts, written before a [`fence_proxy_async_shared`] (+ barrier) or
    ///    by TMA (its mbarrier waited on), and not written again until a [`wait_group`] that
    ///    covers this instruction.
    /// 3. The fence / commit / wait protocol of the module documentation: [`fence`] before
    ///    the batch, `acc` not touched until a [`wait_group`] covers it.
    #[inline(always)]
    pub unsafe fn mma_bf16<const N: usize, const R: usize>(
        acc: &mut [f32; R],
        a: MatrixDesc,
        b: MatrixDesc,
        scale_d: bool,
    ) where
        Cols<N>: WgmmaN<R>,
    {
        // SAFETY: the caller's contract.
        unsafe { <Cols<N> as WgmmaN<R>>::ss(acc, a, b, scale_d, 0) }
    }

    /// [`mma_bf16`] for f16 inputs (`.f32.f16.f16`).
    ///
    /// # Safety
    ///
    /// As [`mma_bf16`].
    #[inline(always)]
    pub unsafe fn mma_f16<const N: usize, const R: usize>(
        acc: &mut [f32; R],
        a: MatrixDesc,
        b: MatrixDesc,
        scale_d: bool,
    ) where
        Cols<N>: WgmmaN<R>,
    {
        // SAFETY: the caller's contract.
        unsafe { <Cols<N> as WgmmaN<R>>::ss(acc, a, b, scale_d, 1) }
    }

    /// [`mma_bf16`] for tf32 inputs: 64 × 8 A and N × 8 B tiles of f32 (read as tf32: the low
    /// 13 mantissa bits ignored), `m64nNk8.f32.tf32.tf32`; one k8 step is 32 bytes of a row.
    ///
    /// # Safety
    ///
    /// As [`mma_bf16`].
    #[inline(always)]
    pub unsafe fn mma_tf32<const N: usize, const R: usize>(
        acc: &mut [f32; R],
        a: MatrixDesc,
        b: MatrixDesc,
        scale_d: bool,
    ) where
        Cols<N>: WgmmaN<R>,
    {
        // SAFETY: the caller's contract.
        unsafe { <Cols<N> as WgmmaN<R>>::ss(acc, a, b, scale_d, 2) }
    }

    /// [`mma_bf16`] with A from registers: thread `t` holds the 64 × 16 bf16 A tile's
    /// elements [`a_coords`](super::a_coords) says, two per register (low half first) — the
    /// layout of an f32 accumulator converted to bf16 pairs, so a product `P` computed by one
    /// wgmma feeds the next (attention's `P · V`).
    ///
    /// # Safety
    ///
    /// As [`mma_bf16`] (for `b` only).
    #[inline(always)]
    pub unsafe fn mma_bf16_rs<const N: usize, const R: usize>(
        acc: &mut [f32; R],
        a: [u32; 4],
        b: MatrixDesc,
        scale_d: bool,
    ) where
        Cols<N>: WgmmaN<R>,
    {
        // SAFETY: the caller's contract.
        unsafe { <Cols<N> as WgmmaN<R>>::rs(acc, a, b, scale_d, 0) }
    }

    /// [`mma_bf16_rs`] for f16 inputs.
    ///
    /// # Safety
    ///
    /// As [`mma_bf16_rs`].
    #[inline(always)]
    pub unsafe fn mma_f16_rs<const N: usize, const R: usize>(
        acc: &mut [f32; R],
        a: [u32; 4],
        b: MatrixDesc,
        scale_d: bool,
    ) where
        Cols<N>: WgmmaN<R>,
    {
        // SAFETY: the caller's contract.
        unsafe { <Cols<N> as WgmmaN<R>>::rs(acc, a, b, scale_d, 1) }
    }

    /// [`mma_bf16_rs`] with B **N-major** (`imm-trans-b` = 1): the 16 × N B tile stored
    /// with N contiguous — row `k` of a K × N row-major tile, as a `(seq, head_dim)` tile of
    /// attention's `V` lies — described by [`MatrixDesc::n_major`](super::MatrixDesc::n_major).
    /// `acc (+)= A · B` with that B (no transpose in the product: the flag only names the
    /// layout).
    ///
    /// # Safety
    ///
    /// As [`mma_bf16`] (for `b` only).
    #[inline(always)]
    pub unsafe fn mma_bf16_rs_nb<const N: usize, const R: usize>(
        acc: &mut [f32; R],
        a: [u32; 4],
        b: MatrixDesc,
        scale_d: bool,
    ) where
        Cols<N>: WgmmaN<R>,
    {
        // SAFETY: the caller's contract.
        unsafe { <Cols<N> as WgmmaN<R>>::rs_nb(acc, a, b, scale_d, 0) }
    }

    /// [`mma_bf16_rs_nb`] for f16 inputs.
    ///
    /// # Safety
    ///
    /// As [`mma_bf16`] (for `b` only).
    #[inline(always)]
    pub unsafe fn mma_f16_rs_nb<const N: usize, const R: usize>(
        acc: &mut [f32; R],
        a: [u32; 4],
        b: MatrixDesc,
        scale_d: bool,
    ) where
        Cols<N>: WgmmaN<R>,
    {
        // SAFETY: the caller's contract.
        unsafe { <Cols<N> as WgmmaN<R>>::rs_nb(acc, a, b, scale_d, 1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_major_descriptor_fields() {
        // V's two 64-column panels 16 KiB apart: LBO = the panel stride, SBO = one atom.
        let d = MatrixDesc::n_major(0x2000, 16384, Swizzle::B128).unwrap();
        assert_eq!(d.0 & 0x3FFF, 0x2000 >> 4);
        assert_eq!((d.0 >> 16) & 0x3FFF, 16384 >> 4);
        assert_eq!((d.0 >> 32) & 0x3FFF, 1024 >> 4);
        assert_eq!(d.0 >> 62, Swizzle::B128.code());
        // The next k16 step: 16 rows of 128 bytes on.
        assert_eq!(d.advance(2048).addr(), 0x2000 + 2048);
        assert_eq!(
            MatrixDesc::n_major(0x2000, 16384, Swizzle::None),
            Err(DescError::BadOffset)
        );
        assert_eq!(
            MatrixDesc::n_major(0x2200, 16384, Swizzle::B128),
            Err(DescError::Misaligned)
        );
    }

    #[test]
    fn every_accumulator_element_has_one_owner() {
        for n in [16u32, 64, 128, 256] {
            let mut seen = [[0u8; 256]; 64];
            for t in 0..128 {
                for r in 0..n / 2 {
                    let (row, col) = acc_coords(t, r);
                    assert!(row < 64 && col < n);
                    seen[row as usize][col as usize] += 1;
                }
            }
            for row in &seen {
                assert!(row[..n as usize].iter().all(|&c| c == 1), "n = {n}");
            }
        }
        let mut seen = [[0u8; 16]; 64];
        for t in 0..128 {
            for h in 0..8 {
                let (row, k) = a_coords(t, h);
                seen[row as usize][k as usize] += 1;
            }
        }
        assert!(seen.iter().flatten().all(|&c| c == 1));
        // Register pairs (2 j, 2 j + 1) of the accumulator are the A register j's halves: the
        // same row, adjacent columns (k) — an accumulator converted pairwise to bf16 is an A.
        for t in 0..128 {
            for h in 0..8 {
                assert_eq!(acc_coords(t, h), a_coords(t, h));
            }
        }
    }

    /// `each_pair` and `map_pairs` visit every even register once with its pair, in order;
    /// `map_pairs` writes each result back to the pair it read.
    #[test]
    fn accumulator_walks_visit_each_pair() {
        let mut acc: [f32; 16] = core::array::from_fn(|i| i as f32);
        let mut next = 0;
        acc.each_pair(|r, a, b| {
            assert_eq!((r, a, b), (next, r as f32, r as f32 + 1.0));
            next += 2;
        });
        assert_eq!(next, 16);
        acc.map_pairs(|r, a, b| (b * 10.0 + r as f32, a - 100.0));
        for r in (0..16).step_by(2) {
            assert_eq!(acc[r], (r + 1) as f32 * 10.0 + r as f32);
            assert_eq!(acc[r + 1], r as f32 - 100.0);
        }
        acc.map_each(|r, v| v + r as f32);
        assert_eq!(acc[3], 2.0 - 100.0 + 3.0);
    }

    #[test]
    fn swizzles_permute_chunks_within_each_row() {
        for s in [Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            let rb = s.row_bytes();
            for row in 0..16 {
                let mut chunks: [bool; 8] = [false; 8];
                for byte in (0..rb).step_by(16) {
                    let off = s.offset(row, byte);
                    assert_eq!(off / rb, row, "stays in its row");
                    chunks[((off % rb) / 16) as usize] = true;
                    // Bytes within a chunk keep their order.
                    assert_eq!(s.offset(row, byte + 5), off + 5);
                }
                assert!(chunks[..(rb / 16) as usize].iter().all(|&c| c));
            }
        }
        // 128B: chunk c of row r at c ^ (r % 8); row 0 unpermuted.
        assert_eq!(Swizzle::B128.offset(0, 48), 48);
        assert_eq!(Swizzle::B128.offset(3, 0), 3 * 128 + 3 * 16);
        // Row 9 is row 1 of its group: chunk 1 swaps with chunk 0.
        assert_eq!(Swizzle::B128.offset(9, 16), 9 * 128);
        assert_eq!(Swizzle::B128.offset(9, 0), 9 * 128 + 16);
        // 32-byte rows: the chunks swap in rows 4..8 of every 8 (address bit 7); 64-byte rows
        // XOR (r / 2) % 4.
        assert_eq!(Swizzle::B32.offset(1, 0), 32);
        assert_eq!(Swizzle::B32.offset(4, 0), 4 * 32 + 16);
        assert_eq!(Swizzle::B32.offset(12, 16), 12 * 32);
        assert_eq!(Swizzle::B64.offset(3, 0), 3 * 64 + 16);
        assert_eq!(Swizzle::B64.offset(6, 48), 6 * 64);
        assert_eq!(Swizzle::None.offset(5, 4), 84);
    }

    #[test]
    fn descriptors_encode_and_check() {
        let d = MatrixDesc::k_major(0x400, Swizzle::B128).unwrap();
        assert_eq!(d.0 & 0x3FFF, 0x40);
        assert_eq!((d.0 >> 16) & 0x3FFF, 1);
        assert_eq!((d.0 >> 32) & 0x3FFF, 1024 >> 4);
        assert_eq!(d.0 >> 62, 1);
        assert_eq!(d.addr(), 0x400);
        assert_eq!(d.advance(32).addr(), 0x420);
        assert_eq!(
            MatrixDesc::k_major(0x200, Swizzle::B128),
            Err(DescError::Misaligned)
        );
        assert!(MatrixDesc::k_major(0x200, Swizzle::B64).is_ok());
        // A block of rank r in a cluster launch sees its shared memory at r << 24 and up: the
        // descriptor holds the offset in the block's own window.
        for r in 1..16u32 {
            assert_eq!(
                MatrixDesc::k_major((r << 24) + 0x400, Swizzle::B128),
                MatrixDesc::k_major(0x400, Swizzle::B128)
            );
            assert_eq!(
                MatrixDesc::k_major((r << 24) + (1 << 18), Swizzle::B128),
                Err(DescError::OutOfRange)
            );
        }
        assert_eq!(
            MatrixDesc::new(0, 8, 16, Swizzle::None),
            Err(DescError::BadOffset)
        );
        assert_eq!(
            MatrixDesc::new(1 << 18, 16, 16, Swizzle::None),
            Err(DescError::OutOfRange)
        );
        assert_eq!(MatrixDesc::k_major(0, Swizzle::B32).unwrap().0 >> 62, 3);
        assert_eq!(MatrixDesc::k_major(0, Swizzle::B64).unwrap().0 >> 62, 2);
    }
}
