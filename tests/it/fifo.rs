//! FIFO queues through the Rust SDK: ordering, group locks, deduplication, sequence numbers,
//! receive attempts, and a concurrency check with many consumers and groups. Time-dependent
//! cases run on the server's clock.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName, QueueAttributeName,
    SendMessageBatchRequestEntry,
};
use aws_sdk_sqs::Client;
use common::{sdk, start_suite};

async fn fifo_queue(c: &Client, name: &str, attrs: &[(&str, &str)]) -> String {
    let mut req = c
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::FifoQueue, "true");
    for (k, v) in attrs {
        req = req.attributes(QueueAttributeName::from(*k), *v);
    }
    req.send().await.unwrap().queue_url.unwrap()
}

async fn send(c: &Client, url: &str, group: &str, body: &str) -> (String, String) {
    let out = c
        .send_message()
        .queue_url(url)
        .message_body(body)
        .message_group_id(group)
        .send()
        .await
        .unwrap();
    (out.message_id.unwrap(), out.sequence_number.unwrap())
}

async fn receive(c: &Client, url: &str, max: i32, vis: Option<i32>) -> Vec<Message> {
    common::receive_msgs(c, url, max, vis).await
}

fn bodies(msgs: &[Message]) -> Vec<&str> {
    msgs.iter().map(|m| m.body().unwrap()).collect()
}

async fn delete(c: &Client, url: &str, m: &Message) {
    c.delete_message()
        .queue_url(url)
        .receipt_handle(m.receipt_handle().unwrap())
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn recorded_drain_order_and_group_lock() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = fifo_queue(&c, "order.fifo", &[("ContentBasedDeduplication", "true")]).await;
    for (g, b) in [
        ("g1", "g1-m1"),
        ("g2", "g2-m1"),
        ("g1", "g1-m2"),
        ("g1", "g1-m3"),
    ] {
        send(&c, &url, g, b).await;
    }
    let got = receive(&c, &url, 10, None).await;
    assert_eq!(bodies(&got), ["g1-m1", "g1-m2", "g1-m3", "g2-m1"]);

    // Locked: a new message of g1 is not delivered while g1 has messages in flight.
    send(&c, &url, "g1", "g1-m4").await;
    assert!(receive(&c, &url, 10, None).await.is_empty());
    // Deleting some keeps the lock; deleting all releases it at once.
    delete(&c, &url, &got[0]).await;
    delete(&c, &url, &got[1]).await;
    assert!(receive(&c, &url, 10, None).await.is_empty());
    delete(&c, &url, &got[2]).await;
    assert_eq!(bodies(&receive(&c, &url, 10, None).await), ["g1-m4"]);

    let attrs = common::queue_attrs(&c, &url, &[QueueAttributeName::All]).await;
    assert_eq!(attrs[&QueueAttributeName::FifoQueue], "true");
    assert_eq!(attrs[&QueueAttributeName::DeduplicationScope], "queue");
    assert_eq!(attrs[&QueueAttributeName::FifoThroughputLimit], "perQueue");
    assert_eq!(
        attrs[&QueueAttributeName::ContentBasedDeduplication],
        "true"
    );
}

