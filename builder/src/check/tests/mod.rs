//! Tests of the PTX rules on hand-written PTX and canned ptxas reports.

use super::ptxas::{check_report, parse_report};
use super::*;

mod asynchronous;

const HEADER: &str = ".version 7.0\n.target sm_80\n.address_size 64\n";

/// An entry with two array parameters around `body`.
fn entry(name: &str, body: &str) -> String {
    format!(
        "{HEADER}\n.visible .entry {name}(\n\t.param .align 8 .b8 {name}_param_0[16],\n\t\
         .param .align 8 .b8 {name}_param_1[16]\n)\n{{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<9>;\n\t\
         .reg .b64 %rd<9>;\n{body}\n}}\n"
    )
}

/// `%p1` = (tid.x >= len of param 0).
const TID_PREDICATE: &str = "\
\tld.param.b64 %rd1, [k_param_0+8];
\tmov.u32 %r1, %tid.x;
\tcvt.u64.u32 %rd2, %r1;
\tsetp.le.u64 %p1, %rd1, %rd2;";

fn rules(c: &TextCheck) -> Vec<(String, Rule, Severity)> {
    c.findings
        .iter()
        .map(|f| (f.function.clone().unwrap_or_default(), f.rule, f.severity))
        .collect()
}

fn barrier_findings(body: &str) -> Vec<Finding> {
    check_text(&entry("k", body))
        .findings
        .into_iter()
        .filter(|f| f.rule == Rule::Barrier)
        .collect()
}

#[test]
fn duplicated_barrier_in_divergent_arms_is_refused() {
    let body = format!(
        "{TID_PREDICATE}
\t@%p1 bra $L__BB0_2;
\tld.param.b64 %rd3, [k_param_0];
\tshl.b64 %rd4, %rd2, 2;
\tadd.s64 %rd5, %rd3, %rd4;
\tld.b32 %r2, [%rd5];
\tbar.sync 0;
\tld.param.b64 %rd6, [k_param_1];
\tadd.s64 %rd7, %rd6, %rd4;
\tst.b32 [%rd7], %r2;
\tbra.uni $L__BB0_3;
$L__BB0_2:
\tbar.sync 0;
$L__BB0_3:
\tret;"
    );
    let found = barrier_findings(&body);
    assert_eq!(found.len(), 2, "{found:#?}");
    for f in &found {
        assert_eq!(f.severity, Severity::Error);
        assert!(
            f.message.contains("%p1 derives from %tid.x"),
            "{}",
            f.message
        );
        assert!(f.message.contains("rust-lang/rust#137086"), "{}", f.message);
        assert!(f.message.contains("`@%p1 bra $L__BB0_2`"), "{}", f.message);
    }
}

#[test]
fn one_barrier_after_the_join_passes() {
    let body = format!(
        "{TID_PREDICATE}
\t@%p1 bra $L__BB0_2;
\tld.param.b64 %rd3, [k_param_0];
\tld.b32 %r2, [%rd3];
$L__BB0_2:
\tbar.sync 0;
\t@%p1 bra $L__BB0_4;
\tld.param.b64 %rd6, [k_param_1];
\tst.b32 [%rd6], %r2;
$L__BB0_4:
\tret;"
    );
    assert_eq!(barrier_findings(&body), []);
}

#[test]
fn uniform_branches_pass() {
    for (pred, bra) in [
        (
            "mov.u32 %r1, %ctaid.x;\n\tsetp.eq.s32 %p1, %r1, 0;",
            "@%p1 bra",
        ),
        (
            "mov.u32 %r1, %ntid.x;\n\tsetp.lt.u32 %p1, %r1, 64;",
            "@%p1 bra",
        ),
        (
            "ld.param.b64 %rd1, [k_param_0+8];\n\tsetp.eq.s64 %p1, %rd1, 0;",
            "@%p1 bra",
        ),
        (
            "mov.u32 %r1, %tid.x;\n\tsetp.eq.s32 %p1, %r1, 0;",
            "@%p1 bra.uni",
        ),
    ] {
        let body = format!("\t{pred}\n\t{bra} $L__BB0_2;\n\tbar.sync 0;\n$L__BB0_2:\n\tret;");
        assert_eq!(barrier_findings(&body), [], "{body}");
    }
}

