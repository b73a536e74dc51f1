//! Block-shared memory: static arrays ([`shared_array!`](crate::shared_array)) and the
//! launch's dynamic shared memory ([`dynamic_shared`]).
//!
//! | CUDA C++ | here |
//! | --- | --- |
//! | `__shared__ float tile[256];` | `let tile = shared_array!(f32, 256);` → [`SharedArray<f32, 256>`] |
//! | `__shared__ float tile[16][17];` | `let tile = shared_array!(f32, [16, 17]);` → [`SharedArray2<f32, 16, 17>`] |
//! | `__shared__ __align__(16) float4 v[64];` | `shared_array!(f32, 256, align = 16)` |
//! | `__shared__ __align__(16) bf16 t[64][72];` | `shared_array!(bf16, [64, 72], align = 16)` |
//! | `__cvta_generic_to_shared(&tile[i])` | `tile.shared_addr(i)` (a `u32`; [`shared_addr_of`] for a pointer) |
//! | `extern __shared__ float smem[];` | `let smem = dynamic_shared::<f32>();` → [`DynamicSharedArray<f32>`] |
//! | `atomicAdd(&tile[i], v)` | `tile.atomic(i).fetch_add(v, Order::Relaxed, Scope::Block)` |
//!
//! (Rust-CUDA's `cuda_std` names the macro `shared_array!` too; cuda-oxide's types are
//! `SharedArray`/`DynamicSharedArray`.)
//!
//! # How it works
//!
//! `shared_array!` expands to a `static mut` of uninitialised storage in the link section
//! [`SHARED_SECTION`](ferrocuda_abi::SHARED_SECTION), which `ferrocuda-builder` moves to the
//! PTX `.shared` state space (one copy per thread block), and returns a `Copy` handle to it.
//! Accesses through the handle compile to `ld.shared`/`st.shared`. Every expansion is its own
//! array; an expansion inside a function is **one** array for every call of that function —
//! a device function that declares a shared array and is called from two kernels, or twice in
//! one kernel, uses the same array each time, as a CUDA `static __shared__` variable in a
//! `__device__` function does. The element type cannot be a generic parameter (a `static`
//! cannot name one): declare the array in the kernel and pass the handle down.
//!
//! On the host (`cargo check` of a kernel crate) the handles, their methods and the macro
//! exist, so device code checks without `cfg` gates; what needs the device — making a handle
//! with `shared_array!` or [`dynamic_shared`], shared-window addresses — is a host stub that
//! panics naming itself. A handle over ordinary memory (the hidden constructor `from_raw`)
//! works on the host, which is how the accessors are unit-tested.
//!
//! Dynamic shared memory is the launch's `shared_mem_bytes` (Rust `LaunchOptions`, Python
//! `shared_mem=`): one 16-byte aligned `.extern .shared` array whose length is read from the
//! `%dynamic_smem_size` register.
//!
//! # Thread model
//!
//! A shared array is visible to every thread of **one block** and to no other block; its
//! contents are indeterminate when the block starts and lost when it ends. Reads
//! ([`get`](SharedArray::get)) are safe: shared memory holds plain bits of a `Copy` type
//! (the element types are restricted to [`SharedElement`], whose every bit pattern is a
//! value). Writes are `unsafe`: the caller promises that no other thread of the block
//! accesses the same element concurrently — a [`sync_threads`](crate::thread::sync_threads)
//! between one thread's write and another thread's access orders them. Atomics
//! ([`atomic`](SharedArray::atomic)) may be used concurrently by any threads of the block.
//! Out-of-bounds indices abort the kernel with their location recorded
//! ([`diag`](crate::diag)); the `_unchecked` forms leave the check to the caller.
//!
//! # 16-byte vectors
//!
//! Every handle reads and writes `L` consecutive elements in one 16-byte access
//! (`ld.shared.v4.b32`, `st.shared.v2.b64`, …; SASS `LDS.128`/`STS.128`) with
//! `get_vector::<L>(i)` and `write_vector(i, [T; L])` — `L * size_of::<T>()` must be 16 (4
//! `f32`, 2 `f64`, 8 `f16`/`bf16`). Elements `i .. i + L` must be in the array (for a 2-D tile:
//! `c .. c + L` in row `r`) and start at a 16-byte aligned address; otherwise the kernel aborts
//! with the caller's location recorded. Declare the array with `align = 16` (dynamic shared
//! memory is 16-byte aligned) and use indices that are multiples of `L` (for a tile, also a
//! row length `C * size_of::<T>()` that is a multiple of 16). The `_unchecked` forms leave
//! both checks to the caller.
//!
//! # Shared-window addresses
//!
//! The instructions that name `.shared` memory through a 32-bit register — `cp.async`
//! ([`cp_async`](crate::cp_async)), `mbarrier` ([`mbarrier`](crate::mbarrier)), `ldmatrix` —
//! take an element's offset in the block's shared window, not its generic address:
//! `shared_addr(i)` on every handle (`cvta.to.shared.u64` then `cvt.u32.u64`), or
//! [`shared_addr_of`] for any pointer into shared memory.

