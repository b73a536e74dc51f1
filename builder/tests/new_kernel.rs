//! Adding a kernel to the bundled kernel crate, end to end through `PtxBuilder` (no GPU).
//!
//! What this verifies, on a copy of `kernels/` in a fresh temporary directory — the crate as it
//! is, but for the gallery's kernel modules, which `src/lib.rs` of the copy no longer declares:
//! the copy keeps `src/kernels.rs` (where the README's "Writing a kernel" adds a kernel, and the
//! bundled examples `add`, `initialize_array`, `saxpy`, `add_index` live) and the modules it
//! uses. (Every rebuild of the whole crate compiles its two hundred kernels for sm_80 and its
//! sm_90a part, two minutes on two cores, for the same mechanics; the whole crate is built by
//! the workspace's build script in every test run.)
//!
//! 1. the baseline manifest and PTX: a build of the unchanged copy for `nvptx64-nvidia-cuda`;
//! 2. a new kernel appended to `src/kernels.rs` as the README's "Writing a kernel" says
//!    (`#[kernel(family = "scale", same_shape(x, y))] pub unsafe fn scale_f32(...)` with a
//!    `thread::grid_stride` loop) appears in the manifest with the right parameters — names,
//!    kinds, dtypes, ranks, mutability, sizes — and `same_shape` group; the PTX has
//!    `.entry scale_f32` with matching parameter sizes, no `__ferrocuda_manifest__` record is
//!    left in it, every kernel of the copy is still there with an unchanged signature, and the JSON
//!    on disk is the manifest returned;
//!    — and, in the same rebuild, an edit of one bundled kernel's body (a constant of
//!    `fill_slow`) shows in its PTX while its signature stays as it was (one rebuild serves
//!    both);
//! 3. a rebuild with nothing changed is the fast path: the PTX and the JSON are not rewritten
//!    (their modification times, set back to a known old value first, stay put).
//!
//! And, in `shared_target_dir_keeps_crates_apart`: two kernel crates with the same package
//! name, built into one target directory in turn, never get each other's PTX — rebuilding the
//! first after the second (cargo finds it fresh and does not rerun rustc) still yields the
//! first's kernels. (Release profile only: the dev profile would compile `core` a second time.)
//!
//! The child build's target directory is the one every child build of the test command
//! shares (`<target>/ferrocuda-ptx`, the build script's), so `core` for the NVPTX target is
//! compiled once per flag set and then reused.
//! The toolchain file of the repository is copied beside the crate: in the repository the
//! kernel crate inherits it from the root, and the child cargo resolves the toolchain from
//! the crate's directory.
//!
//! Needs the pinned toolchain's `rust-src` and `llvm-tools`
//! (`rustup component add rust-src llvm-tools --toolchain 1.99.0`).
//! Run with `--nocapture` to see the build times.

use ferrocuda_abi::manifest::{KernelSig, Manifest};
use ferrocuda_builder::{ptx_entries, BuildOutput, PtxBuilder};
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

mod common;
use common::{
    base_kernel_names, kernel_names, param, repo_root, shared_target_dir, write_kernel_crate,
    TempDir, BUILD_LOCK,
};

/// Copies a directory tree, skipping any `target` directory.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "target" {
                copy_tree(&src, &dst);
            }
        } else {
            fs::copy(&src, &dst).unwrap();
        }
    }
}

fn build(crate_dir: &Path, out_dir: &Path) -> BuildOutput {
    PtxBuilder::new(crate_dir)
        .arch("sm_80")
        .out_dir(out_dir)
        .target_dir(shared_target_dir())
        // libdevice (the gallery's math) from the nvcc wheel, as the root build.rs finds it.
        .cuda_fallback(repo_root().join(".tools/nvcc/nvidia/cuda_nvcc"))
        // PTX and manifest are what this test reads: no cubins (ptxas on the whole bundled
        // crate, three times, would be most of its time).
        .ptxas_report(false)
        .build()
        .unwrap_or_else(|e| panic!("kernel build failed:\n{e}"))
}

/// Leaves `src/lib.rs` of the kernel crate copy at `crate_dir` declaring no kernel module but
/// `kernels` (the declarations that carry no attribute: the gallery's modules; the
/// `#[cfg]`-gated helper modules and the prelude stay). Returns the modules left out.
fn keep_only_the_kernels_module(crate_dir: &Path) -> Vec<String> {
    let lib = crate_dir.join("src").join("lib.rs");
    let text = fs::read_to_string(&lib).unwrap();
    let (mut kept, mut dropped) = (Vec::new(), Vec::new());
    let mut previous = "";
    for line in text.lines() {
        let module = line
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'));
        match module {
            Some(m) if m != "kernels" && !previous.trim_start().starts_with("#[") => {
                dropped.push(m.to_string())
            }
            _ => kept.push(line),
        }
        previous = line;
    }
    fs::write(&lib, kept.join("\n") + "\n").unwrap();
    dropped
}

