//! One queue as request handlers share it: its identity, the lock around its
//! [`QueueState`], and the notification its long polls wait on. Every operation takes the
//! lock once, catches the state up to "now", and wakes waiters after releasing it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::durable::change::Change;
use super::durable::journal::{Journal, LastLsn};
use super::error::EngineError;
use super::ids::{MessageKey, QueueId};
use super::message::{NewMessage, SendReceipt, StoredMessage};
use super::receipt::Receipt;
use super::receive::{ReceiveOutcome, ReceiveRequest, Taken, Transfer};
use super::search::{Budget, Filter, Found};
use super::settings::{QueueSettings, PURGE_COOLDOWN_MS};
use super::state::QueueState;
use super::view::{PeekedMessage, QueueCounts, QueueSnapshot};

/// A queue shared between request handlers.
#[derive(Debug)]
pub(crate) struct Queue {
    pub id: QueueId,
    pub arn: String,
    /// Distinguishes this incarnation from an earlier queue of the same name.
    pub uid: u64,
    state: Mutex<QueueState>,
    /// Woken when messages may have become receivable or the next deadline moved earlier.
    changed: Notify,
    waiters: AtomicUsize,
    deleted: AtomicBool,
    /// Whether realism is on for this queue: the request path checks it without taking the
    /// lock, so realism off costs no lock.
    realism_on: AtomicBool,
    journal: Journal,
    /// The newest record that changed this queue (durable mode): whoever reads the state
    /// answers only once it is kept ([`Journal::depend`]).
    last_lsn: LastLsn,
    /// The record that created it: whoever finds the queue relies on it.
    created_lsn: Option<crate::store::Lsn>,
}

impl Queue {
    /// A new, empty queue whose changes go to `journal`; `created_lsn`: the record of its
    /// creation (none when recovered: it is durable).
    pub(crate) fn new(
        id: QueueId,
        uid: u64,
        settings: QueueSettings,
        now_ms: u64,
        journal: Journal,
        created_lsn: Option<crate::store::Lsn>,
    ) -> Queue {
        let arn = id.arn();
        Queue {
            id,
            arn,
            uid,
            state: Mutex::new(QueueState::new(settings, uid, now_ms, journal.is_on())),
            changed: Notify::new(),
            waiters: AtomicUsize::new(0),
            deleted: AtomicBool::new(false),
            realism_on: AtomicBool::new(false),
            journal,
            last_lsn: LastLsn::new(created_lsn),
            created_lsn,
        }
    }

    /// The queue name.
    pub(crate) fn name(&self) -> &str {
        &self.id.name
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, QueueState> {
        // A panic while holding the lock cannot leave the indexes half-updated in a way
        // that matters more than refusing all further service, so keep going.
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // Whatever is read under the lock may show any change made to this queue so far
        // (changes are appended under it): the answer waits until they are kept.
        if self.journal.is_on() {
            self.last_lsn.depend_in(&self.journal);
        }
        st
    }

    /// Notes that whoever found this queue relies on its creation being kept.
    pub(crate) fn depend_on_creation(&self) {
        self.journal.depend(self.created_lsn);
    }

    /// The newest record that changed this queue, if any (durable mode).
    pub(crate) fn last_lsn(&self) -> Option<crate::store::Lsn> {
        self.last_lsn.get()
    }

    /// A record that changed this queue was appended elsewhere (a message that left it
    /// is logged with its arrival in another queue): readers of this queue wait for it too.
    pub(crate) fn changed_at(&self, lsn: Option<crate::store::Lsn>) {
        self.last_lsn.raise(lsn);
    }

    /// Runs `f` on the caught-up state, then wakes long polls if `f` asked for it.
    fn with_state<R>(&self, now_ms: u64, f: impl FnOnce(&mut QueueState, u64, u64) -> R) -> R {
        let (r, wake) = {
            let mut st = self.lock();
            let now = st.catch_up(now_ms);
            let r = f(&mut st, now, self.uid);
            // Appended under the lock, so the log holds this queue's changes in the order
            // they were made.
            let lsn = self.journal.flush(self.uid, &mut st.rec);
            self.last_lsn.raise(lsn);
            (r, std::mem::take(&mut st.wake))
        };
        if wake {
            self.wake_waiters();
        }
        r
    }

    /// Wakes every long poll waiting on this queue.
    pub(crate) fn wake_waiters(&self) {
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.changed.notify_waiters();
        }
    }