use crate::diag::fail;
use core::marker::PhantomData;
use ferrocuda_abi::vectors::{load_vector, store_vector};
use ferrocuda_macros::gpu_only;

/// Element types of shared arrays: `Copy` types of which every bit pattern is a value, so that
/// reading never-written (indeterminate) shared memory is not undefined behaviour.
///
/// # Safety
///
/// Every bit pattern of `size_of::<Self>()` bytes must be a valid `Self`, with no padding.
pub unsafe trait SharedElement: Copy {}

macro_rules! shared_elements {
    ($($t:ty),*) => {$(
        // SAFETY: a primitive numeric type: every bit pattern is a value, no padding.
        unsafe impl SharedElement for $t {}
    )*};
}
shared_elements!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);
// SAFETY: any bits are a value of these 16/32-bit wrappers.
unsafe impl SharedElement for crate::half::bf16 {}
// SAFETY: as above.
unsafe impl SharedElement for crate::half::bf16x2 {}
// SAFETY: as above.
unsafe impl SharedElement for crate::half::f16x2 {}
// SAFETY: as above.
unsafe impl SharedElement for crate::half::f16 {}
// SAFETY: an array of such elements has no padding and any bits are a value.
unsafe impl<T: SharedElement, const N: usize> SharedElement for [T; N] {}

/// A handle to a block-shared array of `N` elements of `T`; made by
/// [`shared_array!`](crate::shared_array). `Copy`: pass it to the functions that use it.
pub struct SharedArray<T, const N: usize> {
    ptr: *mut T,
}

/// A handle to a block-shared `R`×`C` array (row-major, `[[T; C]; R]`); made by
/// `shared_array!(T, [R, C])`.
pub struct SharedArray2<T, const R: usize, const C: usize> {
    ptr: *mut T,
    _shape: PhantomData<[[T; C]; R]>,
}

/// A handle to the launch's dynamic shared memory as an array of `T`: see [`dynamic_shared`].
pub struct DynamicSharedArray<T> {
    ptr: *mut T,
    len: usize,
}

