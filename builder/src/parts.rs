//! A build's parts: the base PTX (every kernel without an `arch`) and one PTX per architecture
//! kernels declare (`#[kernel(arch = "sm_90a")]`), each compiled, checked and assembled into
//! its cubins, then the manifest that names them all.

use crate::arch::arch_number;
use crate::builder::{BuildOutput, PartOutput, PtxBuilder};
use crate::child::{self, ChildBuild};
use crate::files::{write_bytes_if_changed, write_if_changed};
use crate::llvm::Pipeline;
use crate::locate::Located;
use crate::toolchain::Toolchain;
use crate::{check, cuda, fail, process_ptx, verify, BuildError, BuildErrorKind};
use ferrocuda_abi::manifest::{self, Manifest};
use std::path::{Path, PathBuf};
use std::time::Instant;

impl PtxBuilder {
    /// Builds the kernel crate and writes `<lib>.ptx` and `<lib>.json` to the output directory
    /// — and, when kernels declare another architecture (`#[kernel(arch = "sm_90a")]`), one
    /// more PTX per such architecture (`<lib>.sm_90a.ptx`, its cubins beside it), named in the
    /// manifest's `parts`.
    pub fn build(&self) -> Result<BuildOutput, BuildError> {
        let start = Instant::now();
        let (crate_dir, cargo_toml, crate_name) = self.crate_info()?;
        let cubin_archs = self.cubin_list()?;
        let lib_name = crate_name.replace('-', "_");
        let (out_dir, target_dir) = self.dirs(&crate_dir)?;
        let toolchain = Toolchain::detect(&crate_dir)?;
        let job = Job {
            crate_dir: &crate_dir,
            cargo_toml: &cargo_toml,
            crate_name: &crate_name,
            lib_name: &lib_name,
            out_dir: &out_dir,
            target_dir: &target_dir,
            toolchain: &toolchain,
        };
        // Another build of the crate into this target directory (another process's build
        // script, another thread) writes the same files: one at a time, for the whole build.
        let stem = self.stem(&job, &target_dir, None);
        let _lock = crate::lock::exclusive(
            &with_ext(&stem, "lock"),
            &self.control,
            &format!(
                "waiting for another build of `{crate_name}` ({})",
                stem.display()
            ),
        )?;
        let base = self.build_part(&job, &self.arch, None, &cubin_archs)?;
        let mut kernels = base.kernels;
        let mut resources = base.resources;
        let mut warnings = base.warnings;
        let mut libdevice = base.libdevice;
        let mut parts = std::collections::BTreeMap::new();
        let mut part_files = std::collections::BTreeMap::new();
        // The architectures the base build's kernels asked for, each with its kernels.
        let mut wanted: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for (kernel, arch) in &base.requests {
            wanted.entry(arch.clone()).or_default().push(kernel.clone());
        }
        for (arch, names) in &wanted {
            let part_cubins = part_cubin_archs(arch, &cubin_archs);
            let built = self.build_part(&job, arch, Some(arch), &part_cubins)?;
            let got: Vec<&String> = built.kernels.iter().map(|k| &k.name).collect();
            let mut want: Vec<&String> = names.iter().collect();
            want.sort();
            if got != want {
                return fail(
                    BuildErrorKind::Manifest,
                    format!(
                        "kernel crate `{crate_name}`: the {arch} build made kernels {got:?}, but \
                         the kernels declared for {arch} are {want:?}"
                    ),
                );
            }
            kernels.extend(built.kernels.into_iter().map(|mut k| {
                k.arch = Some(arch.clone());
                k
            }));
            resources.extend(built.resources);
            warnings.extend(built.warnings);
            libdevice = libdevice.or(built.libdevice);
            parts.insert(
                arch.clone(),
                manifest::Part {
                    ptx: file_name(&built.ptx),
                    cubins: built
                        .cubins
                        .iter()
                        .map(|(a, p)| (a.clone(), file_name(p)))
                        .collect(),
                },
            );
            part_files.insert(
                arch.clone(),
                PartOutput {
                    ptx: built.ptx,
                    cubins: built.cubins,
                },
            );
        }
        kernels.sort_by(|a, b| a.name.cmp(&b.name));
        let manifest = Manifest {
            format: manifest::format_for(&kernels, !parts.is_empty()),
            arch: self.arch.clone(),
            ptx: file_name(&base.ptx),
            fp_contract: self.fp_contract,
            kernels,
            cubins: base
                .cubins
                .iter()
                .map(|(a, p)| (a.clone(), file_name(p)))
                .collect(),
            parts,
        };
        let manifest_path = out_dir.join(format!("{lib_name}.json"));
        write_if_changed(&manifest_path, &(manifest.to_json() + "\n"))?;
        let child = ChildBuild {
            cargo_toml: &cargo_toml,
            crate_name: &crate_name,
            arch: &self.arch,
            part: None,
            target_dir: &target_dir,
            release: self.release,
            bitcode: Path::new(""),
            control: &self.control,
            line_tables: false,
        };
        Ok(BuildOutput {
            ptx: base.ptx,
            manifest_path,
            manifest,
            sources: child.sources(&lib_name),
            libdevice,
            resources,
            ptxas: base.ptxas,
            warnings,
            cubins: base.cubins,
            parts: part_files,
            note: note_with_download(base.note, start),
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Builds one part of the crate: the base (`part` = `None`: every kernel without an
    /// `arch`), or the kernels declared for `part`; `arch` is the target CPU. Writes its PTX
    /// and cubins to the output directory.
    fn build_part(
        &self,
        job: &Job<'_>,
        arch: &str,
        part: Option<&str>,
        cubin_archs: &[String],
    ) -> Result<BuiltPart, BuildError> {
        let crate_name = job.crate_name;
        let lib_name = job.lib_name;
        let stem = self.stem(job, job.target_dir, part);
        let explicit = self.libdevice.as_deref().map(|p| self.resolve(p));
        let fallback = self.cuda_fallback.as_deref().map(|p| self.resolve(p));
        let find_libdevice = || {
            cuda::or_download(
                || cuda::find_libdevice(explicit.as_deref(), fallback.as_deref()),
                self.download,
            )
        };
        let control = &self.control;
        let pipeline = Pipeline {
            control,
            toolchain: job.toolchain,
            arch,
            fp_contract: self.fp_contract,
            stem: &stem,
            find_libdevice: &find_libdevice,
            line_tables: false,
        };
        let bitcode = pipeline.file("bc");
        let child = ChildBuild {
            cargo_toml: job.cargo_toml,
            crate_name,
            arch,
            part,
            target_dir: job.target_dir,
            release: self.release,
            bitcode: &bitcode,
            control,
            line_tables: false,
        };
        let what = part.map_or(String::new(), |p| format!(", its {p} kernels"));
        control.stage(
            &format!("cargo: compiling `{crate_name}` for {arch}{what}"),
            || child.run(),
        )?;
        let in_crate = |kind: BuildErrorKind, m: String| BuildError {
            kind,
            message: match part {
                None => format!("kernel crate `{crate_name}`: {m}"),
                Some(a) => format!("kernel crate `{crate_name}`, its {a} kernels: {m}"),
            },
        };
        let generated = control
            .stage("LLVM: bitcode to PTX", || pipeline.run(&bitcode))
            .map_err(|e| in_crate(e.kind, e.message))?;
        let processed_ptx =
            process_ptx(&generated.ptx).map_err(|m| in_crate(BuildErrorKind::Manifest, m))?;
        if part.is_some() && !processed_ptx.requests.is_empty() {
            return Err(in_crate(
                BuildErrorKind::Manifest,
                "a part's build asked for further architectures".into(),
            ));
        }
        let ptx = processed_ptx.ptx;
        // ptxas checks the module as it ships: records removed, launch bounds written in.
        let processed = pipeline.file("processed.ptx");
        write_if_changed(&processed, &ptx)?;
        let cubin_files: Vec<(String, PathBuf)> = cubin_archs
            .iter()
            .map(|a| (a.clone(), pipeline.file(&format!("{a}.cubin"))))
            .collect();
        let dynamic_shared = processed_ptx
            .kernels
            .iter()
            .filter_map(|k| Some((k.name.clone(), k.launch.shared_bytes?)))
            .collect();
        let checked = control
            .stage("checks: PTX rules, ptxas, cubins", || {
                verify::verify(
                    &ptx,
                    &dynamic_shared,
                    &processed,
                    arch,
                    fallback.as_deref(),
                    self.ptxas_report,
                    self.download,
                    &cubin_files,
                )
            })
            .map_err(|e| in_crate(e.kind, e.message))?;
        control.check()?;
        let (mut errors, mut warnings) = (checked.errors, checked.warnings);
        // The Rust lines of the findings about a function or an instruction (errors, and
        // warnings such as local memory, spills or a barrier under loaded data), from a second
        // build with line tables — only read: what ships is never built with them. A clean
        // build (the usual case) pays nothing.
        let locatable = |f: &check::Finding| f.function.is_some() || f.line.is_some();
        if errors.iter().chain(&warnings).any(locatable) {
            let located = control.stage("checks: finding the Rust lines", || {
                Ok(self.located_ptx(job, arch, part, &find_libdevice))
            })?;
            if let Some(located) = located {
                let at = Located::new(&ptx, &located, job.crate_dir);
                at.locate(&mut errors);
                at.locate(&mut warnings);
            }
            control.check()?;
        }
        if !errors.is_empty() {
            return Err(in_crate(BuildErrorKind::Check, verify::failure(&errors)));
        }
        let prefix = match part {
            None => lib_name.to_string(),
            Some(a) => format!("{lib_name}.{a}"),
        };
        let mut cubins = std::collections::BTreeMap::new();
        for (cubin_arch, made) in &checked.cubins {
            let bytes = std::fs::read(made).or_else(|e| {
                fail(
                    BuildErrorKind::Io,
                    format!("cannot read {}: {e}", made.display()),
                )
            })?;
            let path = job.out_dir.join(format!("{prefix}.{cubin_arch}.cubin"));
            write_bytes_if_changed(&path, &bytes)?;
            cubins.insert(cubin_arch.clone(), path);
        }
        let ptx_path = job.out_dir.join(format!("{prefix}.ptx"));
        write_if_changed(&ptx_path, &ptx)?;
        Ok(BuiltPart {
            ptx: ptx_path,
            kernels: processed_ptx.kernels,
            requests: processed_ptx.requests,
            cubins,
            resources: checked.resources,
            ptxas: checked.ptxas,
            warnings,
            note: checked.note,
            libdevice: generated.libdevice,
        })
    }

    /// The path prefix of a part's files in `dir` (`<stem>.bc`, `<stem>.ll`, …; `part`:
    /// `None` for the base). Cargo leaves rustc's output alone when it finds the crate fresh,
    /// so every file name must be private to this crate, profile and arch: a target directory
    /// shared by two crates of one library name (or one crate in both profiles) must never
    /// hand back the other's module. A part's files are the base arch's too: two builds of one
    /// crate for two base archs (running at once) each build their own copy of a part. Builds
    /// with one base stem — the same crate, base arch and profile — take turns on its lock
    /// (`<base stem>.lock`), which so covers every file of theirs.
    fn stem(&self, job: &Job<'_>, dir: &Path, part: Option<&str>) -> PathBuf {
        dir.join(format!(
            "{}.{}{}.{}.{:016x}",
            job.lib_name,
            self.arch,
            part.map_or(String::new(), |p| format!("+{p}")),
            child::profile(self.release).1,
            child::path_hash(job.crate_dir)
        ))
    }

    /// The crate's module built once more with line tables, records removed as in the
    /// checked module; `None` when that build fails (the findings then go unlocated).
    fn located_ptx(
        &self,
        job: &Job<'_>,
        arch: &str,
        part: Option<&str>,
        find_libdevice: &dyn Fn() -> cuda::Search,
    ) -> Option<String> {
        // Its own target directory: the other debuginfo setting would rebuild every crate of
        // the plain build's (and back).
        let target_dir = job.target_dir.join("ferrocuda-lines");
        std::fs::create_dir_all(&target_dir).ok()?;
        let stem = self.stem(job, &target_dir, part);
        let pipeline = Pipeline {
            control: &self.control,
            toolchain: job.toolchain,
            arch,
            fp_contract: self.fp_contract,
            stem: &stem,
            find_libdevice,
            line_tables: true,
        };
        let bitcode = pipeline.file("bc");
        let child = ChildBuild {
            cargo_toml: job.cargo_toml,
            crate_name: job.crate_name,
            arch,
            part,
            target_dir: &target_dir,
            release: self.release,
            bitcode: &bitcode,
            control: &self.control,
            line_tables: true,
        };
        child.run().ok()?;
        let generated = pipeline.run(&bitcode).ok()?;
        Some(process_ptx(&generated.ptx).map_or(generated.ptx, |p| p.ptx))
    }
}

/// `note`, after a line saying what the builder downloaded during the build that began at
/// `start` (if it did).
fn note_with_download(note: Option<String>, start: Instant) -> Option<String> {
    let downloaded = cuda::last_download()
        .filter(|d| d.at >= start)
        .and_then(|d| d.result.ok())
        .filter(|m| m.starts_with("downloaded"));
    match (downloaded, note) {
        (Some(d), Some(n)) => Some(format!("{d}; {n}")),
        (d, n) => d.or(n),
    }
}

/// What every part of one build shares.
struct Job<'a> {
    crate_dir: &'a Path,
    cargo_toml: &'a Path,
    crate_name: &'a str,
    lib_name: &'a str,
    out_dir: &'a Path,
    target_dir: &'a Path,
    toolchain: &'a Toolchain,
}

/// One part's build.
struct BuiltPart {
    ptx: PathBuf,
    kernels: Vec<manifest::KernelSig>,
    /// Kernel → architecture, of the kernels the base build found declared for another.
    requests: std::collections::BTreeMap<String, String>,
    cubins: std::collections::BTreeMap<String, PathBuf>,
    resources: Vec<check::ptxas::Resources>,
    ptxas: Option<PathBuf>,
    warnings: Vec<check::Finding>,
    note: Option<String>,
    libdevice: Option<PathBuf>,
}

/// The cubins of a part built for `arch`: an architecture-specific or family target only for
/// itself (its machine code runs on nothing else); a portable one for itself and every arch
/// of the crate's cubin list newer than it.
fn part_cubin_archs(arch: &str, crate_list: &[String]) -> Vec<String> {
    use ferrocuda_abi::arch::{Arch, Variant};
    let Some(a) = Arch::parse(arch) else {
        return Vec::new();
    };
    if a.variant != Variant::Portable {
        return vec![arch.to_string()];
    }
    std::iter::once(arch.to_string())
        .chain(
            crate_list
                .iter()
                .filter(|c| arch_number(c).is_some_and(|n| n > a.number()))
                .cloned(),
        )
        .collect()
}

/// `<path>.<ext>` (a stem's file: the stem's own dots are no extension).
fn with_ext(path: &Path, ext: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    s.into()
}

/// The file name of `path` (as the manifest names the files beside it).
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
