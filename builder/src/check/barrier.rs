//! Block barriers reached under a thread-dependent branch.
//!
//! A CTA barrier (`bar.sync`, `barrier.sync`, `bar.arrive`, `bar.red`, `barrier.cta.*`, or a
//! call to a function that executes one) must be reached by every thread of the block, or by
//! none. rustc 1.95's MIR jump threading copied `sync_threads()` into both arms of
//! `if t < n { … }` (rust-lang/rust#137086), so each thread waited at a *different* barrier
//! instruction. This analysis finds every barrier that only some threads may reach:
//!
//! 1. **Divergence**: a register is *thread-dependent* when it derives from `%tid`, `%laneid`,
//!    `%warpid`, `%lanemask_*`, `%clock*`, or from a warp-level operation (`shfl`, `vote`,
//!    `match`, `activemask`); *data-dependent* when it derives from a loaded value (`ld` other
//!    than of the entry's own parameters, from `.const` or read-only `ld.global.nc`, atomics),
//!    a call's result, or a `.func`'s parameters. Values derived from `%ctaid`, `%ntid`,
//!    `%nctaid` and the entry's parameters are uniform, and so is a value every thread of the
//!    block reads from one shared-memory location after a barrier (the dynamic-tile pattern:
//!    thread 0 takes a tile with an atomic and stores it, a barrier, every thread reads it):
//!    a `ld.shared` whose every execution has one block-wide barrier (`bar.sync 0`, no thread
//!    count) as the last before it — in its basic block or a chain of single-predecessor
//!    blocks — with no path from that barrier to the next one that may write the location (a
//!    store, atomic, asynchronous copy or call; to shared or generic memory, a different
//!    shared symbol's own address excepted). Its address must be uniform too: a read from a
//!    thread-dependent address stays thread-dependent. Propagation goes through every operand and the guard predicate;
//!    a register assigned on the two sides of a divergent branch (a φ in the PTX) is divergent
//!    too.
//! 2. **Control flow**: the basic blocks of the function, with post-dominators computed toward
//!    the `ret`/`exit` blocks (paths into a `trap` are aborts: they never reach a barrier
//!    again, so they are left out; so is the `exit` LLVM puts after a call that never
//!    returns, which a `trap` follows). The *influence region* of a conditional branch is what
//!    can be reached from it before its immediate post-dominator — where threads reconverge.
//! 3. A barrier inside the influence region of a divergent branch (not `bra.uni`), or guarded
//!    by a divergent predicate, is reported; two barriers of the same text on the two sides of
//!    one branch are reported as the duplication shape.

use super::cfg::{blocks, call_target, ipdoms, reach_from, reaches_exit, region, Block};
use super::parse::{registers, statements, Instr, PtxFunction, Statement};
use std::collections::{BTreeMap, HashMap, HashSet};

/// How a value may differ between the threads of a block (ordered: worst last).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Taint {
    /// Equal in every thread of the block.
    Uniform,
    /// May differ: derived from memory, a call or a function parameter.
    Data,
    /// Differs by thread: derived from the thread's index (or lane, clock, warp operation).
    Thread,
}

/// A barrier that not every thread of a block may reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DivergentBarrier {
    /// The barrier's line and text.
    pub line: usize,
    /// The barrier instruction (or call).
    pub barrier: String,
    /// The branch (or guard) that makes it conditional: line and text.
    pub branch_line: usize,
    /// The branch instruction.
    pub branch: String,
    /// How the branch's predicate depends on the thread.
    pub taint: Taint,
    /// Where that dependence comes from, e.g. `%p1 derives from %tid.x`.
    pub reason: String,
    /// The same barrier appears on both sides of the branch (rust-lang/rust#137086's shape).
    pub duplicated: bool,
}

/// Special registers whose value differs between the threads of a block.
const THREAD_REGISTERS: [&str; 7] = [
    "%tid",
    "%laneid",
    "%warpid",
    "%lanemask_",
    "%clock",
    "%globaltimer",
    "%pm",
];
/// Opcodes (first component) whose result differs between threads whatever their operands.
const THREAD_OPS: [&str; 5] = ["shfl", "vote", "match", "activemask", "elect"];
/// Opcodes whose result is data-dependent whatever their operands.
const DATA_OPS: [&str; 6] = ["atom", "tex", "tld4", "suld", "ldu", "mbarrier"];
/// Opcodes without a destination register.
const NO_DEST: [&str; 16] = [
    "st",
    "red",
    "bar",
    "barrier",
    "bra",
    "brx",
    "call",
    "ret",
    "exit",
    "trap",
    "membar",
    "fence",
    "prefetch",
    "prefetchu",
    "cp",
    "nanosleep",
];