    /// The queue's settings.
    pub(crate) fn settings(&self) -> QueueSettings {
        self.lock().settings.clone()
    }

    /// Reads the settings in effect without copying them (for the per-request hot paths;
    /// under realism, the previous ones while a change propagates).
    pub(crate) fn with_settings<R>(&self, f: impl FnOnce(&QueueSettings) -> R) -> R {
        f(self.lock().effective())
    }

    /// Sets this queue's realism (off when `realism` is): its stream starts from `seed` and
    /// the queue's name, so it depends only on this queue's requests. `created`: the queue
    /// is new (under propagation it stays unknown for up to a second).
    pub(crate) fn set_realism(
        &self,
        realism: super::realism::Realism,
        seed: u64,
        now_ms: u64,
        created: bool,
    ) {
        let mut st = self.lock();
        // What the old setting left under way ends now: a purge finishes, a propagating
        // change takes effect.
        st.finish_purge();
        self.realism_on.store(realism.is_on(), Ordering::Release);
        st.realism = realism.is_on().then(|| {
            let name = format!("{}/{}/{}", self.id.region, self.id.account, self.id.name);
            Box::new(super::realism::RealismState::new(
                realism, seed, &name, now_ms, created,
            ))
        });
    }

    /// This queue's realism setting.
    pub(crate) fn realism(&self) -> super::realism::Realism {
        self.lock()
            .realism
            .as_ref()
            .map(|r| r.cfg.clone())
            .unwrap_or_default()
    }

    /// Realism's propagation: whether a new queue is still unknown to the API at `now_ms`.
    pub(crate) fn is_propagating(&self, now_ms: u64) -> bool {
        if !self.realism_on.load(Ordering::Acquire) {
            return false;
        }
        self.lock()
            .realism
            .as_ref()
            .is_some_and(|r| now_ms < r.hidden_until_ms)
    }

    /// Realism's quotas: takes one call of `family`; `Err(Throttled)` when over the quota.
    pub(crate) fn admit(
        &self,
        family: super::realism::Family,
        now_ms: u64,
    ) -> Result<(), EngineError> {
        if !self.realism_on.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut st = self.lock();
        // The quota of the settings in effect (a high-throughput switch propagates too).
        let Some(rate) = st
            .realism
            .as_ref()
            .and_then(|r| r.quota(st.effective(), &self.id.region))
        else {
            return Ok(());
        };
        let admitted = st
            .realism
            .as_mut()
            .is_none_or(|r| r.admit(family, now_ms, rate));
        if admitted {
            Ok(())
        } else {
            Err(EngineError::Throttled)
        }
    }

    /// Turns at-least-once mode on (`p` > 0) or off: each message's first delete is ignored
    /// with chance `p` and the message becomes visible again. Standard queues only.
    pub(crate) fn set_redelivery(&self, p: f64) {
        self.lock().redeliver_probability = p.clamp(0.0, 1.0);
    }

    /// Every stored message in delivery-key order, as it is; nothing changes.
    #[cfg(test)]
    pub(crate) fn peek(&self, now_ms: u64) -> Vec<PeekedMessage> {
        self.peek_page(now_ms, 0, usize::MAX, u64::MAX).0
    }

    /// Up to `limit` stored messages from the `offset`-th on (delivery-key order), and how
    /// many are stored in all; nothing changes. Costs the page, not the queue.
    pub(crate) fn peek_page(
        &self,
        now_ms: u64,
        offset: usize,
        limit: usize,
        max_bytes: u64,
    ) -> (Vec<PeekedMessage>, usize) {
        let budget = Budget {
            messages: limit,
            bytes: u64::MAX,
            page: limit,
            page_bytes: max_bytes,
        };
        let found = self.search_page(now_ms, &Filter::default(), offset, budget);
        (found.messages, found.total)
    }

