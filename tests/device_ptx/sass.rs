//! The SASS checks of `tests/device_ptx.rs` (sm_90, through nvdisasm): the test kernels and
//! the bundled ones access memory in its state space, with the widths their sources ask for.

use super::*;

/// The SASS for sm_90 of the PTX file `ptx`, or `None` (saying so) without ptxas or nvdisasm.
fn sass_sm90(ptx: &Path) -> Option<Vec<SassFunction>> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let ptxas = ptxas::find(Some(&repo.join(".tools/nvcc/nvidia/cuda_nvcc")));
    let nvdisasm = sass::find(Some(&repo.join(".tools/nvdisasm/nvidia/cu13")));
    match (ptxas, nvdisasm) {
        (Some(p), Some(n)) => {
            Some(sass::disassemble(&p, &n, "sm_90", ptx).unwrap_or_else(|e| panic!("{e}")))
        }
        (p, n) => {
            eprintln!(
                "SASS check SKIPPED: ptxas {}, nvdisasm {} (scripts/ensure_ptxas.sh and \
                 scripts/ensure_nvdisasm.sh install them)",
                if p.is_some() { "found" } else { "missing" },
                if n.is_some() { "found" } else { "missing" },
            );
            None
        }
    }
}

/// The memory instructions of `f`.
fn memory_ops(f: &SassFunction) -> Vec<&str> {
    f.opcodes
        .iter()
        .map(String::as_str)
        .filter(|o| sass::space(o).is_some())
        .collect()
}

/// The function `name` of a disassembly.
fn function<'a>(sass: &'a [SassFunction], name: &str) -> &'a SassFunction {
    sass.iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no function {name} in the SASS"))
}

/// One line per kernel: its memory opcodes and their counts.
fn memory_summary(sass: &[SassFunction], kernels: &[String]) -> String {
    let mut lines = Vec::new();
    for k in kernels {
        let mut counts = std::collections::BTreeMap::<&str, usize>::new();
        for o in &function(sass, k).opcodes {
            if sass::space(o).is_some() {
                *counts.entry(o.as_str()).or_default() += 1;
            }
        }
        let ops: Vec<String> = counts.iter().map(|(o, n)| format!("{o}×{n}")).collect();
        lines.push(format!("  {k}: {}", ops.join(" ")));
    }
    lines.join("\n")
}

/// Test kernels with generic accesses, and why: atomics on generic addresses, which ptxas
/// expands with a branch per state-space window (`ATOM`, and `LD`/`ST` for the local window).
const GENERIC_ALLOWED: [(&str, &str); 5] = [
    (
        "int_atomics_u32",
        "the free function atomic::red_add on a generic address",
    ),
    (
        "int_atomics_i32",
        "the free function atomic::red_add on a generic address",
    ),
    (
        "int_atomics_u64",
        "the free function atomic::red_add on a generic address",
    ),
    (
        "int_atomics_i64",
        "the free function atomic::red_add on a generic address",
    ),
    (
        "half_atomics",
        "AtomicRef::from_ptr, a generic atomic reference",
    ),
];

#[test]
fn test_kernels_access_memory_in_its_state_space() {
    let (_, ptx_path, _, out) = sm80();
    let Some(sass) = sass_sm90(ptx_path) else {
        return;
    };
    let kernels: Vec<String> = out
        .manifest
        .kernels_of(None)
        .map(|k| k.name.clone())
        .collect();
    eprintln!(
        "memory instructions (sm_90):\n{}",
        memory_summary(&sass, &kernels)
    );
    for k in &kernels {
        let f = function(&sass, k);
        let generic = f.generic_accesses();
        match GENERIC_ALLOWED.iter().find(|(n, _)| n == k) {
            // An exception must still be one, or it is removed from the list.
            Some((_, why)) => assert!(
                generic.iter().any(|o| o.starts_with("ATOM.")),
                "{k} ({why}) has no generic atomic any more: {generic:?}"
            ),
            None => assert!(generic.is_empty(), "{k}: generic accesses {generic:?}"),
        }
        assert!(
            f.accesses(sass::Space::Local).is_empty() || local_allowed(k),
            "{k}"
        );
    }
    // Array parameters: global loads and stores; shared arrays and dynamic shared memory:
    // shared ones.
    for (k, load, store) in [
        ("vec_add", "LDG", "STG"),
        ("layout_add_f32_2d", "LDG", "STG"),
        ("gemm_naive", "LDG", "STG"),
        ("math_exp_f32", "LDG", "STG"),
        ("math_powf_f64", "LDG", "STG"),
        ("f16_arith", "LDG", "STG"),
        ("shared_isolation", "LDS", "STS"),
        ("shared_reverse", "LDS", "STS"),
        ("shared_transpose", "LDS", "STS"),
        ("gemm_tiled", "LDS", "STS"),
        ("dynamic_shared_len", "LDS", "STS"),
        ("collectives_sum_f32", "LDS", "STS"),
        ("shared_atomics", "LDS", "STS"),
    ] {
        let f = function(&sass, k);
        assert!(f.has(load) && f.has(store), "{k}: {:?}", memory_ops(f));
    }
    // The read-only cache and 16-byte vectors where the source asks for them.
    let axpy = function(&sass, "vector_axpy_nc");
    let nc_vectors = axpy.count("LDG", &["128", "CONSTANT"]);
    assert!(nc_vectors >= 1, "{:?}", memory_ops(axpy));
    assert!(
        axpy.count("LDG", &["CONSTANT"]) > nc_vectors,
        "no scalar read-only loads: {:?}",
        memory_ops(axpy)
    );
    assert!(
        axpy.count("LDG", &["128"]) > nc_vectors && axpy.has("STG.E.128"),
        "y is not read and written in vectors: {:?}",
        memory_ops(axpy)
    );
    let sums = function(&sass, "row_sums_nc");
    let coherent: Vec<&String> = sums
        .opcodes
        .iter()
        .filter(|o| o.starts_with("LDG.") && !o.contains("CONSTANT") && !o.contains("STRONG"))
        .collect();
    assert!(
        sums.has("LDG.E.CONSTANT") && coherent.is_empty(),
        "row_sums_nc: {:?}",
        memory_ops(sums)
    );
    for k in ["vector_copy_u8", "vector_copy_f64"] {
        let f = function(&sass, k);
        assert!(
            f.has("LDG.E.128") && f.has("STG.E.128"),
            "{k}: {:?}",
            memory_ops(f)
        );
        assert_eq!(f.count("LDG", &["CONSTANT"]), 0, "{k}: copies may alias");
    }
}

