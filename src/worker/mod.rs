//! `sqsim worker`: pushes messages from SQS queues to an HTTP application the way Elastic
//! Beanstalk's `sqsd` does, plus what good consumers add: a visibility heartbeat for long jobs,
//! bounded concurrency, retry delays with backoff, weighted priority across queues and a
//! graceful shutdown that hands unfinished messages back at once. It uses only the public SQS
//! API, so it works against sqsim or any SQS endpoint.

// The runner and its command need an SQS client (feature `worker`); the settings and
// counters below are plain data, read from config files and shown in `/_sqsim/stats`
// either way.
#[cfg(feature = "worker")]
pub mod cli;
pub mod cron;
#[cfg(feature = "worker")]
pub mod deliver;
#[cfg(feature = "worker")]
mod pump;

#[cfg(feature = "worker")]
use pump::queue_name;
#[cfg(feature = "worker")]
pub use pump::run;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The longest a message can stay invisible after one receive.
pub(crate) const VISIBILITY_CAP: Duration = Duration::from_secs(43_200);

/// How retry delays grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backoff {
    /// The same delay every time.
    #[default]
    Fixed,
    /// Doubling with each receive, capped, with jitter.
    Exponential,
}

impl Backoff {
    /// `fixed` or `exponential`, as the flag and the config file spell them.
    pub fn parse(s: &str) -> Option<Backoff> {
        match s {
            "fixed" => Some(Backoff::Fixed),
            "exponential" => Some(Backoff::Exponential),
            _ => None,
        }
    }
}

/// The longest wait a flag or the config file can set (a year): later deadlines are added to
/// `Instant`s, which must not overflow.
const MAX_SECS: f64 = 365.0 * 86_400.0;

/// Seconds as given in flags and the config file: negative or NaN means zero, anything above
/// a year (infinity included) means a year.
pub fn secs(s: f64) -> Duration {
    if s.is_nan() {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(s.clamp(0.0, MAX_SECS))
}

/// One queue to read, with its share of receives.
#[derive(Debug, Clone)]
pub struct WorkerQueue {
    pub url: String,
    pub weight: u32,
}

/// Everything the worker is told; names follow Elastic Beanstalk's worker settings.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub queues: Vec<WorkerQueue>,
    /// Where to POST, e.g. `http://localhost:8080/`.
    pub http_url: String,
    /// Most POSTs in flight at once.
    pub http_connections: usize,
    pub connect_timeout: Duration,
    /// How long the application may take to answer.
    pub inactivity_timeout: Duration,
    /// Visibility timeout of received messages (seconds), kept up by the heartbeat.
    pub visibility_timeout: u32,
    /// After a failure, hide the message this long (seconds) instead of letting its
    /// visibility timeout run out.
    pub error_visibility_timeout: Option<u32>,
    pub mime_type: String,
    /// Base retry delay (seconds) after a failure; wins over the error visibility timeout.
    pub retry_delay: Option<u32>,
    pub retry_backoff: Backoff,
    /// Longest retry delay (seconds).
    pub retry_max_delay: u32,
    /// How long in-flight POSTs may finish after a shutdown request.
    pub shutdown_timeout: Duration,
    /// Long-poll wait (seconds) when reading a single queue.
    pub wait_time: i32,
    /// Periodic tasks (from a `cron.yaml`).
    pub cron: Vec<cron::CronTask>,
    /// Messages per POST; more than 1 turns on batch delivery (see the `batch` module).
    pub batch_size: usize,
    /// How long a batch may wait to fill after its first message.
    pub batch_window: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            queues: Vec::new(),
            http_url: "http://localhost:8080/".into(),
            http_connections: 50,
            connect_timeout: Duration::from_secs(5),
            inactivity_timeout: Duration::from_secs(299),
            visibility_timeout: 300,
            error_visibility_timeout: None,
            mime_type: "application/json".into(),
            retry_delay: None,
            retry_backoff: Backoff::Fixed,
            retry_max_delay: 900,
            shutdown_timeout: Duration::from_secs(30),
            wait_time: 20,
            cron: Vec::new(),
            batch_size: 1,
            batch_window: Duration::from_secs(1),
        }
    }
}

/// What the worker has done so far.
#[derive(Debug, Default)]
pub struct WorkerStats {
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    pub retried: AtomicU64,
    pub in_flight: AtomicU64,
    pub released: AtomicU64,
}

impl WorkerStats {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The delay before a failed message is tried again, if any.
pub fn retry_delay(
    opts: &WorkerOptions,
    receive_count: u32,
    retry_after: Option<u32>,
    jitter: f64,
) -> Option<u32> {
    if let Some(s) = retry_after {
        return Some(s.min(VISIBILITY_CAP.as_secs() as u32));
    }
    match opts.retry_delay {
        Some(base) => {
            let delay = match opts.retry_backoff {
                Backoff::Fixed => base,
                Backoff::Exponential => {
                    let exp = receive_count.saturating_sub(1).min(20);
                    let full = (base as u64)
                        .saturating_mul(1 << exp)
                        .min(opts.retry_max_delay as u64);
                    // Jitter in [full/2, full]: retries of many messages spread out.
                    (full as f64 * (0.5 + 0.5 * jitter)).round() as u32
                }
            };
            Some(delay.min(opts.retry_max_delay))
        }
        None => opts.error_visibility_timeout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_from_flags_never_panic() {
        assert_eq!(secs(f64::NAN), Duration::ZERO);
        assert_eq!(secs(-3.0), Duration::ZERO);
        assert_eq!(secs(1.5), Duration::from_millis(1500));
        assert_eq!(secs(f64::INFINITY), secs(1e300));
        assert!(std::time::Instant::now().checked_add(secs(1e300)).is_some());
    }

    #[test]
    fn retry_delays() {
        let mut o = WorkerOptions {
            error_visibility_timeout: Some(30),
            ..WorkerOptions::default()
        };
        assert_eq!(retry_delay(&o, 3, None, 0.5), Some(30));
        assert_eq!(
            retry_delay(&o, 3, Some(7), 0.5),
            Some(7),
            "Retry-After wins"
        );
        o.retry_delay = Some(10);
        assert_eq!(retry_delay(&o, 3, None, 0.5), Some(10));
        o.retry_backoff = Backoff::Exponential;
        assert_eq!(retry_delay(&o, 1, None, 1.0), Some(10));
        assert_eq!(retry_delay(&o, 3, None, 1.0), Some(40));
        assert_eq!(retry_delay(&o, 3, None, 0.0), Some(20));
        assert_eq!(retry_delay(&o, 30, None, 1.0), Some(900), "capped");
        o.retry_delay = None;
        o.error_visibility_timeout = None;
        assert_eq!(retry_delay(&o, 1, None, 0.5), None);
    }
}
