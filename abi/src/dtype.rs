//! Element types: the one table that declares them, and everything derived from it.
//!
//! [`element_types!`](crate::element_types) is the table. Each row declares one element
//! type: its [`DType`] variant and manifest code, its NumPy name, its array-interface
//! `typestr` (from which the kind character and the item size are read), its DLPack type code,
//! and — for the types kernels can take as scalars and arrays of — its Rust type, as `int(T)`,
//! `float(T)` or `half(T)` (`none` for types without one).
//!
//! `half(T)` rows are the 16-bit floats, which stable Rust has no primitive for: the host's
//! type is `half::T` (the `half` crate; its [`Element`] impls come with this crate's `half`
//! feature), the device's is `ferrocuda_device::half::T` (the device crate implements
//! [`Element`] and [`KernelParam`](crate::KernelParam) for it). Both have the same bits.
//!
//! **bfloat16's typestr.** NumPy has no bfloat16 and the array interfaces define no kind for
//! it. ml_dtypes' `bfloat16` dtype writes `"<V2"` (a 2-byte opaque type with native byte
//! order), and PyTorch's and JAX's `__cuda_array_interface__` export bfloat16 arrays with that
//! same typestr; no producer writes `"<V2"` for anything else. So `"<V2"` (or `"=V2"`) reads as
//! bfloat16, while NumPy's plain 2-byte void, `"|V2"`, stays refused. DLPack names it exactly
//! (`kDLBfloat`, 16 bits).
//!
//! From that table come, in this crate, the [`DType`] enum with its names, type strings,
//! sizes, DLPack codes and Rust type names, and the [`Element`] implementations; in
//! [`kinds`](crate::kinds) the scalar [`KernelParam`](crate::KernelParam) implementations; in
//! the host crate the `Scalar`
//! enum and its conversions; in the manifest the dtype names; in the launcher generator the
//! Rust type of each parameter (through [`DType::rust_name`]).
//!
//! # Adding an element type
//!
//! Add one row to the table (a new, never reused code; typestr as NumPy writes it; the DLPack
//! code of its kind). If kernels can take it, give its Rust type (`int(T)` or `float(T)`): the
//! type must implement `Copy`, have exactly the typestr's size and layout, and accept every
//! bit pattern. Nothing else needs to change for arrays of the type to cross the interfaces;
//! scalar conversion from Python follows from `int`/`float`.

/// The element-type table. Calls `$callback!` with every row:
///
/// ```text
/// Variant = code, "name", "typestr", dlpack_code, int(T) | float(T) | none;
/// ```
///
/// `code` is the manifest encoding (never renumber, never reuse); `name` is NumPy's name;
/// `typestr` is the little-endian array-interface type string (`|` for one-byte types),
/// whose second character is the kind (`b`, `i`, `u`, `f`, `c`; `V` for bfloat16) and whose
/// digits are the item size in bytes; `dlpack_code` is the `DLDataTypeCode` (`0` int, `1`
/// uint, `2` float, `4` bfloat, `5` complex, `6` bool). See the
/// [module documentation](crate::dtype).
#[macro_export]
macro_rules! element_types {
    ($callback:path) => {
        $callback! {
            Bool = 1, "bool", "|b1", 6, none;
            I8 = 2, "int8", "|i1", 0, int(i8);
            I16 = 3, "int16", "<i2", 0, int(i16);
            I32 = 4, "int32", "<i4", 0, int(i32);
            I64 = 5, "int64", "<i8", 0, int(i64);
            U8 = 6, "uint8", "|u1", 1, int(u8);
            U16 = 7, "uint16", "<u2", 1, int(u16);
            U32 = 8, "uint32", "<u4", 1, int(u32);
            U64 = 9, "uint64", "<u8", 1, int(u64);
            F16 = 10, "float16", "<f2", 2, half(f16);
            F32 = 11, "float32", "<f4", 2, float(f32);
            F64 = 12, "float64", "<f8", 2, float(f64);
            C64 = 13, "complex64", "<c8", 5, none;
            C128 = 14, "complex128", "<c16", 5, none;
            BF16 = 15, "bfloat16", "<V2", 4, half(bf16);
        }
    };
}

/// The item size in bytes written in a typestr (its digits after the kind character).
const fn typestr_size(typestr: &str) -> usize {
    let b = typestr.as_bytes();
    let mut n = 0;
    let mut i = 2;
    while i < b.len() {
        n = n * 10 + (b[i] - b'0') as usize;
        i += 1;
    }
    n
}

