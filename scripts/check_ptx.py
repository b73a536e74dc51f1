#!/usr/bin/env python3
"""Check a ferrocuda PTX module for what must never reach a GPU. No GPU needed.

Usage:
    scripts/check_ptx.py KERNELS.ptx [--manifest KERNELS.json] [--ptxas PATH]
                         [--arch sm_80 --arch sm_90] [--allow-extern-shared] [--static-only]

Static checks of the PTX text (no tool needed):
  * no `.extern` declaration (an unresolved symbol: the module would not load);
  * no function whose name says it belongs to the panic machinery (`panic`, `panicking`,
    `rust_begin_unwind`, `unwrap_failed`, ...), neither defined, declared nor called;
  * no byte-array constant whose text looks like a panic message or a source path
    ("panicked", "index out of bounds", "attempt to ...", "src/lib.rs", ...);
  * no `.local` memory (`__local_depot`, `%SP`/`%SPL`) in any function;
  * with --manifest: the manifest's "kernels" names and the PTX `.entry` names are the same
    set, and the manifest's "arch" (if any) is the PTX `.target`.

ptxas checks, for each --arch (default sm_80 and sm_90): `ptxas -arch=ARCH -v` must succeed,
must report every entry, and every entry (and every non-inlined function) must have a 0-byte
stack frame and 0 bytes of spill stores/loads.

Exit status: 0 all checks passed, 1 a check failed, 2 usage or environment error (file
missing, ptxas not found). ptxas comes from scripts/ensure_ptxas.sh (PyPI wheel
nvidia-cuda-nvcc-cu12); without --ptxas it is looked up in $PTXAS, then in
<repo>/.tools/nvcc/nvidia/cuda_nvcc/bin/ptxas, then on PATH.

Python 3.9+, standard library only. The parsing functions are importable (see
scripts/test_check_ptx.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

DEFAULT_ARCHS = ("sm_80", "sm_90")
REPO_ROOT = Path(__file__).resolve().parent.parent
REPO_PTXAS = REPO_ROOT / ".tools" / "nvcc" / "nvidia" / "cuda_nvcc" / "bin" / "ptxas"
MODULE = "<module>"  # the "kernel" column of findings that belong to no single function

# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------

# Function names of the panic machinery. Mangled names (legacy `_ZN4core9panicking5panic17h…E`
# and v0 `_RNvNtCs…_4core9panicking18panic_bounds_check`) carry the path segments literally.
PANIC_NAME_RE = re.compile(
    r"panic"  # panic, panicking, panic_fmt, panic_bounds_check, panic_nounwind, ...
    r"|rust_begin_unwind|rust_begin_panic"
    r"|unwrap_failed|expect_failed|assert_failed"
    r"|slice_(?:start_|end_)?index_(?:len_|order_|overflow_)?fail"
    r"|slice_error_fail|str_index_overflow_fail|len_mismatch_fail",
    re.IGNORECASE,
)

# Text in constant byte arrays that only panic messages / panic locations carry.
PANIC_TEXT_RES: Tuple[Tuple[str, "re.Pattern[str]"], ...] = (
    ("panic message", re.compile(r"panicked")),
    ("panic message", re.compile(r"index out of bounds")),
    ("panic message", re.compile(r"attempt to (?:add|subtract|multiply|divide|calculate|negate|shift)")),
    ("panic message", re.compile(r"called `(?:Option|Result)::")),
    ("panic message", re.compile(r"(?:range (?:start|end) index|slice index starts at) ")),
    ("panic message", re.compile(r"assertion (?:`left == right` )?failed")),
    ("panic message", re.compile(r"explicit panic|capacity overflow")),
    # A panic Location's file: `src/lib.rs`, `/rustc/<hash>/library/core/src/num/mod.rs`.
    ("source path", re.compile(r"[\w\-/\\]\.rs(?![\w])")),
)

# ---------------------------------------------------------------------------------------------
# PTX parsing
# ---------------------------------------------------------------------------------------------

IDENT = r"[A-Za-z_$%][\w$%]*"

_FUNC_HEADER_RE = re.compile(
    r"(?P<linkage>(?:\.(?:visible|extern|weak|common)\s+)*)"
    r"\.(?P<kind>entry|func)\b\s*"
    r"(?:\((?P<ret>[^)]*)\)\s*)?"
    r"(?P<name>" + IDENT + r")"
)
_CALL_RE = re.compile(
    r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?(?P<target>" + IDENT + r")"
)
_BYTE_ARRAY_RE = re.compile(
    r"(?P<linkage>(?:\.(?:visible|extern|weak|common)\s+)*)"
    r"\.(?P<space>global|const)\s+(?:\.align\s+\d+\s+)?\.(?:b8|u8|s8)\s+"
    r"(?P<name>" + IDENT + r")\s*\[\s*\d*\s*\]\s*=\s*\{(?P<init>[^}]*)\}"
)
_LOCAL_DECL_RE = re.compile(r"^\s*\.local\b[^;]*?(?P<name>" + IDENT + r")\s*(?:\[[^\]]*\])?\s*;", re.M)
_STACK_REG_RE = re.compile(r"%SPL?\b")
_TARGET_RE = re.compile(r"^\s*\.target\s+([\w,\s]+?)\s*$", re.M)


def strip_comments(text: str) -> str:
    """PTX without `//` and `/* */` comments (newlines kept, so line numbers survive)."""

    def blank(m: "re.Match[str]") -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, text, flags=re.S)


@dataclass
class PtxFunction:
    """One `.entry` or `.func`, defined (with a body) or only declared."""

    name: str
    kind: str  # "entry" or "func"
    linkage: List[str]  # e.g. ["visible"], ["extern"]
    body: Optional[str]  # text between the outer braces; None for a declaration
    line: int  # 1-based line of the header

    @property
    def is_entry(self) -> bool:
        return self.kind == "entry"


def _matching(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index of the bracket closing the one at `text[start]` (or len(text) if unbalanced)."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def parse_functions(ptx: str) -> List[PtxFunction]:
    """Every `.entry` / `.func` of the (comment-free) PTX, in order."""
    out: List[PtxFunction] = []
    pos = 0
    while True:
        m = _FUNC_HEADER_RE.search(ptx, pos)
        if not m:
            return out
        i = m.end()
        # Parameter list, then performance directives (.noreturn, .maxntid 256, 1, 1, ...),
        # then `;` (a declaration) or `{` (a definition).
        while i < len(ptx) and ptx[i].isspace():
            i += 1
        if i < len(ptx) and ptx[i] == "(":
            i = _matching(ptx, i, "(", ")") + 1
        j = i
        while j < len(ptx) and ptx[j] not in "{;":
            j += 1
        body = None
        end = j + 1
        if j < len(ptx) and ptx[j] == "{":
            close = _matching(ptx, j, "{", "}")
            body = ptx[j + 1 : close]
            end = close + 1
        linkage = re.findall(r"\.(\w+)", m.group("linkage"))
        line = ptx.count("\n", 0, m.start("kind")) + 1
        out.append(PtxFunction(m.group("name"), m.group("kind"), linkage, body, line))
        pos = end


def find_calls(body: str) -> List[str]:
    """Direct call targets in a function body (indirect calls through a register skipped)."""
    return [m.group("target") for m in _CALL_RE.finditer(body) if not m.group("target").startswith("%")]


def extern_lines(ptx: str) -> List[Tuple[int, str]]:
    """(line number, text) of every `.extern` declaration of the (comment-free) PTX."""
    out = []
    for n, line in enumerate(ptx.splitlines(), 1):
        s = line.strip()
        if s.startswith(".extern") or re.match(r"^(?:\.(?:visible|weak)\s+)+\.extern\b", s):
            out.append((n, s))
    return out


def byte_arrays(ptx: str) -> List[Tuple[str, bytes]]:
    """(name, bytes) of every initialised `.global`/`.const` `.b8` array."""
    out = []
    for m in _BYTE_ARRAY_RE.finditer(ptx):
        vals = bytearray()
        for tok in m.group("init").split(","):
            tok = tok.strip()
            try:
                vals.append(int(tok, 0) & 0xFF)
            except ValueError:
                vals.append(0)  # e.g. 0xFF(generic(sym)): an address byte, not text
        out.append((m.group("name"), bytes(vals)))
    return out


def panic_text(data: bytes) -> Optional[Tuple[str, str]]:
    """(what, snippet) if the bytes read like a panic message or a panic location's path."""
    text = data.decode("latin-1")
    for what, rx in PANIC_TEXT_RES:
        m = rx.search(text)
        if m:
            lo, hi = max(0, m.start() - 20), min(len(text), m.end() + 20)
            snippet = "".join(c if 32 <= ord(c) < 127 else "." for c in text[lo:hi])
            return what, snippet
    return None


