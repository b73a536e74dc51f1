//! `ferrocuda new`: a kernel crate that builds as it is.
//!
//! ```text
//! NAME/
//!   Cargo.toml            its own [workspace]; ferrocuda-device = "0.1.0"
//!   Cargo.lock            the versions ferrocuda's bundled kernels are built with
//!   rust-toolchain.toml   the toolchain ferrocuda is built and tested with
//!   .cargo/config.toml    ferrocuda-device patched to this machine's sources (see `sources`)
//!   .gitignore
//!   README.md
//!   src/lib.rs            one generic example kernel (scale_f32, scale_f64)
//!   tests/test_LIB.py     pytest: the signatures without a GPU, the kernels with one
//!   host/                 a Rust program with typed launchers (build.rs + include!)
//! ```

use super::sources::CrateSources;
use crate::{fail, BuildError, BuildErrorKind};
use std::path::{Path, PathBuf};

/// The scaffold's files: (relative path, template).
const TEMPLATES: [(&str, &str); 8] = [
    ("Cargo.toml", include_str!("../../templates/Cargo.toml.in")),
    (".gitignore", include_str!("../../templates/gitignore.in")),
    ("README.md", include_str!("../../templates/README.md.in")),
    ("src/lib.rs", include_str!("../../templates/lib.rs.in")),
    (
        "tests/test_{{lib}}.py",
        include_str!("../../templates/test.py.in"),
    ),
    (
        "host/Cargo.toml",
        include_str!("../../templates/host/Cargo.toml.in"),
    ),
    (
        "host/build.rs",
        include_str!("../../templates/host/build.rs.in"),
    ),
    (
        "host/src/main.rs",
        include_str!("../../templates/host/main.rs.in"),
    ),
];

/// Names a new crate cannot have: the standard crates, and ferrocuda's own (a dependency of
/// the same name would clash).
const RESERVED: [&str; 5] = ["core", "std", "alloc", "proc_macro", "test"];

/// The package name for a crate directory `dir`, checked (`my-kernels`, `my_kernels`).
pub fn crate_name(dir: &Path) -> Result<String, BuildError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lib = name.replace('-', "_");
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid || name.len() > 64 {
        return fail(
            BuildErrorKind::Config,
            format!(
                "`{name}` cannot name a kernel crate: use a letter, then letters, digits, `_` \
                 or `-` (at most 64), e.g. `my_kernels`"
            ),
        );
    }
    if RESERVED.contains(&lib.as_str()) || lib.starts_with("ferrocuda") {
        return fail(
            BuildErrorKind::Config,
            format!("`{name}` is taken (a standard or ferrocuda crate): choose another name"),
        );
    }
    Ok(name)
}

/// Fills a template: `{{name}}` (package), `{{lib}}` (library name).
fn fill(template: &str, name: &str) -> String {
    template
        .replace("{{name}}", name)
        .replace("{{lib}}", &name.replace('-', "_"))
}

/// The scaffold's `Cargo.lock`: the bundled kernels' lock with this crate in place of theirs
/// (so the first build needs no registry index and uses the tested versions).
pub fn lock_file(template: &str, name: &str) -> String {
    let ours = format!(
        "[[package]]\nname = \"{name}\"\nversion = \"0.1.0\"\ndependencies = [\n \"ferrocuda-device\",\n]"
    );
    let blocks: Vec<&str> = template.trim_end().split("\n\n").collect();
    let (header, packages) = blocks.split_at(
        blocks
            .iter()
            .take_while(|b| !b.starts_with("[[package]]"))
            .count(),
    );
    let mut packages: Vec<String> = packages
        .iter()
        .filter(|b| !b.starts_with("[[package]]\nname = \"ferrocuda-kernels\""))
        .map(|b| b.to_string())
        .chain([ours])
        .collect();
    // Cargo's order (by name), so that its first build leaves the file as it is.
    packages.sort_by_key(|b| b.lines().nth(1).unwrap_or("").to_string());
    let mut out = header.join("\n\n");
    for p in packages {
        out.push_str("\n\n");
        out.push_str(&p);
    }
    out.push('\n');
    out
}

