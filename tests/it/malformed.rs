//! Truncated, garbled and mistyped requests to both decoders: every one must get a well-formed
//! SQS error (or success), never a 5xx, a hang or a dropped connection, and the server must
//! keep serving afterwards.

use crate::common;

use common::{json, raw, raw_url, start};
use serde_json::json;
use sqsim::Server;

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
    "RemovePermission",
    "ListDeadLetterSourceQueues",
    "StartMessageMoveTask",
    "CancelMessageMoveTask",
    "ListMessageMoveTasks",
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
    "SourceArn",
    "DestinationArn",
    "TaskHandle",
    "MaxNumberOfMessagesPerSecond",
    "Label",
    "AWSAccountId.1",
    "ActionName.1",
    "AWSAccountIds",
    "Actions",
    "MessageSystemAttributeName.1",
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
    "arn:aws:sqs:us-east-1:000000000000:q-dlq",
    "arn:aws:sqs:us-east-1:000000000000:q",
    "eyJzb3VyY2VBcm4iOiJ4In0=",
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
    "\"arn:aws:sqs:us-east-1:000000000000:q-dlq\"",
    "\"eyJzb3VyY2VBcm4iOiJ4In0=\"",
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

/// One generated request.
struct Garbage {
    method: &'static str,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Answered by sqsim's own endpoints (plain JSON, no SQS request id).
    admin: bool,
    /// The action it names, if any.
    action: &'static str,
}

impl Garbage {
    fn sqs(method: &'static str, path: String, headers: &[(&str, &str)], body: Vec<u8>) -> Self {
        Garbage {
            method,
            path,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body,
            admin: false,
            action: "",
        }
    }

    fn form(body: String, accept: Option<&str>) -> Self {
        let mut g = Garbage::sqs(
            "POST",
            "/".into(),
            &[("Content-Type", "application/x-www-form-urlencoded")],
            body.into_bytes(),
        );
        g.accept(accept);
        g
    }

    fn json(action: &str, body: String) -> Self {
        Garbage::sqs(
            "POST",
            "/".into(),
            &[
                ("Content-Type", "application/x-amz-json-1.0"),
                ("X-Amz-Target", &format!("AmazonSQS.{action}")),
            ],
            body.into_bytes(),
        )
    }

    fn accept(&mut self, accept: Option<&str>) {
        if let Some(a) = accept {
            self.headers.push(("Accept".into(), a.into()));
        }
    }

    async fn send(&self, server: &Server) -> common::RawResponse {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        raw(server, self.method, &self.path, &headers, &self.body).await
    }
}

/// What a query request may ask its reply to be rendered as: XML (no header, or one that
/// does not take JSON) or the JSON rendering of query replies.
const ACCEPTS: &[Option<&str>] = &[
    None,
    Some("application/json"),
    Some("application/json"),
    Some("*/*"),
    Some("text/xml, application/json;q=0.5"),
    Some("application/json;;;q=x"),
];

/// A random JSON value for a garbage member: a plain one, a deep one or an extreme number.
fn json_value(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => {
            let depth = 1 + rng.below(5000);
            format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
        }
        1 => rng.pick(EXTREME_NUMBERS).to_string(),
        _ => rng.pick(JSON_VALUES).to_string(),
    }
}

/// A garbage query string for `GET /_sqsim/peek`.
fn peek_query(rng: &mut Rng, q: &str) -> String {
    let mut pairs = Vec::new();
    if rng.below(2) == 0 {
        pairs.push(format!("queue_url={}", urlencode(q)));
    }
    for _ in 0..rng.below(4) {
        let key = rng.pick(&[
            "queue_url",
            "offset",
            "limit",
            "region",
            "x",
            "",
            "queue_url",
        ]);
        let value = match rng.below(4) {
            0 => urlencode(q),
            1 => rng.pick(EXTREME_NUMBERS).to_string(),
            2 => urlencode(rng.pick(VALUES)),
            _ => rng
                .pick(&["%", "%zz", "%FF%FE", "==", "a%00b", "-1", "%2E%2E%2F", "[]"])
                .to_string(),
        };
        pairs.push(format!("{key}={value}"));
    }
    if rng.below(4) == 0 {
        let depth = 1 + rng.below(3000);
        pairs.push(format!("{}x=1", "a.".repeat(depth)));
    }
    pairs.join(rng.pick(&["&", "&&", ";"]))
}

/// The `round`th garbage request (a deterministic mix of every kind).
fn garbage(rng: &mut Rng, round: usize, q: &str) -> Garbage {
    let action = rng.pick(ACTIONS);
    let mut g = garbage_for(rng, round, q, action);
    g.action = action;
    g
}

