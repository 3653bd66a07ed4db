//! Durable mode through the SDK: everything a client can observe survives a restart on the
//! same data directory, and damaged files are handled as docs/durable-mode.md promises.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use aws_sdk_sqs::types::{
    MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName as N,
};
use sqsim::{Config, Durability, Server, SyncMode};

use crate::common::{
    self, create, create_with, newest_task, queue_url, receive_msgs, sdk, wait_task_until,
};

async fn open(dir: &Path) -> Server {
    open_with(Durability::new(dir)).await
}

async fn open_with(d: Durability) -> Server {
    common::start_with(Config {
        durability: Some(d),
        ..Config::default()
    })
    .await
}

/// Stops `server` and starts another on the same data directory.
async fn restart(server: Server, dir: &Path) -> Server {
    server.shutdown().await;
    open(dir).await
}

async fn all_attrs(c: &aws_sdk_sqs::Client, url: &str) -> HashMap<N, String> {
    common::queue_attrs(c, url, &[N::All]).await
}

#[tokio::test]
async fn queues_with_attributes_tags_policies_and_redrive_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    let c = sdk(&server);
    let dlq = create(&c, "dlq").await;
    let dlq_arn = common::queue_attr(&c, &dlq, N::QueueArn).await;
    let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"sqs:SendMessage","Resource":"*"}]}"#;
    let redrive = format!(r#"{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":3}}"#);
    let src = create_with(
        &c,
        "src",
        &[
            (N::VisibilityTimeout, "77"),
            (N::DelaySeconds, "2"),
            (N::MessageRetentionPeriod, "7200"),
            (N::Policy, policy),
            (N::RedrivePolicy, &redrive),
        ],
    )
    .await;
    let fifo = create_with(
        &c,
        "f.fifo",
        &[
            (N::FifoQueue, "true"),
            (N::ContentBasedDeduplication, "true"),
            (N::DeduplicationScope, "messageGroup"),
            (N::FifoThroughputLimit, "perMessageGroupId"),
        ],
    )
    .await;
    c.tag_queue()
        .queue_url(&src)
        .tags("team", "core")
        .tags("env", "dev")
        .send()
        .await
        .unwrap();
    // A later change bumps LastModifiedTimestamp; it must survive too.
    server.advance_clock(Duration::from_secs(5));
    common::set_attr(&c, &src, N::ReceiveMessageWaitTimeSeconds, "3").await;
    let before: Vec<_> = [&dlq, &src, &fifo]
        .iter()
        .map(|u| all_attrs(&c, u))
        .collect();
    let mut attrs_before = Vec::new();
    for f in before {
        attrs_before.push(f.await);
    }
    let tags_before = common::queue_tags(&c, &src).await;

    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let mut names: Vec<String> = c
        .list_queues()
        .send()
        .await
        .unwrap()
        .queue_urls()
        .iter()
        .map(|u| u.rsplit('/').next().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["dlq", "f.fifo", "src"]);
    for (name, before) in ["dlq", "src", "f.fifo"].iter().zip(attrs_before) {
        let url = queue_url(&c, name).await;
        assert_eq!(all_attrs(&c, &url).await, before, "{name}");
    }
    let src = queue_url(&c, "src").await;
    assert_eq!(common::queue_tags(&c, &src).await, tags_before);
    let dlq = queue_url(&c, "dlq").await;
    let sources = c
        .list_dead_letter_source_queues()
        .queue_url(&dlq)
        .send()
        .await
        .unwrap();
    assert_eq!(sources.queue_urls().len(), 1);
    server.shutdown().await;
}

