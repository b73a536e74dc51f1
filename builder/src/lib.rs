//! Build a ferrocuda kernel crate to PTX from a `build.rs`, with rustc's own NVPTX backend.
//!
//! ```no_run
//! // In build.rs's `main`:
//! let out = ferrocuda_builder::PtxBuilder::new("kernels")
//!     .arch("sm_80")
//!     .build_script();
//! // out.ptx and out.manifest_path are in $OUT_DIR; include them with include_str!.
//! println!("{} kernels", out.manifest.kernels.len());
//! ```
//!
//! Also here:
//!
//! * [`Launchers`] ([`launchers`]) — typed Rust launchers generated from a manifest (the root
//!   crate's `ferrocuda::kernels::*`, and a user's host crate's, from its `build.rs`:
//!   `out.launchers().write_to_out_dir("my_kernels.rs")`);
//! * [`project`] — kernel crates as projects: `ferrocuda new` (a scaffold that builds as it
//!   is), `ferrocuda build` (toolchain installed when missing, the build cache, the crates'
//!   sources); [`cli`] — the `ferrocuda` command, this crate's binary and the Python package's;
//!   [`project::inline`] — kernels held in a string (Python's `ferrocuda.inline`), in a
//!   generated crate and an on-disk cache shared by processes;
//! * [`Control`] ([`control`]) — a build's progress per stage, with times, and its
//!   cancellation (the child cargo killed with every process it started).
//!
//! # How kernels are compiled
//!
//! Rust-CUDA's `cuda_builder` needs LLVM 7; rustc's built-in `nvptx64-nvidia-cuda` target
//! needs the toolchain's `rust-src` and `llvm-tools` components and nothing else. The pipeline:
//!
//! 1. **rustc** (through a child `cargo rustc`) compiles the kernel crate and `core`
//!    (`-Zbuild-std=core`: there is no prebuilt `core` for the target) as a `staticlib` with
//!    fat LTO, and emits the LTO'd, optimised module as LLVM bitcode (`--emit=llvm-bc`): LTO
//!    pulls `core` in, no linker runs, one self-contained module comes out. Flags: no debuginfo
//!    (ptxas rejects it), `opt-level=3` (lower levels leave `memcmp` calls),
//!    `-Cpanic=immediate-abort` (panics become `trap`, no panic strings),
//!    `-Ctarget-cpu=<arch>` for every crate. The unstable flags are enabled with
//!    `RUSTC_BOOTSTRAP=1` **on the child build only**.
//! 2. **`llvm-dis`** turns the bitcode into text, which the builder reads for what the module
//!    needs: statics in [`SHARED_SECTION`](ferrocuda_abi::SHARED_SECTION), a declaration of
//!    [`DYNAMIC_SHARED_SYMBOL`](ferrocuda_abi::DYNAMIC_SHARED_SYMBOL), calls to libdevice's
//!    `__nv_*` functions, calls to the state-space markers of `ferrocuda_abi::space`.
//! 3. **Shared memory** (only when used): Rust has no address spaces, so rustc puts every
//!    static in `.global` memory. The builder rewrites the text so that those statics live in
//!    address space 3 (PTX `.shared`, one copy per block) and dynamic shared memory becomes
//!    `.extern .shared .align 16 .b8 __ferrocuda_dynamic_shared[];`. The contract is on
//!    [`SHARED_SECTION`](ferrocuda_abi::SHARED_SECTION): uninitialised (`MaybeUninit`),
//!    mutable statics; misuse — an initial value, an immutable static, a lookalike section
//!    such as `.shared` or `.nv.shared` — is a build error naming the static.
//!
//!    **Global memory** (every kernel with an array parameter): array parameters arrive in
//!    by-value structs, so LLVM sees their data pointers as integers made generic pointers,
//!    and every access would be a generic `ld`/`st` (SASS `LD.E`/`ST.E`, which tests the
//!    address's window at run time). `#[kernel]`'s entry passes each array parameter's data
//!    pointer — the first field of every array kind, `AtomicSlice` and future kinds included
//!    — through the marker `__ferrocuda_global(ptr) -> ptr` (declared `ffi_const`, so it is
//!    no barrier to rustc's optimiser). The builder replaces each call by
//!    `addrspacecast … to ptr addrspace(1)` and a cast back: the same address, known to be
//!    global (the host checks every array argument with the driver; a zero-size array's null
//!    pointer is never dereferenced). The read-only accessors (`Slice::get_nc`, …) use a
//!    second marker, `__ferrocuda_global_nc`, whose loads — through the result, an offset of
//!    it, or `phi`/`select`s of such addresses — also get `!invariant.load`: `ld.global.nc`.
//!    Any other use of a marker is a build error. Why markers and not `llvm.assume` of
//!    `isspacep.global`: optimisation drops those assumptions before the backend sees them.
//!    Why a text rewrite and not `llc` alone: only the IR can carry the read-only loads'
//!    metadata, and the shared-memory path needs `opt` anyway.
//! 4. **`llvm-link`** (only when a kernel calls a libdevice function) links NVIDIA's
//!    `libdevice.10.bc` in with `--only-needed --internalize`: only the functions called come
//!    in, and as internal functions, so they can be inlined.
//! 5. **`opt`** (only after step 3 or 4: rustc has optimised the module already) first runs
//!    `infer-address-spaces`, which carries the casts of step 3 to every access
//!    (`ld.global`/`st.global`, `ld.shared`/`st.shared`) — it must run before InstCombine,
//!    which folds a cast pair back to the generic pointer — then, for shared memory and
//!    libdevice, the `-O3` pipeline: it resolves libdevice's `__nvvm_reflect` queries — IEEE:
//!    no flush to zero, correctly rounded `sqrt` — and inlines libdevice.
//! 6. **`llc`** generates the PTX with rustc's own code-generation settings (`-O3`,
//!    `-mcpu=<arch>` and so the PTX ISA version LLVM picks for it — raised to 7.1 for sm_80 and
//!    8.0 for sm_90, which `ferrocuda-device`'s mbarrier instructions need — traps for
//!    `unreachable`), and the [`FpContract`] setting.
//! 7. The PTX is post-processed: the manifest records that `#[kernel]` embeds (see
//!    `ferrocuda_abi::manifest`) are decoded, removed from the PTX, cross-checked against the
//!    `.entry` parameter lists, and written as JSON next to the PTX; the launch records (see
//!    `ferrocuda_abi::launch`) are removed too, their bounds written into the entries
//!    (`.maxntid` / `.reqntid`) and recorded in the manifest.
//! 8. **Checks** ([`check`]): unresolved `.extern` functions (a C math function such as
//!    `cbrtf` is pointed to `ferrocuda_device::math`), kernels that reach panic machinery
//!    through their calls, block barriers under thread-dependent branches, shared memory over
//!    the device's limits, and waits nothing in their kernel can complete (an mbarrier wait
//!    with no arrive, a `cp.async` group wait with no commit) fail the build — each finding
//!    with the kernel crate's file and line it comes from: a build with findings about a
//!    kernel or an instruction (errors, or the warnings below) compiles the crate once more
//!    with line tables (`.loc` directives, inlined call sites included), into
//!    `<target>/ferrocuda-lines` and never shipped, to find them (a clean build pays nothing);
//!    then **ptxas**, when one is found
//!    (`$FERROCUDA_PTXAS`, `$CUDA_HOME`, `$CUDA_PATH`, `PATH`, `/usr/local/cuda`, a Python's
//!    nvcc wheel, [`PtxBuilder::cuda_fallback`], the builder's own copy of the wheel — which
//!    it downloads when cubins are wanted and no ptxas is found, see [`cuda`]), assembles the PTX for the crate's arch: its
//!    per-kernel report (registers, stack frame, spills, shared memory) is
//!    [`BuildOutput::resources`], and stack frames, spills and local memory are warnings
//!    (`cargo:warning=` from [`PtxBuilder::build_script`]), located in the Rust source too.
//! 9. **Cubins**: the same ptxas assembles the PTX for each of [`PtxBuilder::cubin_archs`]
//!    (`sm_80` and `sm_90` by default, `$FERROCUDA_CUBIN_ARCHS` to choose others at build
//!    time; one run per arch, in parallel, the crate arch's run
//!    making its report too), written next to the PTX as `<lib>.<arch>.cubin` and named in the
//!    manifest's `cubins`. The host loads the cubin of the device's major version when there
//!    is one (no JIT compilation at first launch), else the PTX. Without ptxas the build makes
//!    PTX only and says so in one line ([`BuildOutput::note`]).
//!
//! LLVM's location-less "Cannot select" crash on a floating-point operation NVPTX cannot
//! lower (`sin`, `exp`, `log`, `pow`, … through `core::intrinsics`) becomes an error naming
//! the operation and pointing to `ferrocuda_device::math`.
//!
//! The LLVM tools come from the sysroot of the toolchain the child build uses (the `rustc` the
//! kernel crate's directory selects), so they always match the LLVM inside that rustc.
//!
//! The child `cargo` runs with a scrubbed environment: the variables cargo sets for build
//! scripts (`CARGO_ENCODED_RUSTFLAGS`, `RUSTUP_TOOLCHAIN`, `CARGO_TARGET_DIR`, jobserver
//! `MAKEFLAGS`, …) would silently change the target CPU or break the build. It uses its own
//! target directory (sharing the outer one deadlocks on cargo's lock), and every file is
//! written to a path fixed per crate, profile and arch, then the results are copied, only when
//! changed, to the output directory.
//!
//! Every child build of a workspace shares that target directory ([`child_target_dir`]), and
//! so do builds that run at once: two processes' build scripts for one crate (`cargo clippy`
//! beside `maturin develop`, an editor's `cargo check` beside a terminal's `cargo build`), two
//! threads. Builds of one crate for one arch and profile take turns: each holds an exclusive
//! file lock, `<lib>.<arch>.<profile>.<hash>.lock` beside the files it names, for the whole
//! build — child cargo, LLVM, checks, cubins, the writes of its outputs. The wait polls the
//! build's [`Control`]: a progress line says what it waits for, and a cancel ends it. The child
//! cargo runs only inside the lock, never while waiting for it, so cargo's own lock of the
//! target directory and this one never wait for each other. Builds for other archs or
//! profiles, and of other crates, use other files and run at once (cargo's lock orders their
//! child builds). Every file written to the output directory goes to a temporary name first
//! and is renamed into place: a reader sees the old file or the new one, never half of one.
//!
//! # libdevice
//!
//! Kernels call libdevice by declaring its functions
//! (`unsafe extern "C" { fn __nv_expf(x: f32) -> f32; }`; `ferrocuda_device::math` wraps
//! them). libdevice is searched only when a kernel calls one, in this order:
//! [`PtxBuilder::libdevice`], `$FERROCUDA_LIBDEVICE` (either, when given, is final),
//! `$CUDA_HOME` and `$CUDA_PATH` (`nvvm/libdevice/libdevice.10.bc`), `/usr/local/cuda`, the
//! `nvidia-cuda-nvcc-cu12` wheel of a Python environment (`nvidia/cuda_nvcc/…`: asked of the
//! interpreter maturin builds for, `$PYO3_PYTHON`, the active virtual environment's, then
//! `python3` — one `-c` query each, outside pip's isolated build environment, which hides the
//! user's packages), [`PtxBuilder::cuda_fallback`], then the builder's own copy of that wheel
//! ([`cuda::nvcc_cache_root`]). When none has it, the builder installs the wheel there
//! (`pip install --target`, once; [`PtxBuilder::download_cuda`], `FERROCUDA_OFFLINE=1` to
//! refuse) and says so in [`BuildOutput::note`] (a `cargo:warning` from a build script); when
//! it cannot, the error names every place looked at and the one command that installs it.
//!
//! # Layers
//!
//! Each module uses only the modules listed above it (checked by the workspace's
//! `tests/layers`); this file declares them and re-exports the public API:
//!
//! 1. `error` — [`BuildError`] and [`BuildErrorKind`], which every stage returns.
//! 2. `arch` — the target triple ([`TARGET`]), the default cubin architectures
//!    ([`DEFAULT_CUBIN_ARCHS`]) and the number of an `sm_XY` name.
//! 3. `files` — writing the build's files: only when changed, and atomically.
//! 4. [`control`] — [`Control`], a build's progress per stage and its cancellation.
//! 5. `lock` — exclusive file locks between builds that write the same files, waited for
//!    through a [`Control`].
//! 6. [`cuda`] — NVIDIA's files (libdevice, ptxas, nvdisasm): where they are looked for, and
//!    the builder's own copy of the nvcc wheel.
//! 7. `toolchain` — the Rust toolchain that builds a kernel crate, its LLVM tools, and the
//!    scrubbed environment of the child build.
//! 8. [`doctor`] — `ferrocuda doctor`: what building kernels needs on this machine.
//! 9. `ir` — reading the LLVM text form of a kernel module.
//! 10. `space` — the state-space rewrite of the markers of `ferrocuda_abi::space`.
//! 11. `shared` — what a module asks of the pipeline (shared memory, libdevice, markers) and
//!     the rewrite of shared statics into `.shared`.
//! 12. [`check`] — the PTX rules, ptxas's report and the SASS checks.
//! 13. `ptx` — the PTX's post-processing: manifest and launch records decoded, removed and
//!     cross-checked ([`process_ptx`]).
//! 14. `locate` — the Rust source lines of check findings, from a build with line tables.
//! 15. `verify` — the checks every build runs on its PTX, ptxas's assembly and the cubins.
//! 16. `llvm` — from rustc's bitcode to PTX with the toolchain's LLVM tools.
//! 17. `child` — the child `cargo rustc` that compiles the kernel crate to LLVM bitcode.
//! 18. `builder` — [`PtxBuilder`] (a build's settings, [`PtxBuilder::build_script`]) and what
//!     a build produces ([`BuildOutput`], [`PartOutput`]).
//! 19. `parts` — [`PtxBuilder::build`]: the base PTX and one per declared architecture, each
//!     compiled, checked and assembled, then the manifest.
//! 20. [`launchers`] — [`Launchers`], typed Rust launchers generated from a manifest.
//! 21. [`project`] — kernel crates as projects: `ferrocuda new`, `ferrocuda build` and its
//!     cache, kernels held in a string ([`project::inline`]).
//! 22. [`cli`] — the `ferrocuda` command.

#![warn(missing_docs)]

mod arch;
mod builder;
pub mod check;
mod child;
pub mod cli;
pub mod control;
pub mod cuda;
pub mod doctor;
mod error;
mod files;
mod ir;
pub mod launchers;
mod llvm;
mod locate;
mod lock;
mod parts;
pub mod project;
mod ptx;
mod shared;
mod space;
mod toolchain;
mod verify;

pub use arch::{DEFAULT_CUBIN_ARCHS, TARGET};
pub use builder::{child_target_dir, BuildOutput, PartOutput, PtxBuilder};
pub use control::Control;
pub(crate) use error::fail;
pub use error::{BuildError, BuildErrorKind};
pub use ferrocuda_abi::manifest::FpContract;
pub(crate) use files::write_atomically;
pub use launchers::Launchers;
pub use ptx::{process_ptx, ptx_entries, Processed, PtxEntry};
