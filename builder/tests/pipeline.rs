//! The compile pipeline's device-language features, through real NVPTX builds (no GPU):
//!
//! * `shared_memory_and_libdevice`: statics in `ferrocuda_abi::shared_section!()` become PTX
//!   `.shared` variables accessed with `ld.shared`/`st.shared`, the dynamic shared memory
//!   declaration becomes `.extern .shared .align 16`, and the libdevice functions called
//!   (`__nv_expf`, `__nv_sqrtf`) are linked, inlined (no `.func` left) and resolved for IEEE
//!   (`sqrt.rn`, not `sqrt.approx`); without a libdevice the same crate fails with a message
//!   naming the functions and the fix; the build's ptxas report counts the shared bytes;
//! * `shared_memory_misuse_is_refused`: an initialised shared static, statics in the lookalike
//!   sections `.shared`/`.nv.shared`, and a *defined* dynamic-shared symbol each fail the build
//!   with the static named;
//! * `unsupported_math_is_explained`: `sinf32` (which LLVM cannot lower for NVPTX) fails with
//!   a message pointing to `ferrocuda_device::math` instead of LLVM's bare crash;
//! * `barrier_stays_single`: `if t < n { v = x[t] } sync; if t < n { y[t] = v }` compiles to
//!   exactly one `bar.sync` and passes the barrier rule, and a crate calling no libdevice
//!   function never looks for it;
//! * `ptx_rules_fail_the_build`: a barrier under `if t < len` (written with `asm!`) and a call
//!   to the C library's `cbrtf` fail the build, each explained;
//! * `fp_contract_fuses_only_when_asked`: `a * x + y` stays `mul.rn` + `add.rn` by default and
//!   becomes `fma.rn` with `FpContract::Fast`; the manifest records the mode;
//! * `gpu_check_fixture_builds`: the kernels of `tests/fixtures/device-lang` (which
//!   `scripts/gpu_pipeline_check.py` runs on a GPU) build, with the expected shared memory,
//!   one barrier each, libdevice inlined, and nothing reported (`sinf`'s local array, which
//!   ptxas keeps in registers, only without ptxas);
//! * `dynamic_tiles_pass_the_barrier_check_and_racy_reads_do_not`: the dynamic-tile pattern
//!   builds with nothing reported, a kernel named after panics too; the same read from a
//!   thread-dependent shared address or without the barrier fails, from global memory is
//!   reported;
//! * `shared_memory_over_the_limit_fails_without_ptxas`: a 64 KiB static shared array fails
//!   the build (no ptxas run) naming the kernel and the sizes;
//! * `stack_and_local_memory_are_reported_not_refused`: libdevice's `sinf` (a local array for
//!   huge arguments) builds, with warnings and a stack frame in ptxas's report;
//! * `concurrent_builds_of_one_crate_agree`: two builds of one crate at once (two threads, each
//!   its own `PtxBuilder`, as two processes' build scripts) take turns on the crate's lock in
//!   the shared target directory and make the same PTX, manifest and cubins.
//!
//! Needs the pinned toolchain's `rust-src` and `llvm-tools`, and the nvcc wheel in `.tools/`
//! (`scripts/ensure_ptxas.sh`, run by `scripts/setup.sh`) for libdevice and ptxas.

use ferrocuda_builder::check::{check_text, Rule, Severity};
use ferrocuda_builder::{BuildError, BuildOutput, Control, FpContract, PtxBuilder};
use std::fs;
use std::path::{Path, PathBuf};

mod common;
use common::{kernel_names, repo_root, shared_target_dir, write_kernel_crate, TempDir, BUILD_LOCK};

const PACKAGE: &str = "fc-pipe";

/// The nvcc wheel's `nvidia/cuda_nvcc` directory in `.tools/`.
fn cuda_root() -> PathBuf {
    let root = repo_root().join(".tools/nvcc/nvidia/cuda_nvcc");
    assert!(
        root.join("nvvm/libdevice/libdevice.10.bc").is_file() && root.join("bin/ptxas").is_file(),
        "no nvcc wheel at {}: run scripts/ensure_ptxas.sh (scripts/setup.sh does)",
        root.display()
    );
    root
}

fn builder(dir: &Path) -> PtxBuilder {
    PtxBuilder::new(dir)
        .arch("sm_80")
        .out_dir(dir.join("out"))
        .target_dir(shared_target_dir())
}

