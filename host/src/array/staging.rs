//! Host arrays as kernel arguments — the one staging path, used by [`Kernel::launch_host`]
//! and by the Python launchers: each host array is copied to a new device array on the
//! prepared launch's device and stream ([`Staging::stage`]), the kernel runs on the copies
//! ([`Staging::resolve`]), and the copies of written arrays come back ([`Staging::download`]).
//!
//! This is Numba's behaviour for host arrays: convenient, but it costs an allocation, a copy
//! each way and a host synchronization per array and call — fine for prototyping, wrong for a
//! loop.

use super::device::{AnyDeviceArray, DeviceArray};
use crate::driver;
use crate::error::{Error, ErrorKind, Result};
use crate::interop::cai::ArrayDesc;
use crate::launch::{Arg, ArgList, LaunchOptions, Prepared};
use crate::module::Kernel;
use crate::scalar::Scalar;
use crate::stream::StreamRef;
use ferrocuda_abi::Element;
use ndarray::{ArrayBase, ArrayViewMutD, Data, IxDyn};

/// Why a host array cannot be an argument of a launch captured in a CUDA graph.
const CAPTURED_HOST_ARRAY: &str =
    "host (NumPy/ndarray) arrays cannot be arguments of a launch captured in a CUDA graph: \
     staging copies them with host-synchronous copies into a temporary device array, and a \
     graph could neither repeat those copies with new host data at each replay nor keep the \
     temporary array alive. Copy the data into a device array (ferrocuda.DeviceArray, CuPy, \
     PyTorch) before the capture and pass that array; the launch was not captured and the \
     capture is still valid";

/// A host array that can be a kernel input.
pub trait HostArray {
    /// The array as it will be staged: element type, shape, C-contiguous (the pointer is the
    /// host's; launches never use it).
    fn desc(&self) -> Result<ArrayDesc>;
    /// Uploads to a new device array on `device`, ordered on `stream`.
    fn upload(&self, device: usize, stream: StreamRef) -> Result<AnyDeviceArray>;
}

/// A host array that can be a kernel output (copied back after the launch).
pub trait HostArrayMut: HostArray {
    /// Copies `src` (same shape and type) back into `self`.
    fn download(&mut self, src: &AnyDeviceArray) -> Result<()>;
}

impl<T: Element, S: Data<Elem = T>> HostArray for ArrayBase<S, IxDyn> {
    fn desc(&self) -> Result<ArrayDesc> {
        ArrayDesc::from_parts(
            T::DTYPE,
            self.shape(),
            None,
            self.as_ptr() as u64,
            false,
            None,
        )
    }
    fn upload(&self, device: usize, stream: StreamRef) -> Result<AnyDeviceArray> {
        Ok(DeviceArray::from_ndarray(self, device, stream)?.into())
    }
}

impl<T: Element> HostArrayMut for ArrayViewMutD<'_, T> {
    fn download(&mut self, src: &AnyDeviceArray) -> Result<()> {
        let typed = src
            .typed::<T>()
            .ok_or_else(|| Error::type_error("element type changed between upload and download"))?;
        let out = typed.to_ndarray()?;
        if out.shape() != self.shape() {
            return Err(Error::value("shape changed between upload and download"));
        }
        self.assign(&out);
        Ok(())
    }
}

/// The staged copies of one launch's host arguments.
#[derive(Debug, Default)]
pub struct Staging {
    staged: Vec<(usize, AnyDeviceArray)>,
}

impl Staging {
    /// No staged array yet (allocates nothing).
    pub fn new() -> Self {
        Staging::default()
    }

    /// Copies `host`, argument `index` of the prepared launch, to a new device array on its
    /// device and launch stream. Errors name the argument.
    ///
    /// Refused ([`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)) when the launch is
    /// captured in a CUDA graph ([`Plan::is_captured`](crate::stream::Plan::is_captured)),
    /// before anything is allocated or copied, with an error saying why.
    pub fn stage(&mut self, on: &Prepared<'_>, index: usize, host: &dyn HostArray) -> Result<()> {
        let name = |e: Error| match on.param(index) {
            Some(p) => e.with_arg(p.name.clone()),
            None => e,
        };
        if on.plan().is_captured() {
            return Err(name(Error::new(
                ErrorKind::Unsupported,
                CAPTURED_HOST_ARRAY,
            )));
        }
        let staged = host.upload(on.device(), on.launch_stream()).map_err(name)?;
        self.staged.push((index, staged));
        Ok(())
    }