/// Whether `i` is a CTA-wide barrier (warp-level `bar.warp.sync` is not).
pub fn is_barrier(i: &Instr) -> bool {
    matches!(i.base(), "bar" | "barrier") && !i.opcode.starts_with("bar.warp")
}

/// Names of the functions that execute a barrier (directly or through a call).
pub fn functions_with_barriers(funcs: &[PtxFunction]) -> HashSet<String> {
    let bodies: Vec<(&str, Vec<Instr>)> = funcs
        .iter()
        .filter_map(|f| {
            Some((
                f.name.as_str(),
                instrs(&statements(f.body.as_deref()?, f.body_line)),
            ))
        })
        .collect();
    let mut with: HashSet<String> = HashSet::new();
    loop {
        let before = with.len();
        for (name, body) in &bodies {
            if body
                .iter()
                .any(|i| is_barrier(i) || call_target(i).is_some_and(|t| with.contains(t)))
            {
                with.insert(name.to_string());
            }
        }
        if with.len() == before {
            return with;
        }
    }
}

fn instrs(st: &[Statement]) -> Vec<Instr> {
    st.iter()
        .filter_map(|s| match s {
            Statement::Instr(i) if !i.opcode.starts_with('.') => Some(i.clone()),
            _ => None,
        })
        .collect()
}

/// Names of the functions that never return: every path through them ends in `trap`
/// (directly or through a call to another such function) — e.g. the out-of-line function a
/// bounds check calls, after which LLVM emits an `exit` that is never executed.
pub fn functions_that_abort(funcs: &[PtxFunction]) -> HashSet<String> {
    let bodies: Vec<(&str, Vec<Statement>)> = funcs
        .iter()
        .filter_map(|f| Some((f.name.as_str(), statements(f.body.as_deref()?, f.body_line))))
        .collect();
    let mut aborting: HashSet<String> = HashSet::new();
    loop {
        let before = aborting.len();
        for (name, body) in &bodies {
            let blocks = blocks(body, &aborting);
            if !aborting.contains(*name) && !reaches_exit(&blocks) {
                aborting.insert(name.to_string());
            }
        }
        if aborting.len() == before {
            return aborting;
        }
    }
}

/// Register taints with the reason of each.
type Taints = HashMap<String, (Taint, String)>;

/// What makes `reg` (a source operand) vary between threads, if anything.
fn source_taint(reg: &str, taints: &Taints) -> Option<(Taint, String)> {
    if THREAD_REGISTERS.iter().any(|p| reg.starts_with(p)) {
        return Some((Taint::Thread, reg.to_string()));
    }
    let (t, why) = taints.get(reg)?;
    Some((*t, why.clone()))
}

/// The taint an instruction gives its destinations by itself (loads, atomics, warp ops).
fn inherent_taint(
    i: &Instr,
    uniform_params: &HashSet<&str>,
    uniform_loads: &HashSet<usize>,
) -> Option<(Taint, String)> {
    let base = i.base();
    if uniform_loads.contains(&i.line) {
        return None;
    }
    if THREAD_OPS.contains(&base) {
        return Some((Taint::Thread, format!("`{}` (line {})", i.opcode, i.line)));
    }
    let load = base == "ld" || DATA_OPS.contains(&base);
    if !load {
        return None;
    }
    let space = i.opcode.split('.').nth(1).unwrap_or("");
    let addr = i
        .operands
        .get(1)
        .map(|a| a.trim_matches(['[', ']']))
        .unwrap_or("");
    let own_param =
        space == "param" && uniform_params.contains(addr.split('+').next().unwrap_or(""));
    // `ld.global.nc`: memory the kernel never writes while it runs.
    let read_only = space == "global" && i.opcode.split('.').any(|m| m == "nc");
    if base == "ld" && (own_param || space == "const" || read_only) {
        return None;
    }
    let what = if base == "ld" {
        "a loaded value"
    } else {
        "a memory operation's result"
    };
    Some((Taint::Data, format!("{what} (line {})", i.line)))
}

