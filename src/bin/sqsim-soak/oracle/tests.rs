//! The oracle on hand-made histories: each rule fires on a history that breaks it and stays
//! quiet on the legitimate history closest to it (redelivery after expiry or release, a
//! delete still in flight), so a clean soak means something.

use std::time::{Duration, Instant};

use super::{Delivered, Got, Oracle, Outcome, ReceiveCall};
use crate::body::{Body, GroupPos, MsgKey, QueueKind};

fn key(queue: QueueKind, seq: u64) -> MsgKey {
    MsgKey {
        queue,
        producer: 1,
        seq,
    }
}

fn sent(o: &Oracle, queue: QueueKind, seq: u64, group: Option<GroupPos>) -> Body {
    let b = Body {
        key: key(queue, seq),
        group,
    };
    o.begin_send(b.key, b.group);
    o.end_send(b.key, Ok(format!("id-{seq}")));
    b
}

fn got(b: &Body, count: u32) -> Got {
    Got {
        body: b.encode(3),
        message_id: format!("id-{}", b.key.seq),
        count: Some(count),
        group_id: b.group_id(),
    }
}

/// A receive by `consumer` from `queue`, `from_ms..to_ms` relative to `t0`.
fn call(
    queue: QueueKind,
    consumer: usize,
    t0: Instant,
    from_ms: i64,
    to_ms: i64,
    vt: u32,
) -> ReceiveCall {
    let at = |ms: i64| {
        if ms >= 0 {
            t0 + Duration::from_millis(ms as u64)
        } else {
            t0 - Duration::from_millis((-ms) as u64)
        }
    };
    ReceiveCall {
        ticket: 0,
        consumer,
        queue,
        start: at(from_ms),
        end: at(to_ms),
        visibility: vt,
    }
}

fn rules(o: &Oracle) -> Vec<&'static str> {
    o.violations().iter().map(|v| v.rule).collect()
}

#[test]
fn bodies_round_trip_and_strangers_are_refused() {
    let b = Body {
        key: key(QueueKind::Fifo, 7),
        group: Some(GroupPos { group: 3, index: 2 }),
    };
    assert_eq!(Body::parse(&b.encode(10)), Some(b));
    assert_eq!(Body::parse("hello"), None);
    assert_eq!(Body::parse("soak|fifo|1|7|3|2|xy"), None);
}

#[test]
fn a_second_receive_within_the_hold_is_a_violation() {
    let o = Oracle::new(3);
    let b = sent(&o, QueueKind::Standard, 1, None);
    let t0 = Instant::now();
    o.record_receive(&call(QueueKind::Standard, 1, t0, 0, 10, 5), &[got(&b, 1)]);
    o.record_receive(&call(QueueKind::Standard, 2, t0, 20, 30, 5), &[got(&b, 2)]);
    assert_eq!(rules(&o), ["held-twice"]);
}

#[test]
fn redelivery_after_expiry_or_release_is_fine() {
    let o = Oracle::new(3);
    let b = sent(&o, QueueKind::Standard, 1, None);
    let t0 = Instant::now();
    // Held 2 s from 10 s ago: long expired.
    o.record_receive(
        &call(QueueKind::Standard, 1, t0, -10_000, -9_990, 2),
        &[got(&b, 1)],
    );
    let (recv, _) = o.record_receive(&call(QueueKind::Standard, 2, t0, 0, 5, 5), &[got(&b, 2)]);
    // Released, then received again at once.
    let t = o.begin_change(b.key, recv, 0).expect("held");
    o.end_change(
        b.key,
        QueueKind::Standard,
        t,
        0,
        Outcome::Ok,
        Instant::now(),
    );
    let now = Instant::now();
    o.record_receive(&call(QueueKind::Standard, 3, now, 1, 2, 5), &[got(&b, 3)]);
    assert!(rules(&o).is_empty(), "{:?}", o.violations());
}

#[test]
fn receiving_after_an_acknowledged_delete_is_a_violation() {
    let o = Oracle::new(3);
    let b = sent(&o, QueueKind::Standard, 1, None);
    let t0 = Instant::now();
    let (recv, d) = o.record_receive(&call(QueueKind::Standard, 1, t0, 0, 1, 5), &[got(&b, 1)]);
    assert_eq!(d, [Delivered::Known(b.key)]);
    let t = o.begin_delete(b.key, recv).expect("held");
    o.end_delete(b.key, QueueKind::Standard, t, Outcome::Ok, Instant::now());
    let later = Instant::now() + Duration::from_millis(1);
    o.record_receive(&call(QueueKind::Standard, 2, later, 0, 1, 5), &[got(&b, 2)]);
    assert_eq!(rules(&o), ["received-after-delete"]);
    o.finish();
    assert_eq!(rules(&o), ["received-after-delete"], "deleted, so not lost");
}

