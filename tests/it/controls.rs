//! The test-double controls: the admin clock, reset, peek, stats, fault injection,
//! at-least-once mode and per-credential isolation, driven over HTTP and the Rust SDK.

use crate::common;

use std::time::{Duration, Instant};

use aws_sdk_sqs::error::ProvideErrorMetadata;
use common::{create, raw, sdk, sdk_for, start, start_with};
use serde_json::{json, Value};
use sqsim::config::UrlStyle;
use sqsim::{Config, Server};

async fn admin(server: &Server, method: &str, path: &str, body: Value) -> Value {
    let r = raw(
        server,
        method,
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{method} {path}: {}", r.body);
    r.json()
}

fn client_with_key(server: &Server, key: &str, region: &str) -> aws_sdk_sqs::Client {
    common::sdk_with(&server.endpoint(), region, key, "secret")
}

#[tokio::test]
async fn an_hour_passes_through_the_admin_clock_and_wakes_a_long_poll() {
    let server = start().await;
    let c = sdk(&server);
    let url = create(&c, "hour").await;
    common::send(&c, &url, "m").await;
    let got = c
        .receive_message()
        .queue_url(&url)
        .visibility_timeout(3600)
        .send()
        .await
        .unwrap();
    assert_eq!(got.messages().len(), 1);
    let waiter = common::spawn_long_poll(&c, &url, 20);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = admin(&server, "GET", "/_sqsim/clock", json!({})).await["now_ms"]
        .as_u64()
        .unwrap();
    let started = Instant::now();
    let after = admin(
        &server,
        "POST",
        "/_sqsim/clock",
        json!({"advance_seconds": 3600}),
    )
    .await;
    assert!(after["now_ms"].as_u64().unwrap() >= before + 3_600_000);
    assert_eq!(waiter.await.unwrap(), 1);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn fifo_dedup_window_passes_in_milliseconds() {
    let server = start().await;
    let c = sdk(&server);
    let url = common::create_with(
        &c,
        "d.fifo",
        &[(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")],
    )
    .await;
    let send = || {
        c.send_message()
            .queue_url(&url)
            .message_body("x")
            .message_group_id("g")
            .message_deduplication_id("same")
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(send().await.unwrap().message_id, first.message_id);
    admin(
        &server,
        "POST",
        "/_sqsim/clock",
        json!({"advance_seconds": 300}),
    )
    .await;
    assert_ne!(send().await.unwrap().message_id, first.message_id);
}

#[tokio::test]
async fn reset_leaves_a_fresh_server() {
    let server = start().await;
    let c = sdk(&server);
    let url = create(&c, "gone").await;
    common::send(&c, &url, "m").await;
    admin(
        &server,
        "POST",
        "/_sqsim/faults",
        json!({"action": "ListQueues", "error": "ThrottlingException"}),
    )
    .await;
    admin(&server, "POST", "/_sqsim/reset", json!({})).await;
    assert!(
        c.list_queues().send().await.unwrap().queue_urls.is_none(),
        "faults are cleared too"
    );
    // No deleted-name cooldown after a reset.
    let again = create(&c, "gone").await;
    assert!(common::receives_nothing(&c, &again).await);

    // One queue, or one namespace.
    create(&c, "keep").await;
    admin(
        &server,
        "POST",
        "/_sqsim/reset",
        json!({"queue_url": again}),
    )
    .await;
    let names: Vec<_> = c
        .list_queues()
        .send()
        .await
        .unwrap()
        .queue_urls()
        .iter()
        .map(|u| u.rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(names, ["keep"]);
    admin(
        &server,
        "POST",
        "/_sqsim/reset",
        json!({"account": "000000000000", "region": "us-east-1"}),
    )
    .await;
    assert!(c.list_queues().send().await.unwrap().queue_urls.is_none());
    server.reset();
}

#[tokio::test]
async fn peek_and_stats_change_nothing() {
    let server = start().await;
    let c = sdk(&server);
    let url = create(&c, "peeked").await;
    c.send_message()
        .queue_url(&url)
        .message_body("a")
        .message_attributes(
            "k",
            aws_sdk_sqs::types::MessageAttributeValue::builder()
                .data_type("String")
                .string_value("v")
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    c.send_message()
        .queue_url(&url)
        .message_body("b")
        .delay_seconds(60)
        .send()
        .await
        .unwrap();
    common::send(&c, &url, "c").await;
    let got = c.receive_message().queue_url(&url).send().await.unwrap();
    assert_eq!(got.messages().len(), 1);
    let path = format!("/_sqsim/peek?queue_url={}", urlencode(&url));
    let first = admin(&server, "GET", &path, json!({})).await;
    let second = admin(&server, "GET", &path, json!({})).await;
    assert_eq!(first, second, "peeking twice sees the same thing");
    let msgs = first["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    let states: Vec<_> = msgs.iter().map(|m| m["state"].as_str().unwrap()).collect();
    assert_eq!(states.iter().filter(|s| **s == "in_flight").count(), 1);
    assert_eq!(states.iter().filter(|s| **s == "delayed").count(), 1);
    assert_eq!(states.iter().filter(|s| **s == "visible").count(), 1);
    let a = msgs.iter().find(|m| m["body"] == "a").unwrap();
    assert_eq!(a["message_attributes"]["k"]["StringValue"], "v");
    let counts: Vec<u64> = msgs
        .iter()
        .map(|m| m["receive_count"].as_u64().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), 1);

    let stats = admin(&server, "GET", "/_sqsim/stats", json!({})).await;
    let q = &stats["queues"][0];
    assert_eq!(
        (
            q["name"].as_str(),
            q["visible"].as_u64(),
            q["in_flight"].as_u64(),
            q["delayed"].as_u64()
        ),
        (Some("peeked"), Some(1), Some(1), Some(1))
    );
    assert_eq!(
        (
            q["sent"].as_u64(),
            q["received"].as_u64(),
            q["deleted"].as_u64()
        ),
        (Some(3), Some(1), Some(0))
    );
    // Receive counts did not move: the next receive is the visible message's first.
    let next = c
        .receive_message()
        .queue_url(&url)
        .message_system_attribute_names(
            aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        next.messages()[0]
            .attributes()
            .unwrap()
            .values()
            .next()
            .unwrap(),
        "1"
    );
}

fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("k", s)]).unwrap()[2..].to_string()
}

#[tokio::test]
async fn injected_throttling_is_retried_by_the_sdk_and_shows_in_stats() {
    let server = start().await;
    let c = sdk(&server);
    let url = create(&c, "flaky").await;
    admin(&server, "POST", "/_sqsim/faults", json!({"action": "SendMessage", "queue": "flaky", "error": "ThrottlingException", "count": 2})).await;
    // The SDK's standard retry mode makes three attempts: two throttled, the third lands.
    // `common::send` expects success and a MessageId.
    common::send(&c, &url, "eventually").await;
    let faults = admin(&server, "GET", "/_sqsim/faults", json!({})).await;
    assert_eq!(faults["faults"][0]["hits"], 2);
    assert_eq!(faults["faults"][0]["remaining"], 0);
    let stats = admin(&server, "GET", "/_sqsim/stats", json!({})).await;
    assert_eq!(stats["faults"][0]["hits"], 2);

    // Without retries the error itself is visible, in AWS's shape.
    admin(
        &server,
        "POST",
        "/_sqsim/faults",
        json!({"action": "GetQueueUrl", "error": "ServiceUnavailable", "count": 10}),
    )
    .await;
    let no_retry = {
        use aws_sdk_sqs::config::retry::RetryConfig;
        let conf = c
            .config()
            .to_builder()
            .retry_config(RetryConfig::disabled())
            .build();
        aws_sdk_sqs::Client::from_conf(conf)
    };
    let err = no_retry
        .get_queue_url()
        .queue_name("flaky")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 503);
    assert_eq!(err.into_service_error().code(), Some("ServiceUnavailable"));

    // Latency and dropped connections.
    admin(&server, "DELETE", "/_sqsim/faults", json!({})).await;
    admin(
        &server,
        "POST",
        "/_sqsim/faults",
        json!({"action": "ListQueues", "latency_ms": 300, "count": 1}),
    )
    .await;
    let t = Instant::now();
    c.list_queues().send().await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
    admin(
        &server,
        "POST",
        "/_sqsim/faults",
        json!({"action": "ListQueues", "drop_connection": true, "count": 1}),
    )
    .await;
    assert!(
        no_retry.list_queues().send().await.is_err(),
        "the connection was dropped"
    );
    no_retry.list_queues().send().await.unwrap();

    let r = raw(
        &server,
        "POST",
        "/_sqsim/faults",
        &[],
        br#"{"error":"NoSuchError"}"#,
    )
    .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn at_least_once_mode_redelivers_a_deleted_message_once() {
    let server = start().await;
    let c = sdk(&server);
    let url = create(&c, "alo").await;
    admin(
        &server,
        "POST",
        "/_sqsim/faults",
        json!({"queue": "alo", "redeliver_probability": 1.0}),
    )
    .await;
    common::send(&c, &url, "twice").await;
    for round in 0..2 {
        let got = c.receive_message().queue_url(&url).send().await.unwrap();
        assert_eq!(got.messages().len(), 1, "round {round}");
        c.delete_message()
            .queue_url(&url)
            .receipt_handle(got.messages()[0].receipt_handle().unwrap())
            .send()
            .await
            .unwrap();
    }
    assert!(common::receives_nothing(&c, &url).await);
}

#[tokio::test]
async fn credentials_and_regions_are_separate_namespaces() {
    let server = start().await;
    let alice = client_with_key(&server, "111111111111", "us-east-1");
    let bob = client_with_key(&server, "222222222222", "us-east-1");
    let alice_west = client_with_key(&server, "111111111111", "eu-west-1");
    let alice_url = create(&alice, "shared-name").await;
    assert!(alice_url.contains("/111111111111/shared-name"));
    let bob_url = create(&bob, "shared-name").await;
    assert!(bob_url.contains("/222222222222/shared-name"));
    common::send(&alice, &alice_url, "alice").await;
    assert!(common::receives_nothing(&bob, &bob_url).await);
    assert_eq!(
        alice.list_queues().send().await.unwrap().queue_urls(),
        std::slice::from_ref(&alice_url)
    );
    assert!(alice_west
        .list_queues()
        .send()
        .await
        .unwrap()
        .queue_urls
        .is_none());
    // GetQueueUrl can look into another account.
    let found = bob
        .get_queue_url()
        .queue_name("shared-name")
        .queue_owner_aws_account_id("111111111111")
        .send()
        .await
        .unwrap();
    assert_eq!(found.queue_url(), Some(alice_url.as_str()));
    // A key that is not 12 digits uses the default account.
    let plain = sdk_for(&server.endpoint(), "us-east-1");
    let err = plain
        .get_queue_url()
        .queue_name("shared-name")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(err.is_queue_does_not_exist());
}

#[tokio::test]
async fn region_host_urls_keep_regions_apart() {
    let config = Config {
        url_style: UrlStyle::RegionHost,
        ..Config::default()
    };
    let server = start_with(config).await;
    let east = sdk_for(&server.endpoint(), "us-east-1");
    let west = sdk_for(&server.endpoint(), "eu-west-1");
    let port = server.local_addr().port();
    let e = create(&east, "q").await;
    let w = create(&west, "q").await;
    assert_eq!(
        e,
        format!("http://sqs.us-east-1.localhost:{port}/000000000000/q")
    );
    assert_eq!(
        w,
        format!("http://sqs.eu-west-1.localhost:{port}/000000000000/q")
    );
    // The URL alone picks the queue, whatever region the client is in.
    common::send(&east, &w, "to the west").await;
    let got = west.receive_message().queue_url(&w).send().await.unwrap();
    assert_eq!(got.messages()[0].body(), Some("to the west"));
    assert!(common::receives_nothing(&east, &e).await);
}
