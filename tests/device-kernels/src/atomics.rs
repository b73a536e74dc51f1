//! Atomics under full contention (every thread of the grid on the same few addresses), on
//! global and shared memory, packed half atomics, and message passing with release/acquire
//! and with fences.

use ferrocuda_device::atomic::AtomicSlice;
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{
    atomic::{self, AtomicAdd, AtomicBitwise, AtomicMinMax, AtomicRef, Order, Scope},
    thread,
};
use ferrocuda_device::{kernel, Slice, SliceMut};

/// Wrapping addition for the compare-exchange loop of the integer kernels.
#[cfg(target_arch = "nvptx64")]
trait WrapAdd: Copy {
    fn wrap_add(self, o: Self) -> Self;
}
#[cfg(target_arch = "nvptx64")]
macro_rules! wrap_add {
    ($($t:ty),*) => {$(impl WrapAdd for $t { fn wrap_add(self, o: $t) -> $t { self.wrapping_add(o) } })*};
}
#[cfg(target_arch = "nvptx64")]
wrap_add!(u32, i32, u64, i64);

/// Integer contention. Slots of `acc` (all updated by every thread with its `x[i]`):
/// 0 ticket counter (`fetch_add(one)`: each thread's ticket goes to `tickets[i]`),
/// 1 `red_add`, 2 `fetch_sub`, 3 `red_sub`, 4 `fetch_min`, 5 `fetch_max`, 6 `red_min`,
/// 7 `red_max`, 8 `fetch_and`, 9 `fetch_or`, 10 `fetch_xor`, 11 `red_and`, 12 `red_or`,
/// 13 `red_xor`, 14 compare-exchange loop adding `x[i]` (for `i < CAS_THREADS`), 15 `swap` (the old value goes to
/// `olds[i]`), 16 `atomic_add`, 17 the free function `atomic::red_add` (generic address).
/// Elements `0..CAS_THREADS` run the compare-exchange loops (see [`int_atomics`]).
pub const CAS_THREADS: usize = 4096;

#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn int_atomics<T>(
    x: Slice<T>,
    acc: AtomicSlice<T>,
    tickets: SliceMut<T>,
    olds: SliceMut<T>,
    one: T,
) where
    T: ferrocuda_device::Element + AtomicAdd + AtomicMinMax + AtomicBitwise + WrapAdd + PartialEq,
{
    use Order::*;
    use Scope::*;
    for i in thread::grid_stride(x.len()) {
        let v = x.get(i).unwrap();
        // SAFETY: one thread per element.
        unsafe { tickets.write(i, acc.at(0).fetch_add(one, AcqRel, Device)) };
        acc.at(1).red_add(v, Relaxed, Device);
        acc.at(2).fetch_sub(v, Release, System);
        acc.at(3).red_sub(v, Relaxed, Device);
        acc.at(4).fetch_min(v, Acquire, Device);
        acc.at(5).fetch_max(v, AcqRel, Device);
        acc.at(6).red_min(v, Release, Device);
        acc.at(7).red_max(v, Relaxed, System);
        acc.at(8).fetch_and(v, Relaxed, Device);
        acc.at(9).fetch_or(v, AcqRel, Device);
        acc.at(10).fetch_xor(v, Acquire, System);
        acc.at(11).red_and(v, Relaxed, Device);
        acc.at(12).red_or(v, Release, Device);
        acc.at(13).red_xor(v, Relaxed, Device);
        // A compare-exchange loop on one address costs O(contenders) attempts per success:
        // only the first CAS_THREADS elements take part (all at once), or a grid of 2^20
        // threads would need ~10^11 attempts.
        if i < CAS_THREADS {
            let cas = acc.at(14);
            let mut cur = cas.load(Relaxed, Device);
            while let Err(now) = cas.compare_exchange(cur, cur.wrap_add(v), AcqRel, Device) {
                cur = now;
            }
        }
        // SAFETY: one thread per element.
        unsafe { olds.write(i, acc.at(15).swap(v, AcqRel, Device)) };
        acc.atomic_add(16, v);
        // SAFETY: element 17 is in bounds (checked by `at`) and only accessed atomically.
        unsafe { atomic::red_add(acc.at(17).as_ptr(), v, Relaxed, Device) };
    }
}

macro_rules! int_kernels {
    ($($name:ident: $t:ty;)*) => {$(
        #[kernel(family = "int_atomics")]
        pub unsafe fn $name(x: Slice<$t>, acc: AtomicSlice<$t>, tickets: SliceMut<$t>, olds: SliceMut<$t>, one: $t) {
            // SAFETY: a kernel over host-validated arrays.
            unsafe { int_atomics::<$t>(x, acc, tickets, olds, one) }
        }
    )*};
}
int_kernels! {
    int_atomics_u32: u32;
    int_atomics_i32: i32;
    int_atomics_u64: u64;
    int_atomics_i64: i64;
}