#[tokio::test]
async fn partial_release_serves_head_up_to_first_invisible() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = fifo_queue(&c, "partial.fifo", &[("ContentBasedDeduplication", "true")]).await;
    for b in ["foo", "bar", "baz"] {
        send(&c, &url, "g", b).await;
    }
    let got = receive(&c, &url, 10, Some(30)).await;
    assert_eq!(bodies(&got), ["foo", "bar", "baz"]);
    c.change_message_visibility()
        .queue_url(&url)
        .receipt_handle(got[1].receipt_handle().unwrap())
        .visibility_timeout(300)
        .send()
        .await
        .unwrap();
    server.advance_clock(Duration::from_secs(31));
    let again = receive(&c, &url, 10, Some(30)).await;
    assert_eq!(bodies(&again), ["foo"]);
    let attrs = again[0].attributes().unwrap();
    assert_eq!(
        attrs[&MessageSystemAttributeName::ApproximateReceiveCount],
        "2"
    );

    // Extending the head blocks the whole group.
    c.change_message_visibility()
        .queue_url(&url)
        .receipt_handle(again[0].receipt_handle().unwrap())
        .visibility_timeout(600)
        .send()
        .await
        .unwrap();
    server.advance_clock(Duration::from_secs(300));
    assert!(receive(&c, &url, 10, None).await.is_empty());

    // ChangeMessageVisibility 0 releases only that message (here: the head).
    let fresh = receive_all_after(&c, &url, &server, 301).await;
    assert_eq!(bodies(&fresh), ["foo", "bar", "baz"]);
    c.change_message_visibility()
        .queue_url(&url)
        .receipt_handle(fresh[0].receipt_handle().unwrap())
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    assert_eq!(bodies(&receive(&c, &url, 10, None).await), ["foo"]);
}

async fn receive_all_after(
    c: &Client,
    url: &str,
    server: &common::suite::Suite,
    secs: u64,
) -> Vec<Message> {
    server.advance_clock(Duration::from_secs(secs));
    receive(c, url, 10, Some(30)).await
}

#[tokio::test]
async fn groups_rotate_round_robin() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = fifo_queue(&c, "rotate.fifo", &[("ContentBasedDeduplication", "true")]).await;
    for g in ["g1", "g2", "g3"] {
        send(&c, &url, g, &format!("{g}-a")).await;
    }
    assert_eq!(bodies(&receive(&c, &url, 1, Some(0)).await), ["g1-a"]);
    assert_eq!(bodies(&receive(&c, &url, 1, Some(0)).await), ["g2-a"]);
    // g1 and g2 became visible again and went to the back of the rotation.
    assert_eq!(
        bodies(&receive(&c, &url, 10, Some(0)).await),
        ["g3-a", "g1-a", "g2-a"]
    );
}

#[tokio::test]
async fn deduplication_window_scope_and_purge() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = fifo_queue(&c, "dedup.fifo", &[]).await;
    let first = c
        .send_message()
        .queue_url(&url)
        .message_body("a")
        .message_group_id("g1")
        .message_deduplication_id("d1")
        .send()
        .await
        .unwrap();
    let m = receive(&c, &url, 10, None).await;
    assert_eq!(m.len(), 1);
    assert_eq!(
        m[0].attributes().unwrap()[&MessageSystemAttributeName::MessageDeduplicationId],
        "d1"
    );
    delete(&c, &url, &m[0]).await;
    // Same id, other group, after the original was deleted: still a duplicate (scope queue).
    let dup = c
        .send_message()
        .queue_url(&url)
        .message_body("b")
        .message_group_id("g2")
        .message_deduplication_id("d1")
        .send()
        .await
        .unwrap();
    assert_eq!(dup.message_id, first.message_id);
    assert!(receive(&c, &url, 10, None).await.is_empty());
    // The window is five minutes.
    server.advance_clock(Duration::from_secs(300));
    c.send_message()
        .queue_url(&url)
        .message_body("c")
        .message_group_id("g1")
        .message_deduplication_id("d1")
        .send()
        .await
        .unwrap();
    let m = receive(&c, &url, 10, None).await;
    assert_eq!(bodies(&m), ["c"]);
    // Purge forgets deduplication ids.
    c.purge_queue().queue_url(&url).send().await.unwrap();
    c.send_message()
        .queue_url(&url)
        .message_body("d")
        .message_group_id("g1")
        .message_deduplication_id("d1")
        .send()
        .await
        .unwrap();
    assert_eq!(bodies(&receive(&c, &url, 10, None).await), ["d"]);

    // Scope messageGroup: the same id in another group is a new message.
    let url = fifo_queue(
        &c,
        "scoped.fifo",
        &[
            ("DeduplicationScope", "messageGroup"),
            ("FifoThroughputLimit", "perMessageGroupId"),
        ],
    )
    .await;
    for g in ["g1", "g2", "g1"] {
        c.send_message()
            .queue_url(&url)
            .message_body(g)
            .message_group_id(g)
            .message_deduplication_id("same")
            .send()
            .await
            .unwrap();
    }
    let mut got = bodies(&receive(&c, &url, 10, None).await)
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>();
    got.sort();
    assert_eq!(got, ["g1", "g2"]);
}