fn garbage_for(rng: &mut Rng, round: usize, q: &str, action: &'static str) -> Garbage {
    match round % 12 {
        5 => {
            // Deep keys, named or numeric, by POST or GET.
            let segment = rng.pick(&["a", "1", "Attribute", "99999999999", ""]);
            let depth = 1 + rng.below(5000);
            let key = format!("{segment}.").repeat(depth);
            let form = format!("Action={action}&{key}x={}", urlencode(rng.pick(VALUES)));
            let accept = rng.pick(ACCEPTS);
            if rng.below(2) == 0 {
                let mut g = Garbage::sqs("GET", format!("/?{form}"), &[], Vec::new());
                g.accept(accept);
                g
            } else {
                Garbage::form(form, accept)
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
            Garbage::json(action, body)
        }
        7 => {
            // Extreme numbers in every numeric member, in both protocols.
            let member = rng.pick(NUMERIC_MEMBERS);
            let number = rng.pick(EXTREME_NUMBERS);
            if rng.below(2) == 0 {
                let body = format!("{{\"QueueUrl\":\"{q}\",\"{member}\":{number}}}");
                Garbage::json(action, body)
            } else {
                let form = format!(
                    "Action={action}&QueueUrl={}&{member}={}&Attribute.1.Name={member}&Attribute.1.Value={}",
                    urlencode(q),
                    urlencode(number),
                    urlencode(number)
                );
                Garbage::form(form, rng.pick(ACCEPTS))
            }
        }
        8 => {
            // The admin API with extreme numbers, deep nesting and garbage.
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
                    let bytes: Vec<u8> = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
                    (
                        "/_sqsim/faults",
                        String::from_utf8_lossy(&bytes).into_owned(),
                    )
                }
            };
            let mut g = Garbage::sqs("POST", path.into(), &[], body.into_bytes());
            g.admin = true;
            g
        }
        9 => {
            // The admin API's peek with garbage query strings.
            let mut g = Garbage::sqs(
                "GET",
                format!("/_sqsim/peek?{}", peek_query(rng, q)),
                &[],
                Vec::new(),
            );
            g.admin = true;
            g
        }
        10 => {
            // The console's action endpoint: any action name, garbage namespace, garbage body.
            let name = if rng.below(4) == 0 {
                rng.pick(&[
                    "",
                    "%00",
                    "..%2F..",
                    "a/b",
                    "CreateQueue/x",
                    "X".repeat(300).leak(),
                ])
            } else {
                action
            };
            let body = match rng.below(3) {
                0 => {
                    let members: Vec<String> = (0..rng.below(6))
                        .map(|_| {
                            let key = rng.pick(KEYS).split('.').next().unwrap_or("x");
                            format!("\"{key}\":{}", json_value(rng))
                        })
                        .collect();
                    format!("{{{}}}", members.join(",")).into_bytes()
                }
                1 => format!("{{\"QueueUrl\":\"{q}\",\"QueueName\":{}}}", json_value(rng))
                    .into_bytes(),
                _ => (0..rng.below(300)).map(|_| rng.next() as u8).collect(),
            };
            let query = format!(
                "account={}&region={}",
                urlencode(rng.pick(&["000000000000", "x", "", "9999999999999999999999"])),
                urlencode(rng.pick(&["us-east-1", "", "é", "../.."]))
            );
            let mut g = Garbage::sqs(
                "POST",
                format!("/_sqsim/console/sqs/{name}?{query}"),
                &[("Content-Type", "application/json")],
                body,
            );
            g.admin = true;
            g
        }
        11 => {
            // Well-formed query requests on the live queue, rendered as JSON (or by a
            // `ContentType=JSON` parameter), so that success replies are rendered too.
            let mut body = format!(
                "Action={action}&Version=2012-11-05&QueueUrl={}",
                urlencode(q)
            );
            for _ in 0..rng.below(5).saturating_sub(2) {
                body.push_str(&format!(
                    "&{}={}",
                    rng.pick(KEYS),
                    urlencode(rng.pick(VALUES))
                ));
            }
            if rng.below(3) == 0 {
                body.push_str("&ContentType=JSON");
                Garbage::form(body, None)
            } else {
                Garbage::form(body, Some("application/json"))
            }
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
            let body = if round.is_multiple_of(3) {
                body[..cut].to_string()
            } else {
                body
            };
            Garbage::form(body, rng.pick(ACCEPTS))
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
            Garbage::json(action, body)
        }
        2 => {
            // Random bytes to either decoder.
            let bytes: Vec<u8> = (0..rng.below(300)).map(|_| rng.next() as u8).collect();
            let headers: &[(&str, &str)] = if rng.below(2) == 0 {
                &[
                    ("Content-Type", "application/x-amz-json-1.0"),
                    ("X-Amz-Target", "AmazonSQS.SendMessage"),
                ]
            } else {
                &[("Content-Type", "application/x-www-form-urlencoded")]
            };
            let mut g = Garbage::sqs("POST", "/".into(), headers, bytes);
            if g.headers.len() == 1 {
                g.accept(rng.pick(ACCEPTS));
            }
            g
        }
        3 => {
            // Query GET to random paths.
            let path = format!(
                "/{}?Action={action}&{}={}",
                rng.pick(&["", "000000000000/q", "a/b/c", "000000000000/missing"]),
                rng.pick(KEYS),
                urlencode(rng.pick(VALUES))
            );
            let mut g = Garbage::sqs("GET", path, &[], Vec::new());
            g.accept(rng.pick(ACCEPTS));
            g
        }
        _ => {
            // Odd targets and content types.
            let target = rng.pick(&[
                "AmazonSQS.",
                "AmazonSQS",
                "Other.SendMessage",
                "AmazonSQS.SendMessage",
            ]);
            Garbage::sqs(
                "POST",
                "/".into(),
                &[("X-Amz-Target", target), ("Content-Type", "text/plain")],
                b"{}".to_vec(),
            )
        }
    }
}