/// A grid-wide barrier as `GridBarrier::sync` compiles: a block barrier, thread 0 arrives on
/// the counter (a release atomic) and spins on an acquire load until the generation bit flips,
/// a block barrier.
const GRID_SYNC: &str = "\
\tbar.sync 0;
\tmov.u32 %r1, %tid.x;
\tsetp.ne.b32 %p2, %r1, 0;
\t@%p2 bra $L__BB0_3;
\tld.param.b64 %rd3, [k_param_1];
\tmov.u32 %r2, %ctaid.x;
\tsetp.eq.b32 %p3, %r2, 0;
\tselp.b32 %r3, -2147483647, 1, %p3;
\tcvta.to.global.u64 %rd4, %rd3; atom.release.gpu.global.add.u32 %r4, [%rd4], %r3;
$L__BB0_2:
\tcvta.to.global.u64 %rd5, %rd3; ld.acquire.gpu.global.b32 %r5, [%rd5];
\txor.b32 %r6, %r5, %r4;
\tsetp.gt.s32 %p3, %r6, -1;
\t@%p3 bra $L__BB0_2;
$L__BB0_3:
\tbar.sync 0;";

#[test]
fn grid_barriers_pass_where_block_barriers_do() {
    // In uniform control flow: the thread-0 branch and the data-dependent spin loop hold no
    // barrier (both block barriers are outside them), so nothing is reported.
    assert_eq!(barrier_findings(&format!("{GRID_SYNC}\n\tret;")), []);
    // Twice in a row, and in a loop whose trip count is a kernel parameter (uniform).
    let twice = format!("{GRID_SYNC}\n{}\n\tret;", GRID_SYNC.replace("BB0_", "BB1_"));
    assert_eq!(barrier_findings(&twice), []);
    let looped = format!(
        "\tld.param.b64 %rd7, [k_param_0+8];\n\tmov.b64 %rd8, 0;\n$L__BB2_1:\n{GRID_SYNC}\n\t\
         add.s64 %rd8, %rd8, 1;\n\tsetp.lt.u64 %p1, %rd8, %rd7;\n\t@%p1 bra $L__BB2_1;\n\tret;"
    );
    assert_eq!(barrier_findings(&looped), []);
    // Under a thread-dependent branch: both of its block barriers are refused, as any barrier
    // there is.
    let divergent =
        format!("{TID_PREDICATE}\n\t@%p1 bra $L__BB9_9;\n{GRID_SYNC}\n$L__BB9_9:\n\tret;");
    let found = barrier_findings(&divergent);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found
        .iter()
        .all(|f| f.severity == Severity::Error && f.message.contains("%p1 derives from %tid.x")));
}

#[test]
fn cluster_barriers_are_barriers_too() {
    let sync = "\tbarrier.cluster.arrive;\n\tbarrier.cluster.wait;";
    // Uniform: passes (a branch on the cluster's size is uniform).
    let uniform = format!(
        "\tmov.u32 %r1, %cluster_nctarank;\n\tsetp.eq.b32 %p1, %r1, 0;\n\t@%p1 bra \
         $L__BB0_2;\n{sync}\n$L__BB0_2:\n\tret;"
    );
    assert_eq!(barrier_findings(&uniform), []);
    // Under a thread-dependent branch: both halves refused.
    let divergent = format!("{TID_PREDICATE}\n\t@%p1 bra $L__BB0_2;\n{sync}\n$L__BB0_2:\n\tret;");
    assert_eq!(barrier_findings(&divergent).len(), 2);
}

