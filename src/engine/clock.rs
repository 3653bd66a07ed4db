//! The one place that reads the system time. Everything in the engine asks a [`Clock`] for
//! "now" in epoch milliseconds, so tests and the admin API can move time forward or freeze it.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Sentinel for "not frozen" in [`Clock::frozen_at`].
const NOT_FROZEN: u64 = u64::MAX;

/// A monotonic wall clock in epoch milliseconds that can be advanced and frozen.
///
/// It starts at the system time and then follows a monotonic [`Instant`], so a system clock
/// step never makes message timers run backwards.
#[derive(Debug)]
pub struct Clock {
    origin: Instant,
    origin_epoch_ms: u64,
    /// Virtual time added to the real elapsed time; negative after an unfreeze that took back
    /// the real time that passed while frozen.
    offset_ms: AtomicI64,
    /// The reading while frozen, or [`NOT_FROZEN`].
    frozen_at: AtomicU64,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock that starts at the current system time.
    pub fn new() -> Self {
        let epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Self::starting_at(epoch)
    }

    /// A clock that starts at `epoch_ms` and then runs in real time.
    pub fn starting_at(epoch_ms: u64) -> Self {
        Clock {
            origin: Instant::now(),
            origin_epoch_ms: epoch_ms,
            offset_ms: AtomicI64::new(0),
            frozen_at: AtomicU64::new(NOT_FROZEN),
        }
    }

    fn running_now(&self) -> u64 {
        let real = self.origin_epoch_ms as i64 + self.origin.elapsed().as_millis() as i64;
        real.saturating_add(self.offset_ms.load(Ordering::Acquire))
            .max(0) as u64
    }

    /// The current time in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        match self.frozen_at.load(Ordering::Acquire) {
            NOT_FROZEN => self.running_now(),
            frozen => frozen,
        }
    }

    /// Moves the clock forward by `by` (also while frozen).
    pub fn advance(&self, by: Duration) {
        let ms = by.as_millis() as u64;
        self.offset_ms.fetch_add(ms as i64, Ordering::AcqRel);
        let _ = self
            .frozen_at
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |f| {
                (f != NOT_FROZEN).then(|| f + ms)
            });
    }

    /// Stops the clock at its current reading until [`Clock::unfreeze`].
    pub fn freeze(&self) {
        let now = self.running_now();
        let _ =
            self.frozen_at
                .compare_exchange(NOT_FROZEN, now, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Lets the clock run again from the reading it was frozen at.
    pub fn unfreeze(&self) {
        let frozen = self.frozen_at.load(Ordering::Acquire);
        if frozen == NOT_FROZEN {
            return;
        }
        let running = self.running_now();
        self.offset_ms
            .fetch_add(frozen as i64 - running as i64, Ordering::AcqRel);
        self.frozen_at.store(NOT_FROZEN, Ordering::Release);
    }

    /// Whether the clock is frozen.
    pub fn is_frozen(&self) -> bool {
        self.frozen_at.load(Ordering::Acquire) != NOT_FROZEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_and_freeze() {
        let c = Clock::starting_at(1_000_000);
        let t0 = c.now_ms();
        c.advance(Duration::from_secs(30));
        assert!(c.now_ms() >= t0 + 30_000);
        c.freeze();
        let f = c.now_ms();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(c.now_ms(), f);
        c.advance(Duration::from_secs(1));
        assert_eq!(c.now_ms(), f + 1000);
        c.unfreeze();
        assert!(c.now_ms() >= f + 1000);
        assert!(c.now_ms() < f + 2000);
    }

    #[test]
    fn unfreezing_after_real_time_passed_continues_from_the_frozen_reading() {
        let c = Clock::starting_at(1_000_000);
        c.freeze();
        let f = c.now_ms();
        std::thread::sleep(Duration::from_millis(30));
        c.unfreeze();
        let now = c.now_ms();
        assert!(now >= f && now < f + 25, "{f} -> {now}");
        c.advance(Duration::from_secs(1));
        assert!(c.now_ms() >= f + 1000);
    }
}
