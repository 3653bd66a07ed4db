//! The load scenarios. Each runs for a bounded time over keep-alive connections and reports
//! messages per second and, where bodies carry send times, send→receive latency.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::client::{fields, Api, Conn, Proto};
use crate::rng::Rng;

/// Bytes per message body, as in the scenarios.
pub(crate) const BODY_BYTES: usize = 256;

static EPOCH: OnceLock<Instant> = OnceLock::new();

fn now_us() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}

static SERIAL: AtomicU64 = AtomicU64::new(0);

/// What the bodies after their send time and serial number hold (`--bodies`): how much a
/// store that compresses (cluster mode's log) can save depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Bodies {
    /// `x` repeated: the scenario as it has always been measured (compresses to
    /// almost nothing).
    Padded,
    /// Random letters and digits: nothing for a compressor to find.
    Random,
    /// A JSON event of random ids and amounts, the same fields in every message.
    Json,
}

static BODIES: OnceLock<Bodies> = OnceLock::new();

/// Sets what [`body`] returns from now on (once, before any scenario runs).
pub(crate) fn set_bodies(kind: Bodies) {
    BODIES.set(kind).expect("bodies are chosen once");
}

/// A 256-byte body that starts with its send time; a serial number keeps bodies distinct, so
/// content-based deduplication on FIFO queues drops none of them.
pub(crate) fn body() -> String {
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    let mut b = format!("{:020}-{:012}-", now_us(), serial);
    match BODIES.get().copied().unwrap_or(Bodies::Padded) {
        Bodies::Padded => b.push_str(&"x".repeat(BODY_BYTES - b.len())),
        Bodies::Random => {
            let mut rng = Rng::new(serial, 0);
            while b.len() < BODY_BYTES {
                b.push(alnum(&mut rng));
            }
        }
        Bodies::Json => {
            let mut rng = Rng::new(serial, 0);
            let id = format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64());
            b.push_str(&format!(
                "{{\"type\":\"order.created\",\"order_id\":\"{id}\",\"customer\":\"c-{}\",\
                 \"amount\":{}.{:02},\"currency\":\"EUR\",\"items\":[{{\"sku\":\"SKU-{}\",\"qty\":{}}}],\
                 \"ref\":\"",
                rng.next_u64() % 1_000_000,
                rng.next_u64() % 10_000,
                rng.next_u64() % 100,
                rng.next_u64() % 100_000,
                1 + rng.next_u64() % 9,
            ));
            while b.len() < BODY_BYTES - 2 {
                b.push(alnum(&mut rng));
            }
            b.push_str("\"}");
        }
    }
    b
}

/// A random letter or digit: nothing for a compressor to find in a run of them.
fn alnum(rng: &mut Rng) -> char {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    CHARS[(rng.next_u64() % CHARS.len() as u64) as usize] as char
}

fn sent_at(body: &str) -> Option<u64> {
    body.get(..20)?.parse().ok()
}

/// Send→receive latencies (µs) of the messages in a ReceiveMessage reply received at `got`.
fn latencies(reply: &[u8], proto: Proto, got: u64) -> Vec<u64> {
    fields(reply, "Body", proto)
        .iter()
        .filter_map(|b| sent_at(b))
        .map(|s| got.saturating_sub(s))
        .collect()
}

/// One measured result.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Outcome {
    pub scenario: String,
    pub protocol: &'static str,
    pub target: String,
    pub messages_per_s: f64,
    pub requests_per_s: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub note: String,
}

/// Where to send load.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub name: String,
    pub addr: String,
}

fn percentile(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    Some(sorted[i] as f64 / 1000.0)
}

async fn connect(t: &Target) -> Conn {
    Conn::connect(&t.addr)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {} at {}: {e}", t.name, t.addr))
}

