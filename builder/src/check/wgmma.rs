//! Warpgroup MMAs (`wgmma.mma_async`, sm_90a) used without the fence, commit or wait their
//! asynchrony needs ([`Rule::Wgmma`](super::rules::Rule::Wgmma)).
//!
//! A `wgmma.mma_async` reads its A fragment and accumulators from registers and writes the
//! accumulators *asynchronously*. The PTX ISA requires:
//!
//! * a `wgmma.fence` before the first `wgmma.mma_async`, and between any other access to those
//!   registers and a later `wgmma.mma_async` (the accumulators of back-to-back MMAs of one
//!   shape excepted);
//! * the MMAs committed to a group (`wgmma.commit_group`) and the group waited for
//!   (`wgmma.wait_group`) before the accumulators are read.
//!
//! Checked here, without false positives:
//!
//! 1. **No fence on some path** (an error): in each function, a forward analysis over the
//!    basic blocks (the same blocks as the barrier rule's) asks whether a `wgmma.fence` has
//!    executed on *every* path from the function's start to each `wgmma.mma_async`. A `.func`
//!    starts as fenced (its caller may have fenced), and so does the code after a call (the
//!    callee may fence): only what the function's own text proves missing is reported.
//! 2. **Never committed, never waited for** (an error): a kernel whose body (and the
//!    functions it calls, transitively) issues `wgmma.mma_async` but no `wgmma.commit_group`,
//!    or commits but never executes `wgmma.wait_group` — judged with the other waits that
//!    nothing in a kernel completes, in [`super::waits`].
//!
//! What the text cannot show soundly — another instruction writing the accumulators between
//! the fence and the MMA, a read before the wait — ptxas sees: it then serializes the MMAs
//! and says so ("wgmma.mma_async instructions are serialized due to …", advisory C7515 and
//! kin), which [`serialized`] turns into a warning of the same rule.

use super::cfg::{blocks, call_target, Block};
use super::parse::{statements, Instr, PtxFunction};
use super::rules::DRIVER_FUNCTIONS;
use std::collections::HashSet;

/// One finding of rule 1, before it becomes a [`Finding`](super::rules::Finding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgmmaProblem {
    /// The function the problem is in.
    pub function: String,
    /// The line of the MMA.
    pub line: usize,
    /// What is wrong and what to do.
    pub message: String,
}

fn is_mma(i: &Instr) -> bool {
    i.opcode.starts_with("wgmma.mma_async")
}

/// A `wgmma.fence`, or a call that may execute one (any call but to the driver's functions).
fn fences(i: &Instr) -> bool {
    i.opcode.starts_with("wgmma.fence")
        || (i.base() == "call" && !call_target(i).is_some_and(|t| DRIVER_FUNCTIONS.contains(&t)))
}

fn clipped(text: &str) -> String {
    text.chars().take(72).collect()
}

/// Rule 1: the `wgmma.mma_async` of `f` that some path reaches with no `wgmma.fence` since the
/// start of the function (or since a call).
fn unfenced_in(f: &PtxFunction, blocks: &[Block]) -> Vec<WgmmaProblem> {
    let n = blocks.len();
    if n == 0 || !blocks.iter().any(|b| b.instrs.iter().any(is_mma)) {
        return Vec::new();
    }
    // fenced_in[b]: a fence on every path into b. A must-analysis: start from "true"
    // everywhere but the function's start and lower to a fixed point.
    let mut fenced_in = vec![true; n];
    fenced_in[0] = !f.is_entry();
    let transfer = |b: &Block, fenced: bool| fenced || b.instrs.iter().any(fences);
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (k, b) in blocks.iter().enumerate() {
        for &s in &b.succs {
            preds[s].push(k);
        }
    }
    loop {
        let mut changed = false;
        for k in 1..n {
            let v = preds[k].iter().all(|&p| transfer(&blocks[p], fenced_in[p]));
            if v != fenced_in[k] {
                fenced_in[k] = v;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut out = Vec::new();
    for (k, b) in blocks.iter().enumerate() {
        let mut fenced = fenced_in[k];
        for i in &b.instrs {
            if fences(i) {
                fenced = true;
            } else if is_mma(i) && !fenced {
                out.push(WgmmaProblem {
                    function: f.name.clone(),
                    line: i.line,
                    message: format!(
                        "`{}` (line {}) is reached on some path with no `wgmma.fence` before \
                         it: the fence orders the registers' earlier reads and writes before \
                         the MMA reads its accumulators and A fragment. Call `wgmma::fence()` \
                         (ferrocuda_device::wgmma) before the first MMA and after touching \
                         the accumulators",
                        clipped(&i.text),
                        i.line
                    ),
                });
                // One report per path is enough: the MMAs after it on this block follow it.
                fenced = true;
            }
        }
    }
    out
}

/// Rule 1 over a module's functions (rule 2 is [`super::waits`]'s).
pub fn unfenced(funcs: &[PtxFunction], aborting: &HashSet<String>) -> Vec<WgmmaProblem> {
    funcs
        .iter()
        .filter_map(|f| Some((f, statements(f.body.as_deref()?, f.body_line))))
        .flat_map(|(f, st)| unfenced_in(f, &blocks(&st, aborting)))
        .collect()
}

/// ptxas's advisories that it serialized a function's `wgmma.mma_async` instructions, as
/// (function, ptxas's words): a missing fence, registers the MMAs use written in between,
/// or too few registers for the pipeline. The code stays correct; the MMAs no longer overlap.
pub fn serialized(ptxas_output: &str) -> Vec<(String, String)> {
    ptxas_output
        .lines()
        .filter(|l| l.contains("wgmma.mma_async instructions are serialized"))
        .map(|l| {
            let function = l
                .rfind("function '")
                .and_then(|at| {
                    let rest = &l[at + "function '".len()..];
                    Some(rest[..rest.find('\'')?].to_string())
                })
                .unwrap_or_default();
            let said = l
                .find("Potential Performance Loss")
                .map_or(l.trim(), |at| l[at..].trim());
            (function, said.to_string())
        })
        .collect()
}
