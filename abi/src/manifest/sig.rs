//! One kernel's signature: [`KernelSig`] and its [`ParamSig`]s, with the checks of its
//! extras against its parameters.

use super::extra_sig::{RequireSig, ScratchSig};
use crate::dtype::DType;
use crate::extras::Operand;
use crate::kinds::ParamKind;
use crate::launch::LaunchSpec;
use serde::{Deserialize, Serialize};
use std::format;
use std::string::String;
use std::vec::Vec;

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
    /// ([`Manifest::arch`](super::Manifest::arch)): `#[kernel(arch = "sm_90a")]`. The kernel is in that part of
    /// the module ([`Manifest::parts`](super::Manifest::parts)).
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

    /// Checks that the extras name parameters of the right kinds: zeroed outputs are
    /// written arrays, scratch lengths name scratch parameters (each exactly once, and
    /// every scratch parameter has one), requirements read scalars or caller arrays.
    pub fn check_extras(&self) -> Result<(), String> {
        let kind = |i: u8| self.params.get(i as usize).and_then(ParamSig::param_kind);
        let name = |i: u8| self.params.get(i as usize).map_or("?", |p| p.name.as_str());
        for &z in &self.zero {
            let p = self.params.get(z as usize);
            if !matches!(kind(z), Some(ParamKind::Slice | ParamKind::View))
                || !p.is_some_and(|p| p.mutable)
            {
                return Err(format!(
                    "zero({}) of `{}` does not name a written array parameter",
                    name(z),
                    self.name
                ));
            }
        }
        for (i, p) in self.params.iter().enumerate() {
            let declared = self
                .scratch
                .iter()
                .filter(|s| s.param as usize == i)
                .count();
            let is_scratch = p.param_kind() == Some(ParamKind::Scratch);
            if declared != usize::from(is_scratch) {
                return Err(format!(
                    "kernel `{}`: scratch parameter `{}` needs exactly one length \
                     declaration (#[kernel(scratch({} = …))]), found {declared}",
                    self.name, p.name, p.name
                ));
            }
        }
        for s in &self.scratch {
            if let Some(of) = s.of {
                if !kind(of).is_some_and(|k| k.is_array() && k.is_argument()) {
                    return Err(format!(
                        "kernel `{}`: scratch length of `{}` uses `{}`, not an array argument",
                        self.name,
                        name(s.param),
                        name(of)
                    ));
                }
            }
        }
        for r in &self.require {
            if r.cmp().is_none() {
                return Err(format!(
                    "kernel `{}`: unknown comparison `{}`",
                    self.name, r.op
                ));
            }
            for o in [r.lhs, r.rhs] {
                let ok = match Operand::from(o) {
                    Operand::Int(_) => true,
                    Operand::Scalar(p) => kind(p) == Some(ParamKind::Scalar),
                    Operand::Len(p) | Operand::Ptr(p) => {
                        kind(p).is_some_and(|k| k.is_array() && k.is_argument())
                    }
                    // A slice takes C-contiguous arrays of any rank: the host checks
                    // that the array passed has the axis.
                    Operand::Dim(p, axis) => kind(p).is_some_and(|k| {
                        k.is_array()
                            && k.is_argument()
                            && (!k.fixes_rank() || self.params[p as usize].rank > axis)
                    }),
                };
                if !ok {
                    return Err(format!(
                        "kernel `{}`: requirement `{:?} {} {:?}` reads a parameter that \
                         does not exist or has the wrong kind or rank",
                        self.name, r.lhs, r.op, r.rhs
                    ));
                }
            }
        }
        Ok(())
    }
}
