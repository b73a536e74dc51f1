//! The launcher facade: what one launcher launches — one kernel, or a family's kernels — and
//! the one call that decides, per launch, which kernel runs: [`Target::choose`], with the
//! argument count, the selection rule of [`select`](mod@crate::launch::select) (remembered
//! per launcher by its operands' [`SelectionKey`]) and the "no variant" error that names a
//! family's variants.
//!
//! A launcher of any language (the Python extension's `Kernel` and `Family`) holds a
//! [`Target`], describes the arguments of a call as [`Operand`]s and calls `choose` once.

use crate::error::{Error, Result};
use crate::launch::select::{
    fit_mask, launch_capability, no_variant, rule_sets, select_for, spans_archs, Operand,
    SelectionKey, SelectionMemo,
};
use crate::module::{Kernel, MAX_PARAMS};

/// What one launcher may launch: one kernel, or a family's kernels (see the
/// [module documentation](self)).
#[derive(Debug)]
pub struct Target<'m> {
    name: String,
    is_family: bool,
    /// The kernels, in manifest order (one for a kernel); never empty.
    kernels: Box<[Kernel<'m>]>,
    /// Per parameter, whether it is an array, when every kernel agrees (`None` if they
    /// differ). A family's contiguous and strided variants agree: only their array kinds
    /// differ.
    kinds: Option<Box<[bool]>>,
    /// A kernel whose parameter names differ from the first kernel's.
    renamed: Option<usize>,
    /// Whether the choice depends on the launch's device (kernels, or a kernel's variants,
    /// built for different architectures): decided once, so that a launcher whose kernels
    /// are all of one architecture asks the driver nothing to choose.
    weighs_arch: bool,
    /// When the candidates' requirements differ (the choice then depends on the arguments'
    /// shapes), one candidate per list of requirements ([`rule_sets`]), whose verdicts enter
    /// the selection key; the candidates are a family's kernels, or a kernel's variants
    /// ([`Kernel::variant_set`]). Empty otherwise (the key of types and layouts decides).
    by_rules: Box<[Kernel<'m>]>,
    /// The kernels chosen for the last few selection keys.
    memo: SelectionMemo<Kernel<'m>>,
}

impl<'m> Target<'m> {
    /// A launcher of kernel `k` (which runs `k`, or its layout or architecture variant for
    /// the arguments: [`Kernel::variant_on`]).
    pub fn kernel(k: Kernel<'m>) -> Target<'m> {
        Target::new(k.name().to_owned(), false, vec![k].into_boxed_slice())
    }

    /// A launcher of family `name`, whose kernels are `kernels` (in manifest order).
    ///
    /// # Errors
    ///
    /// `Value` when `kernels` is empty.
    pub fn family(name: String, kernels: Vec<Kernel<'m>>) -> Result<Target<'m>> {
        if kernels.is_empty() {
            return Err(Error::value(format!(
                "kernel family `{name}` has no kernels"
            )));
        }
        Ok(Target::new(name, true, kernels.into_boxed_slice()))
    }

    fn new(name: String, is_family: bool, kernels: Box<[Kernel<'m>]>) -> Target<'m> {
        let first: Vec<bool> = kernels[0]
            .signature()
            .params
            .iter()
            .map(|p| p.kind.is_array())
            .collect();
        let same = kernels.iter().all(|k| {
            let ps = &k.signature().params;
            ps.len() == first.len() && ps.iter().zip(&first).all(|(p, &f)| p.kind.is_array() == f)
        });
        let names = |k: &Kernel<'m>| -> Vec<String> {
            k.signature()
                .params
                .iter()
                .map(|p| p.name.clone())
                .collect()
        };
        let renamed = kernels.iter().position(|k| names(k) != names(&kernels[0]));
        let weighs_arch = if is_family {
            spans_archs(kernels.iter().copied())
        } else {
            kernels[0].weighs_arch()
        };
        let candidates: Vec<Kernel<'m>> = if is_family {
            kernels.to_vec()
        } else {
            kernels[0].variant_set()
        };
        let sets = rule_sets(candidates);
        let by_rules = if sets.len() > 1 {
            sets.into_boxed_slice()
        } else {
            Box::default()
        };
        Target {
            name,
            is_family,
            weighs_arch,
            by_rules,
            kinds: same.then(|| first.into_boxed_slice()),
            renamed,
            memo: SelectionMemo::default(),
            kernels,
        }
    }

    /// Whether choosing the kernel of a launch asks the driver for the launch's device:
    /// `true` when the target's kernels (a kernel's layout and architecture variants) are
    /// built for more than one architecture.
    pub fn weighs_arch(&self) -> bool {
        self.weighs_arch
    }

    /// The kernel's or family's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this launches a family (else one kernel).
    pub fn is_family(&self) -> bool {
        self.is_family
    }

    /// `"kernel family"` or `"kernel"`, for messages.
    pub fn what(&self) -> &'static str {
        if self.is_family {
            "kernel family"
        } else {
            "kernel"
        }
    }

    /// The kernels, in manifest order (one for a kernel).
    pub fn kernels(&self) -> &[Kernel<'m>] {
        &self.kernels
    }

    /// The first (for a kernel: the) kernel, whose parameters name the arguments.
    pub fn first(&self) -> Kernel<'m> {
        self.kernels[0]
    }

    /// Whether argument `i` is an array (`Some(false)`: a scalar), when every kernel agrees
    /// on its kind; `None` when they differ (or there is no parameter `i`).
    pub fn is_array(&self, i: usize) -> Option<bool> {
        self.kinds.as_ref().and_then(|k| k.get(i).copied())
    }

    /// A kernel whose parameter names differ from the first kernel's (arguments can then only
    /// be passed by position), if one does.
    pub fn renamed(&self) -> Option<Kernel<'m>> {
        self.renamed.map(|i| self.kernels[i])
    }

    /// The name of parameter `i` of the first kernel (`"?"` beyond its parameters).
    pub fn param_name(&self, i: usize) -> &str {
        self.kernels[0]
            .signature()
            .params
            .get(i)
            .map(|p| p.name.as_str())
            .unwrap_or("?")
    }

    /// The `TypeError` of a launch with `n` arguments: ``kernel family `add` takes 3
    /// argument(s) (a, b, out), got 2``.
    pub fn arity_error(&self, n: usize) -> Error {
        let sig = self.kernels[0].signature();
        Error::type_error(format!(
            "{} `{}` takes {} argument(s) ({}), got {n}",
            self.what(),
            self.name,
            sig.params.len(),
            sig.param_list()
        ))
    }

    /// Checks the number of arguments `n` before they are read: the kernels' common number
    /// of parameters, when they agree on their kinds, and at most [`MAX_PARAMS`]. (The
    /// kernel [`choose`](Self::choose) picks is checked against `n` too.)
    ///
    /// # Errors
    ///
    /// [`arity_error`](Self::arity_error).
    pub fn check_arity(&self, n: usize) -> Result<()> {
        if self.kinds.as_ref().is_some_and(|k| n != k.len()) || n > MAX_PARAMS {
            return Err(self.arity_error(n));
        }
        Ok(())
    }

    /// The kernel a launch of `operands` runs (the arguments as selection sees them: an array
    /// not described is seen as a scalar, which no array parameter takes): a family's kernel
    /// by [`select_for`] — on the launch's device ([`launch_capability`]) when the target's
    /// kernels (or the kernel's variants) are built for several architectures — or a kernel's
    /// own variant
    /// ([`Kernel::variant_on`]); the choice is remembered by the operands' [`SelectionKey`].
    /// A family of one kernel that does not take the arguments launches it anyway (the
    /// launch's argument check names the mismatch).
    ///
    /// # Errors
    ///
    /// `Type`: the argument count ([`check_arity`](Self::check_arity), and the chosen
    /// kernel's parameters); ``kernel family `add` has no variant for (uint16 1-D array, …);
    /// variants:`` and each variant's [`Signature::text`](crate::module::Signature::text)
    /// when no kernel of a family takes the arguments' kinds, element types and ranks.
    pub fn choose(&self, operands: &[Operand<'_>]) -> Result<Kernel<'m>> {
        let n = operands.len();
        self.check_arity(n)?;
        let kernel = self.select(operands)?;
        if kernel.signature().params.len() != n {
            return Err(self.arity_error(n));
        }
        Ok(kernel)
    }

    fn select(&self, ops: &[Operand<'_>]) -> Result<Kernel<'m>> {
        // Kernels built for several architectures: the choice depends on the launch's device
        // too. Without a driver no launch can happen: the architectures are not weighed then.
        let cc = if self.weighs_arch {
            launch_capability(ops, None).ok()
        } else {
            None
        };
        // The rule's choice depends only on the key: remembered per launcher. Candidates whose
        // requirements differ put their verdicts for these arrays into it.
        let key = SelectionKey::of(ops).map(|k| {
            let k = cc.map_or(k, |cc| k.on(cc));
            if self.by_rules.is_empty() {
                k
            } else {
                k.within(fit_mask(self.by_rules.iter().copied(), ops))
            }
        });
        if let Some(k) = key.as_ref().and_then(|key| self.memo.get(key)) {
            return Ok(k);
        }
        let chosen = if self.is_family {
            select_for(self.kernels.iter().copied(), ops, cc)
        } else {
            Some(self.kernels[0].variant_on(ops, cc))
        };
        if let Some(k) = chosen {
            if let Some(key) = key {
                self.memo.insert(key, k);
            }
            return Ok(k);
        }
        if self.kernels.len() == 1 {
            // The host's argument check names the mismatch.
            return Ok(self.kernels[0]);
        }
        Err(no_variant(&self.name, self.kernels.iter().copied(), ops))
    }
}