fn mtime(p: &Path) -> SystemTime {
    fs::metadata(p).unwrap().modified().unwrap()
}

fn set_mtime(p: &Path, t: SystemTime) {
    fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// Common checks of one build's outputs; returns the PTX text.
fn check_outputs(out: &BuildOutput) -> String {
    let ptx = fs::read_to_string(&out.ptx).unwrap();
    assert!(ptx.contains(".target sm_80"), "PTX is not for sm_80");
    assert!(
        !ptx.contains("__ferrocuda_manifest__"),
        "a manifest record was left in the PTX"
    );
    assert_eq!(out.manifest.arch, "sm_80");
    assert_eq!(
        out.manifest.ptx,
        out.ptx.file_name().unwrap().to_str().unwrap()
    );
    // The JSON on disk is the manifest returned.
    let on_disk = Manifest::from_json(&fs::read_to_string(&out.manifest_path).unwrap()).unwrap();
    assert_eq!(on_disk, out.manifest);
    // One manifest record per .entry, with matching parameter sizes.
    let entries = ptx_entries(&ptx).unwrap();
    let mut entry_names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    entry_names.sort_unstable();
    let kernel_names = base_kernel_names(&out.manifest);
    assert_eq!(entry_names, kernel_names);
    for e in &entries {
        let k = out.manifest.kernel(&e.name).unwrap();
        let sizes: Vec<usize> = k.params.iter().map(|p| p.size as usize).collect();
        assert_eq!(e.param_sizes, sizes, "parameter sizes of `{}`", e.name);
    }
    ptx
}

/// The `.entry` block of `name` in `ptx` (up to the next `.entry`).
fn entry_text<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("no .entry {name}"));
    let rest = &ptx[start + 1..];
    let end = rest.find(".entry ").map_or(ptx.len(), |e| start + 1 + e);
    &ptx[start..end]
}

const NEW_KERNEL: &str = r#"
/// y = alpha * x
#[kernel(family = "scale", same_shape(x, y))]
pub unsafe fn scale_f32(alpha: f32, x: Slice<f32>, y: SliceMut<f32>) {
    for i in thread::grid_stride(y.len()) {
        // SAFETY: i < len, one thread per element.
        unsafe { y.write_unchecked(i, alpha * x.get_unchecked(i)) };
    }
}
"#;