/// Propagates taints through `instrs` until nothing changes.
fn propagate(
    instrs: &[&Instr],
    taints: &mut Taints,
    uniform_params: &HashSet<&str>,
    uniform_loads: &HashSet<usize>,
) {
    let mut changed = true;
    while changed {
        changed = false;
        for i in instrs {
            if NO_DEST.contains(&i.base()) || i.operands.is_empty() {
                continue;
            }
            let mut worst = inherent_taint(i, uniform_params, uniform_loads);
            let sources = i.operands[1..].iter().flat_map(|o| registers(o));
            for r in sources.chain(i.guard.as_deref()) {
                if let Some(t) = source_taint(r, taints) {
                    if worst.as_ref().is_none_or(|w| t.0 > w.0) {
                        worst = Some(t);
                    }
                }
            }
            let Some((t, why)) = worst else { continue };
            for d in registers(&i.operands[0]) {
                if taints.get(d).is_none_or(|(old, _)| t > *old) {
                    taints.insert(d.to_string(), (t, why.clone()));
                    changed = true;
                }
            }
        }
    }
}

/// The divergent conditional branch (or guarded `ret`/`exit`) ending `b`: its taint, the
/// reason, and the instruction.
fn divergent_branch<'b>(b: &'b Block, taints: &Taints) -> Option<(Taint, String, &'b Instr)> {
    let last = b.instrs.last()?;
    // A jump table (`brx.idx %r, table`) diverges when its index does.
    if last.base() == "brx" && !last.opcode.ends_with(".uni") {
        let index = last.operands.first()?;
        let (t, why) = source_taint(index, taints)?;
        return Some((
            t,
            format!("the jump table's index {index} derives from {why}"),
            last,
        ));
    }
    let conditional =
        matches!(last.base(), "bra" | "ret" | "exit") && !last.opcode.ends_with(".uni");
    let guard = last.guard.as_deref().filter(|_| conditional)?;
    let (t, why) = source_taint(guard, taints)?;
    Some((t, format!("{guard} derives from {why}"), last))
}

/// Registers assigned more than once in the function (the PTX form of a φ).
fn multiply_defined<'a>(instrs: &[&'a Instr]) -> HashSet<&'a str> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for i in instrs.iter().filter(|i| !NO_DEST.contains(&i.base())) {
        for d in i.operands.first().map(|o| registers(o)).unwrap_or_default() {
            *count.entry(d).or_default() += 1;
        }
    }
    count
        .into_iter()
        .filter(|&(_, c)| c > 1)
        .map(|(r, _)| r)
        .collect()
}

/// Taints of every register of the function, φs of divergent branches included.
fn taints(
    f: &PtxFunction,
    blocks: &[Block],
    ipdom: &[Option<usize>],
    aborting: &HashSet<String>,
) -> Taints {
    // An entry's parameters are the same in every thread; a `.func`'s are not known.
    let names = f.param_names();
    let uniform_params: HashSet<&str> = names.iter().copied().filter(|_| f.is_entry()).collect();
    let all: Vec<&Instr> = blocks.iter().flat_map(|b| &b.instrs).collect();
    let phis = multiply_defined(&all);
    let uniform_loads = uniform_shared_loads(blocks, aborting);
    let mut taints = Taints::new();
    loop {
        propagate(&all, &mut taints, &uniform_params, &uniform_loads);
        let mut changed = false;
        for (k, b) in blocks.iter().enumerate() {
            let Some((t, _, br)) = divergent_branch(b, &taints) else {
                continue;
            };
            let inside = region(blocks, k, ipdom[k]);
            let defs = (0..blocks.len())
                .filter(|&r| inside[r])
                .flat_map(|r| &blocks[r].instrs)
                .filter(|i| !NO_DEST.contains(&i.base()))
                .filter_map(|i| i.operands.first())
                .flat_map(|o| registers(o));
            for d in defs.filter(|d| phis.contains(d)).collect::<Vec<_>>() {
                if taints.get(d).is_none_or(|(old, _)| t > *old) {
                    let why = format!(
                        "a value set differently after the branch at line {}",
                        br.line
                    );
                    taints.insert(d.to_string(), (t, why));
                    changed = true;
                }
            }
        }
        if !changed {
            return taints;
        }
    }
}