/// The scaffold's `rust-toolchain.toml`: the project's `[toolchain]` table (its channel and
/// components), with a comment that says why.
pub fn toolchain_file(project: &str) -> String {
    let mut out = String::from(
        "# The toolchain ferrocuda is built and tested with; `ferrocuda build` installs it with\n\
         # rustup when it is missing. rust-src: -Zbuild-std=core for nvptx64-nvidia-cuda;\n\
         # llvm-tools: the builder's passes after rustc (shared memory, libdevice, PTX).\n",
    );
    let mut in_table = false;
    for line in project.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_table = t == "[toolchain]";
        }
        if in_table && !t.starts_with('#') && !t.is_empty() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Writes a new kernel crate at `dir` (which must not exist, or be empty); returns the
/// package name.
pub fn new_crate(dir: &Path, sources: &CrateSources) -> Result<String, BuildError> {
    let name = crate_name(dir)?;
    if dir.exists()
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return fail(
            BuildErrorKind::Config,
            format!(
                "{} already exists and is not empty: `ferrocuda new` makes a new crate",
                dir.display()
            ),
        );
    }
    sources.materialize()?;
    let mut files: Vec<(PathBuf, String)> = TEMPLATES
        .iter()
        .map(|(path, t)| (PathBuf::from(fill(path, &name)), fill(t, &name)))
        .collect();
    files.push((
        "Cargo.lock".into(),
        lock_file(&sources.read("kernels/Cargo.lock")?, &name),
    ));
    files.push((
        "rust-toolchain.toml".into(),
        toolchain_file(&sources.read("rust-toolchain.toml")?),
    ));
    files.push((".cargo/config.toml".into(), sources.patch_config()));
    if let Some(host) = sources.host_patch_config() {
        files.push(("host/.cargo/config.toml".into(), host));
    }
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).or_else(|e| {
                fail(
                    BuildErrorKind::Io,
                    format!("cannot create {}: {e}", parent.display()),
                )
            })?;
        }
        std::fs::write(&path, text).or_else(|e| {
            fail(
                BuildErrorKind::Io,
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["my_kernels", "k", "My-Kernels2"] {
            assert_eq!(crate_name(Path::new(ok)).unwrap(), ok);
        }
        for bad in ["2k", "my kernels", "", "a.b", "-x"] {
            let e = crate_name(Path::new(bad)).unwrap_err();
            assert!(
                e.message().contains("cannot name a kernel crate"),
                "{bad}: {e}"
            );
        }
        for taken in ["core", "std", "ferrocuda-device", "ferrocuda_x"] {
            assert!(crate_name(Path::new(taken))
                .unwrap_err()
                .message()
                .contains("taken"));
        }
    }

    #[test]
    fn lock_and_toolchain_files() {
        let lock = "version = 4\n\n[[package]]\nname = \"ferrocuda-device\"\nversion = \"0.1.0\"\n\n\
                    [[package]]\nname = \"ferrocuda-kernels\"\nversion = \"0.1.0\"\ndependencies = [\n \
                    \"ferrocuda-abi\",\n \"ferrocuda-device\",\n]\n\n[[package]]\nname = \"libm\"\n";
        let ours = lock_file(lock, "mine");
        assert!(!ours.contains("ferrocuda-kernels") && !ours.contains(" \"ferrocuda-abi\""));
        assert!(ours.starts_with("version = 4\n\n[[package]]\nname = \"ferrocuda-device\""));
        assert!(ours.ends_with(
            "[[package]]\nname = \"libm\"\n\n[[package]]\nname = \"mine\"\nversion = \"0.1.0\"\ndependencies = [\n \"ferrocuda-device\",\n]\n"
        ));
        let tc = toolchain_file(
            "# why\n[toolchain]\nchannel = \"1.99.0\"\n# more\ncomponents = [\"rust-src\"]\n\n[other]\nx = 1\n",
        );
        assert!(tc.ends_with("[toolchain]\nchannel = \"1.99.0\"\ncomponents = [\"rust-src\"]\n"));
        assert_eq!(fill("{{name}}/{{lib}}", "a-b"), "a-b/a_b");
    }
}