fn build(
    dir: &Path,
    lib_rs: &str,
    configure: impl Fn(PtxBuilder) -> PtxBuilder,
) -> Result<BuildOutput, BuildError> {
    write_kernel_crate(dir, PACKAGE, lib_rs);
    configure(builder(dir)).build()
}

/// The `.entry` block of `name` (up to the closing brace at the start of a line).
fn entry<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("no .entry {name}"));
    let end = ptx[start..].find("\n}").map_or(ptx.len(), |e| start + e);
    &ptx[start..end]
}

const SHARED_AND_MATH: &str = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx))]
use core::mem::MaybeUninit;
use ferrocuda_device::{kernel, Slice, SliceMut};

#[link_section = ferrocuda_abi::shared_section!()]
static mut TILE: MaybeUninit<[f32; 256]> = MaybeUninit::uninit();
#[link_section = ferrocuda_abi::shared_section!()]
static mut COUNTS: MaybeUninit<[u32; 32]> = MaybeUninit::uninit();

unsafe extern "C" {
    #[link_name = ferrocuda_abi::dynamic_shared_symbol!()]
    static mut SCRATCH: [u8; 0];
    fn __nv_expf(x: f32) -> f32;
    fn __nv_sqrtf(x: f32) -> f32;
}

/// One block of 256 threads: y[t] = exp(x[255 - t]) + sqrt(2 x[t]) + t % 32.
#[kernel]
pub unsafe fn reverse_exp(x: Slice<f32>, y: SliceMut<f32>) {
    let t = unsafe { core::arch::nvptx::_thread_idx_x() } as usize;
    let ok = t < 256 && x.len() >= 256 && y.len() >= 256;
    let tile = (&raw mut TILE).cast::<f32>();
    let counts = (&raw mut COUNTS).cast::<u32>();
    let scratch = (&raw mut SCRATCH).cast::<f32>();
    if ok {
        // SAFETY: t < 256 <= len; each thread writes its own slots.
        unsafe {
            *tile.add(t) = x.get_unchecked(t);
            *scratch.add(t) = 2.0 * x.get_unchecked(t);
            *counts.add(t % 32) = (t % 32) as u32;
        }
    }
    unsafe { core::arch::nvptx::_syncthreads() };
    if ok {
        // SAFETY: as above; the barrier orders the block's writes before these reads.
        unsafe {
            let v = __nv_expf(*tile.add(255 - t)) + __nv_sqrtf(*scratch.add(t));
            y.write_unchecked(t, v + *counts.add(t % 32) as f32);
        }
    }
}
"#;

