//! Deterministic crash points for the crash tests: `SQSIM_CRASH_AT=<point>[:<n>]` makes the
//! process abort (no destructor, no flush: what `kill -9` leaves) the `n`th time (default the
//! first) it reaches `<point>`, so a test can stop sqsim between any two steps of creating a
//! segment or publishing a snapshot instead of hoping a random kill lands there. Unset (every
//! real run), a point costs one load of a flag.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The point to crash at and after how many passes, from the environment (read once).
fn target() -> Option<&'static (String, u64)> {
    static TARGET: OnceLock<Option<(String, u64)>> = OnceLock::new();
    TARGET
        .get_or_init(|| {
            let v = std::env::var("SQSIM_CRASH_AT").ok()?;
            let (name, n) = match v.split_once(':') {
                Some((name, n)) => (name.to_string(), n.parse().ok()?),
                None => (v, 1),
            };
            Some((name, n))
        })
        .as_ref()
}

/// Aborts the process if this is the point (and pass) `SQSIM_CRASH_AT` names.
pub(crate) fn reached(point: &str) {
    static PASSES: AtomicU64 = AtomicU64::new(0);
    if let Some((name, n)) = target() {
        if name == point && PASSES.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            eprintln!("sqsim: crash point {point} reached (SQSIM_CRASH_AT): aborting");
            std::process::abort();
        }
    }
}