    /// The stored messages from the `offset`-th on (delivery-key order) that match
    /// `filter`, examining no more than `budget` allows; nothing changes. The lock is held
    /// for the scan, which the budget bounds.
    pub(crate) fn search_page(
        &self,
        now_ms: u64,
        filter: &Filter,
        offset: usize,
        budget: Budget,
    ) -> Found {
        self.with_state(now_ms, |st, _, _| {
            let total = st.visible + st.in_flight + st.delayed;
            let (mut messages, mut scanned, mut next) = (Vec::new(), 0, None);
            let (mut scanned_bytes, mut page_bytes) = (0u64, 0u64);
            for (_, m) in st.messages.iter().skip(offset) {
                let full = messages.len() >= budget.page
                    || (!messages.is_empty() && page_bytes >= budget.page_bytes);
                let spent =
                    scanned >= budget.messages || (scanned > 0 && scanned_bytes >= budget.bytes);
                if full || spent {
                    next = Some(offset + scanned);
                    break;
                }
                scanned += 1;
                scanned_bytes += m.payload.body.len() as u64;
                if !filter.matches(&m.payload, m.delivery) {
                    continue;
                }
                // At least one message, then as many as fit in the page's bytes, so a page
                // of 256 KiB messages stays bounded in memory.
                let size = m.footprint();
                if !messages.is_empty() && page_bytes + size > budget.page_bytes {
                    scanned -= 1; // examined again by the next page
                    next = Some(offset + scanned);
                    break;
                }
                page_bytes += size;
                messages.push(PeekedMessage {
                    payload: Arc::clone(&m.payload),
                    delivery: m.delivery,
                    receive_count: m.receive_count,
                    first_receive_ms: m.first_receive_ms.map(|t| t.get()),
                });
            }
            Found {
                messages,
                scanned,
                next,
                total,
            }
        })
    }

    /// Deletes the message with this MessageId whatever its state, without a receipt handle
    /// (the console's delete); false when no such message is stored.
    pub(crate) fn delete_by_id(&self, message_id: uuid::Uuid, now_ms: u64) -> bool {
        self.with_state(now_ms, |st, _, _| {
            let key = st
                .messages
                .iter()
                .find(|(_, m)| m.payload.message_id == message_id)
                .map(|(k, _)| k);
            key.is_some_and(|k| st.remove_deleted(&k))
        })
    }

    /// Edits the settings under the queue's lock (so concurrent edits do not lose each other);
    /// bumps LastModifiedTimestamp when `f` succeeds.
    pub(crate) fn update_settings<R, E>(
        &self,
        now_ms: u64,
        f: impl FnOnce(&mut QueueSettings) -> Result<R, E>,
    ) -> Result<R, E> {
        self.with_state(now_ms, |st, now, _| {
            let mut settings = st.settings.clone();
            let r = f(&mut settings)?;
            let before = st.effective().clone();
            let previous = std::mem::replace(&mut st.settings, settings);
            if st.realism.is_some() {
                st.propagate(&previous, before, now);
            }
            st.last_modified_s = now / 1000;
            st.rec.add(&Change::Settings {
                uid: st.uid,
                settings: Cow::Borrowed(&st.settings),
                last_modified_s: st.last_modified_s,
            });
            st.expire(now);
            st.wake = true;
            Ok(r)
        })
    }

    /// Reads settings, counts and timestamps in one go, as they are (for sqsim's own
    /// endpoints).
    pub(crate) fn snapshot(&self, now_ms: u64) -> QueueSnapshot {
        self.snapshot_as(now_ms, false)
    }

    /// What GetQueueAttributes answers: under realism, the settings in effect and the
    /// counts last refreshed.
    pub(crate) fn reported(&self, now_ms: u64) -> QueueSnapshot {
        self.snapshot_as(now_ms, true)
    }

    fn snapshot_as(&self, now_ms: u64, reported: bool) -> QueueSnapshot {
        self.with_state(now_ms, |st, now, _| QueueSnapshot {
            settings: if reported {
                st.effective().clone()
            } else {
                st.settings.clone()
            },
            counts: if reported {
                st.shown_counts(now)
            } else {
                QueueCounts {
                    visible: st.visible,
                    in_flight: st.in_flight,
                    delayed: st.delayed,
                }
            },
            traffic: st.traffic,
            created_s: st.created_s,
            last_modified_s: st.last_modified_s,
            oldest_sent_ms: st.oldest_sent_ms(),
        })
    }

    /// Long polls waiting on this queue now.
    pub(crate) fn waiting(&self) -> usize {
        self.waiters.load(Ordering::Relaxed)
    }

