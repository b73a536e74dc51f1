//! The README's "Environment variables" section is the table of this crate, rendered by
//! `readme_section` (on a mismatch the message holds the section to paste).

use std::path::Path;

#[test]
fn the_readme_section_is_the_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let Ok(text) = std::fs::read_to_string(&path) else {
        // A packaged crate has no README of the repository.
        eprintln!("no {}: skipped", path.display());
        return;
    };
    let heading = "\n## Environment variables\n";
    let start = text.find(heading).expect("README.md has the section") + heading.len();
    let end = text[start..]
        .find("\n## ")
        .map_or(text.len(), |e| start + e + 1);
    let want = ferrocuda_config::readme_section();
    assert!(
        text[start..end] == want,
        "README.md's \"Environment variables\" section differs from the table of \
         config/src/lib.rs; the section should read:\n{want}"
    );
}
