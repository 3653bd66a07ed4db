//! What the writer does when a publish was not acknowledged: a refusal (another writer
//! wrote) is final; a timeout or a lost connection is retried from that message on, each
//! message carrying its id so that one stored twice is kept once.

use std::sync::atomic::Ordering;

use async_nats::jetstream;
use async_nats::HeaderMap;
use bytes::Bytes;

use super::group::{Group, Indexed};
use super::{Sent, Writer};
use crate::store::Lsn;

/// How long a write JetStream did not acknowledge (and did not refuse) is retried before
/// the store gives up: longer than JetStream takes to elect a stream's new leader.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(20);
const RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// Why records were not all acknowledged.
pub(super) struct Unacked {
    /// Records acknowledged before the first that was not.
    pub(super) acked: usize,
    pub(super) error: String,
    /// JetStream refused (another writer wrote first): final, never retried.
    pub(super) refused: bool,
}

impl Unacked {
    pub(super) fn of(acked: usize, what: &str, e: &jetstream::context::PublishError) -> Unacked {
        use jetstream::context::PublishErrorKind::{WrongLastMessageId, WrongLastSequence};
        Unacked {
            acked,
            error: format!("{what}: {e}"),
            refused: matches!(e.kind(), WrongLastSequence | WrongLastMessageId),
        }
    }
}

impl Writer {
    /// The oldest message in the window was not acknowledged (`stop`). A refusal (another
    /// writer) leaves the store failed; anything else (a timeout while JetStream elects a
    /// new leader, a lost connection) is retried for [`RETRY_FOR`], from that message on,
    /// with every later one in the window (their own answers are not awaited): each carries
    /// a message id, so one that was stored though its ack was lost (or that lands after
    /// its retry was sent) is not stored twice.
    pub(super) async fn repair(
        &mut self,
        js: &jetstream::Context,
        sent: Sent,
        stop: Unacked,
        window: &mut std::collections::VecDeque<Sent>,
    ) {
        let started = sent.at;
        let mut groups = vec![sent.group];
        // The later messages expected this one before them: they are sent again after it,
        // without waiting for their own answers (an ack timer starts when it is first
        // awaited: awaiting them one by one would spend the retry time on timeouts). One
        // that lands anyway is the same message, id and expected sequence as its retry:
        // JetStream keeps it once.
        groups.extend(window.drain(..).map(|later| later.group));
        let through = groups.last().map_or(0, |g| g.first + g.count);
        if stop.refused {
            return self.fail(through, &stop.error);
        }
        tracing::debug!(error = %stop.error, "JetStream write not acknowledged; retrying");
        tokio::time::sleep(RETRY_PAUSE).await;
        let mut done = 0;
        while done < groups.len() {
            if self.cancelled.load(Ordering::Acquire) {
                return self.fail(through, "the takeover was called off");
            }
            match self.publish_from(js, &groups[done..]).await {
                Ok(()) => done = groups.len(),
                Err(stop) => {
                    done += stop.acked;
                    // A retry refused because an earlier attempt landed after it was
                    // checked: the messages are there, written by this writer.
                    if stop.refused {
                        if let Some(n) = self.landed(js, &groups[done..]).await {
                            done += n;
                            continue;
                        }
                    }
                    if stop.refused || started.elapsed() >= RETRY_FOR {
                        return self.fail(through, &stop.error);
                    }
                    tracing::debug!(error = %stop.error, "JetStream write not acknowledged; retrying");
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
        }
        self.kept(&groups, started);
    }

    /// Publishes `groups` back to back and awaits their acks: `Err` says how many were
    /// acknowledged before the first that was not.
    pub(super) async fn publish_from(
        &mut self,
        js: &jetstream::Context,
        groups: &[Group],
    ) -> Result<(), Unacked> {
        let mut acks = Vec::with_capacity(groups.len());
        let mut send_error = None;
        for (i, group) in groups.iter().enumerate() {
            match self
                .publish_group(js, group, self.last_seq + i as u64)
                .await
            {
                Ok(ack) => acks.push(ack),
                Err(e) => {
                    send_error = Some(Unacked::of(0, "JetStream publish failed", &e));
                    break;
                }
            }
        }
        let mut acked = 0;
        for (ack, group) in acks.into_iter().zip(groups) {
            match ack.await {
                Ok(a) => {
                    self.last_seq = a.sequence;
                    self.index
                        .insert(group.first, Indexed::of(a.sequence, group));
                    acked += 1;
                }
                Err(e) => return Err(Unacked::of(acked, "JetStream refused a record", &e)),
            }
        }
        match send_error {
            Some(e) => Err(Unacked { acked, ..e }),
            None => Ok(()),
        }
    }

    /// After a refused retry: how many of `rest` (messages not acknowledged) are in the
    /// stream anyway, written by this writer's earlier attempt — the log's last message is
    /// ours and is one of them; messages of one writer are consecutive, so those before it
    /// are there too. `None`: another writer wrote (a true refusal).
    pub(super) async fn landed(
        &mut self,
        js: &jetstream::Context,
        rest: &[Group],
    ) -> Option<usize> {
        let stream = js.get_stream(self.stream()).await.ok()?;
        let last = stream
            .get_last_raw_message_by_subject(&self.log_subject())
            .await
            .ok()?;
        let id = last
            .headers
            .get(async_nats::header::NATS_MESSAGE_ID)?
            .as_str()
            .to_string();
        let first: Lsn = id
            .strip_prefix(&format!("{}-", self.writer_id))?
            .parse()
            .ok()?;
        let n = rest.iter().position(|g| g.first == first)? + 1;
        for (i, group) in rest[..n].iter().enumerate() {
            let seq = last.sequence - (n - 1 - i) as u64;
            self.index.insert(group.first, Indexed::of(seq, group));
        }
        self.last_seq = last.sequence;
        Some(n)
    }

    /// Publishes one record, retrying what is not a refusal for [`RETRY_FOR`] (the message
    /// id makes a retry of a stored record a no-op).
    pub(super) async fn publish_one(
        &self,
        js: &jetstream::Context,
        subject: String,
        mut headers: HeaderMap,
        payload: Bytes,
        id: &str,
    ) -> Result<jetstream::publish::PublishAck, Unacked> {
        self.stamp(&mut headers, id);
        let started = std::time::Instant::now();
        loop {
            let attempt = match js
                .publish_with_headers(subject.clone(), headers.clone(), payload.clone())
                .await
            {
                Ok(ack) => ack
                    .await
                    .map_err(|e| Unacked::of(0, "JetStream refused a record", &e)),
                Err(e) => Err(Unacked::of(0, "JetStream publish failed", &e)),
            };
            match attempt {
                Err(e) if !e.refused && started.elapsed() < RETRY_FOR => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                done => return done,
            }
        }
    }
}
