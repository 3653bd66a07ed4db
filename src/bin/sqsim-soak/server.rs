//! The server under test: a sqsim child started on a free port (in memory, or durable in a
//! temporary data directory) and killed at the end, or an endpoint already running. Also its
//! memory: VmRSS sampled once a second and the rule that decides whether it stayed flat.
//! Nothing here knows about queues or messages.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The settings sqsim reads from the environment: unset for the child, so the soak's flags
/// are the whole story (as `tests/python/sqsim_process.py` does).
const SERVER_ENV: &[&str] = &[
    "SQSIM_CONFIG",
    "SQSIM_HOST",
    "SQSIM_PORT",
    "SQSIM_REGION",
    "SQSIM_ACCOUNT_ID",
    "SQSIM_ADVERTISED_URL",
    "SQSIM_URL_STYLE",
    "SQSIM_AUTH",
    "SQSIM_CREDENTIALS",
    "SQSIM_DATA_DIR",
    "SQSIM_SYNC",
    "SQSIM_SALVAGE",
    "SQSIM_COMPACT_AFTER",
    "SQSIM_METRICS_QUEUE_LIMIT",
    "SQSIM_MAX_CONNECTIONS",
    "SQSIM_READ_TIMEOUT",
    "SQSIM_IDLE_TIMEOUT",
    "SQSIM_MAX_LONG_POLLS",
    "SQSIM_LOG_FORMAT",
    "SQSIM_LOG_LEVEL",
    "SQSIM_COMPAT",
    "SQSIM_INIT_DIR",
    "SQS_ENDPOINT_STRATEGY",
    "LOCALSTACK_HOST",
    "PERSISTENCE",
    "RUST_LOG",
];

/// A sqsim child process; killed (and its data directory removed) when dropped, so a
/// panicking soak leaves nothing behind.
pub(crate) struct Spawned {
    child: Child,
    data_dir: Option<PathBuf>,
}

/// The server the soak drives.
pub(crate) struct Server {
    /// `http://host:port`.
    pub endpoint: String,
    /// Whose VmRSS to sample, when known.
    pub pid: Option<u32>,
    /// The child, when the soak started it.
    child: Option<Spawned>,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = &self.data_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Server {
    /// An endpoint already running (`pid` to sample its memory).
    pub(crate) fn external(endpoint: &str, pid: Option<u32>) -> Server {
        let endpoint = if endpoint.contains("://") {
            endpoint.trim_end_matches('/').to_string()
        } else {
            format!("http://{}", endpoint.trim_end_matches('/'))
        };
        Server {
            endpoint,
            pid,
            child: None,
        }
    }

    /// Starts `bin` on 127.0.0.1 and a free port (`--port 0`; sqsim prints
    /// `sqsim listening on http://…` as its first stdout line), durable in a fresh temporary
    /// directory when `durable`.
    pub(crate) fn spawn(bin: &Path, durable: bool) -> Result<Server, String> {
        let mut cmd = Command::new(bin);
        cmd.args(["--host", "127.0.0.1", "--port", "0", "--log-level", "warn"]);
        for k in SERVER_ENV {
            cmd.env_remove(k);
        }
        let data_dir = durable
            .then(|| std::env::temp_dir().join(format!("sqsim-soak-{}", std::process::id())));
        if let Some(d) = &data_dir {
            let _ = std::fs::remove_dir_all(d);
            // fsync is sqsim's default and its strongest promise: the one worth soaking.
            cmd.arg("--data-dir").arg(d).args(["--sync", "fsync"]);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let pid = child.id();
        let stdout = child.stdout.take();
        // Owned from here on, so an early return still kills it.
        let guard = Spawned { child, data_dir };
        let mut reader = BufReader::new(stdout.ok_or("no stdout")?);
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .map_err(|e| format!("reading sqsim's stdout: {e}"))?;
        let endpoint = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .ok_or_else(|| format!("sqsim did not print its address (got {line:?})"))?
            .to_string();
        // Whatever sqsim prints later must not fill the pipe and block it.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = reader.read_to_end(&mut sink);
        });
        Ok(Server {
            endpoint,
            pid: Some(pid),
            child: Some(guard),
        })
    }

    /// How the child ended, if it is no longer running (a crash during the soak).
    pub(crate) fn exited(&mut self) -> Option<String> {
        let c = self.child.as_mut()?;
        c.child.try_wait().ok().flatten().map(|s| s.to_string())
    }
}

/// Samples of VmRSS, one a second from the start of traffic.
#[derive(Debug, Default, Clone)]
pub(crate) struct RssSamples {
    /// (seconds since traffic started, KiB).
    pub samples: Vec<(f64, u64)>,
}

/// The verdict on the samples of a run that lasted `seconds` of traffic.
#[derive(Debug, Clone)]
pub(crate) struct RssVerdict {
    /// Min and max over the steady part, MiB.
    pub min_mib: f64,
    pub max_mib: f64,
    /// Seconds from the first to the last steady sample.
    pub window_s: f64,
    /// Least-squares slope of RSS over the steady samples, KiB per second.
    pub slope_kib_s: f64,
    /// The most `slope_kib_s` may be.
    pub limit_kib_s: f64,
    pub flat: bool,
}