#[tokio::test]
async fn sequence_numbers_and_send_rules() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = fifo_queue(&c, "seq.fifo", &[("ContentBasedDeduplication", "true")]).await;
    let mut last: u128 = 0;
    for i in 0..5 {
        let (_, seq) = send(&c, &url, "g", &format!("m{i}")).await;
        assert!(seq.len() >= 20, "{seq}");
        let n: u128 = seq.parse().unwrap();
        assert!(n > last);
        last = n;
    }
    let entries: Vec<_> = (0..3)
        .map(|i| {
            SendMessageBatchRequestEntry::builder()
                .id(format!("e{i}"))
                .message_body(format!("b{i}"))
                .message_group_id("g")
                .build()
                .unwrap()
        })
        .collect();
    let out = c
        .send_message_batch()
        .queue_url(&url)
        .set_entries(Some(entries))
        .send()
        .await
        .unwrap();
    for e in out.successful() {
        let n: u128 = e.sequence_number().unwrap().parse().unwrap();
        assert!(n > last);
        last = n;
    }
    // Content-based dedup: the same body again is a duplicate.
    let out = c
        .send_message()
        .queue_url(&url)
        .message_body("m0")
        .message_group_id("g")
        .send()
        .await
        .unwrap();
    let got = receive(&c, &url, 10, None).await;
    assert_eq!(
        bodies(&got),
        ["m0", "m1", "m2", "m3", "m4", "b0", "b1", "b2"]
    );
    assert_eq!(out.message_id(), got[0].message_id());
    assert_eq!(
        got[0].attributes().unwrap()[&MessageSystemAttributeName::MessageDeduplicationId],
        sha256_hex("m0")
    );

    let err = c
        .send_message()
        .queue_url(&url)
        .message_body("x")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(err.code(), Some("MissingParameter"));
    assert_eq!(
        err.message(),
        Some("The request must contain the parameter MessageGroupId.")
    );
    let err = c
        .send_message()
        .queue_url(&url)
        .message_body("x")
        .message_group_id("g")
        .delay_seconds(2)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(
        err.message(),
        Some("Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.")
    );
    c.send_message()
        .queue_url(&url)
        .message_body("zero")
        .message_group_id("h")
        .delay_seconds(0)
        .send()
        .await
        .unwrap();

    let plain = fifo_queue(&c, "plain.fifo", &[]).await;
    let err = c
        .send_message()
        .queue_url(&plain)
        .message_body("x")
        .message_group_id("g")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(
        err.message(),
        Some("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
    );
    // In a batch, a missing group id fails the whole request.
    let entries = vec![
        SendMessageBatchRequestEntry::builder()
            .id("a")
            .message_body("x")
            .message_group_id("g")
            .message_deduplication_id("1")
            .build()
            .unwrap(),
        SendMessageBatchRequestEntry::builder()
            .id("b")
            .message_body("y")
            .message_deduplication_id("2")
            .build()
            .unwrap(),
    ];
    let err = c
        .send_message_batch()
        .queue_url(&plain)
        .set_entries(Some(entries))
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(err.code(), Some("InvalidParameterValue"));
    assert_eq!(
        err.message(),
        Some("The request must contain the parameter MessageGroupId.")
    );
}