macro_rules! declare_dtype {
    ($($variant:ident = $code:literal, $name:literal, $typestr:literal, $dl:literal,
       $class:ident $(($rust:ty))?;)*) => {
        /// Element types, with their CUDA Array Interface `typestr` kind and size (the rows of
        /// [`element_types!`](crate::element_types)).
        ///
        /// The numeric values are part of the manifest encoding: never renumber.
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum DType {
            $(
                #[doc = concat!("`", $name, "` (`", $typestr, "`).")]
                $variant = $code,
            )*
        }

        impl DType {
            /// All element types, in code order.
            pub const ALL: [DType; [$(DType::$variant),*].len()] = [$(DType::$variant),*];

            /// Short lowercase name, as NumPy spells it (`"float32"`, `"int64"`, `"bool"`).
            pub const fn name(self) -> &'static str {
                match self { $(DType::$variant => $name,)* }
            }

            /// The little-endian array-interface `typestr`, e.g. `"<f4"` (`"|b1"` for
            /// one-byte types).
            pub const fn typestr(self) -> &'static str {
                match self { $(DType::$variant => $typestr,)* }
            }

            /// Size of one element in bytes.
            pub const fn itemsize(self) -> usize {
                match self { $(DType::$variant => const { typestr_size($typestr) },)* }
            }

            /// The array-interface kind character: `b`, `i`, `u`, `f`, `c`, or `V` (bfloat16).
            pub const fn kind_char(self) -> u8 {
                match self { $(DType::$variant => $typestr.as_bytes()[1],)* }
            }

            /// The DLPack `DLDataTypeCode` of the type (its bits are `8 * itemsize`).
            pub const fn dlpack_code(self) -> u8 {
                match self { $(DType::$variant => $dl,)* }
            }

            /// The Rust type kernels and hosts use for it (`"f32"`), if it has one.
            pub const fn rust_name(self) -> Option<&'static str> {
                match self { $(DType::$variant => declare_dtype!(@rust_name $class $(($rust))?),)* }
            }

            /// `(min, max)` of an integer type, `None` for the other types.
            pub const fn int_range(self) -> Option<(i128, i128)> {
                match self { $(DType::$variant => declare_dtype!(@range $class $(($rust))?),)* }
            }

            /// `true` for the floating-point types with a Rust type, 16-bit ones included
            /// (scalars convert from real numbers, rounded to nearest, ties to even).
            pub const fn is_float_scalar(self) -> bool {
                match self { $(DType::$variant => declare_dtype!(@is_float $class),)* }
            }
        }

        $(declare_dtype!(@element $variant $class $(($rust))?);)*
    };
    (@rust_name none) => { None };
    (@rust_name $class:ident ($rust:ty)) => { Some(stringify!($rust)) };
    (@range int ($rust:ty)) => { Some((<$rust>::MIN as i128, <$rust>::MAX as i128)) };
    (@range $class:ident $(($rust:ty))?) => { None };
    (@is_float float) => { true };
    (@is_float half) => { true };
    (@is_float $class:ident) => { false };
    (@element $variant:ident none) => {};
    // Per side: the host's `half` types below, the device's in the device crate.
    (@element $variant:ident half ($rust:ty)) => {};
    (@element $variant:ident $class:ident ($rust:ty)) => {
        // SAFETY: the table row states that the primitive has exactly the size and
        // representation of the dtype, and every bit pattern is a valid value.
        unsafe impl Element for $rust {
            const DTYPE: DType = DType::$variant;
        }
    };
}

element_types!(declare_dtype);

// The device's half precision is the nightly `f16` primitive (kernel build only, where the
// feature is enabled); on the host `ferrocuda_device::half::f16` stands in for it in kernel
// signatures. The device's `bf16` is the device crate's own type (its impl is there).
#[cfg(target_arch = "nvptx64")]
// SAFETY: `f16` is IEEE binary16, exactly `<f2`, and every bit pattern is a valid value.
unsafe impl Element for f16 {
    const DTYPE: DType = DType::F16;
}

/// The host's 16-bit floats: the `half` crate's types of the table's `half(T)` rows.
#[cfg(feature = "half")]
mod host_half {
    use super::{DType, Element};
    use half::{bf16, f16};

    macro_rules! half_elements {
        ($($variant:ident = $code:literal, $name:literal, $typestr:literal, $dl:literal,
           $class:ident $(($rust:ty))?;)*) => {
            $(half_elements!(@one $variant $class $(($rust))?);)*
        };
        (@one $variant:ident half ($rust:ty)) => {
            // SAFETY: the `half` crate's types are `repr(transparent)` over `u16` with the
            // IEEE binary16 / bfloat16 bit layout of the row; every bit pattern is a value.
            unsafe impl Element for $rust {
                const DTYPE: DType = DType::$variant;
            }
        };
        (@one $variant:ident $class:ident $(($rust:ty))?) => {};
    }
    crate::element_types!(half_elements);
}

