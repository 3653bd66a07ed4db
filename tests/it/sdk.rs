//! End to end through the official Rust SDK (AWS JSON 1.0), against a real server on loopback.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
    MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
    SendMessageBatchRequestEntry,
};
use common::{create, sdk, start_suite, Reach};

fn string_attr(v: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(v)
        .build()
        .unwrap()
}

#[tokio::test]
async fn queue_lifecycle() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = common::create_with(
        &c,
        "orders",
        &[(QueueAttributeName::VisibilityTimeout, "45")],
    )
    .await;
    assert_eq!(url, format!("{}/000000000000/orders", server.endpoint()));

    // Same attributes: same URL. A different value: QueueNameExists.
    let again = common::create_with(
        &c,
        "orders",
        &[(QueueAttributeName::VisibilityTimeout, "45")],
    )
    .await;
    assert_eq!(again, url);
    let err = c
        .create_queue()
        .queue_name("orders")
        .attributes(QueueAttributeName::VisibilityTimeout, "46")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(err.is_queue_name_exists(), "{err:?}");
    assert_eq!(
        err.message(),
        Some("A queue already exists with the same name and a different value for attribute VisibilityTimeout")
    );

    assert_eq!(common::queue_url(&c, "orders").await, url);

    let attrs = common::queue_attrs(&c, &url, &[QueueAttributeName::All]).await;
    assert_eq!(attrs[&QueueAttributeName::VisibilityTimeout], "45");
    assert_eq!(
        attrs[&QueueAttributeName::QueueArn],
        "arn:aws:sqs:us-east-1:000000000000:orders"
    );
    assert_eq!(attrs.len(), 12, "{attrs:?}");

    common::set_attr(&c, &url, QueueAttributeName::DelaySeconds, "5").await;
    let attrs = common::queue_attrs(&c, &url, &[QueueAttributeName::DelaySeconds]).await;
    assert_eq!(attrs.len(), 1);
    assert_eq!(attrs[&QueueAttributeName::DelaySeconds], "5");

    c.delete_queue().queue_url(&url).send().await.unwrap();
    let err = c
        .get_queue_url()
        .queue_name("orders")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(err.is_queue_does_not_exist(), "{err:?}");
}

#[tokio::test]
async fn list_queues_pages() {
    let server = start_suite().await;
    let c = sdk(&server);
    for i in 0..5 {
        create(&c, &format!("page-{i}")).await;
    }
    create(&c, "other").await;
    let all = c.list_queues().send().await.unwrap();
    assert_eq!(all.queue_urls().len(), 6);
    assert!(all.next_token.is_none());

    let mut seen = Vec::new();
    let mut token = None;
    loop {
        let page = c
            .list_queues()
            .queue_name_prefix("page-")
            .max_results(2)
            .set_next_token(token)
            .send()
            .await
            .unwrap();
        assert!(page.queue_urls().len() <= 2);
        seen.extend(page.queue_urls().iter().cloned());
        token = page.next_token;
        if token.is_none() {
            break;
        }
    }
    let names: Vec<_> = seen
        .iter()
        .map(|u| u.rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(names, ["page-0", "page-1", "page-2", "page-3", "page-4"]);

    let none = c
        .list_queues()
        .queue_name_prefix("zzz")
        .send()
        .await
        .unwrap();
    assert!(none.queue_urls.is_none());
}

#[tokio::test]
async fn send_receive_delete_with_attributes() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = create(&c, "attrs").await;
    let body = "line1\r\nline2 \"quoted\" & <tagged> — ünïcødé 🚀";
    let sent = c
        .send_message()
        .queue_url(&url)
        .message_body(body)
        .message_attributes("Foo", string_attr("Bar"))
        .message_attributes(
            "Count",
            MessageAttributeValue::builder()
                .data_type("Number.int")
                .string_value("42")
                .build()
                .unwrap(),
        )
        .message_attributes(
            "Blob",
            MessageAttributeValue::builder()
                .data_type("Binary")
                .binary_value(Blob::new(vec![0u8, 1, 2, 255]))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        sent.md5_of_message_body.as_deref(),
        Some(format!("{:x}", md5_of(body.as_bytes())).as_str())
    );
    assert!(sent.md5_of_message_attributes.is_some());

    let got = c
        .receive_message()
        .queue_url(&url)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap();
    let msgs = got.messages();
    assert_eq!(msgs.len(), 1);
    let m = &msgs[0];
    assert_eq!(m.body(), Some(body));
    assert_eq!(m.message_id(), sent.message_id.as_deref());
    assert_eq!(m.md5_of_message_attributes, sent.md5_of_message_attributes);
    let ma = m.message_attributes().unwrap();
    assert_eq!(ma["Foo"].string_value(), Some("Bar"));
    assert_eq!(ma["Count"].data_type(), "Number.int");
    assert_eq!(
        ma["Blob"].binary_value().unwrap().as_ref(),
        &[0u8, 1, 2, 255]
    );
    let sys = m.attributes().unwrap();
    assert_eq!(
        sys[&MessageSystemAttributeName::ApproximateReceiveCount],
        "1"
    );
    assert_eq!(sys[&MessageSystemAttributeName::SenderId], "000000000000");
    assert!(sys.contains_key(&MessageSystemAttributeName::SentTimestamp));
    assert!(sys.contains_key(&MessageSystemAttributeName::ApproximateFirstReceiveTimestamp));

    c.delete_message()
        .queue_url(&url)
        .receipt_handle(m.receipt_handle().unwrap())
        .send()
        .await
        .unwrap();
    // Deleting again with the same handle is fine on a standard queue.
    c.delete_message()
        .queue_url(&url)
        .receipt_handle(m.receipt_handle().unwrap())
        .send()
        .await
        .unwrap();
    assert!(common::receives_nothing(&c, &url).await);
}