fn sha256_hex(s: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn expired_handles_and_receive_attempts() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = fifo_queue(&c, "handles.fifo", &[("ContentBasedDeduplication", "true")]).await;
    send(&c, &url, "g", "one").await;
    let m = receive(&c, &url, 1, Some(10)).await;
    server.advance_clock(Duration::from_secs(10));
    let err = c
        .delete_message()
        .queue_url(&url)
        .receipt_handle(m[0].receipt_handle().unwrap())
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(err.code(), Some("InvalidParameterValue"));
    assert!(
        err.message()
            .unwrap()
            .ends_with("Reason: The receipt handle has expired."),
        "{err:?}"
    );

    // Extending before expiry keeps a handle valid.
    let m = receive(&c, &url, 1, Some(10)).await;
    server.advance_clock(Duration::from_secs(9));
    c.change_message_visibility()
        .queue_url(&url)
        .receipt_handle(m[0].receipt_handle().unwrap())
        .visibility_timeout(10)
        .send()
        .await
        .unwrap();
    server.advance_clock(Duration::from_secs(9));
    delete(&c, &url, &m[0]).await;

    // A retried receive with the same attempt id gets the same messages and handles.
    send(&c, &url, "g", "two").await;
    send(&c, &url, "g", "three").await;
    let attempt = |id: &str| {
        c.receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .receive_request_attempt_id(id)
            .send()
    };
    let first = attempt("try-1").await.unwrap().messages.unwrap();
    let again = attempt("try-1").await.unwrap().messages.unwrap();
    assert_eq!(bodies(&first), ["two", "three"]);
    let handles = |ms: &[Message]| {
        ms.iter()
            .map(|m| m.receipt_handle().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(handles(&first), handles(&again));
    // After a modification the id counts as new (and the group is still locked).
    delete(&c, &url, &first[0]).await;
    assert!(attempt("try-1").await.unwrap().messages.is_none());
    // The attempt window is five minutes.
    let other = attempt("try-2").await.unwrap();
    assert!(other.messages.is_none());
}

#[tokio::test]
async fn approximate_counts_include_messages_behind_locks() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = fifo_queue(&c, "counts.fifo", &[("ContentBasedDeduplication", "true")]).await;
    for g in ["a", "b", "c"] {
        for i in 0..2 {
            send(&c, &url, g, &format!("{g}{i}")).await;
        }
    }
    for _ in 0..2 {
        assert_eq!(receive(&c, &url, 1, None).await.len(), 1);
    }
    assert_eq!(common::message_counts(&c, &url).await, ["4", "2"]);
}

#[tokio::test]
async fn fair_queue_shares_receives_between_groups() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = common::create(&c, "fair").await;
    for i in 0..50 {
        c.send_message()
            .queue_url(&url)
            .message_body(format!("noisy-{i}"))
            .message_group_id("noisy")
            .send()
            .await
            .unwrap();
    }
    c.send_message()
        .queue_url(&url)
        .message_body("quiet")
        .message_group_id("quiet")
        .send()
        .await
        .unwrap();
    let got = receive(&c, &url, 10, None).await;
    assert!(bodies(&got).contains(&"quiet"), "{:?}", bodies(&got));
    let quiet = got.iter().find(|m| m.body() == Some("quiet")).unwrap();
    let attrs = quiet.attributes().unwrap();
    assert_eq!(attrs[&MessageSystemAttributeName::MessageGroupId], "quiet");
    assert!(!attrs.contains_key(&MessageSystemAttributeName::SequenceNumber));
}

