//! Hopper warpgroup MMA (`wgmma`, sm_90a): one warpgroup multiplies a 64 × K tile by an
//! N × K tile (both K-major) held in shared memory in each swizzle layout, accumulating in
//! f32; the host checks every element against a reference in f64. Built into the crate's
//! sm_90a part (`arch = "sm_90a"`).
//!
//! Each kernel: block = one warpgroup (128 threads); `a` is 64 × K, `b` is N × K (row-major,
//! bf16/f16 or f32 for tf32); `out` is 64 × N f32 (row-major); `swizzle` 0 = none, 1 = 32 B,
//! 2 = 64 B, 3 = 128 B. K is the swizzle's row (`row_bytes / element size`): 16, 16, 32, 64
//! for 16-bit inputs (8, 8, 16, 32 for tf32). The threads store the tiles in shared memory
//! in the layout [`Swizzle::offset`] gives (as TMA would), fence the async proxy, then run
//! `K / 16` (tf32: `K / 8`) `mma_async` steps in one batch.

#[cfg(ferrocuda_arch = "sm_90a")]
use ferrocuda_device::wgmma::{self, Accumulator, MatrixDesc, Swizzle};
use ferrocuda_device::{kernel, Slice, SliceMut};
#[cfg(ferrocuda_arch = "sm_90a")]
use ferrocuda_device::{shared_array, thread};

/// The 32-bit shared-memory address of a generic pointer into shared memory.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
fn shared_addr<T>(p: *const T) -> u32 {
    let a: u32;
    #[allow(clippy::pointers_in_nomem_asm_block)] // the pointer is converted, not read
    // SAFETY: address arithmetic only.
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 t; cvta.to.shared.u64 t, {p}; cvt.u32.u64 {a}, t; }}",
            p = in(reg64) p,
            a = out(reg32) a,
            options(pure, nomem, nostack)
        )
    };
    a
}

#[cfg(ferrocuda_arch = "sm_90a")]
fn swizzle_of(code: u32) -> Swizzle {
    match code {
        1 => Swizzle::B32,
        2 => Swizzle::B64,
        3 => Swizzle::B128,
        _ => Swizzle::None,
    }
}

/// The byte offset of element (row, k) (element size `size` bytes) of a K-major tile in
/// `swizzle`'s layout. For [`Swizzle::None`], the tile (K = 16 bytes × 2 core matrices) is
/// core matrices of 8 rows × 16 bytes, the two K-adjacent ones of 8 rows 128 bytes apart
/// (LBO) and the next 8 rows 256 bytes on (SBO).
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
fn tile_offset(swizzle: Swizzle, row: u32, k: u32, size: u32) -> u32 {
    let byte = k * size;
    match swizzle {
        Swizzle::None => (row / 8) * 256 + (byte / 16) * 128 + (row % 8) * 16 + byte % 16,
        s => s.offset(row, byte),
    }
}

/// The descriptor of a tile at `addr`.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
fn desc(addr: u32, swizzle: Swizzle) -> MatrixDesc {
    let d = match swizzle {
        Swizzle::None => MatrixDesc::new(addr, 128, 256, swizzle),
        s => MatrixDesc::k_major(addr, s),
    };
    match d {
        Ok(d) => d,
        Err(_) => panic!("bad descriptor"),
    }
}

/// Copies `rows` × `k` elements of `src` (row-major, 2- or 4-byte elements as u16/u32) into
/// shared memory at `base` in `swizzle`'s layout, the block's threads striding.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
unsafe fn store_tile<T: Copy + ferrocuda_device::Element>(
    src: Slice<T>,
    base: *mut u8,
    rows: u32,
    k: u32,
    swizzle: Swizzle,
) {
    let size = core::mem::size_of::<T>() as u32;
    let mut i = thread::rank_in_block();
    while i < rows * k {
        let (r, c) = (i / k, i % k);
        let v = src.get(i as usize).unwrap();
        // SAFETY: inside the tile (the caller sized it), each element written once.
        unsafe {
            base.add(tile_offset(swizzle, r, c, size) as usize)
                .cast::<T>()
                .write(v)
        };
        i += thread::block_threads();
    }
}

