//! The stream plan under CUDA graph capture, through the public API only: the rule table of
//! `Plan::under_capture` (launch stream state × producer stream state × sync mode), the calls a
//! captured plan makes (with a recording `StreamOps`), and properties over random producers.

use ferrocuda_host::stream::{plan, Capture, Plan, StreamRef, SyncMode};
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

const A: StreamRef = h(0xA0);
const B: StreamRef = h(0xB0);
const C: StreamRef = h(0xC0);
const LEGACY: StreamRef = StreamRef::Legacy;

use Capture::{Active, Implicit, Invalidated, None as Idle};
use SyncMode::{Default as Def, Event as Ev, Off};

/// What `under_capture` must produce.
#[derive(Debug, PartialEq)]
enum Want {
    /// A plan with these host syncs, waits before and waits after.
    Plan(
        &'static [StreamRef],
        &'static [StreamRef],
        &'static [StreamRef],
    ),
    /// Refused; the stream the refusal names (`None`: the launch stream).
    Refused(Option<StreamRef>),
}

use Want::{Plan as P, Refused as R};

const E: &[StreamRef] = &[];
const JUST_A: &[StreamRef] = &[A];

/// One producer stream `A`, launched on `C`: every launch state × producer state × mode.
#[rustfmt::skip]
const TABLE: &[(SyncMode, Capture, Capture, Want)] = &[
    // both in capture 7: the host sync becomes a captured event edge; event mode unchanged
    (Def, Active(7), Active(7), P(E, JUST_A, JUST_A)),
    (Ev,  Active(7), Active(7), P(E, JUST_A, JUST_A)),
    // the producer outside the capture, in another, legacy while blocking capture, invalidated
    (Def, Active(7), Idle,        R(Some(A))),
    (Ev,  Active(7), Idle,        R(Some(A))),
    (Def, Active(7), Active(8),   R(Some(A))),
    (Ev,  Active(7), Active(8),   R(Some(A))),
    (Def, Active(7), Implicit,    R(Some(A))),
    (Ev,  Active(7), Implicit,    R(Some(A))),
    (Def, Active(7), Invalidated, R(Some(A))),
    (Ev,  Active(7), Invalidated, R(Some(A))),
    // ids the driver cannot give (before cuStreamGetCaptureInfo_v3): not known to be one capture
    (Def, Active(0), Active(0),   R(Some(A))),
    (Ev,  Active(0), Active(7),   R(Some(A))),
    // the launch stream not capturing, the producer capturing: a wait would pull C in
    (Def, Idle, Active(7),   R(Some(A))),
    (Ev,  Idle, Active(7),   R(Some(A))),
    (Def, Idle, Invalidated, R(Some(A))),
    (Ev,  Idle, Implicit,    R(Some(A))),
    // nobody capturing: the usual plans
    (Def, Idle, Idle, P(JUST_A, E, JUST_A)),
    (Ev,  Idle, Idle, P(E, JUST_A, JUST_A)),
];

fn one_producer(mode: SyncMode) -> Plan {
    plan(&[Some(A)], Some(C), mode).unwrap()
}

fn lists(p: &Plan) -> Want {
    fn leak(s: &[StreamRef]) -> &'static [StreamRef] {
        Box::leak(s.to_vec().into_boxed_slice())
    }
    P(
        leak(p.host_syncs()),
        leak(p.waits_before()),
        leak(p.waits_after()),
    )
}

#[test]
fn rule_table() {
    for (mode, launch, producer, want) in TABLE {
        let p = one_producer(*mode);
        assert_eq!(p.ordered_streams(), JUST_A);
        let got = match p.under_capture(*launch, &[*producer]) {
            Ok(c) => {
                assert_eq!(c.capture(), *launch);
                assert_eq!(c.is_captured(), launch.is_active());
                assert_eq!(c.foreign_streams(), p.foreign_streams());
                assert_eq!(c.launch_stream(), C);
                lists(&c)
            }
            Err(r) => {
                assert_eq!(r.error.kind(), ErrorKind::Unsupported, "{r:?}");
                R(r.stream)
            }
        };
        assert_eq!(
            &got, want,
            "{mode:?}, launch {launch:?}, producer {producer:?}"
        );
    }
}

#[test]
fn off_mode_asks_nothing_of_producers_and_is_captured() {
    let p = one_producer(Off);
    assert!(p.ordered_streams().is_empty());
    let c = p.under_capture(Active(3), &[]).unwrap();
    assert!(c.is_captured());
    assert!(c.is_trivial());
    assert_eq!(
        c.foreign_streams(),
        JUST_A,
        "left unordered, as without capture"
    );
}