/// Creates a queue and returns its URL. Names get this run's suffix: a server that outlives
/// the run (`--endpoint`) refuses a deleted queue's name for 60 s, as SQS does, and a
/// scenario may run more than once.
pub(crate) async fn create_queue(t: &Target, proto: Proto, name: &str, fifo: bool) -> String {
    static RUN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static CREATED: AtomicU64 = AtomicU64::new(0);
    let run = RUN.get_or_init(|| format!("{}-{}", std::process::id(), now_us() % 1_000_000));
    let run = format!("{run}-{}", CREATED.fetch_add(1, Ordering::Relaxed));
    let name = match name.strip_suffix(".fifo") {
        Some(stem) => format!("{stem}-{run}.fifo"),
        None => format!("{name}-{run}"),
    };
    let name = name.as_str();
    let mut c = connect(t).await;
    let (status, body) = c
        .send(&Api(proto).create_queue(name, fifo))
        .await
        .expect("create queue");
    assert_eq!(
        status,
        200,
        "CreateQueue on {}: {}",
        t.name,
        String::from_utf8_lossy(&body)
    );
    fields(&body, "QueueUrl", proto)
        .pop()
        .expect("QueueUrl in reply")
}

/// Deletes a queue so what a scenario left behind does not weigh on the next one.
pub(crate) async fn delete_queue(t: &Target, proto: Proto, url: &str) {
    let mut c = connect(t).await;
    let _ = c.send(&Api(proto).delete_queue(url)).await;
}

fn batch(group: impl Fn(usize) -> Option<String>) -> Vec<(String, Option<String>)> {
    (0..10).map(|i| (body(), group(i))).collect()
}

/// Sends `n` messages in batches of ten over `conns` connections.
pub(crate) async fn prefill(t: &Target, proto: Proto, url: &str, n: usize, conns: usize) {
    let left = Arc::new(AtomicU64::new(n.div_ceil(10) as u64));
    let mut set = JoinSet::new();
    for _ in 0..conns {
        let (t, url, left) = (t.clone(), url.to_string(), Arc::clone(&left));
        set.spawn(async move {
            let mut c = connect(&t).await;
            let api = Api(proto);
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1))
                .is_ok()
            {
                let (s, b) = c
                    .send(&api.send_batch(&url, &batch(|_| None)))
                    .await
                    .expect("send");
                assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
            }
        });
    }
    while set.join_next().await.is_some() {}
}

