//! `GET /metrics`: Prometheus text exposition. Requests are counted on the hot path with
//! atomics in fixed arrays (per action, per status, per latency bucket), never a lock or an
//! allocation; queue figures are read from the engine only when Prometheus scrapes. The
//! text itself is written by the `prometheus-client` crate from those values.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use prometheus_client::registry::Registry;

use crate::control::Plane;
use crate::protocol::Action;

pub(crate) mod format;
mod process;
mod scrape;

/// The status of a request whose connection an injected fault dropped: it got no answer.
pub(crate) const DROPPED: u16 = 0;

/// The HTTP statuses sqsim answers with, each its own series, and [`DROPPED`]; anything else
/// is "other".
const STATUSES: [u16; 9] = [200, 400, 403, 404, 405, 413, 500, 503, DROPPED];
const STATUS_LABELS: [&str; 10] = [
    "200", "400", "403", "404", "405", "413", "500", "503", "dropped", "other",
];

/// Whether requests are counted and logged: always, unless the environment variable
/// `SQSIM_NO_METRICS` is set (to anything but empty or `0`), read once. The switch exists
/// so that `sqsim-bench --ablation` can measure, in one run, what the per-request metrics
/// and log line cost; with it `/metrics` still answers but its request counters stay at 0.
pub(crate) fn per_request() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("SQSIM_NO_METRICS").map_or(true, |v| v.is_empty() || v == "0"))
}

/// Upper bounds of the latency buckets, in seconds: from sub-millisecond answers up to a
/// full 20-second long poll.
const BOUNDS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 20.0,
];

/// Slots per shard: the actions and "none".
const SLOTS: usize = Action::COUNT + 1;

/// The action label of a request without an [`Action`] (not decoded, or unknown).
const NO_ACTION: &str = "none";

/// Copies of every counter, one per group of threads, so that two runtime workers answering
/// the same action do not pass one cache line back and forth; a scrape sums them.
const SHARDS: usize = 4;

/// The shard of the calling thread, handed out round-robin on first use.
fn shard() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

#[derive(Debug, Default)]
#[repr(align(64))]
struct ActionSlot {
    by_status: [AtomicU64; STATUS_LABELS.len()],
    /// Per bucket (not cumulative); the last one is above every bound.
    buckets: [AtomicU64; BOUNDS.len() + 1],
    micros: AtomicU64,
}

/// One slot's figures over every shard, read at scrape time.
#[derive(Debug, Default)]
struct ActionTotals {
    by_status: [u64; STATUS_LABELS.len()],
    buckets: [u64; BOUNDS.len() + 1],
    micros: u64,
}

/// Request counters and connection gauges, shared by every connection.
#[derive(Debug)]
pub(crate) struct RequestMetrics {
    /// Per shard, one slot per [`Action`] (its index), then one for requests without a
    /// known action.
    slots: Box<[ActionSlot]>,
    connections: AtomicI64,
    /// Connections closed on arrival because `max_connections` were open.
    pub(crate) connections_refused: AtomicU64,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics {
            slots: (0..SHARDS * SLOTS).map(|_| ActionSlot::default()).collect(),
            connections: AtomicI64::new(0),
            connections_refused: AtomicU64::new(0),
        }
    }
}

/// Holds one open connection in the gauge until dropped.
pub(crate) struct ConnectionGuard<'a>(&'a RequestMetrics);

impl Drop for ConnectionGuard<'_> {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Relaxed);
    }
}

impl RequestMetrics {
    /// The slot of an action (its index; the last slot for none).
    pub(crate) fn slot_of(action: Option<Action>) -> usize {
        action.map_or(Action::COUNT, Action::index)
    }

