//! Kernel signatures in the form launches use: each manifest record decoded once, its
//! parameters laid out in the launch buffer by the abi's table.

use crate::error::{Error, Result};
use crate::extras::{Requirement, ScratchParam};
use ferrocuda_abi::launch::LaunchDecl;
use ferrocuda_abi::manifest::KernelSig;
use ferrocuda_abi::DType;
use ferrocuda_abi::ParamKind;
use std::ffi::CString;

/// Most parameters a kernel may have.
pub const MAX_PARAMS: usize = 64;

/// A kernel parameter the caller passes an argument for, decoded from the manifest once at
/// module creation (scratch parameters, which the launcher provides, are in
/// [`Signature::scratch`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Name in the kernel source (used in every error about the argument).
    pub name: String,
    /// Scalar, slice or view.
    pub kind: ParamKind,
    /// Element type.
    pub dtype: DType,
    /// 0 for scalars, 1 for slices, N for views.
    pub rank: usize,
    /// Whether the kernel may write through it.
    pub mutable: bool,
    /// Position in the kernel's full parameter list (scratch parameters included).
    pub entry: usize,
    /// Byte offset in the launch parameter buffer.
    pub offset: usize,
    /// Byte size in the launch parameter buffer.
    pub size: usize,
    /// A tensor map's box and swizzle ([`ParamKind::TensorMap`] only).
    pub tile: Option<ferrocuda_abi::manifest::TileSig>,
}

/// A kernel's signature in the form launches use.
#[derive(Clone, Debug)]
pub struct Signature {
    /// PTX entry name.
    pub name: String,
    /// Family name.
    pub family: String,
    /// The parameters callers pass arguments for, in order.
    pub params: Vec<Param>,
    /// The workspaces the launcher provides (`Scratch<T>` parameters).
    pub scratch: Vec<ScratchParam>,
    /// Outputs the launcher zero-fills before the launch (indices into `params`).
    pub zero: Vec<usize>,
    /// Conditions on the arguments, checked before the launch.
    pub require: Vec<Requirement>,
    /// Number of parameters of the PTX entry (`params` and `scratch` together).
    pub entry_params: usize,
    /// Groups of parameter indices whose arrays must have equal shapes.
    pub same_shape: Vec<Vec<usize>>,
    /// Elements of the largest array one thread handles per pass (`#[kernel(items_per_thread
    /// = k)]`): the automatic grid has one thread per `k` elements. `None`: one resident wave.
    pub items_per_thread: Option<u16>,
    /// What the kernel declares about its launch shape: `max_threads`, a fixed `block`, the
    /// element type of its dynamic shared memory, the automatic grid's dimensions.
    pub launch: LaunchDecl,
    /// Size of the whole parameter buffer.
    pub buffer_size: usize,
    pub(crate) c_name: CString,
    /// The name, leaked once per module so that fault reports can name the last kernel.
    pub(crate) static_name: &'static String,
}

/// Launch parameters fit in this many bytes (the driver's classic limit is 4 KiB).
pub const PARAM_BUFFER_SIZE: usize = 4096;

