//! One queue's operations under its lock, with the indexes checked after every step.

use super::*;
use crate::engine::ids::MessageKey;
use crate::engine::receive::Transfer;
use crate::engine::state::Order;

fn queue() -> Queue {
    queue_of(false)
}

fn queue_of(fifo: bool) -> Queue {
    let id = QueueId {
        region: "us-east-1".into(),
        account: "000000000000".into(),
        name: if fifo { "q.fifo" } else { "q" }.into(),
    };
    let settings = QueueSettings {
        fifo_queue: fifo,
        ..QueueSettings::default()
    };
    Queue::new(id, 1, settings, 1_000_000, Journal::default(), None)
}

fn msg(body: &str, delay: Option<u32>) -> NewMessage {
    NewMessage {
        body: body.into(),
        delay_seconds: delay,
        ..NewMessage::default()
    }
}

fn req(n: usize, vis: Option<u32>) -> ReceiveRequest {
    ReceiveRequest {
        max_messages: n,
        visibility_timeout: vis,
        max_in_flight: 120_000,
        attempt_id: None,
        short_poll: false,
    }
}

/// The counters always agree with the indexes.
fn check(q: &Queue) {
    q.lock().assert_consistent();
}

#[test]
fn receive_hides_and_timeout_reveals() {
    let q = queue();
    let t = 1_000_000;
    q.send(msg("a", None), t).unwrap();
    q.send(msg("b", Some(10)), t).unwrap();
    check(&q);
    let got = q.receive(req(10, Some(5)), t).unwrap();
    assert_eq!(got.messages.len(), 1);
    assert_eq!(got.next_deadline_ms, Some(t + 5_000));
    check(&q);
    assert!(q
        .receive(req(10, None), t + 4_999)
        .unwrap()
        .messages
        .is_empty());
    let got = q.receive(req(10, None), t + 10_000).unwrap();
    assert_eq!(
        got.messages.len(),
        2,
        "both the expired and the delayed one"
    );
    assert_eq!(got.messages[0].receive_count, 2);
    check(&q);
}

#[test]
fn dead_letters_expire_by_their_original_send_time() {
    let t = 1_000_000;
    let source = queue();
    source.send(msg("old", None), t).unwrap();
    let dlq = queue();
    dlq.update_settings(t, |s| {
        s.message_retention_period = 60;
        Ok::<_, ()>(())
    })
    .unwrap();
    dlq.send(msg("new", None), t + 50_000).unwrap();
    let moved = source.take_for_move(1, t + 50_000);
    dlq.accept(
        moved,
        Transfer::DeadLetter { source_arn: "arn" },
        t + 50_000,
    );
    assert_eq!(dlq.stored(t + 59_999), 2);
    assert_eq!(dlq.stored(t + 60_000), 1, "the dead letter's time is up");
    let left = dlq.peek(t + 60_000);
    assert_eq!(&*left[0].payload.body, "new");
    assert_eq!(dlq.stored(t + 110_000), 0);
    check(&dlq);
}

#[test]
fn a_fifo_queue_serves_and_forgets_a_message_moved_in_without_a_group() {
    let t = 1_000_000;
    let standard = queue();
    standard.send(msg("no group", None), t).unwrap();
    let fifo = queue_of(true);
    fifo.accept(standard.take_for_move(1, t), Transfer::Redrive, t);
    let got = fifo.receive(req(10, None), t).unwrap();
    assert_eq!(got.messages.len(), 1);
    fifo.delete_message(&got.messages[0].receipt_handle, t)
        .unwrap();
    assert_eq!(fifo.stored(t), 0);
    check(&fifo);
    let mut st = fifo.lock();
    let Order::Fifo(f) = &mut st.order else {
        unreachable!("a FIFO queue")
    };
    assert!(f.take(10, |_| true).is_empty(), "nothing left in the index");
}

#[test]
fn handles_of_other_queues_and_garbage_are_invalid() {
    let q = queue();
    assert_eq!(
        q.delete_message("garbage", 1_000_000),
        Err(EngineError::ReceiptHandleInvalid)
    );
    let foreign = Receipt {
        queue_uid: 2,
        key: MessageKey { sent_ms: 1, seq: 0 },
        receive_number: 1,
    }
    .encode();
    assert_eq!(
        q.change_visibility(&foreign, 1, 1_000_000),
        Err(EngineError::ReceiptHandleInvalid)
    );
}

