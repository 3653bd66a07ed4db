//! Delivery order of a standard queue. Messages without a MessageGroupId are served oldest
//! first; once messages carry group ids (a "fair queue"), receives take one message per group
//! in rotation, so a group with a large backlog cannot starve a quiet one.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::ids::MessageKey;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    Ungrouped,
    Group(Arc<str>),
}

/// Keys, oldest first. Most arrive in order (new sends) and are appended to a deque, which
/// costs a fraction of a tree insert and of its memory; the few that arrive out of order
/// (a visibility timeout ending) go to a tree beside it. A key removed from the middle of
/// the deque is only marked, and dropped when it reaches the front, so no removal shifts
/// the deque.
#[derive(Debug, Default)]
struct KeyQueue {
    in_order: VecDeque<MessageKey>,
    out_of_order: BTreeSet<MessageKey>,
    /// Keys still in `in_order` that were removed.
    removed: HashSet<MessageKey>,
}

impl KeyQueue {
    fn insert(&mut self, key: MessageKey) {
        if self.in_order.back().is_none_or(|last| *last < key) {
            self.in_order.push_back(key);
        } else {
            self.out_of_order.insert(key);
        }
    }

    fn remove(&mut self, key: &MessageKey) {
        if !self.out_of_order.remove(key) && self.in_order.binary_search(key).is_ok() {
            self.removed.insert(*key);
            self.drop_removed_front();
        }
    }

    fn pop_first(&mut self) -> Option<MessageKey> {
        self.drop_removed_front();
        let key = match (self.in_order.front(), self.out_of_order.first()) {
            (Some(a), Some(b)) if b < a => self.out_of_order.pop_first(),
            (Some(_), _) => self.in_order.pop_front(),
            (None, _) => self.out_of_order.pop_first(),
        };
        self.drop_removed_front();
        key
    }

    /// Drops marked keys from the front of the deque, and gives back the memory of a
    /// drained backlog.
    fn drop_removed_front(&mut self) {
        while let Some(front) = self.in_order.front() {
            if !self.removed.remove(front) {
                break;
            }
            self.in_order.pop_front();
        }
        let cap = self.in_order.capacity();
        if cap > 1024 && self.in_order.len() < cap / 4 {
            self.in_order.shrink_to(cap / 2);
        }
    }

    fn is_empty(&self) -> bool {
        self.in_order.len() == self.removed.len() && self.out_of_order.is_empty()
    }
}

#[derive(Debug, Default)]
struct Lane {
    visible: KeyQueue,
    in_rotation: bool,
}

/// Visible messages of a standard queue, by group.
#[derive(Debug, Default)]
pub(crate) struct FairIndex {
    ungrouped: Lane,
    groups: HashMap<Arc<str>, Lane>,
    rotation: VecDeque<Slot>,
}

impl FairIndex {
    fn lane(&mut self, slot: &Slot) -> Option<&mut Lane> {
        match slot {
            Slot::Ungrouped => Some(&mut self.ungrouped),
            Slot::Group(g) => self.groups.get_mut(g),
        }
    }

    /// A message became visible.
    pub(crate) fn insert(&mut self, key: MessageKey, group: Option<&Arc<str>>) {
        let slot = match group {
            None => Slot::Ungrouped,
            Some(g) => Slot::Group(Arc::clone(g)),
        };
        let lane = match &slot {
            Slot::Ungrouped => &mut self.ungrouped,
            Slot::Group(g) => self.groups.entry(Arc::clone(g)).or_default(),
        };
        lane.visible.insert(key);
        if !lane.in_rotation {
            lane.in_rotation = true;
            self.rotation.push_back(slot);
        }
    }

    /// A visible message stopped being visible (received elsewhere, deleted, expired).
    pub(crate) fn remove(&mut self, key: &MessageKey, group: Option<&Arc<str>>) {
        match group {
            None => {
                self.ungrouped.visible.remove(key);
            }
            Some(g) => {
                if let Some(lane) = self.groups.get_mut(g) {
                    lane.visible.remove(key);
                    // Lanes in rotation are dropped when the rotation reaches them.
                    if lane.visible.is_empty() && !lane.in_rotation {
                        self.groups.remove(g);
                    }
                }
            }
        }
    }

    /// Takes up to `n` visible messages, one per group in turn.
    pub(crate) fn take(&mut self, n: usize) -> Vec<MessageKey> {
        let mut out = Vec::with_capacity(n.min(16));
        while out.len() < n {
            let Some(slot) = self.rotation.pop_front() else {
                break;
            };
            let Some(lane) = self.lane(&slot) else {
                continue;
            };
            match lane.visible.pop_first() {
                Some(k) => {
                    out.push(k);
                    if lane.visible.is_empty() {
                        lane.in_rotation = false;
                    } else {
                        self.rotation.push_back(slot.clone());
                    }
                }
                None => lane.in_rotation = false,
            }
            if let Slot::Group(g) = &slot {
                if self.groups.get(g).is_some_and(|l| !l.in_rotation) {
                    self.groups.remove(g);
                }
            }
        }
        out
    }

    /// Forgets everything (purge).
    pub(crate) fn clear(&mut self) {
        *self = FairIndex::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(seq: u64) -> MessageKey {
        MessageKey { sent_ms: 0, seq }
    }

    #[test]
    fn groups_share_receives() {
        let mut f = FairIndex::default();
        let noisy: Arc<str> = Arc::from("noisy");
        let quiet: Arc<str> = Arc::from("quiet");
        for i in 0..100 {
            f.insert(k(i), Some(&noisy));
        }
        f.insert(k(100), Some(&quiet));
        let got = f.take(2);
        assert_eq!(got, vec![k(0), k(100)]);
        assert_eq!(f.take(3), vec![k(1), k(2), k(3)]);
    }

    #[test]
    fn key_queue_matches_a_sorted_set() {
        let mut q = KeyQueue::default();
        let mut model = BTreeSet::new();
        let mut rng = 0x2545f4914f6cdd1du64;
        let mut roll = |n: u64| crate::engine::random::next(&mut rng) % n;
        let mut next = 0;
        for _ in 0..50_000 {
            match roll(10) {
                // New keys, in order.
                0..=4 => {
                    next += 1;
                    q.insert(k(next));
                    model.insert(k(next));
                }
                // An old key comes back.
                5 => {
                    let key = k(roll(next + 1));
                    if model.insert(key) {
                        q.insert(key);
                    }
                }
                6 => {
                    let key = k(roll(next + 1));
                    q.remove(&key);
                    model.remove(&key);
                }
                _ => assert_eq!(q.pop_first(), model.pop_first()),
            }
            assert_eq!(q.is_empty(), model.is_empty());
        }
        while let Some(key) = model.pop_first() {
            assert_eq!(q.pop_first(), Some(key));
        }
        assert!(q.is_empty());
    }

    #[test]
    fn ungrouped_is_oldest_first_and_removal_works() {
        let mut f = FairIndex::default();
        for i in [3, 1, 2] {
            f.insert(k(i), None);
        }
        f.remove(&k(1), None);
        assert_eq!(f.take(10), vec![k(2), k(3)]);
        assert!(f.take(1).is_empty());
        let g: Arc<str> = Arc::from("g");
        f.insert(k(9), Some(&g));
        f.remove(&k(9), Some(&g));
        assert!(f.take(1).is_empty());
        assert!(f.groups.is_empty());
    }
}
