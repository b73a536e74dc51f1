//! CPU tests of `ferrocuda-device`'s primitives: the test kernels (`tests/device-kernels/`)
//! are built to PTX with `PtxBuilder`, and the PTX must contain each primitive's instruction
//! with the memory order, scope and state space as written in the source — `red` for the
//! no-result forms, one `bar.sync` per barrier, no local memory. With ptxas available
//! (`scripts/ensure_ptxas.sh`, or `$PTXAS`) the module is also assembled for sm_80 and sm_90
//! through `scripts/check_ptx.py` (no stack, no spills). With nvdisasm as well
//! (`scripts/ensure_nvdisasm.sh`), the SASS for sm_90 of these kernels and of the bundled ones
//! must access memory in its state space (`LDG`/`STG`, `LDS`/`STS`, never generic `LD`/`ST`
//! but where listed), with 16-byte vectors and the read-only cache where the source asks for
//! them, and the tensor-core kernels must run on the tensor cores (`HMMA`, `IMMA`, `DMMA`,
//! `LDSM`, `STSM`). No GPU needed.

#[path = "common/device_kernels.rs"]
mod device_kernels;
/// The SASS checks: state spaces and widths of memory accesses, test and bundled kernels.
#[path = "device_ptx/sass.rs"]
mod sass_checks;
#[path = "common/strided.rs"]
mod strided;

use ferrocuda_builder::check::sass::{self, SassFunction};
use ferrocuda_builder::check::{ptxas, Rule, Severity};
use ferrocuda_builder::BuildOutput;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The sm_80 build: (PTX text, PTX path, manifest path, build output).
fn sm80() -> &'static (String, PathBuf, PathBuf, BuildOutput) {
    static BUILT: OnceLock<(String, PathBuf, PathBuf, BuildOutput)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = device_kernels::build("sm_80").unwrap_or_else(|e| panic!("{e}"));
        let ptx = std::fs::read_to_string(&out.ptx).unwrap();
        (ptx, out.ptx.clone(), out.manifest_path.clone(), out)
    })
}

/// The sm_80 build's sm_90 part: the kernels declared `#[kernel(arch = "sm_90")]` (PTX text).
fn sm90_part() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| std::fs::read_to_string(&sm80().3.parts["sm_90"].ptx).unwrap())
}

/// The body of `.entry name` (up to its closing brace).
fn entry<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("no .entry {name} in the PTX"));
    let end = ptx[start..].find("\n}\n").map_or(ptx.len(), |e| start + e);
    &ptx[start..end]
}

/// The sm_90 build: (PTX text, build output).
fn sm90() -> &'static (String, BuildOutput) {
    static BUILT: OnceLock<(String, BuildOutput)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = device_kernels::build("sm_90").unwrap_or_else(|e| panic!("{e}"));
        let ptx = std::fs::read_to_string(&out.ptx).unwrap();
        (ptx, out)
    })
}

/// Whether `body` contains instruction `w` as a whole token (followed by a blank, `;` or the
/// end of the line: `mma.sync` puts its operands on the next lines).
fn has_token(body: &str, w: &str) -> bool {
    body.match_indices(w).any(|(i, _)| {
        let after = body[i + w.len()..].chars().next();
        matches!(after, Some(' ' | '\t' | ';' | '\n'))
    })
}

/// Asserts that kernel `name` contains each instruction (as a whole token) of `wanted`.
fn has(name: &str, wanted: &[&str]) {
    let body = entry(&sm80().0, name);
    for w in wanted {
        assert!(has_token(body, w), "kernel `{name}`: no `{w}` in its PTX");
    }
}

fn count(name: &str, instr: &str) -> usize {
    entry(&sm80().0, name)
        .lines()
        .filter(|l| l.trim_start().starts_with(instr))
        .count()
}

#[test]
fn integer_atomics_reach_the_ptx_as_written() {
    for (k, t, s, b) in [
        ("int_atomics_u32", "u32", "u32", "b32"),
        ("int_atomics_i32", "s32", "s32", "b32"),
        ("int_atomics_u64", "u64", "u64", "b64"),
        ("int_atomics_i64", "u64", "s64", "b64"),
    ] {
        has(
            k,
            &[
                &format!("atom.acq_rel.gpu.global.add.{t}"),
                &format!("red.relaxed.gpu.global.add.{t}"),
                &format!("atom.release.sys.global.add.{t}"),
                &format!("atom.acquire.gpu.global.min.{s}"),
                &format!("atom.acq_rel.gpu.global.max.{s}"),
                &format!("red.release.gpu.global.min.{s}"),
                &format!("red.relaxed.sys.global.max.{s}"),
                &format!("atom.relaxed.gpu.global.and.{b}"),
                &format!("atom.acq_rel.gpu.global.or.{b}"),
                &format!("atom.acquire.sys.global.xor.{b}"),
                &format!("red.relaxed.gpu.global.and.{b}"),
                &format!("red.release.gpu.global.or.{b}"),
                &format!("red.relaxed.gpu.global.xor.{b}"),
                &format!("ld.relaxed.gpu.global.{b}"),
                &format!("atom.acq_rel.gpu.global.cas.{b}"),
                &format!("atom.acq_rel.gpu.global.exch.{b}"),
                &format!("atom.relaxed.gpu.global.add.{t}"),
                // The free function on a generic address names no state space.
                &format!("red.relaxed.gpu.add.{t}"),
                "cvta.to.global.u64",
            ],
        );
    }
}

#[test]
fn float_atomics_reach_the_ptx_as_written() {
    for (k, t, b) in [
        ("float_atomics_f32", "f32", "b32"),
        ("float_atomics_f64", "f64", "b64"),
    ] {
        has(
            k,
            &[
                &format!("atom.acq_rel.gpu.global.add.{t}"),
                &format!("red.relaxed.gpu.global.add.{t}"),
                &format!("atom.relaxed.sys.global.add.{t}"),
                &format!("atom.relaxed.gpu.global.add.{t}"),
                &format!("atom.relaxed.gpu.global.exch.{b}"),
                // min/max and fetch_update: CAS loops (sm_80 has no float atom.min).
                &format!("atom.relaxed.gpu.global.cas.{b}"),
                &format!("atom.release.gpu.global.cas.{b}"),
                &format!("atom.acq_rel.gpu.global.cas.{b}"),
                &format!("ld.acquire.gpu.global.{b}"),
            ],
        );
        let body = entry(&sm80().0, k);
        assert!(
            !body.contains(".min.f") && !body.contains(".max.f"),
            "{k}: sm_90-only float atom.min/max"
        );
    }
}

#[test]
fn half_atomics_use_the_hardware_where_sm80_has_it() {
    has(
        "half_atomics",
        &[
            "atom.acq_rel.gpu.global.add.noftz.f16x2",
            "red.relaxed.gpu.add.noftz.f16x2",
            "atom.relaxed.gpu.global.add.noftz.f16",
            "red.release.gpu.global.add.noftz.f16",
            // bf16 adds are CAS loops on sm_80, 32-bit for pairs and 16-bit for scalars.
            "atom.relaxed.gpu.global.cas.b32",
            "atom.acq_rel.gpu.global.cas.b16",
            "fma.rn.bf16x2",
            "fma.rn.bf16",
        ],
    );
    let body = entry(&sm80().0, "half_atomics");
    assert!(
        !body.contains("add.noftz.bf16"),
        "sm_90-only bf16 atomics in an sm_80 build"
    );
}

#[test]
fn bf16_atomics_are_native_when_built_for_sm90() {
    let (ptx, out) = sm90();
    let body = entry(ptx, "half_atomics");
    for w in [
        "atom.relaxed.gpu.global.add.noftz.bf16x2",
        "red.relaxed.gpu.global.add.noftz.bf16x2",
        "atom.acq_rel.gpu.global.add.noftz.bf16",
        "red.relaxed.gpu.global.add.noftz.bf16",
    ] {
        assert!(body.contains(w), "sm_90 half_atomics: no `{w}`");
    }
    assert_clean(out);
}

