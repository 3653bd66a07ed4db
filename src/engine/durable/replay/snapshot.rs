//! Taking a snapshot: the changes that rebuild an engine's whole state, made as the store
//! writes them. Each queue is copied under its own lock as cheap handles (each message's
//! shared payload and its small delivery state) and encoded into frames only as the store
//! pulls them, after the lock is let go: a snapshot of a full server holds one frame at a
//! time besides the state, never a second copy of every message (which made a server
//! near its memory cap peak at twice its size at every start and compaction).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::iter::Peekable;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::vec;

use crate::store::{Lsn, Store};

use crate::engine::fifo::DEDUP_WINDOW_MS;
use crate::engine::ids::MessageKey;
use crate::engine::journal::change::{self, Change, MessageRecord, Scope};
use crate::engine::journal::Journal;
use crate::engine::message::StoredMessage;
use crate::engine::state::Order;
use crate::engine::{Engine, Queue};

/// Snapshot frames are cut at about this size.
const FRAME_BYTES: usize = 64 << 10;

impl Engine {
    /// The first part of a snapshot: the clock and the registry.
    pub(super) fn begin_snapshot(&self, store: &dyn Store) -> Snapshot {
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
pub(super) struct Snapshot {
    at: Lsn,
    out: Frames,
    queues: Vec<Arc<Queue>>,
    journal: Journal,
}

impl Snapshot {
    /// Where the snapshot stands in the log, and its frames: each queue is copied under its
    /// own lock when the store reaches it.
    pub(super) fn finish(self, store: &dyn Store) -> (Lsn, impl Iterator<Item = Vec<u8>> + '_) {
        self.finish_with(store, |_| {})
    }

    /// [`Snapshot::finish`], calling `before` ahead of each queue's copy (tests use it to
    /// land traffic between two queues' copies).
    pub(super) fn finish_with<'a>(
        self,
        store: &'a dyn Store,
        before: impl FnMut(&Queue) + 'a,
    ) -> (Lsn, impl Iterator<Item = Vec<u8>> + 'a) {
        let frames = SnapshotFrames {
            store,
            journal: self.journal,
            queues: self.queues.into_iter(),
            before,
            out: self.out,
            copy: None,
        };
        (self.at, frames)
    }
}

/// The frames of a snapshot, made as they are taken.
struct SnapshotFrames<'a, F> {
    store: &'a dyn Store,
    journal: Journal,
    /// The queues not copied yet.
    queues: vec::IntoIter<Arc<Queue>>,
    before: F,
    out: Frames,
    /// The queue being encoded.
    copy: Option<QueueCopy>,
}

impl<F: FnMut(&Queue)> Iterator for SnapshotFrames<'_, F> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(frame) = self.out.done.pop_front() {
                return Some(frame);
            }
            if let Some(copy) = &mut self.copy {
                if !copy.encode_next(&mut self.out) {
                    for frame in std::mem::take(&mut copy.tail) {
                        self.out.add_encoded(&frame);
                    }
                    self.copy = None;
                }
                continue;
            }
            let Some(q) = self.queues.next() else {
                return self.out.take_rest();
            };
            (self.before)(&q);
            self.copy = Some(QueueCopy::of(&q, &self.journal, self.store, &mut self.out));
        }
    }
}

/// One queue as copied under its lock: its messages still to encode, and the changes that
/// follow them, already encoded.
struct QueueCopy {
    uid: u64,
    /// Handles to the messages: their payloads are shared, not copied.
    messages: Peekable<vec::IntoIter<(MessageKey, StoredMessage)>>,
    /// Its messages in transit to another queue, encoded when they left.
    transit: Peekable<vec::IntoIter<(MessageKey, Vec<u8>)>>,
    /// Counters, marks and FIFO windows, in frames: they follow the messages.
    tail: Vec<Vec<u8>>,
}

impl QueueCopy {
    /// Copies `q` under its lock: what goes before its messages into `out`, the rest into
    /// the copy.
    fn of(q: &Queue, journal: &Journal, store: &dyn Store, out: &mut Frames) -> QueueCopy {
        let st = q.lock();
        // Every change to this queue is logged under this lock. Its messages in transit to
        // another queue (their arrival not logged yet) are copied as still here: the
        // arrival, logged at or after this cut, takes them out again on replay.
        let (cut, transit) = journal.in_transit(q.uid, || store.next_lsn());
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
        // In `seq` order (the slab's): restoring a message under a key below the last one
        // restored would read as "removed since". Sized up front: grown by doubling, the
        // list would briefly take twice its room.
        let mut messages = Vec::with_capacity(st.messages.len());
        messages.extend(st.messages.iter().map(|(key, m)| (key, handle(m))));
        // After the messages: restoring a message under a key below the next `seq` would
        // read as "deleted since".
        let mut tail = Frames::default();
        tail.add(&Change::Counters {
            uid,
            counters: st.counters(),
        });
        for (source, seq) in &st.marks {
            tail.add(&Change::Arrived {
                uid,
                source: source.as_str().into(),
                seq: *seq,
            });
        }
        if let Order::Fifo(f) = &st.order {
            for (dedup_key, expires, original) in f.dedup_entries() {
                tail.add(&Change::Dedup {
                    uid,
                    dedup_key: dedup_key.into(),
                    message_id: *original.message_id.as_bytes(),
                    sequence_number: original.sequence_number.as_str().into(),
                    at_ms: expires - DEDUP_WINDOW_MS,
                });
            }
            for (attempt_id, attempt) in f.attempt_entries() {
                tail.add(&Change::Attempt {
                    uid,
                    attempt_id: attempt_id.into(),
                    messages: attempt.messages.clone(),
                    at_ms: attempt.expires_ms - DEDUP_WINDOW_MS,
                });
            }
        }
        QueueCopy {
            uid,
            messages: messages.into_iter().peekable(),
            transit: transit.into_iter().peekable(),
            tail: tail.finish(),
        }
    }