#[test]
fn shared_memory_and_libdevice() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-shared");
    let dir = tmp.0.join("k");

    // Without a libdevice: a clear error naming what needs it and how to install it (an
    // explicit path is final: the builder downloads nothing in its place).
    let missing = tmp.0.join("no-such-libdevice.10.bc");
    let e = build(&dir, SHARED_AND_MATH, |b| b.libdevice(&missing))
        .unwrap_err()
        .to_string();
    for want in [
        "`__nv_expf`",
        "`__nv_sqrtf`",
        "pip install --no-deps --target",
        "nvidia-cuda-nvcc-cu12==",
        "FERROCUDA_LIBDEVICE",
    ] {
        assert!(e.contains(want), "missing {want:?} in:\n{e}");
    }
    assert!(e.contains(missing.to_str().unwrap()), "{e}");

    let root = cuda_root();
    let libdevice = root.join("nvvm/libdevice/libdevice.10.bc");
    let out = build(&dir, SHARED_AND_MATH, |b| {
        b.libdevice(&libdevice).cuda_fallback(&root)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.libdevice.as_deref(), Some(libdevice.as_path()));
    let ptx = fs::read_to_string(&out.ptx).unwrap();
    assert_eq!(out.manifest.kernels.len(), 1);

    // Shared memory: per-block declarations, shared loads and stores, no global copy.
    assert!(
        ptx.contains(".extern .shared .align 16 .b8 __ferrocuda_dynamic_shared[];"),
        "{ptx}"
    );
    let decls: Vec<&str> = ptx
        .lines()
        .filter(|l| l.contains("TILE") || l.contains("COUNTS"))
        .collect();
    let shared_decl = |name: &str, bytes: usize| {
        decls.iter().any(|l| {
            l.trim_start().starts_with(".shared .align 4 .b8 ")
                && l.contains(name)
                && l.trim_end().ends_with(&format!("[{bytes}];"))
        })
    };
    assert!(
        shared_decl("TILE", 1024) && shared_decl("COUNTS", 128),
        "{decls:#?}"
    );
    assert!(!decls.iter().any(|l| l.contains(".global")), "{decls:#?}");
    let body = entry(&ptx, "reverse_exp");
    assert!(
        body.contains("st.shared.") && body.contains("ld.shared."),
        "{body}"
    );

    // libdevice: inlined, resolved for IEEE single precision.
    for absent in [
        "__nv_",
        ".func",
        "__nvvm_reflect",
        "sqrt.approx",
        ".extern .func",
    ] {
        assert!(!ptx.contains(absent), "`{absent}` in the PTX:\n{ptx}");
    }
    assert!(body.contains("sqrt.rn.f32"), "{body}");
    assert!(
        body.contains("ex2.approx"),
        "expf's libdevice body is missing:\n{body}"
    );

    // ptxas (found in the fallback root) accepts it and counts the kernel's shared memory.
    assert!(
        out.ptxas.as_deref().is_some_and(|p| p.starts_with(&root)),
        "{:?} {:?}",
        out.ptxas,
        out.warnings
    );
    let k = out
        .resources
        .iter()
        .find(|r| r.name == "reverse_exp")
        .expect("reported");
    assert!(k.entry && k.arch == "sm_80", "{k:?}");
    assert_eq!(
        (k.shared, k.stack, k.spill_stores),
        (Some(1152), Some(0), Some(0)),
        "{k:?}"
    );
    assert!(k.registers.is_some_and(|r| r > 0), "{k:?}");
    assert_eq!(out.warnings, [], "no stack, no spills, no local memory");

    // The same ptxas made a cubin per default arch, beside the PTX, named by the manifest.
    assert_eq!(out.cubins.keys().collect::<Vec<_>>(), ["sm_80", "sm_90"]);
    assert_eq!(out.note, None);
    let json = std::fs::read_to_string(&out.manifest_path).unwrap();
    let written = ferrocuda_abi::manifest::Manifest::from_json(&json).unwrap();
    assert_eq!(written.cubins, out.manifest.cubins);
    for (arch, path) in &out.cubins {
        let name = format!("fc_pipe.{arch}.cubin");
        assert_eq!(out.manifest.cubins[arch], name);
        assert_eq!(path, &out.ptx.with_file_name(&name));
        let bytes = std::fs::read(path).unwrap();
        assert!(bytes.starts_with(b"\x7fELF"), "{arch}: not an ELF image");
        assert!(bytes.len() > 1000, "{arch}: {} bytes", bytes.len());
    }
}

const MISUSE: &str = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]
use core::mem::MaybeUninit;
use ferrocuda_device::{kernel, SliceMut};

#[link_section = ".ferrocuda.shared"]
static mut ZEROED: [f32; 4] = [0.0; 4];
#[link_section = ".shared"]
static mut LOOKALIKE: MaybeUninit<[f32; 4]> = MaybeUninit::uninit();
#[link_section = ".nv.shared"]
static mut NV_LOOKALIKE: MaybeUninit<[f32; 4]> = MaybeUninit::uninit();
#[no_mangle]
static mut __ferrocuda_dynamic_shared: [f32; 4] = [0.0; 4];

#[kernel]
pub unsafe fn touch(y: SliceMut<f32>, i: u32) {
    let i = (i % 4) as usize;
    // SAFETY: i < 4; a build test, never launched.
    unsafe {
        (&raw mut ZEROED).cast::<f32>().add(i).write_volatile(1.0);
        (&raw mut LOOKALIKE).cast::<f32>().add(i).write_volatile(2.0);
        (&raw mut NV_LOOKALIKE).cast::<f32>().add(i).write_volatile(3.0);
        (&raw mut __ferrocuda_dynamic_shared).cast::<f32>().add(i).write_volatile(4.0);
        if !y.is_empty() { y.write_unchecked(0, 0.0) }
    }
}
"#;