#[test]
fn shared_atomics_use_the_shared_space_at_block_scope() {
    has(
        "shared_atomics",
        &[
            "cvta.to.shared.u64",
            "atom.relaxed.cta.shared.add.u32",
            "red.relaxed.cta.shared.add.u32",
            "atom.acq_rel.cta.shared.min.u32",
            "red.release.cta.shared.max.u32",
            "atom.relaxed.cta.shared.and.b32",
            "red.relaxed.cta.shared.or.b32",
            "atom.acquire.cta.shared.xor.b32",
            "atom.relaxed.cta.shared.cas.b32",
            "ld.acquire.cta.shared.b32",
            "ld.relaxed.cta.shared.b32",
        ],
    );
    assert_eq!(count("shared_atomics", "bar.sync"), 2);
}

/// The 16-byte vector accessors: of shared arrays (`get_vector`/`write_vector` of a 1-D
/// array, a 2-D `f64` tile and the dynamic array) as `ld.shared.v4`/`st.shared.v4` and
/// `.v2` for `f64`, and of views' rows as `ld.global.v4`/`st.global.v4`; the misaligned
/// access of `fail_on_purpose` traps.
#[test]
fn vector_accessors_are_16_byte_accesses_in_their_state_space() {
    let n = |k: &str, instr: &str| count(k, instr);
    for (instr, at_least) in [
        ("ld.shared.v4.", 2),
        ("st.shared.v4.", 2),
        ("ld.shared.v2.", 2),
        ("st.shared.v2.", 2),
    ] {
        let got = n("shared_vectors", instr);
        assert!(
            got >= at_least,
            "shared_vectors: {got} `{instr}`, want {at_least}"
        );
    }
    for instr in ["ld.global.v4.", "st.global.v4."] {
        assert!(
            n("view_row_vectors", instr) >= 1,
            "view_row_vectors: no `{instr}`"
        );
    }
    // No generic vector accesses: the state spaces are known.
    for k in ["shared_vectors", "view_row_vectors"] {
        for instr in ["ld.v2.", "ld.v4.", "st.v2.", "st.v4."] {
            assert_eq!(n(k, instr), 0, "{k}: a generic `{instr}`");
        }
    }
    assert!(
        n("flat_row_sums", "ld.global.v4.") >= 1,
        "flat_row_sums: no vector loads"
    );
    assert!(n("fail_on_purpose", "trap") >= 1);
}

#[test]
fn release_acquire_and_fences() {
    has(
        "message_passing",
        &[
            "st.release.gpu.global.b32",
            "ld.acquire.gpu.global.b32",
            "st.relaxed.gpu.global.b32",
            "ld.relaxed.gpu.global.b32",
            "fence.sc.gpu",
            "fence.acq_rel.gpu",
            "nanosleep.u32",
            "bar.red.and.pred",
        ],
    );
    has(
        "fences",
        &[
            "fence.acq_rel.cta",
            "fence.acq_rel.gpu",
            "fence.acq_rel.sys",
            "fence.sc.cta",
            "fence.sc.gpu",
            "fence.sc.sys",
        ],
    );
    // A relaxed fence emits nothing: 3 acq_rel + 3 sc, plus the two system fences of the
    // trap record on the bounds check's failure path.
    assert_eq!(count("fences", "fence."), 8);
}

#[test]
fn warp_primitives_are_the_sync_instructions() {
    has(
        "warp_u32",
        &[
            "shfl.sync.idx.b32",
            "shfl.sync.up.b32",
            "shfl.sync.down.b32",
            "shfl.sync.bfly.b32",
            "vote.sync.ballot.b32",
            "vote.sync.any.pred",
            "vote.sync.all.pred",
            "match.any.sync.b32",
            "match.all.sync.b32",
            "redux.sync.add.s32",
            "redux.sync.min.u32",
            "redux.sync.max.u32",
            "redux.sync.min.s32",
            "redux.sync.max.s32",
            "redux.sync.and.b32",
            "redux.sync.or.b32",
            "redux.sync.xor.b32",
            "activemask.b32",
        ],
    );
    // 64-bit values: two 32-bit shuffles each, and the 64-bit match.
    for k in ["shuffles_u64", "shuffles_i64", "shuffles_f64"] {
        assert_eq!(count(k, "shfl.sync.idx.b32"), 2, "{k}");
        has(k, &["match.any.sync.b64"]);
    }
    for k in ["shuffles_u32", "shuffles_i32", "shuffles_f32"] {
        assert_eq!(count(k, "shfl.sync.idx.b32"), 1, "{k}");
        has(k, &["match.any.sync.b32"]);
    }
}

#[test]
fn block_collectives_have_one_barrier_per_barrier_call() {
    // Four block calls (reduce, inclusive, exclusive, reduce) of two barriers each; LLVM must
    // not duplicate a barrier into divergent branches.
    for k in [
        "collectives_sum_u32",
        "collectives_min_u32",
        "collectives_max_i32",
        "collectives_xor_u32",
        "collectives_sum_u64",
        "collectives_min_i64",
        "collectives_sum_f32",
        "collectives_max_f32",
        "collectives_sum_f64",
        "collectives_affine_u64",
    ] {
        assert_eq!(count(k, "bar.sync"), 8, "{k}");
    }
    // redux.sync fast path for u32/i32 with the built-in operations, shuffles otherwise.
    has(
        "collectives_sum_u32",
        &["redux.sync.add.s32", "shfl.sync.up.b32"],
    );
    has("collectives_min_u32", &["redux.sync.min.u32"]);
    has("collectives_max_i32", &["redux.sync.max.s32"]);
    has("collectives_xor_u32", &["redux.sync.xor.b32"]);
    for k in [
        "collectives_sum_u64",
        "collectives_sum_f32",
        "collectives_affine_u64",
    ] {
        assert!(!entry(&sm80().0, k).contains("redux.sync"), "{k}");
        has(k, &["shfl.sync.down.b32", "shfl.sync.up.b32"]);
    }
}

#[test]
fn counting_barriers_and_clocks() {
    has(
        "barrier_counts",
        &["bar.red.popc.u32", "bar.red.and.pred", "bar.red.or.pred"],
    );
    // A group's barrier: `bar.sync` with the barrier in a register (1 + group) and the
    // group's 64 threads, twice a round (the loop unrolled or not), and no block barrier.
    let body = entry(&sm80().0, "group_barriers");
    let bars: Vec<&str> = body.lines().filter(|l| l.contains("bar.sync")).collect();
    assert!(
        !bars.is_empty()
            && bars.len().is_multiple_of(2)
            && bars
                .iter()
                .all(|l| l.contains("%r") && l.trim_end().ends_with(", 64;")),
        "{bars:?}"
    );
    has("clocks", &["nanosleep.u32"]);
    let body = entry(&sm80().0, "clocks");
    assert!(body.contains("%clock64") && body.contains("%globaltimer"));
}

#[test]
fn half_arithmetic_is_hardware() {
    has("f16_convert", &["cvt.f32.f16", "cvt.rn.f16.f32"]);
    has("f16_arith", &["add.rn.f16", "sub.rn.f16", "mul.rn.f16"]);
    has(
        "bf16_ops",
        &[
            "cvt.rn.bf16.f32",
            "fma.rn.bf16",
            "min.bf16",
            "max.bf16",
            "div.rn.f32",
        ],
    );
    has(
        "packed_ops_f16x2",
        &[
            "add.rn.f16x2",
            "sub.rn.f16x2",
            "mul.rn.f16x2",
            "fma.rn.f16x2",
            "cvt.rn.f16x2.f32",
        ],
    );
    has("packed_ops_bf16x2", &["fma.rn.bf16x2", "cvt.rn.bf16x2.f32"]);
}

