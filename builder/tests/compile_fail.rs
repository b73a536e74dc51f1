//! What `#[kernel]` must reject at compile time, checked through the real NVPTX build.
//!
//! Each case is a one-kernel crate written to its own directory under a fresh temporary
//! directory and built with `PtxBuilder` (so for `nvptx64-nvidia-cuda`, exactly as a user's
//! crate is built). What this verifies:
//!
//! * `rejects_invalid_kernels`: the build FAILS, and its error output carries the message of
//!   the macro (or of the `KernelParam` trait's `on_unimplemented`), for: a reference parameter,
//!   a raw pointer, a non-`Copy` local struct, a `Copy` struct / array / `usize` that is not a
//!   `KernelParam`, a return value, a generic kernel (type, const and lifetime parameters, a
//!   `where` clause), `self`, a pattern parameter, `async`/`const`/`extern` kernels, a `__` name,
//!   an unknown option, a bad family, `same_shape` naming a missing parameter, one
//!   parameter, or a parameter twice, and launch declarations out of range (`max_threads`, `min_blocks`,
//!   `block` extents and threads, both at once, `grid`, a `dynamic_shared` type that is not
//!   an element type), a `GridBarrier` without `cooperative` (or with a scratch length, or of
//!   another crate), `persist(…)` of an array, twice, or of a grid barrier declared after a
//!   workspace, `cooperative` with a value, an N-D grid or a cluster, and clusters
//!   without an sm_90 `arch`, beyond 8 blocks without `non_portable_cluster`, beyond 16, with
//!   a zero extent, and `non_portable_cluster` alone;
//! * `accepts_a_minimal_kernel`: a minimal valid crate builds (the harness can succeed) and its
//!   manifest is right — including a `mut` parameter binding, a parameterless kernel and a view;
//! * `panics_become_trap`: kernels with panic paths (a bounds-checked `SliceMut::write`, array
//!   indexing, `Option::unwrap`, integer division) build, and their PTX has `trap` but no panic
//!   machinery: no `.extern`, no `panic` symbol, no panic message.
//!
//! The cases run one after another (a mutex serializes the tests of this file) and share the
//! child build's target directory with `new_kernel.rs`, so `core` is compiled once; each case
//! then costs well under two seconds. Needs the pinned toolchain's `rust-src`
//! and `llvm-tools`.

use ferrocuda_builder::{BuildError, BuildErrorKind, BuildOutput, PtxBuilder};
use std::fs;
use std::path::Path;
use std::time::Instant;

mod common;
use common::{kernel_names, param, shared_target_dir, write_kernel_crate, TempDir, BUILD_LOCK};

const CRATE_NAME: &str = "fc-case";

const PRELUDE: &str = "\
#![no_std]
#![cfg_attr(target_arch = \"nvptx64\", feature(abi_ptx))]
#![allow(unused)]
use ferrocuda_device::{kernel, Slice, SliceMut, View, ViewMut};
";

/// Writes a kernel crate with `body` (after the prelude) to `dir` and builds it to PTX.
fn build_case(dir: &Path, body: &str) -> Result<BuildOutput, BuildError> {
    write_kernel_crate(dir, CRATE_NAME, &format!("{PRELUDE}\n{body}\n"));
    PtxBuilder::new(dir)
        .arch("sm_80")
        .out_dir(dir.join("out"))
        .target_dir(shared_target_dir())
        .build()
}

