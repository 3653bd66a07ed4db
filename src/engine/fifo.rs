//! FIFO queue state beside the message store: message groups in send order with the
//! round-robin of groups ready to serve, the 5-minute deduplication cache, receive-attempt
//! memory for retried receives, and sequence numbers.
//!
//! A group is ready when its oldest message is visible. A receive serves a ready group from its
//! head until it meets a message that is not visible, so nothing behind an in-flight message is
//! delivered and a group's order is never broken.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use super::ids::MessageKey;
use super::memory::{heap, Held};

/// How long a deduplication id and a receive attempt id are remembered.
pub(crate) const DEDUP_WINDOW_MS: u64 = 5 * 60 * 1000;

#[derive(Debug, Default)]
struct Group {
    /// Every stored message of the group, oldest first.
    keys: BTreeSet<MessageKey>,
    in_ready: bool,
}

/// What a duplicate send returns: the original's identity.
#[derive(Debug, Clone)]
pub(crate) struct Original {
    pub message_id: uuid::Uuid,
    pub sequence_number: String,
}

/// A receive that may be retried with the same ReceiveRequestAttemptId.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub expires_ms: u64,
    /// Each message with the receive number that attempt gave it.
    pub messages: Vec<(MessageKey, u32)>,
}

/// FIFO bookkeeping of one queue.
#[derive(Debug, Default)]
pub(crate) struct FifoIndex {
    groups: HashMap<Arc<str>, Group>,
    ready: VecDeque<Arc<str>>,
    dedup: HashMap<String, (u64, Original)>,
    dedup_order: VecDeque<(u64, String)>,
    attempts: HashMap<String, Attempt>,
    attempt_order: VecDeque<(u64, String)>,
    last_sequence: u128,
    /// What its groups and its deduplication and attempt memory hold (`--max-stored-bytes`).
    held: Held,
}

/// What a group costs beyond its name: its map entry, its name's shared pointer, the first
/// node of its key set and its place in the ready rotation (measured with one message per
/// group and 128-character ids; see [`super::memory`]).
const GROUP_OVERHEAD: u64 = 320;

/// What a remembered deduplication id costs beyond its two copies of the id: the map entry
/// with the original's id and sequence number, and its place in the expiry order.
const DEDUP_OVERHEAD: u64 = 224;

/// What a remembered receive attempt costs beyond its id (twice) and its messages.
const ATTEMPT_OVERHEAD: u64 = 160;

/// The memory a FIFO group named `name` holds in the index.
pub(crate) fn group_footprint(name: &str) -> u64 {
    GROUP_OVERHEAD + heap(name.len() + 16)
}

/// The memory a remembered deduplication id holds in the index.
pub(crate) fn dedup_footprint(key: &str) -> u64 {
    DEDUP_OVERHEAD + 2 * heap(key.len()) + heap(40)
}

fn attempt_footprint(id: &str, messages: usize) -> u64 {
    ATTEMPT_OVERHEAD
        + 2 * heap(id.len())
        + heap(messages * std::mem::size_of::<(MessageKey, u32)>())
}

impl FifoIndex {
    /// A stored message joins its group.
    pub(crate) fn insert(&mut self, key: MessageKey, group: &Arc<str>) {
        let entry = self.groups.entry(Arc::clone(group));
        if matches!(entry, std::collections::hash_map::Entry::Vacant(_)) {
            self.held.add(group_footprint(group));
        }
        entry.or_default().keys.insert(key);
    }

    /// Marks the group ready if `is_visible` says its head is receivable.
    pub(crate) fn refresh(&mut self, group: &Arc<str>, is_visible: impl Fn(&MessageKey) -> bool) {
        let Some(g) = self.groups.get_mut(group) else {
            return;
        };
        if g.in_ready {
            return;
        }
        if g.keys.first().is_some_and(is_visible) {
            g.in_ready = true;
            self.ready.push_back(Arc::clone(group));
        }
    }

    /// A message left the queue.
    pub(crate) fn remove(&mut self, key: &MessageKey, group: &Arc<str>) {
        if let Some(g) = self.groups.get_mut(group) {
            g.keys.remove(key);
            if g.keys.is_empty() && !g.in_ready {
                self.groups.remove(group);
                self.held.sub(group_footprint(group));
            }
        }
    }