/// `mma.sync` forms of the tensor-core test kernels (`tests/device-kernels/src/mma.rs`).
const MMA_BF16: &str = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
const MMA_F16: &str = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
const MMA_F16_F16: &str = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16";
const MMA_TF32: &str = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";
const MMA_S8: &str = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";
const MMA_U8: &str = "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32";
const MMA_S8_U8: &str = "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32";
const MMA_U8_S8: &str = "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32";
const MMA_F64: &str = "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64";
const LDM_X1: &str = "ldmatrix.sync.aligned.m8n8.x1.shared.b16";
const LDM_X2: &str = "ldmatrix.sync.aligned.m8n8.x2.shared.b16";
const LDM_X4: &str = "ldmatrix.sync.aligned.m8n8.x4.shared.b16";
const LDM_X1_T: &str = "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16";
const LDM_X2_T: &str = "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16";
const LDM_X4_T: &str = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16";

/// Each precision reaches its exact `mma.sync` form, fed by the `ldmatrix` forms its loaders
/// use, with 32-bit shared addresses. The kernels hold exactly the `mma.sync` and `ldmatrix`
/// of their source: LLVM knows neither as convergent, and a duplicate would be a copy in a
/// branch (see the `mma` module's thread model).
#[test]
fn tensor_cores_are_mma_sync_fed_by_ldmatrix() {
    for (k, mma, ld) in [
        ("mma_tile_bf16", MMA_BF16, &[LDM_X4, LDM_X2_T, LDM_X2][..]),
        ("mma_tile_f16", MMA_F16, &[LDM_X4, LDM_X2_T, LDM_X2]),
        (
            "mma_tile_f16_f16acc",
            MMA_F16_F16,
            &[LDM_X4, LDM_X2_T, LDM_X2],
        ),
        ("mma_tile_tf32", MMA_TF32, &[LDM_X4, LDM_X2]),
        ("mma_tile_s8", MMA_S8, &[LDM_X4, LDM_X2]),
        ("mma_tile_u8", MMA_U8, &[LDM_X4, LDM_X2]),
        ("mma_tile_s8u8", MMA_S8_U8, &[LDM_X4, LDM_X2]),
        ("mma_tile_u8s8", MMA_U8_S8, &[LDM_X4, LDM_X2]),
        ("mma_tile_f64", MMA_F64, &[]),
    ] {
        has(k, &[mma]);
        has(k, ld);
        assert_eq!(count(k, "mma.sync"), 1, "{k}: one mma.sync in the source");
        if !ld.is_empty() {
            has(k, &["cvta.to.shared.u64", "cvt.u32.u64"]);
        }
        let body = entry(&sm80().0, k);
        assert!(!body.contains("stmatrix"), "{k}");
        assert!(!body.contains(".local"), "{k}: local memory");
    }
    // TF32 inputs are rounded on the device.
    has("mma_tile_tf32", &["cvt.rna.tf32.f32"]);
    has(
        "mma_layouts",
        &[
            MMA_BF16,
            MMA_F16,
            MMA_F16_F16,
            MMA_TF32,
            MMA_S8,
            MMA_U8_S8,
            MMA_F64,
            LDM_X1,
            LDM_X2,
            LDM_X4,
            LDM_X1_T,
            LDM_X2_T,
            LDM_X4_T,
        ],
    );
    assert_eq!(count("mma_layouts", "mma.sync"), 8);
    // The tiled GEMM: per K stage 2 A fragments (.x4), 4 B fragments (.x2.trans), 8 mma
    // between the two barriers.
    has("mma_gemm_bf16", &[MMA_BF16]);
    for k in ["mma_layouts", "mma_gemm_bf16"] {
        assert!(!entry(&sm80().0, k).contains(".local"), "{k}: local memory");
    }
    for (instr, n) in [
        ("mma.sync", 8),
        (LDM_X4, 2),
        (LDM_X2_T, 4),
        ("bar.sync", 2),
        ("ldmatrix", 6),
    ] {
        assert_eq!(count("mma_gemm_bf16", instr), n, "mma_gemm_bf16: {instr}");
    }
    // `stmatrix` is sm_90's: the kernel that uses it is not in the sm_80 build.
    assert!(!sm80().0.contains(".entry mma_stmatrix("));
    let mut regs: Vec<String> = sm80()
        .3
        .resources
        .iter()
        .filter(|r| r.entry && r.name.starts_with("mma_"))
        .map(|r| format!("{} {} regs", r.name, r.registers.unwrap_or(0)))
        .collect();
    regs.sort();
    eprintln!("tensor-core kernels on sm_80:\n  {}", regs.join("\n  "));
}

/// Built for sm_90, `mma_stmatrix` holds every `stmatrix` form, and ptxas accepts it.
#[test]
fn stmatrix_is_built_for_sm90() {
    let out = &sm80().3;
    let body = entry(sm90_part(), "mma_stmatrix");
    for w in [
        "stmatrix.sync.aligned.m8n8.x1.shared.b16",
        "stmatrix.sync.aligned.m8n8.x2.shared.b16",
        "stmatrix.sync.aligned.m8n8.x4.shared.b16",
        "stmatrix.sync.aligned.m8n8.x1.trans.shared.b16",
        "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
        "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
        LDM_X1,
        LDM_X2,
        LDM_X4,
        LDM_X2_T,
    ] {
        assert!(has_token(body, w), "sm_90 mma_stmatrix: no `{w}`");
    }
    assert!(!body.contains(".local"), "mma_stmatrix uses local memory");
    assert!(out
        .manifest
        .kernels_of(Some("sm_90"))
        .any(|k| k.name == "mma_stmatrix"));
    assert_clean(out);
    if let Some(r) = out.resources.iter().find(|r| r.name == "mma_stmatrix") {
        eprintln!("mma_stmatrix on sm_90: {} regs", r.registers.unwrap_or(0));
    }
}

