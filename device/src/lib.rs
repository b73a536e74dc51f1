//! Device-side support for ferrocuda kernels.
//!
//! A kernel crate is a `#![no_std]` library that depends on this crate and marks its entry
//! points with [`kernel`]:
//!
//! ```ignore
//! #![no_std]
//! #![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]
//! use ferrocuda_device::{kernel, thread, Slice, SliceMut};
//!
//! #[kernel(same_shape(x, y))]
//! pub unsafe fn scale_f32(alpha: f32, x: Slice<f32>, y: SliceMut<f32>) {
//!     for i in thread::grid_stride(y.len()) {
//!         unsafe { y.write_unchecked(i, alpha * x.get_unchecked(i)) };
//!     }
//! }
//! ```
//!
//! What is here (the guide: `docs/writing-kernels.md`; from Rust-CUDA:
//! `docs/porting-from-rust-cuda.md`):
//!
//! * [`thread`] — thread, block and grid indices in 1-D, 2-D and 3-D, the global index, the
//!   block's linear thread rank, the block barrier [`thread::sync_threads`] and its counting
//!   forms, a group of warps' barrier [`thread::sync_warps`], `nanosleep`, clock and timer
//!   reads;
//! * [`shared`] — block-shared memory: [`shared_array!`] (static arrays, 1-D and 2-D tiles)
//!   and `shared::dynamic_shared` (the launch's dynamic shared memory), with bounds-checked
//!   handles and shared-memory atomics;
//! * [`cp_async`] — asynchronous copies from global to shared memory (`cp.async`, zero-filling
//!   partial tiles), commit groups and waits, and [`cp_async::Pipeline`], a multi-stage
//!   copy pipeline for main loops;
//! * [`mbarrier`] — split arrive/wait barriers in shared memory with typed phase tracking
//!   ([`mbarrier::Phase`]), `cp.async` completion tracking, transaction counts and `try_wait`
//!   (sm_90), declared with [`shared_mbarrier!`];
//! * [`atomic`] — atomics with an explicit memory [`atomic::Order`] and [`atomic::Scope`] on
//!   device and shared memory, fences, and [`atomic::AtomicSlice`], an array parameter that
//!   many threads update;
//! * [`warp`] — lane id, shuffles, votes, match, `redux.sync`, the warp barrier;
//! * [`block`] — CUB-style warp and block reductions and scans over any block size, with a
//!   shared-array scratch;
//! * [`mma`] — the tensor cores, warp by warp: `mma.sync` for bf16, f16, tf32, i8/u8 and f64,
//!   fragments whose element-to-lane mapping is explicit (and usable on the host),
//!   `ldmatrix`/`stmatrix` between shared memory and fragments;
//! * [`math`] — [`GpuFloat`] (`x.exp()`, `x.sin_cos()`, `x.powf(y)`, … over NVIDIA's
//!   libdevice, with its accuracy table) and [`math::FastMath`] (the `*.approx` forms);
//! * [`half`] — `f16`, `bf16` and their packed pairs, with hardware conversions;
//! * [`tma`] — the Tensor Memory Accelerator (sm_90): tile loads (multicast too) and stores
//!   through `TensorMap` parameters;
//! * [`wgmma`] — Hopper's warpgroup MMA (sm_90a): matrix descriptors and swizzles, the
//!   accumulator fragment, fence / commit / wait, `setmaxnreg`;
//! * [`diag`] — [`gpu_printf!`] (device `printf`) and [`device_assert!`]; every failed check
//!   (bounds checks included) tells the host its file, line and thread;
//! * [`grid`] — the grid as a whole: [`GridStride`] / [`thread::grid_stride`] (the
//!   grid-stride loop), linear block and thread ranks, and [`grid::GridBarrier`], the
//!   grid-wide barrier of `#[kernel(cooperative)]` kernels;
//! * [`cluster`] — thread-block clusters (sm_90): cluster ranks and shapes, the cluster
//!   barrier, and distributed shared memory (a peer block's shared memory, through
//!   [`cluster::map_shared_rank`]);
//! * the parameter types (with 16-byte vector access, [`Vectors`], and read-only-cache loads)
//!   and the indexer, re-exported from `ferrocuda-abi`; [`space`], the global-memory markers;
//! * [`kernel`] — the attribute that makes a PTX entry point and its manifest record;
//! * [`prelude`] — the names most kernels use, in one `use`.
//!
//! On the device, `core`'s panics become a bare PTX `trap` (the builder compiles with
//! `-Cpanic=immediate-abort`); this crate's checks record their location first (see
//! [`diag`]).
//!
//! # On the host
//!
//! A kernel crate type-checks on the host (`cargo check`, clippy, rust-analyzer) without `cfg`
//! gates: the device language exists there too, with the device's types and signatures. A
//! function that needs the device is `#[gpu_only]` (cuda_std's attribute, re-exported as
//! [`gpu_only`]): compiled as written for `nvptx64`, elsewhere a host stub whose body panics
//! naming the function — [`thread`], [`warp`], [`block`], [`atomic`] (the operations and
//! fences), [`shared`] (`dynamic_shared`, shared-window addresses), [`grid`] (the ranks, the
//! grid barrier), [`cp_async`], [`mbarrier`], [`cluster`] and [`tma`]; [`shared_array!`] on the
//! host checks its arguments as on the device and evaluates to a panic naming itself. The
//! target-independent parts run on the host and are unit-tested there: [`GridStride`],
//! [`math`], the handles over ordinary memory with their bounds checks, atomic references and
//! their order rules, the fragments' lane mappings, the re-exports. Still device-only are the
//! tensor-core instructions (`mma::mma`, `ldmatrix`/`stmatrix`, the fragments'
//! shared-memory loads and stores), the [`wgmma`] instructions and the half types' arithmetic
//! (on the host, `f16` is a 16-bit placeholder); so are `nvvm` (private declarations of LLVM
//! intrinsics, which only the device build may name) and the `#[panic_handler]` (on the host,
//! `std` has one). These docs are complete when built for the device
//! (`scripts/device-docs.sh`).
//!
//! # Layers
//!
//! Each module uses only the modules listed above it (checked by the workspace's
//! `tests/layers`); the parameter types and the element-type table come from
//! `ferrocuda-abi`, below all of them, and this file declares the modules and re-exports:
//!
//! 1. `nvvm` — the NVVM intrinsics the other modules call (device only).
//! 2. [`diag`] — device `printf`, assertions, and the failure path of every check.
//! 3. [`half`] — `f16`, `bf16` and their packed pairs.
//! 4. [`math`] — [`GpuFloat`] and [`math::FastMath`].
//! 5. `stride` — [`GridStride`], the grid-stride loop's iterator.
//! 6. [`thread`] — thread, block and grid indices, the block barrier, clocks.
//! 7. [`warp`] — lane id, shuffles, votes, match, `redux.sync`.
//! 8. [`atomic`] — atomics with an explicit order and scope, fences, [`atomic::AtomicSlice`].
//! 9. [`shared`] — block-shared memory: static and dynamic arrays, their atomics.
//! 10. [`grid`] — the grid's linear ranks and [`grid::GridBarrier`].
//! 11. [`block`] — warp and block reductions and scans.
//! 12. [`cp_async`] — asynchronous copies from global to shared memory.
//! 13. [`mbarrier`] — split arrive/wait barriers in shared memory.
//! 14. [`cluster`] — thread-block clusters and distributed shared memory.
//! 15. [`mma`] — the tensor cores, warp by warp.
//! 16. [`tma`] — the Tensor Memory Accelerator.
//! 17. [`wgmma`] — Hopper's warpgroup MMA.
//! 18. [`prelude`] — the names most kernels use.
//! 19. `__private` — what the code `#[kernel]` generates uses (not a public API).
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        stdarch_nvptx,
        asm_experimental_arch,
        link_llvm_intrinsics,
        f16,
        simd_ffi,
        allow_internal_unstable
    )
)]
// `link_llvm_intrinsics` is how the convergent NVVM intrinsics (shuffles, votes, barriers) and
// the tensor cores' `mma` are reached; rustc calls it internal. `simd_ffi` admits the vector
// type `core::arch::nvptx::f16x2` (LLVM's `<2 x half>`) in the declarations of the f16 `mma`
// intrinsics.
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
#![warn(missing_docs)]
// The host build of these docs lacks what is still device-only — the tensor-core instructions
// (`mma::mma`, `ldmatrix`/`stmatrix`, the fragments' shared-memory loads and stores), the
// `wgmma` instructions and the half types' arithmetic — which the prose of `mma`, `wgmma` and
// `half` links to; the complete docs are built for the device target, where every link must
// resolve (`scripts/device-docs.sh`, run by the test suite with warnings denied).
#![cfg_attr(not(target_arch = "nvptx64"), allow(rustdoc::broken_intra_doc_links))]

