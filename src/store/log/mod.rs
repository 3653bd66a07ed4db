//! The embedded durable store: a data directory holding an append-only log split into
//! segments (`log-<first lsn>.wal`) and at most one snapshot (`snapshot-<lsn>.snap`) that
//! replaces the log before it. One writer thread takes whatever requests appended since its
//! last write, writes it in one call and (in fsync mode) syncs it once: concurrent requests
//! share the fsync (group commit). The directory is private and locked for the process's
//! life (`dir`).

mod dir;
#[cfg(all(test, unix))]
mod dir_tests;
mod replay;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod torn_tests;
mod writer;

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::sync::watch;

use super::frame::{self, FileKind};
use super::{Apply, Lsn, Progress, Recovered, Store, StoreError, StoreStats, SyncMode};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records appended but not yet handed to the writer.
#[derive(Debug, Default)]
struct Pending {
    /// Framed records.
    buf: Vec<u8>,
    /// The position the next append gets.
    next: Lsn,
    /// Set once recovery is done; appends before that are a bug.
    open: bool,
    closing: bool,
    /// When closing began: the writer retries refused records for `writer::CLOSE_GRACE` more.
    closing_since: Option<Instant>,
    /// The writer is waiting for records: the next append wakes it (and only that one, so
    /// a busy writer costs appends no wake-up call).
    writer_idle: bool,
}

/// The segment the writer appends to.
#[derive(Debug)]
struct Segment {
    file: File,
    /// Bytes written so far (a failed write is cut back to this).
    len: u64,
    /// The position after the last record written to it.
    end: Lsn,
}

