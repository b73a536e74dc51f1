//! Kernel signatures in the form launches use: each manifest record decoded once, its
//! parameters laid out in the launch buffer by the abi's table, its extras (zeroed outputs,
//! requirements, scratch lengths) resolved against its caller parameters.

use crate::error::{Error, Result};
use ferrocuda_abi::extras::{Cmp, Operand, ScratchLen, NONE};
use ferrocuda_abi::launch::LaunchDecl;
use ferrocuda_abi::manifest::KernelSig;
use ferrocuda_abi::DType;
use ferrocuda_abi::ParamKind;
use std::ffi::CString;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// The kernel's identity for its persistent workspaces (`#[kernel(persist(…))]`): unique
    /// to this signature (one per kernel of a loaded module), `None` unless the kernel has
    /// workspaces and every one persists. The launcher skips the zero-fill of a stream's kept
    /// workspace when this kernel was its last user ([`crate::launch`]'s extras).
    pub persist: Option<NonZeroU64>,
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
        let extras = resolve(k, &map, &params, &mut scratch).map_err(bad)?;
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
        let persist = (!scratch.is_empty() && scratch.iter().all(|s| s.len.persist))
            .then(|| {
                static NEXT: AtomicU64 = AtomicU64::new(1);
                NonZeroU64::new(NEXT.fetch_add(1, Ordering::Relaxed))
            })
            .flatten();
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
            persist,
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
                        persist: false,
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

    /// `"add_f32(a: float32[:] (C-contiguous), …, out: float32[:] (C-contiguous, written))"`
    /// — the signature as launchers show it (messages, documentation).
    pub fn text(&self) -> String {
        let ps: Vec<String> = self.params.iter().map(Param::text).collect();
        format!("{}({})", self.name, ps.join(", "))
    }

    /// The `TypeError` of a launch of this kernel with `n` arguments: ``kernel `add_f32`
    /// takes 3 argument(s) (a, b, out), got 2``.
    pub fn arity_error(&self, n: usize) -> Error {
        Error::type_error(format!(
            "kernel `{}` takes {} argument(s) ({}), got {n}",
            self.name,
            self.params.len(),
            self.param_list()
        ))
    }
}

impl Param {
    /// `"out: float32[:] (C-contiguous, written)"` — the parameter as [`Signature::text`]
    /// shows it.
    pub fn text(&self) -> String {
        let dt = self.dtype.name();
        let written = if self.mutable { ", written" } else { "" };
        match self.kind {
            ParamKind::Scalar => format!("{}: {dt}", self.name),
            ParamKind::Slice => format!("{}: {dt}[:] (C-contiguous{written})", self.name),
            ParamKind::View => format!(
                "{}: {dt} {}-D array (any strides{written})",
                self.name, self.rank
            ),
            ParamKind::TensorMap => format!(
                "{}: {dt} {}-D array (read by the Tensor Memory Accelerator: unit inner stride, \
                 16-byte multiple strides{written})",
                self.name, self.rank
            ),
            // Never an argument: signatures list the caller's parameters only.
            ParamKind::Scratch => {
                format!("{}: {dt} workspace (provided by the launcher)", self.name)
            }
        }
    }
}

/// Most scratch parameters a kernel may have.
pub const MAX_SCRATCH: usize = 8;

/// A scratch parameter: a workspace the launcher provides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScratchParam {
    /// Name in the kernel source.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Position in the kernel's full parameter list.
    pub entry: usize,
    /// Byte offset in the launch parameter buffer.
    pub offset: usize,
    /// Byte size in the launch parameter buffer.
    pub size: usize,
    /// Its length formula; `len.of` is an index into [`Signature::params`] (or `NONE`).
    pub len: ScratchLen,
}

/// A condition on the arguments (`#[kernel(require(…))]`), its operands indexing
/// [`Signature::params`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// Left operand.
    pub lhs: Operand,
    /// Comparison.
    pub cmp: Cmp,
    /// Right operand (ignored by `finite`).
    pub rhs: Operand,
    /// The kernel's explanation (may be empty).
    pub message: String,
    /// The condition as source text, e.g. `a.shape[1] == b.shape[0]`.
    pub text: String,
    /// The parameter an error names: the first one the condition reads.
    pub arg: usize,
}

/// The extras of a signature, resolved: zeroed outputs, requirements, scratch lengths.
pub(crate) struct Resolved {
    pub zero: Vec<usize>,
    pub require: Vec<Requirement>,
}

/// Resolves `k`'s zeroed outputs and requirements against the caller parameters `params`,
/// given `map` (full parameter index → caller parameter index; `None` for scratch), and remaps
/// the scratch formulas of `scratch`.
pub(crate) fn resolve(
    k: &KernelSig,
    map: &[Option<usize>],
    params: &[Param],
    scratch: &mut [ScratchParam],
) -> std::result::Result<Resolved, String> {
    k.check_extras()?;
    let caller = |i: u8| -> std::result::Result<usize, String> {
        map.get(i as usize)
            .copied()
            .flatten()
            .ok_or_else(|| format!("extra names parameter {i}, which is not an argument"))
    };
    let zero = k
        .zero
        .iter()
        .map(|&z| caller(z))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    if scratch.len() > MAX_SCRATCH {
        return Err(format!("more than {MAX_SCRATCH} scratch parameters"));
    }
    for s in scratch.iter_mut() {
        let decl = k
            .scratch
            .iter()
            .find(|d| d.param as usize == s.entry)
            .ok_or_else(|| format!("scratch parameter `{}` has no length", s.name))?;
        let mut len = decl.len();
        if len.of != NONE {
            len.of = caller(len.of)? as u8;
        }
        s.len = len;
    }
    let mut require = Vec::with_capacity(k.require.len());
    for r in &k.require {
        let cmp = r
            .cmp()
            .ok_or_else(|| format!("unknown comparison `{}`", r.op))?;
        let remap = |o: Operand| -> std::result::Result<Operand, String> {
            Ok(match o {
                Operand::Int(v) => Operand::Int(v),
                Operand::Scalar(p) => Operand::Scalar(caller(p)? as u8),
                Operand::Len(p) => Operand::Len(caller(p)? as u8),
                Operand::Dim(p, a) => Operand::Dim(caller(p)? as u8, a),
                Operand::Ptr(p) => Operand::Ptr(caller(p)? as u8),
            })
        };
        let (lhs, rhs) = (remap(r.lhs.into())?, remap(r.rhs.into())?);
        let arg = lhs.param().or(rhs.param()).unwrap_or(0) as usize;
        let show = |o: Operand| operand_text(o, params);
        let text = cmp.condition(&show(lhs), &show(rhs));
        require.push(Requirement {
            lhs,
            cmp,
            rhs,
            message: r.message.clone(),
            text,
            arg,
        });
    }
    Ok(Resolved { zero, require })
}

/// The operand `o` as source text (`a.shape[1]`), naming the caller parameters `params`.
pub(crate) fn operand_text(o: Operand, params: &[Param]) -> String {
    let name = |p: u8| params.get(p as usize).map_or("?", |p| p.name.as_str());
    match o {
        Operand::Int(v) => v.to_string(),
        Operand::Scalar(p) => name(p).to_string(),
        Operand::Len(p) => format!("{}.len()", name(p)),
        Operand::Dim(p, a) => format!("{}.shape[{a}]", name(p)),
        Operand::Ptr(p) => format!("{}.ptr()", name(p)),
    }
}