#[test]
fn every_shape_of_a_conditional_barrier_is_refused() {
    let cases = [
        // One barrier, skipped by the threads past the end.
        format!("{TID_PREDICATE}\n\t@%p1 bra $L__BB0_2;\n\tbar.sync 0;\n$L__BB0_2:\n\tret;"),
        // Early return of some threads.
        format!("{TID_PREDICATE}\n\t@%p1 ret;\n\tbarrier.sync 1;\n\tret;"),
        // A guarded barrier.
        format!("{TID_PREDICATE}\n\t@%p1 bar.sync 0;\n\tret;"),
        // bar.arrive / bar.red under the branch.
        format!("{TID_PREDICATE}\n\t@%p1 bra $L__BB0_2;\n\tbar.arrive 1, 64;\n$L__BB0_2:\n\tret;"),
        format!(
            "{TID_PREDICATE}\n\t@%p1 bra $L__BB0_2;\n\tbar.red.popc.u32 %r3, 0, %p1;\n$L__BB0_2:\n\tret;"
        ),
        // Through a value set differently on the two sides of a divergent branch (a φ).
        "\tmov.u32 %r1, %laneid;\n\tsetp.lt.u32 %p1, %r1, 16;\n\t@%p1 bra $L1;\n\tmov.b32 %r5, 0;\n\t\
         bra.uni $L2;\n$L1:\n\tmov.b32 %r5, 1;\n$L2:\n\tsetp.eq.s32 %p2, %r5, 0;\n\t@%p2 bra $L3;\n\t\
         bar.sync 0;\n$L3:\n\tret;"
            .to_string(),
    ];
    for body in &cases {
        let found = barrier_findings(body);
        assert_eq!(found.len(), 1, "{body}\n{found:#?}");
        assert_eq!(found[0].severity, Severity::Error, "{body}");
        assert!(!found[0].message.contains("137086"), "{}", found[0].message);
    }
}

#[test]
fn a_barrier_inside_a_called_function_counts() {
    let ptx = format!(
        "{HEADER}\n.func sync_all()\n{{\n\tbar.sync 0;\n\tret;\n}}\n\
         .visible .entry k(\n\t.param .align 8 .b8 k_param_0[16]\n)\n{{\n{TID_PREDICATE}\n\t\
         @%p1 bra $L__BB1_2;\n\t{{ // callseq 0, 0\n\tcall.uni sync_all, ();\n\t}} // callseq 0\n\
         $L__BB1_2:\n\tret;\n}}\n"
    );
    let c = check_text(&ptx);
    let found: Vec<&Finding> = c
        .findings
        .iter()
        .filter(|f| f.rule == Rule::Barrier)
        .collect();
    assert_eq!(found.len(), 1, "{:#?}", c.findings);
    assert_eq!(found[0].function.as_deref(), Some("k"));
    assert!(
        found[0].message.contains("call.uni sync_all"),
        "{}",
        found[0].message
    );
}

#[test]
fn data_dependent_branches_are_reported_as_warnings() {
    let body = "\tld.param.b64 %rd1, [k_param_0];\n\tld.global.b32 %r1, [%rd1];\n\t\
                setp.eq.s32 %p1, %r1, 0;\n\t@%p1 bra $L__BB0_2;\n\tbar.sync 0;\n$L__BB0_2:\n\tret;";
    let found = barrier_findings(body);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].severity, Severity::Warning);
    assert!(
        found[0].message.contains("a loaded value (line"),
        "{}",
        found[0].message
    );
}

