//! A [`Store`] on a NATS JetStream stream: the replicated log of scale-out (issue 17), first
//! as a store of its own that passes the one suite. Records are published in order to
//! `sqsim.<name>.log`, each with its position (`Sqsim-Lsn`) and with the stream sequence it
//! must follow (`Nats-Expected-Last-Sequence`): JetStream refuses a publish when anyone else
//! wrote in between, so a second writer (a stalled former owner) can never interleave —
//! that refusal is final and leaves the store unwritable. A record is durable once
//! JetStream acknowledged it (after its replicas stored it). A snapshot's records go to
//! `sqsim.<name>.snap` with the position they stand for (`Sqsim-At`), the last one marked
//! (`Sqsim-End`); once complete, the log before it and older snapshots are purged.
//!
//! Records queued together are published together, as one message when they fit
//! ([`Group`]): JetStream's cost (and its replicas') is per message, not per byte, so a
//! busy shard pays it once per flush rather than once per request — the replicated log's
//! group commit, as the log store's is one fsync for many requests.
//!
//! The owner of a shard can move its stream's leadership to another JetStream server
//! between two writes ([`JetStreamStore::lead_on`]; `cluster::leaders` spreads leaders).
//!
//! All network I/O runs on one thread with its own runtime, shared by every store of the
//! process over one connection per server list (`nats_io`), so the store serves the
//! engine's synchronous calls and async request handlers alike, as the log store's writer
//! thread does.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_nats::jetstream::{self, stream};
use async_nats::HeaderMap;
use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use super::hold::Hold;
use super::packed::{self, Packed, CODEC};
use super::{Apply, Lsn, Progress, Recovered, Store, StoreError, StoreStats};

const LSN: &str = "Sqsim-Lsn";
const AT: &str = "Sqsim-At";
const END: &str = "Sqsim-End";
/// The writer of a snapshot record.
const WRITER: &str = "Sqsim-Writer";
/// Marks the one record of a snapshot of nothing (so that it can be found).
const EMPTY: &str = "Sqsim-Empty";
/// How many records a log message holds, when more than one.
const COUNT: &str = "Sqsim-Count";
/// Most bytes of records grouped into one message: under NATS's default `max_payload`
/// (1 MiB), so a server left at its defaults takes every group. A larger record goes alone.
const MAX_GROUP_BYTES: usize = 512 << 10;
/// Largest record the stream takes (a full batch with attributes fits many times).
const MAX_RECORD: i32 = 8 << 20;
/// Most records taken into one flush.
const MAX_BATCH: usize = 1_000;
/// Most log messages a shard has published and not yet seen acknowledged: well under the
/// client's limit of acks in flight, which would otherwise make a publish wait for acks
/// nobody awaits. More than one, so that a request does not wait for the ack of the publish
/// before its own (a shard's throughput is no longer one round trip and fsync per flush).
const WINDOW: usize = 16;

/// How long a leadership move waits for the new leader to answer before writing goes on
/// (an election that does not settle is JetStream's to finish; writes then retry as usual).
const LEAD_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a write JetStream did not acknowledge (and did not refuse) is retried before
/// the store gives up: longer than JetStream takes to elect a stream's new leader.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(20);
const RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// Why records were not all acknowledged.
struct Unacked {
    /// Records acknowledged before the first that was not.
    acked: usize,
    error: String,
    /// JetStream refused (another writer wrote first): final, never retried.
    refused: bool,
}

impl Unacked {
    fn of(acked: usize, what: &str, e: &jetstream::context::PublishError) -> Unacked {
        use jetstream::context::PublishErrorKind::{WrongLastMessageId, WrongLastSequence};
        Unacked {
            acked,
            error: format!("{what}: {e}"),
            refused: matches!(e.kind(), WrongLastSequence | WrongLastMessageId),
        }
    }
}

/// A log message published and not yet acknowledged.
struct Sent {
    group: Group,
    ack: std::pin::Pin<Box<dyn std::future::Future<Output = AckResult> + Send>>,
    at: std::time::Instant,
}

type AckResult = Result<jetstream::publish::PublishAck, jetstream::context::PublishError>;

/// Consecutive records published as one log message: one record as it is, several framed
/// as (4-byte little-endian length, bytes) each, with [`COUNT`] saying how many; then
/// compressed when that pays ([`packed`]).
struct Group {
    /// The first record's position; the others follow it.
    first: Lsn,
    count: u64,
    /// The records' bytes before compression.
    raw_bytes: u64,
    payload: Packed,
}

impl Group {
    /// `records` (in position order) as groups of at most [`MAX_GROUP_BYTES`], compressed
    /// if `compress` ([`packed::pack`]).
    fn all(records: Vec<(Lsn, Vec<u8>)>, compress: bool) -> Vec<Group> {
        let mut groups = Vec::new();
        let mut open: Vec<(Lsn, Vec<u8>)> = Vec::new();
        let mut size = 0;
        for (lsn, record) in records {
            if !open.is_empty() && size + 4 + record.len() > MAX_GROUP_BYTES {
                groups.push(Group::of(std::mem::take(&mut open), compress));
                size = 0;
            }
            size += 4 + record.len();
            open.push((lsn, record));
        }
        if !open.is_empty() {
            groups.push(Group::of(open, compress));
        }
        groups
    }

