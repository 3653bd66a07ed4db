//! Inputs for the fuzzer: real SDK requests from `fixtures/wire`, mutated with knowledge of
//! their structure (JSON members, query keys and their `.N.` segments, SQS headers, SigV4
//! fields, receipt handles and queue URLs) and without it (flipped, inserted and cut bytes).
//! Seeded, so a run is reproduced by its seed.

use serde_json::Value;
use sqsim::server::in_process::ACTIONS;

/// splitmix64: small, fast and good enough to pick mutations.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub(crate) fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A request as the fuzzer builds it.
#[derive(Debug, Clone)]
pub(crate) struct Input {
    pub(crate) method: Vec<u8>,
    pub(crate) uri: String,
    pub(crate) headers: Vec<(String, Vec<u8>)>,
    pub(crate) body: Vec<u8>,
}

/// Member names SQS inputs use, for keys the mutator adds.
const MEMBERS: &[&str] = &[
    "QueueUrl",
    "QueueName",
    "Attributes",
    "AttributeNames",
    "MessageBody",
    "DelaySeconds",
    "MessageAttributes",
    "MessageSystemAttributes",
    "MessageGroupId",
    "MessageDeduplicationId",
    "ReceiptHandle",
    "VisibilityTimeout",
    "WaitTimeSeconds",
    "MaxNumberOfMessages",
    "Entries",
    "Id",
    "Tags",
    "TagKeys",
    "tags",
    "Label",
    "AWSAccountIds",
    "Actions",
    "SourceArn",
    "DestinationArn",
    "MaxNumberOfMessagesPerSecond",
    "TaskHandle",
    "NextToken",
    "MaxResults",
    "QueueNamePrefix",
    "QueueOwnerAWSAccountId",
    "ReceiveRequestAttemptId",
    "MessageAttributeNames",
    "MessageSystemAttributeNames",
    "DataType",
    "StringValue",
    "BinaryValue",
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "Policy",
    "FifoQueue",
    "ContentBasedDeduplication",
    "Action",
    "Version",
];

/// Values that sit on the edges of what SQS accepts.
const VALUES: &[&str] = &[
    "", "0", "-1", "1", "10", "11", "43200", "43201", "900", "1209600", "20", "21",
    "262144", "99999999999999999999", "1e400", "-0", "NaN", "true", "false", "null",
    "String", "Number", "Binary", "String.x", "Number.1e5", "All", ".fifo", "a.fifo",
    "http://sqsim.test/000000000000/golden", "http://sqsim.test/000000000000/golden.fifo",
    "http://sqsim.test/000000000000/", "http://sqsim.test//x", "/000000000000/golden",
    "arn:aws:sqs:us-east-1:000000000000:golden", "arn:aws:sqs:::", "arn:aws:sqs:us-east-1:0:x",
    "{\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:golden\",\"maxReceiveCount\":\"1\"}",
    "{\"redrivePermission\":\"denyAll\"}", "{\"Statement\":[]}", "{", "[]",
    "AQEB", "AQEBxyz==", "%00", "\u{0}", "\u{1}", "\u{FFFF}", "\u{10FFFF}", "😀",
    "AWS4-HMAC-SHA256 Credential=AKIDGOLDEN/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=00",
    "AWS4-HMAC-SHA256 Credential=/, SignedHeaders=, Signature=",
    "20240101T000000Z", "99999999T999999Z",
];

const CONTENT_TYPES: &[&str] = &[
    "application/x-amz-json-1.0",
    "application/x-www-form-urlencoded",
    "application/x-www-form-urlencoded; charset=utf-8",
    "application/json",
    "text/plain",
    "",
    "application/x-amz-json-1.1",
    "multipart/form-data",
];

const HEADERS: &[&str] = &[
    "x-amz-target",
    "content-type",
    "accept",
    "authorization",
    "x-amz-date",
    "x-amz-content-sha256",
    "x-amz-security-token",
    "content-length",
    "host",
    "x-amzn-query-mode",
    "x-amzn-trace-id",
    "transfer-encoding",
];

/// Applies one to four mutations to `seed`. `handles` and `urls` are values seen in earlier
/// answers, so mutations also reach messages and queues that exist.
pub(crate) fn mutate(rng: &mut Rng, seed: &Input, corpus: &[Input], handles: &[String]) -> Input {
    let mut x = seed.clone();
    for _ in 0..1 + rng.below(4) {
        match rng.below(10) {
            0..=2 => json_body(rng, &mut x, handles),
            3..=4 => form(rng, &mut x, handles),
            5 => header(rng, &mut x),
            6 => bytes(rng, &mut x.body),
            7 => {
                // Splice: the head of this body and the tail of another's.
                let other = rng.pick(corpus);
                let cut = rng.below(x.body.len() + 1);
                let from = rng.below(other.body.len() + 1);
                x.body.truncate(cut);
                x.body.extend_from_slice(&other.body[from..]);
            }
            8 => path(rng, &mut x),
            _ => {
                // Another request's headers with this body.
                x.headers = rng.pick(corpus).headers.clone();
            }
        }
    }
    x
}

