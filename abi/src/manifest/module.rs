//! The manifest of one compiled PTX module ([`Manifest`]): its JSON form, format versions and
//! checks.

use super::sig::KernelSig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::format;
use std::string::String;
use std::vec::Vec;

/// Version of the JSON manifest format written by the builder.
///
/// Fields added since without a version change (a reader accepts a manifest without them,
/// and an older reader ignores them): `fp_contract` (absent: [`FpContract::Off`]); per
/// kernel `launch` (absent: nothing declared; see [`LaunchSpec`](crate::launch::LaunchSpec)) and `zero`, `scratch`,
/// `require` (absent: none); `cubins` (absent: PTX only; see [`Manifest::cubins`]). A
/// kernel with a scratch parameter (kind `"scratch"`) is refused by readers older than
/// that kind, as it must be: they would ask the caller for it.
///
/// Format 2 is format 1 with [`Manifest::parts`] and [`KernelSig::arch`]: kernels built for
/// another architecture than the module's, in PTX files of their own. The builder writes
/// it only for a module that has parts (a reader of format 1 would look for those kernels
/// in the base PTX), and format 1 otherwise; readers take both.
///
/// Format 3 is format 2 with kernels that must be launched with launch attributes:
/// `launch.cooperative` (`#[kernel(cooperative)]`) and `launch.cluster`
/// (`#[kernel(cluster = …)]`). A reader that does not know them would launch such a kernel
/// the plain way — a grid barrier that may never complete, distributed shared memory
/// without a cluster — so the builder writes format 3 only when a kernel declares one
/// ([`format_for`]), and older readers refuse it. Readers take formats 1 to 3.
pub const FORMAT: u32 = 3;

/// The format of a manifest with parts and without kernels that need launch attributes.
pub const FORMAT_PARTS: u32 = 2;

/// The format of a manifest without parts (readable by every reader since format 1).
pub const FORMAT_NO_PARTS: u32 = 1;

/// The oldest format that describes a module with `kernels` (parts when `has_parts`): the
/// one the builder writes, so that every reader able to launch the module reads it.
pub fn format_for(kernels: &[KernelSig], has_parts: bool) -> u32 {
    if kernels.iter().any(|k| k.launch.needs_launch_attributes()) {
        FORMAT
    } else if has_parts {
        FORMAT_PARTS
    } else {
        FORMAT_NO_PARTS
    }
}

/// Whether the code generator may contract a floating-point multiply and add into one
/// fused multiply-add (`fma.rn`, rounded once).
///
/// Rust's semantics round every operation on its own, so [`FpContract::Off`] is the default;
/// nvcc contracts by default (its `--fmad=true`), which is what [`FpContract::Fast`] gives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FpContract {
    /// Every `a * b + c` is a multiply and an add, each rounded (Rust's semantics).
    #[default]
    Off,
    /// `a * b + c` may become `fma.rn` (faster, one rounding; results may differ in the
    /// last bits from the host's).
    Fast,
}

impl FpContract {
    /// The name in the manifest and in `llc -fp-contract=…`: `"off"` or `"fast"`.
    pub fn name(self) -> &'static str {
        match self {
            FpContract::Off => "off",
            FpContract::Fast => "fast",
        }
    }
}

/// The manifest of one compiled PTX module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`] of the writer.
    pub format: u32,
    /// The `.target` of the PTX, e.g. `"sm_80"`.
    pub arch: String,
    /// File name of the PTX next to the manifest.
    pub ptx: String,
    /// The floating-point contraction the PTX was generated with.
    #[serde(default)]
    pub fp_contract: FpContract,
    /// Every kernel, sorted by name.
    pub kernels: Vec<KernelSig>,
    /// The PTX assembled by ptxas for real architectures: arch (`"sm_90"`) → file name of
    /// the cubin next to the manifest. Empty when the build found no ptxas; a reader that
    /// does not know the field loads the PTX, as before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cubins: BTreeMap<String, String>,
    /// The module's further parts: architecture (`"sm_90a"`) → its PTX and cubins. A part
    /// holds the kernels whose [`KernelSig::arch`] is its architecture (and only those);
    /// the base PTX ([`ptx`](Self::ptx)) every other kernel.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<String, Part>,
}

/// One further part of a module: a PTX file built for another architecture, with its
/// cubins.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// File name of the part's PTX next to the manifest.
    pub ptx: String,
    /// Its cubins: arch → file name next to the manifest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cubins: BTreeMap<String, String>,
}

impl Manifest {
    /// Parses the JSON form.
    pub fn from_json(text: &str) -> Result<Manifest, String> {
        let m: Manifest =
            serde_json::from_str(text).map_err(|e| format!("invalid kernel manifest: {e}"))?;
        if !(FORMAT_NO_PARTS..=FORMAT).contains(&m.format) {
            return Err(format!(
                "kernel manifest format {} is not supported: ferrocuda {} reads format \
                 {FORMAT}; the manifest was written by another version of ferrocuda — \
                 rebuild the kernel crate with this one (`ferrocuda build PATH`)",
                m.format,
                env!("CARGO_PKG_VERSION")
            ));
        }
        for k in &m.kernels {
            k.launch
                .decl()
                .map_err(|e| format!("kernel manifest: launch declaration of `{}`: {e}", k.name))?;
            for p in &k.params {
                if p.param_kind().is_none() || p.element().is_none() {
                    return Err(format!(
                        "kernel manifest: parameter `{}` of `{}` has unknown kind/dtype {}/{}",
                        p.name, k.name, p.kind, p.dtype
                    ));
                }
            }
            k.check_extras()
                .map_err(|e| format!("kernel manifest: {e}"))?;
            if let Some(a) = &k.arch {
                if crate::arch::Arch::parse(a).is_none() {
                    return Err(format!(
                        "kernel manifest: kernel `{}` has an unknown arch `{a}`",
                        k.name
                    ));
                }
                if !m.parts.contains_key(a) {
                    return Err(format!(
                        "kernel manifest: kernel `{}` is built for {a}, but the manifest \
                         has no {a} part",
                        k.name
                    ));
                }
            }
        }
        for a in m.parts.keys() {
            if crate::arch::Arch::parse(a).is_none() {
                return Err(format!("kernel manifest: part of unknown arch `{a}`"));
            }
        }
        Ok(m)
    }

    /// The architecture of kernel `k`'s code: its own ([`KernelSig::arch`]), else the
    /// module's ([`arch`](Self::arch)); `None` when the name is not an architecture.
    pub fn arch_of(&self, k: &KernelSig) -> Option<crate::arch::Arch> {
        crate::arch::Arch::parse(k.arch.as_deref().unwrap_or(&self.arch))
    }

    /// The pretty JSON form.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("manifest serializes")
    }

    /// The kernels in the PTX of `part`: the base PTX's (`None`: those without an `arch`),
    /// or a part's (`Some("sm_90a")`).
    pub fn kernels_of<'a>(
        &'a self,
        part: Option<&'a str>,
    ) -> impl Iterator<Item = &'a KernelSig> + 'a {
        self.kernels
            .iter()
            .filter(move |k| k.arch.as_deref() == part)
    }

    /// The kernel named `name`.
    pub fn kernel(&self, name: &str) -> Option<&KernelSig> {
        self.kernels.iter().find(|k| k.name == name)
    }
}
