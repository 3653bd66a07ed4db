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
    snapshots: u64,
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct MemoryStore {
    kept: Arc<Mutex<Kept>>,
    progress: Arc<watch::Sender<Progress>>,
}

impl MemoryStore {
    /// An empty store.
    pub(crate) fn new() -> MemoryStore {
        MemoryStore {
            kept: Arc::default(),
            progress: Arc::new(watch::Sender::new(Progress::default())),
        }
    }

    /// Another handle on the same records, as a process restarted on them would open.
    pub(crate) fn reopen(&self) -> MemoryStore {
        MemoryStore {
            kept: Arc::clone(&self.kept),
            progress: Arc::new(watch::Sender::new(Progress::default())),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Store for MemoryStore {
    fn recover(&self, apply: &mut Apply<'_>) -> Result<Recovered, StoreError> {
        let k = self.kept();
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
        k.log.push(record.to_vec());
        let lsn = k.snapshot_at + k.log.len() as Lsn - 1;
        self.progress.send_modify(|p| p.durable = lsn + 1);
        lsn
    }

    fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
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
        let mut k = self.kept();
        let drop = (at - k.snapshot_at) as usize;
        let drop = drop.min(k.log.len());
        k.log.drain(..drop);
        k.snapshot = records.collect();
        k.snapshot_at = at;
        k.snapshots += 1;
        Ok(())
    }

    fn close(&self) {}

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