fn value(rng: &mut Rng, handles: &[String]) -> String {
    match rng.below(8) {
        0 if !handles.is_empty() => rng.pick(handles).clone(),
        1 => {
            let len = [0, 1, 80, 81, 256, 1025, 70_000][rng.below(7)];
            let c = *rng.pick(&['a', 'é', '😀', '\u{7f}', '.', '%']);
            std::iter::repeat_n(c, len).collect()
        }
        2 => (rng.next() as i64).to_string(),
        _ => rng.pick(VALUES).to_string(),
    }
}

fn random_json(rng: &mut Rng, handles: &[String], depth: usize) -> Value {
    match rng.below(if depth > 3 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(2)),
        2 => serde_json::json!(rng.next() as i64),
        3 => serde_json::json!((rng.next() as f64) / 7.0 * if rng.chance(2) { -1.0 } else { 1.0 }),
        4 => Value::String(value(rng, handles)),
        5 => Value::Array(
            (0..rng.below(12))
                .map(|_| random_json(rng, handles, depth + 1))
                .collect(),
        ),
        6 => {
            // Deep nesting, past any sane depth.
            let mut v = Value::Null;
            for _ in 0..[10, 200, 1000][rng.below(3)] {
                v = Value::Array(vec![v]);
            }
            v
        }
        _ => Value::Object(
            (0..rng.below(6))
                .map(|_| {
                    (
                        rng.pick(MEMBERS).to_string(),
                        random_json(rng, handles, depth + 1),
                    )
                })
                .collect(),
        ),
    }
}

/// A step into a JSON tree: a member name or an array index.
enum Step {
    Key(String),
    Index(usize),
}

/// A random node of a JSON tree (objects and arrays included), to replace or edit.
fn some_node<'a>(rng: &mut Rng, v: &'a mut Value) -> &'a mut Value {
    let mut path = Vec::new();
    let mut at: &Value = v;
    loop {
        let stop = rng.chance(3);
        match at {
            Value::Object(m) if !m.is_empty() && !stop => {
                let (k, child) = m.iter().nth(rng.below(m.len())).expect("in range");
                path.push(Step::Key(k.clone()));
                at = child;
            }
            Value::Array(a) if !a.is_empty() && !stop => {
                let i = rng.below(a.len());
                path.push(Step::Index(i));
                at = &a[i];
            }
            _ => break,
        }
    }
    let mut node = v;
    for step in path {
        node = match (node, step) {
            (Value::Object(m), Step::Key(k)) => m.get_mut(&k).expect("walked"),
            (Value::Array(a), Step::Index(i)) => &mut a[i],
            (other, _) => other,
        };
    }
    node
}

fn json_body(rng: &mut Rng, x: &mut Input, handles: &[String]) {
    let Ok(mut v) = serde_json::from_slice::<Value>(&x.body) else {
        return bytes(rng, &mut x.body);
    };
    let node = some_node(rng, &mut v);
    match rng.below(5) {
        0 => *node = random_json(rng, handles, 0),
        1 => {
            if let Value::Object(m) = node {
                let k = rng.pick(MEMBERS).to_string();
                m.insert(k, random_json(rng, handles, 0));
            } else {
                *node = Value::String(value(rng, handles));
            }
        }
        2 => {
            if let Value::Object(m) = node {
                if let Some(k) = m.keys().next().cloned() {
                    m.remove(&k);
                }
            }
        }
        3 => {
            // Grow a list (batch entries past 10, attribute names…).
            if let Value::Array(a) = node {
                if let Some(first) = a.first().cloned() {
                    for _ in 0..rng.below(30) {
                        a.push(first.clone());
                    }
                }
            }
        }
        _ => *node = Value::String(value(rng, handles)),
    }
    x.body = serde_json::to_vec(&v).unwrap_or_default();
}

