//! Visibility timeouts, delays, retention, purge and the in-flight quota, on the server's
//! controllable clock: no test here sleeps for the durations it checks.

use crate::common;

use std::time::Duration;

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use common::{create, sdk, start_suite};

async fn receive_one(
    c: &aws_sdk_sqs::Client,
    url: &str,
    vis: Option<i32>,
) -> Option<aws_sdk_sqs::types::Message> {
    common::receive_msgs(c, url, 1, vis).await.pop()
}

async fn count(c: &aws_sdk_sqs::Client, url: &str, name: QueueAttributeName) -> String {
    common::queue_attr(c, url, name).await
}

#[tokio::test]
async fn received_message_is_invisible_until_its_timeout() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = create(&c, "vis").await;
    common::send(&c, &url, "m").await;

    let first = receive_one(&c, &url, Some(45)).await.expect("message");
    assert_eq!(
        count(
            &c,
            &url,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible
        )
        .await,
        "1"
    );
    server.advance_clock(Duration::from_millis(44_999));
    assert!(receive_one(&c, &url, None).await.is_none());
    server.advance_clock(Duration::from_millis(1));
    let second = receive_one(&c, &url, None).await.expect("visible again");
    assert_eq!(second.message_id, first.message_id);
    assert_ne!(second.receipt_handle, first.receipt_handle);
    let attrs = second.attributes.unwrap();
    assert_eq!(
        attrs[&MessageSystemAttributeName::ApproximateReceiveCount],
        "2"
    );

    // The queue default (30 s) applies to the next receive.
    server.advance_clock(Duration::from_secs(29));
    assert!(receive_one(&c, &url, None).await.is_none());
    server.advance_clock(Duration::from_secs(1));
    assert!(receive_one(&c, &url, None).await.is_some());
}

#[tokio::test]
async fn change_visibility_extends_releases_and_is_capped_at_twelve_hours() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = create(&c, "cmv").await;
    common::send(&c, &url, "m").await;
    let m = receive_one(&c, &url, Some(10)).await.unwrap();
    let handle = m.receipt_handle.unwrap();

    // Extend from now: 100 s.
    server.advance_clock(Duration::from_secs(5));
    c.change_message_visibility()
        .queue_url(&url)
        .receipt_handle(&handle)
        .visibility_timeout(100)
        .send()
        .await
        .unwrap();
    server.advance_clock(Duration::from_secs(99));
    assert!(receive_one(&c, &url, None).await.is_none());

    // 12 hours counted from the receive: 104 s have passed.
    let err = c
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(&handle)
        .visibility_timeout(43_200 - 103)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(err.code(), Some("InvalidParameterValue"));
    assert_eq!(
        err.message(),
        Some("Value 43097 for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]")
    );
    c.change_message_visibility()
        .queue_url(&url)
        .receipt_handle(&handle)
        .visibility_timeout(43_200 - 104)
        .send()
        .await
        .unwrap();

    // 0 makes it visible at once.
    c.change_message_visibility()
        .queue_url(&url)
        .receipt_handle(&handle)
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    receive_one(&c, &url, Some(30))
        .await
        .expect("visible after 0");

    // On a standard queue the earlier handle still controls the message, as recorded on AWS.
    c.change_message_visibility()
        .queue_url(&url)
        .receipt_handle(&handle)
        .visibility_timeout(5)
        .send()
        .await
        .unwrap();
    assert!(
        receive_one(&c, &url, None).await.is_none(),
        "hidden for 5 s"
    );
    server.advance_clock(Duration::from_secs(5));
    let again = receive_one(&c, &url, Some(30))
        .await
        .expect("visible 5 s after the earlier handle's change");

    // Deleted: not available for a visibility change.
    let h2 = again.receipt_handle.unwrap();
    c.delete_message()
        .queue_url(&url)
        .receipt_handle(&h2)
        .send()
        .await
        .unwrap();
    let err = c
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(&h2)
        .visibility_timeout(5)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(err
        .message()
        .unwrap()
        .contains("Message does not exist or is not available"));
}

#[tokio::test]
async fn delays_per_message_and_per_queue() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = common::create_with(&c, "delayed", &[(QueueAttributeName::DelaySeconds, "20")]).await;
    common::send(&c, &url, "queue-delay").await;
    c.send_message()
        .queue_url(&url)
        .message_body("own-delay")
        .delay_seconds(5)
        .send()
        .await
        .unwrap();
    c.send_message()
        .queue_url(&url)
        .message_body("no-delay")
        .delay_seconds(0)
        .send()
        .await
        .unwrap();
    assert_eq!(
        count(
            &c,
            &url,
            QueueAttributeName::ApproximateNumberOfMessagesDelayed
        )
        .await,
        "2"
    );
    assert_eq!(
        receive_one(&c, &url, None).await.unwrap().body.unwrap(),
        "no-delay"
    );
    assert!(receive_one(&c, &url, None).await.is_none());
    server.advance_clock(Duration::from_secs(5));
    assert_eq!(
        receive_one(&c, &url, None).await.unwrap().body.unwrap(),
        "own-delay"
    );
    server.advance_clock(Duration::from_secs(15));
    assert_eq!(
        receive_one(&c, &url, None).await.unwrap().body.unwrap(),
        "queue-delay"
    );
}