#[test]
fn uniform_loops_with_divergent_ifs_and_bounds_traps_pass() {
    // A tree reduction: `if t < s { … }` inside, the barrier after it, s from %ntid.
    let reduction = "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %ntid.x;\n\tshr.u32 %r3, %r2, 1;\n\
                     $L_loop:\n\tsetp.ge.u32 %p1, %r1, %r3;\n\t@%p1 bra $L_skip;\n\t\
                     ld.shared.f32 %r4, [%rd1];\n\tst.shared.f32 [%rd1], %r4;\n$L_skip:\n\t\
                     bar.sync 0;\n\tshr.u32 %r3, %r3, 1;\n\tsetp.ne.s32 %p2, %r3, 0;\n\t\
                     @%p2 bra $L_loop;\n\tret;";
    assert_eq!(barrier_findings(reduction), []);
    // A thread-dependent bounds check that traps: aborting threads never reach a barrier.
    let trap = format!(
        "{TID_PREDICATE}\n\t@%p1 bra $L__BB0_2;\n\tbar.sync 0;\n\tret;\n$L__BB0_2:\n\ttrap;\n\texit;"
    );
    assert_eq!(barrier_findings(&trap), []);
    // The same through an out-of-line panic function (the bounds check of a `Slice`), after
    // whose call LLVM emits an `exit` that is never executed: still an abort.
    let via_call = format!(
        "{HEADER}\n.func oob()\n{{\n\ttrap;\n\texit;\n}}\n\
         .visible .entry k(\n\t.param .align 8 .b8 k_param_0[16]\n)\n{{\n\t.reg .pred %p<4>;\n\t\
         .reg .b32 %r<9>;\n\t.reg .b64 %rd<9>;\n{TID_PREDICATE}\n\t@%p1 bra $L__BB0_2;\n\t\
         bar.sync 0;\n\tret;\n$L__BB0_2:\n\t{{ // callseq 0, 0\n\tcall.uni oob, ();\n\t}} \
         // callseq 0\n\texit;\n\ttrap; exit;\n}}\n"
    );
    let found: Vec<Finding> = check_text(&via_call)
        .findings
        .into_iter()
        .filter(|f| f.rule == Rule::Barrier)
        .collect();
    assert_eq!(found, []);
    // The same through a function that never returns: LLVM ends the path with
    // `exit; trap; exit;` after the call.
    let noreturn = format!(
        "{TID_PREDICATE}\n\t@%p1 bra $L__BB0_2;\n\tbar.sync 0;\n\tret;\n$L__BB0_2:\n\t\
         {{ // callseq 0, 0\n\tcall.uni abort, ();\n\t}} // callseq 0\n\texit;\n\ttrap; exit;"
    );
    assert_eq!(barrier_findings(&noreturn), []);
    // A plain `exit` is a normal end: a barrier after the join of a thread-dependent early
    // exit is refused.
    let early_exit =
        format!("{TID_PREDICATE}\n\t@%p1 bra $L__BB0_2;\n\tbar.sync 0;\n$L__BB0_2:\n\texit;");
    assert_eq!(barrier_findings(&early_exit).len(), 1);
    // A loop whose trip count depends on the thread, with a barrier inside: refused.
    let loop_ = "\tmov.u32 %r1, %tid.x;\n$L_top:\n\tbar.sync 0;\n\tadd.s32 %r1, %r1, 32;\n\t\
                 setp.lt.u32 %p1, %r1, 1000;\n\t@%p1 bra $L_top;\n\tret;";
    assert_eq!(barrier_findings(loop_).len(), 1);
}

#[test]
fn externs() {
    let ptx = format!(
        "{HEADER}\n.extern .func (.param .b32 func_retval0) cbrtf\n(\n\t.param .b32 cbrtf_param_0\n)\n;\n\
         .extern .func helper\n(\n)\n;\n.extern .func (.param .b32 func_retval0) __nv_nope\n(\n\t.param .b32 p\n)\n;\n\
         .extern .global .align 4 .b8 table[];\n.extern .shared .align 16 .b8 __ferrocuda_dynamic_shared[];\n\
         .extern .func (.param .b32 func_retval0) vprintf\n(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n)\n;\n\
         .visible .entry k()\n{{\n\t{{ // callseq 0, 0\n\tcall.uni helper, ();\n\t}} // callseq 0\n\t\
         {{ // callseq 1, 0\n\tcall.uni (retval0), vprintf, (param0, param1);\n\t}} // callseq 1\n\tret;\n}}\n"
    );
    let c = check_text(&ptx);
    let msgs: Vec<String> = c.findings.iter().map(|f| f.to_string()).collect();
    assert_eq!(c.findings.len(), 5, "{msgs:#?}");
    assert!(c
        .findings
        .iter()
        .all(|f| f.rule == Rule::Extern && f.severity == Severity::Error));
    let all = msgs.join("\n");
    assert!(
        all.contains("cbrtf: extern")
            && all.contains("ferrocuda_device::math")
            && all.contains("__nv_cbrtf"),
        "{all}"
    );
    assert!(
        all.contains("`__nv_nope` is not a libdevice function"),
        "{all}"
    );
    assert!(
        all.contains("`helper` is declared but defined nowhere"),
        "{all}"
    );
    assert!(
        all.contains("k: extern: calls the unresolved function `helper`"),
        "{all}"
    );
    assert!(
        all.contains(".extern .global .align 4 .b8 table[]"),
        "{all}"
    );
    assert!(
        !all.contains("__ferrocuda_dynamic_shared"),
        "dynamic shared memory is allowed:\n{all}"
    );
}

const PANIC_FN: &str = "_RNvNtCsgJ6ytTPJmYV_4core9panicking18panic_bounds_check";

