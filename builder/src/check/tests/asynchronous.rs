//! Tests of the rules on asynchronous work (instructions newer than the target, mbarrier
//! waits, cp.async groups, wgmma fences and groups) on hand-written PTX and canned ptxas
//! reports.

use super::super::*;
use super::{entry, HEADER, TID_PREDICATE};

/// The findings of rule `arch` for `body` in a module of `.target target`.
fn arch_findings(target: &str, body: &str) -> Vec<Finding> {
    let ptx = entry("k", body).replace(".target sm_80", &format!(".target {target}"));
    check_text(&ptx)
        .findings
        .into_iter()
        .filter(|f| f.rule == Rule::Arch)
        .collect()
}

#[test]
fn instructions_newer_than_the_target_are_refused_naming_the_arch_to_declare() {
    let wgmma = "\twgmma.fence.sync.aligned;\n\tret;";
    let found = arch_findings("sm_80", wgmma);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].severity, Severity::Error);
    assert!(
        found[0].message.contains("needs sm_90a")
            && found[0].message.contains("#[kernel(arch = \"sm_90a\")]"),
        "{}",
        found[0].message
    );
    // sm_90 lacks the architecture-specific instructions; sm_90a has them; sm_100a does not.
    assert_eq!(arch_findings("sm_90", wgmma).len(), 1);
    assert!(arch_findings("sm_90a", wgmma).is_empty());
    assert_eq!(arch_findings("sm_100a", wgmma).len(), 1);
    // TMA, clusters, mbarrier transaction counts: sm_90 and newer, every variant.
    for line in [
        "\tcp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];",
        "\tmapa.shared::cluster.u32 %r1, %r2, %r3;",
        "\tbarrier.cluster.arrive;",
        "\tmov.u32 %r1, %cluster_ctarank;",
        "\tmov.u32 %r1, %nclusterid.x;",
        "\tmov.u32 %r1, %clusterid.y;",
        "\tatom.relaxed.cluster.global.add.u32 %r1, [%rd1], %r2;",
        "\tfence.acq_rel.cluster;",
        "\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;",
    ] {
        let body = format!("{line}\n\tret;");
        assert_eq!(arch_findings("sm_80", &body).len(), 1, "{line}");
        assert!(arch_findings("sm_90", &body).is_empty(), "{line}");
        assert!(arch_findings("sm_90a", &body).is_empty(), "{line}");
        assert!(arch_findings("sm_100", &body).is_empty(), "{line}");
    }
    // What sm_80 has passes: mma.sync, ldmatrix, cp.async, mbarrier without transactions.
    let sm80 = "\tcp.async.cg.shared.global [%r1], [%rd1], 16;\n\t\
                ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];\n\t\
                mbarrier.test_wait.parity.shared.b64 %p1, [%r1], %r2;\n\tret;";
    assert!(arch_findings("sm_80", sm80).is_empty());
}

/// The findings of `rule` in `ptx`: (function, severity, message).
fn rule_findings(ptx: &str, rule: Rule) -> Vec<(String, Severity, String)> {
    check_text(ptx)
        .findings
        .into_iter()
        .filter(|f| f.rule == rule)
        .map(|f| (f.function.unwrap_or_default(), f.severity, f.message))
        .collect()
}

/// The mbarrier wait of `ferrocuda_device::mbarrier` (an inline-asm scope) on `%r1`.
const PARITY_WAIT: &str = "\t{ .reg .pred p; mbarrier.test_wait.parity.shared.b64 p, [%r1], %r2; \
                           selp.u32 %r3, 1, 0, p; }\n\tsetp.eq.s32 %p1, %r3, 0;\n\t@%p1 bra $L_wait;";

