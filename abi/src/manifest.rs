//! The kernel manifest: every kernel's name and parameters, generated from the kernel source.
//!
//! `#[kernel]` describes each kernel it expands as a byte record that it stores, next to the
//! kernel, in a global of the compiled PTX named [`SYMBOL_PREFIX`]`<kernel>`. The builder
//! reads those records back out of the PTX, removes the globals, cross-checks them against
//! the `.entry` parameter lists, and writes the manifest as JSON next to the PTX. So the
//! signature is stated once — in the kernel's Rust source — and the host learns it from the
//! compiler's own output, after macro expansion and monomorphisation.
//!
//! Record layout (all integers little-endian):
//!
//! ```text
//! magic "FCK2"
//! u8 len, name bytes            kernel entry name
//! u8 len, family bytes          kernel family (launchers dispatch over a family by dtype/rank)
//! u8 nparams
//! nparams × { u8 len, name bytes, u8 kind, u8 dtype, u8 rank, u8 mutable, u16 size, u16 align }
//! u8 ngroups
//! ngroups × { u8 count, count × u8 parameter index }   parameters that must have equal shapes
//! u16 items_per_thread          elements of the largest array one thread handles (0: unset)
//! sections, until the end       kernel extras (see `crate::extras`); none in most records:
//!   u8 tag, u16 payload length, payload = u8 count, count × entry
//!   tag 1 zero:    entry = u8 parameter index
//!   tag 2 scratch: entry = u8 param, u32 per_block, u32 constant, u8 of, u32 mult, u32 div
//!   tag 3 require: entry = operand lhs, u8 cmp, operand rhs, u8 len, message bytes
//!                  operand = u8 kind (1 int, 2 scalar, 3 len, 4 dim, 5 ptr), u8 param,
//!                            u8 axis, i64 value
//! ```
//!
//! A record that ends after `items_per_thread` (the layout before extras existed) decodes as
//! a kernel without extras; an unknown section tag is an error (a record from a newer
//! `#[kernel]`).

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

#[cfg(feature = "std")]
pub use host::*;

#[cfg(feature = "std")]
mod host {
    use super::MAGIC;
    use crate::dtype::DType;
    pub use crate::extras::json::{OperandSig, RequireSig, ScratchSig};
    use crate::extras::{Cmp, Operand, ScratchLen, OPERAND_BYTES, SCRATCH_BYTES};
    use crate::extras::{TAG_REQUIRE, TAG_SCRATCH, TAG_TILE, TAG_ZERO, TILE_BYTES};
    use crate::kinds::ParamKind;
    pub use crate::launch::LaunchSpec;
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;
    use std::format;
    use std::string::String;
    use std::vec::Vec;

    /// Version of the JSON manifest format written by the builder.
    ///
    /// Fields added since without a version change (a reader accepts a manifest without them,
    /// and an older reader ignores them): `fp_contract` (absent: [`FpContract::Off`]); per
    /// kernel `launch` (absent: nothing declared; see [`LaunchSpec`]) and `zero`, `scratch`,
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

