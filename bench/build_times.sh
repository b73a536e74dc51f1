#!/usr/bin/env bash
# Kernel build times on this machine (no GPU needed): cold and incremental builds of kernels/
# through ferrocuda-builder — the same recipe the root build.rs runs (rustc's NVPTX backend,
# -Zbuild-std=core, fat LTO, --emit=asm) — in a scratch copy of the sources, so the working tree
# and its target/ are never touched.
#
#     bash bench/build_times.sh [--full]
#
# Steps (each timed by the shell, wall clock; the builder's own figure is reported beside it):
#   cold          fresh target dir: core, ferrocuda-abi/-device/-macros (syn!) and the kernels
#   noop          nothing changed (cargo finds everything fresh; the PTX is re-read and checked)
#   touch         kernels/src/kernels.rs touched, content unchanged
#   edit          one constant changed in one kernel (fill_slow's 0.5 -> 0.25)
#   edit_back     and changed back
# Then a crate made by `ferrocuda new` (the checkout's `ferrocuda` command, built first, not
# timed), through `ferrocuda build` with its own target directory:
#   own_cold      the first build (core, syn, the ferrocuda crates and the crate)
#   own_cached    nothing changed: served from the build cache (no cargo)
#   own_touch     src/lib.rs rewritten with the same bytes: still the cache
#   own_edit      one line of the example kernel changed (alpha * x -> alpha * alpha * x)
# With --full also: a cold `cargo build --release` of the root crate (host deps, cudarc, the
# build script and the kernels) with a fresh CARGO_TARGET_DIR, and the same build after a kernel
# edit (what a user waits for after changing a kernel).
#
# Prints one JSON line per step, then a summary table; writes all of it as JSON to
# $OUT/build_times.json if OUT is set, else to target/bench/build_times.json.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
full=0
[ "${1:-}" = "--full" ] && full=1
work="$(mktemp -d /tmp/ferrocuda-buildtimes.XXXXXX)"
trap 'rm -rf "$work"' EXIT
src="$work/src"
mkdir -p "$src"

# Scratch copy of the tracked and untracked-but-not-ignored sources (no target/, .venv, ...).
(cd "$root" && git ls-files -co --exclude-standard -z) | python3 -c '
import os, shutil, sys
root, dst = sys.argv[1], sys.argv[2]
for rel in sys.stdin.buffer.read().split(b"\0"):
    rel = rel.decode()
    if not rel or not os.path.isfile(os.path.join(root, rel)):
        continue
    os.makedirs(os.path.dirname(os.path.join(dst, rel)) or dst, exist_ok=True)
    shutil.copy2(os.path.join(root, rel), os.path.join(dst, rel))
' "$root" "$src"

# A tiny driver around ferrocuda-builder (built first; its own build is not part of the figures).
drv="$work/driver"
mkdir -p "$drv/src"
cp "$root/rust-toolchain.toml" "$drv/"
cp "$root/Cargo.lock" "$drv/"
cat > "$drv/Cargo.toml" <<EOF
[package]
name = "fc-build-timer"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
ferrocuda-builder = { path = "$src/builder" }

