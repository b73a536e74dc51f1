//! Bound launches: [`Kernel::bind`] runs the first phase once — every check, the device, the
//! stream plan, the configuration, the packed parameters — and [`BoundLaunch::launch`] runs
//! the second phase as often as the caller likes, on the same arguments.
//!
//! The arguments are borrowed for the bound launch's lifetime, so the arrays they describe
//! (a [`DeviceArray`](crate::DeviceArray), a [`ForeignArray`](crate::array::ForeignArray) and
//! the owner it keeps) outlive it: the memory a bound launch writes cannot be freed under it,
//! and its descriptions cannot change. Nothing is checked again per launch — the checks of
//! [`Kernel::prepare`] stand for the same arguments — and nothing is packed again
//! ([`Prepared::pack`] at bind): a launch costs the stream plan made again (the producers'
//! streams are the bound ones; what can change is the capture state of the streams, one
//! `cuStreamGetCaptureInfo` per stream), the plan's work and `cuLaunchKernel`.
//!
//! Because the plan is made again per launch, a launch bound before a CUDA graph capture began
//! and launched inside it is planned as one made in it: its producers ordered by captured
//! event edges (or the launch refused, naming the argument, when a producer's stream is not in
//! the capture), its scratch workspaces allocated by the graph, never the stream's kept one.
//!
//! Host arrays ([`Arg::Host`]) cannot be bound: staging them is a copy in and out per launch,
//! which is what a bound launch exists to avoid; [`Kernel::launch_host`] stages them per call.
//!
//! A caller whose producers' streams change between launches (the Python layer: torch's and
//! CuPy's *current* streams) executes a [`Prepared`] itself, after
//! [`Prepared::replan`] with the streams as they are now.

use super::{Arg, ArgList, LaunchOptions, Launched, Packed, Prepared};
use crate::driver::CallerContext;
use crate::error::{Error, Result};
use crate::module::Kernel;
use crate::stream::{StreamRef, MAX_PRODUCERS};

/// A launch whose arguments were checked and whose plan and configuration were computed once
/// ([`Kernel::bind`]): [`launch`](Self::launch) executes it again and again.
#[derive(Clone, Debug)]
pub struct BoundLaunch<'m, 'a> {
    prepared: Prepared<'m>,
    args: ArgList<'a>,
    packed: Packed,
    /// The array arguments' streams, in argument order (what the plan is made from).
    producers: [Option<StreamRef>; MAX_PRODUCERS],
    count: usize,
}

impl<'m> Kernel<'m> {
    /// Binds `args` and `opts` to this kernel: checks and prepares the launch once
    /// ([`prepare`](Kernel::prepare): argument checks, pointer checks, device, stream plan,
    /// configuration), without launching. The arguments stay borrowed by the result.
    ///
    /// The calling thread's current context is the same afterwards as before.
    ///
    /// # Errors
    ///
    /// What [`prepare`](Kernel::prepare) reports for the same arguments, and a
    /// [`ErrorKind::Type`](crate::ErrorKind::Type) error naming the first host array
    /// ([`Arg::Host`]): host arrays would be staged on every launch.
    pub fn bind<'a>(&self, args: &[Arg<'a>], opts: &LaunchOptions) -> Result<BoundLaunch<'m, 'a>> {
        let sig = self.signature();
        if let Some(i) = args.iter().position(|a| matches!(a, Arg::Host(_))) {
            let name = sig
                .params
                .get(i)
                .map(|p| p.name.clone())
                .unwrap_or_default();
            return Err(Error::type_error(
                "a host array cannot be bound: it would be copied to the device (and back) on \
                 every launch; copy it to the device once (a DeviceArray) and bind that",
            )
            .with_arg(name));
        }
        let _caller = CallerContext::save();
        let prepared = self.prepare(args, opts)?;
        let packed = prepared.pack(args)?;
        let mut list = ArgList::new();
        let mut producers = [None; MAX_PRODUCERS];
        let mut count = 0;
        for a in args {
            list.push(*a)?;
            if let Arg::Array(d) = a {
                // At most MAX_PRODUCERS arrays: prepare refused more.
                producers[count] = d.stream();
                count += 1;
            }
        }
        Ok(BoundLaunch {
            prepared,
            args: list,
            packed,
            producers,
            count,
        })
    }
}

impl<'m, 'a> BoundLaunch<'m, 'a> {
    /// The prepared launch (device, launch stream, plan, configuration).
    pub fn prepared(&self) -> &Prepared<'m> {
        &self.prepared
    }

    /// The bound arguments.
    pub fn args(&self) -> &[Arg<'a>] {
        &self.args
    }

    /// Launches the kernel on the bound arguments ([`Prepared::execute_replanned`]): the
    /// stream plan made again for the bound producers' streams under their capture state
    /// now, then the plan's work before, `cuLaunchKernel` on the parameters packed at bind,
    /// the plan's work after. No argument is checked or packed again and nothing waits on the host but what the plan asks for (host synchronizations
    /// of foreign producer streams in [`SyncMode::Default`](crate::SyncMode::Default) outside
    /// capture; none in the other modes and none when every array lives on the launch stream).
    ///
    /// The calling thread's current context is the same afterwards as before; any thread may
    /// launch.
    ///
    /// # Errors
    ///
    /// A plan refused under capture (a producer stream outside the launch stream's capture,
    /// naming the argument: [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)); a
    /// failed driver call.
    ///
    /// # Safety
    ///
    /// As [`Kernel::launch`]: the kernel must be memory-safe for arguments that pass the
    /// checks, and the arrays' memory must stay allocated until the kernels complete (the
    /// borrow keeps the array objects alive for the bound launch's lifetime; a `DeviceArray`
    /// dropped afterwards frees stream-ordered behind them).
    pub unsafe fn launch(&self) -> Result<Launched> {
        // SAFETY: the parameters packed from the prepared arguments themselves (borrowed, so
        // unchanged), none of them a host array; `execute_replanned` binds the prepared
        // context and restores the caller's; the rest is the caller's contract, forwarded.
        unsafe {
            self.prepared
                .execute_replanned(&self.producers[..self.count], &self.packed)
        }
    }
}
