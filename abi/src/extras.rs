//! Kernel extras: what `#[kernel]` declares about a launch beyond the parameter list.
//!
//! * **zeroed outputs** — `zero(out, …)`: the launcher fills each named output with zeros on
//!   the launch stream right before the launch (`cuMemsetD8Async` of the array's extent; the
//!   output must be contiguous);
//! * **scratch lengths** — `scratch(ws = formula)`: the element count of each
//!   [`Scratch`](crate::Scratch) workspace, per launch, as
//!   `per_block · blocks + mult · ⌈len(of) / div⌉ + constant` ([`ScratchLen`]);
//! * **requirements** — `require(a.shape[1] == b.shape[0], "message")`: comparisons between
//!   scalars, array lengths, extents and addresses (and literals), checked by the launcher
//!   before anything reaches the driver ([`Require`]);
//! * **persistent workspaces** — `persist(ws)`: the launcher zero-fills the named scratch
//!   workspace only when it is new to the kernel, and otherwise hands the kernel what its
//!   previous launch on the same stream left there ([`ScratchLen::persist`]): a kernel whose
//!   workspace state is tagged by launch (the scan's statuses) skips the fill before every
//!   launch.
//!
//! Parameter indices are positions in the kernel's full parameter list (scratch parameters
//! included). Everything here is `const`: `#[kernel]` builds [`Extras`] in a constant, and
//! [`encoded_len`]/[`encode_into`] append them to the kernel's manifest record (see
//! [`manifest`](crate::manifest)) as tagged sections, so records without extras keep the
//! earlier layout.

/// "No parameter" in [`ScratchLen::of`].
pub const NONE: u8 = u8::MAX;

/// Section tags of the record's extension (after `items_per_thread`).
pub(crate) const TAG_ZERO: u8 = 1;
pub(crate) const TAG_SCRATCH: u8 = 2;
pub(crate) const TAG_REQUIRE: u8 = 3;
pub(crate) const TAG_TILE: u8 = 4;
pub(crate) const TAG_PERSIST: u8 = 5;

/// Bytes of one [`TileDecl`] in a record: param, rank, swizzle, five u16 extents.
pub(crate) const TILE_BYTES: usize = 3 + 2 * crate::tensormap::TENSOR_MAP_MAX_RANK;

/// Bytes of one [`ScratchLen`] in a record.
pub(crate) const SCRATCH_BYTES: usize = 18;
/// Bytes of one [`Operand`] in a record.
pub(crate) const OPERAND_BYTES: usize = 11;

/// The length of a scratch workspace: `per_block · blocks + mult · ⌈len(of) / div⌉ +
/// constant` elements, where `blocks` is the number of blocks of the launch's grid and
/// `len(of)` the element count of argument `of` (the term is absent when `of` is [`NONE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScratchLen {
    /// The scratch parameter (index in the full parameter list).
    pub param: u8,
    /// Elements per block of the launch grid.
    pub per_block: u32,
    /// Constant elements.
    pub constant: u32,
    /// The parameter whose length the third term uses, or [`NONE`].
    pub of: u8,
    /// Multiplier of the third term.
    pub mult: u32,
    /// Divisor of the third term (rounded up; at least 1).
    pub div: u32,
    /// Whether the workspace persists between the kernel's launches on a stream
    /// (`#[kernel(persist(ws))]`). The launcher zero-fills a persistent workspace whenever it
    /// is new to the kernel — its first launch on the stream, a workspace grown or freshly
    /// allocated (every captured launch), another kernel's launch on the stream in between —
    /// and at least once every [`PERSIST_REFILL`] launches; otherwise the kernel finds what
    /// its previous launch on the stream left there. Encoded as its own section (records
    /// without it decode as before).
    pub persist: bool,
}

/// The most launches of a kernel between two zero-fills of a persistent workspace
/// ([`ScratchLen::persist`]): a kernel that tags its workspace's words with its launch count
/// since the fill (zero-filled words carry none) needs tags below this — 20 bits — to tell
/// this launch's words from every earlier one's.
pub const PERSIST_REFILL: u32 = 1 << 20;