/// Float contention. Slots: 0 `fetch_add`, 1 `red_add`, 2 `fetch_sub`, 3 `fetch_min`,
/// 4 `fetch_max`, 5 `red_min`, 6 `red_max`, 7 `swap` (old to `olds[i]`), 8 compare-exchange
/// loop adding `x[i]` (for `i < CAS_THREADS`), 9 `atomic_add`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn float_atomics<T>(x: Slice<T>, acc: AtomicSlice<T>, olds: SliceMut<T>)
where
    T: ferrocuda_device::Element + AtomicAdd + AtomicMinMax + core::ops::Add<Output = T>,
{
    use Order::*;
    use Scope::*;
    for i in thread::grid_stride(x.len()) {
        let v = x.get(i).unwrap();
        acc.at(0).fetch_add(v, AcqRel, Device);
        acc.at(1).red_add(v, Relaxed, Device);
        acc.at(2).fetch_sub(v, Relaxed, System);
        acc.at(3).fetch_min(v, Relaxed, Device);
        acc.at(4).fetch_max(v, AcqRel, Device);
        acc.at(5).red_min(v, Release, Device);
        acc.at(6).red_max(v, Relaxed, Device);
        // SAFETY: one thread per element.
        unsafe { olds.write(i, acc.at(7).swap(v, Relaxed, Device)) };
        if i < CAS_THREADS {
            let _ = acc.at(8).fetch_update(AcqRel, Device, |c| Some(c + v));
        }
        acc.atomic_add(9, v);
    }
}

macro_rules! float_kernels {
    ($($name:ident: $t:ty;)*) => {$(
        #[kernel(family = "float_atomics")]
        pub unsafe fn $name(x: Slice<$t>, acc: AtomicSlice<$t>, olds: SliceMut<$t>) {
            // SAFETY: a kernel over host-validated arrays.
            unsafe { float_atomics::<$t>(x, acc, olds) }
        }
    )*};
}
float_kernels! {
    float_atomics_f32: f32;
    float_atomics_f64: f64;
}

/// Half-precision atomic adds under contention, `n` threads. Words of `acc`: 0 `f16x2`
/// `fetch_add (1.0, 0.5)`, 1 `f16x2` `red_add (1.0, -0.5)` (threads < 2048 — sums stay
/// exact); 2 `bf16x2` `fetch_add (1.0, 0.25)`, 3 `bf16x2` `red_add (-1.0, 0.5)`, 4 low half
/// `bf16` `fetch_add 1.0`, high half `bf16` `red_sub 0.5` (threads < 256). `h[0]` `f16`
/// `fetch_add 1.0`, `h[1]` `f16` `red_sub 0.25` (threads < 2048).
#[kernel]
pub unsafe fn half_atomics(
    n: u32,
    acc: AtomicSlice<u32>,
    h: AtomicSlice<ferrocuda_device::half::f16>,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        use ferrocuda_device::half::{bf16, bf16x2, f16, f16x2};
        use Order::*;
        use Scope::*;
        let word = |k: usize| acc.at(k).as_ptr();
        for t in thread::grid_stride(n as usize) {
            // SAFETY: (all refs) in-bounds words of the atomic slice, accessed only atomically
            // and each always with the same width.
            unsafe {
                if t < 2048 {
                    let a = AtomicRef::<f16x2>::from_global_ptr(word(0).cast());
                    a.fetch_add(f16x2::from_f32s(1.0, 0.5), AcqRel, Device);
                    let b = AtomicRef::<f16x2>::from_ptr(word(1).cast());
                    b.red_add(f16x2::from_f32s(1.0, -0.5), Relaxed, Device);
                    h.at(0).fetch_add(1.0 as f16, Relaxed, Device);
                    h.at(1).red_sub(0.25 as f16, Release, Device);
                }
                if t < 256 {
                    let c = AtomicRef::<bf16x2>::from_global_ptr(word(2).cast());
                    c.fetch_add(bf16x2::from_f32s(1.0, 0.25), Relaxed, Device);
                    let d = AtomicRef::<bf16x2>::from_global_ptr(word(3).cast());
                    d.red_add(bf16x2::from_f32s(-1.0, 0.5), Relaxed, Device);
                    let lo = AtomicRef::<bf16>::from_global_ptr(word(4).cast());
                    lo.fetch_add(bf16::ONE, AcqRel, Device);
                    let hi = AtomicRef::<bf16>::from_global_ptr(word(4).cast::<bf16>().add(1));
                    hi.red_sub(bf16::from_f32(0.5), Relaxed, Device);
                }
            }
        }
    }
}

