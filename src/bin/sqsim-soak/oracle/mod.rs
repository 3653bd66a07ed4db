//! The oracle: what the clients know about every message they sent, and the rules the
//! server's answers must obey. Producers and consumers tell it what they are about to do and
//! what came back; it checks each answer at once (live) and everything left at the end.
//!
//! Time is the client's [`Instant`]. The server decides at some moment between a request's
//! start and its answer, so every bound here is conservative: a hold ends no earlier than the
//! receive's *start* plus its visibility timeout (minus [`SLACK`]), and a violation is only
//! recorded when it is certain whatever the server's moment was. Whatever cannot be decided
//! yet (a send or delete still in flight) is kept as a [`Cond`] and decided when it ends.
//!
//! It owns no I/O; one `std::sync::Mutex`, never held across an `.await`.

mod act;
mod receive;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::body::{MsgKey, QueueKind};

pub(crate) use receive::{Delivered, Got, ReceiveCall};

/// Taken off every conservative deadline: sqsim counts time in whole milliseconds of its own
/// monotonic clock, so its deadline may fall up to a millisecond before ours; 25 ms also
/// absorbs any difference between the two processes' readings of the clock.
pub(crate) const SLACK: Duration = Duration::from_millis(25);

/// A consumer only deletes or changes a message while at least this much of its
/// conservative hold is left: later, the request might reach the server after the message
/// went to someone else, and on a standard queue any old receipt handle still acts (as on
/// AWS). Late acts are still sound (see [`Msg::tainted`]), only weaker.
pub(crate) const MARGIN: Duration = Duration::from_millis(750);

/// Deleted messages are forgotten (kept as one bit) this long after their delete: by then
/// every answer that raced the delete has been checked.
const RETIRE_AFTER: Duration = Duration::from_secs(30);

/// At most this many violations are printed as they happen (all are counted).
const PRINT_LIMIT: usize = 100;

/// How a send went, as far as the producer knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Send {
    /// Sent, no answer yet: the message may already be delivered.
    Pending,
    /// Acknowledged: it must be delivered and deleted.
    Acked,
    /// Failed or unanswered: it may or may not exist.
    Failed,
}

/// One delivery of a message (one message of one ReceiveMessage answer).
#[derive(Debug, Clone, Copy)]
pub(super) struct Delivery {
    queue: QueueKind,
    /// ApproximateReceiveCount as answered.
    count: u32,
    /// When the receive answered.
    end: Instant,
}

/// The latest delivery's hold on a message.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hold {
    recv: u64,
    consumer: usize,
    queue: QueueKind,
    /// When the receive answered.
    end: Instant,
    /// No other receive may get the message (or, on FIFO, a later message of its group)
    /// before this.
    deadline: Instant,
}

/// Everything known about one message that is not yet retired.
#[derive(Debug)]
pub(super) struct Msg {
    send: Send,
    group: Option<crate::body::GroupPos>,
    /// MessageId from the send's answer (or from a delivery, if that came first).
    message_id: Option<String>,
    deliveries: Vec<Delivery>,
    hold: Option<Hold>,
    /// When a delete that certainly took effect was acknowledged.
    deleted_at: Option<Instant>,
    /// A delete may have taken effect, or may not: acknowledged on a DLQ-wired source after
    /// the hold may have ended (the message may have moved to the DLQ instead, and a delete
    /// of a moved message is a no-op), or never answered (a 5xx or no answer at all). Such a
    /// message is neither lost if never deleted later nor a gap in its FIFO group.
    deleted_maybe: bool,
    /// Ids of delete requests in flight.
    deletes_in_flight: Vec<u64>,
    /// Visibility changes in flight: (id, the conservative end of the hold they were sent
    /// under, before they shortened it).
    changes_in_flight: Vec<(u64, Instant)>,
    /// On a standard queue, a visibility change may have acted on another consumer's
    /// delivery (any handle the message was ever received with still works there): one
    /// answered after its hold may have ended, or one still in flight when a later receive
    /// may have got the message by expiry. Holds of this message are no longer checked.
    tainted: bool,
    /// Counted toward the queue's backlog until deleted or its send failed.
    settled: bool,
}

/// A FIFO group as the oracle sees it.
#[derive(Debug, Default)]
pub(super) struct Group {
    /// Messages sent and not yet deleted for certain, by index in the group.
    undeleted: BTreeMap<u64, MsgKey>,
    /// Messages whose latest hold may still run (or ended less than a few seconds ago).
    held: Vec<MsgKey>,
}

