//! Launch declarations of `#[kernel]`, through the real NVPTX build and ptxas (no GPU).
//!
//! One kernel crate holds the same register-hungry body (96 values live at once) four times:
//! without bounds, with `max_threads = 1024`, with `block = (32, 32)` and with
//! `max_threads = 256, min_blocks = 4`, plus one kernel with every other declaration
//! (`dynamic_shared`, `grid`). What this verifies:
//!
//! * the PTX entries carry `.maxntid 1024, 1, 1`, `.reqntid 32, 32, 1` and
//!   `.maxntid 256, 1, 1` + `.minnctapersm 4` between parameter list and body, and no launch
//!   record is left in the PTX;
//! * ptxas accepts the module, and its register report follows the bounds: the unbounded
//!   kernel takes more than 64 registers per thread, the three bounded to 1024 threads per SM
//!   at most 64 (65536 registers per SM / 1024 threads);
//! * the manifest records each declaration (and nothing for the kernel without any).
//!
//! Needs the pinned toolchain's `rust-src` and `llvm-tools`, and ptxas (`.tools/`, as
//! `scripts/ensure_ptxas.sh` installs it); without ptxas the register part is skipped with a
//! message.

use ferrocuda_builder::PtxBuilder;

mod common;
use common::{repo_root, shared_target_dir, write_kernel_crate, TempDir, BUILD_LOCK};

/// The kernel crate; `VARS` stands for the names of [`HUNGRY`] variables.
const LIB: &str = r#"
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]
use ferrocuda_device::{kernel, Slice, SliceMut};
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::thread;

/// `W` values (the variables `VARS`) live across a loop that reads them all for every output
/// (a polynomial per output, by Horner's rule): about `W` registers when nothing bounds them.
macro_rules! hungry {
    ($($v:ident)*) => {
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        unsafe fn hungry(x: Slice<f32>, y: SliceMut<f32>) {
            const W: usize = [$(stringify!($v)),*].len();
            let i = thread::index_1d();
            if (i + 1) * W > x.len().min(y.len()) {
                return;
            }
            let mut at = i * W;
            $(
                let $v = unsafe { x.get_unchecked(at) };
                at += 1;
            )*
            let _ = at;
            for k in 0..W {
                let c = k as f32;
                let mut acc = 0.0f32;
                $( acc = acc * c + $v; )*
                unsafe { y.write_unchecked(i * W + k, acc) };
            }
        }
    };
}
hungry!(VARS);

#[kernel]
pub unsafe fn free(x: Slice<f32>, y: SliceMut<f32>) {
    unsafe { hungry(x, y) }
}

#[kernel(max_threads = 1024)]
pub unsafe fn bounded(x: Slice<f32>, y: SliceMut<f32>) {
    unsafe { hungry(x, y) }
}

#[kernel(block = (32, 32))]
pub unsafe fn fixed(x: Slice<f32>, y: SliceMut<f32>) {
    unsafe { hungry(x, y) }
}

#[kernel(max_threads = 256, min_blocks = 4)]
pub unsafe fn occupied(x: Slice<f32>, y: SliceMut<f32>) {
    unsafe { hungry(x, y) }
}

#[kernel(dynamic_shared = u16, grid = "3d", max_threads = 64)]
pub unsafe fn other(x: SliceMut<f32>) {}

#[kernel(grid = "rows", items_per_thread = 32)]
pub unsafe fn rowwise(x: SliceMut<f32>) {}
"#;

/// Values the register-hungry kernels keep live.
const HUNGRY: usize = 96;

#[test]
fn bounds_reach_ptx_ptxas_and_manifest() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = TempDir::new("launch-bounds");
    let dir = tmp.0.join("crate");
    let vars: Vec<String> = (0..HUNGRY).map(|k| format!("v{k}")).collect();
    write_kernel_crate(
        &dir,
        "fc-launch-bounds",
        &LIB.replace("VARS", &vars.join(" ")),
    );
    let out = PtxBuilder::new(&dir)
        .arch("sm_80")
        .out_dir(dir.join("out"))
        .target_dir(shared_target_dir())
        .cuda_fallback(repo_root().join(".tools/nvcc/nvidia/cuda_nvcc"))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let ptx = std::fs::read_to_string(&out.ptx).unwrap();
    assert!(
        !ptx.contains("__ferrocuda_launch__"),
        "launch records are removed"
    );
    let after_params = |name: &str| {
        let at = ptx.find(&format!(".entry {name}(")).unwrap();
        let close = at + ptx[at..].find(')').unwrap();
        let open = close + ptx[close..].find('{').unwrap();
        ptx[close + 1..open].trim().to_string()
    };
    assert_eq!(after_params("free"), "");
    assert_eq!(after_params("bounded"), ".maxntid 1024, 1, 1");
    assert_eq!(after_params("fixed"), ".reqntid 32, 32, 1");
    assert_eq!(after_params("other"), ".maxntid 64, 1, 1");
    assert_eq!(
        after_params("occupied"),
        ".maxntid 256, 1, 1\n.minnctapersm 4"
    );

    let launch = |name: &str| {
        let k = out
            .manifest
            .kernels
            .iter()
            .find(|k| k.name == name)
            .unwrap();
        k.launch.clone()
    };
    assert!(launch("free").is_empty());
    assert_eq!(launch("bounded").max_threads, Some(1024));
    assert_eq!(launch("fixed").block, Some([32, 32, 1]));
    assert_eq!(
        (
            launch("occupied").max_threads,
            launch("occupied").min_blocks
        ),
        (Some(256), Some(4))
    );
    let other = launch("other");
    assert_eq!(other.dynamic_shared.as_deref(), Some("uint16"));
    assert_eq!((other.grid_dims, other.max_threads), (Some(3), Some(64)));
    let rowwise = launch("rowwise");
    assert_eq!((rowwise.grid_rows, rowwise.grid_dims), (Some(true), None));
    assert_eq!(
        after_params("rowwise"),
        "",
        "a rows grid adds no PTX directive"
    );
    // The JSON on disk says the same.
    let json = std::fs::read_to_string(&out.manifest_path).unwrap();
    assert!(json.contains("\"max_threads\": 1024"), "{json}");
    assert!(json.contains("\"grid_rows\": true"), "{json}");

    let Some(ptxas) = &out.ptxas else {
        eprintln!("no ptxas found: register report not checked (run scripts/ensure_ptxas.sh)");
        return;
    };
    let regs = |name: &str| {
        out.resources
            .iter()
            .find(|r| r.name == name && r.entry)
            .and_then(|r| r.registers)
            .unwrap_or_else(|| panic!("{} reports no registers for `{name}`", ptxas.display()))
    };
    let (free, bounded, fixed, occupied) = (
        regs("free"),
        regs("bounded"),
        regs("fixed"),
        regs("occupied"),
    );
    eprintln!(
        "registers: free {free}, max_threads = 1024: {bounded}, block = (32, 32): {fixed}, \
         max_threads = 256 with min_blocks = 4: {occupied}"
    );
    assert!(
        free > 64,
        "the unbounded kernel should need more than 64 registers: {free}"
    );
    assert!(
        bounded <= 64 && fixed <= 64 && occupied <= 64,
        "bounded: {bounded}, fixed: {fixed}, occupied: {occupied}"
    );
}
