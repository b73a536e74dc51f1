//! Arrays: [`DeviceArray`] (owned by ferrocuda), [`ForeignArray`] (another library's memory,
//! kept alive by an owner), and host `ndarray` arguments ([`HostArg`]).
//!
//! # DeviceArray
//!
//! A typed, C-contiguous N-D device allocation tied to one stream. Allocation, upload,
//! download and free are *stream-ordered* on that stream (`cuMemAllocAsync`,
//! `cuMemcpy*Async`, `cuMemFreeAsync`), and the array exports the CUDA Array Interface v3
//! with `stream` = that stream, so any consumer — ferrocuda's launchers, CuPy, Numba —
//! orders itself after pending work. Kernels launched by ferrocuda on another stream make
//! the array's stream wait for them (the stream plan's "after" half), so a later free on
//! the array's stream never overtakes a kernel still using the memory.
//!
//! # ForeignArray
//!
//! What Numba's `as_cuda_array(obj, sync)` / `from_cuda_array_interface(desc, owner, sync)`
//! return: a validated interface plus the object that owns the memory, kept alive as long as
//! the `ForeignArray` is.
//!
//! # Host arrays
//!
//! A launch may take `ndarray` arrays, as Numba's kernels take NumPy arrays: inputs are
//! copied to temporary device arrays, the kernel runs, mutable arguments are copied back,
//! and the call waits for it all. That costs an allocation, a copy each way and a host
//! synchronization per call — fine for prototyping, wrong for a loop: keep data in
//! [`DeviceArray`]s there.

use crate::cai::{ArrayDesc, MAX_NDIM};
use crate::driver::{check, raw_stream, Context};
use crate::error::{Error, Result};
use crate::launch::{Arg, LaunchOptions, Scalar};
use crate::module::Kernel;
use crate::stream::StreamRef;
use cudarc::driver::sys;
use ferrocuda_abi::{DType, Element};
use ndarray::{ArrayBase, ArrayD, ArrayViewMutD, Data, Dimension, IxDyn};
use std::marker::PhantomData;

/// An owning, typed, C-contiguous N-D array in device memory, ordered on one stream.
pub struct DeviceArray<T: Element> {
    desc: ArrayDesc,
    ctx: &'static Context,
    stream: StreamRef,
    _t: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for DeviceArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray")
            .field("dtype", &T::DTYPE.name())
            .field("shape", &self.desc.shape())
            .field("device", &self.ctx.ordinal())
            .field("stream", &self.stream)
            .finish()
    }
}

// SAFETY: the array owns its allocation; the driver API is thread-safe and every method
// binds the context it needs.
unsafe impl<T: Element> Send for DeviceArray<T> {}
// SAFETY: shared access only reads the descriptor or enqueues reads of device memory.
unsafe impl<T: Element> Sync for DeviceArray<T> {}