#[test]
fn no_local_memory_and_atomic_slices_are_written_slices() {
    let (ptx, _, manifest, out) = sm80();
    for k in out.manifest.kernels_of(None) {
        let body = entry(ptx, &k.name);
        let local = body.contains(".local") || body.contains("__local_depot");
        assert!(
            !local || LOCAL_MEMORY_ALLOWED.contains(&k.name.as_str()),
            "local memory in {}",
            k.name
        );
    }
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
    let k = m["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "int_atomics_u32")
        .unwrap();
    let acc = &k["params"][1];
    assert_eq!(acc["name"], "acc");
    assert_eq!(acc["kind"], "slice");
    assert_eq!(acc["mutable"], true);
    assert_eq!(acc["dtype"], "uint32");
    let h = m["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "f16_arith")
        .unwrap();
    assert_eq!(h["params"][0]["dtype"], "float16");
}

/// Kernels allowed a stack frame and local memory: libdevice's slow-path argument reduction
/// of `sin`/`cos`/`tan` for huge arguments, and `vprintf`'s argument buffer.
const LOCAL_MEMORY_ALLOWED: [&str; 10] = [
    "math_sin_f32",
    "math_cos_f32",
    "math_tan_f32",
    "math_sin_cos_f32",
    "math_sin_f64",
    "math_cos_f64",
    "math_tan_f64",
    "math_sin_cos_f64",
    "printf_line",
    "__internal_trig_reduction_slowpathd",
];

/// The ptxas report of a build: every entry reported, no spills anywhere, and no finding
/// (local memory, stack) but the allowed ones.
fn assert_clean(out: &BuildOutput) {
    if out.ptxas.is_none() {
        eprintln!("ptxas check SKIPPED: no ptxas found (scripts/ensure_ptxas.sh installs it)");
        return;
    }
    let entries = out.manifest.kernels.len();
    let reported = out.resources.iter().filter(|r| r.entry).count();
    assert_eq!(
        reported, entries,
        "ptxas reported {reported} of {entries} entries"
    );
    for r in &out.resources {
        assert_eq!(
            r.spill_stores.unwrap_or(0) + r.spill_loads.unwrap_or(0),
            0,
            "{r:?}"
        );
    }
    for w in &out.warnings {
        let allowed = matches!(w.rule, Rule::Local | Rule::Stack)
            && w.function
                .as_deref()
                .is_some_and(|f| LOCAL_MEMORY_ALLOWED.contains(&f));
        assert!(
            allowed && w.severity == Severity::Warning,
            "unexpected finding: {w}"
        );
    }
}

/// ptxas for sm_80 (and sm_90, in `bf16_atomics_are_native_when_built_for_sm90`): no spills,
/// stacks only where allowed. Prints the registers of the math kernels.
#[test]
fn ptxas_accepts_the_module() {
    let out = &sm80().3;
    assert_clean(out);
    let mut math: Vec<String> = out
        .resources
        .iter()
        .filter(|r| r.entry && (r.name.starts_with("math_") || r.name.starts_with("fast_")))
        .map(|r| {
            format!(
                "{} {} regs, {} B stack",
                r.name,
                r.registers.unwrap_or(0),
                r.stack.unwrap_or(0)
            )
        })
        .collect();
    math.sort();
    eprintln!("math kernels on sm_80:\n  {}", math.join("\n  "));
}

/// The host runtime accepts the module (no driver needed to read it): every kernel the GPU
/// tests launch is there.
#[test]
fn host_reads_the_module() {
    let (_, _, manifest, _) = sm80();
    let m = ferrocuda::Module::from_manifest_file(manifest).unwrap();
    for k in [
        "int_atomics_u32",
        "float_atomics_f64",
        "half_atomics",
        "shared_atomics",
        "message_passing",
        "warp_u32",
        "shuffles_f64",
        "collectives_affine_u64",
        "barrier_counts",
        "group_barriers",
        "clocks",
        "f16_convert",
        "f16_arith",
        "bf16_ops",
        "packed_ops_bf16x2",
        "shared_isolation",
        "shared_reverse",
        "shared_transpose",
        "dynamic_shared_len",
        "printf_line",
        "fail_on_purpose",
        "vec_add",
        "gemm_naive",
        "gemm_tiled",
        "math_exp_f32",
        "math_sin_cos_f64",
        "math_mul_add_f32",
        "fast_div_f32",
        "mma_layouts",
        "mma_tile_bf16",
        "mma_tile_f16",
        "mma_tile_f16_f16acc",
        "mma_tile_tf32",
        "mma_tile_s8",
        "mma_tile_u8",
        "mma_tile_s8u8",
        "mma_tile_u8s8",
        "mma_tile_f64",
        "mma_gemm_bf16",
    ] {
        m.kernel(k).unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    // A kernel crate's family with a contiguous kernel and a strided variant: the host finds
    // the variant in the manifest and selects by layout.
    let add = m.kernel("layout_add_f32").unwrap();
    let variants: Vec<&str> = add.layout_variants().map(|k| k.name()).collect();
    assert_eq!(variants, ["layout_add_f32_2d"]);
    let desc = |strides: [isize; 2], ptr: u64| {
        ferrocuda::ArrayDesc::from_parts(
            ferrocuda::abi::DType::F32,
            &[4, 6],
            Some(&strides),
            ptr,
            false,
            None,
        )
        .unwrap()
    };
    let (c, t) = (desc([24, 4], 0x10000), desc([4, 16], 0x20000));
    let o = desc([24, 4], 0x30000);
    use ferrocuda::Arg::Array;
    assert_eq!(
        m.select("layout_add", &[Array(&c), Array(&c), Array(&o)])
            .unwrap()
            .name(),
        "layout_add_f32"
    );
    assert_eq!(
        m.select("layout_add", &[Array(&c), Array(&t), Array(&o)])
            .unwrap()
            .name(),
        "layout_add_f32_2d"
    );
    assert_eq!(
        add.variant_for(&[Array(&t), Array(&c), Array(&o)]).name(),
        "layout_add_f32_2d"
    );
}

/// The `.shared` variables of the module: `(name, bytes)`.
fn shared_variables(ptx: &str) -> Vec<(String, usize)> {
    ptx.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix(".shared ")
                .or_else(|| l.strip_prefix(".visible .shared "))?;
            let decl = rest.trim_end_matches(';').split_whitespace().last()?;
            let (name, n) = decl.split_once('[')?;
            Some((name.to_string(), n.trim_end_matches(']').parse().ok()?))
        })
        .collect()
}

#[test]
fn shared_arrays_are_shared_variables_accessed_as_shared() {
    let ptx = &sm80().0;
    let vars = shared_variables(ptx);
    // One `.shared` variable per `shared_array!` expansion (static storage), of its size.
    let storage: Vec<&(String, usize)> =
        vars.iter().filter(|(n, _)| n.contains("STORAGE")).collect();
    assert!(storage.len() >= 12, "{vars:?}");
    for (k, bytes) in [
        ("shared_isolation", 4096),
        ("shared_transpose", 32 * 33 * 4),
        ("shared_atomics", 32),
    ] {
        let body = entry(ptx, k);
        let used: Vec<&&(String, usize)> = storage
            .iter()
            .filter(|(n, _)| body.contains(n.as_str()))
            .collect();
        assert_eq!(used.len(), 1, "{k}: {used:?}");
        assert_eq!(used[0].1, bytes, "{k}");
    }
    // Two call sites, two arrays.
    let body = entry(ptx, "shared_reverse");
    let used = storage
        .iter()
        .filter(|(n, _)| body.contains(n.as_str()))
        .count();
    assert_eq!(used, 2, "shared_reverse must use two distinct arrays");
    // Accesses name the state space.
    for (k, ld, st) in [
        ("shared_isolation", 1, 1),
        ("shared_reverse", 3, 2),
        ("shared_transpose", 4, 4),
        ("gemm_tiled", 2, 2),
    ] {
        let body = entry(ptx, k);
        let lds = body.matches("ld.shared.").count();
        let sts = body.matches("st.shared.").count();
        assert!(
            lds >= ld && sts >= st,
            "{k}: {lds} ld.shared, {sts} st.shared"
        );
    }
    // Block collectives with a static scratch: its accesses are shared ones too.
    assert!(entry(ptx, "collectives_sum_f32").contains("st.shared."));
}

#[test]
fn dynamic_shared_memory_is_extern_shared_and_sized_by_the_register() {
    let ptx = &sm80().0;
    assert!(ptx.contains(".extern .shared .align 16 .b8 __ferrocuda_dynamic_shared[];"));
    let body = entry(ptx, "dynamic_shared_len");
    assert!(
        body.contains("%dynamic_smem_size"),
        "no %dynamic_smem_size read"
    );
    assert!(body.contains("st.shared.b32") || body.contains("st.shared.u32"));
    assert!(entry(ptx, "collectives_affine_u64").contains("%dynamic_smem_size"));
}

#[test]
fn failed_checks_write_the_trap_record_and_printf_calls_vprintf() {
    let ptx = &sm80().0;
    assert!(ptx.contains(".visible .global .align 8 .b8 __ferrocuda_trap_record[8];"));
    let body = entry(ptx, "fail_on_purpose");
    for w in [
        "ld.volatile.global.b64",
        "atom.relaxed.sys.global.cas.b32",
        "fence.sc.sys",
        // The mapped record is reached through the global window.
        "st.volatile.global.b32",
        "trap;",
    ] {
        assert!(body.contains(w), "fail_on_purpose: no `{w}`");
    }
    // The recorded line of the device_assert! in tests/device-kernels/src/diag.rs.
    let src = std::fs::read_to_string(device_kernels::crate_dir().join("src/diag.rs")).unwrap();
    let line = src
        .lines()
        .position(|l| l.contains("0 => device_assert!"))
        .unwrap()
        + 1;
    assert!(body.contains(&format!("{line};")), "line {line} not stored");
    assert!(ptx
        .lines()
        .any(|l| l.starts_with(".extern .func") && l.contains("vprintf")));
    assert!(entry(ptx, "printf_line").contains("vprintf"));
}

#[test]
fn math_compiles_to_libdevice_and_hardware_instructions() {
    let ptx = &sm80().0;
    for (k, instr) in [
        ("math_exp_f32", "ex2.approx"),
        ("math_sqrt_f32", "sqrt.rn.f32"),
        ("math_sqrt_f64", "sqrt.rn.f64"),
        ("math_rsqrt_f32", "rsqrt.approx.f32"),
        ("math_mul_add_f32", "fma.rn.f32"),
        ("math_mul_add_f64", "fma.rn.f64"),
        ("math_floor_f32", "cvt.rmi.f32.f32"),
        ("math_ceil_f64", "cvt.rpi.f64.f64"),
        ("math_trunc_f32", "cvt.rzi.f32.f32"),
        ("math_round_ties_even_f64", "cvt.rni.f64.f64"),
        ("math_min_f32", "min.f32"),
        ("math_max_f64", "max.f64"),
        ("math_abs_f32", "abs.f32"),
        ("math_copysign_f64", "copysign.f64"),
        ("fast_sin_f32", "sin.approx"),
        ("fast_cos_f32", "cos.approx"),
        ("fast_log2_f32", "lg2.approx"),
        ("fast_div_f32", "div.approx.f32"),
        ("fast_recip_f32", "rcp.approx.ftz.f32"),
        ("fast_erfc_f32", "rcp.approx.ftz.f32"),
        ("fast_erfc_f32", "ex2.approx.ftz.f32"),
        ("fast_normal_tail_f32", "rcp.approx.ftz.f32"),
        ("fast_normal_tail_f32", "ex2.approx.ftz.f32"),
    ] {
        assert!(entry(ptx, k).contains(instr), "{k}: no `{instr}`");
    }
    // No calls but to libdevice's own internal helpers (the f64 trig slow path, `pow`'s
    // core) and to vprintf.
    for k in sm80().3.manifest.kernels_of(None) {
        let body = entry(ptx, &k.name);
        for call in body.lines().filter(|l| l.contains("call.uni")) {
            assert!(
                call.contains("__internal_") || call.contains("vprintf"),
                "{}: {call}",
                k.name
            );
        }
    }
}

#[test]
fn kernels_declared_for_newer_architectures_are_built_into_parts() {
    use ferrocuda::abi::arch::Arch;
    use ferrocuda::host::launch::select::{select_for, Operand};
    use ferrocuda::{ArrayDesc, Module};
    let (ptx, _, manifest_path, out) = sm80();
    let m = &out.manifest;
    assert_eq!(m.format, ferrocuda::abi::manifest::FORMAT);
    let arch_of = |k: &str| m.kernel(k).unwrap().arch.clone();
    assert_eq!(arch_of("arch_probe_base"), None);
    assert_eq!(arch_of("arch_probe_sm90").as_deref(), Some("sm_90"));
    assert_eq!(arch_of("arch_probe_sm90a").as_deref(), Some("sm_90a"));
    // The base PTX holds every kernel but the parts' ones, and no record of them.
    assert!(ptx.contains(".entry arch_probe_base("));
    assert!(
        !ptx.contains("arch_probe_sm90"),
        "a part's kernel or record in the base PTX"
    );
    for (arch, version, only) in [
        ("sm_90", "8.0", "arch_probe_sm90"),
        ("sm_90a", "8.0", "arch_probe_sm90a"),
    ] {
        let part = &m.parts[arch];
        let files = &out.parts[arch];
        let text = std::fs::read_to_string(&files.ptx).unwrap();
        assert!(
            text.contains(&format!(".target {arch}\n")),
            "{arch}: {text:.300}"
        );
        assert!(text.contains(&format!(".version {version}\n")), "{arch}");
        let mut entries: Vec<&str> = text
            .match_indices(".entry ")
            .map(|(i, _)| text[i + 7..].split('(').next().unwrap())
            .collect();
        entries.sort_unstable();
        let mut declared: Vec<&str> = m.kernels_of(Some(arch)).map(|k| k.name.as_str()).collect();
        declared.sort_unstable();
        assert_eq!(
            entries, declared,
            "{arch}: the part holds exactly its kernels"
        );
        assert!(entries.contains(&only), "{arch}");
        assert_eq!(
            files.ptx.file_name().unwrap().to_str(),
            Some(part.ptx.as_str())
        );
        if out.ptxas.is_some() {
            // The part's own machine code: an sm_90a cubin for sm_90a, sm_90 for sm_90.
            assert_eq!(part.cubins.keys().collect::<Vec<_>>(), [arch], "{arch}");
        }
    }
    assert!(std::fs::read_to_string(&out.parts["sm_90a"].ptx)
        .unwrap()
        .contains("wgmma.fence.sync.aligned;"));

    // The host reads the parts (no GPU needed until a launch) and chooses by the device.
    let module = Module::from_manifest_file(manifest_path).unwrap();
    assert_eq!(module.images().len(), 3);
    let k = |n: &str| module.kernel(n).unwrap();
    assert_eq!(k("arch_probe_sm90a").arch(), Arch::parse("sm_90a").unwrap());
    assert_eq!(k("arch_probe_base").arch(), Arch::SM_80);
    assert!(k("arch_probe_sm90a").runs_on((9, 0)));
    assert!(!k("arch_probe_sm90a").runs_on((8, 0)) && !k("arch_probe_sm90a").runs_on((10, 0)));
    assert!(k("arch_probe_sm90").runs_on((10, 0)) && !k("arch_probe_sm90").runs_on((8, 9)));
    // A launch where the code cannot run is refused, naming kernel, arch and device.
    let refused = k("arch_probe_sm90a").refusal_on((8, 0), 1).unwrap();
    assert_eq!(refused.kind(), ferrocuda::ErrorKind::Unsupported);
    let text = refused.to_string();
    for part in [
        "`arch_probe_sm90a`",
        "sm_90a",
        "device 1",
        "compute capability 8.0",
    ] {
        assert!(text.contains(part), "{part} not in: {text}");
    }
    assert!(k("arch_probe_sm90a").refusal_on((9, 0), 0).is_none());
    assert!(k("arch_probe_sm90").refusal_on((10, 0), 0).is_none());
    assert!(k("arch_probe_sm90").refusal_on((8, 6), 0).is_some());
    let out_desc = ArrayDesc::from_parts(
        ferrocuda::abi::DType::U32,
        &[64],
        None,
        0x7000_0000,
        false,
        None,
    )
    .unwrap();
    let ops = [Operand::Array(&out_desc)];
    let chosen = |cc| {
        select_for(module.family("arch_probe"), &ops, Some(cc))
            .unwrap()
            .name()
            .to_string()
    };
    assert_eq!(chosen((8, 0)), "arch_probe_base");
    assert_eq!(chosen((8, 9)), "arch_probe_base");
    assert_eq!(chosen((9, 0)), "arch_probe_sm90a");
    assert_eq!(chosen((10, 0)), "arch_probe_sm90");
    assert_eq!(chosen((12, 0)), "arch_probe_sm90");
    // Each kernel's architecture variants are the other two; its typed launcher's choice is
    // the same rule.
    assert_eq!(
        k("arch_probe_base").variant_on(&ops, Some((9, 0))).name(),
        "arch_probe_sm90a"
    );
    assert_eq!(
        k("arch_probe_sm90a").variant_on(&ops, Some((8, 6))).name(),
        "arch_probe_base"
    );
}

/// The bundled `linear` family by the one selection rule, for a device of compute capability
/// 9.0 (H100) and 8.0 (A100), no GPU needed: the sm_90a kernel (TMA tensor maps) wherever
/// its maps take `x` and `w`, the portable `mma.sync` kernel for what TMA cannot read (K not a
/// multiple of 8, a column slice at an odd offset, a transposed operand, an empty array) and
/// on every device that does not run sm_90a code; the same through each kernel's typed
/// launcher (`Kernel::variant_on`), and by the element type of `out` for the bf16 output.
#[test]
fn launchers_of_one_architecture_ask_no_device_to_choose() {
    use ferrocuda::host::launcher::Target;
    let module = ferrocuda::bundled::module().unwrap();
    assert!(module.has_parts(), "the bundled module has its sm_90a part");
    let family = |n: &str| {
        Target::family(n.into(), module.family(n).collect())
            .unwrap()
            .weighs_arch()
    };
    let kernel = |n: &str| Target::kernel(module.kernel(n).unwrap()).weighs_arch();
    // Portable kernels (and a family of one architecture, even a newer one): no driver query
    // per launch to choose among them.
    for f in ["add", "sum", "gelu", "linear_tf32"] {
        assert!(!family(f), "family {f}");
    }
    assert!(!kernel("add_f32"));
    // A family with a portable and an sm_90a member, and a kernel whose layout variant is
    // built for sm_90a: the launch's device decides.
    assert!(family("linear"));
    assert!(kernel("linear_bf16_f32"));
}

#[test]
fn bundled_linear_selects_by_architecture_and_layout() {
    use ferrocuda::abi::DType;
    use ferrocuda::host::launch::select::{select_for, Operand};
    use ferrocuda::ArrayDesc;
    let module = ferrocuda::bundled::module().unwrap();
    let names: Vec<&str> = module.family("linear").map(|k| k.name()).collect();
    for k in ["linear_bf16_f32", "linear_bf16_f32_sm90", "linear_bf16"] {
        assert!(
            names.contains(&k),
            "{k} not in the linear family: {names:?}"
        );
    }
    let portable = module.kernel("linear_bf16_f32").unwrap();
    assert!(portable.runs_on((8, 0)) && portable.runs_on((9, 0)) && portable.runs_on((10, 0)));
    // The sm_90a kernel is a layout variant of the portable one (tensor maps where it has
    // views): its typed launcher and the portable one's choose among both.
    let variants: Vec<&str> = portable.layout_variants().map(|k| k.name()).collect();
    assert!(variants.contains(&"linear_bf16_f32_sm90"), "{variants:?}");
    // An array of `dtype`: `shape`, element `strides` (None: C order), at `ptr`.
    let desc = |dtype: DType, shape: &[usize], strides: Option<&[isize]>, ptr: u64| {
        let size = dtype.itemsize() as isize;
        let bytes: Option<Vec<isize>> = strides.map(|s| s.iter().map(|v| v * size).collect());
        ArrayDesc::from_parts(dtype, shape, bytes.as_deref(), ptr, false, None).unwrap()
    };
    let (m, n) = (256usize, 192usize);
    let w = |k: usize| desc(DType::BF16, &[n, k], None, 0x8000_0000);
    let cases: Vec<(&str, ArrayDesc, ArrayDesc, bool)> = vec![
        // (what, x, w, TMA takes both)
        (
            "K = 64",
            desc(DType::BF16, &[m, 64], None, 0x7000_0000),
            w(64),
            true,
        ),
        (
            "K = 520",
            desc(DType::BF16, &[m, 520], None, 0x7000_0000),
            w(520),
            true,
        ),
        (
            "K = 7",
            desc(DType::BF16, &[m, 7], None, 0x7000_0000),
            w(7),
            false,
        ),
        (
            "K = 3",
            desc(DType::BF16, &[m, 3], None, 0x7000_0000),
            w(3),
            false,
        ),
        (
            "x a column slice at an odd offset",
            desc(DType::BF16, &[m, 64], Some(&[72, 1]), 0x7000_0002),
            w(64),
            false,
        ),
        (
            "x a column slice at 8 columns",
            desc(DType::BF16, &[m, 64], Some(&[72, 1]), 0x7000_0010),
            w(64),
            true,
        ),
        (
            "x transposed",
            desc(DType::BF16, &[m, 64], Some(&[1, m as isize]), 0x7000_0000),
            w(64),
            false,
        ),
        (
            "x empty",
            desc(DType::BF16, &[0, 64], None, 0),
            w(64),
            false,
        ),
    ];
    // The fused-epilogue families (`linear_fused`) choose as `linear` does; their bias is one
    // more contiguous array.
    let bias = desc(DType::BF16, &[n], None, 0xa000_0000);
    let mut members = vec![
        (
            "linear",
            DType::F32,
            "linear_bf16_f32",
            "linear_bf16_f32_sm90",
        ),
        ("linear", DType::BF16, "linear_bf16", "linear_bf16_sm90"),
        (
            "linear_bias",
            DType::F32,
            "linear_bias_bf16_f32",
            "linear_bias_bf16_f32_sm90",
        ),
    ];
    let fused: Vec<(String, String, String)> = ["", "_relu", "_gelu", "_gelu_tanh", "_silu"]
        .iter()
        .map(|a| {
            let family = format!("linear_bias{a}");
            (
                family.clone(),
                format!("{family}_bf16"),
                format!("{family}_bf16_sm90"),
            )
        })
        .collect();
    for (family, portable, hopper) in &fused {
        for k in [portable, hopper] {
            let names: Vec<&str> = module.family(family).map(|k| k.name()).collect();
            assert!(
                names.contains(&k.as_str()),
                "{k} not in {family}: {names:?}"
            );
        }
        members.push((family, DType::BF16, portable, hopper));
    }
    for (what, x, w, tma) in &cases {
        for &(family, dtype, portable, hopper) in &members {
            let rows = x.shape()[0];
            let out = desc(
                dtype,
                &[rows, n],
                None,
                if rows == 0 { 0 } else { 0x9000_0000 },
            );
            let ops: Vec<Operand> = if family == "linear" {
                vec![Operand::Array(x), Operand::Array(w), Operand::Array(&out)]
            } else {
                vec![
                    Operand::Array(x),
                    Operand::Array(w),
                    Operand::Array(&bias),
                    Operand::Array(&out),
                ]
            };
            let chosen = |cc| {
                select_for(module.family(family), &ops, Some(cc))
                    .unwrap()
                    .name()
                    .to_string()
            };
            let on_hopper = if *tma { hopper } else { portable };
            assert_eq!(
                chosen((9, 0)),
                on_hopper,
                "{what}, out {:?}, 9.0",
                out.dtype()
            );
            for cc in [(8, 0), (8, 6), (8, 9), (10, 0), (12, 0)] {
                assert_eq!(
                    chosen(cc),
                    portable,
                    "{what}, out {:?}, {cc:?}",
                    out.dtype()
                );
            }
            // Each member's typed launcher makes the same choice.
            for k in [portable, hopper] {
                let Ok(k) = module.kernel(k) else { continue };
                assert_eq!(k.variant_on(&ops, Some((9, 0))).name(), on_hopper, "{what}");
                assert_eq!(k.variant_on(&ops, Some((8, 0))).name(), portable, "{what}");
            }
        }
    }
}

/// The operand lists of every `opcode` instruction of `body` (exact opcode, `;` removed),
/// inline-asm scopes (`{ .reg …; instr …; }`) included.
fn operands(body: &str, opcode: &str) -> Vec<Vec<String>> {
    body.split([';', '{', '}', '\n'])
        .map(str::trim)
        .filter_map(|s| {
            let (op, rest) = s.split_once([' ', '\t']).unwrap_or((s, ""));
            (op == opcode).then(|| {
                rest.split(',')
                    .map(|o| o.trim().to_string())
                    .filter(|o| !o.is_empty())
                    .collect()
            })
        })
        .collect()
}

/// Whether `o` is a register of the class `prefix` (`%r` 32-bit, `%rd` 64-bit), bracketed
/// when `address`.
fn is_reg(o: &str, prefix: &str, address: bool) -> bool {
    let o = if address {
        match o.strip_prefix('[').and_then(|o| o.strip_suffix(']')) {
            Some(inner) => inner,
            None => return false,
        }
    } else {
        o
    };
    o.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The `cp.async.<op>.shared.global` instructions of kernel `k` (sm_80): the whole copies
/// (`[%r], [%rd], size`) and the zero-filling ones (`…, size, %r`), by count.
fn copies(k: &str, op: &str, size: &str) -> (usize, usize) {
    let body = entry(&sm80().0, k);
    let (mut whole, mut zfill) = (0, 0);
    for o in operands(body, &format!("cp.async.{op}.shared.global")) {
        let addresses = is_reg(&o[0], "%r", true) && is_reg(&o[1], "%rd", true);
        assert!(
            addresses,
            "{k}: cp.async operands {o:?} (dst [%r], src [%rd])"
        );
        assert_eq!(o[2], size, "{k}: {o:?}");
        match o.len() {
            3 => whole += 1,
            4 if is_reg(&o[3], "%r", false) => zfill += 1,
            _ => panic!("{k}: cp.async operands {o:?}"),
        }
    }
    (whole, zfill)
}

#[test]
fn async_copies_reach_the_ptx_as_written() {
    for (k, op, size) in [
        ("cp_async_chunks_4", "ca", "4"),
        ("cp_async_chunks_8", "ca", "8"),
        ("cp_async_chunks_16", "cg", "16"),
        ("cp_async_chunks_16_ca_dyn", "ca", "16"),
    ] {
        // Two copies (slots A and B), each as a whole copy and a zero-filling one.
        assert_eq!(copies(k, op, size), (2, 2), "{k}");
        let other = if op == "ca" { "cg" } else { "ca" };
        assert!(
            !entry(&sm80().0, k).contains(&format!("cp.async.{other}.")),
            "{k}"
        );
        // The source is a .global address, the destination a 32-bit shared one.
        has(
            k,
            &["cvta.to.global.u64", "cvta.to.shared.u64", "cvt.u32.u64"],
        );
        has(k, &["isspacep.global"]);
        assert_eq!(count(k, "cp.async.commit_group;"), 2, "{k}");
        assert_eq!(count(k, "cp.async.wait_group 1;"), 1, "{k}");
        assert_eq!(count(k, "cp.async.wait_group 0;"), 1, "{k}");
    }
    // The pipeline keeps its wait counts constant: STAGES - 2 (CUTLASS's order), STAGES - 1
    // (acquire first) and 0 for the last tiles; one wait_all to drain.
    for (k, stages) in [
        ("cp_async_pipeline_2", 2u32),
        ("cp_async_pipeline_3", 3),
        ("cp_async_pipeline_4", 4),
    ] {
        let body = entry(&sm80().0, k);
        let mut waits: Vec<u32> = operands(body, "cp.async.wait_group")
            .iter()
            .map(|o| o[0].parse().unwrap())
            .collect();
        waits.sort();
        waits.dedup();
        let mut want = vec![0, stages - 2, stages - 1];
        want.dedup();
        assert_eq!(waits, want, "{k}: wait_group counts");
        assert_eq!(count(k, "cp.async.wait_all;"), 1, "{k}");
        assert!(count(k, "cp.async.commit_group;") >= 2, "{k}");
        assert!(copies(k, "cg", "16").1 >= 1, "{k}: no zero-filling copy");
    }
    has("cp_async_pipeline_3", &["cp.async.wait_group 1"]);
    // The 16-byte copies land in 16-byte aligned shared arrays (`align = 16`, 1-D and 2-D).
    let aligns: Vec<(String, usize)> = sm80()
        .0
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix(".shared .align ")?;
            let (align, decl) = rest.split_once(' ')?;
            let name = decl.split_whitespace().last()?.split('[').next()?;
            Some((name.to_string(), align.parse().ok()?))
        })
        .collect();
    for k in [
        "cp_async_chunks_16",
        "cp_async_pipeline_2",
        "cp_async_pipeline_3",
        "cp_async_pipeline_4",
        "mbarrier_cp_async_noinc",
    ] {
        let body = entry(&sm80().0, k);
        let used: Vec<&(String, usize)> = aligns
            .iter()
            .filter(|(n, _)| n.contains("STORAGE") && body.contains(n.as_str()))
            .collect();
        assert!(
            used.iter().any(|(_, a)| *a >= 16),
            "{k}: no 16-byte aligned shared array: {used:?}"
        );
    }
}