#[tokio::test]
async fn messages_handles_and_in_flight_deadlines_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    let c = sdk(&server);
    let url = create(&c, "q").await;
    let mut sent = Vec::new();
    for i in 0..4 {
        let out = c
            .send_message()
            .queue_url(&url)
            .message_body(format!("body {i} ✓"))
            .message_attributes(
                "n",
                MessageAttributeValue::builder()
                    .data_type("Number.int")
                    .string_value(i.to_string())
                    .build()
                    .unwrap(),
            )
            .message_attributes(
                "b",
                MessageAttributeValue::builder()
                    .data_type("Binary")
                    .binary_value(aws_sdk_sqs::primitives::Blob::new(vec![0, 1, 255]))
                    .build()
                    .unwrap(),
            )
            .message_system_attributes(
                aws_sdk_sqs::types::MessageSystemAttributeNameForSends::AwsTraceHeader,
                aws_sdk_sqs::types::MessageSystemAttributeValue::builder()
                    .data_type("String")
                    .string_value("Root=1-5759e988-bd862e3fe1be46a994272793")
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
        sent.push(out);
    }
    // One message delayed past the restart.
    c.send_message()
        .queue_url(&url)
        .message_body("late")
        .delay_seconds(600)
        .send()
        .await
        .unwrap();
    // Two received: one stays in flight across the restart, one is deleted before it.
    let got = receive_msgs(&c, &url, 2, Some(300)).await;
    assert_eq!(got.len(), 2);
    c.delete_message()
        .queue_url(&url)
        .receipt_handle(got[1].receipt_handle().unwrap())
        .send()
        .await
        .unwrap();
    let held = got[0].clone();

    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "q").await;
    assert_eq!(
        common::message_counts(&c, &url).await,
        ["2".to_string(), "1".to_string()],
        "two visible, one in flight; the deleted one never comes back"
    );
    let delayed = common::queue_attr(&c, &url, N::ApproximateNumberOfMessagesDelayed).await;
    assert_eq!(delayed, "1");
    let rest = c
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .visibility_timeout(300)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(rest.len(), 2, "the in-flight one stays hidden");
    for m in &rest {
        let original = sent
            .iter()
            .find(|s| s.message_id() == m.message_id())
            .expect("a message sent before the restart");
        assert_eq!(m.md5_of_body(), original.md5_of_message_body());
        assert_eq!(
            m.md5_of_message_attributes(),
            original.md5_of_message_attributes()
        );
        let attrs = m.attributes().unwrap();
        assert_eq!(
            attrs[&MessageSystemAttributeName::ApproximateReceiveCount],
            "1"
        );
        assert_eq!(
            attrs[&MessageSystemAttributeName::AwsTraceHeader],
            "Root=1-5759e988-bd862e3fe1be46a994272793"
        );
        let b = &m.message_attributes().unwrap()["b"];
        assert_eq!(b.binary_value().unwrap().as_ref(), &[0, 1, 255]);
        assert!(m.body().unwrap().ends_with('✓'));
    }
    // The handle from before the restart still changes and deletes its message.
    let old = held.receipt_handle().unwrap();
    c.change_message_visibility()
        .queue_url(&url)
        .receipt_handle(old)
        .visibility_timeout(0)
        .send()
        .await
        .expect("an old handle changes visibility");
    let again = receive_msgs(&c, &url, 10, Some(300)).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].message_id(), held.message_id());
    let attrs = again[0].attributes().unwrap();
    assert_eq!(
        attrs[&MessageSystemAttributeName::ApproximateReceiveCount],
        "2"
    );
    assert_eq!(
        attrs[&MessageSystemAttributeName::SentTimestamp],
        held.attributes().unwrap()[&MessageSystemAttributeName::SentTimestamp]
    );
    assert_eq!(
        attrs[&MessageSystemAttributeName::ApproximateFirstReceiveTimestamp],
        held.attributes().unwrap()[&MessageSystemAttributeName::ApproximateFirstReceiveTimestamp]
    );
    c.delete_message()
        .queue_url(&url)
        .receipt_handle(old)
        .send()
        .await
        .expect("an old handle deletes");
    assert_eq!(common::message_counts(&c, &url).await[1], "2");
    server.shutdown().await;
}

