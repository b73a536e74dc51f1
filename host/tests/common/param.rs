//! Manifest records for the selection tests' hand-written modules.

/// A parameter record as the builder writes it: `kind` `"scalar"`, `"slice"` or `"view"`
/// (`rank` axes), with the size and alignment of its kernel argument.
pub fn param(name: &str, kind: &str, dtype: &str, rank: usize, mutable: bool) -> String {
    let (size, align) = match kind {
        "scalar" if dtype == "float64" => (8, 8),
        "scalar" => (4, 4),
        "slice" => (16, 8),
        _ => (8 + 16 * rank, 8),
    };
    format!(
        r#"{{"name": "{name}", "kind": "{kind}", "dtype": "{dtype}", "rank": {rank}, "mutable": {mutable}, "size": {size}, "align": {align}}}"#
    )
}
