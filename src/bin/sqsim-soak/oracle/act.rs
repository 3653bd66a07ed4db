//! Deletes and visibility changes: a consumer asks before it acts (refused when the hold
//! may be over), the hold is shortened before the request leaves, and the answer decides
//! what is known: deleted for certain, perhaps deleted (a late delete on a DLQ-wired
//! source, or a delete that got no answer), a new deadline, or a refusal that is itself a
//! violation.

use std::time::{Duration, Instant};

use super::{Oracle, Outcome, State, Ticket, MARGIN, SLACK};
use crate::body::{MsgKey, QueueKind};

impl Oracle {
    /// A consumer wants to delete a message of receive `recv`: allowed (with a ticket) while
    /// that receive still holds it with [`MARGIN`] to spare. The hold is taken to end now.
    pub(crate) fn begin_delete(&self, key: MsgKey, recv: u64) -> Option<Ticket> {
        self.begin_act(key, recv, None)
    }

    /// A consumer wants to set a message's visibility timeout to `seconds` (0 releases it):
    /// allowed as for [`Oracle::begin_delete`]. Until the answer, the hold is taken to end at
    /// the earlier of the old and the new deadline.
    pub(crate) fn begin_change(&self, key: MsgKey, recv: u64, seconds: u32) -> Option<Ticket> {
        self.begin_act(key, recv, Some(seconds))
    }

    fn begin_act(&self, key: MsgKey, recv: u64, change: Option<u32>) -> Option<Ticket> {
        let mut st = self.lock();
        // Read under the lock: a receive checked after this sees the shortened hold, and
        // the request is sent only after this returns.
        let now = Instant::now();
        st.next_id += 1;
        let id = st.next_id;
        let m = st.msgs.get_mut(&key)?;
        let h = m.hold.as_mut().filter(|h| h.recv == recv)?;
        if now + MARGIN >= h.deadline {
            return None;
        }
        let prior = h.deadline;
        h.deadline = match change {
            None | Some(0) => now,
            Some(s) => prior.min(now + Duration::from_secs(s as u64) - SLACK),
        };
        if change.is_none() {
            m.deletes_in_flight.push(id);
        } else {
            m.changes_in_flight.push((id, prior));
        }
        Some(Ticket {
            id,
            recv,
            start: now,
            prior,
        })
    }

    /// A delete allowed by [`Oracle::begin_delete`] ended at `end`.
    pub(crate) fn end_delete(
        &self,
        key: MsgKey,
        queue: QueueKind,
        t: Ticket,
        out: Outcome,
        end: Instant,
    ) {
        let mut st = self.lock();
        let st = &mut *st;
        let Some(m) = st.msgs.get_mut(&key) else {
            return;
        };
        m.deletes_in_flight.retain(|&d| d != t.id);
        let within = end < t.prior;
        let mut refused = None;
        match &out {
            Outcome::Ok if queue.is_source() && !within => {
                // The hold may have ended before the delete arrived; the message may have
                // been moved to the DLQ since, and this delete done nothing.
                if !m.deleted_maybe && m.deleted_at.is_none() {
                    st.figures.deleted_maybe += 1;
                }
                m.deleted_maybe = true;
            }
            Outcome::Ok => {
                if m.deleted_at.is_none() {
                    m.deleted_at = Some(end);
                    st.figures.deleted[queue.index()] += 1;
                    st.figures.deleted_of[key.queue.index()] += 1;
                    st.retire_queue.push_back((end, key));
                    if let (true, Some(g)) = (key.queue.is_ordered(), m.group) {
                        if let Some(grp) = st.groups.get_mut(&g.group) {
                            grp.undeleted.remove(&g.index);
                        }
                    }
                }
            }
            Outcome::Refused(code) => refused = Some(code.clone()),
            Outcome::Unknown => {
                // It may have worked: if it did, nothing will ever delete the message again.
                if !m.deleted_maybe && m.deleted_at.is_none() {
                    st.figures.deletes_unknown += 1;
                }
                m.deleted_maybe = true;
            }
        }
        let Some(m) = st.msgs.get_mut(&key) else {
            return;
        };
        // Settled when it may be gone: the drain then waits for the server's counts (which
        // still include the message if the delete did nothing) rather than for the oracle.
        if !matches!(out, Outcome::Refused(_)) && !m.settled {
            m.settled = true;
            st.backlog[key.queue.index()] -= 1;
        }
        if let Some(code) = refused {
            self.refused_within_hold(st, key, queue, "DeleteMessage", &code, t, within);
        }
        self.settle_delete_conds(st, key, t.id, &out);
    }