macro_rules! copy_handle {
    ($($ty:ident <T $(, const $n:ident: usize)*>),*) => {$(
        impl<T $(, const $n: usize)*> Clone for $ty<T $(, $n)*> {
            #[inline(always)]
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T $(, const $n: usize)*> Copy for $ty<T $(, $n)*> {}
    )*};
}
copy_handle!(
    SharedArray<T, const N: usize>,
    SharedArray2<T, const R: usize, const C: usize>,
    DynamicSharedArray<T>
);

/// The accessors shared by every handle: `len`, `get`, `write`, their unchecked forms, the
/// pointers and the atomic view. `$len` is the length expression (`self` in scope).
macro_rules! accessors {
    ($len:expr) => {
        /// The number of elements.
        #[inline(always)]
        pub fn len(&self) -> usize {
            let this = self;
            $len(this)
        }

        /// Whether the array has no element.
        #[inline(always)]
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// Element `i`; an out-of-bounds `i` aborts the kernel (location recorded).
        #[inline(always)]
        #[track_caller]
        pub fn get(&self, i: usize) -> T {
            if i >= self.len() {
                fail();
            }
            // SAFETY: in bounds; every bit pattern is a `T` (SharedElement).
            unsafe { self.ptr.add(i).read() }
        }

        /// Element `i` without a bounds check.
        ///
        /// # Safety
        ///
        /// `i < self.len()`.
        #[inline(always)]
        pub unsafe fn get_unchecked(&self, i: usize) -> T {
            // SAFETY: the caller's contract; any bits are a `T`.
            unsafe { self.ptr.add(i).read() }
        }

        /// Writes element `i`; an out-of-bounds `i` aborts the kernel (location recorded).
        ///
        /// # Safety
        ///
        /// No other thread of the block accesses element `i` concurrently (a barrier orders
        /// this write before other threads' later accesses).
        #[inline(always)]
        #[track_caller]
        pub unsafe fn write(&self, i: usize, value: T) {
            if i >= self.len() {
                fail();
            }
            // SAFETY: in bounds; exclusivity is the caller's contract.
            unsafe { self.ptr.add(i).write(value) }
        }

        /// Writes element `i` without a bounds check.
        ///
        /// # Safety
        ///
        /// `i < self.len()`, and no other thread of the block accesses element `i`
        /// concurrently.
        #[inline(always)]
        pub unsafe fn write_unchecked(&self, i: usize, value: T) {
            // SAFETY: the caller's contract.
            unsafe { self.ptr.add(i).write(value) }
        }

        pointers!();
    };
}

/// Elements `i .. i + L` of `len` at `ptr` as one 16-byte aligned run: their address, after
/// aborting the kernel (the caller's location recorded) when they are not all in bounds or
/// the address is not a multiple of 16.
#[inline(always)]
#[track_caller]
fn vector_at<T, const L: usize>(ptr: *mut T, len: usize, i: usize) -> *mut T {
    let p = ptr.wrapping_add(i);
    if i >= len || len - i < L || !(p as usize).is_multiple_of(16) {
        fail();
    }
    p
}

/// The 16-byte vector accessors of the 1-D handles (see the [module docs](self)).
macro_rules! vector_accessors {
    () => {
        /// Elements `i .. i + L` in one 16-byte load (`ld.shared.v4`). Aborts the kernel (the
        /// caller's location recorded) when they are not all in the array or do not start at
        /// a 16-byte aligned address. `L * size_of::<T>()` must be 16.
        #[inline(always)]
        #[track_caller]
        pub fn get_vector<const L: usize>(&self, i: usize) -> [T; L] {
            let p = vector_at::<T, L>(self.ptr, self.len(), i);
            // SAFETY: in bounds and aligned (checked above); any bits are a `T`.
            unsafe { load_vector(p) }
        }

        /// [`get_vector`](Self::get_vector) without its checks.
        ///
        /// # Safety
        ///
        /// 1. `i + L <= self.len()`.
        /// 2. The address of element `i` is a multiple of 16.
        /// 3. `L * size_of::<T>() == 16` (a compile-time error otherwise).
        #[inline(always)]
        pub unsafe fn get_vector_unchecked<const L: usize>(&self, i: usize) -> [T; L] {
            // SAFETY: the caller's contract (1, 2); any bits are a `T`.
            unsafe { load_vector(self.ptr.add(i)) }
        }

        /// Writes elements `i .. i + L` in one 16-byte store (`st.shared.v4`). Aborts the
        /// kernel (the caller's location recorded) when they are not all in the array or do
        /// not start at a 16-byte aligned address.
        ///
        /// # Safety
        ///
        /// No other thread of the block accesses these elements concurrently (a barrier
        /// orders this write before other threads' later accesses).
        #[inline(always)]
        #[track_caller]
        pub unsafe fn write_vector<const L: usize>(&self, i: usize, value: [T; L]) {
            let p = vector_at::<T, L>(self.ptr, self.len(), i);
            // SAFETY: in bounds and aligned (checked above); exclusivity is the caller's
            // contract.
            unsafe { store_vector(p, value) }
        }

        /// [`write_vector`](Self::write_vector) without its checks.
        ///
        /// # Safety
        ///
        /// 1. `i + L <= self.len()`.
        /// 2. The address of element `i` is a multiple of 16.
        /// 3. No other thread of the block accesses these elements concurrently.
        /// 4. `L * size_of::<T>() == 16` (a compile-time error otherwise).
        #[inline(always)]
        pub unsafe fn write_vector_unchecked<const L: usize>(&self, i: usize, value: [T; L]) {
            // SAFETY: the caller's contract (1, 2, 3).
            unsafe { store_vector(self.ptr.add(i), value) }
        }
    };
}

/// `as_ptr` and `as_mut_ptr` of a handle with a `ptr` field.
macro_rules! pointers {
    () => {
        /// The first element's (generic) address (row-major for the 2-D arrays).
        #[inline(always)]
        pub fn as_ptr(&self) -> *const T {
            self.ptr
        }

        /// The first element's (generic) address, for writes.
        #[inline(always)]
        pub fn as_mut_ptr(&self) -> *mut T {
            self.ptr
        }
    };
}

/// Element `i` of `len` at `ptr` as a shared-memory atomic reference; out of bounds aborts.
#[inline(always)]
#[track_caller]
fn atomic_at<T: crate::atomic::Atomic>(
    ptr: *mut T,
    len: usize,
    i: usize,
) -> crate::atomic::AtomicRef<'static, T> {
    if i >= len {
        fail();
    }
    // SAFETY: in bounds and aligned (static arrays: the element type's alignment; dynamic
    // memory: a 16-byte base and align_of::<T>() <= 16) block-shared memory that lives for
    // the kernel; plain accesses to the element are `unsafe` with a no-concurrent-access
    // contract.
    unsafe { crate::atomic::AtomicRef::from_shared_ptr(ptr.add(i)) }
}

