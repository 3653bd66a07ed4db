//! A store that keeps its records in memory: what the suite and replay tests run against
//! when no disk is wanted. Clones share the records, so "reopening" a clone sees what the
//! first one kept, as a restart would.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::{Apply, Lsn, Progress, Recovered, Store, StoreError, StoreStats};

#[derive(Debug, Default)]
struct Kept {
    snapshot: Vec<Vec<u8>>,
    /// The position the snapshot stands for.
    snapshot_at: Lsn,
    /// Records from `snapshot_at` on.
    log: Vec<Vec<u8>>,
    /// With `lagging`: how many of `log` are durable (a crash keeps only those).
    durable: usize,
    /// Appends are durable only on [`MemoryStore::flush`] (or a snapshot), as a disk's
    /// would be only once written, so tests can crash in between.
    lagging: bool,
    /// A deliberately broken store for tests: snapshots take effect without making the
    /// records appended before them durable.
    publish_early: bool,
    snapshots: u64,
    /// Appends are refused (kept, not durable) as a full disk's writes would be.
    refusing: bool,
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct MemoryStore {
    kept: Arc<Mutex<Kept>>,
    progress: Arc<watch::Sender<Progress>>,
    closed: Arc<std::sync::atomic::AtomicBool>,
}

impl MemoryStore {
    /// An empty store.
    pub(crate) fn new() -> MemoryStore {
        MemoryStore {
            kept: Arc::default(),
            progress: Arc::new(watch::Sender::new(Progress::default())),
            closed: Arc::default(),
        }
    }

    /// An empty store whose appends become durable only when flushed (or snapshotted), and
    /// that can [`MemoryStore::crashed`] before that.
    pub(crate) fn lagging() -> MemoryStore {
        let s = MemoryStore::new();
        s.kept().lagging = true;
        s
    }

    /// Makes a lagging store take snapshots in without making what was appended before
    /// them durable (what the [`Store::snapshot`] contract forbids): for a test to show
    /// what that would lose.
    pub(crate) fn publish_snapshots_early(&self) {
        self.kept().publish_early = true;
    }

    /// Another handle on the same records, as a process restarted on them would open.
    pub(crate) fn reopen(&self) -> MemoryStore {
        MemoryStore {
            kept: Arc::clone(&self.kept),
            progress: Arc::new(watch::Sender::new(Progress::default())),
            closed: Arc::default(),
        }
    }

    /// Makes every record appended so far durable.
    pub(crate) fn flush(&self) {
        let mut k = self.kept();
        k.durable = k.log.len();
        let next = k.snapshot_at + k.log.len() as Lsn;
        self.progress.send_modify(|p| p.durable = next);
    }

    /// Refuses writes from now on (`on`): appends are kept but not durable, and their
    /// waiters are told the write failed; or takes writes again, as a retry succeeding
    /// would (everything kept becomes durable).
    pub(crate) fn refuse_writes(&self, on: bool) {
        self.kept().refusing = on;
        if !on {
            self.flush();
            self.progress.send_modify(|p| p.failure = None);
        }
    }

    /// How many records were appended but are not durable yet.
    pub(crate) fn not_durable(&self) -> usize {
        let k = self.kept();
        k.log.len() - k.durable
    }

    /// What a process killed now would restart on: a separate store with the snapshot and
    /// the durable records only. This one goes on unchanged.
    pub(crate) fn crashed(&self) -> MemoryStore {
        self.crashed_keeping(0)
    }

