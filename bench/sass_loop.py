#!/usr/bin/env python3
"""The main loop of a GEMM kernel read from its SASS, with the control bits decoded: what a
warp issues per trip and how many cycles its own stall counts cost, beside a peer's kernel.

Usage (no GPU needed):
    nvdisasm -c -hex KERNEL.cubin > ours.sass          # or: cuobjdump -sass LIB > peer.sass
    python3 bench/sass_loop.py ours.sass [peer.sass ...] [--function NAME] [--fma 900:1100]
        [--list]

A loop is a backward branch whose body holds between the ``--fma`` bounds of ``FFMA``
(default 900–1100: an 8-wide ``k`` tile of 128 accumulators per thread). Its *path* is the
steady state's: conditional branches fall through (the edge and end-of-loop cases) and
unconditional ones jump, so a loop whose copies sit behind a branch counts the whole-tile arm
only. For each loop it prints:

* the instructions issued per trip and the sum of their stall counts (bits 41–44 of the
  128-bit word: the cycles the scheduler waits before the warp's next instruction). The sum
  above the loop's bound — one instruction a cycle, or the FMA pipe's own rate where that is
  slower (an ``FFMA`` a cycle on sm_90; one every two cycles on sm_80, whose schedulers have
  half the FP32 lanes; the most common ``FFMA`` stall is taken as the rate) — is the
  fixed-latency wait Nsight Compute reports as ``stalled_wait`` per issued instruction: 0.20
  measured against 0.204 read here for ``matmul_f32_sm90`` (2026-12-04), < 0.05 against
  0.006 for cuBLAS's SGEMM (both sm_90);
* the stall counts above one (above the rate, for ``FFMA``) by opcode, and how the
  ``LDS.128``/``LDGSTS`` sit among the ``FFMA``s (``F12``: twelve FMAs in a row, ``L``: a
  shared load, ``G``: a global-to-shared copy);
* the ``FFMA``s whose three source registers not served by the operand reuse cache (the
  ``.reuse`` flag of the instruction before) lie in one register bank (register number modulo
  2): the register-bank conflicts that show as ``stalled_dispatch``. cuBLAS's SGEMM has none.

``--list`` prints every non-FMA instruction of the path with its stall count and the number
of FMAs before it. Input: ``nvdisasm -c -hex`` or ``cuobjdump -sass`` text (both print the
two 64-bit halves of each instruction); ``--function`` keeps one kernel of a listing.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter

INSTR = re.compile(r"\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;\s*/\* 0x([0-9a-f]+) \*/")
HIGH = re.compile(r"/\* 0x([0-9a-f]+) \*/")
LABEL = re.compile(r"\s*(\.L_x_\d+):")
BRANCH = re.compile(r"BRA (?:`\((\.L_x_\d+)\)|(0x[0-9a-f]+))")
REG = re.compile(r"-?\|?R(\d+)\|?(\.reuse)?")


def parse(lines: list[str]) -> tuple[list[tuple[int, str, int]], dict[str, int]]:
    """Instructions as (address, text, high 64 bits) and labels as indices into them."""
    ins: list[tuple[int, str, int]] = []
    labels: dict[str, int] = {}
    i = 0
    while i < len(lines):
        m = INSTR.match(lines[i])
        if m and i + 1 < len(lines) and (hi := HIGH.search(lines[i + 1])):
            ins.append((int(m.group(1), 16), m.group(2).strip(), int(hi.group(1), 16)))
            i += 2
            continue
        if lab := LABEL.match(lines[i]):
            labels[lab.group(1)] = len(ins)
        i += 1
    return ins, labels


def opcode(text: str) -> str:
    words = text.split()
    return words[1] if words[0].startswith("@") else words[0]


def target(ins, labels, text: str) -> int | None:
    m = BRANCH.search(text)
    if not m:
        return None
    if m.group(1):
        return labels.get(m.group(1))
    address = int(m.group(2), 16)
    return next((k for k, x in enumerate(ins) if x[0] == address), None)


def loops(ins, labels, fma: tuple[int, int]) -> list[tuple[int, int]]:
    """(first, last) indices of the backward branches' bodies with an FMA count in range."""
    found = []
    for last, (_, text, _) in enumerate(ins):
        if opcode(text) != "BRA":
            continue
        first = target(ins, labels, text)
        if first is None or first > last:
            continue
        n = sum(1 for _, t, _ in ins[first : last + 1] if opcode(t) == "FFMA")
        if fma[0] <= n <= fma[1]:
            found.append((first, last))
    return found


def path(ins, labels, first: int, last: int) -> list[tuple[int, str, int]] | None:
    """The steady-state path from the loop head to its back edge (None: it leaves the loop)."""
    out = []
    i = first
    while len(out) <= 4 * (last - first + 1):
        out.append(ins[i])
        text = ins[i][1]
        if i == last:
            return out
        if opcode(text) == "BRA" and not text.startswith("@"):
            j = target(ins, labels, text)
            if j is None or not first <= j <= last:
                break
            i = j
            continue
        i += 1
    return None


