//! The stream plan's rule table and its execution, through the public API only: every
//! combination of producer streams × caller stream × sync mode, the calls a plan makes (with a
//! recording `StreamOps`), and a property over random producers.

use ferrocuda_host::stream::{plan, Plan, StreamRef, SyncMode, MAX_PRODUCERS, SYNC_ENV_VAR};
use ferrocuda_host::ErrorKind;
use proptest::prelude::*;
use std::num::NonZeroU64;

mod common;
use common::{Call, Recorder};

const fn h(n: u64) -> StreamRef {
    match NonZeroU64::new(n) {
        Some(v) => StreamRef::Handle(v),
        None => panic!("handle 0"),
    }
}

const L: StreamRef = StreamRef::Legacy;
const P: StreamRef = StreamRef::PerThread;
const A: StreamRef = h(0xA0);
const B: StreamRef = h(0xB0);
const C: StreamRef = h(0xC0);

use SyncMode::{Default as Def, Event as Ev, Off};

/// One row of the plan table: inputs, then the exact expected plan.
struct Case {
    producers: &'static [Option<StreamRef>],
    caller: Option<StreamRef>,
    mode: SyncMode,
    launch: StreamRef,
    host_syncs: &'static [StreamRef],
    waits_before: &'static [StreamRef],
    waits_after: &'static [StreamRef],
}

const fn case(
    producers: &'static [Option<StreamRef>],
    caller: Option<StreamRef>,
    mode: SyncMode,
    launch: StreamRef,
    host_syncs: &'static [StreamRef],
    waits_before: &'static [StreamRef],
    waits_after: &'static [StreamRef],
) -> Case {
    Case {
        producers,
        caller,
        mode,
        launch,
        host_syncs,
        waits_before,
        waits_after,
    }
}

// Producer lists.
const NONE: &[Option<StreamRef>] = &[];
const ALL_NONE: &[Option<StreamRef>] = &[None, None, None];
const ONE: &[Option<StreamRef>] = &[Some(A)];
const EQUAL: &[Option<StreamRef>] = &[Some(A), Some(A), Some(A)];
const DISTINCT: &[Option<StreamRef>] = &[Some(A), Some(B)];
const MIXED: &[Option<StreamRef>] = &[None, Some(A), None, Some(B), Some(A)];
const KINDS: &[Option<StreamRef>] = &[Some(L), Some(P), Some(A), Some(L)];
const ONE_AMONG_NONE: &[Option<StreamRef>] = &[None, Some(B), None];
const PER_THREAD_PAIR: &[Option<StreamRef>] = &[Some(P), Some(P)];
const LEGACY_ONLY: &[Option<StreamRef>] = &[Some(L)];

const E: &[StreamRef] = &[];