impl<T: SharedElement, const N: usize> SharedArray<T, N> {
    /// The handle of a shared static (what [`shared_array!`](crate::shared_array) calls).
    ///
    /// # Safety
    ///
    /// `ptr` points to `N` elements of `T` of block-shared memory that live for the whole
    /// kernel and are accessed only through handles.
    #[doc(hidden)]
    #[inline(always)]
    pub const unsafe fn from_raw(ptr: *mut T) -> Self {
        SharedArray { ptr }
    }

    accessors!(|_: &Self| N);
    vector_accessors!();
}

/// The 32-bit address in the shared state space of `ptr`, a generic address of shared memory
/// (`cvta.to.shared.u64`, then the low 32 bits: shared addresses fit in 32 bits). It is the
/// operand form of the instructions that name `.shared` with a 32-bit address in `asm!`
/// (`ldmatrix`, `stmatrix`, `cp.async`, `mbarrier`, …), whose LLVM intrinsics take
/// address-space-3 pointers that a Rust pointer type cannot name. Computing it is safe; for a
/// `ptr` that is not shared memory the result is meaningless.
///
/// ```ignore
/// let addr = shared::shared_addr_of(tile.as_ptr());   // == tile.shared_addr(0)
/// ```
#[inline(always)]
#[gpu_only]
pub fn shared_addr_of<T>(ptr: *const T) -> u32 {
    let addr: u32;
    #[allow(clippy::pointers_in_nomem_asm_block)] // the pointer is converted, not read
    // SAFETY: two register-only conversions; no memory is accessed.
    unsafe {
        core::arch::asm!(
            "cvta.to.shared.u64 {t}, {p};",
            "cvt.u32.u64 {a}, {t};",
            p = in(reg64) ptr,
            t = out(reg64) _,
            a = out(reg32) addr,
            options(pure, nomem, nostack),
        )
    };
    addr
}

impl<T: SharedElement, const N: usize> SharedArray<T, N> {
    /// The 32-bit shared-state-space address of element `i` ([`shared_addr_of`]), for
    /// `asm!` operands such as `ldmatrix`'s; an out-of-bounds `i` aborts the kernel.
    #[inline(always)]
    #[track_caller]
    #[gpu_only]
    pub fn shared_addr(&self, i: usize) -> u32 {
        if i >= N {
            fail();
        }
        // `add` stays within the array (checked above).
        shared_addr_of(self.ptr.wrapping_add(i))
    }
}

