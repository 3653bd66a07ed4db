//! Messages crossing between queues, under the lock of the queue they leave or arrive in:
//! taken out for a move (in transit until their arrival is logged), taken in from another
//! queue of this engine with their removal there, or arriving from another engine's outbox
//! past the mark of what it delivered before (cluster mode).

use std::sync::Arc;

use super::{fifo_group, Order, QueueState};
use crate::engine::ids::MessageKey;
use crate::engine::journal::change::Change;
use crate::engine::message::{Delivery, StoredMessage};
use crate::engine::receive::{Taken, Transfer};

impl QueueState {
    /// Takes messages out for a move; the receiving queue records their removal (in transit
    /// until then).
    pub(in crate::engine) fn take_for_move(&mut self, n: usize) -> Vec<Taken> {
        let mut out = Vec::new();
        while out.len() < n {
            let keys = self.pick(n - out.len());
            if keys.is_empty() {
                break;
            }
            self.take_keys(keys, &mut out);
        }
        out
    }

    /// Removes the messages under `keys` (those still here) for a move, recording their
    /// departure, into `out`.
    fn take_keys(&mut self, keys: Vec<MessageKey>, out: &mut Vec<Taken>) {
        for key in keys {
            if let Some(message) = self.remove(&key) {
                self.rec.depart(self.uid, key, &message);
                out.push(Taken {
                    from: self.uid,
                    key,
                    message,
                });
            }
        }
    }

    /// Takes out the visible messages among `ids` for a move (the console's "move selected");
    /// messages in flight or delayed stay.
    pub(in crate::engine) fn take_by_ids(&mut self, ids: &[uuid::Uuid]) -> Vec<Taken> {
        let keys: Vec<_> = self
            .messages
            .iter()
            .filter(|(_, m)| {
                matches!(m.delivery, Delivery::Visible) && ids.contains(&m.payload.message_id)
            })
            .map(|(k, _)| k)
            .collect();
        let mut out = Vec::with_capacity(keys.len());
        self.take_keys(keys, &mut out);
        out
    }

    /// Takes in a message from another queue (or back into this one), recording its
    /// removal there with its arrival here.
    pub(in crate::engine) fn accept(&mut self, taken: Taken, transfer: Transfer<'_>, now: u64) {
        let Taken {
            from,
            key: old_key,
            message,
        } = taken;
        self.rec.add(&Change::Removed {
            uid: from,
            key: old_key,
        });
        self.rec.arrive(from, old_key);
        self.take_in(message, transfer, now);
    }

    /// Takes in entries an outbox of another engine delivers (cluster mode), skipping those
    /// at or below the outbox's mark (delivered before), and records the new mark with
    /// them. Returns how many were new.
    pub(in crate::engine) fn arrive(
        &mut self,
        source: &str,
        entries: Vec<(u64, StoredMessage)>,
        transfer: Transfer<'_>,
        now: u64,
    ) -> usize {
        let mark = self.marks.get(source).copied();
        let mut taken = 0;
        let mut high = mark;
        for (seq, m) in entries {
            if mark.is_some_and(|k| seq <= k) {
                continue;
            }
            self.take_in(m, transfer, now);
            taken += 1;
            high = Some(high.map_or(seq, |h| h.max(seq)));
        }
        if let Some(seq) = high.filter(|h| Some(*h) != mark) {
            self.marks.insert(source.to_string(), seq);
            self.rec.add(&Change::Arrived {
                uid: self.uid,
                source: source.into(),
                seq,
            });
        }
        taken
    }

    /// Stores a message arriving from elsewhere, as `transfer` says.
    fn take_in(&mut self, mut m: StoredMessage, transfer: Transfer<'_>, now: u64) {
        let fifo = matches!(self.order, Order::Fifo(_));
        match transfer {
            Transfer::DeadLetter { source_arn } => {
                m.payload = Arc::new(m.payload.with_dead_letter_source(Some(source_arn.into())));
            }
            Transfer::Redrive => {
                m.payload = Arc::new(m.payload.with_dead_letter_source(None));
                m.receive_count = 0;
                m.first_receive_ms = None;
            }
            Transfer::Restore => {}
        }
        if !matches!(transfer, Transfer::Restore) {
            self.traffic.arrived += 1;
        }
        // A standard queue keeps the original enqueue time (retention counts from the first
        // send); a FIFO queue starts it afresh.
        let sent_ms = if fifo && !matches!(transfer, Transfer::Restore) {
            now
        } else {
            m.payload.sent_ms
        };
        m.delivery = Delivery::Delayed { until_ms: now };
        let group = fifo_group(m.payload.group_id.as_ref());
        m.enqueued_ms = sent_ms;
        let key = self.store(m);
        self.record_put(key);
        if let Order::Fifo(f) = &mut self.order {
            f.insert(key, &group);
        }
        self.make_visible(key);
    }
}