/// Several consumers on one FIFO queue with many groups, while producers keep sending: no
/// group is ever processed out of order or by two consumers at once, and every message is
/// delivered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_consumers_keep_groups_ordered_and_exclusive() {
    const GROUPS: usize = 40;
    const PER_GROUP: usize = 30;
    const CONSUMERS: usize = 6;
    let server = start_suite().await;
    let c = sdk(&server);
    let url = fifo_queue(&c, "busy.fifo", &[("ContentBasedDeduplication", "true")]).await;

    let producers: Vec<_> = (0..4)
        .map(|p| {
            let (c, url) = (c.clone(), url.clone());
            tokio::spawn(async move {
                for start in (0..PER_GROUP).step_by(10) {
                    for g in (p..GROUPS).step_by(4) {
                        let entries = (start..start + 10)
                            .map(|i| {
                                SendMessageBatchRequestEntry::builder()
                                    .id(format!("e{i}"))
                                    .message_body(format!("{g}:{i}"))
                                    .message_group_id(format!("g{g}"))
                                    .build()
                                    .unwrap()
                            })
                            .collect();
                        let out = c
                            .send_message_batch()
                            .queue_url(&url)
                            .set_entries(Some(entries))
                            .send()
                            .await
                            .unwrap();
                        assert!(out.failed().is_empty());
                    }
                }
            })
        })
        .collect();

    let next: Arc<Mutex<HashMap<usize, usize>>> = Arc::default();
    let held: Arc<Mutex<HashMap<usize, usize>>> = Arc::default();
    let delivered: Arc<Mutex<HashSet<String>>> = Arc::default();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|me| {
            let (c, url) = (c.clone(), url.clone());
            let (next, held, delivered) = (next.clone(), held.clone(), delivered.clone());
            tokio::spawn(async move {
                loop {
                    if delivered.lock().unwrap().len() == GROUPS * PER_GROUP {
                        return;
                    }
                    let msgs = c
                        .receive_message()
                        .queue_url(&url)
                        .max_number_of_messages(10)
                        .wait_time_seconds(1)
                        .visibility_timeout(60)
                        .send()
                        .await
                        .unwrap()
                        .messages
                        .unwrap_or_default();
                    if msgs.is_empty() {
                        continue;
                    }
                    let parsed: Vec<(usize, usize)> = msgs
                        .iter()
                        .map(|m| {
                            let (g, i) = m.body().unwrap().split_once(':').unwrap();
                            (g.parse().unwrap(), i.parse().unwrap())
                        })
                        .collect();
                    let groups: HashSet<usize> = parsed.iter().map(|(g, _)| *g).collect();
                    {
                        let mut h = held.lock().unwrap();
                        for g in &groups {
                            assert!(
                                h.insert(*g, me).is_none(),
                                "group {g} held by two consumers"
                            );
                        }
                    }
                    {
                        let mut n = next.lock().unwrap();
                        let mut d = delivered.lock().unwrap();
                        for (m, (g, i)) in msgs.iter().zip(&parsed) {
                            let expected = n.entry(*g).or_insert(0);
                            assert_eq!(*i, *expected, "group {g} out of order");
                            *expected += 1;
                            assert!(
                                d.insert(m.message_id().unwrap().to_string()),
                                "delivered twice"
                            );
                        }
                    }
                    tokio::task::yield_now().await;
                    {
                        let mut h = held.lock().unwrap();
                        for g in &groups {
                            h.remove(g);
                        }
                    }
                    let entries = msgs
                        .iter()
                        .enumerate()
                        .map(|(i, m)| {
                            DeleteMessageBatchRequestEntry::builder()
                                .id(format!("d{i}"))
                                .receipt_handle(m.receipt_handle().unwrap())
                                .build()
                                .unwrap()
                        })
                        .collect();
                    let out = c
                        .delete_message_batch()
                        .queue_url(&url)
                        .set_entries(Some(entries))
                        .send()
                        .await
                        .unwrap();
                    assert!(out.failed().is_empty());
                }
            })
        })
        .collect();

    tokio::time::timeout(Duration::from_secs(60), async {
        for p in producers {
            p.await.unwrap();
        }
        for c in consumers {
            c.await.unwrap();
        }
    })
    .await
    .expect("all messages consumed in time");
    assert_eq!(delivered.lock().unwrap().len(), GROUPS * PER_GROUP);
    let n = next.lock().unwrap();
    assert!(n.values().all(|v| *v == PER_GROUP));
}