/// A violation that becomes certain only if a send is acknowledged or no delete in flight
/// succeeds.
#[derive(Debug)]
pub(super) struct Cond {
    rule: &'static str,
    detail: String,
    /// Decided when this send ends: acknowledged confirms, failed drops.
    send_of: Option<MsgKey>,
    /// Dropped if one of these deletes of this message succeeds; confirmed when all failed.
    deletes_of: Option<(MsgKey, Vec<u64>)>,
    /// One of those deletes went unanswered (it may have worked): undecidable, dropped.
    unanswered: bool,
}

/// A recorded violation.
#[derive(Debug, Clone)]
pub(crate) struct Violation {
    pub rule: &'static str,
    /// Since the oracle started.
    pub at: Duration,
    pub detail: String,
}

/// Totals the summary reports.
#[derive(Debug, Default, Clone)]
pub(crate) struct Figures {
    /// Acknowledged sends, by queue.
    pub sent: [u64; QueueKind::N],
    pub send_failed: u64,
    /// Messages delivered, by the queue that delivered them.
    pub deliveries: [u64; QueueKind::N],
    /// Deliveries of a message delivered before.
    pub redeliveries: u64,
    /// Messages deleted for certain, by the queue they were deleted from.
    pub deleted: [u64; QueueKind::N],
    /// Messages deleted for certain, by the queue they were sent to (a source's messages
    /// deleted from its DLQ included).
    pub deleted_of: [u64; QueueKind::N],
    /// Deletes on a DLQ-wired source answered after the hold may have ended.
    pub deleted_maybe: u64,
    /// Deletes never answered (5xx, timeout): they may or may not have taken effect.
    pub deletes_unknown: u64,
    /// Messages first seen in a DLQ, by DLQ.
    pub moved_to_dlq: [u64; QueueKind::N],
    /// Acknowledged ChangeMessageVisibility (single or batch entries), releases included.
    pub visibility_changes: u64,
    /// Of which to 0 seconds.
    pub releases: u64,
    /// FIFO deliveries while a later message of the group was certainly held by another
    /// receive (a released or expired head served again, as on AWS).
    pub fifo_ahead_of_held: u64,
    /// Messages whose holds stopped being checked after a late or racing change.
    pub tainted: u64,
    /// Messages forgotten after their delete.
    pub retired: u64,
    /// Undecided checks that a later answer cleared.
    pub conds_resolved: u64,
}

/// What a delete or visibility change came back with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    /// The service answered with this error code.
    Refused(String),
    /// No answer (transport error, timeout): it may or may not have happened.
    Unknown,
}

/// A delete or change the oracle allowed; handed back when it ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    id: u64,
    recv: u64,
    start: Instant,
    /// The hold's conservative deadline before this act.
    prior: Instant,
}

/// The oracle's state.
#[derive(Debug, Default)]
pub(super) struct State {
    msgs: HashMap<MsgKey, Msg>,
    /// Deleted and retired messages: one bit per (producer, seq).
    retired: HashMap<u32, Vec<u64>>,
    /// Deleted messages in order of delete, for retirement.
    retire_queue: VecDeque<(Instant, MsgKey)>,
    groups: HashMap<u32, Group>,
    /// Per queue (by [`QueueKind::index`]): messages sent and not settled.
    backlog: [i64; QueueKind::N],
    conds: Vec<Cond>,
    violations: Vec<Violation>,
    next_id: u64,
    figures: Figures,
    /// Receive calls that failed, per queue: deliveries may have gone unseen.
    receive_errors: [u64; QueueKind::N],
    /// Receive calls sent and not yet recorded (answered or failed): (queue, start). Until
    /// recorded, what they delivered (and the receive counts they raised) is unseen.
    pending_receives: HashMap<u64, (QueueKind, Instant)>,
}

/// The oracle shared by every client task.
pub(crate) struct Oracle {
    state: Mutex<State>,
    origin: Instant,
    /// The DLQ-wired sources' maxReceiveCount (both have the same).
    pub max_receives: u32,
}

