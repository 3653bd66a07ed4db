//! Where the engine hands its recorded changes (`change`) to a durable store, and how a
//! request learns which of them it must wait for: durable mode below the queue lock (what
//! sits above the registry — recovery, snapshots, compaction — is `durable`). Without a store (the in-memory default) every call here
//! is a no-op and nothing is encoded.
//!
//! It also keeps the messages **in transit**: a dead letter (or a message a move task moves)
//! leaves its queue under that queue's lock and arrives in another under the other's, and
//! the removal is only logged with the arrival. Between the two the message is in neither
//! queue's state; a snapshot copying its source then must still see it there, or a crash
//! before the arrival is durable would lose it. So the source hands each such message here
//! (as the `Put` that restores it) under its lock, the arrival is logged and the message
//! leaves this set in one step under this set's lock, and a snapshot reads its cut and the
//! set under the same lock (see [`Journal::in_transit`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::store::{Lsn, Store};

pub(crate) mod change;

use crate::engine::ids::MessageKey;
use crate::engine::message::StoredMessage;
use change::{Change, MessageRecord, TaskRecord};

/// What the journal needs of a message move task: its count, raised where the arrivals it
/// counts are recorded, and its record. A trait, so that the journal (below the queue) does
/// not depend on the task runner (above it).
pub(crate) trait MoveCount: std::fmt::Debug + Send + Sync {
    /// Counts `n` more messages moved.
    fn count_moved(&self, n: u64);
    /// The task as a durable store records it.
    fn record(&self) -> TaskRecord;
}

/// The records an answer depends on: for each store (one per engine: a cluster node runs
/// one per shard, and a request may read another shard's queue in-process), the newest
/// position in it.
pub(crate) type Depends = Vec<(Arc<dyn Store>, Lsn)>;

tokio::task_local! {
    /// What the current request's answer depends on: records it appended, and records that
    /// made the state it read (see [`Journal::depend`]).
    static DEPENDS: RefCell<Depends>;
}

/// What one request produced, with the records its answer relies on: it may be
/// acknowledged only once they are kept ([`Pending::kept`]). The only way to a request's
/// output is through here, so an answer cannot go out without the wait.
#[must_use = "an answer may go out only once what it relies on is kept: call `kept()`"]
pub(crate) struct Pending<T> {
    value: T,
    depends: Depends,
}

impl<T> Pending<T> {
    /// Waits until every record the value relies on is kept, in each store it touched
    /// (what it appended, and what made the state it read); without a store, at once.
    /// The error says a store could not keep one: the value must not be acknowledged.
    pub(crate) async fn kept(self) -> (T, Result<(), crate::store::StoreError>) {
        for (store, lsn) in &self.depends {
            if let Err(e) = crate::store::durable(store.as_ref(), *lsn).await {
                return (self.value, Err(e));
            }
        }
        (self.value, Ok(()))
    }

    /// The value and what it relies on, for tests that look at the positions.
    #[cfg(test)]
    pub(crate) fn into_parts(self) -> (T, Depends) {
        (self.value, self.depends)
    }
}

/// Runs `work` (one request: an SQS action, a control-plane change, a parcel between
/// shards), noting the records its answer relies on as the engine's locks are taken.
/// Noting at the lock, rather than in a list each handler keeps, is what makes it
/// impossible to forget: every read and write of a queue or the registry goes through one.
pub(crate) async fn track<F: Future>(work: F) -> Pending<F::Output> {
    DEPENDS
        .scope(RefCell::new(Vec::new()), async move {
            let value = work.await;
            let depends = DEPENDS.with(|d| std::mem::take(&mut *d.borrow_mut()));
            Pending { value, depends }
        })
        .await
}

/// Notes `lsn` of `store` for the current request (the newest per store); false outside a
/// request.
fn note(store: &Arc<dyn Store>, lsn: Lsn) -> bool {
    DEPENDS
        .try_with(|d| {
            let mut d = d.borrow_mut();
            let same = |s: &Arc<dyn Store>| std::ptr::addr_eq(Arc::as_ptr(s), Arc::as_ptr(store));
            match d.iter_mut().find(|(s, _)| same(s)) {
                Some((_, l)) => *l = (*l).max(lsn),
                None => d.push((Arc::clone(store), lsn)),
            }
        })
        .is_ok()
}