def local_memory(fn: PtxFunction) -> List[str]:
    """What in the function's body uses the `.local` state space (empty if nothing)."""
    if fn.body is None:
        return []
    found = [f".local {m.group('name')}" for m in _LOCAL_DECL_RE.finditer(fn.body)]
    if not found and "__local_depot" in fn.body:
        found.append("__local_depot")
    if not found and _STACK_REG_RE.search(fn.body):
        found.append("%SP/%SPL stack pointer")
    return found


def ptx_target(ptx: str) -> Optional[str]:
    """The first target of the `.target` directive (e.g. "sm_80")."""
    m = _TARGET_RE.search(ptx)
    return m.group(1).split(",")[0].strip() if m else None


# ---------------------------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------------------------


@dataclass
class Finding:
    """One failed check."""

    kernel: str  # entry / function name, or MODULE
    rule: str  # short rule id: extern, panic, panic-text, local, stack, spill, ptxas, manifest
    message: str
    arch: Optional[str] = None

    def __str__(self) -> str:
        where = self.kernel if self.arch is None else f"{self.kernel} [{self.arch}]"
        return f"FAIL {where}: {self.rule}: {self.message}"


def check_ptx_text(ptx: str, allow_extern_shared: bool = False) -> Tuple[List[PtxFunction], List[Finding]]:
    """The static checks. Returns the parsed functions and the findings."""
    src = strip_comments(ptx)
    funcs = parse_functions(src)
    findings: List[Finding] = []

    for line_no, line in extern_lines(src):
        if allow_extern_shared and re.search(r"\.extern\s+\.shared\b", line):
            continue
        m = _FUNC_HEADER_RE.search(line)
        name = m.group("name") if m else MODULE
        findings.append(Finding(name, "extern", f"`.extern` declaration at line {line_no}: {line[:120]}"))
    externs = {f.name for f in funcs if "extern" in f.linkage}

    for fn in funcs:
        if PANIC_NAME_RE.search(fn.name):
            what = "defined" if fn.body is not None else "declared"
            findings.append(
                Finding(fn.name, "panic", f"panic-machinery .{fn.kind} {what} at line {fn.line}")
            )
        for target in find_calls(fn.body or ""):
            if PANIC_NAME_RE.search(target):
                findings.append(Finding(fn.name, "panic", f"calls panic-machinery function {target}"))
            elif target in externs:
                findings.append(Finding(fn.name, "extern", f"calls the unresolved .extern function {target}"))
        used = local_memory(fn)
        if used:
            findings.append(
                Finding(fn.name, "local", f".{fn.kind} uses .local memory: {', '.join(sorted(set(used)))}")
            )

    for name, data in byte_arrays(src):
        hit = panic_text(data)
        if hit:
            findings.append(Finding(MODULE, "panic-text", f"byte array {name} holds a {hit[0]}: {hit[1]!r}"))
    return funcs, findings