    /// [`MemoryStore::crashed`], where the disk also kept the first `extra` records that were
    /// not durable yet (a crash can leave any prefix of what was being written).
    pub(crate) fn crashed_keeping(&self, extra: usize) -> MemoryStore {
        let k = self.kept();
        let kept = (k.durable + extra).min(k.log.len());
        let copy = Kept {
            snapshot: k.snapshot.clone(),
            snapshot_at: k.snapshot_at,
            log: k.log[..kept].to_vec(),
            durable: kept,
            lagging: k.lagging,
            publish_early: k.publish_early,
            snapshots: k.snapshots,
            refusing: false,
        };
        MemoryStore {
            kept: Arc::new(Mutex::new(copy)),
            progress: Arc::new(watch::Sender::new(Progress::default())),
            closed: Arc::default(),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Store for MemoryStore {
    fn recover(&self, apply: &mut Apply<'_>) -> Result<Recovered, StoreError> {
        let mut k = self.kept();
        k.durable = k.log.len();
        let mut report = Recovered::default();
        let snapshot = k.snapshot.iter().map(|r| (None, r));
        let log = (k.snapshot_at..).map(Some).zip(&k.log);
        for (lsn, r) in snapshot.chain(log) {
            apply(lsn, r).map_err(|reason| StoreError::Replay {
                lsn: lsn.unwrap_or(k.snapshot_at),
                reason,
            })?;
            report.records += 1;
        }
        report.from_snapshot = k.snapshot.len() as u64;
        let next = k.snapshot_at + k.log.len() as Lsn;
        self.progress.send_modify(|p| p.durable = next);
        Ok(report)
    }

    fn append(&self, record: &[u8]) -> Lsn {
        let mut k = self.kept();
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            // Never kept; its waiter learns so from the failure `close` published.
            return k.snapshot_at + k.log.len() as Lsn;
        }
        k.log.push(record.to_vec());
        let lsn = k.snapshot_at + k.log.len() as Lsn - 1;
        if k.refusing {
            // Kept, not durable: its waiter's attempt to write it fails (`write_through`).
        } else if !k.lagging {
            k.durable = k.log.len();
            self.progress.send_modify(|p| p.durable = lsn + 1);
        }
        lsn
    }

    fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
    }

    fn backlog_bytes(&self) -> u64 {
        let k = self.kept();
        k.log[k.durable.min(k.log.len())..]
            .iter()
            .map(|r| r.len() as u64)
            .sum()
    }

    fn write_through(&self, lsn: Lsn) {
        // Refusing: every attempt to write what a waiter waits for fails, as a full disk's.
        if self.kept().refusing && self.progress.borrow().durable <= lsn {
            self.progress.send_modify(|p| {
                p.failure = Some((
                    Lsn::MAX - 1,
                    Arc::from("no space left on device [injected]"),
                ));
                p.failures += 1;
            });
        }
    }

    fn next_lsn(&self) -> Lsn {
        let k = self.kept();
        k.snapshot_at + k.log.len() as Lsn
    }

    fn snapshot(
        &self,
        at: Lsn,
        records: &mut dyn Iterator<Item = Vec<u8>>,
    ) -> Result<(), StoreError> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(StoreError::Io(Arc::from("the store is closed")));
        }
        let records: Vec<Vec<u8>> = records.collect();
        let mut k = self.kept();
        if !k.publish_early {
            k.durable = k.log.len();
            let next = k.snapshot_at + k.log.len() as Lsn;
            self.progress.send_modify(|p| p.durable = next);
        }
        let drop = (at - k.snapshot_at) as usize;
        let drop = drop.min(k.log.len());
        k.log.drain(..drop);
        k.durable = k.durable.saturating_sub(drop);
        k.snapshot = records;
        k.snapshot_at = at;
        k.snapshots += 1;
        Ok(())
    }

    fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.progress
            .send_modify(|p| p.failure = Some((Lsn::MAX, Arc::from("the store is closed"))));
    }

    fn stats(&self) -> StoreStats {
        let k = self.kept();
        let bytes = |v: &[Vec<u8>]| v.iter().map(|r| r.len() as u64).sum();
        StoreStats {
            log_bytes: bytes(&k.log),
            snapshot_bytes: bytes(&k.snapshot),
            appended_records: k.log.len() as u64,
            snapshots: k.snapshots,
            writable: true,
            ..StoreStats::default()
        }
    }
}