    /// Encodes the next message (or message in transit, in `seq` order among them) into
    /// `out`; false when none is left.
    fn encode_next(&mut self, out: &mut Frames) -> bool {
        let next_seq = self.messages.peek().map(|(k, _)| k.seq);
        if let Some((_, put)) = self
            .transit
            .next_if(|(k, _)| next_seq.is_none_or(|seq| k.seq < seq))
        {
            out.add_encoded(&put);
            return true;
        }
        let Some((key, m)) = self.messages.next() else {
            return false;
        };
        out.add(&Change::Put {
            uid: self.uid,
            key,
            message: MessageRecord::of(&m),
        });
        true
    }
}

/// A copy of `m` that shares its payload: what the snapshot needs of it, at the cost of a
/// few words.
fn handle(m: &StoredMessage) -> StoredMessage {
    StoredMessage {
        payload: Arc::clone(&m.payload),
        delivery: m.delivery,
        enqueued_ms: m.enqueued_ms,
        receive_count: m.receive_count,
        first_receive_ms: m.first_receive_ms,
        last_receive_ms: m.last_receive_ms,
        redelivered: m.redelivered,
    }
}

/// Snapshot changes packed into frames of about [`FRAME_BYTES`].
#[derive(Default)]
struct Frames {
    /// Frames made and not taken yet.
    done: VecDeque<Vec<u8>>,
    current: Vec<u8>,
}

impl Frames {
    fn add(&mut self, c: &Change<'_>) {
        change::encode(&mut self.current, c);
        self.cut_if_full();
    }

    /// Adds changes encoded beforehand.
    fn add_encoded(&mut self, c: &[u8]) {
        self.current.extend_from_slice(c);
        self.cut_if_full();
    }

    fn cut_if_full(&mut self) {
        if self.current.len() >= FRAME_BYTES {
            self.done.push_back(std::mem::take(&mut self.current));
        }
    }

    /// The frame being filled, if it holds anything: the last one.
    fn take_rest(&mut self) -> Option<Vec<u8>> {
        (!self.current.is_empty()).then(|| std::mem::take(&mut self.current))
    }

    fn finish(mut self) -> Vec<Vec<u8>> {
        let rest = self.take_rest();
        self.done.extend(rest);
        self.done.into()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::engine::durable::replay::tests::{engine_on, id};
    use crate::engine::{NewMessage, QueueSettings};
    use crate::store::memory::MemoryStore;

    /// The store takes a snapshot frame by frame, and the engine makes each as it is taken:
    /// a queue is copied only when the store reaches it, and no frame holds more than about
    /// [`FRAME_BYTES`] and one message. What was taken rebuilds every message.
    #[test]
    fn a_snapshot_is_made_as_the_store_takes_it() {
        let store = MemoryStore::new();
        let live = engine_on(&store);
        let body = "b".repeat(10 << 10);
        let mut queues = Vec::new();
        for name in ["first", "second"] {
            let q = live
                .create_queue(id(name), QueueSettings::default())
                .unwrap()
                .0;
            for i in 0..40 {
                let m = NewMessage {
                    body: format!("{i:02}{body}"),
                    ..NewMessage::default()
                };
                q.send(m, live.now_ms()).unwrap();
            }
            queues.push(q.uid);
        }
        let copied = RefCell::new(Vec::new());
        let started = live.begin_snapshot(&store);
        let (at, mut frames) = started.finish_with(&store, |q| copied.borrow_mut().push(q.uid));
        let first = frames.next().unwrap();
        assert_eq!(*copied.borrow(), [queues[0]], "copied ahead of the store");
        let mut taken = vec![first];
        taken.extend(frames);
        assert_eq!(*copied.borrow(), queues);
        // 800 KiB of messages: a dozen frames or so, none much over its size.
        assert!(taken.len() >= 10, "{} frames", taken.len());
        for f in &taken {
            assert!(
                f.len() < FRAME_BYTES + body.len() + 1024,
                "{} bytes",
                f.len()
            );
        }
        store.snapshot(at, &mut taken.into_iter()).unwrap();
        let recovered = engine_on(&store);
        for name in ["first", "second"] {
            let q = recovered.queue(&id(name)).unwrap();
            assert_eq!(q.stored(recovered.now_ms()), 40, "{name}");
        }
    }
}
