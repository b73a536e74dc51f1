//! Which kernel runs: the one rule by which a family launcher (Python's `Family`,
//! [`Module::select`]) and a kernel's typed launcher ([`Kernel::variant_for`]) choose among
//! kernels for the arguments they were given.
//!
//! # The rule
//!
//! A parameter *takes* an argument when the kinds agree (scalar or array) and, for an array,
//! the element type, the rank (for kinds that fix it) and the layout agree — the layout being
//! what the parameter kind's table entry says it takes ([`ParamKind::array_layout`](ferrocuda_abi::ParamKind::array_layout):
//! C-contiguous for slices, any strides of whole elements for views). Scalars are taken by
//! any scalar parameter: launchers convert them to the parameter's type. Among the candidates
//! whose every parameter takes its argument, [`select`] picks the one that demands the most
//! of the layouts (the sum of [`ArrayLayout::rank`] over its parameters): a family's
//! contiguous, vectorised kernel whenever every argument allows it, its strided kernel
//! otherwise — whatever order the kernels have in the manifest. Equals go by candidate order.
//!
//! When no candidate takes the arguments but some take their kinds, element types and ranks,
//! the one of those that demands the least of the layouts is chosen anyway, so that the
//! launch's argument check names what is wrong with the layout (a stride that splits
//! elements, a non-contiguous array where only slices exist). Nothing here looks at whether
//! an array may be written (read-only arrays, outputs whose elements overlap, aliasing): the
//! argument check refuses those, with its own messages, after the selection.

use std::fmt::Write as _;

use super::Arg;
use crate::cai::ArrayDesc;
use crate::error::{Error, Result};
use crate::module::{Kernel, Module, Param, MAX_PARAMS};
use ferrocuda_abi::{layout, ArrayLayout};

/// What selection looks at in one argument.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A scalar (of any type: launchers convert it to the parameter's).
    Scalar,
    /// An array, by its description.
    Array(&'a ArrayDesc),
}

impl<'a> From<&Arg<'a>> for Operand<'a> {
    fn from(a: &Arg<'a>) -> Self {
        match *a {
            Arg::Array(d) | Arg::Host(d) => Operand::Array(d),
            Arg::Scalar(_) => Operand::Scalar,
        }
    }
}

/// `true` when array `d` has `layout`: for [`ArrayLayout::Contiguous`] the descriptor's
/// C-contiguity, for [`ArrayLayout::Strided`] element-aligned strides.
pub fn has_layout(d: &ArrayDesc, layout: ArrayLayout) -> bool {
    match layout {
        ArrayLayout::Contiguous => d.is_c_contiguous(),
        ArrayLayout::Strided => layout::element_aligned(d.shape(), d.byte_strides(), d.itemsize()),
    }
}

impl Param {
    /// `true` when this parameter takes `op`'s kind, element type and rank (layout aside).
    pub fn takes_type(&self, op: Operand<'_>) -> bool {
        match (self.kind.is_array(), op) {
            (false, Operand::Scalar) => true,
            (true, Operand::Array(d)) => {
                d.dtype() == self.dtype && (!self.kind.fixes_rank() || d.ndim() == self.rank)
            }
            _ => false,
        }
    }

    /// `true` when this parameter takes `op`: its kind, element type, rank and layout.
    pub fn takes(&self, op: Operand<'_>) -> bool {
        self.takes_type(op)
            && match (self.kind.array_layout(), op) {
                (Some(layout), Operand::Array(d)) => has_layout(d, layout),
                _ => true,
            }
    }
}

/// How much a kernel demands of its arguments' layouts: the sum of its parameters'
/// [`ArrayLayout::rank`].
fn demands(k: &Kernel<'_>) -> u32 {
    k.signature()
        .params
        .iter()
        .filter_map(|p| p.kind.array_layout())
        .map(ArrayLayout::rank)
        .sum()
}

