//! One queue: its settings, its messages and the indexes that keep every operation
//! O(log n) or better: the message store (indexed by arrival), a delivery order (fair
//! rotation or FIFO groups) and an ordered set of deadlines (delay ends and visibility ends). Expiry is lazy: each operation first
//! catches the queue up to "now" by popping the deadlines that have passed.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::error::EngineError;
use super::fair::FairIndex;
use super::fifo::{FifoIndex, Original};
use super::message::{
    Delivery, NewMessage, Payload, PreparedMessage, ReceivedMessage, SendReceipt, StoredMessage,
};
use super::receipt::Receipt;
use super::settings::{
    DeduplicationScope, QueueSettings, MAX_VISIBILITY_TIMEOUT_S, PURGE_COOLDOWN_MS,
};
use super::store::Store;

/// Names a stored message: when it entered the queue, and its arrival number there.
/// Ordering by it is oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageKey {
    pub sent_ms: u64,
    pub seq: u64,
}

/// Where a queue lives and what it is called.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueId {
    pub region: String,
    pub account: String,
    pub name: String,
}

impl QueueId {
    /// `arn:aws:sqs:<region>:<account>:<name>`.
    pub fn arn(&self) -> String {
        format!("arn:aws:sqs:{}:{}:{}", self.region, self.account, self.name)
    }
}

/// Message counts as GetQueueAttributes reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub visible: usize,
    pub in_flight: usize,
    pub delayed: usize,
}

/// Totals since the queue was created, for the admin `stats` endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Messages stored by sends (duplicates dropped by FIFO deduplication not counted).
    pub sent: u64,
    /// Messages handed out by receives.
    pub received: u64,
    /// Messages removed by DeleteMessage.
    pub deleted: u64,
}

/// One message as `peek` shows it, without changing anything.
#[derive(Debug, Clone)]
pub struct PeekedMessage {
    pub payload: Arc<Payload>,
    pub delivery: Delivery,
    pub receive_count: u32,
    pub first_receive_ms: Option<u64>,
}

/// What one receive attempt found.
#[derive(Debug, Default)]
pub struct ReceiveOutcome {
    pub messages: Vec<ReceivedMessage>,
    /// When the next delayed or in-flight message becomes visible, in clock ms.
    pub next_deadline_ms: Option<u64>,
    /// Messages this receive took out because they exceeded maxReceiveCount; the engine
    /// hands them to the dead-letter queue.
    pub dead_letters: Option<DeadLetters>,
}

/// Messages on their way to a dead-letter queue.
#[derive(Debug)]
pub struct DeadLetters {
    pub target: QueueId,
    pub messages: Vec<StoredMessage>,
}

/// Why messages arrive from another queue.
#[derive(Debug, Clone, Copy)]
pub enum Transfer<'a> {
    /// Dead-lettered from the queue with this ARN: counts kept, source recorded.
    DeadLetter { source_arn: &'a str },
    /// Moved back by a message move task: a fresh receive count, no source.
    Redrive,
    /// Returned to where they came from (their dead-letter queue vanished): unchanged.
    Restore,
}

/// Parameters of one receive.
#[derive(Debug, Clone)]
pub struct ReceiveRequest {
    pub max_messages: usize,
    /// `None` takes the queue's VisibilityTimeout.
    pub visibility_timeout: Option<u32>,
    pub max_in_flight: usize,
    /// FIFO ReceiveRequestAttemptId: a retry within 5 minutes gets the same messages.
    pub attempt_id: Option<String>,
}

/// A queue shared between request handlers.
#[derive(Debug)]
pub struct Queue {
    pub id: QueueId,
    pub arn: String,
    /// Distinguishes this incarnation from an earlier queue of the same name.
    pub uid: u64,
    state: Mutex<QueueState>,
    /// Woken when messages may have become receivable or the next deadline moved earlier.
    changed: Notify,
    waiters: AtomicUsize,
    deleted: AtomicBool,
}

