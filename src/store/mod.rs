//! Durability: the seam between the engine, which stays the in-memory truth while running,
//! and whatever keeps its changes across restarts. A [`Store`] takes opaque records in order
//! (the engine encodes them), says when each is durable, replaces a prefix of the log with a
//! snapshot, and plays everything back on start-up. Every implementation passes the one suite
//! in `suite.rs`.
//!
//! - [`log::LogStore`]: an append-only log of checksummed frames in a data directory, with
//!   group commit and snapshots (the embedded durable store).
//! - [`jetstream::JetStreamStore`]: a NATS JetStream stream, replicated by JetStream (the
//!   replicated log of scale-out).
//! - [`memory::MemoryStore`]: keeps records in memory; for tests of the suite and of replay.

pub(crate) mod crash_point;
pub(crate) mod frame;
#[cfg(feature = "cluster")]
mod hold;
#[cfg(feature = "cluster")]
pub(crate) mod jetstream;
pub(crate) mod log;
#[cfg(test)]
pub(crate) mod memory;
#[cfg(feature = "cluster")]
pub(crate) mod nats_io;
#[cfg(feature = "cluster")]
mod packed;
#[cfg(feature = "cluster")]
pub(crate) use packed::{COMPRESSED_SINCE, FORMAT as LOG_FORMAT};
#[cfg(test)]
pub(crate) mod suite;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

/// A record's position in the log: the first record ever appended is 0.
pub(crate) type Lsn = u64;

/// What "durable" means before a change is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// Written and fsynced before the answer (concurrent requests share one fsync): survives
    /// a power cut.
    #[default]
    Fsync,
    /// Written to the operating system before the answer: survives a crash of the process,
    /// not of the machine.
    Os,
}

impl std::str::FromStr for SyncMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fsync" => Ok(SyncMode::Fsync),
            "os" => Ok(SyncMode::Os),
            _ => Err(format!(
                "unknown sync mode {s:?} (expected \"fsync\" or \"os\")"
            )),
        }
    }
}

impl fmt::Display for SyncMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncMode::Fsync => "fsync",
            SyncMode::Os => "os",
        })
    }
}

/// Why the store could not do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum StoreError {
    /// The disk refused a read or write (full, gone, read-only).
    #[error("{0}")]
    Io(Arc<str>),
    /// A record in the middle of a file fails its checksum or cannot be framed.
    #[error("corrupt record in {file} at byte offset {offset}: {reason} (start with --salvage to keep everything before it)")]
    Corrupt {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    /// Written by a newer sqsim.
    #[error("{file} has format version {found}; this sqsim reads up to version {supported}: upgrade sqsim or use another data directory")]
    NewerFormat {
        file: PathBuf,
        found: u32,
        supported: u32,
    },
    /// Another process holds the data directory.
    #[error("data directory {0} is in use by another sqsim process")]
    Locked(PathBuf),
    /// The data directory, or a file in it, is not safe to use: a symbolic link, or another
    /// user's.
    #[error("refusing the data directory: {path} {reason}")]
    Unsafe { path: PathBuf, reason: String },
    /// A record could not be applied on recovery.
    #[error("record {lsn} cannot be applied: {reason}")]
    Replay { lsn: Lsn, reason: String },
}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError::Io(Arc::from(e.to_string()))
    }
}

/// How far the log is durable, as a store publishes it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Progress {
    /// Every record below this position is durable.
    pub durable: Lsn,
    /// The last write failed: records from `durable` up to (not including) `through` are not
    /// durable yet, and waiters for them are told so. Cleared once a retry succeeds.
    /// `through` = [`Lsn::MAX`] means the store stopped for good.
    pub failure: Option<(Lsn, Arc<str>)>,
    /// How many write attempts have failed so far: a waiter that starts after a failure
    /// waits for the next attempt rather than failing on the old news (one refused write
    /// fails the requests it held, not every retry that follows while the writer retries).
    pub failures: u64,
}

/// What recovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// Records handed to the callback (snapshot and log).
    pub records: u64,
    /// Of those, records from the snapshot.
    pub from_snapshot: u64,
    /// Bytes dropped from the end of the log: a write the crash tore.
    pub torn_bytes: u64,
    /// `--salvage` skipped a corrupt record and everything after it.
    pub salvaged: Option<String>,
}