#[test]
fn mbarriers_reach_the_ptx_as_written() {
    let ptx = &sm80().0;
    // PTX 7.1 for the parity waits (the builder raises LLVM's 7.0 for sm_80).
    assert!(ptx.contains("\n.version 7.1\n"), "sm_80 PTX is not ISA 7.1");
    has(
        "mbarrier_ping_pong",
        &[
            "mbarrier.init.shared.b64",
            "mbarrier.arrive.shared.b64",
            "mbarrier.test_wait.parity.shared.b64",
        ],
    );
    // Two barriers initialised by thread 0 and published by one block barrier each.
    assert_eq!(
        operands(entry(ptx, "mbarrier_ping_pong"), "mbarrier.init.shared.b64").len(),
        2
    );
    assert_eq!(count("mbarrier_ping_pong", "bar.sync"), 2);
    has(
        "mbarrier_tokens",
        &[
            "mbarrier.arrive.shared.b64",
            "mbarrier.test_wait.shared.b64",
            "mbarrier.test_wait.parity.shared.b64",
            "mbarrier.arrive_drop.shared.b64",
            "mbarrier.inval.shared.b64",
        ],
    );
    has(
        "mbarrier_cp_async_noinc",
        &[
            "cp.async.cg.shared.global",
            "cp.async.mbarrier.arrive.noinc.shared.b64",
            "mbarrier.arrive.shared.b64",
            "mbarrier.test_wait.parity.shared.b64",
        ],
    );
    has(
        "mbarrier_cp_async",
        &[
            "cp.async.mbarrier.arrive.shared.b64",
            "mbarrier.arrive.shared.b64",
        ],
    );
    // Operands: the barrier's 32-bit shared address, the state in a 64-bit register, the
    // parity in a 32-bit one.
    let body = entry(ptx, "mbarrier_tokens");
    for o in operands(body, "mbarrier.arrive.shared.b64") {
        assert!(
            is_reg(&o[0], "%rd", false) && is_reg(&o[1], "%r", true),
            "{o:?}"
        );
    }
    for o in operands(body, "mbarrier.test_wait.parity.shared.b64") {
        assert!(
            is_reg(&o[1], "%r", true) && is_reg(&o[2], "%r", false),
            "{o:?}"
        );
    }
    for o in operands(body, "mbarrier.test_wait.shared.b64") {
        assert!(
            is_reg(&o[1], "%r", true) && is_reg(&o[2], "%rd", false),
            "{o:?}"
        );
    }
    // No sm_90 instruction or qualifier in the sm_80 build.
    for k in [
        "mbarrier_ping_pong",
        "mbarrier_tokens",
        "mbarrier_cp_async_noinc",
        "mbarrier_cp_async",
    ] {
        let body = entry(ptx, k);
        for w in [
            "try_wait",
            "expect_tx",
            ".release.",
            ".acquire.",
            "shared::cta",
        ] {
            assert!(!body.contains(w), "{k}: `{w}` in an sm_80 build");
        }
    }
    assert!(
        !ptx.contains(".entry mbarrier_expect_tx("),
        "sm_90-only kernel in sm_80"
    );
}

