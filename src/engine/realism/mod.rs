//! AWS-realism mode: the behaviours of the real, distributed SQS that an exact emulator
//! hides and production shows, each switched and tuned on its own, all drawn from a seeded
//! stream per queue so that a seed and a request sequence replay the same run. Off by
//! default; off costs one branch per receive, delete and count.
//!
//! What each behaviour follows (SQS Developer Guide and API reference):
//! - `short_poll`: a short poll "samples a subset of its servers (based on a weighted random
//!   distribution) and returns messages from only those servers"; messages are spread over
//!   partitions, and a short poll sees a weighted half of them. While fewer than about
//!   1,000 wait it also returns fewer than asked ("you most likely get fewer messages than
//!   you requested"): `1 + Binomial(waiting - 1, 0.01)`, about 2 of 100 waiting, and with a
//!   very small queue sometimes none. Long polls see all.
//! - `order`: standard queues give "best-effort ordering": a receive takes its messages from
//!   the first `order` visible ones, in random order.
//! - `duplicates`: at-least-once delivery. With this chance a received message comes back
//!   while its first copy is still in flight (it reappears after a random part of its
//!   visibility timeout, with its own receipt handle), a delete is lost once, and a delete
//!   with an older receipt handle than the latest succeeds without deleting.
//! - `count_lag`: ApproximateNumberOf* of standard queues "may not achieve consistency until
//!   at least 1 minute after the producers stop": counts shown are refreshed at random
//!   moments up to this many seconds apart (FIFO counts stay exact, as AWS documents).
//! - `propagation`: attribute changes take effect after up to 60 s (MessageRetentionPeriod
//!   up to 15 min), a new queue answers QueueDoesNotExist for up to 1 s, and a purge lets
//!   messages sent before it through for up to 60 s.
//! - `throttle`: FIFO queues answer RequestThrottled (403) past 300 calls a second per action
//!   (send, receive, delete; a batch is one call), or the high-throughput quota of the
//!   queue's region; `throttle=N` also limits standard queues to N calls a second per action.

mod apply;
pub(crate) mod mode;

pub use mode::Realism;

use std::collections::VecDeque;

use super::random;
use super::settings::{DeduplicationScope, FifoThroughputLimit, QueueSettings};
use super::view::QueueCounts;

/// A short poll of a standard queue returns `1 + Binomial(visible - 1, SHORT_POLL_RATE)`
/// messages: about 2 of 100 waiting (1: 37%, 2: 37%, 3: 18%), the full 10 two times in three
/// at 1,000. The rate is an estimate fitted to what AWS documents — "if you have fewer than
/// 1,000 messages in your queue", "you most likely get fewer messages than you requested"
/// (API_ReceiveMessage) — and to what users report (1 to 3 messages per call: aws-sdk-js#39,
/// boto3#324, aws-sdk-go#174, aws-sdk-java#2536); docs/fidelity-research.md has the sources.
const SHORT_POLL_RATE: f64 = 0.01;
/// The chance, per waiting message, that a short poll finds none of them: an "extremely
/// small" queue "might not" return any (API_ReceiveMessage), a false empty response.
const SHORT_POLL_EMPTY: f64 = 0.2;

/// Longest propagation delays AWS documents.
const ATTRIBUTES_PROPAGATION_MS: u64 = 60_000;
const RETENTION_PROPAGATION_MS: u64 = 15 * 60_000;
const CREATE_PROPAGATION_MS: u64 = 1_000;
const PURGE_PROPAGATION_MS: u64 = 60_000;

/// The API actions quotas count (a batch is one call of its action's family).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Send,
    Receive,
    Delete,
}

/// One queue's realism: its setting, its seeded stream and what the behaviours remember.
#[derive(Debug)]
pub(crate) struct RealismState {
    pub cfg: Realism,
    rng: u64,
    /// Fixed for the queue's lifetime: mixed into the partition a message lands in.
    salt: u64,
    /// Per-partition weights of short-poll sampling (1 to 4), drawn once.
    weights: Vec<u32>,
    /// The counts shown, and when they are refreshed next.
    shown: Option<(u64, QueueCounts)>,
    /// Token buckets per family: (tokens, last refill ms).
    buckets: [(f64, u64); 3],
    /// Until when a new queue answers QueueDoesNotExist.
    pub hidden_until_ms: u64,
    /// The settings still in effect while a change propagates, and until when.
    pub shadow: Option<(u64, QueueSettings)>,
    /// A purge still under way: (messages below this sequence number are removed, at).
    pub purge: Option<(u64, u64)>,
}