/// A log position kept in an atomic: 0 for none, otherwise the position plus one.
#[derive(Debug, Default)]
pub(crate) struct LastLsn(std::sync::atomic::AtomicU64);

impl LastLsn {
    /// Starting at `lsn`.
    pub(crate) fn new(lsn: Option<Lsn>) -> LastLsn {
        LastLsn(std::sync::atomic::AtomicU64::new(lsn.map_or(0, |l| l + 1)))
    }

    /// Raises it to `lsn` (never lowers it).
    pub(crate) fn raise(&self, lsn: Option<Lsn>) {
        if let Some(l) = lsn {
            self.0.fetch_max(l + 1, std::sync::atomic::Ordering::AcqRel);
        }
    }

    /// The position, if any.
    pub(crate) fn get(&self) -> Option<Lsn> {
        self.0
            .load(std::sync::atomic::Ordering::Acquire)
            .checked_sub(1)
    }

    /// Makes the current request's answer depend on it, a position in `journal`'s store
    /// ([`Journal::depend`]).
    pub(crate) fn depend_in(&self, journal: &Journal) {
        journal.depend(self.get());
    }
}

/// The changes one queue operation made, for a durable store: encoded as they happen (only
/// when a store is attached) and handed over as one frame before the queue's lock is
/// released ([`Journal::flush`]).
#[derive(Debug, Default)]
pub(in crate::engine) struct Recorder {
    pub(in crate::engine) on: bool,
    pub(in crate::engine) frame: Vec<u8>,
    /// Messages this operation took out for another queue, each as the encoded `Put` that
    /// restores it here: in transit until their arrival is logged.
    departed: Vec<(MessageKey, Vec<u8>)>,
    /// (queue uid, key) of messages that arrived from another queue (or back into this
    /// one): their removal there is in `frame`, and they leave the transit set with it.
    arrived: Vec<(u64, MessageKey)>,
    /// A move task that moved this many of them: its count goes up, and is recorded, in
    /// the same frame as their arrival.
    moved: Option<(Arc<dyn MoveCount>, u64)>,
}

impl Recorder {
    /// A recorder that encodes (`on`) or does nothing.
    pub(in crate::engine) fn new(on: bool) -> Recorder {
        Recorder {
            on,
            ..Recorder::default()
        }
    }

    pub(in crate::engine) fn add(&mut self, c: &Change<'_>) {
        if self.on {
            change::encode(&mut self.frame, c);
        }
    }

    /// `m`, stored under `key` in queue `uid`, was just taken out for another queue.
    pub(in crate::engine) fn depart(&mut self, uid: u64, key: MessageKey, m: &StoredMessage) {
        if self.on {
            let mut put = Vec::new();
            change::encode(
                &mut put,
                &Change::Put {
                    uid,
                    key,
                    message: MessageRecord::of(m),
                },
            );
            self.departed.push((key, put));
        }
    }

    /// The message under `key` in queue `from` just arrived here; `frame` records its removal
    /// there.
    pub(in crate::engine) fn arrive(&mut self, from: u64, key: MessageKey) {
        if self.on {
            self.arrived.push((from, key));
        }
    }

    /// `task` moved `n` of the messages this operation took in.
    pub(in crate::engine) fn count_moved(&mut self, task: &Arc<dyn MoveCount>, n: u64) {
        if self.on {
            self.moved = Some((Arc::clone(task), n));
        } else {
            task.count_moved(n);
        }
    }

    /// Forgets what was recorded (replay re-runs operations that record themselves).
    pub(in crate::engine) fn discard(&mut self) {
        self.frame.clear();
        self.departed.clear();
        self.arrived.clear();
        self.moved = None;
    }
}

/// Messages in transit (see the module documentation), by (source uid, key there), each as
/// the encoded `Put` that restores it in its source.
type Transit = BTreeMap<(u64, MessageKey), Vec<u8>>;

/// The engine's handle on its store, if it has one.
#[derive(Debug, Clone, Default)]
pub(crate) struct Journal {
    store: Option<Arc<dyn Store>>,
    transit: Arc<Mutex<Transit>>,
}

impl Journal {
    /// Records into `store`.
    pub(crate) fn to(store: Arc<dyn Store>) -> Journal {
        Journal {
            store: Some(store),
            transit: Arc::default(),
        }
    }