def stall(high: int) -> int:
    return (high >> 41) & 0xF


def bank_conflicts(body) -> int:
    """FFMAs whose uncached source registers all three lie in one bank (R mod 2)."""
    count = 0
    cached: dict[int, int] = {}
    for _, text, _ in body:
        if opcode(text) != "FFMA":
            cached = {}
            continue
        operands = [
            o.strip() for o in text.split(None, 2 if text.startswith("@") else 1)[-1].split(",")
        ]
        banks = []
        reuse: dict[int, int] = {}
        for slot, operand in enumerate(operands[1:4]):
            m = REG.fullmatch(operand)
            if not m:
                continue
            r = int(m.group(1))
            if cached.get(slot) != r:
                banks.append(r % 2)
            if m.group(2):
                reuse[slot] = r
        cached = reuse
        if len(banks) == 3 and len(set(banks)) == 1:
            count += 1
    return count


def shape(body) -> str:
    seq, run = [], 0
    for _, text, _ in body:
        op = opcode(text)
        if op == "FFMA":
            run += 1
            continue
        mark = {"LDS.128": "L", "BAR.SYNC.DEFER_BLOCKING": "BAR", "DEPBAR.LE": "DEPBAR"}.get(op)
        if op.startswith("LDGSTS"):
            mark = "G"
        if mark:
            if run:
                seq.append(f"F{run}")
                run = 0
            seq.append(mark)
    if run:
        seq.append(f"F{run}")
    return " ".join(seq)


def report(name: str, lines: list[str], fma: tuple[int, int], listing: bool) -> None:
    ins, labels = parse(lines)
    found = loops(ins, labels, fma)
    if not found:
        print(f"{name}: no loop with {fma[0]}–{fma[1]} FFMA")
        return
    for first, last in found:
        body = path(ins, labels, first, last)
        if body is None:
            print(f"{name}: loop at {ins[first][0]:#x}: its path leaves the loop (skipped)")
            continue
        n = len(body)
        cycles = sum(stall(h) for _, _, h in body)
        # The FMA pipe's own rate: the most common FFMA stall (1 on sm_90, whose schedulers
        # have 32 FP32 lanes; 2 on sm_80's 16). The excess is counted above it.
        rate = Counter(stall(h) for _, t, h in body if opcode(t) == "FFMA").most_common(1)[0][0]
        excess = Counter()
        for _, text, high in body:
            base = rate if opcode(text) == "FFMA" else 1
            excess[opcode(text)] += max(0, stall(high) - base)
        others = Counter(opcode(t) for _, t, _ in body if opcode(t) != "FFMA")
        fmas = n - sum(others.values())
        # Cycles above the loop's bound: one instruction a cycle, or the FMA pipe's rate.
        wait = (cycles - max(n, rate * fmas)) / n
        print(
            f"{name}: loop at {ins[first][0]:#x}: {n} instructions a trip "
            f"({fmas} FFMA at {rate} cycle(s) each), stall sum {cycles} "
            f"(wait per instruction {wait:.3f}), bank-conflicting FFMA {bank_conflicts(body)}"
        )
        print("  excess stall by opcode:", [(k, v) for k, v in excess.most_common(8) if v])
        print("  others:", others.most_common(12))
        print("  shape:", shape(body))
        if listing:
            fmas = 0
            for address, text, high in body:
                if opcode(text) == "FFMA":
                    fmas += 1
                else:
                    print(
                        f"    {address:#07x} after {fmas:4d} FFMA  stall {stall(high):2d}  {text}"
                    )


def function_lines(lines: list[str], name: str) -> list[str]:
    """The lines of one kernel: nvdisasm's `.text.NAME:` section, cuobjdump's `Function : NAME`."""
    out, inside = [], False
    for line in lines:
        head = line.strip()
        if head.startswith(".text.") and head.endswith(":"):
            inside = head == f".text.{name}:"
        elif head.startswith("Function : "):
            inside = head == f"Function : {name}"
        if inside:
            out.append(line)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "listings", nargs="+", help="SASS listings (nvdisasm -c -hex, cuobjdump -sass)"
    )
    parser.add_argument("--function", help="keep one kernel of each listing")
    parser.add_argument("--fma", default="900:1100", help="FFMA count range of the loop body")
    parser.add_argument("--list", action="store_true", help="print the path's non-FMA instructions")
    args = parser.parse_args()
    lo, hi = (int(x) for x in args.fma.split(":"))
    for name in args.listings:
        with open(name) as f:
            lines = f.read().split("\n")
        if args.function:
            lines = function_lines(lines, args.function)
        report(name, lines, (lo, hi), args.list)
    return 0


if __name__ == "__main__":
    sys.exit(main())