impl ScratchLen {
    /// The element count for a launch of `blocks` blocks where argument `of` has `of_len`
    /// elements; `None` on overflow.
    pub const fn elements(&self, blocks: u64, of_len: u64) -> Option<u64> {
        let Some(a) = (self.per_block as u64).checked_mul(blocks) else {
            return None;
        };
        let b = if self.of == NONE {
            0
        } else {
            let div = if self.div == 0 { 1 } else { self.div as u64 };
            match (self.mult as u64).checked_mul(of_len.div_ceil(div)) {
                Some(b) => b,
                None => return None,
            }
        };
        match a.checked_add(b) {
            Some(s) => s.checked_add(self.constant as u64),
            None => None,
        }
    }
}

/// One side of a [`Require`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// An integer literal.
    Int(i64),
    /// The value of a scalar parameter.
    Scalar(u8),
    /// The element count of an array parameter (`x.len()`).
    Len(u8),
    /// The extent of axis `.1` of an array parameter (`x.shape[k]`).
    Dim(u8, u8),
    /// The address of element `[0, …, 0]` of an array parameter (`x.ptr()`). A condition
    /// comparing the address of an empty array holds: it names no memory, so it neither
    /// aliases nor is aliased (and empty arrays often share the null address).
    Ptr(u8),
}

impl Operand {
    const fn code(&self) -> (u8, u8, u8, i64) {
        match *self {
            Operand::Int(v) => (1, 0, 0, v),
            Operand::Scalar(p) => (2, p, 0, 0),
            Operand::Len(p) => (3, p, 0, 0),
            Operand::Dim(p, k) => (4, p, k, 0),
            Operand::Ptr(p) => (5, p, 0, 0),
        }
    }

    /// The operand of a record's fields (kind code 1 int, 2 scalar, 3 len, 4 dim, 5 ptr).
    pub const fn from_code(kind: u8, param: u8, axis: u8, value: i64) -> Option<Operand> {
        match kind {
            1 => Some(Operand::Int(value)),
            2 => Some(Operand::Scalar(param)),
            3 => Some(Operand::Len(param)),
            4 => Some(Operand::Dim(param, axis)),
            5 => Some(Operand::Ptr(param)),
            _ => None,
        }
    }

    /// The parameter it reads, if any.
    pub const fn param(&self) -> Option<u8> {
        match *self {
            Operand::Int(_) => None,
            Operand::Scalar(p) | Operand::Len(p) | Operand::Dim(p, _) | Operand::Ptr(p) => Some(p),
        }
    }
}

/// The comparison of a [`Require`].
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// `==`
    Eq = 1,
    /// `!=`
    Ne = 2,
    /// `<`
    Lt = 3,
    /// `<=`
    Le = 4,
    /// `>`
    Gt = 5,
    /// `>=`
    Ge = 6,
    /// `finite(x)`: the left operand is finite (not NaN, not infinite); the right one is
    /// ignored.
    Finite = 7,
    /// `divides(a, b)`: both operands are integers and the right one is an integer multiple
    /// of the left (`b = a·n`: `b % a == 0`, and `b = 0` when `a = 0`).
    Divides = 8,
}

impl Cmp {
    /// Every comparison, in code order.
    pub const ALL: [Cmp; 8] = [
        Cmp::Eq,
        Cmp::Ne,
        Cmp::Lt,
        Cmp::Le,
        Cmp::Gt,
        Cmp::Ge,
        Cmp::Finite,
        Cmp::Divides,
    ];

    /// The comparison with code `code`.
    pub const fn from_code(code: u8) -> Option<Cmp> {
        if code >= 1 && code as usize <= Cmp::ALL.len() {
            Some(Cmp::ALL[code as usize - 1])
        } else {
            None
        }
    }

