//! ptxas: assembling the PTX for a GPU architecture and reading its resource report
//! (`ptxas -v`): registers, stack frame, spills, shared memory, barriers per function.

use super::rules::{Finding, Rule, Severity};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// ptxas's resource report for one function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// The function (entry or non-inlined `.func`).
    pub name: String,
    /// The architecture assembled for (`sm_80`).
    pub arch: String,
    /// A kernel entry (else a non-inlined function).
    pub entry: bool,
    /// Registers per thread (entries only).
    pub registers: Option<u32>,
    /// Bytes of stack frame (`None`: not reported).
    pub stack: Option<u32>,
    /// Bytes of spill stores.
    pub spill_stores: Option<u32>,
    /// Bytes of spill loads.
    pub spill_loads: Option<u32>,
    /// Named barriers used (entries only).
    pub barriers: Option<u32>,
    /// Bytes of static shared memory (entries only; `None` when ptxas reports none).
    pub shared: Option<u32>,
    /// Other remarks (e.g. a stack size that cannot be statically determined).
    pub notes: Vec<String>,
}

/// The number before `suffix` in `line` (`"Used 18 registers"` → 18 for `" registers"`).
fn number_before(line: &str, suffix: &str) -> Option<u32> {
    let at = line.find(suffix)?;
    let digits = line[..at].rsplit(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// The text between the first pair of single quotes after `marker`.
fn quoted_after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let open = rest.find('\'')?;
    let close = rest[open + 1..].find('\'')?;
    Some(&rest[open + 1..open + 1 + close])
}

/// Per-function resources from `ptxas -v` output.
pub fn parse_report(text: &str, arch: &str) -> BTreeMap<String, Resources> {
    let mut props: BTreeMap<String, Resources> = BTreeMap::new();
    let mut current: Option<String> = None; // the entry being compiled
    let mut pending: Option<String> = None; // the function of the last "Function properties"
    let get = |name: &str, props: &mut BTreeMap<String, Resources>| {
        props.entry(name.to_string()).or_insert_with(|| Resources {
            name: name.to_string(),
            arch: arch.to_string(),
            ..Resources::default()
        });
    };
    for line in text.lines() {
        if let Some(name) = quoted_after(line, "Compiling entry function") {
            get(name, &mut props);
            if let Some(p) = props.get_mut(name) {
                p.entry = true;
            }
            current = Some(name.to_string());
            pending = None;
        } else if let Some(name) = line.split("Function properties for ").nth(1) {
            let name = name.trim();
            get(name, &mut props);
            pending = Some(name.to_string());
        } else if let (Some(name), Some(stack)) =
            (&pending, number_before(line, " bytes stack frame"))
        {
            let p = props.get_mut(name).expect("inserted above");
            p.stack = Some(stack);
            p.spill_stores = number_before(line, " bytes spill stores");
            p.spill_loads = number_before(line, " bytes spill loads");
            pending = None;
        } else if let Some(name) = quoted_after(line, "Stack size for ") {
            get(name, &mut props);
            let p = props.get_mut(name).expect("inserted above");
            p.notes
                .push("stack size cannot be statically determined".into());
        } else if let (Some(name), Some(regs)) = (&current, number_before(line, " registers")) {
            let p = props.get_mut(name).expect("inserted above");
            p.registers = Some(regs);
            p.barriers = number_before(line, " barriers").or(p.barriers);
            p.shared = number_before(line, " bytes smem").or(p.shared);
        } else if line.contains("Compile time") || line.contains("bytes gmem") {
            pending = None;
        }
    }
    props
}

/// Every entry reported, each function with a 0-byte stack frame and no spills.
pub fn check_report(
    props: &BTreeMap<String, Resources>,
    entries: &[&str],
    arch: &str,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |name: &str, rule: Rule, severity: Severity, message: String| {
        out.push(Finding {
            function: Some(name.to_string()),
            rule,
            severity,
            message,
            arch: Some(arch.to_string()),
            line: None,
            source: None,
        });
    };
    for &name in entries {
        if !props.get(name).is_some_and(|p| p.entry) {
            add(
                name,
                Rule::Ptxas,
                Severity::Error,
                "no ptxas report for this entry".into(),
            );
        }
    }
    for (name, p) in props {
        let kind = if p.entry { "entry" } else { "function" };
        for note in &p.notes {
            add(
                name,
                Rule::Stack,
                Severity::Warning,
                format!("{kind}: {note}"),
            );
        }
        let Some(stack) = p.stack else {
            if p.entry {
                add(
                    name,
                    Rule::Stack,
                    Severity::Warning,
                    format!("{kind}: ptxas reported no stack frame size"),
                );
            }
            continue;
        };
        if stack > 0 {
            add(
                name,
                Rule::Stack,
                Severity::Warning,
                format!("{kind} has a {stack}-byte stack frame"),
            );
        }
        let (st, ld) = (p.spill_stores.unwrap_or(0), p.spill_loads.unwrap_or(0));
        if st > 0 || ld > 0 {
            add(
                name,
                Rule::Spill,
                Severity::Warning,
                format!("{kind} spills registers: {st} bytes stores, {ld} bytes loads"),
            );
        }
    }
    out
}

/// ptxas's word that it serialized a function's `wgmma.mma_async` instructions (a missing
/// fence, their registers touched in between, too few registers), as warnings of
/// [`Rule::Wgmma`]: the code stays correct, the MMAs no longer overlap.
pub fn wgmma_findings(report: &str, arch: &str) -> Vec<Finding> {
    super::wgmma::serialized(report)
        .into_iter()
        .map(|(function, said)| Finding {
            function: (!function.is_empty()).then_some(function),
            rule: Rule::Wgmma,
            severity: Severity::Warning,
            message: format!(
                "ptxas: {said} — the tensor cores wait for each MMA. Usually a missing \
                 `wgmma::fence()`, or the accumulators touched between the fence and the MMAs \
                 (ferrocuda_device::wgmma's thread model)"
            ),
            arch: Some(arch.to_string()),
            line: None,
            source: None,
        })
        .collect()
}

/// The ptxas to run: `$FERROCUDA_PTXAS` (when set, the answer), `$CUDA_HOME/bin/ptxas`,
/// `$CUDA_PATH/bin/ptxas`, `PATH`, `/usr/local/cuda/bin/ptxas`, the `nvidia-cuda-nvcc-cu12`
/// wheel of `python3`, then `<fallback_root>/bin/ptxas`.
pub fn find(fallback_root: Option<&Path>) -> Option<std::path::PathBuf> {
    crate::cuda::find_ptxas(fallback_root).found
}

/// Runs `ptxas -arch=<arch> -v` on `ptx` (output to a temporary cubin): `Ok(report)` when it
/// succeeds, `Err(output)` when it fails.
pub fn run(ptxas: &Path, arch: &str, ptx: &Path) -> Result<String, String> {
    let cubin = std::env::temp_dir().join(format!(
        "ferrocuda-ptxas-{}-{:?}.cubin",
        std::process::id(),
        std::thread::current().id()
    ));
    let out = assemble(ptxas, arch, ptx, &cubin);
    let _ = std::fs::remove_file(&cubin);
    out
}

/// Runs `ptxas -arch=<arch> -v -o <cubin>` on `ptx`: the cubin is written to `cubin`, and the
/// result is `Ok(report)` when it succeeds, `Err(output)` when it fails.
///
/// With `$FERROCUDA_PTXAS_CACHE` set (a directory), a successful run's cubin and report are
/// kept there ([`cache`]), and a later run on the same PTX bytes for the same architecture
/// with the same ptxas is answered from it: the bundled kernels are assembled by the build
/// script of each profile, the PTX checks and several SASS tests, each run of the same input.
pub fn assemble(ptxas: &Path, arch: &str, ptx: &Path, cubin: &Path) -> Result<String, String> {
    match ferrocuda_config::PTXAS_CACHE.path() {
        Some(dir) => cache::assemble(&dir, ptxas, arch, ptx, cubin),
        None => assemble_uncached(ptxas, arch, ptx, cubin),
    }
}

/// [`assemble`] without the cache.
fn assemble_uncached(ptxas: &Path, arch: &str, ptx: &Path, cubin: &Path) -> Result<String, String> {
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg("-o")
        .arg(cubin)
        .arg(ptx)
        .output()
        .map_err(|e| format!("could not run {}: {e}", ptxas.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "ptxas -arch={arch} failed ({}):\n{}",
            out.status,
            text.trim_end()
        ))
    }
}