/// Delivery order: fair rotation for standard queues, groups for FIFO queues.
#[derive(Debug)]
enum Order {
    Standard(FairIndex),
    Fifo(Box<FifoIndex>),
}

#[derive(Debug)]
struct QueueState {
    settings: QueueSettings,
    created_s: u64,
    last_modified_s: u64,
    tags: BTreeMap<String, String>,
    messages: Store,
    /// Messages that arrived with an older enqueue time than ones already stored (dead
    /// letters keep their original one), so retention cannot find them at the store's front.
    late: BTreeSet<MessageKey>,
    /// The newest enqueue time stored so far.
    newest_enqueued_ms: u64,
    /// Which visible message goes out next.
    order: Order,
    /// Deduplication scope fixed at creation (later changes are reported, not applied).
    dedup_scope: DeduplicationScope,
    /// (deadline ms, message): delay ends and visibility ends.
    timers: BTreeSet<(u64, MessageKey)>,
    visible: usize,
    in_flight: usize,
    delayed: usize,
    last_now: u64,
    last_purge_ms: Option<u64>,
    traffic: Traffic,
    /// At-least-once mode: the chance that a delete is "lost" once and the message comes
    /// back, so consumers can prove they are idempotent. 0 is off.
    redeliver_probability: f64,
    rng: u64,
    /// Set by operations that should wake long polls once the lock is released.
    wake: bool,
}

impl Queue {
    /// A new, empty queue.
    pub fn new(id: QueueId, uid: u64, settings: QueueSettings, now_ms: u64) -> Queue {
        let arn = id.arn();
        let order = if settings.fifo_queue {
            Order::Fifo(Box::default())
        } else {
            Order::Standard(FairIndex::default())
        };
        let dedup_scope = settings.deduplication_scope;
        Queue {
            id,
            arn,
            uid,
            state: Mutex::new(QueueState {
                settings,
                created_s: now_ms / 1000,
                last_modified_s: now_ms / 1000,
                tags: BTreeMap::new(),
                messages: Store::default(),
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
                wake: false,
            }),
            changed: Notify::new(),
            waiters: AtomicUsize::new(0),
            deleted: AtomicBool::new(false),
        }
    }

    /// The queue name.
    pub fn name(&self) -> &str {
        &self.id.name
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // A panic while holding the lock cannot leave the indexes half-updated in a way
        // that matters more than refusing all further service, so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the caught-up state, then wakes long polls if `f` asked for it.
    fn with_state<R>(&self, now_ms: u64, f: impl FnOnce(&mut QueueState, u64, u64) -> R) -> R {
        let (r, wake) = {
            let mut st = self.lock();
            let now = st.catch_up(now_ms);
            let r = f(&mut st, now, self.uid);
            (r, std::mem::take(&mut st.wake))
        };
        if wake {
            self.wake_waiters();
        }
        r
    }

    /// Wakes every long poll waiting on this queue.
    pub fn wake_waiters(&self) {
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.changed.notify_waiters();
        }
    }

    /// The queue's settings.
    pub fn settings(&self) -> QueueSettings {
        self.lock().settings.clone()
    }

    /// Reads the settings without copying them (for the per-request hot paths).
    pub fn with_settings<R>(&self, f: impl FnOnce(&QueueSettings) -> R) -> R {
        f(&self.lock().settings)
    }

    /// Turns at-least-once mode on (`p` > 0) or off: each message's first delete is ignored
    /// with chance `p` and the message becomes visible again. Standard queues only.
    pub fn set_redelivery(&self, p: f64) {
        self.lock().redeliver_probability = p.clamp(0.0, 1.0);
    }

    /// Every stored message in delivery-key order, as it is; nothing changes.
    pub fn peek(&self, now_ms: u64) -> Vec<PeekedMessage> {
        self.with_state(now_ms, |st, _, _| {
            st.messages
                .iter()
                .map(|(_, m)| PeekedMessage {
                    payload: Arc::clone(&m.payload),
                    delivery: m.delivery,
                    receive_count: m.receive_count,
                    first_receive_ms: m.first_receive_ms.map(|t| t.get()),
                })
                .collect()
        })
    }

