//! How records become log messages and back: consecutive records go out as one message
//! (a [`Group`]) when they fit, since JetStream's cost is per message, not per byte; a
//! log message the writer kept is remembered as an [`Indexed`] entry.

use super::super::packed::{self, Packed};
use super::super::Lsn;

/// Most bytes of records grouped into one message: under NATS's default `max_payload`
/// (1 MiB), so a server left at its defaults takes every group. A larger record goes alone.
const MAX_GROUP_BYTES: usize = 512 << 10;

/// Consecutive records published as one log message: one record as it is, several framed
/// as (4-byte little-endian length, bytes) each, with [`COUNT`] saying how many; then
/// compressed when that pays ([`packed`]).
pub(super) struct Group {
    /// The first record's position; the others follow it.
    pub(super) first: Lsn,
    pub(super) count: u64,
    /// The records' bytes before compression.
    pub(super) raw_bytes: u64,
    pub(super) payload: Packed,
}

impl Group {
    /// `records` (in position order) as groups of at most [`MAX_GROUP_BYTES`], compressed
    /// if `compress` ([`packed::pack`]).
    pub(super) fn all(records: Vec<(Lsn, Vec<u8>)>, compress: bool) -> Vec<Group> {
        let mut groups = Vec::new();
        let mut open: Vec<(Lsn, Vec<u8>)> = Vec::new();
        let mut size = 0;
        for (lsn, record) in records {
            if !open.is_empty() && size + 4 + record.len() > MAX_GROUP_BYTES {
                groups.push(Group::of(std::mem::take(&mut open), compress));
                size = 0;
            }
            size += 4 + record.len();
            open.push((lsn, record));
        }
        if !open.is_empty() {
            groups.push(Group::of(open, compress));
        }
        groups
    }

    pub(super) fn of(mut records: Vec<(Lsn, Vec<u8>)>, compress: bool) -> Group {
        let first = records[0].0;
        let count = records.len() as u64;
        let raw = if records.len() == 1 {
            records.pop().expect("one record").1
        } else {
            let len = records.iter().map(|(_, r)| 4 + r.len()).sum();
            let mut raw = Vec::with_capacity(len);
            for (_, r) in &records {
                raw.extend_from_slice(&(r.len() as u32).to_le_bytes());
                raw.extend_from_slice(r);
            }
            raw
        };
        Group {
            first,
            count,
            raw_bytes: raw.len() as u64,
            payload: packed::pack(raw, compress),
        }
    }

    /// The records of a log message that holds `count` of them; `None` if the framing does
    /// not add up (the message is not what this writer publishes).
    pub(super) fn split(payload: &[u8], count: u64) -> Option<Vec<Vec<u8>>> {
        let mut records = Vec::with_capacity(count.min(1 << 16) as usize);
        let mut rest = payload;
        while !rest.is_empty() {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let len = u32::from_le_bytes(*len) as usize;
            if tail.len() < len {
                return None;
            }
            records.push(tail[..len].to_vec());
            rest = &tail[len..];
        }
        (records.len() as u64 == count).then_some(records)
    }
}

/// A log message as the writer remembers it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Indexed {
    pub(super) seq: u64,
    pub(super) bytes: u64,
    pub(super) count: u64,
}

impl Indexed {
    pub(super) fn of(seq: u64, group: &Group) -> Indexed {
        Indexed {
            seq,
            bytes: group.raw_bytes,
            count: group.count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_that_does_not_add_up_is_refused() {
        let group = Group::of(
            vec![(7, b"ab".to_vec()), (8, b"".to_vec()), (9, b"xyz".to_vec())],
            true,
        );
        assert_eq!(group.first, 7);
        let raw = packed::unpack(group.payload.codec, group.payload.body.clone(), 1 << 20).unwrap();
        let records = Group::split(&raw, 3).unwrap();
        assert_eq!(records, vec![b"ab".to_vec(), Vec::new(), b"xyz".to_vec()]);
        assert!(Group::split(&raw, 2).is_none());
        assert!(Group::split(&raw[..raw.len() - 1], 3).is_none());
        // Large records are not grouped past the cap.
        let big = vec![0u8; MAX_GROUP_BYTES / 2];
        let groups = Group::all((0..5).map(|i| (i, big.clone())).collect(), true);
        assert_eq!(
            groups.iter().map(|g| g.count).collect::<Vec<_>>(),
            [1, 1, 1, 1, 1]
        );
    }
}