/// Writes the accumulators of thread `t` to `out` (64 × `n`, row-major), through the
/// fragment mapping.
#[cfg(ferrocuda_arch = "sm_90a")]
#[inline(always)]
unsafe fn store_acc<A: Accumulator>(acc: &A, out: SliceMut<f32>, n: u32) {
    let t = thread::rank_in_block();
    acc.each_pair(|r, v0, v1| {
        let (row, col) = wgmma::acc_coords(t, r);
        let at = (row * n + col) as usize;
        // SAFETY: each element has one owner (`acc_coords`).
        unsafe {
            out.write(at, v0);
            out.write(at + 1, v1);
        }
    });
}

/// The body of every 16-bit kernel: `ty` 0 bf16, 1 f16.
macro_rules! wgmma_kernel {
    ($name:ident, $n:literal, $regs:literal, $elem:ty, $mma:ident) => {
        #[doc = concat!("`out = a · bᵀ` with `wgmma…m64n", $n, "k16` (see the module documentation).")]
        #[kernel(arch = "sm_90a", block = 128)]
        pub unsafe fn $name(a: Slice<$elem>, b: Slice<$elem>, out: SliceMut<f32>, swizzle: u32) {
            #[cfg(target_arch = "nvptx64")]
            {
                let sa = shared_array!(u8, 8192, align = 1024);
                let sb = shared_array!(u8, 32768, align = 1024);
                let s = swizzle_of(swizzle);
                let k = s.row_bytes().max(32) / 2;
                // SAFETY: tiles of 64 × k and N × k 2-byte elements fit (k ≤ 64).
                unsafe {
                    store_tile(a, sa.as_mut_ptr(), 64, k, s);
                    store_tile(b, sb.as_mut_ptr(), $n, k, s);
                }
                wgmma::fence_proxy_async_shared();
                thread::sync_threads();
                let (da, db) = (
                    desc(shared_addr(sa.as_ptr()), s),
                    desc(shared_addr(sb.as_ptr()), s),
                );
                let mut acc = [0f32; $regs];
                wgmma::fence_operand(&mut acc);
                // SAFETY: the whole warpgroup (block = 128 threads) runs every step; the tiles
                // were stored, fenced and synchronised above and stay until the wait.
                unsafe {
                    wgmma::fence();
                    for step in 0..k / 16 {
                        wgmma::$mma::<$n, $regs>(
                            &mut acc,
                            da.advance(32 * step),
                            db.advance(32 * step),
                            step > 0,
                        );
                    }
                    wgmma::commit_group();
                    wgmma::wait_group::<0>();
                }
                wgmma::fence_operand(&mut acc);
                // SAFETY: one owner per element.
                unsafe { store_acc(&acc, out, $n) };
            }
        }
    };
}

wgmma_kernel!(
    wgmma_bf16_n16,
    16,
    8,
    ferrocuda_device::half::bf16,
    mma_bf16
);
wgmma_kernel!(
    wgmma_bf16_n64,
    64,
    32,
    ferrocuda_device::half::bf16,
    mma_bf16
);
wgmma_kernel!(
    wgmma_bf16_n128,
    128,
    64,
    ferrocuda_device::half::bf16,
    mma_bf16
);
wgmma_kernel!(
    wgmma_bf16_n256,
    256,
    128,
    ferrocuda_device::half::bf16,
    mma_bf16
);
wgmma_kernel!(wgmma_f16_n64, 64, 32, ferrocuda_device::half::f16, mma_f16);

/// `out = a · bᵀ` for f32 inputs read as tf32, `wgmma…m64n64k8.f32.tf32.tf32`: K = the
/// swizzle's row / 4 (8, 8, 16, 32), one k8 step per 32 bytes of a row.
#[kernel(arch = "sm_90a", block = 128)]
pub unsafe fn wgmma_tf32_n64(a: Slice<f32>, b: Slice<f32>, out: SliceMut<f32>, swizzle: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let sa = shared_array!(u8, 8192, align = 1024);
        let sb = shared_array!(u8, 8192, align = 1024);
        let s = swizzle_of(swizzle);
        let k = s.row_bytes().max(32) / 4;
        // SAFETY: 64 × k 4-byte elements fit (k ≤ 32).
        unsafe {
            store_tile(a, sa.as_mut_ptr(), 64, k, s);
            store_tile(b, sb.as_mut_ptr(), 64, k, s);
        }
        wgmma::fence_proxy_async_shared();
        thread::sync_threads();
        let (da, db) = (
            desc(shared_addr(sa.as_ptr()), s),
            desc(shared_addr(sb.as_ptr()), s),
        );
        let mut acc = [0f32; 32];
        wgmma::fence_operand(&mut acc);
        // SAFETY: as in the 16-bit kernels.
        unsafe {
            wgmma::fence();
            for step in 0..k / 8 {
                wgmma::mma_tf32::<64, 32>(
                    &mut acc,
                    da.advance(32 * step),
                    db.advance(32 * step),
                    step > 0,
                );
            }
            wgmma::commit_group();
            wgmma::wait_group::<0>();
        }
        wgmma::fence_operand(&mut acc);
        // SAFETY: one owner per element.
        unsafe { store_acc(&acc, out, 64) };
    }
}