#[test]
fn an_acknowledged_send_never_deleted_is_lost() {
    let o = Oracle::new(3);
    sent(
        &o,
        QueueKind::Fair,
        1,
        Some(GroupPos { group: 0, index: 0 }),
    );
    assert_eq!(o.unsettled(), 1);
    o.finish();
    assert_eq!(rules(&o), ["lost"]);
}

#[test]
fn receive_counts_must_rise_and_respect_max_receive_count() {
    let o = Oracle::new(3);
    let b = sent(&o, QueueKind::Source, 1, None);
    let t0 = Instant::now();
    o.record_receive(
        &call(QueueKind::Source, 1, t0, -20_000, -19_990, 2),
        &[got(&b, 2)],
    );
    o.record_receive(
        &call(QueueKind::Source, 1, t0, -10_000, -9_990, 2),
        &[got(&b, 2)],
    );
    o.record_receive(
        &call(QueueKind::Source, 1, t0, -5_000, -4_990, 2),
        &[got(&b, 4)],
    );
    o.record_receive(&call(QueueKind::Dlq, 2, t0, 0, 1, 2), &[got(&b, 2)]);
    assert_eq!(
        rules(&o),
        [
            "receive-count-down",
            "receive-count-over-max",
            "receive-count-down",
            "dlq-receive-count"
        ]
    );
}

#[test]
fn fifo_order_counts_deletes_in_flight_until_they_end() {
    let o = Oracle::new(3);
    let g = |index| Some(GroupPos { group: 9, index });
    let b0 = sent(&o, QueueKind::Fifo, 0, g(0));
    let b1 = sent(&o, QueueKind::Fifo, 1, g(1));
    let t0 = Instant::now();
    let (recv, _) = o.record_receive(&call(QueueKind::Fifo, 1, t0, 0, 1, 5), &[got(&b0, 1)]);
    let t = o.begin_delete(b0.key, recv).expect("held");
    // #1 delivered while #0's delete is still unanswered: undecided.
    let now = Instant::now();
    o.record_receive(&call(QueueKind::Fifo, 2, now, 0, 1, 5), &[got(&b1, 1)]);
    assert!(rules(&o).is_empty());
    // The delete was refused although the hold certainly lasted: #0 was still there.
    o.end_delete(
        b0.key,
        QueueKind::Fifo,
        t,
        Outcome::Refused("ReceiptHandleIsInvalid".into()),
        Instant::now(),
    );
    assert_eq!(rules(&o), ["refused-within-hold", "fifo-order"]);
}

#[test]
fn fifo_order_in_one_answer_is_fine_but_a_gap_is_not() {
    let o = Oracle::new(3);
    let g = |index| Some(GroupPos { group: 4, index });
    let b0 = sent(&o, QueueKind::Fifo, 0, g(0));
    let b1 = sent(&o, QueueKind::Fifo, 1, g(1));
    let t0 = Instant::now();
    o.record_receive(
        &call(QueueKind::Fifo, 1, t0, -10_000, -9_990, 2),
        &[got(&b0, 1), got(&b1, 1)],
    );
    assert!(rules(&o).is_empty());
    o.record_receive(&call(QueueKind::Fifo, 2, t0, 0, 1, 2), &[got(&b1, 2)]);
    assert_eq!(rules(&o), ["fifo-order"]);
}

/// Two messages of one FIFO group, sent in order.
fn fifo_pair(o: &Oracle, queue: QueueKind, group: u32) -> (Body, Body) {
    let g = |index| Some(GroupPos { group, index });
    (sent(o, queue, 0, g(0)), sent(o, queue, 1, g(1)))
}

#[test]
fn a_released_fifo_head_goes_to_another_consumer_while_the_rest_is_held() {
    // AWS (LocalStack's AWS-validated test_fifo_message_group_visibility_after_terminate_
    // visibility_timeout): receive [m1, m2], release m1, and the next receive returns m1
    // while m2 is still in flight.
    let o = Oracle::new(3);
    let (b0, b1) = fifo_pair(&o, QueueKind::Fifo, 5);
    let t0 = Instant::now();
    let (recv, _) = o.record_receive(
        &call(QueueKind::Fifo, 1, t0, 0, 1, 5),
        &[got(&b0, 1), got(&b1, 1)],
    );
    let t = o.begin_change(b0.key, recv, 0).expect("held");
    o.end_change(b0.key, QueueKind::Fifo, t, 0, Outcome::Ok, Instant::now());
    let now = Instant::now();
    o.record_receive(&call(QueueKind::Fifo, 2, now, 0, 1, 5), &[got(&b0, 2)]);
    assert!(rules(&o).is_empty(), "{:?}", o.violations());
}