/// Sizes and counters for `/_sqsim/stats`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct StoreStats {
    pub log_bytes: u64,
    pub snapshot_bytes: u64,
    pub appended_records: u64,
    /// Cluster mode: bytes of the log messages written, before and after compression
    /// (`store::packed`); 0 for the other stores.
    pub appended_bytes: u64,
    pub stored_bytes: u64,
    pub syncs: u64,
    /// Total time spent in write + fsync, in microseconds.
    pub sync_micros: u64,
    pub snapshots: u64,
    pub writable: bool,
    pub last_error: Option<String>,
}

/// What recovery hands each record to: its log position (`None` for a snapshot's) and bytes.
pub(crate) type Apply<'a> = dyn FnMut(Option<Lsn>, &[u8]) -> Result<(), String> + 'a;

/// Where engine changes go to survive a restart; see the module documentation.
pub(crate) trait Store: Send + Sync + fmt::Debug {
    /// Plays every stored record to `apply`, in order: the newest snapshot's (without a
    /// position), then the log's after it (with theirs). Called once, before the first append.
    fn recover(&self, apply: &mut Apply<'_>) -> Result<Recovered, StoreError>;

    /// Queues `record` after every record appended before it and returns its position.
    /// Never waits for I/O: [`Store::progress`] tells when it is durable.
    fn append(&self, record: &[u8]) -> Lsn;

    /// Durability as it advances.
    fn progress(&self) -> watch::Receiver<Progress>;

    /// Replaces every record before `at` (all of them appended) with `records`, which must
    /// rebuild the same state. The records are made as they are taken (the caller copies
    /// its state while appending goes on, each part when the store reaches it): take them
    /// as they come rather than all at once, so a snapshot never holds a second copy of
    /// the state. The snapshot takes effect only once every record appended before the
    /// last of `records` was taken is durable (the records may show their effects); if
    /// they cannot be made durable it fails and changes nothing. Older log and snapshot
    /// files are removed.
    fn snapshot(
        &self,
        at: Lsn,
        records: &mut dyn Iterator<Item = Vec<u8>>,
    ) -> Result<(), StoreError>;

    /// The position the next append gets.
    fn next_lsn(&self) -> Lsn;

    /// Sizes and counters.
    fn stats(&self) -> StoreStats;

    /// Bytes of records appended and not yet written, held in memory: what a disk that
    /// refuses writes makes grow (the engine counts it against `--max-stored-bytes` and
    /// bounds it). A store that hands records on at once holds none.
    fn backlog_bytes(&self) -> u64 {
        0
    }

    /// Whether writes are taken (what [`Store::stats`] says, without copying them).
    fn is_writable(&self) -> bool {
        self.stats().writable
    }

    /// Lets the caller, about to wait for `lsn`, write the pending records itself when no
    /// one else is writing (where that is cheaper than handing them to a writer thread).
    fn write_through(&self, _lsn: Lsn) {}

    /// Says that a record was appended that no request will wait for (a background task's),
    /// so a store that leaves writing to the waiters writes it anyway.
    fn nudge(&self) {}

    /// Writes what was appended, stops, and lets another process open the same records.
    /// Appends after this are never durable; waiting for them reports an error.
    fn close(&self);
}

/// How long a waiter trusts the store's notice before looking again.
const RECHECK: std::time::Duration = std::time::Duration::from_millis(50);

/// Waits until the record at `lsn` is durable, or the store reports that writing it failed.
pub(crate) async fn durable(store: &dyn Store, lsn: Lsn) -> Result<(), StoreError> {
    let mut rx = store.progress();
    let seen = rx.borrow().failures;
    loop {
        store.write_through(lsn);
        {
            let p = rx.borrow_and_update();
            if p.durable > lsn {
                return Ok(());
            }
            if let Some((through, e)) = &p.failure {
                let news = p.failures > seen || *through == Lsn::MAX;
                if lsn < *through && news {
                    return Err(StoreError::Io(Arc::clone(e)));
                }
            }
        }
        // The timeout only guards against a wake-up that never comes (a writer that let go
        // of the log without writing what waits): the loop then writes it itself.
        if let Ok(Err(_)) = tokio::time::timeout(RECHECK, rx.changed()).await {
            return Err(StoreError::Io(Arc::from("the store has shut down")));
        }
    }
}