fn local_allowed(kernel: &str) -> bool {
    LOCAL_MEMORY_ALLOWED.contains(&kernel)
}

/// The gallery's families (`kernels/src/`: reductions, histogram, softmax, matmul, stencil,
/// scans, activations), by kernel-name prefix: each must be bundled.
const GALLERY: [&str; 13] = [
    "sum_",
    "min_",
    "max_",
    "sum_rows_",
    "histogram_",
    "softmax_",
    "log_softmax_",
    "matmul_",
    "stencil5_",
    "cumsum_",
    "gelu_",
    "silu_",
    "axpy_",
];

/// Bundled kernels allowed generic accesses, and why. None: every pointer a bundled kernel
/// dereferences derives from an array parameter or a `Scratch` workspace (marked global by the
/// kernel entry) or from a shared array (`ld.shared`); an entry here must name the access that
/// cannot be given its state space.
const BUNDLED_GENERIC_ALLOWED: [(&str, &str); 0] = [];

/// The state spaces the gallery's schedules are written for: what each family must access
/// besides its arrays' global loads and stores (`kernels/src/*.rs`, module docs).
fn gallery_spaces(sass: &[SassFunction], kernels: &[String], strided: &[String]) {
    for family in GALLERY {
        assert!(
            kernels.iter().any(|k| k.starts_with(family)),
            "no bundled gallery kernel `{family}*`: {kernels:?}"
        );
    }
    for k in kernels {
        let f = function(sass, k);
        let ops = || memory_ops(f);
        // The launcher's workspaces (`partials`, `ticket`, `status`) are global: their
        // atomics are `ATOMG`, never generic `ATOM`.
        if ["sum_", "min_", "max_", "cumsum_"]
            .iter()
            .any(|p| k.starts_with(p) && !k.starts_with("sum_rows_"))
        {
            assert!(f.has("ATOMG"), "{k}: {:?}", ops());
            assert!(
                f.has("LDS") && f.has("STS"),
                "{k}: block scratch {:?}",
                ops()
            );
        }
        if k.starts_with("cumsum_") && !k.ends_with("_i32_i64") {
            // The staged scans: every vector copied in with `cp.async` goes out whole — a
            // 16-byte store each (LLVM once split them into 8- and 4-byte stores after a
            // change to the bounds tests: 15 % slower).
            let (copies, stores) = (f.count("LDGSTS", &["128"]), f.count("STG", &["128"]));
            assert!(
                copies > 0 && stores == copies,
                "{k}: {copies} copies, {stores} stores"
            );
        }
        if k.starts_with("histogram_") {
            // Private counts in shared memory, merged with global reductions.
            assert!(f.has("ATOMS") && f.has("REDG"), "{k}: {:?}", ops());
        }
        if k.starts_with("matmul_") {
            // Shared tiles filled by `cp.async` (no shared stores), read as 16-byte vectors.
            assert!(
                f.has("LDS.128") && f.has("LDGSTS") && !f.has("STS"),
                "{k}: {:?}",
                ops()
            );
        }
        if ["softmax_", "log_softmax_", "gelu_", "silu_", "axpy_"]
            .iter()
            .any(|p| k.starts_with(p))
            && !strided.contains(k)
        {
            assert!(f.has("LDG.E.128") && f.has("STG.E.128"), "{k}: {:?}", ops());
        }
    }
}