    /// The queue's tags.
    pub(crate) fn tags(&self) -> BTreeMap<String, String> {
        self.lock().tags.clone()
    }

    /// Edits the tags in place.
    pub(crate) fn update_tags<R>(&self, f: impl FnOnce(&mut BTreeMap<String, String>) -> R) -> R {
        self.with_state(0, |st, _, _| {
            let r = f(&mut st.tags);
            st.rec.add(&Change::Tags {
                uid: st.uid,
                tags: Cow::Borrowed(&st.tags),
            });
            r
        })
    }

    /// Stores a message. Validation of content is the caller's; size is checked here
    /// because the limit is the queue's.
    pub(crate) fn send(&self, msg: NewMessage, now_ms: u64) -> Result<SendReceipt, EngineError> {
        let prepared = msg.prepare();
        self.with_state(now_ms, |st, now, _| st.send(prepared, now))
    }

    /// Stores several messages under one lock; each either gets a receipt or an error.
    pub(crate) fn send_batch(
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
    pub(crate) fn receive(
        &self,
        req: ReceiveRequest,
        now_ms: u64,
    ) -> Result<ReceiveOutcome, EngineError> {
        self.with_state(now_ms, |st, now, uid| st.receive(req, now, uid, &self.id))
    }

    /// Takes in messages from another queue (or back into this one), visible at once.
    pub(crate) fn accept(&self, messages: Vec<Taken>, transfer: Transfer<'_>, now_ms: u64) {
        self.with_state(now_ms, |st, now, _| {
            for m in messages {
                st.accept(m, transfer, now);
            }
        })
    }

    /// Takes in messages `task` moved here, counting them for it in the same record as
    /// their arrival (so that a restart finds the count and the messages in step).
    pub(crate) fn accept_moved<T: super::durable::journal::MoveCount + 'static>(
        &self,
        messages: Vec<Taken>,
        task: &Arc<T>,
        now_ms: u64,
    ) {
        let task: Arc<dyn super::durable::journal::MoveCount> = Arc::clone(task) as _;
        self.with_state(now_ms, |st, now, _| {
            let n = messages.len() as u64;
            for m in messages {
                st.accept(m, Transfer::Redrive, now);
            }
            st.rec.count_moved(&task, n);
        })
    }

    /// Removes up to `n` visible messages, in delivery order, for a message move task.
    pub(crate) fn take_for_move(&self, n: usize, now_ms: u64) -> Vec<Taken> {
        self.with_state(now_ms, |st, _, _| st.take_for_move(n))
    }

    /// Takes out the visible messages among `ids` for a move; the receiving queue records
    /// their removal.
    pub(crate) fn take_by_ids(&self, ids: &[uuid::Uuid], now_ms: u64) -> Vec<Taken> {
        self.with_state(now_ms, |st, _, _| st.take_by_ids(ids))
    }

    /// Reads up to `n` of the oldest stored messages (arrival order).
    pub(crate) fn with_oldest<R>(
        &self,
        n: usize,
        f: impl FnOnce(&mut dyn Iterator<Item = (MessageKey, &StoredMessage)>) -> R,
    ) -> R {
        let st = self.lock();
        let mut oldest = st.messages.iter().take(n);
        f(&mut oldest)
    }

    /// Removes these messages (those still here), recording it; `task` counts them as
    /// moved, in the same record (an outbox's entries delivered for a move task).
    pub(crate) fn remove_keys(
        &self,
        keys: &[MessageKey],
        task: Option<Arc<dyn super::durable::journal::MoveCount>>,
        now_ms: u64,
    ) {
        self.with_state(now_ms, |st, _, uid| {
            let mut n = 0;
            for key in keys {
                if st.remove(key).is_some() {
                    st.rec.add(&Change::Removed { uid, key: *key });
                    n += 1;
                }
            }
            if let Some(task) = task {
                st.rec.count_moved(&task, n);
            }
        })
    }

    /// Takes in entries another engine's outbox `source` delivers (see
    /// [`QueueState::arrive`]); how many were new.
    pub(crate) fn arrive(
        &self,
        source: &str,
        entries: Vec<(u64, StoredMessage)>,
        transfer: Transfer<'_>,
        now_ms: u64,
    ) -> usize {
        self.with_state(now_ms, |st, now, _| {
            st.arrive(source, entries, transfer, now)
        })
    }

