//! Post-processing of the generated PTX: the manifest records that `#[kernel]` embeds are
//! decoded, removed, and cross-checked against the `.entry` parameter lists.

use crate::check::parse::{parse_functions, strip_comments};
use ferrocuda_abi::manifest::{self, KernelSig};
use std::collections::BTreeMap;

/// One `.entry` of a PTX module: its name and the byte size of each parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxEntry {
    /// Entry name.
    pub name: String,
    /// Size in bytes of each `.param`.
    pub param_sizes: Vec<usize>,
}

/// Parses the `.entry` definitions of a PTX module.
pub fn ptx_entries(ptx: &str) -> Result<Vec<PtxEntry>, String> {
    parse_functions(&strip_comments(ptx))
        .into_iter()
        .filter(|f| f.is_entry() && f.body.is_some())
        .map(|f| {
            let param_sizes = f
                .params
                .iter()
                .map(|p| {
                    param_size(p).ok_or_else(|| {
                        format!(
                            "cannot read the size of PTX parameter `{p}` of `{}`",
                            f.name
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(PtxEntry {
                name: f.name,
                param_sizes,
            })
        })
        .collect()
}

fn param_size(decl: &str) -> Option<usize> {
    // `.param .align 8 .b8 name[24]` or `.param .f32 name` / `.param .u64 name`
    let decl = decl.trim_end_matches(',');
    if let Some(open) = decl.rfind('[') {
        let close = decl.rfind(']')?;
        return decl[open + 1..close].parse().ok();
    }
    let ty = decl.split_whitespace().find(|w| {
        w.len() > 2
            && w.starts_with('.')
            && matches!(&w[1..2], "b" | "u" | "s" | "f")
            && w[2..].chars().all(|c| c.is_ascii_digit())
    })?;
    let bits: usize = ty[2..].parse().ok()?;
    Some(bits.div_ceil(8))
}

/// Extracts and removes the manifest records from `ptx`, decodes them, and checks them
/// against the `.entry` declarations. Returns the cleaned PTX and the kernels, sorted by name.
pub fn process_ptx(ptx: &str) -> Result<(String, Vec<KernelSig>), String> {
    let mut records: BTreeMap<String, KernelSig> = BTreeMap::new();
    let mut cleaned = String::with_capacity(ptx.len());
    let mut lines = ptx.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(at) = line.find(manifest::SYMBOL_PREFIX) else {
            cleaned.push_str(line);
            cleaned.push('\n');
            continue;
        };
        if line.trim_start().starts_with("//") {
            // `// .globl __ferrocuda_manifest__x` comment: drop it too.
            continue;
        }
        // Gather the whole declaration (it may span lines) up to the closing `};`.
        let mut decl = line.to_string();
        while !decl.trim_end().ends_with(';') {
            match lines.next() {
                Some(l) => decl.push_str(l),
                None => return Err("unterminated manifest record in PTX".into()),
            }
        }
        let sym: String = decl[at + manifest::SYMBOL_PREFIX.len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let open = decl
            .find('{')
            .ok_or("manifest record without initializer")?;
        let close = decl
            .rfind('}')
            .ok_or("manifest record without initializer")?;
        let bytes: Result<Vec<u8>, _> = decl[open + 1..close]
            .split(',')
            .map(|b| b.trim().parse::<u8>())
            .collect();
        let mut bytes =
            bytes.map_err(|e| format!("bad byte in manifest record of `{sym}`: {e}"))?;
        // LLVM leaves trailing zero bytes out of the initializer: pad to the declared length.
        let declared: usize = decl[..open]
            .rfind('[')
            .and_then(|l| decl[l + 1..open].split(']').next()?.parse().ok())
            .ok_or_else(|| format!("manifest record of `{sym}` has no length"))?;
        if bytes.len() > declared {
            return Err(format!(
                "manifest record of `{sym}` is longer than declared"
            ));
        }
        bytes.resize(declared, 0);
        let sig =
            manifest::decode(&bytes).map_err(|e| format!("manifest record of `{sym}`: {e}"))?;
        if sig.name != sym {
            return Err(format!(
                "manifest record `{sym}` describes a kernel named `{}`",
                sig.name
            ));
        }
        records.insert(sym, sig);
    }
    let entries = ptx_entries(&cleaned)?;
    for e in &entries {
        let Some(sig) = records.get(&e.name) else {
            return Err(format!(
                "PTX entry `{}` has no manifest record: mark kernels with #[kernel], not by hand",
                e.name
            ));
        };
        let want: Vec<usize> = sig.params.iter().map(|p| p.size as usize).collect();
        if want != e.param_sizes {
            return Err(format!(
                "kernel `{}`: PTX parameter sizes {:?} do not match the manifest's {:?}",
                e.name, e.param_sizes, want
            ));
        }
    }
    for name in records.keys() {
        if !entries.iter().any(|e| &e.name == name) {
            return Err(format!(
                "manifest record for `{name}` but no such .entry in the PTX"
            ));
        }
    }
    Ok((cleaned, records.into_values().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
.version 7.0
.target sm_80
.address_size 64

\t// .globl\tk
.visible .global .align 1 .b8 __ferrocuda_manifest__k[36] = {70, 67, 75, 49, 1, 107, 1, 107, 2, 1, 97, 2, 11, 1, 0, 16, 0, 8, 0, 5, 97, 108, 112, 104, 97, 1, 11, 0, 0, 4, 0, 4, 0, 0, 0, 0};

.visible .entry k(
\t.param .align 8 .b8 k_param_0[16],
\t.param .f32 k_param_1
)
{
\tret;
}
";

    #[test]
    fn extracts_and_strips_records() {
        // Build the sample's record with the real encoder to keep the test honest.
        use ferrocuda_abi::{KernelParam, Slice};
        let params = [
            ("a", <Slice<f32> as KernelParam>::DESC),
            ("alpha", <f32 as KernelParam>::DESC),
        ];
        let bytes: [u8; 36] = manifest::encode("k", "k", &params, &[], 0);
        let list: Vec<String> = bytes.iter().map(|b| b.to_string()).collect();
        let ptx = SAMPLE.replace(
            "[36] = {70, 67, 75, 49, 1, 107, 1, 107, 2, 1, 97, 2, 11, 1, 0, 16, 0, 8, 0, 5, 97, 108, 112, 104, 97, 1, 11, 0, 0, 4, 0, 4, 0, 0, 0, 0}",
            &format!("[36] = {{{}}}", list.join(", ")),
        );
        let (clean, kernels) = process_ptx(&ptx).unwrap();
        assert!(!clean.contains("__ferrocuda_manifest__"));
        assert!(clean.contains(".visible .entry k("));
        assert_eq!(kernels.len(), 1);
        assert_eq!(kernels[0].params[0].kind, "slice");
        assert_eq!(kernels[0].params[1].name, "alpha");

        // A size mismatch between PTX and manifest is caught.
        let bad = ptx.replace("k_param_0[16]", "k_param_0[24]");
        assert!(process_ptx(&bad).unwrap_err().contains("do not match"));
        // An entry without a record is caught.
        let extra = format!("{ptx}\n.visible .entry rogue()\n{{\nret;\n}}\n");
        assert!(process_ptx(&extra).unwrap_err().contains("rogue"));
    }

    #[test]
    fn parses_param_sizes() {
        assert_eq!(param_size(".param .align 8 .b8 add_param_1[24],"), Some(24));
        assert_eq!(param_size(".param .f32 add_param_2"), Some(4));
        assert_eq!(param_size(".param .u64 p,"), Some(8));
        assert_eq!(param_size(".param .b8 p"), Some(1));
        assert_eq!(param_size(".param .pred p"), None);
    }
}