#[test]
fn bundled_kernels_access_memory_in_its_state_space() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bundled-sm80.ptx");
    std::fs::write(&path, ferrocuda::bundled::PTX).unwrap();
    let Some(sass) = sass_sm90(&path) else {
        return;
    };
    let kernels: Vec<String> = ferrocuda_builder::ptx_entries(ferrocuda::bundled::PTX)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(kernels.len() >= 30, "{kernels:?}");
    let strided = strided::variants();
    eprintln!(
        "bundled kernels' memory instructions (sm_90):\n{}",
        memory_summary(&sass, &kernels)
    );
    for k in &kernels {
        let f = function(&sass, k);
        // Every bundled kernel writes an array parameter, and no access is generic (the
        // gallery's included, with their workspaces and shared memory) but the listed ones.
        assert!(f.has("STG") || f.has("REDG"), "{k}: {:?}", memory_ops(f));
        let generic = f.generic_accesses();
        match BUNDLED_GENERIC_ALLOWED.iter().find(|(n, _)| n == k) {
            Some((_, why)) => assert!(
                !generic.is_empty(),
                "{k} ({why}) has no generic access any more: remove it from the list"
            ),
            None => assert!(generic.is_empty(), "{k}: generic accesses {generic:?}"),
        }
        // The element-wise kernels move their aligned middle in 16-byte vectors; their
        // strided variants address each element through its own strides: element-wide
        // global loads and stores, no vectors (neighbouring elements need not be adjacent).
        if strided.contains(k) {
            assert!(
                f.has("LDG") && f.has("STG") && !f.has("LDG.E.128") && !f.has("STG.E.128"),
                "{k}: {:?}",
                memory_ops(f)
            );
        } else if k.starts_with("add_") && !k.starts_with("add_index") || k.starts_with("saxpy_") {
            assert!(
                f.has("LDG.E.128") && f.has("STG.E.128"),
                "{k}: {:?}",
                memory_ops(f)
            );
        }
    }
    assert!(function(&sass, "initialize_array").has("STG.E.128"));
    gallery_spaces(&sass, &kernels, &strided);
    let rev = function(&sass, "shared_reverse_f32");
    assert!(rev.has("LDS") && rev.has("STS") && rev.has("LDG"));
}

/// The tensor-core opcodes of `f`.
fn tensor_ops(f: &SassFunction) -> Vec<&str> {
    f.opcodes
        .iter()
        .map(String::as_str)
        .filter(|o| {
            ["HMMA", "IMMA", "DMMA", "LDSM", "STSM"].contains(&o.split('.').next().unwrap())
        })
        .collect()
}

/// The tensor-core test kernels run on the tensor cores (sm_90 SASS): `HMMA` for bf16, f16
/// and tf32 (with the shape and types in its modifiers), `IMMA` for 8-bit integers, `DMMA`
/// for f64, `LDSM` for `ldmatrix` (`.MT88` transposed), `STSM` for `stmatrix`.
#[test]
fn tensor_core_kernels_use_the_tensor_cores() {
    let (_, ptx_path, _, _) = sm80();
    let Some(sass) = sass_sm90(ptx_path) else {
        return;
    };
    for (k, mma, ldsm) in [
        (
            "mma_tile_bf16",
            "HMMA.16816.F32.BF16",
            &["LDSM.16.M88.4", "LDSM.16.MT88.2", "LDSM.16.M88.2"][..],
        ),
        (
            "mma_tile_f16",
            "HMMA.16816.F32",
            &["LDSM.16.M88.4", "LDSM.16.MT88.2", "LDSM.16.M88.2"],
        ),
        (
            "mma_tile_f16_f16acc",
            "HMMA.16816.F16",
            &["LDSM.16.M88.4", "LDSM.16.MT88.2", "LDSM.16.M88.2"],
        ),
        (
            "mma_tile_tf32",
            "HMMA.1688.F32.TF32",
            &["LDSM.16.M88.4", "LDSM.16.M88.2"],
        ),
        (
            "mma_tile_s8",
            "IMMA.16832.S8.S8",
            &["LDSM.16.M88.4", "LDSM.16.M88.2"],
        ),
        (
            "mma_tile_u8",
            "IMMA.16832.U8.U8",
            &["LDSM.16.M88.4", "LDSM.16.M88.2"],
        ),
        (
            "mma_tile_s8u8",
            "IMMA.16832.S8.U8",
            &["LDSM.16.M88.4", "LDSM.16.M88.2"],
        ),
        (
            "mma_tile_u8s8",
            "IMMA.16832.U8.S8",
            &["LDSM.16.M88.4", "LDSM.16.M88.2"],
        ),
        ("mma_tile_f64", "DMMA", &[]),
        (
            "mma_gemm_bf16",
            "HMMA.16816.F32.BF16",
            &["LDSM.16.M88.4", "LDSM.16.MT88.2"],
        ),
    ] {
        let f = function(&sass, k);
        let ops = tensor_ops(f);
        assert!(f.has(mma), "{k}: no {mma}: {ops:?}");
        for l in ldsm {
            assert!(f.has(l), "{k}: no {l}: {ops:?}");
        }
        // Exactly the source's matrix multiplies, none emulated elsewhere.
        let n = if k == "mma_gemm_bf16" { 8 } else { 1 };
        let mmas = ops
            .iter()
            .filter(|o| o.ends_with("MMA") || o.contains("MMA."))
            .count();
        assert_eq!(mmas, n, "{k}: {ops:?}");
    }
    let layouts = function(&sass, "mma_layouts");
    for op in [
        "HMMA.16816.F32.BF16",
        "HMMA.16816.F32",
        "HMMA.16816.F16",
        "HMMA.1688.F32.TF32",
        "IMMA.16832.S8.S8",
        "IMMA.16832.U8.S8",
        "DMMA",
        "LDSM.16.M88",
        "LDSM.16.MT88",
        "LDSM.16.M88.4",
        "LDSM.16.MT88.4",
    ] {
        assert!(
            layouts.has(op),
            "mma_layouts: no {op}: {:?}",
            tensor_ops(layouts)
        );
    }
    eprintln!(
        "tensor-core instructions (sm_90):\n{}",
        [
            "mma_layouts",
            "mma_tile_bf16",
            "mma_tile_tf32",
            "mma_tile_s8",
            "mma_tile_f64",
            "mma_gemm_bf16"
        ]
        .iter()
        .map(|k| format!("  {k}: {:?}", tensor_ops(function(&sass, k))))
        .collect::<Vec<_>>()
        .join("\n")
    );
    // stmatrix: the sm_90 part (`arch = "sm_90"`).
    let Some(sass90) = sass_sm90(&sm80().3.parts["sm_90"].ptx) else {
        return;
    };
    let st = function(&sass90, "mma_stmatrix");
    let ops = tensor_ops(st);
    assert!(st.has("STSM") && st.has("LDSM"), "mma_stmatrix: {ops:?}");
    assert!(
        st.accesses(sass::Space::Generic).is_empty(),
        "mma_stmatrix: {ops:?}"
    );
}

