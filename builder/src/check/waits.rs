//! Waits that nothing in the kernel can complete: an mbarrier wait in a kernel that never
//! arrives on an mbarrier, and a `cp.async` group wait in a kernel that never commits a group.
//!
//! * **mbarrier** ([`Rule::MBarrier`]): `mbarrier.test_wait` /
//!   `mbarrier.try_wait` (any form) waits for a phase to complete, and a phase completes only
//!   after its expected arrivals (at least one: the count is 1 or more). An mbarrier lives in
//!   the shared memory of one block (or of the blocks of one cluster, which run the same
//!   kernel), so its arrivals come from the same kernel: `mbarrier.arrive*` (`arrive_drop`,
//!   `arrive.expect_tx`, `.noComplete` included), `cp.async.mbarrier.arrive*`, or a
//!   `tcgen05.commit … .mbarrier::arrive::one`. A kernel that waits and contains none of them
//!   waits forever — a hang on the GPU, typically a forgotten `arrive` or an arrive left in a
//!   function that is not called.
//! * **cp.async** ([`Rule::CpAsync`]): `cp.async.wait_group N` waits for
//!   the thread's *committed* groups; copies not committed with `cp.async.commit_group` are
//!   not waited for, so a kernel that waits for groups and never commits one reads its shared
//!   memory while the copies may still be landing. The same holds for the bulk (TMA) groups,
//!   `cp.async.bulk.wait_group[.read]` and `cp.async.bulk.commit_group`. `cp.async.wait_all`
//!   is not reported: it commits the outstanding copies itself.
//!
//! * **wgmma** ([`Rule::Wgmma`]): a `wgmma.mma_async` in a kernel that
//!   never executes `wgmma.commit_group` belongs to no group, so no `wgmma.wait_group` waits
//!   for it; a `wgmma.commit_group` in a kernel that never executes `wgmma.wait_group` is not
//!   waited for. Either way the accumulators are read (or the kernel ends) while the tensor
//!   cores may still write them. (Here the "wait" is what needs the other instruction.)
//!
//! **Sound by construction** (no false positives): the facts are per kernel, over its body
//! and every function it calls directly, transitively; a kernel that makes an indirect call, or
//! calls a function whose body the module lacks (other than the driver's `vprintf`), is not
//! judged. The order of the instructions is not used: a loop's blocks need not appear in the
//! PTX in execution order, so "a commit before the wait" cannot be read off the text soundly;
//! the rule finds the kernels with no commit (or no arrive) at all.

use super::cfg::call_target;
use super::parse::{statements, Instr, PtxFunction, Statement};
use super::rules::{Rule, DRIVER_FUNCTIONS};
use std::collections::HashMap;

/// A wait that nothing in its kernel can complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnmatchedWait {
    /// [`Rule::MBarrier`]: an mbarrier wait with no arrive; [`Rule::CpAsync`]: a group wait
    /// with no commit; [`Rule::Wgmma`]: an MMA never committed, or a group never waited for.
    pub rule: Rule,
    /// The wait's line (in the kernel, or in the called function that contains it).
    pub line: usize,
    /// The wait instruction.
    pub wait: String,
    /// The function that contains the wait, when it is not the kernel itself.
    pub callee: Option<String>,
    /// What the kernel lacks (`mbarrier.arrive`, `cp.async.commit_group`, …).
    pub missing: &'static str,
}

/// The kinds of wait and of what completes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    MBarrier,
    CpAsync,
    Bulk,
    /// `wgmma.mma_async`, completed by a `wgmma.commit_group`.
    WgmmaCommit,
    /// `wgmma.commit_group`, completed by a `wgmma.wait_group`.
    WgmmaWait,
}

const KINDS: [Kind; 5] = [
    Kind::MBarrier,
    Kind::CpAsync,
    Kind::Bulk,
    Kind::WgmmaCommit,
    Kind::WgmmaWait,
];

impl Kind {
    fn is_wait(self, op: &str) -> bool {
        match self {
            Kind::MBarrier => {
                op.starts_with("mbarrier.test_wait") || op.starts_with("mbarrier.try_wait")
            }
            Kind::CpAsync => op == "cp.async.wait_group",
            Kind::Bulk => op == "cp.async.bulk.wait_group" || op == "cp.async.bulk.wait_group.read",
            Kind::WgmmaCommit => op.starts_with("wgmma.mma_async"),
            Kind::WgmmaWait => op.starts_with("wgmma.commit_group"),
        }
    }