/// The kernel of `candidates` for arguments `operands` (see the [module documentation](self)):
/// the one that takes them and demands the most of their layouts; else, when none takes
/// them, the one that takes their types and demands the least (its argument check will name
/// the layout it cannot take); else `None`. Equals go by candidate order.
pub fn select<'m>(
    candidates: impl IntoIterator<Item = Kernel<'m>>,
    operands: &[Operand<'_>],
) -> Option<Kernel<'m>> {
    // No kernel can demand more than the contiguous layout of every array argument: a
    // candidate that does and takes the arguments ends the search (the first of equals wins).
    let arrays = operands.iter().filter(|o| matches!(o, Operand::Array(_)));
    let ceiling = arrays.count() as u32 * ArrayLayout::Contiguous.rank();
    let mut best: Option<(Kernel<'m>, u32)> = None;
    let mut fallback: Option<(Kernel<'m>, u32)> = None;
    for k in candidates {
        let params = &k.signature().params;
        if params.len() != operands.len() {
            continue;
        }
        let pairs = || params.iter().zip(operands);
        if !pairs().all(|(p, &op)| p.takes_type(op)) {
            continue;
        }
        let demand = demands(&k);
        if pairs().all(|(p, &op)| p.takes(op)) {
            if demand >= ceiling {
                return Some(k);
            }
            if best.is_none_or(|(_, d)| demand > d) {
                best = Some((k, demand));
            }
        } else if fallback.is_none_or(|(_, d)| demand < d) {
            fallback = Some((k, demand));
        }
    }
    best.or(fallback).map(|(k, _)| k)
}

/// Everything [`select`] looks at in a launch's operands, in a few bytes: per operand, scalar
/// or an array's element type, rank, C-contiguity and element alignment (the two layouts of
/// [`has_layout`]). Two launches with equal keys select the same kernel from the same
/// candidates, so a launcher may remember its choice by key ([`SelectionMemo`]). Launches of
/// more than [`SelectionKey::MAX_OPERANDS`] operands have no key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SelectionKey {
    n: u8,
    ops: [u16; SelectionKey::MAX_OPERANDS],
}

impl SelectionKey {
    /// The most operands a key describes.
    pub const MAX_OPERANDS: usize = 12;

    /// The key of `operands`; `None` beyond [`MAX_OPERANDS`](Self::MAX_OPERANDS).
    pub fn of(operands: &[Operand<'_>]) -> Option<SelectionKey> {
        if operands.len() > Self::MAX_OPERANDS {
            return None;
        }
        let mut ops = [0u16; Self::MAX_OPERANDS];
        for (slot, op) in ops.iter_mut().zip(operands) {
            *slot = match op {
                Operand::Scalar => 0,
                Operand::Array(d) => {
                    let dtype = ferrocuda_abi::DType::ALL
                        .iter()
                        .position(|x| *x == d.dtype())?;
                    let contiguous = has_layout(d, ArrayLayout::Contiguous);
                    let aligned = has_layout(d, ArrayLayout::Strided);
                    // 1 (array) | contiguous << 1 | aligned << 2 | rank << 3 | dtype << 8.
                    1 | u16::from(contiguous) << 1
                        | u16::from(aligned) << 2
                        | (d.ndim() as u16) << 3
                        | (dtype as u16) << 8
                }
            };
        }
        Some(SelectionKey {
            n: operands.len() as u8,
            ops,
        })
    }
}

/// A launcher's memory of its last selections: up to [`SelectionMemo::ENTRIES`] keys and the
/// choice [`select`] made for each (the launcher's candidates never change). Shared by the
/// threads that launch through one launcher: a lookup that finds the memo busy just misses.
#[derive(Debug)]
pub struct SelectionMemo<V: Copy> {
    /// The entries and the next one to replace.
    entries: std::sync::Mutex<(MemoEntries<V>, usize)>,
}

type MemoEntries<V> = [Option<(SelectionKey, V)>; MEMO_ENTRIES];

/// [`SelectionMemo::ENTRIES`].
const MEMO_ENTRIES: usize = 8;

impl<V: Copy> Default for SelectionMemo<V> {
    fn default() -> Self {
        SelectionMemo {
            entries: std::sync::Mutex::new(([None; MEMO_ENTRIES], 0)),
        }
    }
}

impl<V: Copy> SelectionMemo<V> {
    /// Keys remembered at most (then the oldest is replaced).
    pub const ENTRIES: usize = MEMO_ENTRIES;

