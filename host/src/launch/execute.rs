//! Phase 2 of a launch: [`Prepared::execute`] packs the parameters, runs the stream plan
//! around `cuLaunchKernel`, and reports what it did.

use std::ffi::c_void;

use super::{Arg, Launched, Prepared};
use crate::driver::{self, raw_stream, result as cu, DriverOps};
use crate::error::{Error, Result};
use crate::module::{Signature, MAX_PARAMS, PARAM_BUFFER_SIZE};
use ferrocuda_abi::{ArrayArg, ParamKind, MAX_NDIM};

/// The launch parameter buffer: [`PARAM_BUFFER_SIZE`] bytes aligned for every parameter
/// type, of which only the signature's [`buffer_size`](Signature::buffer_size) bytes are
/// initialized (zeroed, then written) and used — zeroing all 4 KiB per launch would cost more
/// than packing a few parameters.
struct ParamBuffer {
    mem: std::mem::MaybeUninit<Aligned>,
    len: usize,
}

#[repr(C, align(16))]
struct Aligned([u8; PARAM_BUFFER_SIZE]);

impl ParamBuffer {
    /// A buffer whose first `len` bytes (at most [`PARAM_BUFFER_SIZE`]) are zero.
    fn new(len: usize) -> Self {
        let len = len.min(PARAM_BUFFER_SIZE);
        let mut mem = std::mem::MaybeUninit::<Aligned>::uninit();
        // SAFETY: `len` bytes at the start of an allocation of `PARAM_BUFFER_SIZE` bytes.
        unsafe { std::ptr::write_bytes(mem.as_mut_ptr().cast::<u8>(), 0, len) };
        ParamBuffer { mem, len }
    }

