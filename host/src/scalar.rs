//! [`Scalar`]: a scalar kernel argument of any element type that has a Rust type, generated
//! from the element-type table ([`ferrocuda_abi::element_types!`]).

use ferrocuda_abi::DType;

macro_rules! declare_scalar {
    ($($variant:ident = $code:literal, $name:literal, $typestr:literal, $dl:literal,
       $class:ident $(($rust:ty))?;)*) => {
        /// A scalar kernel argument: one variant per element type with a Rust type.
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum Scalar {
            $($(
                #[doc = concat!("`", stringify!($rust), "`")]
                $variant($rust),
            )?)*
        }

        impl Scalar {
            /// The element type.
            pub fn dtype(&self) -> DType {
                match self {
                    $($(Scalar::$variant(_) => declare_scalar!(@dtype $variant $rust),)?)*
                }
            }

            /// Writes the value's native-endian bytes (the launch buffer's image) to `out`,
            /// which must be exactly `dtype().itemsize()` bytes long.
            pub(crate) fn write(&self, out: &mut [u8]) {
                match *self {
                    $($(Scalar::$variant(v) => declare_scalar!(@write v $rust, out),)?)*
                }
            }

            /// The scalar of integer type `dtype` with value `value`; `None` when `dtype` is
            /// not an integer type or `value` is out of its range.
            pub fn from_int(dtype: DType, value: i128) -> Option<Scalar> {
                match dtype {
                    $(DType::$variant => declare_scalar!(@int $variant $class $(($rust))?, value),)*
                }
            }

            /// The scalar of float type `dtype` nearest to `value` (round to nearest); `None`
            /// when `dtype` is not a float type with a Rust type, or when a finite `value` is
            /// beyond its range (it would become an infinity).
            pub fn from_f64(dtype: DType, value: f64) -> Option<Scalar> {
                match dtype {
                    $(DType::$variant => declare_scalar!(@float $variant $class $(($rust))?, value),)*
                }
            }
        }

        $($(
            impl From<$rust> for Scalar {
                fn from(x: $rust) -> Scalar {
                    Scalar::$variant(x)
                }
            }
        )?)*
    };
    (@dtype $variant:ident $rust:ty) => { DType::$variant };
    (@write $v:ident $rust:ty, $out:ident) => { $out.copy_from_slice(&$v.to_ne_bytes()) };
    (@int $variant:ident int ($rust:ty), $v:ident) => {
        <$rust>::try_from($v).ok().map(Scalar::$variant)
    };
    (@int $variant:ident $class:ident $(($rust:ty))?, $v:ident) => { None };
    (@float $variant:ident float ($rust:ty), $v:ident) => {{
        let f = $v as $rust;
        let overflowed = $v.is_finite() && (f as f64).is_infinite();
        (!overflowed).then_some(Scalar::$variant(f))
    }};
    (@float $variant:ident $class:ident $(($rust:ty))?, $v:ident) => { None };
}

ferrocuda_abi::element_types!(declare_scalar);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_follow_the_table() {
        assert_eq!(Scalar::from(7u16).dtype(), DType::U16);
        assert_eq!(Scalar::from_int(DType::I8, -128), Some(Scalar::I8(-128)));
        assert_eq!(Scalar::from_int(DType::I8, 128), None);
        assert_eq!(Scalar::from_int(DType::U64, -1), None);
        assert_eq!(Scalar::from_int(DType::F32, 1), None);
        assert_eq!(Scalar::from_int(DType::Bool, 1), None);
        assert_eq!(Scalar::from_f64(DType::F32, 0.5), Some(Scalar::F32(0.5)));
        assert_eq!(Scalar::from_f64(DType::F32, 1e39), None);
        assert_eq!(
            Scalar::from_f64(DType::F32, f64::INFINITY),
            Some(Scalar::F32(f32::INFINITY))
        );
        assert_eq!(
            Scalar::from_f64(DType::F64, 1e300),
            Some(Scalar::F64(1e300))
        );
        assert_eq!(Scalar::from_f64(DType::I32, 1.0), None);
        let mut b = [0u8; 2];
        Scalar::I16(-2).write(&mut b);
        assert_eq!(b, (-2i16).to_ne_bytes());
    }
}
