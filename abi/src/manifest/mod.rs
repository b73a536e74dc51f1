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
//!   tag 5 persist: entry = u8 param (a scratch workspace of the tag 2 section before it)
//!   tag 3 require: entry = operand lhs, u8 cmp, operand rhs, u8 len, message bytes
//!                  operand = u8 kind (1 int, 2 scalar, 3 len, 4 dim, 5 ptr), u8 param,
//!                            u8 axis, i64 value
//! ```
//!
//! A record that ends after `items_per_thread` (the layout before extras existed) decodes as
//! a kernel without extras; an unknown section tag is an error (a record from a newer
//! `#[kernel]`).
//!
//! # Layers
//!
//! 1. [`record`] — the byte record and its length (`const fn`s, device and host).
//! 2. [`extra_sig`] — the JSON form of the extras: [`ScratchSig`], [`OperandSig`], [`RequireSig`].
//! 3. [`sig`] — [`KernelSig`] and [`ParamSig`], with the checks of the extras
//!    ([`KernelSig::check_extras`]).
//! 4. [`decode`](mod@decode) — a record read back into a [`KernelSig`].
//! 5. [`module`] — [`Manifest`], a module's kernels in JSON, and the format versions.

pub mod record;
pub use record::{encode, encode_ext, encoded_len, encoded_len_ext, MAGIC, SYMBOL_PREFIX};

#[cfg(feature = "std")]
pub mod decode;
#[cfg(feature = "std")]
pub mod extra_sig;
#[cfg(feature = "std")]
pub mod module;
#[cfg(feature = "std")]
pub mod sig;

#[cfg(feature = "std")]
pub use crate::launch::LaunchSpec;
#[cfg(feature = "std")]
pub use decode::decode;
#[cfg(feature = "std")]
pub use extra_sig::{OperandSig, RequireSig, ScratchSig};
#[cfg(feature = "std")]
pub use module::{format_for, FpContract, Manifest, Part, FORMAT, FORMAT_NO_PARTS, FORMAT_PARTS};
#[cfg(feature = "std")]
pub use sig::{KernelSig, ParamSig, TileSig};

#[cfg(all(test, feature = "std"))]
mod tests;