/// Runs `work` on `conns` fresh connections until `dur` has passed, then stops them; returns
/// what they counted and the seconds it took.
async fn on_connections<F, Fut>(t: &Target, conns: usize, dur: Duration, work: F) -> (u64, f64)
where
    F: Fn(Conn, Arc<AtomicBool>, Arc<AtomicU64>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut set = JoinSet::new();
    for _ in 0..conns {
        let job = work(connect(t).await, stop.clone(), count.clone());
        set.spawn(job);
    }
    let start = Instant::now();
    tokio::time::sleep(dur).await;
    stop.store(true, Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    while set.join_next().await.is_some() {}
    (count.load(Ordering::Relaxed), secs)
}

/// `send`: SendMessageBatch of 10 × 256 B on `conns` connections, spread over `queues`
/// queues named `<prefix>-send-…` (more than one spreads a cluster's shards over its
/// nodes; load generators run side by side take a prefix each).
pub(crate) async fn send(
    t: &Target,
    proto: Proto,
    conns: usize,
    dur: Duration,
    queues: usize,
    prefix: &str,
) -> Outcome {
    let mut urls = Vec::new();
    for i in 0..queues.max(1) {
        let name = match queues {
            0 | 1 => format!("{prefix}-send-{}", proto.name()),
            _ => format!("{prefix}-send-{}-{i}", proto.name()),
        };
        urls.push(create_queue(t, proto, &name, false).await);
    }
    // One prebuilt request per connection, sent again and again: the generator's own
    // encoding work stays out of the measurement (bodies need not differ on a standard
    // queue). Each connection has its own, so requests in flight together never carry the
    // same bodies: a store that compresses what it writes together (cluster mode's log)
    // finds in them only what `--bodies` puts there.
    let calls: Arc<Vec<_>> = Arc::new(
        (0..conns)
            .map(|i| Api(proto).send_batch(&urls[i % urls.len()], &batch(|_| None)))
            .collect(),
    );
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (reqs, secs) = on_connections(t, conns, dur, move |mut c, stop, requests| {
        let call = calls[next.fetch_add(1, Ordering::Relaxed) % calls.len()].clone();
        async move {
            while !stop.load(Ordering::Relaxed) {
                let (s, _) = c.send(&call).await.expect("send");
                assert_eq!(s, 200);
                requests.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await;
    for url in &urls {
        delete_queue(t, proto, url).await;
    }
    Outcome {
        scenario: "send".into(),
        protocol: proto.name(),
        target: t.name.clone(),
        messages_per_s: reqs as f64 * 10.0 / secs,
        requests_per_s: reqs as f64 / secs,
        p50_ms: None,
        p99_ms: None,
        note: format!("{conns} connections over {} queue(s), SendMessageBatch 10 x {BODY_BYTES} B (one prebuilt request per connection)", urls.len()),
    }
}

/// The median of several runs of one configuration.
pub(crate) fn median_of(mut runs: Vec<Outcome>) -> Option<Outcome> {
    runs.sort_by(|a, b| a.messages_per_s.total_cmp(&b.messages_per_s));
    let n = runs.len();
    let mut median = runs.into_iter().nth(n / 2)?;
    median.note = format!("median of {n}; {}", median.note);
    Some(median)
}

/// The fastest of several configurations of one scenario, its note listing every rate.
pub(crate) fn best_of(tries: Vec<Outcome>) -> Option<Outcome> {
    let rates: Vec<String> = tries
        .iter()
        .map(|o| format!("{:.0}", o.messages_per_s))
        .collect();
    let mut best = tries
        .into_iter()
        .max_by(|a, b| a.messages_per_s.total_cmp(&b.messages_per_s))?;
    best.note = format!("best of runs at {} msg/s: {}", rates.join(", "), best.note);
    Some(best)
}

/// `cycle`: `conns` consumers ReceiveMessage(10, long poll) and DeleteMessageBatch while half
/// as many producers SendMessageBatch. `groups` > 0 sends to a FIFO queue with that many
/// message groups.
pub(crate) async fn cycle(
    t: &Target,
    proto: Proto,
    url: &str,
    conns: usize,
    dur: Duration,
    groups: usize,
    label: &str,
) -> Outcome {
    let (producers, consumers) = ((conns / 2).max(1), conns);
    let stop = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let consumed = Arc::new(AtomicU64::new(0));
    let mut producers_set = JoinSet::new();
    for p in 0..producers {
        let (t, url, stop, requests) = (t.clone(), url.to_string(), stop.clone(), requests.clone());
        producers_set.spawn(async move {
            let mut c = connect(&t).await;
            let api = Api(proto);
            let mut n = p;
            while !stop.load(Ordering::Relaxed) {
                let call = api.send_batch(
                    &url,
                    &batch(|i| (groups > 0).then(|| format!("g{}", (n * 10 + i) % groups))),
                );
                n += producers;
                let (s, b) = c.send(&call).await.expect("send");
                assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
                requests.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let mut consumers_set = JoinSet::new();
    for _ in 0..consumers {
        let (t, url, stop, requests, consumed) = (
            t.clone(),
            url.to_string(),
            stop.clone(),
            requests.clone(),
            consumed.clone(),
        );
        consumers_set.spawn(async move {
            let mut c = connect(&t).await;
            let api = Api(proto);
            let mut lat = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let (s, b) = c.send(&api.receive(&url, 10, 1)).await.expect("receive");
                assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
                let got = now_us();
                requests.fetch_add(1, Ordering::Relaxed);
                let handles = fields(&b, "ReceiptHandle", proto);
                lat.extend(latencies(&b, proto, got));
                if handles.is_empty() {
                    continue;
                }
                let (s, b) = c
                    .send(&api.delete_batch(&url, &handles))
                    .await
                    .expect("delete");
                assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
                requests.fetch_add(1, Ordering::Relaxed);
                consumed.fetch_add(handles.len() as u64, Ordering::Relaxed);
            }
            lat
        });
    }
    let start = Instant::now();
    tokio::time::sleep(dur).await;
    stop.store(true, Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    while producers_set.join_next().await.is_some() {}
    let mut lat = Vec::new();
    while let Some(Ok(l)) = consumers_set.join_next().await {
        lat.extend(l);
    }
    lat.sort_unstable();
    Outcome {
        scenario: label.into(),
        protocol: proto.name(),
        target: t.name.clone(),
        messages_per_s: consumed.load(Ordering::Relaxed) as f64 / secs,
        requests_per_s: requests.load(Ordering::Relaxed) as f64 / secs,
        p50_ms: percentile(&lat, 0.5),
        p99_ms: percentile(&lat, 0.99),
        note: format!("{producers} producers, {consumers} consumers; latency = send to receive"),
    }
}

/// `single`: SendMessage, ReceiveMessage(1), DeleteMessage per message, on `conns` connections.
pub(crate) async fn single(t: &Target, proto: Proto, conns: usize, dur: Duration) -> Outcome {
    let url = create_queue(t, proto, &format!("bench-single-{}", proto.name()), false).await;
    let target_url = url.clone();
    let (n, secs) = on_connections(t, conns, dur, move |mut c, stop, done| {
        let url = target_url.clone();
        async move {
            let api = Api(proto);
            while !stop.load(Ordering::Relaxed) {
                let (s, _) = c.send(&api.send(&url, &body(), None)).await.expect("send");
                assert_eq!(s, 200);
                let (s, b) = c.send(&api.receive(&url, 1, 0)).await.expect("receive");
                assert_eq!(s, 200);
                if let Some(h) = fields(&b, "ReceiptHandle", proto).pop() {
                    let (s, _) = c.send(&api.delete(&url, &h)).await.expect("delete");
                    assert_eq!(s, 200);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    })
    .await;
    delete_queue(t, proto, &url).await;
    Outcome {
        scenario: "single".into(),
        protocol: proto.name(),
        target: t.name.clone(),
        messages_per_s: n as f64 / secs,
        requests_per_s: n as f64 * 3.0 / secs,
        p50_ms: None,
        p99_ms: None,
        note: format!("{conns} connections, 3 calls per message"),
    }
}

/// `latency`: one long-polling consumer, one producer sending every `interval`.
pub(crate) async fn latency(t: &Target, proto: Proto, count: usize, interval: Duration) -> Outcome {
    let url = create_queue(t, proto, &format!("bench-latency-{}", proto.name()), false).await;
    let consumer = {
        let (t, url) = (t.clone(), url.clone());
        tokio::spawn(async move {
            let mut c = connect(&t).await;
            let api = Api(proto);
            let mut lat = Vec::with_capacity(count);
            while lat.len() < count {
                let (s, b) = c.send(&api.receive(&url, 10, 20)).await.expect("receive");
                let got = now_us();
                assert_eq!(s, 200);
                lat.extend(latencies(&b, proto, got));
                let handles = fields(&b, "ReceiptHandle", proto);
                if !handles.is_empty() {
                    c.send(&api.delete_batch(&url, &handles))
                        .await
                        .expect("delete");
                }
            }
            lat
        })
    };
    let mut p = connect(t).await;
    let api = Api(proto);
    // Let the consumer park in its long poll first.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut tick = tokio::time::interval(interval);
    for _ in 0..count {
        tick.tick().await;
        p.send(&api.send(&url, &body(), None)).await.expect("send");
    }
    let mut lat = tokio::time::timeout(Duration::from_secs(30), consumer)
        .await
        .expect("consumer finished")
        .expect("consumer ok");
    lat.sort_unstable();
    delete_queue(t, proto, &url).await;
    Outcome {
        scenario: "latency".into(),
        protocol: proto.name(),
        target: t.name.clone(),
        messages_per_s: 1.0 / interval.as_secs_f64(),
        requests_per_s: 0.0,
        p50_ms: percentile(&lat, 0.5),
        p99_ms: percentile(&lat, 0.99),
        note: format!(
            "{count} messages, one every {} ms; latency = send to long-poll wake",
            interval.as_millis()
        ),
    }
}

/// Milliseconds until `GET /_sqsim/health` answers 200 (or any answer, for other servers).
pub(crate) async fn wait_ready(addr: &str, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(mut c) = Conn::connect(addr).await {
            if let Ok(s) = c.get("/_sqsim/health").await {
                if s == 200 {
                    return Some(start.elapsed());
                }
            }
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    None
}
