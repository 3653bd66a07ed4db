//! What becomes of a received message: deleted by its handle (or, under at-least-once
//! mode, the delete lost once), its visibility changed, or removed with every index it is
//! in; and purges.

use super::{fifo_group, Order, QueueState};
use crate::engine::error::EngineError;
use crate::engine::ids::MessageKey;
use crate::engine::journal::change::Change;
use crate::engine::message::{Delivery, StoredMessage};
use crate::engine::receipt::Receipt;
use crate::engine::settings::MAX_VISIBILITY_TIMEOUT_S;

impl QueueState {
    pub(in crate::engine) fn delete(&mut self, receipt: Receipt) -> Result<(), EngineError> {
        if let (Order::Fifo(_), Some(msg)) = (&self.order, self.messages.get(&receipt.key)) {
            let current = msg.receive_count == receipt.receive_number
                && matches!(msg.delivery, Delivery::InFlight { .. });
            if !current {
                return Err(EngineError::ReceiptHandleExpired);
            }
        }
        if self.stale_delete_ignored(&receipt) || self.lose_delete(&receipt.key) {
            self.record_progress(receipt.key);
            return Ok(());
        }
        self.remove_deleted(&receipt.key);
        Ok(())
    }

    /// Removes a deleted message, counting and recording it; false if it was not stored.
    pub(in crate::engine) fn remove_deleted(&mut self, key: &MessageKey) -> bool {
        if self.remove(key).is_none() {
            return false;
        }
        self.traffic.deleted += 1;
        self.rec.add(&Change::Removed {
            uid: self.uid,
            key: *key,
        });
        true
    }

    /// At-least-once mode: maybe pretend the delete happened and deliver the message again.
    pub(in crate::engine) fn lose_delete(&mut self, key: &MessageKey) -> bool {
        let chance = self.lost_delete_chance();
        if chance <= 0.0 || matches!(self.order, Order::Fifo(_)) {
            return false;
        }
        let roll = match self.realism.as_mut() {
            Some(r) => r.draw_unit(),
            None => crate::engine::random::unit(&mut self.rng),
        };
        let Some(msg) = self.messages.get_mut(key) else {
            return false;
        };
        if msg.redelivered || roll >= chance {
            return false;
        }
        msg.redelivered = true;
        match msg.delivery {
            Delivery::InFlight { until_ms } => {
                self.timers.remove(&(until_ms, *key));
                self.in_flight -= 1;
                self.make_visible(*key);
                true
            }
            _ => false,
        }
    }

    pub(in crate::engine) fn change_visibility(
        &mut self,
        receipt: Receipt,
        timeout_s: u32,
        now: u64,
    ) -> Result<(), EngineError> {
        let key = receipt.key;
        let fifo = matches!(self.order, Order::Fifo(_));
        let Some(msg) = self.messages.get_mut(&key) else {
            return Err(EngineError::MessageNotAvailable);
        };
        // On a standard queue any handle the message was ever received with still changes
        // its visibility, as recorded on AWS. On a FIFO queue only the handle of the current
        // receive does, and only while that receive lasts.
        if fifo
            && (msg.receive_count != receipt.receive_number
                || !matches!(msg.delivery, Delivery::InFlight { .. }))
        {
            return Err(EngineError::MessageNotAvailable);
        }
        let elapsed_ms = now.saturating_sub(msg.last_receive_ms);
        if elapsed_ms + timeout_s as u64 * 1000 > MAX_VISIBILITY_TIMEOUT_S as u64 * 1000 {
            return Err(EngineError::VisibilityCapExceeded {
                max_s: MAX_VISIBILITY_TIMEOUT_S,
            });
        }
        let group = msg.payload.group_id.clone();
        match msg.delivery {
            Delivery::InFlight { until_ms } => {
                self.timers.remove(&(until_ms, key));
                self.in_flight -= 1;
            }
            Delivery::Visible => {
                self.visible -= 1;
                if let Order::Standard(fair) = &mut self.order {
                    fair.remove(&key, group.as_ref());
                }
            }
            Delivery::Delayed { .. } => return Err(EngineError::MessageNotAvailable),
        }
        if timeout_s == 0 {
            self.make_visible(key);
        } else {
            let until_ms = now + timeout_s as u64 * 1000;
            if let Some(msg) = self.messages.get_mut(&key) {
                msg.delivery = Delivery::InFlight { until_ms };
            }
            self.timers.insert((until_ms, key));
            self.in_flight += 1;
            self.note_deadline(until_ms);
        }
        self.record_progress(key);
        Ok(())
    }

    pub(in crate::engine) fn remove(&mut self, key: &MessageKey) -> Option<StoredMessage> {
        let msg = self.messages.remove(key)?;
        let group = msg.payload.group_id.as_ref();
        match msg.delivery {
            Delivery::Visible => {
                self.visible -= 1;
                if let Order::Standard(fair) = &mut self.order {
                    fair.remove(key, group);
                }
            }
            Delivery::Delayed { until_ms } => {
                self.timers.remove(&(until_ms, *key));
                self.delayed -= 1;
            }
            Delivery::InFlight { until_ms } => {
                self.timers.remove(&(until_ms, *key));
                self.in_flight -= 1;
            }
        }
        if let Order::Fifo(fifo) = &mut self.order {
            let g = fifo_group(group);
            fifo.remove(key, &g);
            // The group's next message may now be at its head and receivable.
            let messages = &self.messages;
            fifo.refresh(&g, |k| messages.is_visible(k));
            self.wake = true;
        }
        Some(msg)
    }

    pub(in crate::engine) fn purge(&mut self, now: u64) {
        self.traffic.purged += (self.visible + self.in_flight + self.delayed) as u64;
        self.messages.clear();
        self.late.clear();
        self.timers.clear();
        self.visible = 0;
        self.in_flight = 0;
        self.delayed = 0;
        match &mut self.order {
            Order::Standard(fair) => fair.clear(),
            Order::Fifo(fifo) => fifo.clear(),
        }
        self.last_purge_ms = Some(now);
        self.rec.add(&Change::Purged {
            uid: self.uid,
            at_ms: now,
        });
    }
}
