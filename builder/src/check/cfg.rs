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
    // The post-dominator tree is the dominator tree of the reversed graph rooted at a virtual
    // exit node, found by Cooper, Harvey and Kennedy's iteration ("A Simple, Fast Dominance
    // Algorithm") in reverse postorder of that graph: near-linear on the graphs compilers
    // make, where bit-set iteration is cubic (large kernels have thousands of blocks).
    let n = blocks.len();
    let exit = n;
    // Predecessors in the reversed graph are the successors in the forward one; the exit's
    // successors in the reversed graph are the blocks that end the function.
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    for (k, b) in blocks.iter().enumerate() {
        for &s in &b.succs {
            preds[s].push(k);
        }
        if b.exits {
            preds[exit].push(k);
        }
    }
    let rsuccs = |k: usize| -> Vec<usize> {
        let mut s = blocks[k].succs.clone();
        if blocks[k].exits {
            s.push(exit);
        }
        s
    };
    // Postorder of the reversed graph from the exit (iterative DFS); blocks it never reaches
    // can only abort and have no post-dominator.
    const UNSEEN: usize = usize::MAX;
    let mut order = vec![UNSEEN; n + 1];
    let mut post = Vec::with_capacity(n + 1);
    let mut visited = vec![false; n + 1];
    let mut stack: Vec<(usize, usize)> = vec![(exit, 0)];
    visited[exit] = true;
    while let Some(&mut (v, ref mut i)) = stack.last_mut() {
        if let Some(&p) = preds[v].get(*i) {
            *i += 1;
            if !visited[p] {
                visited[p] = true;
                stack.push((p, 0));
            }
        } else {
            order[v] = post.len();
            post.push(v);
            stack.pop();
        }
    }
    let mut idom = vec![UNSEEN; n + 1];
    idom[exit] = exit;
    let intersect = |idom: &[usize], mut a: usize, mut b: usize| {
        while a != b {
            while order[a] < order[b] {
                a = idom[a];
            }
            while order[b] < order[a] {
                b = idom[b];
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &v in post.iter().rev().filter(|&&v| v != exit) {
            let mut new = UNSEEN;
            for s in rsuccs(v) {
                if idom[s] == UNSEEN {
                    continue;
                }
                new = if new == UNSEEN {
                    s
                } else {
                    intersect(&idom, s, new)
                };
            }
            if new != UNSEEN && idom[v] != new {
                idom[v] = new;
                changed = true;
            }
        }
    }
    (0..n)
        .map(|k| match idom[k] {
            UNSEEN => None,
            i => (i != exit).then_some(i),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, by sets: `j` post-dominates `k` when every path from `k` to the exit
    /// passes `j`; the greatest fixpoint of `pd(k) = {k} ∪ ⋂ pd(s)` over the successors that
    /// reach the exit; the immediate one is the strict post-dominator every other one
    /// post-dominates.
    fn ipdoms_by_sets(blocks: &[Block]) -> Vec<Option<usize>> {
        let n = blocks.len();
        let exit = n;
        let succs = |k: usize| -> Vec<usize> {
            let mut s = blocks[k].succs.clone();
            if blocks[k].exits {
                s.push(exit);
            }
            s
        };
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
                let i = strict
                    .iter()
                    .copied()
                    .find(|&c| strict.iter().all(|&o| pd[c][o]))?;
                (i != exit).then_some(i)
            })
            .collect()
    }

    fn block(succs: Vec<usize>, exits: bool) -> Block {
        Block {
            instrs: Vec::new(),
            succs,
            exits,
        }
    }

    #[test]
    fn post_dominators_of_a_diamond_a_loop_and_an_abort() {
        // 0 → {1, 2} → 3 → exit; 4 loops on itself and to 5, which aborts.
        let g = vec![
            block(vec![1, 2], false),
            block(vec![3], false),
            block(vec![3], false),
            block(vec![], true),
            block(vec![4, 5], false),
            block(vec![], false),
        ];
        assert_eq!(
            ipdoms(&g),
            vec![Some(3), Some(3), Some(3), None, None, None]
        );
    }

    #[test]
    fn post_dominators_agree_with_their_definition_on_random_graphs() {
        // xorshift: reproducible graphs of 1 to 60 blocks, forward edges mostly (as compilers
        // lay blocks out), back edges, self loops, several exits and aborting blocks.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..3000 {
            let n = 1 + next(60) as usize;
            let g: Vec<Block> = (0..n)
                .map(|k| {
                    let mut succs = Vec::new();
                    for _ in 0..next(3) {
                        let t = if next(4) == 0 {
                            next(n as u64) as usize
                        } else {
                            (k + 1 + next(4) as usize).min(n - 1)
                        };
                        succs.push(t);
                    }
                    succs.sort_unstable();
                    succs.dedup();
                    let exits = succs.is_empty() && next(5) != 0 || next(10) == 0;
                    block(succs, exits)
                })
                .collect();
            assert_eq!(ipdoms(&g), ipdoms_by_sets(&g), "graph {:?}", {
                g.iter().map(|b| (&b.succs, b.exits)).collect::<Vec<_>>()
            });
        }
    }
}
