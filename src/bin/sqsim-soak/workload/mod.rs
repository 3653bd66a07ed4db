//! The traffic: the SDK client, the seven queues, the shared switches and counters, and the
//! producers (consumers are in [`consumer`]). Every send goes through the oracle before it
//! leaves and after it is answered.

pub(crate) mod consumer;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::config::timeout::TimeoutConfig;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::{QueueAttributeName, SendMessageBatchRequestEntry};

use crate::body::{Body, GroupPos, MsgKey, QueueKind};
use crate::oracle::{Oracle, Outcome};
use crate::rng::Rng;

/// Producers pause while their queue has more messages sent and not yet deleted: the
/// backlog, and with it the server's memory, stays bounded however fast producers are.
pub(crate) const BACKLOG_BOUND: i64 = 2_000;
/// Tenants (message groups) of the fair queue, shared by its producers.
const TENANTS: u64 = 8;
/// FIFO groups per FIFO producer; each producer owns its groups, so it alone decides their
/// send order (it awaits each answer before sending the next message of a group). Many, as
/// a group is blocked behind its oldest message in flight, and the consumers of the FIFO
/// source often let one expire.
const GROUPS_PER_PRODUCER: u64 = 16;
/// The DLQ-wired sources' maxReceiveCount.
pub(crate) const MAX_RECEIVES: u32 = 3;
/// Error answers printed in full as they happen (all are counted).
const ERRORS_PRINTED: u64 = 10;

/// Queue VisibilityTimeout by [`QueueKind::index`]: short, so expiries and redeliveries
/// happen many times in a short run; the sources' shortest so messages reach the DLQs soon.
const VISIBILITY: [u32; QueueKind::N] = [4, 4, 4, 2, 4, 2, 4];

/// The queues of one run.
#[derive(Debug, Clone)]
pub(crate) struct Queues {
    urls: [String; QueueKind::N],
}

impl Queues {
    /// The queue's URL.
    pub(crate) fn url(&self, q: QueueKind) -> &str {
        &self.urls[q.index()]
    }

    /// The queue's VisibilityTimeout.
    pub(crate) fn visibility(q: QueueKind) -> u32 {
        VISIBILITY[q.index()]
    }
}

/// Calls made, by kind.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub send_calls: AtomicU64,
    pub send_batch_calls: AtomicU64,
    pub short_polls: AtomicU64,
    pub long_polls: AtomicU64,
    pub empty_receives: AtomicU64,
    pub delete_calls: AtomicU64,
    pub delete_batch_calls: AtomicU64,
    pub change_calls: AtomicU64,
    pub change_batch_calls: AtomicU64,
    /// Deletes and changes not made because the hold was about to end.
    pub skipped_late: AtomicU64,
    /// Error answers by "Action: code".
    pub errors: Mutex<BTreeMap<String, u64>>,
    error_total: AtomicU64,
    /// Of which the server's fault or unanswered: 5xx, transport errors, timeouts, batch
    /// entries failed with SenderFault false. A healthy run has none.
    unexpected: AtomicU64,
}

impl Stats {
    /// Counts (and prints the first few of) an error answer; returns what it means for the
    /// act: refused by the service (a 4xx code), or unknown (no answer, or a 5xx).
    pub(crate) fn error<E>(&self, action: &str, e: &SdkError<E, HttpResponse>) -> Outcome
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let (code, outcome) = match e {
            SdkError::ServiceError(s) => {
                let code = s.err().code().unwrap_or("?").to_string();
                let status = s.raw().status().as_u16();
                let out = if status >= 500 {
                    Outcome::Unknown
                } else {
                    Outcome::Refused(code.clone())
                };
                (format!("{code} ({status})"), out)
            }
            SdkError::TimeoutError(_) => ("timeout".into(), Outcome::Unknown),
            SdkError::DispatchFailure(_) => ("dispatch failure".into(), Outcome::Unknown),
            SdkError::ResponseError(_) => ("unreadable response".into(), Outcome::Unknown),
            _ => ("other".into(), Outcome::Unknown),
        };
        if outcome == Outcome::Unknown {
            self.unexpected.fetch_add(1, Ordering::Relaxed);
        }
        if self.error_total.fetch_add(1, Ordering::Relaxed) < ERRORS_PRINTED {
            eprintln!(
                "error: {action}: {}",
                aws_sdk_sqs::error::DisplayErrorContext(e)
            );
        }
        if let Ok(mut m) = self.errors.lock() {
            *m.entry(format!("{action}: {code}")).or_default() += 1;
        }
        outcome
    }

    /// Counts a batch entry the server failed (`sender_fault` false: the server's fault).
    pub(crate) fn entry_error(&self, action: &str, code: &str, sender_fault: bool) {
        self.error_total.fetch_add(1, Ordering::Relaxed);
        if !sender_fault {
            self.unexpected.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(mut m) = self.errors.lock() {
            *m.entry(format!("{action} entry: {code}")).or_default() += 1;
        }
    }

    /// Error answers so far.
    pub(crate) fn error_count(&self) -> u64 {
        self.error_total.load(Ordering::Relaxed)
    }

    /// Errors that are the server's fault or went unanswered, so far.
    pub(crate) fn unexpected_count(&self) -> u64 {
        self.unexpected.load(Ordering::Relaxed)
    }
}