    /// `"=="`, `"<"`, …, `"finite"`, `"divides"`.
    pub const fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Finite => "finite",
            Cmp::Divides => "divides",
        }
    }

    /// The condition as a kernel writes it, over the operands' texts: `lhs <op> rhs`,
    /// `finite(lhs)`, `divides(lhs, rhs)`.
    #[cfg(feature = "std")]
    pub fn condition(self, lhs: &str, rhs: &str) -> std::string::String {
        match self {
            Cmp::Finite => std::format!("finite({lhs})"),
            Cmp::Divides => std::format!("divides({lhs}, {rhs})"),
            _ => std::format!("{lhs} {} {rhs}", self.symbol()),
        }
    }

    /// The comparison spelled `symbol`.
    pub fn from_symbol(symbol: &str) -> Option<Cmp> {
        Cmp::ALL.into_iter().find(|c| c.symbol() == symbol)
    }

    /// Whether `a <op> b` holds. Integers compare exactly; when either side is a float both
    /// compare as `f64`, and a NaN makes every comparison but `!=` false (IEEE), so a NaN
    /// never satisfies `lo < hi`.
    pub fn holds(self, a: Value, b: Value) -> bool {
        use core::cmp::Ordering;
        if self == Cmp::Finite {
            return match a {
                Value::Int(_) => true,
                Value::Float(x) => x.is_finite(),
            };
        }
        if self == Cmp::Divides {
            return match (a, b) {
                (Value::Int(x), Value::Int(y)) => y.checked_rem(x).map_or(y == 0, |r| r == 0),
                _ => false,
            };
        }
        let ord = match (a, b) {
            (Value::Int(x), Value::Int(y)) => Some(x.cmp(&y)),
            _ => a.as_f64().partial_cmp(&b.as_f64()),
        };
        match (self, ord) {
            (Cmp::Ne, None) => true,
            (_, None) => false,
            (Cmp::Eq, Some(o)) => o == Ordering::Equal,
            (Cmp::Ne, Some(o)) => o != Ordering::Equal,
            (Cmp::Lt, Some(o)) => o == Ordering::Less,
            (Cmp::Le, Some(o)) => o != Ordering::Greater,
            (Cmp::Gt, Some(o)) => o == Ordering::Greater,
            (Cmp::Ge, Some(o)) => o != Ordering::Less,
            (Cmp::Finite | Cmp::Divides, _) => unreachable!(),
        }
    }
}

/// The value of an [`Operand`] for one launch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// Integers, lengths, extents, addresses.
    Int(i128),
    /// Floating-point scalars.
    Float(f64),
}

impl Value {
    /// The value as `f64` (integers rounded to nearest).
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Int(v) => v as f64,
            Value::Float(v) => v,
        }
    }
}

/// A condition the launcher checks before a launch: `lhs <cmp> rhs` (or `finite(lhs)`,
/// `divides(lhs, rhs)`), with
/// the message of the error that names the first parameter it reads when it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Require<'a> {
    /// Left operand.
    pub lhs: Operand,
    /// Comparison.
    pub cmp: Cmp,
    /// Right operand (ignored by [`Cmp::Finite`]).
    pub rhs: Operand,
    /// Explanation for the error message (may be empty; at most 255 bytes).
    pub message: &'a str,
}

/// A parameter's tensor-map declaration ([`TileDesc`](crate::TileDesc)); `#[kernel]` lists one
/// per parameter, and only those that describe a tensor map reach the record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileDecl {
    /// The parameter (index in the full parameter list).
    pub param: u8,
    /// Its declaration ([`TileDesc::NONE`](crate::TileDesc::NONE) for other kinds).
    pub tile: crate::TileDesc,
}

/// Everything a kernel declares beyond its parameters (see the [module](self) documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Extras<'a> {
    /// Outputs the launcher zero-fills before the launch.
    pub zero: &'a [u8],
    /// Lengths of the scratch workspaces.
    pub scratch: &'a [ScratchLen],
    /// Conditions checked before the launch.
    pub require: &'a [Require<'a>],
    /// Tensor-map declarations (box and swizzle of each `TensorMap` parameter).
    pub tiles: &'a [TileDecl],
}

impl Extras<'_> {
    /// No extras.
    pub const NONE: Extras<'static> = Extras {
        zero: &[],
        scratch: &[],
        require: &[],
        tiles: &[],
    };
}

