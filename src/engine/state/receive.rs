//! Messages going out: which visible messages a receive takes (in delivery order, or as
//! AWS's sampling would under realism), how each is handed out with a new handle and
//! deadline, what goes to the dead-letter queue, and a FIFO receive retried with the same
//! attempt id.

use std::num::NonZeroU64;

use super::{issue, Order, QueueState};
use crate::engine::error::EngineError;
use crate::engine::ids::{MessageKey, QueueId};
use crate::engine::journal::change::Change;
use crate::engine::message::{Delivery, ReceivedMessage};
use crate::engine::receive::{DeadLetters, ReceiveOutcome, ReceiveRequest, Taken};

impl QueueState {
    /// `own` is this queue's id: a RedrivePolicy may name the queue itself.
    pub(in crate::engine) fn receive(
        &mut self,
        req: ReceiveRequest,
        now: u64,
        uid: u64,
        own: &QueueId,
    ) -> Result<ReceiveOutcome, EngineError> {
        let visibility_s = req
            .visibility_timeout
            .unwrap_or(self.effective().visibility_timeout);
        let until_ms = now + visibility_s as u64 * 1000;
        if let Some(id) = &req.attempt_id {
            if let Some(messages) = self.retry_attempt(id, until_ms, now, uid) {
                return Ok(self.outcome(messages));
            }
        }
        let fifo = matches!(self.order, Order::Fifo(_));
        if self.in_flight >= req.max_in_flight {
            // FIFO queues answer an empty receive instead of an error.
            return if fifo {
                Ok(self.outcome(Vec::new()))
            } else {
                Err(EngineError::OverLimit)
            };
        }
        let take = req.max_messages.min(req.max_in_flight - self.in_flight);
        let redrive = self
            .effective()
            .redrive_policy
            .as_ref()
            .map(|p| (p.max_receive_count, p.dead_letter_target == *own));
        let mut dead = Vec::new();
        let mut out = Vec::with_capacity(take);
        // (key, receive number) of what this receive hands out, for a FIFO attempt id.
        let mut taken = Vec::new();
        // Realism: a short poll sees only some partitions; picks are best-effort ordered.
        let realistic = self.picks_realistically();
        let (sampled, take) = if realistic {
            let take = self.short_poll_take(req.short_poll, take);
            (self.sampled_partitions(req.short_poll), take)
        } else {
            (None, take)
        };
        while out.len() < take {
            let wanted = take - out.len();
            let keys = if realistic {
                self.pick_realistic(wanted, sampled.as_deref())
            } else {
                self.pick(wanted)
            };
            if keys.is_empty() {
                break;
            }
            // One realistic look per receive: what it passed over stays for the next one.
            let last_look = realistic && keys.len() < wanted;
            for key in keys {
                let Some(msg) = self.messages.get(&key) else {
                    continue;
                };
                // The receive that would exceed maxReceiveCount moves the message instead. A
                // queue that is its own dead-letter queue moves it once, to its own back,
                // marked as a dead letter; after that it is delivered like any other.
                let moves = redrive.is_some_and(|(max, to_self)| {
                    msg.receive_count >= max
                        && !(to_self && msg.payload.dead_letter_source_arn().is_some())
                });
                if moves {
                    // Its removal is recorded by the dead-letter queue with its arrival;
                    // until then it is in transit.
                    if let Some(message) = self.remove(&key) {
                        self.traffic.dead_lettered += 1;
                        self.rec.depart(self.uid, key, &message);
                        dead.push(Taken {
                            from: self.uid,
                            key,
                            message,
                        });
                    }
                    continue;
                }
                let received = self.hand_out(key, until_ms, now, uid);
                if self.realism.is_some() {
                    self.maybe_duplicate(key, until_ms, now);
                }
                if req.attempt_id.is_some() {
                    taken.push((key, received.receive_count));
                }
                out.push(received);
            }
            if last_look {
                break;
            }
        }
        let dead_letters = match (dead.is_empty(), &self.effective().redrive_policy) {
            (false, Some(p)) => Some(DeadLetters {
                target: p.dead_letter_target.clone(),
                messages: dead,
            }),
            _ => None,
        };
        if let (Some(id), Order::Fifo(f)) = (req.attempt_id, &mut self.order) {
            if !taken.is_empty() {
                self.rec.add(&Change::Attempt {
                    uid: self.uid,
                    attempt_id: id.as_str().into(),
                    messages: taken.clone(),
                    at_ms: now,
                });
                f.remember_attempt(id, taken, now);
            }
        }
        let mut outcome = self.outcome(out);
        outcome.dead_letters = dead_letters;
        Ok(outcome)
    }

    /// The next visible messages in delivery order, still stored and still visible.
    pub(in crate::engine) fn pick(&mut self, n: usize) -> Vec<MessageKey> {
        let QueueState {
            messages, order, ..
        } = self;
        match order {
            Order::Standard(fair) => fair.take(n),
            Order::Fifo(f) => f.take(n, |k| messages.is_visible(k)),
        }
    }

    /// Marks a picked, visible message received and makes its handle.
    pub(in crate::engine) fn hand_out(
        &mut self,
        key: MessageKey,
        until_ms: u64,
        now: u64,
        uid: u64,
    ) -> ReceivedMessage {
        let msg = self
            .messages
            .get_mut(&key)
            .expect("hand_out is only called for stored messages");
        msg.receive_count += 1;
        let first = msg
            .first_receive_ms
            .get_or_insert(NonZeroU64::new(now.max(1)).unwrap_or(NonZeroU64::MIN))
            .get();
        msg.last_receive_ms = now;
        msg.delivery = Delivery::InFlight { until_ms };
        let received = issue(msg, key, uid, first);
        self.timers.insert((until_ms, key));
        self.visible -= 1;
        self.in_flight += 1;
        self.traffic.received += 1;
        self.record_progress(key);
        received
    }

    pub(in crate::engine) fn outcome(&self, messages: Vec<ReceivedMessage>) -> ReceiveOutcome {
        ReceiveOutcome {
            messages,
            next_deadline_ms: self.timers.first().map(|(d, _)| *d),
            dead_letters: None,
            forwarded: None,
        }
    }

    /// A FIFO receive retried with the same attempt id: the same messages and handles, with
    /// their visibility reset, as long as none of them changed since.
    pub(in crate::engine) fn retry_attempt(
        &mut self,
        id: &str,
        until_ms: u64,
        now: u64,
        uid: u64,
    ) -> Option<Vec<ReceivedMessage>> {
        let Order::Fifo(f) = &mut self.order else {
            return None;
        };
        let attempt = f.attempt(id, now)?;
        let unchanged = attempt.messages.iter().all(|(k, n)| {
            self.messages.get(k).is_some_and(|m| {
                m.receive_count == *n && matches!(m.delivery, Delivery::InFlight { .. })
            })
        });
        if !unchanged {
            return None;
        }
        let mut out = Vec::with_capacity(attempt.messages.len());
        for (key, n) in attempt.messages {
            let msg = self.messages.get_mut(&key)?;
            if let Delivery::InFlight { until_ms: old } = msg.delivery {
                self.timers.remove(&(old, key));
            }
            msg.delivery = Delivery::InFlight { until_ms };
            self.timers.insert((until_ms, key));
            debug_assert_eq!(msg.receive_count, n);
            let first = msg.first_receive_ms.map_or(now, NonZeroU64::get);
            out.push(issue(msg, key, uid, first));
            self.record_progress(key);
        }
        Some(out)
    }
}
