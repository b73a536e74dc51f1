//! The control-flow graph of a PTX function, as the checks read it: basic blocks with their
//! successors (an unguarded `trap`, or a call to a function that never returns, ends a path),
//! post-dominators, and the blocks a branch or a block reaches.

use super::parse::{Instr, Statement};
use std::collections::HashMap;
use std::collections::HashSet;

/// The call target of a `call` instruction (`None` for indirect calls).
pub fn call_target(i: &Instr) -> Option<&str> {
    if i.base() != "call" {
        return None;
    }
    i.operands
        .iter()
        .find(|o| !o.starts_with('('))
        .filter(|o| !o.starts_with('%'))
        .map(String::as_str)
}

/// Whether some path from the first block ends the function normally.
pub(super) fn reaches_exit(blocks: &[Block]) -> bool {
    let mut seen = vec![false; blocks.len()];
    let mut stack = vec![0usize];
    while let Some(k) = stack.pop() {
        if k >= blocks.len() || std::mem::replace(&mut seen[k], true) {
            continue;
        }
        if blocks[k].exits {
            return true;
        }
        stack.extend(&blocks[k].succs);
    }
    false
}

/// A basic block.
pub(super) struct Block {
    pub(super) instrs: Vec<Instr>,
    pub(super) succs: Vec<usize>,
    /// Ends the function normally (`ret`/`exit`, or falls off the end).
    pub(super) exits: bool,
}

/// The basic blocks of a body; a block that executes an unguarded `trap`, or calls one of
/// the `aborting` functions unguarded, aborts (no successors).
pub(super) fn blocks(st: &[Statement], aborting: &HashSet<String>) -> Vec<Block> {
    // The target lists of `brx.idx` (`$L_brx_0: .branchtargets $L__BB0_3, …;`): a jump table's
    // successors are its list, not every label of the function.
    let mut tables: HashMap<&str, Vec<&str>> = HashMap::new();
    for pair in st.windows(2) {
        if let [Statement::Label(l), Statement::Instr(i)] = pair {
            if i.opcode == ".branchtargets" {
                tables.insert(l.as_str(), i.operands.iter().map(String::as_str).collect());
            }
        }
    }
    let mut raw: Vec<(Vec<Instr>, Option<String>)> = vec![(Vec::new(), None)];
    for s in st {
        match s {
            Statement::Label(l) => raw.push((Vec::new(), Some(l.clone()))),
            Statement::Instr(i) if i.opcode.starts_with('.') => {}
            Statement::Instr(i) => {
                let ends = matches!(i.base(), "bra" | "brx" | "ret" | "exit");
                if let Some(b) = raw.last_mut() {
                    b.0.push(i.clone());
                }
                if ends {
                    raw.push((Vec::new(), None));
                }
            }
        }
    }
    let labels: HashMap<&str, usize> = raw
        .iter()
        .enumerate()
        .filter_map(|(n, (_, l))| Some((l.as_deref()?, n)))
        .collect();
    let n = raw.len();
    // An unguarded `trap`, or an unguarded call to a function that never returns.
    let traps = |i: &Instr| {
        i.guard.is_none()
            && (i.opcode == "trap" || call_target(i).is_some_and(|t| aborting.contains(t)))
    };
    raw.iter()
        .enumerate()
        .map(|(k, (instrs, _))| {
            let next = (k + 1 < n).then_some(k + 1);
            // `exit` right before an unconditional `trap` is how LLVM ends the path after a
            // call that never returns (a panic or abort function): `exit; trap; exit;`.
            let exit_before_trap = instrs
                .last()
                .is_some_and(|i| i.opcode == "exit" && i.guard.is_none())
                && next.is_some_and(|nx| raw[nx].0.first().is_some_and(traps));
            let aborts = instrs.iter().any(traps) || exit_before_trap;
            let (mut succs, mut exits) = (Vec::new(), false);
            match instrs.last() {
                _ if aborts => {}
                Some(i) if i.base() == "bra" => {
                    succs.extend(i.operands.first().and_then(|t| labels.get(t.as_str())));
                    if i.guard.is_some() {
                        succs.extend(next);
                    }
                }
                Some(i) if i.base() == "brx" => {
                    // `brx.idx %r, $L_brx_0;`: its table's targets; an unknown table (or a
                    // table register) may go anywhere.
                    let table = i.operands.get(1).and_then(|t| tables.get(t.as_str()));
                    match table {
                        Some(targets) => succs.extend(
                            targets
                                .iter()
                                .filter_map(|t| labels.get(t.trim_end_matches(','))),
                        ),
                        None => succs.extend(labels.values()),
                    }
                }
                Some(i) if matches!(i.base(), "ret" | "exit") => {
                    exits = true;
                    if i.guard.is_some() {
                        succs.extend(next);
                    }
                }
                _ => match next {
                    Some(nx) => succs.push(nx),
                    None => exits = true,
                },
            }
            succs.sort_unstable();
            succs.dedup();
            Block {
                instrs: instrs.clone(),
                succs,
                exits,
            }
        })
        .collect()
}

