//! The memory the process holds for its clients, as `--max-stored-bytes` counts it:
//! messages, FIFO groups, deduplication and receive-attempt memory, and queues with their
//! settings and tags — each charged at what it really costs in the heap, not at its size on
//! the wire (ten one-byte attributes take ten times more than they weigh).
//!
//! The costs are measured, not guessed: `make bench`'s memory scenarios and
//! `tests/python/test_memory_limit.py` fill a capped server with each shape (small
//! attributes, long FIFO ids, dedup entries of deleted messages, queues with tags and a
//! policy) and check the RSS it grows stays within the budget docs/reliability.md states.
//!
//! Process-wide, because memory is (cluster mode runs one engine per shard in one process).
//! Kept in stripes, one per thread slot, so the runtime's threads never fight over one
//! cache line on every message; a stripe may go below zero (charged on one thread, released
//! on another), the sum never does.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

const STRIPES: usize = 16;

#[repr(align(128))]
struct Stripe(AtomicI64);

static HELD: [Stripe; STRIPES] = [const { Stripe(AtomicI64::new(0)) }; STRIPES];

/// This thread's stripe.
fn stripe() -> &'static AtomicI64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static SLOT: usize = (NEXT.fetch_add(1, Ordering::Relaxed) as usize) % STRIPES;
    }
    &HELD[SLOT.with(|s| *s)].0
}

/// Counts `bytes` more as held.
pub(crate) fn charge(bytes: u64) {
    stripe().fetch_add(bytes as i64, Ordering::Relaxed);
}

/// Counts `bytes` fewer as held.
pub(crate) fn release(bytes: u64) {
    stripe().fetch_sub(bytes as i64, Ordering::Relaxed);
}

/// Bytes held now, over every queue of the process.
pub(crate) fn held() -> u64 {
    let sum: i64 = HELD.iter().map(|s| s.0.load(Ordering::Relaxed)).sum();
    sum.max(0) as u64
}

/// What the allocator hands out for a request of `len` bytes (0: none): size classes of
/// 16 bytes at least, rounded up to 16 (mimalloc's small classes; larger ones round to
/// an eighth of their power of two, which this stays near enough to).
pub(crate) fn heap(len: usize) -> u64 {
    match len {
        0 => 0,
        n => (n.max(16) as u64).div_ceil(16) * 16,
    }
}

/// A charge held for as long as this value lives, resized as what it stands for changes:
/// a queue's settings and tags, a FIFO queue's groups and deduplication memory. Dropping
/// it (the queue is gone) gives it all back.
#[derive(Debug, Default)]
pub(crate) struct Held(u64);

impl Held {
    /// Now holds `bytes`.
    pub(crate) fn set(&mut self, bytes: u64) {
        if bytes > self.0 {
            charge(bytes - self.0);
        } else {
            release(self.0 - bytes);
        }
        self.0 = bytes;
    }

    /// Holds `bytes` more.
    pub(crate) fn add(&mut self, bytes: u64) {
        self.set(self.0 + bytes);
    }

    /// Holds `bytes` fewer.
    pub(crate) fn sub(&mut self, bytes: u64) {
        self.set(self.0.saturating_sub(bytes));
    }

    /// What it holds.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.0
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        release(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_rounds_to_allocator_classes() {
        assert_eq!(heap(0), 0);
        assert_eq!(heap(1), 16);
        assert_eq!(heap(16), 16);
        assert_eq!(heap(17), 32);
        assert_eq!(heap(128), 128);
    }

    #[test]
    fn a_held_charge_follows_its_value_and_goes_with_it() {
        // Other tests charge the same counter: compare differences on this thread only.
        let before = stripe().load(Ordering::Relaxed);
        let mut h = Held::default();
        h.set(100);
        h.add(50);
        h.sub(30);
        assert_eq!(h.bytes(), 120);
        assert_eq!(stripe().load(Ordering::Relaxed) - before, 120);
        drop(h);
        assert_eq!(stripe().load(Ordering::Relaxed), before);
    }
}