    /// Picks up to `n` messages: whole runs of visible messages from the heads of ready
    /// groups, one group after another in rotation.
    pub(crate) fn take(
        &mut self,
        n: usize,
        is_visible: impl Fn(&MessageKey) -> bool,
    ) -> Vec<MessageKey> {
        let mut out = Vec::new();
        while out.len() < n {
            let Some(name) = self.ready.pop_front() else {
                break;
            };
            let Some(g) = self.groups.get_mut(&name) else {
                continue;
            };
            g.in_ready = false;
            for k in &g.keys {
                if out.len() == n || !is_visible(k) {
                    break;
                }
                out.push(*k);
            }
            if g.keys.is_empty() {
                self.groups.remove(&name);
                self.held.sub(group_footprint(&name));
            }
        }
        out
    }

    /// The next sequence number: strictly increasing, large, not consecutive across time.
    pub(crate) fn next_sequence(&mut self, now_ms: u64) -> String {
        let candidate = (now_ms as u128) << 24;
        self.last_sequence = candidate.max(self.last_sequence + 1);
        self.last_sequence.to_string()
    }

    /// The original of a duplicate sent within the window, if any.
    pub(crate) fn duplicate_of(&mut self, dedup_key: &str, now_ms: u64) -> Option<Original> {
        while let Some((expires, key)) = self.dedup_order.front() {
            if *expires > now_ms {
                break;
            }
            if self.dedup.get(key).is_some_and(|(e, _)| e == expires) {
                self.dedup.remove(key);
            }
            self.held.sub(dedup_footprint(key));
            self.dedup_order.pop_front();
        }
        self.dedup.get(dedup_key).map(|(_, o)| o.clone())
    }

    /// Remembers a sent message's deduplication key for the window.
    pub(crate) fn remember(&mut self, dedup_key: String, original: Original, now_ms: u64) {
        let expires = now_ms + DEDUP_WINDOW_MS;
        self.held.add(dedup_footprint(&dedup_key));
        self.dedup_order.push_back((expires, dedup_key.clone()));
        self.dedup.insert(dedup_key, (expires, original));
    }

    /// A remembered, unexpired receive attempt.
    pub(crate) fn attempt(&mut self, id: &str, now_ms: u64) -> Option<Attempt> {
        while let Some((expires, key)) = self.attempt_order.front() {
            if *expires > now_ms {
                break;
            }
            if let Some(a) = self.attempts.get(key).filter(|a| a.expires_ms == *expires) {
                self.held.sub(attempt_footprint(key, a.messages.len()));
                self.attempts.remove(key);
            }
            self.attempt_order.pop_front();
        }
        self.attempts.get(id).cloned()
    }

    /// Remembers what a receive attempt returned.
    pub(crate) fn remember_attempt(
        &mut self,
        id: String,
        messages: Vec<(MessageKey, u32)>,
        now_ms: u64,
    ) {
        let expires_ms = now_ms + DEDUP_WINDOW_MS;
        self.held.add(attempt_footprint(&id, messages.len()));
        self.attempt_order.push_back((expires_ms, id.clone()));
        let replaced = self.attempts.insert(
            id.clone(),
            Attempt {
                expires_ms,
                messages,
            },
        );
        if let Some(old) = replaced {
            self.held.sub(attempt_footprint(&id, old.messages.len()));
        }
    }

    /// Remembered deduplication keys: (key, when the memory expires, the original).
    pub(crate) fn dedup_entries(&self) -> impl Iterator<Item = (&str, u64, &Original)> {
        self.dedup.iter().map(|(k, (e, o))| (k.as_str(), *e, o))
    }

    /// Remembered receive attempts.
    pub(crate) fn attempt_entries(&self) -> impl Iterator<Item = (&str, &Attempt)> {
        self.attempts.iter().map(|(k, a)| (k.as_str(), a))
    }

    /// The last sequence number handed out.
    pub(crate) fn last_sequence(&self) -> u128 {
        self.last_sequence
    }

    /// Makes later sequence numbers larger than `n` (one handed out before a restart).
    pub(crate) fn observe_sequence(&mut self, n: u128) {
        self.last_sequence = self.last_sequence.max(n);
    }

    /// Forgets messages, groups and the deduplication cache (purge). Sequence numbers keep
    /// increasing.
    pub(crate) fn clear(&mut self) {
        let last_sequence = self.last_sequence;
        *self = FifoIndex {
            last_sequence,
            ..FifoIndex::default()
        };
    }
}
