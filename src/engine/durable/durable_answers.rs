//! Tests of the rule "no answer claims a state that is not yet durable": whatever a request
//! reads or relies on, it waits for the record that made it, whoever appended that record.
//! The store here lags (appends are durable only when flushed), as a slow fsync or a disk
//! that refuses writes would leave them; each "request" runs under
//! [`journal::track`](crate::engine::journal::track), as the server runs one.

use super::replay::tests::{engine_on, id};
use crate::engine::{NewMessage, QueueSettings, ReceiveRequest};
use crate::store::memory::MemoryStore;
use crate::store::{self, Lsn, Store};

/// Runs `f` as one request on one store: its answer's dependency there, if any.
async fn tracking<F: std::future::Future>(f: F) -> (F::Output, Option<Lsn>) {
    let (out, depends) = crate::engine::journal::track(f).await.into_parts();
    assert!(depends.len() <= 1, "one store here");
    (out, depends.first().map(|(_, l)| *l))
}

fn fifo_message(body: &str) -> NewMessage {
    NewMessage {
        body: body.into(),
        group_id: Some("g".into()),
        deduplication_id: Some(body.into()),
        ..NewMessage::default()
    }
}

/// Whether the record at `lsn` is durable now (without waiting for it).
async fn is_durable(store: &dyn Store, lsn: Lsn) -> bool {
    tokio::time::timeout(
        std::time::Duration::from_millis(60),
        store::durable(store, lsn),
    )
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_fifo_send_waits_for_the_first_attempts_record() {
    let store = MemoryStore::lagging();
    let e = engine_on(&store);
    let q = {
        let settings = QueueSettings {
            fifo_queue: true,
            ..QueueSettings::default()
        };
        e.create_queue(id("f.fifo"), settings).unwrap().0
    };
    store.flush();
    let now = e.now_ms();
    let (first, first_lsn) = tracking(async { q.send(fifo_message("m1"), now).unwrap() }).await;
    let first_lsn = first_lsn.expect("the send appended a record");
    // The SDK's retry: same deduplication id, so nothing new is stored or appended...
    let appended = store.not_durable();
    let (retry, retry_lsn) = tracking(async { q.send(fifo_message("m1"), now).unwrap() }).await;
    assert_eq!(retry.message_id, first.message_id);
    assert_eq!(store.not_durable(), appended, "the retry appended nothing");
    // ...yet its answer depends on the first attempt's record, still not durable.
    let retry_lsn = retry_lsn.expect("the retry's answer depends on a record");
    assert!(retry_lsn >= first_lsn, "{retry_lsn} < {first_lsn}");
    assert!(
        !is_durable(&store, retry_lsn).await,
        "answered before the fsync"
    );
    store.flush();
    assert!(is_durable(&store, retry_lsn).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_delete_waits_for_the_first_attempts_record() {
    let store = MemoryStore::lagging();
    let e = engine_on(&store);
    let q = e.create_queue(id("q"), QueueSettings::default()).unwrap().0;
    let now = e.now_ms();
    q.send(
        NewMessage {
            body: "b".into(),
            ..NewMessage::default()
        },
        now,
    )
    .unwrap();
    let req = ReceiveRequest {
        max_messages: 1,
        visibility_timeout: Some(60),
        max_in_flight: 1000,
        attempt_id: None,
        short_poll: false,
    };
    let got = e.receive(&q, req, now).unwrap();
    let handle = got.messages[0].receipt_handle.clone();
    store.flush();
    let (_, first_lsn) = tracking(async { q.delete_message(&handle, now).unwrap() }).await;
    let first_lsn = first_lsn.unwrap();
    let (_, retry_lsn) = tracking(async { q.delete_message(&handle, now).unwrap() }).await;
    assert!(retry_lsn.is_some_and(|l| l >= first_lsn));
    // A reader of another queue does not wait for this one's records.
    let other = {
        let (q, _) = e
            .create_queue(id("other"), QueueSettings::default())
            .unwrap();
        store.flush();
        q
    };
    let (_, delete_again) = tracking(async { q.delete_message(&handle, now).unwrap() }).await;
    let (_, read_other) = tracking(async { other.settings() }).await;
    assert!(read_other.is_some_and(|l| is_durable_now(&store, l)));
    assert!(delete_again.is_some());
}

fn is_durable_now(store: &MemoryStore, lsn: Lsn) -> bool {
    store.progress().borrow().durable > lsn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_create_and_delete_queue_wait_for_the_registry_record() {
    let store = MemoryStore::lagging();
    let e = engine_on(&store);
    let (_, created) = tracking(async {
        e.create_queue(id("q"), QueueSettings::default()).unwrap();
    })
    .await;
    let created = created.unwrap();
    let (_, again) = tracking(async {
        let (_, new) = e.create_queue(id("q"), QueueSettings::default()).unwrap();
        assert!(!new);
    })
    .await;
    assert!(again.is_some_and(|l| l >= created), "{again:?} < {created}");
    let (_, found) = tracking(async { e.queue(&id("q")).unwrap() }).await;
    assert!(found.is_some_and(|l| l >= created));
    store.flush();
    let (_, deleted) = tracking(async { assert!(e.delete_queue(&id("q"))) }).await;
    let deleted = deleted.unwrap();
    // The retry finds no queue: "does not exist" relies on the deletion's record.
    let (_, missing) = tracking(async { assert!(e.queue(&id("q")).is_none()) }).await;
    assert!(missing.is_some_and(|l| l >= deleted));
    assert!(!is_durable_now(&store, deleted));
    let (_, listed) = tracking(async { e.list_queues("us-east-1", "000000000000", "") }).await;
    assert!(listed.is_some_and(|l| l >= deleted));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letters_source_is_read_only_once_its_arrival_is_kept() {
    let store = MemoryStore::lagging();
    let e = engine_on(&store);
    let dlq = e
        .create_queue(id("dlq"), QueueSettings::default())
        .unwrap()
        .0;
    let settings = QueueSettings {
        redrive_policy: Some(crate::engine::redrive::RedrivePolicy {
            raw: crate::engine::redrive::RedrivePolicy::document(&dlq.arn, 1),
            dead_letter_target: id("dlq"),
            max_receive_count: 1,
        }),
        ..QueueSettings::default()
    };
    let src = e.create_queue(id("src"), settings).unwrap().0;
    let now = e.now_ms();
    src.send(
        NewMessage {
            body: "dead".into(),
            ..NewMessage::default()
        },
        now,
    )
    .unwrap();
    let req = || ReceiveRequest {
        max_messages: 10,
        visibility_timeout: Some(0),
        max_in_flight: 1000,
        attempt_id: None,
        short_poll: false,
    };
    assert_eq!(e.receive(&src, req(), now).unwrap().messages.len(), 1);
    store.flush();
    // This receive hands the message to the dead-letter queue (its record is the arrival).
    let (out, moved) = tracking(async { e.receive(&src, req(), now).unwrap() }).await;
    assert!(out.messages.is_empty());
    let moved = moved.unwrap();
    // Another client's receive on the source finds it empty: that answer relies on the
    // arrival's record too (before it is kept, a crash puts the message back here).
    let (out, read) = tracking(async { e.receive(&src, req(), now).unwrap() }).await;
    assert!(out.messages.is_empty());
    assert!(read.is_some_and(|l| l >= moved), "{read:?} < {moved}");
}

/// A cluster node serves several shards, each an engine on a store of its own, and a request
/// may read a queue of another shard in-process: each dependency is kept with its own store
/// (positions of different logs are not comparable), and the answer waits on each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_touching_two_stores_waits_on_each_for_its_own_position() {
    let (a_store, b_store) = (MemoryStore::lagging(), MemoryStore::lagging());
    let (a, b) = (engine_on(&a_store), engine_on(&b_store));
    let qa = a.create_queue(id("a"), QueueSettings::default()).unwrap().0;
    let qb = b.create_queue(id("b"), QueueSettings::default()).unwrap().0;
    // Shard b has many records, shard a few: b's positions run far past a's.
    for i in 0..20 {
        let m = NewMessage {
            body: format!("b{i}"),
            ..NewMessage::default()
        };
        qb.send(m, b.now_ms()).unwrap();
    }
    let ((), depends) = crate::engine::journal::track(async {
        qb.settings();
        qa.send(
            NewMessage {
                body: "a".into(),
                ..NewMessage::default()
            },
            a.now_ms(),
        )
        .unwrap();
    })
    .await
    .into_parts();
    assert_eq!(depends.len(), 2, "one entry per store");
    let position = |store: &MemoryStore| {
        depends
            .iter()
            .find(|(s, _)| {
                s.next_lsn() == store.next_lsn()
                    && s.stats().appended_records == store.stats().appended_records
            })
            .map(|(_, l)| *l)
    };
    assert!(position(&b_store).is_some_and(|l| l >= 20));
    assert!(position(&a_store).is_some_and(|l| l < 5));
}