impl<T: SharedElement, const R: usize, const C: usize> SharedArray2<T, R, C> {
    /// The 32-bit shared-state-space address of element `[r][c]` ([`shared_addr_of`]); an
    /// index out of its bound aborts the kernel.
    #[inline(always)]
    #[track_caller]
    #[gpu_only]
    pub fn shared_addr(&self, r: usize, c: usize) -> u32 {
        let i = Self::index(r, c);
        shared_addr_of(self.ptr.wrapping_add(i))
    }
}

impl<T: SharedElement> DynamicSharedArray<T> {
    /// The 32-bit shared-state-space address of element `i` ([`shared_addr_of`]); an
    /// out-of-bounds `i` aborts the kernel.
    #[inline(always)]
    #[track_caller]
    #[gpu_only]
    pub fn shared_addr(&self, i: usize) -> u32 {
        if i >= self.len {
            fail();
        }
        shared_addr_of(self.ptr.wrapping_add(i))
    }
}

impl<T: SharedElement + crate::atomic::Atomic, const N: usize> SharedArray<T, N> {
    /// Element `i` as an atomic reference in shared memory (`atom.shared`, `red.shared`);
    /// an out-of-bounds `i` aborts the kernel. Use [`Scope::Block`](crate::atomic::Scope)
    /// unless another block's threads could see the array (they cannot).
    #[inline(always)]
    #[track_caller]
    pub fn atomic(&self, i: usize) -> crate::atomic::AtomicRef<'static, T> {
        atomic_at(self.ptr, N, i)
    }
}

impl<T: SharedElement, const R: usize, const C: usize> SharedArray2<T, R, C> {
    /// The handle of a shared static of `R * C` elements (what `shared_array!` calls).
    ///
    /// # Safety
    ///
    /// As [`SharedArray::from_raw`], for `R * C` elements.
    #[doc(hidden)]
    #[inline(always)]
    pub const unsafe fn from_raw(ptr: *mut T) -> Self {
        SharedArray2 {
            ptr,
            _shape: PhantomData,
        }
    }

    /// Rows.
    pub const ROWS: usize = R;
    /// Columns.
    pub const COLS: usize = C;

    #[inline(always)]
    #[track_caller]
    fn index(r: usize, c: usize) -> usize {
        if r >= R || c >= C {
            fail();
        }
        r * C + c
    }