impl Signature {
    pub(crate) fn from_sig(k: &KernelSig) -> Result<Signature> {
        let bad = |m: String| Error::value(format!("kernel manifest, kernel `{}`: {m}", k.name));
        if k.params.len() > MAX_PARAMS {
            return Err(bad(format!("more than {MAX_PARAMS} parameters")));
        }
        let (params, mut scratch, map, offset) = Self::lay_out_params(k, &bad)?;
        if offset > PARAM_BUFFER_SIZE {
            return Err(bad(format!(
                "parameters take {offset} bytes (> {PARAM_BUFFER_SIZE})"
            )));
        }
        let same_shape = k
            .same_shape
            .iter()
            .map(|g| {
                g.iter()
                    .map(|&i| map.get(i as usize).copied().flatten().unwrap_or(usize::MAX))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>();
        let extras = crate::extras::resolve(k, &map, &params, &mut scratch).map_err(bad)?;
        for g in &same_shape {
            if g.iter()
                .any(|&i| i >= params.len() || !params[i].kind.is_array())
            {
                return Err(bad("same_shape names a missing or scalar parameter".into()));
            }
        }
        let launch = k
            .launch
            .decl()
            .map_err(|e| bad(format!("launch declaration: {e}")))?;
        let c_name =
            CString::new(k.name.clone()).map_err(|_| bad("kernel name contains NUL".into()))?;
        Ok(Signature {
            name: k.name.clone(),
            family: k.family.clone(),
            entry_params: params.len() + scratch.len(),
            params,
            scratch,
            zero: extras.zero,
            require: extras.require,
            same_shape,
            items_per_thread: k.items_per_thread,
            launch,
            buffer_size: offset,
            c_name,
            static_name: Box::leak(Box::new(k.name.clone())),
        })
    }

    /// The parameters of `k` in entry order, laid out in the parameter buffer: the caller's
    /// parameters, the scratch workspaces, the map from entry index to caller index (`None`
    /// for scratch) and the buffer's size. Each layout is checked against the abi's.
    #[allow(clippy::type_complexity)]
    fn lay_out_params(
        k: &KernelSig,
        bad: &dyn Fn(String) -> Error,
    ) -> Result<(Vec<Param>, Vec<ScratchParam>, Vec<Option<usize>>, usize)> {
        let mut params = Vec::with_capacity(k.params.len());
        let mut scratch = Vec::new();
        // Full parameter index -> caller parameter index (None for scratch parameters).
        let mut map = Vec::with_capacity(k.params.len());
        let mut offset = 0usize;
        for (entry, p) in k.params.iter().enumerate() {
            let kind = p
                .param_kind()
                .ok_or_else(|| bad(format!("parameter `{}` has unknown kind", p.name)))?;
            let dtype = p
                .element()
                .ok_or_else(|| bad(format!("parameter `{}` has unknown dtype", p.name)))?;
            let rank = p.rank as usize;
            // The layouts of ferrocuda-abi's parameter types, checked against the manifest.
            let layout = kind.layout(dtype, rank);
            let Some((size, align)) = layout.filter(|&l| l == (p.size.into(), p.align.into()))
            else {
                let expected = match layout {
                    Some((size, align)) => format!("expected {size}/{align}"),
                    None => format!("no {} parameter has rank {rank}", kind.name()),
                };
                return Err(bad(format!(
                    "parameter `{}` ({} {} rank {}) has size/align {}/{}, {expected}",
                    p.name, p.kind, p.dtype, p.rank, p.size, p.align
                )));
            };
            offset = offset.next_multiple_of(align);
            if kind.is_argument() {
                map.push(Some(params.len()));
                params.push(Param {
                    name: p.name.clone(),
                    kind,
                    dtype,
                    rank,
                    mutable: p.mutable,
                    entry,
                    offset,
                    size,
                    tile: p.tile.clone(),
                });
            } else {
                map.push(None);
                scratch.push(ScratchParam {
                    name: p.name.clone(),
                    dtype,
                    entry,
                    offset,
                    size,
                    len: ferrocuda_abi::extras::ScratchLen {
                        param: entry as u8,
                        per_block: 0,
                        constant: 0,
                        of: ferrocuda_abi::extras::NONE,
                        mult: 0,
                        div: 1,
                    },
                });
            }
            offset += size;
        }
        Ok((params, scratch, map, offset))
    }

    /// Whether a launch has work around it: zeroed outputs or scratch workspaces.
    pub fn has_extras(&self) -> bool {
        !self.zero.is_empty() || !self.scratch.is_empty()
    }

    /// `"a, b, out"` — for error messages.
    pub fn param_list(&self) -> String {
        self.params
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}
