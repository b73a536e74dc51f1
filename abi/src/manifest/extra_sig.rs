//! The JSON form of a kernel's extras ([`crate::extras`]): scratch lengths and requirements.

use crate::extras::{Cmp, Operand, ScratchLen, NONE};
use serde::{Deserialize, Serialize};
use std::string::String;

/// The length of a scratch workspace, in JSON: the fields of
/// [`ScratchLen`], with `of` absent for no parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScratchSig {
    /// The scratch parameter (index into `params`).
    pub param: u8,
    /// Elements per block of the launch's grid.
    #[serde(default)]
    pub per_block: u32,
    /// Constant elements.
    #[serde(default)]
    pub constant: u32,
    /// The parameter whose length the third term uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<u8>,
    /// Multiplier of the third term.
    #[serde(default)]
    pub mult: u32,
    /// Divisor (rounded up) of the third term.
    #[serde(default = "one")]
    pub div: u32,
    /// Whether the workspace persists between the kernel's launches on a stream
    /// ([`ScratchLen::persist`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub persist: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn one() -> u32 {
    1
}

impl ScratchSig {
    /// The length formula.
    pub fn len(&self) -> ScratchLen {
        ScratchLen {
            param: self.param,
            per_block: self.per_block,
            constant: self.constant,
            of: self.of.unwrap_or(NONE),
            mult: self.mult,
            div: self.div.max(1),
            persist: self.persist,
        }
    }

    pub(crate) fn of_len(l: &ScratchLen) -> ScratchSig {
        ScratchSig {
            param: l.param,
            per_block: l.per_block,
            constant: l.constant,
            of: (l.of != NONE).then_some(l.of),
            mult: l.mult,
            div: l.div,
            persist: l.persist,
        }
    }
}

/// One side of a requirement, in JSON: `{"int": 0}`, `{"scalar": 2}`, `{"len": 1}`,
/// `{"dim": [0, 1]}` or `{"ptr": 3}` (parameter indices into `params`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OperandSig {
    /// An integer literal.
    Int(i64),
    /// A scalar parameter's value.
    Scalar(u8),
    /// An array parameter's element count.
    Len(u8),
    /// An array parameter's extent along an axis.
    Dim(u8, u8),
    /// An array parameter's address.
    Ptr(u8),
}

impl From<Operand> for OperandSig {
    fn from(o: Operand) -> Self {
        match o {
            Operand::Int(v) => OperandSig::Int(v),
            Operand::Scalar(p) => OperandSig::Scalar(p),
            Operand::Len(p) => OperandSig::Len(p),
            Operand::Dim(p, k) => OperandSig::Dim(p, k),
            Operand::Ptr(p) => OperandSig::Ptr(p),
        }
    }
}

impl From<OperandSig> for Operand {
    fn from(o: OperandSig) -> Self {
        match o {
            OperandSig::Int(v) => Operand::Int(v),
            OperandSig::Scalar(p) => Operand::Scalar(p),
            OperandSig::Len(p) => Operand::Len(p),
            OperandSig::Dim(p, k) => Operand::Dim(p, k),
            OperandSig::Ptr(p) => Operand::Ptr(p),
        }
    }
}

/// A requirement, in JSON: `lhs <op> rhs` with `op` one of `==`, `!=`, `<`, `<=`, `>`, `>=`
/// `finite` (then `rhs` is ignored) or `divides` (`rhs` an integer multiple of `lhs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequireSig {
    /// Left operand.
    pub lhs: OperandSig,
    /// The comparison's symbol.
    pub op: String,
    /// Right operand.
    pub rhs: OperandSig,
    /// Explanation for the error message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl RequireSig {
    /// The comparison, if the manifest names a known one.
    pub fn cmp(&self) -> Option<Cmp> {
        Cmp::from_symbol(&self.op)
    }
}
