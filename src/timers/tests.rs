//! Unit tests: one behaviour per test, structural invariants checked after
//! every step.

use super::*;

const MS: Micros = 1000;

/// Ids of the list for `duration_ms`, oldest first.
fn order(t: &TimerLists<u64>, duration_ms: u64) -> Vec<TimerId> {
    t.iter_list(duration_ms).map(|(id, _)| id).collect()
}

/// `expire` as the assertions compare it: the timer's id and payload.
trait ExpirePair {
    fn expire_pair(&mut self, now: Micros) -> Option<(TimerId, u64)>;
}

impl ExpirePair for TimerLists<u64> {
    fn expire_pair(&mut self, now: Micros) -> Option<(TimerId, u64)> {
        self.expire(now).map(|due| (due.id, due.payload))
    }
}

/// Drain everything due at `now`, checking invariants after each pop.
fn drain(t: &mut TimerLists<u64>, now: Micros) -> Vec<u64> {
    let mut fired = Vec::new();
    while let Some((id, payload)) = t.expire_pair(now) {
        assert!(t.get(id).is_none(), "expired timer still present");
        fired.push(payload);
        t.check_invariants();
    }
    t.check_invariants();
    fired
}

#[test]
fn node_is_compact() {
    let size = std::mem::size_of::<Node<u64>>();
    assert!(size <= 40, "Node<u64> is {size} bytes");
}

#[test]
fn enroll_appends_oldest_first() {
    let mut t = TimerLists::new();
    let a = t.enroll(0, 10, false, 1);
    let b = t.enroll(1, 10, false, 2);
    let c = t.enroll(1, 10, true, 3);
    t.check_invariants();
    assert_eq!(order(&t, 10), [a, b, c]);
    assert_eq!((t.len(), t.is_empty()), (3, false));
    assert_eq!(t.deadline(a), 10 * MS);
    assert_eq!(t.deadline(c), 10 * MS + 1);
    assert_eq!(t.get(b), Some(&2));
    assert_eq!(t.next_expiry(), Some(10 * MS));
}

#[test]
fn refresh_moves_to_tail_without_touching_the_heap() {
    let mut t = TimerLists::new();
    let a = t.enroll(0, 10, false, 1);
    let b = t.enroll(0, 10, false, 2);
    let c = t.enroll(0, 10, false, 3);
    t.refresh(a, 5);
    t.check_invariants();
    assert_eq!(order(&t, 10), [b, c, a]);
    assert_eq!(t.deadline(a), 10 * MS + 5);
    t.refresh(c, 7); // middle
    assert_eq!(order(&t, 10), [b, a, c]);
    t.refresh(c, 9); // already tail: start moves, order stays
    assert_eq!(order(&t, 10), [b, a, c]);
    assert_eq!(t.deadline(c), 10 * MS + 9);
    t.refresh(c, 9); // no-op
    t.check_invariants();
    // Lazy: the heap still holds the list's original key.
    assert_eq!(t.next_expiry(), Some(10 * MS));
}

#[test]
fn rearm_moves_between_lists_keeping_the_id() {
    let mut t = TimerLists::new();
    let a = t.enroll(0, 10, true, 1);
    let b = t.enroll(0, 20, false, 2);
    t.rearm(a, 20, 3 * MS);
    t.check_invariants();
    assert_eq!(t.get(a), Some(&1));
    assert_eq!(order(&t, 20), [b, a]);
    assert_eq!(order(&t, 10), []);
    assert_eq!(t.lists().count(), 1, "the emptied 10 ms list is gone");
    assert_eq!(t.deadline(a), 23 * MS);
    assert!(t.is_refed(a));
    assert_eq!(t.ref_count(), 1);
    // Into a list that does not exist yet.
    t.rearm(b, 5, 4 * MS);
    t.check_invariants();
    assert_eq!(order(&t, 5), [b]);
    assert_eq!(t.deadline(b), 9 * MS);
    // Same duration: a plain refresh.
    t.rearm(a, 20, 6 * MS);
    assert_eq!(order(&t, 20), [a]);
    assert_eq!(t.deadline(a), 26 * MS);
    t.check_invariants();
}