#[test]
fn mbarriers_spell_order_and_scope_when_built_for_sm90() {
    let (ptx, out) = sm90();
    assert!(ptx.contains("\n.version 8.0\n"), "sm_90 PTX is not ISA 8.0");
    assert!(
        sm90_part().contains("\n.version 8.0\n"),
        "sm_90 part is not ISA 8.0"
    );
    // The sm_90 build's own kernels, or the sm_90 part's (`arch = "sm_90"`).
    let body90 = |k: &str| {
        let text = if ptx.contains(&format!(".entry {k}(")) {
            ptx.as_str()
        } else {
            sm90_part()
        };
        entry(text, k)
    };
    let has90 = |k: &str, wanted: &[&str]| {
        let body = body90(k);
        for w in wanted {
            assert!(body.contains(w), "sm_90 {k}: no `{w}`");
        }
    };
    has90(
        "mbarrier_expect_tx",
        &[
            "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 ",
            "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 ",
            "mbarrier.complete_tx.relaxed.cta.shared::cta.b64 ",
            "mbarrier.arrive.release.cta.shared::cta.b64 ",
            "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 ",
            "mbarrier.test_wait.parity.acquire.cta.shared::cta.b64 ",
            "mbarrier.test_wait.acquire.cta.shared::cta.b64 ",
            "fence.proxy.async.shared::cta;",
            "fence.mbarrier_init.release.cluster;",
        ],
    );
    has90(
        "mbarrier_ping_pong",
        &[
            "mbarrier.arrive.release.cta.shared::cta.b64 ",
            // `wait` polls with try_wait on sm_90.
            "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 ",
        ],
    );
    has90(
        "mbarrier_tokens",
        &["mbarrier.arrive_drop.release.cta.shared::cta.b64 "],
    );
    // The plain forms are gone where the qualified ones exist.
    for k in [
        "mbarrier_ping_pong",
        "mbarrier_tokens",
        "mbarrier_expect_tx",
    ] {
        let body = body90(k);
        for w in [
            "mbarrier.arrive.shared.b64",
            "mbarrier.test_wait.parity.shared.b64",
        ] {
            assert!(!body.contains(w), "sm_90 {k}: unqualified `{w}`");
        }
    }
    assert_clean(out);
}

