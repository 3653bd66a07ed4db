//! Consumers: receive with short and long polls, then for each message delete it (alone or
//! in a batch), extend its visibility and delete it later, release it, change it in a batch,
//! or abandon it to expire. Consumers of the DLQ-wired sources (standard and FIFO) fail
//! often, so messages reach their DLQs; once draining, every consumer deletes all it gets. Each act asks the oracle
//! first, which refuses it when the hold may be over (a late act would prove nothing).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
    MessageSystemAttributeName,
};

use super::{Ctx, Queues};
use crate::body::{MsgKey, QueueKind};
use crate::oracle::{Delivered, Got, Outcome, ReceiveCall, Ticket};
use crate::rng::Rng;

/// What a consumer does with one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Delete,
    BatchDelete,
    ExtendThenDelete,
    Release,
    BatchChange,
    Abandon,
}

const ACTS: [Act; 6] = [
    Act::Delete,
    Act::BatchDelete,
    Act::ExtendThenDelete,
    Act::Release,
    Act::BatchChange,
    Act::Abandon,
];

/// Weights of [`ACTS`]: most messages are processed; some come back by release or expiry.
const WEIGHTS: [u32; 6] = [40, 25, 10, 7, 8, 10];
/// On the source queues more than half fail (released, abandoned, or changed in a batch),
/// so about one in five would reach the DLQ after three receives; fewer do in a short run,
/// where the drain deletes those still on their way.
const SOURCE_WEIGHTS: [u32; 6] = [20, 15, 5, 20, 5, 35];
/// The DLQs' consumers mostly clear them.
const DLQ_WEIGHTS: [u32; 6] = [50, 30, 5, 5, 5, 5];
/// While draining: delete everything.
const DRAIN_WEIGHTS: [u32; 6] = [30, 70, 0, 0, 0, 0];

/// One consumer of `queue` until told to stop.
pub(crate) async fn consumer(ctx: Arc<Ctx>, queue: QueueKind, id: usize, mut rng: Rng) {
    let url = ctx.queues.url(queue).to_string();
    let queue_vt = Queues::visibility(queue);
    while !ctx.stop_consumers.load(Ordering::Relaxed) {
        let draining = ctx.draining.load(Ordering::Relaxed);
        let wait = match (draining, rng.chance(0.5)) {
            (true, _) => 1,
            (false, true) => 0,
            (false, false) => rng.range(1, 3) as u32,
        };
        let max = if draining {
            10
        } else {
            rng.range(1, 10) as i32
        };
        // The hold is counted from the request's start, so a long poll eats into it: the
        // timeout leaves at least 2 s after the longest wait.
        let own_vt = if !draining && rng.chance(0.5) && wait + 2 <= queue_vt {
            None
        } else {
            Some((rng.range(2, 6) as u32).max(wait + 2))
        };
        let mut req = ctx
            .sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(max)
            .wait_time_seconds(wait as i32)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId);
        if let Some(v) = own_vt {
            req = req.visibility_timeout(v as i32);
        }
        let polls = if wait == 0 {
            &ctx.stats.short_polls
        } else {
            &ctx.stats.long_polls
        };
        polls.fetch_add(1, Ordering::Relaxed);
        let ticket = ctx.oracle.begin_receive(queue);
        let start = Instant::now();
        let answer = req.send().await;
        let end = Instant::now();
        let out = match answer {
            Ok(o) => o,
            Err(e) => {
                ctx.stats.error("ReceiveMessage", &e);
                ctx.oracle.receive_failed(queue, ticket);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let got: Vec<Got> = out
            .messages()
            .iter()
            .map(|m| {
                let attr =
                    |k: MessageSystemAttributeName| m.attributes().and_then(|a| a.get(&k)).cloned();
                Got {
                    body: m.body().unwrap_or_default().to_string(),
                    message_id: m.message_id().unwrap_or_default().to_string(),
                    count: attr(MessageSystemAttributeName::ApproximateReceiveCount)
                        .and_then(|c| c.parse().ok()),
                    group_id: attr(MessageSystemAttributeName::MessageGroupId),
                }
            })
            .collect();
        if got.is_empty() {
            ctx.oracle.receive_empty(ticket);
            ctx.stats.empty_receives.fetch_add(1, Ordering::Relaxed);
            if wait == 0 {
                tokio::time::sleep(Duration::from_millis(rng.range(20, 100))).await;
            }
            continue;
        }
        let call = ReceiveCall {
            ticket,
            consumer: id,
            queue,
            start,
            end,
            visibility: own_vt.unwrap_or(queue_vt),
        };
        let (recv, delivered) = ctx.oracle.record_receive(&call, &got);
        let handles: Vec<String> = out
            .messages()
            .iter()
            .map(|m| m.receipt_handle().unwrap_or_default().to_string())
            .collect();
        let weights = match (draining, queue) {
            (true, _) => &DRAIN_WEIGHTS,
            (false, q) if q.is_source() => &SOURCE_WEIGHTS,
            (false, q) if q.is_dlq() => &DLQ_WEIGHTS,
            _ => &WEIGHTS,
        };
        let mut w = Worker {
            ctx: &ctx,
            url: &url,
            queue,
            recv,
        };
        w.act(
            delivered.into_iter().zip(handles).collect(),
            weights,
            &mut rng,
        )
        .await;
    }
}

/// One consumer's acts on one answer.
struct Worker<'a> {
    ctx: &'a Ctx,
    url: &'a str,
    queue: QueueKind,
    recv: u64,
}