    /// Edits the settings under the queue's lock (so concurrent edits do not lose each other);
    /// bumps LastModifiedTimestamp when `f` succeeds.
    pub fn update_settings<R, E>(
        &self,
        now_ms: u64,
        f: impl FnOnce(&mut QueueSettings) -> Result<R, E>,
    ) -> Result<R, E> {
        self.with_state(now_ms, |st, now, _| {
            let mut settings = st.settings.clone();
            let r = f(&mut settings)?;
            st.settings = settings;
            st.last_modified_s = now / 1000;
            st.expire(now);
            st.wake = true;
            Ok(r)
        })
    }

    /// Reads settings, counts and timestamps in one go.
    pub fn snapshot(&self, now_ms: u64) -> QueueSnapshot {
        self.with_state(now_ms, |st, _, _| QueueSnapshot {
            settings: st.settings.clone(),
            counts: QueueCounts {
                visible: st.visible,
                in_flight: st.in_flight,
                delayed: st.delayed,
            },
            traffic: st.traffic,
            created_s: st.created_s,
            last_modified_s: st.last_modified_s,
        })
    }

    /// The queue's tags.
    pub fn tags(&self) -> BTreeMap<String, String> {
        self.lock().tags.clone()
    }

    /// Edits the tags in place.
    pub fn update_tags<R>(&self, f: impl FnOnce(&mut BTreeMap<String, String>) -> R) -> R {
        f(&mut self.lock().tags)
    }

    /// Stores a message. Validation of content is the caller's; size is checked here
    /// because the limit is the queue's.
    pub fn send(&self, msg: NewMessage, now_ms: u64) -> Result<SendReceipt, EngineError> {
        let prepared = msg.prepare();
        self.with_state(now_ms, |st, now, _| st.send(prepared, now))
    }

    /// Stores several messages under one lock; each either gets a receipt or an error.
    pub fn send_batch(
        &self,
        msgs: Vec<NewMessage>,
        now_ms: u64,
    ) -> Vec<Result<SendReceipt, EngineError>> {
        // Digests and ids are computed before taking the lock other senders wait on.
        let prepared = NewMessage::prepare_all(msgs);
        self.with_state(now_ms, |st, now, _| {
            prepared.into_iter().map(|p| st.send(p, now)).collect()
        })
    }

    /// Hands out up to `req.max_messages` visible messages and hides them.
    pub fn receive(&self, req: ReceiveRequest, now_ms: u64) -> Result<ReceiveOutcome, EngineError> {
        self.with_state(now_ms, |st, now, uid| st.receive(req, now, uid, &self.id))
    }

    /// Takes in messages from another queue (or back into this one), visible at once.
    pub fn accept(&self, messages: Vec<StoredMessage>, transfer: Transfer<'_>, now_ms: u64) {
        self.with_state(now_ms, |st, now, _| {
            for m in messages {
                st.accept(m, transfer, now);
            }
        })
    }

    /// Removes up to `n` visible messages, in delivery order, for a message move task.
    pub fn take_for_move(&self, n: usize, now_ms: u64) -> Vec<StoredMessage> {
        self.with_state(now_ms, |st, _, _| st.take_for_move(n))
    }

    /// How many messages are stored (visible, in flight and delayed).
    pub fn stored(&self, now_ms: u64) -> usize {
        self.with_state(now_ms, |st, _, _| st.messages.len())
    }

    /// Deletes the message a handle points at. Stale handles of a standard queue still
    /// delete; on a FIFO queue only the handle of the current, unexpired receive does. A
    /// message that is already gone is not an error.
    pub fn delete_message(&self, handle: &str, now_ms: u64) -> Result<(), EngineError> {
        let receipt = self.own_receipt(handle)?;
        self.with_state(now_ms, |st, _, _| st.delete(receipt))
    }

