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
use super::fifo::{Original, DEDUP_WINDOW_MS};
use super::journal::Journal;
use super::state::Order;
use super::{Clock, Engine, EngineSettings, Queue};

/// Snapshot frames are cut at about this size.
const FRAME_BYTES: usize = 64 << 10;

/// What replay keeps between records.
#[derive(Default)]
struct Replay {
    /// The queues replay has created, by uid.
    by_uid: HashMap<u64, Arc<Queue>>,
    /// The snapshot's cut per scope.
    cuts: HashMap<Scope, Lsn>,
}

impl Engine {
    /// An engine holding everything `store` kept, recording into it from now on.
    pub(crate) fn open(
        clock: Arc<Clock>,
        settings: EngineSettings,
        store: Arc<dyn Store>,
    ) -> Result<(Engine, Recovered), StoreError> {
        let mut engine = Engine::new(clock, settings);
        engine.journal = Journal::to(Arc::clone(&store));
        let mut replay = Replay::default();
        let report = store.recover(&mut |lsn, frame| engine.apply(lsn, frame, &mut replay))?;
        let max_uid = replay.by_uid.keys().max().copied().unwrap_or(0);
        engine.next_uid.fetch_max(max_uid + 1, Ordering::Relaxed);
        // The next start reads one snapshot instead of the log just replayed.
        engine.compact()?;
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
            if !covered {
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
                let task = Arc::new(super::move_task::MoveTask::from_record(r));
                match tasks.iter_mut().find(|t| t.task_id == task.task_id) {
                    Some(t) => *t = task,
                    None => tasks.push(task),
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
                    }
                    Change::Tags { tags, .. } => st.tags = tags.into_owned(),
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
                    _ => {}
                }
                // Replaying re-runs operations that record themselves; nothing is new.
                st.rec.frame.clear();
                st.wake = false;
            }
        }
    }

    fn cooldowns(&self) -> std::sync::MutexGuard<'_, HashMap<super::QueueId, u64>> {
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
        let mut queues: Vec<Arc<Queue>> = registry.values().cloned().collect();
        drop(registry);
        queues.sort_by_key(|q| q.uid);
        {
            // Tasks are recorded under this lock.
            let tasks = self.move_tasks.lock().unwrap_or_else(|p| p.into_inner());
            out.add(&Change::Cut {
                scope: Scope::MoveTasks,
                lsn: store.next_lsn(),
            });
            for t in tasks.iter() {
                out.add(&Change::MoveTask(t.record()));
            }
        }
        Snapshot { at, out, queues }
    }
}

/// A snapshot being taken: the registry is done, the queues follow one by one.
struct Snapshot {
    at: Lsn,
    out: Frames,
    queues: Vec<Arc<Queue>>,
}

