//! Property test: random operation sequences against a naive `Vec` model.
//!
//! The model keeps every live timer with its start, duration, ref flag and
//! an append sequence number; its "lists" are just a filter and a sort. After
//! every operation the real structure must agree on lengths, ref count,
//! deadlines and per-list order; every clock advance drains `expire` and
//! checks: fired timers are exactly the model's due ones (none lost, none
//! early), in non-decreasing deadline order, and afterwards `next_expiry` is
//! past `now` and no later than the model's earliest deadline.

use proptest::prelude::*;

use super::*;

/// Few durations, so lists are shared, created and dropped often. 0 ms is a
/// legal edge case (due at once).
const DURATIONS: [u64; 5] = [0, 1, 2, 5, 10];

#[derive(Clone, Debug)]
enum Op {
    Enroll {
        duration: usize,
        refed: bool,
    },
    Refresh {
        pick: usize,
    },
    Rearm {
        pick: usize,
        duration: usize,
    },
    Unenroll {
        pick: usize,
    },
    SetRef {
        pick: usize,
        refed: bool,
    },
    /// Advance the clock by this many µs, then drain `expire`.
    Advance {
        micros: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let d = 0..DURATIONS.len();
    prop_oneof![
        4 => (d.clone(), any::<bool>()).prop_map(|(duration, refed)| Op::Enroll { duration, refed }),
        4 => any::<usize>().prop_map(|pick| Op::Refresh { pick }),
        2 => (any::<usize>(), d).prop_map(|(pick, duration)| Op::Rearm { pick, duration }),
        2 => any::<usize>().prop_map(|pick| Op::Unenroll { pick }),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(pick, refed)| Op::SetRef { pick, refed }),
        3 => (0..12_000u64).prop_map(|micros| Op::Advance { micros }),
    ]
}

#[derive(Debug)]
struct ModelTimer {
    id: TimerId,
    payload: u64,
    start: Micros,
    duration_ms: u64,
    refed: bool,
    /// Order of the last append (enroll, refresh, rearm): sorts a list.
    seq: u64,
}

impl ModelTimer {
    fn deadline(&self) -> Micros {
        self.start + self.duration_ms * 1000
    }
}

#[derive(Default)]
struct Model {
    timers: Vec<ModelTimer>,
    now: Micros,
    seq: u64,
}

impl Model {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
}

fn apply(real: &mut TimerLists<u64>, model: &mut Model, op: Op) {
    let now = model.now;
    let pick = |p: usize, m: &Model| (!m.timers.is_empty()).then(|| p % m.timers.len());
    match op {
        Op::Enroll { duration, refed } => {
            let payload = model.next_seq();
            let id = real.enroll(now, DURATIONS[duration], refed, payload);
            let timer = ModelTimer {
                id,
                payload,
                start: now,
                duration_ms: DURATIONS[duration],
                refed,
                seq: payload,
            };
            model.timers.push(timer);
        }
        Op::Refresh { pick: p } => {
            if let Some(i) = pick(p, model) {
                real.refresh(model.timers[i].id, now);
                let seq = model.next_seq();
                let t = &mut model.timers[i];
                (t.start, t.seq) = (now, seq);
            }
        }
        Op::Rearm { pick: p, duration } => {
            if let Some(i) = pick(p, model) {
                real.rearm(model.timers[i].id, DURATIONS[duration], now);
                let seq = model.next_seq();
                let t = &mut model.timers[i];
                (t.start, t.duration_ms, t.seq) = (now, DURATIONS[duration], seq);
            }
        }
        Op::Unenroll { pick: p } => {
            if let Some(i) = pick(p, model) {
                let t = model.timers.swap_remove(i);
                assert_eq!(real.unenroll(t.id), t.payload);
            }
        }
        Op::SetRef { pick: p, refed } => {
            if let Some(i) = pick(p, model) {
                real.set_ref(model.timers[i].id, refed);
                model.timers[i].refed = refed;
            }
        }
        Op::Advance { micros } => {
            model.now += micros;
            drain_and_compare(real, model);
        }
    }
}

fn drain_and_compare(real: &mut TimerLists<u64>, model: &mut Model) {
    let now = model.now;
    let mut last = 0;
    while let Some(Due {
        id,
        payload,
        deadline: told,
    }) = real.expire(now)
    {
        let i = model.timers.iter().position(|t| t.id == id);
        let t = model
            .timers
            .swap_remove(i.expect("fired a timer the model does not have"));
        assert_eq!(t.payload, payload);
        let deadline = t.deadline();
        assert_eq!(told, deadline, "the deadline it came with");
        assert!(
            deadline <= now,
            "fired early: deadline {deadline} > now {now}"
        );
        assert!(deadline >= last, "out of order: {deadline} after {last}");
        last = deadline;
    }
    let missed: Vec<_> = model
        .timers
        .iter()
        .filter(|t| t.deadline() <= now)
        .collect();
    assert!(missed.is_empty(), "due at {now} but not fired: {missed:?}");
    let earliest = model.timers.iter().map(ModelTimer::deadline).min();
    match (real.next_expiry(), earliest) {
        (None, None) => {}
        (Some(next), Some(earliest)) => {
            assert!(
                next > now,
                "next_expiry {next} not past now {now} after a drain"
            );
            assert!(
                next <= earliest,
                "next_expiry {next} later than deadline {earliest}"
            );
        }
        other => panic!("next_expiry / model disagree: {other:?}"),
    }
}

fn compare(real: &TimerLists<u64>, model: &Model) {
    real.check_invariants();
    assert_eq!(real.len(), model.timers.len());
    assert_eq!(
        real.ref_count(),
        model.timers.iter().filter(|t| t.refed).count()
    );
    if let Some(earliest) = model.timers.iter().map(ModelTimer::deadline).min() {
        assert!(real.next_expiry().is_some_and(|next| next <= earliest));
    }
    for t in &model.timers {
        assert_eq!(real.deadline(t.id), t.deadline());
        assert_eq!(real.is_refed(t.id), t.refed);
        assert_eq!(real.get(t.id), Some(&t.payload));
    }
    for d in DURATIONS {
        let mut expected: Vec<_> = model.timers.iter().filter(|t| t.duration_ms == d).collect();
        expected.sort_by_key(|t| t.seq);
        let expected: Vec<_> = expected.iter().map(|t| t.id).collect();
        let actual: Vec<_> = real.iter_list(d).map(|(id, _)| id).collect();
        assert_eq!(actual, expected, "order of the {d} ms list");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn behaves_like_the_model(ops in proptest::collection::vec(op(), 1..120)) {
        let mut real = TimerLists::new();
        let mut model = Model::default();
        for op in ops {
            apply(&mut real, &mut model, op);
            compare(&real, &model);
        }
        // Finally everything fires.
        model.now += 11_000;
        drain_and_compare(&mut real, &mut model);
        prop_assert!(real.is_empty() && model.timers.is_empty());
    }
}