/// Everything a client task shares.
pub(crate) struct Ctx {
    pub sqs: aws_sdk_sqs::Client,
    pub queues: Queues,
    pub oracle: Oracle,
    pub stats: Stats,
    pub stop_producers: AtomicBool,
    /// Consumers stop failing and releasing: they delete everything they get.
    pub draining: AtomicBool,
    pub stop_consumers: AtomicBool,
}

/// An SDK client for `endpoint`: static credentials, no retries (a retried send could store
/// a message twice, and the oracle must know exactly which calls were answered), and a
/// timeout well above the longest long poll.
pub(crate) fn client(endpoint: &str) -> aws_sdk_sqs::Client {
    let conf = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "static"))
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(Duration::from_secs(30))
                .build(),
        )
        .build();
    aws_sdk_sqs::Client::from_conf(conf)
}

/// Creates the run's queues, named after `tag`: standard, fair, FIFO, the DLQs, then the
/// DLQ-wired sources (standard and FIFO) with a RedrivePolicy to theirs.
pub(crate) async fn create_queues(sqs: &aws_sdk_sqs::Client, tag: &str) -> Result<Queues, String> {
    let err = |what: &str, e: &dyn std::fmt::Display| format!("creating {what}: {e}");
    let mut urls: [String; QueueKind::N] = Default::default();
    for q in [
        QueueKind::Dlq,
        QueueKind::FifoDlq,
        QueueKind::Standard,
        QueueKind::Fair,
        QueueKind::Fifo,
        QueueKind::Source,
        QueueKind::FifoSource,
    ] {
        let fifo = q.is_fifo();
        let name = format!("soak-{tag}-{}{}", q.name(), if fifo { ".fifo" } else { "" });
        let mut req = sqs.create_queue().queue_name(&name).attributes(
            QueueAttributeName::VisibilityTimeout,
            Queues::visibility(q).to_string(),
        );
        if fifo {
            req = req.attributes(QueueAttributeName::FifoQueue, "true");
        }
        if let Some(dlq) = q.dlq() {
            let dlq_arn = sqs
                .get_queue_attributes()
                .queue_url(&urls[dlq.index()])
                .attribute_names(QueueAttributeName::QueueArn)
                .send()
                .await
                .map_err(|e| err("a DLQ's ARN", &aws_sdk_sqs::error::DisplayErrorContext(e)))?
                .attributes()
                .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
                .ok_or("no QueueArn for a DLQ")?;
            let policy = serde_json::json!({
                "deadLetterTargetArn": dlq_arn,
                "maxReceiveCount": MAX_RECEIVES.to_string(),
            });
            req = req.attributes(QueueAttributeName::RedrivePolicy, policy.to_string());
        }
        let out = req
            .send()
            .await
            .map_err(|e| err(&name, &aws_sdk_sqs::error::DisplayErrorContext(e)))?;
        urls[q.index()] = out.queue_url().unwrap_or_default().to_string();
    }
    Ok(Queues { urls })
}