impl<T: Element> DeviceArray<T> {
    /// An array of `shape` on `device`, ordered on `stream`, with unspecified contents.
    pub fn empty(shape: &[usize], device: usize, stream: StreamRef) -> Result<Self> {
        if shape.len() > MAX_NDIM {
            return Err(Error::value(format!(
                "at most {MAX_NDIM} axes are supported"
            )));
        }
        let ctx = Context::get(device)?;
        ctx.bind()?;
        let count = shape
            .iter()
            .try_fold(1usize, |n, &s| n.checked_mul(s))
            .ok_or_else(|| Error::value(format!("shape {shape:?} overflows")))?;
        let bytes = count
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::value(format!("shape {shape:?} overflows")))?;
        let mut ptr: sys::CUdeviceptr = 0;
        if bytes > 0 {
            // SAFETY: out-pointer to a local; the context is bound.
            check(
                unsafe { sys::cuMemAllocAsync(&mut ptr, bytes, raw_stream(stream)) },
                "cuMemAllocAsync",
            )?;
        }
        let desc = ArrayDesc::from_parts(T::DTYPE, shape, None, ptr, false, Some(stream));
        match desc {
            Ok(desc) => Ok(DeviceArray {
                desc,
                ctx,
                stream,
                _t: PhantomData,
            }),
            Err(e) => {
                if ptr != 0 {
                    // SAFETY: just allocated on this stream, never shared.
                    unsafe { sys::cuMemFreeAsync(ptr, raw_stream(stream)) };
                }
                Err(e)
            }
        }
    }

    /// Uploads an `ndarray` (any layout) to a new array on `device`, ordered on `stream`.
    /// Returns once the host data has been copied (the source may then change).
    pub fn from_ndarray<S, D>(a: &ArrayBase<S, D>, device: usize, stream: StreamRef) -> Result<Self>
    where
        S: Data<Elem = T>,
        D: Dimension,
    {
        let arr = DeviceArray::empty(a.shape(), device, stream)?;
        let std = a.as_standard_layout();
        if let Some(host) = std.as_slice() {
            arr.copy_from_host(host)?;
        }
        Ok(arr)
    }

    fn check_len(&self, n: usize) -> Result<()> {
        if n == self.len() {
            Ok(())
        } else {
            Err(Error::value(format!(
                "host slice has {n} elements, array has {}",
                self.len()
            )))
        }
    }

    /// Copies `host` (length = element count) into the array and waits for the copy.
    pub fn copy_from_host(&self, host: &[T]) -> Result<()> {
        self.check_len(host.len())?;
        if host.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the allocation holds `len` elements; `host` is borrowed for the call, and
        // the synchronization below ends the copy before it returns.
        unsafe {
            check(
                sys::cuMemcpyHtoDAsync_v2(
                    self.desc.ptr(),
                    host.as_ptr().cast(),
                    std::mem::size_of_val(host),
                    raw_stream(self.stream),
                ),
                "cuMemcpyHtoDAsync",
            )?;
        }
        crate::driver::synchronize(self.stream)
    }

    /// Copies the array into `host` (length = element count), waiting for pending work on
    /// the array's stream first (stream order) and for the copy.
    pub fn copy_to_host(&self, host: &mut [T]) -> Result<()> {
        self.check_len(host.len())?;
        // SAFETY: `host` is valid for writes of `len` elements.
        unsafe { self.copy_to_ptr(host.as_mut_ptr()) }
    }

    /// Copies all elements to `dst` and waits for the copy.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes of `self.len()` elements of `T`.
    unsafe fn copy_to_ptr(&self, dst: *mut T) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the allocation holds `len` elements; `dst` holds as many (caller); the
        // synchronization below ends the copy before returning. Every bit pattern is a valid
        // `T` (`Element`'s contract).
        unsafe {
            check(
                sys::cuMemcpyDtoHAsync_v2(
                    dst.cast(),
                    self.desc.ptr(),
                    self.len() * std::mem::size_of::<T>(),
                    raw_stream(self.stream),
                ),
                "cuMemcpyDtoHAsync",
            )?;
        }
        crate::driver::synchronize(self.stream)
    }

    /// Downloads into a new `ndarray` of the same shape.
    pub fn to_ndarray(&self) -> Result<ArrayD<T>> {
        let n = self.len();
        let mut v: Vec<T> = Vec::with_capacity(n);
        // SAFETY: the spare capacity holds `n` elements.
        unsafe { self.copy_to_ptr(v.spare_capacity_mut().as_mut_ptr().cast())? };
        // SAFETY: the copy initialized all `n` elements.
        unsafe { v.set_len(n) };
        ArrayD::from_shape_vec(IxDyn(self.desc.shape()), v)
            .map_err(|e| Error::value(format!("shape error: {e}")))
    }

    /// The array's interface (CAI v3; `stream` = the array's stream).
    pub fn desc(&self) -> &ArrayDesc {
        &self.desc
    }

    /// As a kernel argument.
    pub fn arg(&self) -> Arg<'_> {
        Arg::Array(&self.desc)
    }

    /// Shape.
    pub fn shape(&self) -> &[usize] {
        self.desc.shape()
    }

    /// Element count.
    pub fn len(&self) -> usize {
        self.desc.size()
    }

    /// `true` if the array holds no element.
    pub fn is_empty(&self) -> bool {
        self.desc.size() == 0
    }

    /// Device ordinal.
    pub fn device(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The stream the array is ordered on.
    pub fn stream(&self) -> StreamRef {
        self.stream
    }

    /// Device address of the first element (0 for an empty array).
    pub fn device_ptr(&self) -> u64 {
        self.desc.ptr()
    }

    /// Blocks until all work on the array's stream is done.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        crate::driver::synchronize(self.stream)
    }
}

impl<T: Element> Drop for DeviceArray<T> {
    fn drop(&mut self) {
        let ptr = self.desc.ptr();
        if ptr == 0 {
            return;
        }
        // Stream-ordered free: runs after all work enqueued on the array's stream, which
        // includes waits on kernels that used the array from other streams.
        if self.ctx.bind().is_ok() {
            // SAFETY: we own the allocation; no reference to it outlives `self` (launch
            // contract), and the free is ordered after the stream's pending work.
            let _ = unsafe { sys::cuMemFreeAsync(ptr, raw_stream(self.stream)) };
        }
    }
}

/// Another library's device array: a validated interface plus the owner that keeps the
/// memory alive (Numba's `as_cuda_array` / `from_cuda_array_interface`).
#[derive(Debug)]
pub struct ForeignArray<O> {
    desc: ArrayDesc,
    owner: O,
}

