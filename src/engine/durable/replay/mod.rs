//! Durable start-up and compaction: an engine rebuilt from its store's records, and the
//! snapshot that describes an engine's whole state, taken while traffic runs.
//!
//! A snapshot is taken one scope at a time (the registry of queues, the clock, then each
//! queue under its own lock), and each scope notes the log position it was taken at (a
//! [`Change::Cut`]): every change of that scope logged before it is in the snapshot, none
//! after it is. Replay applies a logged change only if it is not older than its scope's cut,
//! so no request has to stop while a snapshot is written.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::store::{Lsn, Recovered, Store, StoreError};

use crate::engine::fifo::Original;
use crate::engine::journal::change::{self, Change, Scope};
use crate::engine::journal::Journal;
use crate::engine::state::Order;
use crate::engine::{Clock, Engine, EngineSettings, Queue};

/// What replay keeps between records.
#[derive(Default)]
struct Replay {
    /// The queues replay has created, by uid.
    by_uid: HashMap<u64, Arc<Queue>>,
    /// The snapshot's cut per scope.
    cuts: HashMap<Scope, Lsn>,
    /// Recorded clock changes are not applied: the clock is kept elsewhere (a cluster's,
    /// shared by every shard of a node).
    clock_given: bool,
    /// The highest queue uid any record names, deleted queues' included: the engine issues
    /// uids above it, never one again (a target keeps the marks of an outbox by its uid).
    max_uid: u64,
}

impl Engine {
    /// An engine holding everything `store` kept, recording into it from now on.
    pub(crate) fn open(
        clock: Arc<Clock>,
        settings: EngineSettings,
        store: Arc<dyn Store>,
    ) -> Result<(Engine, Recovered), StoreError> {
        Engine::recover(clock, settings, store, false)
    }

    /// [`Engine::open`] on a clock kept elsewhere (a cluster's): the store's recorded clock
    /// changes are not applied to it.
    pub(crate) fn open_on_clock(
        clock: Arc<Clock>,
        settings: EngineSettings,
        store: Arc<dyn Store>,
    ) -> Result<(Engine, Recovered), StoreError> {
        Engine::recover(clock, settings, store, true)
    }

    fn recover(
        clock: Arc<Clock>,
        settings: EngineSettings,
        store: Arc<dyn Store>,
        clock_given: bool,
    ) -> Result<(Engine, Recovered), StoreError> {
        let mut engine = Engine::new(clock, settings);
        engine.journal = Journal::to(Arc::clone(&store));
        let mut replay = Replay {
            clock_given,
            ..Replay::default()
        };
        let report = store.recover(&mut |lsn, frame| engine.apply(lsn, frame, &mut replay))?;
        engine
            .next_uid
            .fetch_max(replay.max_uid + 1, Ordering::Relaxed);
        // The next start reads one snapshot instead of the log just replayed. Without room
        // for it (a disk that was full), start anyway on the log as it is: the compactor
        // tries again later, and the log alone keeps everything.
        if let Err(e) = engine.compact() {
            tracing::warn!(error = %e, "no snapshot at start-up (the log still holds everything); retried later");
        }
        // Realism is a setting of this run, not of the data: it applies to recovered queues.
        let realism = engine.realism();
        if realism.is_on() {
            engine.set_realism(realism);
        }
        Ok((engine, report))
    }

    /// Writes a snapshot of the current state and lets the store drop the log before it.
    /// Traffic goes on meanwhile; each queue is locked only while it is copied.
    pub(crate) fn compact(&self) -> Result<(), StoreError> {
        let Some(store) = self.journal.store() else {
            return Ok(());
        };
        // Frames are made as the store writes them: see `snapshot`.
        let (at, mut frames) = self.begin_snapshot(store.as_ref()).finish(store.as_ref());
        store.snapshot(at, &mut frames)
    }

    /// Applies one recorded frame (`lsn` is `None` for a snapshot's).
    fn apply(&self, lsn: Option<Lsn>, frame: &[u8], replay: &mut Replay) -> Result<(), String> {
        for c in change::decode(frame)? {
            if let Change::Cut { scope, lsn } = c {
                replay.cuts.insert(scope, lsn);
                continue;
            }
            let covered =
                lsn.is_some_and(|l| replay.cuts.get(&c.scope()).is_some_and(|cut| l < *cut));
            let given = replay.clock_given && matches!(c, Change::Clock { .. });
            if let Change::QueueCreated { uid, .. } | Change::QueueDeleted { uid, .. } = c {
                replay.max_uid = replay.max_uid.max(uid);
            }
            if !covered && !given {
                self.apply_one(c, &mut replay.by_uid);
            }
        }
        Ok(())
    }

