//! The embedded durable store: a data directory holding an append-only log split into
//! segments (`log-<first lsn>.wal`) and at most one snapshot (`snapshot-<lsn>.snap`) that
//! replaces the log before it. One writer thread takes whatever requests appended since its
//! last write, writes it in one call and (in fsync mode) syncs it once: concurrent requests
//! share the fsync (group commit). A `LOCK` file keeps a second process out.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::frame::{self, FileKind, Next, Reader};
use super::{Apply, Lsn, Progress, Recovered, Store, StoreError, StoreStats, SyncMode};

/// How long the writer waits before retrying after the disk refused a write.
const RETRY_AFTER: Duration = Duration::from_millis(100);
/// How long a stopping store keeps retrying records the disk refused before giving up.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

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
    /// When closing began: the writer retries refused records for [`CLOSE_GRACE`] more.
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
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct LogStore {
    inner: Arc<Inner>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Held while a snapshot is written: closing waits for it, so no file is touched after
    /// the data directory is released.
    snapshotting: Mutex<()>,
    /// Locked (flock) until the store is closed.
    lock_file: File,
}

fn segment_name(lsn: Lsn) -> String {
    format!("log-{lsn:020}.wal")
}

fn snapshot_name(lsn: Lsn) -> String {
    format!("snapshot-{lsn:020}.snap")
}