impl RealismState {
    /// A queue's realism from `now_ms` on, its stream seeded from the engine's seed and the
    /// queue's name (so that each queue's draws depend only on its own requests). `created`:
    /// the queue was just created, and under propagation stays unknown for up to a second.
    pub(crate) fn new(
        cfg: Realism,
        seed: u64,
        queue: &str,
        now_ms: u64,
        created: bool,
    ) -> RealismState {
        let salt = seed ^ fnv(queue.as_bytes());
        let mut rng = salt;
        let weights = (0..cfg.short_poll.unwrap_or(0))
            .map(|_| 1 + (random::next(&mut rng) % 4) as u32)
            .collect();
        let mut st = RealismState {
            cfg,
            rng,
            salt,
            weights,
            shown: None,
            buckets: [(f64::MAX, now_ms); 3],
            hidden_until_ms: 0,
            shadow: None,
            purge: None,
        };
        if st.cfg.propagation && created {
            st.hidden_until_ms = now_ms + st.below(CREATE_PROPAGATION_MS);
        }
        st
    }

    /// A uniform draw in [0, n).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            random::next(&mut self.rng) % n
        }
    }

    /// A uniform draw in [0, 1).
    pub(crate) fn draw_unit(&mut self) -> f64 {
        random::unit(&mut self.rng)
    }

    /// Whether an event of chance `p` happens.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && random::unit(&mut self.rng) < p
    }

    /// The partition a message (by its sequence number) is stored in.
    pub(crate) fn partition_of(&self, seq: u64) -> usize {
        let n = self.weights.len().max(1) as u64;
        (mix(seq ^ self.salt) % n) as usize
    }

    /// How many of `visible` messages one short poll of at most `max` returns (before the
    /// partitions it samples decide which): none with chance 0.2^visible, otherwise
    /// `1 + Binomial(visible - 1, 0.01)`, capped at `max`. See [`SHORT_POLL_RATE`].
    pub(crate) fn short_poll_count(&mut self, visible: usize, max: usize) -> usize {
        if visible == 0 || max == 0 {
            return 0;
        }
        // 0.2^n underflows to 0 quickly; past 30 messages the draw cannot matter.
        if visible <= 30 && self.chance(SHORT_POLL_EMPTY.powi(visible as i32)) {
            return 0;
        }
        // Successes among `visible - 1` trials of chance SHORT_POLL_RATE, counted by
        // geometric gaps, stopping once the cap is reached: at most `max` draws.
        let trials = (visible - 1) as f64;
        let mut got = 1;
        let mut at = 0.0;
        while got < max {
            let u = self.draw_unit().max(f64::MIN_POSITIVE);
            at += (u.ln() / (1.0 - SHORT_POLL_RATE).ln()).floor() + 1.0;
            if at > trials {
                break;
            }
            got += 1;
        }
        got.min(max)
    }

    /// The partitions one short poll sees: a weighted sample of half of them (at least one).
    pub(crate) fn sample_partitions(&mut self) -> Vec<bool> {
        let n = self.weights.len();
        let mut seen = vec![false; n];
        let mut left: Vec<usize> = (0..n).collect();
        for _ in 0..n.div_ceil(2) {
            let total: u64 = left.iter().map(|&i| self.weights[i] as u64).sum();
            let mut pick = self.below(total);
            let at = left
                .iter()
                .position(|&i| {
                    let w = self.weights[i] as u64;
                    if pick < w {
                        true
                    } else {
                        pick -= w;
                        false
                    }
                })
                .unwrap_or(0);
            seen[left.swap_remove(at)] = true;
        }
        seen
    }

    /// Takes `n` items from `pool` (in delivery order), each chosen at random among the
    /// first `window` still there: best-effort order, never more than `window` places off.
    pub(crate) fn window_pick<T>(
        &mut self,
        pool: &mut VecDeque<T>,
        n: usize,
        window: usize,
    ) -> Vec<T> {
        let mut picked = Vec::with_capacity(n.min(pool.len()));
        while picked.len() < n {
            let span = window.max(1).min(pool.len()) as u64;
            if span == 0 {
                break;
            }
            let i = self.below(span) as usize;
            if let Some(item) = pool.remove(i) {
                picked.push(item);
            }
        }
        picked
    }

    /// When a duplicate of a message received now with this visibility deadline becomes
    /// visible again: a random moment within the first half of its timeout.
    pub(crate) fn duplicate_at(&mut self, now: u64, until_ms: u64) -> u64 {
        let half = until_ms.saturating_sub(now) / 2;
        now + 1 + self.below(half.max(1))
    }

    /// The counts to show at `now`, given the true ones: refreshed at random moments up to
    /// `count_lag` seconds apart.
    pub(crate) fn shown_counts(&mut self, now: u64, truth: QueueCounts) -> QueueCounts {
        let Some(lag_s) = self.cfg.count_lag else {
            return truth;
        };
        match self.shown {
            Some((refresh_at, shown)) if now < refresh_at => shown,
            _ => {
                let next = now + 1 + self.below(lag_s as u64 * 1000);
                self.shown = Some((next, truth));
                truth
            }
        }
    }

    /// How long a settings change takes to propagate: up to 60 s, up to 15 min when the
    /// retention period changes.
    pub(crate) fn propagation_ms(&mut self, old: &QueueSettings, new: &QueueSettings) -> u64 {
        let max = if old.message_retention_period != new.message_retention_period {
            RETENTION_PROPAGATION_MS
        } else {
            ATTRIBUTES_PROPAGATION_MS
        };
        1 + self.below(max)
    }

    /// How long a purge takes to finish.
    pub(crate) fn purge_ms(&mut self) -> u64 {
        1 + self.below(PURGE_PROPAGATION_MS)
    }

    /// Calls a second per action family that `settings` allow under `throttle`, or `None`
    /// when unlimited (realism's throttle off, or a standard queue without a rate).
    pub(crate) fn quota(&self, settings: &QueueSettings, region: &str) -> Option<f64> {
        let standard_rate = self.cfg.throttle?;
        if settings.fifo_queue {
            Some(fifo_quota(settings, region))
        } else {
            standard_rate.map(f64::from)
        }
    }

    /// Takes one call of `family` from its bucket (of `rate` calls a second) at `now`;
    /// false when the quota is spent.
    pub(crate) fn admit(&mut self, family: Family, now: u64, rate: f64) -> bool {
        let (tokens, last) = &mut self.buckets[family as usize];
        // A bucket holds one second of calls; it fills as the clock moves.
        let elapsed_s = now.saturating_sub(*last) as f64 / 1000.0;
        *tokens = (tokens.min(rate) + elapsed_s * rate).min(rate);
        *last = (*last).max(now);
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A FIFO queue's calls a second per action: 300, or in high-throughput mode (throughput
/// limit per message group and deduplication per group) the quota of its region.
fn fifo_quota(settings: &QueueSettings, region: &str) -> f64 {
    let high = settings.fifo_throughput_limit == FifoThroughputLimit::PerMessageGroupId
        && settings.deduplication_scope == DeduplicationScope::MessageGroup;
    if !high {
        return 300.0;
    }
    match region {
        "us-east-1" | "us-west-2" | "eu-west-1" => 70_000.0,
        "us-east-2" | "eu-central-1" => 19_000.0,
        _ => 9_000.0,
    }
}

/// splitmix64's finalizer: every input bit moves every output bit, so consecutive sequence
/// numbers land in unrelated partitions.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// FNV-1a: a small, stable hash (the same on every machine and release).
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_polls_return_fewer_than_asked_while_few_wait_and_replay_by_seed() {
        let draws = |seed, visible, n| {
            let mut st = RealismState::new(Realism::aws(), seed, "q", 0, true);
            (0..n)
                .map(|_| st.short_poll_count(visible, 10))
                .collect::<Vec<_>>()
        };
        // 100 waiting, 10 asked: mostly 1 or 2, about 2 on average, 10 almost never.
        let hundred = draws(7, 100, 10_000);
        let mean = hundred.iter().sum::<usize>() as f64 / 10_000.0;
        assert!((1.8..2.2).contains(&mean), "mean {mean}");
        let ones = hundred.iter().filter(|&&n| n == 1).count();
        assert!(
            (3_300..4_100).contains(&ones),
            "{ones} of 10,000 returned one"
        );
        assert!(hundred.iter().all(|&n| (1..=10).contains(&n)));
        assert!(hundred.iter().filter(|&&n| n == 10).count() < 10);
        // 1,000 waiting: the full ten about two times in three.
        let thousand = draws(7, 1_000, 10_000);
        let full = thousand.iter().filter(|&&n| n == 10).count();
        assert!((6_200..7_200).contains(&full), "{full} of 10,000 were full");
        // One waiting: a false empty about one time in five.
        let empty = draws(7, 1, 10_000).iter().filter(|&&n| n == 0).count();
        assert!(
            (1_800..2_200).contains(&empty),
            "{empty} of 10,000 were empty"
        );
        // The same seed replays the same run; another seed does not.
        assert_eq!(draws(42, 100, 200), draws(42, 100, 200));
        assert_ne!(draws(42, 100, 200), draws(43, 100, 200));
    }

    #[test]
    fn specs_parse_and_print() {
        assert!(!Realism::parse("").unwrap().is_on());
        assert_eq!(Realism::parse("aws").unwrap(), Realism::aws());
        let r = Realism::parse("aws,order=off,duplicates=0.5,throttle=20").unwrap();
        assert_eq!(r.order, None);
        assert_eq!(r.duplicates, Some(0.5));
        assert_eq!(r.throttle, Some(Some(20)));
        assert_eq!(Realism::parse(&r.spec()).unwrap(), r);
        assert_eq!(Realism::parse("short_poll").unwrap().short_poll, Some(8));
        assert_eq!(Realism::parse("aws,off").unwrap(), Realism::default());
        for bad in [
            "duplicates=2",
            "order=1",
            "colour",
            "propagation=5",
            "aws=1",
        ] {
            assert!(Realism::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_same_seed_draws_the_same() {
        let draw = |seed| {
            let mut st = RealismState::new(Realism::aws(), seed, "q", 0, true);
            let sample = st.sample_partitions();
            let mut pool: VecDeque<u32> = (1..=20).collect();
            let picked = st.window_pick(&mut pool, 10, 3);
            (sample, picked, st.hidden_until_ms)
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let (sample, picked, _) = draw(7);
        assert_eq!(sample.iter().filter(|s| **s).count(), 4);
        // Best-effort order: the i-th pick is never more than window - 1 places late.
        for (i, v) in picked.iter().enumerate() {
            assert!((*v as usize) <= i + 3, "{picked:?}");
        }
        assert_ne!(picked, (1..=10).collect::<Vec<_>>());
    }

    #[test]
    fn fifo_quotas_refill_with_the_clock() {
        let mut st = RealismState::new(Realism::parse("throttle").unwrap(), 1, "q.fifo", 0, true);
        let fifo = QueueSettings {
            fifo_queue: true,
            ..QueueSettings::default()
        };
        let rate = st
            .quota(&fifo, "us-east-1")
            .expect("FIFO queues have a quota");
        let admitted = (0..400).filter(|_| st.admit(Family::Send, 0, rate)).count();
        assert_eq!(admitted, 300);
        assert!(st.admit(Family::Receive, 0, rate));
        assert!(!st.admit(Family::Send, 0, rate));
        assert!(st.admit(Family::Send, 10, rate)); // 3 calls per 10 ms
                                                   // Standard queues are unlimited unless a rate is given.
        assert_eq!(st.quota(&QueueSettings::default(), "us-east-1"), None);
    }
}