    /// The label of a slot.
    pub(crate) fn action_label(slot: usize) -> &'static str {
        Action::NAMES.get(slot).copied().unwrap_or(NO_ACTION)
    }

    /// Counts one answered request.
    pub(crate) fn observe(&self, slot: usize, status: u16, took: Duration) {
        let Some(s) = self.slots.get(shard() * SLOTS + slot.min(SLOTS - 1)) else {
            return;
        };
        let st = STATUSES
            .iter()
            .position(|x| *x == status)
            .unwrap_or(STATUSES.len());
        s.by_status[st].fetch_add(1, Relaxed);
        let secs = took.as_secs_f64();
        let b = BOUNDS
            .iter()
            .position(|bound| secs <= *bound)
            .unwrap_or(BOUNDS.len());
        s.buckets[b].fetch_add(1, Relaxed);
        s.micros
            .fetch_add(took.as_micros().min(u64::MAX as u128) as u64, Relaxed);
    }

    /// A slot's figures summed over the shards.
    fn totals(&self, slot: usize) -> ActionTotals {
        let mut t = ActionTotals::default();
        for shard in 0..SHARDS {
            let s = &self.slots[shard * SLOTS + slot];
            for (sum, v) in t.by_status.iter_mut().zip(&s.by_status) {
                *sum += v.load(Relaxed);
            }
            for (sum, v) in t.buckets.iter_mut().zip(&s.buckets) {
                *sum += v.load(Relaxed);
            }
            t.micros += s.micros.load(Relaxed);
        }
        t
    }

    /// Counts a connection closed on arrival (over `max_connections`).
    pub(crate) fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Relaxed);
    }

    /// Counts a connection as open while the guard lives.
    pub(crate) fn connection(&self) -> ConnectionGuard<'_> {
        self.connections.fetch_add(1, Relaxed);
        ConnectionGuard(self)
    }
}

/// Where Prometheus scrapes.
pub(crate) const PATH: &str = "/metrics";

/// Whether a request is a scrape: `GET /metrics` that is not a query-protocol SQS request
/// (those carry an `Action`).
pub(crate) fn is_scrape<B>(req: &hyper::Request<B>) -> bool {
    req.method() == hyper::Method::GET
        && req.uri().path() == PATH
        && !req.uri().query().is_some_and(|q| q.contains("Action="))
}

/// The answer to a scrape: the figures of `engines` (this process's queues; in cluster
/// mode, the shards this node serves), in OpenMetrics when the scraper's `accept` asks for
/// it and in the Prometheus text format otherwise ([`format`]).
pub(crate) fn response(
    state: &std::sync::Arc<Plane>,
    engines: Vec<std::sync::Arc<crate::engine::Engine>>,
    accept: Option<&str>,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    let openmetrics = render(state, engines);
    let (body, content_type) = if format::wants_openmetrics(accept) {
        (openmetrics, format::OPENMETRICS)
    } else {
        (format::to_prometheus(&openmetrics), format::PROMETHEUS)
    };
    let mut resp = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    resp
}

/// The whole exposition in OpenMetrics, as `prometheus-client` writes it.
fn render(
    state: &std::sync::Arc<Plane>,
    engines: Vec<std::sync::Arc<crate::engine::Engine>>,
) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape::Scrape(
        std::sync::Arc::clone(state),
        engines,
    )));
    let mut out = String::with_capacity(16 << 10);
    if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
        // Writing to a String cannot fail; keep what was written.
        let _ = writeln!(out, "# sqsim: encoding stopped early");
    }
    out
}

/// Counts an SQS request in `/metrics` (unless `count` is false: a request another node
/// forwarded, counted there) and writes its log line: `encoded` is its answer, or `None`
/// when a fault rule dropped the connection. One place for every way an SQS action arrives
/// (the service, the console's action endpoint).
pub(crate) fn count_and_log(
    state: &Plane,
    slot: usize,
    answered: super::request_log::Answered<'_>,
    encoded: Option<&crate::protocol::Encoded>,
    count: bool,
) {
    let took = answered.took;
    let status = encoded.map_or(DROPPED, |e| e.status);
    if count {
        state.metrics.observe(slot, status, took);
    }
    match encoded {
        Some(encoded) => super::request_log::write(answered, encoded),
        None => super::request_log::dropped(answered),
    }
}

/// A metric without labels.
fn single<M: prometheus_client::encoding::EncodeMetric>(
    encoder: &mut prometheus_client::encoding::DescriptorEncoder,
    name: &str,
    help: &str,
    metric: M,
) -> Result<(), std::fmt::Error> {
    let m = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(m)
}
