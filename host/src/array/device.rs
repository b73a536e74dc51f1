//! Device memory ferrocuda owns: [`AnyDeviceArray`] (element type known at run time) and
//! [`DeviceArray<T>`] (typed), one allocation type with one free.

use crate::driver::{self, raw_stream, result as cu, Context};
use crate::error::{Error, Result};
use crate::interop::cai::{ArrayDesc, MAX_NDIM};
use crate::launch::Arg;
use crate::stream::{Capture, StreamRef};
use ferrocuda_abi::{layout, DType, Element};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use std::marker::PhantomData;

/// `Ok` when host data of `n` units (elements or bytes) fits an array of `want`.
fn check_size(n: usize, want: usize, unit: &str) -> Result<()> {
    if n == want {
        Ok(())
    } else {
        Err(Error::value(format!(
            "host data has {n} {unit}, the array holds {want}"
        )))
    }
}

/// An owning, C-contiguous N-D array in device memory of any element type, ordered on one
/// stream: the type-erased form of [`DeviceArray`] (host arrays are staged in it).
pub struct AnyDeviceArray {
    desc: ArrayDesc,
    ctx: &'static Context,
    stream: StreamRef,
}

// SAFETY: the array owns its allocation; the driver API is thread-safe and every method
// binds the context it needs.
unsafe impl Send for AnyDeviceArray {}
// SAFETY: shared access only reads the descriptor or enqueues reads of device memory.
unsafe impl Sync for AnyDeviceArray {}

impl std::fmt::Debug for AnyDeviceArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray")
            .field("dtype", &self.desc.dtype().name())
            .field("shape", &self.desc.shape())
            .field("device", &self.ctx.ordinal())
            .field("stream", &self.stream)
            .finish()
    }
}

impl AnyDeviceArray {
    /// An array of `dtype` and `shape` on `device`, ordered on `stream`, with unspecified
    /// contents.
    ///
    /// Refused ([`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)) while `stream` is
    /// capturing a CUDA graph: the allocation would become a node of the graph, owned by it
    /// and backed only while the graph runs. Allocate before the capture.
    pub fn empty(dtype: DType, shape: &[usize], device: usize, stream: StreamRef) -> Result<Self> {
        if shape.len() > MAX_NDIM {
            return Err(Error::value(format!(
                "at most {MAX_NDIM} axes are supported"
            )));
        }
        let ctx = Context::get(device)?;
        let _caller = ctx.enter()?;
        let bytes = layout::element_count(shape)
            .and_then(|n| n.checked_mul(dtype.itemsize()))
            .ok_or_else(|| Error::value(format!("shape {shape:?} overflows")))?;
        let ptr = if bytes > 0 {
            driver::idle(stream, "allocate a DeviceArray on")?;
            // SAFETY: the context is bound; the memory is used in stream order on `stream`.
            unsafe { cu::mem_alloc_async(bytes, raw_stream(stream)) }?
        } else {
            0
        };
        match ArrayDesc::from_parts(dtype, shape, None, ptr, false, Some(stream)) {
            Ok(desc) => Ok(AnyDeviceArray { desc, ctx, stream }),
            Err(e) => {
                if ptr != 0 {
                    // SAFETY: just allocated on this stream, never shared.
                    let _ = unsafe { cu::mem_free_async(ptr, raw_stream(stream)) };
                }
                Err(e)
            }
        }
    }

    /// Size of the elements in bytes.
    pub fn nbytes(&self) -> usize {
        self.desc.size() * self.desc.itemsize()
    }

    /// Copies `src` — the elements in C order, as bytes — into the array and waits for the
    /// copy.
    pub fn copy_from_host_bytes(&self, src: &[u8]) -> Result<()> {
        check_size(src.len(), self.nbytes(), "bytes")?;
        if src.is_empty() {
            return Ok(());
        }
        let _caller = self.ctx.enter()?;
        let _relaxed = driver::blocking(self.stream, "copy host data to the device on")?;
        let s = raw_stream(self.stream);
        // SAFETY: the allocation holds `src.len()` bytes; `src` is borrowed for the call, and
        // the synchronization below ends the copy before it returns.
        unsafe { cu::memcpy_htod_async(self.desc.ptr(), src, s) }?;
        // SAFETY: the array's live stream (or a sentinel), checked not to be capturing.
        unsafe { cu::stream_synchronize(s) }
    }

    /// Copies the array into `dst` (its elements in C order, as bytes), waiting for pending
    /// work on the array's stream first (stream order) and for the copy.
    pub fn copy_to_host_bytes(&self, dst: &mut [u8]) -> Result<()> {
        check_size(dst.len(), self.nbytes(), "bytes")?;
        // SAFETY: `dst` is valid for writes of `nbytes()` bytes.
        unsafe { self.copy_to_ptr(dst.as_mut_ptr()) }
    }

    /// Copies all elements to `dst` and waits for the copy.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes of `self.nbytes()` bytes.
    unsafe fn copy_to_ptr(&self, dst: *mut u8) -> Result<()> {
        if self.nbytes() == 0 {
            return Ok(());
        }
        let _caller = self.ctx.enter()?;
        let _relaxed = driver::blocking(self.stream, "copy device data to the host on")?;
        let s = raw_stream(self.stream);
        // SAFETY: the allocation holds `nbytes` bytes; `dst` holds as many (caller); the
        // synchronization below ends the copy before returning.
        unsafe { cu::memcpy_dtoh_async(dst, self.desc.ptr(), self.nbytes(), s) }?;
        // SAFETY: the array's live stream (or a sentinel), checked not to be capturing.
        unsafe { cu::stream_synchronize(s) }
    }