/// (case name, kernel source, text the error must contain)
const REJECTED: &[(&str, &str, &str)] = &[
    (
        "reference",
        "#[kernel] pub unsafe fn k(x: &[f32]) {}",
        "kernel parameters are passed by value",
    ),
    (
        "mut_reference",
        "#[kernel] pub unsafe fn k(x: &mut f32) {}",
        "kernel parameters are passed by value",
    ),
    (
        "raw_pointer",
        "#[kernel] pub unsafe fn k(x: *mut f32) {}",
        "raw pointers carry no length",
    ),
    (
        "non_copy_struct",
        "pub struct Owned { v: u32 }\n#[kernel] pub unsafe fn k(x: Owned) {}",
        "`Owned` cannot be a kernel parameter",
    ),
    (
        "copy_struct",
        "#[derive(Clone, Copy)] #[repr(C)] pub struct Pair(u32, u32);\n\
         #[kernel] pub unsafe fn k(x: Pair) {}",
        "`Pair` cannot be a kernel parameter",
    ),
    (
        "array_by_value",
        "#[kernel] pub unsafe fn k(x: [f32; 4]) {}",
        "`[f32; 4]` cannot be a kernel parameter",
    ),
    (
        "usize_scalar",
        "#[kernel] pub unsafe fn k(x: SliceMut<f32>, n: usize) {}",
        // The parameter is named, and the allowed types listed.
        "kernel parameter `k::n`: `usize` cannot be a kernel parameter",
    ),
    (
        "usize_scalar_allowed_types",
        "#[kernel] pub unsafe fn k(x: SliceMut<f32>, n: usize) {}",
        "scalars (i8..i64, u8..u64, f16, bf16, f32, f64) and arrays of them (Slice<T>",
    ),
    (
        "slice_of_non_element",
        "#[kernel] pub unsafe fn k(x: SliceMut<usize>) {}",
        // `Element` has no custom message; rustc names the `KernelParam` requirement.
        "required for `SliceMut<usize>` to implement `KernelParam`",
    ),
    (
        "return_value",
        "#[kernel] pub unsafe fn k(x: SliceMut<f32>) -> f32 { 0.0 }",
        "a kernel cannot return a value",
    ),
    (
        "generic_type",
        "#[kernel] pub unsafe fn k<T: Copy>(x: SliceMut<f32>) {}",
        "a kernel cannot be generic",
    ),
    (
        "generic_const",
        "#[kernel] pub unsafe fn k<const N: usize>(x: View<f32, N>) {}",
        "a kernel cannot be generic",
    ),
    (
        "generic_lifetime",
        "#[kernel] pub unsafe fn k<'a>(x: SliceMut<f32>) {}",
        "a kernel cannot be generic",
    ),
    (
        "where_clause",
        "#[kernel] pub unsafe fn k(x: SliceMut<f32>) where f32: Copy {}",
        "a kernel cannot be generic",
    ),
    (
        "instances_not_an_element_type",
        "#[kernel(instances(f32, usize))] pub unsafe fn k<T: Copy>(x: SliceMut<T>) {}",
        "`usize` is not an element type: instances(…) takes element types (i8,",
    ),
    (
        "instances_listed_twice",
        "#[kernel(instances(f32, f64, f32))] pub unsafe fn k<T: Copy>(x: SliceMut<T>) {}",
        "`f32` is listed twice in instances(…)",
    ),
    (
        "instances_empty",
        "#[kernel(instances())] pub unsafe fn k<T: Copy>(x: SliceMut<T>) {}",
        "instances(…) needs at least one element type",
    ),
    (
        "instances_not_generic",
        "#[kernel(instances(f32))] pub unsafe fn k(x: SliceMut<f32>) {}",
        "but `k` has no type parameter",
    ),
    (
        "instances_const_parameter",
        "#[kernel(instances(f32))] pub unsafe fn k<T: Copy, const N: usize>(x: View<T, N>) {}",
        "a kernel cannot have const parameters",
    ),
    (
        "instances_two_type_parameters",
        "#[kernel(instances(f32))] pub unsafe fn k<T: Copy, U: Copy>(x: SliceMut<T>) {}",
        "exactly one type parameter",
    ),
    (
        "instances_items_per_thread_expression",
        "#[kernel(instances(f32), items_per_thread = 0 * size_of::<T>())]\n\
         pub unsafe fn k<T: Copy + ferrocuda_device::Element>(x: SliceMut<T>) {}",
        "items_per_thread must be in 1..=65535",
    ),
    (
        "self_receiver",
        "#[kernel] pub unsafe fn k(self) {}",
        "a kernel cannot take `self`",
    ),
    (
        "pattern_parameter",
        "#[kernel] pub unsafe fn k((a, b): (u32, u32)) {}",
        "kernel parameters must be plain names",
    ),
    (
        "async_kernel",
        "#[kernel] pub async unsafe fn k(x: SliceMut<f32>) {}",
        "a kernel cannot be async",
    ),
    (
        "const_kernel",
        "#[kernel] pub const unsafe fn k(x: SliceMut<f32>) {}",
        "a kernel cannot be const",
    ),
    (
        "explicit_abi",
        "#[kernel] pub unsafe extern \"C\" fn k(x: SliceMut<f32>) {}",
        "do not give a kernel an ABI",
    ),
    (
        "reserved_name",
        "#[kernel] pub unsafe fn __k(x: SliceMut<f32>) {}",
        "kernel names must not start with `__`",
    ),
    (
        "unknown_option",
        "#[kernel(threads = 256)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "unknown #[kernel] option",
    ),
    (
        "bad_family",
        "#[kernel(family = \"not an ident\")] pub unsafe fn k(x: SliceMut<f32>) {}",
        "family must be an identifier",
    ),
    (
        "same_shape_missing_param",
        "#[kernel(same_shape(x, z))] pub unsafe fn k(x: Slice<f32>, y: SliceMut<f32>) {}",
        "same_shape names no parameter of this kernel",
    ),
    (
        "same_shape_one_param",
        "#[kernel(same_shape(x))] pub unsafe fn k(x: Slice<f32>, y: SliceMut<f32>) {}",
        "same_shape needs at least two parameters",
    ),
    (
        "same_shape_twice",
        "#[kernel(same_shape(x, y, x))] pub unsafe fn k(x: Slice<f32>, y: SliceMut<f32>) {}",
        "parameter named twice in same_shape",
    ),
    (
        "items_per_thread_zero",
        "#[kernel(items_per_thread = 0)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "items_per_thread must be an integer in 1..=65535",
    ),
    (
        "items_per_thread_too_large",
        "#[kernel(items_per_thread = 65536)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "items_per_thread must be an integer in 1..=65535",
    ),
    (
        "max_threads_zero",
        "#[kernel(max_threads = 0)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "max_threads must be an integer in 1..=1024",
    ),
    (
        "max_threads_too_large",
        "#[kernel(max_threads = 2048)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "max_threads must be an integer in 1..=1024",
    ),
    (
        "block_zero_extent",
        "#[kernel(block = (16, 0))] pub unsafe fn k(x: SliceMut<f32>) {}",
        "block extents must be at least 1",
    ),
    (
        "block_too_many_threads",
        "#[kernel(block = (64, 32))] pub unsafe fn k(x: SliceMut<f32>) {}",
        "at most 1024 threads in all",
    ),
    (
        "block_z_too_deep",
        "#[kernel(block = (1, 1, 128))] pub unsafe fn k(x: SliceMut<f32>) {}",
        "at most (1024, 1024, 64)",
    ),
    (
        "block_four_extents",
        "#[kernel(block = (4, 4, 4, 4))] pub unsafe fn k(x: SliceMut<f32>) {}",
        "block takes 1 to 3 extents",
    ),
    (
        "block_and_max_threads",
        "#[kernel(block = (16, 16), max_threads = 256)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "declare either `block` or `max_threads`",
    ),
    (
        "min_blocks_without_bound",
        "#[kernel(min_blocks = 2)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "min_blocks needs `max_threads = n` or `block = (…)`",
    ),
    (
        "min_blocks_too_many",
        "#[kernel(max_threads = 32, min_blocks = 33)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "min_blocks must be an integer in 1..=32",
    ),
    (
        "min_blocks_too_many_threads",
        "#[kernel(block = 1024, min_blocks = 3)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "3 blocks of 1024 threads do not fit on one SM",
    ),
    (
        "grid_4d",
        "#[kernel(grid = \"4d\")] pub unsafe fn k(x: SliceMut<f32>) {}",
        "grid must be \"1d\", \"2d\", \"3d\" or \"rows\"",
    ),
    (
        "dynamic_shared_not_an_element",
        "#[kernel(dynamic_shared = usize)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "`usize` is not an array element type",
    ),
    (
        "grid_barrier_without_cooperative",
        "#[kernel] pub unsafe fn k(x: SliceMut<f32>, bar: ferrocuda_device::grid::GridBarrier) {}",
        "which only a cooperative launch keeps resident at once",
    ),
    (
        "grid_barrier_with_a_scratch_length",
        "use ferrocuda_device::grid::GridBarrier;\n\
         #[kernel(cooperative, scratch(bar = 4))] \
         pub unsafe fn k(x: SliceMut<f32>, bar: GridBarrier) {}",
        "a GridBarrier's workspace is sized by the launcher",
    ),
    (
        "persist_of_a_grid_barrier_after_a_workspace",
        "use ferrocuda_device::grid::GridBarrier;\n\
         #[kernel(cooperative, scratch(p = blocks), persist(p, bar))] \
         pub unsafe fn k(x: SliceMut<f32>, p: ferrocuda_device::Scratch<f32>, bar: GridBarrier) {}",
        "a persistent GridBarrier must be declared before every workspace parameter",
    ),
    (
        "persist_of_an_array",
        "#[kernel(persist(x))] pub unsafe fn k(x: SliceMut<f32>) {}",
        "persist(…) names a workspace declared by scratch",
    ),
    (
        "persist_twice",
        "#[kernel(scratch(ws = 4), persist(ws, ws))] \
         pub unsafe fn k(x: SliceMut<f32>, ws: ferrocuda_device::Scratch<u32>) {}",
        "workspace named twice in persist",
    ),
    (
        "grid_barrier_of_another_crate",
        "#[derive(Clone, Copy)] #[repr(transparent)] pub struct GridBarrier(SliceMut<u32>);\n\
         #[kernel(cooperative)] pub unsafe fn k(x: SliceMut<f32>, bar: GridBarrier) {}",
        "is not ferrocuda's grid barrier",
    ),
    (
        "cooperative_with_a_value",
        "#[kernel(cooperative = true)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "takes no value",
    ),
    (
        "cooperative_with_a_2d_grid",
        "#[kernel(cooperative, grid = \"2d\")] pub unsafe fn k(x: SliceMut<f32>) {}",
        "is one resident wave of blocks (1-D)",
    ),
    (
        "cooperative_and_cluster",
        "#[kernel(arch = \"sm_90\", cooperative, cluster = 2)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "either `cooperative` or launched in clusters",
    ),
    (
        "cluster_without_arch",
        "#[kernel(cluster = (2, 1, 1))] pub unsafe fn k(x: SliceMut<f32>) {}",
        "thread-block clusters need an sm_90 GPU or newer",
    ),
    (
        "cluster_on_an_older_arch",
        "#[kernel(arch = \"sm_86\", cluster = (2, 1, 1))] pub unsafe fn k(x: SliceMut<f32>) {}",
        "thread-block clusters need an sm_90 GPU or newer",
    ),
    (
        "cluster_not_portable",
        "#[kernel(arch = \"sm_90\", cluster = (3, 3))] pub unsafe fn k(x: SliceMut<f32>) {}",
        "a cluster of 9 blocks is not portable",
    ),
    (
        "cluster_beyond_16",
        "#[kernel(arch = \"sm_90\", cluster = (4, 4, 2), non_portable_cluster)] \
         pub unsafe fn k(x: SliceMut<f32>) {}",
        "a cluster of 32 blocks: a cluster holds at most 16 blocks",
    ),
    (
        "cluster_zero_extent",
        "#[kernel(arch = \"sm_90\", cluster = (2, 0, 1))] pub unsafe fn k(x: SliceMut<f32>) {}",
        "cluster extents must be at least 1",
    ),
    (
        "non_portable_without_cluster",
        "#[kernel(non_portable_cluster)] pub unsafe fn k(x: SliceMut<f32>) {}",
        "needs `cluster = (x, y, z)`",
    ),
];

