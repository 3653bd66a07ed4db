//! A cheap, seedable pseudo-random stream (xorshift64) for fault injection, at-least-once
//! redelivery and randomized tests. Not for anything that must be unpredictable.

/// Advances `state` and returns the next number; a zero state is replaced by a fixed seed
/// (xorshift never leaves zero).
pub(crate) fn next(state: &mut u64) -> u64 {
    let mut x = if *state == 0 {
        0x9e37_79b9_7f4a_7c15
    } else {
        *state
    };
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

/// A uniform number in [0, 1), from the next number of `state`.
pub(crate) fn unit(state: &mut u64) -> f64 {
    (next(state) >> 11) as f64 / (1u64 << 53) as f64
}