def check_manifest(manifest: dict, entries: Sequence[str], target: Optional[str]) -> List[Finding]:
    """Manifest kernels == PTX entries, and the manifest arch is the PTX target."""
    findings: List[Finding] = []
    kernels = manifest.get("kernels")
    if not isinstance(kernels, list):
        return [Finding(MODULE, "manifest", 'manifest has no "kernels" list')]
    names = []
    for k in kernels:
        if not isinstance(k, dict) or not isinstance(k.get("name"), str):
            findings.append(Finding(MODULE, "manifest", f"manifest kernel without a name: {k!r:.80}"))
        else:
            names.append(k["name"])
    for dup in sorted({n for n in names if names.count(n) > 1}):
        findings.append(Finding(dup, "manifest", "listed more than once in the manifest"))
    ptx_set, man_set = set(entries), set(names)
    for n in sorted(man_set - ptx_set):
        findings.append(Finding(n, "manifest", "in the manifest but not an .entry of the PTX"))
    for n in sorted(ptx_set - man_set):
        findings.append(Finding(n, "manifest", ".entry of the PTX but not in the manifest"))
    arch = manifest.get("arch")
    if isinstance(arch, str) and target is not None and arch != target:
        findings.append(Finding(MODULE, "manifest", f'manifest arch "{arch}" but the PTX .target is {target}'))
    return findings


# ---------------------------------------------------------------------------------------------
# ptxas report
# ---------------------------------------------------------------------------------------------