#[test]
fn unenroll_head_middle_tail() {
    let mut t = TimerLists::new();
    let ids: Vec<_> = (0..5).map(|i| t.enroll(i, 10, false, i)).collect();
    assert_eq!(t.unenroll(ids[2]), 2); // middle
    t.check_invariants();
    assert_eq!(t.unenroll(ids[0]), 0); // head
    t.check_invariants();
    assert_eq!(t.unenroll(ids[4]), 4); // tail
    t.check_invariants();
    assert_eq!(order(&t, 10), [ids[1], ids[3]]);
    assert_eq!(t.len(), 2);
}

#[test]
fn lists_vanish_when_empty() {
    let mut t = TimerLists::new();
    let a = t.enroll(0, 10, false, 1);
    let b = t.enroll(0, 20, false, 2);
    t.unenroll(a);
    t.check_invariants();
    assert_eq!(t.lists().map(|l| l.duration_ms).collect::<Vec<_>>(), [20]);
    assert_eq!(t.next_expiry(), Some(20 * MS), "10 ms list left the heap");
    t.unenroll(b);
    t.check_invariants();
    assert!(t.is_empty());
    assert_eq!(t.next_expiry(), None);
    // And through expire.
    t.enroll(0, 10, false, 3);
    assert_eq!(drain(&mut t, 10 * MS), [3]);
    assert_eq!(t.lists().count(), 0);
    assert_eq!(t.next_expiry(), None);
}

#[test]
fn never_fires_early() {
    let mut t = TimerLists::new();
    let a = t.enroll(7, 10, false, 1);
    assert_eq!(t.expire_pair(t.deadline(a) - 1), None);
    t.check_invariants();
    assert_eq!(t.expire_pair(t.deadline(a)), Some((a, 1)));
    assert!(t.is_empty());
}

#[test]
fn now_plus_one_rule_rekeys_a_refreshed_list() {
    let mut t = TimerLists::new();
    let a = t.enroll(0, 10, false, 1);
    t.refresh(a, 5 * MS);
    assert_eq!(t.next_expiry(), Some(10 * MS), "stale-early key");
    // Woken at the stale key: nothing fires, the list is re-keyed exactly.
    assert_eq!(t.expire_pair(10 * MS), None);
    t.check_invariants();
    let next = t.next_expiry().unwrap();
    assert!(next > 10 * MS);
    assert_eq!(next, 15 * MS);
    assert_eq!(t.expire_pair(15 * MS - 1), None);
    assert_eq!(t.expire_pair(15 * MS), Some((a, 1)));
}

#[test]
fn after_expire_returns_none_next_expiry_is_in_the_future() {
    let mut t = TimerLists::new();
    for (i, d) in [10, 20, 30, 40].into_iter().enumerate() {
        let id = t.enroll(0, d, false, i as u64);
        t.refresh(id, 9 * MS); // every key goes stale
    }
    assert_eq!(drain(&mut t, 12 * MS), Vec::<u64>::new());
    assert!(t.next_expiry().unwrap() > 12 * MS);
    assert_eq!(t.next_expiry(), Some(19 * MS));
}

#[test]
fn stale_key_does_not_jump_the_queue() {
    // List A (10 ms) is keyed at 10 ms, but its head was refreshed to a true
    // deadline of 18 ms. List B (15 ms) is due at 16 ms. B must fire first.
    let mut t = TimerLists::new();
    let a = t.enroll(0, 10, false, 1);
    let b = t.enroll(MS, 15, false, 2);
    t.refresh(a, 8 * MS);
    assert_eq!(t.next_expiry(), Some(10 * MS));
    assert_eq!(t.expire_pair(20 * MS), Some((b, 2)));
    assert_eq!(t.expire_pair(20 * MS), Some((a, 1)));
    assert_eq!(t.expire_pair(20 * MS), None);
}

#[test]
fn fires_in_deadline_order_across_durations() {
    let mut t = TimerLists::new();
    let mut expected = Vec::new();
    for (now, d) in [
        (0, 30),
        (1, 10),
        (2, 20),
        (3, 10),
        (5 * MS, 5),
        (6 * MS, 30),
    ] {
        let id = t.enroll(now, d, false, now);
        expected.push((t.deadline(id), now));
    }
    expected.sort();
    let fired = drain(&mut t, Micros::MAX);
    assert_eq!(fired, expected.iter().map(|&(_, p)| p).collect::<Vec<_>>());
}

#[test]
fn equal_deadlines_fire_in_keying_order() {
    let mut t = TimerLists::new();
    let a = t.enroll(10 * MS, 10, false, 1); // due 20 ms, keyed first
    let b = t.enroll(0, 20, false, 2); // due 20 ms, keyed second
    assert_eq!(t.expire_pair(20 * MS), Some((a, 1)));
    assert_eq!(t.expire_pair(20 * MS), Some((b, 2)));
}