#[test]
fn unusable_launch_stream_refused_in_every_mode() {
    for mode in [Def, Ev, Off] {
        for launch in [Implicit, Invalidated] {
            let p = plan(&[Some(LEGACY)], None, mode).unwrap();
            let states = vec![Idle; p.ordered_streams().len()];
            let r = p.under_capture(launch, &states).unwrap_err();
            assert_eq!(r.stream, None, "{mode:?} {launch:?}");
            assert_eq!(r.error.kind(), ErrorKind::Unsupported);
            assert!(
                r.error.message().contains("legacy default stream (1)"),
                "{}",
                r.error.message()
            );
        }
    }
}

#[test]
fn refusals_say_why_and_what_to_do() {
    let p = one_producer(Def);
    let outside = p.under_capture(Active(7), &[Idle]).unwrap_err();
    let m = outside.error.message();
    assert!(
        m.contains("stream 0xc0") && m.contains("stream 0xa0"),
        "{m}"
    );
    assert!(
        m.contains("not part of that capture") && m.contains("sync mode off"),
        "{m}"
    );
    let pulled = p.under_capture(Idle, &[Active(7)]).unwrap_err();
    assert!(pulled
        .error
        .message()
        .contains("pull stream 0xc0 into that capture"));
    let merged = p.under_capture(Active(7), &[Active(8)]).unwrap_err();
    assert!(merged.error.message().contains("different CUDA graphs"));
}

#[test]
fn wrong_number_of_states_is_a_value_error() {
    let p = plan(&[Some(A), Some(B)], Some(C), Ev).unwrap();
    let r = p.under_capture(Active(1), &[Active(1)]).unwrap_err();
    assert_eq!(r.error.kind(), ErrorKind::Value);
}

#[test]
fn not_capturing_leaves_the_plan_unchanged() {
    for mode in [Def, Ev, Off] {
        let p = plan(&[Some(A), None, Some(B)], Some(C), mode).unwrap();
        let states = vec![Idle; p.ordered_streams().len()];
        assert_eq!(p.under_capture(Idle, &states).unwrap(), p);
    }
}

// ----- execution -----

#[test]
fn captured_default_mode_records_and_waits_instead_of_synchronizing() {
    let p = plan(&[Some(A), None, Some(B), Some(A)], Some(C), Def)
        .unwrap()
        .under_capture(Active(5), &[Active(5), Active(5)])
        .unwrap();
    let mut rec = Recorder::default();
    p.before_launch(&mut rec).unwrap();
    assert_eq!(
        rec.calls,
        [
            Call::Record(A, 0),
            Call::Wait(C, 0),
            Call::Record(B, 1),
            Call::Wait(C, 1)
        ]
    );
    rec.calls.clear();
    p.after_launch(&mut rec).unwrap();
    assert_eq!(
        rec.calls,
        [Call::Record(C, 2), Call::Wait(A, 2), Call::Wait(B, 2)],
        "the producers wait on the kernel inside the capture: no stream outside it is touched"
    );
}

// ----- properties -----

fn stream() -> impl Strategy<Value = StreamRef> {
    prop_oneof![
        Just(StreamRef::Legacy),
        Just(StreamRef::PerThread),
        (3u64..9).prop_map(h),
    ]
}

fn mode() -> impl Strategy<Value = SyncMode> {
    prop_oneof![Just(Def), Just(Ev), Just(Off)]
}

proptest! {
    #[test]
    fn one_capture_never_host_synchronizes(
        producers in proptest::collection::vec(proptest::option::of(stream()), 0..=8),
        caller in proptest::option::of(stream()),
        mode in mode(),
        id in 1u64..u64::MAX,
    ) {
        let p = plan(&producers, caller, mode).unwrap();
        let states = vec![Active(id); p.ordered_streams().len()];
        let c = p.under_capture(Active(id), &states).unwrap();
        prop_assert!(c.host_syncs().is_empty());
        prop_assert_eq!(c.waits_after(), p.waits_after());
        prop_assert_eq!(c.waits_before(), p.ordered_streams());
        let mut rec = Recorder::default();
        c.before_launch(&mut rec).unwrap();
        c.after_launch(&mut rec).unwrap();
        prop_assert!(rec.calls.iter().all(|k| !matches!(k, Call::Sync(_))));
        // Every wait of the launch stream is on an event of a producer in the capture, and
        // every other stream waits only after the kernel's record on the launch stream.
        for k in &rec.calls {
            if let Call::Wait(s, _) = k {
                prop_assert!(*s == c.launch_stream() || c.ordered_streams().contains(s));
            }
        }
    }

    #[test]
    fn a_producer_outside_the_capture_is_named(
        producers in proptest::collection::vec(proptest::option::of(stream()), 1..=8),
        caller in stream(),
        outside in 0usize..8,
        ev in any::<bool>(),
    ) {
        let mode = if ev { Ev } else { Def };
        let p = plan(&producers, Some(caller), mode).unwrap();
        let n = p.ordered_streams().len();
        prop_assume!(n > 0);
        let mut states = vec![Active(4); n];
        states[outside % n] = Idle;
        let r = p.under_capture(Active(4), &states).unwrap_err();
        prop_assert_eq!(r.stream, Some(p.ordered_streams()[outside % n]));
    }
}
