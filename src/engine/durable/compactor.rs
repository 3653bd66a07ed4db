//! Durable mode's compactor: a thread that snapshots an engine whose log has grown.

use std::time::Duration;

use crate::engine::durable::change::RECORD_OVERHEAD;
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
    let spawned = std::thread::Builder::new()
        .name("sqsim-compactor".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(25));
            if retry_at.is_some_and(|t| std::time::Instant::now() < t) {
                continue;
            }
            let Some(engine) = engine.upgrade() else {
                return;
            };
            let Some(stats) = engine.journal().store().map(|s| s.stats()) else {
                return;
            };
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