    /// The choice remembered for `key`.
    pub fn get(&self, key: &SelectionKey) -> Option<V> {
        let e = self.entries.try_lock().ok()?;
        e.0.iter()
            .flatten()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
    }

    /// Remembers `value` as the choice for `key`.
    pub fn insert(&self, key: SelectionKey, value: V) {
        if let Ok(mut e) = self.entries.try_lock() {
            let next = e.1;
            e.0[next] = Some((key, value));
            e.1 = (next + 1) % Self::ENTRIES;
        }
    }
}

/// The operands of `args`, in fixed-capacity storage; `None` beyond [`MAX_PARAMS`].
fn operands<'a>(args: &[Arg<'a>], out: &mut [Operand<'a>; MAX_PARAMS]) -> Option<usize> {
    if args.len() > MAX_PARAMS {
        return None;
    }
    for (slot, a) in out.iter_mut().zip(args) {
        *slot = Operand::from(a);
    }
    Some(args.len())
}

/// `"float32 2-D array, scalar, …"`: what selection saw, for messages.
pub fn describe(operands: &[Operand<'_>]) -> String {
    let mut s = String::new();
    for (i, op) in operands.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        match op {
            Operand::Scalar => s.push_str("scalar"),
            Operand::Array(d) => {
                let layout = if d.is_c_contiguous() {
                    ""
                } else {
                    " (strided)"
                };
                let _ = write!(s, "{} {}-D array{layout}", d.dtype().name(), d.ndim());
            }
        }
    }
    s
}

impl<'m> Kernel<'m> {
    /// The kernel a launch of this one with `args` runs: this kernel, or — when it has
    /// layout variants ([`layout_variants`](Self::layout_variants)) — the one of them and it
    /// that [`select`] picks for the arguments' layouts (this kernel when none fits: its
    /// argument check then says why). The typed launchers call it; [`Kernel::launch`] itself
    /// launches exactly the kernel it is called on.
    pub fn variant_for(&self, args: &[Arg<'_>]) -> Kernel<'m> {
        if self.layout_variants().next().is_none() {
            return *self;
        }
        let mut ops = [Operand::Scalar; MAX_PARAMS];
        match operands(args, &mut ops) {
            Some(n) => self.variant_for_operands(&ops[..n]),
            None => *self,
        }
    }

    /// [`variant_for`](Self::variant_for) on what selection sees of the arguments (for
    /// launchers that have not converted their scalars yet).
    pub fn variant_for_operands(&self, operands: &[Operand<'_>]) -> Kernel<'m> {
        if self.module.layout_variants_of(self.index).is_empty() {
            return *self;
        }
        let variants = self.layout_variants();
        select(std::iter::once(*self).chain(variants), operands).unwrap_or(*self)
    }
}

impl Module {
    /// The kernel of `family` for `args` ([`select`]): the variant whose element types and
    /// ranks match the arrays', the contiguous one whenever every array allows it.
    ///
    /// # Errors
    ///
    /// `Value` when the module has no such family; `Type` when no variant takes the
    /// arguments' kinds, element types and ranks (the message lists the variants).
    pub fn select<'m>(&'m self, family: &str, args: &[Arg<'_>]) -> Result<Kernel<'m>> {
        let mut ops = [Operand::Scalar; MAX_PARAMS];
        let n = operands(args, &mut ops).ok_or_else(|| {
            Error::type_error(format!("a launch takes at most {MAX_PARAMS} arguments"))
        })?;
        let members = || {
            let all = self.signatures().iter().enumerate();
            all.filter(move |(_, s)| s.family == family)
                .map(move |(index, _)| Kernel {
                    module: self,
                    index,
                })
        };
        if members().next().is_none() {
            return Err(Error::value(format!(
                "no kernel family named `{family}` in this module"
            )));
        }
        if let Some(k) = select(members(), &ops[..n]) {
            return Ok(k);
        }
        let mut variants = String::new();
        for k in members() {
            let _ = write!(
                variants,
                "\n    {}({})",
                k.name(),
                k.signature().param_list()
            );
        }
        Err(Error::type_error(format!(
            "kernel family `{family}` has no variant for ({}); variants:{variants}",
            describe(&ops[..n])
        )))
    }
}