/// The number of `tiles` that describe a tensor map.
const fn tile_count(tiles: &[TileDecl]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < tiles.len() {
        if tiles[i].tile.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The number of persistent workspaces among `scratch`.
const fn persist_count(scratch: &[ScratchLen]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < scratch.len() {
        if scratch[i].persist {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Bytes the extras take in a manifest record: nothing when there are none.
pub const fn encoded_len(e: &Extras<'_>) -> usize {
    let mut n = 0;
    if !e.zero.is_empty() {
        n += 3 + 1 + e.zero.len();
    }
    if !e.scratch.is_empty() {
        n += 3 + 1 + e.scratch.len() * SCRATCH_BYTES;
    }
    let persist = persist_count(e.scratch);
    if persist > 0 {
        n += 3 + 1 + persist;
    }
    if !e.require.is_empty() {
        n += 3 + 1;
        let mut i = 0;
        while i < e.require.len() {
            n += 2 * OPERAND_BYTES + 1 + 1 + e.require[i].message.len();
            i += 1;
        }
    }
    let tiles = tile_count(e.tiles);
    if tiles > 0 {
        n += 3 + 1 + tiles * TILE_BYTES;
    }
    n
}

/// Writes the extras' sections to `out` from `at`; returns the end. Const evaluation fails on
/// more than 255 entries of a kind, a message longer than 255 bytes, or a section beyond
/// 65535 bytes.
pub const fn encode_into<const L: usize>(
    out: &mut [u8; L],
    mut at: usize,
    e: &Extras<'_>,
) -> usize {
    if !e.zero.is_empty() {
        at = header(out, at, TAG_ZERO, 1 + e.zero.len(), e.zero.len());
        let mut i = 0;
        while i < e.zero.len() {
            out[at] = e.zero[i];
            at += 1;
            i += 1;
        }
    }
    if !e.scratch.is_empty() {
        let payload = 1 + e.scratch.len() * SCRATCH_BYTES;
        at = header(out, at, TAG_SCRATCH, payload, e.scratch.len());
        let mut i = 0;
        while i < e.scratch.len() {
            let s = e.scratch[i];
            assert!(s.div >= 1, "scratch length divisor must be at least 1");
            out[at] = s.param;
            at = put_u32(out, at + 1, s.per_block);
            at = put_u32(out, at, s.constant);
            out[at] = s.of;
            at = put_u32(out, at + 1, s.mult);
            at = put_u32(out, at, s.div);
            i += 1;
        }
        let persist = persist_count(e.scratch);
        if persist > 0 {
            at = header(out, at, TAG_PERSIST, 1 + persist, persist);
            i = 0;
            while i < e.scratch.len() {
                if e.scratch[i].persist {
                    out[at] = e.scratch[i].param;
                    at += 1;
                }
                i += 1;
            }
        }
    }
    if !e.require.is_empty() {
        let mut payload = 1;
        let mut i = 0;
        while i < e.require.len() {
            payload += 2 * OPERAND_BYTES + 2 + e.require[i].message.len();
            i += 1;
        }
        at = header(out, at, TAG_REQUIRE, payload, e.require.len());
        i = 0;
        while i < e.require.len() {
            let r = e.require[i];
            at = put_operand(out, at, r.lhs);
            out[at] = r.cmp as u8;
            at = put_operand(out, at + 1, r.rhs);
            let m = r.message.as_bytes();
            assert!(m.len() <= 255, "require message longer than 255 bytes");
            out[at] = m.len() as u8;
            at += 1;
            let mut j = 0;
            while j < m.len() {
                out[at] = m[j];
                at += 1;
                j += 1;
            }
            i += 1;
        }
    }
    let tiles = tile_count(e.tiles);
    if tiles > 0 {
        at = header(out, at, TAG_TILE, 1 + tiles * TILE_BYTES, tiles);
        let mut i = 0;
        while i < e.tiles.len() {
            let t = e.tiles[i];
            if t.tile.is_some() {
                out[at] = t.param;
                out[at + 1] = t.tile.rank;
                out[at + 2] = t.tile.swizzle;
                at += 3;
                let mut d = 0;
                while d < t.tile.box_dims.len() {
                    let b = t.tile.box_dims[d].to_le_bytes();
                    out[at] = b[0];
                    out[at + 1] = b[1];
                    at += 2;
                    d += 1;
                }
            }
            i += 1;
        }
    }
    at
}

const fn header<const L: usize>(
    out: &mut [u8; L],
    at: usize,
    tag: u8,
    payload: usize,
    count: usize,
) -> usize {
    assert!(
        payload <= u16::MAX as usize,
        "manifest record section too large"
    );
    assert!(
        count <= 255,
        "more than 255 entries of one kind of kernel extra"
    );
    out[at] = tag;
    out[at + 1] = payload as u8;
    out[at + 2] = (payload >> 8) as u8;
    out[at + 3] = count as u8;
    at + 4
}

const fn put_u32<const L: usize>(out: &mut [u8; L], at: usize, v: u32) -> usize {
    let b = v.to_le_bytes();
    out[at] = b[0];
    out[at + 1] = b[1];
    out[at + 2] = b[2];
    out[at + 3] = b[3];
    at + 4
}

const fn put_operand<const L: usize>(out: &mut [u8; L], at: usize, o: Operand) -> usize {
    let (kind, param, axis, value) = o.code();
    out[at] = kind;
    out[at + 1] = param;
    out[at + 2] = axis;
    let b = value.to_le_bytes();
    let mut i = 0;
    while i < 8 {
        out[at + 3 + i] = b[i];
        i += 1;
    }
    at + OPERAND_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_lengths() {
        let s = ScratchLen {
            param: 2,
            per_block: 3,
            constant: 1,
            of: 0,
            mult: 2,
            div: 4096,
            persist: false,
        };
        assert_eq!(s.elements(10, 0), Some(31));
        assert_eq!(s.elements(10, 1), Some(33));
        assert_eq!(s.elements(10, 4096), Some(33));
        assert_eq!(s.elements(10, 4097), Some(35));
        let t = ScratchLen { of: NONE, ..s };
        assert_eq!(t.elements(0, 1 << 40), Some(1));
        assert_eq!(t.elements(u64::MAX, 0), None);
    }

    #[test]
    fn comparisons() {
        let (i, f) = (Value::Int, Value::Float);
        assert!(Cmp::Lt.holds(i(1), i(2)) && !Cmp::Lt.holds(i(2), i(2)));
        assert!(Cmp::Le.holds(i(2), i(2)) && Cmp::Ge.holds(f(2.5), i(2)));
        assert!(Cmp::Eq.holds(i(i128::from(u64::MAX)), i(i128::from(u64::MAX))));
        assert!(!Cmp::Lt.holds(f(f64::NAN), f(1.0)) && !Cmp::Ge.holds(f(f64::NAN), f(1.0)));
        assert!(Cmp::Ne.holds(f(f64::NAN), f(f64::NAN)));
        assert!(Cmp::Finite.holds(f(1.0), i(0)) && !Cmp::Finite.holds(f(f64::INFINITY), i(0)));
        assert!(!Cmp::Finite.holds(f(f64::NAN), i(0)) && Cmp::Finite.holds(i(5), i(0)));
        assert!(Cmp::Divides.holds(i(4), i(32)) && Cmp::Divides.holds(i(1), i(7)));
        assert!(Cmp::Divides.holds(i(3), i(0)) && !Cmp::Divides.holds(i(3), i(32)));
        assert!(Cmp::Divides.holds(i(0), i(0)) && !Cmp::Divides.holds(i(0), i(4)));
        assert!(Cmp::Divides.holds(i(-2), i(4)) && !Cmp::Divides.holds(i(5), i(4)));
        assert!(!Cmp::Divides.holds(f(2.0), i(4)) && !Cmp::Divides.holds(i(2), f(4.0)));
        for c in Cmp::ALL {
            assert_eq!(Cmp::from_code(c as u8), Some(c));
            assert_eq!(Cmp::from_symbol(c.symbol()), Some(c));
        }
        #[cfg(feature = "std")]
        {
            assert_eq!(Cmp::Le.condition("lo", "hi"), "lo <= hi");
            assert_eq!(Cmp::Finite.condition("hi", "0"), "finite(hi)");
            assert_eq!(
                Cmp::Divides.condition("k.shape[1]", "q.shape[1]"),
                "divides(k.shape[1], q.shape[1])"
            );
        }
        assert_eq!(Cmp::from_code(0), None);
        assert_eq!(Cmp::from_code(9), None);
    }

    #[test]
    fn no_extras_take_no_bytes() {
        assert_eq!(encoded_len(&Extras::NONE), 0);
        let mut out = [0u8; 4];
        assert_eq!(encode_into(&mut out, 2, &Extras::NONE), 2);
    }
}