#[doc(hidden)]
pub use ferrocuda_abi::shared_section;
pub use ferrocuda_abi::space;
pub use ferrocuda_abi::{
    DType, Element, Indexer, KernelParam, ParamDesc, ParamKind, Scratch, Slice, SliceMut,
    TensorMap, TensorMapMut, Vectors, VectorsMut, View, ViewMut,
};
pub use ferrocuda_macros::{gpu_only, kernel};

/// The most launches of a kernel between two zero-fills of a workspace it declares
/// `#[kernel(persist(…))]`: a launch count since the fill, below this, tells a launch's words
/// from every earlier launch's (the scans' tile statuses).
pub use ferrocuda_abi::extras::PERSIST_REFILL;

/// `unroll!(I in 0..N { … })`: the body written out `N` times with `I` a literal each time
/// (the `seq!` macro of the `seq-macro` crate) — CUDA's `#pragma unroll`. Loops over register
/// arrays (MMA accumulators, fragments) need it: indexed by a loop variable, LLVM keeps the
/// array in local memory unless it unrolls the loop, which it does not for long bodies; indexed
/// by literals, every element is a register. `N` is a literal (or a range of literals).
pub use seq_macro::seq as unroll;

pub mod grid;
// Declarations of LLVM's NVVM intrinsics (`link_llvm_intrinsics`, a device build's feature),
// called only by `#[gpu_only]` bodies.
#[cfg(target_arch = "nvptx64")]
mod nvvm;
pub use grid::GridStride;