    fn apply_one(&self, c: Change<'_>, by_uid: &mut HashMap<u64, Arc<Queue>>) {
        let queue_of = |uid: u64| by_uid.get(&uid).cloned();
        match c {
            Change::QueueCreated {
                id,
                uid,
                created_ms,
                settings,
            } => {
                let id = id.into_owned();
                // It was created, so any cooldown on its name had run out.
                self.cooldowns().remove(&id);
                let q = Arc::new(Queue::new(
                    id.clone(),
                    uid,
                    settings.into_owned(),
                    created_ms,
                    self.journal.clone(),
                    None,
                ));
                let old = self
                    .queues
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id, Arc::clone(&q));
                if let Some(old) = old {
                    by_uid.remove(&old.uid);
                }
                by_uid.insert(uid, q);
            }
            Change::QueueDeleted { uid, cooldown_from } => {
                let Some(q) = by_uid.remove(&uid) else { return };
                let mut queues = self.queues.write().unwrap_or_else(|p| p.into_inner());
                if queues.get(&q.id).is_some_and(|cur| cur.uid == uid) {
                    queues.remove(&q.id);
                }
                if let Some(at) = cooldown_from {
                    self.cooldowns().insert(q.id.clone(), at);
                }
            }
            Change::Cooldown { id, at_ms } => {
                self.cooldowns().insert(id.into_owned(), at_ms);
            }
            Change::Reset { namespace } => {
                let ns = namespace.as_ref().map(|(r, a)| (&**r, &**a));
                self.forget(ns, false);
                by_uid.retain(|_, q| !q.is_deleted());
            }
            Change::Clock {
                offset_ms,
                frozen_at,
            } => self.clock.restore_virtual(offset_ms, frozen_at),
            Change::MoveTask(r) => {
                let mut tasks = self.move_tasks.lock().unwrap_or_else(|p| p.into_inner());
                use crate::engine::moves::task::MoveTask;
                match tasks.iter_mut().find(|t| t.task_id == r.task_id) {
                    Some(t) => *t = Arc::new(MoveTask::from_record(t.record().merge(r))),
                    None => tasks.push(Arc::new(MoveTask::from_record(r))),
                }
            }
            other => {
                let Scope::Queue(uid) = other.scope() else {
                    return;
                };
                let Some(q) = queue_of(uid) else { return };
                let mut st = q.lock();
                match other {
                    Change::Settings {
                        settings,
                        last_modified_s,
                        ..
                    } => {
                        st.settings = settings.into_owned();
                        st.last_modified_s = last_modified_s;
                        st.recount();
                    }
                    Change::Tags { tags, .. } => {
                        st.tags = tags.into_owned();
                        st.recount();
                    }
                    Change::Purged { at_ms, .. } => st.purge(at_ms),
                    Change::Put { key, message, .. } => st.restore(key, message),
                    Change::Progress { key, progress, .. } => st.set_progress(key, progress),
                    Change::Removed { key, .. } => {
                        st.remove(&key);
                    }
                    Change::Dedup {
                        dedup_key,
                        message_id,
                        sequence_number,
                        at_ms,
                        ..
                    } => st.restore_dedup(
                        dedup_key.into_owned(),
                        Original {
                            message_id: uuid::Uuid::from_bytes(message_id),
                            sequence_number: sequence_number.into_owned(),
                        },
                        at_ms,
                    ),
                    Change::Attempt {
                        attempt_id,
                        messages,
                        at_ms,
                        ..
                    } => {
                        if let Order::Fifo(f) = &mut st.order {
                            f.remember_attempt(attempt_id.into_owned(), messages, at_ms);
                        }
                    }
                    Change::Counters { counters, .. } => st.restore_counters(counters),
                    Change::Arrived { source, seq, .. } => {
                        // A mark only rises.
                        let mark = st.marks.entry(source.into_owned()).or_default();
                        *mark = (*mark).max(seq);
                    }
                    _ => {}
                }
                // Replaying re-runs operations that record themselves; nothing is new.
                st.rec.discard();
                st.wake = false;
            }
        }
    }

    fn cooldowns(&self) -> std::sync::MutexGuard<'_, HashMap<crate::engine::QueueId, u64>> {
        self.deleted.lock().unwrap_or_else(|p| p.into_inner())
    }
}

mod snapshot;
#[cfg(test)]
pub(in crate::engine) mod tests;