/// Asserts an answer is a well-formed 2xx or 4xx in the shape its content type says.
fn check_answer(what: &str, g: &Garbage, r: &common::RawResponse) {
    assert!(
        r.status < 500,
        "{what}: {} {}: status {} body {}",
        g.method,
        &g.path[..g.path.len().min(120)],
        r.status,
        &r.body[..r.body.len().min(500)]
    );
    assert!(
        g.admin || r.header("x-amzn-requestid").is_some(),
        "{what}: {} {}",
        r.status,
        r.body
    );
    assert!(!r.body.is_empty(), "{what}: empty body");
    match r.header("content-type").unwrap_or_default() {
        "application/json" | "application/x-amz-json-1.0" => {
            let parsed = serde_json::from_str::<serde_json::Value>(&r.body);
            assert!(parsed.is_ok(), "{what}: not JSON: {}", r.body);
        }
        "text/xml" => assert!(r.body.starts_with('<'), "{what}: not XML: {}", r.body),
        other => panic!("{what}: content type {other:?}: {}", r.body),
    }
}

/// Sets up a queue with a message, a dead-letter queue and a permission to act on.
async fn seed(server: &Server, sign: impl Fn(Garbage) -> Garbage) -> String {
    let q = raw_url("q");
    for (action, body) in [
        ("CreateQueue", json!({"QueueName": "q-dlq"})),
        (
            "CreateQueue",
            json!({"QueueName": "q", "Attributes": {"RedrivePolicy":
            "{\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:q-dlq\",\"maxReceiveCount\":3}"}}),
        ),
        (
            "SendMessage",
            json!({"QueueUrl": q, "MessageBody": "keep me"}),
        ),
        (
            "AddPermission",
            json!({"QueueUrl": q, "Label": "l", "AWSAccountIds": ["111122223333"], "Actions": ["SendMessage"]}),
        ),
    ] {
        let r = sign(Garbage::json(action, body.to_string()))
            .send(server)
            .await;
        assert_eq!(r.status, 200, "{action}: {}", r.body);
    }
    q
}