    /// Whether a message that arrived as `seq` or earlier is still stored.
    pub(crate) fn holds_up_to(&self, seq: u64) -> bool {
        self.lock()
            .messages
            .first()
            .is_some_and(|(k, _)| k.seq <= seq)
    }

    /// The `seq` of the newest arrival so far (0 before any).
    pub(crate) fn last_seq(&self) -> u64 {
        self.lock().messages.next_seq().saturating_sub(1)
    }

    /// Whether no message is stored.
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().messages.is_empty()
    }

    /// How many messages are stored and their [`StoredMessage::footprint`]s' sum.
    pub(crate) fn stored_size(&self) -> (u64, u64) {
        let st = self.lock();
        (st.messages.len() as u64, st.messages.bytes())
    }

    /// How many messages are stored (visible, in flight and delayed).
    pub(crate) fn stored(&self, now_ms: u64) -> usize {
        self.with_state(now_ms, |st, _, _| st.messages.len())
    }

    /// Deletes the message a handle points at. Stale handles of a standard queue still
    /// delete; on a FIFO queue only the handle of the current, unexpired receive does. A
    /// message that is already gone is not an error.
    pub(crate) fn delete_message(&self, handle: &str, now_ms: u64) -> Result<(), EngineError> {
        let receipt = self.own_receipt(handle)?;
        self.with_state(now_ms, |st, _, _| st.delete(receipt))
    }

    /// Sets the visibility timeout of a received message, counted from now.
    pub(crate) fn change_visibility(
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
    pub(crate) fn purge(&self, now_ms: u64, cooldown: bool) -> Result<(), EngineError> {
        self.with_state(now_ms, |st, now, _| {
            if cooldown {
                if let Some(last) = st.last_purge_ms {
                    if now < last + PURGE_COOLDOWN_MS {
                        return Err(EngineError::PurgeInProgress);
                    }
                }
            }
            if !st.defer_purge(now) {
                st.purge(now);
            }
            Ok(())
        })
    }

    /// Marks the queue deleted if it holds no message, in one step with every arrival
    /// through [`Queue::accept_open`]: once this says yes, nothing enters the queue again.
    /// An outbox is removed this way (`Engine::remove_outbox`), so a dead letter on its way
    /// into it is never taken into a queue that is gone.
    pub(crate) fn seal_if_empty(&self) -> bool {
        let st = self.lock();
        if !st.messages.is_empty() {
            return false;
        }
        self.deleted.store(true, Ordering::Release);
        drop(st);
        self.changed.notify_waiters();
        true
    }

    /// [`Queue::accept`], unless the queue was sealed ([`Queue::seal_if_empty`]): then
    /// nothing is taken and the messages come back.
    pub(crate) fn accept_open(
        &self,
        messages: Vec<Taken>,
        transfer: Transfer<'_>,
        now_ms: u64,
    ) -> Result<(), Vec<Taken>> {
        self.with_state(now_ms, |st, now, _| {
            if self.is_deleted() {
                return Err(messages);
            }
            for m in messages {
                st.accept(m, transfer, now);
            }
            Ok(())
        })
    }

    /// Marks the queue deleted and releases its long polls.
    pub(crate) fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Whether the queue has been deleted.
    pub(crate) fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// Registers a long poll; the returned guard must live while it waits on
    /// [`Queue::changed`]. Register before checking for messages so no wake-up is lost.
    pub(crate) fn register_waiter(&self) -> WaiterGuard<'_> {
        self.waiters.fetch_add(1, Ordering::AcqRel);
        WaiterGuard(self)
    }

    /// The notification long polls wait on.
    pub(crate) fn changed(&self) -> &Notify {
        &self.changed
    }
}

/// Counts a waiting long poll while alive.
pub(crate) struct WaiterGuard<'a>(&'a Queue);

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ids::MessageKey;
    use crate::engine::state::Order;

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
        Queue::new(id, 1, settings, 1_000_000, Journal::default(), None)
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
            short_poll: false,
        }
    }

    /// The counters always agree with the indexes.
    fn check(q: &Queue) {
        q.lock().assert_consistent();
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