impl Worker<'_> {
    async fn act(&mut self, items: Vec<(Delivered, String)>, weights: &[u32; 6], rng: &mut Rng) {
        let mut deletes = Vec::new();
        let mut changes = Vec::new();
        let mut later = Vec::new();
        for (d, handle) in items {
            let Delivered::Known(key) = d else {
                // Already reported; removed so the drain can end with empty queues.
                let _ = self
                    .ctx
                    .sqs
                    .delete_message()
                    .queue_url(self.url)
                    .receipt_handle(handle)
                    .send()
                    .await;
                continue;
            };
            match ACTS[rng.weighted(weights)] {
                Act::Delete => self.delete(key, &handle).await,
                Act::BatchDelete => deletes.push((key, handle)),
                Act::ExtendThenDelete => {
                    if self.change(key, &handle, rng.range(3, 6) as u32).await {
                        later.push((key, handle));
                    }
                }
                Act::Release => {
                    self.change(key, &handle, 0).await;
                }
                Act::BatchChange => {
                    let s = if rng.chance(0.3) {
                        0
                    } else {
                        rng.range(2, 6) as u32
                    };
                    changes.push((key, handle, s));
                }
                Act::Abandon => {}
            }
            if rng.chance(0.1) {
                // Some messages take a while to process.
                tokio::time::sleep(Duration::from_millis(rng.range(1, 50))).await;
            }
        }
        self.delete_batch(deletes).await;
        self.change_batch(changes).await;
        if !later.is_empty() {
            tokio::time::sleep(Duration::from_millis(rng.range(100, 1500))).await;
            if rng.chance(0.5) {
                for (key, handle) in later {
                    self.delete(key, &handle).await;
                }
            } else {
                self.delete_batch(later).await;
            }
        }
    }

    async fn delete(&self, key: MsgKey, handle: &str) {
        let Some(t) = self.ctx.oracle.begin_delete(key, self.recv) else {
            self.ctx.stats.skipped_late.fetch_add(1, Ordering::Relaxed);
            return;
        };
        self.ctx.stats.delete_calls.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .ctx
            .sqs
            .delete_message()
            .queue_url(self.url)
            .receipt_handle(handle)
            .send()
            .await;
        let end = Instant::now();
        let out = match answer {
            Ok(_) => Outcome::Ok,
            Err(e) => self.ctx.stats.error("DeleteMessage", &e),
        };
        self.ctx.oracle.end_delete(key, self.queue, t, out, end);
    }

    /// Sets the visibility timeout; true if it was done.
    async fn change(&self, key: MsgKey, handle: &str, seconds: u32) -> bool {
        let Some(t) = self.ctx.oracle.begin_change(key, self.recv, seconds) else {
            self.ctx.stats.skipped_late.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        self.ctx.stats.change_calls.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .ctx
            .sqs
            .change_message_visibility()
            .queue_url(self.url)
            .receipt_handle(handle)
            .visibility_timeout(seconds as i32)
            .send()
            .await;
        let end = Instant::now();
        let out = match answer {
            Ok(_) => Outcome::Ok,
            Err(e) => self.ctx.stats.error("ChangeMessageVisibility", &e),
        };
        let ok = out == Outcome::Ok;
        self.ctx
            .oracle
            .end_change(key, self.queue, t, seconds, out, end);
        ok
    }

    async fn delete_batch(&self, items: Vec<(MsgKey, String)>) {
        let mut entries = Vec::new();
        let mut tickets: Vec<(String, MsgKey, Ticket)> = Vec::new();
        for (i, (key, handle)) in items.into_iter().enumerate() {
            let Some(t) = self.ctx.oracle.begin_delete(key, self.recv) else {
                self.ctx.stats.skipped_late.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let e = DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(handle)
                .build();
            if let Ok(e) = e {
                entries.push(e);
                tickets.push((i.to_string(), key, t));
            }
        }
        if entries.is_empty() {
            return;
        }
        self.ctx
            .stats
            .delete_batch_calls
            .fetch_add(1, Ordering::Relaxed);
        let answer = self
            .ctx
            .sqs
            .delete_message_batch()
            .queue_url(self.url)
            .set_entries(Some(entries))
            .send()
            .await;
        let end = Instant::now();
        let outcomes = match answer {
            Ok(o) => {
                for f in o.failed() {
                    self.ctx
                        .stats
                        .entry_error("DeleteMessageBatch", f.code(), f.sender_fault());
                }
                batch_outcomes(
                    &tickets,
                    o.successful().iter().map(|s| s.id()),
                    o.failed()
                        .iter()
                        .map(|f| (f.id(), f.code(), f.sender_fault())),
                )
            }
            Err(e) => vec![self.ctx.stats.error("DeleteMessageBatch", &e); tickets.len()],
        };
        for ((_, key, t), out) in tickets.into_iter().zip(outcomes) {
            self.ctx.oracle.end_delete(key, self.queue, t, out, end);
        }
    }

    async fn change_batch(&self, items: Vec<(MsgKey, String, u32)>) {
        let mut entries = Vec::new();
        let mut tickets: Vec<(String, MsgKey, Ticket)> = Vec::new();
        let mut seconds = Vec::new();
        for (i, (key, handle, s)) in items.into_iter().enumerate() {
            let Some(t) = self.ctx.oracle.begin_change(key, self.recv, s) else {
                self.ctx.stats.skipped_late.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let e = ChangeMessageVisibilityBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(handle)
                .visibility_timeout(s as i32)
                .build();
            if let Ok(e) = e {
                entries.push(e);
                tickets.push((i.to_string(), key, t));
                seconds.push(s);
            }
        }
        if entries.is_empty() {
            return;
        }
        self.ctx
            .stats
            .change_batch_calls
            .fetch_add(1, Ordering::Relaxed);
        let answer = self
            .ctx
            .sqs
            .change_message_visibility_batch()
            .queue_url(self.url)
            .set_entries(Some(entries))
            .send()
            .await;
        let end = Instant::now();
        let outcomes = match answer {
            Ok(o) => {
                for f in o.failed() {
                    self.ctx.stats.entry_error(
                        "ChangeMessageVisibilityBatch",
                        f.code(),
                        f.sender_fault(),
                    );
                }
                batch_outcomes(
                    &tickets,
                    o.successful().iter().map(|s| s.id()),
                    o.failed()
                        .iter()
                        .map(|f| (f.id(), f.code(), f.sender_fault())),
                )
            }
            Err(e) => {
                let out = self.ctx.stats.error("ChangeMessageVisibilityBatch", &e);
                vec![out; tickets.len()]
            }
        };
        for (((_, key, t), out), s) in tickets.into_iter().zip(outcomes).zip(seconds) {
            self.ctx.oracle.end_change(key, self.queue, t, s, out, end);
        }
    }
}

/// Each entry's outcome from a batch answer: successful, refused (the client's fault, with
/// its code), or unknown (the server's fault, or missing from the answer).
fn batch_outcomes<'a>(
    tickets: &[(String, MsgKey, Ticket)],
    ok: impl Iterator<Item = &'a str>,
    failed: impl Iterator<Item = (&'a str, &'a str, bool)>,
) -> Vec<Outcome> {
    let ok: Vec<&str> = ok.collect();
    let failed: Vec<(&str, &str, bool)> = failed.collect();
    tickets
        .iter()
        .map(|(id, _, _)| {
            if ok.contains(&id.as_str()) {
                Outcome::Ok
            } else if let Some((_, code, sender)) = failed.iter().find(|f| f.0 == id) {
                if *sender {
                    Outcome::Refused((*code).to_string())
                } else {
                    Outcome::Unknown
                }
            } else {
                Outcome::Unknown
            }
        })
        .collect()
}
