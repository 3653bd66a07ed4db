//! Truncated, garbled and mistyped requests to both decoders: every one must get a well-formed
//! SQS error (or success), never a 5xx, a hang or a dropped connection, and the server must
//! keep serving afterwards.

mod common;

use common::{json, raw, raw_url, start};
use serde_json::json;

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const ACTIONS: &[&str] = &[
    "CreateQueue",
    "GetQueueUrl",
    "ListQueues",
    "DeleteQueue",
    "GetQueueAttributes",
    "SetQueueAttributes",
    "SendMessage",
    "SendMessageBatch",
    "ReceiveMessage",
    "DeleteMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch",
    "PurgeQueue",
    "TagQueue",
    "UntagQueue",
    "ListQueueTags",
    "AddPermission",
    "Bogus",
];

const KEYS: &[&str] = &[
    "QueueUrl",
    "QueueName",
    "MessageBody",
    "DelaySeconds",
    "MaxNumberOfMessages",
    "WaitTimeSeconds",
    "VisibilityTimeout",
    "ReceiptHandle",
    "Attribute.1.Name",
    "Attribute.1.Value",
    "Attribute.x.Name",
    "AttributeName.1",
    "AttributeName.99999999999",
    "MessageAttribute.1.Name",
    "MessageAttribute.1.Value.DataType",
    "MessageAttribute.1.Value.StringValue",
    "MessageAttribute.1.Value.BinaryValue",
    "SendMessageBatchRequestEntry.1.Id",
    "SendMessageBatchRequestEntry.1.MessageBody",
    "SendMessageBatchRequestEntry.1",
    "DeleteMessageBatchRequestEntry.2.ReceiptHandle",
    "Tag.1.Key",
    "TagKey.1",
    "MaxResults",
    "NextToken",
    "..",
    ".1.",
    "Entries",
];

const VALUES: &[&str] = &[
    "",
    "x",
    "1",
    "-1",
    "99999999999999999999",
    "abc",
    "http://sqsim.test/000000000000/q",
    "q",
    "All",
    "String",
    "Binary",
    "Number",
    "!!!",
    "AQEBgarbage",
    "%",
    "\u{0}",
    "é",
    "=&=",
    "[]",
    "{}",
];

const JSON_VALUES: &[&str] = &[
    "null",
    "1",
    "-5",
    "1.5",
    "true",
    "\"x\"",
    "\"\"",
    "[]",
    "{}",
    "[1,2]",
    "{\"DataType\":\"String\"}",
    "{\"a\":{\"b\":[]}}",
    "\"http://sqsim.test/000000000000/q\"",
    "[{\"Id\":\"a\"}]",
    "[{\"Id\":\"a\",\"MessageBody\":\"b\"},{\"Id\":\"a\"}]",
    "18446744073709551616",
    "\"\\ud800\"",
];

#[tokio::test]
async fn garbage_never_breaks_the_server() {
    let server = start().await;
    let q = raw_url("q");
    json(&server, "CreateQueue", &json!({"QueueName": "q"})).await;
    json(
        &server,
        "SendMessage",
        &json!({"QueueUrl": q, "MessageBody": "keep me"}),
    )
    .await;

    let mut rng = Rng(0x5eed_1234_abcd_0042);
    for round in 0..1500 {
        let action = rng.pick(ACTIONS);
        let response = match round % 5 {
            0 => {
                // Random form pairs.
                let mut body = format!("Action={action}");
                for _ in 0..rng.below(8) {
                    body.push_str(&format!(
                        "&{}={}",
                        rng.pick(KEYS),
                        urlencode(rng.pick(VALUES))
                    ));
                }
                let cut = rng.below(body.len() + 1);
                let body = if round % 3 == 0 {
                    &body[..cut]
                } else {
                    &body[..]
                };
                raw(
                    &server,
                    "POST",
                    "/",
                    &[("Content-Type", "application/x-www-form-urlencoded")],
                    body.as_bytes(),
                )
                .await
            }
            1 => {
                // Random JSON members of random types, sometimes truncated.
                let mut members = Vec::new();
                for _ in 0..rng.below(6) {
                    let key = rng.pick(KEYS).split('.').next().unwrap_or("x");
                    members.push(format!("\"{key}\":{}", rng.pick(JSON_VALUES)));
                }
                let body = format!("{{{}}}", members.join(","));
                let body = if rng.below(3) == 0 {
                    body[..rng.below(body.len() + 1)].to_string()
                } else {
                    body
                };
                raw(
                    &server,
                    "POST",
                    "/",
                    &[
                        ("Content-Type", "application/x-amz-json-1.0"),
                        ("X-Amz-Target", &format!("AmazonSQS.{action}")),
                    ],
                    body.as_bytes(),
                )
                .await
            }
            2 => {
                // Random bytes to either decoder.
                let bytes: Vec<u8> = (0..rng.below(300)).map(|_| rng.next() as u8).collect();
                let headers: Vec<(&str, &str)> = if rng.below(2) == 0 {
                    vec![
                        ("Content-Type", "application/x-amz-json-1.0"),
                        ("X-Amz-Target", "AmazonSQS.SendMessage"),
                    ]
                } else {
                    vec![("Content-Type", "application/x-www-form-urlencoded")]
                };
                raw(&server, "POST", "/", &headers, &bytes).await
            }
            3 => {
                // Query GET to random paths.
                let path = format!(
                    "/{}?Action={action}&{}={}",
                    rng.pick(&["", "000000000000/q", "a/b/c", "000000000000/missing"]),
                    rng.pick(KEYS),
                    urlencode(rng.pick(VALUES))
                );
                raw(&server, "GET", &path, &[], b"").await
            }
            _ => {
                // Odd targets and content types.
                let target = rng.pick(&[
                    "AmazonSQS.",
                    "AmazonSQS",
                    "Other.SendMessage",
                    "AmazonSQS.SendMessage",
                ]);
                raw(
                    &server,
                    "POST",
                    "/",
                    &[("X-Amz-Target", target), ("Content-Type", "text/plain")],
                    b"{}",
                )
                .await
            }
        };
        assert!(
            response.status < 500,
            "round {round}: status {} body {}",
            response.status,
            response.body
        );
        assert!(
            response.header("x-amzn-requestid").is_some(),
            "round {round}"
        );
        assert!(!response.body.is_empty(), "round {round}: empty body");
    }

    let health = raw(&server, "GET", "/_sqsim/health", &[], b"").await;
    assert_eq!(health.status, 200);
    // Whatever the garbage did, well-formed requests still work.
    let r = json(&server, "CreateQueue", &json!({"QueueName": "after"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("k", s)]).unwrap()[2..].to_string()
}

#[tokio::test]
async fn oversized_body_is_refused_with_413() {
    let server = start().await;
    let body = vec![b'a'; 9 * 1024 * 1024];
    let r = raw(
        &server,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-amz-json-1.0"),
            ("X-Amz-Target", "AmazonSQS.SendMessage"),
        ],
        &body,
    )
    .await;
    assert_eq!(r.status, 413);
    assert!(r.header("x-amzn-query-error").is_some());
}
