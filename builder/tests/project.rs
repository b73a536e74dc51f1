//! `ferrocuda new` and `ferrocuda build`, end to end through the `ferrocuda` binary (no GPU).
//!
//! What this verifies, in a fresh temporary directory:
//!
//! * `new_build_and_cache`: `ferrocuda new` writes a crate that builds as it is (its own
//!   `[workspace]`, the project's toolchain file, `.cargo/config.toml` patching
//!   `ferrocuda-device` to this checkout, a `Cargo.lock` that cargo leaves unchanged);
//!   `ferrocuda build` prints the manifest's path, and the PTX has `scale_f32` and
//!   `scale_f64` (one generic kernel) matching the manifest; built again, the crate is served
//!   from the cache without running cargo (no cargo, rustc or rustup on `PATH`, and
//!   `FERROCUDA_CARGO` pointing nowhere), also after a touch that changes no byte; after a
//!   one-line kernel edit it is rebuilt (and cannot be without cargo), with the edit in the
//!   PTX, by one of two `ferrocuda build`s started at once (the other waits for it, then
//!   finds the outputs current); a damaged PTX is rebuilt; host `cargo check` of the crate passes without warnings.
//!   Build times are printed (`--nocapture`).
//! * `bad_input`: a crate that does not compile fails with the compiler's message located in
//!   the user's file (absolute path, line and column), prints no manifest path, and fails
//!   again rather than serving the earlier build; a parameter type that cannot be a kernel
//!   parameter is one error naming the parameter and the allowed types; a directory without
//!   `Cargo.toml`, a `new` into a non-empty directory, bad crate names and bad usage are clear
//!   errors.
//! * `tensor_cores_in_a_new_crate`: the tensor-core kernels of
//!   `fixtures/own-tensor-cores.rs` (`mma.sync`, `ldmatrix`, `cp.async`; TMA, an mbarrier and
//!   `wgmma` on sm_90a), added to a scaffolded crate, build without inline assembly or an
//!   unstable feature of their own and without a warning: one family of an sm_80 and an
//!   sm_90a kernel, each part's PTX with its instructions, and the host `cargo check` clean
//!   (the GPU tests run them: `python/tests/test_gpu_own_crate.py`).
//! * `host_example_type_checks`: the scaffold's Rust host example (typed launchers generated
//!   by its `build.rs`, `my_kernels::scale_f32(…)` in `main.rs`) passes `cargo check`.
//!
//! The child builds share their target directory with the other builder tests (`core` for
//! the NVPTX target is compiled once).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

mod common;
use common::{repo_root, shared_target_dir, TempDir, BUILD_LOCK};