    fn of(mut records: Vec<(Lsn, Vec<u8>)>, compress: bool) -> Group {
        let first = records[0].0;
        let count = records.len() as u64;
        let raw = if records.len() == 1 {
            records.pop().expect("one record").1
        } else {
            let len = records.iter().map(|(_, r)| 4 + r.len()).sum();
            let mut raw = Vec::with_capacity(len);
            for (_, r) in &records {
                raw.extend_from_slice(&(r.len() as u32).to_le_bytes());
                raw.extend_from_slice(r);
            }
            raw
        };
        Group {
            first,
            count,
            raw_bytes: raw.len() as u64,
            payload: packed::pack(raw, compress),
        }
    }

    /// The records of a log message that holds `count` of them; `None` if the framing does
    /// not add up (the message is not what this writer publishes).
    fn split(payload: &[u8], count: u64) -> Option<Vec<Vec<u8>>> {
        let mut records = Vec::with_capacity(count.min(1 << 16) as usize);
        let mut rest = payload;
        while !rest.is_empty() {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let len = u32::from_le_bytes(*len) as usize;
            if tail.len() < len {
                return None;
            }
            records.push(tail[..len].to_vec());
            rest = &tail[len..];
        }
        (records.len() as u64 == count).then_some(records)
    }
}

/// What the writer thread is asked to do, in order.
enum Cmd {
    Recover(std::sync::mpsc::Sender<Result<Recovery, StoreError>>),
    Append(Lsn, Vec<u8>),
    Snapshot(
        Lsn,
        Vec<Vec<u8>>,
        std::sync::mpsc::Sender<Result<(), StoreError>>,
    ),
    Close(std::sync::mpsc::Sender<()>),
    /// Move the stream's leadership to this JetStream server ([`JetStreamStore::lead_on`]).
    Lead(
        String,
        tokio::sync::oneshot::Sender<Result<bool, StoreError>>,
    ),
}

/// A log message as the writer remembers it.
#[derive(Debug, Clone, Copy)]
struct Indexed {
    seq: u64,
    bytes: u64,
    count: u64,
}

/// A snapshot's records as recovery reads them, and whether its end was found.
type SnapshotRead = (Vec<Vec<u8>>, bool);

/// Everything recovery found, handed back to the caller's thread to apply.
struct Recovery {
    snapshot: Vec<Vec<u8>>,
    log: Vec<(Lsn, Vec<u8>)>,
    next_lsn: Lsn,
}

/// A store on a JetStream stream; see the module documentation.
#[derive(Debug)]
pub(crate) struct JetStreamStore {
    tx: mpsc::UnboundedSender<Cmd>,
    /// The next position; held while queueing an append, so positions follow queue order.
    next: Mutex<Lsn>,
    progress: watch::Receiver<Progress>,
    stats: Arc<Mutex<StoreStats>>,
}

impl JetStreamStore {
    /// Connects to `url` and opens (or creates) the stream for `name`, kept on `replicas`
    /// JetStream servers (the cluster opens its shards cancellably).
    #[cfg(test)]
    pub(crate) fn open(url: &str, name: &str, replicas: usize) -> Result<Self, StoreError> {
        Self::open_cancellable(
            url,
            name,
            replicas,
            Arc::default(),
            Arc::new(AtomicBool::new(true)),
        )
    }

    /// [`JetStreamStore::open`] for a takeover that may be called off: once `cancelled` is
    /// set, the store writes nothing more (not its fence, not a record), so an abandoned
    /// takeover cannot disturb the node that took the shard instead. Log and snapshot
    /// messages are compressed while `compress` is set (the cluster clears it while a node
    /// that cannot read them holds shards).
    pub(crate) fn open_cancellable(
        url: &str,
        name: &str,
        replicas: usize,
        cancelled: Arc<AtomicBool>,
        compress: Arc<AtomicBool>,
    ) -> Result<Self, StoreError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (progress_tx, progress) = watch::channel(Progress::default());
        let stats = Arc::new(Mutex::new(StoreStats {
            writable: true,
            ..StoreStats::default()
        }));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let writer = Writer {
            url: url.to_string(),
            name: name.to_string(),
            replicas,
            progress: progress_tx,
            stats: Arc::clone(&stats),
            last_seq: 0,
            index: BTreeMap::new(),
            writer_id: uuid::Uuid::new_v4().simple().to_string(),
            cancelled,
            compress,
            hold: Hold::new(MAX_BATCH),
        };
        let io = super::nats_io::io()?;
        io.runtime.spawn(async move {
            let url = writer.url.clone();
            let connected = writer.run(rx, ready_tx).await;
            if connected {
                io.release(&url).await;
            }
        });
        ready_rx
            .recv()
            .map_err(|_| io_error("the JetStream writer stopped while connecting"))??;
        Ok(JetStreamStore {
            tx,
            next: Mutex::new(0),
            progress,
            stats,
        })
    }

    /// Moves the stream's leadership to the JetStream server named `server` (one of the
    /// stream's replicas) between two writes: every message in flight is acknowledged
    /// first, and the next is published only once the new leader answers. A publish
    /// caught by a bare step-down goes unanswered until the client's timeout (5 s); this way
    /// the shard pauses for about one round trip and an election. Whether `server` leads
    /// the stream afterwards (JetStream older than 2.11 ignores the preference).
    pub(crate) async fn lead_on(&self, server: &str) -> Result<bool, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.tx
            .send(Cmd::Lead(server.to_string(), reply))
            .map_err(|_| io_error("the store is closed"))?;
        answer.await.map_err(|_| io_error("the store is closed"))?
    }
}

/// The JetStream stream a store named `name` writes to.
pub(crate) fn stream_of(name: &str) -> String {
    format!("SQSIM_{name}")
}

/// The servers of a comma-separated list of NATS URLs (any of them reaches the cluster; the
/// client fails over between them).
pub(crate) fn servers(urls: &str) -> Result<Vec<async_nats::ServerAddr>, StoreError> {
    urls.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(|u| {
            u.parse()
                .map_err(|e| io_error(format!("bad NATS URL {u:?}: {e}")))
        })
        .collect()
}