/// The barriers of `f` that not every thread of a block may reach; `barrier_funcs` are the
/// functions that execute a barrier (see [`functions_with_barriers`]), `aborting` those that
/// never return (see [`functions_that_abort`]).
pub fn divergent_barriers(
    f: &PtxFunction,
    barrier_funcs: &HashSet<String>,
    aborting: &HashSet<String>,
) -> Vec<DivergentBarrier> {
    let Some(body) = f.body.as_deref() else {
        return Vec::new();
    };
    let blocks = blocks(&statements(body, f.body_line), aborting);
    let ipdom = ipdoms(&blocks);
    let taints = taints(f, &blocks, &ipdom, aborting);
    let is_sync =
        |i: &Instr| is_barrier(i) || call_target(i).is_some_and(|t| barrier_funcs.contains(t));
    let mut found: BTreeMap<usize, DivergentBarrier> = BTreeMap::new();
    let mut report = |b: &Instr, br: &Instr, t: Taint, reason: &str, duplicated: bool| {
        let keep = found
            .get(&b.line)
            .is_none_or(|old| t > old.taint || (duplicated && !old.duplicated));
        if keep {
            found.insert(
                b.line,
                DivergentBarrier {
                    line: b.line,
                    barrier: b.text.clone(),
                    branch_line: br.line,
                    branch: br.text.clone(),
                    taint: t,
                    reason: reason.to_string(),
                    duplicated,
                },
            );
        }
    };
    for (k, b) in blocks.iter().enumerate() {
        for i in b.instrs.iter().filter(|i| is_sync(i)) {
            if let Some((t, why)) = i.guard.as_deref().and_then(|g| source_taint(g, &taints)) {
                report(
                    i,
                    i,
                    t,
                    &format!("{} derives from {why}", i.guard.as_deref().unwrap_or("")),
                    false,
                );
            }
        }
        let Some((t, reason, br)) = divergent_branch(b, &taints) else {
            continue;
        };
        // The barriers reachable from each side of the branch before the threads reconverge.
        let sides: Vec<Vec<&Instr>> = b
            .succs
            .iter()
            .map(|&s| {
                let seen = reach_from(&blocks, s, ipdom[k]);
                (0..blocks.len())
                    .filter(|&r| seen[r])
                    .flat_map(|r| blocks[r].instrs.iter().filter(|i| is_sync(i)))
                    .collect()
            })
            .collect();
        for (n, side) in sides.iter().enumerate() {
            for bar in side {
                let twin = sides.iter().enumerate().any(|(m, other)| {
                    m != n
                        && other
                            .iter()
                            .any(|o| o.text == bar.text && o.line != bar.line)
                });
                report(bar, br, t, &reason, twin);
            }
        }
    }
    found.into_values().collect()
}

/// Whether `i` is a barrier of every thread of the block that waits (`bar.sync 0`,
/// `barrier.sync.aligned 1`, `barrier.cta.sync 0`: no thread count, so all of the block's
/// threads take part), after which the block's shared-memory writes before it are visible.
fn is_block_wide_sync(i: &Instr) -> bool {
    let sync = matches!(
        i.opcode.as_str(),
        "bar.sync" | "barrier.sync" | "barrier.sync.aligned" | "barrier.cta.sync"
    ) || i.opcode == "barrier.cta.sync.aligned";
    sync && i.guard.is_none() && i.operands.len() == 1
}

/// The `[symbol]` or `[symbol+offset]` an address operand names, if it names no register.
fn address_symbol(operand: &str) -> Option<&str> {
    let inner = operand.trim().strip_prefix('[')?.strip_suffix(']')?;
    let sym = inner.split('+').next()?.trim();
    (!sym.is_empty() && !sym.starts_with('%') && !sym.starts_with(|c: char| c.is_ascii_digit()))
        .then_some(sym)
}

/// What shared memory an instruction may write.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Write {
    /// Possibly any location (a generic or register address, a copy, a call).
    Anything,
    /// Only at the named shared symbol's own address (`st.shared [SYM+4]`).
    Symbol(String),
}

/// What shared memory `i` may write: a store, atomic, reduction, asynchronous copy, mbarrier
/// operation or matrix store to shared or generic memory, or a call (other than to a function
/// that never returns); `None` when it writes none.
fn shared_write(i: &Instr, aborting: &HashSet<String>) -> Option<Write> {
    if i.base() == "call" {
        return (!call_target(i).is_some_and(|t| aborting.contains(t))).then_some(Write::Anything);
    }
    let writes = matches!(
        i.base(),
        "st" | "atom" | "red" | "cp" | "mbarrier" | "stmatrix" | "wmma" | "tensormap"
    );
    if !writes || (i.base() == "wmma" && !i.opcode.starts_with("wmma.store")) {
        return None;
    }
    let elsewhere = i
        .opcode
        .split('.')
        .any(|m| matches!(m, "global" | "local" | "param" | "const"));
    if elsewhere && i.base() != "cp" {
        return None;
    }
    let shared = i
        .opcode
        .split('.')
        .any(|m| m == "shared" || m == "shared::cta");
    match i.operands.first().and_then(|o| address_symbol(o)) {
        Some(w) if shared && i.base() != "cp" => Some(Write::Symbol(w.to_string())),
        _ => Some(Write::Anything),
    }
}