/// ptxas's registers for the asynchronous-copy and mbarrier kernels (printed; no spills and no
/// stack are checked by `assert_clean`).
#[test]
fn async_and_mbarrier_kernels_registers() {
    for (arch, out) in [("sm_80", &sm80().3), ("sm_90", &sm90().1)] {
        if out.ptxas.is_none() {
            eprintln!("ptxas report SKIPPED: no ptxas found");
            return;
        }
        let mut lines: Vec<String> = out
            .resources
            .iter()
            .filter(|r| {
                r.entry && (r.name.starts_with("cp_async_") || r.name.starts_with("mbarrier_"))
            })
            .map(|r| {
                assert_eq!(r.stack.unwrap_or(0), 0, "{arch} {}: stack", r.name);
                format!("{} {} regs", r.name, r.registers.unwrap_or(0))
            })
            .collect();
        lines.sort();
        assert!(lines.len() >= 11, "{arch}: {lines:?}");
        eprintln!(
            "async-copy and mbarrier kernels on {arch}:\n  {}",
            lines.join("\n  ")
        );
    }
}

/// The PTX of the build's `arch` part (kernels declared `#[kernel(arch = "…")]`).
fn part_ptx(arch: &str) -> String {
    std::fs::read_to_string(&sm80().3.parts[arch].ptx).unwrap()
}

