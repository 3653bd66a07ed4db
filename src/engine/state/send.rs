//! Messages coming in: stored in the slab at their enqueue time, made visible now or at
//! the end of their delay, and recorded (durable mode) as they are put or change.

use std::sync::Arc;

use super::{fifo_group, Order, QueueState};
use crate::engine::error::EngineError;
use crate::engine::fifo::Original;
use crate::engine::ids::MessageKey;
use crate::engine::journal::change::{self, Change, MessageRecord, Progress};
use crate::engine::message::{Delivery, PreparedMessage, SendReceipt, StoredMessage};
use crate::engine::settings::DeduplicationScope;

impl QueueState {
    /// Stores a message (entered at its `enqueued_ms`) and returns its key.
    pub(in crate::engine) fn store(&mut self, m: StoredMessage) -> MessageKey {
        let enqueued_ms = m.enqueued_ms;
        let key = MessageKey {
            sent_ms: enqueued_ms,
            seq: self.messages.next_seq(),
        };
        if enqueued_ms < self.newest_enqueued_ms {
            self.late.insert(key);
        } else {
            self.newest_enqueued_ms = enqueued_ms;
        }
        self.messages.push(key, m);
        key
    }

    /// Marks a stored message visible and offers it (or its group) for delivery.
    /// The caller has already taken it out of the in-flight or delayed count.
    pub(in crate::engine) fn make_visible(&mut self, key: MessageKey) {
        let QueueState {
            messages, order, ..
        } = self;
        let Some(msg) = messages.get_mut(&key) else {
            return;
        };
        msg.delivery = Delivery::Visible;
        self.visible += 1;
        self.wake = true;
        match order {
            Order::Standard(fair) => fair.insert(key, msg.payload.group_id.as_ref()),
            Order::Fifo(fifo) => {
                let group = fifo_group(msg.payload.group_id.as_ref());
                fifo.refresh(&group, |k| messages.is_visible(k));
            }
        }
    }

    /// Stores a prepared message unless it exceeds the queue's size limit.
    pub(in crate::engine) fn send(
        &mut self,
        p: PreparedMessage,
        now: u64,
    ) -> Result<SendReceipt, EngineError> {
        let limit = self.effective().maximum_message_size;
        if p.size > limit as usize {
            return Err(EngineError::MessageTooLong { limit });
        }
        let delay = p.delay_seconds.unwrap_or(self.effective().delay_seconds);
        Ok(self.insert(p, delay, now))
    }

    pub(in crate::engine) fn insert(
        &mut self,
        prepared: PreparedMessage,
        delay_s: u32,
        now: u64,
    ) -> SendReceipt {
        let PreparedMessage {
            mut payload,
            md5_of_system_attributes,
            ..
        } = prepared;
        let mut dedup_key = None;
        if let Order::Fifo(fifo) = &mut self.order {
            let dedup_id = payload.deduplication_id().unwrap_or_default();
            let key = match self.dedup_scope {
                DeduplicationScope::Queue => dedup_id.to_string(),
                DeduplicationScope::MessageGroup => format!(
                    "{}\n{dedup_id}",
                    payload.group_id.as_deref().unwrap_or_default()
                ),
            };
            if let Some(original) = fifo.duplicate_of(&key, now) {
                // Accepted, but nothing is enqueued.
                return SendReceipt {
                    message_id: original.message_id,
                    md5_of_body: payload.md5_of_body,
                    md5_of_attributes: payload.md5_of_attributes(),
                    md5_of_system_attributes,
                    sequence_number: Some(original.sequence_number),
                };
            }
            payload.set_sequence_number(Some(fifo.next_sequence(now)));
            dedup_key = Some(key);
        }
        payload.sent_ms = now;
        let payload = Arc::new(payload);
        let receipt = SendReceipt {
            message_id: payload.message_id,
            md5_of_body: payload.md5_of_body,
            md5_of_attributes: payload.md5_of_attributes(),
            md5_of_system_attributes,
            sequence_number: payload.sequence_number().map(str::to_string),
        };
        let group_id = payload.group_id.clone();
        let delayed = delay_s > 0;
        let until_ms = now + delay_s as u64 * 1000;
        let key = self.store(StoredMessage {
            payload,
            delivery: Delivery::Delayed { until_ms },
            enqueued_ms: now,
            receive_count: 0,
            first_receive_ms: None,
            last_receive_ms: 0,
            redelivered: false,
        });
        self.record_put(key);
        if let (Order::Fifo(fifo), Some(k)) = (&mut self.order, dedup_key) {
            let original = Original {
                message_id: receipt.message_id,
                sequence_number: receipt.sequence_number.clone().unwrap_or_default(),
            };
            self.rec.add(&Change::Dedup {
                uid: self.uid,
                dedup_key: k.as_str().into(),
                message_id: *original.message_id.as_bytes(),
                sequence_number: original.sequence_number.as_str().into(),
                at_ms: now,
            });
            fifo.remember(k, original, now);
            fifo.insert(key, &fifo_group(group_id.as_ref()));
        }
        self.traffic.sent += 1;
        if delayed {
            self.timers.insert((until_ms, key));
            self.delayed += 1;
            self.note_deadline(until_ms);
        } else {
            self.make_visible(key);
        }
        receipt
    }

