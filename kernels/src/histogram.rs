//! `histogram`: counts of `x` in `bins.len()` equal-width bins over `[lo, hi]`, exactly as
//! `numpy.histogram(x, bins=len, range=(lo, hi))` counts them.
//!
//! # NumPy's rule, reproduced
//!
//! NumPy keeps the values with `lo <= x <= hi` (NaN never), computes an index
//! `⌊(x − lo) / (hi − lo) · nbins⌋` (the last edge, `hi`, belongs to the last bin), and then
//! corrects it by one against its bin edges — `numpy.linspace(lo, hi, nbins + 1)` — so that a
//! value lands in bin `k` when `edge[k] <= x < edge[k + 1]`. It computes in the data type for
//! `float32` data (the edges rounded to `float32`) and in `float64` for integer and `float64`
//! data; [`Binner`] does the same arithmetic in the same types and order (with a fast,
//! provably equal shortcut for the index estimate), so counts equal NumPy's — values on interior
//! edges and on `hi` included. Two differences, both where NumPy refuses or rewrites the
//! request: an empty range (`lo == hi`, which NumPy widens by ±0.5) is refused here, and when
//! bins are so narrow that two `float32` edges round to the same value (NumPy raises "Too many
//! bins for data range") the kernel counts by its rounded edges.
//!
//! # The kernel
//!
//! Each block keeps private counts in shared memory: up to 8192 counters, as `R` replicas per
//! bin (`R` = 32 for up to 256 bins, fewer for more bins, laid out bin-major so that lane `l`
//! of every warp updates replica `l mod R`: with 32 replicas no two lanes of a warp ever touch
//! the same counter or the same bank, whatever the data — all values in one bin included).
//! Threads stream `x` in 16-byte vectors (a grid-stride walk over a resident wave of blocks) and
//! add one per value with a shared-memory atomic (`red.shared.add.u32`); then each block adds
//! its non-zero counts to the global `bins` with one device-scope atomic per bin (`red.add.u64`).
//! `bins` is zero-filled by the launcher right before the launch (`zero(bins)`). For `uint8`
//! data a 256-entry table (value → bin, computed with NumPy's rule once per block) replaces the
//! arithmetic, and the common `256 bins over [0, 256)` case skips even the table. More than 8192
//! bins: every value is added to global memory directly.

#[cfg(target_arch = "nvptx64")]
use crate::prelude::*;
use ferrocuda_device::atomic::AtomicSlice;
use ferrocuda_device::{kernel, Slice};

/// Counters of a block's private histogram (32 KiB of shared memory).
#[cfg(target_arch = "nvptx64")]
const COUNTERS: usize = 8192;

/// The `uint8` kernel's table: the bin of each byte value (−1: none).
#[cfg(target_arch = "nvptx64")]
type Table = ferrocuda_device::shared::SharedArray<i32, 256>;

/// NumPy's uniform-bin rule for one launch (see the module documentation).
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
struct Binner {
    lo: f64,
    hi: f64,
    /// `hi − lo` (NumPy's `norm_denom`), which is also `linspace`'s `delta`.
    denom: f64,
    nbins: u32,
    nbf: f64,
    /// `linspace`'s step, `delta / nbins`.
    step: f64,
    /// `nbins / denom`, for the index estimate.
    scale: f64,
}

#[cfg(target_arch = "nvptx64")]
impl Binner {
    #[inline(always)]
    fn new(lo: f64, hi: f64, nbins: usize) -> Binner {
        let denom = hi - lo;
        let nbf = nbins as f64;
        Binner {
            lo,
            hi,
            denom,
            nbins: nbins as u32,
            nbf,
            step: denom / nbf,
            scale: nbf / denom,
        }
    }

    /// Edge `k` of `linspace(lo, hi, nbins + 1)` in `float64`: `k·step + lo`, the last one `hi`.
    #[inline(always)]
    fn edge(&self, k: u32) -> f64 {
        if k >= self.nbins {
            self.hi
        } else {
            k as f64 * self.step + self.lo
        }
    }