/// Whether `f` has exactly the opcode `op` (no further modifier).
fn has_exact(f: &SassFunction, op: &str) -> bool {
    f.opcodes.iter().any(|o| o == op)
}

/// `cp.async` is `LDGSTS` — `.BYPASS` for `.cg` (L2 only), `.ZFILL` for the zero-filling form,
/// the width for 8 and 16 bytes — `commit_group` is `LDGDEPBAR` and `wait_group` `DEPBAR.LE`;
/// the mbarrier instructions are `SYNCS` operations (init `SYNCS.EXCH.64`, arrive
/// `SYNCS.ARRIVE.TRANS64.A1T0`, arrive_drop `….OPTOUT.A1T0`, test_wait `SYNCS.PHASECHK.TRANS64`,
/// try_wait `….TRYWAIT`, inval `SYNCS.CCTL.IV`) and `cp.async.mbarrier.arrive` is
/// `ARRIVES.LDGSTSBAR.64` (`.ARVCNT` with `.noinc`; `.TRANSCNT` after a pending-count raise
/// otherwise). The sm_80 PTX assembled for sm_90, and the sm_90 build for the sm_90 forms.
#[test]
fn async_copies_and_mbarriers_in_sass() {
    let (_, ptx_path, _, _) = sm80();
    let Some(sass) = sass_sm90(ptx_path) else {
        return;
    };
    for (k, ldgsts) in [
        ("cp_async_chunks_4", "LDGSTS.E"),
        ("cp_async_chunks_8", "LDGSTS.E.64"),
        ("cp_async_chunks_16", "LDGSTS.E.BYPASS.128"),
        ("cp_async_chunks_16_ca_dyn", "LDGSTS.E.128"),
    ] {
        let f = function(&sass, k);
        let copies: Vec<&str> = f
            .opcodes
            .iter()
            .map(String::as_str)
            .filter(|o| o.starts_with("LDGSTS"))
            .collect();
        // The chunks past the slice's end are read by nothing (`src-size` 0: `.ZFILL`, or
        // an equivalent ptxas chooses); partial chunks are stored by the thread itself.
        let zfill = format!("{ldgsts}.ZFILL");
        assert!(
            copies.contains(&ldgsts) && copies.iter().all(|o| *o == ldgsts || *o == zfill),
            "{k}: {copies:?}"
        );
        assert!(
            f.has("LDGDEPBAR") && f.has("DEPBAR.LE"),
            "{k}: {:?}",
            f.opcodes
        );
    }
    for k in [
        "cp_async_pipeline_2",
        "cp_async_pipeline_3",
        "cp_async_pipeline_4",
    ] {
        let f = function(&sass, k);
        assert!(
            has_exact(f, "LDGSTS.E.BYPASS.128") && f.has("LDGDEPBAR") && f.has("DEPBAR.LE"),
            "{k}: {:?}",
            f.opcodes
        );
    }
    let mbarrier_ops = |f: &SassFunction| -> Vec<String> {
        f.opcodes
            .iter()
            .filter(|o| o.starts_with("SYNCS") || o.starts_with("ARRIVES"))
            .cloned()
            .collect()
    };
    for (k, wanted) in [
        (
            "mbarrier_ping_pong",
            &[
                "SYNCS.EXCH.64",
                "SYNCS.ARRIVE.TRANS64.A1T0",
                "SYNCS.PHASECHK.TRANS64",
            ][..],
        ),
        (
            "mbarrier_tokens",
            &[
                "SYNCS.EXCH.64",
                "SYNCS.ARRIVE.TRANS64.A1T0",
                "SYNCS.ARRIVE.TRANS64.OPTOUT.A1T0",
                "SYNCS.PHASECHK.TRANS64",
                "SYNCS.CCTL.IV",
            ][..],
        ),
        (
            "mbarrier_cp_async_noinc",
            &["ARRIVES.LDGSTSBAR.64.ARVCNT", "SYNCS.ARRIVE.TRANS64.A1T0"][..],
        ),
        (
            "mbarrier_cp_async",
            &[
                "ARRIVES.LDGSTSBAR.64.TRANSCNT",
                "SYNCS.ARRIVE.TRANS64.RED.A0T1",
                "SYNCS.ARRIVE.TRANS64.A1T0",
            ][..],
        ),
    ] {
        let f = function(&sass, k);
        for w in wanted {
            assert!(has_exact(f, w), "{k}: no {w} in {:?}", mbarrier_ops(f));
        }
    }
    // The sm_90 part (`arch = "sm_90"`): try_wait, the transaction counts, the proxy fence.
    let ptx90 = &sm80().3.parts["sm_90"].ptx;
    let Some(sass90) = sass_sm90(ptx90) else {
        return;
    };
    let f = function(&sass90, "mbarrier_expect_tx");
    for w in [
        "SYNCS.PHASECHK.TRANS64.TRYWAIT",
        // arrive.expect_tx, expect_tx, complete_tx
        "SYNCS.ARRIVE.TRANS64",
        "SYNCS.ARRIVE.TRANS64.RED.A0TR",
        "SYNCS.ARRIVE.TRANS64.RED.A0TX",
        "FENCE.VIEW.ASYNC.S",
    ] {
        assert!(
            has_exact(f, w),
            "mbarrier_expect_tx: no {w} in {:?}",
            mbarrier_ops(f)
        );
    }
    // The sm_90 build's own kernels: try_wait where the sm_80 build has test_wait.
    let Some(sass90) = sass_sm90(&sm90().1.ptx) else {
        return;
    };
    let f = function(&sass90, "mbarrier_ping_pong");
    assert!(
        has_exact(f, "SYNCS.PHASECHK.TRANS64.TRYWAIT"),
        "{:?}",
        mbarrier_ops(f)
    );
}