/// The steady growth allowed, KiB/s. A leak grows with traffic: at the soak's rates
/// (about 400 messages and 1,500 requests a second against the debug build, several times
/// that against release) 50 KiB/s is a leak of some tens of bytes per message, or of a few
/// bytes per request, which the steady part of a ten-minute run (270 s, 13 MiB at this
/// rate) shows plainly. A healthy server's slope is what remains once the deduplication
/// window is over (see [`DEDUP_SETTLE_S`]): a few KiB/s around zero.
const RSS_SLOPE_MAX_KIB_S: f64 = 50.0;
/// Growth allowed over a steady window too short for its slope to mean much (allocator
/// arenas, the connection pool and buffers settle in steps of a few MiB): the slope may
/// reach this much over the window, which binds for windows under 16 MiB / 50 KiB/s ≈
/// 330 s. A 20 s run thus only catches gross growth (about 1 MiB/s).
const RSS_SHORT_CAP_MIB: f64 = 16.0;
/// FIFO queues remember every MessageDeduplicationId for 5 minutes (as AWS does), about
/// 0.2 KiB each: RSS legitimately climbs for the first 5 minutes of traffic in proportion
/// to the FIFO send rate (about 25 KiB/s against the debug build), then levels off. A run
/// of [`DEDUP_SETTLE_MIN_RUN_S`] or more counts its steady part from here on.
const DEDUP_SETTLE_S: f64 = 330.0;
/// The shortest run whose steady part starts after the deduplication window: 450 s leaves
/// at least two minutes; the ten-minute run's steady part is 330–600 s. Shorter runs
/// include the climb, which their cap (at least 16 MiB over the window) allows.
const DEDUP_SETTLE_MIN_RUN_S: f64 = 450.0;

impl RssSamples {
    /// The flatness rule. Warm-up is the first quarter of the traffic (at least 5 s), while
    /// backlogs fill up to the producers' bound, and in runs of 450 s or more the
    /// deduplication window too ([`DEDUP_SETTLE_S`]); the rest is steady. A least-squares line
    /// through the steady samples is robust to the sawtooth of allocation and release; its
    /// slope must stay at most [`RSS_SLOPE_MAX_KIB_S`], or, for a short window, must not
    /// amount to more than [`RSS_SHORT_CAP_MIB`] over it. `None` with fewer than three
    /// steady samples.
    pub(crate) fn verdict(&self, seconds: f64) -> Option<RssVerdict> {
        let mut warm = (seconds / 4.0).max(5.0);
        if seconds >= DEDUP_SETTLE_MIN_RUN_S {
            warm = warm.max(DEDUP_SETTLE_S);
        }
        let steady: Vec<(f64, f64)> = self
            .samples
            .iter()
            .filter(|(t, _)| *t >= warm)
            .map(|&(t, k)| (t, k as f64))
            .collect();
        if steady.len() < 3 {
            return None;
        }
        let n = steady.len() as f64;
        let mean_t = steady.iter().map(|s| s.0).sum::<f64>() / n;
        let mean_k = steady.iter().map(|s| s.1).sum::<f64>() / n;
        let (mut cov, mut var) = (0.0, 0.0);
        for &(t, k) in &steady {
            cov += (t - mean_t) * (k - mean_k);
            var += (t - mean_t) * (t - mean_t);
        }
        let slope = if var > 0.0 { cov / var } else { 0.0 };
        let window = steady[steady.len() - 1].0 - steady[0].0;
        let limit = RSS_SLOPE_MAX_KIB_S.max(RSS_SHORT_CAP_MIB * 1024.0 / window.max(1.0));
        let mib = |k: f64| k / 1024.0;
        Some(RssVerdict {
            min_mib: mib(steady.iter().map(|s| s.1).fold(f64::MAX, f64::min)),
            max_mib: mib(steady.iter().map(|s| s.1).fold(0.0, f64::max)),
            window_s: window,
            slope_kib_s: slope,
            limit_kib_s: limit,
            flat: slope <= limit,
        })
    }
}

/// Samples `pid`'s VmRSS every second into `into` until `stop` turns true.
pub(crate) async fn sample_rss(
    pid: u32,
    into: std::sync::Arc<std::sync::Mutex<RssSamples>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let start = std::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        tick.tick().await;
        if let Some(kib) = crate::rss::rss_kib(pid) {
            if let Ok(mut s) = into.lock() {
                s.samples.push((start.elapsed().as_secs_f64(), kib));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RssSamples;

    fn run(f: impl Fn(f64) -> f64, seconds: u32) -> RssSamples {
        RssSamples {
            samples: (0..seconds)
                .map(|t| (t as f64, f(t as f64) as u64))
                .collect(),
        }
    }

    #[test]
    fn a_sawtooth_is_flat_and_a_steady_leak_is_not() {
        // 200 MiB with a 6 MiB sawtooth of period 37 s, ten minutes long.
        let saw = |t: f64| 200.0 * 1024.0 + (t % 37.0) / 37.0 * 6.0 * 1024.0;
        let v = run(saw, 600).verdict(600.0).expect("enough samples");
        assert!(v.flat && v.slope_kib_s.abs() < 5.0, "{v:?}");
        // The same plus 80 KiB/s: 35 MiB over the steady window.
        let v = run(|t| saw(t) + 80.0 * t, 600)
            .verdict(600.0)
            .expect("enough");
        assert!(!v.flat && (v.slope_kib_s - 80.0).abs() < 5.0, "{v:?}");
    }

    #[test]
    fn a_short_run_only_fails_on_gross_growth() {
        // A 4 MiB step in a 20 s run passes; 2 MiB a second does not.
        let step = |t: f64| if t < 12.0 { 100.0 } else { 104.0 } * 1024.0;
        assert!(run(step, 20).verdict(20.0).expect("enough").flat);
        let v = run(|t| 100.0 * 1024.0 + 2048.0 * t, 20).verdict(20.0);
        assert!(!v.expect("enough").flat);
        assert!(run(step, 6).verdict(6.0).is_none());
    }
}
