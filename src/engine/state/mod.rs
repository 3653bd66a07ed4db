//! The inside of one queue, always used under its lock: settings, messages and the indexes
//! that keep every operation O(log n) or better — the message slab (indexed by arrival), a
//! delivery order (fair rotation or FIFO groups) and an ordered set of deadlines (delay ends
//! and visibility ends). Expiry is lazy: each operation first catches the state up to "now"
//! by popping the deadlines that have passed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::fair::FairIndex;
use super::fifo::FifoIndex;
use super::ids::MessageKey;
use super::journal::Recorder;
use super::message::{Delivery, ReceivedMessage, StoredMessage};
use super::receipt::Receipt;
use super::settings::{DeduplicationScope, QueueSettings};
use super::slab::MessageSlab;
use super::view::Traffic;

mod receive;
mod send;
mod settle;
mod transfer;

/// Delivery order: fair rotation for standard queues, groups for FIFO queues.
#[derive(Debug)]
pub(super) enum Order {
    Standard(FairIndex),
    Fifo(Box<FifoIndex>),
}

#[derive(Debug)]
pub(super) struct QueueState {
    /// The queue incarnation this state belongs to (names it in recorded changes).
    pub(super) uid: u64,
    pub(super) settings: QueueSettings,
    pub(super) created_s: u64,
    pub(super) last_modified_s: u64,
    pub(super) tags: BTreeMap<String, String>,
    pub(super) messages: MessageSlab,
    /// Messages that arrived with an older enqueue time than ones already stored (dead
    /// letters keep their original one), so retention cannot find them at the store's front.
    pub(super) late: BTreeSet<MessageKey>,
    /// The newest enqueue time stored so far.
    pub(super) newest_enqueued_ms: u64,
    /// Which visible message goes out next.
    pub(super) order: Order,
    /// Deduplication scope fixed at creation (later changes are reported, not applied).
    pub(super) dedup_scope: DeduplicationScope,
    /// (deadline ms, message): delay ends and visibility ends.
    pub(super) timers: BTreeSet<(u64, MessageKey)>,
    pub(super) visible: usize,
    pub(super) in_flight: usize,
    pub(super) delayed: usize,
    pub(super) last_now: u64,
    pub(super) last_purge_ms: Option<u64>,
    pub(super) traffic: Traffic,
    /// At-least-once mode: the chance that a delete is "lost" once and the message comes
    /// back, so consumers can prove they are idempotent. 0 is off.
    pub(super) redeliver_probability: f64,
    pub(super) rng: u64,
    /// AWS-realism mode for this queue; `None` when off (the common case costs one check).
    pub(super) realism: Option<Box<super::realism::RealismState>>,
    /// Set by operations that should wake long polls once the lock is released.
    pub(super) wake: bool,
    pub(super) rec: Recorder,
    /// Cluster mode: for each outbox that delivers here (named by its shard and uid), the
    /// highest entry taken, so a redelivery after a failover is recognised.
    pub(super) marks: BTreeMap<String, u64>,
    /// What the queue itself holds — its structures, settings and tags — as
    /// `--max-stored-bytes` counts it (its messages are the slab's); see [`Self::recount`].
    held: super::memory::Held,
}

/// What an empty queue holds: its state, registry entry, names and ARN, locks and indexes
/// (measured over 2,000 queues; see [`super::memory`]).
pub(crate) const QUEUE_OVERHEAD: u64 = 4096;

/// What one tag costs beyond its key's and value's allocations: its node share in the map.
const TAG_OVERHEAD: u64 = 64;

/// What a queue with `settings` and `tags` holds.
pub(crate) fn queue_footprint<'a>(
    settings: &QueueSettings,
    tags: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> u64 {
    use super::memory::heap;
    let text = |s: Option<&str>| s.map_or(0, |s| heap(s.len()));
    QUEUE_OVERHEAD
        + text(settings.policy.as_deref())
        + text(settings.redrive_policy.as_ref().map(|p| p.raw.as_str()))
        + text(
            settings
                .redrive_allow_policy
                .as_ref()
                .map(|p| p.raw.as_str()),
        )
        + text(settings.kms_master_key_id.as_deref())
        + tags_footprint(tags)
}

/// What a queue's `tags` hold (its share of [`queue_footprint`]).
pub(crate) fn tags_footprint<'a>(tags: impl IntoIterator<Item = (&'a String, &'a String)>) -> u64 {
    use super::memory::heap;
    tags.into_iter()
        .map(|(k, v)| TAG_OVERHEAD + heap(k.len()) + heap(v.len()))
        .sum()
}