    /// Whether changes are recorded at all.
    pub(crate) fn is_on(&self) -> bool {
        self.store.is_some()
    }

    /// The store, if any.
    pub(crate) fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    fn transit(&self) -> std::sync::MutexGuard<'_, Transit> {
        self.transit.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands what one operation on queue `uid` recorded to the store, under that queue's
    /// lock: its frame, the messages it sent on their way (in transit from now), and the
    /// arrivals it logged (no longer in transit, in the same step as their frame is logged).
    /// Returns the frame's position, if one was appended.
    pub(in crate::engine) fn flush(&self, uid: u64, rec: &mut Recorder) -> Option<Lsn> {
        if !rec.departed.is_empty() {
            let mut transit = self.transit();
            for (key, put) in rec.departed.drain(..) {
                transit.insert((uid, key), put);
            }
        }
        let lsn = if rec.arrived.is_empty() && rec.moved.is_none() {
            if rec.frame.is_empty() {
                None
            } else {
                self.append(&rec.frame)
            }
        } else {
            // One step for a snapshot reading its cut under this lock: either the arrival is
            // logged before the cut, the message is not in transit any more and the task's
            // count includes it, or it is logged after the cut, the snapshot still finds the
            // message in transit from its source and the count without it.
            let mut transit = self.transit();
            for key in rec.arrived.drain(..) {
                transit.remove(&key);
            }
            if let Some((task, n)) = rec.moved.take() {
                task.count_moved(n);
                change::encode(&mut rec.frame, &Change::MoveTask(task.record()));
            }
            self.append(&rec.frame)
        };
        rec.frame.clear();
        lsn
    }

    /// Runs `f` while no message arrives from another queue and no move task's count goes
    /// up (a snapshot reading its cut and what these change).
    pub(in crate::engine) fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        let _transit = self.transit();
        f()
    }

    /// For a snapshot copying queue `uid` under its lock: the log position `cut` returns
    /// (read under the transit lock) and the messages in transit from that queue, in
    /// arrival (`seq`) order, as encoded `Put`s. The snapshot holds them in the queue; the arrival, logged at
    /// or after the cut, removes them again on replay.
    pub(in crate::engine) fn in_transit(
        &self,
        uid: u64,
        cut: impl FnOnce() -> Lsn,
    ) -> (Lsn, Vec<(MessageKey, Vec<u8>)>) {
        let transit = self.transit();
        // Under the transit lock, as [`Journal::exclusive`].
        let at = cut();
        let from = MessageKey { sent_ms: 0, seq: 0 };
        let mut out: Vec<(MessageKey, Vec<u8>)> = transit
            .range((uid, from)..)
            .take_while(|((u, _), _)| *u == uid)
            .map(|((_, k), put)| (*k, put.clone()))
            .collect();
        // The queue's messages are copied in arrival (`seq`) order; these join them there.
        out.sort_by_key(|(k, _)| k.seq);
        (at, out)
    }

    /// Notes that the current request's answer reads or relies on the state the record at
    /// `lsn` of this journal's store made (if any), so the answer waits until that record
    /// is durable too, whoever appended it. This is what keeps a retry honest: an SDK
    /// retrying a send whose first attempt is still waiting for its fsync (or was refused
    /// by the disk) finds the message by its deduplication id and appends nothing, yet must
    /// not be acknowledged before the first attempt's record is kept. Outside a request
    /// (background work) it does nothing.
    pub(crate) fn depend(&self, lsn: Option<Lsn>) {
        if let (Some(store), Some(lsn)) = (&self.store, lsn) {
            note(store, lsn);
        }
    }

    /// Appends one frame (changes already encoded), notes it for the current request and
    /// returns its position (none without a store).
    pub(crate) fn append(&self, frame: &[u8]) -> Option<Lsn> {
        let s = self.store.as_ref()?;
        let lsn = s.append(frame);
        if !note(s, lsn) {
            // A background change (move task, start-up): nobody waits for it.
            s.nudge();
        }
        Some(lsn)
    }

    /// Encodes `changes` as one frame and appends it; returns its position.
    pub(crate) fn record(&self, changes: &[Change<'_>]) -> Option<Lsn> {
        if !self.is_on() {
            return None;
        }
        let mut frame = Vec::new();
        for c in changes {
            change::encode(&mut frame, c);
        }
        self.append(&frame)
    }
}
