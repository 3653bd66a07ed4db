//! The checks on a ReceiveMessage answer, message by message: the right queue, group and
//! MessageId; never after an acknowledged delete; never while another receive certainly
//! holds the message; receive counts that only go up and respect maxReceiveCount; and on
//! FIFO, send order within a group and no message of a group while an earlier one is held.
//!
//! Two receives `i` (recorded) and `j` (being checked) conflict for certain only if the
//! later delivery falls in the earlier one's hold *whichever was first at the server*:
//! `j.end < i.deadline` (i first: j was served before its answer, i's hold lasts at least
//! to its deadline) and `i.end < j.start + j.visibility` (j first, symmetrically). For
//! receives that do not overlap the second condition always holds.
//!
//! FIFO groups follow AWS (sqs-reference §6.2, §8.2; LocalStack's AWS-validated
//! `test_fifo_message_group_visibility_after_terminate_visibility_timeout`): a receive
//! serves a group from its head, the oldest message not deleted, up to the first message
//! still in flight. A message released or expired while later ones are still held is
//! therefore served again at once, to anyone, while those later ones stay with their
//! holder: a group *can* be held by two consumers, but only head-first. Two rules follow,
//! for a message `k` delivered from its FIFO queue:
//!
//! - **fifo-earlier-held**: no earlier message `j < k` of the group is held, within its
//!   hold, by another receive. Certain when `k`'s answer came before `j`'s hold ended,
//!   whichever receive the server served first: if `j`'s, `j` was in flight when `k` was
//!   handed out; if `k`'s, `j` was already stored and not deleted then (it was received
//!   later), so the head-first prefix could not reach `k` without `j`.
//! - **fifo-order**: every earlier message `j < k` is deleted, or is ahead of `k` in the
//!   same answer. "Visible again" is no excuse: a visible `j` is part of the prefix from the
//!   head and comes before `k`; an in-flight `j` ends the prefix before `k`. Undecided while
//!   `j`'s send or a delete of `j` is in flight (a [`Cond`]); skipped when a delete of `j`
//!   may have worked unacknowledged, and on a DLQ-wired source when `j` may have moved to
//!   the DLQ (a receive moves a message that already had maxReceiveCount receives and goes
//!   on with the rest of the group). Receives still unrecorded may have raised `j`'s count
//!   unseen, so they count toward that.
//!
//! Deliveries from a FIFO dead-letter queue get the checks every message gets, not these.

use std::time::{Duration, Instant};

use super::{Cond, Delivery, Hold, Oracle, Send, State, SLACK};
use crate::body::{Body, GroupPos, MsgKey, QueueKind};

/// One ReceiveMessage call as a consumer made it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReceiveCall {
    /// From [`Oracle::begin_receive`] (0 if none was taken).
    pub ticket: u64,
    pub consumer: usize,
    pub queue: QueueKind,
    /// Taken before the request was sent.
    pub start: Instant,
    /// Taken after the answer arrived.
    pub end: Instant,
    /// The visibility timeout in effect: the receive's own, or the queue's.
    pub visibility: u32,
}

/// One message of the answer.
#[derive(Debug, Clone)]
pub(crate) struct Got {
    pub body: String,
    pub message_id: String,
    /// ApproximateReceiveCount, if the answer carried it.
    pub count: Option<u32>,
    /// MessageGroupId, if the answer carried it.
    pub group_id: Option<String>,
}

/// What a consumer may do with a delivered message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivered {
    /// A message the oracle tracks: act on it through the oracle.
    Known(MsgKey),
    /// Not ours, or long deleted (already a violation): delete it without bookkeeping so the
    /// drain ends with empty queues.
    Stray,
}

/// Holds whose deadline passed this long ago are dropped from a group's list.
const HELD_KEEP: Duration = Duration::from_secs(10);