pub mod cluster;

pub mod thread;

pub mod atomic;
pub mod block;
pub mod cp_async;
pub mod diag;
pub mod half;
pub mod math;
pub mod mbarrier;
pub mod mma;
pub mod shared;
mod stride;
pub mod tma;
pub mod wgmma;

pub use math::GpuFloat;

/// The names most kernels use: `use ferrocuda_device::prelude::*;` (as `cuda_std::prelude`).
///
/// Every module in it exists on the host too (`cargo check`, rust-analyzer): the device
/// functions as `#[gpu_only]` host stubs, so a kernel crate's host build needs no gating
/// (`#[kernel]` compiles the kernel bodies themselves for the device only).
pub mod prelude {
    pub use crate::grid::GridBarrier;
    pub use crate::half::{bf16, f16};
    pub use crate::math::{FastMath, GpuFloat};
    pub use crate::{cp_async, mbarrier, shared_mbarrier, thread};
    pub use crate::{device_assert, gpu_only, gpu_printf, kernel, shared_array};
    pub use crate::{Element, GridStride, Slice, SliceMut, View, ViewMut};
}
pub mod warp;

/// Items used by the code `#[kernel]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use ferrocuda_abi::extras::{Cmp, Extras, Operand, Require, ScratchLen, TileDecl};
    pub use ferrocuda_abi::launch::{LaunchDecl, LEN as LAUNCH_RECORD_LEN};
    pub use ferrocuda_abi::manifest::{encode, encode_ext, encoded_len, encoded_len_ext};
    pub use ferrocuda_abi::TileDesc;
    pub use ferrocuda_abi::{Element, KernelParam, ParamDesc};

    pub use crate::grid::GRID_BARRIER_WORDS;

    /// The parameter type `#[kernel]` recognizes by the name `GridBarrier`: implemented for
    /// [`grid::GridBarrier`](crate::grid::GridBarrier) only, so that another type of that
    /// name is refused at compile time.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not ferrocuda's grid barrier",
        note = "a kernel parameter named by the type `GridBarrier` must be \
                `ferrocuda_device::grid::GridBarrier` (the launcher provides it)"
    )]
    pub trait GridBarrierParam {}
    impl GridBarrierParam for crate::grid::GridBarrier {}

    /// A kernel parameter's type, checked by `#[kernel]` under the parameter's name `P` (a
    /// type `kernel::parameter`, which the error message prints): its [`KernelParam::DESC`].
    #[diagnostic::on_unimplemented(
        message = "kernel parameter `{P}`: `{Self}` cannot be a kernel parameter",
        label = "`{P}` has this type",
        note = "kernel parameters are passed by value: scalars (i8..i64, u8..u64, f16, bf16, \
                f32, f64) and arrays of them (Slice<T>, SliceMut<T>, View<T, N>, ViewMut<T, N>, \
                AtomicSlice<T>); never a reference, a pointer or an owning type"
    )]
    pub trait ParamCheck<P> {
        /// `Self`'s [`KernelParam::DESC`].
        const DESC: ParamDesc;
        /// `Self`'s [`KernelParam::TILE`].
        const TILE: TileDesc;
    }
    impl<T: KernelParam, P> ParamCheck<P> for T {
        const DESC: ParamDesc = T::DESC;
        const TILE: TileDesc = T::TILE;
    }

    /// `#[kernel(shared_bytes = <expression>)]`, checked at compile time.
    pub const fn shared_bytes(n: u32) -> u32 {
        assert!(
            n <= ferrocuda_abi::launch::MAX_SHARED_BYTES,
            "shared_bytes is at most 227 KiB (232448 bytes)"
        );
        n
    }

    /// `#[kernel(items_per_thread = <expression>)]`, checked at compile time.
    pub const fn items_per_thread(n: usize) -> u16 {
        assert!(
            n >= 1 && n <= u16::MAX as usize,
            "items_per_thread must be in 1..=65535"
        );
        n as u16
    }

    /// The kernel entry's view of parameter `p` of kind code `KIND`: for an array kind that
    /// begins with its data pointer, the same value with that pointer marked as global memory
    /// ([`ferrocuda_abi::space::global`]), so that accesses through it compile to
    /// `ld.global`/`st.global`; for a tensor map, the value with its first word replaced by
    /// the parameter's own generic address (`param_addr`: `mov` of the PTX parameter symbol and
    /// `cvta.param`), which TMA instructions take; a scalar unchanged.
    #[inline(always)]
    pub fn route<P: Copy, const KIND: u8>(p: P, param_addr: impl FnOnce() -> u64) -> P {
        const {
            assert!(
                core::mem::size_of::<P>() >= core::mem::size_of::<*mut u8>()
                    || KIND == ferrocuda_abi::ParamKind::Scalar as u8,
                "an array parameter type must begin with its data pointer or descriptor"
            )
        };
        let mut p = p;
        if KIND == ferrocuda_abi::ParamKind::TensorMap as u8 {
            // SAFETY: a tensor map's first 8 bytes are its word 0 (`Opaque::words[0]`),
            // which the body reads as the parameter's address.
            unsafe { (&raw mut p).cast::<u64>().write_unaligned(param_addr()) };
            return p;
        }
        let has_pointer = match ferrocuda_abi::ParamKind::from_code(KIND) {
            Some(k) => k.has_data_pointer(),
            None => false,
        };
        if !has_pointer {
            return p;
        }
        let data = (&raw mut p).cast::<*mut u8>();
        // SAFETY: an array kind with a data pointer begins with it (`KernelParam`'s contract;
        // the assertion above checks room for it; alignment: every such type is at least
        // pointer-aligned), and the host has checked it to be device memory (or null for an
        // empty array, never dereferenced).
        unsafe { data.write(ferrocuda_abi::space::global(data.read())) };
        p
    }

    /// `#[kernel]`'s check that a kernel with a tensor-map parameter is built for sm_90 or
    /// newer (`arch`): TMA does not exist before.
    pub const fn tensor_map_needs_sm90(kind: ferrocuda_abi::ParamKind, sm90: bool) -> bool {
        !matches!(kind, ferrocuda_abi::ParamKind::TensorMap) || sm90
    }
}

