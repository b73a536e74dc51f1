//! PTX modules and their kernels: loaded once per device, looked up by name or family.
//!
//! A [`Module`] pairs PTX text with its [`Manifest`] (both produced by `ferrocuda-builder`),
//! and the cubins the builder assembled from that PTX (`sm_80`, `sm_90`, … machine code). A
//! module may have further *parts* ([`Manifest::parts`]): the kernels declared for another
//! architecture (`#[kernel(arch = "sm_90a")]`), each part a PTX of its own with its cubins.
//! Together, the base PTX and the parts are the module's *images* ([`Image`]).
//!
//! The first time a kernel of the module launches on a device, the module is loaded into that
//! device's primary context: every image whose architecture the device runs
//! ([`Arch::runs_on`]), each from the cubin [`choose_cubin`] picks for the device's compute
//! capability (machine code: nothing to compile), else from its PTX, which the driver
//! JIT-compiles (seconds for a large module when its JIT cache is cold or disabled). A cubin
//! the driver refuses (one made by a ptxas newer than the driver, say) falls back to the PTX
//! for that device; [`Module::loaded_image`] says which was loaded. A kernel of an image the
//! device cannot run is refused at launch, naming the kernel, its architecture and the
//! device's. The loaded functions, their occupancy-derived launch limits and the manifest
//! index are cached: a launch does no lookup by string and no allocation.

mod image;
mod load;
mod signature;

pub use image::{choose_cubin, Image};
pub use load::FunctionLimits;
pub(crate) use load::{Function, Loaded, OccupancyKey};
pub(crate) use signature::operand_text;
pub use signature::{
    Param, Requirement, ScratchParam, Signature, MAX_PARAMS, MAX_SCRATCH, PARAM_BUFFER_SIZE,
};

use crate::driver::{init, Context, MAX_DEVICES};
use crate::error::{Error, Result};
use ferrocuda_abi::arch::{Arch, DeviceArch};
use ferrocuda_abi::manifest::{KernelSig, Manifest};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

/// How [`Module::assemble`] reads a file the manifest names: its bytes, `None` when it is
/// not there.
type FileReader<'a> = dyn Fn(&str) -> Result<Option<Cow<'static, [u8]>>> + 'a;

/// A PTX module with its manifest: its images (the base PTX and the parts, with their
/// cubins) and the kernels' signatures.
pub struct Module {
    /// The base image first, then one per part in the manifest's order.
    images: Vec<Image>,
    /// Per kernel (manifest order), the index of the image that holds it.
    kernel_image: Vec<usize>,
    manifest: Manifest,
    signatures: Vec<Signature>,
    by_name: HashMap<String, usize>,
    /// Per kernel, the indices of its layout variants
    /// ([`KernelSig::is_layout_variant_of`]), in manifest order.
    layout_variants: Vec<Box<[usize]>>,
    /// Per kernel, the indices of its architecture variants
    /// ([`KernelSig::is_arch_variant_of`]), in manifest order.
    arch_variants: Vec<Box<[usize]>>,
    loaded: [OnceLock<std::result::Result<Loaded, Error>>; MAX_DEVICES],
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("arch", &self.manifest.arch)
            .field("cubins", &self.cubin_archs().collect::<Vec<_>>())
            .field("parts", &self.manifest.parts.keys().collect::<Vec<_>>())
            .field("kernels", &self.by_name.len())
            .finish()
    }
}

/// The indices of `manifest`'s kernels related to each kernel by `related`.
fn related(manifest: &Manifest, related: fn(&KernelSig, &KernelSig) -> bool) -> Vec<Box<[usize]>> {
    let all = &manifest.kernels;
    all.iter()
        .map(|k| {
            let others = all.iter().enumerate();
            others
                .filter(|(_, o)| related(o, k))
                .map(|(i, _)| i)
                .collect()
        })
        .collect()
}

impl Module {
    /// A module from PTX text and its manifest. Loads nothing yet (no driver needed).
    pub fn new(ptx: impl Into<String>, manifest: Manifest) -> Result<Module> {
        Module::with_cubins(ptx, manifest, Vec::new())
    }

