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