#[tokio::test]
async fn retention_expires_old_messages_even_in_flight() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = common::create_with(
        &c,
        "retention",
        &[(QueueAttributeName::MessageRetentionPeriod, "60")],
    )
    .await;
    common::send(&c, &url, "old").await;
    common::send(&c, &url, "in-flight").await;
    let m = receive_one(&c, &url, Some(3600)).await.unwrap();
    server.advance_clock(Duration::from_secs(30));
    common::send(&c, &url, "young").await;
    server.advance_clock(Duration::from_secs(30));
    assert_eq!(
        count(&c, &url, QueueAttributeName::ApproximateNumberOfMessages).await,
        "1"
    );
    assert_eq!(
        count(
            &c,
            &url,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible
        )
        .await,
        "0"
    );
    assert_eq!(
        receive_one(&c, &url, None).await.unwrap().body.unwrap(),
        "young"
    );
    // Deleting an expired message with its old handle still succeeds.
    c.delete_message()
        .queue_url(&url)
        .receipt_handle(m.receipt_handle.unwrap())
        .send()
        .await
        .unwrap();

    // Lowering retention expires messages that are already older.
    common::send(&c, &url, "x").await;
    server.advance_clock(Duration::from_secs(200));
    common::set_attr(&c, &url, QueueAttributeName::MessageRetentionPeriod, "600").await;
    common::send(&c, &url, "y").await;
    common::set_attr(&c, &url, QueueAttributeName::MessageRetentionPeriod, "100").await;
    assert_eq!(
        receive_one(&c, &url, None).await.unwrap().body.unwrap(),
        "y"
    );
}

#[tokio::test]
async fn purge_clears_everything_once_a_minute() {
    let server = start_suite().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = create(&c, "purge").await;
    for i in 0..3 {
        common::send(&c, &url, format!("{i}")).await;
    }
    c.send_message()
        .queue_url(&url)
        .message_body("d")
        .delay_seconds(60)
        .send()
        .await
        .unwrap();
    receive_one(&c, &url, None).await.unwrap();
    c.purge_queue().queue_url(&url).send().await.unwrap();
    for n in [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        QueueAttributeName::ApproximateNumberOfMessagesDelayed,
    ] {
        assert_eq!(count(&c, &url, n).await, "0");
    }
    common::send(&c, &url, "after").await;
    server.advance_clock(Duration::from_secs(59));
    let err = c.purge_queue().queue_url(&url).send().await.unwrap_err();
    let raw = err.raw_response().unwrap();
    assert_eq!(raw.status().as_u16(), 403);
    let err = err.into_service_error();
    assert!(err.is_purge_queue_in_progress());
    assert_eq!(
        err.message(),
        Some("Only one PurgeQueue operation on purge is allowed every 60 seconds.")
    );
    assert_eq!(
        receive_one(&c, &url, None).await.unwrap().body.unwrap(),
        "after"
    );
    server.advance_clock(Duration::from_secs(1));
    c.purge_queue().queue_url(&url).send().await.unwrap();
}

#[tokio::test]
async fn in_flight_quota_gives_over_limit_on_short_poll_and_empty_long_poll() {
    // The quota is AWS's 120,000 by default; a server with a quota of 5 shows what hitting
    // it looks like without 120,000 round trips.
    assert_eq!(sqsim::EngineSettings::default().max_in_flight, 120_000);
    let mut config = sqsim::Config::default();
    config.engine.max_in_flight = 5;
    let server = common::start_with(config).await;
    let c = sdk(&server);
    let url = create(&c, "quota").await;
    for i in 0..6 {
        common::send(&c, &url, format!("m{i}")).await;
    }
    let mut in_flight = 0;
    while in_flight < 5 {
        let got = common::receive_msgs(&c, &url, 10, Some(3600)).await;
        assert!(!got.is_empty());
        in_flight += got.len();
    }
    assert_eq!(in_flight, 5);
    assert_eq!(
        count(
            &c,
            &url,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible
        )
        .await,
        "5"
    );

    let err = c
        .receive_message()
        .queue_url(&url)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 403);
    assert_eq!(err.into_service_error().code(), Some("OverLimit"));

    // A long poll waits out its time instead (ended here by moving the clock).
    let long = {
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
    assert!(!long.is_finished());
    server.advance_clock(Duration::from_secs(20));
    assert!(long.await.unwrap().messages.is_none());
}
