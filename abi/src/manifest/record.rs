//! The byte record `#[kernel]` writes for each kernel (the layout is in the [module
//! documentation](super)), and its length: `const fn`s, for the device build too.

use crate::extras::{self, Extras};
use crate::kinds::ParamDesc;

/// Prefix of the PTX global that holds a kernel's manifest record.
pub const SYMBOL_PREFIX: &str = "__ferrocuda_manifest__";

/// First four bytes of every record.
pub const MAGIC: [u8; 4] = *b"FCK2";

/// Length of the record for a kernel with `extras` (used by `#[kernel]` to size the global).
pub const fn encoded_len_ext(
    name: &str,
    family: &str,
    params: &[(&str, ParamDesc)],
    same_shape: &[&[u8]],
    items_per_thread: u16,
    extras: &Extras<'_>,
) -> usize {
    encoded_len(name, family, params, same_shape, items_per_thread) + extras::encoded_len(extras)
}

/// Encodes a kernel's record with its extras; `L` must equal [`encoded_len_ext`] of the same
/// arguments. Every extra's parameter index must name a parameter.
pub const fn encode_ext<const L: usize>(
    name: &str,
    family: &str,
    params: &[(&str, ParamDesc)],
    same_shape: &[&[u8]],
    items_per_thread: u16,
    extras: &Extras<'_>,
) -> [u8; L] {
    assert!(
        L == encoded_len_ext(name, family, params, same_shape, items_per_thread, extras),
        "manifest length mismatch"
    );
    let mut out = [0u8; L];
    let at = encode_base(&mut out, name, family, params, same_shape, items_per_thread);
    let end = extras::encode_into(&mut out, at, extras);
    assert!(end == L, "manifest length mismatch");
    out
}

/// Length of the record for a kernel without extras.
pub const fn encoded_len(
    name: &str,
    family: &str,
    params: &[(&str, ParamDesc)],
    same_shape: &[&[u8]],
    items_per_thread: u16,
) -> usize {
    let _ = items_per_thread;
    let mut n = 4 + 1 + name.len() + 1 + family.len() + 1;
    let mut i = 0;
    while i < params.len() {
        n += 1 + params[i].0.len() + 4 + 4;
        i += 1;
    }
    n += 1;
    i = 0;
    while i < same_shape.len() {
        n += 1 + same_shape[i].len();
        i += 1;
    }
    n + 2
}

/// Encodes a kernel's record; `L` must equal [`encoded_len`] of the same arguments.
///
/// Fails to compile (const evaluation panics) if `L` is wrong or a name exceeds 255 bytes.
pub const fn encode<const L: usize>(
    name: &str,
    family: &str,
    params: &[(&str, ParamDesc)],
    same_shape: &[&[u8]],
    items_per_thread: u16,
) -> [u8; L] {
    assert!(
        L == encoded_len(name, family, params, same_shape, items_per_thread),
        "manifest length mismatch"
    );
    let mut out = [0u8; L];
    let at = encode_base(&mut out, name, family, params, same_shape, items_per_thread);
    assert!(at == L, "manifest length mismatch");
    out
}

/// Writes the record's fields up to `items_per_thread` to the start of `out`; returns the end.
const fn encode_base<const L: usize>(
    out: &mut [u8; L],
    name: &str,
    family: &str,
    params: &[(&str, ParamDesc)],
    same_shape: &[&[u8]],
    items_per_thread: u16,
) -> usize {
    assert!(same_shape.len() <= 255, "too many same-shape groups");
    assert!(params.len() <= 255, "too many kernel parameters");
    let mut at = 0;
    while at < 4 {
        out[at] = MAGIC[at];
        at += 1;
    }
    at = put_str(out, at, name.as_bytes());
    at = put_str(out, at, family.as_bytes());
    out[at] = params.len() as u8;
    at += 1;
    let mut i = 0;
    while i < params.len() {
        let (pname, d) = params[i];
        at = put_str(out, at, pname.as_bytes());
        out[at] = d.kind as u8;
        out[at + 1] = d.dtype as u8;
        out[at + 2] = d.rank;
        out[at + 3] = d.mutable as u8;
        out[at + 4] = d.size as u8;
        out[at + 5] = (d.size >> 8) as u8;
        out[at + 6] = d.align as u8;
        out[at + 7] = (d.align >> 8) as u8;
        at += 8;
        i += 1;
    }
    out[at] = same_shape.len() as u8;
    at += 1;
    i = 0;
    while i < same_shape.len() {
        let g = same_shape[i];
        assert!(g.len() <= 255, "same-shape group too large");
        out[at] = g.len() as u8;
        at += 1;
        let mut j = 0;
        while j < g.len() {
            assert!(
                (g[j] as usize) < params.len(),
                "same-shape index out of range"
            );
            out[at] = g[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    out[at] = items_per_thread as u8;
    out[at + 1] = (items_per_thread >> 8) as u8;
    at + 2
}

const fn put_str<const L: usize>(out: &mut [u8; L], mut at: usize, s: &[u8]) -> usize {
    assert!(s.len() <= 255, "name longer than 255 bytes");
    out[at] = s.len() as u8;
    at += 1;
    let mut i = 0;
    while i < s.len() {
        out[at] = s[i];
        at += 1;
        i += 1;
    }
    at
}