    /// Sets the visibility timeout of a received message, counted from now.
    pub fn change_visibility(
        &self,
        handle: &str,
        timeout_s: u32,
        now_ms: u64,
    ) -> Result<(), EngineError> {
        let receipt = self.own_receipt(handle)?;
        self.with_state(now_ms, |st, now, _| {
            st.change_visibility(receipt, timeout_s, now)
        })
    }

    fn own_receipt(&self, handle: &str) -> Result<Receipt, EngineError> {
        match Receipt::decode(handle) {
            Some(r) if r.queue_uid == self.uid => Ok(r),
            _ => Err(EngineError::ReceiptHandleInvalid),
        }
    }

    /// Removes every message; refused within 60 s of the previous purge when `cooldown`.
    pub fn purge(&self, now_ms: u64, cooldown: bool) -> Result<(), EngineError> {
        self.with_state(now_ms, |st, now, _| {
            if cooldown {
                if let Some(last) = st.last_purge_ms {
                    if now < last + PURGE_COOLDOWN_MS {
                        return Err(EngineError::PurgeInProgress);
                    }
                }
            }
            st.purge(now);
            Ok(())
        })
    }

    /// Marks the queue deleted and releases its long polls.
    pub fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Whether the queue has been deleted.
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// Registers a long poll; the returned guard must live while it waits on
    /// [`Queue::changed`]. Register before checking for messages so no wake-up is lost.
    pub fn register_waiter(&self) -> WaiterGuard<'_> {
        self.waiters.fetch_add(1, Ordering::AcqRel);
        WaiterGuard(self)
    }

    /// The notification long polls wait on.
    pub fn changed(&self) -> &Notify {
        &self.changed
    }
}

/// Counts a waiting long poll while alive.
pub struct WaiterGuard<'a>(&'a Queue);

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A consistent view of a queue for GetQueueAttributes and the admin endpoints.
#[derive(Debug, Clone)]
pub struct QueueSnapshot {
    pub settings: QueueSettings,
    pub counts: QueueCounts,
    pub traffic: Traffic,
    pub created_s: u64,
    pub last_modified_s: u64,
}

impl QueueState {
    /// Brings the queue up to `now_ms` (never backwards) and returns the time to use.
    fn catch_up(&mut self, now_ms: u64) -> u64 {
        let now = now_ms.max(self.last_now);
        self.last_now = now;
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

    /// Drops messages older than the retention period, oldest first.
    fn expire(&mut self, now: u64) {
        let retention_ms = self.settings.message_retention_period as u64 * 1000;
        let expired = |key: &MessageKey| key.sent_ms + retention_ms <= now;
        while let Some(key) = self.messages.first().map(|(k, _)| k).filter(expired) {
            self.remove(&key);
        }
        while let Some(key) = self.late.first().copied().filter(expired) {
            self.late.pop_first();
            self.remove(&key);
        }
    }

    /// Stores a message (entered at its `enqueued_ms`) and returns its key.
    fn store(&mut self, m: StoredMessage) -> MessageKey {
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
    fn make_visible(&mut self, key: MessageKey) {
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
                fifo.refresh(&group, |k| is_visible(messages, k));
            }
        }
    }

    /// Stores a prepared message unless it exceeds the queue's size limit.
    fn send(&mut self, p: PreparedMessage, now: u64) -> Result<SendReceipt, EngineError> {
        let limit = self.settings.maximum_message_size;
        if p.size > limit as usize {
            return Err(EngineError::MessageTooLong { limit });
        }
        let delay = p.delay_seconds.unwrap_or(self.settings.delay_seconds);
        Ok(self.insert(p, delay, now))
    }

