//! The one place that reads the system time. Everything in the engine asks a [`Clock`] for
//! "now" in epoch milliseconds, so tests and the admin API can move time forward or freeze it.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The latest reading a clock can reach: 9999-12-31T23:59:59.999Z, the last instant that the
/// ISO 8601 timestamps sqsim writes can express. Advancing stops (or is refused) there.
pub const MAX_EPOCH_MS: u64 = 253_402_300_799_999;

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

    /// Moves the clock forward by `by` (also while frozen), stopping at [`MAX_EPOCH_MS`].
    pub fn advance(&self, by: Duration) {
        let room = MAX_EPOCH_MS.saturating_sub(self.now_ms());
        self.advance_ms(u64::try_from(by.as_millis()).unwrap_or(u64::MAX).min(room));
    }

    /// Moves the clock forward by `by`, or leaves it unchanged and returns false when that
    /// would pass [`MAX_EPOCH_MS`].
    pub fn try_advance(&self, by: Duration) -> bool {
        let room = MAX_EPOCH_MS.saturating_sub(self.now_ms());
        match u64::try_from(by.as_millis()) {
            Ok(ms) if ms <= room => {
                self.advance_ms(ms);
                true
            }
            _ => false,
        }
    }

    /// `ms` is at most the room left below [`MAX_EPOCH_MS`], so neither sum can overflow.
    fn advance_ms(&self, ms: u64) {
        self.offset_ms.fetch_add(ms as i64, Ordering::AcqRel);
        let _ = self
            .frozen_at
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |f| {
                (f != NOT_FROZEN).then(|| f.saturating_add(ms).min(MAX_EPOCH_MS))
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

    /// What a restart must keep: the virtual time added to real time, and the reading it is
    /// frozen at, if frozen.
    pub(crate) fn virtual_state(&self) -> (i64, Option<u64>) {
        let frozen = self.frozen_at.load(Ordering::Acquire);
        (
            self.offset_ms.load(Ordering::Acquire),
            (frozen != NOT_FROZEN).then_some(frozen),
        )
    }

    /// Puts back what [`Clock::virtual_state`] returned before a restart.
    pub(crate) fn restore_virtual(&self, offset_ms: i64, frozen_at: Option<u64>) {
        self.offset_ms.store(offset_ms, Ordering::Release);
        self.frozen_at
            .store(frozen_at.unwrap_or(NOT_FROZEN), Ordering::Release);
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
    fn advancing_stops_at_the_latest_reading() {
        let c = Clock::starting_at(1_000_000);
        let before = c.now_ms();
        assert!(!c.try_advance(Duration::from_secs(u64::MAX)));
        assert!(!c.try_advance(Duration::from_millis(MAX_EPOCH_MS)));
        assert!(c.now_ms() >= before && c.now_ms() < before + 1000);
        c.freeze();
        assert!(c.try_advance(Duration::from_millis(MAX_EPOCH_MS - c.now_ms())));
        assert_eq!(c.now_ms(), MAX_EPOCH_MS);
        c.advance(Duration::MAX);
        assert_eq!(c.now_ms(), MAX_EPOCH_MS);
        c.unfreeze();
        assert!(c.now_ms() <= MAX_EPOCH_MS);
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
