//! One queue as request handlers share it: its identity, the lock around its
//! [`QueueState`], and the notification its long polls wait on. Every operation takes the
//! lock once, catches the state up to "now", and wakes waiters after releasing it.

mod console;
#[cfg(test)]
mod tests;
mod transfer;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

use super::error::EngineError;
use super::ids::QueueId;
use super::journal::change::Change;
use super::journal::{Journal, LastLsn};
use super::message::{NewMessage, SendReceipt};
use super::receipt::Receipt;
use super::receive::{ReceiveOutcome, ReceiveRequest};
use super::settings::{QueueSettings, PURGE_COOLDOWN_MS};
use super::state::QueueState;
use super::view::{QueueCounts, QueueSnapshot};

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

    /// The dead-letter queue its RedrivePolicy names, as set (not as realism may still
    /// show it while a change propagates).
    pub(crate) fn dead_letter_target(&self) -> Option<QueueId> {
        let st = self.lock();
        st.settings
            .redrive_policy
            .as_ref()
            .map(|p| p.dead_letter_target.clone())
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
                // Under propagation the old settings stay in effect for a while (and a
                // FIFO queue's messages keep their delays: not applied when it ends).
                st.propagate(&previous, before.clone(), now);
            }
            let delay = st.effective().delay_seconds;
            if delay != before.delay_seconds {
                st.redelay_fifo(delay, now);
            }
            st.last_modified_s = now / 1000;
            st.recount();
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
            st.recount();
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
