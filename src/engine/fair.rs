//! Delivery order of a standard queue. Messages without a MessageGroupId are served oldest
//! first; once messages carry group ids (a "fair queue"), receives take one message per group
//! in rotation, so a group with a large backlog cannot starve a quiet one.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use super::queue::MessageKey;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    Ungrouped,
    Group(Arc<str>),
}

#[derive(Debug, Default)]
struct Lane {
    visible: BTreeSet<MessageKey>,
    in_rotation: bool,
}

/// Visible messages of a standard queue, by group.
#[derive(Debug, Default)]
pub struct FairIndex {
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
    pub fn insert(&mut self, key: MessageKey, group: Option<&Arc<str>>) {
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
    pub fn remove(&mut self, key: &MessageKey, group: Option<&Arc<str>>) {
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
    pub fn take(&mut self, n: usize) -> Vec<MessageKey> {
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
    pub fn clear(&mut self) {
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
