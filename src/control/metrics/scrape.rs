//! The scrape: reads queue, request, worker and store figures when Prometheus asks, and has
//! `prometheus-client` write them in the text format.

use std::sync::atomic::Ordering::Relaxed;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::{single, RequestMetrics, BOUNDS, SLOTS, STATUS_LABELS};
use crate::control::Plane;

/// Reads the server's figures at scrape time.
#[derive(Debug)]
pub(crate) struct Scrape(
    pub(crate) std::sync::Arc<Plane>,
    pub(crate) Vec<std::sync::Arc<crate::engine::Engine>>,
);

type Labels<'a> = [(&'static str, &'a str); 3];

/// A label value as the text formats spell it: `prometheus-client` writes values as given,
/// and a region is whatever a client's credential scope says, so a `"` or a line break in
/// one would end the value early and make every scrape unreadable.
fn label_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A queue's figures, or the sum of those past the label limit.
#[derive(Debug, Default, Clone)]
struct QueueFigures {
    name: String,
    account: String,
    region: String,
    visible: u64,
    in_flight: u64,
    delayed: u64,
    oldest_age_s: f64,
    waiting: u64,
    sent: u64,
    received: u64,
    deleted: u64,
    dead_lettered: u64,
    expired: u64,
    purged: u64,
}

impl QueueFigures {
    fn labels(&self) -> Labels<'_> {
        [
            ("queue", self.name.as_str()),
            ("account", self.account.as_str()),
            ("region", self.region.as_str()),
        ]
    }

    fn add(&mut self, o: &QueueFigures) {
        self.visible += o.visible;
        self.in_flight += o.in_flight;
        self.delayed += o.delayed;
        self.oldest_age_s = self.oldest_age_s.max(o.oldest_age_s);
        self.waiting += o.waiting;
        self.sent += o.sent;
        self.received += o.received;
        self.deleted += o.deleted;
        self.dead_lettered += o.dead_lettered;
        self.expired += o.expired;
        self.purged += o.purged;
    }
}

impl Scrape {
    /// Every queue (by account, region and name), the ones past the limit summed into one
    /// `_other` entry; and how many queues there are.
    fn queues(&self) -> (Vec<QueueFigures>, usize) {
        let engine = &self.0.engine;
        let now = engine.now_ms();
        // In cluster mode, the queues of the shards this node serves (each node is scraped).
        let queues: Vec<_> = self.1.iter().flat_map(|e| e.all_queues()).collect();
        let mut all: Vec<QueueFigures> = queues
            .iter()
            .map(|q| {
                let s = q.snapshot(now);
                QueueFigures {
                    name: label_value(&q.id.name),
                    account: label_value(&q.id.account),
                    region: label_value(&q.id.region),
                    visible: s.counts.visible as u64,
                    in_flight: s.counts.in_flight as u64,
                    delayed: s.counts.delayed as u64,
                    oldest_age_s: s
                        .oldest_sent_ms
                        .map_or(0.0, |t| now.saturating_sub(t) as f64 / 1000.0),
                    waiting: q.waiting() as u64,
                    sent: s.traffic.sent,
                    received: s.traffic.received,
                    deleted: s.traffic.deleted,
                    dead_lettered: s.traffic.dead_lettered,
                    expired: s.traffic.expired,
                    purged: s.traffic.purged,
                }
            })
            .collect();
        all.sort_by(|a, b| (&a.account, &a.region, &a.name).cmp(&(&b.account, &b.region, &b.name)));
        let total = all.len();
        let limit = self.0.config.metrics_queue_limit;
        if all.len() > limit {
            let mut other = QueueFigures {
                name: "_other".into(),
                ..QueueFigures::default()
            };
            for q in all.drain(limit..) {
                other.add(&q);
            }
            all.push(other);
        }
        (all, total)
    }
}

