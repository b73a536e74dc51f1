//! Diagnostics: device `printf` and failed checks that report their location.

#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{device_assert, gpu_printf, shared_array, thread};
use ferrocuda_device::{kernel, Slice, SliceMut};

/// Thread 0 prints one line with every argument kind:
/// `ferrocuda printf: -7 42 -9000000000 18446744073709551615 <x[0]> ok 100%`.
#[kernel]
pub unsafe fn printf_line(x: Slice<f32>) {
    #[cfg(target_arch = "nvptx64")]
    if thread::index_1d() == 0 {
        let v = x.get(0).unwrap_or(0.0);
        gpu_printf!(
            "ferrocuda printf: %d %u %ld %llu %.3f %s 100%%\n",
            -7i32,
            42u8,
            -9_000_000_000i64,
            u64::MAX,
            v,
            c"ok"
        );
    }
}

/// Fails a check on purpose in thread `who` (global x index) — `mode` 0: `device_assert!`,
/// 1: an out-of-bounds `SliceMut::write`, 2: an out-of-bounds shared-array read, 3: a
/// misaligned 16-byte shared-array read (in bounds). Every other thread writes `out[i] = 1`.
#[kernel]
pub unsafe fn fail_on_purpose(out: SliceMut<u32>, who: u32, mode: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let i = thread::index_1d();
        let tile = shared_array!(u32, 4);
        let quads = shared_array!(u32, 8, align = 16);
        if i == who as usize {
            match mode {
                0 => device_assert!(i != who as usize),
                // SAFETY: the index is out of bounds on purpose: the write traps.
                1 => unsafe { out.write(out.len(), 0) },
                3 => {
                    let _: [u32; 4] = quads.get_vector(2);
                }
                _ => {
                    let _ = tile.get(4 + i);
                }
            }
        }
        if i < out.len() {
            // SAFETY: one thread per element.
            unsafe { out.write(i, 1) };
        }
    }
}