#[test]
fn an_expired_fifo_head_goes_to_another_consumer_while_a_later_one_is_extended() {
    let o = Oracle::new(3);
    let (b0, b1) = fifo_pair(&o, QueueKind::Fifo, 6);
    let t0 = Instant::now();
    // Held 2 s from a second ago; #1 extended to 5 s, #0 left to expire.
    let (recv, _) = o.record_receive(
        &call(QueueKind::Fifo, 1, t0, -1_000, -990, 2),
        &[got(&b0, 1), got(&b1, 1)],
    );
    let t = o.begin_change(b1.key, recv, 5).expect("held");
    o.end_change(b1.key, QueueKind::Fifo, t, 5, Outcome::Ok, Instant::now());
    // #0 again, once its 2 s are over (the instants are taken as given).
    let (recv2, _) = o.record_receive(
        &call(QueueKind::Fifo, 2, t0, 1_100, 1_110, 5),
        &[got(&b0, 2)],
    );
    assert!(rules(&o).is_empty(), "{:?}", o.violations());
    // #1 stays with its holder: handing it out now breaks its own hold, and comes while
    // #0 is held by the second receive.
    o.record_receive(
        &call(QueueKind::Fifo, 3, t0, 1_200, 1_210, 5),
        &[got(&b1, 2)],
    );
    assert_eq!(rules(&o), ["held-twice", "fifo-earlier-held"]);
    assert_ne!(recv, recv2);
}

#[test]
fn a_later_fifo_message_while_an_earlier_one_is_held_is_a_violation() {
    let o = Oracle::new(3);
    let (b0, b1) = fifo_pair(&o, QueueKind::Fifo, 7);
    let t0 = Instant::now();
    o.record_receive(&call(QueueKind::Fifo, 1, t0, 0, 1, 5), &[got(&b0, 1)]);
    o.record_receive(&call(QueueKind::Fifo, 2, t0, 2, 3, 5), &[got(&b1, 1)]);
    assert_eq!(rules(&o), ["fifo-earlier-held"]);
}

#[test]
fn a_fifo_answer_out_of_order_is_a_violation() {
    let o = Oracle::new(3);
    let (b0, b1) = fifo_pair(&o, QueueKind::Fifo, 8);
    let t0 = Instant::now();
    o.record_receive(
        &call(QueueKind::Fifo, 1, t0, 0, 1, 5),
        &[got(&b1, 1), got(&b0, 1)],
    );
    assert_eq!(rules(&o), ["fifo-order"]);
}

#[test]
fn a_fifo_message_after_an_unanswered_delete_of_its_predecessor_is_fine() {
    let o = Oracle::new(3);
    let (b0, b1) = fifo_pair(&o, QueueKind::Fifo, 9);
    let t0 = Instant::now();
    let (recv, _) = o.record_receive(&call(QueueKind::Fifo, 1, t0, 0, 1, 5), &[got(&b0, 1)]);
    let t = o.begin_delete(b0.key, recv).expect("held");
    o.end_delete(b0.key, QueueKind::Fifo, t, Outcome::Unknown, Instant::now());
    let now = Instant::now();
    let (recv, _) = o.record_receive(&call(QueueKind::Fifo, 2, now, 0, 1, 5), &[got(&b1, 1)]);
    let t = o.begin_delete(b1.key, recv).expect("held");
    o.end_delete(b1.key, QueueKind::Fifo, t, Outcome::Ok, Instant::now());
    assert_eq!(o.unsettled(), 0, "a delete that may have worked settles");
    o.finish();
    assert!(rules(&o).is_empty(), "{:?}", o.violations());
}

#[test]
fn on_a_fifo_source_a_predecessor_may_have_moved_to_the_dlq() {
    let o = Oracle::new(3);
    let (b0, b1) = fifo_pair(&o, QueueKind::FifoSource, 10);
    let t0 = Instant::now();
    // #0 received three times alone (its count is 3), then left to expire: the next
    // receive moves it to the DLQ and goes on with #1.
    for (i, from) in [-9_000i64, -6_000, -3_000].into_iter().enumerate() {
        o.record_receive(
            &call(QueueKind::FifoSource, 1, t0, from, from + 10, 2),
            &[got(&b0, i as u32 + 1)],
        );
    }
    o.record_receive(&call(QueueKind::FifoSource, 2, t0, 0, 1, 2), &[got(&b1, 1)]);
    o.record_receive(&call(QueueKind::FifoDlq, 3, t0, 2, 3, 4), &[got(&b0, 4)]);
    assert!(rules(&o).is_empty(), "{:?}", o.violations());
}