#[test]
fn panic_machinery() {
    let ptx = format!(
        "{HEADER}\n.func {PANIC_FN}\n(\n\t.param .b64 p0\n)\n.noreturn;\n\
         .visible .entry gather(\n\t.param .u64 gather_param_0\n)\n{{\n\t{{ // callseq 0, 0\n\t\
         .param .b64 param0;\n\tcall.uni {PANIC_FN}, (param0);\n\t}} // callseq 0\n\ttrap; exit;\n}}\n\
         .func {PANIC_FN}(\n\t.param .b64 p0\n)\n.noreturn\n{{\n$L__BB2_1:\n\tbra.uni $L__BB2_1;\n}}\n\
         // call.uni _ZN4core9panicking5panic, (param0);\n\
         .visible .entry legacy()\n{{\n\tcall.uni\n\t_ZN4core9panicking5panic17h0123456789abcdefE,\n\t(\n\tparam0\n\t);\n\tret;\n}}\n"
    );
    let c = check_text(&ptx);
    let got: Vec<(String, Rule, Severity)> = rules(&c);
    // The kernels that reach the machinery, each once; not the machinery's own definition.
    assert_eq!(
        got,
        [
            ("gather".into(), Rule::Panic, Severity::Error),
            ("legacy".into(), Rule::Panic, Severity::Error),
        ],
        "{:#?}",
        c.findings
    );
    assert!(
        c.findings[0]
            .message
            .contains("`core::panicking::panic_bounds_check`"),
        "{}",
        c.findings[0]
    );
    assert!(
        c.findings[1]
            .message
            .contains("`legacy` → `core::panicking::panic`"),
        "{}",
        c.findings[1]
    );
    assert_eq!(c.entries(), ["gather", "legacy"]);
}

#[test]
fn panic_is_decided_by_calls_not_names() {
    // A kernel named after panics, calling a helper that reaches the machinery two calls down;
    // a kernel with "panic" in its name that reaches nothing; a user function named `panic`.
    let ptx = format!(
        "{HEADER}\n.func {PANIC_FN}(\n\t.param .b64 p0\n)\n.noreturn\n{{\n\ttrap;\n}}\n\
         .func _RNvCs1_2uc5inner()\n{{\n\tcall.uni {PANIC_FN}, (param0);\n\tret;\n}}\n\
         .func _RNvCs1_2uc5outer()\n{{\n\tcall.uni _RNvCs1_2uc5inner, ();\n\tret;\n}}\n\
         .func _RNvCs1_2uc5panic()\n{{\n\tret;\n}}\n\
         .visible .entry panic_free_sum()\n{{\n\tcall.uni _RNvCs1_2uc5panic, ();\n\tret;\n}}\n\
         .visible .entry deep()\n{{\n\tcall.uni _RNvCs1_2uc5outer, ();\n\tret;\n}}\n"
    );
    let c = check_text(&ptx);
    assert_eq!(
        rules(&c),
        [("deep".to_string(), Rule::Panic, Severity::Error)],
        "{:#?}",
        c.findings
    );
    assert!(
        c.findings[0]
            .message
            .contains("`deep` → `uc::outer` → `uc::inner` → `core::panicking::panic_bounds_check`"),
        "{}",
        c.findings[0]
    );
}

#[test]
fn panic_text_and_byte_arrays() {
    let arr = |name: &str, text: &[u8]| {
        let list: Vec<String> = text.iter().map(u8::to_string).collect();
        format!(
            ".global .align 1 .b8 {name}[{}] = {{{}}};\n",
            text.len(),
            list.join(", ")
        )
    };
    let ptx = format!(
        "{HEADER}{}{}{}.visible .entry k()\n{{\n\tret;\n}}\n",
        arr("anon_$_5e74_$_0", b"src/lib.rs"),
        arr("anon_$_23dc_$_128", b" index out of bounds: the len is "),
        arr("__ferrocuda_manifest__k", b"FCK2\x01k\x01k\x00\x00\x00\x00"),
    );
    let c = check_text(&ptx);
    assert_eq!(c.findings.len(), 2, "{:#?}", c.findings);
    assert!(c.findings.iter().all(|f| f.rule == Rule::PanicText));
    assert_eq!(
        byte_arrays(&ptx)[0],
        ("anon_$_5e74_$_0".to_string(), b"src/lib.rs".to_vec())
    );
    assert_eq!(ptx_target(&ptx).as_deref(), Some("sm_80"));
    // A module with the trap record keeps source paths for it; messages are still refused.
    let with_record = format!(
        "{ptx}.visible .global .align 8 .b8 {}[8];\n",
        ferrocuda_abi::diag::TRAP_RECORD_SYMBOL
    );
    let c = check_text(&with_record);
    assert_eq!(c.findings.len(), 1, "{:#?}", c.findings);
    assert!(c.findings[0].message.contains("panic message"));
    assert!(panic_text(b"0001020304050607").is_none());
    assert!(panic_text(b"attempt to add with overflow").is_some());
    assert!(panic_text(b"/rustc/abc/library/core/src/num/mod.rs").is_some());
    assert!(panic_text(b"called `Option::unwrap()` on a `None` value").is_some());
    assert!(panic_text(b"x.rsa").is_none());
}