#[test]
fn rejects_invalid_kernels() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("compile-fail");
    let mut problems = Vec::new();
    for (name, body, expected) in REJECTED {
        let start = Instant::now();
        let result = build_case(&tmp.0.join(name), body);
        eprintln!("{name}: {:.2} s", start.elapsed().as_secs_f64());
        match result {
            Ok(_) => problems.push(format!("case `{name}` built, but must fail:\n{body}")),
            Err(e) => {
                let msg = e.to_string();
                if e.kind() != BuildErrorKind::Compile {
                    problems.push(format!(
                        "case `{name}` failed as {:?}, not as a compile error:\n{msg}",
                        e.kind()
                    ));
                } else if !msg.contains(expected) {
                    problems.push(format!(
                        "case `{name}` failed without `{expected}`:\n{body}\n--- error ---\n{msg}"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn accepts_a_minimal_kernel() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("compile-pass");
    let body = "\
#[kernel]
pub unsafe fn fill(x: SliceMut<u32>, mut value: u32) {
    value += 1;
    if let Some(i) = (0..x.len()).next() {
        // SAFETY: i < len.
        unsafe { x.write_unchecked(i, value) };
    }
}

#[kernel(family = \"nothing\")]
pub fn noop() {}

#[kernel(same_shape(a, b))]
pub unsafe fn copy2d(a: View<f64, 2>, b: ViewMut<f64, 2>) {}
";
    let out = build_case(&tmp.0.join("minimal"), body).unwrap_or_else(|e| panic!("{e}"));
    let ptx = fs::read_to_string(&out.ptx).unwrap();
    assert!(ptx.contains(".visible .entry fill("));
    assert!(ptx.contains(".visible .entry noop()"));
    assert!(ptx.contains(".visible .entry copy2d("));
    assert!(!ptx.contains("__ferrocuda_manifest__"));
    let names = kernel_names(&out.manifest);
    assert_eq!(names, ["copy2d", "fill", "noop"]);

    let fill = out.manifest.kernel("fill").unwrap();
    assert_eq!(fill.family, "fill");
    assert_eq!(
        fill.params,
        [
            param("x", "slice", "uint32", 1, true, 16, 8),
            param("value", "scalar", "uint32", 0, false, 4, 4),
        ]
    );
    assert!(fill.same_shape.is_empty());
    let noop = out.manifest.kernel("noop").unwrap();
    assert_eq!(noop.family, "nothing");
    assert!(noop.params.is_empty());
    let copy2d = out.manifest.kernel("copy2d").unwrap();
    assert_eq!(
        copy2d.params,
        [
            param("a", "view", "float64", 2, false, 40, 8),
            param("b", "view", "float64", 2, true, 40, 8),
        ]
    );
    assert_eq!(copy2d.same_shape, [vec![0u8, 1]]);
}

#[test]
fn generic_kernel_instances() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("generic");
    let body = "\
/// `y = alpha * x`, for each listed element type.
#[kernel(instances(f32, bf16, i64), same_shape(x, y), items_per_thread = 16 / size_of::<T>())]
pub unsafe fn scale<T: ferrocuda_device::Element + core::ops::Mul<Output = T>>(
    alpha: T,
    x: Slice<T>,
    mut y: SliceMut<T>,
) {
    if let (Some(v), false) = (x.get(0), y.is_empty()) {
        unsafe { y.write_unchecked(0, alpha * v) };
    }
}

#[kernel(instances(u8), family = \"other\")]
pub fn fill<T: Copy>(x: ViewMut<T, 2>) {}
";
    let out = build_case(&tmp.0.join("generic"), body).unwrap_or_else(|e| panic!("{e}"));
    let ptx = fs::read_to_string(&out.ptx).unwrap();
    assert_eq!(
        kernel_names(&out.manifest),
        ["fill_u8", "scale_bf16", "scale_f32", "scale_i64"]
    );
    for (name, dtype, size, lanes) in [
        ("scale_f32", "float32", 4, 4),
        ("scale_bf16", "bfloat16", 2, 8),
        ("scale_i64", "int64", 8, 2),
    ] {
        assert!(ptx.contains(&format!(".visible .entry {name}(")), "{name}");
        let k = out.manifest.kernel(name).unwrap();
        assert_eq!(k.family, "scale");
        assert_eq!(
            k.params,
            [
                param("alpha", "scalar", dtype, 0, false, size, size),
                param("x", "slice", dtype, 1, false, 16, 8),
                param("y", "slice", dtype, 1, true, 16, 8),
            ]
        );
        assert_eq!(k.same_shape, [vec![1u8, 2]]);
        assert_eq!(k.items_per_thread, Some(lanes), "{name}");
    }
    let fill = out.manifest.kernel("fill_u8").unwrap();
    assert_eq!(fill.family, "other");
    assert_eq!(fill.params, [param("x", "view", "uint8", 2, true, 40, 8)]);
    // The generic function itself is not an entry.
    assert!(!ptx.contains(".entry scale(") && !ptx.contains("__ferrocuda_generic"));
}

#[test]
fn panics_become_trap() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("panic-path");
    let body = "\
/// Bounds-checked write: an out-of-range `i` aborts.
#[kernel]
pub unsafe fn checked_write(x: SliceMut<f32>, i: u32, v: f32) {
    unsafe { x.write(i as usize, v) };
}

/// Array indexing and `unwrap`: both panic out of range.
#[kernel]
pub unsafe fn lookup(x: Slice<i32>, out: SliceMut<i32>, i: u32) {
    let table = [1, 2, 3];
    let v = table[i as usize] + x.get(i as usize).unwrap();
    unsafe { out.write_unchecked(0, v) };
}

/// Integer division: panics on a zero divisor.
#[kernel]
pub unsafe fn divide(out: SliceMut<i32>, a: i32, b: i32) {
    unsafe { out.write_unchecked(0, a / b) };
}
";
    let out = build_case(&tmp.0.join("panics"), body).unwrap_or_else(|e| panic!("{e}"));
    let ptx = fs::read_to_string(&out.ptx).unwrap();
    for k in ["checked_write", "lookup", "divide"] {
        assert!(
            ptx.contains(&format!(".visible .entry {k}(")),
            "no .entry {k}"
        );
    }
    assert!(ptx.contains("trap;"), "no trap in the PTX:\n{ptx}");
    assert!(
        !ptx.contains(".extern"),
        "the PTX declares an .extern:\n{ptx}"
    );
    let lower = ptx.to_lowercase();
    for word in [
        "panic",
        "out-of-bounds",
        "unwrap",
        "divide by zero",
        "index out of bounds",
    ] {
        assert!(!lower.contains(word), "the PTX mentions `{word}`:\n{ptx}");
    }
}
