//! Tensor cores (`ferrocuda_device::mma`): the fragment layouts as the hardware sees them,
//! `mma.sync` for every precision with fragments loaded four ways (through the mapping from
//! global memory, through the mapping from shared memory, and with `ldmatrix`), a tiled GEMM
//! (the guide's example), and `stmatrix` (sm_90 builds only).
//!
//! The GPU tests (`tests/device_gpu/mma.rs`) check every output element against a host
//! reference; the layout records against `Fragment::coords` on the host.

use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::{kernel, Slice, SliceMut};
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{
    mma::{self, Fragment},
    shared_array, thread, warp,
};

/// Slots per lane in each section of [`mma_layouts`]' output.
pub const LAYOUT_SLOTS: usize = 16;
/// Sections of [`mma_layouts`]' output (the GPU test decodes them in this order).
pub const LAYOUT_SECTIONS: usize = 19;

/// Element `i` of `s`; an index outside it aborts the kernel (location recorded).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
#[track_caller]
fn at<T: Copy>(s: Slice<T>, i: usize) -> T {
    match s.get(i) {
        Some(v) => v,
        None => ferrocuda_device::diag::fail(),
    }
}

/// The fragment layouts as the hardware produces and consumes them; one warp (launch one
/// block of 32 threads). `out[(s * 32 + lane) * LAYOUT_SLOTS + i]` is element `i` of lane
/// `lane` in section `s` (as bits; slots past the fragment's length are left alone):
///
/// * 0: `FragA16x16<bf16>::ldmatrix` of a 16×16 tile whose `[r][c]` holds the bits `16r + c`;
/// * 1: `FragB16x8<bf16>::ldmatrix_trans` of a 16×8 K×N tile holding `8k + n` at `[k][n]`;
/// * 2: `FragB16x8<bf16>::ldmatrix` of the same B stored N×K (`8k + n` at `[n][k]`);
/// * 3, 4: raw `ldmatrix_x1` / `ldmatrix_x1_trans` of the 8×8 corner of section 0's tile
///   (lanes 0..8 address its rows): slot 0 the low half, slot 1 the high half;
/// * 5: raw `ldmatrix_x4_trans` of section 0's tile with the `.x4` addresses (lane `l`: row
///   `l % 16`, column `8 (l / 16)`): slot `2j + h` is half `h` of register `j`;
/// * 6, 7: `FragA16x32<u8>::ldmatrix` of a 16×32 tile holding `c + 32 (r % 8)` (6) and `r` (7);
/// * 8: `FragB32x8<u8>::ldmatrix` of an 8×32 N×K tile holding `k + 32 n` at `[n][k]`;
/// * 9: `FragA16x8Tf32::ldmatrix` of a 16×8 `f32` tile holding the bits `8r + c`;
/// * 10: `FragB8x8Tf32::ldmatrix` of an 8×8 N×K tile holding the bits `8k + n` at `[n][k]`;
/// * 11–18: `D = A·B + C` with A a 0/1 selection matrix, so `D = B[sel(r)][c] + C[r][c]`,
///   fragments built with `from_fn` (no memory): 11 bf16 (f32 bits of D), 12 f16 → f32,
///   13 f16 → f16 (bits), 14 tf32, 15 s8·s8 and 16 u8·s8 (i32; A selects rows `r` and
///   `r + 16` of B), 17 f64 (slot `2i` the low word, `2i + 1` the high word), 18 the same
///   bf16 product accumulated twice (`D = A·B + (A·B + C)`).
///
/// The host checks each against `Fragment::coords`: sections 0–10 the loads' layouts,
/// 11–18 the operands' and accumulators' layouts through the arithmetic.
#[kernel]
pub unsafe fn mma_layouts(out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        use mma::*;
        ferrocuda_device::device_assert!(out.len() == LAYOUT_SECTIONS * 32 * LAYOUT_SLOTS);
        let lane = warp::lane_id();
        let l = lane as usize;
        let put = |s: usize, i: usize, v: u32| {
            // SAFETY: one lane per (section, lane, slot) record; one warp.
            unsafe { out.write((s * 32 + l) * LAYOUT_SLOTS + i, v) }
        };
        let a16 = shared_array!(bf16, [16, 16], align = 16);
        let bkn = shared_array!(bf16, [16, 8], align = 16);
        let bnk = shared_array!(bf16, [8, 16], align = 16);
        let a8lo = shared_array!(u8, [16, 32], align = 16);
        let a8row = shared_array!(u8, [16, 32], align = 16);
        let b8 = shared_array!(u8, [8, 32], align = 16);
        let atf = shared_array!(f32, [16, 8], align = 16);
        let btf = shared_array!(f32, [8, 8], align = 16);
        for e in (l..256).step_by(32) {
            let (r, c) = (e / 16, e % 16);
            // SAFETY: one lane per element; the barrier below orders writes before loads.
            unsafe { a16.write(r, c, bf16::from_bits(e as u16)) };
        }
        for e in (l..128).step_by(32) {
            let (k, n) = (e / 8, e % 8);
            // SAFETY: one lane per element; the barrier below orders writes before loads.
            unsafe {
                bkn.write(k, n, bf16::from_bits(e as u16));
                bnk.write(n, k, bf16::from_bits(e as u16));
            }
        }
        for e in (l..512).step_by(32) {
            let (r, c) = (e / 32, e % 32);
            // SAFETY: one lane per element; the barrier below orders writes before loads.
            unsafe {
                a8lo.write(r, c, (c + 32 * (r % 8)) as u8);
                a8row.write(r, c, r as u8);
            }
        }
        for e in (l..256).step_by(32) {
            let (n, k) = (e / 32, e % 32);
            // SAFETY: one lane per element; the barrier below orders writes before loads.
            unsafe { b8.write(n, k, (k + 32 * n) as u8) };
        }
        for e in (l..128).step_by(32) {
            let (r, c) = (e / 8, e % 8);
            // SAFETY: one lane per element; the barrier below orders writes before loads.
            unsafe { atf.write(r, c, f32::from_bits(e as u32)) };
        }
        for e in (l..64).step_by(32) {
            let (k, n) = (e / 8, e % 8);
            // SAFETY: one lane per element; the barrier below orders writes before loads.
            unsafe { btf.write(n, k, f32::from_bits(e as u32)) };
        }
        thread::sync_threads();

        let a = FragA16x16::<bf16>::ldmatrix(a16, 0, 0);
        for i in 0..8 {
            put(0, i, a.get(i).to_bits() as u32);
        }
        let b = FragB16x8::<bf16>::ldmatrix_trans(bkn, 0, 0);
        for i in 0..4 {
            put(1, i, b.get(i).to_bits() as u32);
        }
        let b = FragB16x8::<bf16>::ldmatrix(bnk, 0, 0);
        for i in 0..4 {
            put(2, i, b.get(i).to_bits() as u32);
        }
        // SAFETY: (raw ldmatrix) the whole warp calls; lanes 0..8 address 16-byte aligned
        // rows of the array (the other lanes' addresses, also in it, are ignored).
        let [x1] = unsafe { ldmatrix_x1(a16.shared_addr(l % 8, 0)) };
        // SAFETY: as `x1`: the whole warp calls; lanes 0..8 address aligned rows of it.
        let [t1] = unsafe { ldmatrix_x1_trans(a16.shared_addr(l % 8, 0)) };
        for h in 0..2 {
            put(3, h, x1 >> (16 * h) & 0xFFFF);
            put(4, h, t1 >> (16 * h) & 0xFFFF);
        }
        // SAFETY: the whole warp calls; each lane addresses a 16-byte aligned row of it.
        let t4 = unsafe { ldmatrix_x4_trans(a16.shared_addr(l % 16, 8 * (l / 16))) };
        // Register j of the result, by its constant index (as `put`'s record index).
        #[allow(clippy::needless_range_loop)]
        for j in 0..4 {
            for h in 0..2 {
                put(5, 2 * j + h, t4[j] >> (16 * h) & 0xFFFF);
            }
        }
        let lo = FragA16x32::<u8>::ldmatrix(a8lo, 0, 0);
        let row = FragA16x32::<u8>::ldmatrix(a8row, 0, 0);
        for i in 0..16 {
            put(6, i, lo.get(i) as u32);
            put(7, i, row.get(i) as u32);
        }
        let b = FragB32x8::<u8>::ldmatrix(b8, 0, 0);
        for i in 0..8 {
            put(8, i, b.get(i) as u32);
        }
        let a = FragA16x8Tf32::ldmatrix(atf, 0, 0);
        for i in 0..4 {
            put(9, i, a.get(i).to_bits());
        }
        let b = FragB8x8Tf32::ldmatrix(btf, 0, 0);
        for i in 0..2 {
            put(10, i, b.get(i).to_bits());
        }

        // Products with a selection matrix: D[r][c] = B[sel(r)][c] + C[r][c], exact.
        let one = |on: bool| if on { bf16::ONE } else { bf16::ZERO };
        let a = FragA16x16::<bf16>::from_fn(lane, |r, c| one(r == c));
        let b = FragB16x8::<bf16>::from_fn(lane, |k, n| bf16::from_f32((8 * k + n) as f32));
        let c = Acc16x8F32::from_fn(lane, |r, c| (256 * r + 16 * c) as f32);
        let d = mma::mma(a, b, c);
        for i in 0..4 {
            put(11, i, d.get(i).to_bits());
        }
        let d2 = mma::mma(a, b, d);
        for i in 0..4 {
            put(18, i, d2.get(i).to_bits());
        }
        let h = |x: usize| x as f32 as f16;
        let ah = FragA16x16::<f16>::from_fn(lane, |r, c| h((r == c) as usize));
        let bh = FragB16x8::<f16>::from_fn(lane, |k, n| h(8 * k + n));
        let d = mma::mma(ah, bh, c);
        for i in 0..4 {
            put(12, i, d.get(i).to_bits());
        }
        let ch = Acc16x8F16::from_fn(lane, |r, c| h(64 * r + c));
        let d = mma::mma(ah, bh, ch);
        for i in 0..4 {
            put(13, i, d.get(i).to_bits() as u32);
        }
        let a = FragA16x8Tf32::from_fn(lane, |r, k| (k == r % 8) as u32 as f32);
        let b = FragB8x8Tf32::from_fn(lane, |k, n| (8 * k + n) as f32);
        let d = mma::mma(a, b, c);
        for i in 0..4 {
            put(14, i, d.get(i).to_bits());
        }
        let bi = FragB32x8::<i8>::from_fn(lane, |k, n| {
            if k < 16 {
                (8 * k + n) as i8
            } else {
                -(8 * (k - 16) as i32 + n as i32) as i8 - 1
            }
        });
        let ci = Acc16x8I32::from_fn(lane, |r, c| (1000 * r + c) as i32);
        let a = FragA16x32::<i8>::from_fn(lane, |r, k| (k == r) as i8);
        let d = mma::mma(a, bi, ci);
        for i in 0..4 {
            put(15, i, d.get(i) as u32);
        }
        let a = FragA16x32::<u8>::from_fn(lane, |r, k| (k == r + 16) as u8);
        let d = mma::mma(a, bi, ci);
        for i in 0..4 {
            put(16, i, d.get(i) as u32);
        }
        let a = FragA8x4F64::from_fn(lane, |r, k| (k == r % 4) as u32 as f64);
        let b = FragB4x8F64::from_fn(lane, |k, n| (8 * k + n) as f64);
        let c = Acc8x8F64::from_fn(lane, |r, c| (100 * r + c) as f64);
        let d = mma::mma(a, b, c);
        for i in 0..2 {
            let bits = d.get(i).to_bits();
            put(17, 2 * i, bits as u32);
            put(17, 2 * i + 1, (bits >> 32) as u32);
        }
    }
}