    /// The array's interface (CAI v3; `stream` = the array's stream).
    pub fn desc(&self) -> &ArrayDesc {
        &self.desc
    }

    /// As a kernel argument.
    pub fn arg(&self) -> Arg<'_> {
        Arg::Array(&self.desc)
    }

    /// Device ordinal.
    pub fn device(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The stream the array is ordered on.
    pub fn stream(&self) -> StreamRef {
        self.stream
    }

    /// Blocks until all work on the array's stream is done.
    pub fn synchronize(&self) -> Result<()> {
        let _caller = self.ctx.enter()?;
        driver::synchronize(self.stream)
    }

    /// The typed array, if `T` is its element type.
    pub fn typed<T: Element>(&self) -> Option<&DeviceArray<T>> {
        (self.desc.dtype() == T::DTYPE).then(|| {
            // SAFETY: `DeviceArray<T>` is a `repr(transparent)` wrapper of `AnyDeviceArray`
            // (plus a zero-sized marker), and the element type is `T`.
            unsafe { &*(self as *const AnyDeviceArray).cast::<DeviceArray<T>>() }
        })
    }
}

impl Drop for AnyDeviceArray {
    fn drop(&mut self) {
        let ptr = self.desc.ptr();
        if ptr == 0 {
            return;
        }
        // Stream-ordered free: runs after all work enqueued on the array's stream, which
        // includes waits on kernels that used the array from other streams.
        if let Ok(_caller) = self.ctx.enter() {
            // While the stream captures a graph, the free would be captured — a graph may not
            // free memory it did not allocate, and the attempt invalidates the capture — and
            // cannot be ordered after the stream's work from outside the capture either: the
            // memory is then left allocated (documented: drop arrays outside captures).
            if driver::capture_state(self.stream) != Ok(Capture::None) {
                return;
            }
            // SAFETY: we own the allocation; no reference to it outlives `self` (launch
            // contract), and the free is ordered after the stream's pending work.
            let _ = unsafe { cu::mem_free_async(ptr, raw_stream(self.stream)) };
        }
    }
}

/// An owning, typed, C-contiguous N-D array in device memory, ordered on one stream.
#[repr(transparent)]
pub struct DeviceArray<T: Element> {
    inner: AnyDeviceArray,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> std::fmt::Debug for DeviceArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl<T: Element> From<DeviceArray<T>> for AnyDeviceArray {
    fn from(a: DeviceArray<T>) -> AnyDeviceArray {
        a.inner
    }
}

/// The bytes of a slice of elements.
fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: elements are plain data (`Element`'s contract): every byte is initialized.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

impl<T: Element> DeviceArray<T> {
    /// An array of `shape` on `device`, ordered on `stream`, with unspecified contents.
    pub fn empty(shape: &[usize], device: usize, stream: StreamRef) -> Result<Self> {
        Ok(DeviceArray {
            inner: AnyDeviceArray::empty(T::DTYPE, shape, device, stream)?,
            _t: PhantomData,
        })
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

    /// Copies `host` (length = element count) into the array and waits for the copy.
    pub fn copy_from_host(&self, host: &[T]) -> Result<()> {
        check_size(host.len(), self.len(), "elements")?;
        self.inner.copy_from_host_bytes(as_bytes(host))
    }

    /// Copies the array into `host` (length = element count), waiting for pending work on
    /// the array's stream first (stream order) and for the copy.
    pub fn copy_to_host(&self, host: &mut [T]) -> Result<()> {
        check_size(host.len(), self.len(), "elements")?;
        // SAFETY: `host` is valid for writes of `len` elements, i.e. `nbytes` bytes.
        unsafe { self.inner.copy_to_ptr(host.as_mut_ptr().cast()) }
    }

    /// Downloads into a new `ndarray` of the same shape.
    pub fn to_ndarray(&self) -> Result<ArrayD<T>> {
        let n = self.len();
        let mut v: Vec<T> = Vec::with_capacity(n);
        // SAFETY: the spare capacity holds `n` elements, i.e. `nbytes` bytes.
        unsafe {
            self.inner
                .copy_to_ptr(v.spare_capacity_mut().as_mut_ptr().cast())?
        };
        // SAFETY: the copy initialized all `n` elements; every bit pattern is a valid `T`
        // (`Element`'s contract).
        unsafe { v.set_len(n) };
        ArrayD::from_shape_vec(IxDyn(self.shape()), v)
            .map_err(|e| Error::value(format!("shape error: {e}")))
    }

    /// The array's interface (CAI v3; `stream` = the array's stream).
    pub fn desc(&self) -> &ArrayDesc {
        self.inner.desc()
    }

    /// As a kernel argument.
    pub fn arg(&self) -> Arg<'_> {
        self.inner.arg()
    }

    /// Shape.
    pub fn shape(&self) -> &[usize] {
        self.inner.desc().shape()
    }

    /// Element count.
    pub fn len(&self) -> usize {
        self.inner.desc().size()
    }

    /// `true` if the array holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Device ordinal.
    pub fn device(&self) -> usize {
        self.inner.device()
    }

    /// The stream the array is ordered on.
    pub fn stream(&self) -> StreamRef {
        self.inner.stream()
    }

    /// Device address of the first element (0 for an empty array).
    pub fn device_ptr(&self) -> u64 {
        self.inner.desc().ptr()
    }

    /// Blocks until all work on the array's stream is done.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.synchronize()
    }
}
