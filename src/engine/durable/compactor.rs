//! Durable mode's compactor: a thread that snapshots an engine whose log has grown.

use std::time::Duration;

use crate::engine::Engine;

/// Snapshots the engine whenever its log has grown past `after` bytes and past the last
/// snapshot's size (so the snapshots written stay at most about as large as the log they
/// replace). Ends when the engine is dropped.
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
            if stats.log_bytes >= after.max(stats.snapshot_bytes) {
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