#[test]
fn on_a_fifo_source_a_receive_not_yet_recorded_may_have_raised_a_count() {
    let o = Oracle::new(3);
    let (b0, b1) = fifo_pair(&o, QueueKind::FifoSource, 11);
    let t0 = Instant::now();
    for (i, from) in [-9_000i64, -6_000].into_iter().enumerate() {
        o.record_receive(
            &call(QueueKind::FifoSource, 1, t0, from, from + 10, 2),
            &[got(&b0, i as u32 + 1)],
        );
    }
    // Count 2: #0 cannot have moved yet, unless a receive still unanswered took it again.
    let ticket = o.begin_receive(QueueKind::FifoSource);
    let now = Instant::now();
    o.record_receive(
        &call(QueueKind::FifoSource, 2, now, 0, 1, 2),
        &[got(&b1, 1)],
    );
    assert!(rules(&o).is_empty(), "{:?}", o.violations());
    // Once it answered empty, the same delivery (after #1's first hold) is a gap.
    o.receive_empty(ticket);
    o.record_receive(
        &call(QueueKind::FifoSource, 2, now, 5_000, 5_001, 2),
        &[got(&b1, 2)],
    );
    assert_eq!(rules(&o), ["fifo-order"]);
}

#[test]
fn the_fifo_dlq_pair_obeys_the_receive_count_rules() {
    let o = Oracle::new(3);
    let (b0, b1) = fifo_pair(&o, QueueKind::FifoSource, 12);
    let t0 = Instant::now();
    o.record_receive(
        &call(QueueKind::FifoSource, 1, t0, -5_000, -4_990, 2),
        &[got(&b0, 4), got(&b1, 1)],
    );
    o.record_receive(&call(QueueKind::FifoDlq, 2, t0, 0, 1, 4), &[got(&b1, 2)]);
    assert_eq!(rules(&o), ["receive-count-over-max", "dlq-receive-count"]);
    o.finish();
    // #1 reached the DLQ after one receive from its source; neither was deleted.
    assert_eq!(
        rules(&o),
        [
            "receive-count-over-max",
            "dlq-receive-count",
            "lost",
            "dlq-early",
            "lost"
        ]
    );
}

#[test]
fn a_late_release_in_flight_when_the_message_expired_unchecks_it() {
    // A's release leaves with little margin and arrives after the message expired and B
    // received it; on a standard queue it frees B's copy, which C then receives while B's
    // hold seems to last. C's answer is recorded before A's.
    let o = Oracle::new(3);
    let b = sent(&o, QueueKind::Standard, 1, None);
    let t0 = Instant::now();
    let (recv, _) = o.record_receive(
        &call(QueueKind::Standard, 1, t0, -1_000, -990, 2),
        &[got(&b, 1)],
    );
    let t = o.begin_change(b.key, recv, 0).expect("held");
    o.record_receive(
        &call(QueueKind::Standard, 2, t0, 1_000, 1_010, 5),
        &[got(&b, 2)],
    );
    o.record_receive(
        &call(QueueKind::Standard, 3, t0, 1_100, 1_110, 5),
        &[got(&b, 3)],
    );
    o.end_change(
        b.key,
        QueueKind::Standard,
        t,
        0,
        Outcome::Ok,
        t0 + Duration::from_millis(1_200),
    );
    assert!(rules(&o).is_empty(), "{:?}", o.violations());
}

#[test]
fn a_release_that_made_way_for_the_next_receive_keeps_the_checks() {
    // B got the message before A's hold could have expired: A's release (still unanswered)
    // was what freed it, so it acted on A's copy and B's hold is still checked.
    let o = Oracle::new(3);
    let b = sent(&o, QueueKind::Standard, 1, None);
    let t0 = Instant::now();
    let (recv, _) = o.record_receive(&call(QueueKind::Standard, 1, t0, 0, 10, 5), &[got(&b, 1)]);
    let t = o.begin_change(b.key, recv, 0).expect("held");
    let now = Instant::now();
    o.record_receive(&call(QueueKind::Standard, 2, now, 0, 5, 5), &[got(&b, 2)]);
    o.record_receive(&call(QueueKind::Standard, 3, now, 10, 15, 5), &[got(&b, 3)]);
    o.end_change(
        b.key,
        QueueKind::Standard,
        t,
        0,
        Outcome::Ok,
        Instant::now(),
    );
    assert_eq!(rules(&o), ["held-twice"]);
}