@dataclass
class Props:
    """ptxas's resource report for one function."""

    name: str
    entry: bool = False
    stack: Optional[int] = None  # bytes stack frame; None: not reported / not static
    spill_stores: Optional[int] = None
    spill_loads: Optional[int] = None
    registers: Optional[int] = None
    barriers: Optional[int] = None
    smem: Optional[int] = None
    notes: List[str] = field(default_factory=list)


_COMPILING_RE = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_PROPS_RE = re.compile(r"Function properties for (?P<name>\S+)")
_FRAME_RE = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads"
)
_USED_RE = re.compile(r"Used (?P<regs>\d+) registers")
_BARRIERS_RE = re.compile(r"used (?P<n>\d+) barriers")
_SMEM_RE = re.compile(r"(?P<n>\d+) bytes smem")
_NOT_STATIC_RE = re.compile(r"Stack size for (?:entry )?function '(?P<name>[^']+)' cannot be statically determined")


def parse_ptxas_report(text: str) -> Dict[str, Props]:
    """Per-function resource usage from `ptxas -v` output (entries and non-inlined functions)."""
    props: Dict[str, Props] = {}
    current_entry: Optional[str] = None  # the entry being compiled ("Used N registers" is its)
    pending: Optional[str] = None  # the function whose "Function properties" line came last

    def get(name: str) -> Props:
        if name not in props:
            props[name] = Props(name)
        return props[name]

    for line in text.splitlines():
        m = _COMPILING_RE.search(line)
        if m:
            current_entry = m.group("name")
            get(current_entry).entry = True
            pending = None
            continue
        m = _PROPS_RE.search(line)
        if m:
            pending = m.group("name")
            get(pending)
            continue
        m = _FRAME_RE.search(line)
        if m and pending is not None:
            p = get(pending)
            p.stack, p.spill_stores, p.spill_loads = int(m.group("stack")), int(m.group("st")), int(m.group("ld"))
            pending = None
            continue
        m = _NOT_STATIC_RE.search(line)
        if m:
            get(m.group("name")).notes.append("stack size cannot be statically determined")
            continue
        m = _USED_RE.search(line)
        if m and current_entry is not None:
            p = get(current_entry)
            p.registers = int(m.group("regs"))
            b = _BARRIERS_RE.search(line)
            p.barriers = int(b.group("n")) if b else p.barriers
            s = _SMEM_RE.search(line)
            p.smem = int(s.group("n")) if s else p.smem
            continue
        if "Compile time" in line or "bytes gmem" in line:
            pending = None
    return props


def check_report(props: Dict[str, Props], entries: Sequence[str], arch: str) -> List[Finding]:
    """Every entry reported with a 0-byte stack frame and no spills; functions likewise."""
    findings: List[Finding] = []
    for name in entries:
        p = props.get(name)
        if p is None or not p.entry:
            findings.append(Finding(name, "ptxas", "no ptxas report for this entry", arch))
    for name, p in sorted(props.items()):
        kind = "entry" if p.entry else "function"
        for note in p.notes:
            findings.append(Finding(name, "stack", f"{kind}: {note}", arch))
        if p.stack is None:
            if p.entry:
                findings.append(Finding(name, "stack", f"{kind}: ptxas reported no stack frame size", arch))
            continue
        if p.stack > 0:
            findings.append(Finding(name, "stack", f"{kind} has a {p.stack}-byte stack frame", arch))
        if (p.spill_stores or 0) > 0 or (p.spill_loads or 0) > 0:
            findings.append(
                Finding(
                    name,
                    "spill",
                    f"{kind} spills registers: {p.spill_stores} bytes stores, {p.spill_loads} bytes loads",
                    arch,
                )
            )
    return findings


def run_ptxas(ptxas: str, arch: str, ptx_path: str, timeout: float = 600.0) -> Tuple[int, str]:
    """(exit status, combined output) of `ptxas -arch=ARCH -v -o <temp> PTX`."""
    with tempfile.TemporaryDirectory(prefix="check_ptx.") as tmp:
        cmd = [ptxas, f"-arch={arch}", "-v", "-o", os.path.join(tmp, "out.cubin"), ptx_path]
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return 124, f"ptxas timed out after {timeout:.0f} s"
        return r.returncode, r.stdout.decode("utf-8", "replace")


