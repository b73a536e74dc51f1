//! Half-precision conversions and arithmetic, element by element.

use ferrocuda_device::half::f16;
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::{half::bf16, thread};
use ferrocuda_device::{kernel, Slice, SliceMut};

/// Every f16 bit pattern through `f32` and back: `wide[i] = x as f32`,
/// `back[i] = (wide[i] as f16).to_bits()`, for `x = f16::from_bits(bits[i])`.
#[kernel]
pub unsafe fn f16_roundtrip(bits: Slice<u16>, wide: SliceMut<f32>, back: SliceMut<u16>) {
    #[cfg(target_arch = "nvptx64")]
    for i in thread::grid_stride(bits.len()) {
        let w = f16::from_bits(bits.get(i).unwrap()) as f32;
        // SAFETY: one thread per element.
        unsafe {
            wide.write(i, w);
            back.write(i, (w as f16).to_bits());
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