#[test]
fn shared_memory_misuse_is_refused() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-misuse");
    let e = build(&tmp.0.join("k"), MISUSE, |b| b)
        .unwrap_err()
        .to_string();
    for want in [
        "`fc_pipe::ZEROED`",
        "cannot be initialised",
        "`fc_pipe::LOOKALIKE`",
        "link section `.shared`",
        "`fc_pipe::NV_LOOKALIKE`",
        "link section `.nv.shared`",
        "shared_section!()",
        "`__ferrocuda_dynamic_shared`",
        "`extern` block",
    ] {
        assert!(e.contains(want), "missing {want:?} in:\n{e}");
    }
}

#[test]
fn unsupported_math_is_explained() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-math");
    let src = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, core_intrinsics))]
#![allow(internal_features, unused_unsafe)]
use ferrocuda_device::{kernel, SliceMut};

#[kernel]
pub unsafe fn sines(y: SliceMut<f32>, x: f32) {
    // SAFETY: index 0 exists when the slice is not empty.
    unsafe { if !y.is_empty() { y.write_unchecked(0, core::intrinsics::sinf32(x)) } }
}
"#;
    let e = build(&tmp.0.join("k"), src, |b| b).unwrap_err().to_string();
    assert!(
        e.contains("`sin`") && e.contains("ferrocuda_device::math"),
        "{e}"
    );
    assert!(e.contains("__nv_sinf"), "{e}");
    assert!(!e.contains("Stack dump"), "{e}");
}

#[test]
fn barrier_stays_single() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-barrier");
    let src = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx))]
use ferrocuda_device::{kernel, Slice, SliceMut};

/// y[t] = x[t] for the first block, with a barrier between the read and the write.
#[kernel]
pub unsafe fn staged_copy(x: Slice<f32>, y: SliceMut<f32>) {
    let t = unsafe { core::arch::nvptx::_thread_idx_x() } as usize;
    let n = x.len().min(y.len());
    let mut v = 0.0;
    if t < n {
        // SAFETY: t < n.
        v = unsafe { x.get_unchecked(t) };
    }
    unsafe { core::arch::nvptx::_syncthreads() };
    if t < n {
        // SAFETY: t < n; one thread per element.
        unsafe { y.write_unchecked(t, v) };
    }
}
"#;
    // No libdevice function is called, so the (missing) libdevice is never looked for.
    let missing = tmp.0.join("no-such-libdevice.10.bc");
    let out =
        build(&tmp.0.join("k"), src, |b| b.libdevice(&missing)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.libdevice, None);
    let ptx = fs::read_to_string(&out.ptx).unwrap();
    let body = entry(&ptx, "staged_copy");
    assert_eq!(body.matches("bar.sync").count(), 1, "{body}");
    assert!(!ptx.contains(".shared"), "{ptx}");
    // The barrier rule (run by every build) finds nothing to refuse or report.
    assert!(
        check_text(&ptx).findings.is_empty(),
        "{:#?}",
        check_text(&ptx).findings
    );
    assert_eq!(out.warnings, []);
}

#[test]
fn ptx_rules_fail_the_build() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-rules");
    // A barrier written under a thread-dependent branch, and a C math function.
    let src = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch))]
use ferrocuda_device::{kernel, SliceMut};

unsafe extern "C" {
    fn cbrtf(x: f32) -> f32;
}

#[kernel]
pub unsafe fn bad(y: SliceMut<f32>) {
    let t = unsafe { core::arch::nvptx::_thread_idx_x() } as usize;
    if t < y.len() {
        // SAFETY: t < len. (The barrier is the bug this build must refuse.)
        unsafe {
            core::arch::asm!("bar.sync 0;");
            y.write_unchecked(t, cbrtf(t as f32));
        }
    }
}
"#;
    let e = build(&tmp.0.join("k"), src, |b| b).unwrap_err().to_string();
    // Each finding names the Rust line it comes from (the barrier's `asm!`, line 15), then the
    // PTX detail.
    for want in [
        "bad: barrier: src/lib.rs:15: `bar.sync 0` (line",
        "derives from %tid.x",
        "cbrtf: extern",
        "ferrocuda_device::math",
    ] {
        assert!(e.contains(want), "missing {want:?} in:\n{e}");
    }
}

/// The dynamic-tile pattern (thread 0 takes a tile with an atomic and stores it to shared
/// memory, a barrier, every thread reads it and returns when past the end, more barriers).
const TILES: &str = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx))]
use ferrocuda_device::atomic::{AtomicSlice, Order, Scope};
use ferrocuda_device::{kernel, shared_array, thread, Slice, SliceMut};

