//! Warp and block reductions and scans, per (type, operation), for any block shape.

#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{
    block::{self, ReduceOp, Scratch},
    shared::{dynamic_shared, SharedElement},
    shared_array, thread, warp,
};
use ferrocuda_device::{kernel, Slice, SliceMut};

/// Values per thread in the output of the collective kernels.
pub const RECORD: usize = 7;

/// Thread `r` of block `b` (`n` threads, any shape; `g = b * n + r`) reads `v = x[g]` and
/// writes `out[7g ..]`: 0 block `reduce`, 1 block `inclusive_scan`, 2 block
/// `exclusive_scan(initial)`, 3 a second `reduce` right after (same scratch, no barrier in
/// between), 4 `warp_inclusive_scan`, 5 `warp_exclusive_scan(initial)`, 6 `warp_reduce`
/// (lane 0 only; the other lanes write nothing). Scratch: a static shared array of
/// `block::SCRATCH_LEN_MAX` elements, or (`collectives_affine_u64`) the launch's dynamic
/// shared memory of `block::scratch_len(n)` elements.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn collectives<T, Op>(x: Slice<T>, out: SliceMut<T>, initial: T, op: Op, scratch: impl Scratch<T>)
where
    T: warp::Shuffle + ferrocuda_device::Element + SharedElement,
    Op: ReduceOp<T>,
{
    let n = thread::block_threads() as usize;
    let r = thread::rank_in_block() as usize;
    let g = thread::block_idx().x as usize * n + r;
    let v = x.get(g).unwrap();
    // SAFETY: every thread of the block calls, with the same scratch, used for nothing else.
    let (red, incl, excl, red2) = unsafe {
        (
            block::reduce(v, op, scratch),
            block::inclusive_scan(v, op, scratch),
            block::exclusive_scan(v, initial, op, scratch),
            block::reduce(v, op, scratch),
        )
    };
    let wincl = block::warp_inclusive_scan(v, op);
    let wexcl = block::warp_exclusive_scan(v, initial, op);
    let wred = block::warp_reduce(v, op);
    // SAFETY: one thread per record.
    unsafe {
        for (k, w) in [red, incl, excl, red2, wincl, wexcl].iter().enumerate() {
            out.write(RECORD * g + k, *w);
        }
        if r.is_multiple_of(32) {
            out.write(RECORD * g + 6, wred);
        }
    }
}

/// The composition of affine maps `y = m·x + c` (mod 2^32), packed `m << 32 | c`:
/// associative and not commutative, so any reordering of the operands shows.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn affine(a: u64, b: u64) -> u64 {
    let (ma, ca, mb, cb) = (a >> 32, a as u32, b >> 32, b as u32);
    let m = (ma as u32).wrapping_mul(mb as u32);
    let c = ca.wrapping_mul(mb as u32).wrapping_add(cb);
    (m as u64) << 32 | c as u64
}

macro_rules! collective_kernels {
    ($($name:ident: $t:ty, $op:expr, $scratch:expr;)*) => {$(
        #[kernel(family = "collectives")]
        pub unsafe fn $name(x: Slice<$t>, out: SliceMut<$t>, initial: $t) {
            // SAFETY: a kernel over host-validated arrays; the scratch is this kernel's.
            #[cfg(target_arch = "nvptx64")]
            unsafe { collectives::<$t, _>(x, out, initial, $op, $scratch) }
        }
    )*};
}
collective_kernels! {
    collectives_sum_u32: u32, block::Sum, shared_array!(u32, block::SCRATCH_LEN_MAX);
    collectives_min_u32: u32, block::Min, shared_array!(u32, block::SCRATCH_LEN_MAX);
    collectives_max_i32: i32, block::Max, shared_array!(i32, block::SCRATCH_LEN_MAX);
    collectives_xor_u32: u32, block::BitXor, shared_array!(u32, block::SCRATCH_LEN_MAX);
    collectives_sum_u64: u64, block::Sum, shared_array!(u64, block::SCRATCH_LEN_MAX);
    collectives_min_i64: i64, block::Min, shared_array!(i64, block::SCRATCH_LEN_MAX);
    collectives_sum_f32: f32, block::Sum, shared_array!(f32, block::SCRATCH_LEN_MAX);
    collectives_max_f32: f32, block::Max, shared_array!(f32, block::SCRATCH_LEN_MAX);
    // Exactly the required length: the run-time length check passes.
    collectives_sum_f64: f64, block::Sum, shared_array!(f64, 64);
    collectives_affine_u64: u64, affine, dynamic_shared::<u64>();
}