/// Messages a queue still holds (visible, in flight, delayed), as the server counts them.
pub(crate) async fn queued(sqs: &aws_sdk_sqs::Client, url: &str) -> Option<u64> {
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .ok()?;
    let a = out.attributes()?;
    let n = |k: QueueAttributeName| a.get(&k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Some(
        n(QueueAttributeName::ApproximateNumberOfMessages)
            + n(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            + n(QueueAttributeName::ApproximateNumberOfMessagesDelayed),
    )
}

/// One producer: until told to stop, sends single messages and batches of 2–10 to `queue`,
/// pausing while the queue's backlog is above [`BACKLOG_BOUND`].
pub(crate) async fn producer(ctx: Arc<Ctx>, queue: QueueKind, producer: u32, mut rng: Rng) {
    let url = ctx.queues.url(queue).to_string();
    let mut seq = 0u64;
    let mut next_index = [0u64; GROUPS_PER_PRODUCER as usize];
    while !ctx.stop_producers.load(Ordering::Relaxed) {
        if ctx.oracle.backlog(queue) >= BACKLOG_BOUND {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let n = if rng.chance(0.5) { 1 } else { rng.range(2, 10) };
        // A FIFO batch goes to one group, its entries in index order.
        let fifo_group = rng.range(0, GROUPS_PER_PRODUCER - 1) as usize;
        let mut bodies = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let group = match queue {
                QueueKind::Fair => Some(GroupPos {
                    group: rng.range(0, TENANTS - 1) as u32,
                    index: 0,
                }),
                QueueKind::Fifo | QueueKind::FifoSource => {
                    let index = next_index[fifo_group];
                    next_index[fifo_group] += 1;
                    Some(GroupPos {
                        group: producer * GROUPS_PER_PRODUCER as u32 + fifo_group as u32,
                        index,
                    })
                }
                _ => None,
            };
            bodies.push(Body {
                key: MsgKey {
                    queue,
                    producer,
                    seq,
                },
                group,
            });
            seq += 1;
        }
        for b in &bodies {
            ctx.oracle.begin_send(b.key, b.group);
        }
        if n == 1 {
            send_one(&ctx, &url, &bodies[0], rng.range(0, 256) as usize).await;
        } else {
            send_batch(&ctx, &url, &bodies, &mut rng).await;
        }
    }
}

async fn send_one(ctx: &Ctx, url: &str, b: &Body, pad: usize) {
    ctx.stats.send_calls.fetch_add(1, Ordering::Relaxed);
    let mut req = ctx
        .sqs
        .send_message()
        .queue_url(url)
        .message_body(b.encode(pad));
    if let Some(g) = b.group_id() {
        req = req.message_group_id(g);
    }
    if b.key.queue.is_fifo() {
        req = req.message_deduplication_id(b.dedup_id());
    }
    let result = match req.send().await {
        Ok(o) => Ok(o.message_id().unwrap_or_default().to_string()),
        Err(e) => {
            ctx.stats.error("SendMessage", &e);
            Err(())
        }
    };
    ctx.oracle.end_send(b.key, result);
}

async fn send_batch(ctx: &Ctx, url: &str, bodies: &[Body], rng: &mut Rng) {
    ctx.stats.send_batch_calls.fetch_add(1, Ordering::Relaxed);
    let mut entries = Vec::with_capacity(bodies.len());
    for (i, b) in bodies.iter().enumerate() {
        let mut e = SendMessageBatchRequestEntry::builder()
            .id(i.to_string())
            .message_body(b.encode(rng.range(0, 256) as usize));
        if let Some(g) = b.group_id() {
            e = e.message_group_id(g);
        }
        if b.key.queue.is_fifo() {
            e = e.message_deduplication_id(b.dedup_id());
        }
        match e.build() {
            Ok(e) => entries.push(e),
            Err(_) => unreachable!("id and body are set"),
        }
    }
    let answer = ctx
        .sqs
        .send_message_batch()
        .queue_url(url)
        .set_entries(Some(entries))
        .send()
        .await;
    match answer {
        Ok(o) => {
            let ids: BTreeMap<&str, &str> = o
                .successful()
                .iter()
                .map(|s| (s.id(), s.message_id()))
                .collect();
            for f in o.failed() {
                ctx.stats
                    .entry_error("SendMessageBatch", f.code(), f.sender_fault());
            }
            for (i, b) in bodies.iter().enumerate() {
                let id = ids.get(i.to_string().as_str()).map(|s| s.to_string());
                ctx.oracle.end_send(b.key, id.ok_or(()));
            }
        }
        Err(e) => {
            ctx.stats.error("SendMessageBatch", &e);
            for b in bodies {
                ctx.oracle.end_send(b.key, Err(()));
            }
        }
    }
}