impl Oracle {
    /// An oracle for a run whose DLQ-wired sources move messages after `max_receives`
    /// receives.
    pub(crate) fn new(max_receives: u32) -> Oracle {
        Oracle {
            state: Mutex::new(State::default()),
            origin: Instant::now(),
            max_receives,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panicking client task must not hide the oracle's findings.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a violation (printed while few).
    fn violate(&self, st: &mut State, rule: &'static str, detail: String) {
        let v = Violation {
            rule,
            at: self.origin.elapsed(),
            detail,
        };
        if st.violations.len() < PRINT_LIMIT {
            eprintln!(
                "VIOLATION [{}] at {:.3}s: {}",
                v.rule,
                v.at.as_secs_f64(),
                v.detail
            );
        }
        st.violations.push(v);
    }

    /// Milliseconds since the oracle started, for details.
    fn ms(&self, t: Instant) -> u128 {
        t.saturating_duration_since(self.origin).as_millis()
    }

    /// A producer is about to send this message.
    pub(crate) fn begin_send(&self, key: MsgKey, group: Option<crate::body::GroupPos>) {
        let mut st = self.lock();
        st.msgs.insert(
            key,
            Msg {
                send: Send::Pending,
                group,
                message_id: None,
                deliveries: Vec::new(),
                hold: None,
                deleted_at: None,
                deleted_maybe: false,
                deletes_in_flight: Vec::new(),
                changes_in_flight: Vec::new(),
                tainted: false,
                settled: false,
            },
        );
        st.backlog[key.queue.index()] += 1;
        if let (true, Some(g)) = (key.queue.is_ordered(), group) {
            st.groups
                .entry(g.group)
                .or_default()
                .undeleted
                .insert(g.index, key);
        }
    }

    /// The send ended: `Ok(MessageId)` if acknowledged.
    pub(crate) fn end_send(&self, key: MsgKey, result: Result<String, ()>) {
        let acked = result.is_ok();
        let mut st = self.lock();
        let st = &mut *st;
        let Some(m) = st.msgs.get_mut(&key) else {
            return;
        };
        match result {
            Ok(id) => {
                m.send = Send::Acked;
                st.figures.sent[key.queue.index()] += 1;
                if let Some(seen) = &m.message_id {
                    if *seen != id {
                        let d = format!(
                            "{key}: delivered as MessageId {seen}, but the send answered {id}"
                        );
                        self.violate(st, "message-id", d);
                    }
                }
                if let Some(m) = st.msgs.get_mut(&key) {
                    m.message_id = Some(id);
                }
            }
            Err(()) => {
                m.send = Send::Failed;
                st.figures.send_failed += 1;
                if !m.settled {
                    m.settled = true;
                    st.backlog[key.queue.index()] -= 1;
                }
                if let (true, Some(g)) = (key.queue.is_ordered(), m.group) {
                    if let Some(grp) = st.groups.get_mut(&g.group) {
                        grp.undeleted.remove(&g.index);
                    }
                }
            }
        }
        let mut i = 0;
        while i < st.conds.len() {
            if st.conds[i].send_of != Some(key) {
                i += 1;
                continue;
            }
            if !acked {
                st.conds.swap_remove(i);
                st.figures.conds_resolved += 1;
                continue;
            }
            st.conds[i].send_of = None;
            if st.conds[i].deletes_of.is_none() {
                let c = st.conds.swap_remove(i);
                self.violate(st, c.rule, c.detail);
                continue;
            }
            i += 1;
        }
    }

    /// Messages of `queue` sent and neither deleted nor failed (the producers' bound).
    pub(crate) fn backlog(&self, queue: QueueKind) -> i64 {
        self.lock().backlog[queue.index()]
    }

    /// Messages sent (to any queue) and neither deleted nor failed: zero once drained.
    pub(crate) fn unsettled(&self) -> i64 {
        self.lock().backlog.iter().sum()
    }

    /// Forgets messages deleted more than [`RETIRE_AFTER`] ago (keeping one bit each), so a
    /// ten-minute run's memory stays flat; checks the DLQ rule on each first.
    pub(crate) fn retire(&self) {
        let mut st = self.lock();
        let st = &mut *st;
        let now = Instant::now();
        while let Some(&(at, key)) = st.retire_queue.front() {
            if now.saturating_duration_since(at) < RETIRE_AFTER {
                break;
            }
            st.retire_queue.pop_front();
            let Some(m) = st.msgs.remove(&key) else {
                continue;
            };
            self.check_dead_letter(st, key, &m);
            let bits = st.retired.entry(key.producer).or_default();
            let (w, b) = ((key.seq / 64) as usize, key.seq % 64);
            if bits.len() <= w {
                bits.resize(w + 1, 0);
            }
            bits[w] |= 1 << b;
            st.figures.retired += 1;
        }
    }

    /// A message found in its DLQ must have been received `max_receives` times from its
    /// source first (checked once every source receive has been answered, and only when no
    /// receive of that source failed, since a failed receive may have delivered unseen).
    fn check_dead_letter(&self, st: &mut State, key: MsgKey, m: &Msg) {
        let Some(dlq) = key.queue.dlq() else {
            return;
        };
        if st.receive_errors[key.queue.index()] > 0 || !m.deliveries.iter().any(|d| d.queue == dlq)
        {
            return;
        }
        let from_source = m.deliveries.iter().filter(|d| d.queue == key.queue).count() as u32;
        if from_source < self.max_receives {
            let d = format!(
                "{key} reached {dlq} after {from_source} receives from its source (maxReceiveCount {})",
                self.max_receives
            );
            self.violate(st, "dlq-early", d);
        }
    }

    /// The end-of-run checks, after the drain: every acknowledged send was deleted (from its
    /// queue or the DLQ), conditions still open are decided, and the DLQ rule is checked on
    /// every message not yet retired.
    pub(crate) fn finish(&self) {
        let mut st = self.lock();
        let st = &mut *st;
        let mut keys: Vec<MsgKey> = st.msgs.keys().copied().collect();
        keys.sort_by_key(|k| (k.queue, k.producer, k.seq));
        for key in keys {
            let Some(m) = st.msgs.remove(&key) else {
                continue;
            };
            self.check_dead_letter(st, key, &m);
            if m.send == Send::Acked && m.deleted_at.is_none() && !m.deleted_maybe {
                let last = m
                    .deliveries
                    .last()
                    .map_or("never delivered".to_string(), |d| {
                        format!(
                            "last delivered from {} at {} ms with ApproximateReceiveCount {}",
                            d.queue,
                            self.ms(d.end),
                            d.count
                        )
                    });
                let d = format!(
                    "{key} (MessageId {}): acknowledged, never deleted; {} deliveries, {last}",
                    m.message_id.as_deref().unwrap_or("?"),
                    m.deliveries.len()
                );
                self.violate(st, "lost", d);
            }
            st.msgs.insert(key, m);
        }
        for c in std::mem::take(&mut st.conds) {
            // Nothing is in flight any more: an unacknowledged send or a delete that never
            // answered leaves the condition undecided, which is not a certainty.
            if c.send_of.is_none() && c.deletes_of.is_none() {
                self.violate(st, c.rule, c.detail);
            }
        }
    }

    /// A violation found outside the oracle's own bookkeeping (the final queue counts).
    pub(crate) fn report(&self, rule: &'static str, detail: String) {
        let mut st = self.lock();
        self.violate(&mut st, rule, detail);
    }

    /// A consumer is about to send a ReceiveMessage to `queue`: the ticket to hand back in
    /// its [`ReceiveCall`], or to [`Oracle::receive_failed`].
    pub(crate) fn begin_receive(&self, queue: QueueKind) -> u64 {
        let mut st = self.lock();
        st.next_id += 1;
        let id = st.next_id;
        st.pending_receives.insert(id, (queue, Instant::now()));
        id
    }

    /// The receive with this ticket answered with no message.
    pub(crate) fn receive_empty(&self, ticket: u64) {
        self.lock().pending_receives.remove(&ticket);
    }

    /// The receive with this ticket failed: it may have delivered messages nobody saw.
    pub(crate) fn receive_failed(&self, queue: QueueKind, ticket: u64) {
        let mut st = self.lock();
        st.pending_receives.remove(&ticket);
        st.receive_errors[queue.index()] += 1;
    }

    /// The totals so far.
    pub(crate) fn figures(&self) -> Figures {
        self.lock().figures.clone()
    }

    /// Every violation so far.
    pub(crate) fn violations(&self) -> Vec<Violation> {
        self.lock().violations.clone()
    }

    /// How many violations so far.
    pub(crate) fn violation_count(&self) -> usize {
        self.lock().violations.len()
    }
}

#[cfg(test)]
mod tests;