#[test]
fn random_operations_keep_indexes_consistent() {
    random_operations(false);
    random_operations(true);
}

fn random_operations(fifo: bool) {
    let q = queue_of(fifo);
    let mut t = 1_000_000u64;
    let mut n = 0u64;
    let mut handles: Vec<String> = Vec::new();
    let mut x = 0x9e3779b97f4a7c15u64;
    for _ in 0..5_000 {
        let x = crate::engine::random::next(&mut x);
        match x % 7 {
            0 | 1 => {
                n += 1;
                let mut m = msg("m", (!fifo).then_some((x % 3) as u32));
                m.group_id = Some(format!("g{}", x % 5));
                m.deduplication_id = Some(n.to_string());
                q.send(m, t).unwrap();
            }
            2 => {
                let got = q.receive(req(3, Some((x % 4) as u32)), t).unwrap();
                handles.extend(got.messages.into_iter().map(|m| m.receipt_handle));
            }
            3 if !handles.is_empty() => {
                let h = handles.swap_remove((x as usize) % handles.len());
                let r = q.delete_message(&h, t);
                assert!(r.is_ok() || fifo, "{r:?}");
            }
            4 if !handles.is_empty() => {
                let h = &handles[(x as usize) % handles.len()];
                let _ = q.change_visibility(h, (x % 3) as u32, t);
            }
            5 => t += x % 2_000,
            6 if x.is_multiple_of(50) => {
                let _ = q.purge(t, false);
            }
            _ => {}
        }
        check(&q);
    }
}

#[test]
fn purge_cooldown() {
    let q = queue();
    q.purge(1_000_000, true).unwrap();
    assert_eq!(q.purge(1_059_999, true), Err(EngineError::PurgeInProgress));
    q.purge(1_060_000, true).unwrap();
}

/// A FIFO queue's DelaySeconds is retroactive (SQS: "For FIFO queues, the per-queue delay
/// setting is retroactive"): lowered, waiting messages come out at once; raised, messages
/// never received are held until they entered plus the new delay; a received one is not.
/// A standard queue's is not retroactive.
#[test]
fn a_fifo_queues_delay_applies_to_the_messages_already_in_it() {
    let t = 1_000_000;
    let set_delay = |q: &Queue, s: u32, now: u64| {
        q.update_settings(now, |st| {
            st.delay_seconds = s;
            Ok::<_, ()>(())
        })
        .unwrap()
    };
    let fifo_msg = |body: &str| NewMessage {
        group_id: Some("g".into()),
        deduplication_id: Some(body.into()),
        ..msg(body, None)
    };
    let q = queue_of(true);
    set_delay(&q, 60, t);
    q.send(fifo_msg("a"), t).unwrap();
    assert_eq!(
        q.receive(req(10, None), t + 1_000).unwrap().messages.len(),
        0
    );
    set_delay(&q, 0, t + 2_000);
    check(&q);
    let got = q.receive(req(10, Some(30)), t + 2_000).unwrap().messages;
    assert_eq!(got.len(), 1, "lowered: out at once");

    let q = queue_of(true);
    q.send(fifo_msg("b"), t).unwrap();
    q.send(fifo_msg("c"), t + 5_000).unwrap();
    set_delay(&q, 60, t + 10_000);
    check(&q);
    assert_eq!(
        q.receive(req(10, None), t + 59_999).unwrap().messages.len(),
        0
    );
    let got = q.receive(req(1, Some(0)), t + 60_000).unwrap().messages;
    assert_eq!(got.len(), 1, "raised: held until it entered plus 60 s");
    // Received once, "b" is not delayed again; "c" still is, until its own 60 s.
    set_delay(&q, 120, t + 60_000);
    check(&q);
    let got = q.receive(req(10, Some(30)), t + 60_000).unwrap().messages;
    assert_eq!(
        got.iter().map(|m| &*m.payload.body).collect::<Vec<_>>(),
        ["b"]
    );

    let q = queue();
    q.send(msg("s", None), t).unwrap();
    set_delay(&q, 60, t + 1_000);
    assert_eq!(
        q.receive(req(10, None), t + 1_000).unwrap().messages.len(),
        1,
        "standard: not retroactive"
    );
}
