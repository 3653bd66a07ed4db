//! The inside of one queue, always used under its lock: settings, messages and the indexes
//! that keep every operation O(log n) or better — the message slab (indexed by arrival), a
//! delivery order (fair rotation or FIFO groups) and an ordered set of deadlines (delay ends
//! and visibility ends). Expiry is lazy: each operation first catches the state up to "now"
//! by popping the deadlines that have passed.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU64;
use std::sync::Arc;

use super::durable::change::{self, Change, MessageRecord, Progress};
use super::durable::journal::Recorder;
use super::error::EngineError;
use super::fair::FairIndex;
use super::fifo::{FifoIndex, Original};
use super::ids::{MessageKey, QueueId};
use super::message::{Delivery, PreparedMessage, ReceivedMessage, SendReceipt, StoredMessage};
use super::receipt::Receipt;
use super::receive::{DeadLetters, ReceiveOutcome, ReceiveRequest, Taken};
use super::settings::{DeduplicationScope, QueueSettings, MAX_VISIBILITY_TIMEOUT_S};
use super::slab::MessageSlab;
use super::view::Traffic;

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
        QueueState {
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
        }
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

    /// Stores a message (entered at its `enqueued_ms`) and returns its key.
    pub(super) fn store(&mut self, m: StoredMessage) -> MessageKey {
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
    pub(super) fn make_visible(&mut self, key: MessageKey) {
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
    pub(super) fn send(
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

    pub(super) fn insert(
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
    pub(super) fn record_put(&mut self, key: MessageKey) {
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
    pub(super) fn record_progress(&mut self, key: MessageKey) {
        if let (true, Some(m)) = (self.rec.on, self.messages.get(&key)) {
            let c = Change::Progress {
                uid: self.uid,
                key,
                progress: Progress::of(m),
            };
            change::encode(&mut self.rec.frame, &c);
        }
    }

    /// Wakes waiters if `deadline` is now the earliest, so they re-plan their sleep.
    pub(super) fn note_deadline(&mut self, deadline: u64) {
        if self.timers.first().is_some_and(|(d, _)| *d >= deadline) {
            self.wake = true;
        }
    }

    /// `own` is this queue's id: a RedrivePolicy may name the queue itself.
    pub(super) fn receive(
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
    pub(super) fn pick(&mut self, n: usize) -> Vec<MessageKey> {
        let QueueState {
            messages, order, ..
        } = self;
        match order {
            Order::Standard(fair) => fair.take(n),
            Order::Fifo(f) => f.take(n, |k| messages.is_visible(k)),
        }
    }

    /// Marks a picked, visible message received and makes its handle.
    pub(super) fn hand_out(
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

    pub(super) fn outcome(&self, messages: Vec<ReceivedMessage>) -> ReceiveOutcome {
        ReceiveOutcome {
            messages,
            next_deadline_ms: self.timers.first().map(|(d, _)| *d),
            dead_letters: None,
            forwarded: None,
        }
    }

    /// A FIFO receive retried with the same attempt id: the same messages and handles, with
    /// their visibility reset, as long as none of them changed since.
    pub(super) fn retry_attempt(
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

    pub(super) fn delete(&mut self, receipt: Receipt) -> Result<(), EngineError> {
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
    pub(super) fn remove_deleted(&mut self, key: &MessageKey) -> bool {
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
    pub(super) fn lose_delete(&mut self, key: &MessageKey) -> bool {
        let chance = self.lost_delete_chance();
        if chance <= 0.0 || matches!(self.order, Order::Fifo(_)) {
            return false;
        }
        let roll = match self.realism.as_mut() {
            Some(r) => r.draw_unit(),
            None => super::random::unit(&mut self.rng),
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

    pub(super) fn change_visibility(
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

    pub(super) fn remove(&mut self, key: &MessageKey) -> Option<StoredMessage> {
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

    pub(super) fn purge(&mut self, now: u64) {
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