/// Every combination: producers × caller (none / equal to a producer / different) × mode.
#[rustfmt::skip]
const CASES: &[Case] = &[
    // no producers: legacy unless the caller names a stream; never anything to order
    case(NONE, None,    Def, L, E, E, E),
    case(NONE, None,    Ev,  L, E, E, E),
    case(NONE, None,    Off, L, E, E, E),
    case(NONE, Some(C), Def, C, E, E, E),
    case(NONE, Some(C), Ev,  C, E, E, E),
    case(NONE, Some(C), Off, C, E, E, E),
    // producers that name no stream: same as no producers
    case(ALL_NONE, None,    Def, L, E, E, E),
    case(ALL_NONE, None,    Ev,  L, E, E, E),
    case(ALL_NONE, None,    Off, L, E, E, E),
    case(ALL_NONE, Some(P), Def, P, E, E, E),
    case(ALL_NONE, Some(P), Ev,  P, E, E, E),
    case(ALL_NONE, Some(P), Off, P, E, E, E),
    // one producer stream: launch on it (nothing to do) unless the caller differs
    case(ONE, None,    Def, A, E, E, E),
    case(ONE, None,    Ev,  A, E, E, E),
    case(ONE, None,    Off, A, E, E, E),
    case(ONE, Some(A), Def, A, E, E, E),
    case(ONE, Some(A), Ev,  A, E, E, E),
    case(ONE, Some(A), Off, A, E, E, E),
    case(ONE, Some(C), Def, C, &[A], E, &[A]),
    case(ONE, Some(C), Ev,  C, E, &[A], &[A]),
    case(ONE, Some(C), Off, C, E, E, E),
    // several equal producer streams: as one, deduplicated
    case(EQUAL, None,    Def, A, E, E, E),
    case(EQUAL, None,    Ev,  A, E, E, E),
    case(EQUAL, None,    Off, A, E, E, E),
    case(EQUAL, Some(A), Def, A, E, E, E),
    case(EQUAL, Some(A), Ev,  A, E, E, E),
    case(EQUAL, Some(A), Off, A, E, E, E),
    case(EQUAL, Some(C), Def, C, &[A], E, &[A]),
    case(EQUAL, Some(C), Ev,  C, E, &[A], &[A]),
    case(EQUAL, Some(C), Off, C, E, E, E),
    // several distinct producer streams: they disagree, so legacy unless the caller names one
    case(DISTINCT, None,    Def, L, &[A, B], E, &[A, B]),
    case(DISTINCT, None,    Ev,  L, E, &[A, B], &[A, B]),
    case(DISTINCT, None,    Off, L, E, E, E),
    case(DISTINCT, Some(B), Def, B, &[A], E, &[A]),
    case(DISTINCT, Some(B), Ev,  B, E, &[A], &[A]),
    case(DISTINCT, Some(B), Off, B, E, E, E),
    case(DISTINCT, Some(C), Def, C, &[A, B], E, &[A, B]),
    case(DISTINCT, Some(C), Ev,  C, E, &[A, B], &[A, B]),
    case(DISTINCT, Some(C), Off, C, E, E, E),
    // None mixed with streams: None is ignored; duplicates collapse, first-seen order
    case(MIXED, None,    Def, L, &[A, B], E, &[A, B]),
    case(MIXED, None,    Ev,  L, E, &[A, B], &[A, B]),
    case(MIXED, None,    Off, L, E, E, E),
    case(MIXED, Some(A), Def, A, &[B], E, &[B]),
    case(MIXED, Some(A), Ev,  A, E, &[B], &[B]),
    case(MIXED, Some(A), Off, A, E, E, E),
    case(MIXED, Some(C), Def, C, &[A, B], E, &[A, B]),
    case(MIXED, Some(C), Ev,  C, E, &[A, B], &[A, B]),
    case(MIXED, Some(C), Off, C, E, E, E),
    // legacy, per-thread and a handle are three distinct streams
    case(KINDS, None,    Def, L, &[P, A], E, &[P, A]),
    case(KINDS, None,    Ev,  L, E, &[P, A], &[P, A]),
    case(KINDS, None,    Off, L, E, E, E),
    case(KINDS, Some(P), Def, P, &[L, A], E, &[L, A]),
    case(KINDS, Some(P), Ev,  P, E, &[L, A], &[L, A]),
    case(KINDS, Some(P), Off, P, E, E, E),
    case(KINDS, Some(C), Def, C, &[L, P, A], E, &[L, P, A]),
    case(KINDS, Some(C), Ev,  C, E, &[L, P, A], &[L, P, A]),
    case(KINDS, Some(C), Off, C, E, E, E),
    // one stream among Nones: the producers agree
    case(ONE_AMONG_NONE, None,    Def, B, E, E, E),
    case(ONE_AMONG_NONE, None,    Ev,  B, E, E, E),
    case(ONE_AMONG_NONE, Some(L), Def, L, &[B], E, &[B]),
    case(ONE_AMONG_NONE, Some(L), Ev,  L, E, &[B], &[B]),
    // per-thread producers agree: launch there, not on legacy
    case(PER_THREAD_PAIR, None,    Def, P, E, E, E),
    case(PER_THREAD_PAIR, Some(L), Def, L, &[P], E, &[P]),
    case(PER_THREAD_PAIR, Some(L), Ev,  L, E, &[P], &[P]),
    // a legacy producer with a per-thread caller: no implicit legacy synchronization assumed
    case(LEGACY_ONLY, None,    Def, L, E, E, E),
    case(LEGACY_ONLY, Some(P), Def, P, &[L], E, &[L]),
    case(LEGACY_ONLY, Some(A), Ev,  A, E, &[L], &[L]),
    case(LEGACY_ONLY, Some(A), Off, A, E, E, E),
];

#[test]
fn plan_table() {
    assert!(CASES.len() >= 30);
    for (i, c) in CASES.iter().enumerate() {
        let p = plan(c.producers, c.caller, c.mode).unwrap();
        let what = format!(
            "case {i}: producers {:?}, caller {:?}, {:?} → {p:?}",
            c.producers, c.caller, c.mode
        );
        assert_eq!(p.mode(), c.mode, "{what}");
        assert_eq!(p.launch_stream(), c.launch, "{what}");
        assert_eq!(p.host_syncs(), c.host_syncs, "{what}");
        assert_eq!(p.waits_before(), c.waits_before, "{what}");
        assert_eq!(p.waits_after(), c.waits_after, "{what}");
        let trivial =
            c.host_syncs.is_empty() && c.waits_before.is_empty() && c.waits_after.is_empty();
        assert_eq!(p.is_trivial(), trivial, "{what}");
        if c.mode == Off {
            assert!(p.is_trivial(), "{what}");
        }
    }
}