fn gauge<'a, V: prometheus_client::encoding::EncodeGaugeValue + Clone + std::fmt::Debug>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: impl Iterator<Item = (Labels<'a>, V)>,
) -> Result<(), std::fmt::Error>
where
    ConstGauge<V>: EncodeMetric,
{
    let mut m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in values {
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn counter<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: impl Iterator<Item = (Labels<'a>, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in values {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (queues, total) = self.queues();
        macro_rules! per_queue {
            (gauge $name:literal, $help:literal, $field:ident) => {
                gauge(
                    &mut e,
                    $name,
                    $help,
                    queues.iter().map(|q| (q.labels(), q.$field)),
                )?
            };
            (counter $name:literal, $help:literal, $field:ident) => {
                counter(
                    &mut e,
                    $name,
                    $help,
                    queues.iter().map(|q| (q.labels(), q.$field)),
                )?
            };
        }
        per_queue!(gauge "sqsim_queue_messages_visible", "Messages available for retrieval (ApproximateNumberOfMessages).", visible);
        per_queue!(gauge "sqsim_queue_messages_in_flight", "Messages received and not yet deleted or visible again (ApproximateNumberOfMessagesNotVisible).", in_flight);
        per_queue!(gauge "sqsim_queue_messages_delayed", "Messages not yet available because of a delay (ApproximateNumberOfMessagesDelayed).", delayed);
        per_queue!(gauge "sqsim_queue_oldest_message_age_seconds", "Age of the oldest message in the queue (0 when empty).", oldest_age_s);
        per_queue!(gauge "sqsim_queue_long_polls_waiting", "ReceiveMessage long polls waiting on the queue.", waiting);
        per_queue!(counter "sqsim_messages_sent", "Messages stored by sends (FIFO duplicates not counted).", sent);
        per_queue!(counter "sqsim_messages_received", "Messages handed out by receives.", received);
        per_queue!(counter "sqsim_messages_deleted", "Messages deleted by DeleteMessage(Batch).", deleted);
        per_queue!(counter "sqsim_messages_dead_lettered", "Messages moved to the dead-letter queue after maxReceiveCount receives.", dead_lettered);
        per_queue!(counter "sqsim_messages_expired", "Messages dropped at the end of the retention period.", expired);
        per_queue!(counter "sqsim_messages_purged", "Messages removed by PurgeQueue.", purged);
        single(
            &mut e,
            "sqsim_queues",
            "Queues in every account and region.",
            ConstGauge::new(total as i64),
        )?;

        let rm = &self.0.metrics;
        {
            let mut m = e.encode_descriptor(
                "sqsim_requests",
                "SQS requests answered, by action and HTTP status.",
                None,
                MetricType::Counter,
            )?;
            for slot in 0..SLOTS {
                let t = rm.totals(slot);
                let action = RequestMetrics::action_label(slot);
                for (i, status) in STATUS_LABELS.iter().enumerate() {
                    if t.by_status[i] > 0 {
                        let labels = [("action", action), ("status", *status)];
                        ConstCounter::new(t.by_status[i]).encode(m.encode_family(&labels)?)?;
                    }
                }
            }
        }
        {
            let mut m = e.encode_descriptor(
                "sqsim_request_duration_seconds",
                "Time from a request's arrival to its answer, by action.",
                None,
                MetricType::Histogram,
            )?;
            for slot in 0..SLOTS {
                let t = rm.totals(slot);
                let buckets: Vec<(f64, u64)> = BOUNDS
                    .iter()
                    .copied()
                    .chain([f64::MAX])
                    .zip(t.buckets)
                    .collect();
                let count: u64 = t.buckets.iter().sum();
                if count == 0 {
                    continue;
                }
                let labels = [("action", RequestMetrics::action_label(slot))];
                m.encode_family(&labels)?
                    .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                        t.micros as f64 / 1e6,
                        count,
                        &buckets,
                        None,
                    )?;
            }
        }
        single(
            &mut e,
            "sqsim_connections_open",
            "HTTP connections open now.",
            ConstGauge::new(rm.connections.load(Relaxed)),
        )?;
        single(
            &mut e,
            "sqsim_connections_refused",
            "HTTP connections closed on arrival because max_connections were open.",
            ConstCounter::new(rm.connections_refused.load(Relaxed)),
        )?;
        let bodies = &self.0.bodies;
        single(
            &mut e,
            "sqsim_incoming_body_bytes",
            "Bytes request bodies hold while they arrive (max_incoming_bytes bounds them).",
            ConstGauge::new(bodies.held() as i64),
        )?;
        single(
            &mut e,
            "sqsim_incoming_bodies_refused",
            "Request bodies answered 503 because those arriving left no room (max_incoming_bytes).",
            ConstCounter::new(bodies.refused()),
        )?;
        self.workers(&mut e)?;
        self.store(&mut e)?;
        super::process::encode(&mut e)
    }
}