/// Sets the queue up again if the garbage deleted it (after the 60 seconds AWS makes a
/// deleted queue's name wait), so that later rounds act on a live queue.
async fn reseed_if_deleted(server: &Server, g: &Garbage, sign: impl Fn(Garbage) -> Garbage) {
    if g.action != "DeleteQueue" {
        return;
    }
    let get = Garbage::json("GetQueueUrl", json!({"QueueName": "q"}).to_string());
    if sign(get).send(server).await.status == 200 {
        return;
    }
    let r = raw(
        server,
        "POST",
        "/_sqsim/clock",
        &[],
        br#"{"advance_seconds": 61}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    seed(server, sign).await;
}

#[tokio::test]
async fn garbage_never_breaks_the_server() {
    let server = start().await;
    let q = seed(&server, |g| g).await;
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    for round in 0..2700 {
        let g = garbage(&mut rng, round, &q);
        let r = g.send(&server).await;
        if g.admin && g.path.starts_with("/_sqsim/faults") {
            // Faults that did get added must not disturb the rest of the run.
            raw(&server, "DELETE", "/_sqsim/faults", &[], b"").await;
        }
        check_answer(&format!("round {round}"), &g, &r);
        reseed_if_deleted(&server, &g, |g| g).await;
    }

    let health = raw(&server, "GET", "/_sqsim/health", &[], b"").await;
    assert_eq!(health.status, 200);
    // Whatever the garbage did, well-formed requests still work.
    let r = json(&server, "CreateQueue", &json!({"QueueName": "after"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Signs a request as the SDKs do (SigV4 in headers); `None` when its path is no URI.
fn signed(g: &Garbage, key: &str, secret: &str) -> Option<Garbage> {
    use aws_sdk_sqs::config::Credentials;
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    use aws_sigv4::sign::v4;
    let identity = Credentials::new(key, secret, None, None, "test").into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("sqs")
        .time(std::time::SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .ok()?
        .into();
    let url = format!("http://sqsim.test{}", g.path);
    let mut headers = vec![("host".to_string(), "sqsim.test".to_string())];
    headers.extend(
        g.headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone())),
    );
    let signable = SignableRequest::new(
        g.method,
        &url,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(&g.body),
    )
    .ok()?;
    let (instructions, _) = sign(signable, &params).ok()?.into_parts();
    let mut out = Garbage {
        headers: g.headers.clone(),
        path: g.path.clone(),
        body: g.body.clone(),
        ..*g
    };
    for (k, v) in instructions.headers() {
        out.headers.push((k.to_string(), v.to_string()));
    }
    Some(out)
}

/// Garbles a signed request's `Authorization` header, or moves a garbled signature into
/// presigned query parameters.
fn garble_signature(rng: &mut Rng, g: &mut Garbage) {
    let Some(at) = g.headers.iter().position(|(k, _)| k == "authorization") else {
        return;
    };
    let auth = g.headers[at].1.clone();
    let long = "/".repeat(5000);
    let garbled = match rng.below(8) {
        0 => auth[..rng.below(auth.len() + 1)].to_string(),
        1 => auth.replace("Credential=", &format!("Credential={long}")),
        2 => auth.replace("SignedHeaders=", "SignedHeaders=;;;;x-nope;"),
        3 => auth.replace(',', ",,,,"),
        4 => auth.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA512"),
        5 => format!("{auth}, Signature={}", "f".repeat(3000)),
        6 => {
            // Presigned instead, with garbage values.
            g.headers.remove(at);
            let sep = if g.path.contains('?') { '&' } else { '?' };
            g.path.push_str(&format!(
                "{sep}X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={}\
                &X-Amz-Date={}&X-Amz-Expires={}&X-Amz-SignedHeaders={}&X-Amz-Signature={}",
                urlencode(rng.pick(&[
                    "AKID/20240101/us-east-1/sqs/aws4_request",
                    "",
                    "////",
                    "AKID"
                ])),
                rng.pick(&["20240101T000000Z", "", "99999999T999999Z", "x"]),
                rng.pick(EXTREME_NUMBERS),
                rng.pick(&["host", "", ";;", "host;x-amz-date"]),
                rng.pick(&["00", "", "zz", "0"]),
            ));
            return;
        }
        _ => {
            let bytes: Vec<u8> = (0..rng.below(100)).map(|_| rng.next() as u8).collect();
            String::from_utf8_lossy(&bytes)
                .chars()
                .filter(|c| c.is_ascii_graphic() || *c == ' ')
                .collect()
        }
    };
    g.headers[at].1 = garbled;
}

/// A server that checks SigV4, knowing one key: `AKID` with the secret `secret`.
async fn start_verifying() -> Server {
    use sqsim::config::{AuthMode, Credential};
    let keys = std::collections::HashMap::from([(
        "AKID".to_string(),
        Credential::parse("AKID:secret").unwrap(),
    )]);
    common::start_with(sqsim::Config {
        auth: AuthMode::Verify(keys),
        ..sqsim::Config::default()
    })
    .await
}

/// The same garbage against a server that checks SigV4: unsigned, correctly signed (so it
/// reaches the decoders), and with signatures garbled in headers and query strings.
#[tokio::test]
async fn garbage_never_breaks_a_verifying_server() {
    let server = start_verifying().await;
    let q = seed(&server, |g| signed(&g, "AKID", "secret").unwrap()).await;
    let mut rng = Rng(0x0bad_5eed_0000_0007);
    let mut reached = 0;
    for round in 0..900 {
        let mut g = garbage(&mut rng, round, &q);
        if !g.admin {
            match rng.below(3) {
                0 => {}
                1 => g = signed(&g, "AKID", "secret").unwrap_or(g),
                _ => {
                    g = signed(&g, rng.pick(&["AKID", "NOBODY"]), "secret").unwrap_or(g);
                    garble_signature(&mut rng, &mut g);
                }
            }
        }
        let r = g.send(&server).await;
        if g.admin && g.path.starts_with("/_sqsim/faults") {
            raw(&server, "DELETE", "/_sqsim/faults", &[], b"").await;
        }
        check_answer(&format!("signed round {round}"), &g, &r);
        reseed_if_deleted(&server, &g, |g| signed(&g, "AKID", "secret").unwrap()).await;
        if !g.admin && r.status != 403 {
            reached += 1;
        }
    }
    // Enough signed garbage got past the signature check to exercise the decoders behind it.
    assert!(
        reached > 100,
        "only {reached} requests passed the signature check"
    );
    let health = raw(&server, "GET", "/_sqsim/health", &[], b"").await;
    assert_eq!(health.status, 200);
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
    let server = start_verifying().await;
    let path = "/?Action=ListQueues&X-Amz-Algorithm=AWS4-HMAC-SHA256\
        &X-Amz-Credential=AKID%2F20240101%2Fus-east-1%2Fsqs%2Faws4_request\
        &X-Amz-Date=20240101T000000Z&X-Amz-Expires=18446744073709551615\
        &X-Amz-SignedHeaders=host&X-Amz-Signature=00";
    let r = raw(&server, "GET", path, &[], b"").await;
    assert!((400..500).contains(&r.status), "{} {}", r.status, r.body);
    let health = raw(&server, "GET", "/_sqsim/health", &[], b"").await;
    assert_eq!(health.status, 200);
}

/// Config files are parsed by `toml` (the server's file) and `serde_norway` (the worker's
/// `cron.yaml`): nesting 100,000 deep, in every form either format allows, gets a clean
/// error on a thread with a 2 MiB stack (sqsim reads its config on the 8 MiB main thread),
/// never a stack overflow.
#[test]
fn deeply_nested_config_files_are_refused_cleanly() {
    const DEPTH: usize = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let tomls = [
        (
            "arrays",
            format!(
                "[queues.q]\nattributes = {{ Policy = {}1{} }}\n",
                "[".repeat(DEPTH),
                "]".repeat(DEPTH)
            ),
        ),
        (
            "inline tables",
            format!(
                "[queues.q]\nattributes = {{ Policy = {}1{} }}\n",
                "{a=".repeat(DEPTH),
                "}".repeat(DEPTH)
            ),
        ),
        (
            "table header",
            format!("[queues.{}q]\nattributes = {{}}\n", "a.".repeat(DEPTH)),
        ),
        ("dotted key", format!("{}a = 1\n", "a.".repeat(DEPTH))),
    ];
    for (form, text) in tomls {
        let path = dir.path().join("deep.toml");
        std::fs::write(&path, text).unwrap();
        let path = path.to_str().unwrap().to_string();
        let err = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || sqsim::config_file::LoadedConfig::read(&path).err())
            .unwrap()
            .join()
            .expect("no panic")
            .unwrap_or_else(|| panic!("{form}: accepted"))
            .to_string();
        assert!(err.contains("recurs"), "{form}: {err}");
    }
    // YAML: libyaml's scanner takes time quadratic in the flow depth (100,000 levels: two
    // minutes in a debug build), so fewer levels on a 256 KiB stack show the same thing: the
    // parser does not recurse per level.
    const YAML_DEPTH: usize = 5_000;
    let yamls = [
        (
            "flow sequences",
            format!(
                "cron: {}1{}\n",
                "[".repeat(YAML_DEPTH),
                "]".repeat(YAML_DEPTH)
            ),
        ),
        (
            "flow mappings",
            format!(
                "cron: {}1{}\n",
                "{a: ".repeat(YAML_DEPTH),
                "}".repeat(YAML_DEPTH)
            ),
        ),
        (
            "block sequences",
            (0..2_000).fold(String::from("cron:\n"), |mut s, i| {
                s.push_str(&" ".repeat(i));
                s.push_str("- \n");
                s
            }),
        ),
    ];
    for (form, text) in yamls {
        let err = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || sqsim::worker::cron::parse(&text).err())
            .unwrap()
            .join()
            .expect("no panic")
            .unwrap_or_else(|| panic!("{form}: accepted"));
        assert!(err.contains("invalid type"), "{form}: {err}");
    }
}