#[derive(Debug, Default)]
struct Counters {
    appended: AtomicU64,
    syncs: AtomicU64,
    sync_micros: AtomicU64,
    snapshots: AtomicU64,
    log_bytes: AtomicU64,
    snapshot_bytes: AtomicU64,
    /// Bytes of records appended and not yet written: held in memory while the disk
    /// refuses writes ([`Store::backlog_bytes`]).
    backlog: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    sync: SyncMode,
    salvage: bool,
    pending: Mutex<Pending>,
    wake: Condvar,
    segment: Mutex<Option<Segment>>,
    progress: watch::Sender<Progress>,
    counters: Counters,
    last_error: Mutex<Option<String>>,
    /// An emptied buffer for the appenders, kept between writes.
    spare: Mutex<Vec<u8>>,
    /// Whether `segment` holds one (read without its lock by the idle writer).
    has_segment: std::sync::atomic::AtomicBool,
    /// Tests: every write fails as a full disk's would, until cleared.
    #[cfg(test)]
    refusing: std::sync::atomic::AtomicBool,
    /// Tests: the longest unit the writer makes (`frame::MAX_UNIT` otherwise).
    #[cfg(test)]
    max_unit: std::sync::atomic::AtomicUsize,
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct LogStore {
    inner: Arc<Inner>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Held while a snapshot is written: closing waits for it, so no file is touched after
    /// the data directory is released.
    snapshotting: Mutex<()>,
    /// The data directory's locks, held until the store is closed.
    held: dir::Held,
}

fn segment_name(lsn: Lsn) -> String {
    format!("log-{lsn:020}.wal")
}

fn snapshot_name(lsn: Lsn) -> String {
    format!("snapshot-{lsn:020}.snap")
}

/// Files of the data directory named `<prefix><lsn><suffix>`, oldest first.
fn numbered(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<(Lsn, PathBuf)>, StoreError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(n) = name
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(suffix))
        else {
            continue;
        };
        if let Ok(lsn) = n.parse::<Lsn>() {
            out.push((lsn, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

impl LogStore {
    /// Opens (creating it if needed), checks, makes private and locks the data directory
    /// (see `dir`). Call [`Store::recover`] before appending. `salvage` starts past a corrupt
    /// record with everything before it.
    pub(crate) fn open(dir: &Path, sync: SyncMode, salvage: bool) -> Result<LogStore, StoreError> {
        let (dir, held) = dir::take(dir)?;
        Ok(LogStore {
            inner: Arc::new(Inner {
                dir,
                sync,
                salvage,
                pending: Mutex::new(Pending::default()),
                wake: Condvar::new(),
                segment: Mutex::new(None),
                progress: watch::Sender::new(Progress::default()),
                counters: Counters::default(),
                last_error: Mutex::new(None),
                spare: Mutex::new(Vec::new()),
                has_segment: std::sync::atomic::AtomicBool::new(false),
                #[cfg(test)]
                refusing: std::sync::atomic::AtomicBool::new(false),
                #[cfg(test)]
                max_unit: std::sync::atomic::AtomicUsize::new(frame::MAX_UNIT),
            }),
            writer: Mutex::new(None),
            snapshotting: Mutex::new(()),
            held,
        })
    }

    /// Makes every record before `upto` durable, writing what is pending itself.
    fn write_through_to(&self, upto: Lsn) -> Result<(), StoreError> {
        let mut slot = lock(&self.inner.segment);
        // Whoever held the segment before has written and published what it took; what is
        // left is pending.
        let durable = self.inner.progress.borrow().durable;
        if durable < upto {
            self.inner.write_pending(&mut slot);
        }
        let p = self.inner.progress.borrow();
        match &p.failure {
            _ if p.durable >= upto => Ok(()),
            Some((_, e)) => Err(StoreError::Io(Arc::clone(e))),
            None => Err(StoreError::Io(Arc::from("the log could not be written"))),
        }
    }

    fn refresh_sizes(&self) -> Result<(), StoreError> {
        let sum = |files: Vec<(Lsn, PathBuf)>| {
            files
                .iter()
                .filter_map(|(_, p)| fs::metadata(p).ok())
                .map(|m| m.len())
                .sum::<u64>()
        };
        let c = &self.inner.counters;
        c.log_bytes.store(
            sum(numbered(&self.inner.dir, "log-", ".wal")?),
            Ordering::Relaxed,
        );
        c.snapshot_bytes.store(
            sum(numbered(&self.inner.dir, "snapshot-", ".snap")?),
            Ordering::Relaxed,
        );
        Ok(())
    }
}

impl Store for LogStore {
    fn recover(&self, apply: &mut Apply<'_>) -> Result<Recovered, StoreError> {
        let dir = &self.inner.dir;
        // A snapshot a crash interrupted before it was renamed into place: never part of the
        // state (the log still holds everything), only space.
        for (_, path) in numbered(dir, "snapshot-", ".snap.tmp")? {
            tracing::info!(file = %path.display(), "removing an unfinished snapshot");
            fs::remove_file(path)?;
        }
        let mut report = Recovered::default();
        let mut next: Lsn = 0;
        let mut stopped = false;
        if let Some((lsn, path)) = numbered(dir, "snapshot-", ".snap")?.pop() {
            let (end, cut) =
                self.replay_file(&path, FileKind::Snapshot, 0, false, apply, &mut report)?;
            next = lsn;
            if cut {
                // Salvaged: the snapshot's later records are lost, and the log after it
                // cannot be applied on top of a partial state.
                next = end.min(lsn);
                stopped = true;
            }
        }
        let segments = numbered(dir, "log-", ".wal")?;
        let newest = segments.len().saturating_sub(1);
        for (i, (first, path)) in segments.into_iter().enumerate() {
            if stopped {
                fs::rename(&path, path.with_extension("wal.salvaged"))?;
                continue;
            }
            if first > next {
                // A file removed (a snapshot, a segment): with `--salvage` recovery ends
                // before the gap, and what follows it is kept aside.
                let missing = StoreError::Corrupt {
                    file: path.clone(),
                    offset: 0,
                    reason: format!("records {next} to {} are missing", first - 1),
                };
                self.salvaged(missing, next, &mut report)?;
                fs::rename(&path, path.with_extension("wal.salvaged"))?;
                stopped = true;
                continue;
            }
            let (end, cut) =
                self.replay_file(&path, FileKind::Log, next, i == newest, apply, &mut report)?;
            next = next.max(end);
            stopped = cut && report.salvaged.is_some();
        }
        for (_, path) in numbered(dir, "log-", ".wal.tmp")? {
            // A segment a crash interrupted before it was renamed into place: never held a
            // record.
            fs::remove_file(path)?;
        }
        {
            let mut p = lock(&self.inner.pending);
            p.next = next;
            p.open = true;
        }
        self.inner.progress.send_modify(|p| p.durable = next);
        {
            // Without room for a new segment sqsim still starts and serves what it has:
            // writes wait (and health says so) until the writer can create it.
            let mut slot = lock(&self.inner.segment);
            self.inner.open_segment(&mut slot);
        }
        let _ = self.refresh_sizes();
        let inner = Arc::clone(&self.inner);
        let handle = std::thread::Builder::new()
            .name("sqsim-log-writer".into())
            .spawn(move || {
                // A writer that died would leave every write waiting for good while the
                // process looked alive: it ends instead, and a restart recovers what was
                // kept (the crash-only path every kill already takes).
                let ran =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.write_loop()));
                if ran.is_err() {
                    std::process::abort();
                }
            })?;
        *lock(&self.writer) = Some(handle);
        Ok(report)
    }

    fn append(&self, record: &[u8]) -> Lsn {
        let mut p = lock(&self.inner.pending);
        debug_assert!(p.open, "append before recover");
        let lsn = p.next;
        p.next += 1;
        if p.closing {
            // After close: never written; whoever waits for it is told (see `close`).
            return lsn;
        }
        let before = p.buf.len();
        frame::encode(&mut p.buf, record);
        let added = (p.buf.len() - before) as u64;
        self.inner
            .counters
            .backlog
            .fetch_add(added, Ordering::Relaxed);
        // Only an idle writer needs waking (a busy one takes this record with its next batch),
        // and in os mode not even that: the request that waits for it writes it.
        let wake = self.inner.sync == SyncMode::Fsync && std::mem::take(&mut p.writer_idle);
        drop(p);
        self.inner.counters.appended.fetch_add(1, Ordering::Relaxed);
        if wake {
            self.inner.wake.notify_one();
        }
        lsn
    }

    fn progress(&self) -> watch::Receiver<Progress> {
        self.inner.progress.subscribe()
    }

    fn next_lsn(&self) -> Lsn {
        lock(&self.inner.pending).next
    }

    fn snapshot(
        &self,
        at: Lsn,
        records: &mut dyn Iterator<Item = Vec<u8>>,
    ) -> Result<(), StoreError> {
        let _gate = lock(&self.snapshotting);
        if lock(&self.inner.pending).closing {
            return Err(StoreError::Io(Arc::from("the store is closed")));
        }
        let dir = &self.inner.dir;
        let tmp = dir.join(format!("{}.tmp", snapshot_name(at)));
        let written = (|| -> Result<(), StoreError> {
            let mut w = BufWriter::new(dir::replace(&tmp)?);
            // Written as they come: the engine makes them as they are taken.
            frame::write_all(&mut w, FileKind::Snapshot, at, records)?;
            // The records may hold the effect of any record appended before the last one
            // was taken (each scope was copied at its own position, the last one just now).
            let upto = self.next_lsn();
            let file = w
                .into_inner()
                .map_err(|e| StoreError::from(e.into_error()))?;
            file.sync_all()?;
            drop(file);
            super::crash_point::reached("snapshot-written");
            // Published only once the log is durable that far: a crash must not leave a
            // snapshot whose state the log cannot complete (a dead letter the snapshot shows
            // gone from its source while its arrival is still unwritten).
            self.write_through_to(upto)?;
            fs::rename(&tmp, dir.join(snapshot_name(at)))?;
            super::crash_point::reached("snapshot-renamed");
            sync_dir(dir)
        })();
        if let Err(e) = written {
            // A full disk, most likely: the log still holds everything, and the half-written
            // snapshot must not take the space the log needs.
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        // Start a new segment so the ones holding only records before `at` can go.
        {
            let mut slot = lock(&self.inner.segment);
            let end = slot
                .as_ref()
                .map_or_else(|| self.inner.progress.borrow().durable, |s| s.end);
            self.inner.start_segment(&mut slot, end)?;
            super::crash_point::reached("snapshot-rotated");
            // In os mode a request that found the segment taken is waiting for whoever held
            // it to write: do, or it would wait for a write nobody makes.
            self.inner.write_pending(&mut slot);
        }
        let segments = numbered(dir, "log-", ".wal")?;
        for pair in segments.windows(2) {
            let ((_, path), (next_first, _)) = (&pair[0], &pair[1]);
            if *next_first <= at {
                fs::remove_file(path)?;
            }
        }
        for (lsn, path) in numbered(dir, "snapshot-", ".snap")? {
            if lsn < at {
                fs::remove_file(path)?;
            }
        }
        sync_dir(dir)?;
        self.inner
            .counters
            .snapshots
            .fetch_add(1, Ordering::Relaxed);
        self.refresh_sizes()
    }

    fn nudge(&self) {
        let wake = std::mem::take(&mut lock(&self.inner.pending).writer_idle);
        if wake {
            self.inner.wake.notify_one();
        }
    }

    fn write_through(&self, lsn: Lsn) {
        if self.inner.sync != SyncMode::Os || self.inner.progress.borrow().durable > lsn {
            return;
        }
        // Whoever holds the segment is writing and will publish; the caller waits for it
        // and tries again if its record was not in that batch.
        if let Ok(mut slot) = self.inner.segment.try_lock() {
            self.inner.write_pending(&mut slot);
        }
    }

    fn close(&self) {
        let _gate = lock(&self.snapshotting);
        {
            let mut p = lock(&self.inner.pending);
            p.closing = true;
            p.closing_since.get_or_insert_with(Instant::now);
        }
        self.inner.wake.notify_all();
        if let Some(h) = lock(&self.writer).take() {
            let _ = h.join();
        }
        // Anything appended from now on is never written.
        self.inner
            .progress
            .send_modify(|p| p.failure = Some((Lsn::MAX, Arc::from("sqsim is stopping"))));
        self.held.release();
    }

    fn backlog_bytes(&self) -> u64 {
        self.inner.counters.backlog.load(Ordering::Relaxed)
    }

    fn stats(&self) -> StoreStats {
        let c = &self.inner.counters;
        let last_error = lock(&self.inner.last_error).clone();
        StoreStats {
            log_bytes: c.log_bytes.load(Ordering::Relaxed),
            snapshot_bytes: c.snapshot_bytes.load(Ordering::Relaxed),
            appended_records: c.appended.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            sync_micros: c.sync_micros.load(Ordering::Relaxed),
            snapshots: c.snapshots.load(Ordering::Relaxed),
            writable: last_error.is_none(),
            last_error,
            ..StoreStats::default()
        }
    }
}

#[cfg(test)]
impl LogStore {
    /// Makes every write fail as a full disk's would (`on`), or work again.
    pub(crate) fn refuse_writes(&self, on: bool) {
        self.inner.refusing.store(on, Ordering::Release);
    }

    /// Makes the writer cut batches into units of at most `bytes` (a record longer goes
    /// alone), as it cuts them at `frame::MAX_UNIT`.
    pub(crate) fn limit_units(&self, bytes: usize) {
        self.inner.max_unit.store(bytes, Ordering::Release);
    }
}

impl Drop for LogStore {
    fn drop(&mut self) {
        self.close();
    }
}