/// The bundled portable `linear` kernels (`kernels/src/linear_sm80.rs`) as the schedule says:
/// four instances of the tile loop (`cp.async` or element loads for each operand), each with
/// 32 `HMMA.16816.F32` (`.BF16` for bf16 inputs, none for f16) fed by 12 `LDSM.16.M88.4` per
/// 32 of K — no other matrix
/// instruction, none duplicated —, the copies as `LDGSTS.E.BYPASS.128.ZFILL` (one zero-filling
/// form for whole, partial and empty chunks) with `LDGDEPBAR`/`DEPBAR.LE`, the element path's
/// `LDG.E.U16` and `STS`, the epilogue's pair stores (`STG.E.64` for f32, `STG.E` for two
/// bf16); no local memory. And ptxas's report for sm_80 and sm_90: at most 128 registers
/// (`min_blocks = 2`), no spill, no stack.
#[test]
fn bundled_linear_runs_on_the_tensor_cores() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bundled-linear-sm80.ptx");
    std::fs::write(&path, ferrocuda::bundled::PTX).unwrap();
    // With them the fused-epilogue kernels (`linear_fused.rs`): the same loop, the bias read
    // in the epilogue.
    let kernels = [
        "linear_bf16_f32",
        "linear_bf16",
        "linear_f16_f32",
        "linear_f16",
        "linear_bias_bf16_f32",
        "linear_bias_bf16",
        "linear_bias_relu_bf16",
        "linear_bias_gelu_bf16",
        "linear_bias_gelu_tanh_bf16",
        "linear_bias_silu_bf16",
    ];
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match ptxas::find(Some(&repo.join(".tools/nvcc/nvidia/cuda_nvcc"))) {
        Some(p) => {
            for arch in ["sm_80", "sm_90"] {
                let report = ptxas::run(&p, arch, &path).unwrap_or_else(|e| panic!("{e}"));
                let props = ptxas::parse_report(&report, arch);
                for k in kernels {
                    let r = &props[k];
                    eprintln!("{k} [{arch}]: {:?} registers", r.registers);
                    assert!(
                        r.registers.is_some_and(|n| n <= 128)
                            && r.stack == Some(0)
                            && r.spill_stores == Some(0)
                            && r.spill_loads == Some(0),
                        "{r:?}"
                    );
                }
            }
        }
        None => eprintln!("ptxas check SKIPPED: no ptxas found"),
    }
    let Some(sass) = sass_sm90(&path) else {
        return;
    };
    for k in kernels {
        let f = function(&sass, k);
        let ops = tensor_ops(f);
        assert_eq!(f.count("HMMA", &[]), 128, "{k}: {ops:?}");
        assert_eq!(f.count("HMMA", &["16816", "F32"]), 128, "{k}: {ops:?}");
        // bf16 or f16 multiplies, as the kernel's inputs are.
        let bf16 = !k.starts_with("linear_f16");
        assert_eq!(
            f.count("HMMA", &["BF16"]),
            if bf16 { 128 } else { 0 },
            "{k}: {ops:?}"
        );
        assert_eq!(f.count("LDSM", &[]), 48, "{k}: {ops:?}");
        assert_eq!(f.count("LDSM", &["16", "M88", "4"]), 48, "{k}: {ops:?}");
        let copies: Vec<&str> = f
            .opcodes
            .iter()
            .map(String::as_str)
            .filter(|o| o.starts_with("LDGSTS"))
            .collect();
        assert!(
            !copies.is_empty() && copies.iter().all(|o| *o == "LDGSTS.E.BYPASS.128.ZFILL"),
            "{k}: {copies:?}"
        );
        assert!(
            f.has("LDGDEPBAR") && f.has("DEPBAR.LE"),
            "{k}: {:?}",
            memory_ops(f)
        );
        assert!(
            has_exact(f, "LDG.E.U16") && f.has("STS"),
            "{k}: element path {:?}",
            memory_ops(f)
        );
        let pair = if k.ends_with("_f32") {
            "STG.E.64"
        } else {
            "STG.E"
        };
        assert!(has_exact(f, pair), "{k}: no {pair} in {:?}", memory_ops(f));
        assert!(
            f.accesses(sass::Space::Local).is_empty() && f.generic_accesses().is_empty(),
            "{k}: {:?}",
            memory_ops(f)
        );
    }
}

