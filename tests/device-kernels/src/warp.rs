//! Warp primitives per lane, with full and partial member masks.

use ferrocuda_device::{kernel, Slice, SliceMut};
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{thread, warp};

/// Records per thread of `warp_u32` (the host reference mirrors this list).
pub const WARP_U32_RECORD: usize = 20;

/// Every lane in `mask` (of its warp) records, for `v = x[i]`:
/// 0 `shfl_sync(v, lane + s)`, 1 `shfl_up_sync(v, d)`, 2 `shfl_down_sync(v, d)`,
/// 3 `shfl_xor_sync(v, d)`, 4 `ballot_sync(v odd)`, 5 `any_sync(v % 5 == 0)`,
/// 6 `all_sync(v % 5 != 0)`, 7 `match_any_sync(v % 4)`, 8 `match_all_sync(v / 2^30)` (mask
/// or 0), 9 `match_all_sync(7)`, 10–15 `reduce_{add,min,max,and,or,xor}_sync(v)` (min/max
/// also as `i32` in 16/17), 18 `lane_id`, 19 whether `active_mask` holds this lane and
/// nothing outside `mask`. Lanes outside `mask` write nothing.
#[kernel]
pub unsafe fn warp_u32(x: Slice<u32>, out: SliceMut<u32>, mask: u32, s: u32, d: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let i = thread::index_1d();
        let lane = (thread::rank_in_block() % 32) as u32;
        if i >= x.len() || mask >> lane & 1 == 0 {
            return;
        }
        let v = x.get(i).unwrap();
        let am = warp::active_mask();
        // `%` rather than is_multiple_of below: the latter changes this kernel's generated code.
        #[allow(clippy::manual_is_multiple_of)]
        let r: [u32; WARP_U32_RECORD] = [
            warp::shfl_sync(mask, v, lane + s),
            warp::shfl_up_sync(mask, v, d),
            warp::shfl_down_sync(mask, v, d),
            warp::shfl_xor_sync(mask, v, d),
            warp::ballot_sync(mask, v & 1 == 1),
            warp::any_sync(mask, v % 5 == 0) as u32,
            warp::all_sync(mask, v % 5 != 0) as u32,
            warp::match_any_sync(mask, v % 4),
            warp::match_all_sync(mask, v >> 30).unwrap_or(0),
            warp::match_all_sync(mask, 7u32).unwrap_or(0),
            warp::reduce_add_sync(mask, v),
            warp::reduce_min_sync(mask, v),
            warp::reduce_max_sync(mask, v),
            warp::reduce_and_sync(mask, v),
            warp::reduce_or_sync(mask, v),
            warp::reduce_xor_sync(mask, v),
            warp::reduce_min_sync(mask, v as i32) as u32,
            warp::reduce_max_sync(mask, v as i32) as u32,
            warp::lane_id(),
            (am >> lane & 1 == 1 && am & !mask == 0) as u32,
        ];
        for (k, w) in r.iter().enumerate() {
            // SAFETY: one thread per record.
            unsafe { out.write(i * WARP_U32_RECORD + k, *w) };
        }
    }
}

/// Shuffles and match of one type `T` per lane in `mask`: `out[4i..]` = idx (lane + s),
/// up d, down d, xor d; `matches[i]` = `match_any_sync(v)`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn shuffles<T: warp::Shuffle + warp::Match + ferrocuda_device::Element>(
    x: Slice<T>,
    out: SliceMut<T>,
    matches: SliceMut<u32>,
    mask: u32,
    s: u32,
    d: u32,
) {
    let i = thread::index_1d();
    let lane = (thread::rank_in_block() % 32) as u32;
    if i >= x.len() || mask >> lane & 1 == 0 {
        return;
    }
    let v = x.get(i).unwrap();
    let r = [
        warp::shfl_sync(mask, v, lane + s),
        warp::shfl_up_sync(mask, v, d),
        warp::shfl_down_sync(mask, v, d),
        warp::shfl_xor_sync(mask, v, d),
    ];
    // SAFETY: one thread per record.
    unsafe {
        for (k, w) in r.iter().enumerate() {
            out.write(4 * i + k, *w);
        }
        matches.write(i, warp::match_any_sync(mask, v));
    }
}

macro_rules! shuffle_kernels {
    ($($name:ident: $t:ty;)*) => {$(
        #[kernel(family = "shuffles")]
        pub unsafe fn $name(x: Slice<$t>, out: SliceMut<$t>, matches: SliceMut<u32>, mask: u32, s: u32, d: u32) {
            // SAFETY: a kernel over host-validated arrays.
            unsafe { shuffles::<$t>(x, out, matches, mask, s, d) }
        }
    )*};
}
shuffle_kernels! {
    shuffles_i32: i32;
    shuffles_u32: u32;
    shuffles_f32: f32;
    shuffles_i64: i64;
    shuffles_u64: u64;
    shuffles_f64: f64;
}