    /// One kernel's signature.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct KernelSig {
        /// PTX entry name.
        pub name: String,
        /// Family: kernels of one family differ only in element types / rank.
        pub family: String,
        /// Parameters in order.
        pub params: Vec<ParamSig>,
        /// Groups of parameter indices whose arrays must have equal shapes.
        #[serde(default)]
        pub same_shape: Vec<Vec<u8>>,
        /// Elements of the largest array one thread handles: the automatic grid gives every
        /// thread about this many (`None`: one resident wave of blocks, grid-stride loops).
        /// With `launch.grid_rows`: rows of at most 32 times this many elements get a warp.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub items_per_thread: Option<u16>,
        /// What the kernel declares about its launch shape (`#[kernel(max_threads, block,
        /// min_blocks, dynamic_shared, grid)]`), from its launch record.
        #[serde(default, skip_serializing_if = "LaunchSpec::is_empty")]
        pub launch: LaunchSpec,
        /// Outputs the launcher zero-fills right before the launch (`#[kernel(zero(…))]`;
        /// indices into `params`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub zero: Vec<u8>,
        /// Lengths of the scratch workspaces (`#[kernel(scratch(…))]`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub scratch: Vec<ScratchSig>,
        /// Conditions on the arguments, checked before a launch (`#[kernel(require(…))]`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub require: Vec<RequireSig>,
        /// The architecture the kernel is built for when it is not the module's
        /// ([`Manifest::arch`]): `#[kernel(arch = "sm_90a")]`. The kernel is in that part of
        /// the module ([`Manifest::parts`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub arch: Option<String>,
    }

    /// One parameter.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct ParamSig {
        /// Name in the kernel source.
        pub name: String,
        /// `"scalar"`, `"slice"` or `"view"`.
        pub kind: String,
        /// NumPy dtype name, e.g. `"float32"`.
        pub dtype: String,
        /// 0 for scalars, 1 for slices, N for views.
        pub rank: u8,
        /// Whether the kernel may write through it.
        pub mutable: bool,
        /// Bytes in the launch parameter buffer.
        pub size: u16,
        /// Alignment in the launch parameter buffer.
        pub align: u16,
        /// A tensor map's box and swizzle (kind `"tensormap"` only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tile: Option<TileSig>,
    }

    /// What a tensor-map parameter declares: the box (outermost first) and the swizzle width.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct TileSig {
        /// Box extents, outermost first (one per axis of the array).
        #[serde(rename = "box")]
        pub box_dims: Vec<u32>,
        /// Swizzle width in bytes: 0, 32, 64 or 128.
        pub swizzle: u32,
    }

    impl ParamSig {
        /// The parameter kind, if the manifest names a known one.
        pub fn param_kind(&self) -> Option<ParamKind> {
            ParamKind::from_name(&self.kind)
        }

        /// The element type, if the manifest names a known one.
        pub fn element(&self) -> Option<DType> {
            DType::from_name(&self.dtype)
        }

        /// The Rust parameter type (`SliceMut<f32>`, `f64`, …), if kind and element type are
        /// known and the element type has a Rust type.
        pub fn rust_type(&self) -> Option<String> {
            let elem = self.element()?.rust_name()?;
            Some(
                self.param_kind()?
                    .rust_type(elem, usize::from(self.rank), self.mutable),
            )
        }
    }

    impl KernelSig {
        /// The parameters callers pass arguments for (scratch workspaces are the launcher's).
        pub fn caller_params(&self) -> impl Iterator<Item = &ParamSig> {
            self.params
                .iter()
                .filter(|p| p.param_kind().is_none_or(ParamKind::is_argument))
        }

        /// `true` when `other` is a *layout variant* of this kernel: another kernel of the same
        /// family whose caller parameters have the same names, element types and mutability,
        /// a scalar where this kernel has a scalar and an array where it has an array, and
        /// that differs from it in the kinds of its arrays, hence in the layouts they take
        /// ([`ParamKind::array_layout`]) — arrays of one kind keep their rank. `add_f32`
        /// (slices, any rank) and `add_f32_2d` (2-D views) are layout variants of each other;
        /// `add_f32_3d` is not one of `add_f32_2d` (another rank, the same layouts), nor
        /// `add_f64` one of `add_f32`.
        ///
        /// A kernel's launcher runs the layout variant that takes the arguments when the
        /// kernel itself does not (the host's `Kernel::variant_for`).
        pub fn is_layout_variant_of(&self, other: &KernelSig) -> bool {
            let kind = |p: &ParamSig| p.param_kind();
            let layout = |p: &ParamSig| kind(p).and_then(ParamKind::array_layout);
            let is_array = |p: &ParamSig| kind(p).is_some_and(ParamKind::is_array);
            let pairs = || self.caller_params().zip(other.caller_params());
            self.family == other.family
                && self.caller_params().count() == other.caller_params().count()
                && pairs().all(|(a, b)| {
                    a.name == b.name
                        && a.dtype == b.dtype
                        && a.mutable == b.mutable
                        && is_array(a) == is_array(b)
                        && (kind(a) != kind(b) || a.rank == b.rank)
                })
                && pairs().any(|(a, b)| layout(a) != layout(b))
        }

        /// `true` when `other` is an *architecture variant* of this kernel: another kernel of
        /// the same family with the same caller parameters (names, kinds, element types,
        /// ranks, mutability) built for another architecture ([`arch`](Self::arch)) — a
        /// family's `sm_90a` kernel (wgmma) beside its portable one (mma.sync). Launchers run
        /// the variant of the highest architecture the device runs.
        pub fn is_arch_variant_of(&self, other: &KernelSig) -> bool {
            self.family == other.family
                && self.arch != other.arch
                && self.caller_params().count() == other.caller_params().count()
                && self
                    .caller_params()
                    .zip(other.caller_params())
                    .all(|(a, b)| {
                        a.name == b.name
                            && a.kind == b.kind
                            && a.dtype == b.dtype
                            && a.rank == b.rank
                            && a.mutable == b.mutable
                    })
        }
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
                k.launch.decl().map_err(|e| {
                    format!("kernel manifest: launch declaration of `{}`: {e}", k.name)
                })?;
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

    /// Decodes one record written by [`encode`](super::encode).
    pub fn decode(bytes: &[u8]) -> Result<KernelSig, String> {
        let mut r = Reader { b: bytes, at: 0 };
        if r.take(4)? != MAGIC {
            return Err("bad manifest record magic".into());
        }
        let name = r.string()?;
        let family = r.string()?;
        let n = r.u8()? as usize;
        let mut params = Vec::with_capacity(n);
        for _ in 0..n {
            let pname = r.string()?;
            let kind = r.u8()?;
            let dtype = r.u8()?;
            let rank = r.u8()?;
            let mutable = r.u8()?;
            let size = u16::from_le_bytes([r.u8()?, r.u8()?]);
            let align = u16::from_le_bytes([r.u8()?, r.u8()?]);
            let kind = ParamKind::from_code(kind)
                .ok_or_else(|| format!("parameter `{pname}`: unknown kind code {kind}"))?;
            let dtype = DType::from_code(dtype)
                .ok_or_else(|| format!("parameter `{pname}`: unknown dtype code {dtype}"))?;
            if mutable > 1 {
                return Err(format!("parameter `{pname}`: bad mutability flag"));
            }
            params.push(ParamSig {
                name: pname,
                kind: kind.name().into(),
                dtype: dtype.name().into(),
                rank,
                mutable: mutable == 1,
                size,
                align,
                tile: None,
            });
        }
        let ngroups = r.u8()? as usize;
        let mut same_shape = Vec::with_capacity(ngroups);
        for _ in 0..ngroups {
            let count = r.u8()? as usize;
            let g = r.take(count)?.to_vec();
            if g.iter().any(|&i| i as usize >= params.len()) {
                return Err("same-shape group names a parameter that does not exist".into());
            }
            same_shape.push(g);
        }
        let ipt = u16::from_le_bytes([r.u8()?, r.u8()?]);
        let mut sig = KernelSig {
            name,
            family,
            params,
            same_shape,
            items_per_thread: (ipt != 0).then_some(ipt),
            launch: LaunchSpec::default(),
            zero: Vec::new(),
            scratch: Vec::new(),
            require: Vec::new(),
            arch: None,
        };
        while r.at != bytes.len() {
            let tag = r.u8()?;
            let len = u16::from_le_bytes([r.u8()?, r.u8()?]) as usize;
            let mut s = Reader {
                b: r.take(len)?,
                at: 0,
            };
            let count = s.u8()? as usize;
            match tag {
                TAG_ZERO => sig.zero = s.take(count)?.to_vec(),
                TAG_SCRATCH => {
                    for _ in 0..count {
                        let e = s.take(SCRATCH_BYTES)?;
                        let u = |i: usize| u32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
                        sig.scratch.push(ScratchSig::of_len(&ScratchLen {
                            param: e[0],
                            per_block: u(1),
                            constant: u(5),
                            of: e[9],
                            mult: u(10),
                            div: u(14),
                        }));
                    }
                }
                TAG_REQUIRE => {
                    for _ in 0..count {
                        let lhs = s.operand()?;
                        let code = s.u8()?;
                        let cmp = Cmp::from_code(code)
                            .ok_or_else(|| format!("unknown comparison code {code}"))?;
                        let rhs = s.operand()?;
                        let n = s.u8()? as usize;
                        let message = String::from_utf8(s.take(n)?.to_vec())
                            .map_err(|_| "non-UTF-8 requirement message")?;
                        sig.require.push(RequireSig {
                            lhs: lhs.into(),
                            op: cmp.symbol().into(),
                            rhs: rhs.into(),
                            message,
                        });
                    }
                }
                TAG_TILE => {
                    for _ in 0..count {
                        let e = s.take(TILE_BYTES)?;
                        let (param, rank, swizzle) = (e[0] as usize, e[1] as usize, e[2]);
                        let dims: Vec<u32> = (0..rank.min(5))
                            .map(|d| u32::from(u16::from_le_bytes([e[3 + 2 * d], e[4 + 2 * d]])))
                            .collect();
                        let p = sig
                            .params
                            .get_mut(param)
                            .ok_or("a tensor-map declaration names no parameter")?;
                        p.tile = Some(TileSig {
                            box_dims: dims,
                            swizzle: u32::from(swizzle),
                        });
                    }
                }
                _ => {
                    return Err(format!(
                        "unknown manifest record section {tag} (a record from a newer \
                         ferrocuda-device?)"
                    ))
                }
            }
            if s.at != s.b.len() {
                return Err("trailing bytes in manifest record section".into());
            }
        }
        sig.check_extras()?;
        Ok(sig)
    }

    struct Reader<'a> {
        b: &'a [u8],
        at: usize,
    }

    impl<'a> Reader<'a> {
        fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
            let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
            let end = end.ok_or("truncated manifest record")?;
            let s = &self.b[self.at..end];
            self.at = end;
            Ok(s)
        }
        fn u8(&mut self) -> Result<u8, String> {
            Ok(self.take(1)?[0])
        }
        fn operand(&mut self) -> Result<Operand, String> {
            let b = self.take(OPERAND_BYTES)?;
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[3..11]);
            Operand::from_code(b[0], b[1], b[2], i64::from_le_bytes(v))
                .ok_or_else(|| format!("unknown operand kind {}", b[0]))
        }
        fn string(&mut self) -> Result<String, String> {
            let n = self.u8()? as usize;
            let s = self.take(n)?;
            String::from_utf8(s.to_vec()).map_err(|_| "non-UTF-8 name in manifest".into())
        }
    }

    #[cfg(test)]
    mod tests {
        use super::super::{encode, encode_ext, encoded_len, encoded_len_ext};
        use super::*;
        use crate::kinds::KernelParam;
        use crate::params::{Slice, SliceMut, View};

        #[test]
        fn fp_contract_is_recorded_and_defaults_to_off() {
            let m = Manifest {
                format: FORMAT,
                arch: "sm_80".into(),
                ptx: "k.ptx".into(),
                fp_contract: FpContract::Fast,
                kernels: Vec::new(),
                cubins: BTreeMap::new(),
                parts: BTreeMap::new(),
            };
            let json = m.to_json();
            assert!(json.contains("\"fp_contract\": \"fast\""), "{json}");
            assert_eq!(Manifest::from_json(&json).unwrap(), m);
            // A manifest written before the field existed reads as `off`.
            let old = r#"{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": []}"#;
            assert_eq!(
                Manifest::from_json(old).unwrap().fp_contract,
                FpContract::Off
            );
            let bad = r#"{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "fp_contract": "on", "kernels": []}"#;
            assert!(Manifest::from_json(bad).is_err());
            assert_eq!(FpContract::Fast.name(), "fast");
            assert_eq!(FpContract::default().name(), "off");
        }

        #[test]
        fn cubins_are_optional_and_round_trip() {
            let old = r#"{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": []}"#;
            let mut m = Manifest::from_json(old).unwrap();
            assert!(m.cubins.is_empty());
            assert!(!m.to_json().contains("cubins"));
            m.cubins.insert("sm_90".into(), "k.sm_90.cubin".into());
            let json = m.to_json();
            assert!(json.contains("\"sm_90\": \"k.sm_90.cubin\""), "{json}");
            assert_eq!(Manifest::from_json(&json).unwrap(), m);
        }

        #[test]
        fn launch_declarations_round_trip_through_json() {
            let kernel = |launch: LaunchSpec| KernelSig {
                name: "k".into(),
                family: "k".into(),
                params: Vec::new(),
                same_shape: Vec::new(),
                items_per_thread: None,
                launch,
                zero: Vec::new(),
                scratch: Vec::new(),
                require: Vec::new(),
                arch: None,
            };
            let declared = LaunchSpec {
                block: Some([16, 16, 1]),
                dynamic_shared: Some("float32".into()),
                grid_dims: Some(2),
                ..LaunchSpec::default()
            };
            let m = Manifest {
                format: FORMAT,
                arch: "sm_80".into(),
                ptx: "k.ptx".into(),
                fp_contract: FpContract::Off,
                kernels: std::vec![kernel(declared.clone()), kernel(LaunchSpec::default())],
                cubins: BTreeMap::new(),
                parts: BTreeMap::new(),
            };
            let json = m.to_json();
            assert_eq!(json.matches("\"launch\"").count(), 1, "{json}");
            assert!(json.contains("\"block\": [\n"), "{json}");
            let back = Manifest::from_json(&json).unwrap();
            assert_eq!(back, m);
            assert_eq!(
                back.kernels[0].launch.decl().unwrap().fixed_block(),
                Some([16, 16, 1])
            );
            // A manifest written before the field existed reads as "nothing declared"; an
            // invalid declaration is refused with the kernel's name.
            let old = r#"{"format": 1, "arch": "sm_80", "ptx": "k.ptx", "kernels": [
                {"name": "k", "family": "k", "params": []}]}"#;
            assert!(Manifest::from_json(old).unwrap().kernels[0]
                .launch
                .is_empty());
            let bad = old.replace(
                "\"params\": []",
                "\"params\": [], \"launch\": {\"max_threads\": 4096}",
            );
            let e = Manifest::from_json(&bad).unwrap_err();
            assert!(e.contains("launch declaration of `k`"), "{e}");
        }

        #[test]
        fn kernels_with_launch_attributes_need_format_3() {
            let kernel = |launch: LaunchSpec| KernelSig {
                name: "k".into(),
                family: "k".into(),
                params: Vec::new(),
                same_shape: Vec::new(),
                items_per_thread: None,
                launch,
                zero: Vec::new(),
                scratch: Vec::new(),
                require: Vec::new(),
                arch: None,
            };
            let plain = [kernel(LaunchSpec {
                max_threads: Some(128),
                ..LaunchSpec::default()
            })];
            assert_eq!(format_for(&plain, false), FORMAT_NO_PARTS);
            assert_eq!(format_for(&plain, true), FORMAT_PARTS);
            let coop = kernel(LaunchSpec {
                cooperative: Some(true),
                ..LaunchSpec::default()
            });
            let cluster = kernel(LaunchSpec {
                cluster: Some([2, 1, 1]),
                ..LaunchSpec::default()
            });
            assert_eq!(format_for(core::slice::from_ref(&coop), false), FORMAT);
            assert_eq!(format_for(&[cluster], true), FORMAT);
            // Every format up to this version's reads; a newer one is refused.
            for f in 1..=3 {
                let text =
                    format!(r#"{{"format": {f}, "arch": "sm_80", "ptx": "k.ptx", "kernels": []}}"#);
                assert_eq!(Manifest::from_json(&text).unwrap().format, f);
            }
            let newer = r#"{"format": 4, "arch": "sm_80", "ptx": "k.ptx", "kernels": []}"#;
            assert!(Manifest::from_json(newer).unwrap_err().contains("format 4"));
            // The declaration survives the JSON form.
            let m = Manifest {
                format: FORMAT,
                arch: "sm_80".into(),
                ptx: "k.ptx".into(),
                fp_contract: FpContract::Off,
                kernels: std::vec![coop],
                cubins: BTreeMap::new(),
                parts: BTreeMap::new(),
            };
            let json = m.to_json();
            assert!(json.contains("\"cooperative\": true"), "{json}");
            assert_eq!(Manifest::from_json(&json).unwrap(), m);
        }

        #[test]
        fn record_round_trips() {
            let params = [
                ("a", <Slice<f32> as KernelParam>::DESC),
                ("out", <SliceMut<f32> as KernelParam>::DESC),
                ("v", <View<f64, 3> as KernelParam>::DESC),
                ("alpha", <f32 as KernelParam>::DESC),
            ];
            const L: usize =
                4 + 1 + 3 + 1 + 3 + 1 + (2 + 8) + (4 + 8) + (2 + 8) + (6 + 8) + 1 + 3 + 2;
            let groups: &[&[u8]] = &[&[0, 1]];
            assert_eq!(encoded_len("k_1", "fam", &params, groups, 300), L);
            let bytes: [u8; L] = encode("k_1", "fam", &params, groups, 300);
            let sig = decode(&bytes).unwrap();
            assert_eq!(sig.name, "k_1");
            assert_eq!(sig.family, "fam");
            assert_eq!(sig.params.len(), 4);
            assert_eq!(sig.params[1].kind, "slice");
            assert!(sig.params[1].mutable);
            assert_eq!(sig.params[2].rank, 3);
            assert_eq!(sig.params[2].size, 8 + 3 * 16);
            assert_eq!(sig.params[3].dtype, "float32");
            assert_eq!(sig.params[3].size, 4);
            assert_eq!(sig.same_shape, std::vec![std::vec![0u8, 1]]);
            assert_eq!(sig.items_per_thread, Some(300));
            let unset: [u8; L] = encode("k_1", "fam", &params, groups, 0);
            assert_eq!(decode(&unset).unwrap().items_per_thread, None);
            // Any truncation is an error, never a panic.
            for cut in 0..L {
                assert!(decode(&bytes[..cut]).is_err());
            }
        }

        #[test]
        fn extras_round_trip() {
            use crate::extras::{Cmp, Extras, Operand, Require, ScratchLen, NONE};
            use crate::params::Scratch;
            let params = [
                ("x", <Slice<f32> as KernelParam>::DESC),
                ("out", <SliceMut<f32> as KernelParam>::DESC),
                ("lo", <f64 as KernelParam>::DESC),
                ("ws", <Scratch<u32> as KernelParam>::DESC),
                ("v", <View<f64, 2> as KernelParam>::DESC),
            ];
            let scratch = [ScratchLen {
                param: 3,
                per_block: 2,
                constant: 1,
                of: 0,
                mult: 3,
                div: 4096,
            }];
            let require = [
                Require {
                    lhs: Operand::Len(1),
                    cmp: Cmp::Eq,
                    rhs: Operand::Dim(4, 1),
                    message: "one per row",
                },
                Require {
                    lhs: Operand::Scalar(2),
                    cmp: Cmp::Finite,
                    rhs: Operand::Int(-7),
                    message: "",
                },
                Require {
                    lhs: Operand::Ptr(0),
                    cmp: Cmp::Ne,
                    rhs: Operand::Ptr(1),
                    message: "",
                },
            ];
            let extras = Extras {
                zero: &[1],
                scratch: &scratch,
                require: &require,
                tiles: &[],
            };
            const L: usize = 66 + 5 + 22 + 87;
            assert_eq!(encoded_len_ext("k", "k", &params, &[], 0, &extras), L);
            let bytes: [u8; L] = encode_ext("k", "k", &params, &[], 0, &extras);
            let sig = decode(&bytes).unwrap();
            assert_eq!(sig.zero, [1]);
            assert_eq!(sig.scratch.len(), 1);
            assert_eq!(sig.scratch[0].len(), scratch[0]);
            assert_eq!(sig.require.len(), 3);
            assert_eq!(sig.require[0].lhs, OperandSig::Len(1));
            assert_eq!(sig.require[0].rhs, OperandSig::Dim(4, 1));
            assert_eq!(sig.require[0].message, "one per row");
            assert_eq!(sig.require[1].cmp(), Some(Cmp::Finite));
            assert_eq!(sig.require[1].rhs, OperandSig::Int(-7));
            assert_eq!(sig.require[2].op, "!=");
            // The JSON form round-trips, and leaves the fields out when empty.
            let json = serde_json::to_string(&sig).unwrap();
            assert_eq!(serde_json::from_str::<KernelSig>(&json).unwrap(), sig);
            assert!(json.contains(r#""dim":[4,1]"#), "{json}");
            // Truncations are errors — except at a section boundary with complete
            // declarations (the record format's sections are optional; the builder reads
            // records of known length, so truncation does not happen there).
            for cut in 0..L {
                assert_eq!(decode(&bytes[..cut]).is_err(), cut != 93, "cut {cut}");
            }
            // A record without extras decodes as before, and has none.
            let plain: [u8; 45] = encode("k", "k", &params[..3], &[], 0);
            let p = decode(&plain).unwrap();
            assert!(p.zero.is_empty() && p.scratch.is_empty() && p.require.is_empty());
            // ... but a scratch parameter without a length declaration is refused.
            let undeclared: [u8; 66] = encode("k", "k", &params, &[], 0);
            assert!(decode(&undeclared).unwrap_err().contains("`ws`"));
            assert_eq!(sig.scratch[0].len().of, 0);
            let mut no_of = sig.clone();
            no_of.scratch[0].of = None;
            assert_eq!(no_of.scratch[0].len().of, NONE);
            // Extras must name parameters of the right kinds.
            let mut bad = sig.clone();
            bad.zero = std::vec![0];
            assert!(bad.check_extras().unwrap_err().contains("zero(x)"));
            let mut bad = sig.clone();
            bad.require[0].rhs = OperandSig::Dim(4, 2);
            assert!(bad.check_extras().is_err());
            let mut bad = sig.clone();
            bad.require[0].lhs = OperandSig::Len(3);
            assert!(bad.check_extras().is_err());
            let mut unknown = bytes.to_vec();
            unknown[66] = 9;
            assert!(decode(&unknown).unwrap_err().contains("section 9"));
        }
    }

    #[test]
    fn tensor_map_declarations_round_trip() {
        use crate::extras::{Extras, TileDecl};
        use crate::manifest::{decode, encode_ext, encoded_len_ext};
        use crate::{KernelParam, ParamDesc, Slice, TensorMap, TileDesc};
        type A = TensorMap<f32, 128, 64, 32>;
        let params: [(&str, ParamDesc); 2] = [
            ("a", <A as KernelParam>::DESC),
            ("x", <Slice<f32> as KernelParam>::DESC),
        ];
        assert_eq!(
            (params[0].1.size, params[0].1.align, params[0].1.rank),
            (176, 64, 2)
        );
        let tiles = [
            TileDecl {
                param: 0,
                tile: <A as KernelParam>::TILE,
            },
            TileDecl {
                param: 1,
                tile: TileDesc::NONE,
            },
        ];
        let extras = Extras {
            tiles: &tiles,
            ..Extras::NONE
        };
        const L: usize = 4 + 2 + 2 + 1 + (2 + 8) * 2 + 1 + 2 + (4 + 13);
        assert_eq!(encoded_len_ext("k", "k", &params, &[], 0, &extras), L);
        let bytes: [u8; L] = encode_ext("k", "k", &params, &[], 0, &extras);
        let sig = decode(&bytes).unwrap();
        let tile = sig.params[0].tile.as_ref().unwrap();
        assert_eq!(
            (tile.box_dims.as_slice(), tile.swizzle),
            (&[64, 32][..], 128)
        );
        assert_eq!(sig.params[0].kind, "tensormap");
        assert!(sig.params[1].tile.is_none());
        assert_eq!(A::BOX_BYTES, 64 * 32 * 4);
    }
}