#[tokio::test]
async fn fifo_dedup_group_locks_and_attempts_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    let c = sdk(&server);
    let url = create_with(&c, "o.fifo", &[(N::FifoQueue, "true")]).await;
    let mut first = None;
    for (i, body) in ["a1", "a2"].iter().enumerate() {
        let out = c
            .send_message()
            .queue_url(&url)
            .message_body(*body)
            .message_group_id("a")
            .message_deduplication_id(format!("d{i}"))
            .send()
            .await
            .unwrap();
        first.get_or_insert(out);
    }
    let first = first.unwrap();
    let got = c
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(1)
        .receive_request_attempt_id("attempt-1")
        .send()
        .await
        .unwrap();
    let handle = got.messages()[0].receipt_handle().unwrap().to_string();

    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "o.fifo").await;
    let dup = c
        .send_message()
        .queue_url(&url)
        .message_body("a1")
        .message_group_id("a")
        .message_deduplication_id("d0")
        .send()
        .await
        .unwrap();
    assert_eq!(dup.message_id(), first.message_id(), "dedup still blocks");
    assert_eq!(dup.sequence_number(), first.sequence_number());
    // The group is locked by the in-flight a1: nothing else comes out of it.
    assert!(common::receives_nothing(&c, &url).await);
    // The same attempt id gets the same message and handle.
    let retry = c
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(1)
        .receive_request_attempt_id("attempt-1")
        .send()
        .await
        .unwrap();
    assert_eq!(retry.messages()[0].receipt_handle(), Some(handle.as_str()));
    c.delete_message()
        .queue_url(&url)
        .receipt_handle(&handle)
        .send()
        .await
        .expect("the current handle from before the restart deletes");
    let next = receive_msgs(&c, &url, 10, None).await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].body(), Some("a2"), "group order holds");
    // New sequence numbers keep increasing across the restart.
    let later = c
        .send_message()
        .queue_url(&url)
        .message_body("b")
        .message_group_id("b")
        .message_deduplication_id("d9")
        .send()
        .await
        .unwrap();
    let seq = |s: Option<&str>| s.unwrap().parse::<u128>().unwrap();
    assert!(seq(later.sequence_number()) > seq(first.sequence_number()));
    server.shutdown().await;
}

#[tokio::test]
async fn dead_letters_purges_deleted_queues_and_the_clock_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    let c = sdk(&server);
    let dlq = create(&c, "dead").await;
    let dlq_arn = common::queue_attr(&c, &dlq, N::QueueArn).await;
    let src = create(&c, "work").await;
    common::set_redrive(&c, &src, &dlq_arn, 1).await;
    common::send(&c, &src, "poison").await;
    assert_eq!(receive_msgs(&c, &src, 1, Some(0)).await.len(), 1);
    // The second receive moves it to the dead-letter queue.
    assert!(receive_msgs(&c, &src, 1, Some(0)).await.is_empty());
    let purged = create(&c, "purged").await;
    common::send(&c, &purged, "gone").await;
    c.purge_queue().queue_url(&purged).send().await.unwrap();
    let doomed = create(&c, "doomed").await;
    c.delete_queue().queue_url(&doomed).send().await.unwrap();
    server.advance_clock(Duration::from_secs(3600));
    let clock_before = server.clock().now_ms();

    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    assert!(
        server.clock().now_ms() >= clock_before,
        "the clock's offset survives"
    );
    assert!(server.clock().now_ms() < clock_before + 60_000);
    let src = queue_url(&c, "work").await;
    let dlq = queue_url(&c, "dead").await;
    assert_eq!(
        common::message_counts(&c, &src).await,
        ["0", "0"].map(String::from)
    );
    let dead = receive_msgs(&c, &dlq, 10, None).await;
    assert_eq!(dead.len(), 1, "the dead letter is in exactly one queue");
    assert_eq!(
        dead[0].attributes().unwrap()[&MessageSystemAttributeName::DeadLetterQueueSourceArn],
        common::queue_attr(&c, &src, N::QueueArn).await
    );
    let purged = queue_url(&c, "purged").await;
    assert!(
        common::receives_nothing(&c, &purged).await,
        "a purge stays done"
    );
    // The clock moved an hour on, so the deleted name's cooldown has run out; a fresh
    // delete's cooldown still holds across a restart.
    let again = create(&c, "doomed").await;
    c.delete_queue().queue_url(&again).send().await.unwrap();
    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let err = c
        .create_queue()
        .queue_name("doomed")
        .send()
        .await
        .unwrap_err();
    let code = err.into_service_error().meta().code().map(str::to_string);
    assert_eq!(
        code.as_deref(),
        Some("AWS.SimpleQueueService.QueueDeletedRecently")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn one_process_per_data_dir_and_os_sync_also_keeps_acknowledged_changes() {
    let dir = tempfile::tempdir().unwrap();
    let server = open_with(Durability {
        sync: SyncMode::Os,
        ..Durability::new(dir.path())
    })
    .await;
    let second = Server::builder()
        .config(Config {
            durability: Some(Durability::new(dir.path())),
            ..Config::default()
        })
        .start()
        .await;
    let err = second
        .expect_err("the data directory is locked")
        .to_string();
    assert!(err.contains("in use by another sqsim process"), "{err}");
    let c = sdk(&server);
    let url = create(&c, "q").await;
    common::send(&c, &url, "kept").await;
    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "q").await;
    assert_eq!(receive_msgs(&c, &url, 10, None).await.len(), 1);
    server.shutdown().await;
}