impl QueueState {
    /// The state of a new, empty queue.
    pub(super) fn new(
        settings: QueueSettings,
        uid: u64,
        now_ms: u64,
        recorded: bool,
    ) -> QueueState {
        let order = if settings.fifo_queue {
            Order::Fifo(Box::default())
        } else {
            Order::Standard(FairIndex::default())
        };
        let dedup_scope = settings.deduplication_scope;
        let mut st = QueueState {
            uid,
            settings,
            created_s: now_ms / 1000,
            last_modified_s: now_ms / 1000,
            tags: BTreeMap::new(),
            messages: MessageSlab::default(),
            late: BTreeSet::new(),
            newest_enqueued_ms: 0,
            order,
            dedup_scope,
            timers: BTreeSet::new(),
            visible: 0,
            in_flight: 0,
            delayed: 0,
            last_now: now_ms,
            last_purge_ms: None,
            traffic: Traffic::default(),
            redeliver_probability: 0.0,
            rng: uid | 1,
            realism: None,
            wake: false,
            rec: Recorder::new(recorded),
            marks: BTreeMap::new(),
            held: super::memory::Held::default(),
        };
        st.recount();
        st
    }

    /// Counts what the queue holds anew, after its settings or tags changed.
    pub(super) fn recount(&mut self) {
        self.held.set(queue_footprint(&self.settings, &self.tags));
    }

    /// Brings the queue up to `now_ms` (never backwards) and returns the time to use.
    pub(super) fn catch_up(&mut self, now_ms: u64) -> u64 {
        let now = now_ms.max(self.last_now);
        self.last_now = now;
        if self.realism.is_some() {
            self.realism_catch_up(now);
        }
        self.expire(now);
        while let Some(&(deadline, key)) = self.timers.first() {
            if deadline > now {
                break;
            }
            self.timers.pop_first();
            let Some(msg) = self.messages.get(&key) else {
                continue;
            };
            match msg.delivery {
                Delivery::InFlight { .. } => self.in_flight -= 1,
                Delivery::Delayed { .. } => self.delayed -= 1,
                Delivery::Visible => continue,
            }
            self.make_visible(key);
        }
        now
    }

    /// When the oldest message still stored was sent (dead letters keep their original time).
    pub(super) fn oldest_sent_ms(&self) -> Option<u64> {
        let first = self.messages.first().map(|(k, _)| k.sent_ms);
        let late = self.late.first().map(|k| k.sent_ms);
        match (first, late) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Drops messages older than the retention period, oldest first.
    pub(super) fn expire(&mut self, now: u64) {
        let retention_ms = self.effective().message_retention_period as u64 * 1000;
        let expired = |key: &MessageKey| key.sent_ms + retention_ms <= now;
        while let Some(key) = self.messages.first().map(|(k, _)| k).filter(expired) {
            if self.remove(&key).is_some() {
                self.traffic.expired += 1;
            }
        }
        while let Some(key) = self.late.first().copied().filter(expired) {
            self.late.pop_first();
            if self.remove(&key).is_some() {
                self.traffic.expired += 1;
            }
        }
    }

    /// The counters always agree with the indexes (tests call this after every step).
    #[cfg(test)]
    pub(super) fn assert_consistent(&self) {
        let (mut v, mut f, mut d) = (0, 0, 0);
        for (key, m) in self.messages.iter() {
            match m.delivery {
                Delivery::Visible => v += 1,
                Delivery::InFlight { until_ms } => {
                    f += 1;
                    assert!(self.timers.contains(&(until_ms, key)));
                }
                Delivery::Delayed { until_ms } => {
                    d += 1;
                    assert!(self.timers.contains(&(until_ms, key)));
                }
            }
        }
        assert_eq!((v, f, d), (self.visible, self.in_flight, self.delayed));
        assert_eq!(self.timers.len(), f + d);
    }
}

/// What a receive hands out for a stored message: its payload and a handle naming this
/// receive.
pub(super) fn issue(
    msg: &StoredMessage,
    key: MessageKey,
    uid: u64,
    first_receive_ms: u64,
) -> ReceivedMessage {
    ReceivedMessage {
        payload: Arc::clone(&msg.payload),
        receipt_handle: Receipt {
            queue_uid: uid,
            key,
            receive_number: msg.receive_count,
        }
        .encode(),
        receive_count: msg.receive_count,
        first_receive_ms,
    }
}

/// The FIFO group a message is ordered in. One without a group id (it can only arrive by a
/// move from a standard queue) is in the group "", everywhere the FIFO index is touched.
pub(super) fn fifo_group(group_id: Option<&Arc<str>>) -> Arc<str> {
    group_id.cloned().unwrap_or_else(|| Arc::from(""))
}