/// Shared-memory atomics, block scope: each block accumulates its `x` values in 8 words of a
/// static shared array, then thread 0 writes them to `out[8 * block ..]`: 0 `fetch_add`,
/// 1 `red_add`, 2 `fetch_min`, 3 `red_max` (through the array's `atomic(i)` handle), 4
/// `fetch_and`, 5 `red_or`, 6 `fetch_xor` (the raw `atomic::shared` functions), 7
/// compare-exchange loop counting threads.
#[kernel]
pub unsafe fn shared_atomics(x: Slice<u32>, out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        use atomic::shared;
        use Order::*;
        use Scope::*;
        let words = ferrocuda_device::shared_array![u32; 8];
        let s = words.as_mut_ptr();
        let (rank, n) = (thread::rank_in_block(), thread::block_threads());
        let block = thread::block_idx().x as usize;
        // SAFETY: (all shared accesses) 8 words of shared memory, ordered by the barriers,
        // accessed atomically between them.
        unsafe {
            if rank == 0 {
                for (k, init) in [0, 0, u32::MAX, 0, u32::MAX, 0, 0, 0].iter().enumerate() {
                    words.write(k, *init);
                }
            }
            thread::sync_threads();
            let v = x.get(block * n as usize + rank as usize).unwrap();
            words.atomic(0).fetch_add(v, Relaxed, Block);
            words.atomic(1).red_add(v, Relaxed, Block);
            words.atomic(2).fetch_min(v, AcqRel, Block);
            words.atomic(3).red_max(v, Release, Block);
            shared::fetch_and(s.add(4), v, Relaxed, Block);
            shared::red_or(s.add(5), v, Relaxed, Block);
            shared::fetch_xor(s.add(6), v, Acquire, Block);
            let c = AtomicRef::from_shared_ptr(s.add(7));
            let mut cur = shared::load(s.add(7), Acquire, Block);
            while let Err(now) = c.compare_exchange(cur, cur + 1, Relaxed, Block) {
                cur = now;
            }
            thread::sync_threads();
            if rank == 0 {
                for k in 0..8 {
                    out.write(8 * block + k, shared::load(s.add(k), Relaxed, Block));
                }
            }
        }
    }
}

/// Message passing between block 0 (producer) and block 1 (consumer) of a 2-block grid:
/// phase A publishes `data[0..32]` with a release store of `flags[0]` and reads it after an
/// acquire load; phase B publishes `data[32..64]` with `fence_sc` + relaxed store of
/// `flags[1]`, read after a relaxed load + `fence(AcqRel)`. The consumer copies what it read
/// to `result` (`u32::MAX` if it gave up after `spins` polls).
#[kernel]
pub unsafe fn message_passing(
    data: SliceMut<u32>,
    flags: AtomicSlice<u32>,
    result: SliceMut<u32>,
    spins: u32,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        use Order::*;
        use Scope::*;
        let t = thread::thread_idx().x as usize;
        let wait = |flag: usize, order: Order| {
            let mut k = 0;
            while flags.at(flag).load(order, Device) == 0 && k < spins {
                thread::nanosleep(64);
                k += 1;
            }
            k < spins
        };
        // SAFETY: (plain accesses) the data is written by block 0 and read by block 1 only
        // after the flag's synchronization; one thread per element.
        unsafe {
            if thread::block_idx().x == 0 {
                data.write(t, 1000 + t as u32);
                thread::sync_threads();
                if t == 0 {
                    flags.at(0).store(1, Release, Device);
                }
                data.write(32 + t, 2000 + t as u32);
                thread::sync_threads();
                if t == 0 {
                    atomic::fence_sc(Device);
                    flags.at(1).store(1, Relaxed, Device);
                }
            } else {
                let ok = thread::sync_threads_and(t != 0 || wait(0, Acquire));
                result.write(t, if ok { data.get(t).unwrap() } else { u32::MAX });
                let ok = thread::sync_threads_and(
                    t != 0 || {
                        let seen = wait(1, Relaxed);
                        atomic::fence(AcqRel, Device);
                        seen
                    },
                );
                result.write(
                    32 + t,
                    if ok {
                        data.get(32 + t).unwrap()
                    } else {
                        u32::MAX
                    },
                );
            }
        }
    }
}

/// Every fence, for the PTX checks (and as a smoke test: it must run).
#[kernel]
pub unsafe fn fences(out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        use Scope::*;
        atomic::fence(Order::Relaxed, Device);
        atomic::fence(Order::Acquire, Block);
        atomic::fence(Order::Release, Device);
        atomic::fence(Order::AcqRel, System);
        atomic::fence_sc(Block);
        atomic::fence_sc(Device);
        atomic::fence_sc(System);
        if thread::index_1d() == 0 {
            // SAFETY: one thread writes.
            unsafe { out.write(0, 1) };
        }
    }
}
