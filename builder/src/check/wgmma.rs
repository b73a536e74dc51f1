//! Warpgroup MMAs (`wgmma.mma_async`, sm_90a) used without the fence, commit or wait their
//! asynchrony needs ([`Rule::Wgmma`](super::Rule::Wgmma)).
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
//!    or no `wgmma.wait_group`. A kernel that makes an indirect call, or calls a function
//!    without a body, is not judged.
//!
//! What the text cannot show soundly — another instruction writing the accumulators between
//! the fence and the MMA, a read before the wait — ptxas sees: it then serializes the MMAs
//! and says so ("wgmma.mma_async instructions are serialized due to …", advisory C7515 and
//! kin), which [`serialized`] turns into a warning of the same rule.

use super::barrier::{blocks, call_target, Block};
use super::parse::{statements, Instr, PtxFunction, Statement};
use super::DRIVER_FUNCTIONS;
use std::collections::{HashMap, HashSet};

/// One finding of the rule, before it becomes a [`Finding`](super::Finding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgmmaProblem {
    /// The function the problem is in (for a missing commit or wait: the kernel).
    pub function: String,
    /// The line of the MMA concerned.
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
fn unfenced(f: &PtxFunction, blocks: &[Block]) -> Vec<WgmmaProblem> {
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

/// What a function does with wgmma, directly or through the functions it calls.
#[derive(Clone, Debug, Default)]
struct Facts {
    /// The first `wgmma.mma_async`: (line, text).
    mma: Option<(usize, String)>,
    commit: bool,
    wait: bool,
    /// An indirect call or a call to a function without a body.
    unknown: bool,
}

/// Rules 1 and 2 over a module's functions.
pub fn problems(funcs: &[PtxFunction], aborting: &HashSet<String>) -> Vec<WgmmaProblem> {
    let bodies: HashMap<&str, Vec<Statement>> = funcs
        .iter()
        .filter_map(|f| Some((f.name.as_str(), statements(f.body.as_deref()?, f.body_line))))
        .collect();
    let mut out = Vec::new();
    let mut facts: HashMap<&str, Facts> = HashMap::new();
    let mut calls: HashMap<&str, Vec<&str>> = HashMap::new();
    for f in funcs {
        let Some(st) = bodies.get(f.name.as_str()) else {
            continue;
        };
        let bl = blocks(st, aborting);
        out.extend(unfenced(f, &bl));
        let mut fx = Facts::default();
        let mut targets = Vec::new();
        for i in bl.iter().flat_map(|b| &b.instrs) {
            if is_mma(i) && fx.mma.is_none() {
                fx.mma = Some((i.line, clipped(&i.text)));
            }
            fx.commit |= i.opcode.starts_with("wgmma.commit_group");
            fx.wait |= i.opcode.starts_with("wgmma.wait_group");
            if i.base() == "call" {
                match call_target(i).map(|t| (t, bodies.get_key_value(t))) {
                    Some((_, Some((&name, _)))) => targets.push(name),
                    Some((t, None)) if DRIVER_FUNCTIONS.contains(&t) => {}
                    _ => fx.unknown = true,
                }
            }
        }
        facts.insert(f.name.as_str(), fx);
        calls.insert(f.name.as_str(), targets);
    }
    for f in funcs.iter().filter(|f| f.is_entry() && f.body.is_some()) {
        // The kernel's facts with its callees', transitively.
        let mut all = Facts::default();
        let mut seen = HashSet::new();
        let mut stack = vec![f.name.as_str()];
        while let Some(g) = stack.pop() {
            if !seen.insert(g) {
                continue;
            }
            let fx = &facts[g];
            if all.mma.is_none() {
                all.mma.clone_from(&fx.mma);
            }
            all.commit |= fx.commit;
            all.wait |= fx.wait;
            all.unknown |= fx.unknown;
            stack.extend(calls[g].iter().copied());
        }
        let Some((line, mma)) = all.mma else { continue };
        if all.unknown {
            continue;
        }
        let missing = match (all.commit, all.wait) {
            (false, _) => Some((
                "wgmma.commit_group",
                "its MMAs belong to no group, so no `wgmma.wait_group` waits for them and the \
                 accumulators are read while the tensor cores may still write them. Call \
                 `wgmma::commit_group()` after the MMAs",
            )),
            (true, false) => Some((
                "wgmma.wait_group",
                "nothing waits for the committed MMAs, so the accumulators are read (or the \
                 kernel ends) while the tensor cores may still write them. Call \
                 `wgmma::wait_group::<0>()` before reading them",
            )),
            _ => None,
        };
        if let Some((what, why)) = missing {
            out.push(WgmmaProblem {
                function: f.name.clone(),
                line,
                message: format!(
                    "`{mma}` (line {line}): this kernel never executes a `{what}`: {why}"
                ),
            });
        }
    }
    out
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