/// A kernel whose name says "panic", which reaches no panic machinery.
#[kernel]
pub unsafe fn no_panic_fill(y: SliceMut<f32>) {
    let t = thread::index_1d();
    if t < y.len() {
        // SAFETY: one thread per element.
        unsafe { y.write_unchecked(t, 1.0) };
    }
}


/// Dynamic tiles: thread 0 takes the next tile, every thread reads it from shared memory.
#[kernel]
pub unsafe fn tiles(next: AtomicSlice<u32>, y: SliceMut<f32>, tiles: u32) {
    let slot = shared_array!(u32, 1);
    let t = thread::thread_idx().x as usize;
    loop {
        if t == 0 {
            let tile = next.at(0).fetch_add(1, Order::Relaxed, Scope::Device);
            // SAFETY: only thread 0 writes, the barrier orders the reads.
            unsafe { slot.write(0, tile) };
        }
        thread::sync_threads();
        let tile = slot.get(0);
        if tile >= tiles {
            return;
        }
        let i = tile as usize * 256 + t;
        if i < y.len() {
            // SAFETY: one thread per element.
            unsafe { y.write_unchecked(i, tile as f32) };
        }
        thread::sync_threads();
    }
}

/// The tile count read from global memory.
#[kernel]
pub unsafe fn tiles_global(counts: Slice<u32>, y: SliceMut<f32>) {
    let t = thread::thread_idx().x as usize;
    let mut tile = 0;
    while tile < counts.get(0).unwrap_or(0) {
        let i = tile as usize * 256 + t;
        if i < y.len() {
            // SAFETY: one thread per element.
            unsafe { y.write_unchecked(i, tile as f32) };
        }
        thread::sync_threads();
        tile += 1;
    }
}
"#;

/// The same pattern gone wrong: each thread reads its own slot (a thread-dependent address),
/// or reads without the barrier after thread 0's store.
const RACY_TILES: &str = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx))]
use ferrocuda_device::atomic::{AtomicSlice, Order, Scope};
use ferrocuda_device::{kernel, shared_array, thread, SliceMut};

/// Each thread reads its own slot: a thread-dependent address.
#[kernel]
pub unsafe fn tiles_by_thread(next: AtomicSlice<u32>, y: SliceMut<f32>, tiles: u32) {
    let slots = shared_array!(u32, 32);
    let t = thread::thread_idx().x as usize;
    loop {
        if t < 32 {
            let tile = next.at(0).fetch_add(1, Order::Relaxed, Scope::Device);
            // SAFETY: one thread per slot, the barrier orders the reads.
            unsafe { slots.write(t, tile) };
        }
        thread::sync_threads();
        let tile = slots.get(t % 32);
        if tile >= tiles {
            return;
        }
        let i = tile as usize * 256 + t;
        if i < y.len() {
            // SAFETY: one thread per element.
            unsafe { y.write_unchecked(i, tile as f32) };
        }
        thread::sync_threads();
    }
}

/// The tile read without a barrier after thread 0's store.
#[kernel]
pub unsafe fn tiles_unsynced(next: AtomicSlice<u32>, y: SliceMut<f32>, tiles: u32) {
    let slot = shared_array!(u32, 1);
    let t = thread::thread_idx().x as usize;
    loop {
        if t == 0 {
            let tile = next.at(0).fetch_add(1, Order::Relaxed, Scope::Device);
            // SAFETY: the bug under test: no barrier before the reads.
            unsafe { slot.write(0, tile) };
        }
        let tile = slot.get(0);
        if tile >= tiles {
            return;
        }
        let i = tile as usize * 256 + t;
        if i < y.len() {
            // SAFETY: one thread per element.
            unsafe { y.write_unchecked(i, tile as f32) };
        }
        thread::sync_threads();
    }
}

/// Text that reads like a panic message, copied out by the kernel: refused as panic text, at
/// the line that reads it.
static MESSAGE: &[u8] = b"attempt to add with overflow";

#[kernel]
pub unsafe fn texty(y: SliceMut<u8>) {
    let t = thread::index_1d();
    if t < y.len() && t < MESSAGE.len() {
        // SAFETY: one thread per element.
        unsafe { y.write_unchecked(t, MESSAGE[t]) };
    }
}
"#;

