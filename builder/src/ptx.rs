//! Post-processing of the generated PTX: the manifest records that `#[kernel]` embeds are
//! decoded, removed, and cross-checked against the `.entry` parameter lists; the launch
//! records (see `ferrocuda_abi::launch`) are decoded, removed, and their bounds written into
//! the entries as `.maxntid` / `.reqntid`.

use crate::check::parse::{parse_functions, strip_comments};
use ferrocuda_abi::launch::{self, LaunchDecl};
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

/// Reads the byte array a record global holds: `decl` is its whole declaration, `sym` its
/// kernel's name (for errors).
fn record_bytes(decl: &str, sym: &str) -> Result<Vec<u8>, String> {
    let open = decl
        .find('{')
        .ok_or_else(|| format!("record of `{sym}` without initializer"))?;
    let close = decl
        .rfind('}')
        .ok_or_else(|| format!("record of `{sym}` without initializer"))?;
    let bytes: Result<Vec<u8>, _> = decl[open + 1..close]
        .split(',')
        .map(|b| b.trim().parse::<u8>())
        .collect();
    let mut bytes = bytes.map_err(|e| format!("bad byte in record of `{sym}`: {e}"))?;
    // LLVM leaves trailing zero bytes out of the initializer: pad to the declared length.
    let declared: usize = decl[..open]
        .rfind('[')
        .and_then(|l| decl[l + 1..open].split(']').next()?.parse().ok())
        .ok_or_else(|| format!("record of `{sym}` has no length"))?;
    if bytes.len() > declared {
        return Err(format!("record of `{sym}` is longer than declared"));
    }
    bytes.resize(declared, 0);
    Ok(bytes)
}

/// Prefix of the PTX global by which a kernel declared for another architecture
/// (`#[kernel(arch = "sm_90a")]`) asks, in the base build, for the build of its part: its bytes
/// are the architecture's name.
pub const ARCH_RECORD_PREFIX: &str = "__ferrocuda_arch__";

/// What [`process_ptx`] makes of a generated PTX module.
#[derive(Clone, Debug)]
pub struct Processed {
    /// The PTX, records removed, launch bounds written in.
    pub ptx: String,
    /// Its kernels, sorted by name.
    pub kernels: Vec<KernelSig>,
    /// Kernel → architecture, for the kernels declared for another architecture than this
    /// build's (they are not in this PTX; each part is built on its own).
    pub requests: BTreeMap<String, String>,
}