fn io_error(message: impl std::fmt::Display) -> StoreError {
    StoreError::Io(Arc::from(message.to_string()))
}

impl Store for JetStreamStore {
    fn recover(&self, apply: &mut Apply<'_>) -> Result<Recovered, StoreError> {
        let (reply, answer) = std::sync::mpsc::channel();
        self.tx
            .send(Cmd::Recover(reply))
            .map_err(|_| io_error("the store is closed"))?;
        let found = answer
            .recv()
            .map_err(|_| io_error("the JetStream writer stopped"))??;
        let mut report = Recovered::default();
        for r in &found.snapshot {
            apply(None, r).map_err(|reason| StoreError::Replay { lsn: 0, reason })?;
            report.records += 1;
            report.from_snapshot += 1;
        }
        for (lsn, r) in &found.log {
            apply(Some(*lsn), r).map_err(|reason| StoreError::Replay { lsn: *lsn, reason })?;
            report.records += 1;
        }
        *self.next.lock().unwrap_or_else(|p| p.into_inner()) = found.next_lsn;
        Ok(report)
    }

    fn append(&self, record: &[u8]) -> Lsn {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let lsn = *next;
        *next += 1;
        // A closed store never makes it durable; waiters are told so by the progress.
        let _ = self.tx.send(Cmd::Append(lsn, record.to_vec()));
        lsn
    }

    fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.clone()
    }

    fn snapshot(
        &self,
        at: Lsn,
        records: &mut dyn Iterator<Item = Vec<u8>>,
    ) -> Result<(), StoreError> {
        let (reply, answer) = std::sync::mpsc::channel();
        self.tx
            .send(Cmd::Snapshot(at, records.collect(), reply))
            .map_err(|_| io_error("the store is closed"))?;
        answer.recv().map_err(|_| io_error("the store is closed"))?
    }

    fn next_lsn(&self) -> Lsn {
        *self.next.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn stats(&self) -> StoreStats {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn is_writable(&self) -> bool {
        self.stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .writable
    }

    fn close(&self) {
        let (reply, answer) = std::sync::mpsc::channel();
        if self.tx.send(Cmd::Close(reply)).is_ok() {
            let _ = answer.recv();
        }
    }
}

impl Drop for JetStreamStore {
    fn drop(&mut self) {
        self.close();
    }
}

/// The thread that owns the connection.
struct Writer {
    url: String,
    name: String,
    replicas: usize,
    progress: watch::Sender<Progress>,
    stats: Arc<Mutex<StoreStats>>,
    /// The stream's last sequence as this writer knows it: what the next publish expects.
    last_seq: u64,
    /// Each kept log message by its first record's position: its stream sequence, its size
    /// and how many records it holds — where a snapshot's purge ends, and the log's size,
    /// without reading the stream back.
    index: BTreeMap<Lsn, Indexed>,
    /// Unique to this writer: its records' message ids start with it, so JetStream drops
    /// this writer's retries of a stored record, and only those.
    writer_id: String,
    /// Set when the takeover this store serves was called off: nothing more is written.
    cancelled: Arc<AtomicBool>,
    /// Whether messages may be compressed: cleared while a node that cannot read them
    /// holds shards of the cluster (`cluster::Owner::format`).
    compress: Arc<AtomicBool>,
    /// How long a record waits for others before it is published ([`Hold`]).
    hold: Hold,
}

impl Indexed {
    fn of(seq: u64, group: &Group) -> Indexed {
        Indexed {
            seq,
            bytes: group.raw_bytes,
            count: group.count,
        }
    }
}

impl Writer {
    /// The stream's name in JetStream.
    fn stream(&self) -> String {
        stream_of(&self.name)
    }

    fn log_subject(&self) -> String {
        format!("sqsim.{}.log", self.name)
    }

    fn snap_subject(&self) -> String {
        format!("sqsim.{}.snap", self.name)
    }

    fn fence_subject(&self) -> String {
        format!("sqsim.{}.fence", self.name)
    }

    /// Serves the store's commands until it is closed; `false` if it never got a connection
    /// (otherwise its use of the shared connection is given back afterwards).
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Cmd>,
        ready: std::sync::mpsc::Sender<Result<(), StoreError>>,
    ) -> bool {
        let client = match super::nats_io::io() {
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

    /// The stream's leader as JetStream reports it now (`None` while it elects one: the
    /// leader answers the question).
    async fn leader(&self, js: &jetstream::Context) -> Option<String> {
        let asked =
            js.request::<_, _, serde_json::Value>(format!("STREAM.INFO.{}", self.stream()), &());
        let info = tokio::time::timeout(std::time::Duration::from_millis(250), asked)
            .await
            .ok()?
            .ok()?;
        Some(info.pointer("/cluster/leader")?.as_str()?.to_string())
    }

    /// See [`JetStreamStore::lead_on`]; called with nothing in flight.
    async fn lead(&self, js: &jetstream::Context, server: &str) -> Result<bool, StoreError> {
        let before = self.leader(js).await;
        if before.as_deref() == Some(server) {
            return Ok(true);
        }
        let asked: serde_json::Value = js
            .request(
                format!("STREAM.LEADER.STEPDOWN.{}", self.stream()),
                &serde_json::json!({ "placement": { "preferred": server } }),
            )
            .await
            .map_err(|e| io_error(format!("cannot move the stream's leader: {e}")))?;
        if let Some(e) = asked.get("error") {
            return Err(io_error(format!(
                "JetStream did not move the stream's leader: {e}"
            )));
        }
        let deadline = std::time::Instant::now() + LEAD_WAIT;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            let now = self.leader(js).await;
            if now.as_deref() == Some(server) {
                return Ok(true);
            }
            // Another server was elected: the preference was not followed.
            if now.is_some() && now != before {
                return Ok(false);
            }
            if std::time::Instant::now() >= deadline {
                return Ok(false);
            }
        }
    }

    /// Opens (or creates) the stream on `client`'s connection.
    async fn connect(
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
    fn fail(&self, through: Lsn, message: &str) {
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
    async fn send(
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
    fn stamp(&self, headers: &mut HeaderMap, what: impl std::fmt::Display) {
        headers.insert(
            async_nats::header::NATS_MESSAGE_ID,
            format!("{}-{what}", self.writer_id).as_str(),
        );
    }

    /// Publishes one log message expecting the stream's last sequence to be `expect`.
    async fn publish_group(
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
    async fn drain(
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
    async fn settle(
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
    fn kept(&self, groups: &[Group], since: std::time::Instant) {
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

    /// The oldest message in the window was not acknowledged (`stop`). A refusal (another
    /// writer) leaves the store failed; anything else (a timeout while JetStream elects a
    /// new leader, a lost connection) is retried for [`RETRY_FOR`], from that message on,
    /// with every later one in the window (their own answers are not awaited): each carries
    /// a message id, so one that was stored though its ack was lost (or that lands after
    /// its retry was sent) is not stored twice.
    async fn repair(
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
    async fn publish_from(
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
    async fn landed(&mut self, js: &jetstream::Context, rest: &[Group]) -> Option<usize> {
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
    async fn publish_one(
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

    /// Reads the stream: the newest complete snapshot, and the log records at or after the
    /// position it stands for.
    async fn recover(&mut self, js: &jetstream::Context) -> Result<Recovery, StoreError> {
        let stream = js
            .get_stream(self.stream())
            .await
            .map_err(|e| io_error(format!("cannot open the stream: {e}")))?;
        let mut stream = stream;
        let state = stream
            .info()
            .await
            .map_err(|e| io_error(format!("cannot read the stream: {e}")))?
            .state
            .clone();
        let mut log = BTreeMap::new();
        // Snapshots by the position they stand for and their writer (two writers' records of
        // one position never mix): (records, complete).
        let mut snapshots: BTreeMap<(Lsn, String), SnapshotRead> = BTreeMap::new();
        let mut snapshot_bytes = 0;
        // The writer of the last fence read: from a fence on, only its writer's records
        // count. Another writer's record after it can only be a former owner's publish that
        // slipped into the slot of one of its own that was lost (its expected sequence then
        // matches the fence's): never acknowledged, since the one before it was not.
        let mut epoch: Option<String> = None;
        // The position the next log message should start at.
        let mut next: Option<Lsn> = None;
        if state.messages > 0 {
            for seq in state.first_sequence..=state.last_sequence {
                let m = match stream.get_raw_message(seq).await {
                    Ok(m) => m,
                    // Purged: a gap.
                    Err(e) if e.kind() == stream::RawMessageErrorKind::NoMessageFound => continue,
                    // Anything else would silently drop a record: recovery fails instead.
                    Err(e) => return Err(io_error(format!("cannot read record {seq}: {e}"))),
                };
                let header = |name: &str| {
                    m.headers
                        .get(name)
                        .and_then(|v| v.as_str().parse::<u64>().ok())
                };
                let writer = m
                    .headers
                    .get(async_nats::header::NATS_MESSAGE_ID)
                    .and_then(|id| id.as_str().split('-').next().map(str::to_string));
                if m.subject.as_str() == self.fence_subject() {
                    epoch = writer;
                    continue;
                }
                if epoch.is_some() && writer != epoch {
                    tracing::warn!(
                        seq,
                        stream = %self.name,
                        "skipping a record a former owner wrote after another's fence"
                    );
                    continue;
                }
                let payload = packed::unpack(
                    m.headers.get(CODEC).map(|v| v.as_str()),
                    m.payload.clone(),
                    super::frame::MAX_RECORD,
                )
                .map_err(|e| io_error(format!("message {seq}: {e}")))?;
                if m.subject.as_str() == self.log_subject() {
                    let first =
                        header(LSN).ok_or_else(|| io_error("a log record has no position"))?;
                    let count = header(COUNT).unwrap_or(1);
                    let records = if count == 1 {
                        vec![payload.to_vec()]
                    } else {
                        Group::split(&payload, count).ok_or_else(|| {
                            io_error(format!(
                                "log message {seq} does not hold the {count} records it says"
                            ))
                        })?
                    };
                    // Durability is a prefix of the positions: a message past a gap was
                    // never acknowledged (one before it was lost), so it is left out; a
                    // writer starting again below what was read (a new owner after its
                    // fence) replaces what lay there, which was never acknowledged either.
                    match next {
                        Some(n) if first > n => {
                            tracing::warn!(seq, stream = %self.name, "skipping a record after a gap");
                            continue;
                        }
                        Some(n) if first < n => {
                            drop(log.split_off(&first));
                            drop(self.index.split_off(&first));
                        }
                        _ => {}
                    }
                    next = Some(first + count);
                    let bytes = payload.len() as u64;
                    self.index.insert(first, Indexed { seq, bytes, count });
                    for (i, r) in records.into_iter().enumerate() {
                        log.insert(first + i as u64, r);
                    }
                } else if let Some(at) = header(AT) {
                    snapshot_bytes += payload.len() as u64;
                    let writer = m
                        .headers
                        .get(WRITER)
                        .map(|v| v.as_str().to_string())
                        .unwrap_or_default();
                    let entry = snapshots.entry((at, writer)).or_default();
                    if m.headers.get(EMPTY).is_none() {
                        entry.0.push(payload.to_vec());
                    }
                    entry.1 |= m.headers.get(END).is_some();
                }
            }
        }
        let (at, snapshot) = snapshots
            .into_iter()
            .rev()
            .find(|(_, (_, complete))| *complete)
            .map(|((at, _), (records, _))| (at, records))
            .unwrap_or((0, Vec::new()));
        let log: Vec<(Lsn, Vec<u8>)> = log.into_iter().filter(|(l, _)| *l >= at).collect();
        let log_bytes = self.index.values().map(|m| m.bytes).sum();
        let next_lsn = log.last().map_or(at, |(l, _)| l + 1);
        self.fence(js, state.last_sequence).await?;
        self.progress.send_modify(|p| p.durable = next_lsn);
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.log_bytes = log_bytes;
        s.snapshot_bytes = snapshot_bytes;
        Ok(Recovery {
            snapshot,
            log,
            next_lsn,
        })
    }

    /// Ends recovery with a write on top of the last record read (`read_to`): refused if
    /// anyone wrote since, and from now on every write of a former owner is refused, so a
    /// writer that stalled and resumes can never add to what this one recovered.
    async fn fence(&mut self, js: &jetstream::Context, read_to: u64) -> Result<(), StoreError> {
        if self.cancelled.load(Ordering::Acquire) {
            return Err(io_error("the takeover was called off"));
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            async_nats::header::NATS_EXPECTED_LAST_SEQUENCE,
            read_to.to_string().as_str(),
        );
        let ack = self
            .publish_one(js, self.fence_subject(), headers, Bytes::new(), "fence")
            .await
            .map_err(|e| {
                io_error(format!(
                    "another writer appended during recovery (the fence was not written: {})",
                    e.error
                ))
            })?;
        self.last_seq = ack.sequence;
        Ok(())
    }

    /// Publishes a snapshot standing for position `at`, then purges what it replaces. Every
    /// append queued before it was published (and acknowledged) first.
    async fn snapshot(
        &mut self,
        js: &jetstream::Context,
        at: Lsn,
        records: Vec<Vec<u8>>,
    ) -> Result<(), StoreError> {
        if let Some((_, e)) = &self.progress.borrow().failure {
            return Err(StoreError::Io(Arc::clone(e)));
        }
        let count = records.len();
        let mut first_seq = None;
        let mut bytes = 0u64;
        // Even an empty snapshot is one (end) record, so that it can be found.
        let records = if records.is_empty() {
            vec![Vec::new()]
        } else {
            records
        };
        let headers = |i: usize, expect: u64| {
            let mut headers = HeaderMap::new();
            headers.insert(AT, at.to_string().as_str());
            headers.insert(WRITER, self.writer_id.as_str());
            if i + 1 == count.max(1) {
                headers.insert(END, "1");
            }
            if count == 0 {
                headers.insert(EMPTY, "1");
            }
            headers.insert(
                async_nats::header::NATS_EXPECTED_LAST_SEQUENCE,
                expect.to_string().as_str(),
            );
            headers
        };
        let id = |i: usize| format!("snap-{at}-{i}");
        bytes += records.iter().map(|r| r.len() as u64).sum::<u64>();
        // Published back to back, each expecting the one before it, and then acknowledged:
        // a snapshot of many records costs about one round trip, not one per record. From
        // the first one not acknowledged on, one at a time with retries (a retry of one that
        // landed is dropped by its message id).
        let compress = self.compress.load(Ordering::Relaxed);
        let records: Vec<Packed> = records
            .into_iter()
            .map(|r| packed::pack(r, compress))
            .collect();
        let headers = |i: usize, expect: u64| {
            let mut h = headers(i, expect);
            if let Some(codec) = records[i].codec {
                h.insert(CODEC, codec);
            }
            h
        };
        let mut acks = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            let mut h = headers(i, self.last_seq + i as u64);
            self.stamp(&mut h, id(i));
            match js
                .publish_with_headers(self.snap_subject(), h, record.body.clone())
                .await
            {
                Ok(ack) => acks.push(ack),
                Err(_) => break,
            }
        }
        let mut confirmed = 0;
        for ack in acks {
            match ack.await {
                Ok(ack) => {
                    self.last_seq = ack.sequence;
                    first_seq.get_or_insert(ack.sequence);
                    confirmed += 1;
                }
                Err(_) => break,
            }
        }
        for (i, record) in records.iter().enumerate().skip(confirmed) {
            let published = self
                .publish_one(
                    js,
                    self.snap_subject(),
                    headers(i, self.last_seq),
                    record.body.clone(),
                    &id(i),
                )
                .await
                .map_err(|e| e.error);
            // Not written: another writer, or JetStream unreachable for long; either way
            // nothing more from this one is durable.
            let ack = published.map_err(|e| {
                self.fail(Lsn::MAX, &e);
                io_error(e)
            })?;
            self.last_seq = ack.sequence;
            first_seq.get_or_insert(ack.sequence);
        }
        let stream = js
            .get_stream(self.stream())
            .await
            .map_err(|e| io_error(format!("cannot open the stream: {e}")))?;
        // Older snapshots and fences, then log records before `at`, are no longer needed.
        if let Some(first) = first_seq {
            for subject in [self.snap_subject(), self.fence_subject()] {
                stream
                    .purge()
                    .filter(subject)
                    .sequence(first)
                    .await
                    .map_err(|e| io_error(format!("cannot purge old snapshots: {e}")))?;
            }
        }
        // The first message still needed holds `at`, or comes after it.
        let keep = match self.index.range(..=at).next_back() {
            Some((first, m)) if first + m.count > at => *first,
            _ => at,
        };
        let keep_from = self
            .index
            .range(keep..)
            .next()
            .map_or(self.last_seq + 1, |(_, m)| m.seq);
        stream
            .purge()
            .filter(self.log_subject())
            .sequence(keep_from)
            .await
            .map_err(|e| io_error(format!("cannot purge the log: {e}")))?;
        self.index = self.index.split_off(&keep);
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.snapshots += 1;
        s.snapshot_bytes = bytes;
        s.log_bytes = self.index.values().map(|m| m.bytes).sum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::durable;
    use crate::store::suite::{block_on, NatsServer};

    fn recovered(s: &JetStreamStore) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        s.recover(&mut |_, r| {
            out.push(r.to_vec());
            Ok(())
        })
        .unwrap();
        out
    }

    /// Fencing: a writer that opened the stream before another one wrote (a paused former
    /// owner, resumed after a new owner took over) cannot append: JetStream refuses its
    /// publish, the append is never durable, and the store says it is no longer writable.
    #[test]
    fn a_stale_writer_is_refused() {
        let server = NatsServer::start();
        let old = JetStreamStore::open(&server.url, "fenced", 1).unwrap();
        recovered(&old);
        let l = old.append(b"from the old owner");
        block_on(durable(&old, l)).unwrap();

        // A new owner takes over while the old one is paused. Its recovery alone fences the
        // old one (before the new owner writes anything).
        let new = JetStreamStore::open(&server.url, "fenced", 1).unwrap();
        assert_eq!(recovered(&new), vec![b"from the old owner".to_vec()]);
        let early = old.append(b"stale write before the new owner wrote");
        let err = block_on(durable(&old, early)).expect_err("recovery must fence");
        assert!(err.to_string().contains("refused"), "{err}");
        let l = new.append(b"from the new owner");
        block_on(durable(&new, l)).unwrap();

        // The old owner tries again: refused, and stays refused.
        let late = old.append(b"late write");
        let err = block_on(durable(&old, late)).expect_err("a stale writer must be fenced");
        assert!(err.to_string().contains("refused"), "{err}");
        assert!(!old.stats().writable);
        let l = new.append(b"new owner again");
        block_on(durable(&new, l)).unwrap();

        let check = JetStreamStore::open(&server.url, "fenced", 1).unwrap();
        assert_eq!(
            recovered(&check),
            vec![
                b"from the old owner".to_vec(),
                b"from the new owner".to_vec(),
                b"new owner again".to_vec()
            ]
        );
    }

    /// Records queued while a publish waits for its ack go out together as one message
    /// (JetStream's cost is per message), and come back one by one, each at its position —
    /// also when a snapshot's position falls inside a message.
    #[test]
    fn records_queued_together_are_one_message_and_come_back_one_by_one() {
        let server = NatsServer::start();
        let store = JetStreamStore::open(&server.url, "grouped", 1).unwrap();
        recovered(&store);
        let record = |i: u64| format!("record {i}").into_bytes();
        let last = (0..500).map(|i| store.append(&record(i))).last().unwrap();
        block_on(durable(&store, last)).unwrap();
        assert_eq!(store.stats().appended_records, 500);
        // The fence, the first append alone (nothing else was queued yet), and the rest in
        // a few groups.
        let published = stream_state(&server.url, "grouped").messages;
        assert!(published <= 10, "500 records in {published} messages");

        // A snapshot standing for position 250, inside a group: the group stays (its later
        // records are needed), recovery starts at 250.
        store
            .snapshot(250, &mut std::iter::once(b"state at 250".to_vec()))
            .unwrap();
        let l = store.append(b"after the snapshot");
        block_on(durable(&store, l)).unwrap();
        drop(store);
        let reopened = JetStreamStore::open(&server.url, "grouped", 1).unwrap();
        let mut positions = Vec::new();
        let mut records = Vec::new();
        reopened
            .recover(&mut |lsn, r| {
                positions.push(lsn);
                records.push(r.to_vec());
                Ok(())
            })
            .unwrap();
        let mut expected = vec![b"state at 250".to_vec()];
        expected.extend((250..500).map(record));
        expected.push(b"after the snapshot".to_vec());
        assert_eq!(records, expected);
        assert_eq!(positions[0], None);
        assert_eq!(
            positions[1..],
            (250..=500).map(Some).collect::<Vec<_>>()[..]
        );
        assert_eq!(reopened.next_lsn(), 501);
    }

    /// What JetStream says the stream of store `name` holds.
    fn stream_state(url: &str, name: &str) -> stream::State {
        block_on(async {
            let client = async_nats::connect(url).await.unwrap();
            let js = jetstream::new(client);
            let mut stream = js.get_stream(stream_of(name)).await.unwrap();
            stream.info().await.unwrap().state.clone()
        })
    }

    /// Publishes a raw message to `subject` of stream `name` with a message id and headers,
    /// expecting the stream's last sequence: what another writer's publish looks like.
    fn publish_raw(url: &str, name: &str, subject: &str, id: &str, lsn: Option<u64>, body: &[u8]) {
        publish_raw_with(url, name, subject, id, lsn, &[], body)
    }

    /// [`publish_raw`] with `extra` headers.
    fn publish_raw_with(
        url: &str,
        name: &str,
        subject: &str,
        id: &str,
        lsn: Option<u64>,
        extra: &[(&str, &str)],
        body: &[u8],
    ) {
        block_on(async {
            let client = async_nats::connect(url).await.unwrap();
            let js = jetstream::new(client);
            let mut stream = js.get_stream(stream_of(name)).await.unwrap();
            let last = stream.info().await.unwrap().state.last_sequence;
            let mut headers = HeaderMap::new();
            headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
            headers.insert(
                async_nats::header::NATS_EXPECTED_LAST_SEQUENCE,
                last.to_string().as_str(),
            );
            if let Some(lsn) = lsn {
                headers.insert(LSN, lsn.to_string().as_str());
            }
            for (k, v) in extra {
                headers.insert(*k, *v);
            }
            let subject = format!("sqsim.{name}.{subject}");
            let ack = js
                .publish_with_headers(subject, headers, Bytes::copy_from_slice(body))
                .await
                .unwrap();
            ack.await.unwrap();
        })
    }

    /// Log and snapshot messages are compressed when that pays (`store::packed`) and come
    /// back whole; a message in an encoding this version does not know stops recovery
    /// instead of being read as something else or skipped.
    #[test]
    fn compressed_messages_come_back_whole_and_an_unknown_encoding_stops_recovery() {
        let server = NatsServer::start();
        let store = JetStreamStore::open(&server.url, "packed", 1).unwrap();
        recovered(&store);
        let record = |i: u64| format!("{i:08} {}", "the same words again ".repeat(40)).into_bytes();
        let last = (0..50).map(|i| store.append(&record(i))).last().unwrap();
        block_on(durable(&store, last)).unwrap();
        let st = store.stats();
        // The records' bytes, and a length before each of those that went in groups.
        let payload: u64 = (0..50).map(|i| record(i).len() as u64).sum();
        assert!(
            (payload..=payload + 4 * 50).contains(&st.appended_bytes),
            "{st:?}"
        );
        assert!(st.stored_bytes * 4 < st.appended_bytes, "{st:?}");
        let state: Vec<Vec<u8>> = (0..3u8).map(|i| vec![b'a' + i; 64 << 10]).collect();
        store.snapshot(25, &mut state.clone().into_iter()).unwrap();
        drop(store);
        // The snapshot's 192 KiB and the log's last 25 records take a fraction of that.
        let stored = stream_state(&server.url, "packed").bytes;
        assert!(stored < 32 << 10, "{stored} bytes stored");
        let reopened = JetStreamStore::open(&server.url, "packed", 1).unwrap();
        let mut expected = state;
        expected.extend((25..50).map(record));
        assert_eq!(recovered(&reopened), expected);
        drop(reopened);

        // A writer of a newer version fences and writes a message this one cannot read.
        publish_raw(&server.url, "packed", "fence", "z-fence", None, b"");
        publish_raw_with(
            &server.url,
            "packed",
            "log",
            "z-50",
            Some(50),
            &[(CODEC, "zstd")],
            b"\x28\xb5\x2f\xfd",
        );
        let newer = JetStreamStore::open(&server.url, "packed", 1).unwrap();
        let err = newer.recover(&mut |_, _| Ok(())).unwrap_err();
        assert!(err.to_string().contains("newer"), "{err}");
    }

    /// While the cluster says a node that cannot read compressed messages holds shards, the
    /// store writes them as they are; once it may, it compresses again; both read back.
    #[test]
    fn messages_are_written_uncompressed_while_compression_is_not_allowed() {
        let server = NatsServer::start();
        let allowed = Arc::new(AtomicBool::new(false));
        let store = JetStreamStore::open_cancellable(
            &server.url,
            "plain",
            1,
            Arc::default(),
            Arc::clone(&allowed),
        )
        .unwrap();
        recovered(&store);
        let record = |i: u64| format!("{i:08} {}", "alike ".repeat(100)).into_bytes();
        let write = |range: std::ops::Range<u64>| {
            let last = range.map(|i| store.append(&record(i))).last().unwrap();
            block_on(durable(&store, last)).unwrap();
            let st = store.stats();
            (st.appended_bytes, st.stored_bytes)
        };
        let (appended, stored) = write(0..20);
        assert_eq!(stored, appended, "nothing compressed while not allowed");
        allowed.store(true, Ordering::Relaxed);
        let (appended2, stored2) = write(20..40);
        assert!(
            (stored2 - stored) * 4 < appended2 - appended,
            "compressed once allowed: {} of {} bytes",
            stored2 - stored,
            appended2 - appended
        );
        drop(store);
        let reopened = JetStreamStore::open(&server.url, "plain", 1).unwrap();
        assert_eq!(
            recovered(&reopened),
            (0..40).map(record).collect::<Vec<_>>()
        );
    }

    /// Several writes in flight at once (the window): a publish expects the sequence of the
    /// one before it, which JetStream has not acknowledged yet. Concurrent appends from many
    /// threads all become durable, and come back in position order.
    #[test]
    fn appends_in_flight_together_are_all_kept_in_order() {
        let server = NatsServer::start();
        let store = Arc::new(JetStreamStore::open(&server.url, "window", 1).unwrap());
        recovered(&store);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = Arc::clone(&store);
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let l = store.append(format!("t{t} r{i}").as_bytes());
                        // Every fourth waits, so that the window fills and empties.
                        if i % 4 == 0 {
                            block_on(durable(&*store, l)).unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let last = store.next_lsn() - 1;
        block_on(durable(&*store, last)).unwrap();
        assert_eq!(store.stats().appended_records, 1_600);
        drop(store);
        let reopened = JetStreamStore::open(&server.url, "window", 1).unwrap();
        let mut positions = Vec::new();
        let mut per_thread = vec![Vec::new(); 8];
        reopened
            .recover(&mut |lsn, r| {
                positions.push(lsn.unwrap());
                let text = String::from_utf8(r.to_vec()).unwrap();
                let (t, i) = text.split_once(' ').unwrap();
                let t: usize = t[1..].parse().unwrap();
                per_thread[t].push(i[1..].parse::<u32>().unwrap());
                Ok(())
            })
            .unwrap();
        assert_eq!(positions, (0..1_600).collect::<Vec<_>>());
        for seen in per_thread {
            assert_eq!(seen, (0..200).collect::<Vec<_>>());
        }
    }

    /// The repair of a window: JetStream goes away (`kill -9`) while publishes are in
    /// flight and comes back. Whatever the lost publishes and acks were, each is retried from
    /// the first not acknowledged; every record appended is durable in the end, and comes
    /// back once, in order (a retry of one that was stored is dropped by its message id).
    #[test]
    fn publishes_in_flight_when_jetstream_restarts_are_kept_once_in_order() {
        let mut server = NatsServer::start();
        let store = Arc::new(JetStreamStore::open(&server.url, "restart", 1).unwrap());
        recovered(&store);
        let writer = {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut last = 0;
                for i in 0..400u32 {
                    last = store.append(format!("r{i}").as_bytes());
                    if i % 50 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(30));
                    }
                    std::thread::sleep(std::time::Duration::from_micros(500));
                }
                last
            })
        };
        // The appends take over 400 ms: some are sent while the server is down.
        std::thread::sleep(std::time::Duration::from_millis(60));
        server.kill_and_restart(std::time::Duration::from_millis(300));
        let last = writer.join().unwrap();
        block_on(durable(&*store, last)).expect("every append is kept once JetStream is back");
        assert!(store.stats().writable);
        drop(store);
        let reopened = JetStreamStore::open(&server.url, "restart", 1).unwrap();
        let expected: Vec<Vec<u8>> = (0..400).map(|i| format!("r{i}").into_bytes()).collect();
        assert_eq!(recovered(&reopened), expected);
    }

    /// Stream `name` holding `record`, written by a store that is closed again.
    fn kept_by_a_closed_store(url: &str, name: &str, record: &[u8]) {
        let store = JetStreamStore::open(url, name, 1).unwrap();
        recovered(&store);
        let l = store.append(record);
        block_on(durable(&store, l)).unwrap();
    }

    /// A former owner's publish that slips in after a new owner's fence (its expected
    /// sequence matching the fence's slot, a publish of its own before it having been lost)
    /// was never acknowledged, and neither was a record after a gap in the positions:
    /// recovery leaves both out, and the store goes on from the last record that counts.
    #[test]
    fn a_record_after_another_writers_fence_or_after_a_gap_is_not_recovered() {
        let server = NatsServer::start();
        kept_by_a_closed_store(&server.url, "slip", b"kept");
        // A new owner (writer "b") fences; the old one ("a") slips a record in after it.
        publish_raw(&server.url, "slip", "fence", "b-fence", None, b"");
        publish_raw(&server.url, "slip", "log", "a-2", Some(2), b"stale");
        // The new owner writes position 1, then (after a lost publish) position 3.
        publish_raw(&server.url, "slip", "log", "b-1", Some(1), b"new owner");
        publish_raw(&server.url, "slip", "log", "b-3", Some(3), b"after a gap");
        let reopened = JetStreamStore::open(&server.url, "slip", 1).unwrap();
        assert_eq!(
            recovered(&reopened),
            vec![b"kept".to_vec(), b"new owner".to_vec()]
        );
        assert_eq!(reopened.next_lsn(), 2);
        let l = reopened.append(b"next");
        block_on(durable(&reopened, l)).unwrap();
        assert_eq!(l, 2);
        drop(reopened);
        let again = JetStreamStore::open(&server.url, "slip", 1).unwrap();
        assert_eq!(
            recovered(&again),
            vec![b"kept".to_vec(), b"new owner".to_vec(), b"next".to_vec()]
        );

        // Another writer's record right after a fence, at the very position that follows:
        // only the fence's writer may continue the log.
        kept_by_a_closed_store(&server.url, "fenced-slot", b"kept");
        publish_raw(&server.url, "fenced-slot", "fence", "b-fence", None, b"");
        publish_raw(&server.url, "fenced-slot", "log", "a-1", Some(1), b"stale");
        let reopened = JetStreamStore::open(&server.url, "fenced-slot", 1).unwrap();
        assert_eq!(recovered(&reopened), vec![b"kept".to_vec()]);
        assert_eq!(reopened.next_lsn(), 1);
    }

    #[test]
    fn a_group_that_does_not_add_up_is_refused() {
        let group = Group::of(
            vec![(7, b"ab".to_vec()), (8, b"".to_vec()), (9, b"xyz".to_vec())],
            true,
        );
        assert_eq!(group.first, 7);
        let raw = packed::unpack(group.payload.codec, group.payload.body.clone(), 1 << 20).unwrap();
        let records = Group::split(&raw, 3).unwrap();
        assert_eq!(records, vec![b"ab".to_vec(), Vec::new(), b"xyz".to_vec()]);
        assert!(Group::split(&raw, 2).is_none());
        assert!(Group::split(&raw[..raw.len() - 1], 3).is_none());
        // Large records are not grouped past the cap.
        let big = vec![0u8; MAX_GROUP_BYTES / 2];
        let groups = Group::all((0..5).map(|i| (i, big.clone())).collect(), true);
        assert_eq!(
            groups.iter().map(|g| g.count).collect::<Vec<_>>(),
            [1, 1, 1, 1, 1]
        );
    }
}