#[test]
fn dynamic_tiles_pass_the_barrier_check_and_racy_reads_do_not() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-tiles");
    let out =
        build(&tmp.0.join("k"), TILES, |b| b.ptxas_report(false)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        kernel_names(&out.manifest),
        ["no_panic_fill", "tiles", "tiles_global"]
    );
    // The tile kernel and the kernel named after panics: nothing to report. The count read from
    // (writable) global memory: reported, not refused.
    let reported: Vec<String> = out.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        out.warnings
            .iter()
            .all(|w| w.rule == Rule::Barrier && w.function.as_deref() == Some("tiles_global")),
        "{reported:#?}"
    );
    assert!(!out.warnings.is_empty(), "{reported:#?}");
    assert!(reported[0].contains("loaded value"), "{reported:#?}");
    // Warnings are located in the Rust source too: the barrier's `sync_threads()` line (53).
    assert!(
        out.warnings
            .iter()
            .all(|w| w.source.as_deref() == Some("src/lib.rs:53")),
        "{reported:#?}"
    );
    assert!(
        reported[0].starts_with("tiles_global: barrier: src/lib.rs:53: "),
        "{reported:#?}"
    );

    let e = build(&tmp.0.join("k"), RACY_TILES, |b| b.ptxas_report(false))
        .unwrap_err()
        .to_string();
    // Located in the Rust source: the barriers' `sync_threads()` lines (17 and 27 of the
    // racy crate, 17 again where LLVM merged the two; 51 in the second kernel).
    for want in [
        "tiles_by_thread: barrier: src/lib.rs:17: `bar.sync 0`",
        "derives from %tid.x",
        "tiles_unsynced: barrier: src/lib.rs:51: `bar.sync 0`",
    ] {
        assert!(e.contains(want), "missing {want:?} in:\n{e}");
    }
    // Panic text: the kernel that reads it and a line of that kernel (its `#[kernel]`
    // attribute on: the address may be computed in the entry's prologue).
    let body = RACY_TILES
        .lines()
        .position(|l| l.contains("fn texty"))
        .unwrap();
    let at = e
        .split("texty: panic-text: src/lib.rs:")
        .nth(1)
        .and_then(|rest| rest.split(':').next()?.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no located panic-text finding of `texty` in:\n{e}"));
    assert!(
        (body..body + 7).contains(&at),
        "line {at}, the kernel at {body}:\n{e}"
    );
    assert!(e.contains("attempt to add with overflow"), "{e}");
}

#[test]
fn shared_memory_over_the_limit_fails_without_ptxas() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-smem");
    let src = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx))]
use ferrocuda_device::{kernel, shared_array, thread, SliceMut};

/// Stages 64 KiB through shared memory: more than a kernel may declare statically.
#[kernel]
pub unsafe fn big_tile(y: SliceMut<f32>) {
    let tile = shared_array!(f32, 16384);
    let t = thread::thread_idx().x as usize;
    for i in (t..16384).step_by(256) {
        // SAFETY: each element written by one thread.
        unsafe { tile.write(i, i as f32) };
    }
    thread::sync_threads();
    if t < y.len() {
        // SAFETY: one thread per element.
        unsafe { y.write_unchecked(t, tile.get(16383 - t % 16384)) };
    }
}

/// 1 KiB: fine.
#[kernel]
pub unsafe fn small_tile(y: SliceMut<f32>) {
    let tile = shared_array!(f32, 256);
    let t = thread::thread_idx().x as usize;
    if t < 256 {
        // SAFETY: one thread per element.
        unsafe { tile.write(t, t as f32) };
    }
    thread::sync_threads();
    if t < y.len() {
        // SAFETY: one thread per element.
        unsafe { y.write_unchecked(t, tile.get(255 - t % 256)) };
    }
}
"#;
    let e = build(&tmp.0.join("k"), src, |b| b.ptxas_report(false))
        .unwrap_err()
        .to_string();
    // No instruction to point at: the kernel's own line (its `#[kernel]`, line 6).
    assert!(
        e.contains("big_tile: shared: src/lib.rs:6: 65536 bytes of static shared memory")
            && e.contains("at most 49152 bytes"),
        "{e}"
    );
    assert!(!e.contains("small_tile"), "{e}");
}

#[test]
fn stack_and_local_memory_are_reported_not_refused() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-report");
    // libdevice's f64 sin reduces huge arguments with a local array (as in nvcc's code).
    let src = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]