#[test]
fn panic_text_names_the_kernel_and_the_instruction_that_uses_it() {
    let text = b" index out of bounds: the len is ";
    let list: Vec<String> = text.iter().map(u8::to_string).collect();
    // A message read by a helper that a kernel calls, and a source path read through a
    // panic location record (rustc's `generic(…)` initializer), by another kernel.
    let ptx = format!(
        "{HEADER}.global .align 1 .b8 anon_msg[{}] = {{{}}};
         .global .align 1 .b8 anon_path[10] = {{115, 114, 99, 47, 108, 105, 98, 46, 114, 115}};
         .global .align 8 .u64 anon_loc[2] = {{generic(anon_path), 10}};
         .func helper()
{{
	.reg .b64 %rd<3>;
	mov.u64 %rd1, anon_msg;
	ret;
}}
         .visible .entry calls_it()
{{
	call.uni helper, ();
	ret;
}}
         .visible .entry reads_loc()
{{
	.reg .b64 %rd<3>;
	mov.u64 %rd1, 0;
	         ld.global.u64 %rd2, [anon_loc+8];
	ret;
}}
         .visible .entry clean()
{{
	ret;
}}
",
        text.len(),
        list.join(", ")
    );
    let c = check_text(&ptx);
    let found: Vec<(Option<&str>, Option<usize>, &str)> = c
        .findings
        .iter()
        .map(|f| (f.function.as_deref(), f.line, f.message.as_str()))
        .collect();
    assert_eq!(found.len(), 2, "{found:#?}");
    let line_of = |needle: &str| ptx.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert_eq!(found[0].0, Some("calls_it"), "{found:#?}");
    assert_eq!(found[0].1, Some(line_of("mov.u64 %rd1, anon_msg")));
    assert!(found[0].2.contains("used by `helper`"), "{}", found[0].2);
    assert_eq!(found[1].0, Some("reads_loc"), "{found:#?}");
    assert_eq!(found[1].1, Some(line_of("[anon_loc+8]")));
    // An array that no instruction names is still refused, naming no kernel.
    let unused = ptx.replace("mov.u64 %rd1, anon_msg;", "mov.u64 %rd1, 0;");
    let c = check_text(&unused);
    assert!(
        c.findings
            .iter()
            .any(|f| f.function.is_none() && f.message.contains("anon_msg")),
        "{:#?}",
        c.findings
    );
}

#[test]
fn local_memory_is_a_warning() {
    // The depot used: its address taken through %SP and a store through it.
    let body = "\t.local .align 4 .b8 __local_depot1[64];\n\t.reg .b64 %SP;\n\t.reg .b64 %SPL;\n\t\
                mov.u64 %SPL, __local_depot1;\n\tcvta.local.u64 %SP, %SPL;\n\t\
                add.u64 %rd1, %SP, 0;\n\tst.u32 [%rd1], %r1;\n\tret;";
    let c = check_text(&entry("depot", body));
    assert_eq!(
        rules(&c),
        [("depot".to_string(), Rule::Local, Severity::Warning)]
    );
    assert!(c.findings[0].message.contains("%SP"), "{}", c.findings[0]);
    // A .local array read directly.
    let direct =
        "\t.local .align 4 .b8 __local_depot2[8];\n\tld.local.u32 %r1, [__local_depot2];\n\tret;";
    let c = check_text(&entry("direct", direct));
    assert_eq!(rules(&c).len(), 1, "{:#?}", c.findings);
    assert!(
        c.findings[0].message.contains("__local_depot2"),
        "{}",
        c.findings[0]
    );
    // LLVM's prologue alone, registers never used again: ptxas reports 0 bytes, no warning.
    let prologue =
        "\t.local .align 4 .b8 __local_depot3[64];\n\t.reg .b64 %SP;\n\t.reg .b64 %SPL;\n\t\
                    mov.u64 %SPL, __local_depot3;\n\tcvta.local.u64 %SP, %SPL;\n\tret;";
    let c = check_text(&entry("prologue", prologue));
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
}

