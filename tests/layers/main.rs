//! The module layers of the workspace's crates: no import circle between source files, and the
//! order each `# Layers` section (a crate's `lib.rs`, a `mod.rs`) states is the order the code
//! keeps. See `checker.rs` for what counts as a dependency.

mod checker;

use std::path::Path;

use checker::Crate;

/// Every crate of the workspace, by the directory of its `lib.rs`.
const CRATES: &[&str] = &[
    "abi/src",
    "host/src",
    "python/src",
    "builder/src",
    "device/src",
    "macros/src",
    "kernels/src",
    "src",
    "config/src",
];

fn read(dir: &str) -> Crate {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(dir)
        .join("lib.rs");
    Crate::read(&lib).unwrap_or_else(|e| panic!("reading {dir}: {e}"))
}

#[test]
fn no_circles() {
    let mut report = String::new();
    for dir in CRATES {
        for c in read(dir).circles() {
            report.push_str(&format!("{dir}: {c}\n"));
        }
    }
    assert!(
        report.is_empty(),
        "import circles between source files:\n{report}"
    );
}

/// The crates whose `lib.rs` states their layers (the test above checks the order).
#[test]
fn layer_lists_are_there() {
    for dir in [
        "abi/src",
        "host/src",
        "python/src",
        "builder/src",
        "device/src",
        "macros/src",
        "kernels/src",
        "src",
    ] {
        assert!(
            read(dir).layered_files().contains(&"lib.rs"),
            "{dir}/lib.rs has no `# Layers` section"
        );
    }
}

#[test]
fn layer_orders_hold() {
    let mut report = String::new();
    for dir in CRATES {
        for v in read(dir).layer_violations() {
            report.push_str(&format!("{dir}/{v}\n"));
        }
    }
    assert!(report.is_empty(), "layer orders broken:\n{report}");
}

/// The Python binding reaches the CUDA driver only through the host crate's facade
/// (`ferrocuda_host::runtime`): no path of `python/src` names the driver layer.
#[test]
fn the_python_binding_names_no_driver() {
    let krate = read("python/src");
    let mut report = Vec::new();
    for prefix in [
        &["ferrocuda_host", "driver"][..],
        &["ferrocuda", "host", "driver"],
    ] {
        report.extend(krate.outside_uses(prefix));
    }
    assert!(
        report.is_empty(),
        "python/src names the host's driver layer (use ferrocuda_host::runtime):\n{}",
        report.join("\n")
    );
}

/// The longest a source file outside the tests may be: past it, a file holds more than one
/// thing and is split (a module per concern, tests beside it).
const MAX_LINES: usize = 800;

/// Whether `path` (relative to the workspace) is a test, a fixture, a benchmark result or a
/// generated file — exempt from [`MAX_LINES`].
fn exempt(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    path.split('/').any(|c| c == "tests" || c == "results" || c == "target")
        || name == "tests.rs"
        || name.starts_with("test_")
        // Generated from the bundled manifest (its header says so).
        || path == "python/ferrocuda/kernels.pyi"
}

fn source_files(dir: &Path, root: &Path, out: &mut Vec<(String, usize)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let rel = p
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel.starts_with('.') || rel.contains("/.") || exempt(&rel) {
            continue;
        }
        if p.is_dir() {
            source_files(&p, root, out);
        } else if ["rs", "py", "pyi", "sh"]
            .iter()
            .any(|x| p.extension().is_some_and(|e| e == *x))
        {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            out.push((rel, text.lines().count()));
        }
    }
}

/// No source file outside the tests is over [`MAX_LINES`] lines: every crate, the Python
/// package, the scripts and the benchmark harness.
#[test]
fn no_source_file_is_over_800_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in CRATES.iter().copied().chain([
        "build.rs",
        "python/ferrocuda",
        "scripts",
        "bench",
        "examples",
    ]) {
        let p = root.join(dir);
        if p.is_file() {
            let text = std::fs::read_to_string(&p).unwrap();
            files.push((dir.to_string(), text.lines().count()));
        } else {
            source_files(&p, root, &mut files);
        }
    }
    assert!(
        files.len() > 100,
        "only {} source files found under {root:?}",
        files.len()
    );
    let long: Vec<String> = files
        .iter()
        .filter(|(_, n)| *n > MAX_LINES)
        .map(|(f, n)| format!("{f}: {n} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "source files over {MAX_LINES} lines (split them):\n{}",
        long.join("\n")
    );
}
