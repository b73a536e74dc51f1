//! Phase 2 of a launch: [`Prepared::execute`] packs the parameters, runs the stream plan
//! around `cuLaunchKernel`, and reports what it did.

use std::ffi::c_void;

use super::{Arg, Launched, Prepared};
use crate::driver::{self, raw_stream, result as cu, DriverOps};
use crate::error::{Error, Result};
use crate::module::{Signature, MAX_PARAMS, PARAM_BUFFER_SIZE};
use ferrocuda_abi::{ArrayArg, MAX_NDIM};

/// The launch parameter buffer, aligned for every parameter type.
#[repr(C, align(16))]
struct ParamBuffer([u8; PARAM_BUFFER_SIZE]);

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
        let mut buf = ParamBuffer([0u8; PARAM_BUFFER_SIZE]);
        let mut ptrs: [*mut c_void; MAX_PARAMS] = [std::ptr::null_mut(); MAX_PARAMS];
        pack(sig, args, &mut buf, &mut ptrs)?;
        crate::mark!(10);
        let mut ops = DriverOps { ctx: self.ctx };
        self.plan.before_launch(&mut ops)?;
        crate::mark!(11);
        let stream = raw_stream(self.plan.launch_stream());
        let params = &mut ptrs[..args.len()];
        // SAFETY: `f` belongs to the module loaded in the bound context (the caller's
        // contract); `params` points at one correctly sized and aligned value
        // per kernel parameter (layouts checked against the manifest, which the builder
        // checked against the PTX); the arrays were validated by prepare and the caller
        // upholds the rest (see # Safety).
        unsafe { cu::launch_kernel(f.raw, grid, block, self.shared_mem_bytes, stream, params) }
            .map_err(|e| Error::new(e.kind(), format!("kernel `{}`: {e}", sig.name)))?;
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

/// Writes each argument's launch-buffer image at its parameter's offset, and its address to
/// `ptrs`.
fn pack(
    sig: &Signature,
    args: &[Arg<'_>],
    buf: &mut ParamBuffer,
    ptrs: &mut [*mut c_void; MAX_PARAMS],
) -> Result<()> {
    for (p, a) in sig.params.iter().zip(args) {
        let slot = &mut buf.0[p.offset..p.offset + p.size];
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
    // The addresses, taken once every image is written (no later borrow of the buffer).
    let base = buf.0.as_mut_ptr();
    for (slot, p) in ptrs.iter_mut().zip(&sig.params) {
        // SAFETY: offset + size <= buffer_size <= PARAM_BUFFER_SIZE (a `Signature` invariant).
        *slot = unsafe { base.add(p.offset) }.cast();
    }
    Ok(())
}
