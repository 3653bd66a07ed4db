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
//! ([`group::Group`]): JetStream's cost (and its replicas') is per message, not per byte, so a
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

mod group;
mod lead;
mod publish;
mod recover;
mod retry;
mod snapshot;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};

use self::group::Indexed;
use self::recover::Recovery;
use super::hold::Hold;
use super::packed::CODEC;
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
/// Most records taken into one flush.
const MAX_BATCH: usize = 1_000;

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

/// A log message published and not yet acknowledged.
struct Sent {
    group: group::Group,
    ack: std::pin::Pin<Box<dyn std::future::Future<Output = AckResult> + Send>>,
    at: std::time::Instant,
}

type AckResult = Result<
    async_nats::jetstream::publish::PublishAck,
    async_nats::jetstream::context::PublishError,
>;

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
}