#[test]
fn ref_count_is_exact() {
    let mut t = TimerLists::new();
    let a = t.enroll(0, 10, true, 1);
    let b = t.enroll(0, 10, false, 2);
    let c = t.enroll(0, 20, true, 3);
    assert_eq!(t.ref_count(), 2);
    t.set_ref(b, true);
    t.set_ref(b, true); // idempotent
    assert_eq!(t.ref_count(), 3);
    assert!(t.is_refed(b));
    t.set_ref(a, false);
    assert!(!t.is_refed(a));
    assert_eq!(t.ref_count(), 2);
    t.check_invariants();
    t.unenroll(c);
    assert_eq!(t.ref_count(), 1);
    assert_eq!(t.expire_pair(10 * MS), Some((a, 1)));
    assert_eq!(t.ref_count(), 1, "unref'd a leaving changes nothing");
    assert_eq!(t.expire_pair(10 * MS), Some((b, 2)));
    assert_eq!(t.ref_count(), 0);
    t.check_invariants();
}

#[test]
fn iter_list_oldest_first_and_empty_for_unknown_duration() {
    let mut t = TimerLists::new();
    let a = t.enroll(0, 10, false, 100);
    let b = t.enroll(1, 10, false, 200);
    t.enroll(1, 20, false, 300);
    let items: Vec<_> = t.iter_list(10).map(|(id, p)| (id, *p)).collect();
    assert_eq!(items, [(a, 100), (b, 200)]);
    assert_eq!(t.iter_list(99).count(), 0);
}

#[test]
fn lists_report_exact_figures() {
    let mut t = TimerLists::new();
    let a = t.enroll(0, 10, true, 1);
    t.enroll(2, 10, false, 2);
    t.enroll(3, 20, true, 3);
    t.refresh(a, 4); // head changes; the heap key stays stale, the view is exact
    let mut infos: Vec<_> = t.lists().collect();
    infos.sort_by_key(|l| l.duration_ms);
    assert_eq!(
        infos,
        [
            ListInfo {
                duration_ms: 10,
                len: 2,
                refed: 1,
                next_expiry: 10 * MS + 2
            },
            ListInfo {
                duration_ms: 20,
                len: 1,
                refed: 1,
                next_expiry: 20 * MS + 3
            },
        ]
    );
}

#[test]
fn huge_durations_saturate_instead_of_overflowing() {
    let mut t = TimerLists::new();
    let a = t.enroll(5, u64::MAX, false, 1);
    assert_eq!(t.deadline(a), Micros::MAX);
    assert_eq!(t.expire_pair(Micros::MAX - 1), None);
    assert_eq!(t.expire_pair(Micros::MAX), Some((a, 1)));
}

#[test]
fn steady_state_does_not_grow_storage() {
    let mut t = TimerLists::with_capacity(4);
    let ids: Vec<_> = (0..4).map(|i| t.enroll(0, 10 + i, false, i)).collect();
    let caps = (t.nodes.capacity(), t.lists.capacity());
    let mut now = 0;
    for round in 0..100 {
        now += 1;
        for (i, &id) in ids.iter().enumerate() {
            t.refresh(id, now);
            t.rearm(id, 10 + (i as u64 + round) % 4, now);
        }
        let p = t.unenroll(ids[0]);
        assert_eq!(t.enroll(now, 10, false, p), ids[0], "slot reused");
    }
    t.check_invariants();
    assert_eq!((t.nodes.capacity(), t.lists.capacity()), caps);
}

#[test]
#[should_panic(expected = "is not an enrolled timer")]
fn stale_id_panics() {
    let mut t = TimerLists::new();
    let a = t.enroll(0, 10, false, 1);
    t.unenroll(a);
    t.refresh(a, 1);
}

#[test]
fn a_short_stamp_measures_short_spans_across_its_wrap_point() {
    let wrap = ShortStamp::SPAN;
    for taken in [0, wrap - 1, wrap - 300_000, 5 * wrap - 1, u64::MAX - 10] {
        let stamp = ShortStamp::at(taken);
        for span in [0, 1, 700_000, 1_000_000, wrap - 1] {
            let now = taken.wrapping_add(span);
            assert_eq!(stamp.elapsed(now), span, "taken {taken}, {span} µs later");
        }
    }
}
