//! Diagnostics: formatted output from the device ([`gpu_printf!`](crate::gpu_printf)) and
//! checks that tell the host where they failed ([`device_assert!`](crate::device_assert)).
//!
//! # `gpu_printf!`
//!
//! CUDA's device `printf` is the driver function `vprintf(format, args)`: the format string
//! and a buffer holding the arguments. [`gpu_printf!`](crate::gpu_printf) takes a string
//! literal with C `printf` conversions and packs its arguments as clang does for CUDA C++:
//! each argument after C's default promotions (`f32` → `f64`; `i8`, `i16`, `bool` → `i32`;
//! `u8`, `u16` → `u32`) at its natural alignment in a buffer on the thread's stack:
//!
//! | Rust argument | promoted to | conversion |
//! | --- | --- | --- |
//! | `i8`, `i16`, `i32`, `bool` | `i32` | `%d`, `%i`, `%c` |
//! | `u8`, `u16`, `u32` | `u32` | `%u`, `%x`, `%X`, `%o` |
//! | `i64`, `isize` | `i64` | `%ld`, `%lld` |
//! | `u64`, `usize` | `u64` | `%lu`, `%llu`, `%lx` |
//! | `f32`, `f64` | `f64` | `%f`, `%e`, `%g`, `%a` |
//! | `*const T`, `*mut T` | pointer | `%p` |
//! | [`CStr`](core::ffi::CStr) reference | pointer | `%s` |
//!
//! The format is checked at compile time against the arguments (their number, and each type
//! against its conversion); `%n`, `*` widths and `L` lengths are refused. A `%s` argument
//! should be a string literal (`c"…"`): the driver reads the string when it prints. The
//! output goes to
//! a buffer the driver prints on the host at the next **synchronization point** (a
//! `cuCtxSynchronize`/`cuStreamSynchronize`, a blocking copy, a module load); its size is
//! `cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE)` (1 MiB by default), and lines beyond it are lost.
//! The argument buffer is local memory: the builder reports a stack frame for a kernel that
//! prints, as nvcc's code has.
//!
//! # Failed checks: file, line, thread
//!
//! Every failed check in a kernel — [`device_assert!`](crate::device_assert), a bounds check
//! of the array parameters or of [`SharedArray`](crate::shared::SharedArray), and any other
//! caller of [`fail`] — writes its source location and the failing thread's indices into the
//! module's *trap record* and executes `trap`. The record is host memory the host mapped and
//! registered when it loaded the module (the contract, symbol and layout:
//! [`ferrocuda_abi::diag`]); after the launch fails, the host reads it and names the file,
//! line and thread. Without a registered record the kernel traps all the same.
//!
//! The kernels are built with `-Cpanic=immediate-abort`: `core`'s own panics (`unwrap` on
//! `None`, slice indexing, integer division by zero, `core::assert!`) compile to a bare
//! `trap` and carry no location — no panic machinery, no message or path strings, in the
//! module. Use the checked accessors of this crate or `device_assert!` where a location
//! matters. (The `#[panic_handler]` below records the location when a build uses
//! `-Cpanic=abort`.)
//!
//! # Thread model
//!
//! Any thread may print or fail, under any condition (neither is a collective operation).
//! Output lines of different threads are not ordered. The first thread of a context to fail
//! a check writes the record; the others trap without writing.

#[cfg(target_arch = "nvptx64")]
use core::panic::Location;

/// Aborts the kernel after a failed check: records the caller's location and this thread's
/// indices in the module's trap record, then traps (see the [module docs](self)). On the host
/// it panics.
#[track_caller]
#[inline(always)]
pub fn fail() -> ! {
    #[cfg(target_arch = "nvptx64")]
    ferrocuda_abi::diag::trap_at(Location::caller());
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("ferrocuda: device assertion failed")
}

/// Checks a condition; a false one aborts the kernel with its file, line and thread recorded
/// for the host (see [`diag`](crate::diag)). On the host it is `assert!`.
///
/// ```ignore
/// device_assert!(i < n);
/// ```
#[macro_export]
macro_rules! device_assert {
    ($cond:expr $(,)?) => {
        if !$cond {
            $crate::diag::fail()
        }
    };
}

/// What a `printf` conversion reads, as a `u8` (the const parameter of
/// [`PrintfBuffer::push`]).
#[doc(hidden)]
pub mod conv {
    /// A conversion this macro does not support (`%n`, `%*d`, `%ls`, `%Lf`, …).
    pub const UNSUPPORTED: u8 = 0;
    /// `%d %i %u %x %X %o %c` (with no, `h` or `hh` length): a 4-byte integer.
    pub const INT: u8 = 1;
    /// The same with an `l`, `ll`, `j`, `z` or `t` length: an 8-byte integer.
    pub const LONG: u8 = 2;
    /// `%f %F %e %E %g %G %a %A`: a `double`.
    pub const FLOAT: u8 = 3;
    /// `%p`: a pointer.
    pub const POINTER: u8 = 4;
    /// `%s`: a pointer to a NUL-terminated string.
    pub const STRING: u8 = 5;
}