impl<O> ForeignArray<O> {
    /// Wraps an interface and its owner.
    ///
    /// With `sync`, a producer stream named by the interface is synchronized now (Numba's
    /// import-time sync) and kept as the array's stream; without it the stream is dropped
    /// and launches do no ordering for this array.
    pub fn new(desc: ArrayDesc, owner: O, sync: bool) -> Result<Self> {
        let desc = if sync {
            if let Some(s) = desc.stream() {
                // The stream belongs to the context of the memory's device.
                let dev = crate::driver::pointer_info(desc.ptr())
                    .ok()
                    .filter(|i| i.device >= 0)
                    .map(|i| i.device as usize)
                    .unwrap_or(0);
                Context::get(dev)?.bind()?;
                crate::driver::synchronize(s)?;
            }
            desc
        } else {
            desc.with_stream(None)
        };
        Ok(ForeignArray { desc, owner })
    }

    /// The interface.
    pub fn desc(&self) -> &ArrayDesc {
        &self.desc
    }

    /// The owner.
    pub fn owner(&self) -> &O {
        &self.owner
    }

    /// As a kernel argument.
    pub fn arg(&self) -> Arg<'_> {
        Arg::Array(&self.desc)
    }
}

/// A host array that can be a kernel input.
pub trait HostArray {
    /// Element type.
    fn dtype(&self) -> DType;
    /// Uploads to a new device buffer (type-erased) on `device`/`stream`.
    fn upload(&self, device: usize, stream: StreamRef) -> Result<ErasedDeviceArray>;
}

/// A host array that can be a kernel output (copied back after the launch).
pub trait HostArrayMut: HostArray {
    /// Copies `src` (same shape and type) back into `self`.
    fn download(&mut self, src: &ErasedDeviceArray) -> Result<()>;
}

/// A [`DeviceArray`] of any element type.
pub struct ErasedDeviceArray(Box<dyn ErasedInner>);

trait ErasedInner: Send + Sync {
    fn desc(&self) -> &ArrayDesc;
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: Element> ErasedInner for DeviceArray<T> {
    fn desc(&self) -> &ArrayDesc {
        &self.desc
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl ErasedDeviceArray {
    /// The interface.
    pub fn desc(&self) -> &ArrayDesc {
        self.0.desc()
    }

    /// The typed array, if `T` is its element type.
    pub fn downcast_ref<T: Element>(&self) -> Option<&DeviceArray<T>> {
        self.0.as_any().downcast_ref()
    }
}

impl<T: Element> From<DeviceArray<T>> for ErasedDeviceArray {
    fn from(a: DeviceArray<T>) -> Self {
        ErasedDeviceArray(Box::new(a))
    }
}

impl<T: Element, S: Data<Elem = T>> HostArray for ArrayBase<S, IxDyn> {
    fn dtype(&self) -> DType {
        T::DTYPE
    }
    fn upload(&self, device: usize, stream: StreamRef) -> Result<ErasedDeviceArray> {
        Ok(DeviceArray::from_ndarray(self, device, stream)?.into())
    }
}

impl<T: Element> HostArrayMut for ArrayViewMutD<'_, T> {
    fn download(&mut self, src: &ErasedDeviceArray) -> Result<()> {
        let typed = src
            .downcast_ref::<T>()
            .ok_or_else(|| Error::type_error("element type changed between upload and download"))?;
        let out = typed.to_ndarray()?;
        if out.shape() != self.shape() {
            return Err(Error::value("shape changed between upload and download"));
        }
        self.assign(&out);
        Ok(())
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
    /// are uploaded to temporaries on the launch stream, the kernel runs, host arrays passed
    /// as [`HostArg::InOut`] are copied back, and the call returns when all of it is done.
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
        let stream = opts.stream.unwrap_or(StreamRef::Legacy);
        let mut temps: Vec<Option<ErasedDeviceArray>> = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let name = sig
                .params
                .get(i)
                .map(|p| p.name.clone())
                .unwrap_or_default();
            temps.push(match a {
                HostArg::In(h) => Some(h.upload(device, stream).map_err(|e| e.with_arg(name))?),
                HostArg::InOut(h) => Some(h.upload(device, stream).map_err(|e| e.with_arg(name))?),
                _ => None,
            });
        }
        let dargs: Vec<Arg<'_>> = args
            .iter()
            .zip(&temps)
            .map(|(a, t)| match (a, t) {
                (HostArg::Scalar(s), _) => Arg::Scalar(*s),
                (HostArg::Device(d), _) => *d,
                (_, Some(t)) => Arg::Array(t.desc()),
                (_, None) => unreachable!("host arguments were uploaded"),
            })
            .collect();
        let opts = LaunchOptions {
            stream: Some(stream),
            ..*opts
        };
        // SAFETY: forwarded contract; the temporaries live until after the downloads.
        let launched = unsafe { self.launch(&dargs, &opts)? };
        drop(dargs);
        for (a, t) in args.iter_mut().zip(&temps) {
            if let (HostArg::InOut(h), Some(t)) = (a, t) {
                h.download(t)?;
            }
        }
        crate::launch::synchronize(launched.device, stream)
    }
}