/// The per-precision kernels: block `p` (one warp: blocks of 32 threads) computes problem
/// `p`, `D = A·B + C` with A (`M`×`k`) at rows `p·M..` of the row-major `a` (`k` columns),
/// B (`k`×`N`) at rows `p·k..` of `b` (`N` columns), C and D (`M`×`N`) at rows `p·M..` of `c`
/// and `d`; `k` a multiple of the instruction's K. Each K step loads the fragments by `mode`:
/// 0 through the mapping from global memory (`load_slice`), 1 through the mapping from
/// shared tiles (`load_shared`), 2 with `ldmatrix` (A `.x4`; B `.x2.trans` from a K×N tile
/// for 16-bit inputs, `.x2` from an N×K tile for 8-bit and TF32 ones), 3 (16-bit inputs)
/// `ldmatrix` `.x2` of B from an N×K tile. TF32 inputs are rounded with `to_tf32` (by the
/// loaders, or when staged for `ldmatrix`).
macro_rules! tile_kernels {
    ($(
        $(#[$doc:meta])*
        $name:ident($ta:ty, $tb:ty, $tc:ty): $fa:ty, $fb:ty, $acc:ty,
        m = $m:literal, n = $n:literal, ks = $ks:literal, prep = $prep:expr,
        ldmatrix = [$($mode:literal => $ld:expr),*];
    )*) => {$(
        $(#[$doc])*
        #[kernel]
        pub unsafe fn $name(
            a: Slice<$ta>,
            b: Slice<$tb>,
            c: Slice<$tc>,
            d: SliceMut<$tc>,
            k: u32,
            mode: u32,
        ) {
            #[cfg(target_arch = "nvptx64")]
            {
                const M: usize = $m;
                const N: usize = $n;
                const KS: usize = $ks;
                let (k, p) = (k as usize, thread::block_idx().x as usize);
                ferrocuda_device::device_assert!(k % KS == 0 && thread::block_dim().x == 32);
                let l = warp::lane_id() as usize;
                let a_s = shared_array!($ta, [M, KS], align = 16);
                let b_s = shared_array!($tb, [KS, N], align = 16);
                let bt_s = shared_array!($tb, [N, KS], align = 16);
                let mut acc = <$acc>::load_slice(c, p * M, 0, N);
                for k0 in (0..k).step_by(KS) {
                    let (fa, fb): ($fa, $fb) = if mode == 0 {
                        (
                            <$fa>::load_slice(a, p * M, k0, k),
                            <$fb>::load_slice(b, p * k + k0, 0, N),
                        )
                    } else {
                        for e in (l..M * KS).step_by(32) {
                            let (r, cc) = (e / KS, e % KS);
                            let v = ($prep)(at(a, (p * M + r) * k + k0 + cc));
                            // SAFETY: one lane per element; the barriers order the writes
                            // before the loads and the loads before the next step's writes.
                            unsafe { a_s.write(r, cc, v) };
                        }
                        for e in (l..KS * N).step_by(32) {
                            let (kk, n) = (e / N, e % N);
                            let v = ($prep)(at(b, (p * k + k0 + kk) * N + n));
                            // SAFETY: as `a_s`: one lane per element, ordered by the barriers.
                            unsafe {
                                b_s.write(kk, n, v);
                                bt_s.write(n, kk, v);
                            }
                        }
                        thread::sync_threads();
                        let f: ($fa, $fb) = match mode {
                            1 => (<$fa>::load_shared(a_s, 0, 0), <$fb>::load_shared(b_s, 0, 0)),
                            $($mode => ($ld)(a_s, b_s, bt_s),)*
                            _ => ferrocuda_device::diag::fail(),
                        };
                        thread::sync_threads();
                        f
                    };
                    acc = mma::mma(fa, fb, acc);
                }
                // SAFETY: problem p's D belongs to this warp, each element to one lane.
                unsafe { acc.store_slice(d, p * M, 0, N) };
            }
        }
    )*};
}

tile_kernels! {
    /// bf16 × bf16 + f32 (m16n8k16), modes 0–3.
    mma_tile_bf16(bf16, bf16, f32): mma::FragA16x16<bf16>, mma::FragB16x8<bf16>, mma::Acc16x8F32,
        m = 16, n = 8, ks = 16, prep = |x| x,
        ldmatrix = [
            2 => |a_s, b_s, _| (mma::FragA16x16::ldmatrix(a_s, 0, 0), mma::FragB16x8::ldmatrix_trans(b_s, 0, 0)),
            3 => |a_s, _, bt_s| (mma::FragA16x16::ldmatrix(a_s, 0, 0), mma::FragB16x8::ldmatrix(bt_s, 0, 0))
        ];
    /// f16 × f16 + f32 (m16n8k16), modes 0–3.
    mma_tile_f16(f16, f16, f32): mma::FragA16x16<f16>, mma::FragB16x8<f16>, mma::Acc16x8F32,
        m = 16, n = 8, ks = 16, prep = |x| x,
        ldmatrix = [
            2 => |a_s, b_s, _| (mma::FragA16x16::ldmatrix(a_s, 0, 0), mma::FragB16x8::ldmatrix_trans(b_s, 0, 0)),
            3 => |a_s, _, bt_s| (mma::FragA16x16::ldmatrix(a_s, 0, 0), mma::FragB16x8::ldmatrix(bt_s, 0, 0))
        ];
    /// f16 × f16 + f16 (m16n8k16 with an f16 accumulator), modes 0–3.
    mma_tile_f16_f16acc(f16, f16, f16): mma::FragA16x16<f16>, mma::FragB16x8<f16>, mma::Acc16x8F16,
        m = 16, n = 8, ks = 16, prep = |x| x,
        ldmatrix = [
            2 => |a_s, b_s, _| (mma::FragA16x16::ldmatrix(a_s, 0, 0), mma::FragB16x8::ldmatrix_trans(b_s, 0, 0)),
            3 => |a_s, _, bt_s| (mma::FragA16x16::ldmatrix(a_s, 0, 0), mma::FragB16x8::ldmatrix(bt_s, 0, 0))
        ];
    /// tf32 × tf32 + f32 (m16n8k8): raw `f32` inputs, rounded on the device; modes 0–2.
    mma_tile_tf32(f32, f32, f32): mma::FragA16x8Tf32, mma::FragB8x8Tf32, mma::Acc16x8F32,
        m = 16, n = 8, ks = 8, prep = mma::to_tf32,
        ldmatrix = [
            2 => |a_s, _, bt_s| (mma::FragA16x8Tf32::ldmatrix(a_s, 0, 0), mma::FragB8x8Tf32::ldmatrix(bt_s, 0, 0))
        ];
    /// s8 × s8 + s32 (m16n8k32), modes 0–2.
    mma_tile_s8(i8, i8, i32): mma::FragA16x32<i8>, mma::FragB32x8<i8>, mma::Acc16x8I32,
        m = 16, n = 8, ks = 32, prep = |x| x,
        ldmatrix = [
            2 => |a_s, _, bt_s| (mma::FragA16x32::ldmatrix(a_s, 0, 0), mma::FragB32x8::ldmatrix(bt_s, 0, 0))
        ];
    /// u8 × u8 + s32 (m16n8k32), modes 0–2.
    mma_tile_u8(u8, u8, i32): mma::FragA16x32<u8>, mma::FragB32x8<u8>, mma::Acc16x8I32,
        m = 16, n = 8, ks = 32, prep = |x| x,
        ldmatrix = [
            2 => |a_s, _, bt_s| (mma::FragA16x32::ldmatrix(a_s, 0, 0), mma::FragB32x8::ldmatrix(bt_s, 0, 0))
        ];
    /// s8 × u8 + s32 (m16n8k32), modes 0–2.
    mma_tile_s8u8(i8, u8, i32): mma::FragA16x32<i8>, mma::FragB32x8<u8>, mma::Acc16x8I32,
        m = 16, n = 8, ks = 32, prep = |x| x,
        ldmatrix = [
            2 => |a_s, _, bt_s| (mma::FragA16x32::ldmatrix(a_s, 0, 0), mma::FragB32x8::ldmatrix(bt_s, 0, 0))
        ];
    /// u8 × s8 + s32 (m16n8k32), modes 0–2.
    mma_tile_u8s8(u8, i8, i32): mma::FragA16x32<u8>, mma::FragB32x8<i8>, mma::Acc16x8I32,
        m = 16, n = 8, ks = 32, prep = |x| x,
        ldmatrix = [
            2 => |a_s, _, bt_s| (mma::FragA16x32::ldmatrix(a_s, 0, 0), mma::FragB32x8::ldmatrix(bt_s, 0, 0))
        ];
    /// f64 × f64 + f64 (m8n8k4), modes 0–1 (no `ldmatrix` for 64-bit elements).
    mma_tile_f64(f64, f64, f64): mma::FragA8x4F64, mma::FragB4x8F64, mma::Acc8x8F64,
        m = 8, n = 8, ks = 4, prep = |x| x,
        ldmatrix = [];
}

/// Block tile of [`mma_gemm_bf16`]: `BM`×`BN` outputs per block of 4 warps (2×2, each 32×32:
/// 2×4 `m16n8k16` accumulators), `BK` of K per stage.
pub const GEMM_BM: usize = 64;
/// See [`GEMM_BM`].
pub const GEMM_BN: usize = 64;
/// See [`GEMM_BM`].
pub const GEMM_BK: usize = 16;

/// `c = a · b` for row-major bf16 `a` (m×k) and `b` (k×n), f32 `c` (m×n), on the tensor
/// cores: blocks of 128 threads (4 warps) on a grid of `(n / 64, m / 64)` (rounded up), any
/// m, n, k (edge tiles are padded with zeros). Per K stage the block stages a 64×16 tile of
/// `a` and a 16×64 tile of `b` in shared memory (rows padded by 8 elements: 48 and 144 bytes,
/// 16-byte aligned, so each `ldmatrix` phase hits 32 distinct banks); each warp loads 2 A
/// fragments (`ldmatrix.x4`) and 4 B fragments (`ldmatrix.x2.trans`) and issues 8 `mma.sync`.
#[kernel]
pub unsafe fn mma_gemm_bf16(
    a: Slice<bf16>,
    b: Slice<bf16>,
    c: SliceMut<f32>,
    m: u32,
    n: u32,
    k: u32,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        use mma::{Acc16x8F32, FragA16x16, FragB16x8};
        let (m, n, k) = (m as usize, n as usize, k as usize);
        ferrocuda_device::device_assert!(
            a.len() == m * k
                && b.len() == k * n
                && c.len() == m * n
                && thread::block_dim().x == 128
        );
        let a_s = shared_array!(bf16, [GEMM_BM, GEMM_BK + 8], align = 16);
        let b_s = shared_array!(bf16, [GEMM_BK, GEMM_BN + 8], align = 16);
        let t = thread::thread_idx().x as usize;
        let (bm, bn) = (
            thread::block_idx().y as usize * GEMM_BM,
            thread::block_idx().x as usize * GEMM_BN,
        );
        let w = t / 32;
        let (wm, wn) = (32 * (w / 2), 32 * (w % 2));
        let mut acc = [[Acc16x8F32::zeroed(); 4]; 2];
        for k0 in (0..k).step_by(GEMM_BK) {
            // Stage: 1024 elements of each tile, 8 per thread, zeros past the edges.
            for e in (t..GEMM_BM * GEMM_BK).step_by(128) {
                let (r, cc) = (e / GEMM_BK, e % GEMM_BK);
                let (gr, gc) = (bm + r, k0 + cc);
                let v = if gr < m && gc < k {
                    // SAFETY: gr * k + gc < m * k == a.len().
                    unsafe { a.get_unchecked(gr * k + gc) }
                } else {
                    bf16::ZERO
                };
                // SAFETY: one thread per element; barriers separate the stages.
                unsafe { a_s.write(r, cc, v) };
            }
            for e in (t..GEMM_BK * GEMM_BN).step_by(128) {
                let (r, cc) = (e / GEMM_BN, e % GEMM_BN);
                let (gr, gc) = (k0 + r, bn + cc);
                let v = if gr < k && gc < n {
                    // SAFETY: gr * n + gc < k * n == b.len().
                    unsafe { b.get_unchecked(gr * n + gc) }
                } else {
                    bf16::ZERO
                };
                // SAFETY: as above.
                unsafe { b_s.write(r, cc, v) };
            }
            thread::sync_threads();
            let fa = [0, 1].map(|i| FragA16x16::<bf16>::ldmatrix(a_s, wm + 16 * i, 0));
            let fb = [0, 1, 2, 3].map(|j| FragB16x8::<bf16>::ldmatrix_trans(b_s, 0, wn + 8 * j));
            for i in 0..2 {
                for j in 0..4 {
                    acc[i][j] = mma::mma(fa[i], fb[j], acc[i][j]);
                }
            }
            thread::sync_threads();
        }
        // The accumulators by name, stored one by one: a loop over the array would index it
        // at run time and put it in local memory.
        let lane = warp::lane_id();
        let store = |acc: Acc16x8F32, i: usize, j: usize| {
            acc.for_each(lane, |r, cc, v| {
                let (gr, gc) = (bm + wm + 16 * i + r, bn + wn + 8 * j + cc);
                if gr < m && gc < n {
                    // SAFETY: each element of c belongs to one lane of one warp.
                    unsafe { c.write(gr * n + gc, v) };
                }
            })
        };
        let [[a00, a01, a02, a03], [a10, a11, a12, a13]] = acc;
        store(a00, 0, 0);
        store(a01, 0, 1);
        store(a02, 0, 2);
        store(a03, 0, 3);
        store(a10, 1, 0);
        store(a11, 1, 1);
        store(a12, 1, 2);
        store(a13, 1, 3);
    }
}

/// `stmatrix` (sm_90): one warp (a block of 32 threads) moves the 16×16 bf16 tile `x`
/// (row-major) through fragments and back into shared tiles, copied to `out` (bits):
///
/// * `out[0..256]`: `FragA16x16::ldmatrix` then `FragA16x16::stmatrix` (`.x4`): `x` itself;
/// * `out[256..512]`: raw `stmatrix_x4_trans` of those registers with the `.x4` addresses:
///   each 8×8 quadrant of `x` transposed in place;
/// * `out[512..640]`: `FragB16x8::ldmatrix_trans` of columns 0..8, then
///   `FragB16x8::stmatrix_trans` (`.x2.trans`): those columns as a 16×8 tile;
/// * `out[640..768]`, an 8×16 tile: raw `stmatrix_x1` (columns 0..8) and `stmatrix_x1_trans`
///   (columns 8..16) of the register of `ldmatrix_x1` of the 8×8 corner: the corner, and its
///   transpose;
/// * `out[768..1024]`, a 16×16 tile: raw `stmatrix_x2` (columns 0..8) and
///   `stmatrix_x2_trans` (columns 8..16) of the registers of `ldmatrix_x2` of the left 16×8
///   half (two 8×8 matrices, rows 0..8 and 8..16): the half, and each matrix transposed;
/// * `out[1024..1152]`: the f16 accumulator `from_fn(|r, c| bits 8r + c)` stored with
///   `Acc16x8F16::stmatrix` (`.x2`), a 16×8 tile.
///
/// Built for sm_90 (`stmatrix` is an sm_90 instruction), into the crate's sm_90 part.
#[kernel(arch = "sm_90")]
pub unsafe fn mma_stmatrix(x: Slice<bf16>, out: SliceMut<u16>) {
    #[cfg(target_arch = "nvptx64")]
    {
        use mma::*;
        let l = warp::lane_id() as usize;
        let src = shared_array!(bf16, [16, 16], align = 16);
        let st = shared_array!(bf16, [16, 16], align = 16);
        let tr = shared_array!(bf16, [16, 16], align = 16);
        let half = shared_array!(bf16, [16, 8], align = 16);
        let x1s = shared_array!(bf16, [8, 16], align = 16);
        let x2s = shared_array!(bf16, [16, 16], align = 16);
        let acc = shared_array!(f16, [16, 8], align = 16);
        for e in (l..256).step_by(32) {
            // SAFETY: one lane per element; the barrier orders the writes before the loads.
            unsafe { src.write(e / 16, e % 16, at(x, e)) };
        }
        thread::sync_threads();
        let a = FragA16x16::<bf16>::ldmatrix(src, 0, 0);
        let b = FragB16x8::<bf16>::ldmatrix_trans(src, 0, 0);
        // SAFETY: (raw ldmatrix/stmatrix and the fragment stores) the whole warp calls;
        // every lane addresses a 16-byte aligned row of its array; only this warp touches
        // the destination tiles, each element written once, and the barrier below orders
        // the stores before the copies out.
        unsafe {
            a.stmatrix(st, 0, 0);
            stmatrix_x4_trans(tr.shared_addr(l % 16, 8 * (l / 16)), a.regs);
            b.stmatrix_trans(half, 0, 0);
            let x1 = ldmatrix_x1(src.shared_addr(l % 8, 0));
            stmatrix_x1(x1s.shared_addr(l % 8, 0), x1);
            stmatrix_x1_trans(x1s.shared_addr(l % 8, 8), x1);
            let x2 = ldmatrix_x2(src.shared_addr(l % 16, 0));
            stmatrix_x2(x2s.shared_addr(l % 16, 0), x2);
            stmatrix_x2_trans(x2s.shared_addr(l % 16, 8), x2);
            Acc16x8F16::from_fn(l as u32, |r, c| f16::from_bits((8 * r + c) as u16))
                .stmatrix(acc, 0, 0);
        }
        thread::sync_threads();
        for e in (l..256).step_by(32) {
            let (r, c) = (e / 16, e % 16);
            // SAFETY: one lane per output element.
            unsafe {
                out.write(e, st.get(r, c).to_bits());
                out.write(256 + e, tr.get(r, c).to_bits());
                out.write(768 + e, x2s.get(r, c).to_bits());
            }
        }
        for e in (l..128).step_by(32) {
            // SAFETY: as above.
            unsafe {
                out.write(512 + e, half.get(e / 8, e % 8).to_bits());
                out.write(640 + e, x1s.get(e / 16, e % 16).to_bits());
                out.write(1024 + e, acc.get(e / 8, e % 8).to_bits());
            }
        }
    }
}