/// The conversions of a `printf` format, in order (`N` of them; `%%` is none).
#[doc(hidden)]
pub const fn conversions<const N: usize>(format: &str) -> [u8; N] {
    let mut out = [conv::UNSUPPORTED; N];
    let (b, mut i, mut n) = (format.as_bytes(), 0, 0);
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        i += 1;
        if i < b.len() && b[i] == b'%' {
            i += 1;
            continue;
        }
        // Flags, width, precision (a `*` takes an argument: unsupported).
        let mut star = false;
        while i < b.len() && matches!(b[i], b'-' | b'+' | b' ' | b'#' | b'0'..=b'9' | b'.' | b'*') {
            star |= b[i] == b'*';
            i += 1;
        }
        let mut long = false;
        let mut bad_len = false;
        while i < b.len() && matches!(b[i], b'h' | b'l' | b'j' | b'z' | b't' | b'L') {
            long |= matches!(b[i], b'l' | b'j' | b'z' | b't');
            bad_len |= b[i] == b'L';
            i += 1;
        }
        let c = if i < b.len() { b[i] } else { 0 };
        i += 1;
        let kind = match c {
            _ if star || bad_len => conv::UNSUPPORTED,
            b'd' | b'i' | b'u' | b'x' | b'X' | b'o' if long => conv::LONG,
            b'd' | b'i' | b'u' | b'x' | b'X' | b'o' | b'c' if !long => conv::INT,
            b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A' => conv::FLOAT,
            b'p' if !long => conv::POINTER,
            b's' if !long => conv::STRING,
            _ => conv::UNSUPPORTED,
        };
        if n < N {
            out[n] = kind;
        }
        n += 1;
    }
    out
}

/// The number of conversions of a `printf` format (`%%` is none).
#[doc(hidden)]
pub const fn conversion_count(format: &str) -> usize {
    let (b, mut i, mut n) = (format.as_bytes(), 0, 0);
    while i < b.len() {
        if b[i] == b'%' {
            if i + 1 < b.len() && b[i + 1] == b'%' {
                i += 2;
                continue;
            }
            n += 1;
        }
        i += 1;
    }
    n
}

/// A value that [`gpu_printf!`](crate::gpu_printf) can pass to `vprintf`: its C default
/// promotion and the conversions that read it.
pub trait PrintfArg: Copy {
    /// The promoted type, as C passes it through `...`.
    type Promoted: Copy;
    /// The [`conv`] kind of the promoted type.
    #[doc(hidden)]
    const KIND: u8;
    /// The promoted value.
    fn promote(self) -> Self::Promoted;
}

macro_rules! printf_args {
    ($($kind:ident: $($t:ty => $p:ty),*;)*) => {$($(
        impl PrintfArg for $t {
            type Promoted = $p;
            const KIND: u8 = conv::$kind;
            #[inline(always)]
            fn promote(self) -> $p {
                self as $p
            }
        }
    )*)*};
}
printf_args! {
    INT: i8 => i32, i16 => i32, i32 => i32, u8 => u32, u16 => u32, u32 => u32, bool => i32;
    LONG: i64 => i64, isize => i64, u64 => u64, usize => u64;
    FLOAT: f32 => f64, f64 => f64;
}

impl<T> PrintfArg for *const T {
    type Promoted = *const T;
    const KIND: u8 = conv::POINTER;
    #[inline(always)]
    fn promote(self) -> *const T {
        self
    }
}

impl<T> PrintfArg for *mut T {
    type Promoted = *const T;
    const KIND: u8 = conv::POINTER;
    #[inline(always)]
    fn promote(self) -> *const T {
        self
    }
}

impl PrintfArg for &core::ffi::CStr {
    type Promoted = *const core::ffi::c_char;
    const KIND: u8 = conv::STRING;
    #[inline(always)]
    fn promote(self) -> *const core::ffi::c_char {
        self.as_ptr()
    }
}

/// The argument buffer of one `vprintf` call: promoted arguments at their natural alignment,
/// in order (the layout of a C struct of the promoted types). `N` bytes, 8-byte aligned.
#[doc(hidden)]
#[repr(C, align(8))]
pub struct PrintfBuffer<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> PrintfBuffer<N> {
    /// An empty buffer.
    #[inline(always)]
    pub fn new() -> Self {
        PrintfBuffer {
            bytes: [0; N],
            len: 0,
        }
    }