#[test]
fn table_covers_every_combination() {
    // Each producer list × caller kind × mode named in the brief appears.
    for producers in [NONE, ALL_NONE, ONE, EQUAL, DISTINCT, MIXED, KINDS] {
        for mode in [Def, Ev, Off] {
            let callers: Vec<Option<StreamRef>> = CASES
                .iter()
                .filter(|c| std::ptr::eq(c.producers, producers) && c.mode == mode)
                .map(|c| c.caller)
                .collect();
            assert!(callers.contains(&None), "{producers:?} {mode:?}: no caller");
            assert!(
                callers.contains(&Some(C)) || callers.contains(&Some(P)),
                "{producers:?} {mode:?}: different caller"
            );
            let any_stream = producers.iter().any(Option::is_some);
            if any_stream {
                assert!(
                    callers
                        .iter()
                        .flatten()
                        .any(|s| producers.contains(&Some(*s))),
                    "{producers:?} {mode:?}: caller equal to a producer"
                );
            }
        }
    }
}

#[test]
fn deduplicates_in_first_seen_order() {
    let p = plan(
        &[Some(B), Some(A), Some(B), None, Some(A), Some(B)],
        Some(C),
        Def,
    )
    .unwrap();
    assert_eq!(p.host_syncs(), &[B, A]);
    assert_eq!(p.waits_after(), &[B, A]);
    assert_eq!(p.foreign_streams(), &[B, A]);
    // The same producer stream for 3 arrays is synced once.
    let mut rec = Recorder::default();
    plan(&[Some(A); 3], Some(C), Def)
        .unwrap()
        .before_launch(&mut rec)
        .unwrap();
    assert_eq!(rec.calls, [Call::Sync(A)]);
}

#[test]
fn max_producers() {
    // Exactly MAX_PRODUCERS distinct streams fit.
    let all: Vec<Option<StreamRef>> = (0..MAX_PRODUCERS as u64)
        .map(|i| Some(h(100 + i)))
        .collect();
    let p = plan(&all, Some(L), Ev).unwrap();
    assert_eq!(p.waits_before().len(), MAX_PRODUCERS);
    assert_eq!(p.waits_before()[0], h(100));
    assert_eq!(
        p.waits_before()[MAX_PRODUCERS - 1],
        h(100 + MAX_PRODUCERS as u64 - 1)
    );
    // One more is refused, even if it names no stream, in every mode.
    let mut more = all.clone();
    more.push(None);
    for mode in [Def, Ev, Off] {
        let e = plan(&more, None, mode).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value);
        assert!(e.message().starts_with("too many array arguments"), "{e}");
        assert!(
            e.message().contains("17") && e.message().contains("16"),
            "{e}"
        );
    }
}

#[test]
fn plans_compare_by_content() {
    let a = plan(&[Some(A), Some(B)], Some(C), Ev).unwrap();
    let b = plan(&[Some(B), Some(A), Some(B)], Some(C), Ev).unwrap();
    assert_ne!(a, b, "order is part of the plan");
    assert_eq!(
        a,
        plan(&[None, Some(A), Some(B), Some(A)], Some(C), Ev).unwrap()
    );
    assert_ne!(a, plan(&[Some(A), Some(B)], Some(C), Def).unwrap());
    let dbg = format!("{a:?}");
    assert!(
        dbg.contains("waits_before") && dbg.contains("launch_stream"),
        "{dbg}"
    );
}

#[test]
fn from_env_value() {
    assert_eq!(SyncMode::from_env_value(None).unwrap(), Def);
    assert_eq!(SyncMode::from_env_value(Some("1")).unwrap(), Def);
    assert_eq!(SyncMode::from_env_value(Some("0")).unwrap(), Off);
    assert_eq!(SyncMode::from_env_value(Some("event")).unwrap(), Ev);
    assert_eq!(SyncMode::default(), Def);
    // Empty counts as unset (the rule of every variable).
    assert_eq!(SyncMode::from_env_value(Some("")).unwrap(), Def);
    for bad in ["2", "true", "off", "Event", " 1", "events"] {
        let e = SyncMode::from_env_value(Some(bad)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value, "{bad:?}");
        assert!(e.to_string().contains(SYNC_ENV_VAR), "{bad:?}: {e}");
    }
}

#[test]
fn from_env_reads_the_variable() {
    // Only checks agreement with from_env_value for whatever the environment holds
    // (tests run concurrently; setting variables would race).
    let expected = match std::env::var(SYNC_ENV_VAR) {
        Ok(v) => SyncMode::from_env_value(Some(&v)),
        Err(std::env::VarError::NotPresent) => Ok(Def),
        Err(_) => return,
    };
    assert_eq!(SyncMode::from_env().ok(), expected.ok());
}

// ----- execution, with a recording StreamOps -----

