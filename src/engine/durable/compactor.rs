//! Durable mode's compactor: a thread that snapshots an engine whose log has grown.

use std::time::Duration;

use crate::engine::journal::change::RECORD_OVERHEAD;
use crate::engine::message::MESSAGE_OVERHEAD;
use crate::engine::Engine;

/// About the bytes a snapshot taken now would hold: its messages' records (the queues'
/// settings and the rest are small beside them).
fn snapshot_estimate(engine: &Engine) -> u64 {
    let (messages, footprint) = engine.stored_size();
    (footprint + messages * RECORD_OVERHEAD).saturating_sub(messages * MESSAGE_OVERHEAD)
}

/// Snapshots the engine whenever its log has grown past `after` bytes and a snapshot would
/// about halve what recovery reads: the last snapshot and the log after it together hold at
/// least twice [`snapshot_estimate`]. Records of messages no longer stored make a log worth
/// compacting; a queue that only grows is not rewritten again and again (its log is its
/// state: a snapshot would read back no faster, and writing one each time the log doubled
/// wrote twice what the log did). Ends when the engine is dropped.
pub(crate) fn spawn_compactor(engine: std::sync::Weak<Engine>, after: u64) {
    let mut retry_at: Option<std::time::Instant> = None;
    let mut wait = CHECK_MIN;
    let mut growth = Growth::default();
    let spawned = std::thread::Builder::new()
        .name("sqsim-compactor".into())
        .spawn(move || loop {
            std::thread::sleep(wait);
            if retry_at.is_some_and(|t| std::time::Instant::now() < t) {
                continue;
            }
            let Some(engine) = engine.upgrade() else {
                return;
            };
            let Some(stats) = engine.journal().store().map(|s| s.stats()) else {
                return;
            };
            let rate = growth.seen(std::time::Instant::now(), stats.log_bytes);
            wait = next_check(stats.log_bytes, after, rate);
            if stats.log_bytes >= after
                && stats.log_bytes + stats.snapshot_bytes >= 2 * snapshot_estimate(&engine)
            {
                let started = std::time::Instant::now();
                match engine.compact() {
                    Ok(()) => {
                        retry_at = None;
                        tracing::debug!(
                            log_bytes = stats.log_bytes,
                            millis = started.elapsed().as_millis() as u64,
                            "snapshot written"
                        );
                    }
                    Err(e) => {
                        retry_at = Some(std::time::Instant::now() + Duration::from_secs(5));
                        tracing::error!(error = %e, "snapshot failed; the log keeps everything; retrying in 5 s");
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the compactor; the log keeps growing");
    }
}

/// How soon the compactor looks again at most (a log past its threshold, or about to be),
/// and at least. Each look is a wake-up of its thread; a cluster node has one compactor per
/// shard it serves (48 by default), and looking every 25 ms at idle shards cost a node
/// 1,900 wake-ups a second and 1.65% of a core doing nothing.
const CHECK_MIN: Duration = Duration::from_millis(25);
const CHECK_MAX: Duration = Duration::from_millis(250);

/// When to look again at a log of `log_bytes` growing `bytes_per_s`: once it may have used
/// half of its room below `after`, within [`CHECK_MIN`] and [`CHECK_MAX`].
fn next_check(log_bytes: u64, after: u64, bytes_per_s: f64) -> Duration {
    let room = after.saturating_sub(log_bytes);
    if room == 0 {
        return CHECK_MIN;
    }
    if bytes_per_s <= 0.0 {
        return CHECK_MAX;
    }
    Duration::from_secs_f64((room as f64 / bytes_per_s / 2.0).min(CHECK_MAX.as_secs_f64()))
        .max(CHECK_MIN)
}

/// How fast a log grew between the compactor's looks. A log that shrank (a snapshot let
/// the store drop it) keeps the last rate: the traffic that filled it goes on.
#[derive(Default)]
struct Growth {
    last: Option<(std::time::Instant, u64)>,
    bytes_per_s: f64,
}

impl Growth {
    /// Takes a look at `log_bytes` at `now`; the rate since the last look.
    fn seen(&mut self, now: std::time::Instant, log_bytes: u64) -> f64 {
        if let Some((then, bytes)) = self.last {
            let secs = now.duration_since(then).as_secs_f64();
            if log_bytes >= bytes && secs > 0.0 {
                self.bytes_per_s = (log_bytes - bytes) as f64 / secs;
            }
        }
        self.last = Some((now, log_bytes));
        self.bytes_per_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_log_is_looked_at_seldom_and_a_growing_one_before_it_passes_its_threshold() {
        let mib = 1 << 20;
        // Idle, or growing slowly: the longest wait.
        assert_eq!(next_check(0, 4 * mib, 0.0), CHECK_MAX);
        assert_eq!(next_check(mib, 4 * mib, 1_000.0), CHECK_MAX);
        // 3 MiB of room at 6 MiB/s: looked at again after a quarter of a second at most,
        // at 60 MiB/s after 25 ms.
        assert_eq!(next_check(mib, 4 * mib, 6.0 * mib as f64), CHECK_MAX);
        assert_eq!(next_check(mib, 4 * mib, 60.0 * mib as f64), CHECK_MIN);
        let between = next_check(mib, 4 * mib, 24.0 * mib as f64);
        assert!(between > CHECK_MIN && between < CHECK_MAX, "{between:?}");
        // Past the threshold: as often as ever.
        assert_eq!(next_check(4 * mib, 4 * mib, 0.0), CHECK_MIN);
        assert_eq!(next_check(9 * mib, 4 * mib, 0.0), CHECK_MIN);
    }

    #[test]
    fn a_log_that_shrank_keeps_the_rate_it_grew_at() {
        let start = std::time::Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut g = Growth::default();
        assert_eq!(g.seen(at(0), 0), 0.0);
        let rate = g.seen(at(20), 1 << 20);
        assert!(rate > 0.0);
        // A snapshot dropped the log: the rate it grew at stays.
        assert_eq!(g.seen(at(25), 100), rate);
        assert!(g.seen(at(30), 200) > 0.0);
    }
}