def find_ptxas(explicit: Optional[str]) -> Optional[str]:
    """The ptxas to run: `explicit` if given (None if it is not there), else the first found."""
    cands = [explicit] if explicit else [os.environ.get("PTXAS"), str(REPO_PTXAS), shutil.which("ptxas")]
    for cand in cands:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------


def _fmt(v: Optional[int]) -> str:
    return "?" if v is None else str(v)


def format_table(rows: List[Tuple[str, str, Optional[Props], bool]]) -> str:
    """rows: (kernel, arch, props or None, failed)."""
    header = ("kernel", "arch", "registers", "stack", "spill st/ld", "status")
    body = []
    for kernel, arch, p, failed in rows:
        body.append(
            (
                kernel,
                arch,
                _fmt(p.registers) if p else "-",
                _fmt(p.stack) if p else "-",
                f"{_fmt(p.spill_stores)}/{_fmt(p.spill_loads)}" if p else "-",
                "FAIL" if failed else "ok",
            )
        )
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in [header] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ptx", help="the PTX module to check")
    ap.add_argument("--manifest", help='kernel manifest JSON (a "kernels" list of objects with "name")')
    ap.add_argument("--ptxas", help="ptxas binary (default: $PTXAS, the repo's .tools copy, PATH)")
    ap.add_argument("--arch", action="append", help="target to assemble for; repeatable (default: sm_80, sm_90)")
    ap.add_argument("--allow-extern-shared", action="store_true",
                    help="accept `.extern .shared` arrays (dynamic shared memory)")
    ap.add_argument("--static-only", action="store_true", help="only the PTX text checks, no ptxas")
    args = ap.parse_args(argv)
    archs = args.arch or list(DEFAULT_ARCHS)

    try:
        ptx = Path(args.ptx).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        print(f"check_ptx: cannot read {args.ptx}: {e}", file=sys.stderr)
        return 2
    manifest = None
    if args.manifest:
        try:
            manifest = json.loads(Path(args.manifest).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            print(f"check_ptx: cannot read manifest {args.manifest}: {e}", file=sys.stderr)
            return 2
    ptxas = None
    if not args.static_only:
        ptxas = find_ptxas(args.ptxas)
        if ptxas is None:
            print(
                "check_ptx: ptxas not found (give --ptxas, set $PTXAS, or run scripts/ensure_ptxas.sh);"
                " --static-only skips the ptxas checks",
                file=sys.stderr,
            )
            return 2

    funcs, findings = check_ptx_text(ptx, allow_extern_shared=args.allow_extern_shared)
    entries = [f.name for f in funcs if f.is_entry and f.body is not None]
    if not entries:
        findings.append(Finding(MODULE, "entry", "the PTX defines no .entry"))
    if manifest is not None:
        findings.extend(check_manifest(manifest, entries, ptx_target(ptx)))

    rows: List[Tuple[str, str, Optional[Props], bool]] = []
    ptxas_failed = False
    if ptxas is not None:
        for arch in archs:
            rc, out = run_ptxas(ptxas, arch, args.ptx)
            if rc != 0:
                ptxas_failed = True
                tail = "\n".join("    " + ln for ln in out.strip().splitlines()[-15:])
                findings.append(Finding(MODULE, "ptxas", f"ptxas -arch={arch} failed (exit {rc}):\n{tail}", arch))
                rows.extend((e, arch, None, True) for e in entries)
                continue
            for ln in out.splitlines():
                if "warning" in ln.lower():
                    print(f"[{arch}] {ln.strip()}", file=sys.stderr)
            props = parse_ptxas_report(out)
            fs = check_report(props, entries, arch)
            findings.extend(fs)
            for e in entries:
                bad = any(f.kernel == e and f.arch in (arch, None) for f in findings)
                rows.append((e, arch, props.get(e), bad))
    else:
        rows.extend((e, "-", None, any(f.kernel == e for f in findings)) for e in entries)

    print(f"{args.ptx}: {len(entries)} entries, .target {ptx_target(ptx) or '?'}, "
          f"{'ptxas ' + ptxas if ptxas else 'static checks only'}")
    if rows:
        print(format_table(rows))
    if findings:
        print()
        for f in findings:
            print(f)
        print(f"\ncheck_ptx: FAILED ({len(findings)} problem{'s' if len(findings) != 1 else ''}"
              f"{', ptxas failed' if ptxas_failed else ''})")
        return 1
    print("check_ptx: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
