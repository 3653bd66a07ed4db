// The Rust example of docs/testing.md ("Rust, in-process"): sqsim in-process, one server per
// test, time moved by the test.
use std::time::Duration;

use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};

#[tokio::test]
async fn a_message_comes_back_after_its_visibility_timeout() {
    let server = sqsim::Server::builder().start().await.unwrap(); // 127.0.0.1, a free port
    let conf = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(server.endpoint())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "static"))
        .build();
    let sqs = aws_sdk_sqs::Client::from_conf(conf);

    let url = sqs
        .create_queue()
        .queue_name("jobs")
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    sqs.send_message()
        .queue_url(&url)
        .message_body("hello")
        .send()
        .await
        .unwrap();
    let first = sqs
        .receive_message()
        .queue_url(&url)
        .visibility_timeout(60)
        .send()
        .await
        .unwrap();
    assert!(sqs
        .receive_message()
        .queue_url(&url)
        .send()
        .await
        .unwrap()
        .messages
        .is_none());

    server.advance_clock(Duration::from_secs(60)); // no sleep

    let again = sqs.receive_message().queue_url(&url).send().await.unwrap();
    assert_eq!(
        again.messages()[0].message_id(),
        first.messages()[0].message_id()
    );
    server.shutdown().await;
}