    /// Element `[r][c]`; an index out of its bound aborts the kernel (location recorded).
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, r: usize, c: usize) -> T {
        let i = Self::index(r, c);
        // SAFETY: in bounds; any bits are a `T`.
        unsafe { self.ptr.add(i).read() }
    }

    /// Writes element `[r][c]`; an index out of its bound aborts the kernel.
    ///
    /// # Safety
    ///
    /// No other thread of the block accesses that element concurrently.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&self, r: usize, c: usize, value: T) {
        let i = Self::index(r, c);
        // SAFETY: in bounds; exclusivity is the caller's contract.
        unsafe { self.ptr.add(i).write(value) }
    }

    /// Element `[r][c]` without bounds checks.
    ///
    /// # Safety
    ///
    /// `r < R` and `c < C`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, r: usize, c: usize) -> T {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.add(r * C + c).read() }
    }

    /// Writes element `[r][c]` without bounds checks.
    ///
    /// # Safety
    ///
    /// `r < R`, `c < C`, and no other thread of the block accesses that element concurrently.
    #[inline(always)]
    pub unsafe fn write_unchecked(&self, r: usize, c: usize, value: T) {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.add(r * C + c).write(value) }
    }

    /// Elements `[r][c .. c + L]` in one 16-byte load (`ld.shared.v4`). Aborts the kernel
    /// (the caller's location recorded) when `r >= R`, `c + L > C`, or the address of
    /// `[r][c]` is not a multiple of 16. `L * size_of::<T>()` must be 16.
    #[inline(always)]
    #[track_caller]
    pub fn get_vector<const L: usize>(&self, r: usize, c: usize) -> [T; L] {
        let p = Self::vector::<L>(self.ptr, r, c);
        // SAFETY: in the row and aligned (checked in `vector`); any bits are a `T`.
        unsafe { load_vector(p) }
    }

    /// [`get_vector`](Self::get_vector) without its checks.
    ///
    /// # Safety
    ///
    /// 1. `r < R` and `c + L <= C`.
    /// 2. The address of `[r][c]` is a multiple of 16.
    /// 3. `L * size_of::<T>() == 16` (a compile-time error otherwise).
    #[inline(always)]
    pub unsafe fn get_vector_unchecked<const L: usize>(&self, r: usize, c: usize) -> [T; L] {
        // SAFETY: the caller's contract (1, 2); any bits are a `T`.
        unsafe { load_vector(self.ptr.add(r * C + c)) }
    }

    /// Writes elements `[r][c .. c + L]` in one 16-byte store (`st.shared.v4`). Aborts the
    /// kernel (the caller's location recorded) when `r >= R`, `c + L > C`, or the address of
    /// `[r][c]` is not a multiple of 16.
    ///
    /// # Safety
    ///
    /// No other thread of the block accesses these elements concurrently.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write_vector<const L: usize>(&self, r: usize, c: usize, value: [T; L]) {
        let p = Self::vector::<L>(self.ptr, r, c);
        // SAFETY: in the row and aligned (checked in `vector`); exclusivity is the caller's
        // contract.
        unsafe { store_vector(p, value) }
    }

    /// [`write_vector`](Self::write_vector) without its checks.
    ///
    /// # Safety
    ///
    /// 1. `r < R` and `c + L <= C`.
    /// 2. The address of `[r][c]` is a multiple of 16.
    /// 3. No other thread of the block accesses these elements concurrently.
    /// 4. `L * size_of::<T>() == 16` (a compile-time error otherwise).
    #[inline(always)]
    pub unsafe fn write_vector_unchecked<const L: usize>(&self, r: usize, c: usize, value: [T; L]) {
        // SAFETY: the caller's contract (1, 2, 3).
        unsafe { store_vector(self.ptr.add(r * C + c), value) }
    }

    /// The address of `[r][c]` after checking that `[r][c .. c + L]` is in the tile and
    /// 16-byte aligned (aborting the kernel otherwise).
    #[inline(always)]
    #[track_caller]
    fn vector<const L: usize>(ptr: *mut T, r: usize, c: usize) -> *mut T {
        if r >= R {
            fail();
        }
        // Within row `r`: elements `c .. c + L` of the row's `C`.
        vector_at::<T, L>(ptr.wrapping_add(r * C), C, c)
    }

    pointers!();
}

impl<T: SharedElement> DynamicSharedArray<T> {
    accessors!(|s: &Self| s.len);
    vector_accessors!();

    /// The same memory as an array of `U` (the length is recomputed from the bytes).
    #[inline(always)]
    pub fn cast<U: SharedElement>(self) -> DynamicSharedArray<U> {
        const { assert!(align_of::<U>() <= 16 && size_of::<U>() > 0) };
        DynamicSharedArray {
            ptr: self.ptr.cast(),
            len: self.len * size_of::<T>() / size_of::<U>(),
        }
    }
}

impl<T: SharedElement + crate::atomic::Atomic> DynamicSharedArray<T> {
    /// Element `i` as an atomic reference in shared memory; an out-of-bounds `i` aborts the
    /// kernel.
    #[inline(always)]
    #[track_caller]
    pub fn atomic(&self, i: usize) -> crate::atomic::AtomicRef<'static, T> {
        atomic_at(self.ptr, self.len, i)
    }
}

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    /// The launch's dynamic shared memory (the builder declares it `.extern .shared .align 16`).
    #[link_name = "__ferrocuda_dynamic_shared"]
    static mut DYNAMIC_SHARED: [u8; 0];
    #[link_name = "llvm.nvvm.read.ptx.sreg.dynamic_smem_size"]
    fn dynamic_smem_size() -> u32;
}