/// ptxas, and the bundled module's sm_90a part written to `<label>-<part name>` in the
/// tests' temporary directory; `None` (said on stderr: the check is skipped) without ptxas.
fn bundled_sm90a_part(label: &str) -> Option<(PathBuf, PathBuf)> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let Some(p) = ptxas::find(Some(&repo.join(".tools/nvcc/nvidia/cuda_nvcc"))) else {
        eprintln!("ptxas check SKIPPED: no ptxas found");
        return None;
    };
    let (name, part) = ferrocuda::bundled::PART_FILES
        .iter()
        .find(|(n, _)| n.ends_with(".ptx"))
        .expect("the bundled module's sm_90a part");
    let part_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{label}-{name}"));
    std::fs::write(&part_path, part).unwrap();
    Some((p, part_path))
}

/// ptxas's report for the kernels `names` of the PTX at `path` assembled for `arch`: no
/// stack and no spill for each (their registers said on stderr).
fn assert_no_spills<'a>(
    ptxas: &Path,
    path: &Path,
    arch: &str,
    names: impl IntoIterator<Item = &'a str>,
) {
    let report = ptxas::run(ptxas, arch, path).unwrap_or_else(|e| panic!("{e}"));
    let props = ptxas::parse_report(&report, arch);
    for k in names {
        let r = &props[k];
        eprintln!("{k} [{arch}]: {:?} registers", r.registers);
        assert!(
            r.stack == Some(0) && r.spill_stores == Some(0) && r.spill_loads == Some(0),
            "{k} [{arch}]: {r:?}"
        );
    }
}

/// The SASS of the sm_90a part at `path` (assembled by `ptxas`); `None` (said on stderr: the
/// check is skipped) without nvdisasm.
fn sass_sm90a(ptxas: &Path, path: &Path) -> Option<Vec<SassFunction>> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let Some(nvdisasm) = sass::find(Some(&repo.join(".tools/nvdisasm/nvidia/cu13"))) else {
        eprintln!("SASS check SKIPPED: no nvdisasm found");
        return None;
    };
    Some(sass::disassemble(ptxas, &nvdisasm, "sm_90a", path).unwrap_or_else(|e| panic!("{e}")))
}