    /// NumPy's first index, `⌊d / denom · nbins⌋` for `d = x − lo ≥ 0`: from the estimate
    /// `d · (nbins / denom)` when that is farther than its error bound from an integer (both
    /// values are within 2 ulp of `d · nbins / denom`, so they then truncate alike), else
    /// computed as NumPy does.
    #[inline(always)]
    fn first_index(&self, d: f64) -> u32 {
        let est = d * self.scale;
        let floor = est as u32 as f64;
        let margin = (est + 1.0) * 1e-14;
        let i = if est - floor > margin && floor + 1.0 - est > margin {
            floor
        } else {
            d / self.denom * self.nbf
        };
        let i = i as u32;
        // The last edge belongs to the last bin.
        if i >= self.nbins {
            self.nbins - 1
        } else {
            i
        }
    }

    /// The bin of `v` computed in `float64` (integer and `float64` data), or `None` when `v`
    /// is outside `[lo, hi]` or NaN.
    #[inline(always)]
    fn bin_f64(&self, v: f64) -> Option<u32> {
        if !(v >= self.lo && v <= self.hi) {
            return None;
        }
        let mut i = self.first_index(v - self.lo);
        if i > 0 && v < self.edge(i) {
            i -= 1;
        }
        if i + 1 < self.nbins && v >= self.edge(i + 1) {
            i += 1;
        }
        Some(i)
    }

    /// The bin of `v` computed as NumPy does for `float32` data: bounds and edges rounded to
    /// `float32`, the difference `x − lo` in `float32`, the index in `float64`.
    #[inline(always)]
    fn bin_f32(&self, v: f32) -> Option<u32> {
        let (lo, hi) = (self.lo as f32, self.hi as f32);
        if !(v >= lo && v <= hi) {
            return None;
        }
        let mut i = self.first_index((v - lo) as f64);
        if i > 0 && v < self.edge(i) as f32 {
            i -= 1;
        }
        if i + 1 < self.nbins && v >= self.edge(i + 1) as f32 {
            i += 1;
        }
        Some(i)
    }
}

/// An element type a histogram counts, with the arithmetic NumPy uses for it.
#[cfg(target_arch = "nvptx64")]
trait Binnable: Element + Copy {
    /// Elements per 16-byte vector.
    const LANES: usize;
    fn bin(self, b: &Binner) -> Option<u32>;
    /// The value as a table index (`u8` data only; the table is used for nothing else).
    #[inline(always)]
    fn byte(self) -> usize {
        0
    }
}

#[cfg(target_arch = "nvptx64")]
impl Binnable for f32 {
    const LANES: usize = 4;
    #[inline(always)]
    fn bin(self, b: &Binner) -> Option<u32> {
        b.bin_f32(self)
    }
}

#[cfg(target_arch = "nvptx64")]
macro_rules! binnable_f64 {
    ($($t:ty: $lanes:literal),*) => {$(
        impl Binnable for $t {
            const LANES: usize = $lanes;
            #[inline(always)]
            fn bin(self, b: &Binner) -> Option<u32> {
                b.bin_f64(self as f64)
            }
        }
    )*};
}
#[cfg(target_arch = "nvptx64")]
binnable_f64!(i32: 4, f64: 2);

#[cfg(target_arch = "nvptx64")]
impl Binnable for u8 {
    const LANES: usize = 16;
    #[inline(always)]
    fn bin(self, b: &Binner) -> Option<u32> {
        b.bin_f64(self as f64)
    }
    #[inline(always)]
    fn byte(self) -> usize {
        self as usize
    }
}

