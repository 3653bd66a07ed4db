//! The message slab: the messages of one queue, found by their arrival number (`seq`).
//!
//! Every message a queue takes in gets the next `seq`, so the store is an array indexed by
//! `seq - base`, cut into chunks of [`CHUNK`] slots: lookups and appends are O(1) and a slot
//! costs one `StoredMessage`, with none of a search tree's half-empty nodes. Removing a
//! message empties its slot; chunks that empty out at the front are dropped, and an older
//! chunk that falls below half full is rewritten as a sorted list of its survivors, so a
//! few long-lived messages (a consumer that never deletes) cannot pin whole chunks.

use std::collections::VecDeque;

use super::ids::MessageKey;
use super::message::StoredMessage;

use super::memory::{charge as add_stored, release as sub_stored};

/// Slots per chunk.
const CHUNK: usize = 1024;

#[derive(Debug)]
enum Chunk {
    /// One slot per `seq` of the chunk's range, from its start; only the newest chunk grows.
    Dense {
        slots: Vec<Option<StoredMessage>>,
        live: usize,
        /// No message is stored before this slot.
        head: usize,
    },
    /// The survivors of an older chunk, sorted by offset.
    Sparse(Vec<(u16, StoredMessage)>),
}

impl Chunk {
    fn live(&self) -> usize {
        match self {
            Chunk::Dense { live, .. } => *live,
            Chunk::Sparse(v) => v.len(),
        }
    }

    fn get(&self, off: usize) -> Option<&StoredMessage> {
        match self {
            Chunk::Dense { slots, .. } => slots.get(off)?.as_ref(),
            Chunk::Sparse(v) => {
                let i = v.binary_search_by_key(&(off as u16), |(o, _)| *o).ok()?;
                Some(&v[i].1)
            }
        }
    }

    fn get_mut(&mut self, off: usize) -> Option<&mut StoredMessage> {
        match self {
            Chunk::Dense { slots, .. } => slots.get_mut(off)?.as_mut(),
            Chunk::Sparse(v) => {
                let i = v.binary_search_by_key(&(off as u16), |(o, _)| *o).ok()?;
                Some(&mut v[i].1)
            }
        }
    }

    fn take(&mut self, off: usize) -> Option<StoredMessage> {
        match self {
            Chunk::Dense { slots, live, head } => {
                let m = slots.get_mut(off)?.take()?;
                *live -= 1;
                if off == *head {
                    while *head < slots.len() && slots[*head].is_none() {
                        *head += 1;
                    }
                }
                Some(m)
            }
            Chunk::Sparse(v) => {
                let i = v.binary_search_by_key(&(off as u16), |(o, _)| *o).ok()?;
                let (_, m) = v.remove(i);
                if v.len() < v.capacity() / 4 {
                    v.shrink_to_fit();
                }
                Some(m)
            }
        }
    }

    /// Rewrites a full-length chunk that is less than half used as a list of survivors.
    fn compact(&mut self) {
        if let Chunk::Dense { slots, live, .. } = self {
            if slots.len() == CHUNK && *live < CHUNK / 2 {
                let survivors = std::mem::take(slots)
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, m)| Some((i as u16, m?)))
                    .collect();
                *self = Chunk::Sparse(survivors);
            }
        }
    }

    fn first(&self) -> Option<(usize, &StoredMessage)> {
        match self {
            Chunk::Dense { slots, head, .. } => {
                let m = slots.get(*head)?.as_ref()?;
                Some((*head, m))
            }
            Chunk::Sparse(v) => v.first().map(|(o, m)| (*o as usize, m)),
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = (usize, &StoredMessage)> + '_> {
        match self {
            Chunk::Dense { slots, head, .. } => Box::new(
                slots
                    .iter()
                    .enumerate()
                    .skip(*head)
                    .filter_map(|(i, m)| Some((i, m.as_ref()?))),
            ),
            Chunk::Sparse(v) => Box::new(v.iter().map(|(o, m)| (*o as usize, m))),
        }
    }
}

/// The stored messages of a queue; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct MessageSlab {
    chunks: VecDeque<Chunk>,
    /// The `seq` of the first slot of `chunks[0]`.
    base: u64,
    /// The `seq` the next message gets.
    next: u64,
    len: usize,
    /// This slab's share of [`STORED_BYTES`].
    bytes: u64,
}

impl Drop for MessageSlab {
    fn drop(&mut self) {
        sub_stored(self.bytes);
    }
}

