//! Dead-letter queues, redrive policies, message move tasks, permissions, tag limits and the
//! deleted-queue cooldown, through the Rust SDK. Time-dependent cases use the server's clock.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::{
    MessageSystemAttributeName, QueueAttributeName, SendMessageBatchRequestEntry,
};
use aws_sdk_sqs::Client;
use common::{create, sdk, set_redrive, start_move_task, start_suite, wait_task};

async fn arn_of(c: &Client, url: &str) -> String {
    common::queue_attr(c, url, QueueAttributeName::QueueArn).await
}

async fn receive(c: &Client, url: &str, max: i32, vis: i32) -> Vec<aws_sdk_sqs::types::Message> {
    common::receive_msgs(c, url, max, Some(vis)).await
}

#[tokio::test]
async fn message_moves_on_the_receive_after_max_receive_count() {
    let server = start_suite().await;
    let c = sdk(&server);
    let dlq = create(&c, "dlq").await;
    let src = create(&c, "src").await;
    let (dlq_arn, src_arn) = (arn_of(&c, &dlq).await, arn_of(&c, &src).await);
    set_redrive(&c, &src, &dlq_arn, 2).await;
    let sent = common::send(&c, &src, "poison").await;

    for n in 1..=2 {
        let m = receive(&c, &src, 1, 0).await;
        assert_eq!(m.len(), 1, "delivery {n}");
        assert_eq!(
            m[0].attributes().unwrap()[&MessageSystemAttributeName::ApproximateReceiveCount],
            n.to_string()
        );
    }
    // The third receive moves it instead of returning it.
    assert!(receive(&c, &src, 1, 0).await.is_empty());
    let moved = receive(&c, &dlq, 1, 30).await;
    assert_eq!(moved.len(), 1);
    let m = &moved[0];
    assert_eq!(m.message_id(), Some(sent.as_str()));
    assert_eq!(m.body(), Some("poison"));
    let attrs = m.attributes().unwrap();
    assert_eq!(
        attrs[&MessageSystemAttributeName::DeadLetterQueueSourceArn],
        src_arn
    );
    assert_eq!(
        attrs[&MessageSystemAttributeName::ApproximateReceiveCount],
        "3"
    );

    let sources = c
        .list_dead_letter_source_queues()
        .queue_url(&dlq)
        .send()
        .await
        .unwrap();
    assert_eq!(sources.queue_urls(), std::slice::from_ref(&src));
    let none = c
        .list_dead_letter_source_queues()
        .queue_url(&src)
        .send()
        .await
        .unwrap();
    assert!(none.queue_urls().is_empty());

    // Removing the policy stops the moves for messages already queued.
    common::send(&c, &src, "later").await;
    for _ in 0..2 {
        receive(&c, &src, 1, 0).await;
    }
    common::set_attr(&c, &src, QueueAttributeName::RedrivePolicy, "").await;
    assert_eq!(receive(&c, &src, 1, 0).await.len(), 1);
}

#[tokio::test]
async fn fifo_dead_letter_queue_keeps_order() {
    let server = start_suite().await;
    let c = sdk(&server);
    let mk = |name: &'static str| {
        let c = c.clone();
        async move {
            common::create_with(
                &c,
                name,
                &[
                    (QueueAttributeName::FifoQueue, "true"),
                    (QueueAttributeName::ContentBasedDeduplication, "true"),
                ],
            )
            .await
        }
    };
    let dlq = mk("dlq.fifo").await;
    let src = mk("src.fifo").await;
    set_redrive(&c, &src, &arn_of(&c, &dlq).await, 1).await;
    for b in ["m1", "m2", "m3"] {
        c.send_message()
            .queue_url(&src)
            .message_body(b)
            .message_group_id("g")
            .send()
            .await
            .unwrap();
    }
    assert_eq!(receive(&c, &src, 10, 0).await.len(), 3);
    assert!(receive(&c, &src, 10, 0).await.is_empty());
    let moved = receive(&c, &dlq, 10, 30).await;
    let bodies: Vec<_> = moved.iter().map(|m| m.body().unwrap()).collect();
    assert_eq!(bodies, ["m1", "m2", "m3"]);
    assert!(moved[0]
        .attributes()
        .unwrap()
        .contains_key(&MessageSystemAttributeName::SequenceNumber));
}