/// Counts `x` into `bins`; see the module documentation.
///
/// # Safety
///
/// Kernel-launch context; `bins` is zero-filled and non-empty, `lo < hi`, both finite (the
/// kernel's declarations).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn histogram<T: Binnable, const L: usize>(
    x: Slice<T>,
    bins: AtomicSlice<i64>,
    lo: f64,
    hi: f64,
    lut: Option<Table>,
) {
    let nb = bins.len();
    let b = Binner::new(lo, hi, nb);
    let (tid, threads) = thread_rank();
    let (rank, bt) = (
        thread::rank_in_block() as usize,
        thread::block_threads() as usize,
    );
    if nb > COUNTERS {
        // Too many bins to keep privately: straight to global memory.
        // SAFETY: a host-validated slice; the counter taken (inside this block too) is in
        // bounds: a bin is below nbins = bins.len() (Binner's contract).
        unsafe {
            visit::<T, L>(x, tid, threads, |_, v| {
                if let Some(i) = v.bin(&b) {
                    bins.at_unchecked(i as usize)
                        .red_add(1, Order::Relaxed, Scope::Device);
                }
            })
        };
        return;
    }
    // Replicas per bin: the largest power of two up to 32 that fits.
    let mut reps = 32;
    while nb * reps > COUNTERS {
        reps /= 2;
    }
    // One array for the four kernels (each launch runs one of them).
    let hist = shared_array!(u32, COUNTERS);
    let mut i = rank;
    while i < nb * reps {
        // SAFETY: i < nb · reps <= COUNTERS.
        unsafe { hist.write_unchecked(i, 0) };
        i += bt;
    }
    let lane = rank % 32 % reps;
    let add = |bin: u32| {
        // SAFETY: bin < nb, lane < reps: a counter of this block's histogram.
        unsafe {
            shared::red_add(
                hist.as_mut_ptr().add(bin as usize * reps + lane),
                1,
                Order::Relaxed,
                Scope::Block,
            )
        }
    };
    match lut {
        None => {
            thread::sync_threads();
            // SAFETY: a host-validated slice.
            unsafe {
                visit::<T, L>(x, tid, threads, |_, v| {
                    if let Some(i) = v.bin(&b) {
                        add(i);
                    }
                })
            };
        }
        Some(lut) => {
            // Byte data: the bin of each of the 256 values, once per block.
            let mut identity = true;
            let mut v = rank;
            while v < 256 {
                let bin = (v as u8).bin(&b).map_or(-1, |i| i as i32);
                // SAFETY: v < 256, the table's length.
                unsafe { lut.write_unchecked(v, bin) };
                identity &= bin == v as i32;
                v += bt;
            }
            // A barrier that also tells every thread whether the table is the identity
            // (256 bins over [0, 256)): then the bytes are the bins.
            let direct = thread::sync_threads_and(identity) && nb == 256;
            // SAFETY: a host-validated slice; `byte()` < 256 indexes the table (`T` is `u8`
            // whenever a table is passed).
            unsafe {
                if direct {
                    visit::<T, L>(x, tid, threads, |_, v| add(v.byte() as u32));
                } else {
                    visit::<T, L>(x, tid, threads, |_, v| {
                        let i = lut.get_unchecked(v.byte());
                        if i >= 0 {
                            add(i as u32);
                        }
                    });
                }
            }
        }
    }
    thread::sync_threads();
    // Merge: one device-scope atomic per non-empty bin; replicas read in a rotated order so
    // that the lanes of a warp read distinct banks.
    let mut bin = rank;
    while bin < nb {
        let mut sum = 0u64;
        for r in 0..reps {
            // SAFETY: bin < nb, (r + bin) % reps < reps.
            sum += unsafe { hist.get_unchecked(bin * reps + (r + bin) % reps) } as u64;
        }
        if sum != 0 {
            // SAFETY: bin < nb = bins.len().
            unsafe { bins.at_unchecked(bin) }.red_add(sum as i64, Order::Relaxed, Scope::Device);
        }
        bin += bt;
    }
}

macro_rules! histograms {
    ($($name:ident: $t:ty, $table:expr;)*) => {$(
        /// `bins[k]` = the number of elements of `x` in bin `k` of `bins.len()` equal-width
        /// bins over `[lo, hi]` (the last bin closed, values outside or NaN ignored): equal to
        /// `numpy.histogram(x, bins=len(bins), range=(lo, hi))[0]`, exactly.
        ///
        /// `x`: a C-contiguous array of any shape and length; `bins`: `int64` counts (any
        /// length ≥ 1), zero-filled by the launcher, then accumulated atomically. Refused: no
        /// bins, `lo >= hi`, non-finite bounds. Grid and block: any (automatic: one resident
        /// wave). Deterministic (integer counts).
        #[kernel(family = "histogram", zero(bins),
                 require(bins.len() > 0, "the bin count must be at least 1"),
                 require(lo < hi, "the range must satisfy lo < hi"),
                 require(finite(lo), "the range must be finite"),
                 require(finite(hi), "the range must be finite"),
                 require(bins.len() < 2147483648, "at most 2^31 - 1 bins"))]
        pub unsafe fn $name(x: Slice<$t>, bins: AtomicSlice<i64>, lo: f64, hi: f64) {
            // SAFETY: launched as a kernel with the declared zeroing and requirements.
            unsafe {
                histogram::<$t, { <$t as Binnable>::LANES }>(x, bins, lo, hi, $table)
            }
        }
    )*};
}
histograms! {
    histogram_u8: u8, Some(shared_array!(i32, 256));
    histogram_i32: i32, None;
    histogram_f32: f32, None;
    histogram_f64: f64, None;
}