impl DType {
    /// The type for an array-interface kind character and item size, if ferrocuda knows it.
    pub const fn from_kind(kind: u8, itemsize: usize) -> Option<DType> {
        let mut i = 0;
        while i < Self::ALL.len() {
            let d = Self::ALL[i];
            if d.kind_char() == kind && d.itemsize() == itemsize {
                return Some(d);
            }
            i += 1;
        }
        None
    }

    /// The type with manifest code `code`.
    pub const fn from_code(code: u8) -> Option<DType> {
        let mut i = 0;
        while i < Self::ALL.len() {
            if Self::ALL[i] as u8 == code {
                return Some(Self::ALL[i]);
            }
            i += 1;
        }
        None
    }

    /// The type NumPy calls `name` (`"float32"`), if ferrocuda knows it.
    pub fn from_name(name: &str) -> Option<DType> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The type of a DLPack `(code, bits)` pair (one lane), if ferrocuda knows it.
    pub fn from_dlpack(code: u8, bits: u8) -> Option<DType> {
        Self::ALL
            .into_iter()
            .find(|d| d.dlpack_code() == code && d.itemsize() * 8 == usize::from(bits))
    }
}

/// A scalar type a kernel can read and write in device memory.
///
/// Implemented for the Rust types of the [`element_types!`](crate::element_types) table.
///
/// # Safety
///
/// `DTYPE` must describe `Self` exactly (size and bit layout), and every bit pattern the
/// array-interface type admits must be a valid `Self`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an array element type",
    note = "elements are i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32 or f64 (usize/isize \
            have no fixed size across host and device)"
)]
pub unsafe trait Element: Copy + 'static {
    /// The array-interface type of `Self`.
    const DTYPE: DType;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for (i, d) in DType::ALL.into_iter().enumerate() {
            assert_eq!(d as usize, i + 1, "codes are dense and in order");
            assert_eq!(DType::from_code(d as u8), Some(d));
            assert_eq!(DType::from_kind(d.kind_char(), d.itemsize()), Some(d));
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(
                DType::from_dlpack(d.dlpack_code(), (d.itemsize() * 8) as u8),
                Some(d)
            );
            let order = if d.itemsize() == 1 { '|' } else { '<' };
            assert!(d.typestr().starts_with(order), "{}", d.typestr());
        }
        assert_eq!(DType::from_code(0), None);
        assert_eq!(DType::from_code(16), None);
        assert_eq!(DType::C128.itemsize(), 16);
        assert_eq!(DType::F16.kind_char(), b'f');
        assert_eq!(DType::from_kind(b'f', 16), None);
        // bfloat16: ml_dtypes' typestr, DLPack's code.
        assert_eq!(DType::from_kind(b'V', 2), Some(DType::BF16));
        assert_eq!(DType::from_kind(b'V', 4), None);
        assert_eq!(DType::from_dlpack(4, 16), Some(DType::BF16));
        assert_eq!(DType::from_name("bfloat16"), Some(DType::BF16));
    }

    #[test]
    fn rust_types_match_their_dtypes() {
        fn check<T: Element>(name: &str) {
            assert_eq!(T::DTYPE.rust_name(), Some(name));
            assert_eq!(core::mem::size_of::<T>(), T::DTYPE.itemsize());
        }
        check::<i8>("i8");
        check::<u16>("u16");
        check::<i64>("i64");
        check::<f32>("f32");
        check::<f64>("f64");
        assert_eq!(DType::Bool.rust_name(), None);
        assert_eq!(DType::I16.int_range(), Some((-32768, 32767)));
        assert_eq!(DType::U64.int_range(), Some((0, u64::MAX as i128)));
        assert_eq!(DType::F32.int_range(), None);
        assert!(DType::F64.is_float_scalar() && !DType::C64.is_float_scalar());
        assert!(DType::F16.is_float_scalar() && DType::BF16.is_float_scalar());
        assert_eq!(DType::F16.rust_name(), Some("f16"));
        assert_eq!(DType::BF16.rust_name(), Some("bf16"));
        assert_eq!(DType::BF16.int_range(), None);
    }

    #[cfg(feature = "half")]
    #[test]
    fn host_half_types_are_elements() {
        assert_eq!(<half::f16 as Element>::DTYPE, DType::F16);
        assert_eq!(<half::bf16 as Element>::DTYPE, DType::BF16);
        assert_eq!(core::mem::size_of::<half::bf16>(), DType::BF16.itemsize());
    }
}