#[test]
fn an_mbarrier_wait_with_no_arrive_in_the_kernel_is_refused() {
    let init = "\tmov.u32 %r1, 0;\n\tmbarrier.init.shared.b64 [%r1], 32;\n\tbar.sync 0;\n";
    // Waits, never arrives: the phase cannot complete.
    let bad = entry("k", &format!("{init}$L_wait:\n{PARITY_WAIT}\n\tret;"));
    let found = rule_findings(&bad, Rule::MBarrier);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (f, severity, message) = &found[0];
    assert_eq!((f.as_str(), *severity), ("k", Severity::Error));
    assert!(
        message.contains("mbarrier.test_wait.parity.shared.b64 p, [%r1], %r2")
            && message.contains("hangs"),
        "{message}"
    );
    // try_wait with the sm_90 qualifiers, and the token form: the same.
    for wait in [
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r1], %r2;",
        "mbarrier.test_wait.shared.b64 %p2, [%r1], %rd1;",
    ] {
        let bad = entry("k", &format!("{init}\t{wait}\n\tret;"));
        assert_eq!(rule_findings(&bad, Rule::MBarrier).len(), 1, "{wait}");
    }
    // Every arrive form completes phases: the kernel passes.
    for arrive in [
        "mbarrier.arrive.shared.b64 %rd1, [%r1];",
        "mbarrier.arrive.release.cta.shared::cta.b64 %rd1, [%r1];",
        "mbarrier.arrive_drop.shared.b64 %rd1, [%r1];",
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %rd1, [%r1], %r4;",
        "cp.async.mbarrier.arrive.noinc.shared.b64 [%r1];",
        "cp.async.mbarrier.arrive.shared.b64 [%r1];",
    ] {
        // The arrive after the wait in the text (a loop's blocks need not be in order).
        let good = entry(
            "k",
            &format!("{init}$L_wait:\n{PARITY_WAIT}\n\t{arrive}\n\tret;"),
        );
        assert_eq!(rule_findings(&good, Rule::MBarrier), [], "{arrive}");
    }
}

#[test]
fn mbarrier_arrives_and_waits_in_called_functions_count() {
    let arrive_fn =
        ".func arrive_it()\n{\n\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<2>;\n\tmov.u32 %r1, 0;\n\t\
                     mbarrier.arrive.shared.b64 %rd1, [%r1];\n\tret;\n}\n";
    let wait_fn = format!(
        ".func wait_it()\n{{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\tmov.u32 %r1, 0;\n\t\
         mov.u32 %r2, 0;\n$L_wait:\n{PARITY_WAIT}\n\tret;\n}}\n"
    );
    let kernel = |body: &str| {
        format!(
            "{HEADER}\n{arrive_fn}{wait_fn}.visible .entry k(\n\t.param .align 8 .b8 k_param_0[16]\n)\n\
             {{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<9>;\n\t.reg .b64 %rd<9>;\n{body}\n\tret;\n}}\n"
        )
    };
    let call = |f: &str| format!("\t{{ // callseq\n\tcall.uni {f}, ();\n\t}}\n");
    // The wait in a called function, no arrive anywhere: refused, naming the function.
    let found = rule_findings(&kernel(&call("wait_it")), Rule::MBarrier);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].2.contains("`wait_it`"), "{}", found[0].2);
    // The arrive in another called function: passes.
    let both = format!("{}{}", call("wait_it"), call("arrive_it"));
    assert_eq!(rule_findings(&kernel(&both), Rule::MBarrier), []);
    // An indirect call could arrive: not judged.
    let indirect = format!(
        "{}\tmov.u64 %rd2, arrive_it;\n\t{{\n\tprototype_0 : .callprototype ()_ ();\n\t\
         call %rd2, (), prototype_0;\n\t}}\n",
        call("wait_it")
    );
    assert_eq!(rule_findings(&kernel(&indirect), Rule::MBarrier), []);
    // A device function that is never called is not a kernel: nothing to report.
    assert_eq!(rule_findings(&kernel(""), Rule::MBarrier), []);
}

