//! Durable start-up and compaction: an engine rebuilt from its store's records, and the
//! snapshot that describes an engine's whole state, taken while traffic runs.
//!
//! A snapshot is taken one scope at a time (the registry of queues, the clock, then each
//! queue under its own lock), and each scope notes the log position it was taken at (a
//! [`Change::Cut`]): every change of that scope logged before it is in the snapshot, none
//! after it is. Replay applies a logged change only if it is not older than its scope's cut,
//! so no request has to stop while a snapshot is written.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::store::{Lsn, Recovered, Store, StoreError};

use super::change::{self, Change, MessageRecord, Scope};
use super::journal::Journal;
use crate::engine::fifo::{Original, DEDUP_WINDOW_MS};
use crate::engine::state::Order;
use crate::engine::{Clock, Engine, EngineSettings, Queue};

/// Snapshot frames are cut at about this size.
const FRAME_BYTES: usize = 64 << 10;

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
        let (at, frames) = self.snapshot_frames(store.as_ref());
        store.snapshot(at, &mut frames.into_iter())
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

    /// Frames that rebuild this engine's whole state, and the log position they replace the
    /// log up to: the clock, each queue with its settings, tags, messages, counters and FIFO
    /// windows, and the deleted-name cooldowns, each scope with its cut.
    fn snapshot_frames(&self, store: &dyn Store) -> (Lsn, Vec<Vec<u8>>) {
        self.begin_snapshot(store).finish(store)
    }

    /// The first part of a snapshot: the clock and the registry.
    fn begin_snapshot(&self, store: &dyn Store) -> Snapshot {
        let mut out = Frames::default();
        // Read before the state it covers: a clock change logged after this may or may not
        // be in the reading, and replaying it again is harmless.
        let at = store.next_lsn();
        let (offset_ms, frozen_at) = self.clock.virtual_state();
        out.add(&Change::Clock {
            offset_ms,
            frozen_at,
        });
        out.add(&Change::Cut {
            scope: Scope::Clock,
            lsn: at,
        });
        // Queues are created and deleted (and cooldowns set) under the registry's write
        // lock, so nothing of the registry's is logged while this read lock is held.
        let registry = self.queues.read().unwrap_or_else(|p| p.into_inner());
        out.add(&Change::Cut {
            scope: Scope::Registry,
            lsn: store.next_lsn(),
        });
        for (id, at_ms) in self.cooldowns().iter() {
            out.add(&Change::Cooldown {
                id: Cow::Borrowed(id),
                at_ms: *at_ms,
            });
        }
        // The last uid issued, when its queue is gone: recorded as that queue's deletion (a
        // no-op to replay, older versions' included), so a start issues uids above it even
        // if every queue since was removed — an outbox's uid reused with a frozen clock
        // would find the target's mark of the old one and its first entries dropped as
        // delivered. (Uids are issued under the registry's write lock: none meanwhile.)
        let last = self.next_uid.load(Ordering::Relaxed).saturating_sub(1);
        if !registry.values().any(|q| q.uid == last) {
            out.add(&Change::QueueDeleted {
                uid: last,
                cooldown_from: None,
            });
        }
        let mut queues: Vec<Arc<Queue>> = registry.values().cloned().collect();
        drop(registry);
        queues.sort_by_key(|q| q.uid);
        {
            // Tasks are recorded under this lock, except their counts, which go up with the
            // arrival of what they moved (see `Journal::flush`).
            let tasks = self.move_tasks.lock().unwrap_or_else(|p| p.into_inner());
            let (cut, records) = self.journal.exclusive(|| {
                let records: Vec<_> = tasks.iter().map(|t| t.record()).collect();
                (store.next_lsn(), records)
            });
            out.add(&Change::Cut {
                scope: Scope::MoveTasks,
                lsn: cut,
            });
            for r in records {
                out.add(&Change::MoveTask(r));
            }
        }
        Snapshot {
            at,
            out,
            queues,
            journal: self.journal.clone(),
        }
    }
}