impl Oracle {
    /// Checks and records one answer; returns the receive's id (for deletes and changes) and
    /// what each message is.
    pub(crate) fn record_receive(&self, call: &ReceiveCall, got: &[Got]) -> (u64, Vec<Delivered>) {
        let mut st = self.lock();
        let st = &mut *st;
        st.pending_receives.remove(&call.ticket);
        st.next_id += 1;
        let recv = st.next_id;
        let mut earlier: Vec<MsgKey> = Vec::with_capacity(got.len());
        let mut out = Vec::with_capacity(got.len());
        let mut found: Vec<(&'static str, String)> = Vec::new();
        for g in got {
            let d = self.check_delivery(st, call, recv, g, &earlier, &mut found);
            if let Delivered::Known(k) = d {
                earlier.push(k);
            }
            out.push(d);
        }
        for (rule, detail) in found {
            self.violate(st, rule, detail);
        }
        (recv, out)
    }

    /// The conservative end of a hold taken by `call`.
    fn deadline_of(call: &ReceiveCall) -> Instant {
        let d = call.start + Duration::from_secs(call.visibility as u64);
        d.checked_sub(SLACK).unwrap_or(call.start).max(call.start)
    }

    fn check_delivery(
        &self,
        st: &mut State,
        call: &ReceiveCall,
        recv: u64,
        g: &Got,
        earlier: &[MsgKey],
        found: &mut Vec<(&'static str, String)>,
    ) -> Delivered {
        st.figures.deliveries[call.queue.index()] += 1;
        let at = format!("{}..{} ms", self.ms(call.start), self.ms(call.end));
        let Some(body) = Body::parse(&g.body) else {
            let shown: String = g.body.chars().take(80).collect();
            found.push((
                "unknown-body",
                format!(
                    "{} from {} at {at}: body {shown:?}",
                    g.message_id, call.queue
                ),
            ));
            return Delivered::Stray;
        };
        let key = body.key;
        if is_retired(st, key) {
            found.push((
                "received-after-delete",
                format!(
                    "{key} from {} at {at}: deleted (and acknowledged) more than 30 s before",
                    call.queue
                ),
            ));
            return Delivered::Stray;
        }
        let Some(m) = st.msgs.get(&key) else {
            found.push((
                "never-sent",
                format!("{key} from {} at {at}: no such send was made", call.queue),
            ));
            return Delivered::Stray;
        };
        let deadline = Self::deadline_of(call);
        let home = call.queue == key.queue || key.queue.dlq() == Some(call.queue);
        if !home {
            found.push((
                "wrong-queue",
                format!("{key} delivered from {} at {at}", call.queue),
            ));
        }
        if m.group != body.group {
            found.push((
                "body",
                format!(
                    "{key}: body names group {:?}, sent with {:?}",
                    body.group, m.group
                ),
            ));
        }
        if key.queue.has_groups() && g.group_id != body.group_id() {
            found.push((
                "group-id",
                format!(
                    "{key} at {at}: MessageGroupId {:?}, sent with {:?}",
                    g.group_id,
                    body.group_id()
                ),
            ));
        }
        if let Some(id) = m.message_id.as_ref().filter(|id| **id != g.message_id) {
            found.push((
                "message-id",
                format!("{key} at {at}: MessageId {}, sent as {id}", g.message_id),
            ));
        }
        if let Some(t) = m.deleted_at.filter(|t| *t < call.start) {
            found.push((
                "received-after-delete",
                format!(
                    "{key} from {} at {at}: its delete was acknowledged at {} ms",
                    call.queue,
                    self.ms(t)
                ),
            ));
        }
        // A change sent under an earlier hold and not yet answered: if this receive may
        // have got the message by expiry (it was answered after that hold's conservative
        // end), the change may still reach the server after it and act on this delivery
        // on a standard queue. Before that end, the message could only have become visible
        // through the change itself, which therefore acted on the earlier delivery.
        let racing = !call.queue.is_fifo()
            && !m.tainted
            && m.changes_in_flight
                .iter()
                .any(|&(_, prior)| call.end >= prior);
        if let Some(h) = m.hold {
            if h.recv == recv {
                found.push((
                    "duplicate-in-answer",
                    format!("{key} twice in one answer from {} at {at}", call.queue),
                ));
            } else if !m.tainted && call.end < h.deadline && h.end < deadline {
                found.push((
                    "held-twice",
                    format!(
                        "{key}: consumer {} got it from {} at {at} while consumer {}'s receive from {} \
                         (answered {} ms) held it until at least {} ms",
                        call.consumer,
                        call.queue,
                        h.consumer,
                        h.queue,
                        self.ms(h.end),
                        self.ms(h.deadline)
                    ),
                ));
            }
        }
        self.check_counts(m, call, key, &at, g.count, found);
        let first_in_dlq =
            call.queue.is_dlq() && !m.deliveries.iter().any(|d| d.queue == call.queue);
        if first_in_dlq {
            st.figures.moved_to_dlq[call.queue.index()] += 1;
        }
        if !m.deliveries.is_empty() {
            st.figures.redeliveries += 1;
        }
        if racing {
            st.figures.tainted += 1;
        }
        if let (true, true, Some(gp)) =
            (key.queue.is_ordered(), call.queue == key.queue, body.group)
        {
            self.check_fifo(st, call, recv, key, gp, earlier, found);
        }
        let Some(m) = st.msgs.get_mut(&key) else {
            return Delivered::Stray;
        };
        m.tainted |= racing;
        m.deliveries.push(Delivery {
            queue: call.queue,
            count: g.count.unwrap_or(0),
            end: call.end,
        });
        m.hold = Some(Hold {
            recv,
            consumer: call.consumer,
            queue: call.queue,
            end: call.end,
            deadline,
        });
        if m.message_id.is_none() {
            m.message_id = Some(g.message_id.clone());
        }
        if let (true, Some(gp)) = (key.queue.is_ordered(), body.group) {
            let grp = st.groups.entry(gp.group).or_default();
            if !grp.held.contains(&key) {
                grp.held.push(key);
            }
        }
        Delivered::Known(key)
    }

    /// ApproximateReceiveCount: present, positive, never lower than a delivery answered
    /// before this receive started, at most maxReceiveCount from a DLQ-wired source and at
    /// least that from its DLQ; and no delivery from the source after one from the DLQ.
    fn check_counts(
        &self,
        m: &super::Msg,
        call: &ReceiveCall,
        key: MsgKey,
        at: &str,
        count: Option<u32>,
        found: &mut Vec<(&'static str, String)>,
    ) {
        let Some(c) = count.filter(|c| *c > 0) else {
            found.push((
                "receive-count",
                format!("{key} at {at}: ApproximateReceiveCount {count:?}"),
            ));
            return;
        };
        if let Some(d) = m
            .deliveries
            .iter()
            .find(|d| d.end < call.start && d.count >= c)
        {
            found.push((
                "receive-count-down",
                format!(
                    "{key} at {at}: ApproximateReceiveCount {c} after {} in the receive answered at {} ms",
                    d.count,
                    self.ms(d.end)
                ),
            ));
        }
        if call.queue.is_source() && c > self.max_receives {
            found.push((
                "receive-count-over-max",
                format!(
                    "{key} from {} at {at}: ApproximateReceiveCount {c} > maxReceiveCount {}",
                    call.queue, self.max_receives
                ),
            ));
        }
        if call.queue.is_dlq() && c < self.max_receives {
            found.push((
                "dlq-receive-count",
                format!(
                    "{key} from {} at {at}: ApproximateReceiveCount {c} < maxReceiveCount {}",
                    call.queue, self.max_receives
                ),
            ));
        }
        if let Some(dlq) = call.queue.dlq() {
            if let Some(d) = m
                .deliveries
                .iter()
                .find(|d| d.queue == dlq && d.end < call.start)
            {
                found.push((
                    "source-after-dlq",
                    format!(
                        "{key} from {} at {at}, after {dlq} delivered it at {} ms",
                        call.queue,
                        self.ms(d.end)
                    ),
                ));
            }
        }
    }

    /// FIFO, for `key` (index `gp.index`) delivered from its own queue: no earlier message
    /// of the group held by another receive (fifo-earlier-held), then every earlier message
    /// deleted or ahead in this answer (fifo-order); see the module's notes.
    #[allow(clippy::too_many_arguments)]
    fn check_fifo(
        &self,
        st: &mut State,
        call: &ReceiveCall,
        recv: u64,
        key: MsgKey,
        gp: GroupPos,
        earlier: &[MsgKey],
        found: &mut Vec<(&'static str, String)>,
    ) {
        let State {
            groups,
            msgs,
            conds,
            pending_receives,
            receive_errors,
            figures,
            ..
        } = st;
        let Some(grp) = groups.get_mut(&gp.group) else {
            return;
        };
        let at = format!("{}..{} ms", self.ms(call.start), self.ms(call.end));
        let now = Instant::now();
        grp.held.retain(|k| {
            msgs.get(k)
                .and_then(|m| m.hold)
                .is_some_and(|h| h.deadline + HELD_KEEP > now)
        });
        let mut past_held = false;
        for &other in &grp.held {
            let Some(o) = msgs.get(&other) else {
                continue;
            };
            let (Some(h), Some(og)) = (o.hold, o.group) else {
                continue;
            };
            if og.index == gp.index || h.recv == recv || h.queue != call.queue {
                continue;
            }
            if og.index > gp.index {
                // Served again ahead of a later message someone else holds: legitimate.
                past_held |= call.end < h.deadline;
                continue;
            }
            if call.end < h.deadline {
                found.push((
                    "fifo-earlier-held",
                    format!(
                        "{key} (group g{} #{}): consumer {} got it at {at} while consumer {}'s \
                         receive (answered {} ms) held #{} ({other}) of the same group until at \
                         least {} ms",
                        gp.group,
                        gp.index,
                        call.consumer,
                        h.consumer,
                        self.ms(h.end),
                        og.index,
                        self.ms(h.deadline)
                    ),
                ));
                // The order rule would only repeat it.
                return;
            }
        }
        if past_held {
            figures.fifo_ahead_of_held += 1;
        }
        // On a DLQ-wired source, an earlier message may have moved to the DLQ: once it had
        // maxReceiveCount receives, counting those of receives not yet recorded.
        let movable = call.queue.is_source().then(|| {
            let unseen = pending_receives
                .values()
                .filter(|(q, start)| *q == call.queue && *start <= call.end)
                .count() as u64;
            (receive_errors[call.queue.index()], unseen)
        });
        for (&i, &other) in grp.undeleted.range(..gp.index) {
            let Some(o) = msgs.get(&other) else {
                continue;
            };
            if earlier.contains(&other)
                || o.send == Send::Failed
                || o.deleted_at.is_some()
                || o.deleted_maybe
            {
                continue;
            }
            if let Some((errors, unseen)) = movable {
                let seen = o.deliveries.iter().map(|d| d.count).max().unwrap_or(0) as u64;
                if errors > 0 || seen + unseen >= self.max_receives as u64 {
                    continue;
                }
            }
            let detail = format!(
                "{key} (group g{} #{}) delivered at {at} while #{i} ({other}) was neither deleted \
                 nor earlier in the same answer",
                gp.group, gp.index
            );
            let send_of = (o.send == Send::Pending).then_some(other);
            let deletes_of =
                (!o.deletes_in_flight.is_empty()).then(|| (other, o.deletes_in_flight.clone()));
            if send_of.is_none() && deletes_of.is_none() {
                found.push(("fifo-order", detail));
            } else {
                conds.push(Cond {
                    rule: "fifo-order",
                    detail,
                    send_of,
                    deletes_of,
                    unanswered: false,
                });
            }
            // The first gap says it all; the rest of the group would repeat it.
            break;
        }
    }
}

/// Whether `key` was deleted and retired.
fn is_retired(st: &State, key: MsgKey) -> bool {
    st.retired.get(&key.producer).is_some_and(|bits| {
        bits.get((key.seq / 64) as usize)
            .is_some_and(|w| w & (1 << (key.seq % 64)) != 0)
    })
}
