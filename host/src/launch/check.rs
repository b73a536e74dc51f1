//! [`check_args`]: the arguments against the kernel's signature, before any driver call.

use super::select::has_layout;
use super::Arg;
use crate::error::{Error, Key, Result};
use crate::interop::cai::ArrayDesc;
use crate::module::{Param, Signature};
use ferrocuda_abi::{layout, ArrayLayout, MAX_NDIM};

/// Checks `args` against the kernel's signature (count, kinds, dtypes, ranks, mutability,
/// read-only arrays, shapes, self-overlap and aliasing) and the kernel's requirements
/// (`#[kernel(require(…))]`, and dense zero-filled outputs). Pure: no driver call.
///
/// `args` holds the caller's arguments only: scratch parameters are the launcher's.
///
/// Host arrays ([`Arg::Host`]) are checked like device arrays except for aliasing: they reach
/// the kernel as fresh copies.
pub fn check_args(sig: &Signature, args: &[Arg<'_>]) -> Result<()> {
    if args.len() != sig.params.len() {
        return Err(Error::type_error(format!(
            "kernel `{}` takes {} argument(s) ({}), got {}",
            sig.name,
            sig.params.len(),
            sig.param_list(),
            args.len()
        )));
    }
    for (p, a) in sig.params.iter().zip(args) {
        check_param(sig, p, a).map_err(|e| e.with_arg(p.name.clone()))?;
    }
    check_same_shapes(sig, args)?;
    check_aliasing(sig, args)?;
    super::extras::check(sig, args)
}

/// One argument against its parameter.
fn check_param(sig: &Signature, p: &Param, a: &Arg<'_>) -> Result<()> {
    let d = match (p.kind.is_array(), a) {
        (false, Arg::Scalar(s)) if s.dtype() == p.dtype => return Ok(()),
        (false, Arg::Scalar(s)) => {
            return Err(Error::type_error(format!(
                "expected a {} scalar, got {}",
                p.dtype.name(),
                s.dtype().name()
            )))
        }
        (false, _) => {
            return Err(Error::type_error(format!(
                "expected a {} scalar, got an array",
                p.dtype.name()
            )))
        }
        (true, Arg::Scalar(_)) => {
            return Err(Error::type_error(format!(
                "expected a {} array, got a scalar",
                p.dtype.name()
            )))
        }
        (true, Arg::Array(d) | Arg::Host(d)) => d,
    };
    if d.dtype() != p.dtype {
        return Err(Error::type_error(format!(
            "expected a {} array, got {}",
            p.dtype.name(),
            d.dtype().name()
        )));
    }
    let layout = p.kind.array_layout();
    if layout == Some(ArrayLayout::Contiguous) && !has_layout(d, ArrayLayout::Contiguous) {
        return Err(Error::value(format!(
            "kernel `{}` needs a C-contiguous array here (strides {:?} bytes, shape {:?}); pass \
             a contiguous copy",
            sig.name,
            d.byte_strides(),
            d.shape()
        )));
    }
    if p.kind.fixes_rank() && d.ndim() != p.rank {
        return Err(Error::type_error(format!(
            "expected a {}-D array, got {}-D (shape {:?})",
            p.rank,
            d.ndim(),
            d.shape()
        )));
    }
    if layout == Some(ArrayLayout::Tiled) && !has_layout(d, ArrayLayout::Tiled) {
        return Err(Error::value(format!(
            "kernel `{}` reads this array with the Tensor Memory Accelerator (a TensorMap \
             parameter), which needs a non-empty array with unit stride on the innermost axis, \
             every other stride a positive multiple of 16 bytes, and a 16-byte aligned \
             address; got shape {:?}, \
             strides {:?} bytes, address {:#x} (pass a contiguous copy whose rows span a \
             multiple of 16 bytes)",
            sig.name,
            d.shape(),
            d.byte_strides(),
            d.ptr()
        )));
    }
    if layout == Some(ArrayLayout::Strided) && !has_layout(d, ArrayLayout::Strided) {
        // Names the axis whose stride splits elements.
        d.element_strides(&mut [0; MAX_NDIM])?;
    }
    if p.mutable {
        check_writable(sig, p, d)?;
    }
    Ok(())
}

/// A written array: not read-only, no two elements at one address.
fn check_writable(sig: &Signature, p: &Param, d: &ArrayDesc) -> Result<()> {
    if d.readonly() {
        return Err(Error::value(format!(
            "array is read-only, but kernel `{}` writes to `{}`",
            sig.name, p.name
        ))
        .with_key(Key::Data)
        .with_protocol(d.protocol()));
    }
    if layout::may_self_overlap(d.shape(), d.byte_strides(), d.itemsize()) {
        return Err(Error::value(format!(
            "output array has overlapping elements (shape {:?}, strides {:?} bytes): parallel \
             writes to it would race",
            d.shape(),
            d.byte_strides()
        )));
    }
    Ok(())
}

/// The kernel's `same_shape` groups.
fn check_same_shapes(sig: &Signature, args: &[Arg<'_>]) -> Result<()> {
    for group in &sig.same_shape {
        let first = group[0];
        let Some(d0) = array_of(&args[first]) else {
            continue;
        };
        for &i in &group[1..] {
            let Some(d) = array_of(&args[i]) else {
                continue;
            };
            if d.shape() != d0.shape() {
                return Err(Error::value(format!(
                    "arguments `{}` (shape {:?}) and `{}` (shape {:?}) must have the same shape",
                    sig.params[first].name,
                    d0.shape(),
                    sig.params[i].name,
                    d.shape()
                ))
                .with_arg(sig.params[i].name.clone()));
            }
        }
    }
    Ok(())
}

/// A written array must not partially overlap any other array argument: which value a
/// thread reads would depend on the order threads run in. Identical views are fine (each
/// thread reads and writes its own element). Host arrays are staged to fresh copies.
fn check_aliasing(sig: &Signature, args: &[Arg<'_>]) -> Result<()> {
    for (i, p) in sig.params.iter().enumerate() {
        let (true, Arg::Array(w)) = (p.mutable, args[i]) else {
            continue;
        };
        let Some(wr) = w.byte_range() else { continue };
        for (j, q) in sig.params.iter().enumerate() {
            let Arg::Array(o) = args[j] else { continue };
            let Some(or) = o.byte_range() else { continue };
            let same_view = w.ptr() == o.ptr()
                && w.shape() == o.shape()
                && w.byte_strides() == o.byte_strides()
                && w.itemsize() == o.itemsize();
            if i != j && layout::ranges_overlap(wr, or) && !same_view && !(q.mutable && j < i) {
                return Err(Error::value(format!(
                    "output `{}` overlaps argument `{}` without being the same view; the result \
                     would depend on thread order",
                    p.name, q.name
                ))
                .with_arg(p.name.clone()));
            }
        }
    }
    Ok(())
}

/// The array of an array argument (device or host).
fn array_of<'a>(a: &Arg<'a>) -> Option<&'a ArrayDesc> {
    match *a {
        Arg::Array(d) | Arg::Host(d) => Some(d),
        Arg::Scalar(_) => None,
    }
}