const REPORT_OK: &str = "\
ptxas info    : 0 bytes gmem, 24 bytes cmem[4]
ptxas info    : Compiling entry function 'copy' for 'sm_90'
ptxas info    : Function properties for copy
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 18 registers, used 0 barriers, 384 bytes cmem[0]
ptxas info    : Compiling entry function 'tile' for 'sm_90'
ptxas info    : Function properties for tile
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]
ptxas info    : Compile time = 2.0 ms
";

#[test]
fn ptxas_reports() {
    let props = parse_report(REPORT_OK, "sm_90");
    assert_eq!(props.keys().collect::<Vec<_>>(), ["copy", "tile"]);
    let (copy, tile) = (&props["copy"], &props["tile"]);
    assert_eq!(
        (
            copy.registers,
            copy.stack,
            copy.barriers,
            copy.entry,
            copy.shared
        ),
        (Some(18), Some(0), Some(0), true, None)
    );
    assert_eq!(
        (tile.registers, tile.barriers, tile.shared),
        (Some(30), Some(1), Some(1024))
    );
    assert_eq!(check_report(&props, &["copy", "tile"], "sm_90"), []);
    let lost = check_report(&props, &["copy", "lost"], "sm_90");
    assert_eq!(lost.len(), 1);
    assert_eq!(
        (lost[0].function.as_deref(), lost[0].rule),
        (Some("lost"), Rule::Ptxas)
    );

    let spills = "ptxas info    : Compiling entry function 'k4' for 'sm_80'\n\
                  ptxas info    : Function properties for k4\n    \
                  8 bytes stack frame, 4 bytes spill stores, 16 bytes spill loads\n\
                  ptxas info    : Used 24 registers, 392 bytes cmem[0]\n\
                  ptxas info    : Function properties for _RNvCs_4core3fmt\n    \
                  120 bytes stack frame, 100 bytes spill stores, 100 bytes spill loads\n\
                  ptxas warning : Stack size for entry function 'k4' cannot be statically determined\n";
    let props = parse_report(spills, "sm_80");
    let k = &props["k4"];
    assert_eq!(
        (k.registers, k.stack, k.spill_stores, k.spill_loads),
        (Some(24), Some(8), Some(4), Some(16))
    );
    assert!(!props["_RNvCs_4core3fmt"].entry);
    let found = check_report(&props, &["k4"], "sm_80");
    let mut got: Vec<(&str, Rule)> = found
        .iter()
        .map(|f| (f.function.as_deref().unwrap(), f.rule))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("_RNvCs_4core3fmt", Rule::Stack),
            ("_RNvCs_4core3fmt", Rule::Spill),
            ("k4", Rule::Stack),
            ("k4", Rule::Stack),
            ("k4", Rule::Spill)
        ]
    );
    assert!(found.iter().any(|f| f.message.contains("statically")));
    assert!(found
        .iter()
        .all(|f| f.arch.as_deref() == Some("sm_80") && f.severity == Severity::Warning));
}

/// The dynamic-tile loop as rustc compiles it: thread 0 takes a tile with an atomic and stores
/// it to `SLOT`; a barrier; every thread reads `SLOT` (`{READ}`), returns when it is past the
/// end, works, and meets the next barrier. `{AFTER}` is put right after the read.
const TILE_LOOP: &str = "\
\t.shared .align 4 .u32 SLOT;
\t.shared .align 4 .u32 OTHER;
\tld.param.b32 %r2, [k_param_1];
\tld.param.b64 %rd10, [k_param_0];
\tmov.u32 %r3, %tid.x;
\tsetp.ne.b32 %p1, %r3, 0;
\tbra.uni $L__BB1_1;
$L__BB1_12:
\tbar.sync 0;
$L__BB1_1:
\t@%p1 bra $L__BB1_4;
\tatom.relaxed.gpu.global.add.u32 %r5, [%rd10], 1;
\tst.shared.b32 [SLOT], %r5;
$L__BB1_4:
{BARRIER}
{READ}
{AFTER}
\tsetp.lt.u32 %p3, %r7, %r2;
\t@!%p3 bra $L__BB1_5;
\tst.shared.b32 [OTHER], %r3;
\tbra.uni $L__BB1_12;
$L__BB1_5:
\tret;";

