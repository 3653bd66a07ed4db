//! Realism applied to one queue's state, always under its lock: which visible messages a
//! receive gets, duplicate deliveries, stale deletes, the settings in effect while a change
//! propagates, a purge still under way, and the counts shown. Every method is a no-op (or
//! the exact answer) when its behaviour is off.

use std::collections::VecDeque;

use crate::engine::ids::MessageKey;
use crate::engine::message::Delivery;
use crate::engine::receipt::Receipt;
use crate::engine::settings::QueueSettings;
use crate::engine::state::{Order, QueueState};
use crate::engine::view::QueueCounts;

/// The most visible messages one short poll looks through for its sampled partitions: AWS
/// documents that with fewer than 1,000 messages a short poll may miss some.
const SHORT_POLL_SCAN: usize = 1_000;

impl QueueState {
    /// The settings in effect: the previous ones while a change propagates.
    pub(in crate::engine) fn effective(&self) -> &QueueSettings {
        match self.realism.as_ref().and_then(|r| r.shadow.as_ref()) {
            Some((_, old)) => old,
            None => &self.settings,
        }
    }

    /// Whether receives on this standard queue are picked by realism (sampling or order).
    pub(in crate::engine) fn picks_realistically(&self) -> bool {
        matches!(self.order, Order::Standard(_))
            && self
                .realism
                .as_ref()
                .is_some_and(|r| r.cfg.short_poll.is_some() || r.cfg.order.is_some())
    }

    /// The partitions a short poll sees (`None`: all of them; long polls always see all).
    pub(in crate::engine) fn sampled_partitions(&mut self, short_poll: bool) -> Option<Vec<bool>> {
        let r = self.realism.as_mut()?;
        (short_poll && r.cfg.short_poll.is_some()).then(|| r.sample_partitions())
    }

    /// How many messages a short poll asking for `max` returns under realism: fewer than
    /// asked while few wait (`RealismState::short_poll_count`); `max` otherwise.
    pub(in crate::engine) fn short_poll_take(&mut self, short_poll: bool, max: usize) -> usize {
        let visible = self.visible;
        match self.realism.as_mut() {
            Some(r) if short_poll && r.cfg.short_poll.is_some() => r.short_poll_count(visible, max),
            _ => max,
        }
    }

    /// Up to `n` visible messages for a receive of a standard queue under realism: only from
    /// the `sampled` partitions (if given, looking through at most the first 1,000, and
    /// choosing among all of those), otherwise each chosen among the first `order` eligible
    /// ones. The others stay where they were.
    pub(in crate::engine) fn pick_realistic(
        &mut self,
        n: usize,
        sampled: Option<&[bool]>,
    ) -> Vec<MessageKey> {
        let Some(r) = self.realism.as_mut() else {
            return Vec::new();
        };
        // A short poll returns any of what the servers it sampled hold, not the oldest: it
        // picks among everything it looked at.
        let window = if sampled.is_some() {
            SHORT_POLL_SCAN
        } else {
            r.cfg.order.unwrap_or(1) as usize
        };
        let want = n + window - 1;
        let scan = if sampled.is_some() {
            SHORT_POLL_SCAN
        } else {
            want
        };
        let Order::Standard(fair) = &mut self.order else {
            return Vec::new();
        };
        let mut eligible = VecDeque::new();
        let mut passed = Vec::new();
        let mut looked = 0;
        while eligible.len() < want && looked < scan {
            let batch = fair.take((want - eligible.len()).min(scan - looked));
            if batch.is_empty() {
                break;
            }
            looked += batch.len();
            for key in batch {
                match sampled {
                    Some(s) if !s[r.partition_of(key.seq)] => passed.push(key),
                    _ => eligible.push_back(key),
                }
            }
        }
        let picked = r.window_pick(&mut eligible, n, window);
        for key in passed.into_iter().chain(eligible) {
            if let Some(m) = self.messages.get(&key) {
                fair.insert(key, m.payload.group_id.as_ref());
            }
        }
        picked
    }

    /// At-least-once: with the `duplicates` chance, a message just received (visible again
    /// at `until_ms`) comes back sooner, while its first copy is still in flight.
    pub(in crate::engine) fn maybe_duplicate(&mut self, key: MessageKey, until_ms: u64, now: u64) {
        if !matches!(self.order, Order::Standard(_)) {
            return;
        }
        let Some(r) = self.realism.as_mut() else {
            return;
        };
        let Some(p) = r.cfg.duplicates else {
            return;
        };
        // A timeout of a few milliseconds leaves no "sooner" to come back at.
        if until_ms <= now + 2 || !r.chance(p) {
            return;
        }
        let at = r.duplicate_at(now, until_ms);
        if let Some(m) = self.messages.get_mut(&key) {
            m.delivery = Delivery::InFlight { until_ms: at };
            self.timers.remove(&(until_ms, key));
            self.timers.insert((at, key));
            self.note_deadline(at);
            self.record_progress(key);
        }
    }

