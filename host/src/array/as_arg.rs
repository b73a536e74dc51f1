//! [`AsArg`]: what a typed launcher takes as an array argument.

use super::{AnyDeviceArray, DeviceArray, ForeignArray};
use crate::launch::Arg;
use ferrocuda_abi::Element;

/// Something that can be passed as an array argument to a typed launcher (the functions
/// `ferrocuda-builder` generates from a kernel manifest, e.g. `ferrocuda::kernels::add_f32`).
pub trait AsArg {
    /// The argument.
    fn as_arg(&self) -> Arg<'_>;
}

impl<T: Element> AsArg for DeviceArray<T> {
    fn as_arg(&self) -> Arg<'_> {
        self.arg()
    }
}

impl AsArg for AnyDeviceArray {
    fn as_arg(&self) -> Arg<'_> {
        self.arg()
    }
}

impl<O> AsArg for ForeignArray<O> {
    fn as_arg(&self) -> Arg<'_> {
        self.arg()
    }
}
