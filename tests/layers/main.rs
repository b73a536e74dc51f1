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
];

fn read(dir: &str) -> Crate {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(dir)
        .join("lib.rs");
    Crate::read(&lib).unwrap_or_else(|e| panic!("reading {dir}: {e}"))
}

/// Circles not mended yet, by crate and files; each must still be there (remove it from
/// the list when it is mended), and no other may appear.
const KNOWN_CIRCLES: &[(&str, &[&str])] = &[
    (
        "builder/src",
        &["child.rs", "lib.rs", "llvm.rs", "parts.rs", "toolchain.rs"],
    ),
    (
        "device/src",
        &[
            "atomic/mod.rs",
            "atomic/ops.rs",
            "grid.rs",
            "half/mod.rs",
            "lib.rs",
            "thread.rs",
        ],
    ),
];

#[test]
fn no_circles() {
    let mut report = String::new();
    for dir in CRATES {
        let krate = read(dir);
        let sets = krate.circle_sets();
        for (c, set) in krate.circles().iter().zip(&sets) {
            if !KNOWN_CIRCLES
                .iter()
                .any(|(d, files)| d == dir && files == set)
            {
                report.push_str(&format!("{dir}: {c}\n"));
            }
        }
        for (_, files) in KNOWN_CIRCLES.iter().filter(|(d, _)| d == dir) {
            if !sets.iter().any(|s| s == files) {
                report.push_str(&format!(
                    "{dir}: the known circle {files:?} is gone: take it off KNOWN_CIRCLES\n"
                ));
            }
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
    for dir in ["abi/src", "host/src", "python/src"] {
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
