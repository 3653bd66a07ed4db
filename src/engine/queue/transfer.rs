//! Messages crossing between queues, as [`super::super::state`]'s `transfer` does them
//! under this queue's lock: taken in from another queue or an outbox's parcel, taken out
//! for a move or a parcel, and an outbox sealed so that nothing enters it once removed.

use std::sync::Arc;

use super::Queue;
use crate::engine::ids::MessageKey;
use crate::engine::journal::change::Change;
use crate::engine::journal::MoveCount;
use crate::engine::message::StoredMessage;
use crate::engine::receive::{Taken, Transfer};

impl Queue {
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
    pub(crate) fn accept_moved<T: MoveCount + 'static>(
        &self,
        messages: Vec<Taken>,
        task: &Arc<T>,
        now_ms: u64,
    ) {
        let task: Arc<dyn MoveCount> = Arc::clone(task) as _;
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
        task: Option<Arc<dyn MoveCount>>,
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

    /// Marks the queue deleted if it holds no message, in one step with every arrival
    /// through [`Queue::accept_open`]: once this says yes, nothing enters the queue again.
    /// An outbox is removed this way (`Engine::remove_outbox`), so a dead letter on its way
    /// into it is never taken into a queue that is gone.
    pub(crate) fn seal_if_empty(&self) -> bool {
        let st = self.lock();
        if !st.messages.is_empty() {
            return false;
        }
        self.mark_deleted();
        drop(st);
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
}