    fn insert(&mut self, prepared: PreparedMessage, delay_s: u32, now: u64) -> SendReceipt {
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
        if let (Order::Fifo(fifo), Some(k)) = (&mut self.order, dedup_key) {
            let original = Original {
                message_id: receipt.message_id,
                sequence_number: receipt.sequence_number.clone().unwrap_or_default(),
            };
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

    /// Wakes waiters if `deadline` is now the earliest, so they re-plan their sleep.
    fn note_deadline(&mut self, deadline: u64) {
        if self.timers.first().is_some_and(|(d, _)| *d >= deadline) {
            self.wake = true;
        }
    }

    /// `own` is this queue's id: a RedrivePolicy may name the queue itself.
    fn receive(
        &mut self,
        req: ReceiveRequest,
        now: u64,
        uid: u64,
        own: &QueueId,
    ) -> Result<ReceiveOutcome, EngineError> {
        let visibility_s = req
            .visibility_timeout
            .unwrap_or(self.settings.visibility_timeout);
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
            .settings
            .redrive_policy
            .as_ref()
            .map(|p| (p.max_receive_count, p.dead_letter_target == *own));
        let mut dead = Vec::new();
        let mut out = Vec::with_capacity(take);
        // (key, receive number) of what this receive hands out, for a FIFO attempt id.
        let mut taken = Vec::new();
        while out.len() < take {
            let keys = self.pick(take - out.len());
            if keys.is_empty() {
                break;
            }
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
                    if let Some(m) = self.remove(&key) {
                        dead.push(m);
                    }
                    continue;
                }
                let received = self.hand_out(key, until_ms, now, uid);
                if req.attempt_id.is_some() {
                    taken.push((key, received.receive_count));
                }
                out.push(received);
            }
        }
        let dead_letters = match (dead.is_empty(), &self.settings.redrive_policy) {
            (false, Some(p)) => Some(DeadLetters {
                target: p.dead_letter_target.clone(),
                messages: dead,
            }),
            _ => None,
        };
        if let (Some(id), Order::Fifo(f)) = (req.attempt_id, &mut self.order) {
            if !taken.is_empty() {
                f.remember_attempt(id, taken, now);
            }
        }
        let mut outcome = self.outcome(out);
        outcome.dead_letters = dead_letters;
        Ok(outcome)
    }

    /// The next visible messages in delivery order, still stored and still visible.
    fn pick(&mut self, n: usize) -> Vec<MessageKey> {
        let QueueState {
            messages, order, ..
        } = self;
        match order {
            Order::Standard(fair) => fair.take(n),
            Order::Fifo(f) => f.take(n, |k| is_visible(messages, k)),
        }
    }

    /// Marks a picked, visible message received and makes its handle.
    fn hand_out(&mut self, key: MessageKey, until_ms: u64, now: u64, uid: u64) -> ReceivedMessage {
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
        received
    }

    fn take_for_move(&mut self, n: usize) -> Vec<StoredMessage> {
        let mut out = Vec::new();
        while out.len() < n {
            let keys = self.pick(n - out.len());
            if keys.is_empty() {
                break;
            }
            for key in keys {
                if let Some(m) = self.remove(&key) {
                    out.push(m);
                }
            }
        }
        out
    }

    fn accept(&mut self, mut m: StoredMessage, transfer: Transfer<'_>, now: u64) {
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
        if let Order::Fifo(f) = &mut self.order {
            f.insert(key, &group);
        }
        self.make_visible(key);
    }

    fn outcome(&self, messages: Vec<ReceivedMessage>) -> ReceiveOutcome {
        ReceiveOutcome {
            messages,
            next_deadline_ms: self.timers.first().map(|(d, _)| *d),
            dead_letters: None,
        }
    }