// The literal above must be the ABI's name.
const _: () = {
    let (a, b) = (
        ferrocuda_abi::DYNAMIC_SHARED_SYMBOL.as_bytes(),
        b"__ferrocuda_dynamic_shared",
    );
    assert!(a.len() == b.len());
    let mut i = 0;
    while i < a.len() {
        assert!(a[i] == b[i]);
        i += 1;
    }
};

/// The launch's dynamic shared memory (`extern __shared__ T smem[]`) as an array of `T`:
/// 16-byte aligned, `%dynamic_smem_size / size_of::<T>()` elements (0 when the launch gave
/// none). Every call returns the same memory; use [`DynamicSharedArray::cast`] for another
/// view, and split it by index for several arrays.
#[inline(always)]
#[gpu_only]
pub fn dynamic_shared<T: SharedElement>() -> DynamicSharedArray<T> {
    const { assert!(align_of::<T>() <= 16 && size_of::<T>() > 0) };
    // SAFETY: reads a special register; takes the address of the module's dynamic shared
    // memory (no access).
    let (bytes, ptr) = unsafe { (dynamic_smem_size(), (&raw mut DYNAMIC_SHARED).cast::<T>()) };
    DynamicSharedArray {
        ptr,
        len: bytes as usize / size_of::<T>(),
    }
}

/// Declares a block-shared array and evaluates to its handle (see [`shared`](crate::shared)):
///
/// * `shared_array!(T, N)` — `N` elements of `T`: a [`SharedArray<T, N>`];
/// * `shared_array!(T, N, align = A)` — the same, aligned to `A` bytes (a literal power of
///   two, e.g. 16 for vector loads);
/// * `shared_array!(T, [R, C])` — an `R`×`C` tile: a [`SharedArray2<T, R, C>`];
/// * `shared_array!(T, [R, C], align = A)` — the same, aligned to `A` bytes (16 for
///   `ldmatrix` and vector loads: also make the row length `C * size_of::<T>()` a multiple
///   of 16);
/// * `shared_array![T; N]` — cuda_std's spelling of the first form.
///
/// `T` must be a [`SharedElement`] and not a generic parameter; `N`, `R`, `C` are constants.
/// On the host, which has no block-shared memory, the same rules are checked and the handle's
/// making panics naming the macro (a host stub, as `#[gpu_only]`'s).
///
/// ```ignore
/// let tile = shared_array!(f32, [16, 17]);
/// unsafe { tile.write(ty, tx, a.get(i).unwrap()) };
/// thread::sync_threads();
/// let x = tile.get(tx, ty);
/// ```
#[macro_export]
macro_rules! shared_array {
    // cuda_std's spelling, `shared_array![T; N]`.
    ($t:ty; $n:expr) => {
        $crate::shared_array!($t, $n)
    };
    ($t:ty, [$r:expr, $c:expr], align = $a:literal $(,)?) => {
        $crate::__shared_array!($t, [$r, $c], align = $a)
    };
    ($t:ty, [$r:expr, $c:expr] $(,)?) => {
        $crate::__shared_array!($t, [$r, $c])
    };
    ($t:ty, $n:expr, align = $a:literal $(,)?) => {
        $crate::__shared_array!($t, $n, align = $a)
    };
    ($t:ty, $n:expr $(,)?) => {
        $crate::__shared_array!($t, $n)
    };
}