impl Snapshot {
    /// Copies each queue under its own lock, and returns where the snapshot stands in the
    /// log with its frames.
    fn finish(mut self, store: &dyn Store) -> (Lsn, Vec<Vec<u8>>) {
        let out = &mut self.out;
        for q in &self.queues {
            let st = q.lock();
            // Every change to this queue is logged under this lock.
            let cut = store.next_lsn();
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
            for (key, m) in st.messages.iter() {
                out.add(&Change::Put {
                    uid,
                    key,
                    message: MessageRecord::of(m),
                });
            }
            // After the messages: restoring a message under a key below the next `seq`
            // would read as "deleted since".
            out.add(&Change::Counters {
                uid,
                counters: st.counters(),
            });
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
mod tests {
    use std::fmt::Write as _;
    use std::time::Duration;

    use super::*;
    use crate::engine::random;
    use crate::engine::redrive::RedrivePolicy;
    use crate::engine::{NewMessage, QueueId, QueueSettings, ReceiveRequest};
    use crate::store::memory::MemoryStore;

    const T0: u64 = 1_800_000_000_000;

    fn engine_on(store: &MemoryStore) -> Engine {
        let clock = Arc::new(Clock::starting_at(T0));
        clock.freeze();
        Engine::open(clock, EngineSettings::default(), Arc::new(store.reopen()))
            .unwrap()
            .0
    }

    fn id(name: &str) -> QueueId {
        QueueId {
            region: "us-east-1".into(),
            account: "000000000000".into(),
            name: name.into(),
        }
    }

    /// Everything recovery must reproduce, as text: queues with settings, tags, counters,
    /// every message whole, FIFO windows, cooldowns and the clock.
    fn fingerprint(e: &Engine) -> String {
        let now = e.now_ms();
        let mut out = format!("clock {now}\n");
        for q in e.all_queues() {
            q.stored(now);
            let st = q.lock();
            let _ = writeln!(
                out,
                "queue {:?} uid {} created {} {:?} {:?} {:?} counts {} {} {}",
                q.id,
                q.uid,
                st.created_s,
                st.settings,
                st.tags,
                st.counters(),
                st.visible,
                st.in_flight,
                st.delayed
            );
            for (key, m) in st.messages.iter() {
                let _ = writeln!(out, "  {key:?} {:?}", MessageRecord::of(m));
            }
            if let Order::Fifo(f) = &st.order {
                let mut d: Vec<String> = f
                    .dedup_entries()
                    .filter(|(_, exp, _)| *exp > now)
                    .map(|(k, exp, o)| format!("{k} {exp} {o:?}"))
                    .collect();
                d.sort();
                let mut a: Vec<String> = f
                    .attempt_entries()
                    .filter(|(_, at)| at.expires_ms > now)
                    .map(|(k, at)| format!("{k} {at:?}"))
                    .collect();
                a.sort();
                let _ = writeln!(out, "  dedup {d:?}\n  attempts {a:?}");
            }
        }
        let mut cool: Vec<String> = e
            .cooldowns()
            .iter()
            .map(|(k, v)| format!("{k:?} {v}"))
            .collect();
        cool.sort();
        let _ = writeln!(out, "cooldowns {cool:?}");
        out
    }

    /// Random traffic over standard, FIFO and dead-letter-wired queues.
    fn random_traffic(e: &Engine, seed: u64, steps: usize) {
        let mut x = seed;
        let dlq = e
            .create_queue(id("dlq"), QueueSettings::default())
            .unwrap()
            .0;
        let src_settings = QueueSettings {
            redrive_policy: Some(RedrivePolicy {
                raw: RedrivePolicy::document(&dlq.arn, 2),
                dead_letter_target: id("dlq"),
                max_receive_count: 2,
            }),
            ..QueueSettings::default()
        };
        e.create_queue(id("src"), src_settings).unwrap();
        let fifo = QueueSettings {
            fifo_queue: true,
            ..QueueSettings::default()
        };
        e.create_queue(id("f.fifo"), fifo).unwrap();
        let names = ["dlq", "src", "f.fifo"];
        let mut handles: Vec<(&str, String)> = Vec::new();
        for step in 0..steps {
            let r = random::next(&mut x);
            let name = names[(r >> 8) as usize % names.len()];
            let Some(q) = e.queue(&id(name)) else {
                continue;
            };
            let now = e.now_ms();
            match r % 10 {
                0..=2 => {
                    let m = NewMessage {
                        body: format!("m{step}"),
                        delay_seconds: (name != "f.fifo").then_some((r >> 20) as u32 % 3),
                        group_id: Some(format!("g{}", (r >> 24) % 3)),
                        deduplication_id: Some(format!("d{}", (r >> 28) % 40)),
                        ..NewMessage::default()
                    };
                    q.send(m, now).unwrap();
                }
                3 | 4 => {
                    let req = ReceiveRequest {
                        max_messages: 1 + (r >> 16) as usize % 3,
                        visibility_timeout: Some((r >> 20) as u32 % 4),
                        max_in_flight: 1000,
                        attempt_id: r.is_multiple_of(3).then(|| format!("a{}", (r >> 30) % 4)),
                    };
                    if let Ok(out) = e.receive(&q, req, now) {
                        handles.extend(out.messages.into_iter().map(|m| (name, m.receipt_handle)));
                    }
                }
                5 if !handles.is_empty() => {
                    let (n, h) = handles.swap_remove((r >> 12) as usize % handles.len());
                    if let Some(q) = e.queue(&id(n)) {
                        let _ = q.delete_message(&h, now);
                    }
                }
                6 if !handles.is_empty() => {
                    let (n, h) = &handles[(r >> 12) as usize % handles.len()];
                    if let Some(q) = e.queue(&id(n)) {
                        let _ = q.change_visibility(h, (r >> 20) as u32 % 3, now);
                    }
                }
                7 => e.advance_clock(Duration::from_millis((r >> 16) % 3_000)),
                8 if r.is_multiple_of(7) => {
                    let _ = q.purge(now, false);
                }
                8 => {
                    q.update_tags(|t| t.insert(format!("k{}", r % 5), step.to_string()));
                    q.update_settings(now, |s| {
                        s.delay_seconds = (r >> 16) as u32 % 2;
                        Ok::<_, ()>(())
                    })
                    .unwrap();
                }
                9 if r.is_multiple_of(211) && name == "f.fifo" => {
                    e.delete_queue(&q.id);
                    let fifo = QueueSettings {
                        fifo_queue: true,
                        ..QueueSettings::default()
                    };
                    e.advance_clock(Duration::from_secs(61));
                    e.create_queue(id("f.fifo"), fifo).unwrap();
                }
                _ => {}
            }
        }
    }

    #[test]
    fn the_log_and_the_snapshot_both_rebuild_the_live_state() {
        for seed in [1u64, 7, 42, 99, 12345] {
            let store = MemoryStore::new();
            let live = engine_on(&store);
            random_traffic(&live, seed, 3_000);
            let want = fingerprint(&live);
            assert!(want.contains("m"), "traffic left messages behind");
            // From the log (this start then writes a snapshot of what it rebuilt)...
            let from_log = engine_on(&store);
            same(&fingerprint(&from_log), &want, seed, "log replay");
            // ...and from that snapshot alone.
            let from_snapshot = engine_on(&store);
            same(&fingerprint(&from_snapshot), &want, seed, "snapshot");
            // A message sent after recovery gets the key it would have had without one.
            let keys: Vec<_> = [&live, &from_snapshot]
                .iter()
                .map(|e| {
                    let q = e.queue(&id("src")).unwrap();
                    let body = format!("after {seed}");
                    q.send(
                        NewMessage {
                            body: body.clone(),
                            ..NewMessage::default()
                        },
                        e.now_ms(),
                    )
                    .unwrap();
                    let st = q.lock();
                    let found = st.messages.iter().find(|(_, m)| *m.payload.body == *body);
                    found.map(|(k, _)| k)
                })
                .collect();
            assert!(keys[0].is_some());
            assert_eq!(keys[0], keys[1], "seed {seed}");
        }
    }

    /// A purge and sends logged after the snapshot began but before their queue was copied
    /// are in the snapshot; replaying them again would purge the sends.
    #[test]
    fn changes_between_a_snapshots_start_and_its_queue_copy_are_not_replayed() {
        let store = MemoryStore::new();
        let live = engine_on(&store);
        let q = live
            .create_queue(id("q"), QueueSettings::default())
            .unwrap()
            .0;
        let send = |body: &str| {
            let m = NewMessage {
                body: body.into(),
                ..NewMessage::default()
            };
            q.send(m, live.now_ms()).unwrap();
        };
        send("before");
        let started = live.begin_snapshot(&store);
        q.purge(live.now_ms(), false).unwrap();
        send("after the purge");
        let (at, frames) = started.finish(&store);
        store.snapshot(at, &mut frames.into_iter()).unwrap();
        send("after the snapshot");
        let recovered = engine_on(&store);
        same(&fingerprint(&recovered), &fingerprint(&live), 0, "cut");
        let q = recovered.queue(&id("q")).unwrap();
        assert_eq!(q.stored(recovered.now_ms()), 2);
    }

    #[test]
    fn snapshots_taken_while_traffic_runs_lose_and_repeat_nothing() {
        for round in 0..3u64 {
            let store = MemoryStore::new();
            let live = engine_on(&store);
            random_traffic(&live, 5 + round, 0);
            let done = std::sync::atomic::AtomicBool::new(false);
            let mut compactions = 0;
            std::thread::scope(|s| {
                for t in 0..3u64 {
                    let (live, done) = (&live, &done);
                    s.spawn(move || {
                        random_traffic(live, 1000 * round + t + 1, 2_000 + 500 * t as usize);
                        // Snapshots stop when the first worker is done, so the last one
                        // overlapped traffic and the log after it holds the rest.
                        done.store(true, Ordering::Release);
                    });
                }
                while !done.load(Ordering::Acquire) {
                    live.compact().unwrap();
                    compactions += 1;
                }
            });
            assert!(compactions > 1, "snapshots ran during the traffic");
            let recovered = engine_on(&store);
            same(
                &fingerprint(&recovered),
                &fingerprint(&live),
                round,
                "concurrent snapshots",
            );
        }
    }

    /// Equal fingerprints, or the first line that differs.
    fn same(got: &str, want: &str, seed: u64, what: &str) {
        for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
            assert_eq!(g, w, "seed {seed}, {what}: line {i} differs");
        }
        assert_eq!(
            got.lines().count(),
            want.lines().count(),
            "seed {seed}, {what}"
        );
    }
}