#[test]
fn a_group_wait_with_no_commit_in_the_kernel_is_refused() {
    let copy = "\tmov.u32 %r1, 0;\n\tld.param.b64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd1, %rd1;\n\t\
                cp.async.cg.shared.global [%r1], [%rd1], 16, %r2;\n";
    // Copies, waits, never commits: the wait does not cover the copies.
    let bad = entry(
        "k",
        &format!("{copy}\tcp.async.wait_group 0;\n\tbar.sync 0;\n\tret;"),
    );
    let found = rule_findings(&bad, Rule::CpAsync);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].1, Severity::Error);
    assert!(
        found[0].2.contains("`cp.async.wait_group 0`") && found[0].2.contains("commit_group"),
        "{}",
        found[0].2
    );
    // Committed: passes, also when the commit comes after the wait in the text (a
    // pipeline's loop: wait for stage k, then copy and commit stage k + 1).
    let good = entry(
        "k",
        &format!("{copy}\tcp.async.commit_group;\n\tcp.async.wait_group 1;\n\tret;"),
    );
    assert_eq!(rule_findings(&good, Rule::CpAsync), []);
    let looped = entry(
        "k",
        &format!(
            "$L_loop:\n\tcp.async.wait_group 1;\n\tbar.sync 0;\n{copy}\tcp.async.commit_group;\n\t\
             @%p1 bra $L_loop;\n\tret;"
        ),
    );
    assert_eq!(rule_findings(&looped, Rule::CpAsync), []);
    // wait_all commits the outstanding copies itself: passes.
    let all = entry("k", &format!("{copy}\tcp.async.wait_all;\n\tret;"));
    assert_eq!(rule_findings(&all, Rule::CpAsync), []);
    // The bulk (TMA) groups: their own commit.
    let bulk = entry(
        "k",
        "\tcp.async.commit_group;\n\tcp.async.bulk.wait_group.read 0;\n\tret;",
    );
    let found = rule_findings(&bulk, Rule::CpAsync);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].2.contains("cp.async.bulk.commit_group"),
        "{}",
        found[0].2
    );
    let bulk_ok = entry(
        "k",
        "\tcp.async.bulk.commit_group;\n\tcp.async.bulk.wait_group 0;\n\tret;",
    );
    assert_eq!(rule_findings(&bulk_ok, Rule::CpAsync), []);
    // A cp.async.wait_group is not satisfied by a bulk commit, nor an mbarrier arrive.
    let mixed = entry(
        "k",
        "\tcp.async.bulk.commit_group;\n\tcp.async.mbarrier.arrive.shared.b64 [%r1];\n\t\
         cp.async.wait_group 0;\n\tret;",
    );
    assert_eq!(rule_findings(&mixed, Rule::CpAsync).len(), 1);
}

/// One `wgmma.mma_async` as `ferrocuda_device::wgmma` writes it (an inline-asm scope).
const MMA: &str = "\t{ .reg .pred p; setp.ne.b32 p, %r3, 0; \
                   wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%r4, %r5, %r6, %r7}, \
                   %rd1, %rd2, p, 1, 1, 0, 0; }\n";
const FENCE: &str = "\twgmma.fence.sync.aligned;\n";
const COMMIT_WAIT: &str =
    "\twgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0;\n";

#[test]
fn a_wgmma_without_a_fence_on_some_path_is_refused() {
    let k = |body: &str| entry("k", &format!("{body}\tret;"));
    // Fenced, committed, waited: passes.
    let good = k(&format!("{FENCE}{MMA}{MMA}{COMMIT_WAIT}"));
    assert_eq!(rule_findings(&good, Rule::Wgmma), []);
    // No fence at all: refused once (the second MMA follows the first on its path).
    let found = rule_findings(&k(&format!("{MMA}{MMA}{COMMIT_WAIT}")), Rule::Wgmma);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (f, severity, message) = &found[0];
    assert_eq!((f.as_str(), *severity), ("k", Severity::Error));
    assert!(
        message.contains("wgmma.mma_async.sync.aligned.m64n8k16")
            && message.contains("wgmma.fence"),
        "{message}"
    );
    // The fence after the MMA in the text: refused (nothing fenced before it).
    let late = k(&format!("{MMA}{FENCE}{COMMIT_WAIT}"));
    assert_eq!(rule_findings(&late, Rule::Wgmma).len(), 1);
    // The fence on one side of a branch only: the other path reaches the MMA unfenced.
    let one_side = k(&format!(
        "{TID_PREDICATE}\n\t@%p1 bra $L_join;\n{FENCE}$L_join:\n{MMA}{COMMIT_WAIT}"
    ));
    assert_eq!(rule_findings(&one_side, Rule::Wgmma).len(), 1);
    // Fenced on both sides: passes.
    let both = k(&format!(
        "{TID_PREDICATE}\n\t@%p1 bra $L_other;\n{FENCE}\tbra.uni $L_join;\n$L_other:\n{FENCE}\
         $L_join:\n{MMA}{COMMIT_WAIT}"
    ));
    assert_eq!(rule_findings(&both, Rule::Wgmma), []);
    // A loop whose body fences before its MMAs, the fence's block laid out after the MMA's
    // (the analysis follows the control flow, not the text): passes.
    let looped = k(&format!(
        "\tmov.u32 %r8, 0;\n\tbra.uni $L_top;\n$L_mma:\n{MMA}{COMMIT_WAIT}\tadd.s32 %r8, %r8, 1;\n\t\
         setp.lt.u32 %p2, %r8, 4;\n\t@!%p2 bra $L_done;\n$L_top:\n{FENCE}\tbra.uni $L_mma;\n$L_done:\n"
    ));
    assert_eq!(rule_findings(&looped, Rule::Wgmma), []);
    // The same loop fencing only before it is entered, not on the back edge: still passes —
    // the accumulators of back-to-back MMAs need no fence, and the rule asks for a fence on
    // every path from the start, which the entry's fence is.
    let once = k(&format!(
        "\tmov.u32 %r8, 0;\n{FENCE}$L_top:\n{MMA}{COMMIT_WAIT}\tadd.s32 %r8, %r8, 1;\n\t\
         setp.lt.u32 %p2, %r8, 4;\n\t@%p2 bra $L_top;\n"
    ));
    assert_eq!(rule_findings(&once, Rule::Wgmma), []);
}

