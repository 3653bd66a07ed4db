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
            }),
            writer: Mutex::new(None),
            snapshotting: Mutex::new(()),
            lock_file,
        })
    }

    /// Plays one file's records from position `from` on; returns the position after its last
    /// record and whether it ended torn (the rest is cut off and the file truncated).
    fn replay_file(
        &self,
        path: &Path,
        kind: FileKind,
        from: Lsn,
        apply: &mut Apply<'_>,
        report: &mut Recovered,
    ) -> Result<(Lsn, bool), StoreError> {
        let mut r = Reader::open(path, kind)?;
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
                Ok(Next::Torn { offset }) if kind == FileKind::Log => {
                    let len = fs::metadata(path)?.len();
                    report.torn_bytes += len - offset;
                    OpenOptions::new().write(true).open(path)?.set_len(offset)?;
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

    /// Starts a new segment at `lsn` (the writer must not be writing).
    fn start_segment(&self, slot: &mut Option<Segment>, lsn: Lsn) -> Result<(), StoreError> {
        let path = self.inner.dir.join(segment_name(lsn));
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)?;
        file.write_all(&frame::header(FileKind::Log, lsn))?;
        file.sync_all()?;
        sync_dir(&self.inner.dir)?;
        *slot = Some(Segment {
            file,
            len: frame::HEADER_LEN,
            end: lsn,
        });
        Ok(())
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
    /// The writer thread: hands each batch of appended records to the disk. In `os` mode a
    /// request writes its own batch (see [`Inner::write_pending`]), and the thread only
    /// writes records no request waits for, when their appender nudges it.
    fn write_loop(&self) {
        loop {
            {
                let mut p = lock(&self.pending);
                while p.buf.is_empty() && !p.closing {
                    p.writer_idle = true;
                    p = self.wake.wait(p).unwrap_or_else(|e| e.into_inner());
                }
                p.writer_idle = false;
                if p.buf.is_empty() {
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
                    if p.closing {
                        // Stopping with the disk still refusing: these records were never
                        // acknowledged, and waiting on would keep the process alive.
                        tracing::error!(
                            records = p.next.saturating_sub(self.progress.borrow().durable),
                            "stopping with changes the disk refused; none was acknowledged"
                        );
                        return Step::Abandoned;
                    }
                    // Put the records back in front of what arrived since, in order.
                    let mut again = bytes;
                    again.extend_from_slice(&p.buf);
                    p.buf = again;
                }
                self.progress
                    .send_modify(|p| p.failure = Some((upto, Arc::clone(&msg))));
                Step::Failed
            }
        }
    }

    fn write(&self, slot: &mut Option<Segment>, bytes: &[u8], upto: Lsn) -> Result<(), StoreError> {
        let seg = slot
            .as_mut()
            .ok_or_else(|| StoreError::Io(Arc::from("no open log segment")))?;
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
            let (end, cut) = self.replay_file(&path, FileKind::Snapshot, 0, apply, &mut report)?;
            next = lsn;
            if cut {
                // Salvaged: the snapshot's later records are lost, and the log after it
                // cannot be applied on top of a partial state.
                next = end.min(lsn);
                stopped = true;
            }
        }
        for (first, path) in numbered(dir, "log-", ".wal")? {
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
            let (end, cut) = self.replay_file(&path, FileKind::Log, next, apply, &mut report)?;
            next = next.max(end);
            stopped = cut && report.salvaged.is_some();
        }
        {
            let mut slot = lock(&self.inner.segment);
            self.start_segment(&mut slot, next)?;
        }
        {
            let mut p = lock(&self.inner.pending);
            p.next = next;
            p.open = true;
        }
        self.inner.progress.send_modify(|p| p.durable = next);
        self.refresh_sizes()?;
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
            // Published only once the log is durable that far: a crash must not leave a
            // snapshot whose state the log cannot complete (a dead letter the snapshot shows
            // gone from its source while its arrival is still unwritten).
            self.write_through_to(upto)?;
            fs::rename(&tmp, dir.join(snapshot_name(at)))?;
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
            let end = slot.as_ref().map_or(at, |s| s.end);
            self.start_segment(&mut slot, end)?;
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
        lock(&self.inner.pending).closing = true;
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
        }
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