/// The generic address of the kernel parameter whose PTX symbol is `$sym` (`mov` of the
/// symbol, `cvta.param`): what `#[kernel]`'s entry hands a tensor-map parameter's body. Not a
/// public API; it lets the expansion use `asm!` without the kernel crate enabling the
/// feature.
#[doc(hidden)]
#[macro_export]
#[cfg_attr(
    target_arch = "nvptx64",
    allow_internal_unstable(asm_experimental_arch)
)]
macro_rules! __param_address {
    ($sym:expr) => {{
        let a: u64;
        // SAFETY: takes the address of the entry's own parameter; no access.
        unsafe {
            ::core::arch::asm!(
                concat!("mov.b64 {a}, ", $sym, "; cvta.param.u64 {a}, {a};"),
                a = out(reg64) a,
                options(pure, nomem, nostack),
            )
        };
        a
    }};
}

/// With `-Cpanic=abort`, a panic records its location in the trap record (see [`diag`]) and
/// traps; the builder's default, `-Cpanic=immediate-abort`, never calls it. Device only: on
/// the host, `std` provides the panic handler.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    match info.location() {
        Some(location) => ferrocuda_abi::diag::trap_at(location),
        // SAFETY: `trap` has no preconditions.
        None => unsafe { core::arch::nvptx::trap() },
    }
}
