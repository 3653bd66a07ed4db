//! The writer's loop: appends are gathered into log messages and published with a window
//! of messages in flight (each expecting the stream sequence of the one before it), their
//! acks settled in order; any other command waits until every append before it is
//! acknowledged.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_nats::jetstream::{self, stream};
use async_nats::HeaderMap;
use tokio::sync::mpsc;

use super::group::{Group, Indexed};
use super::retry::Unacked;
use super::{io_error, AckResult, Cmd, Sent, Writer, CODEC, COUNT, LSN, MAX_BATCH};
use crate::store::{Lsn, StoreError};

/// Most log messages a shard has published and not yet seen acknowledged: well under the
/// client's limit of acks in flight, which would otherwise make a publish wait for acks
/// nobody awaits. More than one, so that a request does not wait for the ack of the publish
/// before its own (a shard's throughput is no longer one round trip and fsync per flush).
const WINDOW: usize = 16;
/// Largest record the stream takes (a full batch with attributes fits many times).
const MAX_RECORD: i32 = 8 << 20;

impl Writer {
    /// Serves the store's commands until it is closed; `false` if it never got a connection
    /// (otherwise its use of the shared connection is given back afterwards).
    pub(super) async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Cmd>,
        ready: std::sync::mpsc::Sender<Result<(), StoreError>>,
    ) -> bool {
        let client = match crate::store::nats_io::io() {
            Ok(io) => io.client(&self.url).await,
            Err(e) => Err(e),
        };
        let client = match client {
            Ok(client) => client,
            Err(e) => {
                let _ = ready.send(Err(e));
                return false;
            }
        };
        let js = match self.connect(client).await {
            Ok(js) => {
                let _ = ready.send(Ok(()));
                js
            }
            Err(e) => {
                let _ = ready.send(Err(e));
                return true;
            }
        };
        let mut window: std::collections::VecDeque<Sent> = std::collections::VecDeque::new();
        // Appends not yet published.
        let mut pending: Vec<(Lsn, Vec<u8>)> = Vec::new();
        // When the oldest pending record arrived.
        let mut since = std::time::Instant::now();
        loop {
            // With k messages in flight, the next goes once it holds at least k records: a
            // lone request never waits for an ack it does not need, and under load the
            // messages grow with the window (JetStream's cost, and its replicas', is per
            // message, not per record). With none in flight, the hold may wait a moment for
            // the records of requests that came together last time.
            let mut held = None;
            if !pending.is_empty() && window.len() < WINDOW && pending.len() >= window.len() {
                let in_flight = window.iter().map(|s| s.group.count as usize).sum();
                let now = std::time::Instant::now();
                held = self.hold.until(pending.len(), in_flight, since, now);
                if held.is_none() {
                    self.hold.sent(pending.len(), in_flight);
                    let batch = std::mem::take(&mut pending);
                    self.send(&js, batch, &mut window).await;
                }
            }
            tokio::select! {
                // Acks first: they free room in the window and wake the requests waiting.
                biased;
                acked = async { window.front_mut().expect("not empty").ack.as_mut().await },
                    if !window.is_empty() =>
                {
                    let sent = window.pop_front().expect("not empty");
                    self.settle(&js, sent, acked, &mut window).await;
                }
                () = async {
                    if let Some(until) = held {
                        tokio::time::sleep_until(until.into()).await;
                    }
                }, if held.is_some() => {}
                cmd = rx.recv(), if pending.len() < MAX_BATCH => {
                    let mut next = cmd;
                    if let Some(Cmd::Append(lsn, r)) = next {
                        if pending.is_empty() {
                            since = std::time::Instant::now();
                        }
                        pending.push((lsn, r));
                        next = None;
                        while pending.len() < MAX_BATCH {
                            match rx.try_recv() {
                                Ok(Cmd::Append(lsn, r)) => pending.push((lsn, r)),
                                Ok(other) => {
                                    next = Some(other);
                                    break;
                                }
                                Err(_) => break,
                            }
                        }
                        if next.is_none() {
                            continue;
                        }
                    }
                    // Anything else runs once every append before it is acknowledged.
                    if !pending.is_empty() {
                        let batch = std::mem::take(&mut pending);
                        self.send(&js, batch, &mut window).await;
                    }
                    self.drain(&js, &mut window).await;
                    match next {
                        Some(Cmd::Recover(reply)) => {
                            let _ = reply.send(self.recover(&js).await);
                        }
                        Some(Cmd::Snapshot(at, records, reply)) => {
                            let _ = reply.send(self.snapshot(&js, at, records).await);
                        }
                        Some(Cmd::Lead(server, reply)) => {
                            let _ = reply.send(self.lead(&js, &server).await);
                        }
                        Some(Cmd::Close(reply)) => {
                            self.fail(Lsn::MAX, "the store is closed");
                            let _ = reply.send(());
                            return true;
                        }
                        Some(Cmd::Append(..)) | None => return true,
                    }
                }
            }
        }
    }

    /// Opens (or creates) the stream on `client`'s connection.
    pub(super) async fn connect(
        &mut self,
        client: async_nats::Client,
    ) -> Result<jetstream::Context, StoreError> {
        let js = jetstream::new(client);
        let config = stream::Config {
            name: self.stream(),
            subjects: vec![
                self.log_subject(),
                self.snap_subject(),
                self.fence_subject(),
            ],
            num_replicas: self.replicas,
            max_message_size: MAX_RECORD,
            storage: stream::StorageType::File,
            ..Default::default()
        };
        let mut stream = js
            .get_or_create_stream(config)
            .await
            .map_err(|e| io_error(format!("cannot open the JetStream stream: {e}")))?;
        let info = stream
            .info()
            .await
            .map_err(|e| io_error(format!("cannot read the stream: {e}")))?;
        self.last_seq = info.state.last_sequence;
        Ok(js)
    }

    /// Marks the store failed: stats first, so that whoever is woken by the progress sees
    /// them already.
    pub(super) fn fail(&self, through: Lsn, message: &str) {
        {
            let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
            s.writable = false;
            s.last_error = Some(message.to_string());
        }
        // A failed JetStream store never takes a write again (its shard is recovered
        // afresh), so every record from here on fails: `through` is the end of time.
        let _ = through;
        self.progress.send_modify(|p| {
            p.failure = Some((Lsn::MAX, Arc::from(message)));
            p.failures += 1;
        });
    }

    /// Publishes `batch` grouped ([`Group`]), each message expecting the sequence of the one
    /// before it — predictable, since this writer alone writes (anyone else's write makes
    /// JetStream refuse ours) — and adds them to the window without awaiting their acks.
    pub(super) async fn send(
        &mut self,
        js: &jetstream::Context,
        batch: Vec<(Lsn, Vec<u8>)>,
        window: &mut std::collections::VecDeque<Sent>,
    ) {
        let through = batch.last().map_or(0, |(l, _)| l + 1);
        // A failed store stays failed (a refusal means another writer): these records are
        // never written, and their waiters are told so.
        if self.cancelled.load(Ordering::Acquire) {
            return self.fail(through, "the takeover was called off");
        }
        let failed = self.progress.borrow().failure.clone();
        if let Some((_, e)) = failed {
            return self.fail(through, &e);
        }
        for group in Group::all(batch, self.compress.load(Ordering::Relaxed)) {
            let expect = self.last_seq + window.len() as u64;
            let at = std::time::Instant::now();
            let ack: std::pin::Pin<Box<dyn std::future::Future<Output = AckResult> + Send>> =
                match self.publish_group(js, &group, expect).await {
                    Ok(ack) => std::future::IntoFuture::into_future(ack),
                    // Not sent: settled (and retried) in its turn, like a lost ack.
                    Err(e) => Box::pin(std::future::ready(Err(e))),
                };
            window.push_back(Sent { group, ack, at });
        }
    }

    /// Marks `headers` with this writer's message id for `what` (a position, `fence`, a
    /// snapshot record): JetStream drops a retry of a message it already stored, and
    /// recovery tells writers apart by it.
    pub(super) fn stamp(&self, headers: &mut HeaderMap, what: impl std::fmt::Display) {
        headers.insert(
            async_nats::header::NATS_MESSAGE_ID,
            format!("{}-{what}", self.writer_id).as_str(),
        );
    }

    /// Publishes one log message expecting the stream's last sequence to be `expect`.
    pub(super) async fn publish_group(
        &self,
        js: &jetstream::Context,
        group: &Group,
        expect: u64,
    ) -> Result<jetstream::context::PublishAckFuture, jetstream::context::PublishError> {
        let mut headers = HeaderMap::new();
        headers.insert(LSN, group.first.to_string().as_str());
        if group.count > 1 {
            headers.insert(COUNT, group.count.to_string().as_str());
        }
        if let Some(codec) = group.payload.codec {
            headers.insert(CODEC, codec);
        }
        headers.insert(
            async_nats::header::NATS_EXPECTED_LAST_SEQUENCE,
            expect.to_string().as_str(),
        );
        self.stamp(&mut headers, group.first);
        js.publish_with_headers(self.log_subject(), headers, group.payload.body.clone())
            .await
    }

    /// Awaits every message in the window, oldest first.
    pub(super) async fn drain(
        &mut self,
        js: &jetstream::Context,
        window: &mut std::collections::VecDeque<Sent>,
    ) {
        while let Some(mut sent) = window.pop_front() {
            let acked = sent.ack.as_mut().await;
            self.settle(js, sent, acked, window).await;
        }
    }

    /// The oldest message in the window was answered: acknowledged, its records are
    /// durable; otherwise [`Writer::repair`] takes over.
    pub(super) async fn settle(
        &mut self,
        js: &jetstream::Context,
        sent: Sent,
        acked: AckResult,
        window: &mut std::collections::VecDeque<Sent>,
    ) {
        match acked {
            Ok(ack) => {
                self.last_seq = ack.sequence;
                self.index
                    .insert(sent.group.first, Indexed::of(ack.sequence, &sent.group));
                self.kept(&[sent.group], sent.at);
            }
            Err(e) => {
                let first = Unacked::of(0, "JetStream refused a record", &e);
                self.repair(js, sent, first, window).await;
            }
        }
    }

    /// Counts `groups` as kept and tells their waiters.
    pub(super) fn kept(&self, groups: &[Group], since: std::time::Instant) {
        let Some(last) = groups.last() else { return };
        {
            let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
            s.appended_records += groups.iter().map(|g| g.count).sum::<u64>();
            let raw = groups.iter().map(|g| g.raw_bytes).sum::<u64>();
            s.log_bytes += raw;
            s.appended_bytes += raw;
            s.stored_bytes += groups
                .iter()
                .map(|g| g.payload.body.len() as u64)
                .sum::<u64>();
            s.syncs += 1;
            s.sync_micros += since.elapsed().as_micros() as u64;
        }
        let through = last.first + last.count;
        self.progress
            .send_modify(|p| p.durable = p.durable.max(through));
    }
}