    fn completes(self, op: &str) -> bool {
        match self {
            Kind::MBarrier => {
                op.starts_with("mbarrier.arrive")
                    || op.starts_with("cp.async.mbarrier.arrive")
                    || (op.starts_with("tcgen05.commit") && op.contains(".mbarrier::arrive"))
            }
            Kind::CpAsync => op == "cp.async.commit_group",
            Kind::Bulk => op == "cp.async.bulk.commit_group",
            Kind::WgmmaCommit => op.starts_with("wgmma.commit_group"),
            Kind::WgmmaWait => op.starts_with("wgmma.wait_group"),
        }
    }

    fn missing(self) -> &'static str {
        match self {
            Kind::MBarrier => {
                "an arrive on an mbarrier (mbarrier.arrive*, cp.async.mbarrier.arrive*)"
            }
            Kind::CpAsync => "a cp.async.commit_group",
            Kind::Bulk => "a cp.async.bulk.commit_group",
            Kind::WgmmaCommit => "wgmma.commit_group",
            Kind::WgmmaWait => "wgmma.wait_group",
        }
    }

    fn rule(self) -> Rule {
        match self {
            Kind::MBarrier => Rule::MBarrier,
            Kind::CpAsync | Kind::Bulk => Rule::CpAsync,
            Kind::WgmmaCommit | Kind::WgmmaWait => Rule::Wgmma,
        }
    }
}

/// What a function does, directly or through the functions it calls.
#[derive(Clone, Debug, Default)]
struct Facts {
    /// Per kind: whether something completes its waits.
    completes: [bool; KINDS.len()],
    /// Per kind: the first wait — (line, text, the function it is in).
    waits: [Option<(usize, String, String)>; KINDS.len()],
    /// An indirect call, or a call to a function without a body: anything may happen there.
    unknown: bool,
}

/// The waits that nothing in their kernel can complete, per kernel (entry name).
pub fn unmatched_waits(funcs: &[PtxFunction]) -> Vec<(String, UnmatchedWait)> {
    let bodies: HashMap<&str, Vec<Instr>> = funcs
        .iter()
        .filter_map(|f| {
            let st = statements(f.body.as_deref()?, f.body_line);
            let instrs = st
                .into_iter()
                .filter_map(|s| match s {
                    Statement::Instr(i) if !i.opcode.starts_with('.') => Some(i),
                    _ => None,
                })
                .collect();
            Some((f.name.as_str(), instrs))
        })
        .collect();
    // Direct facts and call targets.
    let mut facts: HashMap<&str, Facts> = HashMap::new();
    let mut calls: HashMap<&str, Vec<&str>> = HashMap::new();
    for (&name, body) in &bodies {
        let mut f = Facts::default();
        let mut targets = Vec::new();
        for i in body {
            for (k, kind) in KINDS.iter().enumerate() {
                if kind.completes(&i.opcode) {
                    f.completes[k] = true;
                }
                if kind.is_wait(&i.opcode) && f.waits[k].is_none() {
                    f.waits[k] = Some((i.line, i.text.clone(), name.to_string()));
                }
            }
            if i.base() == "call" {
                match call_target(i) {
                    Some(t) if bodies.contains_key(t) => targets.push(t),
                    Some(t) if DRIVER_FUNCTIONS.contains(&t) => {}
                    _ => f.unknown = true,
                }
            }
        }
        facts.insert(name, f);
        calls.insert(name, targets);
    }
    // Through calls, to a fixed point.
    loop {
        let mut changed = false;
        for (&name, targets) in &calls {
            let mut f = facts[name].clone();
            for t in targets {
                let g = &facts[t];
                for k in 0..KINDS.len() {
                    if g.completes[k] && !f.completes[k] {
                        f.completes[k] = true;
                        changed = true;
                    }
                    if f.waits[k].is_none() && g.waits[k].is_some() {
                        f.waits[k] = g.waits[k].clone();
                        changed = true;
                    }
                }
                if g.unknown && !f.unknown {
                    f.unknown = true;
                    changed = true;
                }
            }
            facts.insert(name, f);
        }
        if !changed {
            break;
        }
    }
    let mut out = Vec::new();
    for e in funcs.iter().filter(|f| f.is_entry() && f.body.is_some()) {
        let f = &facts[e.name.as_str()];
        if f.unknown {
            continue;
        }
        for (k, kind) in KINDS.iter().enumerate() {
            if let (Some((line, wait, within)), false) = (&f.waits[k], f.completes[k]) {
                out.push((
                    e.name.clone(),
                    UnmatchedWait {
                        rule: kind.rule(),
                        line: *line,
                        wait: wait.clone(),
                        callee: (within != &e.name).then(|| within.clone()),
                        missing: kind.missing(),
                    },
                ));
            }
        }
    }
    out
}