    /// Records a stored message whole (it just entered the queue).
    pub(in crate::engine) fn record_put(&mut self, key: MessageKey) {
        if let (true, Some(m)) = (self.rec.on, self.messages.get(&key)) {
            let c = Change::Put {
                uid: self.uid,
                key,
                message: MessageRecord::of(m),
            };
            change::encode(&mut self.rec.frame, &c);
        }
    }

    /// Records a message's delivery state after a receive or a visibility change.
    pub(in crate::engine) fn record_progress(&mut self, key: MessageKey) {
        if let (true, Some(m)) = (self.rec.on, self.messages.get(&key)) {
            let c = Change::Progress {
                uid: self.uid,
                key,
                progress: Progress::of(m),
            };
            change::encode(&mut self.rec.frame, &c);
        }
    }

    /// A FIFO queue's DelaySeconds changed to `delay_s`: it applies to the messages already
    /// in the queue that were never received, as SQS documents ("For FIFO queues, the
    /// per-queue delay setting is retroactive"; a standard queue's is not): each is delayed
    /// until it entered the queue plus the new delay, visible if that has passed. Every
    /// change is recorded, so a restart or another node serving the queue finds the same.
    pub(in crate::engine) fn redelay_fifo(&mut self, delay_s: u32, now: u64) {
        if !matches!(self.order, Order::Fifo(_)) {
            return;
        }
        let waiting: Vec<MessageKey> = self
            .messages
            .iter()
            .filter(|(_, m)| {
                m.receive_count == 0 && !matches!(m.delivery, Delivery::InFlight { .. })
            })
            .map(|(k, _)| k)
            .collect();
        for key in waiting {
            let Some(m) = self.messages.get(&key) else {
                continue;
            };
            let until_ms = m.enqueued_ms + delay_s as u64 * 1000;
            let delivery = match until_ms > now {
                true => Delivery::Delayed { until_ms },
                false => Delivery::Visible,
            };
            if delivery == m.delivery {
                continue;
            }
            let group = fifo_group(m.payload.group_id.as_ref());
            let mut progress = Progress::of(m);
            progress.delivery = delivery.into();
            self.set_progress(key, progress);
            // A group whose head is delayed again is no longer ready; one whose head came
            // out is (the same look a receive takes).
            let QueueState {
                messages, order, ..
            } = self;
            if let Order::Fifo(fifo) = order {
                fifo.refresh(&group, |k| messages.is_visible(k));
            }
            self.record_progress(key);
            // Waiters look again: at a message come out, or at a new earliest deadline.
            self.wake = true;
        }
    }

    /// Wakes waiters if `deadline` is now the earliest, so they re-plan their sleep.
    pub(in crate::engine) fn note_deadline(&mut self, deadline: u64) {
        if self.timers.first().is_some_and(|(d, _)| *d >= deadline) {
            self.wake = true;
        }
    }
}