/// The bundled attention kernels (`kernels/src/attention/`) as their schedules say, for bf16
/// and f16, with and without `lse`: the portable ones (bundled PTX; ptxas for sm_80 and sm_90)
/// with no spill and no stack, on `HMMA.16816.F32` of their own element type only, fed by
/// `LDSM` (`.MT88` for `v`), their key tiles copied by `cp.async` (`LDGSTS.E.BYPASS.128`); the sm_90a ones (the part's PTX) with no spill and no stack, on
/// `HGMMA` of their element type only, their tiles loaded by TMA (`UTMALDG`) and waited for
/// on mbarriers (`SYNCS`), and each tile's softmax overlapped with the previous tile's
/// `P · v` as ptxas scheduled it: in the key-tile loop of each head-dimension variant, the
/// tile's exponentials (`MUFU.EX2`, 64 scores and 2 factors) lie between the wait for the
/// scores (`WARPGROUP.DEPBAR.LE gsb0, 0x1`) and the wait for `P · v` (`… 0x0`) — the
/// three-consumer kernels for D ≤ 64 included — and ptxas kept the `setmaxnreg` of the
/// producer and of the consumers (`USETMAXREG`) with the kernel's register counts.
#[test]
fn bundled_attention_runs_on_the_tensor_cores() {
    let Some((p, part_path)) = bundled_sm90a_part("attention") else {
        return;
    };
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bundled-attention.ptx");
    std::fs::write(&base, ferrocuda::bundled::PTX).unwrap();
    let portable = [
        ("attention_bf16", true),
        ("attention_f16", false),
        ("attention_lse_bf16", true),
        ("attention_lse_f16", false),
    ];
    // The two-consumer kernels have a key-tile loop for D ≤ 64 and one for D ≤ 128; those
    // with three consumers (D ≤ 64) one. Their registers after `setmaxnreg` (producer,
    // consumers): 40 and 232 with two consumers, 32 and 160 with three.
    let hopper: Vec<(String, bool, Vec<usize>, [u32; 2])> = portable
        .iter()
        .flat_map(|(k, bf)| {
            [
                (format!("{k}_sm90"), *bf, vec![66, 66], [40, 232]),
                (format!("{k}_d64_sm90"), *bf, vec![66], [32, 160]),
            ]
        })
        .collect();
    for arch in ["sm_80", "sm_90"] {
        assert_no_spills(&p, &base, arch, portable.iter().map(|(k, _)| *k));
    }
    assert_no_spills(
        &p,
        &part_path,
        "sm_90a",
        hopper.iter().map(|(k, ..)| k.as_str()),
    );
    let Some(sass) = sass_sm90(&base) else {
        return;
    };
    for (k, bf) in portable {
        let f = function(&sass, k);
        let ops = tensor_ops(f);
        let all = f.count("HMMA", &[]);
        assert!(all > 0, "{k}: {ops:?}");
        assert_eq!(f.count("HMMA", &["16816", "F32"]), all, "{k}: {ops:?}");
        assert_eq!(
            f.count("HMMA", &["BF16"]),
            if bf { all } else { 0 },
            "{k}: {ops:?}"
        );
        assert!(
            f.count("LDSM", &["MT88"]) > 0 && f.count("LDSM", &["M88", "4"]) > 0,
            "{k}: {ops:?}"
        );
        // The key tiles by `cp.async` (16 bytes, `.cg`: L2 only), the fallback by element
        // loads.
        assert!(
            f.count("LDGSTS", &["BYPASS", "128"]) > 0 && f.has("LDG"),
            "{k}: {:?}",
            f.opcodes
                .iter()
                .filter(|o| o.starts_with("LDG"))
                .collect::<Vec<_>>()
        );
    }
    let sass90a = sass_sm90a(&p, &part_path).expect("nvdisasm (found above)");
    for (k, bf, loops, regs) in &hopper {
        let f = function(&sass90a, k);
        let gmma = f.count("HGMMA", &[]);
        let opcodes: Vec<&str> = f
            .opcodes
            .iter()
            .map(String::as_str)
            .filter(|o| o.starts_with("HGMMA") || o.starts_with("HMMA"))
            .collect();
        assert!(gmma > 0 && !f.has("HMMA"), "{k}: {opcodes:?}");
        assert_eq!(
            f.count("HGMMA", &["BF16"]),
            if *bf { gmma } else { 0 },
            "{k}: {opcodes:?}"
        );
        assert_eq!(
            &overlapped_exponentials(f),
            loops,
            "{k}: MUFU.EX2 between each `DEPBAR.LE gsb0, 0x1` and the next `… 0x0`"
        );
        assert!(
            f.has("UTMALDG") && f.has("SYNCS"),
            "{k}: {:?}",
            memory_ops(f)
        );
        // ptxas kept both `setmaxnreg`s with their counts: a dropped `dec` would leave the
        // consumers' `inc` waiting for registers nobody frees (a hang, no spill).
        assert_eq!(
            set_max_registers(f),
            [("DEALLOC", regs[0]), ("TRY_ALLOC", regs[1])],
            "{k}: USETMAXREG"
        );
    }
}