/// ptxas's results kept by their inputs, in a directory of entries: `<key>/` holds the PTX
/// (its exact bytes), `args` (the ptxas — path, size, modification time — and the
/// architecture), `cubin` and `report`. An entry answers a run only when its PTX and `args`
/// equal the run's byte for byte (the key, a hash, only names the entry), so a hash collision
/// costs a run, never a wrong cubin. Entries are written under a temporary name and renamed
/// into place (parallel test threads and processes may race: the loser's rename fails, its
/// result is the same); the [`KEEP`](cache::KEEP) entries used last stay, older ones are removed. Any
/// failure to read or write the cache runs ptxas as without it; failed runs are not kept.
pub mod cache {
    use std::fs;
    use std::path::Path;
    use std::time::SystemTime;

    /// Entries kept (the most recently used). Enough for the whole test command: its build
    /// scripts assemble the bundled kernels, then the builder's and the device tests' hundred
    /// or so runs come before the PTX checks assemble the bundled kernels again; with 32 the
    /// bundled entries were gone by then (most entries are a test kernel's few kilobytes).
    pub const KEEP: usize = 256;

    /// FNV-1a, 64 bits, over `parts`.
    fn fnv(parts: &[&[u8]]) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for p in parts {
            for &b in *p {
                h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
            }
            h = (h ^ 0xff).wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }

