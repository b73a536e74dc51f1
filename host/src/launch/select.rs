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
//! Before the layouts (and the architectures, [`select_for`]), the kernels' requirements:
//! among the candidates that take the arguments, one whose `require` conditions hold for the
//! arrays ([`fits`]: shapes, lengths, addresses — a condition on a scalar is not known yet and
//! does not count) wins over one whose do not. A family may so hold kernels for different
//! domains of one layout — a head dimension of at most 128 and one of at most 256 — and a
//! kernel that would refuse the arrays gives way to one that takes them. When none holds, the
//! choice is the one made without requirements, and the launch's check names the first
//! condition that fails (a family states its overall limit as every kernel's first condition
//! so that the message gives it). A launcher whose candidates' conditions differ keys its
//! memory of choices by their verdicts too ([`SelectionKey::within`]); one whose conditions
//! agree pays nothing for them.
//!
//! When no candidate takes the arguments but some take their kinds, element types and ranks,
//! the one of those that demands the least of the layouts is chosen anyway, so that the
//! launch's argument check names what is wrong with the layout (a stride that splits
//! elements, a non-contiguous array where only slices exist). Nothing here looks at whether
//! an array may be written (read-only arrays, outputs whose elements overlap, aliasing): the
//! argument check refuses those, with its own messages, after the selection.

use std::fmt::Write as _;

use super::Arg;
use crate::error::{Error, Result};
use crate::interop::cai::ArrayDesc;
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
/// C-contiguity, for [`ArrayLayout::Strided`] element-aligned strides, for
/// [`ArrayLayout::Tiled`] the Tensor Memory Accelerator's rule and a 16-byte aligned address.
pub fn has_layout(d: &ArrayDesc, layout: ArrayLayout) -> bool {
    match layout {
        ArrayLayout::Contiguous => d.is_c_contiguous(),
        ArrayLayout::Strided => layout::element_aligned(d.shape(), d.byte_strides(), d.itemsize()),
        ArrayLayout::Tiled => {
            d.size() > 0
                && d.ptr().is_multiple_of(16)
                && layout.admits(d.shape(), d.byte_strides(), d.itemsize())
        }
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

/// Whether `k`'s requirements hold for `operands` as far as their arrays tell (shapes,
/// lengths, addresses; a requirement that reads a scalar, or an axis an array lacks, is left
/// to the launch's check).
pub fn fits(k: &Kernel<'_>, operands: &[Operand<'_>]) -> bool {
    let array = |p: u8| match operands.get(p as usize) {
        Some(Operand::Array(d)) => Some(*d),
        _ => None,
    };
    k.signature()
        .require
        .iter()
        .all(|r| super::extras::holds_on_arrays(r, array))
}

/// One kernel of `kernels` per distinct list of requirements (their conditions, messages
/// aside), in order: whether each of them [`fits`] decides whether every kernel does. More
/// than one means the choice among `kernels` may depend on the arguments' shapes, not only on
/// what a [`SelectionKey`] holds: a launcher then adds their verdicts to its key
/// ([`SelectionKey::within`]).
pub fn rule_sets<'m>(kernels: impl IntoIterator<Item = Kernel<'m>>) -> Vec<Kernel<'m>> {
    let conditions = |k: &Kernel<'m>| -> Vec<_> {
        k.signature()
            .require
            .iter()
            .map(|r| (r.lhs, r.cmp, r.rhs))
            .collect()
    };
    let mut seen = Vec::new();
    let mut sets = Vec::new();
    for k in kernels {
        let c = conditions(&k);
        if !seen.contains(&c) {
            seen.push(c);
            sets.push(k);
        }
    }
    sets
}