/// A from registers: `out = a · bᵀ` with `a` (64 × 16 bf16) loaded by each thread into the
/// registers [`wgmma::a_coords`] names, `b` (64 × 16) in shared memory (128-byte-swizzle
/// rows are too wide for one k16 step of 16 elements, so this kernel uses the 32-byte
/// swizzle), `wgmma…m64n64k16…bf16` with A from registers; then a second product of the
/// result, converted to bf16 pairs in place (the accumulator's layout *is* A's), by the same
/// `b`: `out = (a · bᵀ rounded to bf16) · bᵀ[:, :16]`-style chain of `wgmma_rs` — written as
/// `out2 = bf16(out1)[:, 0..16] · bᵀ`.
#[kernel(arch = "sm_90a", block = 128)]
pub unsafe fn wgmma_bf16_rs_n64(
    a: Slice<ferrocuda_device::half::bf16>,
    b: Slice<ferrocuda_device::half::bf16>,
    out: SliceMut<f32>,
    out2: SliceMut<f32>,
) {
    #[cfg(target_arch = "nvptx64")]
    // `unroll!` writes H and J out as each literal, 0 included: `H / 2`, `16 * (H % 2)` and
    // `2 * J` are the registers' indices and shifts, written alike for every step.
    #[allow(clippy::erasing_op, clippy::identity_op, clippy::eq_op)]
    {
        let sb = shared_array!(u8, 2048, align = 1024);
        let s = Swizzle::B32;
        // SAFETY: 64 × 16 2-byte elements fit.
        unsafe { store_tile(b, sb.as_mut_ptr(), 64, 16, s) };
        wgmma::fence_proxy_async_shared();
        thread::sync_threads();
        let t = thread::rank_in_block();
        let mut ra = [0u32; 4];
        ferrocuda_device::unroll!(H in 0..8 {
            let (row, k) = wgmma::a_coords(t, H);
            let bits = a.get((row * 16 + k) as usize).unwrap().to_bits() as u32;
            ra[H / 2] |= bits << (16 * (H % 2));
        });
        let db = desc(shared_addr(sb.as_ptr()), s);
        let mut acc = [0f32; 32];
        wgmma::fence_operand(&mut acc);
        // SAFETY: as in the other kernels; A is in registers.
        unsafe {
            wgmma::fence();
            wgmma::mma_bf16_rs::<64, 32>(&mut acc, ra, db, false);
            wgmma::commit_group();
            wgmma::wait_group::<0>();
        }
        wgmma::fence_operand(&mut acc);
        // SAFETY: one owner per element.
        unsafe { store_acc(&acc, out, 64) };
        // The first 8 accumulators (columns 0..16 of the product) as bf16 pairs: A of the
        // next product.
        let mut next = [0u32; 4];
        ferrocuda_device::unroll!(J in 0..4 {
            let lo = ferrocuda_device::half::bf16::from_f32(acc[2 * J]).to_bits() as u32;
            let hi = ferrocuda_device::half::bf16::from_f32(acc[2 * J + 1]).to_bits() as u32;
            next[J] = lo | hi << 16;
        });
        let mut acc2 = [0f32; 32];
        wgmma::fence_operand(&mut acc2);
        // SAFETY: as above.
        unsafe {
            wgmma::fence();
            wgmma::mma_bf16_rs::<64, 32>(&mut acc2, next, db, false);
            wgmma::commit_group();
            wgmma::wait_group::<0>();
        }
        wgmma::fence_operand(&mut acc2);
        // SAFETY: one owner per element.
        unsafe { store_acc(&acc2, out2, 64) };
    }
}