fn run(p: &Plan) -> (Vec<Call>, Vec<Call>) {
    let mut rec = Recorder::default();
    p.before_launch(&mut rec).unwrap();
    let before = std::mem::take(&mut rec.calls);
    p.after_launch(&mut rec).unwrap();
    (before, rec.calls)
}

#[test]
fn default_mode_sequence() {
    let p = plan(&[Some(A), None, Some(B), Some(A)], Some(C), Def).unwrap();
    let (before, after) = run(&p);
    assert_eq!(before, [Call::Sync(A), Call::Sync(B)]);
    assert_eq!(
        after,
        [Call::Record(C, 0), Call::Wait(A, 0), Call::Wait(B, 0)]
    );
}

#[test]
fn event_mode_sequence() {
    let p = plan(&[Some(L), Some(A), Some(P)], None, Ev).unwrap();
    assert_eq!(p.launch_stream(), L);
    let (before, after) = run(&p);
    assert_eq!(
        before,
        [
            Call::Record(A, 0),
            Call::Wait(L, 0),
            Call::Record(P, 1),
            Call::Wait(L, 1)
        ]
    );
    assert_eq!(
        after,
        [Call::Record(L, 2), Call::Wait(A, 2), Call::Wait(P, 2)]
    );
}

#[test]
fn trivial_plans_make_no_calls() {
    for p in [
        plan(&[Some(A), Some(B)], Some(C), Off).unwrap(),
        plan(&[Some(A), Some(A)], None, Def).unwrap(),
        plan(&[Some(A)], Some(A), Ev).unwrap(),
        plan(&[None, None], None, Def).unwrap(),
        plan(&[], Some(C), Ev).unwrap(),
    ] {
        assert!(p.is_trivial(), "{p:?}");
        assert_eq!(run(&p), (vec![], vec![]), "{p:?}");
    }
}

#[test]
fn errors_stop_execution() {
    let p = plan(&[Some(A), Some(B)], Some(C), Def).unwrap();
    let mut rec = Recorder {
        fail_at: Some(0),
        ..Recorder::default()
    };
    let e = p.before_launch(&mut rec).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cuda { code: 700 });
    assert!(rec.calls.is_empty(), "nothing after the failing sync");

    let p = plan(&[Some(A), Some(B)], Some(C), Ev).unwrap();
    let mut rec = Recorder {
        fail_at: Some(1),
        ..Recorder::default()
    };
    assert!(p.before_launch(&mut rec).is_err());
    assert_eq!(rec.calls, [Call::Record(A, 0)], "stops at the failing wait");

    let mut rec = Recorder {
        fail_at: Some(0),
        ..Recorder::default()
    };
    assert!(p.after_launch(&mut rec).is_err());
    assert!(rec.calls.is_empty(), "no waits without the kernel's event");
}

// ----- property -----

fn stream() -> impl Strategy<Value = StreamRef> {
    // Few distinct handles, so that duplicates and agreements are common.
    prop_oneof![
        Just(L),
        Just(P),
        (3u64..7).prop_map(h),
        any::<u64>().prop_filter_map("0..=2", |v| NonZeroU64::new(v)
            .filter(|v| v.get() > 2)
            .map(StreamRef::Handle))
    ]
}

fn mode() -> impl Strategy<Value = SyncMode> {
    prop_oneof![Just(Def), Just(Ev), Just(Off)]
}

proptest! {
    #[test]
    fn every_producer_stream_is_ordered(
        producers in proptest::collection::vec(proptest::option::of(stream()), 0..=MAX_PRODUCERS),
        caller in proptest::option::of(stream()),
        mode in mode(),
    ) {
        let p = plan(&producers, caller, mode).unwrap();
        if let Some(c) = caller {
            prop_assert_eq!(p.launch_stream(), c);
        }
        for s in producers.iter().flatten() {
            if *s == p.launch_stream() {
                continue;
            }
            match mode {
                Def => {
                    prop_assert!(p.host_syncs().contains(s));
                    prop_assert!(p.waits_after().contains(s));
                }
                Ev => {
                    prop_assert!(p.waits_before().contains(s));
                    prop_assert!(p.waits_after().contains(s));
                }
                Off => {}
            }
        }
        if mode == Off {
            prop_assert!(p.is_trivial());
        }
        // Nothing beyond the producers' foreign streams, each once, never the launch stream.
        let f = p.foreign_streams();
        for (i, s) in f.iter().enumerate() {
            prop_assert!(*s != p.launch_stream());
            prop_assert!(producers.contains(&Some(*s)));
            prop_assert!(!f[..i].contains(s));
        }
        // Execution makes exactly the calls the plan lists.
        let (before, after) = run(&p);
        prop_assert_eq!(before.len(), p.host_syncs().len() + 2 * p.waits_before().len());
        let expected_after = if p.waits_after().is_empty() { 0 } else { 1 + p.waits_after().len() };
        prop_assert_eq!(after.len(), expected_after);
    }
}