/// `LOCK` deleted while a server runs (by hand, by a clean-up script): a second server on
/// the same directory is still refused, so the first one's acknowledged sends are never
/// overwritten by another writer of the same log.
#[tokio::test]
async fn a_second_server_is_refused_even_with_lock_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    let c = sdk(&server);
    let url = create(&c, "q").await;
    for i in 0..100 {
        common::send(&c, &url, format!("m{i}")).await;
    }
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    let second = Server::builder()
        .config(Config {
            durability: Some(Durability::new(dir.path())),
            ..Config::default()
        })
        .start()
        .await;
    let err = match second {
        Ok(second) => {
            second.shutdown().await;
            panic!("a second server started on the data directory the first one writes");
        }
        Err(e) => e.to_string(),
    };
    assert!(err.contains("in use by another sqsim process"), "{err}");
    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "q").await;
    assert_eq!(common::message_counts(&c, &url).await[0], "100");
    server.shutdown().await;
}

fn newest_log(dir: &Path) -> std::path::PathBuf {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    logs.sort();
    logs.pop().expect("a log segment")
}

#[tokio::test]
async fn a_torn_final_write_is_dropped_and_a_corrupt_record_stops_start_up_unless_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    let c = sdk(&server);
    let url = create(&c, "q").await;
    for i in 0..3 {
        common::send(&c, &url, format!("m{i}")).await;
    }
    server.shutdown().await;
    // A crash in the middle of the next append: half a frame at the end.
    let log = newest_log(dir.path());
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2, 3]);
    std::fs::write(&log, &bytes).unwrap();
    let server = open(dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "q").await;
    assert_eq!(common::message_counts(&c, &url).await[0], "3");
    common::send(&c, &url, "m3").await;
    common::send(&c, &url, "m4").await;
    server.shutdown().await;

    // Damage in the middle of the newest log: the first of its two records (m3, after the
    // start-up snapshot), with a whole record (m4) after it.
    let log = newest_log(dir.path());
    let mut bytes = std::fs::read(&log).unwrap();
    let first = 24;
    bytes[first + 8] ^= 0xff;
    std::fs::write(&log, &bytes).unwrap();
    let err = Server::builder()
        .config(Config {
            durability: Some(Durability::new(dir.path())),
            ..Config::default()
        })
        .start()
        .await
        .expect_err("a corrupt record stops start-up")
        .to_string();
    assert!(err.contains(&log.display().to_string()), "{err}");
    assert!(err.contains(&format!("offset {first}")), "{err}");
    assert!(err.contains("--salvage"), "{err}");

    let server = open_with(Durability {
        salvage: true,
        ..Durability::new(dir.path())
    })
    .await;
    let c = sdk(&server);
    let url = queue_url(&c, "q").await;
    let bodies: Vec<String> = receive_msgs(&c, &url, 10, None)
        .await
        .iter()
        .map(|m| m.body().unwrap().to_string())
        .collect();
    assert_eq!(bodies.len(), 3, "everything before the damage: {bodies:?}");
    assert!(!bodies.iter().any(|b| b == "m3" || b == "m4"));
    server.shutdown().await;
    // The salvaged start wrote a clean state; a normal start reads it.
    let server = open(dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "q").await;
    assert_eq!(common::message_counts(&c, &url).await[1], "3");
    server.shutdown().await;
}

#[tokio::test]
async fn a_data_dir_from_a_newer_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    open(dir.path()).await.shutdown().await;
    let log = newest_log(dir.path());
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&log, &bytes).unwrap();
    let err = Server::builder()
        .config(Config {
            durability: Some(Durability::new(dir.path())),
            ..Config::default()
        })
        .start()
        .await
        .expect_err("refused")
        .to_string();
    assert!(err.contains("format version 99"), "{err}");
}