/// Percent-encodes what a form value must not hold raw.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn form(rng: &mut Rng, x: &mut Input, handles: &[String]) {
    // The form lives in the body (POST) or the URI's query (GET).
    let in_uri = x.method == b"GET" || rng.chance(4);
    let (path, query) = match x.uri.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (x.uri.clone(), String::new()),
    };
    let text = if in_uri {
        query
    } else {
        String::from_utf8_lossy(&x.body).into_owned()
    };
    let mut pairs: Vec<(String, String)> = text
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    match rng.below(7) {
        0 if !pairs.is_empty() => {
            let i = rng.below(pairs.len());
            pairs[i].1 = encode(&value(rng, handles));
        }
        1 if !pairs.is_empty() => {
            // Index and segment edits: `.1` → `.0`, `.11`, `.99999999999999999999`, deep keys.
            let i = rng.below(pairs.len());
            let suffix = *rng.pick(&[
                ".0",
                ".11",
                ".99999999999999999999",
                ".-1",
                ".member",
                ".1.Name",
                ".Name",
                ".Value.StringValue",
                "..",
                ".",
            ]);
            if rng.chance(5) {
                pairs[i].0 =
                    std::iter::repeat_n("a.", 1 + rng.below(4000)).collect::<String>() + "a";
            } else {
                pairs[i].0.push_str(suffix);
            }
        }
        2 if !pairs.is_empty() => {
            let i = rng.below(pairs.len());
            pairs.remove(i);
        }
        3 if !pairs.is_empty() => {
            let p = pairs[rng.below(pairs.len())].clone();
            for _ in 0..1 + rng.below(3) {
                pairs.push(p.clone());
            }
        }
        4 => pairs.push(("Action".into(), rng.pick(ACTIONS).to_string())),
        5 => {
            // Presigned SigV4 fields.
            for k in [
                "X-Amz-Algorithm",
                "X-Amz-Credential",
                "X-Amz-Date",
                "X-Amz-SignedHeaders",
                "X-Amz-Signature",
                "X-Amz-Expires",
            ] {
                if rng.chance(2) {
                    pairs.push((k.into(), encode(&value(rng, handles))));
                }
            }
        }
        _ => pairs.push((rng.pick(MEMBERS).to_string(), encode(&value(rng, handles)))),
    }
    let text = pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    if in_uri {
        x.uri = if text.is_empty() {
            path
        } else {
            format!("{path}?{text}")
        };
    } else {
        x.body = text.into_bytes();
    }
}

fn header(rng: &mut Rng, x: &mut Input) {
    let name = rng.pick(HEADERS).to_string();
    let v: Vec<u8> = match name.as_str() {
        "x-amz-target" => match rng.below(3) {
            0 => format!("AmazonSQS.{}", rng.pick(ACTIONS)).into_bytes(),
            1 => rng.pick(ACTIONS).as_bytes().to_vec(),
            _ => rng.pick(VALUES).as_bytes().to_vec(),
        },
        "content-type" => rng.pick(CONTENT_TYPES).as_bytes().to_vec(),
        "content-length" => rng
            .pick(&["0", "1", "99999999999", "-1", "x"])
            .as_bytes()
            .to_vec(),
        _ => rng.pick(VALUES).as_bytes().to_vec(),
    };
    x.headers
        .retain(|(k, _)| !k.eq_ignore_ascii_case(&name) || rng.chance(3));
    x.headers.push((name, v));
}

fn bytes(rng: &mut Rng, body: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(8) {
        match rng.below(4) {
            0 if !body.is_empty() => {
                let i = rng.below(body.len());
                body[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(body.len() + 1);
                body.insert(i, rng.next() as u8);
            }
            2 if !body.is_empty() => {
                let i = rng.below(body.len());
                body.truncate(i);
            }
            _ => {
                let i = rng.below(body.len() + 1);
                let b = *rng.pick(b"{}[]\",:\\&=%.\0");
                body.insert(i, b);
            }
        }
    }
}

fn path(rng: &mut Rng, x: &mut Input) {
    let query = x
        .uri
        .split_once('?')
        .map(|(_, q)| format!("?{q}"))
        .unwrap_or_default();
    let p = match rng.below(6) {
        0 => "/".to_string(),
        1 => "/000000000000/golden".to_string(),
        2 => "/000000000000/golden.fifo".to_string(),
        3 => format!(
            "/{}/{}",
            rng.next() % 1_000_000_000_000,
            "x".repeat(rng.below(90))
        ),
        4 => "/a/b/c/d".to_string(),
        _ => "/%2e%2e/%00".to_string(),
    };
    x.uri = p + &query;
    if rng.chance(4) {
        x.method = rng
            .pick(&[&b"GET"[..], b"POST", b"PUT", b"DELETE", b"HEAD"])
            .to_vec();
    }
}
