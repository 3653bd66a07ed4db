//! Putting a queue's state back from recorded changes: a message under its original key,
//! a recorded delivery state, the counters a snapshot keeps. Every index (delivery order,
//! timers, counts) is maintained by the same calls the live operations use.

use std::sync::Arc;

use crate::engine::fifo::Original;
use crate::engine::ids::MessageKey;
use crate::engine::journal::change::{MessageRecord, Progress, QueueCounters};
use crate::engine::message::Delivery;
use crate::engine::state::{fifo_group, Order, QueueState};

impl QueueState {
    /// Stores a recorded message under its original key (or, if it is already stored,
    /// takes its recorded delivery state).
    pub(in crate::engine) fn restore(&mut self, key: MessageKey, record: MessageRecord<'_>) {
        if self.messages.get(&key).is_some() {
            self.set_progress(key, record.progress);
            return;
        }
        if key.seq < self.messages.next_seq() {
            // Removed after it was recorded (a replay over a snapshot that already holds
            // later state): it stays removed.
            return;
        }
        if let (Order::Fifo(f), Some(seq)) = (&mut self.order, record.sequence_number.as_deref()) {
            f.observe_sequence(seq.parse().unwrap_or(0));
        }
        let m = record.into_stored();
        let delivery = m.delivery;
        let group = fifo_group(m.payload.group_id.as_ref());
        self.messages.skip_to(key.seq);
        let stored = self.store(m);
        debug_assert_eq!(stored, key);
        if let Order::Fifo(f) = &mut self.order {
            f.insert(key, &group);
        }
        self.enter(key, delivery);
    }

    /// Sets a stored message's receive count, receive times and delivery state.
    pub(in crate::engine) fn set_progress(&mut self, key: MessageKey, p: Progress) {
        let Some(m) = self.messages.get_mut(&key) else {
            return;
        };
        let old = m.delivery;
        let group = m.payload.group_id.clone();
        p.apply(m);
        let new = m.delivery;
        self.leave(key, old, group);
        self.enter(key, new);
    }

    /// Takes a message out of the index its delivery state `old` put it in.
    fn leave(&mut self, key: MessageKey, old: Delivery, group: Option<Arc<str>>) {
        match old {
            Delivery::Visible => {
                self.visible -= 1;
                if let Order::Standard(fair) = &mut self.order {
                    fair.remove(&key, group.as_ref());
                }
            }
            Delivery::Delayed { until_ms } => {
                self.timers.remove(&(until_ms, key));
                self.delayed -= 1;
            }
            Delivery::InFlight { until_ms } => {
                self.timers.remove(&(until_ms, key));
                self.in_flight -= 1;
            }
        }
    }

    /// Puts a message (in no index yet) where `delivery` says.
    fn enter(&mut self, key: MessageKey, delivery: Delivery) {
        match delivery {
            Delivery::Visible => self.make_visible(key),
            Delivery::Delayed { until_ms } | Delivery::InFlight { until_ms } => {
                if let Some(m) = self.messages.get_mut(&key) {
                    m.delivery = delivery;
                }
                self.timers.insert((until_ms, key));
                if matches!(delivery, Delivery::Delayed { .. }) {
                    self.delayed += 1;
                } else {
                    self.in_flight += 1;
                }
            }
        }
    }

    /// Remembers a recorded FIFO deduplication id.
    pub(in crate::engine) fn restore_dedup(
        &mut self,
        dedup_key: String,
        original: Original,
        at_ms: u64,
    ) {
        if let Order::Fifo(f) = &mut self.order {
            f.remember(dedup_key, original, at_ms);
        }
    }

    /// The counters a snapshot keeps beside the messages.
    pub(in crate::engine) fn counters(&self) -> QueueCounters {
        QueueCounters {
            next_seq: self.messages.next_seq(),
            last_sequence: match &self.order {
                Order::Fifo(f) => f.last_sequence(),
                Order::Standard(_) => 0,
            },
            last_purge_ms: self.last_purge_ms,
            last_modified_s: self.last_modified_s,
        }
    }

    /// Puts back counters from a snapshot.
    pub(in crate::engine) fn restore_counters(&mut self, c: QueueCounters) {
        self.messages.skip_to(c.next_seq);
        if let Order::Fifo(f) = &mut self.order {
            f.observe_sequence(c.last_sequence);
        }
        self.last_purge_ms = c.last_purge_ms;
        self.last_modified_s = c.last_modified_s;
    }
}