    /// A FIFO receive retried with the same attempt id: the same messages and handles, with
    /// their visibility reset, as long as none of them changed since.
    fn retry_attempt(
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
        }
        Some(out)
    }

    fn delete(&mut self, receipt: Receipt) -> Result<(), EngineError> {
        if let (Order::Fifo(_), Some(msg)) = (&self.order, self.messages.get(&receipt.key)) {
            let current = msg.receive_count == receipt.receive_number
                && matches!(msg.delivery, Delivery::InFlight { .. });
            if !current {
                return Err(EngineError::ReceiptHandleExpired);
            }
        }
        if self.lose_delete(&receipt.key) {
            return Ok(());
        }
        if self.remove(&receipt.key).is_some() {
            self.traffic.deleted += 1;
        }
        Ok(())
    }

    /// At-least-once mode: maybe pretend the delete happened and deliver the message again.
    fn lose_delete(&mut self, key: &MessageKey) -> bool {
        if self.redeliver_probability <= 0.0 || matches!(self.order, Order::Fifo(_)) {
            return false;
        }
        let roll = super::random::unit(&mut self.rng);
        let Some(msg) = self.messages.get_mut(key) else {
            return false;
        };
        if msg.redelivered || roll >= self.redeliver_probability {
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

    fn change_visibility(
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
        Ok(())
    }

    fn remove(&mut self, key: &MessageKey) -> Option<StoredMessage> {
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
            fifo.refresh(&g, |k| is_visible(messages, k));
            self.wake = true;
        }
        Some(msg)
    }

    fn purge(&mut self, now: u64) {
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
    }
}