fn tile_loop(barrier: &str, read: &str, after: &str) -> Vec<Finding> {
    barrier_findings(
        &TILE_LOOP
            .replace("{BARRIER}", barrier)
            .replace("{READ}", read)
            .replace("{AFTER}", after),
    )
}

#[test]
fn a_value_every_thread_reads_from_shared_memory_after_a_barrier_is_uniform() {
    let bar = "\tbar.sync 0;";
    let read = "\tld.shared.b32 %r7, [SLOT];";
    // The pattern: accepted (a store to another shared array before the next barrier is no
    // write of SLOT).
    assert_eq!(tile_loop(bar, read, ""), [], "the dynamic-tile pattern");
    assert_eq!(tile_loop("\tbarrier.sync.aligned 0;", read, ""), []);
    // A read-only global value at the same address in every thread: uniform too.
    let nc = "\tld.global.nc.b32 %r7, [%rd10];";
    assert_eq!(tile_loop(bar, nc, ""), []);

    let severities = |found: &[Finding]| -> Vec<Severity> {
        found.iter().map(|f| f.severity).collect::<Vec<_>>()
    };
    // Both barriers of the loop are reported, as depending on loaded data.
    let data_dependent = |found: &[Finding]| {
        found.len() == 2
            && found
                .iter()
                .all(|f| f.severity == Severity::Warning && f.message.contains("loaded value"))
    };
    // Refused: the address depends on the thread.
    let by_thread =
        "\tmul.wide.u32 %rd3, %r3, 4;\n\tmov.u64 %rd4, SLOT;\n\tadd.s64 %rd5, %rd4, %rd3;\n\
                     \tld.shared.b32 %r7, [%rd5];";
    let found = tile_loop(bar, by_thread, "");
    assert_eq!(
        severities(&found),
        [Severity::Error, Severity::Error],
        "{found:#?}"
    );
    assert!(found[0].message.contains("%tid.x"), "{}", found[0]);
    // Reported: no barrier between thread 0's store and the read…
    let found = tile_loop("", read, "");
    assert_eq!(severities(&found), [Severity::Warning], "{found:#?}");
    assert!(found[0].message.contains("loaded value"), "{}", found[0]);
    // … a barrier that only some threads wait at (a thread count), or one that does not wait;
    for partial in ["\tbar.sync 1, 64;", "\tbar.arrive 0, 64;"] {
        assert!(!tile_loop(partial, read, "").is_empty(), "{partial}");
    }
    // … a value from (writable) global memory;
    let global = "\tld.global.b32 %r7, [%rd10];";
    let found = tile_loop(bar, global, "");
    assert!(data_dependent(&found), "{found:#?}");
    // … a thread writing the location after the barrier, before the next one (its write
    // races with the others' reads): after the read, on another path, or through a generic
    // pointer or a call.
    for write in [
        "\t@%p1 bra $L__BB1_9;\n\tst.shared.b32 [SLOT], %r2;\n$L__BB1_9:",
        "\tst.shared.b32 [SLOT+0], %r2;",
        "\tst.u32 [%rd10], %r2;",
        "\tatom.shared.add.u32 %r9, [SLOT], 1;",
        "\tcall.uni helper, ();",
    ] {
        let found = tile_loop(bar, read, write);
        assert!(data_dependent(&found), "{write}: {found:#?}");
    }
    // … and a write on a path that does not read: thread 0 stores while the others read.
    let side = "\tbar.sync 0;\n\t@%p1 bra $L__BB1_7;\n\tst.shared.b32 [SLOT], %r2;\n\t\
                bra.uni $L__BB1_8;\n$L__BB1_7:";
    let found = tile_loop(side, read, "$L__BB1_8:");
    assert!(data_dependent(&found), "{found:#?}");
}
