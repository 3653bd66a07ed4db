//! The switch for sqsim's two hand-written SIMD paths: MD5 of a batch in vector lanes
//! (`engine::md5_lanes`) and the form scanner (`protocol::form`). Both are on unless the
//! environment variable `SQSIM_NO_SIMD` names them (`md5`, `form`, or `all`, comma
//! separated). Replies are identical either way; the switch exists so that `make bench`'s
//! ablation can measure what each path buys, in the same run (see `docs/unsafe.md`).

use std::sync::OnceLock;

/// One of the hand-written SIMD paths.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Simd {
    /// Several MD5 digests at once, one per AVX2 vector lane.
    Md5Lanes,
    /// Finding `&`, `=`, `%` and `+` sixteen bytes at a time (SSE2).
    FormScan,
}

/// Whether `which` may be used (read from the environment once).
pub(crate) fn enabled(which: Simd) -> bool {
    static OFF: OnceLock<(bool, bool)> = OnceLock::new();
    let (md5_off, form_off) = *OFF.get_or_init(|| {
        let v = std::env::var("SQSIM_NO_SIMD").unwrap_or_default();
        let named = |n: &str| v.split(',').any(|p| p.trim() == n || p.trim() == "all");
        (named("md5"), named("form"))
    });
    match which {
        Simd::Md5Lanes => !md5_off,
        Simd::FormScan => !form_off,
    }
}