impl MessageSlab {
    /// The `seq` the next pushed message gets.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next
    }

    /// How many messages are stored.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether no message is stored.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the stored messages, as [`StoredMessage::footprint`] counts them.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    fn locate(&self, key: &MessageKey) -> Option<(usize, usize)> {
        if key.seq < self.base || key.seq >= self.next {
            return None;
        }
        let d = (key.seq - self.base) as usize;
        Some((d / CHUNK, d % CHUNK))
    }

    /// Stores a message under `key`, which must carry [`MessageSlab::next_seq`] and the message's
    /// `enqueued_ms`.
    pub(crate) fn push(&mut self, key: MessageKey, msg: StoredMessage) {
        debug_assert_eq!(key.seq, self.next);
        debug_assert_eq!(key.sent_ms, msg.enqueued_ms);
        let d = (self.next - self.base) as usize;
        if d / CHUNK == self.chunks.len() {
            // A queue that filled a chunk will likely fill the next: take it whole rather
            // than regrow it ten times. A small queue's first chunk grows as needed.
            let capacity = if self.chunks.is_empty() { 0 } else { CHUNK };
            self.chunks.push_back(Chunk::Dense {
                slots: Vec::with_capacity(capacity),
                live: 0,
                head: 0,
            });
        }
        let Some(Chunk::Dense { slots, live, .. }) = self.chunks.back_mut() else {
            unreachable!("the newest chunk is always dense");
        };
        let size = msg.footprint();
        self.bytes += size;
        add_stored(size);
        slots.push(Some(msg));
        *live += 1;
        self.next += 1;
        self.len += 1;
    }

    /// Leaves the `seq`s below `seq` unused, so the next push gets `seq` (recovery restores
    /// messages under their original keys, with gaps where others were deleted).
    pub(crate) fn skip_to(&mut self, seq: u64) {
        if seq <= self.next {
            return;
        }
        if self.len == 0 {
            self.chunks.clear();
            self.base = seq;
            self.next = seq;
            return;
        }
        while self.next < seq {
            let d = (self.next - self.base) as usize;
            if d / CHUNK == self.chunks.len() {
                if seq - self.next >= CHUNK as u64 {
                    // A whole chunk of gaps costs an empty list.
                    self.chunks.push_back(Chunk::Sparse(Vec::new()));
                    self.next += CHUNK as u64;
                    continue;
                }
                self.chunks.push_back(Chunk::Dense {
                    slots: Vec::new(),
                    live: 0,
                    head: 0,
                });
            }
            let Some(Chunk::Dense { slots, live, head }) = self.chunks.back_mut() else {
                unreachable!("the newest chunk is always dense");
            };
            let n = (CHUNK - d % CHUNK).min((seq - self.next) as usize);
            slots.extend(std::iter::repeat_with(|| None).take(n));
            if *live == 0 {
                *head = slots.len();
            }
            self.next += n as u64;
        }
        let last = self.chunks.len() - 1;
        for c in self.chunks.range_mut(..last) {
            c.compact();
        }
    }

    /// Where the message stored under `key` is, if it is still there (the slot must hold
    /// the message that entered at `key.sent_ms`, not just any message).
    fn find(&self, key: &MessageKey) -> Option<(usize, usize)> {
        let (c, off) = self.locate(key)?;
        let m = self.chunks[c].get(off)?;
        (m.enqueued_ms == key.sent_ms).then_some((c, off))
    }

    /// The message stored under `key`, if it is still there.
    pub(crate) fn get(&self, key: &MessageKey) -> Option<&StoredMessage> {
        let (c, off) = self.find(key)?;
        self.chunks[c].get(off)
    }

    /// Whether the message under `key` is stored and visible.
    pub(crate) fn is_visible(&self, key: &MessageKey) -> bool {
        self.get(key)
            .is_some_and(|m| m.delivery == super::message::Delivery::Visible)
    }

    /// The message stored under `key`, to change its delivery state.
    pub(crate) fn get_mut(&mut self, key: &MessageKey) -> Option<&mut StoredMessage> {
        let (c, off) = self.find(key)?;
        self.chunks[c].get_mut(off)
    }

    /// Takes the message stored under `key` out.
    pub(crate) fn remove(&mut self, key: &MessageKey) -> Option<StoredMessage> {
        let (c, off) = self.find(key)?;
        let m = self.chunks[c].take(off)?;
        self.len -= 1;
        let size = m.footprint();
        self.bytes -= size;
        sub_stored(size);
        if c + 1 < self.chunks.len() {
            self.chunks[c].compact();
        }
        while self.chunks.len() > 1 && self.chunks[0].live() == 0 {
            self.chunks.pop_front();
            self.base += CHUNK as u64;
        }
        Some(m)
    }

    /// The earliest arrival still stored. O(1): the front chunk is never empty while
    /// anything is stored, and a dense chunk knows its first survivor.
    pub(crate) fn first(&self) -> Option<(MessageKey, &StoredMessage)> {
        let (off, m) = self.chunks.front()?.first()?;
        Some((Self::key(self.base + off as u64, m), m))
    }

    fn key(seq: u64, m: &StoredMessage) -> MessageKey {
        MessageKey {
            sent_ms: m.enqueued_ms,
            seq,
        }
    }

    /// Every stored message, in arrival order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (MessageKey, &StoredMessage)> + '_ {
        self.chunks.iter().enumerate().flat_map(move |(c, chunk)| {
            let start = self.base + (c * CHUNK) as u64;
            chunk
                .iter()
                .map(move |(off, m)| (Self::key(start + off as u64, m), m))
        })
    }

    /// Removes everything; later messages still get new `seq`s, so old keys stay dead.
    pub(crate) fn clear(&mut self) {
        self.chunks.clear();
        self.base = self.next;
        self.len = 0;
        sub_stored(std::mem::take(&mut self.bytes));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::engine::digest::Digest16;
    use crate::engine::message::{Delivery, Payload, PayloadExtra};

    fn msg(enqueued_ms: u64) -> StoredMessage {
        StoredMessage {
            payload: Arc::new(Payload::new(
                uuid::Uuid::nil(),
                String::new(),
                Digest16([0; 16]),
                Arc::from(""),
                None,
                PayloadExtra::default(),
            )),
            delivery: Delivery::Visible,
            enqueued_ms,
            receive_count: 0,
            first_receive_ms: None,
            last_receive_ms: 0,
            redelivered: false,
        }
    }

    fn push(s: &mut MessageSlab, ms: u64) -> MessageKey {
        let key = MessageKey {
            sent_ms: ms,
            seq: s.next_seq(),
        };
        s.push(key, msg(ms));
        key
    }

    #[test]
    fn skipping_leaves_gaps_and_keeps_lookups_and_order() {
        for gap in [1u64, 5, 1023, 1024, 1025, 5000] {
            let mut s = MessageSlab::default();
            let a = push(&mut s, 1);
            s.skip_to(s.next_seq() + gap);
            let b = push(&mut s, 2);
            assert_eq!(b.seq, a.seq + 1 + gap);
            assert!(s.get(&a).is_some() && s.get(&b).is_some(), "gap {gap}");
            let keys: Vec<MessageKey> = s.iter().map(|(k, _)| k).collect();
            assert_eq!(keys, vec![a, b]);
            assert!(s.remove(&a).is_some());
            assert_eq!(s.first().map(|(k, _)| k), Some(b), "gap {gap}");
            assert!(s.remove(&b).is_some());
            assert_eq!(s.len(), 0);
            s.skip_to(s.next_seq() + gap);
            let c = push(&mut s, 3);
            assert_eq!(s.first().map(|(k, _)| k), Some(c));
        }
    }

    #[test]
    fn lookups_check_the_whole_key() {
        let mut s = MessageSlab::default();
        let k = push(&mut s, 7);
        assert!(s.get(&k).is_some());
        let wrong = MessageKey { sent_ms: 8, ..k };
        assert!(s.get(&wrong).is_none());
        assert!(s.remove(&wrong).is_none());
        assert_eq!(s.len(), 1);
        assert!(s.remove(&k).is_some());
        assert!(s.remove(&k).is_none());
        assert!(s.is_empty());
    }

    #[test]
    fn matches_a_map_under_random_removals() {
        let mut s = MessageSlab::default();
        let mut model = std::collections::BTreeMap::new();
        let mut rng = 0x9e3779b97f4a7c15u64;
        let mut roll = |n: u64| crate::engine::random::next(&mut rng) % n;
        for round in 0..20_000u64 {
            if roll(3) > 0 || model.is_empty() {
                let k = push(&mut s, round);
                model.insert(k.seq, k);
            } else {
                // Mostly the oldest, as consumers do; sometimes anywhere.
                let pick = if roll(4) == 0 {
                    let i = roll(model.len() as u64) as usize;
                    *model.keys().nth(i).unwrap()
                } else {
                    *model.keys().next().unwrap()
                };
                let k = model.remove(&pick).unwrap();
                assert!(s.remove(&k).is_some());
            }
            if round % 997 == 0 {
                let got: Vec<u64> = s.iter().map(|(k, _)| k.seq).collect();
                let want: Vec<u64> = model.keys().copied().collect();
                assert_eq!(got, want);
                assert_eq!(s.first().map(|(k, _)| k.seq), want.first().copied());
            }
        }
        assert_eq!(s.len(), model.len());
        for k in model.values() {
            assert!(s.get(k).is_some());
        }
    }

    #[test]
    fn a_few_survivors_do_not_pin_whole_chunks() {
        let mut s = MessageSlab::default();
        let keys: Vec<MessageKey> = (0..10 * CHUNK as u64).map(|i| push(&mut s, i)).collect();
        // Keep one message in every hundred.
        for (i, k) in keys.iter().enumerate() {
            if i % 100 != 0 {
                s.remove(k);
            }
        }
        let sparse = s
            .chunks
            .iter()
            .filter(|c| matches!(c, Chunk::Sparse(_)))
            .count();
        assert_eq!(sparse, s.chunks.len() - 1);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(s.get(k).is_some(), i % 100 == 0);
        }
    }

    #[test]
    fn clear_keeps_old_keys_dead() {
        let mut s = MessageSlab::default();
        let old = push(&mut s, 1);
        s.clear();
        assert!(s.get(&old).is_none());
        let new = push(&mut s, 1);
        assert_ne!(old.seq, new.seq);
        assert_eq!(s.first().map(|(k, _)| k), Some(new));
    }
}
