//! Truncated, garbled and mistyped requests to both decoders: every one must get a well-formed
//! SQS error (or success), never a 5xx, a hang or a dropped connection, and the server must
//! keep serving afterwards.

use crate::common;

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
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
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

/// Every member that is a number somewhere in SQS (or the admin API).
const NUMERIC_MEMBERS: &[&str] = &[
    "DelaySeconds",
    "MaxNumberOfMessages",
    "VisibilityTimeout",
    "WaitTimeSeconds",
    "MaxResults",
    "MaxNumberOfMessagesPerSecond",
    "MessageRetentionPeriod",
    "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds",
    "KmsDataKeyReusePeriodSeconds",
];

const EXTREME_NUMBERS: &[&str] = &[
    "1e20",
    "1e16",
    "1e308",
    "-1e308",
    "1e400",
    "-0",
    "0.5",
    "4294967296",
    "18446744073709551616",
    "-9223372036854775809",
    "9223372036854775807",
    "340282366920938463463374607431768211456",
    "NaN",
    "Infinity",
    "1e-400",
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
    for round in 0..2700 {
        let action = rng.pick(ACTIONS);
        // Admin endpoints answer plain JSON, without SQS's request id.
        let mut admin = false;
        let response = match round % 9 {
            5 => {
                // Deep keys, named or numeric, by POST or GET.
                let segment = rng.pick(&["a", "1", "Attribute", "99999999999", ""]);
                let depth = 1 + rng.below(5000);
                let key = format!("{segment}.").repeat(depth);
                let form = format!("Action={action}&{key}x={}", urlencode(rng.pick(VALUES)));
                if rng.below(2) == 0 {
                    raw(&server, "GET", &format!("/?{form}"), &[], b"").await
                } else {
                    raw(
                        &server,
                        "POST",
                        "/",
                        &[("Content-Type", "application/x-www-form-urlencoded")],
                        form.as_bytes(),
                    )
                    .await
                }
            }
            6 => {
                // Deep nesting: as the JSON body, as a member, or inside a policy document.
                let depth = 1 + rng.below(20_000);
                let (open, close) = rng.pick(&[("[", "]"), ("{\"a\":", "}")]);
                let nested = format!("{}1{}", open.repeat(depth), close.repeat(depth));
                let body = match rng.below(3) {
                    0 => nested,
                    1 => format!("{{\"{}\":{nested}}}", rng.pick(KEYS)),
                    _ => {
                        let doc = serde_json::to_string(&nested).unwrap();
                        format!(
                            "{{\"QueueUrl\":\"{q}\",\"Attributes\":{{\"{}\":{doc}}}}}",
                            rng.pick(&["Policy", "RedrivePolicy", "RedriveAllowPolicy"])
                        )
                    }
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
            7 => {
                // Extreme numbers in every numeric member, in both protocols.
                let member = rng.pick(NUMERIC_MEMBERS);
                let number = rng.pick(EXTREME_NUMBERS);
                if rng.below(2) == 0 {
                    let body = format!("{{\"QueueUrl\":\"{q}\",\"{member}\":{number}}}");
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
                } else {
                    let form = format!(
                        "Action={action}&QueueUrl={}&{member}={}&Attribute.1.Name={member}&Attribute.1.Value={}",
                        urlencode(&q),
                        urlencode(number),
                        urlencode(number)
                    );
                    raw(
                        &server,
                        "POST",
                        "/",
                        &[("Content-Type", "application/x-www-form-urlencoded")],
                        form.as_bytes(),
                    )
                    .await
                }
            }
            8 => {
                // The admin API with extreme numbers, deep nesting and garbage.
                admin = true;
                let number = rng.pick(EXTREME_NUMBERS);
                let depth = 1 + rng.below(20_000);
                let (path, body) = match rng.below(5) {
                    0 => ("/_sqsim/clock", format!("{{\"advance_seconds\":{number}}}")),
                    1 => (
                        "/_sqsim/faults",
                        format!(
                            "{{\"{}\":{number}}}",
                            rng.pick(&[
                                "latency_ms",
                                "count",
                                "probability",
                                "redeliver_probability"
                            ])
                        ),
                    ),
                    2 => (
                        "/_sqsim/clock",
                        format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
                    ),
                    3 => (
                        "/_sqsim/reset",
                        format!("{{\"queue_url\":{}}}", "[".repeat(depth)),
                    ),
                    _ => {
                        let bytes: Vec<u8> =
                            (0..rng.below(200)).map(|_| rng.next() as u8).collect();
                        (
                            "/_sqsim/faults",
                            String::from_utf8_lossy(&bytes).into_owned(),
                        )
                    }
                };
                let r = raw(&server, "POST", path, &[], body.as_bytes()).await;
                // Faults that did get added must not disturb the rest of the run.
                raw(&server, "DELETE", "/_sqsim/faults", &[], b"").await;
                r
            }
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
            admin || response.header("x-amzn-requestid").is_some(),
            "round {round}: {} {}",
            response.status,
            response.body
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

/// A body with no announced length (chunked) is cut off at the cap as it streams in.
#[tokio::test]
async fn oversized_chunked_body_is_refused_with_413() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = start().await;
    let mut stream = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let head =
        "POST / HTTP/1.1\r\nHost: sqsim.test\r\nContent-Type: application/x-amz-json-1.0\r\n\
        X-Amz-Target: AmazonSQS.SendMessage\r\nTransfer-Encoding: chunked\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, "a".repeat(64 * 1024));
    // 9 MiB against the 8 MiB cap; the server may answer and close before all of it is sent.
    for _ in 0..144 {
        if stream.write_all(chunk.as_bytes()).await.is_err() {
            break;
        }
    }
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut buf),
    )
    .await
    .expect("an answer in time");
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.starts_with("HTTP/1.1 413"),
        "{}",
        &text[..text.len().min(200)]
    );
    assert!(text.to_ascii_lowercase().contains("x-amzn-query-error"));
}

/// Issue 18's reproduction: keys with thousands of dot-separated segments once overflowed the
/// stack and aborted the process. Every form of it now gets a 4xx, and the server keeps
/// serving other clients while and after it is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_query_keys_get_a_4xx_and_the_server_survives() {
    let server = start().await;
    let client = common::sdk(&server);
    let url = common::create(&client, "survivor").await;
    common::send(&client, &url, "still here").await;

    let mut cases = 0;
    for segments in [3_000usize, 100_000] {
        for segment in ["a", "7"] {
            for action in ["ListQueues", "NoSuchAction"] {
                let key = format!("{}{segment}", format!("{segment}.").repeat(segments));
                let form = format!("Action={action}&{key}=x");
                // A neighbour keeps using the server while the hostile requests arrive.
                let neighbour = {
                    let client = client.clone();
                    tokio::spawn(async move { client.list_queues().send().await.is_ok() })
                };
                let post = raw(
                    &server,
                    "POST",
                    "/",
                    &[("Content-Type", "application/x-www-form-urlencoded")],
                    form.as_bytes(),
                )
                .await;
                assert!(
                    (400..500).contains(&post.status),
                    "POST {segments}×{segment} {action}: {} {}",
                    post.status,
                    post.body
                );
                let get = raw(&server, "GET", &format!("/?{form}"), &[], b"").await;
                assert!(
                    (400..500).contains(&get.status),
                    "GET {segments}×{segment} {action}: {}",
                    get.status
                );
                if segments == 3_000 {
                    // Within hyper's header limits the answer is AWS's error for a bad query.
                    for r in [&post, &get] {
                        assert_eq!(r.status, 404, "{}", r.body);
                        assert_eq!(r.xml_text("Code").as_deref(), Some("MalformedQueryString"));
                    }
                }
                assert!(neighbour.await.unwrap(), "a neighbour's request failed");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 8);
    let got = common::receive_msgs(&client, &url, 1, None).await;
    assert_eq!(got.len(), 1, "the queued message survived");
    assert_eq!(got[0].body(), Some("still here"));
}

/// Keys at the documented limits still work, and a key one segment deeper is refused.
#[tokio::test]
async fn query_key_limits_sit_far_above_what_sdks_send() {
    let server = start().await;
    json(&server, "CreateQueue", &json!({"QueueName": "lim"})).await;
    let q = raw_url("lim");
    let deep_ok = format!("{}=x", vec!["Unused"; 16].join("."));
    let r = common::query(&server, &[("Action", "GetQueueUrl"), ("QueueName", "lim")]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let body = format!("Action=GetQueueUrl&QueueName=lim&{deep_ok}");
    let r = raw(
        &server,
        "POST",
        "/",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let too_deep = format!(
        "Action=GetQueueUrl&QueueName=lim&{}=x",
        vec!["U"; 17].join(".")
    );
    let r = raw(
        &server,
        "POST",
        "/",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        too_deep.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.xml_text("Code").as_deref(), Some("MalformedQueryString"));
    // Too many pairs.
    let mut many = format!(
        "Action=SendMessage&QueueUrl={}&MessageBody=x",
        urlencode(&q)
    );
    for i in 0..10_001 {
        many.push_str(&format!("&Unused{i}=1"));
    }
    let r = raw(
        &server,
        "POST",
        "/",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        many.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.xml_text("Code").as_deref(), Some("MalformedQueryString"));
}

/// Extreme clock changes are refused with a 400 and leave the clock as it was.
#[tokio::test]
async fn extreme_clock_advances_are_refused_and_change_nothing() {
    let server = start().await;
    server.clock().freeze();
    let before = server.clock().now_ms();
    for body in [
        r#"{"advance_seconds": 1e20}"#,
        r#"{"advance_seconds": 1e16}"#,
        r#"{"advance_seconds": 1e300}"#,
        r#"{"advance_seconds": -1}"#,
        r#"{"advance_seconds": 1e16, "freeze": false}"#,
        r#"{"advance_seconds": 18446744073709551616}"#,
        r#"{"advance_seconds": "10"}"#,
    ] {
        let r = raw(&server, "POST", "/_sqsim/clock", &[], body.as_bytes()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(server.clock().now_ms(), before, "{body} moved the clock");
        assert!(server.clock().is_frozen(), "{body} unfroze the clock");
    }
    // A thousand years is allowed, and then the clock is near its last reading.
    let r = raw(
        &server,
        "POST",
        "/_sqsim/clock",
        &[],
        br#"{"advance_seconds": 31557600000}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(server.clock().now_ms(), before + 31_557_600_000_000);
    let r = raw(
        &server,
        "POST",
        "/_sqsim/clock",
        &[],
        br#"{"advance_seconds": 31557600000}"#,
    )
    .await;
    assert!(r.status == 200 || r.status == 400, "{}", r.body);
    // However often it is advanced, time never wraps round.
    for _ in 0..10 {
        raw(
            &server,
            "POST",
            "/_sqsim/clock",
            &[],
            br#"{"advance_seconds": 31557600000}"#,
        )
        .await;
    }
    let now = server.clock().now_ms();
    assert!(now >= before + 31_557_600_000_000, "clock went back: {now}");
    assert!(now <= sqsim::MAX_EPOCH_MS);
    // The server still works at the end of time.
    let r = json(&server, "CreateQueue", &json!({"QueueName": "late"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// A body announced as larger than the cap is refused at once, before any of it is sent.
#[tokio::test]
async fn oversize_content_length_gets_413_with_nothing_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = start().await;
    for (path, headers) in [
        (
            "/",
            "Content-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.SendMessage\r\n",
        ),
        ("/", "Content-Type: application/x-www-form-urlencoded\r\n"),
        ("/_sqsim/clock", ""),
    ] {
        let mut stream = tokio::net::TcpStream::connect(server.local_addr())
            .await
            .unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: sqsim.test\r\n{headers}Content-Length: 1000000000\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        // No body is sent: a server that tried to read it would never answer.
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("answered without waiting for the body")
            .unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(
            text.starts_with("HTTP/1.1 413"),
            "{path}: {}",
            text.lines().next().unwrap_or("")
        );
    }
    let r = json(&server, "ListQueues", &json!({})).await;
    assert_eq!(r.status, 200);
}

/// Presigned URLs with an absurd lifetime are refused instead of overflowing the time
/// arithmetic.
#[tokio::test]
async fn huge_presigned_expiry_is_refused() {
    use sqsim::config::{AuthMode, Credential};
    let keys = std::collections::HashMap::from([(
        "AKID".to_string(),
        Credential::parse("AKID:secret").unwrap(),
    )]);
    let server = common::start_with(sqsim::Config {
        auth: AuthMode::Verify(keys),
        ..sqsim::Config::default()
    })
    .await;
    let path = "/?Action=ListQueues&X-Amz-Algorithm=AWS4-HMAC-SHA256\
        &X-Amz-Credential=AKID%2F20240101%2Fus-east-1%2Fsqs%2Faws4_request\
        &X-Amz-Date=20240101T000000Z&X-Amz-Expires=18446744073709551615\
        &X-Amz-SignedHeaders=host&X-Amz-Signature=00";
    let r = raw(&server, "GET", path, &[], b"").await;
    assert!((400..500).contains(&r.status), "{} {}", r.status, r.body);
    let health = raw(&server, "GET", "/_sqsim/health", &[], b"").await;
    assert_eq!(health.status, 200);
}
