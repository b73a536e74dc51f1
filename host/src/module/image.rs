//! A module's images ([`Image`]): a PTX text built for one architecture with the cubins
//! assembled from it, and which cubin a device loads ([`choose_cubin`]).

use crate::error::{Error, Result};
use ferrocuda_abi::arch::{Arch, Variant};
use std::borrow::Cow;
use std::ffi::CString;

/// One image of a module: a PTX text built for one architecture and the cubins assembled
/// from it.
pub struct Image {
    /// The PTX's architecture (its `.target`).
    pub(crate) arch: Arch,
    pub(crate) ptx: CString,
    /// (arch, image) of each cubin, in the manifest's order.
    pub(crate) cubins: Vec<(String, Cow<'static, [u8]>)>,
}

impl Image {
    /// An image of `ptx` built for `arch` (`"sm_90a"`) with its cubins (arch, ELF bytes); the
    /// cubins' archs and images are checked.
    pub fn new(
        arch: &str,
        ptx: impl Into<String>,
        cubins: Vec<(String, Cow<'static, [u8]>)>,
    ) -> Result<Image> {
        let parsed = Arch::parse(arch).ok_or_else(|| {
            Error::value(format!(
                "arch `{arch}` is not of the form sm_XY (e.g. sm_90)"
            ))
        })?;
        for (a, image) in &cubins {
            if Arch::parse(a).is_none() {
                return Err(Error::value(format!(
                    "cubin arch `{a}` is not of the form sm_XY (e.g. sm_90)"
                )));
            }
            if !image.starts_with(b"\x7fELF") {
                return Err(Error::value(format!(
                    "the {a} cubin is not an ELF image (damaged, or not a cubin)"
                )));
            }
        }
        let ptx =
            CString::new(ptx.into()).map_err(|_| Error::value("PTX text contains a NUL byte"))?;
        Ok(Image {
            arch: parsed,
            ptx,
            cubins,
        })
    }

    /// The architecture the PTX is built for.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The architectures of its cubins (`"sm_80"`, …).
    pub fn cubin_archs(&self) -> impl Iterator<Item = &str> + '_ {
        self.cubins.iter().map(|(a, _)| a.as_str())
    }

    /// The cubin of `arch`, if the image has one.
    pub fn cubin(&self, arch: &str) -> Option<&[u8]> {
        self.cubins
            .iter()
            .find(|(a, _)| a == arch)
            .map(|(_, c)| &c[..])
    }
}

/// The cubin for a device of compute capability `cc` among `archs` (`"sm_80"`, `"sm_90a"`, …):
/// the highest portable `sm_AB` with `A` equal to the major version and `B` not above the
/// minor (machine code runs on GPUs of its major version and a minor not below its own), an
/// architecture-specific `sm_ABa` only for exactly `A.B` (preferred over the portable one of
/// the same number), a family `sm_ABf` for major `A` and a minor not below `B`; `None` when
/// there is none (the PTX is loaded then). `sm_90` for 9.0; `sm_80` for 8.6 and 8.9 when the
/// cubins are `sm_80` and `sm_90`; none for 10.0 or 12.0.
pub fn choose_cubin<'a>(
    cc: (u32, u32),
    archs: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    archs
        .into_iter()
        .filter_map(|a| {
            let arch = Arch::parse(a)?;
            let runs = arch.major == cc.0
                && match arch.variant {
                    Variant::Specific => arch.minor == cc.1,
                    Variant::Portable | Variant::Family => arch.minor <= cc.1,
                };
            runs.then_some(((arch.number(), arch.variant), a))
        })
        .max_by_key(|&(key, _)| key)
        .map(|(_, a)| a)
}