impl Scrape {
    /// Counters of the workers started from the config file.
    fn workers(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let workers: Vec<_> = self
            .0
            .workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        type Read = fn(&crate::worker::WorkerStats) -> u64;
        let figures: [(&str, &str, MetricType, Read); 5] = [
            (
                "sqsim_worker_delivered",
                "Messages a worker delivered (its application answered 2xx).",
                MetricType::Counter,
                |w| w.delivered.load(Relaxed),
            ),
            (
                "sqsim_worker_failed",
                "Deliveries that failed (non-2xx, timeout or connection error).",
                MetricType::Counter,
                |w| w.failed.load(Relaxed),
            ),
            (
                "sqsim_worker_retried",
                "Deliveries a worker retried.",
                MetricType::Counter,
                |w| w.retried.load(Relaxed),
            ),
            (
                "sqsim_worker_released",
                "Messages a worker released early (visibility set to the retry delay).",
                MetricType::Counter,
                |w| w.released.load(Relaxed),
            ),
            (
                "sqsim_worker_in_flight",
                "Deliveries under way now.",
                MetricType::Gauge,
                |w| w.in_flight.load(Relaxed),
            ),
        ];
        for (name, help, kind, read) in figures {
            let mut m = e.encode_descriptor(name, help, None, kind)?;
            for (worker, stats) in &workers {
                let worker = label_value(worker);
                let labels = [("worker", worker.as_str())];
                let v = read(stats);
                match kind {
                    MetricType::Counter => {
                        ConstCounter::new(v).encode(m.encode_family(&labels)?)?
                    }
                    _ => ConstGauge::new(v as i64).encode(m.encode_family(&labels)?)?,
                }
            }
        }
        Ok(())
    }

    /// The durable store's figures (durable mode only).
    fn store(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(store) = self.0.engine.journal().store() else {
            return Ok(());
        };
        let s = store.stats();
        single(
            e,
            "sqsim_store_log_bytes",
            "Bytes in the durable log's segments.",
            ConstGauge::new(s.log_bytes as i64),
        )?;
        single(
            e,
            "sqsim_store_snapshot_bytes",
            "Bytes in the durable store's snapshot.",
            ConstGauge::new(s.snapshot_bytes as i64),
        )?;
        single(
            e,
            "sqsim_store_records_appended",
            "Changes appended to the durable log.",
            ConstCounter::new(s.appended_records),
        )?;
        single(
            e,
            "sqsim_store_syncs",
            "Batches written to the log (fsynced in fsync mode).",
            ConstCounter::new(s.syncs),
        )?;
        single(
            e,
            "sqsim_store_sync_seconds",
            "Time spent writing (and fsyncing) the log.",
            ConstCounter::new(s.sync_micros as f64 / 1e6),
        )?;
        single(
            e,
            "sqsim_store_snapshots",
            "Snapshots written (compactions and start-ups).",
            ConstCounter::new(s.snapshots),
        )?;
        single(
            e,
            "sqsim_store_writable",
            "1 while the store takes writes, 0 after a failed write until one succeeds.",
            ConstGauge::new(i64::from(s.writable)),
        )
    }
}