    /// What names the ptxas and the architecture of a run.
    fn args(ptxas: &Path, arch: &str) -> Option<String> {
        let real = fs::canonicalize(ptxas).ok()?;
        let meta = fs::metadata(&real).ok()?;
        let mtime = meta
            .modified()
            .ok()?
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()?;
        Some(format!(
            "{}\n{}\n{}.{:09}\n-arch={arch} -v\n",
            real.display(),
            meta.len(),
            mtime.as_secs(),
            mtime.subsec_nanos()
        ))
    }

    /// [`super::assemble`] through the cache at `dir`.
    pub fn assemble(
        dir: &Path,
        ptxas: &Path,
        arch: &str,
        ptx: &Path,
        cubin: &Path,
    ) -> Result<String, String> {
        let (Ok(source), Some(args)) = (fs::read(ptx), args(ptxas, arch)) else {
            return super::assemble_uncached(ptxas, arch, ptx, cubin);
        };
        let key = format!("{:016x}-{}", fnv(&[args.as_bytes(), &source]), source.len());
        let entry = dir.join(&key);
        if let Some(report) = hit(&entry, &args, &source, cubin) {
            return Ok(report);
        }
        let report = super::assemble_uncached(ptxas, arch, ptx, cubin)?;
        // Best effort: a cache that cannot be written changes nothing but the time.
        let _ = store(dir, &entry, &args, &source, cubin, &report);
        Ok(report)
    }

    /// The entry's report, its cubin copied to `cubin`, when it is this run's.
    fn hit(entry: &Path, args: &str, source: &[u8], cubin: &Path) -> Option<String> {
        if fs::read_to_string(entry.join("args")).ok()? != args {
            return None;
        }
        if fs::read(entry.join("ptx")).ok()? != source {
            return None;
        }
        let report = fs::read_to_string(entry.join("report")).ok()?;
        fs::copy(entry.join("cubin"), cubin).ok()?;
        // Used now: the last to be evicted.
        let _ = fs::File::open(entry.join("args")).and_then(|f| f.set_modified(SystemTime::now()));
        Some(report)
    }

    /// Writes the entry (under a temporary name, then renamed) and evicts the oldest beyond
    /// [`KEEP`].
    fn store(
        dir: &Path,
        entry: &Path,
        args: &str,
        source: &[u8],
        cubin: &Path,
        report: &str,
    ) -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(
            ".tmp-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir(&tmp)?;
        fs::write(tmp.join("ptx"), source)?;
        fs::copy(cubin, tmp.join("cubin"))?;
        fs::write(tmp.join("report"), report)?;
        fs::write(tmp.join("args"), args)?;
        if fs::rename(&tmp, entry).is_err() {
            let _ = fs::remove_dir_all(&tmp);
        }
        evict(dir)
    }