fn dir_bytes(dir: &Path) -> u64 {
    // The compactor deletes old segments while this runs: a file gone between the listing
    // and its size counts as nothing.
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum()
}

#[tokio::test]
async fn steady_send_and_delete_traffic_keeps_the_data_dir_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let server = open_compacting_early(dir.path()).await;
    let c = sdk(&server);
    let url = create(&c, "steady").await;
    let mut largest = 0;
    for round in 0..300 {
        send_ten(&c, &url, |i| {
            format!("round {round} message {i} {}", "x".repeat(100))
        })
        .await;
        receive_and_delete_ten(&c, &url).await;
        if round % 10 == 0 {
            // Let the compactor (it looks every 25 ms) keep up with the test's pace.
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        largest = largest.max(dir_bytes(dir.path()));
    }
    // About 3,000 messages went through: several hundred KiB of log without compaction.
    let body = admin_stats(&server).await;
    let snapshots = body["store"]["snapshots"].as_u64().unwrap();
    assert!(snapshots >= 5, "compactions ran: {body}");
    assert!(largest < 160 << 10, "data dir peaked at {largest} bytes");
    let left = common::message_counts(&c, &url).await;
    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "steady").await;
    assert_eq!(common::message_counts(&c, &url).await, left);
    server.shutdown().await;
}

