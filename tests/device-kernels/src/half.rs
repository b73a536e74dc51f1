//! Half-precision conversions and arithmetic, element by element.

use ferrocuda_device::half::f16;
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{half::bf16, thread};
use ferrocuda_device::{kernel, Slice, SliceMut};

/// Conversions: `wide[i] = f16::from_bits(bits[i]) as f32` (`cvt.f32.f16`) and
/// `narrow[j] = (f[j] as f16).to_bits()` (`cvt.rn.f16.f32`). The host feeds every f16 bit
/// pattern to the first and their `f32` values (plus random and tie cases) to the second: the
/// round trip, with the halves in separate launches' worth of data so the compiler cannot
/// fold them into one another.
#[kernel]
pub unsafe fn f16_convert(
    bits: Slice<u16>,
    f: Slice<f32>,
    wide: SliceMut<f32>,
    narrow: SliceMut<u16>,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        for i in thread::grid_stride(bits.len()) {
            // SAFETY: one thread per element.
            unsafe { wide.write(i, f16::from_bits(bits.get(i).unwrap()) as f32) };
        }
        for j in thread::grid_stride(f.len()) {
            // SAFETY: one thread per element.
            unsafe { narrow.write(j, (f.get(j).unwrap() as f16).to_bits()) };
        }
    }
}

/// `out[4i ..]` = `a + b`, `a - b`, `a * b`, `a / b` in `f16` (arrays of the `float16`
/// element type).
#[kernel]
pub unsafe fn f16_arith(a: Slice<f16>, b: Slice<f16>, out: SliceMut<f16>) {
    #[cfg(target_arch = "nvptx64")]
    for i in thread::grid_stride(a.len()) {
        let (x, y) = (a.get(i).unwrap(), b.get(i).unwrap());
        // SAFETY: one thread per record.
        unsafe {
            for (k, v) in [x + y, x - y, x * y, x / y].iter().enumerate() {
                out.write(4 * i + k, *v);
            }
        }
    }
}

/// `out[10i ..]` (bf16 bits) = `bf16::from_f32(f[i])`, `a + b`, `a - b`, `a * b`, `a / b`,
/// `a.mul_add(b, c)`, `a.min(b)`, `a.max(b)`, `-a`, `bf16::from(f[i])`.
#[kernel]
pub unsafe fn bf16_ops(
    a: Slice<u16>,
    b: Slice<u16>,
    c: Slice<u16>,
    f: Slice<f32>,
    out: SliceMut<u16>,
) {
    #[cfg(target_arch = "nvptx64")]
    for i in thread::grid_stride(a.len()) {
        let x = bf16::from_bits(a.get(i).unwrap());
        let y = bf16::from_bits(b.get(i).unwrap());
        let z = bf16::from_bits(c.get(i).unwrap());
        let w = f.get(i).unwrap();
        let r = [
            bf16::from_f32(w),
            x + y,
            x - y,
            x * y,
            x / y,
            x.mul_add(y, z),
            x.min(y),
            x.max(y),
            -x,
            bf16::from(w),
        ];
        // SAFETY: one thread per record.
        unsafe {
            for (k, v) in r.iter().enumerate() {
                out.write(10 * i + k, v.to_bits());
            }
        }
    }
}

/// Packed pairs (bits in `u32`): `out[6i ..]` = `a + b`, `a - b`, `a * b`,
/// `a.mul_add(b, c)`, `-a`, `from_f32s(f[2i], f[2i + 1])`.
macro_rules! packed_kernels {
    ($($name:ident: $t:ident;)*) => {$(
        #[kernel(family = "packed_ops")]
        pub unsafe fn $name(a: Slice<u32>, b: Slice<u32>, c: Slice<u32>, f: Slice<f32>, out: SliceMut<u32>) {
            #[cfg(target_arch = "nvptx64")]
            for i in thread::grid_stride(a.len()) {
                use ferrocuda_device::half::$t;
                let x = $t::from_bits(a.get(i).unwrap());
                let y = $t::from_bits(b.get(i).unwrap());
                let z = $t::from_bits(c.get(i).unwrap());
                let p = $t::from_f32s(f.get(2 * i).unwrap(), f.get(2 * i + 1).unwrap());
                // SAFETY: one thread per record.
                unsafe {
                    for (k, v) in [x + y, x - y, x * y, x.mul_add(y, z), -x, p].iter().enumerate() {
                        out.write(6 * i + k, v.to_bits());
                    }
                }
            }
        }
    )*};
}
packed_kernels! {
    packed_ops_f16x2: f16x2;
    packed_ops_bf16x2: bf16x2;
}