/// Immediate post-dominator of every block: `Some(j)` a block, `None` the function's exit
/// (or, for a block that can only abort, nothing).
pub(super) fn ipdoms(blocks: &[Block]) -> Vec<Option<usize>> {
    let n = blocks.len();
    let exit = n; // the virtual exit node
    let succs = |k: usize| -> Vec<usize> {
        let mut s = blocks[k].succs.clone();
        if blocks[k].exits {
            s.push(exit);
        }
        s
    };
    // Blocks that can reach the exit (the others can only abort).
    let mut live = vec![false; n + 1];
    live[exit] = true;
    let mut changed = true;
    while changed {
        changed = false;
        for k in 0..n {
            if !live[k] && succs(k).iter().any(|&s| live[s]) {
                live[k] = true;
                changed = true;
            }
        }
    }
    // pd[k][j]: j post-dominates k.
    let mut pd: Vec<Vec<bool>> = (0..=n)
        .map(|k| {
            (0..=n)
                .map(|j| if live[k] && k != exit { true } else { j == k })
                .collect()
        })
        .collect();
    changed = true;
    while changed {
        changed = false;
        for k in (0..n).filter(|&k| live[k]) {
            let mut set = vec![true; n + 1];
            for s in succs(k).into_iter().filter(|&s| live[s]) {
                set.iter_mut().zip(&pd[s]).for_each(|(a, &b)| *a &= b);
            }
            set[k] = true;
            if set != pd[k] {
                pd[k] = set;
                changed = true;
            }
        }
    }
    (0..n)
        .map(|k| {
            let strict: Vec<usize> = (0..=n).filter(|&j| j != k && pd[k][j]).collect();
            // The immediate one is post-dominated by every other strict post-dominator.
            let i = strict
                .iter()
                .copied()
                .find(|&c| strict.iter().all(|&o| pd[c][o]))?;
            (i != exit).then_some(i)
        })
        .collect()
}

/// Blocks reachable from `from`'s successors without passing through `stop`.
pub(super) fn region(blocks: &[Block], from: usize, stop: Option<usize>) -> Vec<bool> {
    let mut seen = vec![false; blocks.len()];
    for &s in &blocks[from].succs {
        let side = reach_from(blocks, s, stop);
        seen.iter_mut().zip(&side).for_each(|(a, &b)| *a |= b);
    }
    seen
}

/// Blocks reachable from `from` (itself included) without passing through `stop`.
pub(super) fn reach_from(blocks: &[Block], from: usize, stop: Option<usize>) -> Vec<bool> {
    let mut seen = vec![false; blocks.len()];
    let mut work = vec![from];
    while let Some(b) = work.pop() {
        if Some(b) == stop || seen[b] {
            continue;
        }
        seen[b] = true;
        work.extend(&blocks[b].succs);
    }
    seen
}