/// Sets the bytes of `path` from `offset` on (a torn final write) aside in
/// `<path>.torn-<offset>`, then cuts the file there so the next start reads cleanly. They
/// were never acknowledged (a record is answered only once written whole), but they are
/// evidence: if the space to copy them is missing, they are cut anyway (the start must not
/// depend on free space) and the log line says so.
fn keep_torn_tail(path: &Path, offset: u64, len: u64) -> Result<(), StoreError> {
    let aside = PathBuf::from(format!("{}.torn-{offset}", path.display()));
    let copied = (|| -> std::io::Result<()> {
        let mut from = File::open(path)?;
        std::io::Seek::seek(&mut from, std::io::SeekFrom::Start(offset))?;
        let mut to = File::create(&aside)?;
        std::io::copy(&mut from, &mut to)?;
        to.sync_all()
    })();
    match &copied {
        Ok(()) => tracing::warn!(
            file = %path.display(),
            offset,
            bytes = len - offset,
            kept = %aside.display(),
            "the log ends in a torn write (a crash during an unanswered write): cut off and kept aside"
        ),
        Err(e) => {
            let _ = fs::remove_file(&aside);
            tracing::warn!(
                file = %path.display(),
                offset,
                bytes = len - offset,
                error = %e,
                "the log ends in a torn write (a crash during an unanswered write): cut off; no room to keep a copy"
            );
        }
    }
    let f = OpenOptions::new().write(true).open(path)?;
    f.set_len(offset)?;
    f.sync_all()?;
    Ok(())
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
    /// Opens (creating it if needed) and locks the data directory. Call [`Store::recover`]
    /// before appending. `salvage` starts past a corrupt record with everything before it.
    pub(crate) fn open(dir: &Path, sync: SyncMode, salvage: bool) -> Result<LogStore, StoreError> {
        fs::create_dir_all(dir)?;
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("LOCK"))?;
        if lock_file.try_lock().is_err() {
            return Err(StoreError::Locked(dir.to_path_buf()));
        }
        Ok(LogStore {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
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
            }),
            writer: Mutex::new(None),
            snapshotting: Mutex::new(()),
            lock_file,
        })
    }

    /// Plays one file's records from position `from` on; returns the position after its last
    /// record and whether it ended torn (the rest is kept aside and the file truncated).
    /// Only the newest segment (`last`) can end torn: every older one was whole before the
    /// next was created, so damage at its end is corruption.
    fn replay_file(
        &self,
        path: &Path,
        kind: FileKind,
        from: Lsn,
        last: bool,
        apply: &mut Apply<'_>,
        report: &mut Recovered,
    ) -> Result<(Lsn, bool), StoreError> {
        let mut r = match Reader::open(path, kind) {
            // A newest segment whose header never reached the disk (a sqsim before atomic
            // segment creation, killed between creating it and writing its header) holds
            // no record: a torn write.
            Err(StoreError::Corrupt { offset: 0, .. })
                if last
                    && kind == FileKind::Log
                    && fs::metadata(path)?.len() < frame::HEADER_LEN =>
            {
                let len = fs::metadata(path)?.len();
                tracing::warn!(file = %path.display(), bytes = len, "the newest log segment has no header (a crash while creating it): set aside");
                report.torn_bytes += len;
                fs::rename(path, path.with_extension("wal.torn"))?;
                return Ok((from, true));
            }
            other => other?,
        };
        let mut lsn = r.lsn;
        loop {
            let at = r.offset();
            match r.next() {
                Ok(Next::Record) => {
                    if lsn >= from {
                        let position = (kind == FileKind::Log).then_some(lsn);
                        apply(position, &r.buf)
                            .map_err(|reason| StoreError::Replay { lsn, reason })?;
                        report.records += 1;
                        if kind == FileKind::Snapshot {
                            report.from_snapshot += 1;
                        }
                    }
                    lsn += 1;
                }
                Ok(Next::EndMarker) if kind == FileKind::Snapshot => return Ok((lsn, false)),
                Ok(Next::End) if kind == FileKind::Log => return Ok((lsn, false)),
                Ok(Next::Torn { offset }) if kind == FileKind::Log && last => {
                    let len = fs::metadata(path)?.len();
                    report.torn_bytes += len - offset;
                    keep_torn_tail(path, offset, len)?;
                    return Ok((lsn, true));
                }
                Ok(_) => {
                    // A snapshot without its end marker, or an end marker in a log.
                    let e = StoreError::Corrupt {
                        file: path.to_path_buf(),
                        offset: at,
                        reason: "the file does not end where its format says".into(),
                    };
                    return self.salvaged(e, lsn, report);
                }
                Err(e @ StoreError::Corrupt { .. }) => {
                    let ended = self.salvaged(e, lsn, report)?;
                    // Keep the damaged file aside for inspection; the live one ends before
                    // the damage so that the next start reads cleanly.
                    fs::copy(path, path.with_extension("salvaged"))?;
                    let cut = if kind == FileKind::Log { at } else { 0 };
                    OpenOptions::new().write(true).open(path)?.set_len(cut)?;
                    if kind == FileKind::Snapshot {
                        fs::remove_file(path)?;
                    }
                    return Ok(ended);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// With `--salvage`, a corrupt record ends recovery there; otherwise it stops start-up.
    fn salvaged(
        &self,
        e: StoreError,
        lsn: Lsn,
        report: &mut Recovered,
    ) -> Result<(Lsn, bool), StoreError> {
        if !self.inner.salvage {
            return Err(e);
        }
        tracing::warn!(error = %e, "salvage: starting with the records before it");
        report.salvaged = Some(e.to_string());
        Ok((lsn, true))
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

/// What one attempt to write the pending records came to.
enum Step {
    /// Nothing was pending.
    Idle,
    Written,
    /// The disk refused; the records are pending again.
    Failed,
    /// The store is closing and the disk refused: give up.
    Abandoned,
}

impl Inner {
    /// Starts a new segment at `lsn` (the writer must not be writing), atomically: the
    /// header is written and synced under a temporary name, then renamed into place and the
    /// directory synced, so a crash at any point leaves either no segment or a whole empty
    /// one (never a header-less file that a later start would have to refuse).
    fn start_segment(&self, slot: &mut Option<Segment>, lsn: Lsn) -> Result<(), StoreError> {
        let path = self.dir.join(segment_name(lsn));
        let tmp = self.dir.join(format!("{}.tmp", segment_name(lsn)));
        let made = (|| -> Result<File, StoreError> {
            let mut file = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(&tmp)?;
            super::crash_point::reached("segment-created");
            file.write_all(&frame::header(FileKind::Log, lsn))?;
            file.sync_all()?;
            super::crash_point::reached("segment-written");
            fs::rename(&tmp, &path)?;
            super::crash_point::reached("segment-renamed");
            sync_dir(&self.dir)?;
            Ok(file)
        })();
        match made {
            Ok(file) => {
                self.has_segment.store(true, Ordering::Release);
                *slot = Some(Segment {
                    file,
                    len: frame::HEADER_LEN,
                    end: lsn,
                });
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// The writer thread: hands each batch of appended records to the disk. In `os` mode a
    /// request writes its own batch (see [`Inner::write_pending`]), and the thread only
    /// writes records no request waits for, when their appender nudges it.
    fn write_loop(&self) {
        loop {
            {
                let mut p = lock(&self.pending);
                while p.buf.is_empty() && !p.closing {
                    p.writer_idle = true;
                    if self.has_segment.load(Ordering::Acquire) {
                        p = self.wake.wait(p).unwrap_or_else(|e| e.into_inner());
                    } else {
                        // No segment yet (the disk refused to create one): try again
                        // soon even with nothing to write, so health recovers by itself.
                        p = self
                            .wake
                            .wait_timeout(p, RETRY_AFTER)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                        if p.buf.is_empty() && !p.closing {
                            break;
                        }
                    }
                }
                p.writer_idle = false;
                if p.buf.is_empty() && p.closing {
                    return;
                }
            }
            match self.write_pending(&mut lock(&self.segment)) {
                Step::Idle | Step::Written => {}
                Step::Failed => std::thread::sleep(RETRY_AFTER),
                Step::Abandoned => return,
            }
        }
    }

    /// Writes everything pending, in one call (and in fsync mode one sync), while the caller
    /// holds the segment: whoever holds it is the only writer, so batches reach the file in
    /// the order they were appended.
    fn write_pending(&self, slot: &mut Option<Segment>) -> Step {
        let (bytes, upto) = {
            let mut p = lock(&self.pending);
            if p.buf.is_empty() {
                drop(p);
                if slot.is_none() {
                    self.open_segment(slot);
                }
                return Step::Idle;
            }
            // The buffer written last time, emptied, goes back to the appenders: no
            // reallocation once both have grown to the usual batch size.
            let spare = std::mem::take(&mut *lock(&self.spare));
            (std::mem::replace(&mut p.buf, spare), p.next)
        };
        match self.write(slot, &bytes, upto) {
            Ok(()) => {
                let mut bytes = bytes;
                bytes.clear();
                *lock(&self.spare) = bytes;
                *lock(&self.last_error) = None;
                self.progress.send_modify(|p| {
                    p.durable = upto;
                    p.failure = None;
                });
                Step::Written
            }
            Err(e) => {
                tracing::error!(error = %e, "writing the log failed; retrying");
                let msg: Arc<str> = Arc::from(e.to_string());
                *lock(&self.last_error) = Some(e.to_string());
                {
                    let mut p = lock(&self.pending);
                    if p.closing_since.is_some_and(|t| t.elapsed() >= CLOSE_GRACE) {
                        // Stopping with the disk still refusing after retrying for the
                        // grace period: these records were never acknowledged (no answer
                        // that depends on one goes out before it is written), and waiting
                        // on would keep the process alive forever.
                        tracing::error!(
                            records = p.next.saturating_sub(self.progress.borrow().durable),
                            error = %e,
                            "stopping with changes the disk refused: they are lost; none was acknowledged"
                        );
                        return Step::Abandoned;
                    }
                    // Put the records back in front of what arrived since, in order.
                    let mut again = bytes;
                    again.extend_from_slice(&p.buf);
                    p.buf = again;
                }
                self.progress.send_modify(|p| {
                    p.failure = Some((upto, Arc::clone(&msg)));
                    p.failures += 1;
                });
                Step::Failed
            }
        }
    }

    /// Creates the segment the writer appends to if there is none, at the first position
    /// not yet durable; records whether that worked (health reads it).
    fn open_segment(&self, slot: &mut Option<Segment>) {
        let at = self.progress.borrow().durable;
        match self.start_segment(slot, at) {
            Ok(()) => {
                *lock(&self.last_error) = None;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot create a log segment; writes wait until it can be");
                *lock(&self.last_error) = Some(format!("cannot create a log segment: {e}"));
            }
        }
    }

    fn write(&self, slot: &mut Option<Segment>, bytes: &[u8], upto: Lsn) -> Result<(), StoreError> {
        if slot.is_none() {
            let at = self.progress.borrow().durable;
            self.start_segment(slot, at)?;
        }
        let seg = slot
            .as_mut()
            .ok_or_else(|| StoreError::Io(Arc::from("no open log segment")))?;
        #[cfg(test)]
        if self.refusing.load(Ordering::Acquire) {
            return Err(StoreError::Io(Arc::from(
                "No space left on device (os error 28) [injected]",
            )));
        }
        let started = Instant::now();
        let written = seg.file.write_all(bytes).and_then(|()| match self.sync {
            SyncMode::Fsync => seg.file.sync_data(),
            SyncMode::Os => Ok(()),
        });
        if let Err(e) = written {
            // Cut off whatever part of the batch reached the file, so the retry appends
            // after whole frames only.
            let _ = seg.file.set_len(seg.len);
            let _ = std::io::Seek::seek(&mut seg.file, std::io::SeekFrom::Start(seg.len));
            return Err(e.into());
        }
        seg.len += bytes.len() as u64;
        seg.end = upto;
        let c = &self.counters;
        c.syncs.fetch_add(1, Ordering::Relaxed);
        c.sync_micros
            .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        c.log_bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
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
                return Err(StoreError::Corrupt {
                    file: path,
                    offset: 0,
                    reason: format!("records {next} to {} are missing", first - 1),
                });
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
            .spawn(move || inner.write_loop())?;
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
        frame::encode(&mut p.buf, record);
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
        // The records may hold the effect of any record appended before this call (each
        // scope was copied at its own position, the last one just now).
        let upto = self.next_lsn();
        let dir = &self.inner.dir;
        let tmp = dir.join(format!("{}.tmp", snapshot_name(at)));
        let written = (|| -> Result<(), StoreError> {
            let mut w = BufWriter::new(File::create(&tmp)?);
            frame::write_all(&mut w, FileKind::Snapshot, at, records)?;
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
        let _ = self.lock_file.unlock();
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
}

impl Drop for LogStore {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(s: &LogStore) -> Result<(Vec<Vec<u8>>, Recovered), StoreError> {
        let mut out = Vec::new();
        let report = s.recover(&mut |_, r| {
            out.push(r.to_vec());
            Ok(())
        })?;
        Ok((out, report))
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A crash while a snapshot was written leaves `snapshot-*.snap.tmp` behind; the next
    /// start removes it and recovers from what was there before.
    #[test]
    fn an_unfinished_snapshot_left_by_a_crash_is_removed_at_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        records(&s).unwrap();
        s.append(b"a");
        s.append(b"b");
        s.close();
        drop(s);
        let tmp = dir.path().join(format!("{}.tmp", snapshot_name(1)));
        fs::write(&tmp, b"SQSIMSNP half a snapsh").unwrap();
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        let (got, _) = records(&s).unwrap();
        assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
        assert!(!tmp.exists(), "left: {:?}", files(dir.path()));
        assert!(!files(dir.path()).iter().any(|f| f.ends_with(".tmp")));
    }

    /// A snapshot with a damaged record stops start-up naming the file and the offset;
    /// `--salvage` starts with the records before the damage and keeps the file aside.
    #[test]
    fn a_damaged_snapshot_is_refused_with_its_file_and_offset_or_salvaged() {
        let dir = tempfile::tempdir().unwrap();
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        records(&s).unwrap();
        for r in [&b"x1"[..], b"x2", b"x3"] {
            s.append(r);
        }
        let snap: Vec<Vec<u8>> = ["s0", "s1", "s2"]
            .iter()
            .map(|r| r.as_bytes().to_vec())
            .collect();
        s.snapshot(3, &mut snap.clone().into_iter()).unwrap();
        s.append(b"after");
        s.close();
        drop(s);
        let path = dir.path().join(snapshot_name(3));
        let mut bytes = fs::read(&path).unwrap();
        // The second record: header, then the first frame (8 bytes + 2), then its payload.
        let second = frame::HEADER_LEN as usize + frame::FRAME_OVERHEAD + 2;
        bytes[second + frame::FRAME_OVERHEAD] ^= 0xff;
        fs::write(&path, &bytes).unwrap();

        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        let err = records(&s).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{text}");
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains(&format!("offset {second}")), "{text}");
        drop(s);
        assert_eq!(
            fs::read(&path).unwrap(),
            bytes,
            "a refused start changes nothing"
        );

        let s = LogStore::open(dir.path(), SyncMode::Fsync, true).unwrap();
        let (got, report) = records(&s).unwrap();
        assert_eq!(
            got,
            snap[..1],
            "the records before the damage, nothing after"
        );
        assert!(report.salvaged.is_some_and(|r| r.contains("offset")));
        let names = files(dir.path());
        assert!(names.iter().any(|f| f.ends_with(".salvaged")), "{names:?}");
        assert!(!path.exists(), "the damaged snapshot is no longer read");
    }

    /// One flipped bit in any field of a frame header (length or checksum) in the middle of
    /// a snapshot or of a log segment stops start-up with the file and the offset, and
    /// leaves the file as it was; nothing after the damage is silently dropped.
    #[test]
    fn a_flipped_header_bit_mid_snapshot_or_mid_segment_is_refused_with_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        records(&s).unwrap();
        let snap: Vec<Vec<u8>> = (0..5).map(|i| format!("snap-{i}").into_bytes()).collect();
        s.snapshot(0, &mut snap.clone().into_iter()).unwrap();
        for i in 0..5 {
            s.append(format!("logs-{i}").as_bytes());
        }
        s.close();
        drop(s);
        let snapshot = dir.path().join(snapshot_name(0));
        let segment = numbered(dir.path(), "log-", ".wal")
            .unwrap()
            .pop()
            .unwrap()
            .1;
        // The third record of each: header, two frames of 6 payload bytes each before it.
        let third = frame::HEADER_LEN as usize + 2 * (frame::FRAME_OVERHEAD + 6);
        for path in [&snapshot, &segment] {
            let clean = fs::read(path).unwrap();
            for byte in third..third + frame::FRAME_OVERHEAD {
                for bit in 0..8 {
                    let mut bytes = clean.clone();
                    bytes[byte] ^= 1 << bit;
                    fs::write(path, &bytes).unwrap();
                    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
                    let err = records(&s).unwrap_err().to_string();
                    drop(s);
                    let at = format!("{} at byte offset {third}", path.display());
                    assert!(err.contains(&at), "byte {byte} bit {bit}: {err}");
                    assert_eq!(
                        fs::read(path).unwrap(),
                        bytes,
                        "a refused start changes nothing"
                    );
                }
            }
            fs::write(path, &clean).unwrap();
        }
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        assert_eq!(records(&s).unwrap().0.len(), 10);
    }

    /// A crash between creating a segment file and writing its header (an older sqsim, or
    /// another tool) leaves an empty or header-less newest segment: a torn write, set aside,
    /// and start-up goes on with everything before it. A segment creation a crash stopped
    /// before its rename leaves only a `.wal.tmp`, removed at the next start.
    #[test]
    fn an_empty_or_headerless_newest_segment_is_a_torn_write() {
        for leftover in [&b""[..], b"SQSIMLO"] {
            let dir = tempfile::tempdir().unwrap();
            let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
            records(&s).unwrap();
            s.append(b"a");
            s.append(b"b");
            s.close();
            drop(s);
            fs::write(dir.path().join(segment_name(2)), leftover).unwrap();
            fs::write(dir.path().join(format!("{}.tmp", segment_name(2))), b"SQ").unwrap();
            let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
            let (got, report) = records(&s).unwrap();
            assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
            assert_eq!(report.torn_bytes, leftover.len() as u64);
            s.append(b"c");
            s.close();
            drop(s);
            let names = files(dir.path());
            assert!(!names.iter().any(|f| f.ends_with(".tmp")), "{names:?}");
            let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
            let (got, _) = records(&s).unwrap();
            assert_eq!(got, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        }
    }

    /// A torn final write is cut off, and its bytes are kept aside (never the only copy of
    /// something unread deleted); the same damage in an older segment is corruption.
    #[test]
    fn a_torn_tail_is_kept_aside_and_only_the_newest_segment_can_be_torn() {
        let dir = tempfile::tempdir().unwrap();
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        records(&s).unwrap();
        s.append(b"one");
        s.append(b"two");
        s.close();
        drop(s);
        let seg = numbered(dir.path(), "log-", ".wal")
            .unwrap()
            .pop()
            .unwrap()
            .1;
        let mut bytes = fs::read(&seg).unwrap();
        let whole = bytes.len();
        bytes.extend_from_slice(&[7, 0, 0, 0, 1, 2]);
        fs::write(&seg, &bytes).unwrap();
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        let (got, report) = records(&s).unwrap();
        assert_eq!(got, [b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(report.torn_bytes, 6);
        let aside = PathBuf::from(format!("{}.torn-{whole}", seg.display()));
        assert_eq!(fs::read(&aside).unwrap(), [7, 0, 0, 0, 1, 2]);
        s.close();
        drop(s);
        // The same tail on a segment that is no longer the newest: refused.
        let mut bytes = fs::read(&seg).unwrap();
        bytes.extend_from_slice(&[7, 0, 0, 0, 1, 2]);
        fs::write(&seg, &bytes).unwrap();
        let later = dir.path().join(segment_name(99));
        fs::write(&later, frame::header(FileKind::Log, 99)).unwrap();
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        let err = records(&s).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    }

    /// Requests that wait for their records while snapshots rotate the segment never hang:
    /// whoever holds the segment writes what is pending before letting go.
    #[test]
    fn waiting_appenders_finish_while_snapshots_rotate_segments() {
        for sync in [SyncMode::Os, SyncMode::Fsync] {
            let dir = tempfile::tempdir().unwrap();
            let store = Arc::new(LogStore::open(dir.path(), sync, false).unwrap());
            store.recover(&mut |_, _| Ok(())).unwrap();
            let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let rotations = Arc::new(AtomicU64::new(0));
            let snapshots = {
                let (store, done, rotations) = (
                    Arc::clone(&store),
                    Arc::clone(&done),
                    Arc::clone(&rotations),
                );
                std::thread::spawn(move || {
                    while !done.load(Ordering::Acquire) {
                        let at = store.next_lsn();
                        store.snapshot(at, &mut std::iter::empty()).unwrap();
                        rotations.fetch_add(1, Ordering::Release);
                    }
                })
            };
            while rotations.load(Ordering::Acquire) == 0 {
                std::thread::yield_now();
            }
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let finished = rt.block_on(async {
                let tasks: Vec<_> = (0..8)
                    .map(|t| {
                        let (store, rotations) = (Arc::clone(&store), Arc::clone(&rotations));
                        tokio::spawn(async move {
                            // Keep going until several rotations happened meanwhile, however
                            // fast the appends alone would be.
                            let mut i = 0;
                            while i < 300 || rotations.load(Ordering::Acquire) < 5 {
                                let lsn = store.append(format!("{t}-{i}").as_bytes());
                                crate::store::durable(store.as_ref(), lsn).await.unwrap();
                                i += 1;
                            }
                        })
                    })
                    .collect();
                tokio::time::timeout(Duration::from_secs(30), async {
                    for t in tasks {
                        t.await.unwrap();
                    }
                })
                .await
            });
            let during = rotations.load(Ordering::Acquire);
            done.store(true, Ordering::Release);
            snapshots.join().unwrap();
            assert!(finished.is_ok(), "{sync}: a waiting request hung");
            assert!(during >= 5, "{sync}: snapshots ran meanwhile");
        }
    }
}