#[tokio::test]
async fn a_queue_that_only_grows_is_not_snapshotted_until_its_messages_go() {
    let dir = tempfile::tempdir().unwrap();
    let server = open_compacting_early(dir.path()).await;
    let c = sdk(&server);
    let url = create(&c, "grows").await;
    let snapshots = |body: &serde_json::Value| body["store"]["snapshots"].as_u64().unwrap();
    let at_start = snapshots(&admin_stats(&server).await);
    // 3,000 messages of 200 bytes: about twenty times the threshold, every record live.
    for round in 0..300 {
        send_ten(&c, &url, |i| format!("{round:03}-{i}-{}", "x".repeat(194))).await;
    }
    // The compactor looks every 25 ms.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let body = admin_stats(&server).await;
    assert_eq!(
        snapshots(&body),
        at_start,
        "a log of live messages was rewritten: {body}"
    );
    assert!(
        body["store"]["log_bytes"].as_u64().unwrap() > 600_000,
        "{body}"
    );
    // Once most of them are gone, the log is mostly dead records: a snapshot follows.
    let mut deleted = 0;
    while deleted < 2_500 {
        deleted += receive_and_delete_ten(&c, &url).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let body = loop {
        let body = admin_stats(&server).await;
        if snapshots(&body) > at_start || std::time::Instant::now() > deadline {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert!(
        snapshots(&body) > at_start,
        "no snapshot of a mostly dead log: {body}"
    );
    assert!(
        body["store"]["log_bytes"].as_u64().unwrap() < 200_000,
        "{body}"
    );
    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "grows").await;
    let [visible, not_visible] = common::message_counts(&c, &url).await;
    let kept = visible.parse::<usize>().unwrap() + not_visible.parse::<usize>().unwrap();
    assert_eq!(kept, 3_000 - deleted);
    server.shutdown().await;
}

/// A durable server whose compactor considers a snapshot once the log passes 32 KiB.
async fn open_compacting_early(dir: &std::path::Path) -> Server {
    open_with(Durability {
        compact_after_bytes: 32 << 10,
        ..Durability::new(dir)
    })
    .await
}

/// Sends ten messages in one batch, the `i`th with the body `body(i)`.
async fn send_ten(c: &aws_sdk_sqs::Client, url: &str, body: impl Fn(usize) -> String) {
    use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
    let entries: Vec<_> = (0..10)
        .map(|i| {
            SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(body(i))
                .build()
                .unwrap()
        })
        .collect();
    c.send_message_batch()
        .queue_url(url)
        .set_entries(Some(entries))
        .send()
        .await
        .unwrap();
}

/// Receives up to ten messages and deletes them in one batch; how many there were.
async fn receive_and_delete_ten(c: &aws_sdk_sqs::Client, url: &str) -> usize {
    use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
    let got = receive_msgs(c, url, 10, None).await;
    let deletes: Vec<_> = got
        .iter()
        .enumerate()
        .map(|(i, m)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(m.receipt_handle().unwrap())
                .build()
                .unwrap()
        })
        .collect();
    if !deletes.is_empty() {
        c.delete_message_batch()
            .queue_url(url)
            .set_entries(Some(deletes))
            .send()
            .await
            .unwrap();
    }
    got.len()
}

async fn admin_stats(server: &Server) -> serde_json::Value {
    let r = common::raw(server, "GET", "/_sqsim/stats", &[], b"").await;
    serde_json::from_str(&r.body).unwrap()
}

/// A `dlq` holding ten messages (the dead-letter queue of `work`) and an empty `dest`: the
/// ARNs of `dlq` and `dest`.
async fn ten_dead_letters_and_a_destination(c: &aws_sdk_sqs::Client) -> (String, String) {
    let dlq = create(c, "dlq").await;
    let dlq_arn = common::queue_attr(c, &dlq, N::QueueArn).await;
    let work = create(c, "work").await;
    common::set_redrive(c, &work, &dlq_arn, 3).await;
    let dest = create(c, "dest").await;
    let dest_arn = common::queue_attr(c, &dest, N::QueueArn).await;
    for i in 0..10 {
        common::send(c, &dlq, format!("m{i}")).await;
    }
    (dlq_arn, dest_arn)
}

#[tokio::test]
async fn a_running_move_task_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    server.clock().freeze();
    let c = sdk(&server);
    let (dlq_arn, dest_arn) = ten_dead_letters_and_a_destination(&c).await;
    // One message per second of clock time: frozen, the first goes at once and then it waits.
    common::start_move_task(&c, &dlq_arn, Some(&dest_arn), 1).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    wait_task_until(&c, &dlq_arn, deadline, |t| {
        t.approximate_number_of_messages_moved() >= 1
    })
    .await;
    server.advance_clock(Duration::from_secs(2));
    wait_task_until(&c, &dlq_arn, deadline, |t| {
        t.approximate_number_of_messages_moved() >= 3
    })
    .await;
    let before = newest_task(&c, &dlq_arn).await;
    assert_eq!(before.status(), Some("RUNNING"));

    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let after = newest_task(&c, &dlq_arn).await;
    assert_eq!(after.task_handle(), before.task_handle());
    assert_eq!(after.status(), Some("RUNNING"), "{after:?}");
    assert_eq!(after.approximate_number_of_messages_to_move(), Some(10));
    assert!(after.approximate_number_of_messages_moved() >= 3);
    // It goes on at its rate on the restored clock, and finishes.
    server.advance_clock(Duration::from_secs(20));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let t = wait_task_until(&c, &dlq_arn, deadline, |t| t.status() == Some("COMPLETED")).await;
    assert_eq!(t.approximate_number_of_messages_moved(), 10);
    let dest = queue_url(&c, "dest").await;
    assert_eq!(common::message_counts(&c, &dest).await[0], "10");
    let dlq = queue_url(&c, "dlq").await;
    assert_eq!(common::message_counts(&c, &dlq).await[0], "0");
    server.shutdown().await;
}

#[tokio::test]
async fn an_admin_reset_clears_the_disk_too() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    let c = sdk(&server);
    let url = create(&c, "big").await;
    for i in 0..50 {
        common::send(&c, &url, format!("{i} {}", "x".repeat(4000))).await;
    }
    assert!(dir_bytes(dir.path()) > 200_000);
    let r = common::raw(&server, "POST", "/_sqsim/reset", &[], b"{}").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        dir_bytes(dir.path()) < 4096,
        "{} bytes left",
        dir_bytes(dir.path())
    );
    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    assert!(c
        .list_queues()
        .send()
        .await
        .unwrap()
        .queue_urls()
        .is_empty());
    server.shutdown().await;
}