    /// A change allowed by [`Oracle::begin_change`] to `seconds` ended at `end`.
    pub(crate) fn end_change(
        &self,
        key: MsgKey,
        queue: QueueKind,
        t: Ticket,
        seconds: u32,
        out: Outcome,
        end: Instant,
    ) {
        let mut st = self.lock();
        let st = &mut *st;
        let within = end < t.prior;
        let Some(m) = st.msgs.get_mut(&key) else {
            return;
        };
        m.changes_in_flight.retain(|&(c, _)| c != t.id);
        match out {
            Outcome::Ok => {
                st.figures.visibility_changes += 1;
                if seconds == 0 {
                    st.figures.releases += 1;
                }
                if !queue.is_fifo() && !within && !m.tainted {
                    // A standard queue takes any handle the message was ever received with,
                    // so a late change may have moved another consumer's deadline.
                    m.tainted = true;
                    st.figures.tainted += 1;
                }
                if let Some(h) = m.hold.as_mut().filter(|h| h.recv == t.recv) {
                    h.deadline = t.start + Duration::from_secs(seconds as u64);
                    h.deadline = h
                        .deadline
                        .checked_sub(SLACK)
                        .unwrap_or(t.start)
                        .max(t.start);
                }
            }
            Outcome::Refused(code) => self.refused_within_hold(
                st,
                key,
                queue,
                "ChangeMessageVisibility",
                &code,
                t,
                within,
            ),
            Outcome::Unknown => {
                // It may still reach the server, after the message went to someone else.
                if !queue.is_fifo() && !m.tainted {
                    m.tainted = true;
                    st.figures.tainted += 1;
                }
            }
        }
    }

    /// A delete or change answered with an error while the receive certainly still held the
    /// message: on FIFO that handle is current and in flight, so it must work; on a standard
    /// queue it must too when nobody else ever received the message.
    #[allow(clippy::too_many_arguments)]
    fn refused_within_hold(
        &self,
        st: &mut State,
        key: MsgKey,
        queue: QueueKind,
        action: &str,
        code: &str,
        t: Ticket,
        within: bool,
    ) {
        let Some(m) = st.msgs.get(&key) else {
            return;
        };
        let alone = m.deliveries.len() == 1;
        if within && (queue.is_fifo() || alone) {
            let d = format!(
                "{key} on {queue}: {action} refused with {code} at {}..{} ms, while the receive \
                 of {} ms held it until at least {} ms",
                self.ms(t.start),
                self.ms(Instant::now()),
                m.hold.map_or(0, |h| self.ms(h.end)),
                self.ms(t.prior)
            );
            self.violate(st, "refused-within-hold", d);
        }
    }

    /// Decides the conditions waiting on delete `id` of `key`.
    fn settle_delete_conds(&self, st: &mut State, key: MsgKey, id: u64, out: &Outcome) {
        let mut i = 0;
        while i < st.conds.len() {
            let Some((k, ids)) = st.conds[i].deletes_of.as_mut() else {
                i += 1;
                continue;
            };
            if *k != key || !ids.contains(&id) {
                i += 1;
                continue;
            }
            if *out == Outcome::Ok {
                st.conds.swap_remove(i);
                st.figures.conds_resolved += 1;
                continue;
            }
            ids.retain(|&d| d != id);
            let empty = ids.is_empty();
            if *out == Outcome::Unknown {
                st.conds[i].unanswered = true;
            }
            if empty {
                st.conds[i].deletes_of = None;
                if st.conds[i].unanswered {
                    st.conds.swap_remove(i);
                    st.figures.conds_resolved += 1;
                    continue;
                }
                if st.conds[i].send_of.is_none() {
                    let c = st.conds.swap_remove(i);
                    self.violate(st, c.rule, c.detail);
                    continue;
                }
            }
            i += 1;
        }
    }
}