fn md5_of(data: &[u8]) -> u128 {
    use md5::{Digest, Md5};
    u128::from_be_bytes(Md5::digest(data).into())
}

#[tokio::test]
async fn attribute_filters_return_subsets_with_matching_md5() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = create(&c, "filters").await;
    c.send_message()
        .queue_url(&url)
        .message_body("x")
        .message_attributes("General", string_attr("Kenobi"))
        .message_attributes("Hello", string_attr("There"))
        .message_attributes("Help.Me", string_attr("Me"))
        .send()
        .await
        .unwrap();
    let got = c
        .receive_message()
        .queue_url(&url)
        .message_attribute_names("Hel.*")
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    let m = &got.messages()[0];
    let names: Vec<_> = {
        let mut n: Vec<_> = m.message_attributes().unwrap().keys().cloned().collect();
        n.sort();
        n
    };
    assert_eq!(names, ["Hello", "Help.Me"]);
    assert_eq!(
        m.md5_of_message_attributes(),
        Some("83fee93c1bcd8b9a5a923ffacdc636c7")
    );
    assert!(m.attributes.is_none());

    let got = c
        .receive_message()
        .queue_url(&url)
        .message_system_attribute_names(MessageSystemAttributeName::SenderId)
        .message_system_attribute_names(MessageSystemAttributeName::SequenceNumber)
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    let m = &got.messages()[0];
    assert_eq!(m.attributes().unwrap().len(), 1);
    assert!(m.message_attributes.is_none());
    assert!(m.md5_of_message_attributes.is_none());
}

#[tokio::test]
async fn batches() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = create(&c, "batches").await;
    let entries: Vec<_> = (0..10)
        .map(|i| {
            SendMessageBatchRequestEntry::builder()
                .id(format!("m{i}"))
                .message_body(if i == 3 {
                    "\u{8}".to_string()
                } else {
                    format!("body {i}")
                })
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
    assert_eq!(out.successful().len(), 9);
    assert_eq!(out.failed().len(), 1);
    assert_eq!(out.failed()[0].id(), "m3");
    assert_eq!(out.failed()[0].code(), "InvalidMessageContents");
    assert!(out.failed()[0].sender_fault());

    let mut handles = Vec::new();
    while handles.len() < 9 {
        let got = c
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        assert!(!got.messages().is_empty());
        handles.extend(
            got.messages()
                .iter()
                .map(|m| m.receipt_handle().unwrap().to_string()),
        );
    }
    assert_eq!(handles.len(), 9);
    // Extend them all in one call, with one bad handle failing on its own.
    let mut extend: Vec<_> = handles
        .iter()
        .enumerate()
        .map(|(i, h)| {
            ChangeMessageVisibilityBatchRequestEntry::builder()
                .id(format!("v{i}"))
                .receipt_handle(h)
                .visibility_timeout(120)
                .build()
                .unwrap()
        })
        .collect();
    extend.push(
        ChangeMessageVisibilityBatchRequestEntry::builder()
            .id("bad")
            .receipt_handle("garbage")
            .visibility_timeout(5)
            .build()
            .unwrap(),
    );
    let extended = c
        .change_message_visibility_batch()
        .queue_url(&url)
        .set_entries(Some(extend))
        .send()
        .await
        .unwrap();
    assert_eq!(extended.successful().len(), 9);
    assert_eq!(extended.failed()[0].code(), "ReceiptHandleIsInvalid");

    let mut entries: Vec<_> = handles
        .iter()
        .enumerate()
        .map(|(i, h)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(format!("d{i}"))
                .receipt_handle(h)
                .build()
                .unwrap()
        })
        .collect();
    entries.push(
        DeleteMessageBatchRequestEntry::builder()
            .id("bad")
            .receipt_handle("garbage")
            .build()
            .unwrap(),
    );
    let out = c
        .delete_message_batch()
        .queue_url(&url)
        .set_entries(Some(entries))
        .send()
        .await
        .unwrap();
    assert_eq!(out.successful().len(), 9);
    assert_eq!(out.failed().len(), 1);
    assert_eq!(out.failed()[0].code(), "ReceiptHandleIsInvalid");

    assert_eq!(common::message_counts(&c, &url).await, ["0", "0"]);
}