    /// A module from PTX text, its manifest and cubins assembled from that PTX: (arch such as
    /// `"sm_90"`, the cubin file's bytes). Loads nothing yet (no driver needed); a device loads
    /// the cubin [`choose_cubin`] picks for it, else the PTX. For a manifest with parts, use
    /// [`from_manifest_file`](Self::from_manifest_file) or [`embedded`](Self::embedded).
    pub fn with_cubins(
        ptx: impl Into<String>,
        manifest: Manifest,
        cubins: Vec<(String, Cow<'static, [u8]>)>,
    ) -> Result<Module> {
        let base = Image::new(&manifest.arch, ptx, cubins)?;
        if let Some(arch) = manifest.parts.keys().next() {
            return Err(Error::value(format!(
                "the manifest has a {arch} part: give its files too (Module::embedded, Module::from_manifest_file)"
            )));
        }
        Module::with_images(manifest, vec![base])
    }

    /// A module from its manifest and its images: the base image first, then one per
    /// [`Manifest::parts`] entry in the manifest's order.
    pub fn with_images(manifest: Manifest, images: Vec<Image>) -> Result<Module> {
        if images.len() != manifest.parts.len() + 1 {
            return Err(Error::value(format!(
                "a module of {} part(s) needs {} images, got {}",
                manifest.parts.len(),
                manifest.parts.len() + 1,
                images.len()
            )));
        }
        for (image, arch) in images
            .iter()
            .zip(std::iter::once(&manifest.arch).chain(manifest.parts.keys()))
        {
            if image.arch.to_string() != *arch {
                return Err(Error::value(format!(
                    "image built for {} where the manifest says {arch}",
                    image.arch
                )));
            }
        }
        let signatures = manifest
            .kernels
            .iter()
            .map(Signature::from_sig)
            .collect::<Result<Vec<_>>>()?;
        let mut by_name = HashMap::with_capacity(signatures.len());
        for (i, s) in signatures.iter().enumerate() {
            if by_name.insert(s.name.clone(), i).is_some() {
                return Err(Error::value(format!(
                    "kernel manifest: kernel `{}` is defined twice (a module's kernel names are \
                     its PTX entry names and must be unique; kernels of the same name in \
                     different modules are fine, each module has its own)",
                    s.name
                )));
            }
        }
        let kernel_image = manifest
            .kernels
            .iter()
            .map(|k| match &k.arch {
                None => Ok(0),
                Some(a) => manifest
                    .parts
                    .keys()
                    .position(|p| p == a)
                    .map(|i| i + 1)
                    .ok_or_else(|| {
                        Error::value(format!(
                            "kernel `{}` is built for {a}, a part the manifest lacks",
                            k.name
                        ))
                    }),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Module {
            layout_variants: related(&manifest, KernelSig::is_layout_variant_of),
            arch_variants: related(&manifest, KernelSig::is_arch_variant_of),
            images,
            kernel_image,
            manifest,
            signatures,
            by_name,
            loaded: [const { OnceLock::new() }; MAX_DEVICES],
        })
    }

    /// A module from PTX text and its manifest's JSON form (as the builder writes them;
    /// typed launchers embed both).
    pub fn from_json(ptx: impl Into<String>, manifest_json: &str) -> Result<Module> {
        let manifest = Manifest::from_json(manifest_json).map_err(Error::value)?;
        Module::new(ptx, manifest)
    }

    /// A module from PTX text, its manifest's JSON form and embedded cubins (arch, bytes), as
    /// typed launchers of modules without parts embed them.
    pub fn from_json_with_cubins(
        ptx: impl Into<String>,
        manifest_json: &str,
        cubins: &[(&str, &'static [u8])],
    ) -> Result<Module> {
        let manifest = Manifest::from_json(manifest_json).map_err(Error::value)?;
        let cubins = cubins
            .iter()
            .map(|&(arch, bytes)| (arch.to_owned(), Cow::Borrowed(bytes)))
            .collect();
        Module::with_cubins(ptx, manifest, cubins)
    }

    /// A module embedded in a binary, as the bundled module and typed launchers embed a
    /// build: the base PTX, the manifest's JSON form, the base PTX's cubins (arch, bytes) and
    /// the files of the parts the manifest names (file name, bytes: each part's PTX and
    /// cubins; empty for a module without parts).
    pub fn embedded(
        ptx: &'static str,
        manifest_json: &str,
        cubins: &[(&str, &'static [u8])],
        part_files: &[(&str, &'static [u8])],
    ) -> Result<Module> {
        let manifest = Manifest::from_json(manifest_json).map_err(Error::value)?;
        let base_ptx = manifest.ptx.clone();
        let base_cubins = manifest.cubins.clone();
        let file = |name: &str| -> Result<Option<Cow<'static, [u8]>>> {
            if name == base_ptx {
                return Ok(Some(Cow::Borrowed(ptx.as_bytes())));
            }
            let cubin = base_cubins
                .iter()
                .find(|(_, n)| *n == name)
                .and_then(|(arch, _)| cubins.iter().find(|(a, _)| a == arch));
            let found = cubin.or_else(|| part_files.iter().find(|(n, _)| *n == name));
            Ok(found.map(|&(_, b)| Cow::Borrowed(b)))
        };
        Module::assemble(manifest, &file, "the embedded module")
    }

    /// The module of `manifest` with each file it names read by `file` (`None`: a cubin left
    /// out, or a PTX missing — an error naming it and `from`).
    fn assemble(manifest: Manifest, file: &FileReader<'_>, from: &str) -> Result<Module> {
        let ptx_text = |name: &str, kernels: Vec<&KernelSig>| {
            let bytes =
                file(name)?.ok_or_else(|| Error::value(format!("{from}: no PTX file `{name}`")))?;
            let text = String::from_utf8(bytes.into_owned())
                .map_err(|_| Error::value(format!("{from}: `{name}` is not UTF-8 PTX text")))?;
            // A truncated, replaced or foreign PTX file fails here, naming it, rather than at
            // the first launch on a GPU.
            let defined = |k: &&&KernelSig| text.contains(&format!(".entry {}(", k.name));
            if let Some(k) = kernels.iter().find(|k| !defined(k)) {
                return Err(Error::value(format!(
                    "{from}: `{name}` does not define kernel `{}` of its manifest: the PTX is \
                     damaged or from another build (rebuild the kernel crate)",
                    k.name
                )));
            }
            Ok(text)
        };
        // A cubin file that is missing or not a cubin is left out: the PTX serves those
        // devices.
        let cubins = |names: &std::collections::BTreeMap<String, String>| -> Result<Vec<_>> {
            let mut out = Vec::new();
            for (arch, name) in names {
                if let Some(bytes) = file(name)? {
                    if bytes.starts_with(b"\x7fELF") {
                        out.push((arch.clone(), bytes));
                    }
                }
            }
            Ok(out)
        };
        let mut images = Vec::with_capacity(manifest.parts.len() + 1);
        let base_ptx = ptx_text(
            &manifest.ptx,
            manifest
                .kernels
                .iter()
                .filter(|k| k.arch.is_none())
                .collect(),
        )?;
        images.push(Image::new(
            &manifest.arch,
            base_ptx,
            cubins(&manifest.cubins)?,
        )?);
        for (arch, part) in &manifest.parts {
            let in_part = |k: &&KernelSig| k.arch.as_deref() == Some(arch.as_str());
            let text = ptx_text(&part.ptx, manifest.kernels.iter().filter(in_part).collect())?;
            images.push(Image::new(arch, text, cubins(&part.cubins)?)?);
        }
        Module::with_images(manifest, images)
    }

    /// Reads a module written by the builder: `<name>.json`, and the PTX and cubins it names
    /// beside it (its parts' too; a cubin file that is missing or not a cubin is left out:
    /// the PTX serves those devices).
    pub fn from_manifest_file(manifest_path: impl AsRef<Path>) -> Result<Module> {
        let path = manifest_path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::value(format!("cannot read {}: {e}", path.display())))?;
        let manifest = Manifest::from_json(&text)
            .map_err(|e| Error::value(format!("{}: {e}", path.display())))?;
        let dir = path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .to_path_buf();
        let ptx_names: Vec<String> = std::iter::once(manifest.ptx.clone())
            .chain(manifest.parts.values().map(|p| p.ptx.clone()))
            .collect();
        let file = move |name: &str| -> Result<Option<Cow<'static, [u8]>>> {
            let p = dir.join(name);
            match std::fs::read(&p) {
                Ok(bytes) => Ok(Some(Cow::Owned(bytes))),
                // A PTX the manifest names must be there; a cubin may be missing.
                Err(e) if ptx_names.iter().any(|n| n == name) => {
                    Err(Error::value(format!("cannot read {}: {e}", p.display())))
                }
                Err(_) => Ok(None),
            }
        };
        Module::assemble(manifest, &file, &path.display().to_string())
    }

    /// The architectures of the base image's cubins (`"sm_80"`, …).
    pub fn cubin_archs(&self) -> impl Iterator<Item = &str> + '_ {
        self.images[0].cubin_archs()
    }

    /// The base image's cubin of `arch`, if it has one.
    pub fn cubin(&self, arch: &str) -> Option<&[u8]> {
        self.images[0].cubin(arch)
    }

    /// The module's images: the base PTX first, then its parts.
    pub fn images(&self) -> &[Image] {
        &self.images
    }

    /// What device `device` runs (loading the module there, once): `"sm_90 cubin"` when a
    /// cubin was loaded, `"PTX"` when the PTX was (no cubin for the device's compute
    /// capability, or the driver refused it); for a module with parts, each image's in turn
    /// (`"sm_90 cubin; sm_90a part: sm_90a cubin"`, `"…; sm_90a part: not loaded (compute
    /// capability 8.0)"`).
    pub fn loaded_image(&self, device: usize) -> Result<String> {
        init()?;
        let ctx = Context::get(device)?;
        let _caller = ctx.enter()?;
        Ok(self.loaded(ctx)?.image.clone())
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Every kernel's signature, in manifest order (sorted by name).
    pub fn signatures(&self) -> &[Signature] {
        &self.signatures
    }

    /// The kernel named `name`.
    pub fn kernel(&self, name: &str) -> Result<Kernel<'_>> {
        match self.by_name.get(name) {
            Some(&index) => Ok(Kernel {
                module: self,
                index,
            }),
            None => Err(Error::value(format!(
                "no kernel named `{name}` in this module"
            ))),
        }
    }

    /// The kernel at `index` in manifest order (as generated launchers address them).
    pub fn kernel_at(&self, index: usize) -> Result<Kernel<'_>> {
        if index < self.signatures.len() {
            Ok(Kernel {
                module: self,
                index,
            })
        } else {
            Err(Error::value(format!(
                "no kernel at index {index} in this module"
            )))
        }
    }

    /// The kernels of `family`, in manifest order.
    pub fn family<'m>(&'m self, family: &'m str) -> impl Iterator<Item = Kernel<'m>> + 'm {
        self.signatures
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.family == family)
            .map(move |(index, _)| Kernel {
                module: self,
                index,
            })
    }

    /// The indices of kernel `index`'s layout variants (empty for most kernels).
    pub(crate) fn layout_variants_of(&self, index: usize) -> &[usize] {
        self.layout_variants.get(index).map_or(&[], |v| &v[..])
    }

    /// The indices of kernel `index`'s architecture variants (empty for most kernels).
    pub(crate) fn arch_variants_of(&self, index: usize) -> &[usize] {
        self.arch_variants.get(index).map_or(&[], |v| &v[..])
    }

    /// Whether some kernel of the module is built for another architecture than the base
    /// (a part of its own). Launchers weigh the device by their own kernels, not by this:
    /// [`spans_archs`](crate::launch::select::spans_archs).
    pub fn has_parts(&self) -> bool {
        self.images.len() > 1
    }

    /// Loads (once) the module into `ctx`, which must be current on this thread.
    pub(crate) fn loaded(&self, ctx: &'static Context) -> Result<&Loaded> {
        self.loaded[ctx.ordinal()]
            .get_or_init(|| load::load(ctx, &self.images, &self.kernel_image, &self.signatures))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// One kernel of a [`Module`].
#[derive(Clone, Copy, Debug)]
pub struct Kernel<'m> {
    pub(crate) module: &'m Module,
    pub(crate) index: usize,
}

impl<'m> Kernel<'m> {
    /// The kernel's signature.
    pub fn signature(&self) -> &'m Signature {
        &self.module.signatures[self.index]
    }

    /// The architecture the kernel is built for: the module's (its manifest's `arch`), or
    /// its own (`#[kernel(arch = "sm_90a")]`).
    pub fn arch(&self) -> Arch {
        self.module.images[self.module.kernel_image[self.index]].arch
    }

    /// Whether a device of compute capability `cc` runs the kernel ([`Arch::runs_on`]).
    pub fn runs_on(&self, cc: (u32, u32)) -> bool {
        self.arch().runs_on(cc)
    }

    /// `Ok` when device `ctx` runs the kernel; else [`refusal_on`](Self::refusal_on)'s error.
    pub(crate) fn check_arch(&self, ctx: &Context) -> Result<()> {
        match self.refusal_on(ctx.compute_capability(), ctx.ordinal()) {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// The refusal of a launch on device `device` of compute capability `cc`, when that
    /// device cannot run the kernel's code ([`runs_on`](Self::runs_on)): an
    /// [`Unsupported`](crate::ErrorKind::Unsupported) error naming the kernel, its
    /// architecture and the device's. `None` when the device runs it.
    pub fn refusal_on(&self, cc: (u32, u32), device: usize) -> Option<Error> {
        let arch = self.arch();
        if arch.runs_on(cc) {
            return None;
        }
        Some(Error::unsupported(format!(
            "kernel `{}` is built for {arch} and device {device} is {}: {} (launch it on such a \
             GPU, or use a kernel of its family built for this one)",
            self.name(),
            DeviceArch(cc),
            ferrocuda_abi::arch::why_not(&arch),
        )))
    }

    /// The kernel's name.
    pub fn name(&self) -> &'m str {
        &self.module.signatures[self.index].name
    }

    /// The module.
    pub fn module(&self) -> &'m Module {
        self.module
    }

    /// The kernel's layout variants: the kernels of its family that differ from it only in
    /// the kinds of their array parameters, hence in the layouts they take
    /// ([`KernelSig::is_layout_variant_of`]; e.g. `add_f32_1d` … `add_f32_4d`, on views of
    /// any strides, for `add_f32`, on contiguous arrays of any rank; `add_f32` for
    /// `add_f32_2d`). [`variant_for`](Self::variant_for) chooses among the kernel and these.
    pub fn layout_variants(&self) -> impl Iterator<Item = Kernel<'m>> + 'm {
        let module = self.module;
        module
            .layout_variants_of(self.index)
            .iter()
            .map(move |&index| Kernel { module, index })
    }

    /// The kernel's limits on device `device`, as the driver reports them (loads the module
    /// there, once). Launches are checked against these and the device's
    /// ([`Context::limits`]).
    pub fn limits(&self, device: usize) -> Result<FunctionLimits> {
        init()?;
        let ctx = Context::get(device)?;
        let _caller = ctx.enter()?;
        self.check_arch(ctx)?;
        let f = self.module.loaded(ctx)?.functions[self.index];
        Ok(f.expect("a kernel the device runs is loaded").limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cubin_of_the_major_version_not_above_the_minor_is_chosen() {
        let both = ["sm_80", "sm_90"];
        let choose = |cc| choose_cubin(cc, both);
        assert_eq!(choose((8, 0)), Some("sm_80"));
        assert_eq!(choose((8, 6)), Some("sm_80"));
        assert_eq!(choose((8, 9)), Some("sm_80"));
        assert_eq!(choose((9, 0)), Some("sm_90"));
        // Another major version: machine code does not carry over, the PTX is JIT-compiled.
        assert_eq!(choose((10, 0)), None);
        assert_eq!(choose((12, 0)), None);
        assert_eq!(choose((7, 5)), None);
        // The highest minor not above the device's.
        let more = ["sm_80", "sm_86", "sm_89", "sm_90"];
        assert_eq!(choose_cubin((8, 6), more), Some("sm_86"));
        assert_eq!(choose_cubin((8, 7), more), Some("sm_86"));
        assert_eq!(choose_cubin((8, 9), more), Some("sm_89"));
        assert_eq!(choose_cubin((8, 0), ["sm_86"]), None);
        // Architecture-specific machine code runs on exactly its compute capability, and is
        // preferred there over the portable cubin of the same number.
        assert_eq!(choose_cubin((9, 0), ["sm_90a", "junk"]), Some("sm_90a"));
        assert_eq!(choose_cubin((9, 0), ["sm_90", "sm_90a"]), Some("sm_90a"));
        assert_eq!(choose_cubin((10, 0), ["sm_90a"]), None);
        assert_eq!(
            choose_cubin((10, 3), ["sm_100a", "sm_100f"]),
            Some("sm_100f")
        );
        assert_eq!(
            choose_cubin((10, 0), ["sm_100a", "sm_100f"]),
            Some("sm_100a")
        );
        assert_eq!(choose_cubin((9, 0), ["junk"]), None);
        assert_eq!(choose_cubin((9, 0), []), None);
    }

    #[test]
    fn cubins_must_be_elf_images_of_sm_archs() {
        let manifest = || {
            Manifest::from_json(r#"{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": []}"#)
                .unwrap()
        };
        let elf: &'static [u8] = b"\x7fELF\x02\x01\x01";
        let m = Module::with_cubins("", manifest(), vec![("sm_90".into(), elf.into())]).unwrap();
        assert_eq!(m.cubin_archs().collect::<Vec<_>>(), ["sm_90"]);
        assert_eq!(m.cubin("sm_90"), Some(elf));
        assert_eq!(m.cubin("sm_80"), None);
        let text: &'static [u8] = b"// PTX";
        let not_elf = Module::with_cubins("", manifest(), vec![("sm_90".into(), text.into())]);
        assert!(not_elf.unwrap_err().to_string().contains("ELF"));
        let bad_arch = Module::with_cubins("", manifest(), vec![("compute_90".into(), elf.into())]);
        assert!(bad_arch.unwrap_err().to_string().contains("sm_XY"));
    }
}