    /// Removes all but the [`KEEP`] entries used last.
    fn evict(dir: &Path) -> std::io::Result<()> {
        let mut entries: Vec<(SystemTime, std::path::PathBuf)> = fs::read_dir(dir)?
            .filter_map(|e| {
                let e = e.ok()?;
                if e.file_name().to_string_lossy().starts_with('.') {
                    return None;
                }
                let used = fs::metadata(e.path().join("args")).ok()?.modified().ok()?;
                Some((used, e.path()))
            })
            .collect();
        if entries.len() > KEEP {
            entries.sort();
            for (_, p) in &entries[..entries.len() - KEEP] {
                let _ = fs::remove_dir_all(p);
            }
        }
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::path::PathBuf;

        fn scratch(name: &str) -> PathBuf {
            let d = std::env::temp_dir().join(format!(
                "ferrocuda-ptxas-cache-test-{name}-{}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&d);
            fs::create_dir_all(&d).unwrap();
            d
        }

        /// A stand-in ptxas (a shell script) that counts its runs and writes the PTX's bytes
        /// and the architecture as the "cubin": the cache's behaviour without a CUDA toolkit.
        fn fake_ptxas(dir: &Path) -> PathBuf {
            let p = dir.join("ptxas");
            fs::write(
                &p,
                "#!/bin/sh\necho run >> \"$(dirname \"$0\")/runs\"\n\
                 arch=\"$1\"; out=\"$4\"; in=\"$5\"\n\
                 grep -q FAIL \"$in\" && { echo bad >&2; exit 1; }\n\
                 { echo \"$arch\"; cat \"$in\"; } > \"$out\"\necho \"report $arch\"\n",
            )
            .unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
            }
            p
        }

        fn runs(dir: &Path) -> usize {
            fs::read_to_string(dir.join("runs"))
                .map(|s| s.lines().count())
                .unwrap_or(0)
        }

        #[cfg(unix)]
        #[test]
        fn a_run_is_answered_only_by_the_same_bytes_arch_and_ptxas() {
            let d = scratch("hits");
            let ptxas = fake_ptxas(&d);
            let cache = d.join("cache");
            let (ptx, cubin) = (d.join("k.ptx"), d.join("k.cubin"));
            fs::write(&ptx, "ptx one").unwrap();
            let first = assemble(&cache, &ptxas, "sm_80", &ptx, &cubin).unwrap();
            assert_eq!(first.trim(), "report -arch=sm_80");
            assert_eq!(runs(&d), 1);
            fs::write(&cubin, "poison").unwrap();
            // The same input: from the cache, the cubin as ptxas wrote it.
            let again = assemble(&cache, &ptxas, "sm_80", &ptx, &cubin).unwrap();
            assert_eq!((again, runs(&d)), (first, 1));
            assert_eq!(fs::read_to_string(&cubin).unwrap(), "-arch=sm_80\nptx one");
            // Another arch, other bytes (same length too): ptxas runs.
            assemble(&cache, &ptxas, "sm_90", &ptx, &cubin).unwrap();
            assert_eq!(runs(&d), 2);
            fs::write(&ptx, "ptx two").unwrap();
            assemble(&cache, &ptxas, "sm_80", &ptx, &cubin).unwrap();
            assert_eq!(runs(&d), 3);
            assert_eq!(fs::read_to_string(&cubin).unwrap(), "-arch=sm_80\nptx two");
            // An entry whose key matches but whose PTX differs (a collision) is not used.
            let entry = fs::read_dir(&cache)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| fs::read(p.join("ptx")).unwrap() == b"ptx two")
                .unwrap();
            fs::write(entry.join("ptx"), "ptx 2wo").unwrap();
            assemble(&cache, &ptxas, "sm_80", &ptx, &cubin).unwrap();
            assert_eq!(runs(&d), 4);
            // Another ptxas (a changed file): a run.
            fs::write(&ptx, "ptx one").unwrap();
            let mut text = fs::read_to_string(&ptxas).unwrap();
            text.push_str("# changed\n");
            fs::write(&ptxas, text).unwrap();
            assemble(&cache, &ptxas, "sm_80", &ptx, &cubin).unwrap();
            assert_eq!(runs(&d), 5);
            // A failed run is an error, every time (not kept).
            fs::write(&ptx, "FAIL").unwrap();
            for n in [6, 7] {
                assert!(assemble(&cache, &ptxas, "sm_80", &ptx, &cubin).is_err());
                assert_eq!(runs(&d), n);
            }
            let _ = fs::remove_dir_all(&d);
        }

        #[cfg(unix)]
        #[test]
        fn the_entries_used_last_are_kept() {
            let d = scratch("evict");
            let ptxas = fake_ptxas(&d);
            let cache = d.join("cache");
            let (ptx, cubin) = (d.join("k.ptx"), d.join("k.cubin"));
            for i in 0..KEEP + 5 {
                fs::write(&ptx, format!("ptx {i}")).unwrap();
                assemble(&cache, &ptxas, "sm_80", &ptx, &cubin).unwrap();
            }
            assert_eq!(fs::read_dir(&cache).unwrap().count(), KEEP);
            // The newest are there.
            fs::write(&ptx, format!("ptx {}", KEEP + 4)).unwrap();
            let before = runs(&d);
            assemble(&cache, &ptxas, "sm_80", &ptx, &cubin).unwrap();
            assert_eq!(runs(&d), before);
            let _ = fs::remove_dir_all(&d);
        }
    }
}