    /// The initialized bytes.
    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the first `len` bytes were zeroed by `new` (and are only written since).
        unsafe { std::slice::from_raw_parts_mut(self.mem.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

impl Prepared<'_> {
    /// Phase 2 of a launch: packs `args` into the parameter buffer, runs the stream plan's
    /// work before the launch, launches, and runs the plan's work after it.
    ///
    /// `args` are the arguments given to [`Kernel::prepare`](crate::Kernel::prepare), with
    /// each [`Arg::Host`] replaced by its staged device array (the array module's
    /// `Staging::resolve`).
    ///
    /// # Errors
    ///
    /// A host argument that was not replaced, a different argument count, or a failed driver
    /// call (the first one; nothing more is done after it).
    ///
    /// # Safety
    ///
    /// As [`Kernel::launch`](crate::Kernel::launch); besides, `args` must be the prepared
    /// arguments: the checks of [`Kernel::prepare`](crate::Kernel::prepare) stand for them.
    pub unsafe fn execute(&self, args: &[Arg<'_>]) -> Result<Launched> {
        // Any thread, after anything: make the prepared context current again.
        self.ctx.bind()?;
        // SAFETY: the context is bound; the rest is the caller's contract, forwarded.
        unsafe { self.execute_bound(args) }
    }

    /// [`execute`](Self::execute) on the thread that prepared the launch, right after
    /// [`Kernel::prepare`](crate::Kernel::prepare) (whose context is still current).
    ///
    /// # Safety
    ///
    /// As [`execute`](Self::execute), and the prepared context is current on this thread.
    pub(super) unsafe fn execute_bound(&self, args: &[Arg<'_>]) -> Result<Launched> {
        let sig = self.kernel.signature();
        self.check_staged(sig, args)?;
        let device = self.ctx.ordinal();
        let Some((f, grid, block)) = self.launch else {
            // Nothing to compute; no ordering needed either.
            return Ok(Launched {
                plan: self.plan,
                device,
                config: None,
            });
        };
        let mut buf = ParamBuffer::new(sig.buffer_size);
        pack(sig, args, &mut buf)?;
        crate::mark!(10);
        let mut ops = DriverOps { ctx: self.ctx };
        self.plan.before_launch(&mut ops)?;
        crate::mark!(11);
        let stream = raw_stream(self.plan.launch_stream());
        let workspace = if sig.has_extras() {
            // SAFETY: the context is bound; `stream` is the plan's launch stream, which now
            // waits for the producers; the arguments were checked by prepare (zeroed outputs
            // are dense, writable device memory); the plan knows whether it is captured.
            let w = unsafe {
                crate::extras::before_launch(
                    self.ctx,
                    sig,
                    args,
                    &self.scratch,
                    stream,
                    self.plan.is_captured(),
                )
            }?;
            if let Err(e) = pack_scratch(sig, &self.scratch, w.ptr(), &mut buf) {
                // SAFETY: provided just above on `stream`; never used.
                let _ = unsafe { crate::extras::after_launch(w, stream) };
                return Err(e);
            }
            w
        } else {
            crate::extras::Workspace::None
        };
        let mut ptrs: [*mut c_void; MAX_PARAMS] = [std::ptr::null_mut(); MAX_PARAMS];
        slot_addresses(sig, &mut buf, &mut ptrs);
        let params = &mut ptrs[..sig.entry_params];
        // SAFETY: `f` belongs to the module loaded in the bound context (the caller's
        // contract); `params` points at one correctly sized and aligned value
        // per kernel parameter (layouts checked against the manifest, which the builder
        // checked against the PTX; scratch images written above); the arrays were validated
        // by prepare and the caller upholds the rest (see # Safety).
        let launched =
            unsafe { cu::launch_kernel(f.raw, grid, block, self.shared_mem_bytes, stream, params) }
                .map_err(|e| Error::new(e.kind(), format!("kernel `{}`: {e}", sig.name)));
        // SAFETY: the workspace was provided on `stream` for this launch; an owned one's free
        // is ordered after the kernel (or after nothing, if the launch failed), a kept one is
        // unlocked now that the launch is enqueued.
        let freed = unsafe { crate::extras::after_launch(workspace, stream) };
        launched?;
        freed?;
        driver::result::set_last_kernel(device, sig.static_name);
        crate::mark!(12);
        self.plan.after_launch(&mut ops)?;
        crate::mark!(13);
        Ok(Launched {
            plan: self.plan,
            device,
            config: Some((grid, block)),
        })
    }

    /// Every argument prepared as a host array is now a (staged) device array.
    fn check_staged(&self, sig: &Signature, args: &[Arg<'_>]) -> Result<()> {
        if args.len() != self.nargs {
            return Err(Error::value(format!(
                "kernel `{}` was prepared with {} arguments, executed with {}",
                sig.name,
                self.nargs,
                args.len()
            )));
        }
        if self.staged == 0 {
            return Ok(());
        }
        for (i, (p, a)) in sig.params.iter().zip(args).enumerate() {
            if self.staged & (1 << i) != 0 && !matches!(a, Arg::Array(_)) {
                return Err(Error::value(
                    "host array not staged: replace it with its device copy before the launch",
                )
                .with_arg(p.name.clone()));
            }
        }
        Ok(())
    }
}

/// Writes each scratch workspace's image (its address in the launch's allocation at `base`
/// and its length) at its parameter's offset.
fn pack_scratch(
    sig: &Signature,
    plan: &crate::extras::ScratchPlan,
    base: u64,
    buf: &mut ParamBuffer,
) -> Result<()> {
    for (s, &(at, len)) in sig.scratch.iter().zip(plan.parts()) {
        let image = ArrayArg {
            ptr: base + at,
            len: len as usize,
            shape: &[],
            strides: &[],
        };
        let slot = &mut buf.bytes()[s.offset..s.offset + s.size];
        if ParamKind::Scratch.write_array(&image, slot) != Some(s.size) {
            return Err(Error::value(format!(
                "scratch `{}` does not fit its parameter of kernel `{}`",
                s.name, sig.name
            )));
        }
    }
    Ok(())
}

/// Writes each argument's launch-buffer image at its parameter's offset.
fn pack(sig: &Signature, args: &[Arg<'_>], buf: &mut ParamBuffer) -> Result<()> {
    for (p, a) in sig.params.iter().zip(args) {
        let slot = &mut buf.bytes()[p.offset..p.offset + p.size];
        let written = match a {
            Arg::Scalar(s) => {
                s.write(slot);
                Some(p.size)
            }
            Arg::Array(d) => {
                let mut strides = [0isize; MAX_NDIM];
                let strides = if p.kind.fixes_rank() {
                    d.element_strides(&mut strides)?
                } else {
                    &[]
                };
                let image = ArrayArg {
                    ptr: d.ptr(),
                    len: d.size(),
                    shape: d.shape(),
                    strides,
                };
                p.kind.write_array(&image, slot)
            }
            Arg::Host(_) => None,
        };
        if written != Some(p.size) {
            return Err(Error::value(format!(
                "argument `{}` does not fit parameter `{}` of kernel `{}` (checked arguments \
                 only)",
                p.name, p.name, sig.name
            )));
        }
    }
    Ok(())
}

/// The address of every parameter's slot (scratch parameters included), in entry order:
/// taken once every image is written, so no later borrow of the buffer invalidates them.
fn slot_addresses(sig: &Signature, buf: &mut ParamBuffer, ptrs: &mut [*mut c_void; MAX_PARAMS]) {
    let base = buf.bytes().as_mut_ptr();
    let offsets = sig
        .params
        .iter()
        .map(|p| (p.entry, p.offset))
        .chain(sig.scratch.iter().map(|s| (s.entry, s.offset)));
    for (entry, offset) in offsets {
        // SAFETY: offset + size <= buffer_size (a `Signature` invariant), the initialized
        // bytes; and entry < entry_params <= MAX_PARAMS.
        ptrs[entry] = unsafe { base.add(offset) }.cast();
    }
}