[workspace]
EOF
cat > "$drv/src/main.rs" <<'EOF'
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (krate, target, out) = (&a[1], &a[2], &a[3]);
    match ferrocuda_builder::PtxBuilder::new(krate)
        .arch("sm_80")
        .target_dir(target)
        .out_dir(out)
        .build()
    {
        Ok(o) => println!(
            "{{\"builder_seconds\": {:.3}, \"kernels\": {}, \"ptx\": \"{}\"}}",
            o.seconds,
            o.manifest.kernels.len(),
            o.ptx.display()
        ),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
EOF
t0=$(date +%s.%N)
(cd "$drv" && { cargo build --release --quiet --offline 2>/dev/null || cargo build --release --quiet; })
t1=$(date +%s.%N)
driver_s=$(python3 -c "print(round($t1 - $t0, 2))")
timer="$drv/target/release/fc-build-timer"

results="$work/results.jsonl"
: > "$results"
ptx_target="$work/ptx-target"
ptx_out="$work/ptx-out"
step() { # name
  local name="$1" a b out secs sha
  a=$(date +%s.%N)
  out="$("$timer" "$src/kernels" "$ptx_target" "$ptx_out")"
  b=$(date +%s.%N)
  secs=$(python3 -c "print(round($b - $a, 3))")
  sha=$(sha256sum "$ptx_out/ferrocuda_kernels.ptx" | cut -c1-16)
  echo "{\"bench\": \"build\", \"name\": \"$name\", \"wall_seconds\": $secs, \"ptx_sha\": \"$sha\", \"load1\": $(cut -d' ' -f1 /proc/loadavg), \"driver\": $out}" \
    | tee -a "$results"
}
kfile="$src/kernels/src/kernels.rs"
grep -q 'junk = junk \* 0.5 + 1.0;' "$kfile" || { echo "build_times: the edited constant is gone from kernels.rs; update this script" >&2; exit 1; }

step cold
step noop
touch "$kfile"
step touch
sed -i 's/junk = junk \* 0.5 + 1.0;/junk = junk * 0.25 + 1.0;/' "$kfile"
step edit
sed -i 's/junk = junk \* 0.25 + 1.0;/junk = junk * 0.5 + 1.0;/' "$kfile"
step edit_back

fc_target="$work/fc-target"
(cd "$src" && CARGO_TARGET_DIR="$fc_target" cargo build --release --quiet -p ferrocuda-builder --bin ferrocuda)
fc="$fc_target/release/ferrocuda"
own="$work/own/my_kernels"
mkdir -p "$work/own"
"$fc" new "$own" >/dev/null
own_step() { # name
  local name="$1" a b secs said
  a=$(date +%s.%N)
  said="$("$fc" build "$own" 2>&1 >/dev/null | tail -1)"
  b=$(date +%s.%N)
  secs=$(python3 -c "print(round($b - $a, 3))")
  echo "{\"bench\": \"build\", \"name\": \"$name\", \"wall_seconds\": $secs, \"ptx_sha\": \"$(sha256sum "$own/target/ferrocuda/sm_80/my_kernels.ptx" | cut -c1-16)\", \"load1\": $(cut -d' ' -f1 /proc/loadavg), \"said\": \"$said\"}" \
    | tee -a "$results"
}
own_step own_cold
own_step own_cached
cp "$own/src/lib.rs" "$work/lib.rs" && cp "$work/lib.rs" "$own/src/lib.rs"
own_step own_touch
grep -q 'alpha \* x.get_unchecked(i)' "$own/src/lib.rs" || { echo "build_times: the scaffold's kernel line changed; update this script" >&2; exit 1; }
sed -i 's/alpha \* x.get_unchecked(i)/alpha * alpha * x.get_unchecked(i)/' "$own/src/lib.rs"
own_step own_edit

if [ "$full" = 1 ]; then
  full_step() { # name what
    local name="$1" what="$2" a b secs
    a=$(date +%s.%N)
    (cd "$src" && CARGO_TARGET_DIR="$work/root-target" cargo build --release --quiet -p ferrocuda)
    b=$(date +%s.%N)
    secs=$(python3 -c "print(round($b - $a, 3))")
    echo "{\"bench\": \"build\", \"name\": \"$name\", \"wall_seconds\": $secs, \"load1\": $(cut -d' ' -f1 /proc/loadavg), \"what\": \"$what\"}" \
      | tee -a "$results"
  }
  full_step root_cold "cargo build --release -p ferrocuda, fresh CARGO_TARGET_DIR"
  sed -i 's/junk = junk \* 0.5 + 1.0;/junk = junk * 0.25 + 1.0;/' "$kfile"
  full_step root_after_kernel_edit "the same build again after one kernel constant changed"
fi

dest="${OUT:-$root/target/bench}"
mkdir -p "$dest"
python3 - "$results" "$dest/build_times.json" "$driver_s" <<'EOF'
import json, os, platform, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def sh(*cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True).stdout.strip()
    except OSError:
        return "?"
cpu = "?"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
machine = {"cpus": os.cpu_count(), "cpu": cpu, "rustc": sh("rustc", "--version"),
           "host": platform.node(), "driver_build_seconds": float(sys.argv[3])}
json.dump({"machine": machine, "steps": rows}, open(sys.argv[2], "w"), indent=1)
print()
print("## Kernel build times (%d CPUs, %s, %s)" % (machine["cpus"], cpu, machine["rustc"]))
print()
print("| step | wall s | builder s | 1-min load | PTX |")
print("| --- | ---: | ---: | ---: | --- |")
for r in rows:
    d = r.get("driver", {})
    print("| %s | %.2f | %s | %s | %s |" % (r["name"], r["wall_seconds"],
          "%.2f" % d["builder_seconds"] if "builder_seconds" in d else "—", r.get("load1", "—"),
          r.get("ptx_sha", "—")))
print()
print("written: %s" % sys.argv[2])
EOF