    /// `args` with each staged argument replaced by its device copy (what
    /// [`Prepared::execute`] takes).
    pub fn resolve<'x>(&'x self, args: &[Arg<'x>]) -> Result<ArgList<'x>> {
        let mut out = ArgList::new();
        for &a in args {
            out.push(a)?;
        }
        for (i, arr) in &self.staged {
            if let Some(slot) = out.as_mut_slice().get_mut(*i) {
                *slot = arr.arg();
            }
        }
        Ok(out)
    }

    /// The staged copy of argument `index`.
    pub fn get(&self, index: usize) -> Option<&AnyDeviceArray> {
        self.staged
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, a)| a)
    }

    /// Copies the staged copy of argument `index` back into `host` (after the launch; waits
    /// for the kernel, which runs on the same stream).
    pub fn download(&self, index: usize, host: &mut dyn HostArrayMut) -> Result<()> {
        let arr = self
            .get(index)
            .ok_or_else(|| Error::value(format!("argument {index} was not staged")))?;
        host.download(arr)
    }
}

/// A launch argument that may live on the host.
pub enum HostArg<'a> {
    /// A scalar.
    Scalar(Scalar),
    /// A device array.
    Device(Arg<'a>),
    /// A host input (copied to the device before the launch).
    In(&'a dyn HostArray),
    /// A host array the kernel may write (copied in, and back after the launch).
    InOut(&'a mut dyn HostArrayMut),
}

impl Kernel<'_> {
    /// Launches with host (`ndarray`) and device arguments mixed, Numba-style: host arrays
    /// are staged ([`Staging`]) on the launch's device and stream — `device` when no argument
    /// is in device memory — the kernel runs, host arrays passed as [`HostArg::InOut`] are
    /// copied back, and the call returns when all of it is done. Refused
    /// ([`ErrorKind::Unsupported`]) when the launch stream is capturing a CUDA graph.
    ///
    /// # Safety
    ///
    /// As [`Kernel::launch`] for the device arguments; the host ones are managed here.
    pub unsafe fn launch_host(
        &self,
        args: &mut [HostArg<'_>],
        device: usize,
        opts: &LaunchOptions,
    ) -> Result<()> {
        let sig = self.signature();
        let mut descs = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let name = || {
                sig.params
                    .get(i)
                    .map(|p| p.name.clone())
                    .unwrap_or_default()
            };
            descs.push(match a {
                HostArg::In(h) => Some(h.desc().map_err(|e| e.with_arg(name()))?),
                HostArg::InOut(h) => Some(h.desc().map_err(|e| e.with_arg(name()))?),
                HostArg::Scalar(_) | HostArg::Device(_) => None,
            });
        }
        let mut list = ArgList::new();
        for (a, d) in args.iter().zip(&descs) {
            list.push(match (a, d) {
                (HostArg::Scalar(s), _) => Arg::Scalar(*s),
                (HostArg::Device(d), _) => *d,
                (_, Some(d)) => Arg::Host(d),
                (_, None) => unreachable!("host arguments have descriptors"),
            })?;
        }
        let opts = LaunchOptions {
            device: opts.device.or(Some(device)),
            ..*opts
        };
        let _caller = driver::CallerContext::save();
        let prepared = self.prepare(&list, &opts)?;
        if prepared.plan().is_captured() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "launch_host waits for the kernel and copies host arrays in and out, which a \
                 launch captured in a CUDA graph does not allow (its kernel runs only when the \
                 graph is launched): use Kernel::launch with device arrays during a capture",
            ));
        }
        let mut staging = Staging::new();
        for (i, a) in args.iter().enumerate() {
            match a {
                HostArg::In(h) => staging.stage(&prepared, i, *h)?,
                HostArg::InOut(h) => staging.stage(&prepared, i, &**h)?,
                HostArg::Scalar(_) | HostArg::Device(_) => {}
            }
        }
        let resolved = staging.resolve(&list)?;
        // SAFETY: forwarded contract; the staged copies live until after the downloads.
        let launched = unsafe { prepared.execute(&resolved)? };
        for (i, a) in args.iter_mut().enumerate() {
            if let HostArg::InOut(h) = a {
                staging.download(i, &mut **h)?;
            }
        }
        driver::synchronize_on(launched.device, prepared.launch_stream())
    }
}