use ferrocuda_device::{kernel, SliceMut};

unsafe extern "C" {
    fn __nv_sin(x: f64) -> f64;
}

#[kernel]
pub unsafe fn sines(y: SliceMut<f64>, x: f64) {
    // SAFETY: index 0 exists when the slice is not empty.
    unsafe { if !y.is_empty() { y.write_unchecked(0, __nv_sin(x)) } }
}
"#;
    let root = cuda_root();
    let out =
        build(&tmp.0.join("k"), src, |b| b.cuda_fallback(&root)).unwrap_or_else(|e| panic!("{e}"));
    let k = out
        .resources
        .iter()
        .find(|r| r.name == "sines")
        .expect("reported");
    assert!(k.stack.is_some_and(|s| s > 0), "{k:?}");
    let rules: Vec<Rule> = out.warnings.iter().map(|w| w.rule).collect();
    assert!(
        rules.contains(&Rule::Local) && rules.contains(&Rule::Stack),
        "{:#?}",
        out.warnings
    );
    assert!(out.warnings.iter().all(|w| w.severity == Severity::Warning));

    // Without ptxas: no report, the text rules still run.
    let quiet = build(&tmp.0.join("k"), src, |b| {
        b.cuda_fallback(&root).ptxas_report(false)
    })
    .unwrap();
    assert!(quiet.resources.is_empty() && quiet.ptxas.is_none());
    assert_eq!(
        quiet.warnings.iter().map(|w| w.rule).collect::<Vec<_>>(),
        [Rule::Local]
    );
    // PTX only: no cubins, and the manifest names none.
    assert!(quiet.cubins.is_empty() && quiet.manifest.cubins.is_empty());
    let json = std::fs::read_to_string(&quiet.manifest_path).unwrap();
    assert!(!json.contains("cubins"), "{json}");

    // Cubins for the archs asked for, the crate arch's report as before.
    let one = build(&tmp.0.join("k"), src, |b| {
        b.cuda_fallback(&root).cubin_archs(["sm_86"])
    })
    .unwrap();
    assert_eq!(one.cubins.keys().collect::<Vec<_>>(), ["sm_86"]);
    assert!(one.resources.iter().all(|r| r.arch == "sm_80"));
    assert!(std::fs::read(&one.cubins["sm_86"])
        .unwrap()
        .starts_with(b"\x7fELF"));
}

#[test]
fn fp_contract_fuses_only_when_asked() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-fma");
    let src = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]
use ferrocuda_device::{kernel, thread, Slice, SliceMut};

/// y = a * x + y
#[kernel(same_shape(x, y))]
pub unsafe fn axpy(a: f32, x: Slice<f32>, y: SliceMut<f32>) {
    for i in thread::grid_stride(y.len()) {
        // SAFETY: i < len; one thread per element.
        unsafe { y.write_unchecked(i, a * x.get_unchecked(i) + y.get_unchecked(i)) };
    }
}
"#;
    let dir = tmp.0.join("k");
    let off = build(&dir, src, |b| b).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(off.manifest.fp_contract, FpContract::Off);
    let ptx = fs::read_to_string(&off.ptx).unwrap();
    let body = entry(&ptx, "axpy");
    assert!(
        body.contains("mul.rn.f32") && body.contains("add.rn.f32"),
        "{body}"
    );
    assert!(!body.contains("fma.rn.f32"), "{body}");

    let fast =
        build(&dir, src, |b| b.fp_contract(FpContract::Fast)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fast.manifest.fp_contract, FpContract::Fast);
    let on_disk = fs::read_to_string(&fast.manifest_path).unwrap();
    assert!(on_disk.contains("\"fp_contract\": \"fast\""), "{on_disk}");
    let ptx = fs::read_to_string(&fast.ptx).unwrap();
    let body = entry(&ptx, "axpy");
    assert!(body.contains("fma.rn.f32"), "{body}");
    assert!(
        !body.contains("mul.rn.f32") && !body.contains("add.rn.f32"),
        "{body}"
    );
}