/// The expansion of [`shared_array!`](crate::shared_array) on the device: a `static` of this
/// expansion in the shared section, and its handle. Not a public API.
#[doc(hidden)]
#[cfg(target_arch = "nvptx64")]
#[macro_export]
macro_rules! __shared_array {
    ($t:ty, [$r:expr, $c:expr], align = $a:literal) => {{
        #[repr(C, align($a))]
        struct Aligned(::core::mem::MaybeUninit<[[$t; $c]; $r]>);
        #[link_section = $crate::shared_section!()]
        static mut STORAGE: Aligned = Aligned(::core::mem::MaybeUninit::uninit());
        // SAFETY: as in the plain 2-D form.
        unsafe {
            $crate::shared::SharedArray2::<$t, { $r }, { $c }>::from_raw(
                (&raw mut STORAGE).cast::<$t>(),
            )
        }
    }};
    ($t:ty, [$r:expr, $c:expr]) => {{
        #[link_section = $crate::shared_section!()]
        static mut STORAGE: ::core::mem::MaybeUninit<[[$t; $c]; $r]> =
            ::core::mem::MaybeUninit::uninit();
        // SAFETY: a static of this expansion only, in the shared section: R*C elements of
        // block-shared memory for the kernel's lifetime, reached only through handles.
        unsafe {
            $crate::shared::SharedArray2::<$t, { $r }, { $c }>::from_raw(
                (&raw mut STORAGE).cast::<$t>(),
            )
        }
    }};
    ($t:ty, $n:expr, align = $a:literal) => {{
        #[repr(C, align($a))]
        struct Aligned(::core::mem::MaybeUninit<[$t; $n]>);
        #[link_section = $crate::shared_section!()]
        static mut STORAGE: Aligned = Aligned(::core::mem::MaybeUninit::uninit());
        // SAFETY: as in the plain form.
        unsafe {
            $crate::shared::SharedArray::<$t, { $n }>::from_raw((&raw mut STORAGE).cast::<$t>())
        }
    }};
    ($t:ty, $n:expr) => {{
        #[link_section = $crate::shared_section!()]
        static mut STORAGE: ::core::mem::MaybeUninit<[$t; $n]> = ::core::mem::MaybeUninit::uninit();
        // SAFETY: a static of this expansion only, in the shared section: N elements of
        // block-shared memory for the kernel's lifetime, reached only through handles.
        unsafe {
            $crate::shared::SharedArray::<$t, { $n }>::from_raw((&raw mut STORAGE).cast::<$t>())
        }
    }};
}

/// The expansion of [`shared_array!`](crate::shared_array) on the host, which has no
/// block-shared memory: the handle's type, made by a stub that panics naming the macro. The
/// storage and its alignment are declared as types only (no memory), so that the device's
/// compile-time rules hold on the host too: a constant length, an element type that is not a
/// generic parameter, a power-of-two alignment. Not a public API.
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
#[macro_export]
macro_rules! __shared_array {
    ($t:ty, [$r:expr, $c:expr] $(, align = $a:literal)?) => {{
        #[allow(dead_code)]
        $(#[repr(C, align($a))])?
        struct Storage(::core::mem::MaybeUninit<[[$t; $c]; $r]>);
        $crate::shared::SharedArray2::<$t, { $r }, { $c }>::__host_stub()
    }};
    ($t:ty, $n:expr $(, align = $a:literal)?) => {{
        #[allow(dead_code)]
        $(#[repr(C, align($a))])?
        struct Storage(::core::mem::MaybeUninit<[$t; $n]>);
        $crate::shared::SharedArray::<$t, { $n }>::__host_stub()
    }};
}

/// The message of the host's `shared_array!` (the form of `#[gpu_only]`'s).
#[cfg(not(target_arch = "nvptx64"))]
const SHARED_ARRAY_ON_THE_HOST: &str =
    "`shared_array!` runs only on the GPU (nvptx64): this is its host stub";

#[cfg(not(target_arch = "nvptx64"))]
impl<T: SharedElement, const N: usize> SharedArray<T, N> {
    /// What [`shared_array!`](crate::shared_array) makes on the host: a panic naming it.
    #[doc(hidden)]
    pub fn __host_stub() -> Self {
        panic!("{}", SHARED_ARRAY_ON_THE_HOST)
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl<T: SharedElement, const R: usize, const C: usize> SharedArray2<T, R, C> {
    /// What `shared_array!(T, [R, C])` makes on the host: a panic naming the macro.
    #[doc(hidden)]
    pub fn __host_stub() -> Self {
        panic!("{}", SHARED_ARRAY_ON_THE_HOST)
    }
}