#[test]
fn wgmma_groups_never_committed_or_never_waited_for_are_refused() {
    let k = |body: &str| entry("k", &format!("{FENCE}{MMA}{body}\tret;"));
    let found = rule_findings(&k("\twgmma.wait_group.sync.aligned 0;\n"), Rule::Wgmma);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].2.contains("never executes a `wgmma.commit_group`"),
        "{}",
        found[0].2
    );
    let found = rule_findings(&k("\twgmma.commit_group.sync.aligned;\n"), Rule::Wgmma);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].2.contains("never executes a `wgmma.wait_group`"),
        "{}",
        found[0].2
    );
    assert_eq!(rule_findings(&k(COMMIT_WAIT), Rule::Wgmma), []);
}

#[test]
fn wgmma_across_function_calls_is_judged_only_where_the_text_proves_it() {
    // A device function issuing the MMA: its caller may have fenced (not reported in the
    // function); the commit and wait in the kernel count for the kernel.
    let mma_fn =
        format!(".func mma_it()\n{{\n\t.reg .b32 %r<9>;\n\t.reg .b64 %rd<3>;\n{MMA}\tret;\n}}\n");
    let kernel = |body: &str| {
        format!(
            "{HEADER}\n{mma_fn}.visible .entry k(\n\t.param .align 8 .b8 k_param_0[16]\n)\n\
             {{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<9>;\n\t.reg .b64 %rd<9>;\n{body}\n\tret;\n}}\n"
        )
    };
    let call = "\t{ // callseq\n\tcall.uni mma_it, ();\n\t}\n";
    assert_eq!(
        rule_findings(&kernel(&format!("{FENCE}{call}{COMMIT_WAIT}")), Rule::Wgmma),
        []
    );
    // No commit anywhere in the kernel or its callee: refused, for the kernel.
    let found = rule_findings(&kernel(&format!("{FENCE}{call}")), Rule::Wgmma);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].0, "k");
    // A kernel that only calls through a pointer is not judged.
    let indirect = format!(
        "{FENCE}\tmov.u64 %rd2, mma_it;\n\t{{\n\tprototype_0 : .callprototype ()_ ();\n\t\
         call %rd2, (), prototype_0;\n\t}}\n"
    );
    assert_eq!(rule_findings(&kernel(&indirect), Rule::Wgmma), []);
    // An MMA right after a call in the kernel: the callee may fence.
    let after_call = format!(
        "{}{MMA}{COMMIT_WAIT}",
        "\t{ // callseq\n\tcall.uni mma_it, ();\n\t}\n"
    );
    assert_eq!(rule_findings(&kernel(&after_call), Rule::Wgmma), []);
}

#[test]
fn ptxas_serializing_wgmma_is_a_warning_naming_the_function() {
    let report = "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n\
        ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are \
        serialized due to program dependence on compiler-inserted WG.AR in divergent path in \
        the function 'k'\nptxas info    : Used 90 registers\n";
    let found = super::super::ptxas::wgmma_findings(report, "sm_90a");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].function.as_deref(), Some("k"));
    assert_eq!(
        (found[0].rule, found[0].severity),
        (Rule::Wgmma, Severity::Warning)
    );
    assert!(found[0].message.contains("(C7520)") || found[0].message.contains("serialized"));
    assert!(
        super::super::ptxas::wgmma_findings("ptxas info    : Used 90 registers\n", "sm_90a")
            .is_empty()
    );
}