/// What a receive hands out for a stored message: its payload and a handle naming this
/// receive.
fn issue(msg: &StoredMessage, key: MessageKey, uid: u64, first_receive_ms: u64) -> ReceivedMessage {
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
fn fifo_group(group_id: Option<&Arc<str>>) -> Arc<str> {
    group_id.cloned().unwrap_or_else(|| Arc::from(""))
}

fn is_visible(messages: &Store, key: &MessageKey) -> bool {
    messages
        .get(key)
        .is_some_and(|m| m.delivery == Delivery::Visible)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> Queue {
        queue_of(false)
    }

    fn queue_of(fifo: bool) -> Queue {
        let id = QueueId {
            region: "us-east-1".into(),
            account: "000000000000".into(),
            name: if fifo { "q.fifo" } else { "q" }.into(),
        };
        let settings = QueueSettings {
            fifo_queue: fifo,
            ..QueueSettings::default()
        };
        Queue::new(id, 1, settings, 1_000_000)
    }

    fn msg(body: &str, delay: Option<u32>) -> NewMessage {
        NewMessage {
            body: body.into(),
            delay_seconds: delay,
            ..NewMessage::default()
        }
    }

    fn req(n: usize, vis: Option<u32>) -> ReceiveRequest {
        ReceiveRequest {
            max_messages: n,
            visibility_timeout: vis,
            max_in_flight: 120_000,
            attempt_id: None,
        }
    }

    /// The counters always agree with the indexes.
    fn check(q: &Queue) {
        let st = q.lock();
        let (mut v, mut f, mut d) = (0, 0, 0);
        for (key, m) in st.messages.iter() {
            match m.delivery {
                Delivery::Visible => v += 1,
                Delivery::InFlight { until_ms } => {
                    f += 1;
                    assert!(st.timers.contains(&(until_ms, key)));
                }
                Delivery::Delayed { until_ms } => {
                    d += 1;
                    assert!(st.timers.contains(&(until_ms, key)));
                }
            }
        }
        assert_eq!((v, f, d), (st.visible, st.in_flight, st.delayed));
        assert_eq!(st.timers.len(), f + d);
    }

    #[test]
    fn receive_hides_and_timeout_reveals() {
        let q = queue();
        let t = 1_000_000;
        q.send(msg("a", None), t).unwrap();
        q.send(msg("b", Some(10)), t).unwrap();
        check(&q);
        let got = q.receive(req(10, Some(5)), t).unwrap();
        assert_eq!(got.messages.len(), 1);
        assert_eq!(got.next_deadline_ms, Some(t + 5_000));
        check(&q);
        assert!(q
            .receive(req(10, None), t + 4_999)
            .unwrap()
            .messages
            .is_empty());
        let got = q.receive(req(10, None), t + 10_000).unwrap();
        assert_eq!(
            got.messages.len(),
            2,
            "both the expired and the delayed one"
        );
        assert_eq!(got.messages[0].receive_count, 2);
        check(&q);
    }

    #[test]
    fn dead_letters_expire_by_their_original_send_time() {
        let t = 1_000_000;
        let source = queue();
        source.send(msg("old", None), t).unwrap();
        let dlq = queue();
        dlq.update_settings(t, |s| {
            s.message_retention_period = 60;
            Ok::<_, ()>(())
        })
        .unwrap();
        dlq.send(msg("new", None), t + 50_000).unwrap();
        let moved = source.take_for_move(1, t + 50_000);
        dlq.accept(
            moved,
            Transfer::DeadLetter { source_arn: "arn" },
            t + 50_000,
        );
        assert_eq!(dlq.stored(t + 59_999), 2);
        assert_eq!(dlq.stored(t + 60_000), 1, "the dead letter's time is up");
        let left = dlq.peek(t + 60_000);
        assert_eq!(&*left[0].payload.body, "new");
        assert_eq!(dlq.stored(t + 110_000), 0);
        check(&dlq);
    }

    #[test]
    fn a_fifo_queue_serves_and_forgets_a_message_moved_in_without_a_group() {
        let t = 1_000_000;
        let standard = queue();
        standard.send(msg("no group", None), t).unwrap();
        let fifo = queue_of(true);
        fifo.accept(standard.take_for_move(1, t), Transfer::Redrive, t);
        let got = fifo.receive(req(10, None), t).unwrap();
        assert_eq!(got.messages.len(), 1);
        fifo.delete_message(&got.messages[0].receipt_handle, t)
            .unwrap();
        assert_eq!(fifo.stored(t), 0);
        check(&fifo);
        let mut st = fifo.lock();
        let Order::Fifo(f) = &mut st.order else {
            unreachable!("a FIFO queue")
        };
        assert!(f.take(10, |_| true).is_empty(), "nothing left in the index");
    }

    #[test]
    fn handles_of_other_queues_and_garbage_are_invalid() {
        let q = queue();
        assert_eq!(
            q.delete_message("garbage", 1_000_000),
            Err(EngineError::ReceiptHandleInvalid)
        );
        let foreign = Receipt {
            queue_uid: 2,
            key: MessageKey { sent_ms: 1, seq: 0 },
            receive_number: 1,
        }
        .encode();
        assert_eq!(
            q.change_visibility(&foreign, 1, 1_000_000),
            Err(EngineError::ReceiptHandleInvalid)
        );
    }

    #[test]
    fn random_operations_keep_indexes_consistent() {
        random_operations(false);
        random_operations(true);
    }

    fn random_operations(fifo: bool) {
        let q = queue_of(fifo);
        let mut t = 1_000_000u64;
        let mut n = 0u64;
        let mut handles: Vec<String> = Vec::new();
        let mut x = 0x9e3779b97f4a7c15u64;
        for _ in 0..5_000 {
            let x = crate::engine::random::next(&mut x);
            match x % 7 {
                0 | 1 => {
                    n += 1;
                    let mut m = msg("m", (!fifo).then_some((x % 3) as u32));
                    m.group_id = Some(format!("g{}", x % 5));
                    m.deduplication_id = Some(n.to_string());
                    q.send(m, t).unwrap();
                }
                2 => {
                    let got = q.receive(req(3, Some((x % 4) as u32)), t).unwrap();
                    handles.extend(got.messages.into_iter().map(|m| m.receipt_handle));
                }
                3 if !handles.is_empty() => {
                    let h = handles.swap_remove((x as usize) % handles.len());
                    let r = q.delete_message(&h, t);
                    assert!(r.is_ok() || fifo, "{r:?}");
                }
                4 if !handles.is_empty() => {
                    let h = &handles[(x as usize) % handles.len()];
                    let _ = q.change_visibility(h, (x % 3) as u32, t);
                }
                5 => t += x % 2_000,
                6 if x.is_multiple_of(50) => {
                    let _ = q.purge(t, false);
                }
                _ => {}
            }
            check(&q);
        }
    }

    #[test]
    fn purge_cooldown() {
        let q = queue();
        q.purge(1_000_000, true).unwrap();
        assert_eq!(q.purge(1_059_999, true), Err(EngineError::PurgeInProgress));
        q.purge(1_060_000, true).unwrap();
    }
}