    /// At-least-once: a delete with a handle older than the message's latest receive
    /// succeeds without deleting ("you must provide the most recently received receipt
    /// handle", DeleteMessage).
    pub(in crate::engine) fn stale_delete_ignored(&self, receipt: &Receipt) -> bool {
        let on = matches!(self.order, Order::Standard(_))
            && self
                .realism
                .as_ref()
                .is_some_and(|r| r.cfg.duplicates.is_some_and(|p| p > 0.0));
        on && self
            .messages
            .get(&receipt.key)
            .is_some_and(|m| m.receive_count != receipt.receive_number)
    }

    /// The chance that a delete is lost once: the at-least-once fault's, or realism's.
    pub(in crate::engine) fn lost_delete_chance(&self) -> f64 {
        let realism = self
            .realism
            .as_ref()
            .and_then(|r| r.cfg.duplicates)
            .unwrap_or(0.0);
        self.redeliver_probability.max(realism)
    }

    /// Settings changed from `previous` (what was set) while `old` was in effect: under
    /// propagation, `old` stays in effect for a while. Setting what is already set changes
    /// nothing, not even when a change still propagates.
    pub(in crate::engine) fn propagate(
        &mut self,
        previous: &QueueSettings,
        old: QueueSettings,
        now: u64,
    ) {
        let Some(r) = self.realism.as_mut().filter(|r| r.cfg.propagation) else {
            return;
        };
        if *previous == self.settings || old == self.settings {
            return;
        }
        let ms = r.propagation_ms(&old, &self.settings);
        // What clients saw stays in effect: the settings of a change still propagating.
        let shown = r.shadow.take().map_or(old, |(_, s)| s);
        r.shadow = Some((now + ms, shown));
    }

    /// A purge under propagation: the messages stored now stay receivable until a moment
    /// within the next minute, then go. False when the purge must happen at once (realism
    /// off, a FIFO queue, or durable mode, where a purge is kept the moment it is
    /// acknowledged).
    pub(in crate::engine) fn defer_purge(&mut self, now: u64) -> bool {
        // FIFO queues purge at once: their deduplication and group state go with the
        // messages, which a purge finishing later could not separate from new sends.
        if self.rec.on || !matches!(self.order, Order::Standard(_)) {
            return false;
        }
        let Some(r) = self.realism.as_mut().filter(|r| r.cfg.propagation) else {
            return false;
        };
        let before = self.messages.next_seq();
        let at = now + r.purge_ms();
        r.purge = Some((before, at));
        self.last_purge_ms = Some(now);
        true
    }

    /// Catches realism up to `now`: propagated settings take effect, a purge under way
    /// finishes (the messages stored when it was asked for go).
    pub(in crate::engine) fn realism_catch_up(&mut self, now: u64) {
        let Some(r) = self.realism.as_mut() else {
            return;
        };
        if r.shadow.as_ref().is_some_and(|(until, _)| now >= *until) {
            r.shadow = None;
            self.wake = true;
        }
        if r.purge.is_some_and(|(_, at)| now >= at) {
            self.finish_purge();
        }
    }

    /// Ends a purge under way now: the messages stored before it go.
    pub(in crate::engine) fn finish_purge(&mut self) {
        let Some((before, _)) = self.realism.as_mut().and_then(|r| r.purge.take()) else {
            return;
        };
        let keys: Vec<MessageKey> = self
            .messages
            .iter()
            .map(|(k, _)| k)
            .filter(|k| k.seq < before)
            .collect();
        for key in keys {
            if self.remove(&key).is_some() {
                self.traffic.purged += 1;
            }
        }
    }

    /// The ApproximateNumberOf* counts to answer: the true ones, or (standard queues under
    /// `count_lag`) the ones last refreshed.
    pub(in crate::engine) fn shown_counts(&mut self, now: u64) -> QueueCounts {
        let truth = QueueCounts {
            visible: self.visible,
            in_flight: self.in_flight,
            delayed: self.delayed,
        };
        match (&self.order, self.realism.as_mut()) {
            (Order::Standard(_), Some(r)) => r.shown_counts(now, truth),
            _ => truth,
        }
    }
}