#[tokio::test]
async fn long_poll_returns_soon_after_a_send() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = create(&c, "longpoll").await;
    let receiver = {
        let c = c.clone();
        let url = url.clone();
        tokio::spawn(async move {
            let got = c
                .receive_message()
                .queue_url(&url)
                .wait_time_seconds(20)
                .send()
                .await
                .unwrap();
            (got.messages().len(), Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent_at = Instant::now();
    common::send(&c, &url, "wake").await;
    let (n, got_at) = receiver.await.unwrap();
    assert_eq!(n, 1);
    let lag = got_at.duration_since(sent_at);
    assert!(
        lag < Duration::from_millis(100),
        "long poll woke after {lag:?}"
    );
}

/// A long poll's wait runs on the engine clock: a test that moves the clock past it gets
/// its empty answer at once, running or frozen, with no real seconds spent.
#[tokio::test]
async fn moving_the_clock_ends_a_long_poll() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = create(&c, "clockpoll").await;
    for frozen in [false, true] {
        if frozen {
            server.clock().freeze();
        }
        let poll = {
            let (c, url) = (c.clone(), url.clone());
            tokio::spawn(async move {
                c.receive_message()
                    .queue_url(&url)
                    .wait_time_seconds(20)
                    .send()
                    .await
                    .unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.advance_clock(Duration::from_secs(19));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !poll.is_finished(),
            "ended before its 20 s (frozen: {frozen})"
        );
        let moved_at = Instant::now();
        server.advance_clock(Duration::from_secs(1));
        let got = tokio::time::timeout(Duration::from_secs(5), poll)
            .await
            .expect("the long poll outlived its wait on the engine clock")
            .unwrap();
        assert!(got.messages.is_none());
        assert!(
            moved_at.elapsed() < Duration::from_millis(500),
            "frozen: {frozen}"
        );
    }
}

#[tokio::test]
async fn long_poll_times_out_empty() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = create(&c, "timeout").await;
    let start = Instant::now();
    let got = c
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    assert!(got.messages.is_none());
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[tokio::test]
async fn long_poll_wakes_when_the_clock_makes_a_message_visible() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = create(&c, "clockwake").await;
    c.send_message()
        .queue_url(&url)
        .message_body("later")
        .delay_seconds(600)
        .send()
        .await
        .unwrap();
    let receiver = common::spawn_long_poll(&c, &url, 20);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let start = Instant::now();
    server.advance_clock(Duration::from_secs(600));
    assert_eq!(receiver.await.unwrap(), 1);
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn errors_map_to_typed_sdk_errors() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = create(&c, "errs").await;
    let err = c
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(11)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(err.code(), Some("InvalidParameterValue"));
    assert_eq!(
        err.message(),
        Some("Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.")
    );
    let err = c
        .delete_message()
        .queue_url(&url)
        .receipt_handle("garbage")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(err.is_receipt_handle_is_invalid(), "{err:?}");
    let err = c
        .send_message()
        .queue_url(format!("{}/000000000000/missing", server.endpoint()))
        .message_body("x")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(err.is_queue_does_not_exist(), "{err:?}");
    c.purge_queue().queue_url(&url).send().await.unwrap();
    let err = c
        .purge_queue()
        .queue_url(&url)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(err.is_purge_queue_in_progress(), "{err:?}");
}

#[tokio::test]
async fn tags_round_trip() {
    let server = start_suite().await;
    let c = sdk(&server);
    let url = c
        .create_queue()
        .queue_name("tagged")
        .tags("team", "core")
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    c.tag_queue()
        .queue_url(&url)
        .tags("env", "test")
        .tags("team", "platform")
        .send()
        .await
        .unwrap();
    let tags = common::queue_tags(&c, &url).await;
    assert_eq!(
        tags,
        HashMap::from([
            ("team".to_string(), "platform".to_string()),
            ("env".to_string(), "test".to_string())
        ])
    );
    c.untag_queue()
        .queue_url(&url)
        .tag_keys("team")
        .tag_keys("absent")
        .send()
        .await
        .unwrap();
    let tags = common::queue_tags(&c, &url).await;
    assert_eq!(tags.len(), 1);
}