/// [`fits`] of each of `kernels` (the first 32) for `operands`, as bits in order.
pub fn fit_mask<'m>(
    kernels: impl IntoIterator<Item = Kernel<'m>>,
    operands: &[Operand<'_>],
) -> u32 {
    kernels
        .into_iter()
        .take(32)
        .enumerate()
        .fold(0, |m, (i, k)| m | u32::from(fits(&k, operands)) << i)
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
/// the layout it cannot take); else `None`. Equals go by candidate order. Architectures are
/// not looked at: [`select_for`] chooses for a device.
pub fn select<'m>(
    candidates: impl IntoIterator<Item = Kernel<'m>>,
    operands: &[Operand<'_>],
) -> Option<Kernel<'m>> {
    select_for(candidates, operands, None)
}

/// [`select`] for a launch on a device of compute capability `cc`: candidates built for an
/// architecture the device does not run ([`Kernel::runs_on`]) are passed over, and among those
/// that take the arguments the one of the highest architecture wins before the layouts are
/// weighed — a family's `sm_90a` kernel on an H100, its portable one elsewhere. When no
/// candidate the device runs takes the arguments' types, the choice is [`select`]'s among all
/// (the launch then refuses the kernel, naming its architecture and the device's). `cc` =
/// `None` is [`select`].
pub fn select_for<'m>(
    candidates: impl IntoIterator<Item = Kernel<'m>>,
    operands: &[Operand<'_>],
    cc: Option<(u32, u32)>,
) -> Option<Kernel<'m>> {
    // No kernel can demand more than the contiguous layout of every array argument: without
    // architectures to weigh, a candidate that does and takes the arguments ends the search
    // (the first of equals wins).
    let arrays = operands.iter().filter(|o| matches!(o, Operand::Array(_)));
    let ceiling = arrays.count() as u32 * ArrayLayout::Contiguous.rank();
    // Whether its requirements hold as far as the arrays tell, architecture rank (0 when not
    // weighed), then demand.
    type Rank = (bool, (u32, ferrocuda_abi::arch::Variant), u32);
    let mut best: Option<(Kernel<'m>, Rank)> = None;
    let mut fallback: Option<(Kernel<'m>, u32)> = None;
    let mut any_fallback: Option<(Kernel<'m>, u32)> = None;
    let lowest = (0, ferrocuda_abi::arch::Variant::Portable);
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
        let runs = cc.is_none_or(|cc| k.runs_on(cc));
        if !runs {
            if any_fallback.is_none_or(|(_, d)| demand < d) {
                any_fallback = Some((k, demand));
            }
            continue;
        }
        if pairs().all(|(p, &op)| p.takes(op)) {
            let arch = match cc {
                Some(_) => {
                    let a = k.arch();
                    (a.number(), a.variant)
                }
                None => lowest,
            };
            let fit = fits(&k, operands);
            if cc.is_none() && demand >= ceiling && fit {
                return Some(k);
            }
            if best.is_none_or(|(_, r)| (fit, arch, demand) > r) {
                best = Some((k, (fit, arch, demand)));
            }
        } else if fallback.is_none_or(|(_, d)| demand < d) {
            fallback = Some((k, demand));
        }
    }
    best.map(|(k, _)| k)
        .or(fallback.map(|(k, _)| k))
        .or(any_fallback.map(|(k, _)| k))
}

/// The compute capability of the device a launch of `operands` runs on, decided as
/// [`Kernel::prepare`] decides the device: the device of the first non-empty array's memory
/// (one driver query), else `device`, else the calling thread's current device, else device 0.
/// For choosing among kernels built for several architectures; a launch checks the device
/// again with every pointer.
pub fn launch_capability(operands: &[Operand<'_>], device: Option<usize>) -> Result<(u32, u32)> {
    crate::driver::init()?;
    let from_array = operands.iter().find_map(|op| match op {
        Operand::Array(d) if d.byte_range().is_some() => Some(d.ptr()),
        _ => None,
    });
    let from_memory = match from_array {
        Some(ptr) => crate::driver::result::pointer_attributes(ptr)
            .ok()
            .filter(|i| i.is_device_accessible())
            .map(|i| i.device.max(0) as usize),
        None => None,
    };
    let ordinal = from_memory
        .or(device)
        .unwrap_or_else(|| crate::driver::result::current_ordinal().unwrap_or(0));
    Ok(crate::driver::Context::get(ordinal)?.compute_capability())
}

/// Everything [`select`] looks at in a launch's operands, in a few bytes: per operand, scalar
/// or an array's element type, rank, and whether it has each layout of [`has_layout`]. Two launches with equal keys select the same kernel from the same
/// candidates, so a launcher may remember its choice by key ([`SelectionMemo`]). Launches of
/// more than [`SelectionKey::MAX_OPERANDS`] operands have no key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SelectionKey {
    n: u8,
    /// The device's compute capability as `major * 16 + minor` (0: not weighed).
    cc: u8,
    /// The candidates' [`fits`] verdicts ([`within`](Self::within); 0 when not weighed).
    fit: u32,
    ops: [u32; SelectionKey::MAX_OPERANDS],
}

impl SelectionKey {
    /// The most operands a key describes.
    pub const MAX_OPERANDS: usize = 12;

    /// The key of `operands`; `None` beyond [`MAX_OPERANDS`](Self::MAX_OPERANDS).
    pub fn of(operands: &[Operand<'_>]) -> Option<SelectionKey> {
        if operands.len() > Self::MAX_OPERANDS {
            return None;
        }
        let mut ops = [0u32; Self::MAX_OPERANDS];
        for (slot, op) in ops.iter_mut().zip(operands) {
            *slot = match op {
                Operand::Scalar => 0,
                Operand::Array(d) => {
                    let dtype = ferrocuda_abi::DType::ALL
                        .iter()
                        .position(|x| *x == d.dtype())?;
                    let contiguous = has_layout(d, ArrayLayout::Contiguous);
                    let aligned = has_layout(d, ArrayLayout::Strided);
                    let tiled = has_layout(d, ArrayLayout::Tiled);
                    // 1 (array) | contiguous << 1 | aligned << 2 | tiled << 3 | rank << 4
                    // (6 bits: 0..=32) | dtype << 10.
                    1 | u32::from(contiguous) << 1
                        | u32::from(aligned) << 2
                        | u32::from(tiled) << 3
                        | (d.ndim() as u32) << 4
                        | (dtype as u32) << 10
                }
            };
        }
        Some(SelectionKey {
            n: operands.len() as u8,
            cc: 0,
            fit: 0,
            ops,
        })
    }

    /// The key of a choice among candidates whose requirements differ ([`rule_sets`]):
    /// `mask` is the [`fits`] verdicts of a kernel per list of requirements ([`fit_mask`]),
    /// which the key of the arrays' types and layouts alone does not determine.
    pub fn within(self, mask: u32) -> SelectionKey {
        SelectionKey { fit: mask, ..self }
    }

    /// The key of a choice made for a device of compute capability `cc` ([`select_for`]).
    pub fn on(self, cc: (u32, u32)) -> SelectionKey {
        SelectionKey {
            cc: (cc.0.min(15) * 16 + cc.1.min(15)) as u8,
            ..self
        }
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
        if !self.has_variants() {
            return *self;
        }
        let mut ops = [Operand::Scalar; MAX_PARAMS];
        match operands(args, &mut ops) {
            Some(n) => self.variant_for_operands(&ops[..n]),
            None => *self,
        }
    }

    /// Whether the kernel has layout or architecture variants (when it has none, a launcher
    /// launches it as it is).
    pub fn has_variants(&self) -> bool {
        !self.module.layout_variants_of(self.index).is_empty()
            || !self.module.arch_variants_of(self.index).is_empty()
    }

    /// [`variant_for`](Self::variant_for) on what selection sees of the arguments (for
    /// launchers that have not converted their scalars yet). With architecture variants, or
    /// layout variants built for another architecture (`linear_bf16_f32_sm90`, whose tensor
    /// maps make it a layout variant of the portable `linear_bf16_f32`), the device is found
    /// as a launch finds it ([`launch_capability`]); when that fails (no driver),
    /// architectures are not weighed (the launch will say what failed).
    pub fn variant_for_operands(&self, operands: &[Operand<'_>]) -> Kernel<'m> {
        if !self.has_variants() {
            return *self;
        }
        // Without a driver no launch can happen: the architectures are not weighed then.
        let cc = if self.weighs_arch() {
            launch_capability(operands, None).ok()
        } else {
            None
        };
        self.variant_on(operands, cc)
    }

    /// Whether the choice among this kernel and its variants depends on the launch's device:
    /// it has architecture variants, or a layout variant built for another architecture. Only
    /// then does a launcher ask the driver which device a launch runs on before choosing.
    pub fn weighs_arch(&self) -> bool {
        !self.module.arch_variants_of(self.index).is_empty()
            || spans_archs(std::iter::once(*self).chain(self.layout_variants()))
    }

    /// [`variant_for_operands`](Self::variant_for_operands) for a device of compute
    /// capability `cc` (`None`: architectures not weighed): among this kernel, its layout
    /// variants, its architecture variants and theirs, [`select_for`]'s choice.
    pub fn variant_on(&self, operands: &[Operand<'_>], cc: Option<(u32, u32)>) -> Kernel<'m> {
        select_for(self.variant_set(), operands, cc).unwrap_or(*self)
    }

    /// This kernel, its layout variants, its architecture variants and theirs, once each,
    /// this kernel first: what [`variant_on`](Self::variant_on) chooses among.
    pub fn variant_set(&self) -> Vec<Kernel<'m>> {
        let module = self.module;
        let mut set: Vec<usize> = vec![self.index];
        for &a in std::iter::once(&self.index).chain(module.arch_variants_of(self.index)) {
            for &i in std::iter::once(&a).chain(module.layout_variants_of(a)) {
                if !set.contains(&i) {
                    set.push(i);
                }
            }
        }
        set.into_iter()
            .map(|index| Kernel { module, index })
            .collect()
    }
}

impl Module {
    /// The kernel of `family` for `args` ([`select`]): the variant whose element types and
    /// ranks match the arrays', the contiguous one whenever every array allows it.
    ///
    /// # Errors
    ///
    /// `Value` when the module has no such family; `Type` when no variant takes the
    /// arguments' kinds, element types and ranks ([`no_variant`]: the message lists the
    /// variants' signatures).
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
        // Without a driver no launch can happen: the architectures are not weighed then.
        let cc = if spans_archs(members()) {
            launch_capability(&ops[..n], None).ok()
        } else {
            None
        };
        if let Some(k) = select_for(members(), &ops[..n], cc) {
            return Ok(k);
        }
        Err(no_variant(family, members(), &ops[..n]))
    }
}

/// Whether `kernels` are built for more than one architecture: then, and only then, the
/// choice among them depends on the launch's device ([`select_for`] with a capability), and a
/// launcher asks the driver which device that is.
pub fn spans_archs<'m>(kernels: impl IntoIterator<Item = Kernel<'m>>) -> bool {
    let mut archs = kernels.into_iter().map(|k| k.arch());
    let first = archs.next();
    archs.any(|a| Some(a) != first)
}

/// The `TypeError` of a launch of family `family` whose `variants` take none of `ops`'s
/// kinds, element types and ranks: what selection saw ([`describe`]), and each variant's
/// [`Signature::text`](crate::module::Signature::text). The one "no variant" message, of
/// [`Module::select`] and of launchers ([`Target::choose`](crate::launcher::Target::choose)).
pub fn no_variant<'m>(
    family: &str,
    variants: impl IntoIterator<Item = Kernel<'m>>,
    ops: &[Operand<'_>],
) -> Error {
    let mut list = String::new();
    for k in variants {
        let _ = write!(list, "\n    {}", k.signature().text());
    }
    Error::type_error(format!(
        "kernel family `{family}` has no variant for ({}); variants:{list}",
        describe(ops)
    ))
}