/// Extracts and removes the manifest records (and launch and architecture records) from
/// `ptx`, decodes them, and checks them against the `.entry` declarations; writes each
/// kernel's declared launch bounds into its entry (`apply_launch_bounds`).
pub fn process_ptx(ptx: &str) -> Result<Processed, String> {
    let mut records: BTreeMap<String, KernelSig> = BTreeMap::new();
    let mut launches: BTreeMap<String, LaunchDecl> = BTreeMap::new();
    let mut requests: BTreeMap<String, String> = BTreeMap::new();
    let mut cleaned = String::with_capacity(ptx.len());
    let mut lines = ptx.lines().peekable();
    while let Some(line) = lines.next() {
        let found = [
            manifest::SYMBOL_PREFIX,
            launch::SYMBOL_PREFIX,
            ARCH_RECORD_PREFIX,
        ]
        .into_iter()
        .find_map(|prefix| line.find(prefix).map(|at| (prefix, at)));
        let Some((prefix, at)) = found else {
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
        let sym: String = decl[at + prefix.len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let bytes = record_bytes(&decl, &sym)?;
        if prefix == ARCH_RECORD_PREFIX {
            let arch = String::from_utf8(bytes)
                .ok()
                .filter(|a| ferrocuda_abi::arch::Arch::parse(a).is_some())
                .ok_or_else(|| format!("architecture record of `{sym}` names no architecture"))?;
            requests.insert(sym, arch);
            continue;
        }
        if prefix == launch::SYMBOL_PREFIX {
            let d =
                LaunchDecl::decode(&bytes).map_err(|e| format!("launch record of `{sym}`: {e}"))?;
            launches.insert(sym, d);
            continue;
        }
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
    // Tensor maps: 64-byte aligned in the parameter space, as TMA requires (the Rust type
    // can only say 16).
    for sig in records.values() {
        for (i, p) in sig.params.iter().enumerate() {
            if p.param_kind() == Some(ferrocuda_abi::ParamKind::TensorMap) {
                cleaned = align_tensor_map_param(&cleaned, &sig.name, i)?;
            }
        }
    }
    for (name, d) in launches {
        let sig = records
            .get_mut(&name)
            .ok_or_else(|| format!("launch record for `{name}` but no such kernel"))?;
        cleaned = apply_launch_bounds(&cleaned, &name, &d)?;
        sig.launch = d.into();
    }
    if let Some(k) = requests.keys().find(|k| records.contains_key(*k)) {
        return Err(format!(
            "kernel `{k}` is in the PTX and asks for another architecture's build"
        ));
    }
    Ok(Processed {
        ptx: cleaned,
        kernels: records.into_values().collect(),
        requests,
    })
}

/// Declares parameter `index` of entry `name` — a tensor map — 64-byte aligned:
/// `.param .align 16 .b8 name_param_3[176]` becomes `.param .align 64 .b8 …`.
pub fn align_tensor_map_param(ptx: &str, name: &str, index: usize) -> Result<String, String> {
    let bytes = ferrocuda_abi::tensormap::TENSOR_MAP_PARAM_BYTES;
    let symbol = format!("{name}_param_{index}[{bytes}]");
    let at = ptx.find(&symbol).ok_or_else(|| {
        format!(
            "tensor-map parameter {index} of `{name}` is not a {bytes}-byte parameter in the PTX"
        )
    })?;
    let line_start = ptx[..at].rfind('\n').map_or(0, |i| i + 1);
    let decl = &ptx[line_start..at];
    let Some(align) = decl.find(".align ") else {
        return Err(format!(
            "tensor-map parameter {index} of `{name}` has no alignment in the PTX"
        ));
    };
    let digits_end = decl[align + 7..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(decl.len(), |e| align + 7 + e);
    let mut out = String::with_capacity(ptx.len() + 1);
    out.push_str(&ptx[..line_start + align]);
    out.push_str(".align 64");
    out.push_str(&ptx[line_start + digits_end..]);
    Ok(out)
}

/// Writes the launch bounds `d` declares into entry `name` of `ptx`: `.maxntid n, 1, 1` or
/// `.reqntid x, y, z`, then `.minnctapersm n` when declared, between its parameter list and
/// its body (PTX's place for performance tuning directives). Unchanged when `d` declares
/// neither bound.
pub fn apply_launch_bounds(ptx: &str, name: &str, d: &LaunchDecl) -> Result<String, String> {
    let mut directive = match (d.fixed_block(), d.max_threads) {
        (Some([x, y, z]), _) => format!(".reqntid {x}, {y}, {z}"),
        (None, 0) => return Ok(ptx.to_string()),
        (None, n) => format!(".maxntid {n}, 1, 1"),
    };
    if d.min_blocks != 0 {
        directive.push_str(&format!("\n.minnctapersm {}", d.min_blocks));
    }
    let header = format!(".entry {name}(");
    let at = ptx
        .match_indices(&header)
        .map(|(i, _)| i)
        .find(|&i| i == 0 || ptx[..i].ends_with(char::is_whitespace))
        .ok_or_else(|| format!("no .entry `{name}` to give launch bounds"))?;
    // The parameter list's closing parenthesis (parameters hold no parentheses).
    let close = at
        + ptx[at..]
            .find(')')
            .ok_or_else(|| format!(".entry `{name}` has no parameter list end"))?;
    let rest = &ptx[close + 1..];
    let before_body = &rest[..rest.find('{').unwrap_or(rest.len())];
    if before_body.contains(".maxntid") || before_body.contains(".reqntid") {
        return Err(format!(".entry `{name}` already has launch bounds"));
    }
    Ok(format!("{}\n{directive}{}", &ptx[..=close], rest))
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
        let Processed {
            ptx: clean,
            kernels,
            ..
        } = process_ptx(&ptx).unwrap();
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
    fn launch_records_become_directives() {
        use ferrocuda_abi::{KernelParam, Slice};
        let params = [
            ("a", <Slice<f32> as KernelParam>::DESC),
            ("alpha", <f32 as KernelParam>::DESC),
        ];
        let bytes: [u8; 36] = manifest::encode("k", "k", &params, &[], 0);
        let list = |b: &[u8]| {
            b.iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let decl = LaunchDecl {
            block: [16, 8, 1],
            grid_dims: 2,
            ..LaunchDecl::default()
        };
        let rec = decl.encode();
        // LLVM drops trailing zeros of the initializer; the declared length restores them.
        let trimmed = &rec[..rec.iter().rposition(|&b| b != 0).unwrap() + 1];
        let ptx = SAMPLE
            .replace(
                "[36] = {70, 67, 75, 49, 1, 107, 1, 107, 2, 1, 97, 2, 11, 1, 0, 16, 0, 8, 0, 5, 97, 108, 112, 104, 97, 1, 11, 0, 0, 4, 0, 4, 0, 0, 0, 0}",
                &format!("[36] = {{{}}}", list(&bytes)),
            )
            .replace(
                "\n.visible .entry k(",
                &format!(
                    "\t// .globl\t__ferrocuda_launch__k\n.visible .global .align 1 .b8 \
                     __ferrocuda_launch__k[{}] = {{{}}};\n\n.visible .entry k(",
                    launch::LEN,
                    list(trimmed)
                ),
            );
        let Processed {
            ptx: clean,
            kernels,
            ..
        } = process_ptx(&ptx).unwrap();
        assert!(!clean.contains("__ferrocuda_launch__"), "{clean}");
        assert!(clean.contains(")\n.reqntid 16, 8, 1\n{"), "{clean}");
        assert_eq!(kernels[0].launch.block, Some([16, 8, 1]));
        assert_eq!(kernels[0].launch.grid_dims, Some(2));
        // The entries are parsed as before, directive and all.
        assert_eq!(ptx_entries(&clean).unwrap()[0].param_sizes, vec![16, 4]);

        let max = LaunchDecl {
            max_threads: 128,
            ..LaunchDecl::default()
        };
        let with = apply_launch_bounds(SAMPLE, "k", &max).unwrap();
        assert!(
            with.contains("k_param_1\n)\n.maxntid 128, 1, 1\n{"),
            "{with}"
        );
        assert!(
            apply_launch_bounds(&with, "k", &max).is_err(),
            "applied twice"
        );
        let occupancy = LaunchDecl {
            min_blocks: 2,
            ..max
        };
        let with = apply_launch_bounds(SAMPLE, "k", &occupancy).unwrap();
        assert!(
            with.contains("k_param_1\n)\n.maxntid 128, 1, 1\n.minnctapersm 2\n{"),
            "{with}"
        );
        assert!(apply_launch_bounds(SAMPLE, "other", &max).is_err());
        assert_eq!(
            apply_launch_bounds(SAMPLE, "k", &LaunchDecl::default()).unwrap(),
            SAMPLE
        );
        // A launch record without its kernel, or a corrupt one, is an error.
        let orphan = ptx.replace("__ferrocuda_launch__k[", "__ferrocuda_launch__q[");
        assert!(process_ptx(&orphan).unwrap_err().contains("`q`"));
        let corrupt = ptx.replace(
            &format!("__ferrocuda_launch__k[{}] = {{70,", launch::LEN),
            &format!("__ferrocuda_launch__k[{}] = {{71,", launch::LEN),
        );
        assert!(process_ptx(&corrupt)
            .unwrap_err()
            .contains("launch record of `k`"));
        // PTX built before the cooperative and cluster options: its 16-byte record ("FCL3")
        // still reads.
        let old = ptx.replace(
            &format!("__ferrocuda_launch__k[{}] = {{70, 67, 76, 53,", launch::LEN),
            &format!(
                "__ferrocuda_launch__k[{}] = {{70, 67, 76, 51,",
                launch::LEN_V3
            ),
        );
        assert_ne!(old, ptx);
        let Processed { kernels, .. } = process_ptx(&old).unwrap();
        assert_eq!(kernels[0].launch.block, Some([16, 8, 1]));
        assert_eq!(kernels[0].launch.cooperative, None);
        // A cooperative kernel's record: no directive, the flag in the manifest.
        let coop = LaunchDecl {
            cooperative: true,
            ..LaunchDecl::default()
        };
        let coop_rec = coop.encode();
        let coop_trimmed = &coop_rec[..coop_rec.iter().rposition(|&b| b != 0).unwrap() + 1];
        let with_coop = ptx.replace(
            &format!("[{}] = {{{}}}", launch::LEN, list(trimmed)),
            &format!("[{}] = {{{}}}", launch::LEN, list(coop_trimmed)),
        );
        let Processed {
            ptx: clean,
            kernels,
            ..
        } = process_ptx(&with_coop).unwrap();
        assert!(!clean.contains(".reqntid"), "{clean}");
        assert_eq!(kernels[0].launch.cooperative, Some(true));
        assert!(kernels[0].launch.needs_launch_attributes());
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