#[test]
fn gpu_check_fixture_builds() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-fixture");
    let root = cuda_root();
    let out = PtxBuilder::new(repo_root().join("builder/tests/fixtures/device-lang"))
        .arch("sm_80")
        .out_dir(&tmp.0)
        .target_dir(shared_target_dir())
        .cuda_fallback(&root)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let names = kernel_names(&out.manifest);
    assert_eq!(
        names,
        [
            "block_reverse",
            "dynamic_reverse",
            "math_f32",
            "math_f64",
            "staged_copy"
        ]
    );
    let res = |name: &str| out.resources.iter().find(|r| r.name == name).unwrap();
    assert_eq!(res("block_reverse").shared, Some(1024));
    assert_eq!(res("dynamic_reverse").shared, None);
    let ptx = fs::read_to_string(&out.ptx).unwrap();
    assert!(ptx.contains(".extern .shared .align 16 .b8 __ferrocuda_dynamic_shared[];"));
    assert!(!ptx.contains("__nv_") && !ptx.contains("sqrt.approx"));
    for k in ["block_reverse", "dynamic_reverse", "staged_copy"] {
        assert_eq!(entry(&ptx, k).matches("bar.sync").count(), 1, "{k}");
    }
    // sinf's reduction of huge arguments declares a local array, which ptxas keeps in
    // registers (a 0-byte frame): nothing to report.
    assert_eq!(res("math_f32").stack, Some(0));
    assert_eq!(out.warnings, [], "{:#?}", out.warnings);
    // Without ptxas the PTX is all there is: its use of the array is reported.
    let quiet = PtxBuilder::new(repo_root().join("builder/tests/fixtures/device-lang"))
        .arch("sm_80")
        .out_dir(&tmp.0)
        .target_dir(shared_target_dir())
        .cuda_fallback(&root)
        .ptxas_report(false)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let reported: Vec<(Option<&str>, Rule)> = quiet
        .warnings
        .iter()
        .map(|w| (w.function.as_deref(), w.rule))
        .collect();
    assert_eq!(reported, [(Some("math_f32"), Rule::Local)]);
}

/// Builds of one crate that run at once — two threads, each with its own `PtxBuilder`, as
/// `cargo clippy` and `maturin develop` in two processes would run the same build script —
/// share the crate's intermediate files in the target directory: both succeed, with the same
/// PTX, manifest and cubins. Several rounds: from the second on the child cargo has nothing to
/// do, so the LLVM stages, the rewrite and ptxas of the two builds overlap the most.
#[test]
fn concurrent_builds_of_one_crate_agree() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("pipe-concurrent");
    let dir = tmp.0.join("k");
    write_kernel_crate(&dir, "fc-race", SHARED_AND_MATH);
    let root = cuda_root();
    let outs = [tmp.0.join("out-a"), tmp.0.join("out-b")];
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let l = lines.clone();
    let control = Control::new(move |m| l.lock().unwrap().push(m.to_string()));
    for round in 0..4 {
        let start = std::sync::Barrier::new(outs.len());
        let built: Vec<Result<BuildOutput, BuildError>> = std::thread::scope(|s| {
            let runs: Vec<_> = outs
                .iter()
                .map(|out| {
                    let (dir, root, start, control) = (&dir, &root, &start, &control);
                    s.spawn(move || {
                        let b = PtxBuilder::new(dir)
                            .control(control.clone())
                            .arch("sm_80")
                            .out_dir(out)
                            .target_dir(shared_target_dir())
                            .cuda_fallback(root);
                        start.wait();
                        b.build()
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let built: Vec<BuildOutput> = built
            .into_iter()
            .map(|b| b.unwrap_or_else(|e| panic!("round {round}: {e}")))
            .collect();
        let files = |b: &BuildOutput| {
            let mut f = vec![
                fs::read(&b.ptx).unwrap(),
                fs::read(&b.manifest_path).unwrap(),
            ];
            f.extend(b.cubins.values().map(|c| fs::read(c).unwrap()));
            f
        };
        assert!(!built[0].cubins.is_empty(), "round {round}: no cubins");
        assert_eq!(built[0].manifest, built[1].manifest, "round {round}");
        assert!(files(&built[0]) == files(&built[1]), "round {round}");
        let ptx = fs::read_to_string(&built[0].ptx).unwrap();
        assert!(
            !ptx.contains("__ferrocuda_global") && ptx.contains("ld.shared."),
            "round {round}:\n{ptx}"
        );
    }
    // What ordered them: one build waited for the other's lock (and said so).
    let lines = lines.lock().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("waiting for another build of `fc-race`")),
        "{lines:#?}"
    );
}