/// The `USETMAXREG` instructions of `f`: their kind (`DEALLOC`, `TRY_ALLOC`) and register
/// count (the last operand), sorted by kind.
fn set_max_registers(f: &SassFunction) -> Vec<(&'static str, u32)> {
    let mut out: Vec<(&'static str, u32)> = f
        .opcodes
        .iter()
        .zip(&f.operands)
        .filter(|(o, _)| o.starts_with("USETMAXREG"))
        .map(|(o, args)| {
            let kind = if o.contains(".DEALLOC") {
                "DEALLOC"
            } else if o.contains(".TRY_ALLOC") {
                "TRY_ALLOC"
            } else {
                "other"
            };
            let last = args.rsplit(',').next().unwrap_or("").trim();
            let n = u32::from_str_radix(last.trim_start_matches("0x"), 16).unwrap_or(0);
            (kind, n)
        })
        .collect();
    out.sort();
    out
}

/// For each `WARPGROUP.DEPBAR.LE gsb0, 0x1` of `f` (wait until one `wgmma` group is left in
/// flight), the `MUFU.EX2` instructions before the next `WARPGROUP.DEPBAR.LE gsb0, 0x0` (wait
/// for all): the exponentials that run while the last group issued is on the tensor cores.
fn overlapped_exponentials(f: &SassFunction) -> Vec<usize> {
    let mut windows = Vec::new();
    let mut open: Option<usize> = None;
    for (op, args) in f.opcodes.iter().zip(&f.operands) {
        if op == "WARPGROUP.DEPBAR.LE" {
            match args.replace(' ', "").as_str() {
                "gsb0,0x1" => open = Some(0),
                "gsb0,0x0" => windows.extend(open.take()),
                _ => {}
            }
        } else if op == "MUFU.EX2" {
            if let Some(n) = open.as_mut() {
                *n += 1;
            }
        }
    }
    windows
}

/// The bundled sm_90a `linear` kernels (`kernels/src/linear.rs`) for each input type —
/// bf16, f16 and TF32 (`linear_tf32_sm90`) — and the fused-epilogue ones: ptxas for sm_90a
/// finds no spill and no stack, and each runs on `HGMMA` of its input type only (`.BF16`,
/// `.TF32`, neither for f16), no `HMMA`, its tiles loaded by TMA (`UTMALDG`) and waited for on
/// mbarriers (`SYNCS`).
#[test]
fn bundled_linear_sm90a_kernels_run_on_wgmma() {
    let Some((p, part_path)) = bundled_sm90a_part("linear") else {
        return;
    };
    let kernels = [
        ("linear_bf16_f32_sm90", "BF16"),
        ("linear_bf16_sm90", "BF16"),
        ("linear_f16_f32_sm90", "F16"),
        ("linear_f16_sm90", "F16"),
        // (the SASS spells f16 inputs with no suffix: `HGMMA.64x256x16.F32`)
        ("linear_tf32_sm90", "TF32"),
        ("linear_bias_gelu_bf16_sm90", "BF16"),
    ];
    assert_no_spills(&p, &part_path, "sm_90a", kernels.iter().map(|(k, _)| *k));
    let Some(sass90a) = sass_sm90a(&p, &part_path) else {
        return;
    };
    for (k, ty) in kernels {
        let f = function(&sass90a, k);
        let gmma = f.count("HGMMA", &[]);
        let opcodes: Vec<&str> = f
            .opcodes
            .iter()
            .map(String::as_str)
            .filter(|o| o.starts_with("HGMMA") || o.starts_with("HMMA"))
            .collect();
        assert!(gmma > 0 && !f.has("HMMA"), "{k}: {opcodes:?}");
        for other in ["BF16", "TF32"] {
            let want = if other == ty { gmma } else { 0 };
            assert_eq!(f.count("HGMMA", &[other]), want, "{k}: {opcodes:?}");
        }
        assert!(
            f.has("UTMALDG") && f.has("SYNCS"),
            "{k}: {:?}",
            memory_ops(f)
        );
    }
}

/// `matmul_f32` (the `matmul` family's one kernel, bundled PTX): no stack or spill on sm_80
/// and sm_90; on sm_90 the tiles copied by 4-byte `cp.async` (`LDGSTS.E`, `.ZFILL` where
/// predicated off) with no shared store anywhere (no register staging), one predicated arm of
/// copies per issue point (no branch around them), one `DEPBAR.LE` wait and one barrier per
/// `k` tile in each of the seven instances — the block's (`BAR.SYNC 0x0`) in the three of
/// 128×256 tiles, the group's own (`BAR.SYNC R, 0x80`: 128 threads) in the four of 128×128 —
/// and each instance's 8 `k` unrolled: 1024 `FFMA` between waits.
#[test]
fn bundled_matmul_copies_asynchronously() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let Some(p) = ptxas::find(Some(&repo.join(".tools/nvcc/nvidia/cuda_nvcc"))) else {
        eprintln!("ptxas check SKIPPED: no ptxas found");
        return;
    };
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bundled-matmul.ptx");
    std::fs::write(&base, ferrocuda::bundled::PTX).unwrap();
    let k = "matmul_f32";
    for arch in ["sm_80", "sm_90"] {
        assert_no_spills(&p, &base, arch, [k]);
    }
    let Some(sass) = sass_sm90(&base) else {
        return;
    };
    let f = function(&sass, k);
    let ops: Vec<&str> = f.opcodes.iter().map(String::as_str).collect();
    let copies: Vec<&str> = ops
        .iter()
        .copied()
        .filter(|o| o.starts_with("LDGSTS"))
        .collect();
    assert!(
        copies.contains(&"LDGSTS.E")
            && copies
                .iter()
                .all(|o| *o == "LDGSTS.E" || *o == "LDGSTS.E.ZFILL"),
        "{k}: {copies:?}"
    );
    // One predicated arm per issue point (no whole-tile branch around the copies), three
    // issue points per instance (two tiles before the loop, one in it): three instances of
    // 128×256 tiles (copy mappings; 12 copies per thread: 128 × 8 + 256 × 8 values over 256
    // threads) and four of 128×128 (16 copies: 2 × 128 × 8 values over 128 threads).
    assert_eq!(
        copies.len(),
        3 * 3 * 12 + 4 * 3 * 16,
        "{k}: the copies: {copies:?}"
    );
    assert!(
        !ops.iter().any(|o| o.starts_with("STS")) && f.has("LDS.128"),
        "{k}: {ops:?}"
    );
    // Per instance: the prologue's wait and one per loop step; a barrier after each, one
    // after each tile of C.
    let (waits, ffma) = (f.count("DEPBAR", &["LE"]), f.count("FFMA", &[]));
    assert!(f.has("LDGDEPBAR") && waits >= 14, "{k}: {waits} waits");
    assert!(ffma >= 7 * 1024, "{k}: {ffma} FFMA");
    // The barriers: the prologue's, the loop's and the epilogue's, per instance.
    let bars: Vec<&str> = f
        .opcodes
        .iter()
        .zip(&f.operands)
        .filter(|(o, _)| o.starts_with("BAR.SYNC"))
        .map(|(_, a)| a.as_str())
        .collect();
    let whole = bars.iter().filter(|a| **a == "0x0").count();
    let group = bars
        .iter()
        .filter(|a| a.starts_with('R') && a.ends_with(", 0x80"))
        .count();
    assert!(
        whole == 3 * 3 && group == 4 * 3 && bars.len() == whole + group,
        "{k}: barriers {bars:?}"
    );
}