/// Changes the clock through the admin endpoint (recorded, like any request) and returns
/// its state.
async fn admin_clock(server: &Server, change: serde_json::Value) -> serde_json::Value {
    let body = change.to_string();
    let r = common::raw(server, "POST", "/_sqsim/clock", &[], body.as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

async fn clock_now(server: &Server) -> serde_json::Value {
    let r = common::raw(server, "GET", "/_sqsim/clock", &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

async fn advance(server: &Server, seconds: f64) {
    admin_clock(server, serde_json::json!({ "advance_seconds": seconds })).await;
}

/// [visible, in flight, delayed] of a queue.
async fn three_counts(c: &aws_sdk_sqs::Client, url: &str) -> [String; 3] {
    let mut a = common::queue_attrs(
        c,
        url,
        &[
            N::ApproximateNumberOfMessages,
            N::ApproximateNumberOfMessagesNotVisible,
            N::ApproximateNumberOfMessagesDelayed,
        ],
    )
    .await;
    [
        N::ApproximateNumberOfMessages,
        N::ApproximateNumberOfMessagesNotVisible,
        N::ApproximateNumberOfMessagesDelayed,
    ]
    .map(|n| a.remove(&n).unwrap())
}

#[tokio::test]
async fn a_frozen_clock_stays_frozen_and_delays_and_visibility_end_on_time_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    let frozen = admin_clock(&server, serde_json::json!({ "freeze": true })).await;
    let t0 = frozen["now_ms"].as_u64().unwrap();
    let c = sdk(&server);
    let url = create(&c, "q").await;
    c.send_message()
        .queue_url(&url)
        .message_body("delayed")
        .delay_seconds(120)
        .send()
        .await
        .unwrap();
    common::send(&c, &url, "held").await;
    let got = receive_msgs(&c, &url, 10, Some(60)).await;
    assert_eq!(got.len(), 1);

    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "q").await;
    let state = clock_now(&server).await;
    assert_eq!(state["frozen"], true, "{state}");
    assert_eq!(
        state["now_ms"].as_u64(),
        Some(t0),
        "not a millisecond passed"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(clock_now(&server).await["now_ms"].as_u64(), Some(t0));
    assert_eq!(
        three_counts(&c, &url).await,
        ["0", "1", "1"].map(String::from)
    );
    // The in-flight message comes back at its deadline, not a millisecond before.
    advance(&server, 59.999).await;
    assert!(common::receives_nothing(&c, &url).await);
    advance(&server, 0.001).await;
    let back = receive_msgs(&c, &url, 10, Some(600)).await;
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].body(), Some("held"));
    // The delayed one turns visible when its delay ends, 120 s after it was sent.
    advance(&server, 59.999).await;
    assert_eq!(
        three_counts(&c, &url).await,
        ["0", "1", "1"].map(String::from)
    );
    advance(&server, 0.001).await;
    let delayed = receive_msgs(&c, &url, 10, None).await;
    assert_eq!(delayed.len(), 1);
    assert_eq!(delayed[0].body(), Some("delayed"));
    assert_eq!(
        clock_now(&server).await["now_ms"].as_u64(),
        Some(t0 + 120_000)
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_deduplication_id_is_accepted_again_when_its_window_ends_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    admin_clock(&server, serde_json::json!({ "freeze": true })).await;
    let c = sdk(&server);
    let url = create_with(&c, "d.fifo", &[(N::FifoQueue, "true")]).await;
    let send = |c: aws_sdk_sqs::Client, url: String| async move {
        c.send_message()
            .queue_url(&url)
            .message_body("once")
            .message_group_id("g")
            .message_deduplication_id("same")
            .send()
            .await
            .unwrap()
    };
    let first = send(c.clone(), url.clone()).await;
    advance(&server, 200.0).await;

    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "d.fifo").await;
    let dup = send(c.clone(), url.clone()).await;
    assert_eq!(
        dup.message_id(),
        first.message_id(),
        "200 s in: a duplicate"
    );
    advance(&server, 99.999).await;
    let dup = send(c.clone(), url.clone()).await;
    assert_eq!(
        dup.message_id(),
        first.message_id(),
        "just short of 5 minutes"
    );
    advance(&server, 0.001).await;
    let fresh = send(c.clone(), url.clone()).await;
    assert_ne!(
        fresh.message_id(),
        first.message_id(),
        "the window has ended"
    );
    assert_eq!(common::message_counts(&c, &url).await[0], "2");
    // The fresh send opened a window of its own, which also survives.
    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let url = queue_url(&c, "d.fifo").await;
    let dup = send(c.clone(), url.clone()).await;
    assert_eq!(dup.message_id(), fresh.message_id());
    server.shutdown().await;
}

#[tokio::test]
async fn permissions_and_a_redrive_allow_policy_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    let c = sdk(&server);
    let dlq = create(&c, "allowing-dlq").await;
    let src = create(&c, "allowed-src").await;
    let src_arn = common::queue_attr(&c, &src, N::QueueArn).await;
    let allow = format!(r#"{{"redrivePermission":"byQueue","sourceQueueArns":["{src_arn}"]}}"#);
    common::set_attr(&c, &dlq, N::RedriveAllowPolicy, &allow).await;
    for (label, account, action) in [
        ("senders", "111122223333", "SendMessage"),
        ("readers", "444455556666", "ReceiveMessage"),
    ] {
        c.add_permission()
            .queue_url(&dlq)
            .label(label)
            .aws_account_ids(account)
            .actions(action)
            .send()
            .await
            .unwrap();
    }
    c.remove_permission()
        .queue_url(&dlq)
        .label("readers")
        .send()
        .await
        .unwrap();
    let policy = common::queue_attr(&c, &dlq, N::Policy).await;
    assert!(
        policy.contains("senders") && !policy.contains("readers"),
        "{policy}"
    );
    let before = all_attrs(&c, &dlq).await;

    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let dlq = queue_url(&c, "allowing-dlq").await;
    let after = all_attrs(&c, &dlq).await;
    assert_eq!(after.get(&N::Policy), Some(&policy));
    assert!(
        after[&N::RedriveAllowPolicy].contains(&src_arn),
        "{after:?}"
    );
    assert_eq!(after, before);
    // The permission kept is the one RemovePermission finds by its label; the removed one
    // stays removed.
    let err = c
        .remove_permission()
        .queue_url(&dlq)
        .label("readers")
        .send()
        .await;
    assert!(err.is_err(), "the removed label came back");
    c.remove_permission()
        .queue_url(&dlq)
        .label("senders")
        .send()
        .await
        .expect("the kept label is found after the restart");
    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let dlq = queue_url(&c, "allowing-dlq").await;
    let policy = common::queue_attrs(&c, &dlq, &[N::Policy]).await;
    assert!(
        policy
            .get(&N::Policy)
            .is_none_or(|p| !p.contains("senders")),
        "{policy:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_move_task_stays_cancelled_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = open(dir.path()).await;
    admin_clock(&server, serde_json::json!({ "freeze": true })).await;
    let c = sdk(&server);
    let (dlq_arn, dest_arn) = ten_dead_letters_and_a_destination(&c).await;
    // One per second of a frozen clock: the first goes at once, then it waits.
    let handle = common::start_move_task(&c, &dlq_arn, Some(&dest_arn), 1)
        .await
        .task_handle
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    wait_task_until(&c, &dlq_arn, deadline, |t| {
        t.approximate_number_of_messages_moved() >= 1
    })
    .await;
    c.cancel_message_move_task()
        .task_handle(&handle)
        .send()
        .await
        .unwrap();
    // Stopped at once: the task may not have seen the cancel yet (CANCELLING on disk, which
    // the next start ends as CANCELLED) or may have (CANCELLED).
    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let after = newest_task(&c, &dlq_arn).await;
    assert_eq!(after.status(), Some("CANCELLED"), "{after:?}");
    assert_eq!(after.approximate_number_of_messages_moved(), 1);
    assert_eq!(after.approximate_number_of_messages_to_move(), Some(10));
    // Nothing moves any more, however far the clock goes.
    advance(&server, 60.0).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let dest = queue_url(&c, "dest").await;
    let dlq = queue_url(&c, "dlq").await;
    assert_eq!(common::message_counts(&c, &dest).await[0], "1");
    assert_eq!(common::message_counts(&c, &dlq).await[0], "9");
    let server = restart(server, dir.path()).await;
    let c = sdk(&server);
    let again = newest_task(&c, &dlq_arn).await;
    assert_eq!(again.status(), Some("CANCELLED"));
    assert_eq!(again.approximate_number_of_messages_moved(), 1);
    // A new task may start on the same source.
    c.start_message_move_task()
        .source_arn(&dlq_arn)
        .send()
        .await
        .expect("no task is left running");
    server.shutdown().await;
}