/// Runs `ferrocuda` with `args` in `cwd`; `env` entries are set (an empty value removes).
fn ferrocuda(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrocuda"));
    cmd.current_dir(cwd).args(args);
    // As a user's shell would have it: not the variables cargo sets for this test.
    for (k, _) in std::env::vars() {
        if k.starts_with("CARGO") || k.starts_with("RUSTUP_TOOLCHAIN") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    cmd.output().expect("run ferrocuda")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `ferrocuda build DIR` into the shared target directory; (status, stdout, stderr).
fn build(dir: &Path, env: &[(&str, &str)]) -> (bool, String, String) {
    let target = shared_target_dir();
    let out = ferrocuda(
        dir.parent().unwrap(),
        &[
            "build",
            dir.to_str().unwrap(),
            "--target-dir",
            target.to_str().unwrap(),
        ],
        env,
    );
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// The `.entry` names of a PTX file, sorted.
fn entries(ptx: &str) -> Vec<String> {
    let mut v: Vec<String> = ferrocuda_builder::ptx_entries(ptx)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    v.sort();
    v
}

/// The kernel body line of the scaffold's example, which the tests edit.
const BODY: &str = "unsafe { y.write_unchecked(i, alpha * x.get_unchecked(i)) };";

#[test]
fn new_build_and_cache() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("project");
    let dir = tmp.0.join("my_kernels");

    let made = ferrocuda(&tmp.0, &["new", "my_kernels"], &[]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    assert!(text(&made.stdout).contains("created kernel crate `my_kernels`"));
    let toml = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(toml.contains("[workspace]") && toml.contains("ferrocuda-device = \"0.1.0\""));
    let toolchain = fs::read_to_string(dir.join("rust-toolchain.toml")).unwrap();
    let project = fs::read_to_string(repo_root().join("rust-toolchain.toml")).unwrap();
    let channel = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("channel"))
            .map(str::to_owned)
    };
    assert_eq!(channel(&toolchain), channel(&project));
    let config = fs::read_to_string(dir.join(".cargo/config.toml")).unwrap();
    assert!(config.contains(&format!(
        "ferrocuda-device = {{ path = {:?} }}",
        repo_root().join("device").to_string_lossy()
    )));
    for f in [
        "README.md",
        ".gitignore",
        "src/lib.rs",
        "tests/test_my_kernels.py",
        "host/Cargo.toml",
        "host/build.rs",
        "host/src/main.rs",
        "host/.cargo/config.toml",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let lock = fs::read_to_string(dir.join("Cargo.lock")).unwrap();

    // Cold build (core for the GPU may already be in the shared target directory).
    let t = Instant::now();
    let (ok, stdout, stderr) = build(&dir, &[]);
    assert!(ok, "{stderr}");
    eprintln!("build: {:.2} s", t.elapsed().as_secs_f64());
    assert!(stderr.contains("built my_kernels for sm_80"), "{stderr}");
    let manifest_path = PathBuf::from(stdout.trim());
    assert_eq!(
        manifest_path,
        dir.join("target/ferrocuda/sm_80/my_kernels.json")
    );
    assert_eq!(fs::read_to_string(dir.join("Cargo.lock")).unwrap(), lock);
    let manifest =
        ferrocuda_abi::manifest::Manifest::from_json(&fs::read_to_string(&manifest_path).unwrap())
            .unwrap();
    let ptx_path = manifest_path.with_file_name(&manifest.ptx);
    let ptx = fs::read_to_string(&ptx_path).unwrap();
    assert_eq!(entries(&ptx), ["scale_f32", "scale_f64"]);
    for (k, dtype) in manifest.kernels.iter().zip(["float32", "float64"]) {
        assert_eq!(k.family, "scale");
        let params: Vec<(&str, &str, &str)> = k
            .params
            .iter()
            .map(|p| (p.name.as_str(), p.kind.as_str(), p.dtype.as_str()))
            .collect();
        assert_eq!(
            params,
            [
                ("alpha", "scalar", dtype),
                ("x", "slice", dtype),
                ("y", "slice", dtype)
            ]
        );
        assert_eq!(k.same_shape, [vec![1u8, 2]]);
    }
    assert!(!ptx.contains("__ferrocuda_manifest__"));

    // Unchanged, also after a touch: from the cache, with no cargo, rustc or rustup to run.
    let nothing = tmp.0.join("no-tools");
    fs::create_dir_all(&nothing).unwrap();
    let no_tools = [
        ("PATH", nothing.to_str().unwrap()),
        ("FERROCUDA_CARGO", "/nonexistent/cargo"),
    ];
    let lib_rs = dir.join("src/lib.rs");
    let src = fs::read_to_string(&lib_rs).unwrap();
    for touch in [false, true] {
        if touch {
            fs::write(&lib_rs, &src).unwrap();
        }
        let t = Instant::now();
        let (ok, stdout, stderr) = build(&dir, &no_tools);
        eprintln!(
            "cached (touched: {touch}): {:.3} s",
            t.elapsed().as_secs_f64()
        );
        assert!(ok, "not served from the cache:\n{stderr}");
        assert!(
            stderr.contains("my_kernels is up to date (2 kernels)"),
            "{stderr}"
        );
        assert_eq!(stdout.trim(), manifest_path.to_str().unwrap());
    }
    assert_eq!(fs::read_to_string(&ptx_path).unwrap(), ptx);

    // A one-line kernel edit: rebuilt, which needs cargo.
    assert!(
        src.contains(BODY),
        "the scaffold's kernel changed: update BODY"
    );
    let edited = src.replace(BODY, &BODY.replace("alpha * x", "alpha * alpha * x"));
    fs::write(&lib_rs, &edited).unwrap();
    let (ok, _, stderr) = build(&dir, &no_tools);
    assert!(!ok, "an edited crate was served from the cache");
    assert!(
        stderr.contains("cargo") || stderr.contains("rustc"),
        "{stderr}"
    );
    // Built by two `ferrocuda build`s at once (two terminals, an editor and a terminal): they
    // take turns, and the one that waited finds the other's outputs current.
    let t = Instant::now();
    let both: Vec<(bool, String, String)> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2).map(|_| s.spawn(|| build(&dir, &[]))).collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    eprintln!("after a one-line edit: {:.2} s", t.elapsed().as_secs_f64());
    for (ok, stdout, stderr) in &both {
        assert!(ok, "{stderr}");
        assert_eq!(stdout.trim(), manifest_path.to_str().unwrap());
    }
    let said = |what: &str| both.iter().filter(|(_, _, e)| e.contains(what)).count();
    assert_eq!(
        (said("built my_kernels"), said("my_kernels is up to date")),
        (1, 1),
        "{both:#?}"
    );
    let new_ptx = fs::read_to_string(&ptx_path).unwrap();
    let muls = |p: &str| p.matches("mul.rn.f32").count();
    assert_eq!(muls(&new_ptx), muls(&ptx) * 2, "the edit is not in the PTX");
    let (ok, _, stderr) = build(&dir, &no_tools);
    assert!(ok && stderr.contains("up to date"), "{stderr}");

    // A damaged PTX is rebuilt, not served.
    fs::write(&ptx_path, &new_ptx[..new_ptx.len() / 2]).unwrap();
    let (ok, _, stderr) = build(&dir, &[]);
    assert!(ok && stderr.contains("built my_kernels"), "{stderr}");
    assert_eq!(fs::read_to_string(&ptx_path).unwrap(), new_ptx);

    // The host's view of the crate (cargo check, rust-analyzer): no errors, no warnings.
    let check = Command::new("cargo")
        .current_dir(&dir)
        .args(["check", "--quiet", "--offline", "--target-dir"])
        .arg(tmp.0.join("host-check"))
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .unwrap();
    let stderr = text(&check.stderr);
    assert!(check.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

/// A scaffolded crate whose example kernel's body line is replaced by `body`, and whose
/// kernel signature may be changed by `(from, to)`.
fn broken_crate(tmp: &Path, name: &str, body: &str, sig: Option<(&str, &str)>) -> PathBuf {
    let made = ferrocuda(tmp, &["new", name], &[]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let dir = tmp.join(name);
    let lib_rs = dir.join("src/lib.rs");
    let mut src = fs::read_to_string(&lib_rs).unwrap().replace(BODY, body);
    if let Some((from, to)) = sig {
        assert!(src.contains(from), "{from}");
        src = src.replace(from, to);
    }
    fs::write(&lib_rs, src).unwrap();
    dir
}

/// The line (1-based) of `needle` in `dir/src/lib.rs`.
fn line_of(dir: &Path, needle: &str) -> usize {
    let src = fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    src.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn bad_input() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("project-bad");

    // A type error: the compiler's message, at the user's file, line and column.
    let wrong = "let v: u32 = alpha;";
    let dir = broken_crate(&tmp.0, "wrong", wrong, None);
    for _ in 0..2 {
        let (ok, stdout, stderr) = build(&dir, &[]);
        assert!(!ok && stdout.is_empty(), "{stdout}{stderr}");
        let at = format!(
            "--> {}:{}:",
            dir.join("src/lib.rs").display(),
            line_of(&dir, wrong)
        );
        assert!(
            stderr.contains("error[E0308]: mismatched types"),
            "{stderr}"
        );
        assert!(stderr.contains(&at), "no `{at}` in:\n{stderr}");
    }

    // A parameter type the launchers cannot check.
    let dir = broken_crate(
        &tmp.0,
        "bad_param",
        "",
        Some(("alpha: T, x: Slice<T>", "alpha: T, n: usize, x: Slice<T>")),
    );
    let (ok, _, stderr) = build(&dir, &[]);
    assert!(!ok);
    assert_eq!(
        stderr.matches("cannot be a kernel parameter").count(),
        2,
        "one error per instance:\n{stderr}"
    );
    for part in [
        "kernel parameter `scale_f32::n`: `usize` cannot be a kernel parameter",
        "kernel parameter `scale_f64::n`: `usize` cannot be a kernel parameter",
        "scalars (i8..i64, u8..u64, f16, bf16, f32, f64) and arrays of them",
        &format!(
            "--> {}:{}:",
            dir.join("src/lib.rs").display(),
            line_of(&dir, "n: usize")
        ),
    ] {
        assert!(stderr.contains(part), "no `{part}` in:\n{stderr}");
    }

    // Not a crate; a crate directory that is taken; bad names; bad usage.
    let empty = tmp.0.join("empty");
    fs::create_dir_all(&empty).unwrap();
    let (ok, _, stderr) = build(&empty, &[]);
    assert!(
        !ok && stderr.contains("is not a kernel crate (it has no Cargo.toml)"),
        "{stderr}"
    );
    let out = ferrocuda(&tmp.0, &["new", "wrong"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("already exists and is not empty"));
    let out = ferrocuda(&tmp.0, &["new", "2fast"], &[]);
    assert!(text(&out.stderr).contains("`2fast` cannot name a kernel crate"));
    for args in [
        &["frobnicate"][..],
        &["build", "--arch"],
        &["build", "a", "b"],
        &[],
    ] {
        let out = ferrocuda(&tmp.0, args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains("usage:"), "{args:?}");
    }
    let out = ferrocuda(&tmp.0, &["--version"], &[]);
    assert_eq!(
        text(&out.stdout).trim(),
        format!("ferrocuda {}", env!("CARGO_PKG_VERSION"))
    );
}

/// The scaffold's Rust host example type-checks against this checkout: its `build.rs` builds
/// the kernel crate with `PtxBuilder` and writes typed launchers with `Launchers`, and its
/// `main.rs` calls `my_kernels::scale_f32(2.5, &x, &y, &opts)?` (running it needs a GPU:
/// `run.sh own`). Offline, with the workspace's lock file: the versions this checkout is
/// built with.
#[test]
fn host_example_type_checks() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("project-host");
    let made = ferrocuda(&tmp.0, &["new", "my_kernels"], &[]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let host = tmp.0.join("my_kernels/host");
    fs::copy(repo_root().join("Cargo.lock"), host.join("Cargo.lock")).unwrap();
    let t = Instant::now();
    let mut cmd = Command::new("cargo");
    cmd.current_dir(&host)
        .args([
            "check",
            "--offline",
            "--message-format=short",
            "--target-dir",
        ])
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("host-example"));
    for (k, _) in std::env::vars() {
        if k.starts_with("CARGO") || k == "RUSTUP_TOOLCHAIN" {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().unwrap();
    eprintln!(
        "host example: cargo check in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The only warnings: the kernel crate's patch, inherited and unused here, the note of a
    // build that finds no ptxas (PTX only, no cubins), and the builder's line saying it
    // downloaded NVIDIA's nvcc wheel (the first build on a machine without ptxas).
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert!(
        warnings.iter().all(|w| w.contains("ferrocuda-device")
            || w.contains("no ptxas found: PTX only")
            || w.contains("downloaded nvidia-cuda-nvcc-cu12")),
        "{stderr}"
    );
}

#[test]
fn tensor_cores_in_a_new_crate() {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("tensor-cores");
    let dir = tmp.0.join("my_kernels");
    let made = ferrocuda(&tmp.0, &["new", "my_kernels"], &[]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let src =
        fs::read_to_string(repo_root().join("builder/tests/fixtures/own-tensor-cores.rs")).unwrap();
    for own in [
        "asm!(",
        "global_asm!",
        "#![feature",
        "#![cfg_attr",
        "llvm_asm",
    ] {
        assert!(!src.contains(own), "the user's kernels use `{own}`");
    }
    let lib = dir.join("src/lib.rs");
    let root = fs::read_to_string(&lib).unwrap();
    // The crate root keeps the scaffold's one feature gate (abi_ptx, for `#[kernel]`).
    let gates: Vec<&str> = root.lines().filter(|l| l.contains("feature(")).collect();
    assert_eq!(
        gates,
        ["#![cfg_attr(target_arch = \"nvptx64\", feature(abi_ptx))]"]
    );
    fs::write(dir.join("src/tensor_cores.rs"), &src).unwrap();
    fs::write(&lib, format!("{root}\npub mod tensor_cores;\n")).unwrap();

    let (ok, stdout, stderr) = build(&dir, &[]);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let manifest_path = PathBuf::from(stdout.trim());
    let manifest =
        ferrocuda_abi::manifest::Manifest::from_json(&fs::read_to_string(&manifest_path).unwrap())
            .unwrap();
    let tc: Vec<(&str, Option<&str>)> = manifest
        .kernels
        .iter()
        .filter(|k| k.family == "tc_linear")
        .map(|k| (k.name.as_str(), k.arch.as_deref()))
        .collect();
    assert_eq!(
        tc,
        [
            ("tc_linear_bf16", None),
            ("tc_linear_bf16_sm90", Some("sm_90a"))
        ]
    );
    let base = fs::read_to_string(manifest_path.with_file_name(&manifest.ptx)).unwrap();
    let part = &manifest.parts["sm_90a"];
    let hopper = fs::read_to_string(manifest_path.with_file_name(&part.ptx)).unwrap();
    assert_eq!(entries(&hopper), ["tc_linear_bf16_sm90"]);
    assert!(hopper.contains(".target sm_90a"));
    for (ptx, needs, lacks) in [
        (
            &base,
            &[
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                "cp.async.cg.shared.global",
                "cp.async.wait_group 1",
            ][..],
            &["wgmma", "cp.async.bulk"][..],
        ),
        (
            &hopper,
            &[
                "wgmma.fence.sync.aligned",
                "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
                "wgmma.commit_group.sync.aligned",
                "wgmma.wait_group.sync.aligned 0",
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                "mbarrier.arrive.expect_tx",
            ][..],
            &["mma.sync", ".local"][..],
        ),
    ] {
        for n in needs {
            assert!(ptx.contains(n), "no `{n}` in the PTX");
        }
        for l in lacks {
            assert!(!ptx.contains(l), "`{l}` in the PTX");
        }
    }
    assert!(!base.contains(".local"));

    // The host's view of the crate: no errors, no warnings.
    let check = Command::new("cargo")
        .current_dir(&dir)
        .args(["check", "--quiet", "--offline", "--target-dir"])
        .arg(tmp.0.join("host-check"))
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .unwrap();
    let stderr = text(&check.stderr);
    assert!(check.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}
