//! Phase 2 of a launch: [`Prepared::execute`] packs the parameters, runs the stream plan
//! around `cuLaunchKernel` (`cuLaunchKernelEx` with the cooperative or cluster attribute for
//! the kernels that declare one: [`Prepared::attributes`]), and reports what it did.

use std::ffi::c_void;

use super::{Arg, Launched, Prepared};
use crate::driver::{self, raw_stream, result as cu, DriverOps};
use crate::error::{Error, Result};
use crate::module::{Signature, MAX_PARAMS, PARAM_BUFFER_SIZE};
use crate::stream::StreamRef;
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

    /// A buffer holding a copy of `image` (at most [`PARAM_BUFFER_SIZE`] bytes).
    fn from_image(image: &[u8]) -> Self {
        let len = image.len().min(PARAM_BUFFER_SIZE);
        let mut mem = std::mem::MaybeUninit::<Aligned>::uninit();
        // SAFETY: `len` bytes from `image` into the start of an allocation of
        // `PARAM_BUFFER_SIZE` bytes; the two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(image.as_ptr(), mem.as_mut_ptr().cast::<u8>(), len)
        };
        ParamBuffer { mem, len }
    }

    /// The initialized bytes.
    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the first `len` bytes were zeroed by `new` (and are only written since).
        unsafe { std::slice::from_raw_parts_mut(self.mem.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// A launch's parameters packed once ([`Prepared::pack`]) for launches that repeat on the same
/// arguments — a bound launch's, whose arguments cannot change — with the byte ranges of its
/// zeroed outputs. [`Prepared::execute_packed`] launches from it without packing again (each
/// launch copies the bytes into its aligned parameter buffer, where the scratch addresses are
/// written).
#[derive(Clone, Debug)]
pub struct Packed {
    /// The signature's parameter bytes (its `buffer_size`).
    image: Box<[u8]>,
    /// The kernel it was packed for (its signature's address), checked by `execute_packed`.
    kernel: usize,
    /// Zeroed outputs: parameter index and byte range.
    zero: Vec<(usize, (u64, u64))>,
}

impl Packed {
    /// The packed parameter bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.image
    }
}

impl Prepared<'_> {
    /// Packs `args` — the prepared arguments, no host array among them — into a [`Packed`]
    /// image for [`execute_packed`](Self::execute_packed), once for any number of launches.
    ///
    /// # Errors
    ///
    /// As [`execute`](Self::execute) for arguments that do not fit the signature, a different
    /// argument count or a host argument that was not replaced.
    pub fn pack(&self, args: &[Arg<'_>]) -> Result<Packed> {
        let sig = self.kernel.signature();
        self.check_staged(sig, args)?;
        if let Some(i) = args.iter().position(|a| matches!(a, Arg::Host(_))) {
            return Err(Error::value(
                "a host array cannot be packed: replace it with its device copy first",
            )
            .with_arg(sig.params[i].name.clone()));
        }
        let mut buf = ParamBuffer::new(sig.buffer_size);
        if self.launch.is_some() {
            // (Nothing to launch: the image is never used, as `execute` never packs it.)
            pack(sig, args, &mut buf)?;
        }
        Ok(Packed {
            image: buf.bytes().into(),
            kernel: sig as *const Signature as usize,
            zero: super::extras::zeroed_ranges(sig, args).collect(),
        })
    }

    /// Phase 2 of a launch from parameters packed once ([`pack`](Self::pack)): the stream
    /// plan's work before the launch, `cuLaunchKernel` on a copy of the image (the scratch
    /// workspaces' addresses written into it), the plan's work after it — what
    /// [`execute`](Self::execute) does after packing.
    ///
    /// # Errors
    ///
    /// `packed` made for another kernel; a failed driver call (the first one).
    ///
    /// # Safety
    ///
    /// As [`execute`](Self::execute) (its plan current, too), for the arguments `packed` was
    /// made from: they must still describe live memory, unchanged since (the checks of
    /// [`Kernel::prepare`](crate::Kernel::prepare) stand for them).
    pub unsafe fn execute_packed(&self, packed: &Packed) -> Result<Launched> {
        let sig = self.packed_for(packed)?;
        self.ctx.bind()?;
        // SAFETY: the context is bound; the rest is the caller's contract, forwarded.
        unsafe { self.launch_packed(sig, packed) }
    }

    /// What a bound launch does each time: [`replan`](Self::replan) for `producers` (the
    /// array arguments' streams now), then [`execute_packed`](Self::execute_packed) — in one
    /// entry into the prepared context (the calling thread's current context is the same
    /// afterwards as before). `self` is not changed: the new plan is the launch's.
    ///
    /// # Errors
    ///
    /// As [`replan`](Self::replan) and [`execute_packed`](Self::execute_packed).
    ///
    /// # Safety
    ///
    /// As [`execute_packed`](Self::execute_packed) but for the plan, which is made here.
    pub unsafe fn execute_replanned(
        &self,
        producers: &[Option<StreamRef>],
        packed: &Packed,
    ) -> Result<Launched> {
        let sig = self.packed_for(packed)?;
        let _caller = driver::CallerContext::save();
        self.ctx.bind()?;
        let mut now = *self;
        now.plan = self.plan_for(producers)?;
        // SAFETY: the context is bound; the plan is made for this launch; the rest is the
        // caller's contract, forwarded.
        unsafe { now.launch_packed(sig, packed) }
    }

    /// [`execute_packed`](Self::execute_packed) with the context bound and `packed` checked.
    ///
    /// # Safety
    ///
    /// As [`execute_packed`](Self::execute_packed), and the prepared context is current.
    unsafe fn launch_packed(&self, sig: &Signature, packed: &Packed) -> Result<Launched> {
        let mut buf = ParamBuffer::from_image(packed.bytes());
        // SAFETY: the context is bound; the image and zeroed ranges are the prepared
        // arguments' (the caller's contract, forwarded).
        unsafe { self.launch_image(sig, &mut buf, packed.zero.iter().copied()) }
    }

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
    /// arguments: the checks of [`Kernel::prepare`](crate::Kernel::prepare) stand for them;
    /// and the plan must hold the streams' capture state as it is now — execute right after
    /// `prepare` (or [`replan`](Self::replan)), not after a capture began on the launch stream
    /// since (the plan decides how producers are ordered and whether a scratch kernel may use
    /// its stream's kept workspace, which must never be embedded in a graph; a launch repeated
    /// over time goes through [`execute_replanned`](Self::execute_replanned)).
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
        let mut buf = ParamBuffer::new(sig.buffer_size);
        if self.launch.is_some() {
            pack(sig, args, &mut buf)?;
        }
        let zero = super::extras::zeroed_ranges(sig, args);
        // SAFETY: the context is bound; `buf` and `zero` come from the prepared arguments (the
        // caller's contract, forwarded).
        unsafe { self.launch_image(sig, &mut buf, zero) }
    }

    /// The launch itself from a packed parameter buffer: the plan's work before, the extras
    /// (zeroed outputs `zero`, scratch workspaces written into `buf`), `cuLaunchKernel`, the
    /// plan's work after.
    ///
    /// # Safety
    ///
    /// The prepared context is current; `buf` and `zero` were made from the prepared
    /// arguments, which the caller's contract of [`execute`](Self::execute) covers.
    unsafe fn launch_image(
        &self,
        sig: &Signature,
        buf: &mut ParamBuffer,
        zero: impl Iterator<Item = (usize, (u64, u64))>,
    ) -> Result<Launched> {
        let device = self.ctx.ordinal();
        let Some((f, grid, block)) = self.launch else {
            // Nothing to compute; no ordering needed either.
            return Ok(Launched {
                plan: self.plan,
                device,
                config: None,
            });
        };
        crate::mark!("rs: pack parameters");
        let mut ops = DriverOps { ctx: self.ctx };
        self.plan.before_launch(&mut ops)?;
        crate::mark!("rs: plan before launch");
        let stream = raw_stream(self.plan.launch_stream());
        let workspace = if sig.has_extras() {
            // SAFETY: the context is bound; `stream` is the plan's launch stream, which now
            // waits for the producers; the zeroed ranges are of checked arguments (dense,
            // writable device memory); the plan was made for this launch, so it knows
            // whether the launch is captured.
            let w = unsafe {
                super::extras::before_launch(
                    self.ctx,
                    sig,
                    zero,
                    &self.scratch,
                    stream,
                    self.plan.is_captured(),
                )
            }?;
            if let Err(e) = pack_scratch(sig, &self.scratch, w.ptr(), buf) {
                // SAFETY: provided just above on `stream`; never used.
                let _ = unsafe { super::extras::after_launch(w, stream) };
                return Err(e);
            }
            w
        } else {
            super::extras::Workspace::None
        };
        let mut ptrs: [*mut c_void; MAX_PARAMS] = [std::ptr::null_mut(); MAX_PARAMS];
        slot_addresses(sig, buf, &mut ptrs);
        let params = &mut ptrs[..sig.entry_params];
        // SAFETY: `f` belongs to the module loaded in the bound context (the caller's
        // contract); `params` points at one correctly sized and aligned value
        // per kernel parameter (layouts checked against the manifest, which the builder
        // checked against the PTX; scratch images written above); the arrays were validated
        // by prepare and the caller upholds the rest (see # Safety).
        let launched = unsafe {
            cu::launch_kernel_with(
                f.raw,
                grid,
                block,
                self.shared_mem_bytes,
                stream,
                params,
                self.attrs,
            )
        }
        .map_err(|e| Error::new(e.kind(), format!("kernel `{}`: {e}", sig.name)));
        // SAFETY: the workspace was provided on `stream` for this launch; an owned one's free
        // is ordered after the kernel (or after nothing, if the launch failed), a kept one is
        // unlocked now that the launch is enqueued.
        let freed = unsafe { super::extras::after_launch(workspace, stream) };
        launched?;
        freed?;
        driver::result::set_last_kernel(device, sig.static_name);
        crate::mark!("rs: cuLaunchKernel");
        self.plan.after_launch(&mut ops)?;
        crate::mark!("rs: plan after launch");
        Ok(Launched {
            plan: self.plan,
            device,
            config: Some((grid, block)),
        })
    }

    /// The signature, when `packed` was packed for this kernel.
    fn packed_for(&self, packed: &Packed) -> Result<&Signature> {
        let sig = self.kernel.signature();
        if packed.kernel != sig as *const Signature as usize
            || packed.image.len() != sig.buffer_size
        {
            return Err(Error::value(format!(
                "parameters packed for another kernel were launched with kernel `{}`",
                sig.name
            )));
        }
        Ok(sig)
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
    plan: &super::extras::ScratchPlan,
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
            Arg::Array(d) if p.kind == ParamKind::TensorMap => {
                super::tensormap::encode(p, d, slot)?;
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