#[tokio::test]
async fn redrive_policy_validation() {
    let server = start_suite().await;
    let c = sdk(&server);
    let std_dlq = create(&c, "std-dlq").await;
    let src = create(&c, "src").await;
    let fifo_dlq =
        common::create_with(&c, "f.fifo", &[(QueueAttributeName::FifoQueue, "true")]).await;
    let std_arn = arn_of(&c, &std_dlq).await;
    let fifo_arn = arn_of(&c, &fifo_dlq).await;
    let cases = [
        (format!(r#"{{"deadLetterTargetArn":"{fifo_arn}","maxReceiveCount":3}}"#), "Dead-letter queue must be same type of queue as the source."),
        (r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:nope","maxReceiveCount":3}"#.to_string(), "Dead letter target does not exist."),
        (format!(r#"{{"deadLetterTargetArn":"{std_arn}","maxReceiveCount":0}}"#), "Invalid value for maxReceiveCount: 0, valid values are from 1 to 1000 both inclusive."),
        (format!(r#"{{"deadLetterTargetArn":"{std_arn}","maxReceiveCount":1001}}"#), "Invalid value for maxReceiveCount: 1001, valid values are from 1 to 1000 both inclusive."),
        (format!(r#"{{"deadLetterTargetArn":"{std_arn}"}}"#), "Redrive policy does not contain mandatory attribute: maxReceiveCount."),
        (r#"{"maxReceiveCount":3}"#.to_string(), "Redrive policy does not contain mandatory attribute: deadLetterTargetArn."),
        ("not json".to_string(), "Redrive policy is not a valid JSON map."),
        (r#"{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:000000000000:std-dlq","maxReceiveCount":3}"#.to_string(), "Dead-letter target must be in the same account and region as the source queue."),
    ];
    for (policy, reason) in cases {
        let err = c
            .set_queue_attributes()
            .queue_url(&src)
            .attributes(QueueAttributeName::RedrivePolicy, &policy)
            .send()
            .await
            .unwrap_err()
            .into_service_error();
        assert_eq!(err.code(), Some("InvalidParameterValue"), "{policy}");
        assert_eq!(
            err.message(),
            Some(
                format!("Value {policy} for parameter RedrivePolicy is invalid. Reason: {reason}")
                    .as_str()
            )
        );
    }
    // A string count is accepted, and the document comes back as AWS re-serialises it:
    // compact, the count a number.
    let ok = format!(r#"{{ "maxReceiveCount": "5", "deadLetterTargetArn": "{std_arn}" }}"#);
    common::set_attr(&c, &src, QueueAttributeName::RedrivePolicy, &ok).await;
    let attrs = common::queue_attrs(&c, &src, &[QueueAttributeName::RedrivePolicy]).await;
    assert_eq!(
        attrs[&QueueAttributeName::RedrivePolicy],
        format!(r#"{{"deadLetterTargetArn":"{std_arn}","maxReceiveCount":5}}"#)
    );

    // RedriveAllowPolicy on the target is enforced.
    let src_arn = arn_of(&c, &src).await;
    for (allow, permitted) in [
        (r#"{"redrivePermission":"denyAll"}"#.to_string(), false),
        (r#"{"redrivePermission":"byQueue","sourceQueueArns":["arn:aws:sqs:us-east-1:000000000000:other"]}"#.to_string(), false),
        (format!(r#"{{"redrivePermission":"byQueue","sourceQueueArns":["{src_arn}"]}}"#), true),
        (r#"{"redrivePermission":"allowAll"}"#.to_string(), true),
    ] {
        common::set_attr(&c, &std_dlq, QueueAttributeName::RedriveAllowPolicy, &allow).await;
        let r = c.set_queue_attributes().queue_url(&src).attributes(QueueAttributeName::RedrivePolicy, &ok).send().await;
        assert_eq!(r.is_ok(), permitted, "{allow}: {r:?}");
        if let Err(e) = r {
            let e = e.into_service_error();
            assert_eq!(e.code(), Some("InvalidParameterValue"));
        }
    }
    let eleven: Vec<String> = (0..11)
        .map(|i| format!("\"arn:aws:sqs:us-east-1:000000000000:q{i}\""))
        .collect();
    for bad in [
        r#"{"redrivePermission":"sometimes"}"#.to_string(),
        r#"{"redrivePermission":"byQueue"}"#.to_string(),
        format!(r#"{{"redrivePermission":"byQueue","sourceQueueArns":[{}]}}"#, eleven.join(",")),
        r#"{"redrivePermission":"allowAll","sourceQueueArns":["arn:aws:sqs:us-east-1:000000000000:q"]}"#.to_string(),
        "[]".to_string(),
    ] {
        let err = c.set_queue_attributes().queue_url(&std_dlq).attributes(QueueAttributeName::RedriveAllowPolicy, &bad).send().await.unwrap_err().into_service_error();
        assert_eq!(err.code(), Some("InvalidParameterValue"), "{bad}");
        assert!(err.message().unwrap().starts_with(&format!("Value {bad} for parameter RedriveAllowPolicy is invalid. Reason: ")));
    }
}

async fn fill_dlq(c: &Client, src: &str, dlq: &str, n: usize) -> HashSet<String> {
    set_redrive(c, src, &arn_of(c, dlq).await, 1).await;
    let mut ids = HashSet::new();
    for chunk in 0..n.div_ceil(10) {
        let entries = (0..10.min(n - chunk * 10))
            .map(|i| {
                SendMessageBatchRequestEntry::builder()
                    .id(format!("e{i}"))
                    .message_body(format!("m{}", chunk * 10 + i))
                    .build()
                    .unwrap()
            })
            .collect();
        let out = c
            .send_message_batch()
            .queue_url(src)
            .set_entries(Some(entries))
            .send()
            .await
            .unwrap();
        ids.extend(out.successful().iter().map(|s| s.message_id().to_string()));
    }
    // First receive delivers (visibility 0), the second moves everything to the DLQ.
    let mut seen = 0;
    while seen < n {
        seen += receive(c, src, 10, 0).await.len();
    }
    assert!(receive(c, src, 10, 0).await.is_empty());
    ids
}

#[tokio::test]
async fn move_task_at_a_rate_back_to_the_source() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let dlq = create(&c, "dlq").await;
    let src = create(&c, "src").await;
    fill_dlq(&c, &src, &dlq, 5).await;
    let dlq_arn = arn_of(&c, &dlq).await;

    let err = c
        .start_message_move_task()
        .source_arn(arn_of(&c, &src).await)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(
        err.message(),
        Some("Source queue must be configured as a Dead Letter Queue.")
    );
    let err = c
        .start_message_move_task()
        .source_arn("arn:aws:sqs:us-east-1:000000000000:nope")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 404);
    assert!(err.into_service_error().is_resource_not_found_exception());

    let handle = start_move_task(&c, &dlq_arn, None, 1)
        .await
        .task_handle
        .unwrap();
    let decoded: serde_json::Value = serde_json::from_slice(&base64_decode(&handle)).unwrap();
    assert_eq!(decoded["sourceArn"], dlq_arn.as_str());
    assert!(decoded["taskId"].is_string());
    let err = c
        .start_message_move_task()
        .source_arn(&dlq_arn)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(err.message(), Some("There is already a task running. Only one active task is allowed for a source queue arn at a given time."));

    // The clock is frozen: one message goes at once, then one per second of clock time.
    let t = wait_task(&c, &dlq_arn, |t| {
        t.approximate_number_of_messages_moved() == 1
    })
    .await;
    assert_eq!(t.status(), Some("RUNNING"));
    assert_eq!(t.task_handle(), Some(handle.as_str()));
    assert_eq!(t.approximate_number_of_messages_to_move(), Some(5));
    assert_eq!(t.max_number_of_messages_per_second(), Some(1));
    assert!(t.destination_arn().is_none());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = wait_task(&c, &dlq_arn, |_| true).await;
    assert_eq!(
        t.approximate_number_of_messages_moved(),
        1,
        "no more without clock time"
    );
    for moved in 2..=5 {
        server.advance_clock(Duration::from_secs(1));
        wait_task(&c, &dlq_arn, |t| {
            t.approximate_number_of_messages_moved() == moved
        })
        .await;
    }
    let t = wait_task(&c, &dlq_arn, |t| t.status() == Some("COMPLETED")).await;
    assert!(t.task_handle().is_none());

    let back = receive(&c, &src, 10, 30).await;
    assert_eq!(back.len(), 5);
    for m in &back {
        let attrs = m.attributes().unwrap();
        assert_eq!(
            attrs[&MessageSystemAttributeName::ApproximateReceiveCount],
            "1",
            "fresh count"
        );
        assert!(!attrs.contains_key(&MessageSystemAttributeName::DeadLetterQueueSourceArn));
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

#[tokio::test]
async fn move_task_cancellation_and_explicit_destination() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let dlq = create(&c, "dlq").await;
    let src = create(&c, "src").await;
    let other = create(&c, "other").await;
    fill_dlq(&c, &src, &dlq, 6).await;
    let dlq_arn = arn_of(&c, &dlq).await;
    let other_arn = arn_of(&c, &other).await;
    let handle = start_move_task(&c, &dlq_arn, Some(&other_arn), 1)
        .await
        .task_handle
        .unwrap();
    server.advance_clock(Duration::from_secs(1));
    wait_task(&c, &dlq_arn, |t| {
        t.approximate_number_of_messages_moved() == 2
    })
    .await;
    let cancelled = c
        .cancel_message_move_task()
        .task_handle(&handle)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.approximate_number_of_messages_moved(), 2);
    let t = wait_task(&c, &dlq_arn, |t| t.status() == Some("CANCELLED")).await;
    assert_eq!(t.destination_arn(), Some(other_arn.as_str()));
    assert!(t.task_handle().is_none());
    server.advance_clock(Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(receive(&c, &other, 10, 30).await.len(), 2);
    assert_eq!(
        receive(&c, &dlq, 10, 30).await.len(),
        4,
        "the rest stay in the DLQ"
    );

    let err = c
        .cancel_message_move_task()
        .task_handle(&handle)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(err.code(), Some("InvalidParameterValue"));
    let err = c
        .cancel_message_move_task()
        .task_handle("not-a-handle")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(
        err.message(),
        Some("Value for parameter TaskHandle is invalid.")
    );
    use base64::Engine as _;
    let unknown = base64::engine::general_purpose::STANDARD
        .encode(format!(r#"{{"taskId":"x","sourceArn":"{dlq_arn}"}}"#));
    let err = c
        .cancel_message_move_task()
        .task_handle(unknown)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 404);
    assert_eq!(
        err.into_service_error().message(),
        Some("Task does not exist.")
    );

    // Listing: newest first, MaxResults up to 10.
    c.start_message_move_task()
        .source_arn(&dlq_arn)
        .send()
        .await
        .unwrap();
    wait_task(&c, &dlq_arn, |t| t.status() == Some("COMPLETED")).await;
    let all = c
        .list_message_move_tasks()
        .source_arn(&dlq_arn)
        .max_results(10)
        .send()
        .await
        .unwrap();
    let statuses: Vec<_> = all.results().iter().map(|t| t.status().unwrap()).collect();
    assert_eq!(statuses, ["COMPLETED", "CANCELLED"]);
    assert!(all.results()[0].started_timestamp() >= all.results()[1].started_timestamp());
}

#[tokio::test]
async fn move_task_fails_when_the_destination_is_gone() {
    let server = start_suite().await;
    let c = sdk(&server);
    let dlq = create(&c, "dlq").await;
    let src = create(&c, "src").await;
    fill_dlq(&c, &src, &dlq, 3).await;
    c.delete_queue().queue_url(&src).send().await.unwrap();
    let dlq_arn = arn_of(&c, &dlq).await;
    // Still a DLQ? Its only source is gone, so AWS would refuse; give it another source.
    let other = create(&c, "other").await;
    set_redrive(&c, &other, &dlq_arn, 3).await;
    c.start_message_move_task()
        .source_arn(&dlq_arn)
        .send()
        .await
        .unwrap();
    let t = wait_task(&c, &dlq_arn, |t| t.status() == Some("FAILED")).await;
    assert_eq!(
        t.failure_reason(),
        Some("AWS.SimpleQueueService.NonExistentQueue")
    );
    assert_eq!(receive(&c, &dlq, 10, 30).await.len(), 3, "nothing is lost");
}

#[tokio::test]
async fn ten_thousand_messages_round_trip_exactly_once() {
    let server = start_suite().await;
    let c = sdk(&server);
    let dlq = create(&c, "dlq").await;
    let src = create(&c, "src").await;
    let sent = fill_dlq(&c, &src, &dlq, 10_000).await;
    assert_eq!(sent.len(), 10_000);
    let dlq_attrs =
        common::queue_attrs(&c, &dlq, &[QueueAttributeName::ApproximateNumberOfMessages]).await;
    assert_eq!(
        dlq_attrs[&QueueAttributeName::ApproximateNumberOfMessages],
        "10000"
    );
    let dlq_arn = arn_of(&c, &dlq).await;
    c.start_message_move_task()
        .source_arn(&dlq_arn)
        .send()
        .await
        .unwrap();
    let t = wait_task(&c, &dlq_arn, |t| t.status() == Some("COMPLETED")).await;
    assert_eq!(t.approximate_number_of_messages_moved(), 10_000);
    // Remove the policy so a second receive does not dead-letter again.
    common::set_attr(&c, &src, QueueAttributeName::RedrivePolicy, "").await;
    let mut back = HashSet::new();
    loop {
        let got = receive(&c, &src, 10, 300).await;
        if got.is_empty() {
            break;
        }
        for m in got {
            assert!(
                back.insert(m.message_id().unwrap().to_string()),
                "delivered twice"
            );
        }
    }
    assert_eq!(back, sent);
}

#[tokio::test]
async fn permissions_round_trip_and_limits() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = create(&c, "shared").await;
    let arn = arn_of(&c, &url).await;
    c.add_permission()
        .queue_url(&url)
        .label("one")
        .aws_account_ids("111122223333")
        .actions("ReceiveMessage")
        .send()
        .await
        .unwrap();
    c.add_permission()
        .queue_url(&url)
        .label("two")
        .aws_account_ids("111122223333")
        .aws_account_ids("444455556666")
        .actions("SendMessage")
        .actions("DeleteMessage")
        .send()
        .await
        .unwrap();
    let policy = c
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::Policy)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()
        .remove(&QueueAttributeName::Policy)
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&policy).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({
            "Version": "2008-10-17",
            "Id": format!("{arn}/SQSDefaultPolicy"),
            "Statement": [
                {"Sid": "one", "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:root"}, "Action": "SQS:ReceiveMessage", "Resource": arn},
                {"Sid": "two", "Effect": "Allow", "Principal": {"AWS": ["arn:aws:iam::111122223333:root", "arn:aws:iam::444455556666:root"]}, "Action": ["SQS:SendMessage", "SQS:DeleteMessage"], "Resource": arn},
            ]
        })
    );
    let err = c
        .add_permission()
        .queue_url(&url)
        .label("one")
        .aws_account_ids("111122223333")
        .actions("SendMessage")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(
        err.message(),
        Some("Value one for parameter Label is invalid. Reason: Already exists.")
    );
    let err = c
        .add_permission()
        .queue_url(&url)
        .label("many")
        .aws_account_ids("111122223333")
        .set_actions(Some(vec!["SendMessage".into(); 8]))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 403);
    assert_eq!(err.into_service_error().code(), Some("OverLimit"));
    let err = c
        .add_permission()
        .queue_url(&url)
        .label("bad")
        .aws_account_ids("111122223333")
        .actions("CreateQueue")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(err.code(), Some("InvalidParameterValue"));
    assert!(err
        .message()
        .unwrap()
        .starts_with("Value SQS:CreateQueue for parameter ActionName is invalid."));

    c.remove_permission()
        .queue_url(&url)
        .label("one")
        .send()
        .await
        .unwrap();
    let err = c
        .remove_permission()
        .queue_url(&url)
        .label("one")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(
        err.message(),
        Some("Value one for parameter Label is invalid. Reason: can't find label.")
    );
    c.remove_permission()
        .queue_url(&url)
        .label("two")
        .send()
        .await
        .unwrap();
    let attrs = common::queue_attrs(&c, &url, &[QueueAttributeName::All]).await;
    assert!(
        !attrs.contains_key(&QueueAttributeName::Policy),
        "the last removal deletes the policy"
    );
}

#[tokio::test]
async fn tag_limits() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = create(&c, "tags").await;
    let mut req = c.tag_queue().queue_url(&url);
    for i in 0..50 {
        req = req.tags(format!("k{i}"), "v");
    }
    req.send().await.unwrap();
    let err = c
        .tag_queue()
        .queue_url(&url)
        .tags("one-more", "v")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(err.code(), Some("InvalidParameterValue"));
    // Overwriting an existing key is not a new tag.
    c.tag_queue()
        .queue_url(&url)
        .tags("k1", "changed")
        .send()
        .await
        .unwrap();
    for (k, v) in [("aws:reserved", "v"), ("", "v"), ("bad*key", "v")] {
        let err = c
            .tag_queue()
            .queue_url(&url)
            .tags(k, v)
            .send()
            .await
            .unwrap_err()
            .into_service_error();
        assert_eq!(err.code(), Some("InvalidParameterValue"), "{k}");
    }
    let long_value = "v".repeat(257);
    let err = c
        .tag_queue()
        .queue_url(&url)
        .tags("k1", long_value)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(err.code(), Some("InvalidParameterValue"));
}

#[tokio::test]
async fn deleted_queue_names_are_blocked_for_sixty_seconds() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = create(&c, "again").await;
    c.delete_queue().queue_url(&url).send().await.unwrap();
    let err = c
        .create_queue()
        .queue_name("again")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(err.is_queue_deleted_recently(), "{err:?}");
    assert_eq!(err.message(), Some("You must wait 60 seconds after deleting a queue before you can create another with the same name."));
    server.advance_clock(Duration::from_secs(60));
    create(&c, "again").await;
}

#[tokio::test]
async fn redrive_policies_pointing_at_each_other_or_at_self_never_hang() {
    let server = start_suite().await;
    let c = sdk(&server);
    let a = create(&c, "a").await;
    let b = create(&c, "b").await;
    let (a_arn, b_arn) = (arn_of(&c, &a).await, arn_of(&c, &b).await);
    // A queue may be its own dead-letter queue, as on AWS.
    set_redrive(&c, &a, &a_arn, 3).await;
    // Both directions and self-targets at once, many times, with receives in between: each
    // call answers (no lock-order deadlock).
    let mut calls = Vec::new();
    for i in 0..40 {
        let (c, from, to) = match i % 4 {
            0 => (c.clone(), a.clone(), b_arn.clone()),
            1 => (c.clone(), b.clone(), a_arn.clone()),
            2 => (c.clone(), a.clone(), a_arn.clone()),
            _ => (c.clone(), b.clone(), b_arn.clone()),
        };
        calls.push(tokio::spawn(async move {
            set_redrive(&c, &from, &to, 3).await;
            c.receive_message().queue_url(&from).send().await.unwrap();
        }));
    }
    tokio::time::timeout(Duration::from_secs(10), async {
        for call in calls {
            call.await.unwrap();
        }
    })
    .await
    .expect("no deadlock");
}