/// Asserts that each of `wanted` (an instruction, as a whole token) is in `body`.
fn has_in(body: &str, what: &str, wanted: &[&str]) {
    for w in wanted {
        let found = body.match_indices(w).any(|(i, _)| {
            let after = body[i + w.len()..].chars().next();
            matches!(after, Some(' ' | '\t' | ';' | ','))
        });
        assert!(found, "{what}: no `{w}` in its PTX");
    }
}

#[test]
fn grid_barriers_arrive_with_release_and_wait_with_acquire_at_gpu_scope() {
    for k in ["grid_sync_rounds", "grid_sync_sum"] {
        // Block barrier, one thread's release arrival on the launcher's counter and its
        // acquire spin, block barrier.
        has(
            k,
            &[
                "bar.sync",
                "atom.release.gpu.global.add.u32",
                "ld.acquire.gpu.global.b32",
            ],
        );
        assert!(
            count(k, "bar.sync") >= 2,
            "{k}: a grid barrier is two block barriers"
        );
    }
    // The kernels are cooperative; the barrier is a workspace the launcher provides: one
    // uint32, not an argument.
    let m = &sm80().3.manifest;
    for name in ["grid_sync_rounds", "grid_sync_sum"] {
        let k = m.kernel(name).unwrap();
        assert_eq!(k.launch.cooperative, Some(true), "{name}");
        let bar = k.params.iter().position(|p| p.name == "bar").unwrap();
        assert_eq!(k.params[bar].kind, "scratch", "{name}");
        assert_eq!(k.params[bar].dtype, "uint32", "{name}");
        let len = k.scratch.iter().find(|s| s.param as usize == bar).unwrap();
        assert_eq!(
            (len.constant, len.per_block, len.of),
            (1, 0, None),
            "{name}"
        );
    }
    assert_eq!(
        m.kernel("grid_sync_sum").unwrap().launch.max_threads,
        Some(256)
    );
    // A manifest with cooperative (or cluster) kernels is format 3.
    assert_eq!(m.format, ferrocuda::abi::manifest::FORMAT);
    // The host reads them with the barrier left out of the arguments.
    let module = ferrocuda::Module::from_manifest_file(&sm80().2).unwrap();
    let k = module.kernel("grid_sync_rounds").unwrap();
    let args: Vec<&str> = k
        .signature()
        .params
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(args, ["buf", "errors", "rounds"]);
    assert!(k.signature().launch.cooperative);
}

#[test]
fn cluster_kernels_are_built_into_the_sm90_part_with_cluster_instructions() {
    let text = part_ptx("sm_90");
    has_in(
        entry(&text, "cluster_neighbour"),
        "cluster_neighbour",
        &[
            "barrier.cluster.arrive",
            "barrier.cluster.wait",
            "mapa.shared::cluster.u64",
            "cvta.to.shared.u64",
            "ld.shared::cluster.b32",
            "st.shared::cluster.b32",
            "%cluster_ctarank",
            "%cluster_nctarank",
            "%clusterid.x",
        ],
    );
    has_in(
        entry(&text, "cluster_sum"),
        "cluster_sum",
        &[
            "red.relaxed.cluster.shared::cluster.add.u32",
            "ld.shared::cluster.b32",
            "barrier.cluster.arrive",
            "barrier.cluster.wait",
        ],
    );
    has_in(
        entry(&text, "cluster_registers"),
        "cluster_registers",
        &[
            "%cluster_ctaid.x",
            "%cluster_ctaid.y",
            "%cluster_nctaid.x",
            "%cluster_nctaid.y",
            "%clusterid.y",
            "%nclusterid.x",
            "%nclusterid.y",
        ],
    );
    // Nothing of them in the base (sm_80) PTX, which has no cluster instruction at all.
    let base = &sm80().0;
    assert!(!base.contains("cluster_neighbour") && !base.contains("barrier.cluster"));
    let m = &sm80().3.manifest;
    for (name, shape) in [
        ("cluster_neighbour", [2, 1, 1]),
        ("cluster_sum", [4, 1, 1]),
        ("cluster_registers", [2, 2, 1]),
        ("cluster_wide", [16, 1, 1]),
    ] {
        let k = m.kernel(name).unwrap();
        assert_eq!(k.arch.as_deref(), Some("sm_90"), "{name}");
        assert_eq!(k.launch.cluster, Some(shape), "{name}");
        assert_eq!(k.launch.cooperative, None, "{name}");
        let wide = name == "cluster_wide";
        assert_eq!(
            k.launch.non_portable_cluster,
            wide.then_some(true),
            "{name}"
        );
    }
}