/// Whether `i` may write the shared memory that `read` (a `ld.shared` of `[symbol…]` or of a
/// register address) reads (a different symbol's own address excepted).
fn may_write(i: &Instr, read: &Instr, aborting: &HashSet<String>) -> bool {
    let read_sym = read.operands.get(1).and_then(|o| address_symbol(o));
    match shared_write(i, aborting) {
        None => false,
        Some(Write::Anything) => true,
        Some(Write::Symbol(w)) => read_sym.is_none_or(|r| r == w),
    }
}

/// The lines of the shared-memory loads whose value is the same in every thread of the block:
/// `ld.shared` (of the block's own shared memory) that every thread executing it reaches from
/// one block-wide barrier — the same basic block or a chain of single-predecessor blocks, no
/// possible write in between — such that no path from that barrier to the next one writes
/// the location (the dynamic-tile pattern: thread 0 stores, barrier, every thread reads).
/// Whether the address is the same in every thread is the taint propagation's part: a load
/// from a thread-dependent address stays thread-dependent.
fn uniform_shared_loads(blocks: &[Block], aborting: &HashSet<String>) -> HashSet<usize> {
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); blocks.len()];
    for (k, b) in blocks.iter().enumerate() {
        for &s in &b.succs {
            preds[s].push(k);
        }
    }
    let mut out = HashSet::new();
    // The writes of each barrier's interval, computed once.
    let mut intervals: HashMap<(usize, usize), Option<HashSet<String>>> = HashMap::new();
    for (k, b) in blocks.iter().enumerate() {
        for (n, load) in b.instrs.iter().enumerate() {
            let own_shared = load.base() == "ld"
                && load
                    .opcode
                    .split('.')
                    .nth(1)
                    .is_some_and(|s| s == "shared" || s == "shared::cta");
            if !own_shared {
                continue;
            }
            let Some(barrier) = barrier_before(blocks, &preds, k, n, load, aborting) else {
                continue;
            };
            let writes = intervals
                .entry(barrier)
                .or_insert_with(|| interval_writes(blocks, barrier, aborting));
            let read_sym = load.operands.get(1).and_then(|o| address_symbol(o));
            let untouched = match (writes, read_sym) {
                (None, _) => false,
                (Some(w), Some(r)) => !w.contains(r),
                (Some(w), None) => w.is_empty(),
            };
            if untouched {
                out.insert(load.line);
            }
        }
    }
    out
}

/// The block-wide barrier `(block, index)` that every path to `blocks[k].instrs[n]` passes
/// last, with no possible write of `load`'s location between; `None` if there is none.
fn barrier_before(
    blocks: &[Block],
    preds: &[Vec<usize>],
    mut k: usize,
    mut n: usize,
    load: &Instr,
    aborting: &HashSet<String>,
) -> Option<(usize, usize)> {
    let mut seen = HashSet::new();
    loop {
        for m in (0..n).rev() {
            let i = &blocks[k].instrs[m];
            if is_block_wide_sync(i) {
                return Some((k, m));
            }
            if is_barrier(i) || may_write(i, load, aborting) {
                return None;
            }
        }
        // The only way in: the single predecessor (never the function's first block, which
        // the function is entered at too).
        match preds[k].as_slice() {
            [p] if k != 0 && seen.insert(*p) => {
                k = *p;
                n = blocks[k].instrs.len();
            }
            _ => return None,
        }
    }
}

/// The shared symbols that some path from the barrier at `(block, index)` to the next
/// block-wide barrier (or the end of the function) may write; `None` when a write there may
/// reach any location.
fn interval_writes(
    blocks: &[Block],
    (k, n): (usize, usize),
    aborting: &HashSet<String>,
) -> Option<HashSet<String>> {
    let mut symbols = HashSet::new();
    // `Some(true)`: the interval ends in these instructions.
    let mut scan = |instrs: &[Instr]| -> Option<bool> {
        for i in instrs {
            // Only a barrier every thread waits at ends the interval (after a `bar.arrive`
            // or a barrier of some threads, a write may still race with a read).
            if is_block_wide_sync(i) {
                return Some(true);
            }
            match shared_write(i, aborting) {
                Some(Write::Anything) => return None,
                Some(Write::Symbol(w)) => {
                    symbols.insert(w);
                }
                None => {}
            }
        }
        Some(false)
    };
    if scan(&blocks[k].instrs[n + 1..])? {
        return Some(symbols);
    }
    let mut seen = vec![false; blocks.len()];
    let mut work: Vec<usize> = blocks[k].succs.clone();
    while let Some(b) = work.pop() {
        if std::mem::replace(&mut seen[b], true) {
            continue;
        }
        if !scan(&blocks[b].instrs)? {
            work.extend(&blocks[b].succs);
        }
    }
    Some(symbols)
}