#[test]
fn new_kernel_appears_and_rebuilds() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("new-kernel");
    let crate_dir = tmp.0.join("kernels");
    let out_dir = tmp.0.join("out");
    let root = repo_root();

    // A copy of kernels/ whose path dependencies point back at this repository's crates.
    copy_tree(&root.join("kernels"), &crate_dir);
    fs::copy(
        root.join("rust-toolchain.toml"),
        crate_dir.join("rust-toolchain.toml"),
    )
    .unwrap();
    let toml_path = crate_dir.join("Cargo.toml");
    let toml = fs::read_to_string(&toml_path).unwrap();
    let dep = r#"ferrocuda-device = { path = "../device" }"#;
    assert!(
        toml.contains(dep),
        "kernels/Cargo.toml no longer has `{dep}`"
    );
    let device = root.join("device");
    // Every path dependency (`../device`, `../abi`) points back at this repository.
    let toml = toml.replace(
        "path = \"../",
        &format!("path = \"{}/", root.to_str().unwrap()),
    );
    fs::write(&toml_path, toml).unwrap();

    // The gallery's modules left out of the copy (see the module docs).
    let dropped = keep_only_the_kernels_module(&crate_dir);
    for gallery in ["matmul", "linear", "scan"] {
        assert!(
            dropped.iter().any(|d| d == gallery),
            "kernels/src/lib.rs no longer declares `mod {gallery};` ({dropped:?})"
        );
    }

    // 1. Baseline: the copy's kernels as they are.
    let base = build(&crate_dir, &out_dir);
    eprintln!("baseline build: {:.2} s", base.seconds);
    let base_ptx = check_outputs(&base);
    let base_manifest = base.manifest;
    for name in [
        "add_f32",
        "initialize_array",
        "saxpy_f64",
        "add_index_i64_4d",
        "fill_slow",
    ] {
        assert!(
            base_manifest.kernel(name).is_some(),
            "bundled kernel `{name}` missing"
        );
    }
    assert!(base_manifest.kernel("scale_f32").is_none());
    let kernels_rs = crate_dir.join("src").join("kernels.rs");

    // 2. Append the new kernel, as the README says, edit fill_slow's `junk * 0.5` into
    //    `junk * 0.375` (0f3EC00000), and rebuild.
    let mut src = fs::read_to_string(&kernels_rs).unwrap();
    let before = "junk = junk * 0.5 + 1.0;";
    assert!(src.contains(before), "fill_slow no longer has `{before}`");
    assert!(!entry_text(&base_ptx, "fill_slow").contains("0f3EC00000"));
    src = src.replace(before, "junk = junk * 0.375 + 1.0;");
    src.push_str(NEW_KERNEL);
    fs::write(&kernels_rs, &src).unwrap();
    let out = build(&crate_dir, &out_dir);
    eprintln!(
        "build with the new kernel and the edit: {:.2} s",
        out.seconds
    );
    let ptx = check_outputs(&out);
    assert!(
        entry_text(&ptx, "fill_slow").contains("0f3EC00000"),
        "the edited constant is not in fill_slow's PTX"
    );
    // The dep-info names the crate's own sources and the device crate's, not the toolchain's.
    assert!(out.sources.iter().any(|s| s.ends_with("src/kernels.rs")));
    assert!(out.sources.iter().any(|s| s.starts_with(&device)));
    assert!(!out
        .sources
        .iter()
        .any(|s| s.to_string_lossy().contains("rustlib")));

    let k: &KernelSig = out
        .manifest
        .kernel("scale_f32")
        .expect("scale_f32 in the manifest");
    assert_eq!(k.family, "scale");
    assert_eq!(
        k.params,
        vec![
            param("alpha", "scalar", "float32", 0, false, 4, 4),
            param("x", "slice", "float32", 1, false, 16, 8),
            param("y", "slice", "float32", 1, true, 16, 8),
        ]
    );
    assert_eq!(k.same_shape, vec![vec![1u8, 2]]);
    assert!(ptx.contains(".visible .entry scale_f32("));
    let entry = ptx_entries(&ptx)
        .unwrap()
        .into_iter()
        .find(|e| e.name == "scale_f32")
        .unwrap();
    assert_eq!(entry.param_sizes, [4, 16, 16]);
    assert!(entry_text(&ptx, "scale_f32").contains("mul.rn.f32"));
    // Every kernel of the copy is still there, unchanged; nothing else was added.
    assert_eq!(out.manifest.kernels.len(), base_manifest.kernels.len() + 1);
    for b in &base_manifest.kernels {
        assert_eq!(
            out.manifest.kernel(&b.name),
            Some(b),
            "bundled kernel `{}`",
            b.name
        );
    }

    // 3. Nothing changed: the outputs are not rewritten.
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    set_mtime(&out.ptx, old);
    set_mtime(&out.manifest_path, old);
    let again = build(&crate_dir, &out_dir);
    eprintln!("rebuild, nothing changed: {:.2} s", again.seconds);
    assert_eq!(mtime(&again.ptx), old, "unchanged PTX was rewritten");
    assert_eq!(
        mtime(&again.manifest_path),
        old,
        "unchanged manifest was rewritten"
    );
    assert_eq!(fs::read_to_string(&again.ptx).unwrap(), ptx);
    assert_eq!(again.manifest, out.manifest);
}

/// Writes a one-kernel crate named `same-name` whose kernel is `kernel`.
fn tiny_crate(dir: &Path, kernel: &str) {
    write_kernel_crate(
        dir,
        "same-name",
        &format!(
            "#![no_std]\n#![cfg_attr(target_arch = \"nvptx64\", feature(abi_ptx))]\n\
             use ferrocuda_device::{{kernel, SliceMut}};\n\
             #[kernel]\npub unsafe fn {kernel}(x: SliceMut<u32>) {{\n    \
             if !x.is_empty() {{ unsafe {{ x.write_unchecked(0, 7) }} }}\n}}\n"
        ),
    );
}

#[test]
fn shared_target_dir_keeps_crates_apart() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("same-name");
    let (a, b) = (tmp.0.join("a"), tmp.0.join("b"));
    tiny_crate(&a, "kernel_a");
    tiny_crate(&b, "kernel_b");
    let names = |out: &BuildOutput| -> Vec<String> {
        kernel_names(&out.manifest)
            .into_iter()
            .map(String::from)
            .collect()
    };
    let (out_a, out_b) = (tmp.0.join("out-a"), tmp.0.join("out-b"));
    assert_eq!(names(&build(&a, &out_a)), ["kernel_a"]);
    assert_eq!(names(&build(&b, &out_b)), ["kernel_b"]);
    // `a` is fresh now: cargo does not rerun rustc, and the PTX must still be `a`'s.
    let again = build(&a, &out_a);
    assert_eq!(names(&again), ["kernel_a"]);
    let ptx = fs::read_to_string(&again.ptx).unwrap();
    assert!(ptx.contains(".entry kernel_a(") && !ptx.contains("kernel_b"));
}