    /// Appends `value`, promoted, at its alignment, for a conversion of kind `K` (a
    /// [`conv`] constant); a type the conversion does not read is a compile-time error.
    #[inline(always)]
    pub fn push<T: PrintfArg, const K: u8>(&mut self, value: T) {
        const {
            assert!(
                T::KIND == K || (K == conv::POINTER && T::KIND == conv::STRING),
                "gpu_printf!: an argument's type does not match its conversion (see the \
                 table in ferrocuda_device::diag), or the conversion is not supported"
            )
        };
        let v = value.promote();
        let (size, align) = (
            core::mem::size_of::<T::Promoted>(),
            core::mem::align_of::<T::Promoted>(),
        );
        let at = self.len.next_multiple_of(align);
        if at + size > N {
            fail();
        }
        // SAFETY: in bounds (checked above); an unaligned write of a Copy value.
        unsafe {
            self.bytes
                .as_mut_ptr()
                .add(at)
                .cast::<T::Promoted>()
                .write_unaligned(v)
        };
        self.len = at + size;
    }

    /// The buffer's address for `vprintf`.
    #[inline(always)]
    pub fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }
}

impl<const N: usize> Default for PrintfBuffer<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    /// CUDA's device printf (resolved by the driver when the module is loaded).
    fn vprintf(format: *const u8, args: *const u8) -> i32;
}

/// Calls `vprintf(format, args)`: the function behind [`gpu_printf!`](crate::gpu_printf).
/// Returns the number of arguments on success, a negative value on error (CUDA's `printf`).
/// On the host it prints nothing and returns 0.
///
/// # Safety
///
/// `format` is a NUL-terminated string; `args` points to the promoted arguments that its
/// conversions read, laid out as a C struct (or is null when it has none); a `%s` argument
/// points to a NUL-terminated string.
#[inline(always)]
pub unsafe fn printf_raw(format: *const u8, args: *const u8) -> i32 {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: forwarded contract.
    return unsafe { vprintf(format, args) };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = (format, args);
        0
    }
}

/// Device `printf` with C conversions: `gpu_printf!("block %u: sum %f\n", b, s)` (see
/// [`diag`](crate::diag) for the argument types and when the output appears). Returns what
/// `vprintf` returns (an `i32`).
///
/// The format is checked at compile time: as many conversions as arguments, and each
/// argument's type one that its conversion reads (so `%s` takes only a `&CStr`, and no
/// conversion can make the driver read past an argument).
///
/// ```ignore
/// use ferrocuda_device::gpu_printf;
/// gpu_printf!("thread %u of %u: x = %f, %s\n", t, n, x, c"ok");
/// ```
#[macro_export]
macro_rules! gpu_printf {
    ($fmt:literal $(,)?) => {{
        const _: () = ::core::assert!(
            $crate::diag::conversion_count($fmt) == 0,
            "gpu_printf!: the format has conversions but no arguments"
        );
        // SAFETY: a NUL-terminated literal without conversions, and no arguments.
        unsafe { $crate::diag::printf_raw(::core::concat!($fmt, "\0").as_ptr(), ::core::ptr::null()) }
    }};
    ($fmt:literal, $($arg:expr),+ $(,)?) => {{
        const ARGS: usize = [$(::core::stringify!($arg)),+].len();
        const _: () = ::core::assert!(
            $crate::diag::conversion_count($fmt) == ARGS,
            "gpu_printf!: the format's conversions and the arguments differ in number"
        );
        const KINDS: [u8; ARGS] = $crate::diag::conversions::<ARGS>($fmt);
        let mut buffer = $crate::diag::PrintfBuffer::<{ 8 * ARGS }>::new();
        $crate::__gpu_printf_push!(buffer, KINDS, [0] $($arg),+);
        // SAFETY: a NUL-terminated literal; the buffer holds the promoted arguments in order,
        // each of a type its conversion reads (checked at compile time).
        unsafe { $crate::diag::printf_raw(::core::concat!($fmt, "\0").as_ptr(), buffer.as_ptr()) }
    }};
}

/// Pushes each argument of [`gpu_printf!`] with the conversion kind at its position.
#[doc(hidden)]
#[macro_export]
macro_rules! __gpu_printf_push {
    ($buf:ident, $kinds:ident, [$($i:tt)*]) => {};
    ($buf:ident, $kinds:ident, [$($i:tt)*] $arg:expr $(, $rest:expr)*) => {
        $buf.push::<_, { $kinds[$($i)*] }>($arg);
        $crate::__gpu_printf_push!($buf, $kinds, [$($i)* + 1] $($rest),*);
    };
}