/// A snapshot being taken: the registry is done, the queues follow one by one.
struct Snapshot {
    at: Lsn,
    out: Frames,
    queues: Vec<Arc<Queue>>,
    journal: Journal,
}

impl Snapshot {
    /// Copies each queue under its own lock, and returns where the snapshot stands in the
    /// log with its frames.
    fn finish(self, store: &dyn Store) -> (Lsn, Vec<Vec<u8>>) {
        self.finish_with(store, |_| {})
    }

    /// [`Snapshot::finish`], calling `before` ahead of each queue's copy (tests use it to
    /// land traffic between two queues' copies).
    fn finish_with(
        mut self,
        store: &dyn Store,
        mut before: impl FnMut(&Queue),
    ) -> (Lsn, Vec<Vec<u8>>) {
        let out = &mut self.out;
        for q in &self.queues {
            before(q);
            let st = q.lock();
            // Every change to this queue is logged under this lock. Its messages in transit
            // to another queue (their arrival not logged yet) are copied as still here:
            // the arrival, logged at or after this cut, takes them out again on replay.
            let (cut, transit) = self.journal.in_transit(q.uid, || store.next_lsn());
            let mut transit = transit.into_iter().peekable();
            let uid = q.uid;
            out.add(&Change::QueueCreated {
                id: Cow::Borrowed(&q.id),
                uid,
                created_ms: st.created_s * 1000,
                settings: Cow::Borrowed(&st.settings),
            });
            out.add(&Change::Cut {
                scope: Scope::Queue(uid),
                lsn: cut,
            });
            out.add(&Change::Tags {
                uid,
                tags: Cow::Borrowed(&st.tags),
            });
            // In `seq` order: restoring a message under a key below the last one restored
            // would read as "removed since".
            for (key, m) in st.messages.iter() {
                while let Some((_, put)) = transit.next_if(|(k, _)| k.seq < key.seq) {
                    out.add_encoded(&put);
                }
                out.add(&Change::Put {
                    uid,
                    key,
                    message: MessageRecord::of(m),
                });
            }
            for (_, put) in transit {
                out.add_encoded(&put);
            }
            // After the messages: restoring a message under a key below the next `seq`
            // would read as "deleted since".
            out.add(&Change::Counters {
                uid,
                counters: st.counters(),
            });
            for (source, seq) in &st.marks {
                out.add(&Change::Arrived {
                    uid,
                    source: source.as_str().into(),
                    seq: *seq,
                });
            }
            if let Order::Fifo(f) = &st.order {
                for (dedup_key, expires, original) in f.dedup_entries() {
                    out.add(&Change::Dedup {
                        uid,
                        dedup_key: dedup_key.into(),
                        message_id: *original.message_id.as_bytes(),
                        sequence_number: original.sequence_number.as_str().into(),
                        at_ms: expires - DEDUP_WINDOW_MS,
                    });
                }
                for (attempt_id, attempt) in f.attempt_entries() {
                    out.add(&Change::Attempt {
                        uid,
                        attempt_id: attempt_id.into(),
                        messages: attempt.messages.clone(),
                        at_ms: attempt.expires_ms - DEDUP_WINDOW_MS,
                    });
                }
            }
        }
        (self.at, self.out.finish())
    }
}

/// Snapshot changes packed into frames of about [`FRAME_BYTES`].
#[derive(Default)]
struct Frames {
    done: Vec<Vec<u8>>,
    current: Vec<u8>,
}

impl Frames {
    fn add(&mut self, c: &Change<'_>) {
        change::encode(&mut self.current, c);
        self.cut_if_full();
    }

    /// Adds a change encoded beforehand.
    fn add_encoded(&mut self, c: &[u8]) {
        self.current.extend_from_slice(c);
        self.cut_if_full();
    }

    fn cut_if_full(&mut self) {
        if self.current.len() >= FRAME_BYTES {
            self.done.push(std::mem::take(&mut self.current));
        }
    }

    fn finish(mut self) -> Vec<Vec<u8>> {
        if !self.current.is_empty() {
            self.done.push(self.current);
        }
        self.done
    }
}

#[cfg(test)]
pub(in crate::engine) mod tests;
